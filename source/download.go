package source

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// DefaultCacheDir is where downloads go unless told otherwise: $PIPE_CACHE
// if set, else the user cache directory's "pipe" folder (~/.cache/pipe on
// Linux).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("PIPE_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w (set PIPE_CACHE)", err)
	}
	return filepath.Join(d, "pipe"), nil
}

func parseChecksum(s string) (func() hash.Hash, []byte, error) {
	algo, hexsum, ok := strings.Cut(s, ":")
	sum, err := hex.DecodeString(hexsum)
	if !ok || err != nil {
		return nil, nil, fmt.Errorf("checksum %q: want md5:<hex> or sha256:<hex>", s)
	}
	switch {
	case algo == "md5" && len(sum) == md5.Size:
		return md5.New, sum, nil
	case algo == "sha256" && len(sum) == sha256.Size:
		return sha256.New, sum, nil
	}
	return nil, nil, fmt.Errorf("checksum %q: want md5:<32 hex digits> or sha256:<64 hex digits>", s)
}

// DownloadOption configures [Download].
type DownloadOption func(*downloadConfig) error

type downloadConfig struct {
	connect, idle time.Duration
}

// defaultDownload holds the defaults of every download option.
func defaultDownload() downloadConfig {
	return downloadConfig{connect: 30 * time.Second, idle: 60 * time.Second}
}

// WithConnectTimeout bounds connecting to the server: the TCP connection
// and, for https, the TLS handshake. Default 30s (Go's own dialer's); d > 0.
func WithConnectTimeout(d time.Duration) DownloadOption {
	return func(c *downloadConfig) error {
		if d <= 0 {
			return fmt.Errorf("download: connect timeout %v must be positive", d)
		}
		c.connect = d
		return nil
	}
}

// WithIdleTimeout bounds every wait for the server once connected: for the
// response's headers, and for each next bytes of its body. A slow transfer
// that keeps sending never times out; one that stops does. Default 60s; a
// server silent that long has stalled. d > 0.
func WithIdleTimeout(d time.Duration) DownloadOption {
	return func(c *downloadConfig) error {
		if d <= 0 {
			return fmt.Errorf("download: idle timeout %v must be positive", d)
		}
		c.idle = d
		return nil
	}
}

// errIdle is the cause a download's context is cancelled with when the
// server has been silent for the idle timeout.
var errIdle = errors.New("idle timeout")

// Download fetches url into dst, checking the bytes against checksum
// ("md5:<hex>" or "sha256:<hex>"). The file appears at dst only whole and
// verified: bytes go to a temporary file beside it, which is renamed into
// place on success and removed on any failure. A server that cannot be
// reached within the connect timeout, or that is silent for the idle
// timeout before its headers or in the middle of its body, fails the
// download with an error wrapping [ErrDownload] and
// [os.ErrDeadlineExceeded]. Cancelling ctx stops the transfer at once, even
// one stalled on a server that has stopped sending; the error then wraps
// ctx's error rather than [ErrDownload]. Errors name the URL with the
// secrets it carries redacted ([remote.Redact]).
func Download(ctx context.Context, url, dst, checksum string, progress func(done, total int64), opts ...DownloadOption) (err error) {
	shown := remote.Redact(url)
	cfg := defaultDownload()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return err
		}
	}
	newHash, want, err := parseChecksum(checksum)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	// The idle timer cancels the request with errIdle: the transport then
	// closes the connection, so a wait for headers or body bytes returns.
	// It starts once connected (connecting has its own timeout), and every
	// byte that arrives restarts it.
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(math.MaxInt64, func() { cancel(errIdle) })
	defer idle.Stop()
	rctx := httptrace.WithClientTrace(tctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { idle.Reset(cfg.idle) },
	})
	var n int64
	// failed names why the transfer stopped after n bytes: ctx, the idle
	// timer, the connect timeout, or the network.
	failed := func(err error) error {
		after := ""
		if n > 0 {
			after = fmt.Sprintf(" after %d bytes", n)
		}
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("download %s%s: %w", shown, after, ctx.Err())
		case context.Cause(tctx) == errIdle:
			return fmt.Errorf("%w: %s: timed out%s: the server sent nothing for %v: %w", ErrDownload, shown, after, cfg.idle, os.ErrDeadlineExceeded)
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("%w: %s: timed out connecting: no connection within %v (%w): %v", ErrDownload, shown, cfg.connect, os.ErrDeadlineExceeded, unURL(err))
		}
		return fmt.Errorf("%w: %s%s: %w", ErrDownload, shown, after, unURL(err))
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	resp, err := downloadClient(cfg).Do(req)
	if err != nil {
		return failed(err)
	}
	defer resp.Body.Close()
	idle.Reset(cfg.idle)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: server answered %s", ErrDownload, shown, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".part-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := newHash()
	var body io.Reader = &idleReader{r: resp.Body, t: idle, d: cfg.idle}
	if progress != nil {
		body = &progressReader{r: body, total: resp.ContentLength, f: progress}
	}
	n, err = io.Copy(io.MultiWriter(tmp, h), body)
	if err != nil {
		return failed(err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%w: %s: got %d of %d bytes", ErrDownload, shown, n, resp.ContentLength)
	}
	if got := h.Sum(nil); string(got) != string(want) {
		return fmt.Errorf("download %s: %w: got %x, want %s", shown, ErrChecksum, got, checksum)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("download %s: %w", shown, unURL(err))
	}
	return nil
}

// unURL is err without the *url.Error net/http wraps it in, which names
// the URL whole, secrets included.
func unURL(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// downloadClient is a client whose transport dials and shakes hands within
// the connect timeout (the idle timeout is Download's own timer). It keeps
// no connection open after the response, so no goroutine of its transport
// outlives the download.
func downloadClient(cfg downloadConfig) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: cfg.connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = cfg.connect
	t.DisableKeepAlives = true
	return &http.Client{Transport: t}
}

// idleReader resets the idle timer t to d whenever bytes arrive.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}

type progressReader struct {
	r           io.Reader
	done, total int64
	f           func(done, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	p.f(p.done, p.total)
	return n, err
}
