package fit

import (
	"io"
	"os"

	"github.com/pipefeed/pipe/internal/atomicfile"
	"github.com/pipefeed/pipe/trainer"
)

// legacyTemp is how releases before 2026-11 named a checkpoint's
// temporary files; a killed save of theirs is cleaned up too.
const legacyTemp = ".checkpoint-"

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
		return os.ReadFile(path)
	}, identity)
}
