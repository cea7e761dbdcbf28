package trainer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipefeed/pipe/trainer/nn"
)

// saveFile writes tr's checkpoint to the file path, as pipe does (less
// its atomic rename, which package atomicfile tests).
func saveFile(tr *Trainer, path, identity string, history []byte) error {
	var b bytes.Buffer
	if err := tr.WriteCheckpoint(&b, identity, history); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// loadFile restores the checkpoint in the file path into tr.
func loadFile(tr *Trainer, path, identity string) ([]byte, error) {
	return tr.ReadCheckpoint(path, func() ([]byte, error) { return os.ReadFile(path) }, identity)
}

func checkpointed(t *testing.T) (*Trainer, string) {
	t.Helper()
	feed := &fakeFeed{shape: []int{3, 4, 4}, global: 8, replicas: 1, batches: 2, classes: 3}
	tr := train(t, Config{Model: nn.ModelSpec{Name: "mlp", Width: 16}, Epochs: 1, LR: 0.05, BaseBatch: 8}, feed)
	path := filepath.Join(t.TempDir(), "checkpoint.gob")
	if err := saveFile(tr, path, "run", []byte("history")); err != nil {
		t.Fatal(err)
	}
	return tr, path
}

// TestCheckpointRefusesEveryBitFlip: flipping any one of a spread of bits in
// a saved checkpoint (header, gob, parameters) makes Load refuse it, and an
// untouched one loads.
func TestCheckpointRefusesEveryBitFlip(t *testing.T) {
	tr, path := checkpointed(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := loadFile(tr, path, "run"); err != nil || string(h) != "history" {
		t.Fatalf("untouched checkpoint: %q, %v", h, err)
	}
	step := max(1, len(good)*8/97)
	for bit := 0; bit < len(good)*8; bit += step {
		b := append([]byte(nil), good...)
		b[bit/8] ^= 1 << (bit % 8)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadFile(tr, path, "run")
		if err == nil {
			t.Fatalf("bit %d of %d flipped: Load accepted it", bit, len(good)*8)
		}
		if !errors.Is(err, ErrCheckpointDamaged) && !errors.Is(err, ErrCheckpoint) {
			t.Fatalf("bit %d: %v, want ErrCheckpointDamaged or ErrCheckpoint", bit, err)
		}
		if bit >= checkpointHeader*8 && !errors.Is(err, ErrCheckpointDamaged) {
			t.Fatalf("bit %d (in the body): %v, want ErrCheckpointDamaged", bit, err)
		}
	}
	if err := os.WriteFile(path, good[:len(good)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadFile(tr, path, "run"); !errors.Is(err, ErrCheckpointDamaged) {
		t.Fatalf("truncated checkpoint: %v, want ErrCheckpointDamaged", err)
	}
}
