package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/alitto/pond/v2"
)

// Batch is one replica's slice of a global batch: X is [N, C, H, W]
// float32, Samples the global sample indices (they key dropout masks).
// Release hands the memory back to the pipeline.
type Batch struct {
	X       *Tensor
	Labels  []int32
	Samples []int
	Release func()
}

// Feed is the data of a run: the pipeline's per-device queues, one per
// replica.
type Feed interface {
	// Epoch starts epoch e.
	Epoch(ctx context.Context, e int) (EpochFeed, error)
}

// EpochFeed is one epoch of a Feed. Next(r) returns replica r's slices of
// the global batches in order, io.EOF after the last; each replica may call
// it from its own goroutine.
type EpochFeed interface {
	Next(r int) (Batch, error)
	// Stall is how long replica r waited for data so far.
	Stall(r int) time.Duration
	Close() error
}

// AllReducer averages buffers across replicas: after AllReduce(bufs), each
// of bufs holds the element-wise mean of all of them; AllReduce64 does the
// same for the float64 gradient sums, adding the replicas in their order.
// The trainer's loop only calls these, so an implementation across
// processes (MPI, NCCL) slots in without touching it.
type AllReducer interface {
	AllReduce(bufs [][]float32) error
	AllReduce64(bufs [][]float64) error
}

// LocalAllReduce averages replicas in one process, the vector cut among the
// pool's workers. Each element's sum runs over the replicas in order, so the
// result does not depend on the workers.
type LocalAllReduce struct{ Pool *Pool }

func (a LocalAllReduce) AllReduce(bufs [][]float32) error { return mean(a.Pool, bufs) }

func (a LocalAllReduce) AllReduce64(bufs [][]float64) error { return mean(a.Pool, bufs) }

func mean[T float32 | float64](pool *Pool, bufs [][]T) error {
	if len(bufs) < 2 {
		return nil
	}
	n := len(bufs[0])
	for _, b := range bufs {
		if len(b) != n {
			return fmt.Errorf("trainer: all-reduce of buffers of %d and %d values", n, len(b))
		}
	}
	inv := 1 / T(len(bufs))
	if pool == nil {
		pool = NewPool(1)
	}
	pool.Run(n, func(lo, hi, _ int) {
		for i := lo; i < hi; i++ {
			s := bufs[0][i]
			for _, b := range bufs[1:] {
				s += b[i]
			}
			s *= inv
			for _, b := range bufs {
				b[i] = s
			}
		}
	})
	return nil
}

// Config configures a training run. Zero values take the defaults given.
type Config struct {
	Model ModelSpec
	// Input is the per-sample shape [C, H, W]; Classes the label count.
	Input   []int
	Classes int
	// Replicas is the number of devices, one model replica each. Default 1.
	Replicas int
	// Epochs to train (default 1); StepsPerEpoch caps an epoch (0: all of
	// it), for quick runs and benchmarks.
	Epochs, StepsPerEpoch int
	// GlobalBatch is the samples per step over all replicas; BatchesPerEpoch
	// how many global batches an epoch has.
	GlobalBatch, BatchesPerEpoch int
	Optim                        OptimConfig
	// LR is the peak learning rate for batch BaseBatch (default 256),
	// scaled to GlobalBatch by ScaleLR: linear (default), sqrt or none.
	LR        float64
	BaseBatch int
	ScaleLR   string
	// Schedule shapes the rate; WarmupEpochs and StepEvery (epochs) are
	// turned into steps.
	Schedule     string
	WarmupEpochs float64
	StepEvery    int
	Gamma        float64
	// Smoothing is the label smoothing of the loss.
	Smoothing float64
	// Mode is sync (default: gradients averaged every step), local
	// (parameters averaged every AverageEvery steps: local SGD) or mixture
	// (parameters averaged once per epoch).
	Mode         string
	AverageEvery int
	Seed         uint64
	// Threads is the number of cores the replicas share. Default 1.
	Threads int
	// Reducer averages across replicas. Default LocalAllReduce.
	Reducer AllReducer
}

// Modes lists the data-parallel modes.
var Modes = []string{"sync", "local", "mixture"}

