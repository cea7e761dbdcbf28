package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// failing fails reading one sample.
type failing struct {
	source.Source
	at  int
	err error
}

func (f failing) Read(i int, rec *source.Record) error {
	if i == f.at {
		return f.err
	}
	return f.Source.Read(i, rec)
}

func newEngine(t *testing.T, s Spec) *Engine {
	t.Helper()
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestErrorsStopEverything: a read error or a panic stops the epoch with
// that error (a panic with its stack), leaves no goroutine, and the engine
// runs the next epoch.
func TestErrorsStopEverything(t *testing.T) {
	boom := errors.New("disk on fire")
	for name, src := range map[string]source.Source{
		"error": failing{Source: synthetic(t, 400), at: 150, err: boom},
		"panic": panicky{Source: synthetic(t, 400), at: 77},
	} {
		e := newEngine(t, spec(t, src, 3))
		_, err := e.Run(context.Background(), RunOptions{Epochs: 2})
		switch {
		case err == nil:
			t.Fatalf("%s: no error", name)
		case name == "error" && !errors.Is(err, boom):
			t.Errorf("%s: %v", name, err)
		case name == "panic" && (!strings.Contains(err.Error(), "bad sample") || !strings.Contains(err.Error(), "goroutine")):
			t.Errorf("%s: want the panic with its stack, got %v", name, err)
		}
		if x, err := e.Epoch(context.Background(), 0); err != nil {
			t.Errorf("%s: epoch after failure: %v", name, err)
		} else {
			x.Close()
		}
	}
	goleak.VerifyNone(t)
}

// TestCancelAndEarlyClose: cancelling a run returns every slab and leaves
// no goroutine; a batch delivered before an epoch is closed stays valid
// until released.
func TestCancelAndEarlyClose(t *testing.T) {
	e := newEngine(t, spec(t, synthetic(t, 2000), 3))
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := e.Run(ctx, RunOptions{Epochs: 5, OnBatch: func(b *Batch) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	goleak.VerifyNone(t)
	if held := e.Buffers().SlabsHeld; held != 0 {
		t.Fatalf("%d slabs not returned after cancel", held)
	}
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := x.Next()
	x.Close()
	goleak.VerifyNone(t)
	if len(b.Data) == 0 || e.Buffers().SlabsHeld != 1 {
		t.Fatalf("a delivered batch must stay valid after Close: %d slabs out", e.Buffers().SlabsHeld)
	}
	b.Release()
	if e.Buffers().SlabsHeld != 0 {
		t.Fatal("slab not returned by Release after Close")
	}
}

// TestHoldingEveryBatchIsAnError: a consumer that releases nothing gets
// every slab, then an error that says to release, not a hang.
func TestHoldingEveryBatchIsAnError(t *testing.T) {
	e := newEngine(t, spec(t, synthetic(t, 2000), 1))
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var held []*Batch
	for {
		b, err := x.Next()
		if err != nil {
			if !strings.Contains(err.Error(), "Release") {
				t.Fatalf("got %v, want an error telling to release", err)
			}
			break
		}
		held = append(held, b)
	}
	if len(held) != e.Buffers().Slabs {
		t.Errorf("held %d batches, pool has %d slabs", len(held), e.Buffers().Slabs)
	}
	for _, b := range held {
		b.Release()
	}
}

func TestOneEpochAtATime(t *testing.T) {
	e := newEngine(t, spec(t, synthetic(t, 100), 2))
	x, _ := e.Epoch(context.Background(), 0)
	if _, err := e.Epoch(context.Background(), 1); !errors.Is(err, ErrBusy) {
		t.Errorf("second open epoch: %v", err)
	}
	x.Close()
}

// TestNoAllocationPerBatch: an epoch's allocations do not grow with its
// batches: slabs, index buffers and scratch are kept across epochs.
func TestNoAllocationPerBatch(t *testing.T) {
	allocs := func(n int) float64 {
		e := newEngine(t, spec(t, synthetic(t, n), 2))
		e.Run(context.Background(), RunOptions{}) // warm the slabs and plan buffer
		return testing.AllocsPerRun(3, func() {
			if _, err := e.Run(context.Background(), RunOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(50*10), allocs(50*100)
	t.Logf("allocations per epoch: %v for 10 batches, %v for 100", small, large)
	if large > small+5 {
		t.Errorf("an epoch of 100 batches allocates %v times, one of 10 batches %v: allocation grows with batches", large, small)
	}
}

// TestTypedViewsCheckTheDType: Batch.Float32 views float32 batches and
// refuses others with ErrDType.
func TestTypedViewsCheckTheDType(t *testing.T) {
	for _, c := range []struct {
		dtype transform.DType
		ok    bool
	}{{transform.Float32, true}, {transform.Uint8, false}} {
		s := spec(t, synthetic(t, 100), 2)
		var norm *transform.Normalization
		if c.dtype == transform.Float32 {
			norm = s.Host.Norm
		}
		tensor, err := transform.ToTensor(transform.NCHW, c.dtype, norm, s.InShape)
		if err != nil {
			t.Fatal(err)
		}
		s.Host, s.Out = tensor, tensor
		e := newEngine(t, s)
		x, err := e.Epoch(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := x.Next()
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Float32()
		switch {
		case c.ok && (err != nil || len(f) != b.N*3*32*32):
			t.Errorf("%s: Float32 gave %d values, %v", c.dtype, len(f), err)
		case !c.ok && !errors.Is(err, ErrDType):
			t.Errorf("Float32 of a %s batch: %v, want ErrDType", c.dtype, err)
		}
		b.Release()
		x.Close()
	}
}
