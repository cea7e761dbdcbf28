package engine

import (
	"context"
	"strings"
	"testing"
)

// TestBatchLargerThanTheEpoch: a batch size beyond the epoch's samples
// gives one short batch holding every sample, from slabs sized by the
// samples (a batch of 10 million over 1,000 samples asked for 30 GB, and
// 99999999999 panicked in makeslice).
func TestBatchLargerThanTheEpoch(t *testing.T) {
	for _, batch := range []int{10_000_000, 99_999_999_999} {
		s := spec(t, synthetic(t, 300), 2)
		s.Batch = batch
		e, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		x, err := e.Epoch(context.Background(), 0)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		b, err := x.Next()
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if b.N != 300 || len(b.Labels) != 300 {
			t.Errorf("batch %d: a batch of %d samples (%d labels), want all 300", batch, b.N, len(b.Labels))
		}
		b.Release()
		x.Close()
		if got, want := e.slabs.Bytes(), int64(e.slabs.Len()*300*(s.Host.SampleBytes()+4)); got != want {
			t.Errorf("batch %d: %d bytes of slabs, want %d (300 samples and labels each)", batch, got, want)
		}
		e.Close()
	}
}

// TestSlabsBeyondMemoryAreRefused: slabs larger than the machine (or than
// any machine: an overflowing product) are an error that names the figures,
// not a panic or an out-of-memory death.
func TestSlabsBeyondMemoryAreRefused(t *testing.T) {
	for _, c := range []struct{ n, rows, sb int }{
		{4, 100_000_000, 12288},     // 4.9 TB
		{4, 1 << 40, 1 << 30},       // overflows uint64
		{1 << 40, 1 << 20, 1 << 10}, // overflows in the slab count
	} {
		err := checkMemory(c.n, c.rows, c.sb)
		if err == nil || !strings.Contains(err.Error(), "do not fit in memory") || !strings.Contains(err.Error(), "lower the batch size") {
			t.Errorf("%d slabs of %d × %d bytes: %v", c.n, c.rows, c.sb, err)
		}
	}
	if err := checkMemory(4, 256, 12288); err != nil {
		t.Errorf("12 MB of slabs: %v", err)
	}
}
