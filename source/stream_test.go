package source

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// streamServer serves n WebDataset shards of 4 samples (a .jpg of 64 KiB
// and a .cls) over HTTP, counting GETs and ranged GETs; once stall is set,
// a GET sends its headers and then nothing until the client goes.
func streamServer(t *testing.T, n int) (srv *httptest.Server, stall *atomic.Bool, gets, ranged *atomic.Int64) {
	t.Helper()
	shards := map[string][]byte{}
	for s := range n {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := range 4 {
			key := fmt.Sprintf("%03d-%d", s, i)
			img := bytes.Repeat([]byte{byte(s), byte(i)}, 32<<10)
			tw.WriteHeader(&tar.Header{Name: key + ".jpg", Mode: 0o644, Size: int64(len(img)), Typeflag: tar.TypeReg})
			tw.Write(img)
			tw.WriteHeader(&tar.Header{Name: key + ".cls", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte{'0' + byte(i)})
		}
		tw.Close()
		shards[fmt.Sprintf("/shard-%d.tar", s)] = b.Bytes()
	}
	stall, gets, ranged = &atomic.Bool{}, &atomic.Int64{}, &atomic.Int64{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := shards[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, len(b)+len(r.URL.Path)))
		if r.Method == http.MethodGet {
			gets.Add(1)
			if r.Header.Get("Range") != "" {
				ranged.Add(1)
			}
		}
		if stall.Load() && r.Method == http.MethodGet {
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return srv, stall, gets, ranged
}

// TestStreamStopEndsFetches: streamed shards (a cache of 2 of 8) read on
// an epoch's order, each fetched once; a sample read long after the rest
// of its shard comes by a ranged GET once the shard is let go; when the
// server stalls, the stop that ends the epoch (Ctrl-C) ends the fetches
// and a read waiting for one at once, with no idle timeout to wait out.
func TestStreamStopEndsFetches(t *testing.T) {
	srv, stall, gets, ranged := streamServer(t, 8)
	rem := &Remote{Store: remote.New(remote.Options{IdleTimeout: time.Hour, Concurrency: 2}),
		Cache: &remote.Cache{Dir: t.TempDir(), Limit: 2 * (4*(64<<10+1024) + 1024)}}
	defer rem.Store.Close()
	w, err := OpenWebDataset(t.Context(), srv.URL+"/shard-{0..7}.tar", WithRemote(rem), WithIndexDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.stream == nil || w.Len() != 32 {
		t.Fatalf("streamed %v, %d samples; want a stream of 32", w.stream != nil, w.Len())
	}
	// An epoch in shard order: every sample, each shard's fetched once.
	order := make([]int, w.Len())
	for i := range order {
		order[i] = i
	}
	before := gets.Load()
	stop, err := w.ReadAhead(func() []int { return order })
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	for _, i := range order {
		if err := w.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Label != i%4 || rec.Enc[0] != byte(i/4) {
			t.Fatalf("sample %d: label %d, first byte %d", i, rec.Label, rec.Enc[0])
		}
	}
	stop()
	if n := gets.Load() - before; n < 6 || n > 8 || ranged.Load() != 0 {
		t.Errorf("an epoch over 8 shards with 2 in the cache made %d GETs, %d of them ranged; want 6 to 8, none ranged", n, ranged.Load())
	}

	// The first sample read last, as a shuffle buffer may keep it: its
	// shard is let go to make room, and it takes a ranged GET.
	late := append(append([]int(nil), order[1:]...), 0)
	if stop, err = w.ReadAhead(func() []int { return late }); err != nil {
		t.Fatal(err)
	}
	for _, i := range late {
		if err := w.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Label != i%4 || rec.Enc[0] != byte(i/4) || len(rec.Enc) != 64<<10 {
			t.Fatalf("sample %d: label %d, first byte %d, %d bytes", i, rec.Label, rec.Enc[0], len(rec.Enc))
		}
	}
	stop()
	if ranged.Load() != 1 {
		t.Errorf("%d ranged GETs; want 1, for the sample read after its shard was let go", ranged.Load())
	}

	// The server stalls; an epoch starts and a read waits for its shard.
	stall.Store(true)
	stop, err = w.ReadAhead(func() []int { return order })
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		var rec Record
		for _, i := range order {
			if err := w.Read(i, &rec); err != nil {
				read <- err
				return
			}
		}
		read <- nil
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	stop()
	select {
	case err := <-read:
		if err == nil || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("the waiting read: %v; want an error naming the shard's URL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting for a stalled fetch did not end within 5 s of stop")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stop took %v to end a stalled fetch", d)
	}

	// A full shuffle's order is refused.
	rev := make([]int, w.Len())
	for i := range rev {
		rev[i] = (i * 7) % w.Len()
	}
	stall.Store(false)
	if _, err := w.ReadAhead(func() []int { return rev }); err == nil || !strings.Contains(err.Error(), "buffer=") || errors.Is(err, ErrDownload) {
		t.Errorf("a full shuffle: %v; want it refused, naming buffer=, not as a download failure", err)
	}
}
