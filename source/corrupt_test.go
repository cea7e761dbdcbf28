package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tfFrame frames data as one TFRecord record: length, its masked CRC, the
// data and its masked CRC.
func tfFrame(data []byte) []byte {
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
	out := binary.LittleEndian.AppendUint32(head, maskedCRC(head))
	out = append(out, data...)
	return binary.LittleEndian.AppendUint32(out, maskedCRC(data))
}

// tfLabelled is a TFRecord file of one record per label, each with a small
// image.
func tfLabelled(labels ...int64) []byte {
	var out []byte
	for i, l := range labels {
		out = append(out, tfFrame(tfExample(l, []byte(fmt.Sprint("image ", i))))...)
	}
	return out
}

// tfOffsets returns the offset of every record of a well-formed file.
func tfOffsets(b []byte) []int64 {
	var offs []int64
	for off := 0; off < len(b); off += 16 + int(binary.LittleEndian.Uint64(b[off:])) {
		offs = append(offs, int64(off))
	}
	return offs
}

// checkCorrupt checks that src lists exactly the records at want (index →
// sentinel), each naming file (as a suffix) and its offset, that Read of
// each gives the same error, and that every other record reads.
func checkCorrupt(t *testing.T, src interface {
	Source
	Checker
}, file string, want map[int]error, offsets map[int]int64) {
	t.Helper()
	bad := src.Corrupt()
	if len(bad) != len(want) {
		t.Fatalf("corrupt records %v, want %d", bad, len(want))
	}
	for k, e := range bad {
		if k > 0 && bad[k-1].Index >= e.Index {
			t.Errorf("corrupt records out of index order: %v", bad)
		}
		w, ok := want[e.Index]
		if !ok || !errors.Is(e, w) {
			t.Errorf("corrupt record %v, want one wrapping %v", e, w)
		}
		if !strings.HasSuffix(e.File, file) {
			t.Errorf("corrupt record %v does not name %s", e, file)
		}
		if off, ok := offsets[e.Index]; ok && e.Offset != off {
			t.Errorf("corrupt record %v: offset %d, want %d", e, e.Offset, off)
		}
	}
	var rec Record
	nbad := 0
	for i := range src.Len() {
		err := src.Read(i, &rec)
		if _, isBad := want[i]; !isBad {
			if err != nil {
				t.Errorf("Read(%d): %v", i, err)
			}
			continue
		}
		nbad++
		var re *RecordError
		if !errors.As(err, &re) || re.Index != i {
			t.Errorf("Read(%d) of a corrupt record: %v", i, err)
			continue
		}
		for _, e := range bad {
			if e.Index == i && e.Error() != err.Error() {
				t.Errorf("Read(%d) = %v, Corrupt lists %v", i, err, e)
			}
		}
	}
	if nbad != len(bad) {
		t.Errorf("%d records fail to read, %d are listed", nbad, len(bad))
	}
}

// TestTFRecordBadTail: a file whose end cannot be parsed — a truncated
// header, a record cut short, a length whose CRC fails, a length of 2^60 —
// opens with every record before the damage, and the rest of the file is
// one corrupt record at the damage's offset. The index built on the first
// open gives the same on the second.
func TestTFRecordBadTail(t *testing.T) {
	good := tfLabelled(0, 1, 2, 3)
	offs := tfOffsets(good)
	flip := func(b []byte, at int64) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x40
		return b
	}
	huge := bytes.Clone(good)
	head := binary.LittleEndian.AppendUint64(nil, 1<<60)
	copy(huge[offs[2]:], binary.LittleEndian.AppendUint32(head, maskedCRC(head)))
	cases := []struct {
		name string
		data []byte
		tail int   // index of the corrupt tail
		off  int64 // its offset
		want error
	}{
		{"truncated header", append(bytes.Clone(good), tfLabelled(4)[:7]...), 4, int64(len(good)), ErrFormat},
		{"record cut short", good[:len(good)-10], 3, offs[3], ErrFormat},
		{"length CRC", flip(good, offs[2]+1), 2, offs[2], ErrCRC},
		{"length of 2^60", huge, 2, offs[2], ErrFormat},
		{"not a TFRecord file", []byte("this is a JPEG, honest"), 0, 0, ErrCRC},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "d.tfrecord")
			os.WriteFile(file, c.data, 0o644)
			for _, open := range []string{"first", "indexed"} {
				src, err := OpenTFRecord(t.Context(), file, WithIndexDir(dir))
				if err != nil {
					t.Fatalf("%s open: %v", open, err)
				}
				if src.Len() != c.tail+1 {
					t.Fatalf("%s open: %d records, want %d and the tail", open, src.Len(), c.tail)
				}
				checkCorrupt(t, src, "d.tfrecord", map[int]error{c.tail: c.want}, map[int]int64{c.tail: c.off})
				src.Close()
			}
		})
	}
}