// Trainer trains one model data-parallel on its replicas.
type Trainer struct {
	cfg      Config
	replicas []*replica
	sched    ScheduleConfig
	peak     float64
	steps    int // steps per epoch
	// Step is the number of steps taken; Epoch the epoch running or next
	// to run, of which InEpoch steps are done.
	Step    int64
	Epoch   int
	InEpoch int
	// part holds the figures of InEpoch's steps, for a resumed epoch.
	part partial
	// runner runs the replicas' steps, one goroutine each.
	runner pond.Pool
}

// partial sums an epoch's steps.
type partial struct {
	Loss    float64
	Correct int
	Images  int
}

type replica struct {
	model *Model
	opt   *Optimizer
	pool  *Pool
	loss  SoftmaxCrossEntropy
	ctx   Context
	// this step's figures
	lossSum float64
	correct int
	n       int
	err     error
}

// New builds the replicas, every one initialised identically from the seed.
func New(cfg Config) (*Trainer, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 1
	}
	if cfg.BaseBatch == 0 {
		cfg.BaseBatch = 256
	}
	if cfg.Threads == 0 {
		cfg.Threads = 1
	}
	if cfg.Mode == "" {
		cfg.Mode = "sync"
	}
	switch cfg.Mode {
	case "sync", "mixture":
	case "local":
		if cfg.AverageEvery < 1 {
			return nil, errors.New("trainer: mode=local needs average_every ≥ 1")
		}
	default:
		return nil, fmt.Errorf("trainer: unknown mode %q (want sync, local or mixture)", cfg.Mode)
	}
	if cfg.GlobalBatch < 1 || cfg.GlobalBatch%cfg.Replicas != 0 {
		return nil, fmt.Errorf("trainer: global batch %d does not divide among %d replicas", cfg.GlobalBatch, cfg.Replicas)
	}
	if cfg.BatchesPerEpoch < 1 {
		return nil, errors.New("trainer: an epoch has no batches")
	}
	if cfg.LR <= 0 || math.IsInf(cfg.LR, 0) {
		return nil, fmt.Errorf("trainer: lr=%g: must be positive", cfg.LR)
	}
	if cfg.Smoothing < 0 || cfg.Smoothing >= 1 {
		return nil, fmt.Errorf("trainer: label_smoothing=%g: want 0 ≤ ε < 1", cfg.Smoothing)
	}
	t := &Trainer{cfg: cfg, runner: pond.NewPool(max(cfg.Replicas, 1))}
	var err error
	if t.peak, err = ScaleLR(cfg.LR, cfg.ScaleLR, cfg.BaseBatch, cfg.GlobalBatch); err != nil {
		return nil, err
	}
	t.steps = cfg.BatchesPerEpoch
	if cfg.StepsPerEpoch > 0 {
		t.steps = min(t.steps, cfg.StepsPerEpoch)
	}
	t.sched = ScheduleConfig{Kind: cfg.Schedule, WarmupSteps: int(math.Round(cfg.WarmupEpochs * float64(t.steps))),
		TotalSteps: cfg.Epochs * t.steps, StepEvery: cfg.StepEvery * t.steps, Gamma: cfg.Gamma}
	if err := t.sched.check(); err != nil {
		return nil, err
	}
	threads := max(cfg.Threads/cfg.Replicas, 1)
	for range cfg.Replicas {
		m, err := cfg.Model.Build(cfg.Input, cfg.Classes, cfg.Seed)
		if err != nil {
			return nil, err
		}
		opt, err := NewOptimizer(cfg.Optim, m.Params())
		if err != nil {
			return nil, err
		}
		r := &replica{model: m, opt: opt, pool: NewPool(threads), loss: SoftmaxCrossEntropy{Smoothing: cfg.Smoothing}}
		t.replicas = append(t.replicas, r)
	}
	if t.cfg.Reducer == nil {
		t.cfg.Reducer = LocalAllReduce{Pool: NewPool(cfg.Threads)}
	}
	return t, nil
}

// Model is the trained model (replica 0's; after Sync every replica's).
func (t *Trainer) Model() *Model { return t.replicas[0].model }

// PeakLR is the learning rate after scaling to the global batch.
func (t *Trainer) PeakLR() float64 { return t.peak }

// StepsPerEpoch is the number of steps an epoch takes.
func (t *Trainer) StepsPerEpoch() int { return t.steps }

// LR is the learning rate of step s.
func (t *Trainer) LR(s int64) float64 { return t.sched.At(int(s), t.peak) }

