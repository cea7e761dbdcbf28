package remote_test

import (
	"bytes"
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

// object is what objectServer serves at a path.
type object struct {
	data     []byte
	modified time.Time // zero: no Last-Modified
	etag     string    // "": no ETag
}

// objectServer serves objects over HTTP (HEAD, GET, Range) with the
// Last-Modified and ETag each is given; set replaces one.
func objectServer(t *testing.T) (srv *httptest.Server, set func(path string, o object)) {
	t.Helper()
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
		if o.etag != "" {
			w.Header().Set("ETag", `"`+o.etag+`"`)
		}
		http.ServeContent(w, r, r.URL.Path, o.modified, bytes.NewReader(o.data))
	}))
	t.Cleanup(srv.Close)
	return srv, func(path string, o object) {
		mu.Lock()
		objs[path] = o
		mu.Unlock()
	}
}

// fetchOne lists u, fetches it through c, and returns the cached file's
// path, whether it was a hit, and its bytes.
func fetchOne(t *testing.T, s *remote.Store, c *remote.Cache, u string) (string, bool, []byte) {
	t.Helper()
	objs, err := s.List(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	p, hit, release, err := c.Fetch(t.Context(), s, objs[0])
	if err != nil {
		t.Fatal(err)
	}
	release()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, hit, b
}

// TestCacheDamagedShard: a byte flipped in a cached shard is found by its
// checksum when the shard is next asked for: the shard is fetched again,
// the damage counted and said once, naming the file, and the bytes handed
// out are the object's. A shard with no checksum beside it (cached before
// checksums were kept) is fetched again, not trusted.
func TestCacheDamagedShard(t *testing.T) {
	srv, set := objectServer(t)
	want := randomBytes(300_000, 1)
	set("/a.tar", object{data: want, modified: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), etag: "v1"})
	s := remote.New(remote.Options{})
	defer s.Close()
	var warned []string
	c := &remote.Cache{Dir: t.TempDir(), Warn: func(msg string) { warned = append(warned, msg) }}
	p, hit, got := fetchOne(t, s, c, srv.URL+"/a.tar")
	if hit || !bytes.Equal(got, want) {
		t.Fatalf("first fetch: hit %v, bytes equal %v", hit, bytes.Equal(got, want))
	}
	if _, hit, _ := fetchOne(t, s, c, srv.URL+"/a.tar"); !hit {
		t.Fatal("second fetch missed")
	}

	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{want[150_000] ^ 0x20}, 150_000)
	f.Close()
	before := remote.DamagedShards()
	p2, hit, got := fetchOne(t, s, c, srv.URL+"/a.tar")
	if hit || p2 != p || !bytes.Equal(got, want) {
		t.Fatalf("after a byte flipped: hit %v, path %s (was %s), bytes equal %v; want the shard fetched again", hit, p2, p, bytes.Equal(got, want))
	}
	if n := remote.DamagedShards() - before; n != 1 {
		t.Errorf("%d damaged shards counted, want 1", n)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "shard cache: "+p+" ") || !strings.Contains(warned[0], "was damaged (checksum") ||
		!strings.HasSuffix(warned[0], "fetched again") {
		t.Errorf("warnings %q; want one naming %s as damaged and fetched again", warned, p)
	}
	if _, hit, _ := fetchOne(t, s, c, srv.URL+"/a.tar"); !hit {
		t.Error("the shard fetched again missed the cache after")
	}

	sums, _ := filepath.Glob(filepath.Join(c.Dir, "*.sum"))
	if len(sums) != 1 {
		t.Fatalf("checksum files %v, want one", sums)
	}
	os.Remove(sums[0])
	if _, hit, got := fetchOne(t, s, c, srv.URL+"/a.tar"); hit || !bytes.Equal(got, want) {
		t.Fatalf("a shard without its checksum: hit %v, bytes equal %v; want it fetched again", hit, bytes.Equal(got, want))
	}
	if _, err := os.Stat(sums[0]); err != nil {
		t.Errorf("the checksum was not written again: %v", err)
	}
	if len(warned) != 1 {
		t.Errorf("warnings %q: a missing checksum is not damage", warned)
	}
}

