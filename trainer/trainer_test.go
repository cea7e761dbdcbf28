package trainer

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/splitmix"
	"github.com/pipefeed/pipe/trainer/nn"
)

// fakeFeed serves global batches of deterministic data: sample s of the run
// has values keyed by s and label s%classes (plus a class-dependent offset
// in channel 0, so there is something to learn). Replica r gets rows
// [r·G/R, (r+1)·G/R) of each global batch; as rank k of ranks (ranks > 1),
// its replica r is the job's replica k·replicas+r, of replicas·ranks.
type fakeFeed struct {
	shape            []int
	global, replicas int
	batches, classes int
	rank, ranks      int
}

type fakeEpoch struct {
	f    *fakeFeed
	e    int
	next []int
}

func (f *fakeFeed) Epoch(_ context.Context, e int) (EpochFeed, error) {
	return &fakeEpoch{f: f, e: e, next: make([]int, f.replicas)}, nil
}

func (x *fakeEpoch) Next(r int) (Batch, error) {
	f := x.f
	b := x.next[r]
	if b >= f.batches {
		return Batch{}, io.EOF
	}
	x.next[r]++
	per := f.global / (f.replicas * max(f.ranks, 1))
	t := nn.NewTensor(append([]int{per}, f.shape...)...)
	n := len(t.Data) / per
	var labels []int32
	var samples []int
	for i := range per {
		s := (x.e*f.batches+b)*f.global + (f.rank*f.replicas+r)*per + i
		label := s % f.classes
		for j := range n {
			v := float32(uniform(99, int64(s), int64(j), 0)*2 - 1)
			if j < n/f.shape[0] {
				v += float32(label) * 0.5
			}
			t.Data[i*n+j] = v
		}
		labels = append(labels, int32(label))
		samples = append(samples, s)
	}
	return Batch{X: t, Labels: labels, Samples: samples, Release: func() {}}, nil
}

func (x *fakeEpoch) Stall(int) time.Duration { return 0 }
func (x *fakeEpoch) Close() error            { return nil }

func train(t *testing.T, cfg Config, feed *fakeFeed) *Trainer {
	t.Helper()
	cfg.GlobalBatch, cfg.BatchesPerEpoch = feed.global, feed.batches
	cfg.Input, cfg.Classes, cfg.Replicas = feed.shape, feed.classes, feed.replicas
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for tr.Epoch < cfg.Epochs {
		if _, err := tr.RunEpoch(context.Background(), feed, nil); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// sameParams reports the worst relative difference ||a-b|| / ||b|| over the
// trained parameters of two models.
func sameParams(a, b *nn.Model) (worst float64, name string) {
	for i, p := range a.Params() {
		if p.Buffer {
			continue
		}
		q := b.Params()[i]
		var d, n float64
		for j := range p.W {
			d += math.Pow(float64(p.W[j]-q.W[j]), 2)
			n += math.Pow(float64(q.W[j]), 2)
		}
		if r := math.Sqrt(d / max(n, 1e-30)); r > worst {
			worst, name = r, p.Name
		}
	}
	return worst, name
}

// TestDataParallelEquivalence: 4 replicas × 32 in sync mode give the
// parameters of 1 replica × 128 after 20 steps (keras_cnn, with dropout:
// its masks follow the samples, not the replicas).
func TestDataParallelEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("trains keras_cnn twice")
	}
	cfg := Config{Model: nn.ModelSpec{Name: "keras_cnn"}, Epochs: 1, Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.05, BaseBatch: 128,
		Seed: 5, Threads: 2}
	one := train(t, cfg, &fakeFeed{shape: []int{3, 16, 16}, global: 128, replicas: 1, batches: 20, classes: 10})
	four := train(t, cfg, &fakeFeed{shape: []int{3, 16, 16}, global: 128, replicas: 4, batches: 20, classes: 10})
	// Gradients are summed in float64 from per-sample (per-chunk) terms
	// that do not depend on the split, so the two runs round to the same
	// float32 gradients: the parameters agree to the bit, not just to
	// 1e-4. (Summed in float32, they would differ by rounding, and a
	// max-pool or ReLU decision flipped by it grows with every step.)
	d, name := sameParams(four.Model(), one.Model())
	t.Logf("4×32 vs 1×128 after 20 steps: worst relative difference %.2g (%s)", d, name)
	if d > 1e-4 || math.IsNaN(d) {
		t.Errorf("4×32 vs 1×128 after 20 steps: %s differs by %.2g (relative)", name, d)
	}
	// The parameters moved: the comparison is not of two initial models.
	init, _ := cfg.Model.Build([]int{3, 16, 16}, 10, 5)
	if d, _ := sameParams(one.Model(), init); d < 1e-3 {
		t.Errorf("training changed the parameters by only %.2g", d)
	}
}

