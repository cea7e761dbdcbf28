package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/source/remote"
)

// fastStore is a store of short settings for servers that misbehave.
func fastStore(endpoint string, o remote.Options) *remote.Store {
	o.Endpoint = endpoint
	o.PathStyle = true
	if o.AccessKey == "" {
		o.AccessKey, o.SecretKey = "key", "secret"
	}
	o.Backoff = time.Millisecond
	if o.RetryFor == 0 {
		o.RetryFor = 300 * time.Millisecond
	}
	return remote.New(o)
}

// quick runs f, which must end with an error within 15 s (a few on an
// idle machine; the bounds that fail are 20 s and more), and returns the
// error and the retries the store made meanwhile.
func quick(t *testing.T, f func(ctx context.Context) error) (error, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	before, start := remote.Totals().Retries, time.Now()
	err := f(ctx)
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	if err == nil {
		t.Fatal("no error")
	}
	return err, remote.Totals().Retries - before
}

// TestWrongAnswers: an HTTP server whose answers are not what was asked
// for (another range, another length, a 200 to a ranged request, another
// version) is refused, the error naming the URL, what was asked for and
// what came; no byte of a wrong answer reaches the caller, and a transfer
// resumed from such a server gives only the right bytes before its error.
func TestWrongAnswers(t *testing.T) {
	data := randomBytes(100_000, 5)
	modified := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var fault atomic.Value // func(w, r) bool: answered
	var ifMatch, ifUnmodified atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tagged" && r.Method == http.MethodGet {
			ifMatch.Store(r.Header.Get("If-Match"))
		} else if r.Method == http.MethodGet {
			ifUnmodified.Store(r.Header.Get("If-Unmodified-Since"))
		}
		if f, _ := fault.Load().(func(http.ResponseWriter, *http.Request) bool); f != nil && r.Method == http.MethodGet && f(w, r) {
			return
		}
		if r.URL.Path == "/tagged" {
			w.Header().Set("ETag", `"v1"`)
		}
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		r.Header.Del("If-Match") // as a server that ignores it would
		r.Header.Del("If-Unmodified-Since")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	s := fastStore("", remote.Options{})
	defer s.Close()
	tagged, err := s.Stat(t.Context(), srv.URL+"/tagged")
	if err != nil || tagged.ETag != "v1" || tagged.Size != int64(len(data)) {
		t.Fatalf("%+v, %v", tagged, err)
	}
	untagged, err := s.Stat(t.Context(), srv.URL+"/untagged")
	if err != nil || untagged.ETag != "" || !untagged.LastModified.Equal(modified) {
		t.Fatalf("%+v, %v", untagged, err)
	}
	// An object known by its size alone (a server with neither ETag nor
	// Last-Modified): an answer of another size is another version.
	bare := remote.Object{URL: srv.URL + "/bare", Size: int64(len(data))}
	answer := func(status int, hdr map[string]string, body []byte) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			for k, v := range hdr {
				w.Header().Set(k, v)
			}
			if _, ok := hdr["Content-Length"]; !ok {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			w.WriteHeader(status)
			w.Write(body)
			return true
		}
	}
	n := strconv.Itoa(len(data))
	for _, c := range []struct {
		name  string
		obj   remote.Object
		fault func(http.ResponseWriter, *http.Request) bool
		is    error
		holds string
		once  bool // fails without a retry
	}{
		{"206 of another range", tagged, answer(206, map[string]string{"ETag": `"v1"`, "Content-Range": "bytes 0-99/" + n}, data[:100]),
			remote.ErrRetries, `asked for bytes 1000-1099 of ` + n + `, the answer (206) holds Content-Range "bytes 0-99/` + n + `"`, false},
		{"206 of another total", tagged, answer(206, map[string]string{"ETag": `"v1"`, "Content-Range": "bytes 1000-1099/200000"}, data[1000:1100]),
			remote.ErrRetries, `"bytes 1000-1099/200000"`, false},
		{"short 206", tagged, answer(206, map[string]string{"ETag": `"v1"`, "Content-Range": "bytes 1000-1099/" + n}, data[1000:1050]),
			remote.ErrRetries, "the answer (206) has Content-Length 50", false},
		{"200 to a ranged request", tagged, answer(200, map[string]string{"ETag": `"v1"`}, data),
			nil, "ignores Range requests", true},
		{"another ETag", tagged, answer(206, map[string]string{"ETag": `"v2"`, "Content-Range": "bytes 1000-1099/" + n}, data[1000:1100]),
			remote.ErrChanged, "the object changed (ETag v2, was v1)", true},
		{"another size, no version", bare, answer(206, map[string]string{"Content-Range": "bytes 1000-1099/200000"}, data[1000:1100]),
			remote.ErrChanged, "the object changed (its size is 200000, was " + n + ")", true},
		{"another Last-Modified", untagged, answer(206, map[string]string{"Last-Modified": modified.Add(time.Hour).Format(http.TimeFormat),
			"Content-Range": "bytes 1000-1099/" + n}, data[1000:1100]),
			remote.ErrChanged, "the object changed (Last-Modified", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fault.Store(c.fault)
			defer fault.Store((func(http.ResponseWriter, *http.Request) bool)(nil))
			p := bytes.Repeat([]byte{0xEE}, 100)
			err, retries := quick(t, func(ctx context.Context) error { return s.ReadAt(ctx, c.obj, p, 1000) })
			if (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.holds) || !strings.Contains(err.Error(), c.obj.URL) {
				t.Fatalf("error %v; want %v naming %s holding %q", err, c.is, c.obj.URL, c.holds)
			}
			if c.once && retries != 0 {
				t.Errorf("%d retries of what cannot pass", retries)
			}
			if !bytes.Equal(p, bytes.Repeat([]byte{0xEE}, 100)) {
				t.Fatal("bytes of a wrong answer reached the caller")
			}
		})
	}
	if v, _ := ifMatch.Load().(string); v != `"v1"` {
		t.Errorf("a GET of an object with an ETag sent If-Match %q", v)
	}
	fault.Store((func(http.ResponseWriter, *http.Request) bool)(nil))
	if err := s.ReadAt(t.Context(), untagged, make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := ifUnmodified.Load().(string); v != modified.Format(http.TimeFormat) {
		t.Errorf("a GET of an object with no ETag sent If-Unmodified-Since %q", v)
	}

	// A whole read cut short is resumed; a resumption answered with
	// another range fails, and what the reader gave is the object's start.
	t.Run("resumed into another range", func(t *testing.T) {
		fault.Store(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Range") == "" {
				w.Header().Set("ETag", `"v1"`)
				w.Header().Set("Content-Length", n)
				w.Write(data[:30_000])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
			return answer(206, map[string]string{"ETag": `"v1"`, "Content-Range": "bytes 0-69999/" + n}, data[:70_000])(w, r)
		})
		defer fault.Store((func(http.ResponseWriter, *http.Request) bool)(nil))
		var got []byte
		err, _ := quick(t, func(ctx context.Context) error {
			var err error
			got, err = readAll(t, s, ctx, tagged)
			return err
		})
		if !errors.Is(err, remote.ErrRetries) || !strings.Contains(err.Error(), "asked for bytes 30000-99999") {
			t.Fatalf("error %v", err)
		}
		if !bytes.Equal(got, data[:len(got)]) || len(got) != 30_000 {
			t.Fatalf("the reader gave %d bytes, not the object's first 30000", len(got))
		}
	})

	// A whole-object GET must be the object's size.
	t.Run("200 of another length", func(t *testing.T) {
		fault.Store(answer(200, map[string]string{"ETag": `"v1"`}, data[:90_000]))
		defer fault.Store((func(http.ResponseWriter, *http.Request) bool)(nil))
		var got []byte
		err, _ := quick(t, func(ctx context.Context) error {
			var err error
			got, err = readAll(t, s, ctx, tagged)
			return err
		})
		if !strings.Contains(err.Error(), "Content-Length 90000") || len(got) != 0 {
			t.Fatalf("%d bytes, error %v", len(got), err)
		}
	})
}

