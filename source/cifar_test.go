package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// fakeCIFAR10 returns the files of a small CIFAR-10 binary distribution:
// every member holds per records whose label is (file*per+i)%10 and whose
// pixels encode the record's global index.
func fakeCIFAR10(per int) map[string][]byte {
	files := map[string][]byte{"batches.meta.txt": []byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n\n")}
	names := append(append([]string{}, cifar10.train...), cifar10.test...)
	for f, name := range names {
		var b []byte
		for i := range per {
			g := f*per + i
			rec := make([]byte, 1+cifarPixels)
			rec[0] = byte(g % 10)
			for j := 1; j < len(rec); j++ {
				rec[j] = byte(g*31 + j)
			}
			b = append(b, rec...)
		}
		files[name] = b
	}
	return files
}

func writeDir(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tarGz(t testing.TB, prefix string, files map[string][]byte, order []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: prefix + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, name := range order {
		b := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: prefix + "/" + name, Size: int64(len(b)), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func sortedKeys(m map[string][]byte) []string {
	var k []string
	// Test batch first and train batches reversed: the reader must not
	// depend on member order.
	k = append(k, "test_batch.bin", "batches.meta.txt")
	for i := len(cifar10.train) - 1; i >= 0; i-- {
		k = append(k, cifar10.train[i])
	}
	return k
}

func TestCIFARArchiveDirAndFileAgree(t *testing.T) {
	files := fakeCIFAR10(7)
	root := t.TempDir()
	writeDir(t, filepath.Join(root, "cifar-10-batches-bin"), files)
	archive := filepath.Join(root, "cifar-10-binary.tar.gz")
	os.WriteFile(archive, tarGz(t, "cifar-10-batches-bin", files, sortedKeys(files)), 0o644)

	for _, split := range []Split{Train, Test} {
		var opened []*CIFAR
		for _, p := range []string{archive, root, filepath.Join(root, "cifar-10-batches-bin")} {
			c, err := OpenCIFAR10(t.Context(), p, split)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			opened = append(opened, c)
		}
		want := 35
		if split == Test {
			want = 7
		}
		for _, c := range opened {
			if c.Len() != want {
				t.Fatalf("%s: Len = %d, want %d", c.Info().Identity, c.Len(), want)
			}
			if got := strings.Join(c.Info().Classes, ""); got != "abcdefghij" {
				t.Errorf("%s: classes %q from batches.meta.txt", c.Info().Identity, got)
			}
		}
		var r0, r1 Record
		for i := range want {
			opened[0].Read(i, &r0)
			for _, c := range opened[1:] {
				if err := c.Read(i, &r1); err != nil {
					t.Fatal(err)
				}
				if r0.Label != r1.Label || !bytes.Equal(r0.Pix, r1.Pix) {
					t.Fatalf("sample %d differs between archive and directory", i)
				}
			}
			g := i
			if split == Test {
				g = 35 + i
			}
			if r0.Label != g%10 || r0.Pix[0] != byte(g*31+1) || len(r0.Pix) != cifarPixels {
				t.Fatalf("sample %d: label %d pix[0] %d, want %d %d", i, r0.Label, r0.Pix[0], g%10, byte(g*31+1))
			}
		}
	}
	single, err := OpenCIFAR10(t.Context(), filepath.Join(root, "cifar-10-batches-bin", "data_batch_2.bin"), Train)
	if err != nil || single.Len() != 7 {
		t.Fatalf("single file: %v, %d records", err, single.Len())
	}
}

func TestCIFARBadInput(t *testing.T) {
	root := t.TempDir()
	files := fakeCIFAR10(3)
	cases := []struct {
		name  string
		setup func() string
		want  []string
	}{
		// A truncated file opens, its partial record corrupt: TestCIFARPartialTail.
		{"missing path", func() string { return filepath.Join(root, "nope") }, []string{"nope does not exist", "download=true"}},
		{"empty file", func() string {
			p := filepath.Join(root, "empty.bin")
			os.WriteFile(p, nil, 0o644)
			return p
		}, []string{"empty.bin", "empty file"}},
		{"archive missing members", func() string {
			p := filepath.Join(root, "partial.tar.gz")
			os.WriteFile(p, tarGz(t, "cifar-10-batches-bin", files, []string{"data_batch_1.bin", "data_batch_2.bin"}), 0o644)
			return p
		}, []string{"partial.tar.gz", "no member", "data_batch_3.bin", "data_batch_5.bin"}},
		{"not gzip", func() string {
			p := filepath.Join(root, "junk.tar.gz")
			os.WriteFile(p, []byte("this is not an archive"), 0o644)
			return p
		}, []string{"junk.tar.gz", "not a gzip archive"}},
		{"directory without batches", func() string {
			p := filepath.Join(root, "emptydir")
			os.Mkdir(p, 0o755)
			return p
		}, []string{"emptydir", "missing data_batch_1.bin"}},
	}
	for _, c := range cases {
		_, err := OpenCIFAR10(t.Context(), c.setup(), Train)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestCIFARLabelOutOfRange(t *testing.T) {
	files := fakeCIFAR10(4)
	b := files["data_batch_2.bin"]
	b[2*3073] = 10 // record 2 of the second file: sample 6
	dir := t.TempDir()
	writeDir(t, dir, files)
	c, err := OpenCIFAR10(t.Context(), dir, Train)
	if err != nil {
		t.Fatal(err)
	}
	bad := c.Corrupt()
	if len(bad) != 1 {
		t.Fatalf("Corrupt() = %v, want one record", bad)
	}
	e := bad[0]
	if e.Index != 6 || e.Offset != 2*3073 || !strings.HasSuffix(e.File, "data_batch_2.bin") || !errors.Is(e, ErrLabel) {
		t.Errorf("got %v", e)
	}
	var r Record
	if err := c.Read(6, &r); !errors.Is(err, ErrLabel) {
		t.Errorf("Read(6) = %v, want ErrLabel", err)
	}
	if err := c.Read(7, &r); err != nil {
		t.Errorf("Read(7) = %v", err)
	}
}

func TestCIFAR100Labels(t *testing.T) {
	var b []byte
	for i := range 5 {
		rec := make([]byte, 2+cifarPixels)
		rec[0], rec[1] = byte(i%20), byte(i*17%100)
		b = append(b, rec...)
	}
	dir := t.TempDir()
	writeDir(t, dir, map[string][]byte{"train.bin": b, "coarse_label_names.txt": []byte(strings.Repeat("x\n", 20))})
	fine, err := OpenCIFAR100(t.Context(), dir, Train)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := OpenCIFAR100(t.Context(), dir, Train, WithCoarseLabels())
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	for i := range 5 {
		fine.Read(i, &r)
		if r.Label != i*17%100 {
			t.Errorf("fine label %d = %d", i, r.Label)
		}
		coarse.Read(i, &r)
		if r.Label != i%20 {
			t.Errorf("coarse label %d = %d", i, r.Label)
		}
	}
	if len(fine.Info().Classes) != 100 || len(coarse.Info().Classes) != 20 {
		t.Errorf("classes: %d fine, %d coarse", len(fine.Info().Classes), len(coarse.Info().Classes))
	}
	if _, err := OpenCIFAR10(t.Context(), dir, Train, WithCoarseLabels()); err == nil {
		t.Error("cifar10 accepted coarse labels")
	}
}

func md5sum(b []byte) string {
	s := md5.Sum(b)
	return "md5:" + hex.EncodeToString(s[:])
}

func TestDownload(t *testing.T) {
	files := fakeCIFAR10(2)
	archive := tarGz(t, "cifar-10-batches-bin", files, sortedKeys(files))
	mux := http.NewServeMux()
	mux.HandleFunc("/ok.tar.gz", func(w http.ResponseWriter, r *http.Request) { w.Write(archive) })
	mux.HandleFunc("/missing.tar.gz", http.NotFound)
	mux.HandleFunc("/cut.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(archive)))
		w.Write(archive[:len(archive)/2])
		// Returning with fewer bytes than promised makes the server close
		// the connection: the client sees an unexpected EOF.
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cache := t.TempDir()
	var seen int64
	c, err := OpenCIFAR10(t.Context(), "", Train, WithDownload(cache), WithMirror(srv.URL+"/ok.tar.gz", md5sum(archive)),
		WithDownloadProgress(func(done, total int64) { seen = done }))
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 10 || seen != int64(len(archive)) {
		t.Fatalf("downloaded source has %d samples, progress saw %d bytes", c.Len(), seen)
	}
	if _, err := os.Stat(filepath.Join(cache, "cifar-10-binary.tar.gz")); err != nil {
		t.Fatal(err)
	}
	// A second open uses the cached file without the network.
	srv.Close()
	if _, err := OpenCIFAR10(t.Context(), "", Test, WithDownload(cache), WithMirror("http://127.0.0.1:1/none", md5sum(archive))); err != nil {
		t.Fatalf("cached archive not reused: %v", err)
	}

	srv2 := httptest.NewServer(mux)
	defer srv2.Close()
	for _, c := range []struct {
		path, sum string
		want      string
	}{
		{"/ok.tar.gz", "md5:00000000000000000000000000000000", "checksum mismatch"},
		{"/missing.tar.gz", md5sum(archive), "404"},
		{"/cut.tar.gz", md5sum(archive), "unexpected EOF"},
	} {
		dir := t.TempDir()
		_, err := OpenCIFAR10(t.Context(), "", Train, WithDownload(dir), WithMirror(srv2.URL+c.path, c.sum))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.path, err, c.want)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s: left files behind: %v", c.path, left)
		}
	}
	err = Download(context.Background(), "http://127.0.0.1:1/refused", filepath.Join(t.TempDir(), "x"), md5sum(nil), nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("network failure: %v", err)
	}
	if _, err := OpenCIFAR10(t.Context(), "", Train, WithMirror("x", "crc:12")); err == nil {
		t.Error("bad checksum spec accepted")
	}
}

func TestRealCIFAR10(t *testing.T) {
	archive := shareddata.Path(t, "cifar10/cifar-10-binary.tar.gz")
	train, err := OpenCIFAR10(t.Context(), archive, Train)
	if err != nil {
		t.Fatal(err)
	}
	test, err := OpenCIFAR10(t.Context(), archive, Test)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 50000 || test.Len() != 10000 {
		t.Fatalf("train %d, test %d samples", train.Len(), test.Len())
	}
	if len(train.Corrupt()) != 0 {
		t.Fatalf("corrupt records in the real data: %v", train.Corrupt()[0])
	}
	if got := train.Info().Classes; len(got) != 10 || got[0] != "airplane" || got[9] != "truck" {
		t.Errorf("classes %v", got)
	}
	counts := make([]int, 10)
	var r Record
	for i := range test.Len() {
		test.Read(i, &r)
		counts[r.Label]++
	}
	for c, n := range counts {
		if n != 1000 {
			t.Errorf("test class %d has %d samples, want 1000", c, n)
		}
	}
	frag, err := OpenCIFAR10(t.Context(), shareddata.Path(t, "cifar10-original-fragment/data_batch_1.first258.bin"), Train)
	if err != nil {
		t.Fatal(err)
	}
	if frag.Len() != 258 {
		t.Fatalf("fragment holds %d records, want 258", frag.Len())
	}
	var a Record
	for i := range 258 {
		frag.Read(i, &r)
		train.Read(i, &a)
		if r.Label != a.Label || !bytes.Equal(r.Pix, a.Pix) {
			t.Fatalf("record %d of the original fragment differs from the archive", i)
		}
	}
}

// TestCIFARArchiveHugeMember: a member whose header claims a terabyte but
// holds 100 bytes is an error after those bytes, not a terabyte allocated.
func TestCIFARArchiveHugeMember(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "cifar-10-batches-bin/data_batch_1.bin", Size: 1 << 40, Mode: 0o644, Typeflag: tar.TypeReg})
	tw.Write(make([]byte, 100))
	tw.Flush() // fails, the member being short: the archive ends here
	zw.Close()
	archive := filepath.Join(t.TempDir(), "cifar-10-binary.tar.gz")
	os.WriteFile(archive, buf.Bytes(), 0o644)
	_, err := OpenCIFAR10(t.Context(), archive, Train)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "cut short at offset 100 of 1099511627776") {
		t.Fatalf("err = %v, want the member cut short", err)
	}
}

func FuzzCIFARFile(f *testing.F) {
	files := fakeCIFAR10(2)
	f.Add(files["data_batch_1.bin"])
	f.Add(files["data_batch_1.bin"][:3000])
	f.Add([]byte{})
	f.Add(append([]byte{200}, make([]byte, cifarPixels)...))
	f.Add(append(bytes.Clone(files["data_batch_1.bin"]), 7, 7, 7))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "data.bin")
		os.WriteFile(p, b, 0o644)
		c, err := OpenCIFAR10(t.Context(), p, Train)
		if err != nil {
			if len(b) > 0 {
				t.Fatalf("%d bytes rejected: %v", len(b), err)
			}
			return
		}
		// Whole records, and a partial one after them.
		if c.Len() != (len(b)+3072)/3073 {
			t.Fatalf("Len %d for %d bytes", c.Len(), len(b))
		}
		var r Record
		bad := 0
		for i := range c.Len() {
			if err := c.Read(i, &r); err != nil {
				var re *RecordError
				if !errors.As(err, &re) || re.Index != i || re.Offset != int64(i)*3073 {
					t.Fatalf("Read(%d): %v", i, err)
				}
				bad++
			} else if r.Label > 9 || len(r.Pix) != cifarPixels {
				t.Fatalf("Read(%d): label %d, %d pixels", i, r.Label, len(r.Pix))
			}
		}
		if bad != len(c.Corrupt()) {
			t.Fatalf("%d bad reads, %d corrupt records listed", bad, len(c.Corrupt()))
		}
	})
}

