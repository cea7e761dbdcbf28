package remote_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// TestHTTP reads objects from a plain HTTP server: HEAD gives sizes and
// ETags, braces name many, a transfer cut mid-body is resumed with a Range
// request, a missing file is ErrNotFound naming the URL.
func TestHTTP(t *testing.T) {
	files := map[string][]byte{}
	for i := range 3 {
		files[fmt.Sprintf("/shard-%d.tar", i)] = randomBytes(200_000+i, uint64(10+i))
	}
	var cut bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, len(b)))
		if cut && r.Method == http.MethodGet && r.Header.Get("Range") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.WriteHeader(http.StatusOK)
			w.Write(b[:50_000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(b))
	}))
	defer srv.Close()
	s := remote.New(remote.Options{Backoff: time.Millisecond})
	defer s.Close()
	objs, err := s.List(t.Context(), srv.URL+"/shard-{0..2}.tar")
	if err != nil || len(objs) != 3 {
		t.Fatalf("%v, %v", objs, err)
	}
	cut = true
	for i, o := range objs {
		name := fmt.Sprintf("/shard-%d.tar", i)
		if o.URL != srv.URL+name || o.Size != int64(len(files[name])) || o.ETag != fmt.Sprint(len(files[name])) {
			t.Fatalf("object %d: %+v", i, o)
		}
		p := make([]byte, 1000)
		if err := s.ReadAt(t.Context(), o, p, 123); err != nil || !bytes.Equal(p, files[name][123:1123]) {
			t.Fatalf("%s: ReadAt: %v", o.URL, err)
		}
		before := remote.Totals().Retries
		got, err := readAll(t, s, t.Context(), o)
		if err != nil || !bytes.Equal(got, files[name]) {
			t.Fatalf("%s: %d bytes, %v", o.URL, len(got), err)
		}
		if remote.Totals().Retries == before {
			t.Fatalf("%s: read whole without the resumption the cut needs", o.URL)
		}
	}
	_, err = s.List(t.Context(), srv.URL+"/shard-{2..3}.tar")
	if !errors.Is(err, remote.ErrNotFound) || !strings.Contains(err.Error(), srv.URL+"/shard-3.tar") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestHTTPQuery reads a presigned URL: the '?' of its query is not a glob,
// and the query goes with every request.
func TestHTTPQuery(t *testing.T) {
	data := randomBytes(100_000, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/a.tar" || !strings.HasPrefix(r.URL.Query().Get("X-Amz-Signature"), "s1g") {
			http.Error(w, "AccessDenied", http.StatusForbidden)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	s := remote.New(remote.Options{Backoff: time.Millisecond})
	defer s.Close()
	u := srv.URL + "/a.tar?X-Amz-Expires=60&X-Amz-Signature=s1g"
	objs, err := s.List(t.Context(), u)
	if err != nil || len(objs) != 1 || objs[0].URL != u || objs[0].Size != int64(len(data)) {
		t.Fatalf("%+v, %v", objs, err)
	}
	got, err := readAll(t, s, t.Context(), objs[0])
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	if !remote.HasGlob(srv.URL+"/shard-*.tar?sig=x") || remote.HasGlob(u) {
		t.Fatal("HasGlob takes the query of an http URL for a glob, or misses one before it")
	}

	// Through the shard cache: the signature is in no file name, and the
	// same object under a rotated signature is a hit.
	c := &remote.Cache{Dir: t.TempDir()}
	fetch := func(u string) bool {
		p, hit, got := fetchOne(t, s, c, u)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, not the object's", p, len(got))
		}
		return hit
	}
	if fetch(u) {
		t.Fatal("a hit in an empty cache")
	}
	names, _ := filepath.Glob(filepath.Join(c.Dir, "*"))
	for _, n := range names {
		if strings.Contains(n, "s1g") {
			t.Fatalf("the cache wrote the signature into %s", n)
		}
	}
	if !fetch(srv.URL + "/a.tar?X-Amz-Date=20261127T000000Z&X-Amz-Expires=60&X-Amz-Signature=s1g-signed-again") {
		t.Fatal("the object signed again (another date, another signature) was not a hit")
	}
}

// TestHTTPQueryNamesTheObject: parameters that are not a signature name
// the object (?key=a, ?key=b): through the shard cache each reads its own
// bytes, even of the same size from a server with neither ETag nor
// Last-Modified, which hides them in messages as it hides a signature.
func TestHTTPQueryNamesTheObject(t *testing.T) {
	objs := map[string][]byte{"a": bytes.Repeat([]byte("a"), 5000), "b": bytes.Repeat([]byte("b"), 5000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := objs[r.URL.Query().Get("key")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method != http.MethodHead {
			w.Write(b)
		}
	}))
	defer srv.Close()
	s := remote.New(remote.Options{Backoff: time.Millisecond})
	defer s.Close()
	c := &remote.Cache{Dir: t.TempDir()}
	for _, k := range []string{"a", "b", "a"} {
		_, _, got := fetchOne(t, s, c, srv.URL+"/get?key="+k)
		if !bytes.Equal(got, objs[k]) {
			t.Fatalf("?key=%s: the cache gave %q…", k, got[:5])
		}
	}
}

// TestReadEmptyBuffer: a Read into an empty buffer returns at once, as
// io.Reader allows, rather than waiting on a body that gives it nothing.
func TestReadEmptyBuffer(t *testing.T) {
	data := randomBytes(10_000, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	s := remote.New(remote.Options{Backoff: time.Millisecond})
	defer s.Close()
	objs, err := s.List(t.Context(), srv.URL+"/x.tar")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(t.Context(), objs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1)) // the transfer under way
		if err == nil {
			_, err = r.Read(nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Read into an empty buffer did not return")
	}
}
