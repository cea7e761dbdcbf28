package source

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protowire"
)

// cancelAt is a context that cancels itself at its n-th poll (a call of Err
// or Done; n = 0 never), so a test can stop a constructor at a chosen point
// of its work without depending on timing. each, if set, runs at every poll
// before that poll's answer is decided.
type cancelAt struct {
	context.Context
	cancel   context.CancelFunc
	n        int64
	each     func(poll int64)
	polls    atomic.Int64
	canceled time.Time
}

func newCancelAt(t *testing.T, n int64, each func(poll int64)) *cancelAt {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &cancelAt{Context: ctx, cancel: cancel, n: n, each: each}
}

func (c *cancelAt) poll() {
	p := c.polls.Add(1)
	if c.each != nil {
		c.each(p)
	}
	if p == c.n {
		c.canceled = time.Now()
		c.cancel()
	}
}

func (c *cancelAt) Err() error            { c.poll(); return c.Context.Err() }
func (c *cancelAt) Done() <-chan struct{} { c.poll(); return c.Context.Done() }

// dirNames lists dir, sorted; a missing dir is empty.
func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// checkCancel checks that open, which keeps its caches in dir, can be
// cancelled anywhere in its work.
//
// An open run to the end is watched first. It must look at its context at
// least 4 times, and at least twice in each stage, a stage being a stretch
// of polls during which dir holds the same files (the last stage holding
// the files the open ends with): no stretch of the work ignores the context.
//
// Then an open whose context is cancelled beforehand must write nothing,
// and opens cancelled at polls spread over the work, the middle of every
// stage among them, must fail with context.Canceled within a second and at
// most 3 further polls, leaving in dir only files the complete open wrote,
// byte for byte: never a part of one.
func checkCancel(t *testing.T, open func(ctx context.Context, dir string) error) {
	t.Helper()
	ref := t.TempDir()
	var listings [][]string // dir's names at each poll
	count := newCancelAt(t, 0, func(int64) { listings = append(listings, dirNames(ref)) })
	if err := open(count, ref); err != nil {
		t.Fatal(err)
	}
	polls := int64(len(listings))
	if polls < 4 {
		t.Fatalf("the open looked at its context %d times: it cannot stop part-way", polls)
	}
	whole := map[string][]byte{}
	for _, name := range dirNames(ref) {
		b, err := os.ReadFile(filepath.Join(ref, name))
		if err != nil {
			t.Fatal(err)
		}
		whole[name] = b
	}
	// Stages: what dir holds, with the names of files being written
	// replaced by "partial".
	type stage struct {
		files       string
		first, last int64 // polls, from 1
	}
	var stages []stage
	for i, names := range listings {
		for j, n := range names {
			if _, ok := whole[n]; !ok {
				names[j] = "partial"
			}
		}
		files := strings.Join(names, " ")
		if k := len(stages) - 1; k >= 0 && stages[k].files == files {
			stages[k].last = int64(i) + 1
		} else {
			stages = append(stages, stage{files, int64(i) + 1, int64(i) + 1})
		}
	}
	at := []int64{1, polls - 1, polls}
	for _, s := range stages {
		if s.last == s.first {
			t.Errorf("while the index directory holds [%s], the open looks at its context once", s.files)
		}
		at = append(at, (s.first+s.last)/2)
	}
	if final := strings.Join(dirNames(ref), " "); stages[len(stages)-1].files != final {
		t.Errorf("once the index directory holds [%s], the open no longer looks at its context", final)
	}
	for i := range int64(8) {
		at = append(at, 1+i*(polls-1)/7)
	}
	slices.Sort(at)
	at = slices.Compact(at)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	if err := open(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: %v", err)
	}
	if left := dirNames(dir); len(left) != 0 {
		t.Errorf("with a cancelled context, the open wrote %v", left)
	}

	for _, n := range at {
		dir := t.TempDir()
		ctx := newCancelAt(t, n, nil)
		err := open(ctx, dir)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled at poll %d of %d: %v", n, polls, err)
			continue
		}
		if d := time.Since(ctx.canceled); d > time.Second {
			t.Errorf("cancelled at poll %d of %d: returned after %v", n, polls, d)
		}
		if more := ctx.polls.Load() - n; more > 3 {
			t.Errorf("cancelled at poll %d of %d: went on to poll %d more times", n, polls, more)
		}
		for _, name := range dirNames(dir) {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			if w, ok := whole[name]; !ok || !bytes.Equal(b, w) {
				t.Errorf("cancelled at poll %d of %d: left %s (%d bytes), not a whole file", n, polls, name, len(b))
			}
		}
	}
	t.Logf("%d polls in %d stages; cancelled at %v", polls, len(stages), at)
}