// TestCIFARGivenPathMissing: a path that is given but does not exist is an
// error that names it, even with download=true; nothing is fetched. Only
// an empty path downloads.
func TestCIFARGivenPathMissing(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	cache := t.TempDir()
	missing := filepath.Join(t.TempDir(), "no", "such", "file.tar.gz")
	_, err := OpenCIFAR10(t.Context(), missing, Train, WithDownload(cache), WithMirror(srv.URL+"/x.tar.gz", md5sum(nil)))
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") || errors.Is(err, ErrDownload) {
		t.Fatalf("err = %v, want one naming the missing path", err)
	}
	if !strings.Contains(err.Error(), "download") {
		t.Errorf("err = %v does not say how to download instead", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests to the mirror for a mistyped path", n)
	}
	if left := dirNames(cache); len(left) != 0 {
		t.Errorf("cache holds %v", left)
	}
	// With no path, the same options download (here: the mirror's 404).
	_, err = OpenCIFAR10(t.Context(), "", Train, WithDownload(cache), WithMirror(srv.URL+"/x.tar.gz", md5sum(nil)))
	if !errors.Is(err, ErrDownload) || requests.Load() != 1 {
		t.Errorf("no path: err = %v after %d requests, want the mirror's 404", err, requests.Load())
	}
}