// TestCacheLastModified: over HTTP without an ETag, an object replaced by
// bytes of the same length with a new Last-Modified is a new version: the
// cache fetches it again rather than handing out the old bytes.
func TestCacheLastModified(t *testing.T) {
	srv, set := objectServer(t)
	day := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1, v2 := randomBytes(10_000, 2), randomBytes(10_000, 3)
	set("/a.tar", object{data: v1, modified: day})
	s := remote.New(remote.Options{})
	defer s.Close()
	c := &remote.Cache{Dir: t.TempDir()}
	if _, hit, got := fetchOne(t, s, c, srv.URL+"/a.tar"); hit || !bytes.Equal(got, v1) {
		t.Fatalf("first fetch: hit %v, bytes equal %v", hit, bytes.Equal(got, v1))
	}
	set("/a.tar", object{data: v2, modified: day.Add(time.Hour)})
	if _, hit, got := fetchOne(t, s, c, srv.URL+"/a.tar"); hit || !bytes.Equal(got, v2) {
		t.Fatalf("replaced with a new Last-Modified: hit %v, new bytes %v; want the new version fetched", hit, bytes.Equal(got, v2))
	}
	if files, _ := filepath.Glob(filepath.Join(c.Dir, "*-a.tar")); len(files) != 1 {
		t.Errorf("cache holds %v, want the new version only", files)
	}
}

// TestCacheInTheWay: a directory where a cached shard, its checksum or its
// lock file belongs is removed, and the shard fetched into its place.
func TestCacheInTheWay(t *testing.T) {
	srv, set := objectServer(t)
	want := randomBytes(5_000, 4)
	set("/a.tar", object{data: want, etag: "v1"})
	s := remote.New(remote.Options{})
	defer s.Close()
	c := &remote.Cache{Dir: t.TempDir()}
	p, _, _ := fetchOne(t, s, c, srv.URL+"/a.tar")
	base := filepath.Base(p)
	sum := filepath.Join(c.Dir, base[:33]+".sum")
	lock := filepath.Join(c.Dir, base[:16]+".lock")
	for _, q := range []string{p, sum, lock} {
		if _, err := os.Stat(q); err != nil {
			t.Fatalf("the cache has no %s: %v", q, err)
		}
	}
	for _, q := range []string{p, sum, lock} {
		t.Run(filepath.Ext(q), func(t *testing.T) {
			os.Remove(q)
			if err := os.MkdirAll(filepath.Join(q, "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, _, got := fetchOne(t, s, c, srv.URL+"/a.tar"); !bytes.Equal(got, want) {
				t.Fatal("read other bytes than the object's")
			}
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("%s: %v, %v; want the shard", p, st, err)
			}
		})
	}
}

// TestCacheHitStampsTheChecksum: a hit renews the LRU stamp on the
// shard's checksum file and leaves the shard's own modification time as
// it was written, so that a hit in one process does not make another,
// which checked the shard before, read it again.
func TestCacheHitStampsTheChecksum(t *testing.T) {
	srv, set := objectServer(t)
	set("/a.tar", object{data: randomBytes(10_000, 2), etag: "v1"})
	s := remote.New(remote.Options{})
	defer s.Close()
	c := &remote.Cache{Dir: t.TempDir()}
	p, _, _ := fetchOne(t, s, c, srv.URL+"/a.tar")
	sums, _ := filepath.Glob(filepath.Join(c.Dir, "*.sum"))
	if len(sums) != 1 {
		t.Fatalf("checksum files %v, want one", sums)
	}
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(sums[0], old, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, hit, _ := fetchOne(t, s, c, srv.URL+"/a.tar"); !hit {
		t.Fatal("second fetch missed")
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("a hit moved the shard's modification time from %v to %v", before.ModTime(), after.ModTime())
	}
	if st, err := os.Stat(sums[0]); err != nil || !st.ModTime().After(old) {
		t.Errorf("a hit left the checksum file's time at %v (%v): the LRU stamp was not renewed", st.ModTime(), err)
	}
}
