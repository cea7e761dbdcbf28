//go:build linux

package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/alitto/pond/v2"
	"golang.org/x/sys/unix"
)

// passCred sets SO_PASSCRED on conn, for readPacket.
func passCred(conn *net.UnixConn) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("feed: the loader's socket: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil {
		return fmt.Errorf("feed: the loader's socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("feed: SO_PASSCRED on the loader's socket: %w", serr)
	}
	return nil
}

// credSpace is room for the credentials the kernel attaches to a packet
// under SO_PASSCRED, and for nothing else: file descriptors a loader sends
// along do not fit, and the kernel drops them.
var credSpace = unix.CmsgSpace(unix.SizeofUcred)

// readPacket reads the loader's next packet into buf and returns its size,
// 0 for an empty packet, or io.EOF once the loader has closed its end.
//
// On a SOCK_SEQPACKET socket recvmsg returns 0 both for an empty packet and
// at the end (and Go's Read says io.EOF for both), and the socket's
// shutdown state cannot tell an empty packet followed by the end from the
// end alone. But with SO_PASSCRED (passCred) the kernel attaches the
// sender's credentials to every packet it delivers, empty or not, and at
// the end there is no packet to attach them to: a read of 0 bytes with
// credentials is an empty packet, one without is the end.
func readPacket(conn *net.UnixConn, buf []byte) (int, error) {
	oob := make([]byte, credSpace)
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if n == 0 && oobn > 0 && (err == nil || errors.Is(err, io.EOF)) {
		return 0, nil
	}
	return n, err
}

// gone reports whether err, from readPacket, says the loader went away.
func gone(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) }

// Refuse tells the loader why no batches will come: err, for a pipeline
// that did not load. It returns err, as a ToldError once the loader has it.
func Refuse(conn *net.UnixConn, err error) error {
	if _, werr := conn.Write(appendError(nil, err.Error())); werr != nil {
		return err
	}
	return ToldError{err}
}

// Watch watches conn until the returned stop is called, before the hello:
// pipe feed loads the pipeline meanwhile, under a context that cancel
// cancels. The loader going away (its end closing) cancels with ErrGone, so
// that a loader killed during a download or an index build does not leave
// pipe working for nobody. The loader speaks only after the hello, so any
// packet before it, empty or not, cancels with a protocol error. stop
// returns what was seen (nil: nothing), also of a packet that came as the
// watch stopped.
func Watch(conn *net.UnixConn, cancel context.CancelCauseFunc) (stop func() error) {
	if err := passCred(conn); err != nil {
		cancel(err)
		return func() error { return err }
	}
	var seen error
	pool := pond.NewPool(1)
	pool.Submit(func() {
		var b [64]byte
		n, err := readPacket(conn, b[:])
		if seen = early(b[:n], err); seen != nil {
			cancel(seen)
		}
	})
	return func() error {
		conn.SetReadDeadline(time.Now())
		pool.StopAndWait()
		if seen == nil {
			seen = pending(conn)
		}
		conn.SetReadDeadline(time.Time{})
		if seen != nil {
			cancel(seen)
		}
		return seen
	}
}

// early is what the loader's packet m (or the read error err) before the
// hello means: ErrGone, a protocol error, or nil for a read that stopped
// on the watch's deadline.
func early(m []byte, err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case err != nil && gone(err):
		return ErrGone
	case err != nil:
		return fmt.Errorf("feed: reading the loader's socket: %w", err)
	case len(m) == 0:
		return breach("an empty packet before the hello")
	case len(m) < 4:
		return breach("a %d-byte message before the hello", len(m))
	}
	return breach("a %d-byte message of type %d before the hello", len(m), msgType(m))
}

// pending is early of a packet waiting on conn, without waiting for one.
func pending(conn *net.UnixConn) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil
	}
	var b [64]byte
	oob := make([]byte, credSpace)
	var n, oobn int
	var rerr error
	rc.Control(func(fd uintptr) {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b[:], oob, unix.MSG_DONTWAIT)
	})
	switch {
	case errors.Is(rerr, unix.EAGAIN):
		return nil
	case rerr == nil && n == 0 && oobn == 0:
		return ErrGone
	}
	return early(b[:n], rerr)
}

// Supported returns nil where pipe feed works, as here, and why not
// elsewhere (ErrUnsupported).
func Supported() error { return nil }
