package trainer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/pipefeed/pipe/trainer/nn"
)

// Batch is one replica's slice of a global batch: X is [N, C, H, W]
// float32 in host memory, or Dev the same in an accelerator's memory;
// Samples are the global sample indices (they key dropout masks). Targets,
// where set, are soft targets [N, classes] in host memory (mixup, cutmix):
// the loss and the accuracy take them in place of Labels. Release hands
// the memory back to the pipeline.
type Batch struct {
	X       *nn.Tensor
	Dev     *DeviceTensor
	Labels  []int32
	Targets []float32
	Samples []int
	Release func()
}

// ErrSoftTargets is returned for a batch with soft targets given to an
// accelerator, which learns from int labels only.
var ErrSoftTargets = errors.New("trainer: the GPU trainer does not learn from soft targets (mixup, cutmix) yet; train on the CPU")

// Feed is the data of a run: the pipeline's per-device queues, one per
// replica.
type Feed interface {
	// Epoch starts epoch e.
	Epoch(ctx context.Context, e int) (EpochFeed, error)
}

// FeedFrom is a Feed that can start an epoch at a global batch: the
// batches Epoch would give from first on, without making the earlier ones.
// A resumed epoch starts there; with a plain Feed the trainer takes the
// batches done before the stop from it and drops them.
type FeedFrom interface {
	Feed
	EpochFrom(ctx context.Context, e, first int) (EpochFeed, error)
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

// AllReducer averages buffers across replicas. bufs are this process's
// replicas' copies of one buffer; after AllReduce(bufs), each holds the
// element-wise mean over every replica of the job: this process's alone
// (LocalAllReduce), or every rank's (a Group's reducer, such as
// trainer/mpi's Comm). AllReduce64 does the same for the float64 gradient
// sums. Each element's sum runs over the job's replicas in their order
// (rank-major, then local replica), starting from the first, and the sum is
// then multiplied by 1/replicas, so the mean does not depend on how the
// replicas are spread over processes. The trainer's loop only calls these,
// so an implementation across processes slots in without touching it; a
// GPU trainer's reducer of device buffers (NCCL) would have the same
// contract over device memory.
type AllReducer interface {
	AllReduce(bufs [][]float32) error
	AllReduce64(bufs [][]float64) error
}

// LocalAllReduce averages replicas in one process, the vector cut among the
// pool's workers. Each element's sum runs over the replicas in order, so the
// result does not depend on the workers.
type LocalAllReduce struct{ Pool *nn.Pool }

func (a LocalAllReduce) AllReduce(bufs [][]float32) error { return mean(a.Pool, bufs) }

func (a LocalAllReduce) AllReduce64(bufs [][]float64) error { return mean(a.Pool, bufs) }

func mean[T float32 | float64](pool *nn.Pool, bufs [][]T) error {
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
		pool = nn.NewPool(1)
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
	Model nn.ModelSpec
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
	Optim                        nn.OptimConfig
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
	// Group is the job of several processes this one is a rank of (nil:
	// this process alone). GlobalBatch is then split over every rank's
	// replicas, the step's figures, the evaluation and the epoch's stall
	// figures are those of the whole job, and New checks that every rank
	// runs the same configuration.
	Group Group
	// Reducer averages across replicas. Default LocalAllReduce, or the
	// Group where it is an AllReducer (it must be, in a job of several
	// ranks).
	Reducer AllReducer
	// Accelerators, when set, run the replicas, one each (len Replicas):
	// GPUs, from package trainer/gpu. DeviceReducer then averages their
	// gradients in device memory when the job is this process alone.
	Accelerators  []Accelerator
	DeviceReducer DeviceReducer
}

// Modes lists the data-parallel modes.
var Modes = []string{"sync", "local", "mixture"}

// WithDefaults returns c with its unset choices at their defaults — mode
// sync, optimiser sgd, scale_lr linear, schedule constant, base batch 256
// — written here once: New, the memory check and the .pipe train stage
// (its canonical line and the defaults `pipe stages` shows) read them from
// here. Counts whose zero New takes as 1 (Replicas, Epochs, Threads) are
// left as they are: to a .pipe file, threads=0 means every core.
func (c Config) WithDefaults() Config {
	if c.BaseBatch == 0 {
		c.BaseBatch = 256
	}
	if c.Mode == "" {
		c.Mode = "sync"
	}
	if c.ScaleLR == "" {
		c.ScaleLR = "linear"
	}
	if c.Schedule == "" {
		c.Schedule = "constant"
	}
	if c.Optim.Name == "" {
		c.Optim.Name = "sgd"
	}
	return c
}

// Trainer trains one model data-parallel on its replicas.
type Trainer struct {
	cfg      Config
	replicas []*replica
	sched    nn.ScheduleConfig
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
	// ranks is the job's size (1 alone); total the job's replicas.
	ranks, total int
	// reduceTime is the time spent in the gradient all-reduce this epoch,
	// waitTime in gathering the step's figures, which is where ranks wait
	// for the slowest.
	reduceTime, waitTime time.Duration
}

// partial sums an epoch's steps: the figures, the training time and each
// replica's data stall, so that a resumed epoch reports the whole epoch's
// throughput rather than all its images over the resumed part's time.
type partial struct {
	// Sum is the loss summed over the part's samples; Loss, the same as a
	// float64, is what checkpoints written before it hold.
	Sum     nn.LossSum
	Loss    float64
	Correct int
	Images  int
	Seconds float64
	Stall   []float64 // seconds, per replica
}

type replica struct {
	model *nn.Model
	opt   *nn.Optimizer
	acc   Accelerator // nil: the replica runs on the CPU
	pool  *nn.Pool
	loss  nn.SoftmaxCrossEntropy
	ctx   nn.Context
	// this step's figures
	lossSum nn.LossSum
	correct int
	n       int
	err     error
}

// New builds the replicas, every one initialised identically from the seed.
func New(cfg Config) (*Trainer, error) {
	cfg = cfg.WithDefaults()
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 1
	}
	if cfg.Threads == 0 {
		cfg.Threads = 1
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
	ranks := 1
	if !single(cfg.Group) {
		ranks = cfg.Group.Size()
	}
	if cfg.GlobalBatch < 1 || cfg.GlobalBatch%(cfg.Replicas*ranks) != 0 {
		if ranks > 1 {
			return nil, fmt.Errorf("trainer: global batch %d does not divide among %d ranks × %d replicas", cfg.GlobalBatch, ranks, cfg.Replicas)
		}
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
	if err := CheckModel(cfg); err != nil {
		return nil, err
	}
	t := &Trainer{cfg: cfg, runner: pond.NewPool(max(cfg.Replicas, 1)), ranks: ranks, total: ranks * cfg.Replicas}
	var err error
	if t.peak, err = nn.ScaleLR(cfg.LR, cfg.ScaleLR, cfg.BaseBatch, cfg.GlobalBatch); err != nil {
		return nil, err
	}
	t.steps = cfg.BatchesPerEpoch
	if cfg.StepsPerEpoch > 0 {
		t.steps = min(t.steps, cfg.StepsPerEpoch)
	}
	t.sched = nn.ScheduleConfig{Kind: cfg.Schedule, WarmupSteps: int(math.Round(cfg.WarmupEpochs * float64(t.steps))),
		TotalSteps: cfg.Epochs * t.steps, StepEvery: cfg.StepEvery * t.steps, Gamma: cfg.Gamma}
	if err := t.sched.Check(); err != nil {
		return nil, err
	}
	threads := max(cfg.Threads/cfg.Replicas, 1)
	for range cfg.Replicas {
		m, err := cfg.Model.Build(cfg.Input, cfg.Classes, cfg.Seed)
		if err != nil {
			return nil, err
		}
		opt, err := nn.NewOptimizer(cfg.Optim, m.Params())
		if err != nil {
			return nil, err
		}
		r := &replica{model: m, opt: opt, pool: nn.NewPool(threads), loss: nn.SoftmaxCrossEntropy{Smoothing: cfg.Smoothing}}
		t.replicas = append(t.replicas, r)
	}
	if t.cfg.Reducer == nil {
		t.cfg.Reducer = LocalAllReduce{Pool: nn.NewPool(cfg.Threads)}
		if ranks > 1 {
			r, ok := cfg.Group.(AllReducer)
			if !ok {
				return nil, fmt.Errorf("trainer: a job of %d ranks needs an AllReducer across them (Config.Reducer)", ranks)
			}
			t.cfg.Reducer = r
		}
	}
	if ranks > 1 {
		if err := t.checkJob(); err != nil {
			return nil, err
		}
	}
	if cfg.Accelerators != nil {
		if err := t.accelerate(cfg.Accelerators); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkJob checks that every rank of the job trains the same model on the
// same batches with as many replicas, before the first step: ranks that
// differ would otherwise exchange gradients of different shapes, or none.
func (t *Trainer) checkJob() error {
	c := t.cfg
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v %v %d %d %d %d %d %+v %g %d %s %s %g %d %g %g %s %d %d",
		c.Model, c.Input, c.Classes, c.GlobalBatch, c.BatchesPerEpoch, c.Epochs, t.steps, c.Optim, c.LR, c.BaseBatch,
		c.ScaleLR, c.Schedule, c.WarmupEpochs, c.StepEvery, c.Gamma, c.Smoothing, c.Mode, c.AverageEvery, c.Seed)
	sum := h.Sum64()
	all, err := c.Group.AllGather64([]float64{float64(sum >> 32), float64(sum & 0xffffffff), float64(c.Replicas)})
	if err != nil {
		return err
	}
	for r := 1; r < len(all)/3; r++ {
		f := all[3*r:]
		if f[2] != all[2] {
			return fmt.Errorf("trainer: %w: rank %d has %g replicas and rank 0 %g (give every rank the same devices=)", ErrJob, r, f[2], all[2])
		}
		if f[0] != all[0] || f[1] != all[1] {
			return fmt.Errorf("trainer: %w: rank %d trains another model, batch, schedule or seed than rank 0 (every rank must run the same .pipe file)", ErrJob, r)
		}
	}
	return nil
}

// Model is the trained model (replica 0's; after Sync every replica's).
func (t *Trainer) Model() *nn.Model { return t.replicas[0].model }

// PeakLR is the learning rate after scaling to the global batch.
func (t *Trainer) PeakLR() float64 { return t.peak }

// StepsPerEpoch is the number of steps an epoch takes.
func (t *Trainer) StepsPerEpoch() int { return t.steps }

// LR is the learning rate of step s.
func (t *Trainer) LR(s int64) float64 { return t.sched.At(int(s), t.peak) }

// Sync averages every replica's parameters and buffers into all of them.
// In sync mode the parameters are already equal, and this averages the
// batch-norm statistics, which each replica gathers from its own slices.
// With accelerators, it also brings the host models up to date with them.
func (t *Trainer) Sync() error {
	if err := t.store(); err != nil {
		return err
	}
	if t.total < 2 {
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
	return t.load()
}

// EpochStats are the figures of one epoch of training. In a job of several
// ranks they are the job's: every rank's images, loss and stalls.
type EpochStats struct {
	Epoch         int     `json:"epoch"`
	Steps         int     `json:"steps"`
	Images        int     `json:"images"`
	TrainLoss     float64 `json:"train_loss"`
	TrainAccuracy float64 `json:"train_accuracy"`
	LR            float64 `json:"lr"`
	ImagesPerSec  float64 `json:"images_per_sec"`
	// Seconds is the epoch's training time; for an epoch resumed after a
	// stop, PriorSeconds of it were trained before the stop (its images
	// and stalls count too, so the figures are the whole epoch's).
	Seconds      float64   `json:"seconds"`
	PriorSeconds float64   `json:"prior_seconds,omitempty"`
	StallPct     float64   `json:"stall_pct"`
	DeviceStall  []float64 `json:"device_stall_pct"`
	// ReduceSeconds is the time this process spent averaging gradients
	// (the all-reduce); WaitSeconds, in a job of several ranks, the time it
	// spent gathering the steps' figures, which is where a rank waits for
	// the slowest one.
	ReduceSeconds float64 `json:"allreduce_seconds"`
	WaitSeconds   float64 `json:"rank_wait_seconds"`
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
// resumes at the next one. In a job of several ranks, a rank whose ctx is
// done stops every rank after the same step: the others return an error
// wrapping context.Canceled.
func (t *Trainer) RunEpoch(ctx context.Context, feed Feed, onStep func(StepStats)) (EpochStats, error) {
	start := time.Now()
	t.reduceTime, t.waitTime = 0, 0
	var ef EpochFeed
	var err error
	skip := t.InEpoch // the batches done before a stop, to take unused
	if ff, ok := feed.(FeedFrom); ok && t.InEpoch > 0 {
		ef, err = ff.EpochFrom(ctx, t.Epoch, t.InEpoch)
		skip = 0
	} else {
		ef, err = feed.Epoch(ctx, t.Epoch)
	}
	if err != nil {
		return EpochStats{}, t.abandon(ctx, err)
	}
	defer ef.Close()
	st := EpochStats{Epoch: t.Epoch, Steps: t.InEpoch, Images: t.part.Images, PriorSeconds: t.part.Seconds}
	lossSum, correct := t.part.Sum, t.part.Correct
	if lossSum == 0 && t.part.Loss != 0 {
		lossSum = nn.LossOf(t.part.Loss) // a checkpoint from before Sum
	}
	// stall is each replica's data stall in the epoch: before a stop (a
	// resumed epoch's part), and in this run since stall0.
	stall0 := make([]time.Duration, len(t.replicas))
	stall := func() []float64 {
		s := make([]float64, len(t.replicas))
		for r := range s {
			s[r] = (ef.Stall(r) - stall0[r]).Seconds()
			if len(t.part.Stall) == len(s) {
				s[r] += t.part.Stall[r]
			}
		}
		return s
	}
	stop := func(err error) (EpochStats, error) {
		// A checkpoint of the steps done reads the host model.
		if serr := t.store(); serr != nil {
			err = errors.Join(err, serr)
		}
		t.InEpoch, t.part = st.Steps, partial{Sum: lossSum, Correct: correct, Images: st.Images,
			Seconds: t.part.Seconds + time.Since(start).Seconds(), Stall: stall()}
		return st, err
	}
	// A resumed epoch: its first InEpoch batches were trained on before the
	// stop; a feed that cannot start past them gives them, and they go
	// unused, so the next step sees the batch it would have.
	for range skip {
		for r := range t.replicas {
			b, err := ef.Next(r)
			if err != nil {
				return stop(t.abandon(ctx, fmt.Errorf("trainer: skipping the %d steps done before the stop: %w", t.InEpoch, err)))
			}
			b.Release()
		}
	}
	if t.InEpoch > 0 {
		// Skipping is the resume's cost, not the epoch's: the time and the
		// stall count from here, added to the part's.
		start = time.Now()
		for r := range stall0 {
			stall0[r] = ef.Stall(r)
		}
	}
	for s := t.InEpoch; s < t.steps; s++ {
		// Alone, a done ctx stops here; in a job, the step's figures carry
		// it to every rank.
		if err := ctx.Err(); err != nil && t.ranks == 1 {
			return stop(context.Cause(ctx))
		}
		n, l, c, err := t.step(ctx, ef)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return stop(err)
		}
		st.Steps++
		st.Images += n
		lossSum += l
		correct += c
		if onStep != nil {
			onStep(StepStats{Step: t.Step, Epoch: t.Epoch, Loss: l.Float() / float64(n), Correct: c, Images: n, LR: t.LR(t.Step - 1)})
		}
	}
	if t.cfg.Mode == "mixture" || t.cfg.Mode == "local" || t.total > 1 || t.replicas[0].acc != nil {
		if err := t.Sync(); err != nil {
			return stop(err)
		}
	}
	st.Seconds = t.part.Seconds + time.Since(start).Seconds()
	if st.Images > 0 {
		st.TrainLoss, st.TrainAccuracy = lossSum.Float()/float64(st.Images), float64(correct)/float64(st.Images)
	}
	st.LR = t.LR(t.Step - 1)
	if st.Seconds > 0 {
		st.ImagesPerSec = float64(st.Images) / st.Seconds
	}
	for _, s := range stall() {
		st.DeviceStall = append(st.DeviceStall, 100*s/st.Seconds)
	}
	if t.ranks > 1 {
		all, err := t.cfg.Group.AllGather64(st.DeviceStall)
		if err != nil {
			return stop(err)
		}
		st.DeviceStall = all
	}
	for _, pct := range st.DeviceStall {
		st.StallPct = max(st.StallPct, pct)
	}
	st.ReduceSeconds, st.WaitSeconds = t.reduceTime.Seconds(), t.waitTime.Seconds()
	t.Epoch++
	t.InEpoch, t.part = 0, partial{}
	return st, nil
}

// A replica's step is told to the job as four numbers: its state, then its
// samples, loss sum and correct predictions.
const (
	stepOK = iota
	stepEOF
	stepFailed
	stepStopped
	stepFigures = 4
)

// step runs one global batch: every replica on its slice, then the update
// the mode asks for. It returns the samples, the loss summed over them and
// the correct predictions, of the whole job.
func (t *Trainer) step(ctx context.Context, ef EpochFeed) (int, nn.LossSum, int, error) {
	eofs := make([]bool, len(t.replicas))
	// In a job, a rank whose ctx is done does not start the step: it tells
	// the others to stop.
	stopped := t.ranks > 1 && ctx.Err() != nil
	var panicked error
	if !stopped {
		// One goroutine per replica, in a pond group: a panic in a
		// replica's step is this step's error, with its stack.
		g := t.runner.NewGroup()
		for r, rep := range t.replicas {
			rep.err = nil
			g.Submit(func() {
				b, err := ef.Next(r)
				if err != nil {
					rep.err, eofs[r] = err, errors.Is(err, io.EOF)
					return
				}
				rep.err = rep.forwardBackward(t, b)
				b.Release()
			})
		}
		if err := g.Wait(); err != nil {
			panicked = fmt.Errorf("trainer: replica step: %w", err)
		}
	}
	figs := make([]float64, 0, stepFigures*len(t.replicas))
	var errs []error
	for r, rep := range t.replicas {
		state := stepOK
		switch {
		case stopped:
			state = stepStopped
		case panicked != nil:
			state = stepFailed
		case eofs[r]:
			state = stepEOF
		case rep.err != nil && t.ranks > 1 && ctx.Err() != nil:
			// The feed stopped because ctx is done, not because it failed.
			state = stepStopped
		case rep.err != nil:
			state, errs = stepFailed, append(errs, rep.err)
		}
		// A step's loss sum in fixed point is an integer below 2^53 (a
		// batch of 10^5 samples of loss 20), exact as a float64.
		figs = append(figs, float64(state), float64(rep.n), float64(rep.lossSum), float64(rep.correct))
	}
	if panicked != nil {
		errs = []error{panicked}
	}
	n, loss, correct, err := t.settle(ctx, figs, errors.Join(errs...))
	if err != nil {
		return 0, 0, 0, err
	}
	lr := t.LR(t.Step)
	if t.cfg.Mode == "sync" {
		if err := t.reduceGrads(); err != nil {
			return 0, 0, 0, err
		}
	}
	u := t.runner.NewGroup()
	uerrs := make([]error, len(t.replicas))
	for r, rep := range t.replicas {
		u.Submit(func() {
			if rep.acc != nil {
				uerrs[r] = rep.acc.Update(lr)
				return
			}
			rep.model.Grads()
			rep.opt.Step(rep.model.Params(), lr)
		})
	}
	if err := u.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("trainer: update: %w", err)
	}
	if err := errors.Join(uerrs...); err != nil {
		return 0, 0, 0, fmt.Errorf("trainer: update: %w", err)
	}
	t.Step++
	if t.cfg.Mode == "local" && t.Step%int64(t.cfg.AverageEvery) == 0 {
		if err := t.Sync(); err != nil {
			return 0, 0, 0, err
		}
	}
	return n, loss, correct, nil
}

// abandon is a step this rank cannot take, for err (its feed failed, or its
// ctx is done): in a job, it tells the other ranks, which are in the
// step, so that every rank stops at the same place. It returns the error
// RunEpoch stops with.
func (t *Trainer) abandon(ctx context.Context, err error) error {
	if t.ranks == 1 {
		return err
	}
	state := stepFailed
	if ctx.Err() != nil {
		state = stepStopped
	}
	var figs []float64
	for range t.replicas {
		figs = append(figs, float64(state), 0, 0, 0)
	}
	_, _, _, serr := t.settle(ctx, figs, err)
	return serr
}

// settle gathers the step's figures (four a replica, local is this
// process's error where a replica failed) from every rank and decides
// the step: the job's samples, loss sum and correct predictions, summed
// over its replicas in order (the sums one process with every replica
// takes), or the error every rank stops with: a failure (here, or a
// RankError naming the rank), a stop (ctx here, or another rank's: an error
// wrapping context.Canceled), or io.EOF.
func (t *Trainer) settle(ctx context.Context, figs []float64, local error) (int, nn.LossSum, int, error) {
	me := 0
	if t.ranks > 1 {
		start := time.Now()
		all, err := t.cfg.Group.AllGather64(figs)
		t.waitTime += time.Since(start)
		if err != nil {
			return 0, 0, 0, err
		}
		figs, me = all, t.cfg.Group.Rank()
	}
	n, nEOF, correct, failed, halted := 0, 0, 0, -1, -1
	var lossSum nn.LossSum
	for j := 0; j < len(figs); j += stepFigures {
		f, rank := figs[j:j+stepFigures], j/stepFigures/len(t.replicas)
		switch int(f[0]) {
		case stepEOF:
			nEOF++
		case stepFailed:
			if failed < 0 {
				failed = rank
			}
		case stepStopped:
			if halted < 0 {
				halted = rank
			}
		default:
			n += int(f[1])
			lossSum += nn.LossSum(f[2])
			correct += int(f[3])
		}
	}
	switch {
	case failed >= 0 && failed != me:
		return 0, 0, 0, &RankError{Rank: failed}
	case failed >= 0:
		return 0, 0, 0, local
	case halted >= 0 && ctx.Err() != nil:
		return 0, 0, 0, context.Cause(ctx)
	case halted >= 0:
		return 0, 0, 0, fmt.Errorf("trainer: rank %d was stopped, and the job with it: %w", halted, context.Canceled)
	case nEOF == t.total:
		return 0, 0, 0, io.EOF
	case nEOF > 0:
		return 0, 0, 0, errors.New("trainer: replicas ran out of data at different steps")
	}
	return n, lossSum, correct, nil
}

// reduceGrads averages the gradients across the job's replicas.
func (t *Trainer) reduceGrads() error {
	if t.total < 2 {
		return nil // nothing to average, and no all-reduce time to report
	}
	start := time.Now()
	defer func() { t.reduceTime += time.Since(start) }()
	if t.replicas[0].acc != nil {
		return t.reduceDeviceGrads()
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

func (rep *replica) forwardBackward(t *Trainer, b Batch) error {
	rep.ctx = nn.Context{Train: true, Pool: rep.pool, Seed: t.cfg.Seed, Step: t.Step, Samples: b.Samples, Smoothing: rep.loss.Smoothing}
	if rep.acc != nil {
		if b.Targets != nil {
			return ErrSoftTargets
		}
		l, c, err := rep.acc.ForwardBackward(&rep.ctx, b)
		rep.n, rep.lossSum, rep.correct = b.N(), l, c
		return err
	}
	if b.X == nil {
		return ErrHostBatch
	}
	rep.model.ZeroGrad()
	logits := rep.model.Forward(&rep.ctx, b.X)
	var loss nn.LossSum
	var correct int
	var g *nn.Tensor
	if b.Targets != nil {
		if n, k := logits.Shape[0], logits.Shape[1]; len(b.Targets) != n*k {
			return fmt.Errorf("trainer: %d soft targets for %d samples of %d classes", len(b.Targets), n, k)
		}
		loss, correct, g = rep.loss.SumTargets(logits, b.Targets)
	} else {
		loss, correct, g = rep.loss.Sum(logits, b.Labels)
	}
	rep.model.Backward(&rep.ctx, g)
	rep.n, rep.lossSum, rep.correct = b.X.N(), loss, correct
	return nil
}

// EvalStats are a model's figures on a held-out set.
type EvalStats struct {
	Loss, Accuracy float64
	Images         int
}

// Evaluate runs the model (replica 0, after Sync) in evaluation mode over
// one epoch of feed (replica 0's batches), with the loss unsmoothed. In a
// job of several ranks the evaluation is shared: rank r's feed holds the
// held-out set's batches r, r+ranks, r+2·ranks, …, and the figures are the
// whole set's, each batch's added in the set's order, as one process adds
// them.
func (t *Trainer) Evaluate(ctx context.Context, feed Feed) (EvalStats, error) {
	// Each batch's loss sum, correct predictions and samples, in order.
	var figs []float64
	err := func() error {
		ef, err := feed.Epoch(ctx, 0)
		if err != nil {
			return err
		}
		defer ef.Close()
		rep := t.replicas[0]
		pool := nn.NewPool(t.cfg.Threads)
		var lossFn nn.SoftmaxCrossEntropy
		for {
			b, err := ef.Next(0)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if rep.acc != nil {
				l, k, err := rep.acc.Evaluate(b)
				b.Release()
				if err != nil {
					return err
				}
				figs = append(figs, l, float64(k), float64(b.N()))
				continue
			}
			if b.X == nil {
				b.Release()
				return ErrHostBatch
			}
			c := &nn.Context{Pool: pool, Samples: b.Samples}
			logits := rep.model.Forward(c, b.X)
			l, k, _ := lossFn.Loss(logits, b.Labels)
			figs = append(figs, l*float64(b.X.N()), float64(k), float64(b.X.N()))
			b.Release()
		}
	}()
	if t.ranks > 1 {
		figs, err = t.gatherEval(ctx, figs, err)
	}
	if err != nil {
		return EvalStats{}, err
	}
	var st EvalStats
	var lossSum float64
	correct := 0
	for i := 0; i < len(figs); i += 3 {
		lossSum += figs[i]
		correct += int(figs[i+1])
		st.Images += int(figs[i+2])
	}
	if st.Images > 0 {
		st.Loss, st.Accuracy = lossSum/float64(st.Images), float64(correct)/float64(st.Images)
	}
	return st, nil
}

// gatherEval gathers every rank's per-batch figures (three numbers a
// batch) and returns them in the held-out set's batch order: batch k of
// rank r is the set's batch k·ranks+r. local is this rank's error, which
// stops every rank, as in a step.
func (t *Trainer) gatherEval(ctx context.Context, figs []float64, local error) ([]float64, error) {
	g := t.cfg.Group
	const failed, stopped = -1, -2
	mine := len(figs) / 3
	switch {
	case local != nil && ctx.Err() != nil:
		mine = stopped
	case local != nil:
		mine = failed
	}
	counts, err := gatherInts(g, mine)
	if err != nil {
		return nil, err
	}
	if r := slices.Index(counts, failed); r >= 0 {
		if r == g.Rank() {
			return nil, local
		}
		return nil, &RankError{Rank: r}
	}
	if r := slices.Index(counts, stopped); r >= 0 {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("trainer: rank %d was stopped, and the job with it: %w", r, context.Canceled)
	}
	most := slices.Max(counts)
	padded := make([]float64, 3*most)
	copy(padded, figs)
	all, err := g.AllGather64(padded)
	if err != nil {
		return nil, err
	}
	var out []float64
	for k := range most {
		for r, n := range counts {
			if k < n {
				out = append(out, all[3*(r*most+k):3*(r*most+k+1)]...)
			}
		}
	}
	return out, nil
}