// TestS3WrongRange: an S3 server (through the proxy) that answers a
// resumed read with another range than asked for is refused: minio-go
// takes any 206, so the store checks Content-Range itself.
func TestS3WrongRange(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	data := randomBytes(2<<20, 9)
	srv.Put(t, "data", "a.tar", data)
	p, url := newProxy(t, srv.Endpoint)
	s := store(url, remote.Options{RetryFor: 300 * time.Millisecond})
	objs, err := s.List(t.Context(), "s3://data/a.tar")
	if err != nil {
		t.Fatal(err)
	}
	p.shiftRange.Store(4096)
	defer p.shiftRange.Store(0)
	buf := bytes.Repeat([]byte{0xEE}, 1000)
	err, _ = quick(t, func(ctx context.Context) error { return s.ReadAt(ctx, objs[0], buf, 5000) })
	if !errors.Is(err, remote.ErrRetries) || !strings.Contains(err.Error(), "asked for bytes 5000-5999 of 2097152") ||
		!strings.Contains(err.Error(), `"bytes 9096-10095/2097152"`) || !strings.Contains(err.Error(), "s3://data/a.tar") {
		t.Fatalf("error %v", err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{0xEE}, 1000)) {
		t.Fatal("bytes of a wrong answer reached the caller")
	}
}

