package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// plainServer serves objects over HTTP (HEAD, GET, Range) as a plain web
// server might: no ETag, the Last-Modified each is given (none if zero),
// and conditional requests not honoured, so a changed object's new bytes
// come back whatever the client asks. set replaces an object.
func plainServer(t *testing.T) (srv *httptest.Server, set func(path string, b []byte, modified time.Time)) {
	t.Helper()
	type object struct {
		data     []byte
		modified time.Time
	}
	var mu sync.Mutex
	objs := map[string]object{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		o, ok := objs[r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		for _, h := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range"} {
			r.Header.Del(h)
		}
		http.ServeContent(w, r, r.URL.Path, o.modified, bytes.NewReader(o.data))
	}))
	t.Cleanup(srv.Close)
	return srv, func(path string, b []byte, modified time.Time) {
		mu.Lock()
		objs[path] = object{b, modified}
		mu.Unlock()
	}
}

// sample is what a source's Read gives of a sample.
type sample struct {
	image string
	label int
}

func (s sample) String() string {
	return fmt.Sprintf("{%d bytes ending %q, label %d}", len(s.image), s.image[max(len(s.image)-1, 0):], s.label)
}

// readSource is a source whose samples readAll reads.
type readSource interface {
	Len() int
	Read(i int, rec *Record) error
	Close() error
}

// readAll reads every sample of src in order.
func readAll(src readSource) ([]sample, error) {
	var out []sample
	var rec Record
	for i := range src.Len() {
		if err := src.Read(i, &rec); err != nil {
			return out, err
		}
		out = append(out, sample{string(rec.Enc), rec.Label})
	}
	return out, nil
}

// wdsBytes is a WebDataset shard of samples, an image of 16 bytes per
// unit of size, and a label, each.
func wdsBytes(t *testing.T, samples []sample) []byte {
	t.Helper()
	members := map[string]string{}
	var order []string
	for i, s := range samples {
		members[fmt.Sprintf("%d.png", i)], members[fmt.Sprintf("%d.cls", i)] = s.image, fmt.Sprint(s.label)
		order = append(order, fmt.Sprintf("%d.png", i), fmt.Sprintf("%d.cls", i))
	}
	return writeTar(t, filepath.Join(t.TempDir(), "s.tar"), members, order)
}

// tfBytes is a TFRecord file of samples.
func tfBytes(samples []sample) []byte {
	var out []byte
	for _, s := range samples {
		out = append(out, tfFrame(tfExample(int64(s.label), []byte(s.image)))...)
	}
	return out
}

// TestRemoteIndexFollowsBytes: over HTTP without ETags, a WebDataset shard
// or TFRecord file replaced by bytes of the same length is read as the new
// bytes, never through the index of the old: with a new Last-Modified, the
// shard cache fetches it again and its index is made again (a new version);
// with the same Last-Modified and the shard cache lost, the stored index,
// made from other bytes than those fetched, is made again.
func TestRemoteIndexFollowsBytes(t *testing.T) {
	png := func(c byte, n int) string { return "\x89PNG" + strings.Repeat(string(c), n) }
	// Three versions of equal length: the samples move and change label.
	versions := [][]sample{
		{{png('a', 300), 0}, {png('b', 600), 1}},
		{{png('c', 300), 1}, {png('d', 600), 0}},
		{{png('e', 600), 0}, {png('f', 300), 1}},
	}
	day := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, format := range []struct {
		name  string
		bytes func([]sample) []byte
		open  func(ctx context.Context, url string, opts ...Option) (readSource, error)
	}{
		{"webdataset", func(s []sample) []byte { return wdsBytes(t, s) },
			func(ctx context.Context, url string, opts ...Option) (readSource, error) {
				return OpenWebDataset(ctx, url, opts...)
			}},
		{"tfrecord", tfBytes,
			func(ctx context.Context, url string, opts ...Option) (readSource, error) {
				return OpenTFRecord(ctx, url, opts...)
			}},
	} {
		t.Run(format.name, func(t *testing.T) {
			srv, set := plainServer(t)
			index, cache, lost := t.TempDir(), t.TempDir(), t.TempDir()
			for k, step := range []struct {
				what     string
				modified time.Time
				cache    string
			}{
				{"first", day, cache},
				{"replaced with a new Last-Modified", day.Add(time.Hour), cache},
				{"replaced with the same Last-Modified, the shard cache lost", day.Add(time.Hour), lost},
			} {
				b := format.bytes(versions[k])
				if k > 0 && len(b) != len(format.bytes(versions[0])) {
					t.Fatalf("version %d is %d bytes, not the first's %d", k, len(b), len(format.bytes(versions[0])))
				}
				set("/s.bin", b, step.modified)
				rem := &Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: step.cache}}
				src, err := format.open(t.Context(), srv.URL+"/s.bin", WithRemote(rem), WithIndexDir(index))
				if err != nil {
					t.Fatalf("%s: %v", step.what, err)
				}
				got, err := readAll(src)
				src.Close()
				rem.Store.Close()
				if err != nil || fmt.Sprint(got) != fmt.Sprint(versions[k]) {
					t.Fatalf("%s: read %v (%v); want the new bytes' samples %v", step.what, got, err, versions[k])
				}
			}
		})
	}
}

