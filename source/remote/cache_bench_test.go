package remote

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkCacheReopen measures what checking cached shards costs a run
// that opens them again from the cache (8 shards of 32 MiB, in the page
// cache): "checked" is the first open in a process, which reads each
// shard whole to check its checksum; "remembered" a later open of the
// same files in the process; "read" reading the shards whole, as an epoch
// does, for scale.
func BenchmarkCacheReopen(b *testing.B) {
	const shards, size = 8, 32 << 20
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+r.URL.Path+`"`)
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	s := New(Options{})
	defer s.Close()
	c := &Cache{Dir: b.TempDir()}
	var objs []Object
	for i := range shards {
		o, err := s.Stat(b.Context(), fmt.Sprintf("%s/shard-%d.tar", srv.URL, i))
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, o)
	}
	open := func(b *testing.B, read bool) {
		for _, o := range objs {
			f, _, err := c.Open(b.Context(), s, o)
			if err != nil {
				b.Fatal(err)
			}
			if read {
				if _, err := io.Copy(io.Discard, f); err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
		}
	}
	open(b, true) // fetched, and in the page cache
	for _, m := range []struct {
		name   string
		forget bool
		read   bool
	}{{"checked", true, false}, {"remembered", false, false}, {"read", false, true}} {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(shards * size)
			for b.Loop() {
				if m.forget {
					verified.Lock()
					clear(verified.m)
					verified.Unlock()
				}
				open(b, m.read)
			}
		})
	}
}
