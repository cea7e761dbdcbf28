// Package golden runs data-driven test cases kept in text files, so that a
// new case is a few lines of text and a changed output is reviewed as a
// diff. A file is cases separated by lines "====": each case an input, a
// line "----", and the output expected. The input is the test's to read
// (comments included: a parser's input keeps its line numbers). With
// -update, the expected outputs are rewritten from what the tests returned.
package golden

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected outputs in data-driven test files (testdata/*.txt)")

const (
	caseSep = "\n====\n"
	wantSep = "\n----\n"
)

// Case is one case of a file.
type Case struct {
	Input string
	Want  string
	Line  int // of the input's first line in the file, for messages
}

// Read returns the cases of the file at path.
func Read(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cases []Case
	line := 1
	for i, text := range strings.Split(strings.TrimRight(string(b), "\n"), caseSep) {
		in, want, ok := strings.Cut(text, wantSep)
		if !ok {
			return nil, fmt.Errorf("%s:%d: case %d has no line \"----\"", path, line, i)
		}
		cases = append(cases, Case{Input: in, Want: want, Line: line})
		line += strings.Count(text, "\n") + 2
	}
	return cases, nil
}

// Run runs f on each case of the file at path, in order (cases may build
// on the ones before), as a subtest named by the case's line, and checks
// its output against the case's, ignoring surrounding space. With -update
// it rewrites the file with the outputs f returned instead.
func Run(t *testing.T, path string, f func(t *testing.T, c Case) string) {
	t.Helper()
	cases, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(cases))
	for i, c := range cases {
		t.Run(fmt.Sprintf("line%d", c.Line), func(t *testing.T) {
			got := strings.TrimSpace(f(t, c))
			texts[i] = c.Input + wantSep + got
			if !*update && got != strings.TrimSpace(c.Want) {
				t.Errorf("%s:%d:\n%s\ngot:\n%s\nwant:\n%s\n(go test -run '%s' -update rewrites the file)", path, c.Line, c.Input, got, strings.TrimSpace(c.Want), t.Name())
			}
		})
	}
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(texts, caseSep)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Uncommented is s without its lines that begin with "#", trimmed: the
// command of a case whose comments are not part of its input.
func Uncommented(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
