package pipe

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// TestProcsForCgoDecode: a pipeline that decodes JPEGs with libjpeg-turbo
// asks for a spare P beside its workers (Summary.Procs); the Go decoder, or
// pixels from the source, ask for nothing more. Running its epochs leaves
// GOMAXPROCS alone: a process-wide setting is the program's to make.
func TestProcsForCgoDecode(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: pipe leaves it be")
	}
	dir := t.TempDir()
	for _, name := range []string{"restart420.jpg", "q100-422.jpg", "subsample444.jpg"} {
		data, err := os.ReadFile(filepath.Join("transform", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "c"), 0o755)
		os.WriteFile(filepath.Join(dir, "c", name), data, 0o644)
	}
	src, err := source.OpenFolder(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	n := runtime.GOMAXPROCS(0)
	p := mustNew(t, imagenetRecipe(src, 2, Options(Settings{Workers: n}))...)
	defer p.Close()
	want := n
	if transform.DecodesInC() {
		want = n + 1
	}
	if got := p.Summary().Procs; got != want {
		t.Fatalf("Procs %d with %d workers, want %d", got, n, want)
	}
	if _, err := p.Run(context.Background(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS %d after an epoch, want %d: the library must not change it", got, n)
	}
	// More workers than cores: still one spare P, no more.
	p.SetWorkers(4 * n)
	if got := p.Summary().Procs; got != want {
		t.Fatalf("Procs %d with %d workers on %d cores, want %d", got, 4*n, n, want)
	}
	// Pixels from the source: nothing to ask for.
	q := mustNew(t, recipe(synth(t, 64))...)
	defer q.Close()
	if got := q.Summary().Procs; got != n {
		t.Fatalf("Procs %d for a pipeline that decodes nothing, want %d", got, n)
	}
}
