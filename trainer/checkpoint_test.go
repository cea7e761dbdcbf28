package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func checkpointed(t *testing.T) (*Trainer, string) {
	t.Helper()
	feed := &fakeFeed{shape: []int{3, 4, 4}, global: 8, replicas: 1, batches: 2, classes: 3}
	tr := train(t, Config{Model: ModelSpec{Name: "mlp", Width: 16}, Epochs: 1, LR: 0.05, BaseBatch: 8}, feed)
	path := filepath.Join(t.TempDir(), "checkpoint.gob")
	if err := tr.Save(path, "run", []byte("history")); err != nil {
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
	if h, err := tr.Load(path, "run"); err != nil || string(h) != "history" {
		t.Fatalf("untouched checkpoint: %q, %v", h, err)
	}
	step := max(1, len(good)*8/97)
	for bit := 0; bit < len(good)*8; bit += step {
		b := append([]byte(nil), good...)
		b[bit/8] ^= 1 << (bit % 8)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := tr.Load(path, "run")
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
	if _, err := tr.Load(path, "run"); !errors.Is(err, ErrCheckpointDamaged) {
		t.Fatalf("truncated checkpoint: %v, want ErrCheckpointDamaged", err)
	}
}

// TestCheckpointRemovesStaleTemporaries: the temporary files a killed Save
// leaves (this release's naming and the earlier ".checkpoint-NNNN") are
// removed by the next Save and by Load; other files are left alone.
func TestCheckpointRemovesStaleTemporaries(t *testing.T) {
	tr, path := checkpointed(t)
	dir := filepath.Dir(path)
	stale := []string{".checkpoint-1234", ".checkpoint.gob-5678"}
	keep := []string{"metrics.jsonl", ".other-1234", "checkpoint.gob"}
	write := func() {
		for _, n := range append(stale, keep[:2]...) {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(after string) {
		t.Helper()
		for _, n := range stale {
			if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after %s, %s is still there (%v)", after, n, err)
			}
		}
		for _, n := range keep {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				t.Errorf("after %s, %s is gone: %v", after, n, err)
			}
		}
	}
	write()
	if err := tr.Save(path, "run", nil); err != nil {
		t.Fatal(err)
	}
	check("Save")
	write()
	if _, err := tr.Load(path, "run"); err != nil {
		t.Fatal(err)
	}
	check("Load")
}
