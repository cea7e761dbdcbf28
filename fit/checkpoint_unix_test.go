//go:build unix

package fit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipefeed/pipe/trainer"
)

// TestResumeRefusesWhatIsNotACheckpointFile: --resume from a checkpoint
// path that is a named pipe (whose open would wait for a writer for ever,
// deaf to SIGTERM), a symbolic link to /dev/zero (which would be read
// until memory ran out), a directory, or a file over MaxCheckpointBytes is
// refused at once with ErrCheckpoint, saying what the path is.
func TestResumeRefusesWhatIsNotACheckpointFile(t *testing.T) {
	for _, c := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"fifo", "it is a named pipe (FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dev-zero", "it is a character device, through a symbolic link to /dev/zero", func(p string) error {
			if _, err := os.Stat("/dev/zero"); err != nil {
				t.Skip("no /dev/zero:", err)
			}
			return os.Symlink("/dev/zero", p)
		}},
		{"directory", "it is a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"too-large", "4294967297 bytes, more than a checkpoint may have", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(MaxCheckpointBytes + 1) // sparse: nothing is written
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			ckpt := filepath.Join(out, "checkpoint.gob")
			if err := c.make(ckpt); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Run(context.Background(), spec(out, 2), Options{Resume: true})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				if c.name == "fifo" {
					// A writer lets a blocked open go on, so the test ends.
					if w, err := os.OpenFile(ckpt, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
				}
				t.Fatal("the resume still reads the checkpoint after 20 s")
			}
			if !errors.Is(err, trainer.ErrCheckpoint) || !strings.Contains(err.Error(), ckpt+": ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want ErrCheckpoint naming %s and saying %q", err, ckpt, c.want)
			}
		})
	}
}
