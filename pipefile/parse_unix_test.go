//go:build unix

package pipefile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseFileBounds: ParseFile refuses a long file from its size, reads
// a device no further than the bound, and stops on ctx while a FIFO waits
// for its writer or for data.
func TestParseFileBounds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	long := filepath.Join(dir, "long.pipe")
	if err := os.WriteFile(long, make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{long, "/dev/zero"} {
		if _, err := os.Stat(name); err != nil {
			continue
		}
		_, err := ParseFile(ctx, name)
		if err == nil || !strings.Contains(err.Error(), name+":1:1: the file is over 1048576 bytes") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParseFile(ctx, dir); err == nil || !errors.Is(err, syscall.EISDIR) {
		t.Errorf("a directory: %v", err)
	}
	fifo := filepath.Join(dir, "f.pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	// No writer: the read waits, and a cancelled context stops it.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := ParseFile(cctx, fifo); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a FIFO without a writer: %v, want the context's error", err)
	}
	// A writer that opens, writes part of a file and then stalls.
	w := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.WriteString("source synthetic\n")
		}
		w <- f
	}()
	cctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := ParseFile(cctx, fifo); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stalled FIFO: %v, want the context's error", err)
	}
	if f := <-w; f != nil {
		f.Close()
	}
	// A writer that writes a whole file: it parses.
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.WriteString("source synthetic n=5\nbatch 5\n")
			f.Close()
		}
	}()
	f, err := ParseFile(ctx, fifo)
	if err != nil || len(f.Lines) != 2 {
		t.Errorf("a FIFO with a writer: %v", err)
	}
}
