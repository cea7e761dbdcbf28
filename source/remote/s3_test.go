package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/source/remote"
	"go.uber.org/goleak"
)

func store(endpoint string, o remote.Options) *remote.Store {
	o.Endpoint = endpoint
	o.AccessKey, o.SecretKey = s3server.AccessKey, s3server.SecretKey
	o.PathStyle = true
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	return remote.New(o)
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readAll(t *testing.T, s *remote.Store, ctx context.Context, obj remote.Object) ([]byte, error) {
	t.Helper()
	r, err := s.Open(ctx, obj)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestS3ListStatRead: braces and globs list the right objects with sizes
// and ETags, and reads give their bytes.
func TestS3ListStatRead(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the server's cleanup
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	want := map[string][]byte{}
	for i := range 4 {
		key := fmt.Sprintf("train/shard-%03d.tar", i)
		want[key] = randomBytes(100_000+i, uint64(i))
		srv.Put(t, "data", key, want[key])
	}
	srv.Put(t, "data", "train/notes.txt", []byte("x"))
	s := store(srv.Endpoint, remote.Options{})
	defer s.Close()
	ctx := t.Context()
	for _, c := range []struct {
		pattern string
		keys    []string
	}{
		{"s3://data/train/shard-*.tar", []string{"000", "001", "002", "003"}},
		{"s3://data/train/shard-{001..002}.tar", []string{"001", "002"}},
		{"s3://data/train/shard-{003,000}.tar", []string{"003", "000"}},
		{"s3://data/train/shard-00[13].tar", []string{"001", "003"}},
	} {
		objs, err := s.List(ctx, c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if len(objs) != len(c.keys) {
			t.Fatalf("%s: %v", c.pattern, objs)
		}
		for i, o := range objs {
			key := "train/shard-" + c.keys[i] + ".tar"
			if o.URL != "s3://data/"+key || o.Size != int64(len(want[key])) || o.ETag == "" {
				t.Fatalf("%s: object %d is %+v, want %s", c.pattern, i, o, key)
			}
			got, err := readAll(t, s, ctx, o)
			if err != nil || !bytes.Equal(got, want[key]) {
				t.Fatalf("%s: read %d bytes, %v", o.URL, len(got), err)
			}
			// A ranged read: the start, the middle, the end.
			for _, r := range [][2]int{{0, 10}, {777, 4096}, {len(want[key]) - 5, 5}} {
				p := make([]byte, r[1])
				if err := s.ReadAt(ctx, o, p, int64(r[0])); err != nil || !bytes.Equal(p, want[key][r[0]:r[0]+r[1]]) {
					t.Fatalf("%s: ReadAt %d bytes at %d: %v", o.URL, r[1], r[0], err)
				}
			}
		}
	}
	if err := s.ReadAt(ctx, remote.Object{URL: "s3://data/train/notes.txt", Size: 1}, make([]byte, 2), 0); err == nil {
		t.Error("ReadAt past the end of an object: no error")
	}
}

// TestS3Errors: a missing bucket, key, or match, and bad credentials, each
// fail at once (no retries) with an error naming the URL and its kind.
func TestS3Errors(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	srv.Put(t, "data", "a.tar", []byte("hello"))
	s := store(srv.Endpoint, remote.Options{})
	bad := remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3server.AccessKey, SecretKey: "wrong", Backoff: time.Millisecond})
	for _, c := range []struct {
		s       *remote.Store
		pattern string
		is      error
		holds   string
	}{
		{s, "s3://nobucket/a.tar", remote.ErrNotFound, "s3://nobucket/a.tar"},
		{s, "s3://nobucket/*.tar", remote.ErrNotFound, "NoSuchBucket"},
		{s, "s3://data/b.tar", remote.ErrNotFound, "s3://data/b.tar"},
		{s, "s3://data/x-*.tar", remote.ErrNotFound, "no objects match"},
		{bad, "s3://data/a.tar", remote.ErrDenied, "s3://data/a.tar"},
		{bad, "s3://data/*.tar", remote.ErrDenied, "s3://data/*.tar"},
		{s, "https://example.invalid/x-*.tar", remote.ErrBadURL, "cannot be listed"},
	} {
		before := remote.Totals().Retries
		_, err := c.s.List(t.Context(), c.pattern)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.holds) {
			t.Errorf("%s: %v; want %v holding %q", c.pattern, err, c.is, c.holds)
		}
		if n := remote.Totals().Retries - before; n != 0 {
			t.Errorf("%s: %d retries of an error retrying cannot mend", c.pattern, n)
		}
	}
}

