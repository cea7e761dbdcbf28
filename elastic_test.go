package pipe

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// elasticStream is the global stream of epoch e of an elastic pipeline run
// as world ranks, each reading its slice of every global batch of 64: the
// ranks' batch b, in rank order, for every b, hashed.
func elasticStream(t *testing.T, world, e int) string {
	t.Helper()
	sum := NewChecksum()
	var epochs []*Epoch
	for r := range world {
		src, err := source.NewSynthetic(1000, source.Train, 1)
		if err != nil {
			t.Fatal(err)
		}
		crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
		flip, _ := transform.Flip(transform.Horizontal, 0.5)
		p := mustNew(t, Source(src), Shuffle(3), Map(crop), Map(flip),
			Options(Settings{Rank: r, World: world, Elastic: true}), Batching(64/world, false))
		if g := p.GlobalBatch(); g != 64 {
			t.Fatalf("world %d: global batch %d, want 64", world, g)
		}
		x, err := p.Epoch(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		epochs = append(epochs, x)
	}
	batches := 0
	for {
		for r, x := range epochs {
			b, err := x.Next()
			if errors.Is(err, io.EOF) {
				if r != 0 {
					t.Fatalf("world %d: rank %d ended before rank 0", world, r)
				}
				if batches != 1000/64 {
					t.Fatalf("world %d: %d global batches, want %d", world, batches, 1000/64)
				}
				return sum.String()
			}
			if err != nil {
				t.Fatal(err)
			}
			sum.Add(b)
			b.Release()
		}
		batches++
	}
}

// TestElasticGlobalStream: with pipeline elastic=true the concatenated
// global stream of 1, 2 and 4 ranks is the same, sample for sample and
// augmentation for augmentation, epoch after epoch; without it the ranks'
// last samples, and so the stream, depend on their number.
func TestElasticGlobalStream(t *testing.T) {
	for e := range 2 {
		one := elasticStream(t, 1, e)
		for _, world := range []int{2, 4} {
			if got := elasticStream(t, world, e); got != one {
				t.Errorf("epoch %d: %d ranks stream %s, one rank %s", e, world, got, one)
			}
		}
	}
}
