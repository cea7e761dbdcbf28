package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unconnectable returns the URL of a listening socket whose accept queue is
// full: Linux drops further SYNs, so a connection attempt hangs as it does
// against a host that does not answer.
func unconnectable(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip("no socket:", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skip("bind:", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skip("listen:", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Skip("getsockname:", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue (a backlog of 0 holds one connection).
	for range 2 {
		cfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Skip("socket:", err)
		}
		t.Cleanup(func() { syscall.Close(cfd) })
		syscall.Connect(cfd, sa)
	}
	time.Sleep(50 * time.Millisecond)
	return "http://" + addr + "/cifar-10-binary.tar.gz"
}

// TestDownloadConnectTimeout: a server that never completes the TCP
// handshake fails the download with a timeout soon after the connect
// timeout, even with a long idle timeout.
func TestDownloadConnectTimeout(t *testing.T) {
	url := unconnectable(t)
	dir := t.TempDir()
	const connect = 300 * time.Millisecond
	start := time.Now()
	err := Download(t.Context(), url, filepath.Join(dir, "x"), md5sum(nil), nil, WithConnectTimeout(connect), WithIdleTimeout(time.Hour))
	took := time.Since(start)
	if !errors.Is(err, ErrDownload) || !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "timed out connecting") {
		t.Errorf("err = %v, want a connect timeout", err)
	}
	if took < connect || took > connect+2*time.Second {
		t.Errorf("returned after %v with a connect timeout of %v", took, connect)
	}
	if left := dirNames(dir); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}
