package source

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/source/remote"
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
// as in torchvision's ImageFolder, files without an image extension (a
// zebra/notes.txt, a README) are passed over and counted, not samples
// (issue 24: the run stopped on them); images pipe does not decode (.webp)
// and empty files are corrupt records that name their path and the
// problem; dot files are ignored.
func TestFolderClassDirectories(t *testing.T) {
	root := t.TempDir()
	jpg := []byte{0xff, 0xd8, 0xff, 0xe0, 1, 2, 3}
	files := map[string][]byte{
		"dog/b.jpg": jpg, "dog/a.JPEG": jpg, "cat/x.png": []byte("\x89PNG\r\n\x1a\nrest"),
		"cat/empty.jpg": nil, "cat/.DS_Store": []byte("x"), "cat/y.WebP": []byte("RIFF"),
		"zebra/notes.txt": []byte("hi"), "zebra/z.jpg": jpg, "dog/README": []byte("dogs"), "dog/c.jpg.bak": jpg,
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
	want := []string{"cat/empty.jpg", "cat/x.png", "cat/y.WebP", "dog/a.JPEG", "dog/b.jpg", "zebra/z.jpg"}
	if got := strings.Join(f.Info().Classes, ","); got != "cat,dog,zebra" || f.Len() != len(want) || f.Info().NonImages != 3 {
		t.Fatalf("classes %s, %d samples, %d non-image files; want cat,dog,zebra, %d and 3 (notes.txt, README, c.jpg.bak)", got, f.Len(), f.Info().NonImages, len(want))
	}
	labels := []int{0, 0, 0, 1, 1, 2}
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
	if len(bad) != 2 || !errors.Is(bad[0], ErrFormat) || !strings.HasSuffix(bad[0].File, "empty.jpg") ||
		!errors.Is(bad[1], ErrUnknownFormat) || bad[1].Index != 2 || !strings.HasSuffix(bad[1].File, "y.WebP") ||
		!strings.Contains(bad[1].Error(), ".WebP is an image format pipe does not decode") {
		t.Fatalf("corrupt: %v", bad)
	}
	if err := f.Read(2, &rec); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("reading the .webp: %v", err)
	}
	if _, err := OpenFolder(t.Context(), filepath.Join(root, "dog")); err == nil || !strings.Contains(err.Error(), "no class sub-directories") {
		t.Errorf("a folder without classes: %v", err)
	}
	if _, err := OpenFolder(t.Context(), filepath.Join(root, "nope")); err == nil {
		t.Error("a missing folder opened")
	}
	// A class folder of nothing but notes is no dataset.
	notes := t.TempDir()
	os.MkdirAll(filepath.Join(notes, "a"), 0o755)
	os.WriteFile(filepath.Join(notes, "a", "notes.txt"), []byte("hi"), 0o644)
	if _, err := OpenFolder(t.Context(), notes); err == nil || !strings.Contains(err.Error(), "no image files (files without an image extension, passed over: 1)") {
		t.Errorf("a folder of notes: %v", err)
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

// TestFolderLabelsCSVRefusesRepeatsAndOutsidePaths: a labels CSV that
// names one file on two lines (two labels, or the same one twice) is
// refused naming both lines; one that names a file outside the folder (by
// .., an absolute path) or the folder itself is refused naming its line,
// though the file outside exists and would read.
func TestFolderLabelsCSVRefusesRepeatsAndOutsidePaths(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "data", "val")
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	jpg := []byte{0xff, 0xd8, 0xff, 0xe0}
	for _, name := range []string{"data/val/a.jpg", "data/val/b.jpg", "data/val/sub/c.jpg", "secret.jpg"} {
		if err := os.WriteFile(filepath.Join(dir, name), jpg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	labels := filepath.Join(t.TempDir(), "labels.csv")
	open := func(csv string) (*Folder, error) {
		t.Helper()
		if err := os.WriteFile(labels, []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		return OpenFolder(t.Context(), root, WithLabels(labels))
	}
	if f, err := open("file,label\na.jpg,0\nsub/c.jpg,1\n./b.jpg,1\n"); err != nil || f.Len() != 3 || len(f.Corrupt()) != 0 {
		t.Fatalf("a good CSV: %v", err)
	}
	outside := "is not a file under the folder " + root
	for _, c := range []struct{ csv, want string }{
		{"file,label\na.jpg,4\nb.jpg,1\nsub/c.jpg,2\n./a.jpg,7\n", labels + ":2 and " + labels + ":5 both name ./a.jpg, with labels 4 and 7"},
		{"a.jpg,4\nb.jpg,1\na.jpg,4\n", labels + ":1 and " + labels + ":3 both name a.jpg, each with label 4"},
		{"a.jpg,0\n../../secret.jpg,1\n", labels + `:2: bad format: "../../secret.jpg" ` + outside},
		{"a.jpg,0\nb.jpg,1\n" + filepath.Join(dir, "secret.jpg") + ",1\n", labels + `:3: bad format: "` + filepath.Join(dir, "secret.jpg") + `" ` + outside},
		{"file,label\nsub/../../../secret.jpg,0\n", labels + `:2: bad format: "sub/../../../secret.jpg" ` + outside},
		{"a.jpg,0\n.,1\n", labels + `:2: bad format: "." ` + outside},
	} {
		f, err := open(c.csv)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			n := -1
			if f != nil {
				n = f.Len()
			}
			t.Errorf("labels CSV %q: %v (%d samples); want an ErrFormat saying %q", c.csv, err, n, c.want)
		}
	}
}

// TestRemoteFolderLabelsCSVStaysUnder: a remote flat folder's labels CSV
// that names a file outside the folder is refused before any request for
// it (or any other file) reaches the server.
func TestRemoteFolderLabelsCSVStaysUnder(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		body := "\xff\xd8\xff\xe0" // a server that resolves the .. serves the file outside
		if strings.HasSuffix(r.URL.Path, "/labels.csv") {
			body = "a.jpg,0\n../secret.jpg,1\n"
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("ETag", `"1"`)
		if r.Method != http.MethodHead {
			io.WriteString(w, body)
		}
	}))
	defer srv.Close()
	rem := &Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: t.TempDir()}}
	defer rem.Store.Close()
	f, err := OpenFolder(t.Context(), srv.URL+"/d", WithLabels(srv.URL+"/d/labels.csv"), WithRemote(rem))
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `labels.csv:2: bad format: "../secret.jpg" is not a file under the folder `+srv.URL+"/d") {
		t.Errorf("%v; want the CSV's line 2 refused", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		if !strings.HasSuffix(a, " /d/labels.csv") {
			t.Errorf("the server was asked %s; want only the labels CSV", a)
		}
	}
}