// TestCacheRefetchesChanged: a second fetch hits; a changed object (new
// ETag) is fetched again and the old copy removed.
func TestCacheRefetchesChanged(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	srv.Put(t, "data", "a.tar", []byte("version one"))
	s := store(srv.Endpoint, remote.Options{})
	c := &remote.Cache{Dir: t.TempDir()}
	fetch := func(wantHit bool, want string) {
		t.Helper()
		objs, err := s.List(t.Context(), "s3://data/a.tar")
		if err != nil {
			t.Fatal(err)
		}
		p, hit, release, err := c.Fetch(t.Context(), s, objs[0])
		if err != nil {
			t.Fatal(err)
		}
		release()
		b, _ := os.ReadFile(p)
		if hit != wantHit || string(b) != want {
			t.Fatalf("hit %v, %q; want %v, %q", hit, b, wantHit, want)
		}
	}
	fetch(false, "version one")
	fetch(true, "version one")
	srv.Put(t, "data", "a.tar", []byte("version two, longer"))
	fetch(false, "version two, longer")
	fetch(true, "version two, longer")
	if files, _ := filepath.Glob(filepath.Join(c.Dir, "*-a.tar")); len(files) != 1 {
		t.Fatalf("cache holds %v, want the new version only", files)
	}
}

// TestCacheSharedAndLRU: fetches of one shard at once (as ranks sharing a
// cache do) fetch it once; past Limit the least recently used go.
func TestCacheSharedAndLRU(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	for i := range 4 {
		srv.Put(t, "data", fmt.Sprintf("s%d.tar", i), randomBytes(1000, uint64(i)))
	}
	s := store(srv.Endpoint, remote.Options{})
	objs, err := s.List(t.Context(), "s3://data/s{0..3}.tar")
	if err != nil {
		t.Fatal(err)
	}
	c := &remote.Cache{Dir: t.TempDir(), Limit: 2500}
	var hits atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, hit, release, err := c.Fetch(t.Context(), s, objs[0])
			if err != nil {
				t.Error(err)
				return
			}
			release()
			if hit {
				hits.Add(1)
			}
		})
	}
	wg.Wait()
	if hits.Load() != 3 {
		t.Fatalf("%d of 4 concurrent fetches hit; want 3 (one fetch)", hits.Load())
	}
	for i := 1; i < 4; i++ {
		time.Sleep(10 * time.Millisecond) // distinct modification times
		if _, _, release, err := c.Fetch(t.Context(), s, objs[i]); err != nil {
			t.Fatal(err)
		} else {
			release()
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.Dir, "*.tar"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f)[34:])
	}
	if strings.Join(names, " ") != "s2.tar s3.tar" && strings.Join(names, " ") != "s3.tar s2.tar" {
		t.Fatalf("after 4 shards of 1000 bytes under a 2500-byte limit the cache holds %v; want s2 and s3", names)
	}
	if locks, _ := filepath.Glob(filepath.Join(c.Dir, "*.lock")); runtime.GOOS != "windows" && len(locks) != 2 {
		t.Errorf("%d lock files for 2 shards kept: evicted shards' lock files must go with them", len(locks))
	}

	// Under a limit that holds one shard, fetchers of all four at once
	// evict each other's shards and remove their lock files all along;
	// every one still reads its own bytes, whole.
	tight := &remote.Cache{Dir: t.TempDir(), Limit: 1500}
	for g := range 8 {
		wg.Go(func() {
			for k := range 25 {
				i := (g + k) % len(objs)
				p, _, release, err := tight.Fetch(t.Context(), s, objs[i])
				if err != nil {
					t.Error(err)
					return
				}
				fh, err := os.Open(p)
				release()
				if err != nil {
					t.Errorf("%s: %v", objs[i].URL, err)
					return
				}
				got, err := io.ReadAll(fh)
				fh.Close()
				if err != nil || !bytes.Equal(got, randomBytes(1000, uint64(i))) {
					t.Errorf("%s: read %d bytes (%v), not the object's", objs[i].URL, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// proxy stands between the client and the S3 server and misbehaves as
// told: 503s, connections cut after some body bytes, slow bodies, or a
// stall until the client gives up.
type proxy struct {
	target     string
	fail503    atomic.Int32 // answer this many more GETs with 503
	cutAfter   atomic.Int64 // cut GET bodies after this many bytes, when > 0 ...
	cuts       atomic.Int32 // ... this many more times
	slow       atomic.Bool  // send bodies in 4 KiB pieces 1 ms apart
	stall      atomic.Bool  // send headers, then nothing
	shiftRange atomic.Int64 // move a 206's Content-Range by this many bytes, its body as it is
	beforeCut  func()       // run before a cut, when set
	transport  *http.Transport
	requests   atomic.Int32
	stallStart chan struct{}
}

func newProxy(t *testing.T, target string) (*proxy, string) {
	p := &proxy{target: target, transport: &http.Transport{DisableCompression: true}, stallStart: make(chan struct{}, 100)}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		p.transport.CloseIdleConnections()
	})
	return p, srv.URL
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	isGet := r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && strings.Count(r.URL.Path, "/") > 1
	if isGet && p.fail503.Add(-1) >= 0 {
		http.Error(w, "<Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>", http.StatusServiceUnavailable)
		return
	}
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	out.Header = r.Header.Clone()
	out.Host = r.Host // what the client signed
	out.ContentLength = r.ContentLength
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if d := p.shiftRange.Load(); d != 0 && resp.StatusCode == http.StatusPartialContent {
		var a, b, total int64
		fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &a, &b, &total)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a+d, b+d, total))
	}
	w.WriteHeader(resp.StatusCode)
	if !isGet {
		io.Copy(w, resp.Body)
		return
	}
	if p.stall.Load() {
		w.(http.Flusher).Flush()
		p.stallStart <- struct{}{}
		<-r.Context().Done()
		return
	}
	limit := int64(-1)
	if n := p.cutAfter.Load(); n > 0 && p.cuts.Add(-1) >= 0 {
		limit = n
	}
	buf := make([]byte, 4096)
	var sent int64
	for {
		k, err := resp.Body.Read(buf)
		if limit >= 0 && sent+int64(k) > limit {
			w.Write(buf[:limit-sent])
			w.(http.Flusher).Flush()
			if p.beforeCut != nil {
				p.beforeCut()
			}
			panic(http.ErrAbortHandler) // the connection is cut, mid-body
		}
		w.Write(buf[:k])
		sent += int64(k)
		if p.slow.Load() {
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		if err != nil {
			return
		}
	}
}

// TestFaults reads one object through the proxy under each fault: the
// bytes come out whole after retries and resumption, or the error names
// the URL; nothing takes long.
func TestFaults(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	data := randomBytes(3<<20, 7)
	srv.Put(t, "data", "big.tar", data)
	p, url := newProxy(t, srv.Endpoint)
	// The answer's headers may take long on a loaded machine: only the
	// body's stall is the fault here.
	s := store(url, remote.Options{RetryFor: time.Second, IdleTimeout: 300 * time.Millisecond, ConnectTimeout: 10 * time.Second})
	objs, err := s.List(t.Context(), "s3://data/big.tar")
	if err != nil {
		t.Fatal(err)
	}
	obj := objs[0]
	run := func(name string, setup func(), wantErr string) {
		t.Run(name, func(t *testing.T) {
			setup()
			defer func() {
				p.fail503.Store(0)
				p.cuts.Store(0)
				p.cutAfter.Store(0)
				p.slow.Store(false)
				p.stall.Store(false)
			}()
			before := remote.Totals()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			got, err := readAll(t, s, ctx, obj)
			after := remote.Totals()
			if wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), obj.URL) {
					t.Fatalf("error %v; want one naming %s and holding %q", err, obj.URL, wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d of %d bytes, %v", len(got), len(data), err)
			}
			t.Logf("%d requests, %d retries", after.Requests-before.Requests, after.Retries-before.Retries)
		})
	}
	run("clean", func() {}, "")
	run("503 twice", func() { p.fail503.Store(2) }, "")
	run("503 always", func() { p.fail503.Store(100) }, "retries exhausted")
	run("cut mid-shard 3 times", func() { p.cutAfter.Store(1 << 20); p.cuts.Store(3) }, "")
	run("cut every time, progress each", func() { p.cutAfter.Store(300 << 10); p.cuts.Store(1000) }, "")
	run("slow", func() { p.slow.Store(true) }, "")
	run("stalled", func() { p.stall.Store(true) }, "no byte for")
	p.beforeCut = func() { srv.Put(t, "data", "big.tar", randomBytes(3<<20, 8)) }
	run("changed while read", func() { p.cutAfter.Store(1 << 20); p.cuts.Store(1) }, "changed while it was read")
}

// TestStallCancel: a read from a stalled server ends as soon as its
// context is cancelled (Ctrl-C), with the context's error, not after the
// idle timeout.
func TestStallCancel(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	srv.Put(t, "data", "a.tar", randomBytes(1<<20, 3))
	p, url := newProxy(t, srv.Endpoint)
	s := store(url, remote.Options{IdleTimeout: time.Hour})
	objs, err := s.List(t.Context(), "s3://data/a.tar")
	if err != nil {
		t.Fatal(err)
	}
	p.stall.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-p.stallStart
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err = readAll(t, s, ctx, objs[0])
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), objs[0].URL) {
		t.Fatalf("error %v; want context.Canceled naming the URL", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}
