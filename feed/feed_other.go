//go:build !linux

package feed

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/pipefeed/pipe"
)

// This twin of ring.go, serve.go and conn.go keeps the package's API where
// pipe feed cannot work: the ring is an anonymous memory file
// (memfd_create) and the loader's socket SOCK_SEQPACKET, both Linux's.
// Everything returns ErrUnsupported, so that the library and every other
// command build everywhere and `pipe feed` says why it cannot run.

func unsupported() error { return fmt.Errorf("%w, not %s", ErrUnsupported, runtime.GOOS) }

// Supported returns nil where pipe feed works, and why not elsewhere.
func Supported() error { return unsupported() }

// Ring is the shared memory where pipe feed works; NewRing returns
// ErrUnsupported here.
type Ring struct {
	Layout
}

// NewRing returns ErrUnsupported.
func NewRing(slabs, rows, sampleBytes, slabBytes int) (*Ring, error) { return nil, unsupported() }

// File is nil: no ring is ever made here.
func (r *Ring) File() *os.File { return nil }

// AllocHost returns ErrUnsupported.
func (r *Ring) AllocHost(n int) ([]byte, error) { return nil, unsupported() }

// FreeHost returns ErrUnsupported.
func (r *Ring) FreeHost(b []byte) error { return unsupported() }

// Close returns nil.
func (r *Ring) Close() error { return nil }

// Serve returns ErrUnsupported.
func Serve(ctx context.Context, p *pipe.Pipeline, conn *net.UnixConn, name string) error {
	return unsupported()
}

// Refuse returns err: there is no loader to tell.
func Refuse(conn *net.UnixConn, err error) error { return err }

// Watch cancels with ErrUnsupported, which stop returns.
func Watch(conn *net.UnixConn, cancel context.CancelCauseFunc) (stop func() error) {
	err := unsupported()
	cancel(err)
	return func() error { return err }
}
