package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/source/remote"
	"go.uber.org/goleak"
)

// TestRemoteFingerprint: a WebDataset over S3 reads what the local shard
// holds; its fingerprint (which keys the augmentation cache) names the
// URL and ETag, so a changed object gives a new fingerprint and new
// samples, and records' errors name the URL.
func TestRemoteFingerprint(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	dir := t.TempDir()
	png := "\x89PNG\r\n\x1a\nfake"
	v1 := writeTar(t, filepath.Join(dir, "a.tar"), map[string]string{"0.png": png, "0.cls": "1", "1.png": png, "1.cls": "x"}, []string{"0.png", "0.cls", "1.png", "1.cls"})
	srv.Put(t, "data", "a.tar", v1)
	rem := &Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey}),
		Cache: &remote.Cache{Dir: t.TempDir()}}
	open := func() (*WebDataset, string) {
		t.Helper()
		w, err := OpenWebDataset(t.Context(), "s3://data/a.tar", WithRemote(rem), WithIndexDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		fp, _ := w.Fingerprint()
		return w, fp
	}
	w, fp1 := open()
	var rec Record
	if err := w.Read(0, &rec); err != nil || string(rec.Enc) != png || rec.Label != 1 || !strings.HasPrefix(rec.Path, "s3://data/a.tar:") {
		t.Fatalf("sample 0: %q label %d path %s, %v", rec.Enc, rec.Label, rec.Path, err)
	}
	if c := w.Corrupt(); len(c) != 1 || c[0].File != "s3://data/a.tar" || !errors.Is(c[0], ErrLabel) {
		t.Fatalf("corrupt %v; want sample 1's label, naming the URL", c)
	}
	if _, fp := open(); fp != fp1 {
		t.Fatalf("fingerprint %s, then %s for the same object", fp1, fp)
	}
	srv.Put(t, "data", "a.tar", writeTar(t, filepath.Join(dir, "b.tar"), map[string]string{"0.png": png, "0.cls": "2"}, []string{"0.png", "0.cls"}))
	w2, fp2 := open()
	if fp2 == fp1 || w2.Len() != 1 {
		t.Fatalf("changed object: fingerprint %s (was %s), %d samples", fp2, fp1, w2.Len())
	}
	if err := w2.Read(0, &rec); err != nil || rec.Label != 2 {
		t.Fatalf("changed object: label %d, %v", rec.Label, err)
	}
}

// TestRemoteCancel: cancelling the context while a shard is fetched (from
// a slow HTTP server) stops the open at once with the context's error and
// leaves no shard half written.
func TestRemoteCancel(t *testing.T) {
	const size = 10 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		if r.Method == http.MethodHead {
			return
		}
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	rem := &Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: cache}}
	defer rem.Store.Close()
	ctx, cancel := context.WithCancel(t.Context())
	rem.Progress = func(done, total int64) {
		if done > 0 {
			cancel()
		}
	}
	start := time.Now()
	_, err := OpenWebDataset(ctx, srv.URL+"/a.tar", WithRemote(rem), WithIndexDir(t.TempDir()))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), srv.URL+"/a.tar") {
		t.Fatalf("%v; want context.Canceled naming the URL", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("cache holds %s after a cancelled fetch", e.Name())
		}
	}
}

// TestRemoteWebDatasetIndexKept: a URL shard's member index is stored in
// the index directory, so a later open reads it instead of walking the
// shard: a label changed in the stored index is the label read; without
// the index, the walk finds the shard's.
func TestRemoteWebDatasetIndexKept(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after every other cleanup: no fetch or connection outlives the opens
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	png := "\x89PNG\r\n\x1a\nfake"
	srv.Put(t, "data", "a.tar", writeTar(t, filepath.Join(t.TempDir(), "a.tar"), map[string]string{"0.png": png, "0.cls": "1", "1.png": png, "1.cls": "2"}, []string{"0.png", "0.cls", "1.png", "1.cls"}))
	cache, index := t.TempDir(), t.TempDir()
	rem := &Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey}),
		Cache: &remote.Cache{Dir: cache}}
	open := func() *WebDataset {
		t.Helper()
		w, err := OpenWebDataset(t.Context(), "s3://data/a.tar", WithRemote(rem), WithIndexDir(index))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	label := func(w *WebDataset) int {
		t.Helper()
		var rec Record
		if err := w.Read(1, &rec); w.Len() != 2 || len(w.Corrupt()) != 0 || err != nil || string(rec.Enc) != png {
			t.Fatalf("%d samples, corrupt %v, sample 1 %q, %v", w.Len(), w.Corrupt(), rec.Enc, err)
		}
		return rec.Label
	}
	if l := label(open()); l != 2 {
		t.Fatalf("sample 1: label %d, want 2", l)
	}
	saved, _ := filepath.Glob(filepath.Join(index, "a.tar-*.wdsindex"))
	if len(saved) != 1 {
		t.Fatalf("index files %v", saved)
	}
	b, err := os.ReadFile(saved[0])
	if err != nil || !strings.Contains(string(b), `"l":2,`) {
		t.Fatalf("stored index %s (%v) holds no label 2", b, err)
	}
	if err := os.WriteFile(saved[0], []byte(strings.Replace(string(b), `"l":2,`, `"l":0,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := label(open()); l != 0 {
		t.Fatalf("from the stored index, edited: label %d, want 0", l)
	}
	os.Remove(saved[0])
	if l := label(open()); l != 2 {
		t.Fatalf("walking the shard again: label %d, want 2", l)
	}
}
