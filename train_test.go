package pipe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/gpu"
	"github.com/pipefeed/pipe/trainer/nn"
	"github.com/pipefeed/pipe/transform"
)

// trainStages is a small synthetic training run: n samples, the given
// model, with an eval stage on the test split.
func trainStages(t *testing.T, n int, shuffled bool, c TrainConfig, extra ...Stage) []Stage {
	var opts []source.Option
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

func mustFit(t *testing.T, p *Pipeline, o TrainOptions) *TrainResult {
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
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 64}, Epochs: 4, LR: 0.1, BaseBatch: 100,
		Optim: nn.OptimConfig{Momentum: 0.9}, Schedule: "cosine"}}
	for _, shuffled := range []bool{false, true} {
		p := mustNew(t, trainStages(t, 2000, shuffled, c)...)
		res := mustFit(t, p, TrainOptions{})
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
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 2, LR: 0.1, BaseBatch: 100,
		Optim: nn.OptimConfig{Momentum: 0.9}, Schedule: "onecycle"}, Out: dir + "/whole"}
	whole := mustFit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...), TrainOptions{})

	c.Out = dir + "/parts"
	p := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...)
	ctx, stop := context.WithCancel(context.Background())
	_, err := p.Fit(ctx, TrainOptions{OnEpoch: func(TrainEpoch) { stop() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	q := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...)
	resumed := mustFit(t, q, TrainOptions{Resume: true})
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
	other := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...)
	if _, err := other.Fit(context.Background(), TrainOptions{Resume: true}); !errors.Is(err, trainer.ErrCheckpoint) {
		t.Errorf("resume into another model: %v", err)
	}
}