// TestCRCIsChecksumError: a TFRecord CRC mismatch is a checksum mismatch,
// so callers that tell data errors from usage errors by ErrChecksum (the
// .pipe opener, the exit status) class it as data.
func TestCRCIsChecksumError(t *testing.T) {
	if !errors.Is(ErrCRC, ErrChecksum) {
		t.Error("ErrCRC does not wrap ErrChecksum")
	}
}

// TestTFRecordLabelBound: a label of 10^12 (past MaxClasses) is a corrupt
// record, not a class table of 10^12 names; so are a negative label and an
// Example without features. The classes are those of the good records.
func TestTFRecordLabelBound(t *testing.T) {
	data := tfLabelled(1, 1e12, 2, -3, 0)
	offs := tfOffsets(data)
	data = append(data, tfFrame(nil)...) // an Example without features
	file := filepath.Join(t.TempDir(), "l.tfrecord")
	os.WriteFile(file, data, 0o644)
	src, err := OpenTFRecord(t.Context(), file, WithIndexDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Len() != 6 || len(src.Info().Classes) != 3 {
		t.Fatalf("%d records, %d classes; want 6 and 3", src.Len(), len(src.Info().Classes))
	}
	checkCorrupt(t, src, "l.tfrecord", map[int]error{1: ErrLabel, 3: ErrLabel, 5: ErrFormat}, map[int]int64{1: offs[1], 3: offs[3]})
	if c := src.Corrupt(); len(c) > 0 && !strings.Contains(c[0].Error(), "1000000000000") {
		t.Errorf("the error does not give the label: %v", c[0])
	}
}

// TestTFRecordImageMissing: a record without the image feature is listed
// at open, so on_error=fail stops before the first batch rather than in
// the middle of an epoch.
func TestTFRecordImageMissing(t *testing.T) {
	data := tfLabelled(0, 1)
	file := filepath.Join(t.TempDir(), "i.tfrecord")
	os.WriteFile(file, data, 0o644)
	src, err := OpenTFRecord(t.Context(), file, WithIndexDir(t.TempDir()), WithFeatureKeys("image/missing", "image/class/label"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	checkCorrupt(t, src, "i.tfrecord", map[int]error{0: ErrFormat, 1: ErrFormat}, nil)
}

// TestWebDatasetBadMembers: a .cls holding "abc", a .cls of 99999999999
// (past MaxClasses), a .json that does not parse and a .json label of
// 1e300 are corrupt records of their samples; the samples around them
// read.
func TestWebDatasetBadMembers(t *testing.T) {
	dir := t.TempDir()
	png := "\x89PNG\r\n\x1a\nfake"
	members := map[string]string{
		"a.png": png, "a.cls": "1",
		"b.png": png, "b.cls": "abc",
		"c.png": png, "c.cls": "99999999999",
		"d.png": png, "d.json": "{not json",
		"e.png": png, "e.cls": "0",
		"f.png": png, "f.json": `{"label": 1e300}`,
	}
	order := []string{"a.png", "a.cls", "b.png", "b.cls", "c.png", "c.cls", "d.png", "d.json", "e.png", "e.cls", "f.png", "f.json"}
	writeTar(t, filepath.Join(dir, "s.tar"), members, order)
	w, err := OpenWebDataset(t.Context(), filepath.Join(dir, "s.tar"), WithIndexDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Len() != 6 || len(w.Info().Classes) != 2 {
		t.Fatalf("%d samples, %d classes; want 6 and 2", w.Len(), len(w.Info().Classes))
	}
	checkCorrupt(t, w, "s.tar", map[int]error{1: ErrLabel, 2: ErrLabel, 3: ErrFormat, 5: ErrLabel},
		map[int]int64{1: 3*1024 + 512, 2: 5*1024 + 512})
}

// TestWebDatasetBadTail: a shard whose tar header is cut short, or
// garbage, keeps the samples before it; the rest of the shard is one
// corrupt record at the header's offset. A member cut short is one corrupt
// record, listed once.
func TestWebDatasetBadTail(t *testing.T) {
	dir := t.TempDir()
	png := "\x89PNG\r\n\x1a\nfake"
	members := map[string]string{"a.png": png, "a.cls": "1", "b.png": png, "b.cls": "2", "c.png": png, "c.cls": "0"}
	full := writeTar(t, filepath.Join(dir, "full.tar"), members, []string{"a.png", "a.cls", "b.png", "b.cls", "c.png", "c.cls"})
	garbage := bytes.Clone(full)
	copy(garbage[4*1024:], bytes.Repeat([]byte("junk"), 128))
	long := writeTar(t, filepath.Join(dir, "long.tar"), map[string]string{"a.png": png, "a.cls": "1", "b.png": strings.Repeat("p", 3000), "b.cls": "2"},
		[]string{"a.png", "a.cls", "b.png", "b.cls"})
	cases := []struct {
		name string
		data []byte
		n    int   // samples, the tail included
		tail int   // index of the corrupt record
		off  int64 // its offset
	}{
		{"header cut short", full[:4*1024+100], 3, 2, 4 * 1024},
		{"garbage header", garbage, 3, 2, 4 * 1024},
		{"member cut short", long[:2*1024+512+1000], 2, 1, 2*1024 + 512},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "t.tar")
			os.WriteFile(file, c.data, 0o644)
			w, err := OpenWebDataset(t.Context(), file, WithIndexDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Len() != c.n {
				t.Fatalf("%d samples, want %d", w.Len(), c.n)
			}
			checkCorrupt(t, w, "t.tar", map[int]error{c.tail: ErrFormat}, map[int]int64{c.tail: c.off})
			if n := w.Shards(); len(n) != 1 || n[0] != c.n {
				t.Errorf("Shards() = %v, want [%d]", n, c.n)
			}
		})
	}
}

// folderWithCSV writes a folder of the named files, each a few JPEG-ish
// bytes, and a labels CSV outside it, and returns their paths.
func folderWithCSV(t *testing.T, csv string, files ...string) (string, string) {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f), []byte{0xff, 0xd8, 0xff}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "labels.csv")
	os.WriteFile(p, []byte(csv), 0o644)
	return root, p
}