// TestCIFARFields: CIFAR opened with an image and a label reads what it
// reads without fields, with two empty values, allocating nothing once
// warm; any other field, or a key, is refused naming it and the sources
// that carry it.
func TestCIFARFields(t *testing.T) {
	dir := t.TempDir()
	writeDir(t, dir, fakeCIFAR10(3))
	plain, err := OpenCIFAR10(t.Context(), dir, Train)
	if err != nil {
		t.Fatal(err)
	}
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Label}, {Kind: fields.Image}}}
	c, err := OpenCIFAR10(t.Context(), dir, Train, WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	var a, b Record
	for i := range plain.Len() {
		plain.Read(i, &a)
		if err := c.Read(i, &b); err != nil || !bytes.Equal(a.Pix, b.Pix) || a.Label != b.Label || len(b.Fields) != 2 || a.Fields != nil {
			t.Fatalf("sample %d: %v, label %d and %d, %d fields", i, err, a.Label, b.Label, len(b.Fields))
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.Read(1, &b) }); n != 0 {
		t.Errorf("%g allocations per Read, want 0", n)
	}
	for _, c := range []struct {
		f    fields.Field
		want string
	}{
		{fields.Field{Kind: fields.Mask}, "cifar10 holds an image and a label, no mask: mask fields are read by image_folder (a mask folder), webdataset (mask.png)"},
		{fields.Field{Kind: fields.Labels, Classes: 10}, "no labels: labels fields are read by image_folder (a labels file's column)"},
		{fields.Field{Kind: fields.Tensor, Shape: []int{2}}, "no tensor: tensor fields are read by webdataset (npy), tfrecord and synthetic"},
		{fields.Field{Kind: fields.Label, Key: "coarse"}, "label=coarse: cifar100's image and label have no keys"},
	} {
		schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, c.f}}
		open := OpenCIFAR10
		if c.f.Kind == fields.Label {
			open = OpenCIFAR100
		}
		if _, err := open(t.Context(), dir, Train, WithFields(schema)); !errors.Is(err, fields.ErrSchema) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.f.Kind, err, c.want)
		}
	}
}