// TestResumeMidEpoch: a stop in the middle of an epoch saves the steps done,
// and the resumed run continues at the next step, ending with the
// uninterrupted run's parameters (two replicas, sync mode, no batch norm).
func TestResumeMidEpoch(t *testing.T) {
	dir := t.TempDir()
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "keras_cnn"}, Epochs: 2, StepsPerEpoch: 3, LR: 0.01,
		BaseBatch: 100, Optim: nn.OptimConfig{Momentum: 0.9}, Schedule: "cosine"}, Out: dir + "/whole"}
	whole := mustFit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...), TrainOptions{})

	c.Out = dir + "/parts"
	p := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...)
	ctx, stop := context.WithCancel(context.Background())
	_, err := p.Fit(ctx, TrainOptions{OnStep: func(s trainer.StepStats) {
		if s.Step == 4 { // epoch 1, step 1 of 3
			stop()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	q := mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...)
	var at [3]int64
	resumed := mustFit(t, q, TrainOptions{Resume: true, OnStart: func(tr *trainer.Trainer) {
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
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "mlp"}, Epochs: 1, LR: 0.1}}
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
	// GPUs in a build without CUDA: the GPU trainer is not there either.
	if !gpu.Compiled {
		_, err := New(append(recipe(synth(t, 640)), Prefetch(PrefetchConfig{Devices: "all"}), Train(c))...)
		if !errors.Is(err, ErrNoCUDA) {
			t.Errorf("devices=all with a train stage, without the cuda build: %v, want ErrNoCUDA", err)
		}
	}
	c.Optim.Name = "lamb"
	p := mustNew(t, append(recipe(synth(t, 640)), Train(c))...)
	if _, err := p.Fit(context.Background(), TrainOptions{}); err == nil || !strings.Contains(err.Error(), "unknown optimizer") {
		t.Errorf("unknown optimizer: %v", err)
	}
}

// chanJob is a job of ranks inside one process, each a goroutine: the
// trainer.Group and AllReducer these tests need without MPI, summing every
// replica of the job in order, as trainer/mpi's Comm does.
type chanJob struct {
	n, round, arrived int
	mu                sync.Mutex
	cond              *sync.Cond
	slots             []any
}

type chanRank struct {
	j    *chanJob
	rank int
}

func newChanJob(n int) []*chanRank {
	j := &chanJob{n: n, slots: make([]any, n)}
	j.cond = sync.NewCond(&j.mu)
	var ranks []*chanRank
	for r := range n {
		ranks = append(ranks, &chanRank{j, r})
	}
	return ranks
}

// exchange gives v as this rank's part and returns every rank's.
func (c *chanRank) exchange(v any) []any {
	j := c.j
	j.mu.Lock()
	defer j.mu.Unlock()
	arrive := func() {
		r := j.round
		if j.arrived++; j.arrived == j.n {
			j.arrived, j.round = 0, j.round+1
			j.cond.Broadcast()
		}
		for r == j.round {
			j.cond.Wait()
		}
	}
	j.slots[c.rank] = v
	arrive()
	out := slices.Clone(j.slots)
	arrive()
	return out
}

func (c *chanRank) Rank() int      { return c.rank }
func (c *chanRank) Size() int      { return c.j.n }
func (c *chanRank) LocalRank() int { return c.rank }
func (c *chanRank) LocalSize() int { return c.j.n }
func (c *chanRank) Barrier() error { c.exchange(nil); return nil }
func (c *chanRank) AllGather64(v []float64) ([]float64, error) {
	var out []float64
	for _, x := range c.exchange(slices.Clone(v)) {
		out = append(out, x.([]float64)...)
	}
	return out, nil
}
func (c *chanRank) Broadcast(b []byte, root int) ([]byte, error) {
	return c.exchange(slices.Clone(b))[root].([]byte), nil
}
func (c *chanRank) AllReduce(bufs [][]float32) error   { return chanMean(c, bufs) }
func (c *chanRank) AllReduce64(bufs [][]float64) error { return chanMean(c, bufs) }

func chanMean[T float32 | float64](c *chanRank, bufs [][]T) error {
	var mine, rows [][]T
	for _, b := range bufs {
		mine = append(mine, slices.Clone(b))
	}
	for _, x := range c.exchange(mine) {
		rows = append(rows, x.([][]T)...)
	}
	inv := 1 / T(len(rows))
	for i := range bufs[0] {
		s := rows[0][i]
		for _, r := range rows[1:] {
			s += r[i]
		}
		for _, b := range bufs {
			b[i] = s * inv
		}
	}
	return nil
}

// fitJob trains stages as ranks goroutine ranks (each with its own
// pipeline, built by NewInGroup), with o and the context ctxOf gives each,
// and returns each rank's result and error.
func fitJob(t *testing.T, ranks int, stages func() []Stage, o TrainOptions, ctxOf func(r int) context.Context) ([]*TrainResult, []error) {
	t.Helper()
	group := newChanJob(ranks)
	res, errs := make([]*TrainResult, ranks), make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		p, err := NewInGroup(group[r], stages()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		wg.Go(func() {
			ctx := context.Background()
			if ctxOf != nil {
				ctx = ctxOf(r)
			}
			res[r], errs[r] = p.Fit(ctx, o)
		})
	}
	wg.Wait()
	return res, errs
}

// sameEpochs compares what two runs report of their epochs, times aside.
func sameEpochs(t *testing.T, what string, got, want []TrainEpoch) {
	t.Helper()
	key := func(e TrainEpoch) string {
		return fmt.Sprintf("epoch %d: %d steps, %d images, loss %v acc %v, test %v %v, lr %v, params %s", e.Epoch, e.Steps, e.Images,
			e.TrainLoss, e.TrainAccuracy, *e.TestLoss, *e.TestAccuracy, e.LR, e.ParamsHash)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d epochs, want %d", what, len(got), len(want))
	}
	for i := range got {
		if g, w := key(got[i]), key(want[i]); g != w {
			t.Errorf("%s:\n got %s\nwant %s", what, g, w)
		}
	}
}

// TestJobEqualsDevices: two ranks of one replica each (NewInGroup, each
// reading its slice of every global batch and evaluating half the held-out
// batches) train the model one process with devices=cpu:2 trains, bit for
// bit: the same params_hash and figures every epoch. Rank 0 alone writes
// the files, and a job stopped mid-epoch on rank 1 resumes, on every rank
// from rank 0's checkpoint, to the same end.
func TestJobEqualsDevices(t *testing.T) {
	dir := t.TempDir()
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 2, LR: 0.1, BaseBatch: 100,
		Optim: nn.OptimConfig{Momentum: 0.9}, Schedule: "cosine", Threads: 2}, Out: dir + "/one"}
	one := mustFit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...), TrainOptions{})

	c.Threads, c.Out = 1, dir+"/job" // one thread a replica, as above
	job, errs := fitJob(t, 2, func() []Stage { return trainStages(t, 400, false, c) }, TrainOptions{}, nil)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	sameEpochs(t, "2 ranks × 1 vs 1 process × 2", job[0].History, one.History)
	sameEpochs(t, "rank 1 vs rank 0", job[1].History, job[0].History)
	if lines, _ := os.ReadFile(filepath.Join(dir, "job", "metrics.jsonl")); strings.Count(string(lines), "\n") != 2 {
		t.Errorf("metrics.jsonl of the job has %d lines, want 2 (rank 0's)", strings.Count(string(lines), "\n"))
	}

	// A job stopped on rank 1 resumes, on every rank from rank 0's
	// checkpoint, to the same end: stopped after epoch 0 (step 4), and in
	// the middle of epoch 0 (after step 3) for a model without batch norm,
	// whose replicas' running statistics a checkpoint does not hold.
	for _, at := range []int64{4, 3} {
		c := c
		o := TrainOptions{}
		ctx, stop := context.WithCancel(context.Background())
		if at == 4 {
			o.OnEpoch = func(TrainEpoch) { stop() }
		} else {
			c.Model = nn.ModelSpec{Name: "mlp", Width: 32}
			c.Out, c.Threads = dir+"/mlp-one", 2
			one = mustFit(t, mustNew(t, trainStages(t, 400, false, c, withDevices(2, 2))...), TrainOptions{})
			c.Threads = 1
			o.OnStep = func(s trainer.StepStats) {
				if s.Step == at {
					stop()
				}
			}
		}
		c.Out = fmt.Sprintf("%s/parts-%d", dir, at)
		stages := func() []Stage { return trainStages(t, 400, false, c) }
		_, errs = fitJob(t, 2, stages, o, func(r int) context.Context {
			if r == 1 {
				return ctx
			}
			return context.Background()
		})
		stop()
		for r, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("rank %d of the job stopped at step %d: %v", r, at, err)
			}
		}
		var steps []int64
		var mu sync.Mutex
		resumed, errs := fitJob(t, 2, stages, TrainOptions{Resume: true,
			OnStart: func(tr *trainer.Trainer) { mu.Lock(); steps = append(steps, tr.Step); mu.Unlock() }}, nil)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if len(steps) != 2 || steps[0] != at || steps[1] != at {
			t.Errorf("stopped at step %d, the ranks resumed at %v", at, steps)
		}
		sameEpochs(t, fmt.Sprintf("stopped at step %d and resumed job vs one process", at), resumed[0].History, one.History)
	}
}

