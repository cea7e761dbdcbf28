package pipe

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/pipefile"
)

var update = flag.Bool("update", false, "rewrite the expected results in pipefile/testdata/parse.txt")

func testEnv(name string) (string, bool) {
	switch name {
	case "DATA":
		return "/data", true
	case "EMPTY":
		return "", true
	}
	return "", false
}

// TestParseData runs the cases in testdata/parse.txt: a new parser case is a
// few lines of text there.
func TestParseData(t *testing.T) {
	const path = "pipefile/testdata/parse.txt"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := strings.Split(string(b), "\n====\n")
	for i, c := range cases {
		src, want, ok := strings.Cut(c, "\n----\n")
		if !ok {
			t.Fatalf("case %d has no ----", i)
		}
		got := parseResult(src)
		if *update {
			cases[i] = src + "\n----\n" + strings.TrimSpace(got)
			continue
		}
		if strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("case %d:\n%s\ngot:\n%s\nwant:\n%s", i, src, got, want)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(cases, "\n====\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parseResult(src string) string {
	f, err := pipefile.Parse("x.pipe", src, testEnv)
	if err != nil {
		return err.Error()
	}
	p, err := loadFile(context.Background(), f)
	if err != nil {
		return err.Error()
	}
	defer p.Close()
	return p.String()
}