// listServer is an S3 endpoint whose bucket "b" lists as page says: the
// XML of each page, given its number (from 0) and the continuation token
// asked for.
func listServer(t *testing.T, page func(w io.Writer, n int, token string)) (*httptest.Server, *atomic.Int32) {
	var pages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("list-type") {
			http.Error(w, "<Error><Code>NotImplemented</Code></Error>", http.StatusNotImplemented)
			return
		}
		n := int(pages.Add(1)) - 1
		w.Header().Set("Content-Type", "application/xml")
		page(w, n, r.URL.Query().Get("continuation-token"))
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv, &pages
}

func listPage(keys []string, next string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix><KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>%v</IsTruncated>`, len(keys), next != "")
	for _, k := range keys {
		fmt.Fprintf(&b, `<Contents><Key>%s</Key><LastModified>2025-01-01T00:00:00.000Z</LastModified><ETag>"e"</ETag><Size>1</Size></Contents>`, k)
	}
	if next != "" {
		fmt.Fprintf(&b, `<NextContinuationToken>%s</NextContinuationToken>`, next)
	}
	b.WriteString(`</ListBucketResult>`)
	return b.String()
}

// TestListBounds: a listing that never ends — pages that always say "more",
// a continuation token that repeats, an XML body that never ends, pages
// that come too slowly — fails with ErrLimit naming the listing, in
// bounded time and memory; before, it was followed for as long as the
// server went on.
func TestListBounds(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     remote.Options
		page  func(w io.Writer, n int, token string)
		holds string
		most  int32 // pages the client may ask for
	}{
		{"more keys every page", remote.Options{MaxListKeys: 2500}, func(w io.Writer, n int, _ string) {
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = fmt.Sprintf("k-%d-%d", n, i)
			}
			io.WriteString(w, listPage(keys, fmt.Sprint("t", n)))
		}, "more than 2500 keys", 3},
		{"empty pages without end", remote.Options{MaxListKeys: 1000}, func(w io.Writer, n int, _ string) {
			io.WriteString(w, listPage(nil, fmt.Sprint("t", n)))
		}, "more than 100 pages", 100},
		{"a token that repeats", remote.Options{}, func(w io.Writer, n int, _ string) {
			io.WriteString(w, listPage([]string{fmt.Sprint("k", n)}, fmt.Sprint("t", n%3)))
		}, "page 5 repeats a continuation token", 4},
		{"a body that never ends", remote.Options{}, func(w io.Writer, n int, _ string) {
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>`)
			filler := []byte(strings.Repeat("x", 64<<10))
			for range 2000 { // 128 MiB at most
				if _, err := w.Write(filler); err != nil {
					return
				}
			}
		}, "a page of more than 32 MiB", 1},
		{"pages too slow", remote.Options{ListTimeout: 300 * time.Millisecond}, func(w io.Writer, n int, _ string) {
			time.Sleep(50 * time.Millisecond)
			io.WriteString(w, listPage([]string{fmt.Sprint("k", n)}, fmt.Sprint("t", n)))
		}, "the listing took longer than 0.3 s", 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, pages := listServer(t, c.page)
			s := fastStore(srv.URL, c.o)
			defer s.Close()
			err, retries := quick(t, func(ctx context.Context) error {
				_, err := s.List(ctx, "s3://bucket/*.tar")
				return err
			})
			if !errors.Is(err, remote.ErrLimit) || !strings.Contains(err.Error(), c.holds) || !strings.Contains(err.Error(), "s3://bucket/*.tar") {
				t.Fatalf("error %v; want ErrLimit naming the listing and holding %q", err, c.holds)
			}
			if retries != 0 || pages.Load() > c.most {
				t.Fatalf("%d pages, %d retries", pages.Load(), retries)
			}
		})
	}
}

