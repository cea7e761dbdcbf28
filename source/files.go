package source

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// writeAtomic makes dst whole or not at all: write fills a new temporary
// file beside it, which is synced and renamed to dst when write succeeds and
// removed otherwise (a cancelled context included). A reader of dst, in this
// process or another opening the same index directory, never sees it half
// written. Errors from write come back unchanged; the others name the path.
func writeAtomic(dst string, write func(*os.File) error) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// Not os.CreateTemp: its files are 0600, and index directories may be
	// shared.
	tmp, err := os.OpenFile(fmt.Sprintf("%s.tmp-%016x", dst, rand.Uint64()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// ctxReader fails every Read with ctx's error once ctx is done. It looks at
// ctx on each call, which is one atomic load: put it under a large
// bufio.Reader so that is once per buffer fill. Decoders above it (gzip,
// tar) report the failure as their own, so whoever catches one asks ctx
// first.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// poller looks at ctx once every 256 steps or 1 MiB of work, whichever
// comes first, for loops over records and files whose single steps are too
// cheap to check each.
type poller struct {
	ctx   context.Context
	steps int
	bytes int64
}

// poll counts one step of n bytes and returns ctx's error when it is time
// to look and ctx is done.
func (p *poller) poll(n int64) error {
	p.steps++
	p.bytes += n
	if p.steps < 256 && p.bytes < 1<<20 {
		return nil
	}
	p.steps, p.bytes = 0, 0
	return p.ctx.Err()
}
