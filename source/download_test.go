package source

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// silentListener accepts connections and never writes to them: a server
// that takes the request and never answers. The connections close when the
// test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String() + "/cifar-10-binary.tar.gz"
}

// stallingServer sends the headers of a large file and first bytes, then
// nothing until the test ends.
func stallingServer(t *testing.T, first int) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "170498071")
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, first))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL + "/cifar-10-binary.tar.gz"
}

// TestDownloadIdleTimeout: a server that accepts and never answers, and one
// that stops sending in the middle of the body, each end the download with
// a timeout error (ErrDownload, os.ErrDeadlineExceeded) soon after the idle
// timeout, and leave nothing in the destination's directory.
func TestDownloadIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	for name, url := range map[string]string{
		"no answer":        silentListener(t),
		"stalled body":     stallingServer(t, 1000),
		"headers, no body": stallingServer(t, 0),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				errc <- Download(t.Context(), url, filepath.Join(dir, "x.tar.gz"), md5sum(nil), nil, WithIdleTimeout(idle))
			}()
			var err error
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("the download was still waiting 10s after it started")
			}
			took := time.Since(start)
			if !errors.Is(err, ErrDownload) || !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
				t.Errorf("err = %v, want a timeout wrapping ErrDownload and os.ErrDeadlineExceeded", err)
			}
			if took < idle || took > idle+2*time.Second {
				t.Errorf("returned after %v with an idle timeout of %v", took, idle)
			}
			if left := dirNames(dir); len(left) != 0 {
				t.Errorf("the timed-out download left %v", left)
			}
		})
	}
}

// TestDownloadSlowIsNotIdle: a server that sends a byte every 50ms, for
// 1s in all, is slow, not stalled: with an idle timeout of 400ms the
// download succeeds.
func TestDownloadSlowIsNotIdle(t *testing.T) {
	body := []byte("0123456789abcdefghij")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range body {
			w.Write(body[i : i+1])
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer srv.Close()
	dst := filepath.Join(t.TempDir(), "slow")
	if err := Download(t.Context(), srv.URL, dst, md5sum(body), nil, WithIdleTimeout(400*time.Millisecond)); err != nil {
		t.Fatalf("a slow but steady download failed: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != string(body) {
		t.Errorf("downloaded %q", b)
	}
}

// TestDownloadCancelNoAnswer: cancelling ctx while the server has not
// answered stops the download at once with ctx's error, whatever the idle
// timeout.
func TestDownloadCancelNoAnswer(t *testing.T) {
	url := silentListener(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := Download(ctx, url, filepath.Join(dir, "x"), md5sum(nil), nil, WithIdleTimeout(time.Hour))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrDownload) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %v after it started, cancelled at 200ms", took)
	}
	if left := dirNames(dir); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

// TestDownloadOptionsValidate: timeouts must be positive.
func TestDownloadOptionsValidate(t *testing.T) {
	for _, o := range []DownloadOption{WithConnectTimeout(0), WithIdleTimeout(-time.Second)} {
		err := Download(t.Context(), "http://127.0.0.1:1/x", filepath.Join(t.TempDir(), "x"), md5sum(nil), nil, o)
		if err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("a non-positive timeout: %v", err)
		}
	}
	if _, err := OpenCIFAR10(t.Context(), "", Train, WithDownload(t.TempDir()), WithDownloadOptions(WithIdleTimeout(0))); err == nil {
		t.Error("cifar10 accepted a zero idle timeout")
	}
}

// TestCIFARDownloadTimeout: the CIFAR source passes its download options
// on: a stalled mirror fails the open with the timeout.
func TestCIFARDownloadTimeout(t *testing.T) {
	cache := t.TempDir()
	_, err := OpenCIFAR10(t.Context(), "", Train, WithDownload(cache), WithMirror(stallingServer(t, 10), md5sum(nil)),
		WithDownloadOptions(WithIdleTimeout(200*time.Millisecond)))
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.HasPrefix(err.Error(), "cifar10: ") {
		t.Fatalf("err = %v, want a cifar10 timeout", err)
	}
	if left := dirNames(cache); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

// TestDownloadErrorsRedactURLs: a download's errors name its URL without
// the password or the signature and token it carries (the request itself
// carries them), for a server's refusal, a wrong checksum and a server that
// cannot be reached; RedactURLs hides them in text holding several URLs.
func TestDownloadErrorsRedactURLs(t *testing.T) {
	const secret = "SECRET"
	seen := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); (u == "me" && p == secret) || r.URL.Query().Get("X-Amz-Signature") == secret {
			seen++
		}
		if strings.HasSuffix(r.URL.Path, "/gone") {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("data"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dst := filepath.Join(t.TempDir(), "f")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	sum := "md5:" + strings.Repeat("0", 32)
	for _, u := range []string{
		"http://me:" + secret + "@" + host + "/gone",
		"http://" + host + "/gone?X-Amz-Signature=" + secret + "&token=" + secret,
		"http://me:" + secret + "@" + host + "/data",
		"http://" + host + "/data?X-Amz-Signature=" + secret,
		"http://me:" + secret + "@" + closed + "/x?sig=" + secret,
	} {
		err := Download(t.Context(), u, dst, sum, nil, WithConnectTimeout(5*time.Second))
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("%s: %v; want an error naming the URL redacted", u, err)
		}
	}
	if seen != 4 {
		t.Errorf("the server saw the credentials on %d requests, want 4", seen)
	}
	text := `source webdataset path="https://me:` + secret + `@h/a-{0..3}.tar" mirror=s3://b/k?token=` + secret + `, then http://h/x?sig=` + secret + `: done`
	want := `source webdataset path="https://me:REDACTED@h/a-{0..3}.tar" mirror=s3://b/k?token=REDACTED, then http://h/x?sig=REDACTED: done`
	if got := RedactURLs(text); got != want {
		t.Errorf("RedactURLs:\n got %s\nwant %s", got, want)
	}
}