// waitFor polls remote.Waits until one for u satisfies ok, for at most
// 10 s.
func waitFor(t *testing.T, u string, ok func(remote.Wait) bool) remote.Wait {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, w := range remote.Waits() {
			if w.URL == u && ok(w) {
				return w
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Waits never showed %s as wanted: %v", u, remote.Waits())
	return remote.Wait{}
}

// TestSilentEndpoint: an endpoint that accepts connections and never
// answers shows in Waits as "waiting for … no answer for …" while it
// waits, and the request fails after RetryFor naming the URL, the endpoint
// and the time; before, ResponseHeaderTimeout was the body's 60 s idle
// timeout, retried 7 times, silently.
func TestSilentEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
	endpoint := "http://" + ln.Addr().String()
	s := fastStore(endpoint, remote.Options{ConnectTimeout: 200 * time.Millisecond, RetryFor: time.Second})
	defer s.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Stat(t.Context(), "s3://bucket/key.tar")
		done <- err
	}()
	w := waitFor(t, "s3://bucket/key.tar", func(w remote.Wait) bool { return w.Failures == 0 && w.For > 50*time.Millisecond })
	if want := "waiting for s3://bucket/key.tar at " + endpoint + ": no answer for "; !strings.HasPrefix(w.String(), want) ||
		!strings.HasSuffix(w.String(), "(retrying until 1 s)") {
		t.Errorf("notice %q; want %q…", w, want)
	}
	w = waitFor(t, "s3://bucket/key.tar", func(w remote.Wait) bool { return w.Failures > 0 })
	if !strings.HasPrefix(w.String(), "retrying s3://bucket/key.tar at "+endpoint+" for ") {
		t.Errorf("notice %q", w)
	}
	var got error
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no end")
	}
	d := time.Since(start)
	if !errors.Is(got, remote.ErrRetries) || !strings.Contains(got.Error(), "s3://bucket/key.tar: retries exhausted: no answer from "+endpoint+" in 1") {
		t.Fatalf("error %v", got)
	}
	if d < time.Second || d > 5*time.Second {
		t.Errorf("gave up after %v; RetryFor is 1 s", d)
	}
	for _, w := range remote.Waits() {
		if w.URL == "s3://bucket/key.tar" {
			t.Errorf("still in Waits after it failed: %v", w)
		}
	}

	// A budget below the default ConnectTimeout (10 s) bounds the one
	// attempt it has room for.
	short := fastStore(endpoint, remote.Options{RetryFor: 300 * time.Millisecond})
	defer short.Close()
	start = time.Now()
	_, err = short.Stat(t.Context(), "s3://bucket/key.tar")
	if d := time.Since(start); d > 5*time.Second || !errors.Is(err, remote.ErrRetries) || !strings.Contains(err.Error(), "(1 attempt)") {
		t.Errorf("with RetryFor 300 ms: gave up after %v with %v; want about 300 ms, after 1 attempt", d, err)
	}
}

