package pipe

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/transform"
)

// trainStages is a small synthetic training run: n samples, the given
// model, with an eval stage on the test split.
func trainStages(t *testing.T, n int, shuffled bool, c TrainConfig, extra ...Stage) []Stage {
	var opts []source.SyntheticOption
	if shuffled {
		opts = append(opts, source.WithShuffledLabels())
	}
	src, err := source.NewSynthetic(n, source.Train, 1, opts...)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := source.NewSynthetic(1000, source.Test, 1)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	norm, _ := transform.Normalize([]float64{0.5}, []float64{0.25})
	stages := []Stage{Source(src), Shuffle(3), Map(flip), Normalize(norm), Batching(100, false), ToTensor(transform.NCHW, transform.Float32)}
	stages = append(stages, extra...)
	return append(stages, Train(c), Eval(EvalConfig{Source: test, Every: 1, Batch: 250}))
}

func fit(t *testing.T, p *Pipeline, o TrainOptions) *TrainResult {
	t.Helper()
	res, err := p.Fit(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTrainLearnsTrueLabelsNotShuffledOnes: the same model and data learn
// with the true labels and stay at chance on the test split with shuffled
// ones.
func TestTrainLearnsTrueLabelsNotShuffledOnes(t *testing.T) {
	c := TrainConfig{Config: trainer.Config{Model: trainer.ModelSpec{Name: "mlp", Width: 64}, Epochs: 4, LR: 0.1, BaseBatch: 100,
		Optim: trainer.OptimConfig{Momentum: 0.9}, Schedule: "cosine"}}
	for _, shuffled := range []bool{false, true} {
		p := mustNew(t, trainStages(t, 2000, shuffled, c)...)
		res := fit(t, p, TrainOptions{})
		last := res.History[len(res.History)-1]
		acc := *last.TestAccuracy
		// Chance is 0.1.
		if !shuffled && acc < 0.4 {
			t.Errorf("true labels: test accuracy %.3f after 4 epochs", acc)
		}
		if shuffled && acc > 0.2 {
			t.Errorf("shuffled labels: test accuracy %.3f, want chance", acc)
		}
	}
}

// TestResumeContinuesExactly: stopping after epoch 1 of 2 and resuming
// ends with the parameters and history of the uninterrupted run.
func TestResumeContinuesExactly(t *testing.T) {
	dir := t.TempDir()
	c := TrainConfig{Config: trainer.Config{Model: trainer.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 2, LR: 0.1, BaseBatch: 100,
		Optim: trainer.OptimConfig{Momentum: 0.9}, Schedule: "onecycle"}, Out: dir + "/whole"}
	whole := fit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...), TrainOptions{})

	c.Out = dir + "/parts"
	p := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...)
	ctx, stop := context.WithCancel(context.Background())
	_, err := p.Fit(ctx, TrainOptions{OnEpoch: func(TrainEpoch) { stop() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	q := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...)
	resumed := fit(t, q, TrainOptions{Resume: true})
	if len(resumed.History) != 2 || resumed.Trainer.Step != whole.Trainer.Step {
		t.Fatalf("resumed: %d epochs, step %d; want 2 epochs, step %d", len(resumed.History), resumed.Trainer.Step, whole.Trainer.Step)
	}
	a, b := whole.Trainer.Model().Params(), resumed.Trainer.Model().Params()
	for i := range a {
		for j := range a[i].W {
			if a[i].W[j] != b[i].W[j] {
				t.Fatalf("parameter %d (%s) value %d: %g uninterrupted, %g resumed", i, a[i].Name, j, a[i].W[j], b[i].W[j])
			}
		}
	}
	if whole.History[1].TrainLoss != resumed.History[1].TrainLoss || *whole.History[1].TestAccuracy != *resumed.History[1].TestAccuracy {
		t.Errorf("epoch 1: uninterrupted %+v, resumed %+v", whole.History[1], resumed.History[1])
	}
	// A checkpoint from another run is refused.
	c.Model.Width = 8
	other := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...)
	if _, err := other.Fit(context.Background(), TrainOptions{Resume: true}); !errors.Is(err, trainer.ErrCheckpoint) {
		t.Errorf("resume into another model: %v", err)
	}
}

// TestResumeMidEpoch: a stop in the middle of an epoch saves the steps done,
// and the resumed run continues at the next step, ending with the
// uninterrupted run's parameters (two replicas, sync mode, no batch norm).
func TestResumeMidEpoch(t *testing.T) {
	dir := t.TempDir()
	c := TrainConfig{Config: trainer.Config{Model: trainer.ModelSpec{Name: "keras_cnn"}, Epochs: 2, StepsPerEpoch: 3, LR: 0.01,
		BaseBatch: 100, Optim: trainer.OptimConfig{Momentum: 0.9}, Schedule: "cosine"}, Out: dir + "/whole"}
	whole := fit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...), TrainOptions{})

	c.Out = dir + "/parts"
	p := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...)
	ctx, stop := context.WithCancel(context.Background())
	_, err := p.Fit(ctx, TrainOptions{OnStep: func(s trainer.StepStats) {
		if s.Step == 4 { // epoch 1, step 1 of 3
			stop()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	q := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2, 0))...)
	var at [3]int64
	resumed := fit(t, q, TrainOptions{Resume: true, OnStart: func(tr *trainer.Trainer) {
		at = [3]int64{int64(tr.Epoch), int64(tr.InEpoch), tr.Step}
	}})
	if at != [3]int64{1, 1, 4} {
		t.Fatalf("resumed at epoch %d, step %d of it, step %d in all; want 1, 1, 4", at[0], at[1], at[2])
	}
	a, b := whole.Trainer.Model().Params(), resumed.Trainer.Model().Params()
	for i := range a {
		for j := range a[i].W {
			if a[i].W[j] != b[i].W[j] {
				t.Fatalf("parameter %d (%s) value %d: %g uninterrupted, %g resumed", i, a[i].Name, j, a[i].W[j], b[i].W[j])
			}
		}
	}
	if w, r := whole.History[1], resumed.History[1]; w.TrainLoss != r.TrainLoss || w.Images != r.Images || w.Steps != r.Steps {
		t.Errorf("epoch 1: uninterrupted %+v, resumed %+v", w, r)
	}
}

func TestTrainConfigErrors(t *testing.T) {
	c := TrainConfig{Config: trainer.Config{Model: trainer.ModelSpec{Name: "mlp"}, Epochs: 1, LR: 0.1}}
	for _, tc := range []struct {
		stages []Stage
		want   string
	}{
		{append(recipe(synth(t, 640)), Train(c), ToTensor(transform.NCHW, transform.Float32)), "only eval may follow train"},
		{append(recipe(synth(t, 640))[:7], ToTensor(transform.NHWC, transform.Float32), Train(c)), "NCHW float32"},
		{append(recipe(synth(t, 640))[:5], Train(c)), "comes after batch"},
		{append(recipe(synth(t, 640)), Eval(EvalConfig{Source: synth(t, 10), Every: 1, Batch: 10})), "eval needs a train stage"},
	} {
		if _, err := New(tc.stages...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	c.Optim.Name = "lamb"
	p := mustNew(t, append(recipe(synth(t, 640)), Train(c))...)
	if _, err := p.Fit(context.Background(), TrainOptions{}); err == nil || !strings.Contains(err.Error(), "unknown optimizer") {
		t.Errorf("unknown optimizer: %v", err)
	}
}