// TestFolderBrokenSymlinks: a symbolic link that is dangling or part of a
// loop, in a class folder or named by a labels CSV, is a corrupt record
// (ErrBrokenLink) naming its path and which it is, not the end of the
// listing; the other files read.
func TestFolderBrokenSymlinks(t *testing.T) {
	root := t.TempDir()
	jpg := []byte{0xff, 0xd8, 0xff, 0xe0}
	for _, name := range []string{"cat/a.jpg", "dog/b.jpg"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(root, name), jpg, 0o644)
	}
	if err := os.Symlink(filepath.Join(root, "gone.jpg"), filepath.Join(root, "cat", "dangling.jpg")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	os.Symlink("loop.jpg", filepath.Join(root, "dog", "loop.jpg"))
	want := map[string]string{
		"cat/dangling.jpg": "broken symbolic link: a dangling symbolic link (its target " + filepath.Join(root, "gone.jpg") + " does not exist)",
		"dog/loop.jpg":     "broken symbolic link: a symbolic link loop",
	}
	check := func(f *Folder, err error, n int) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if f.Len() != n {
			t.Fatalf("%d samples, want %d", f.Len(), n)
		}
		bad := f.Corrupt()
		if len(bad) != len(want) {
			t.Fatalf("corrupt %v; want the two links", bad)
		}
		var rec Record
		for _, e := range bad {
			rel, _ := filepath.Rel(root, e.File)
			if !errors.Is(e, ErrBrokenLink) || want[rel] == "" || !strings.Contains(e.Error(), want[rel]) {
				t.Errorf("corrupt record %v; want ErrBrokenLink saying %q", e, want[rel])
			}
			if err := f.Read(e.Index, &rec); !errors.Is(err, ErrBrokenLink) {
				t.Errorf("Read(%d): %v", e.Index, err)
			}
		}
		for i := range f.Len() {
			if _, isBad := f.bad[i]; !isBad {
				if err := f.Read(i, &rec); err != nil || len(rec.Enc) != len(jpg) {
					t.Errorf("Read(%d): %v", i, err)
				}
			}
		}
	}
	f, err := OpenFolder(t.Context(), root)
	check(f, err, 4)
	labels := filepath.Join(t.TempDir(), "labels.csv")
	os.WriteFile(labels, []byte("cat/a.jpg,0\ncat/dangling.jpg,0\ndog/loop.jpg,1\ndog/b.jpg,1\n"), 0o644)
	f, err = OpenFolder(t.Context(), root, WithLabels(labels))
	check(f, err, 4)
	os.WriteFile(labels, []byte("cat/a.jpg,0\ncat/missing.jpg,0\n"), 0o644)
	if _, err := OpenFolder(t.Context(), root, WithLabels(labels)); err == nil || !strings.Contains(err.Error(), "labels.csv:2") {
		t.Errorf("a labels CSV naming a missing file: %v", err)
	}
}

// TestRemoteFolderFingerprintFollowsLastModified: over HTTP without ETags,
// a file replaced by bytes of the same length with a new Last-Modified
// changes the folder's fingerprint, so an augmentation cache over it is
// not read stale.
func TestRemoteFolderFingerprintFollowsLastModified(t *testing.T) {
	var mu sync.Mutex
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := "\xff\xd8\xff\xe0"
		if strings.HasSuffix(r.URL.Path, "/labels.csv") {
			body = "a.jpg,0\nb.jpg,1\n"
		}
		mu.Lock()
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		mu.Unlock()
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			io.WriteString(w, body)
		}
	}))
	defer srv.Close()
	fingerprint := func() string {
		rem := &Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: t.TempDir()}}
		defer rem.Store.Close()
		f, err := OpenFolder(t.Context(), srv.URL+"/d", WithLabels(srv.URL+"/d/labels.csv"), WithRemote(rem))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fp, err := f.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	before := fingerprint()
	if again := fingerprint(); again != before {
		t.Fatalf("the same folder twice: fingerprints %s and %s", before, again)
	}
	mu.Lock()
	modified = modified.Add(time.Hour)
	mu.Unlock()
	if after := fingerprint(); after == before {
		t.Errorf("files with a new Last-Modified and no ETag kept the fingerprint %s", before)
	}
}
