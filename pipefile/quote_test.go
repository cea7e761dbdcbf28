package pipefile

import "testing"

// TestQuoteRoundTrip: a value written by quote, quotes and spaces and '#'
// in it, parses back to itself, as canonical lines must.
func TestQuoteRoundTrip(t *testing.T) {
	for _, v := range []string{`a"b`, `"`, `""`, `x "y" z`, `#"`, `say "hi" # not a comment`, `plain`, ``} {
		f, err := Parse("q.pipe", "source image_folder path="+quote(v)+"\nbatch 1\n", testEnv)
		if err != nil {
			t.Fatalf("%q written as %s: %v", v, quote(v), err)
		}
		if got := f.Lines[0].Args.String("path"); got != v {
			t.Errorf("%q written as %s parses back as %q", v, quote(v), got)
		}
	}
}
