package source

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// The fuzz targets below open a fuzzed file as a source and read every
// record as on_error=skip does, checking that nothing panics, that memory
// stays bounded whatever a length or label field says, and that the counts
// add up: every record either reads or fails with a *RecordError for its
// index, and the records that fail are exactly those Corrupt lists.

// fuzzAllocLimit is what opening and reading a fuzzed file of n bytes may
// allocate: a few copies of the file, and a class table of MaxClasses
// names.
func fuzzAllocLimit(n int) uint64 { return 64<<20 + 64*uint64(n) }

// checkBoundedAlloc runs f and fails t if it allocated more than limit
// bytes.
func checkBoundedAlloc(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Fatalf("allocated %d bytes, more than %d", got, limit)
	}
}

// checkSkipAll reads every record of src as on_error=skip does and checks
// the counts.
func checkSkipAll(t *testing.T, src interface {
	Source
	Checker
}, fileSize int64) {
	t.Helper()
	bad := src.Corrupt()
	listed := map[int]bool{}
	for k, e := range bad {
		if e.Index < 0 || e.Index >= src.Len() || (k > 0 && bad[k-1].Index >= e.Index) {
			t.Fatalf("corrupt record %d of %d: index %d (previous %v), Len %d", k, len(bad), e.Index, bad[max(k-1, 0)], src.Len())
		}
		listed[e.Index] = true
	}
	classes := len(src.Info().Classes)
	if classes > MaxClasses {
		t.Fatalf("%d classes", classes)
	}
	var rec Record
	skipped := 0
	for i := range src.Len() {
		err := src.Read(i, &rec)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) || re.Index != i || !listed[i] {
				t.Fatalf("Read(%d): %v (listed: %v)", i, err, listed[i])
			}
			if fileSize >= 0 && (re.Offset < 0 || re.Offset > fileSize) {
				t.Fatalf("Read(%d): offset %d in a file of %d bytes", i, re.Offset, fileSize)
			}
			skipped++
			continue
		}
		if rec.Label < 0 || rec.Label >= classes {
			t.Fatalf("Read(%d): label %d of %d classes", i, rec.Label, classes)
		}
		if fileSize >= 0 && int64(len(rec.Enc)) > fileSize {
			t.Fatalf("Read(%d): %d bytes from a file of %d", i, len(rec.Enc), fileSize)
		}
	}
	if skipped != len(bad) {
		t.Fatalf("%d records skipped, %d listed as corrupt", skipped, len(bad))
	}
}

// realTFPrefix returns the first records of a real TFRecord file under the
// shared data, or nil where it is absent.
func realTFPrefix(records int) []byte {
	b, err := os.ReadFile(filepath.Join(shareddata.Root(), "tfrecord", "validation-00000-of-00001"))
	if err != nil {
		return nil
	}
	off := 0
	for range records {
		if off+12 > len(b) {
			break
		}
		off += 16 + int(binary.LittleEndian.Uint64(b[off:]))
	}
	return b[:min(off, len(b))]
}

func FuzzTFRecord(f *testing.F) {
	good := tfLabelled(0, 1, 2)
	offs := tfOffsets(good)
	huge := bytes.Clone(good)
	head := binary.LittleEndian.AppendUint64(nil, 1<<60)
	copy(huge[offs[1]:], binary.LittleEndian.AppendUint32(head, maskedCRC(head)))
	crc := bytes.Clone(good)
	crc[offs[1]+20] ^= 1
	f.Add(good)
	f.Add(good[:len(good)-3])                       // record cut short
	f.Add(append(bytes.Clone(good), 9, 0, 0, 0, 0)) // truncated header
	f.Add(huge)                                     // a length of 2^60
	f.Add(crc)                                      // data CRC
	f.Add(tfLabelled(1e12, -1, 1<<20, 1<<20-1))     // labels past the bounds
	f.Add(tfLabelled(0, 1, 1<<20-1))                // labels too sparse for a class count
	f.Add(append(tfFrame(nil), tfFrame([]byte{0x0a, 0x02, 0x0a, 0x00})...))
	f.Add([]byte{})
	f.Add(gzipBytes(f, good))
	if real := realTFPrefix(3); real != nil {
		f.Add(real)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "f.tfrecord")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkBoundedAlloc(t, fuzzAllocLimit(len(b)), func() {
			src, err := OpenTFRecord(t.Context(), file, WithIndexDir(dir))
			if err != nil {
				// Every byte of a plain file is in some record, if a
				// corrupt one; only no bytes at all, a broken GZIP
				// stream, or labels too sparse to be the class count
				// fail the open.
				gz := len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b
				if errors.Is(err, ErrLabel) && strings.Contains(err.Error(), "distinct labels appear") {
					return
				}
				if !errors.Is(err, ErrFormat) || (len(b) > 0 && !gz) {
					t.Fatalf("open: %v", err)
				}
				return
			}
			defer src.Close()
			size := int64(len(b))
			if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
				size = -1 // offsets are in the decompressed copy
			}
			if n := src.Shards(); len(n) != 1 || n[0] != src.Len() || src.Len() == 0 {
				t.Fatalf("Shards() = %v, Len %d", n, src.Len())
			}
			checkSkipAll(t, src, size)
		})
	})
}

