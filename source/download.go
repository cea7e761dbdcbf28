package source

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// Download fetches url into dst, checking the bytes against checksum
// ("md5:<hex>" or "sha256:<hex>"). The file appears at dst only whole and
// verified: bytes go to a temporary file beside it, which is renamed into
// place on success and removed on any failure. Cancelling ctx stops the
// transfer at once, even one stalled on a server that has stopped sending;
// the error then wraps ctx's error rather than [ErrDownload].
func Download(ctx context.Context, url, dst, checksum string, progress func(done, total int64)) (err error) {
	newHash, want, err := parseChecksum(checksum)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("download %s: %w", url, cerr)
		}
		return fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: server answered %s", ErrDownload, url, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".part-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := newHash()
	var body io.Reader = resp.Body
	if progress != nil {
		body = &progressReader{r: body, total: resp.ContentLength, f: progress}
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	if err != nil {
		// The transport closes the connection when ctx is done, so a read
		// waiting on a silent server returns.
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("download %s: after %d bytes: %w", url, n, cerr)
		}
		return fmt.Errorf("%w: %s: after %d bytes: %w", ErrDownload, url, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%w: %s: got %d of %d bytes", ErrDownload, url, n, resp.ContentLength)
	}
	if got := h.Sum(nil); string(got) != string(want) {
		return fmt.Errorf("download %s: %w: got %x, want %s", url, ErrChecksum, got, checksum)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	return nil
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
