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

// resetProcs forgets earlier raises (other tests' epochs make them) for
// the test, and puts GOMAXPROCS and the memory of raises back after it.
func resetProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	raised.Lock()
	from, to := raised.from, raised.to
	raised.from, raised.to = 0, 0
	raised.Unlock()
	t.Cleanup(func() {
		runtime.GOMAXPROCS(n)
		raised.Lock()
		raised.from, raised.to = from, to
		raised.Unlock()
	})
}

// TestRaiseProcs: raising GOMAXPROCS for cgo never lowers it, and the
// default worker count stays the core count it was before the raise.
func TestRaiseProcs(t *testing.T) {
	resetProcs(t)
	n := runtime.GOMAXPROCS(0)
	raiseProcs(n + 1)
	if got := runtime.GOMAXPROCS(0); got != n+1 {
		t.Fatalf("GOMAXPROCS %d after raising to %d", got, n+1)
	}
	if got := defaultWorkers(); got != n {
		t.Fatalf("default workers %d after the raise, want %d", got, n)
	}
	raiseProcs(n)
	if got := runtime.GOMAXPROCS(0); got != n+1 {
		t.Fatalf("raising to %d lowered GOMAXPROCS to %d", n, got)
	}
	raiseProcs(n + 2)
	if got := defaultWorkers(); got != n {
		t.Fatalf("default workers %d after a second raise, want %d", got, n)
	}
	runtime.GOMAXPROCS(n + 5) // the user's own setting is the default again
	if got := defaultWorkers(); got != n+5 {
		t.Fatalf("default workers %d after GOMAXPROCS(%d)", got, n+5)
	}
}

// TestEpochProcsForCgoDecode: an epoch that decodes JPEGs with
// libjpeg-turbo runs with a spare P beside its workers (see cgoProcs);
// the Go decoder, or pixels from the source, leave GOMAXPROCS alone.
func TestEpochProcsForCgoDecode(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: pipe leaves it be")
	}
	resetProcs(t)
	dir := t.TempDir()
	for _, name := range []string{"restart420.jpg", "q100-422.jpg", "subsample444.jpg"} {
		data, err := os.ReadFile(filepath.Join("transform", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "c"), 0o755)
		os.WriteFile(filepath.Join(dir, "c", name), data, 0o644)
	}
	src, err := source.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	workers := runtime.GOMAXPROCS(0)
	p := mustNew(t, imagenetRecipe(src, 2, Options(workers, Fail, -1))...)
	defer p.Close()
	want := workers
	if transform.RegionDecoding() {
		want = workers + 1
	}
	if got := p.cgoProcs(); got != want {
		t.Fatalf("cgoProcs %d with %d workers, want %d", got, workers, want)
	}
	if _, err := p.Run(context.Background(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS %d during epochs, want %d", got, want)
	}
	if got := p.Workers(); got != workers {
		t.Fatalf("workers %d, want %d", got, workers)
	}
	// More workers than cores: still one spare P, no more.
	p.SetWorkers(4 * workers)
	if got := p.cgoProcs(); got != want {
		t.Fatalf("cgoProcs %d with %d workers on %d cores, want %d", got, 4*workers, workers, want)
	}
}
