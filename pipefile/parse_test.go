package pipefile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/golden"
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

func TestExpand(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                  "plain",
		"${DATA}/x":              "/data/x",
		"${MISSING:-fallback}":   "fallback",
		"${EMPTY:-used}":         "used",
		"${DATA:-unused}${DATA}": "/data/data",
		"a${EMPTY}b":             "ab",
		"${DATA:?set DATA}/x":    "/data/x",
	} {
		got, err := (&expander{env: testEnv, left: maxExpanded}).expand(in)
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"${", "${}", "${A B}", "${NOPE}", "${:?x}", "${A:?x:-y}"} {
		if _, err := (&expander{env: testEnv, left: maxExpanded}).expand(bad); err == nil {
			t.Errorf("expand(%q) gave no error", bad)
		}
	}
	for _, in := range []string{"${NOPE:?point NOPE at the images}", "${EMPTY:?point NOPE at the images}"} {
		_, err := (&expander{env: testEnv, left: maxExpanded}).expand(in)
		if name, _, _ := strings.Cut(in[2:], ":"); err == nil || !strings.Contains(err.Error(), "environment variable "+name+" is not set: point NOPE at the images") {
			t.Errorf("expand(%q): %v", in, err)
		}
	}
}

// TestExamplesParse: every example parses, and its stages are in an order
// and with parameters that Compile accepts, before any data is read.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.pipe")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// The examples that need a user's data say so when its variable
		// is unset; here they get a path (their data is not read).
		env := func(v string) (string, bool) {
			switch v {
			case "IMAGENET", "TFRECORD", "SHARDS":
				return "/data/" + v, true
			case "DEVICES":
				// cifar-gpu.pipe's GPUs need the cuda build and a GPU.
				return "cpu:2", true
			}
			return testEnv(v)
		}
		f, err := Parse(name, string(b), env)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		stages, err := f.Stages()
		if err == nil {
			_, err = Compile(stages)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParse checks that no input crashes the parser and that every error
// carries a position.
func FuzzParse(f *testing.F) {
	// The root's end-to-end cases, where this runs in a checkout.
	cases, _ := golden.Read("../testdata/parse.txt")
	for _, c := range cases {
		f.Add(c.Input)
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
		stages, err := file.Stages()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.pipe:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if _, err := Compile(stages); err != nil {
			var se *StageError
			if !errors.As(err, &se) && !errors.Is(err, ErrConfig) {
				t.Fatalf("order error of the wrong kind: %v", err)
			}
			return
		}
		opened, err := file.Open(context.Background(), stages, nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.pipe:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		Close(opened)
	})
}

// TestHugeTokens: a 60 KB unknown word is echoed cut short, with its length
// (the suggestion no longer computes an edit distance against names whose
// length differs by more than the distance it accepts: 5 MB took 1.6 s);
// a line beyond the limit is refused whole.
func TestHugeTokens(t *testing.T) {
	word := strings.Repeat("x", 60<<10)
	for _, src := range []string{
		word + "\n",
		"source synthetic\nbatch 8 " + word + "=1\n",
		"source synthetic\nflip " + word + "\n",
		"source synthetic\nflip p=" + word + "\n",
		"source synthetic\nbatch " + word + "\n",
	} {
		_, err := Parse("x.pipe", src, testEnv)
		if err == nil {
			t.Fatalf("%.40q: no error", src)
		}
		if len(err.Error()) > 400 || !strings.Contains(err.Error(), fmt.Sprintf("(%d bytes)", len(word))) {
			t.Errorf("%.40q: error of %d bytes: %.300s", src, len(err.Error()), err)
		}
	}
	_, err := Parse("x.pipe", "source synthetic\n# "+strings.Repeat("y", 500<<10)+"\nbatch 8\n", testEnv)
	if err == nil || !strings.Contains(err.Error(), "x.pipe:2:1: the line is 512002 bytes long; a .pipe line is at most 65536") {
		t.Errorf("500 KB line: %v", err)
	}
}

// TestBounds: what is not a .pipe file, or expands without end, is refused
// with its place and the bound, without taking the memory it asks for (the
// parser read /dev/zero until it died, split 50 MB of newlines into 940 MB
// of lines, and expanded 12,000 references to a 100 KB variable into
// 5.6 GB).
func TestBounds(t *testing.T) {
	big := strings.Repeat("v", 100<<10)
	env := func(name string) (string, bool) {
		switch name {
		case "BIG":
			return big, true
		case "K":
			return strings.Repeat("k", 30<<10), true
		}
		return testEnv(name)
	}
	spread := "source synthetic\n" + strings.Repeat("cache dir=\"${K}\"\n", 200)
	for _, c := range []struct{ name, src, want string }{
		{"2 MB", "source synthetic\n" + strings.Repeat("#\n", 1<<20), "x.pipe:1:1: the file is over 1048576 bytes"},
		{"lines", "source synthetic\n" + strings.Repeat("\n", 20000), "x.pipe:10001:1: a .pipe file is at most 10000 lines"},
		{"one reference", "source synthetic\nbatch size=${BIG}\n", "x.pipe:2:7: batch: size: the value expands to over 65536 bytes"},
		{"many references", "source cifar10 path=" + strings.Repeat("${BIG}", 10000) + "\n", "x.pipe:1:16: cifar10: path: the value expands"},
		{"spread", spread, "the file's values expand to over 4194304 bytes in all"},
	} {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, err := Parse("x.pipe", c.src, env)
		runtime.ReadMemStats(&ms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if alloc := ms.TotalAlloc - before; alloc > 64<<20 {
			t.Errorf("%s: parsing allocated %d MB", c.name, alloc>>20)
		}
	}
}