// tfExample is a serialised tf.train.Example with an int64 image/class/label
// and a bytes image/encoded.
func tfExample(label int64, image []byte) []byte {
	bytesField := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	entry := func(key string, feature []byte) []byte {
		return bytesField(1, append(bytesField(1, []byte(key)), bytesField(2, feature)...))
	}
	labels := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(label))
	feats := append(entry("image/class/label", bytesField(3, labels)), entry("image/encoded", bytesField(1, bytesField(1, image)))...)
	return bytesField(1, feats)
}

// tfRecords is a TFRecord file of n records holding size random bytes of
// image each, labels 0..9.
func tfRecords(n, size int) []byte {
	r := rand.NewChaCha8([32]byte{1})
	img := make([]byte, size)
	var out []byte
	for i := range n {
		r.Read(img)
		data := tfExample(int64(i%10), img)
		head := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
		out = append(out, head...)
		out = binary.LittleEndian.AppendUint32(out, maskedCRC(head))
		out = append(out, data...)
		out = binary.LittleEndian.AppendUint32(out, maskedCRC(data))
	}
	return out
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTFRecordCancel: opening an 8 MiB TFRecord file, plain or GZIP, stops
// on cancellation while decompressing, indexing or reading labels, and
// leaves in the index directory no part of a decompressed copy or index.
func TestTFRecordCancel(t *testing.T) {
	plain := tfRecords(4096, 2000)
	for name, data := range map[string][]byte{"big.tfrecord": plain, "big.tfrecord.gz": gzipBytes(t, plain)} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			checkCancel(t, func(ctx context.Context, dir string) error {
				src, err := OpenTFRecord(ctx, file, WithIndexDir(dir))
				if err == nil {
					if src.Len() != 4096 {
						t.Errorf("%d records, want 4096", src.Len())
					}
					src.Close()
				}
				return err
			})
		})
	}
}

// bigShard is a tar shard of n samples, each a .png of size random bytes
// and a .cls label.
func bigShard(t *testing.T, n, size int) []byte {
	t.Helper()
	r := rand.NewChaCha8([32]byte{2})
	img := make([]byte, size)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		r.Read(img)
		for _, m := range []struct {
			ext  string
			data []byte
		}{{"png", img}, {"cls", []byte(fmt.Sprint(i % 10))}} {
			hdr := &tar.Header{Name: fmt.Sprintf("%05d.%s", i, m.ext), Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			tw.Write(m.data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWebDatasetCancel: opening a 5 MiB shard, plain or gzipped, stops on
// cancellation while decompressing or walking the members, and leaves in
// the index directory no part of a decompressed copy.
func TestWebDatasetCancel(t *testing.T) {
	shard := bigShard(t, 1000, 4000)
	for name, data := range map[string][]byte{"big.tar": shard, "big.tar.gz": gzipBytes(t, shard)} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			checkCancel(t, func(ctx context.Context, dir string) error {
				w, err := OpenWebDataset(ctx, file, WithIndexDir(dir))
				if err == nil {
					if w.Len() != 1000 || len(w.Corrupt()) != 0 {
						t.Errorf("%d samples, corrupt %v", w.Len(), w.Corrupt())
					}
					w.Close()
				}
				return err
			})
		})
	}
}

// TestFolderCancel: listing a folder, by class directories or by a labels
// CSV, stops on cancellation.
func TestFolderCancel(t *testing.T) {
	root := t.TempDir()
	var csv strings.Builder
	for c := range 3 {
		dir := filepath.Join(root, fmt.Sprint("class", c))
		os.Mkdir(dir, 0o755)
		for i := range 5 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i, ".jpg")), []byte{0xff}, 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&csv, "class%d/%d.jpg,%d\n", c, i, c)
		}
	}
	labels := filepath.Join(t.TempDir(), "labels.csv")
	if err := os.WriteFile(labels, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]Option{"classes": nil, "labels": {WithLabels(labels)}} {
		t.Run(name, func(t *testing.T) {
			checkCancel(t, func(ctx context.Context, _ string) error {
				f, err := OpenFolder(ctx, root, opts...)
				if err == nil && f.Len() != 15 {
					t.Errorf("%d files, want 15", f.Len())
				}
				return err
			})
		})
	}
}