// TestStreamObjectChanged: a streamed epoch over an HTTP object (no ETag,
// conditional requests not honoured) replaced since its index was made by
// bytes of the same length and Last-Modified, fetched again as the epoch
// comes to it, fails with an error that says the object changed
// (remote.ErrChanged), never handing out samples read through the old
// index; the next open makes the index again and reads the new bytes.
func TestStreamObjectChanged(t *testing.T) {
	png := func(c byte, n int) string { return "\x89PNG" + strings.Repeat(string(c), n) }
	srv, set := plainServer(t)
	day := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	shard := func(s int, c byte) []sample {
		return []sample{{png(c, 3000), 0}, {png(c+1, 6000), 1}, {png(c+2, 900), s % 2}}
	}
	var size int64
	for s := range 4 {
		b := wdsBytes(t, shard(s, 'a'))
		set(fmt.Sprintf("/shard-%d.tar", s), b, day)
		size = int64(len(b))
	}
	index := t.TempDir()
	rem := &Remote{Store: remote.New(remote.Options{Concurrency: 2}), Cache: &remote.Cache{Dir: t.TempDir(), Limit: 2 * size}}
	defer rem.Store.Close()
	open := func() *WebDataset {
		t.Helper()
		w, err := OpenWebDataset(t.Context(), srv.URL+"/shard-{0..3}.tar", WithRemote(rem), WithIndexDir(index))
		if err != nil {
			t.Fatal(err)
		}
		if w.stream == nil {
			t.Fatal("4 shards through a cache of 2 do not stream")
		}
		return w
	}
	epoch := func(w *WebDataset) ([]sample, error) {
		t.Helper()
		order := make([]int, w.Len())
		for i := range order {
			order[i] = i
		}
		stop, err := w.ReadAhead(func() []int { return order })
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		return readAll(w)
	}
	w := open()
	if _, err := epoch(w); err != nil {
		t.Fatal(err)
	}
	w.Close()

	w = open()
	changed := wdsBytes(t, []sample{{png('x', 6000), 1}, {png('y', 3000), 0}, {png('z', 900), 1}})
	if int64(len(changed)) != size {
		t.Fatalf("the new shard is %d bytes, not %d", len(changed), size)
	}
	set("/shard-0.tar", changed, day)
	got, err := epoch(w)
	w.Close()
	if !errors.Is(err, remote.ErrChanged) || !strings.Contains(err.Error(), srv.URL+"/shard-0.tar: the object changed since its index was made") ||
		!strings.Contains(err.Error(), "start again to re-index it") {
		t.Fatalf("epoch over a changed shard: %v; want an error saying the object changed", err)
	}
	if len(got) != 0 {
		t.Fatalf("%d samples handed out before the error; the changed shard is read first", len(got))
	}

	w = open()
	defer w.Close()
	got, err = epoch(w)
	want := []sample{{png('x', 6000), 1}, {png('y', 3000), 0}, {png('z', 900), 1}}
	if err != nil || fmt.Sprint(got[:3]) != fmt.Sprint(want) {
		t.Fatalf("opened again: %v (%v); want the new bytes' samples %v", got, err, want)
	}
}

// TestRemoteIndexInTheWay: a directory where a URL shard's stored index, or
// a gzipped shard's plain copy, belongs is removed and the file made in
// its place, rather than failing or walking the shard on every open.
func TestRemoteIndexInTheWay(t *testing.T) {
	srv, set := plainServer(t)
	png := "\x89PNG\r\n\x1a\nfake"
	set("/a.tar", wdsBytes(t, []sample{{png, 0}, {png, 1}}), time.Time{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(wdsBytes(t, []sample{{png, 1}, {png, 0}}))
	zw.Close()
	set("/b.tar.gz", gz.Bytes(), time.Time{})
	rem := &Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: t.TempDir()}}
	defer rem.Store.Close()
	index := t.TempDir()
	open := func(t *testing.T) {
		t.Helper()
		w, err := OpenWebDataset(t.Context(), srv.URL+"/{a.tar,b.tar.gz}", WithRemote(rem), WithIndexDir(index))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if got, err := readAll(w); err != nil || len(got) != 4 {
			t.Fatalf("read %v, %v", got, err)
		}
	}
	open(t)
	for _, pattern := range []string{"a.tar-*.wdsindex", "b.tar.gz-*.tar"} {
		t.Run(pattern, func(t *testing.T) {
			found, _ := filepath.Glob(filepath.Join(index, pattern))
			if len(found) != 1 {
				t.Fatalf("index directory holds %v for %s", found, pattern)
			}
			os.Remove(found[0])
			if err := os.MkdirAll(filepath.Join(found[0], "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
			open(t)
			if st, err := os.Stat(found[0]); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("%s: %v, %v; want the file made again", found[0], st, err)
			}
		})
	}
}
