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
	for s, want := range map[string]bool{"s3://b/k": true, "HTTPS://h/x": true, "http://h": true, "data/x.tar": false, "s3:/b": true, "S3:x": true, "": false} {
		if IsURL(s) != want {
			t.Errorf("IsURL(%q) = %v", s, !want)
		}
	}
}

// TestCheckURL: a malformed URL is ErrBadURL saying what is wrong, found
// before any request (before, s3:/x was a local path and s3:///key was
// retried for 10 s as "retries exhausted … bad URL").
func TestCheckURL(t *testing.T) {
	for _, c := range []struct{ u, holds string }{
		{"s3:/x", "s3://bucket/key"},
		{"s3:///key", "no bucket"},
		{"s3://b/k", "bucket name"},
		{"s3://bad..name/k", "bucket name"},
		{"s3://bucket", "no key"},
		{"s3://bucket/", "no key"},
		{"http:/x", "no host"},
		{"https:///x", "no host"},
		{"https://u:hunter2@h/%zz", "invalid URL escape"},
	} {
		err := checkURL(c.u, true)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.holds) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; want ErrBadURL holding %q, the password redacted", c.u, err, c.holds)
		}
	}
	for _, u := range []string{"s3://bucket/k", "S3://bucket/a/b.tar", "http://h/x", "https://h:1/x?y=1"} {
		if err := checkURL(u, true); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"s3://bucket/shard-{000..009}.tar", "s3://bucket/shard-{000..009}.tar"},
		{"/data/train", "/data/train"},
		{"https://user:hunter2@host/a.tar", "https://user:REDACTED@host/a.tar"},
		{"https://ghp_t0k3n@host/a.tar", "https://REDACTED@host/a.tar"},
		{"https://u:p@ss@host/x?y=1", "https://u:REDACTED@host/x?y=1"},
		{"http://host/a.tar?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abcdef&X-Amz-Expires=60",
			"http://host/a.tar?X-Amz-Algorithm=AWS4&X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Expires=60"},
		{"https://acct.blob.core.windows.net/c/a.tar?sv=2020&sig=s3cr3t#frag", "https://acct.blob.core.windows.net/c/a.tar?sv=2020&sig=REDACTED#frag"},
		{"https://h/p?token=t0k&x=1", "https://h/p?token=REDACTED&x=1"},
		{"https://h/p?flag", "https://h/p?flag"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestObjectKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"s3://bucket/a.tar?x", "s3://bucket/a.tar?x"},
		{"https://h/a.tar", "https://h/a.tar"},
		{"https://h/a.tar?X-Amz-Algorithm=A&X-Amz-Date=20261127T000000Z&X-Amz-Credential=K%2F1&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=s", "https://h/a.tar"},
		{"https://h/a.tar?X-Goog-Date=1&X-Goog-Signature=s#frag", "https://h/a.tar"},
		{"https://acct.blob.core.windows.net/c/a.tar?sv=2020&se=2026&sp=r&sig=s", "https://acct.blob.core.windows.net/c/a.tar"},
		{"https://h/get?key=a&Signature=s&Expires=1", "https://h/get?key=a"},
		{"https://h/get?key=b", "https://h/get?key=b"},
	} {
		if got := ObjectKey(c.in); got != c.want {
			t.Errorf("ObjectKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestParseSizeRefusesASuffixAlone: "B" and "iB" are no size (they
// indexed before the string's start).
func TestParseSizeRefusesASuffixAlone(t *testing.T) {
	for _, s := range []string{"B", "iB", " b ", "K"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) took it for a size", s)
		}
	}
}