// tarOf is a tar file of the members (name, contents) in order.
func tarOf(members ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i+1 < len(members); i += 2 {
		tw.WriteHeader(&tar.Header{Name: members[i], Mode: 0o644, Size: int64(len(members[i+1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(members[i+1]))
	}
	tw.Close()
	return b.Bytes()
}

func FuzzWebDataset(f *testing.F) {
	png := "\x89PNG\r\n\x1a\nfake"
	good := tarOf("a.png", png, "a.cls", "1", "b.jpg", "\xff\xd8\xff", "b.json", `{"label": 2}`, "c.png", png, "c.cls", "0")
	garbage := bytes.Clone(good)
	copy(garbage[2048:], "not a tar header at all")
	var hugeMember bytes.Buffer
	tw := tar.NewWriter(&hugeMember)
	tw.WriteHeader(&tar.Header{Name: "x.png", Mode: 0o644, Size: 1 << 40, Typeflag: tar.TypeReg})
	tw.Write([]byte(png))
	tw.Flush() // fails, the member being short: the shard ends here
	f.Add(good)
	f.Add(good[:2048+100])    // truncated header
	f.Add(good[:512+5])       // member cut short
	f.Add(garbage)            // garbage header
	f.Add(hugeMember.Bytes()) // a member of 2^40 bytes
	f.Add(tarOf("a.png", png, "a.cls", "abc", "b.png", png, "b.cls", "99999999999", "c.png", png, "c.json", "{not json"))
	f.Add(tarOf("a.png", png, "a.json", `{"label": 1e300}`, "b.txt", "no image", "b.cls", "1", "c.png", png))
	f.Add(tarOf("a.png", png, "a.cls", "0", "b.png", png, "b.cls", "1048575")) // labels too sparse for a class count
	f.Add([]byte{})
	if real, err := os.ReadFile(filepath.Join(shareddata.Root(), "webdataset", "sample.tgz")); err == nil {
		f.Add(real)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "s.tar")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkBoundedAlloc(t, fuzzAllocLimit(len(b)), func() {
			w, err := OpenWebDataset(t.Context(), file, WithIndexDir(dir))
			if err != nil {
				sparse := errors.Is(err, ErrLabel) && strings.Contains(err.Error(), "distinct labels appear")
				if !errors.Is(err, ErrFormat) && !sparse {
					t.Fatalf("open: %v", err)
				}
				return
			}
			defer w.Close()
			size := int64(len(b))
			if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
				size = -1 // offsets are in the decompressed copy
			}
			if n := w.Shards(); len(n) != 1 || n[0] != w.Len() {
				t.Fatalf("Shards() = %v, Len %d", n, w.Len())
			}
			checkSkipAll(t, w, size)
		})
	})
}

// FuzzLabelsCSV fuzzes an image folder's labels CSV and, when not empty,
// its classes CSV.
func FuzzLabelsCSV(f *testing.F) {
	f.Add([]byte("file,label\na.jpg,0\nb.jpg,1\nc.png,2\n"), []byte{})
	f.Add([]byte("a.jpg,1\nb.jpg,2000000000\nc.png,abc\nd.txt,0\ne.jpg,-4\n"), []byte{})
	f.Add([]byte("a.jpg,0\r\n\r\nb.jpg , 1\r\n"), []byte("label,name\n0,cat\n1,dog\n"))
	f.Add([]byte("a.jpg,5\nb.jpg,1\n"), []byte("0,cat\n1,dog\n"))
	f.Add([]byte("a.jpg,0\n"), []byte("0,cat\n3000000000,dog\n"))
	f.Add([]byte("a.jpg,0\n"), []byte("0,cat\n1048575,dog\n"))
	f.Add([]byte("a.jpg,0,extra\n"), []byte{})
	f.Add([]byte("missing.jpg,0\n"), []byte{})
	f.Add([]byte("a.jpg,0\nb.jpg,1\n./a.jpg,1\n"), []byte{})
	f.Add([]byte("a.jpg,0\n../a.jpg,0\n/etc/passwd,1\n"), []byte{})
	f.Add([]byte{}, []byte{})
	root := f.TempDir()
	for name, data := range map[string]string{"a.jpg": "\xff\xd8\xff", "b.jpg": "\xff\xd8\xff", "c.png": "\x89PNG", "d.txt": "text", "e.jpg": ""} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if real, err := os.ReadFile(filepath.Join(shareddata.Root(), "imagenet-sample", "labels.csv")); err == nil {
		synsets, _ := os.ReadFile(filepath.Join(shareddata.Root(), "imagenet-sample", "synsets.csv"))
		f.Add(real, synsets)
		for _, l := range strings.Split(string(real), "\n")[1:] {
			if name, _, ok := strings.Cut(l, ","); ok && !strings.ContainsAny(name, "/\\") {
				os.WriteFile(filepath.Join(root, name), []byte{0xff, 0xd8}, 0o644)
			}
		}
	}
	csvDir := f.TempDir()
	f.Fuzz(func(t *testing.T, labels, classes []byte) {
		labelsPath := filepath.Join(csvDir, "labels.csv")
		classesPath := filepath.Join(csvDir, "classes.csv")
		os.WriteFile(labelsPath, labels, 0o644)
		os.WriteFile(classesPath, classes, 0o644)
		opts := []Option{WithLabels(labelsPath)}
		if len(classes) > 0 {
			opts = append(opts, WithClassNames(classesPath))
		}
		checkBoundedAlloc(t, fuzzAllocLimit(len(labels)+len(classes)), func() {
			src, err := OpenFolder(t.Context(), root, opts...)
			if err != nil {
				return // a missing file, a line without two fields, a bad classes CSV
			}
			// One sample per line that is not blank and not a header.
			rows := 0
			for n, l := range strings.Split(string(labels), "\n") {
				_, label, _ := strings.Cut(strings.TrimSpace(l), ",")
				if _, err := strconv.Atoi(strings.TrimSpace(label)); strings.TrimSpace(l) != "" && (n > 0 || err == nil) {
					rows++
				}
			}
			if src.Len() != rows {
				t.Fatalf("%d samples from %d lines", src.Len(), rows)
			}
			// Each a distinct file under the folder.
			seen := map[string]bool{}
			for _, name := range src.files {
				if !filepath.IsLocal(name) || seen[filepath.Clean(name)] {
					t.Fatalf("sample %q: outside the folder, or named twice", name)
				}
				seen[filepath.Clean(name)] = true
			}
			checkSkipAll(t, src, -1)
		})
	})
}

// FuzzLabelsJSON fuzzes an image folder's JSON labels file, read for a
// label and multi-labels: it opens or is refused, never panics, allocates
// within bounds, and every sample it yields is a distinct file under the
// folder with its multi-labels below the field's classes.
func FuzzLabelsJSON(f *testing.F) {
	f.Add([]byte(`[{"file": "a.jpg", "label": 0, "labels": [1, 2]}, {"file": "b.jpg", "label": 1}]`))
	f.Add([]byte("{\"a.jpg\": {\"label\": 0, \"labels\": null},\n\"b.jpg\": {\"label\": \"x\", \"labels\": [9]}}"))
	f.Add([]byte(`[{"file": "a.jpg", "label": 0}, {"file": "./a.jpg", "label": 1}, {"file": "../x.jpg"}]`))
	f.Add([]byte(`[{"file": "c.png", "labels": [-1, 1e3, "2", [3]]}, null, 7]`))
	f.Add([]byte(`{"a.jpg": 3}`))
	f.Add([]byte(`[`))
	root := f.TempDir()
	for _, name := range []string{"a.jpg", "b.jpg", "c.png"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("\xff\xd8\xff"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	dir := f.TempDir()
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Label}, {Kind: fields.Labels, Classes: 4}}}
	f.Fuzz(func(t *testing.T, labels []byte) {
		p := filepath.Join(dir, "labels.json")
		os.WriteFile(p, labels, 0o644)
		checkBoundedAlloc(t, fuzzAllocLimit(len(labels)), func() {
			src, err := OpenFolder(t.Context(), root, WithLabels(p), WithFields(schema))
			if err != nil {
				return
			}
			seen := map[string]bool{}
			var rec Record
			for i, name := range src.files {
				if !filepath.IsLocal(name) || seen[filepath.Clean(name)] {
					t.Fatalf("sample %q: outside the folder, or named twice", name)
				}
				seen[filepath.Clean(name)] = true
				if src.Read(i, &rec) != nil {
					continue
				}
				for _, l := range rec.Fields[2].Ints {
					if l < 0 || l >= 4 {
						t.Fatalf("sample %q: multi-label %d, want 0..3", name, l)
					}
				}
			}
			checkSkipAll(t, src, -1)
		})
	})
}