// Sync averages every replica's parameters and buffers into all of them.
// In sync mode the parameters are already equal, and this averages the
// batch-norm statistics, which each replica gathers from its own slices.
func (t *Trainer) Sync() error {
	if len(t.replicas) < 2 {
		return nil
	}
	params := t.replicas[0].model.Params()
	bufs := make([][]float32, len(t.replicas))
	for i := range params {
		for r, rep := range t.replicas {
			bufs[r] = rep.model.Params()[i].W
		}
		if err := t.cfg.Reducer.AllReduce(bufs); err != nil {
			return err
		}
	}
	return nil
}

// EpochStats are the figures of one epoch of training.
type EpochStats struct {
	Epoch         int       `json:"epoch"`
	Steps         int       `json:"steps"`
	Images        int       `json:"images"`
	TrainLoss     float64   `json:"train_loss"`
	TrainAccuracy float64   `json:"train_accuracy"`
	LR            float64   `json:"lr"`
	ImagesPerSec  float64   `json:"images_per_sec"`
	Seconds       float64   `json:"seconds"`
	StallPct      float64   `json:"stall_pct"`
	DeviceStall   []float64 `json:"device_stall_pct"`
}

// StepStats are one step's figures.
type StepStats struct {
	Step    int64 // steps taken, this one included
	Epoch   int
	Loss    float64 // mean over the global batch
	Correct int     // top-1 hits in the global batch
	Images  int
	LR      float64
}

// RunEpoch trains epoch t.Epoch on the feed and advances to the next.
// onStep, if set, sees every step's figures. When it stops early (ctx, an
// error), InEpoch counts the steps done, and a checkpoint saved then
// resumes at the next one.
func (t *Trainer) RunEpoch(ctx context.Context, feed Feed, onStep func(StepStats)) (EpochStats, error) {
	start := time.Now()
	ef, err := feed.Epoch(ctx, t.Epoch)
	if err != nil {
		return EpochStats{}, err
	}
	defer ef.Close()
	st := EpochStats{Epoch: t.Epoch, Steps: t.InEpoch, Images: t.part.Images}
	lossSum, correct := t.part.Loss, t.part.Correct
	stop := func(err error) (EpochStats, error) {
		t.InEpoch, t.part = st.Steps, partial{Loss: lossSum, Correct: correct, Images: st.Images}
		return st, err
	}
	// A resumed epoch: its first InEpoch batches were trained on before the
	// stop; take them from the feed unused, so the next step sees the batch
	// it would have.
	for range t.InEpoch {
		for r := range t.replicas {
			b, err := ef.Next(r)
			if err != nil {
				return stop(fmt.Errorf("trainer: skipping the %d steps done before the stop: %w", t.InEpoch, err))
			}
			b.Release()
		}
	}
	for s := t.InEpoch; s < t.steps; s++ {
		if err := ctx.Err(); err != nil {
			return stop(context.Cause(ctx))
		}
		n, l, c, err := t.step(ef)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return stop(err)
		}
		st.Steps++
		st.Images += n
		lossSum += l * float64(n)
		correct += c
		if onStep != nil {
			onStep(StepStats{Step: t.Step, Epoch: t.Epoch, Loss: l, Correct: c, Images: n, LR: t.LR(t.Step - 1)})
		}
	}
	if t.cfg.Mode == "mixture" || t.cfg.Mode == "local" || len(t.replicas) > 1 {
		if err := t.Sync(); err != nil {
			return stop(err)
		}
	}
	st.Seconds = time.Since(start).Seconds()
	if st.Images > 0 {
		st.TrainLoss, st.TrainAccuracy = lossSum/float64(st.Images), float64(correct)/float64(st.Images)
	}
	st.LR = t.LR(t.Step - 1)
	if st.Seconds > 0 {
		st.ImagesPerSec = float64(st.Images) / st.Seconds
	}
	for r := range t.replicas {
		pct := 100 * ef.Stall(r).Seconds() / st.Seconds
		st.DeviceStall = append(st.DeviceStall, pct)
		st.StallPct = max(st.StallPct, pct)
	}
	t.Epoch++
	t.InEpoch, t.part = 0, partial{}
	return st, nil
}