// TestTrainLossIndependentOfReplicas: an epoch's training loss is the same
// float64, to the bit, whether its batches of 128 ran on 1, 2, 4 or 8
// replicas: each sample's loss is summed in fixed point (nn.LossSum), so
// the grouping does not round it (a replica's mean times its count did,
// in the last bit, as TestMPIResumeOnOtherRanks saw now and then). The
// samples' losses themselves must agree: a split into 3 × 32 of 96 gives
// the dense layers other row blocks, and logits that differ in the low
// bits.
func TestTrainLossIndependentOfReplicas(t *testing.T) {
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 32}, Epochs: 1, Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.05,
		BaseBatch: 128, Seed: 3, Threads: 2}
	var want float64
	for _, replicas := range []int{1, 2, 4, 8} {
		feed := &fakeFeed{shape: []int{3, 8, 8}, global: 128, replicas: replicas, batches: 12, classes: 10}
		c := cfg
		c.GlobalBatch, c.BatchesPerEpoch = feed.global, feed.batches
		c.Input, c.Classes, c.Replicas = feed.shape, feed.classes, feed.replicas
		tr, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		st, err := tr.RunEpoch(context.Background(), feed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if replicas == 1 {
			want = st.TrainLoss
		} else if st.TrainLoss != want {
			t.Errorf("%d replicas: train loss %.17g; 1 replica: %.17g", replicas, st.TrainLoss, want)
		}
	}
}

// TestLocalSGDEveryStepIsSync: with plain SGD, averaging parameters after
// every local step is the synchronous update.
func TestLocalSGDEveryStepIsSync(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 32, replicas: 4, batches: 10, classes: 10}
	cfg := Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 1, Optim: nn.OptimConfig{Momentum: 0}, LR: 0.05,
		BaseBatch: 32, Seed: 2, Threads: 2}
	sync := train(t, cfg, feed)
	cfg.Mode, cfg.AverageEvery = "local", 1
	local := train(t, cfg, feed)
	if d, name := sameParams(local.Model(), sync.Model()); d > 1e-4 || math.IsNaN(d) {
		t.Errorf("average_every=1 vs sync: %s differs by %.2g (relative)", name, d)
	}
	cfg.AverageEvery = 5
	apart := train(t, cfg, feed)
	if d, _ := sameParams(apart.Model(), sync.Model()); d < 1e-6 {
		t.Errorf("average_every=5 equals sync (%.2g): local steps made no difference", d)
	}
}

