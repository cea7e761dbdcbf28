package source

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestFolderFlatWithLabels reads the real ImageNet sample as ImageNet's
// validation set is laid out: a flat folder and a labels CSV, with the
// synset names.
func TestFolderFlatWithLabels(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	f, err := OpenFolder(t.Context(), dir, WithLabels(filepath.Join(dir, "labels.csv")), WithClassNames(filepath.Join(dir, "synsets.csv")))
	if err != nil {
		t.Fatal(err)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "labels.csv"))
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")[1:] // after the header
	if f.Len() != len(lines) || f.Len() != 100 || len(f.Info().Classes) != 1000 || !f.Info().Encoded {
		t.Fatalf("%d samples (csv: %d), %d classes", f.Len(), len(lines), len(f.Info().Classes))
	}
	var rec Record
	for i, l := range lines {
		name, label, _ := strings.Cut(l, ",")
		if err := f.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if filepath.Base(rec.Path) != name || strings.TrimSpace(label) != strconv.Itoa(rec.Label) || len(rec.Enc) == 0 || rec.Enc[0] != 0xff {
			t.Fatalf("sample %d: %s label %d (%d bytes); csv says %s", i, rec.Path, rec.Label, len(rec.Enc), l)
		}
	}
	if len(f.Corrupt()) != 0 {
		t.Errorf("corrupt: %v", f.Corrupt())
	}
	fp1, _ := f.Fingerprint()
	g, _ := OpenFolder(t.Context(), dir, WithLabels(filepath.Join(dir, "labels.csv")))
	if fp2, _ := g.Fingerprint(); fp1 == fp2 {
		t.Error("fingerprint ignores the class names file")
	}
}

// TestFolderClassDirectories: classes are the sorted sub-directory names;
// files with other extensions and empty files are corrupt records that name
// their path; dot files are ignored.
func TestFolderClassDirectories(t *testing.T) {
	root := t.TempDir()
	jpg := []byte{0xff, 0xd8, 0xff, 0xe0, 1, 2, 3}
	files := map[string][]byte{
		"dog/b.jpg": jpg, "dog/a.JPEG": jpg, "cat/x.png": []byte("\x89PNG\r\n\x1a\nrest"),
		"cat/notes.txt": []byte("hi"), "cat/empty.jpg": nil, "cat/.DS_Store": []byte("x"),
	}
	for name, data := range files {
		os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenFolder(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Info().Classes, ","); got != "cat,dog" || f.Len() != 5 {
		t.Fatalf("classes %s, %d samples", got, f.Len())
	}
	want := []string{"cat/empty.jpg", "cat/notes.txt", "cat/x.png", "dog/a.JPEG", "dog/b.jpg"}
	labels := []int{0, 0, 0, 1, 1}
	var rec Record
	for i, w := range want {
		err := f.Read(i, &rec)
		if !strings.HasSuffix(rec.Path, w) && err == nil {
			t.Errorf("sample %d: %s, want %s", i, rec.Path, w)
		}
		if err == nil && rec.Label != labels[i] {
			t.Errorf("sample %d: label %d, want %d", i, rec.Label, labels[i])
		}
	}
	bad := f.Corrupt()
	if len(bad) != 2 || !errors.Is(bad[0], ErrFormat) || !errors.Is(bad[1], ErrUnknownFormat) ||
		!strings.HasSuffix(bad[0].File, "empty.jpg") || bad[1].Index != 1 {
		t.Fatalf("corrupt: %v", bad)
	}
	if err := f.Read(1, &rec); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("reading the .txt: %v", err)
	}
	if _, err := OpenFolder(t.Context(), filepath.Join(root, "dog")); err == nil || !strings.Contains(err.Error(), "no class sub-directories") {
		t.Errorf("a folder without classes: %v", err)
	}
	if _, err := OpenFolder(t.Context(), filepath.Join(root, "nope")); err == nil {
		t.Error("a missing folder opened")
	}
}

// TestFolderFollowsSymlinks: class directories and image files that are
// symbolic links (how ImageNet subsets are laid out) are followed: every
// class is found and every image read at its target's size.
func TestFolderFollowsSymlinks(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	img := buf.Bytes()
	real := t.TempDir()
	for _, c := range []string{"a", "b"} {
		os.MkdirAll(filepath.Join(real, c), 0o755)
		os.WriteFile(filepath.Join(real, c, "x.png"), img, 0o644)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "c"), 0o755)
	if err := os.Symlink(filepath.Join(real, "a"), filepath.Join(root, "a")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	os.Symlink(filepath.Join(real, "b"), filepath.Join(root, "b"))
	os.Symlink(filepath.Join(real, "a", "x.png"), filepath.Join(root, "c", "y.png"))
	f, err := OpenFolder(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Info().Classes; len(got) != 3 || f.Len() != 3 {
		t.Fatalf("classes %v, %d samples; want a, b, c and 3", got, f.Len())
	}
	if bad := f.Corrupt(); len(bad) != 0 {
		t.Fatalf("corrupt: %v", bad)
	}
	for i := range f.Len() {
		var rec Record
		if err := f.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Enc) != len(img) {
			t.Fatalf("sample %d read as %d bytes, the image has %d", i, len(rec.Enc), len(img))
		}
	}
}
