package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadAndUpdate: cases are read with their lines; -update rewrites
// each output from the function and leaves inputs, comments included, as
// they were; a file without "----" in a case is an error naming its line.
func TestReadAndUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.txt")
	text := "# a comment\nab\n----\nAB\n====\ncd\nef\n----\nstale\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := Read(path)
	if err != nil || len(cases) != 2 || cases[0].Line != 1 || cases[1].Line != 6 || cases[1].Input != "cd\nef" || Uncommented(cases[0].Input) != "ab" {
		t.Fatalf("%+v, %v", cases, err)
	}
	flag.Set("update", "true")
	defer flag.Set("update", "false")
	Run(t, path, func(t *testing.T, c Case) string { return strings.ToUpper(Uncommented(c.Input)) })
	b, _ := os.ReadFile(path)
	if want := "# a comment\nab\n----\nAB\n====\ncd\nef\n----\nCD\nEF\n"; string(b) != want {
		t.Fatalf("updated file:\n%s\nwant:\n%s", b, want)
	}
	os.WriteFile(path, []byte("a\n----\nb\n====\nno output\n"), 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path+":5:") {
		t.Fatalf("a case without ----: %v", err)
	}
}
