package source

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestTFRecordReal reads the real build_image_data files: counts, JPEG
// bytes, labels within the classes and class names from image/class/text;
// the index is written once and reused.
func TestTFRecordReal(t *testing.T) {
	dir := shareddata.Path(t, "tfrecord")
	idx := t.TempDir()
	for _, c := range []struct {
		file string
		n    int
	}{{"train-00000-of-00001", 858}, {"validation-00000-of-00001", 165}} {
		src, err := OpenTFRecord(t.Context(), filepath.Join(dir, c.file), WithIndexDir(idx), WithLabelOffset(1))
		if err != nil {
			t.Fatal(err)
		}
		if src.Len() != c.n || len(src.Info().Classes) != 33 || !src.Info().Encoded {
			t.Fatalf("%s: %d records, %d classes", c.file, src.Len(), len(src.Info().Classes))
		}
		var rec Record
		seen := map[int]bool{}
		for i := range src.Len() {
			if err := src.Read(i, &rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.Enc) < 100 || !bytes.HasPrefix(rec.Enc, []byte{0xff, 0xd8}) || rec.Label < 0 || rec.Label >= 33 {
				t.Fatalf("record %d: %d bytes, label %d", i, len(rec.Enc), rec.Label)
			}
			seen[rec.Label] = true
		}
		if c.n == 858 && len(seen) != 33 {
			t.Errorf("train uses %d of 33 labels", len(seen))
		}
		if strings.TrimSpace(src.Info().Classes[0]) == "0" {
			t.Errorf("classes not named from image/class/text: %v", src.Info().Classes[:3])
		}
		src.Close()
	}
	if m, _ := filepath.Glob(filepath.Join(idx, "*.index")); len(m) != 2 {
		t.Errorf("index files: %v", m)
	}
}

// TestTFRecordCorruption: a flipped byte in a record's data is reported
// with the file, the record's offset and its number; GZIP files read the
// same as plain ones.
func TestTFRecordCorruption(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(shareddata.Path(t, "tfrecord"), "validation-00000-of-00001"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "val.tfrecord")
	os.WriteFile(plain, orig, 0o644)
	good, err := OpenTFRecord(t.Context(), plain, WithIndexDir(dir), WithLabelOffset(1))
	if err != nil {
		t.Fatal(err)
	}
	k, j := good.locate(7)
	off := good.files[k].offsets[j]
	good.Close()

	bad := append([]byte(nil), orig...)
	bad[off+12+40] ^= 0x10 // inside record 7's data
	broken := filepath.Join(dir, "broken.tfrecord")
	os.WriteFile(broken, bad, 0o644)
	// The label scan at open reads every record: it finds the flip and
	// lists it (on_error=fail stops on it; skip skips it), and reading the
	// record says the same.
	br, err := OpenTFRecord(t.Context(), broken, WithIndexDir(dir), WithLabelOffset(1))
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	if c := br.Corrupt(); len(c) != 1 || !errors.Is(c[0], ErrCRC) || c[0].Index != 7 || c[0].Offset != off || c[0].File != broken {
		t.Fatalf("flipped byte: corrupt %v", c)
	}
	var rec Record
	err = br.Read(7, &rec)
	var re *RecordError
	if !errors.As(err, &re) || !errors.Is(err, ErrCRC) || re.Index != 7 || re.Offset != off {
		t.Fatalf("reading the flipped record: %v", err)
	}
	if !strings.Contains(err.Error(), "broken.tfrecord: offset") || !strings.Contains(err.Error(), "sample 7") {
		t.Errorf("error does not name file, offset and record: %v", err)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(orig)
	zw.Close()
	zipped := filepath.Join(dir, "val.tfrecord.gz")
	os.WriteFile(zipped, gz.Bytes(), 0o644)
	z, err := OpenTFRecord(t.Context(), zipped, WithIndexDir(dir), WithLabelOffset(1))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	p, _ := OpenTFRecord(t.Context(), plain, WithIndexDir(dir), WithLabelOffset(1))
	defer p.Close()
	var a, b Record
	for i := range p.Len() {
		p.Read(i, &a)
		z.Read(i, &b)
		if !bytes.Equal(a.Enc, b.Enc) || a.Label != b.Label {
			t.Fatalf("record %d differs between the GZIP and plain files", i)
		}
	}
	if _, err := OpenTFRecord(t.Context(), filepath.Join(dir, "none-*"), WithIndexDir(dir)); err == nil {
		t.Error("a glob matching nothing opened")
	}
}
