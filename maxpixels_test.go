package pipe

import (
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// TestCacheFingerprintMaxPixels: decode's max_pixels decides which images
// a cache after it holds as skipped, so a limit other than the default
// changes the fingerprint; the default, given or not, leaves it as it was
// before the limit existed.
func TestCacheFingerprintMaxPixels(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	for _, name := range []string{"x.png", "y.png"} {
		f, err := os.Create(filepath.Join(root, "a", name))
		if err != nil {
			t.Fatal(err)
		}
		png.Encode(f, image.NewGray(image.Rect(0, 0, 12, 10)))
		f.Close()
	}
	folder, err := source.OpenFolder(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	cc, _ := transform.CenterCrop(8)
	fp := func(maxPixels int) string {
		p := mustNew(t, Source(folder), Decode(DecodeConfig{MaxPixels: maxPixels}), Map(cc),
			Cache(CacheConfig{Dir: t.TempDir()}), Batching(2, false), ToTensor(transform.NCHW, transform.Uint8))
		return p.CacheInfo().Fingerprint
	}
	base := fp(0)
	if fp(transform.DefaultMaxPixels) != base {
		t.Error("max_pixels given as its default changed the fingerprint")
	}
	if fp(100) == base {
		t.Error("max_pixels=100 kept the default's fingerprint")
	}
}
