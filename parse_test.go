package pipe

import (
	"context"
	"testing"

	"github.com/pipefeed/pipe/internal/golden"
	"github.com/pipefeed/pipe/pipefile"
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

// TestParseData runs the cases in testdata/parse.txt: a new case of the
// file format, from parsing to the built pipeline's canonical lines or its
// error, is a few lines of text there (-update rewrites their outputs).
func TestParseData(t *testing.T) {
	golden.Run(t, "testdata/parse.txt", func(t *testing.T, c golden.Case) string {
		return parseResult(c.Input)
	})
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
