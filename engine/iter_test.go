package engine

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
)

// TestAllIsNext: a range over All gives the batches Next gives, in order,
// each released when the body returns; a break leaves the rest to Next;
// a cancelled epoch yields its error once, as the last pair.
func TestAllIsNext(t *testing.T) {
	e, err := New(spec(t, synthetic(t, 730), 2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	labels := func(x *Epoch, stopAt int) (out [][]int32) {
		for b, err := range x.All() {
			if err != nil {
				t.Fatal(err)
			}
			if x.held.Load() != 1 {
				t.Fatalf("%d batches held in the body; want 1", x.held.Load())
			}
			out = append(out, slices.Clone(b.Labels))
			if len(out) == stopAt {
				break
			}
		}
		return out
	}
	x, err := e.Epoch(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int32
	for {
		b, err := x.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, slices.Clone(b.Labels))
		b.Release()
	}
	x.Close()

	y, _ := e.Epoch(context.Background(), 1)
	got := labels(y, 5)
	if y.held.Load() != 0 {
		t.Errorf("%d batches held after a break", y.held.Load())
	}
	b, err := y.Next()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, slices.Clone(b.Labels))
	b.Release()
	got = append(got, labels(y, -1)...)
	y.Close()
	if len(got) != len(want) || len(want) != 15 {
		t.Fatalf("%d batches through All and Next, %d through Next", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	z, _ := e.Epoch(ctx, 1)
	defer z.Close()
	var errs []error
	n := 0
	for b, err := range z.All() {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n++; n == 2 {
			cancel()
		}
		_ = b
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("errors after a cancel: %v", errs)
	}
}