// TestFolderLabelBound: in a labels CSV, a label of 2,000,000,000 (past
// MaxClasses) and one that is not a number are corrupt records that name
// the CSV, the byte offset of their line, the line and the file; with
// classes= a label it does not name is one too.
func TestFolderLabelBound(t *testing.T) {
	csv := "file,label\na.jpg,1\nb.jpg,2000000000\nc.jpg,abc\nd.jpg,0\ne.jpg,4\n"
	root, labels := folderWithCSV(t, csv, "a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg")
	f, err := OpenFolder(t.Context(), root, WithLabels(labels))
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 5 || len(f.Info().Classes) != 5 {
		t.Fatalf("%d samples, %d classes; want 5 and 5", f.Len(), len(f.Info().Classes))
	}
	lineOff := func(file string) int64 { return int64(strings.Index(csv, file)) }
	checkCorrupt(t, f, "labels.csv", map[int]error{1: ErrLabel, 2: ErrLabel}, map[int]int64{1: lineOff("b.jpg"), 2: lineOff("c.jpg")})
	if c := f.Corrupt(); len(c) == 2 && (!strings.Contains(c[0].Error(), "line 3") || !strings.Contains(c[0].Error(), "b.jpg") || !strings.Contains(c[1].Error(), `"abc"`)) {
		t.Errorf("errors do not give the line, file and label: %v", c)
	}

	names := filepath.Join(t.TempDir(), "names.csv")
	os.WriteFile(names, []byte("0,cat\n1,dog\n"), 0o644)
	g, err := OpenFolder(t.Context(), root, WithLabels(labels), WithClassNames(names))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Info().Classes, ","); got != "cat,dog" {
		t.Fatalf("classes %s, want cat,dog", got)
	}
	checkCorrupt(t, g, "labels.csv", map[int]error{1: ErrLabel, 2: ErrLabel, 4: ErrLabel}, map[int]int64{4: lineOff("e.jpg")})

	os.WriteFile(names, []byte("0,cat\n3000000000,dog\n"), 0o644)
	if _, err := OpenFolder(t.Context(), root, WithLabels(labels), WithClassNames(names)); err == nil || !strings.Contains(err.Error(), "names.csv:2") {
		t.Errorf("a classes CSV with label 3e9: %v", err)
	}
}