// TestTrainingLearns: loss falls on learnable data, and the epoch figures
// are filled in.
func TestTrainingLearns(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 64, replicas: 2, batches: 30, classes: 10}
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 64}, Epochs: 3, Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.05,
		BaseBatch: 64, Seed: 1, Threads: 2, Schedule: "cosine", WarmupEpochs: 0.5}
	cfg.GlobalBatch, cfg.BatchesPerEpoch = feed.global, feed.batches
	cfg.Input, cfg.Classes, cfg.Replicas = feed.shape, feed.classes, feed.replicas
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var first, last EpochStats
	for e := range 3 {
		st, err := tr.RunEpoch(context.Background(), feed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e == 0 {
			first = st
		}
		last = st
	}
	if !(last.TrainLoss < first.TrainLoss*0.8) || last.TrainAccuracy < 0.3 || last.Steps != 30 || last.Images != 30*64 {
		t.Errorf("first %+v, last %+v", first, last)
	}
	ev, err := tr.Evaluate(context.Background(), &fakeFeed{shape: feed.shape, global: 64, replicas: 1, batches: 5, classes: 10})
	if err != nil || ev.Images != 320 || ev.Accuracy < 0.3 { // chance: 0.1
		t.Errorf("eval %+v, %v", ev, err)
	}
}

func TestScheduleAndScaling(t *testing.T) {
	s := nn.ScheduleConfig{Kind: "cosine", WarmupSteps: 10, TotalSteps: 110}
	if got := s.At(0, 1); math.Abs(got-0.1) > 1e-12 {
		t.Errorf("warm-up start %g", got)
	}
	if got := s.At(9, 1); got != 1 {
		t.Errorf("warm-up end %g", got)
	}
	if got := s.At(60, 1); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("cosine midpoint %g", got)
	}
	st := nn.ScheduleConfig{Kind: "step", StepEvery: 10, Gamma: 0.1}
	if got := st.At(25, 1); math.Abs(got-0.01) > 1e-12 {
		t.Errorf("step at 25: %g", got)
	}
	oc := nn.ScheduleConfig{Kind: "onecycle", TotalSteps: 100}
	if a, b, c := oc.At(0, 1), oc.At(30, 1), oc.At(99, 1); !(a < 0.05 && b > 0.99 && c < 0.01) {
		t.Errorf("onecycle %g %g %g", a, b, c)
	}
	for _, c := range []struct {
		rule string
		want float64
	}{{"linear", 0.4}, {"sqrt", 0.2}, {"none", 0.1}} {
		if got, _ := nn.ScaleLR(0.1, c.rule, 256, 1024); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("scale_lr=%s: %g, want %g", c.rule, got, c.want)
		}
	}
	if _, err := nn.ScaleLR(0.1, "cubic", 256, 1024); err == nil {
		t.Error("unknown scale_lr accepted")
	}
}

// panicFeed panics serving replica 1's third batch.
type panicFeed struct{ fakeFeed }

type panicEpoch struct{ *fakeEpoch }

func (f *panicFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, _ := f.fakeFeed.Epoch(ctx, e)
	return panicEpoch{x.(*fakeEpoch)}, nil
}

func (x panicEpoch) Next(r int) (Batch, error) {
	if r == 1 && x.next[r] == 2 {
		panic("replica 1 fell over")
	}
	return x.fakeEpoch.Next(r)
}

// TestReplicaPanicIsAnError: a panic in one replica's step ends the epoch
// with an error carrying the panic and its stack, not a crash.
func TestReplicaPanicIsAnError(t *testing.T) {
	feed := &panicFeed{fakeFeed{shape: []int{1, 4, 4}, global: 8, replicas: 2, batches: 5, classes: 2}}
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, Epochs: 1, LR: 0.1, Threads: 2}
	cfg.GlobalBatch, cfg.BatchesPerEpoch = feed.global, feed.batches
	cfg.Input, cfg.Classes, cfg.Replicas = feed.shape, feed.classes, feed.replicas
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.RunEpoch(context.Background(), feed, nil)
	if err == nil || !strings.Contains(err.Error(), "replica 1 fell over") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("want the panic with its stack, got %v", err)
	}
}

// uniform returns a float in [0, 1) keyed by the four values (nn's
// initialiser's hash, for test data).
func uniform(seed uint64, a, b, c int64) float64 {
	x := splitmix.Mix(seed ^ splitmix.Mix(uint64(a)^splitmix.Mix(uint64(b)^splitmix.Mix(uint64(c)))))
	return float64(x>>11) / (1 << 53)
}
