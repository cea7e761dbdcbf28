package pipe

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipefeed/pipe/source"
)

// urlSource is a synthetic source that names itself by a URL, as a source
// of the program's own reading a store would, secrets and all.
type urlSource struct {
	*source.Synthetic
	url string
}

func (s urlSource) Info() source.Info {
	info := s.Synthetic.Info()
	info.Identity = "objects " + s.url
	return info
}

func (s urlSource) Fingerprint() (string, error) { return "objects " + s.url + " size=1 etag=e", nil }

// TestCacheRedactsSourceURLs: the augmentation cache's fingerprint and
// the description it stores are made from the source's URL with its
// secrets redacted, so no file of the cache holds them, and a presigned
// URL whose signature rotates finds the same entries.
func TestCacheRedactsSourceURLs(t *testing.T) {
	dir := t.TempDir()
	cfg := &CacheConfig{Dir: dir, Epochs: 1}
	fp := func(url string) string {
		t.Helper()
		p := mustNew(t, cached(urlSource{synth(t, 100).(*source.Synthetic), url}, cfg)...)
		defer p.Close()
		if _, err := p.Run(t.Context(), RunOptions{}); err != nil {
			t.Fatal(err)
		}
		if s := p.Summary().Source; !bytes.Contains([]byte(s), []byte("REDACTED")) {
			t.Errorf("the summary's source %q is not redacted", s)
		}
		return p.CacheInfo().Fingerprint
	}
	a := fp("https://me:SECRET-pw@h/data?X-Amz-Signature=SECRET-sig1")
	b := fp("https://me:SECRET-pw@h/data?X-Amz-Signature=SECRET-sig2")
	if a != b {
		t.Errorf("a rotated signature changed the cache's fingerprint: %s, then %s", a, b)
	}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(path)
		if bytes.Contains(data, []byte("SECRET")) {
			t.Errorf("%s holds a secret", path)
		}
		return err
	})
	if err != nil || files == 0 {
		t.Fatalf("%d files in the cache: %v", files, err)
	}
}