// TestSparseLabels (issue 24): without classes=, labels 0, 1 and
// 1048575 would make 1,048,576 classes, a model of gigabytes; they are
// refused, naming the figures and the way out, while a subset that misses
// some of ImageNet's 1,000 classes, or names its classes, passes; so with
// TFRecord and WebDataset labels.
func TestSparseLabels(t *testing.T) {
	root, labels := folderWithCSV(t, "a.jpg,0\nb.jpg,1\nc.jpg,1048575\n", "a.jpg", "b.jpg", "c.jpg")
	_, err := OpenFolder(t.Context(), root, WithLabels(labels))
	if err == nil || !strings.Contains(err.Error(), "labels run to 1048575 but only 3 distinct labels appear") || !strings.Contains(err.Error(), "classes=") {
		t.Fatalf("sparse labels: %v", err)
	}
	names := filepath.Join(t.TempDir(), "names.csv")
	os.WriteFile(names, []byte("0,cat\n1,dog\n2,owl\n"), 0o644)
	if f, err := OpenFolder(t.Context(), root, WithLabels(labels), WithClassNames(names)); err != nil || len(f.Info().Classes) != 3 || len(f.Corrupt()) != 1 {
		t.Fatalf("with classes=: %v", err)
	}

	root, labels = folderWithCSV(t, "a.jpg,0\nb.jpg,17\nc.jpg,999\n", "a.jpg", "b.jpg", "c.jpg")
	if f, err := OpenFolder(t.Context(), root, WithLabels(labels)); err != nil || len(f.Info().Classes) != 1000 {
		t.Fatalf("3 images of 1,000 classes: %v", err)
	}

	dir := t.TempDir()
	tf := filepath.Join(dir, "s.tfrecord")
	os.WriteFile(tf, tfLabelled(0, 1, 1<<20-1), 0o644)
	if _, err := OpenTFRecord(t.Context(), tf, WithIndexDir(dir)); !errors.Is(err, ErrLabel) || !strings.Contains(err.Error(), "only 3 distinct labels") {
		t.Errorf("tfrecord with sparse labels: %v", err)
	}
	png := "\x89PNG\r\n\x1a\nfake"
	wds := filepath.Join(dir, "s.tar")
	os.WriteFile(wds, tarOf("a.png", png, "a.cls", "0", "b.png", png, "b.cls", "1048575"), 0o644)
	if _, err := OpenWebDataset(t.Context(), wds, WithIndexDir(dir)); !errors.Is(err, ErrLabel) || !strings.Contains(err.Error(), "only 2 distinct labels") {
		t.Errorf("webdataset with sparse labels: %v", err)
	}
}

// TestCIFARPartialTail: a file that is not a whole number of records gives
// its whole records, and the partial one at its end is a corrupt record
// with the file and offset; records of later files keep their contents.
func TestCIFARPartialTail(t *testing.T) {
	files := fakeCIFAR10(3)
	files["data_batch_2.bin"] = append(files["data_batch_2.bin"], make([]byte, 100)...)
	root := t.TempDir()
	dir := filepath.Join(root, "cifar-10-batches-bin")
	writeDir(t, dir, files)
	archive := filepath.Join(root, "cifar-10-binary.tar.gz")
	os.WriteFile(archive, tarGz(t, "cifar-10-batches-bin", files, sortedKeys(files)), 0o644)

	single, err := OpenCIFAR10(t.Context(), filepath.Join(dir, "data_batch_2.bin"), Train)
	if err != nil {
		t.Fatal(err)
	}
	if single.Len() != 4 {
		t.Fatalf("%d records, want 3 and the partial one", single.Len())
	}
	checkCorrupt(t, single, "data_batch_2.bin", map[int]error{3: ErrFormat}, map[int]int64{3: 3 * 3073})
	if c := single.Corrupt(); !strings.Contains(c[0].Error(), "100 bytes") {
		t.Errorf("error does not say how much is left over: %v", c[0])
	}
	for _, p := range []string{dir, archive} {
		c, err := OpenCIFAR10(t.Context(), p, Train)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Len() != 16 {
			t.Fatalf("%s: %d records, want 15 and the partial one", p, c.Len())
		}
		checkCorrupt(t, c, "data_batch_2.bin", map[int]error{6: ErrFormat}, map[int]int64{6: 3 * 3073})
		var r Record
		for i, g := range map[int]int{5: 5, 7: 6, 15: 14} {
			if err := c.Read(i, &r); err != nil || r.Pix[0] != byte(g*31+1) || r.Label != g%10 {
				t.Errorf("%s: sample %d: %v, label %d, want record %d", p, i, err, r.Label, g)
			}
		}
	}
	os.WriteFile(filepath.Join(root, "short.bin"), make([]byte, 100), 0o644)
	c, err := OpenCIFAR10(t.Context(), filepath.Join(root, "short.bin"), Train)
	if err != nil {
		t.Fatal(err)
	}
	checkCorrupt(t, c, "short.bin", map[int]error{0: ErrFormat}, map[int]int64{0: 0})
}