// TestJobErrors: a training file for several ranks run alone, a batch that
// does not divide among the ranks, a world= that is not the job's and an
// evaluation with fewer batches than ranks are refused, saying so.
func TestJobErrors(t *testing.T) {
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Epochs: 1, LR: 0.1}}
	p := mustNew(t, trainStages(t, 400, false, c, Options(Settings{World: 2}))...)
	if _, err := p.Fit(context.Background(), TrainOptions{}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "started alone") {
		t.Errorf("world=2 alone: %v", err)
	}
	for _, tc := range []struct {
		ranks  int
		stages []Stage
		want   string
	}{
		{3, trainStages(t, 400, false, c), "batch 100 is the global batch of the job's 3 ranks"},
		{2, trainStages(t, 400, false, c, Options(Settings{World: 4})), "the file says world=4, and the job has 2 ranks"},
		{5, trainStages(t, 400, false, c), "rank 4 would have none"},
	} {
		if _, err := NewInGroup(newChanJob(tc.ranks)[tc.ranks-1], tc.stages...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d ranks: %v, want an error containing %q", tc.ranks, err, tc.want)
		}
	}
}

// TestBatchCutToTheEpochScalesLRByWhatIsUsed: a batch stage larger than
// the epoch makes one batch of the epoch, and the learning rate is scaled
// by that batch, not the one written (batch 1000 of 100 samples once gave
// lr 0.39 for base 256 where 0.039 is right).
func TestBatchCutToTheEpochScalesLRByWhatIsUsed(t *testing.T) {
	src, err := source.NewSynthetic(100, source.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Epochs: 1, LR: 0.1, BaseBatch: 256, ScaleLR: "linear"}}
	p := mustNew(t, Source(src), Batching(1000, false), Train(c))
	if s := p.Summary(); s.BatchSize != 100 || s.FileBatch != 1000 || s.Batches != 1 || s.GlobalBatch != 100 {
		t.Errorf("summary: batch %d (file %d), %d batches, global %d; want 100 (1000), 1, 100", s.BatchSize, s.FileBatch, s.Batches, s.GlobalBatch)
	}
	var peak float64
	mustFit(t, p, TrainOptions{OnStart: func(tr *trainer.Trainer) { peak = tr.PeakLR() }})
	if want := 0.1 * 100 / 256; math.Abs(peak-want) > 1e-12 {
		t.Errorf("peak lr %g, want %g (scaled by the 100 samples of the batch used)", peak, want)
	}
}

// TestResumedEpochFigures: an epoch resumed after a stop reports the whole
// epoch: its time includes what was trained before the stop, its
// throughput is its images over that time, and the wall time grows by it
// (the throughput was every image of the epoch over the resumed part's
// time, 10× too fast).
func TestResumedEpochFigures(t *testing.T) {
	dir := t.TempDir()
	c := TrainConfig{Config: trainer.Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Epochs: 1, LR: 0.01, BaseBatch: 100},
		Out: dir}
	ctx, stop := context.WithCancel(context.Background())
	_, err := mustNew(t, trainStages(t, 1000, false, c)...).Fit(ctx, TrainOptions{OnStep: func(s trainer.StepStats) {
		if s.Step == 5 {
			time.Sleep(500 * time.Millisecond) // training time before the stop
			stop()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	res := mustFit(t, mustNew(t, trainStages(t, 1000, false, c)...), TrainOptions{Resume: true})
	r := res.History[0]
	if r.Images != 1000 || r.Seconds < 0.5 || math.Abs(r.ImagesPerSec-float64(r.Images)/r.Seconds) > 1e-6*r.ImagesPerSec || r.WallSeconds < 0.5 {
		t.Errorf("resumed epoch: %d images in %.3f s (wall %.3f s), %.0f images/s; want 1000 in ≥ 0.5 s at images/seconds",
			r.Images, r.Seconds, r.WallSeconds, r.ImagesPerSec)
	}
}