// flaky is a listener that, while down, resets every connection it
// accepts (a server restarting behind its load balancer).
type flaky struct {
	net.Listener
	down  atomic.Bool
	reset atomic.Int32
}

func (l *flaky) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.down.Load() {
			return c, err
		}
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		l.reset.Add(1)
	}
}

// TestServerRestart: a server that resets every connection for a while
// (more than the 6-13 s the old count of retries lasted, in proportion)
// and then comes back is retried until it does, within RetryFor, and the
// read gives the object's bytes, also where it broke mid-transfer; with
// the server down past RetryFor, the error names the URL and the time.
func TestServerRestart(t *testing.T) {
	data := randomBytes(300_000, 11)
	var cut atomic.Bool
	fl := &flaky{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if cut.Load() && r.Header.Get("Range") == "" && r.Method == http.MethodGet {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:100_000])
			w.(http.Flusher).Flush()
			fl.down.Store(true) // the server goes down mid-transfer
			panic(http.ErrAbortHandler)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	fl.Listener = srv.Listener
	srv.Listener = fl
	srv.Start()
	defer srv.Close()
	u := srv.URL + "/a.tar"
	s := fastStore("", remote.Options{RetryFor: 10 * time.Second})
	defer s.Close()
	obj, err := s.Stat(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cut  bool
	}{{"down at the first request", false}, {"down mid-transfer", true}} {
		t.Run(c.name, func(t *testing.T) {
			s.Close() // no connection kept from before
			cut.Store(c.cut)
			fl.down.Store(!c.cut)
			resets := fl.reset.Load()
			type result struct {
				b   []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				b, err := readAll(t, s, t.Context(), obj)
				done <- result{b, err}
			}()
			w := waitFor(t, u, func(w remote.Wait) bool { return w.Failures >= 8 }) // past the 7 attempts the store made before
			if !strings.Contains(w.String(), "retrying "+u) {
				t.Errorf("notice %q", w)
			}
			cut.Store(false)
			fl.down.Store(false)
			r := <-done
			if r.err != nil || !bytes.Equal(r.b, data) {
				t.Fatalf("%d bytes, %v", len(r.b), r.err)
			}
			if fl.reset.Load()-resets < 3 {
				t.Fatalf("%d connections reset", fl.reset.Load()-resets)
			}
		})
	}
	t.Run("down past RetryFor", func(t *testing.T) {
		short := fastStore("", remote.Options{RetryFor: 300 * time.Millisecond})
		defer short.Close()
		fl.down.Store(true)
		defer fl.down.Store(false)
		err, _ := quick(t, func(ctx context.Context) error { _, err := readAll(t, short, ctx, obj); return err })
		if !errors.Is(err, remote.ErrRetries) || !strings.Contains(err.Error(), u+": retries exhausted after 0.3") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestFailFast: what retrying cannot mend fails at once, with its reason:
// a redirect to a file:// URL, a redirect loop, an S3 redirect (which says
// where to, where it said "302 302 Found: 302 Found"), an invalid bucket
// name, s3:///key and s3:/x, 403 AccessDenied, a TLS certificate the
// client does not trust, an https endpoint assumed for a plain HTTP
// server. Each was retried for 10-13 s before.
func TestFailFast(t *testing.T) {
	var requests atomic.Int32
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer web.Close()
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case strings.HasPrefix(r.URL.Path, "/moved/"):
			w.Header().Set("Location", "http://elsewhere.example/login")
			w.WriteHeader(http.StatusFound)
		default:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		}
	}))
	defer s3.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer tlsSrv.Close()
	store := fastStore(s3.URL, remote.Options{RetryFor: 10 * time.Second})
	for _, c := range []struct {
		name, pattern string
		s             *remote.Store
		is            error
		holds         string
		requests      int32
	}{
		{"redirect to file://", web.URL + "/to-file", store, nil, "redirected to file:///etc/passwd, which is not an http(s) URL", 1},
		{"redirect loop", web.URL + "/loop", store, nil, "redirected more than 10 times (a loop?)", 10},
		{"S3 redirect", "s3://moved/a.tar", store, nil,
			"s3://moved/a.tar: 302 Found: the S3 endpoint redirects to http://elsewhere.example/login, which the store does not follow for S3", 1},
		{"S3 redirect of a listing", "s3://moved/*.tar", store, nil, "redirects to http://elsewhere.example/login", 1},
		{"invalid bucket name", "s3://a/b.tar", store, remote.ErrBadURL, "bucket name \"a\"", 0},
		{"no bucket", "s3:///key", store, remote.ErrBadURL, "no bucket", 0},
		{"one slash", "s3:/x", store, remote.ErrBadURL, "an s3 URL is s3://bucket/key", 0},
		{"403", "s3://bucket/a.tar", store, remote.ErrDenied, "403 AccessDenied", 1},
		{"403 listing", "s3://bucket/*.tar", store, remote.ErrDenied, "403 AccessDenied", 1},
		{"TLS certificate", tlsSrv.URL + "/a.tar", store, nil, "certificate signed by unknown authority", 0},
		{"https assumed", "s3://bucket/a.tar", fastStore(strings.TrimPrefix(web.URL, "http://"), remote.Options{RetryFor: 10 * time.Second}), nil,
			"at https://" + strings.TrimPrefix(web.URL, "http://") + " (https assumed: the endpoint names no scheme)", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := requests.Load()
			err, retries := quick(t, func(ctx context.Context) error { _, err := c.s.List(ctx, c.pattern); return err })
			if (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.holds) || errors.Is(err, remote.ErrRetries) {
				t.Fatalf("error %v; want %v holding %q", err, c.is, c.holds)
			}
			if n := requests.Load() - before; retries != 0 || n != c.requests {
				t.Fatalf("%d requests, %d retries; want %d, none", n, retries, c.requests)
			}
		})
	}
}

// TestNoCredentials: with no credentials anywhere in the chain, requests
// go unsigned, and the 403 that follows says so.
func TestNoCredentials(t *testing.T) {
	home := t.TempDir()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close() // the container credentials endpoint refuses at once
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ACCESS_KEY": "", "AWS_SECRET_KEY": "",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "HOME": home, "AWS_SHARED_CREDENTIALS_FILE": home + "/none", "AWS_CONFIG_FILE": home + "/none",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://" + closed.Addr().String() + "/creds"} {
		t.Setenv(k, v)
	}
	var signed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		signed.Store(r.Header.Get("Authorization") != "")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}))
	defer srv.Close()
	s := remote.New(remote.Options{Endpoint: srv.URL, PathStyle: true, Backoff: time.Millisecond})
	err, _ = quick(t, func(ctx context.Context) error { _, err := s.List(ctx, "s3://bucket/a.tar"); return err })
	if !errors.Is(err, remote.ErrDenied) || !strings.Contains(err.Error(), "no credentials were found") ||
		!strings.Contains(err.Error(), "the request was sent unsigned") || signed.Load() {
		t.Fatalf("error %v (signed %v)", err, signed.Load())
	}
	t.Log(err)
}
