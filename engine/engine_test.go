package engine

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// panicky panics reading one sample.
type panicky struct {
	source.Source
	at int
}

func (p panicky) Read(i int, rec *source.Record) error {
	if i == p.at {
		panic("bad sample")
	}
	return p.Source.Read(i, rec)
}

// spec is a crop-flip-normalize recipe over n synthetic samples, built
// without the façade: the engine runs from its Spec alone.
func spec(t *testing.T, src source.Source, workers int) Spec {
	t.Helper()
	crop, err := transform.RandomCrop(32, 4, transform.FillReflect)
	if err != nil {
		t.Fatal(err)
	}
	flip, err := transform.Flip(transform.Horizontal, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	norm, err := transform.Normalize([]float64{0.5}, []float64{0.25})
	if err != nil {
		t.Fatal(err)
	}
	shape := transform.Shape{C: 3, H: 32, W: 32}
	tensor, err := transform.ToTensor(transform.NCHW, transform.Float32, norm, shape)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sharding.New(src.Len(), sharding.WithShuffle(9))
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Source: src, InShape: shape, Ops: []transform.Op{crop, flip}, Host: tensor, Out: tensor,
		Seed: 9, Plan: plan, Batch: 50, Workers: workers}
}

func synthetic(t *testing.T, n int) source.Source {
	t.Helper()
	src, err := source.NewSynthetic(n, source.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func sums(t *testing.T, e *Engine, epochs int) []string {
	t.Helper()
	stats, err := e.Run(context.Background(), RunOptions{Epochs: epochs, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stats {
		out = append(out, s.Checksum)
	}
	return out
}

// sameForWorkers runs two epochs of spec(t, src, w) with ops as its
// operations (nil: spec's own) for 1, 3 and 8 workers, fails the test
// unless every pool gives the same checksums, and returns them.
func sameForWorkers(t *testing.T, src source.Source, ops []transform.Op) []string {
	t.Helper()
	var want []string
	for _, w := range []int{1, 3, 8} {
		s := spec(t, src, w)
		if ops != nil {
			s.Ops = ops
		}
		e, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		got := sums(t, e, 2)
		e.Close()
		if want == nil {
			want = got
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("workers=%d: %v, want %v", w, got, want)
		}
	}
	return want
}

// TestOutputIndependentOfWorkers: the engine's output is a function of its
// spec and the epoch, whatever the pool's size.
func TestOutputIndependentOfWorkers(t *testing.T) {
	if got := sameForWorkers(t, synthetic(t, 730), nil); got[0] == got[1] {
		t.Fatalf("epochs 0 and 1 gave the same stream %s", got[0])
	}
}

// TestErasingIndependentOfWorkers: random_erasing, including its random
// fill, draws only from each sample's generator, so the stream is the same
// whatever the pool's size (and differs from the stream without it).
func TestErasingIndependentOfWorkers(t *testing.T) {
	src := synthetic(t, 730)
	erase, err := transform.RandomErasing(0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, transform.EraseValue{Random: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(spec(t, src, 2))
	if err != nil {
		t.Fatal(err)
	}
	without := sums(t, plain, 1)
	plain.Close()
	got := sameForWorkers(t, src, append(spec(t, src, 1).Ops, erase))
	if got[0] == without[0] {
		t.Fatalf("random_erasing left the stream as it was: %s", got[0])
	}
}

// TestPanicIsAnErrorWithItsStack: a panic in a worker ends the epoch with
// an error carrying the panic and its stack, and no goroutine is left.
func TestPanicIsAnErrorWithItsStack(t *testing.T) {
	e, err := New(spec(t, panicky{synthetic(t, 500), 321}, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Run(context.Background(), RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "bad sample") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("want the panic with its stack, got %v", err)
	}
	// The engine is usable again: the failed epoch is closed.
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatalf("after a failed epoch: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseFromAnotherGoroutine: Close may be called while Next waits, and
// Stats read at any time (run with -race).
func TestCloseFromAnotherGoroutine(t *testing.T) {
	e, err := New(spec(t, synthetic(t, 5000), 2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			b, err := x.Next()
			if err != nil {
				done <- err
				return
			}
			x.Stats()
			b.Release()
		}
	}()
	time.Sleep(20 * time.Millisecond)
	x.Stats()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after Close: %v", err)
	}
	if e.Buffers().SlabsHeld != 0 {
		t.Fatalf("%d slabs out after Close", e.Buffers().SlabsHeld)
	}
}

// TestCloseBeforeTheProducerStarts: closing an epoch at once, before its
// producer has run, neither hangs nor leaks, thousands of times over. The
// workers once waited for chunks from a producer that pond never started,
// its group being cancelled already: with 8 workers this hung within a few
// hundred cycles, every time.
func TestCloseBeforeTheProducerStarts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	e, err := New(spec(t, synthetic(t, 200), 8))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var cycles atomic.Int64
	done := make(chan error, 1)
	go func() {
		// 5000 cycles, or 5 s at the race detector's pace.
		for i, start := 0, time.Now(); i < 5000 && time.Since(start) < 5*time.Second; i++ {
			x, err := e.Epoch(context.Background(), i)
			if err != nil {
				done <- err
				return
			}
			if i%10 == 1 {
				if b, err := x.Next(); err == nil {
					b.Release()
				}
			}
			if err := x.Close(); err != nil {
				done <- err
				return
			}
			cycles.Add(1)
		}
		done <- nil
	}()
	for last := int64(-1); ; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if n := e.Buffers().SlabsHeld; n != 0 {
				t.Fatalf("%d slabs out after the last Close", n)
			}
			t.Logf("%d epochs opened and closed", cycles.Load())
			return
		case <-time.After(10 * time.Second):
			n := cycles.Load()
			if n == last {
				t.Fatalf("closing an epoch hung after %d cycles", n)
			}
			last = n
		}
	}
}

// TestGreyAndBlurIndependentOfWorkers: grayscale and gaussian_blur draw
// only from each sample's generator, so their output is the same whatever
// the pool's size, and differs between epochs.
func TestColourOpsIndependentOfWorkers(t *testing.T) {
	src := synthetic(t, 300)
	grey, err := transform.Grayscale(0.5)
	if err != nil {
		t.Fatal(err)
	}
	blur, err := transform.GaussianBlur(7, [2]float64{0.1, 2})
	if err != nil {
		t.Fatal(err)
	}
	jitter, err := transform.ColorJitter(0.2, 0.2, 0.2, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sameForWorkers(t, src, []transform.Op{jitter, grey, blur}); got[0] == got[1] {
		t.Fatalf("epochs 0 and 1 gave the same stream %s", got[0])
	}
}

// TestAugmentIndependentOfWorkers: rotate, affine, rand_augment and
// trivial_augment draw only from each sample's generator, so their output
// is the same whatever the pool's size, and differs between epochs.
func TestAugmentIndependentOfWorkers(t *testing.T) {
	rot, err := transform.Rotate(30, transform.SampleBilinear, 0, false, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	aff, err := transform.Affine(10, [2]float64{0.1, 0.1}, [2]float64{0.9, 1.1}, [4]float64{-5, 5, 0, 0}, transform.SampleNearest, 0)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := transform.RandAugment(2, 9, 31, transform.SampleNearest, 0)
	if err != nil {
		t.Fatal(err)
	}
	ta, err := transform.TrivialAugment(31, transform.SampleBilinear, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sameForWorkers(t, synthetic(t, 300), []transform.Op{rot, aff, ra, ta}); got[0] == got[1] {
		t.Fatalf("epochs 0 and 1 gave the same stream %s", got[0])
	}
}