// step runs one global batch: every replica on its slice, then the update
// the mode asks for. It returns the samples, the mean loss and the correct
// predictions.
func (t *Trainer) step(ef EpochFeed) (int, float64, int, error) {
	eofs := make([]bool, len(t.replicas))
	// One goroutine per replica, in a pond group: a panic in a replica's
	// step is this step's error, with its stack.
	g := t.runner.NewGroup()
	for r, rep := range t.replicas {
		rep.err = nil
		g.Submit(func() {
			b, err := ef.Next(r)
			if err != nil {
				rep.err, eofs[r] = err, errors.Is(err, io.EOF)
				return
			}
			rep.forwardBackward(t, b)
			b.Release()
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("trainer: replica step: %w", err)
	}
	var errs []error
	n, nEOF := 0, 0
	var lossSum float64
	correct := 0
	for r, rep := range t.replicas {
		if eofs[r] {
			nEOF++
			continue
		}
		if rep.err != nil {
			errs = append(errs, rep.err)
			continue
		}
		n += rep.n
		lossSum += rep.lossSum
		correct += rep.correct
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	if nEOF == len(t.replicas) {
		return 0, 0, 0, io.EOF
	}
	if nEOF > 0 {
		return 0, 0, 0, errors.New("trainer: replicas ran out of data at different steps")
	}
	lr := t.LR(t.Step)
	if t.cfg.Mode == "sync" {
		if err := t.reduceGrads(); err != nil {
			return 0, 0, 0, err
		}
	}
	u := t.runner.NewGroup()
	for _, rep := range t.replicas {
		u.Submit(func() {
			rep.model.Grads()
			rep.opt.Step(rep.model.Params(), lr)
		})
	}
	if err := u.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("trainer: update: %w", err)
	}
	t.Step++
	if t.cfg.Mode == "local" && t.Step%int64(t.cfg.AverageEvery) == 0 {
		if err := t.Sync(); err != nil {
			return 0, 0, 0, err
		}
	}
	return n, lossSum / float64(n), correct, nil
}

// reduceGrads averages the gradients across replicas.
func (t *Trainer) reduceGrads() error {
	if len(t.replicas) < 2 {
		return nil
	}
	bufs := make([][]float64, len(t.replicas))
	for i, p := range t.replicas[0].model.Params() {
		if p.Buffer {
			continue
		}
		for r, rep := range t.replicas {
			bufs[r] = rep.model.Params()[i].G64
		}
		if err := t.cfg.Reducer.AllReduce64(bufs); err != nil {
			return err
		}
	}
	return nil
}

func (rep *replica) forwardBackward(t *Trainer, b Batch) {
	rep.ctx = Context{Train: true, Pool: rep.pool, Seed: t.cfg.Seed, Step: t.Step, Samples: b.Samples}
	rep.model.ZeroGrad()
	logits := rep.model.Forward(&rep.ctx, b.X)
	loss, correct, g := rep.loss.Loss(logits, b.Labels)
	rep.model.Backward(&rep.ctx, g)
	rep.n, rep.lossSum, rep.correct = b.X.N(), loss*float64(b.X.N()), correct
}

// EvalStats are a model's figures on a held-out set.
type EvalStats struct {
	Loss, Accuracy float64
	Images         int
}

// Evaluate runs the model (replica 0, after Sync) in evaluation mode over
// one epoch of feed (replica 0's batches), with the loss unsmoothed.
func (t *Trainer) Evaluate(ctx context.Context, feed Feed) (EvalStats, error) {
	ef, err := feed.Epoch(ctx, 0)
	if err != nil {
		return EvalStats{}, err
	}
	defer ef.Close()
	rep := t.replicas[0]
	pool := NewPool(t.cfg.Threads)
	var lossFn SoftmaxCrossEntropy
	var st EvalStats
	var lossSum float64
	correct := 0
	for {
		b, err := ef.Next(0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, err
		}
		c := &Context{Pool: pool, Samples: b.Samples}
		logits := rep.model.Forward(c, b.X)
		l, k, _ := lossFn.Loss(logits, b.Labels)
		lossSum += l * float64(b.X.N())
		correct += k
		st.Images += b.X.N()
		b.Release()
	}
	if st.Images > 0 {
		st.Loss, st.Accuracy = lossSum/float64(st.Images), float64(correct)/float64(st.Images)
	}
	return st, nil
}
