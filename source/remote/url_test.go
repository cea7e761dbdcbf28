package remote

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestExpandBraces runs the cases of testdata/braces.txt: a pattern, then
// what it expands to, one name a line, or the error.
func TestExpandBraces(t *testing.T) {
	b, err := os.ReadFile("testdata/braces.txt")
	if err != nil {
		t.Fatal(err)
	}
	var cases [][]string
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case line == "":
			if len(cur) > 0 {
				cases = append(cases, cur)
			}
			cur = nil
		default:
			cur = append(cur, line)
		}
	}
	if len(cur) > 0 {
		cases = append(cases, cur)
	}
	for _, c := range cases {
		got, err := ExpandBraces(c[0])
		if want, ok := strings.CutPrefix(c[1], "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrBadURL) {
				t.Errorf("%s: error %v, want one holding %q", c[0], err, want)
			}
			continue
		}
		if err != nil || strings.Join(got, "\n") != strings.Join(c[1:], "\n") {
			t.Errorf("%s: %q, %v; want %q", c[0], got, err, c[1:])
		}
	}
}

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{"s3://b/k": true, "HTTPS://h/x": true, "http://h": true, "data/x.tar": false, "s3:/b": false, "": false} {
		if IsURL(s) != want {
			t.Errorf("IsURL(%q) = %v", s, !want)
		}
	}
}
