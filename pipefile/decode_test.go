package pipefile

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// TestDecodeMaxPixels: decode's pixel limit reaches the Compiled config, the
// canonical line writes it (the default too), and a negative limit from Go
// is a Compile error naming the parameter.
func TestDecodeMaxPixels(t *testing.T) {
	src, err := source.NewSynthetic(20, source.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		in        int
		line      string
		maxPixels int
	}{
		{0, "decode reduce=true max_pixels=67108864", transform.DefaultMaxPixels},
		{1000, "decode reduce=true max_pixels=1000", 1000},
	} {
		s := Decode(DecodeConfig{MaxPixels: c.in})
		if s.String() != c.line {
			t.Errorf("MaxPixels %d: line %q, want %q", c.in, s.String(), c.line)
		}
		cfg, err := Compile([]Stage{Source(src), s, Batching(5, false)})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxPixels != c.maxPixels || !cfg.Decode {
			t.Errorf("MaxPixels %d: Config.MaxPixels %d, want %d", c.in, cfg.MaxPixels, c.maxPixels)
		}
	}
	_, err = Compile([]Stage{Source(src), Decode(DecodeConfig{MaxPixels: -5}), Batching(5, false)})
	var se *StageError
	if !errors.As(err, &se) || se.Index != 1 || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "max_pixels=-5") {
		t.Errorf("MaxPixels -5: %v", err)
	}
}
