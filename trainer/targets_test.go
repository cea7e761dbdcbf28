package trainer

import (
	"context"
	"errors"
	"testing"

	"github.com/pipefeed/pipe/trainer/nn"
)

// oneHotFeed is a feed whose batches carry their labels as one-hot soft
// targets too (MixUp's with λ = 1).
type oneHotFeed struct{ *fakeFeed }

func (f oneHotFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, err := f.fakeFeed.Epoch(ctx, e)
	return oneHotEpoch{x, f.classes}, err
}

type oneHotEpoch struct {
	EpochFeed
	classes int
}

func (x oneHotEpoch) Next(r int) (Batch, error) {
	b, err := x.EpochFeed.Next(r)
	if err == nil {
		b.Targets = make([]float32, len(b.Labels)*x.classes)
		for i, y := range b.Labels {
			b.Targets[i*x.classes+int(y)] = 1
		}
	}
	return b, err
}

// TestOneHotTargetsTrainAsLabels: one-hot soft targets train the model the
// int labels train, bit for bit, with the same loss and accuracy, on two
// replicas with label smoothing.
func TestOneHotTargetsTrainAsLabels(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 32, replicas: 2, batches: 3, classes: 4}
	cfg := Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 1, Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.05, Seed: 3, Smoothing: 0.1, Mode: "sync"}
	cfg.GlobalBatch, cfg.BatchesPerEpoch = feed.global, feed.batches
	cfg.Input, cfg.Classes, cfg.Replicas = feed.shape, feed.classes, feed.replicas
	var hashes []string
	var stats []EpochStats
	for _, f := range []Feed{feed, oneHotFeed{feed}} {
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := tr.RunEpoch(context.Background(), f, nil)
		if err != nil {
			t.Fatal(err)
		}
		hashes, stats = append(hashes, tr.Model().Hash()), append(stats, st)
	}
	if hashes[0] != hashes[1] || stats[0].TrainLoss != stats[1].TrainLoss || stats[0].TrainAccuracy != stats[1].TrainAccuracy {
		t.Errorf("labels: %s loss %g accuracy %g; one-hot targets: %s loss %g accuracy %g",
			hashes[0][:12], stats[0].TrainLoss, stats[0].TrainAccuracy, hashes[1][:12], stats[1].TrainLoss, stats[1].TrainAccuracy)
	}
}

// TestSoftTargetsOnAccelerator: an accelerator, which learns from int
// labels only, refuses a batch with soft targets rather than train on its
// labels.
func TestSoftTargetsOnAccelerator(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 16, replicas: 1, batches: 1, classes: 4}
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, LR: 0.1, GlobalBatch: 16, BatchesPerEpoch: 1, Input: feed.shape, Classes: 4}
	cfg.Accelerators = []Accelerator{newHostAccel(t, cfg)}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RunEpoch(context.Background(), oneHotFeed{feed}, nil); !errors.Is(err, ErrSoftTargets) {
		t.Fatalf("got %v, want ErrSoftTargets", err)
	}
}
