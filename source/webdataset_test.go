package source

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestWebDatasetReal reads the real gzipped shard: 90 samples of a PNG and
// a .cls label each, labels 0..9.
func TestWebDatasetReal(t *testing.T) {
	shard := shareddata.Path(t, "webdataset/sample.tgz")
	w, err := OpenWebDataset(t.Context(), shard, WithIndexDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Len() != 90 || len(w.Info().Classes) != 10 || len(w.Corrupt()) != 0 {
		t.Fatalf("%d samples, %d classes, corrupt %v", w.Len(), len(w.Info().Classes), w.Corrupt())
	}
	var rec Record
	for i := range w.Len() {
		if err := w.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(rec.Enc, []byte("\x89PNG")) || rec.Label < 0 || rec.Label > 9 || !strings.HasSuffix(rec.Path, ".png") {
			t.Fatalf("sample %d: %s, label %d", i, rec.Path, rec.Label)
		}
	}
}

func writeTar(t *testing.T, path string, members map[string]string, order []string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range order {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(members[name])), Typeflag: tar.TypeReg})
		tw.Write([]byte(members[name]))
	}
	tw.Close()
	os.WriteFile(path, b.Bytes(), 0o644)
	return b.Bytes()
}

// TestWebDatasetBadShards: samples without an image or label, JSON labels,
// and a truncated member, each reported with the shard and sample.
func TestWebDatasetBadShards(t *testing.T) {
	dir := t.TempDir()
	png := "\x89PNG\r\n\x1a\nfake"
	members := map[string]string{
		"a/000.jpg": "\xff\xd8\xffjpeg", "a/000.cls": "3",
		"a/001.png": png, "a/001.json": `{"label": 7}`,
		"a/002.txt": "no image", "a/002.cls": "1",
		"a/003.png": png,
	}
	order := []string{"a/000.jpg", "a/000.cls", "a/001.png", "a/001.json", "a/002.txt", "a/002.cls", "a/003.png"}
	writeTar(t, filepath.Join(dir, "s0.tar"), members, order)
	w, err := OpenWebDataset(t.Context(), filepath.Join(dir, "s0.tar"), WithIndexDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var rec Record
	if w.Len() != 4 || w.Read(0, &rec) != nil || rec.Label != 3 || w.Read(1, &rec) != nil || rec.Label != 7 {
		t.Fatalf("%d samples; sample 1 label %d", w.Len(), rec.Label)
	}
	c := w.Corrupt()
	if len(c) != 2 || !errors.Is(c[0], ErrUnknownFormat) || c[0].Index != 2 || !errors.Is(c[1], ErrFormat) || c[1].Index != 3 {
		t.Fatalf("corrupt: %v", c)
	}
	if err := w.Read(2, &rec); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "s0.tar") {
		t.Errorf("reading the sample without an image: %v", err)
	}
	// A shard cut in the middle of a member.
	full := writeTar(t, filepath.Join(dir, "s1.tar"), map[string]string{"x.png": strings.Repeat("p", 3000), "x.cls": "1", "y.png": png, "y.cls": "2"},
		[]string{"y.png", "y.cls", "x.png", "x.cls"})
	os.WriteFile(filepath.Join(dir, "s1.tar"), full[:2048+512+1000], 0o644) // inside x.png
	w2, err := OpenWebDataset(t.Context(), filepath.Join(dir, "s1.tar"), WithIndexDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if c := w2.Corrupt(); len(c) == 0 || !strings.Contains(c[0].Error(), "cut short") || c[0].Index != 1 {
		t.Fatalf("truncated member: %v", c)
	}
}
