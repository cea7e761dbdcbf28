package fit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

// feed is a learnable set of batches of 1×2×2 images: the label 0 or 1 the
// sign of the first pixel, the same every epoch (global batches of 16).
type feed struct{ batches int }

func (f feed) Epoch(ctx context.Context, e int) (trainer.EpochFeed, error) {
	return &epochFeed{f: f}, nil
}

type epochFeed struct {
	f    feed
	next int
}

func (x *epochFeed) Next(r int) (trainer.Batch, error) {
	if x.next >= x.f.batches {
		return trainer.Batch{}, io.EOF
	}
	b := x.next
	x.next++
	t := nn.NewTensor(16, 1, 2, 2)
	labels := make([]int32, 16)
	samples := make([]int, 16)
	for i := range 16 {
		s := b*16 + i
		v := float32(s%7) - 3
		t.Data[i*4] = v
		t.Data[i*4+1] = float32(s % 3)
		if v > 0 {
			labels[i] = 1
		}
		samples[i] = s
	}
	return trainer.Batch{X: t, Labels: labels, Samples: samples, Release: func() {}}, nil
}

func (x *epochFeed) Stall(int) time.Duration { return 0 }
func (x *epochFeed) Close() error            { return nil }

func spec(out string, epochs int) Spec {
	cfg := trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Input: []int{1, 2, 2}, Classes: 2, Replicas: 1,
		Epochs: epochs, GlobalBatch: 16, BatchesPerEpoch: 5, LR: 0.05, Threads: 1}
	return Spec{Config: cfg, Feed: feed{5}, Eval: feed{2}, EvalEvery: 2, Out: out, LogEvery: 2, Identity: "test data | mlp"}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// TestRunWritesAndResumes: a run writes its checkpoint, an epoch a line of
// metrics and every LogEvery-th step's figures, evaluates every EvalEvery
// epochs and after the last; resumed for more epochs it continues the
// history to the model a run of them all trains; a checkpoint of another
// run is refused.
func TestRunWritesAndResumes(t *testing.T) {
	out := t.TempDir()
	res, err := Run(context.Background(), spec(out, 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.History) != 3 {
		t.Fatalf("%d epochs in the history, want 3", len(res.History))
	}
	for e, ep := range res.History {
		if evaluated := ep.TestAccuracy != nil; evaluated != (e == 1 || e == 2) {
			t.Errorf("epoch %d evaluated: %t; want every 2nd epoch and the last", e, evaluated)
		}
	}
	if n := lines(t, filepath.Join(out, "metrics.jsonl")); n != 3 {
		t.Errorf("metrics.jsonl has %d lines, want 3", n)
	}
	if n := lines(t, filepath.Join(out, "steps.jsonl")); n != 7 {
		t.Errorf("steps.jsonl has %d lines, want 7 (15 steps, every 2nd)", n)
	}

	all := t.TempDir()
	whole, err := Run(context.Background(), spec(all, 5), Options{})
	if err != nil {
		t.Fatal(err)
	}
	more, err := Run(context.Background(), spec(out, 5), Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(more.History) != 5 || more.History[4].ParamsHash != whole.History[4].ParamsHash {
		t.Errorf("resumed to 5 epochs: %d in the history, model %s; a run of 5 trains %s", len(more.History), more.History[len(more.History)-1].ParamsHash, whole.History[4].ParamsHash)
	}

	other := spec(out, 6)
	other.Identity = "other data | mlp"
	if _, err := Run(context.Background(), other, Options{Resume: true}); !errors.Is(err, trainer.ErrCheckpoint) {
		t.Errorf("resuming another run's checkpoint: %v, want ErrCheckpoint", err)
	}
	if _, err := Run(context.Background(), spec("", 1), Options{Resume: true}); err == nil {
		t.Error("a resume without an out directory: no error")
	}
}

// TestIdentity leaves out what may change between a run and its resume:
// the ranks, the devices, the evaluation.
func TestIdentity(t *testing.T) {
	src := source.Info{Identity: "synthetic n=64"}
	cfg := trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Seed: 3}
	base := []pipefile.Stage{pipefile.Batching(16, false)}
	want := Identity(src, base, cfg)
	moved := append([]pipefile.Stage{pipefile.Pipeline(pipefile.Settings{World: 2})}, base...)
	moved = append(moved, pipefile.Prefetch(pipefile.PrefetchConfig{Devices: "cpu:4"}))
	if got := Identity(src, moved, cfg); got != want {
		t.Errorf("identity with ranks and devices %q, without %q", got, want)
	}
	cfg.Seed = 4
	if Identity(src, base, cfg) == want {
		t.Error("another seed has the same identity")
	}
}
