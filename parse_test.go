package pipe

import (
	"os"
	"strings"
	"testing"
)

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
	b, err := os.ReadFile("testdata/parse.txt")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range strings.Split(string(b), "\n====\n") {
		src, want, ok := strings.Cut(c, "\n----\n")
		if !ok {
			t.Fatalf("case %d has no ----", i)
		}
		got := parseResult(src)
		if strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("case %d:\n%s\ngot:\n%s\nwant:\n%s", i, src, got, want)
		}
	}
}

func parseResult(src string) string {
	f, err := Parse("x.pipe", src, testEnv)
	if err != nil {
		return err.Error()
	}
	p, err := f.Pipeline()
	if err != nil {
		return err.Error()
	}
	defer p.Close()
	return p.String()
}

func TestExpand(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                  "plain",
		"${DATA}/x":              "/data/x",
		"${MISSING:-fallback}":   "fallback",
		"${EMPTY:-used}":         "used",
		"${DATA:-unused}${DATA}": "/data/data",
		"a${EMPTY}b":             "ab",
	} {
		got, err := expand(in, testEnv)
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"${", "${}", "${A B}", "${NOPE}"} {
		if _, err := expand(bad, testEnv); err == nil {
			t.Errorf("expand(%q) gave no error", bad)
		}
	}
}

func TestExamplesParse(t *testing.T) {
	files := []string{"examples/quickstart.pipe", "examples/cifar.pipe", "examples/cifar-keras.pipe", "examples/imagenet.pipe", "examples/imagenet-cache.pipe", "examples/tfrecord.pipe", "examples/devices.pipe"}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(name, string(b), testEnv); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, err := Load("examples/quickstart.pipe")
	if err != nil {
		t.Fatalf("quickstart does not build: %v", err)
	}
	p.Close()
}

// FuzzParse checks that no input crashes the parser and that every error
// carries a position.
func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/parse.txt")
	for _, c := range strings.Split(string(b), "\n====\n") {
		src, _, _ := strings.Cut(c, "\n----\n")
		f.Add(src)
	}
	f.Add("source synthetic n=1\nbatch 1\n")
	f.Add("\"\x00#=${:-}")
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "cifar") || strings.Contains(src, "download") {
			return // sources that touch files or the network are not fuzzed here
		}
		file, err := Parse("f.pipe", src, testEnv)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.pipe:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		for _, l := range file.Lines {
			if l.Spec.Kind == "source" && l.Args.Int("n") > 100000 {
				return // large but valid synthetic sources are slow, not wrong
			}
		}
		p, err := file.Pipeline()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.pipe") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		p.Close()
	})
}
