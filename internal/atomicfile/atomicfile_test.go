package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestRemovesStaleTemporaries: the temporary files a killed Write leaves
// (and those of a legacy prefix) are removed by the next Write and by
// RemoveStale; other files are left alone.
func TestRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.gob")
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
	if err := Write(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }, ".checkpoint-"); err != nil {
		t.Fatal(err)
	}
	check("Write")
	write()
	RemoveStale(path, ".checkpoint-")
	check("RemoveStale")
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("the file holds %q", b)
	}
}

// TestFailedWriteKeepsTheOldFile: a write that fails leaves the old file
// as it was and no temporary beside it.
func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	os.WriteFile(path, []byte("old"), 0o644)
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error { w.Write([]byte("half")); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Write: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory", len(ents))
	}
}
