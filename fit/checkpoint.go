package fit

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pipefeed/pipe/internal/atomicfile"
	"github.com/pipefeed/pipe/trainer"
)

// legacyTemp is how releases before 2026-11 named a checkpoint's
// temporary files; a killed save of theirs is cleaned up too.
const legacyTemp = ".checkpoint-"

// MaxCheckpointBytes bounds the checkpoint file a resume reads: 4 GiB,
// more than ten times a ResNet-50's (25.6 M parameters with the
// optimiser's two moments, about 310 MB). A larger file is refused before
// it is read.
const MaxCheckpointBytes = 4 << 30

// saveCheckpoint writes tr's checkpoint to path atomically: a crash leaves
// the old checkpoint or the new one, never half of one.
func saveCheckpoint(tr *trainer.Trainer, path, identity string, history []byte) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		return tr.WriteCheckpoint(w, identity, history)
	}, legacyTemp)
}

// loadCheckpoint restores the checkpoint at path into tr and returns its
// history, first removing the temporaries of a save that was killed. In a
// job of several ranks, rank 0 alone reads the file (ReadCheckpoint).
func loadCheckpoint(tr *trainer.Trainer, path, identity string) ([]byte, error) {
	return tr.ReadCheckpoint(path, func() ([]byte, error) {
		atomicfile.RemoveStale(path, legacyTemp)
		return readCheckpointFile(path)
	}, identity)
}

// readCheckpointFile reads the checkpoint at path, which must be a regular
// file (or a symbolic link to one) of at most MaxCheckpointBytes. Anything
// else is refused with trainer.ErrCheckpoint, at once: a named pipe, whose
// open would wait for a writer beyond the reach of any signal handler; a
// device such as /dev/zero, which never ends; a directory. path is looked
// at before it is opened, and opened without blocking (O_NONBLOCK, where
// there is one) and looked at again, so that a file put in its place
// between the two is refused too; then exactly the bytes its size says are
// read.
func readCheckpointFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkpointFile(path, fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkpointFile(path, fi); err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("pipe: %s: %w: %d bytes were there and reading them failed: %v", path, trainer.ErrCheckpointDamaged, fi.Size(), err)
	}
	return b, nil
}

// checkpointFile refuses fi, the information on checkpoint path, unless it
// is a regular file of at most MaxCheckpointBytes.
func checkpointFile(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		if fi.Size() > MaxCheckpointBytes {
			return fmt.Errorf("pipe: %s: %w: %d bytes, more than a checkpoint may have (%d, MaxCheckpointBytes); move it away to start again", path, trainer.ErrCheckpoint, fi.Size(), int64(MaxCheckpointBytes))
		}
		return nil
	}
	what := "not a regular file"
	switch m := fi.Mode(); {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	if target, err := os.Readlink(path); err == nil {
		what += ", through a symbolic link to " + target
	}
	return fmt.Errorf("pipe: %s: %w: it is %s, and a checkpoint is a regular file that a run wrote; move it away to start again", path, trainer.ErrCheckpoint, what)
}