// TestCIFARArchiveCancel: reading a 7 MiB CIFAR-10 archive stops on
// cancellation.
func TestCIFARArchiveCancel(t *testing.T) {
	files := fakeCIFAR10(400)
	r := rand.NewChaCha8([32]byte{3})
	for _, name := range append(slices.Clone(cifar10.train), cifar10.test...) {
		b := files[name]
		for o := 0; o < len(b); o += 1 + cifarPixels {
			r.Read(b[o+1 : o+1+cifarPixels]) // incompressible pixels, labels kept
		}
	}
	archive := filepath.Join(t.TempDir(), "cifar-10-binary.tar.gz")
	if err := os.WriteFile(archive, tarGz(t, "cifar-10-batches-bin", files, sortedKeys(files)), 0o644); err != nil {
		t.Fatal(err)
	}
	checkCancel(t, func(ctx context.Context, _ string) error {
		_, err := OpenCIFAR10(ctx, archive, Train)
		return err
	})
}

// TestDownloadCancelStalled: a server that sends its headers and a few
// bytes and then nothing does not hold a download past cancellation: it
// fails with context.Canceled and leaves nothing in the cache directory,
// where the partial file was while it waited.
func TestDownloadCancelStalled(t *testing.T) {
	release := make(chan struct{})
	stop := sync.OnceFunc(func() { close(release) })
	first := []byte("\x1f\x8b\x08 and then nothing")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "170498071")
		w.Write(first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer stop()

	cache := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		once       sync.Once
		got        atomic.Int64
		partial    []string
		canceledAt time.Time
	)
	// Cancel 100ms after the first bytes arrive: the download is then
	// waiting in a read of the body.
	progress := func(done, total int64) {
		got.Store(done)
		once.Do(func() {
			time.AfterFunc(100*time.Millisecond, func() {
				partial = dirNames(cache)
				canceledAt = time.Now()
				cancel()
			})
		})
	}
	errc := make(chan error, 1)
	go func() {
		_, err := OpenCIFAR10(ctx, "", Train, WithDownload(cache), WithMirror(srv.URL+"/cifar-10-binary.tar.gz", md5sum(nil)),
			WithDownloadProgress(progress))
		errc <- err
	}()
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		stop() // let the server finish, so the download returns
		<-errc
		t.Fatal("the download was still waiting on the server 10s after it started")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(canceledAt); d > 2*time.Second {
		t.Errorf("returned %v after cancellation", d)
	}
	if got.Load() != int64(len(first)) || len(partial) != 1 {
		t.Errorf("when cancelled, %d bytes had arrived and the cache held %v: want %d bytes in one partial file", got.Load(), partial, len(first))
	}
	if left := dirNames(cache); len(left) != 0 {
		t.Errorf("the cancelled download left %v", left)
	}
}
