package pipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/gpu"
	"github.com/pipefeed/pipe/trainer/nn"
	"github.com/pipefeed/pipe/transform"
)

// checkTrain checks the train and eval stages against the pipeline they
// end.
func (p *Pipeline) checkTrain() error {
	t, e := p.cfg.Train, p.cfg.Eval
	if t == nil {
		return nil
	}
	if p.out.DType != transform.Float32 || p.out.Layout != transform.NCHW {
		return fmt.Errorf("train needs NCHW float32 batches, not %s %s: use to_tensor layout=nchw dtype=float32", p.out.Layout, p.out.DType)
	}
	if e != nil && e.Source != nil {
		if i, ei := p.cfg.Source.Info(), e.Source.Info(); i.C != ei.C || i.H != ei.H || i.W != ei.W || len(i.Classes) != len(ei.Classes) {
			return fmt.Errorf("eval source %s does not match the training source %s", ei.Identity, i.Identity)
		}
	}
	return nil
}

// trainConfig is the trainer's configuration for this pipeline: the train
// stage's, with the input shape, the classes, the replicas (one per
// device), the global batch and the epoch's steps the data decides.
func (p *Pipeline) trainConfig() trainer.Config {
	cfg := p.cfg.Train.Config
	if cfg.Threads == 0 {
		cfg.Threads = p.cores // the cores, not a raise for cgo
	}
	s := p.out.Shape
	cfg.Input, cfg.Classes, cfg.Replicas = []int{s.C, s.H, s.W}, len(p.cfg.Source.Info().Classes), p.Devices()
	cfg.GlobalBatch, cfg.BatchesPerEpoch, cfg.Seed = p.GlobalBatch(), p.Batches(), p.cfg.Seed
	cfg.Group = p.group
	return cfg
}

// WithGroup makes the process one rank of g, a job of processes that train
// the file's model together (started by mpirun or srun; trainer/mpi's Comm
// is such a group). The rank and world size come from g, and a world= in
// the file must agree with it. With a train stage, the file's batch is the
// job's global batch: each rank reads its contiguous slice of every global
// batch (sharding.WithSlices) and its devices split that, so that ranks ×
// devices train the model one process with all the devices trains, bit for
// bit; Fit all-reduces through g, shares the evaluation among the ranks,
// and leaves files to rank 0. Without a train stage each rank streams its
// share, as with WithRank. A group of one changes nothing.
func WithGroup(g trainer.Group) LoadOption {
	return func(o *loadOptions) { o.group = g }
}

// NewInGroup builds a pipeline from stages, as New does, as one rank of g
// (see WithGroup).
func NewInGroup(g trainer.Group, stages ...Stage) (*Pipeline, error) {
	return build(stages, loadOptions{group: g})
}

// joinGroup places the pipeline in g's job: its rank and world, and with a
// train stage its slice of the global batch.
func (p *Pipeline) joinGroup(g trainer.Group) error {
	at, w := &p.at, g.Size()
	if at.world > 1 && at.world != w {
		i := max(pipefile.Index(p.stages, "pipeline"), 0)
		return pipefile.Errorf(p.stages, i, "the file says world=%d, and the job has %d ranks (start it with mpirun -np %d)", at.world, w, at.world)
	}
	at.rank, at.world = g.Rank(), w
	p.group = g
	if p.cfg.Train == nil {
		return nil
	}
	if at.batch%w != 0 {
		return pipefile.Errorf(p.stages, pipefile.Index(p.stages, "batch"), "batch %d is the global batch of the job's %d ranks and does not divide among them: use a multiple of %d", at.batch, w, w)
	}
	at.batch /= w
	return nil
}

// GlobalBatch is the samples of one training step over every rank and
// device: the file's batch; and in an elastic pipeline (pipeline
// elastic=true) streaming as one of several ranks, the batch times the
// ranks, the unit the ranks slice.
func (p *Pipeline) GlobalBatch() int { return p.at.global }

// Ranks is the number of ranks training together (WithGroup): 1 alone.
func (p *Pipeline) Ranks() int {
	if p.group == nil {
		return 1
	}
	return p.group.Size()
}

// TrainEpoch is one epoch of training as reported: the fields `pipe run
// --json` prints. In a job of several ranks they are the job's.
type TrainEpoch struct {
	Epoch         int       `json:"epoch"`
	Steps         int       `json:"steps"`
	Images        int       `json:"images"`
	TrainLoss     float64   `json:"train_loss"`
	TrainAccuracy float64   `json:"train_accuracy"`
	TestLoss      *float64  `json:"test_loss,omitempty"`
	TestAccuracy  *float64  `json:"test_accuracy,omitempty"`
	LR            float64   `json:"lr"`
	ImagesPerSec  float64   `json:"images_per_sec"`
	StallPct      float64   `json:"stall_pct"`
	DeviceStall   []float64 `json:"device_stall_pct"`
	Seconds       float64   `json:"seconds"`
	// WallSeconds is the run's training time up to the end of this epoch,
	// across resumes.
	WallSeconds float64 `json:"wall_seconds"`
	// ParamsHash is the SHA-256 of the model's parameters and buffers after
	// the epoch (nn.Model.Hash): two runs that trained the same model
	// bit for bit show the same hashes.
	ParamsHash string `json:"params_hash"`
	// Auto reports workers=auto and depth=auto after the epoch, with its
	// decisions; absent where both are fixed.
	Auto *AutoStats `json:"auto,omitempty"`
	// AllReduceSeconds is the time spent averaging gradients across the
	// replicas (and ranks) this epoch; RankWaitSeconds, in a job of several
	// ranks, the time rank 0 waited for the others at the steps' ends.
	AllReduceSeconds float64 `json:"allreduce_seconds"`
	RankWaitSeconds  float64 `json:"rank_wait_seconds,omitempty"`
}

// TrainOptions configures Pipeline.Fit.
type TrainOptions struct {
	// Resume continues from the checkpoint in the train stage's out
	// directory, at the step it was written.
	Resume bool
	// OnStart sees the trainer once it is built (and resumed).
	OnStart func(*trainer.Trainer)
	// OnEpoch sees every epoch's figures as it ends; OnStep every step's
	// loss.
	OnEpoch func(TrainEpoch)
	OnStep  func(trainer.StepStats)
}

// TrainStep is a step's figures as out/steps.jsonl records them: the mean
// over the LogEvery steps up to this one.
type TrainStep struct {
	Step         int64   `json:"step"`
	Epoch        int     `json:"epoch"`
	Loss         float64 `json:"loss"`
	Accuracy     float64 `json:"accuracy"`
	LR           float64 `json:"lr"`
	ImagesPerSec float64 `json:"images_per_sec"`
}

// TrainResult is a finished (or stopped) run.
type TrainResult struct {
	Trainer *trainer.Trainer
	// History holds every epoch, including those before a resume.
	History []TrainEpoch
}

// Fit trains the model of the pipeline's train stage. After every epoch it
// writes the checkpoint (out/checkpoint.gob) and appends the epoch to
// out/metrics.jsonl; with Resume it first restores the checkpoint. In a job
// of several ranks (WithGroup) every rank calls Fit: the ranks train
// together, rank 0 alone writes the files, and every rank resumes from rank
// 0's checkpoint. An error on one rank leaves the others waiting in their
// next collective call, so a program stops the whole job on an error (as
// pipe does, through MPI_Abort), unless it is a trainer.RankError: the
// failing rank is stopping it.
func (p *Pipeline) Fit(ctx context.Context, o TrainOptions) (*TrainResult, error) {
	c := p.cfg.Train
	if c == nil {
		return nil, errors.New("pipe: the pipeline has no train stage")
	}
	if p.group == nil && p.at.world > 1 {
		return nil, fmt.Errorf("%w: world=%d: this process was started alone, and would train a model of its own on 1/%d of the data; start the %d ranks together with an MPI launcher (mpirun -np %d pipe run, built with -tags mpi)",
			ErrConfig, p.at.world, p.at.world, p.at.world, p.at.world)
	}
	cfg := p.trainConfig()
	closeGPUs, err := p.gpuReplicas(&cfg)
	if err != nil {
		return nil, err
	}
	defer closeGPUs()
	tr, err := trainer.New(cfg)
	if err != nil {
		return nil, err
	}
	res := &TrainResult{Trainer: tr}
	// Every rank reads the checkpoint (through rank 0); rank 0 alone
	// writes it, the metrics and the steps.
	ckpt, metrics := "", ""
	if c.Out != "" {
		ckpt, metrics = filepath.Join(c.Out, "checkpoint.gob"), filepath.Join(c.Out, "metrics.jsonl")
	}
	writes := ckpt != "" && (p.group == nil || p.group.Rank() == 0)
	identity := p.trainIdentity()
	if o.Resume {
		if ckpt == "" {
			return nil, errors.New("pipe: --resume needs the train stage's out= directory, where the checkpoint is")
		}
		hist, err := loadCheckpoint(tr, ckpt, identity)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(hist, &res.History); err != nil {
			return nil, fmt.Errorf("pipe: %s: the metrics history: %w", ckpt, err)
		}
	}
	if o.OnStart != nil {
		o.OnStart(tr)
	}
	evalP := p.evalP
	wall := 0.0
	if n := len(res.History); n > 0 {
		wall = res.History[n-1].WallSeconds
	}
	feed := &trainFeed{p: p}
	onStep := o.OnStep
	if c.LogEvery > 0 && writes {
		onStep = p.stepLogger(filepath.Join(c.Out, "steps.jsonl"), !o.Resume, o.OnStep)
	}
	for tr.Epoch < c.Epochs {
		start := time.Now()
		st, err := tr.RunEpoch(ctx, feed, onStep)
		if err != nil {
			// Stopped mid-epoch (Ctrl-C, a cancelled context, here or on
			// another rank): keep the steps done, so --resume continues at
			// the next one.
			stopped := ctx.Err() != nil || errors.Is(err, context.Canceled)
			if writes && stopped && tr.InEpoch > 0 {
				hist, _ := json.Marshal(res.History)
				if serr := saveCheckpoint(tr, ckpt, identity, hist); serr != nil {
					return res, errors.Join(err, serr)
				}
			}
			return res, err
		}
		ep := TrainEpoch{Epoch: st.Epoch, Steps: st.Steps, Images: st.Images, TrainLoss: st.TrainLoss, TrainAccuracy: st.TrainAccuracy,
			LR: st.LR, ImagesPerSec: st.ImagesPerSec, StallPct: st.StallPct, DeviceStall: st.DeviceStall, Seconds: st.Seconds,
			ParamsHash: tr.Model().Hash(), AllReduceSeconds: st.ReduceSeconds, RankWaitSeconds: st.WaitSeconds,
			Auto: p.eng.AutoStats(st.Epoch)}
		if evalP != nil && ((st.Epoch+1)%p.cfg.Eval.Every == 0 || tr.Epoch == c.Epochs) {
			ev, err := tr.Evaluate(ctx, &trainFeed{p: evalP})
			if err != nil {
				return res, err
			}
			ep.TestLoss, ep.TestAccuracy = &ev.Loss, &ev.Accuracy
		}
		wall += time.Since(start).Seconds() + st.PriorSeconds
		ep.WallSeconds = wall
		res.History = append(res.History, ep)
		if writes {
			hist, _ := json.Marshal(res.History)
			if err := saveCheckpoint(tr, ckpt, identity, hist); err != nil {
				return res, err
			}
			if err := appendJSONLine(metrics, ep, st.Epoch == 0 && !o.Resume); err != nil {
				return res, err
			}
		}
		if o.OnEpoch != nil {
			o.OnEpoch(ep)
		}
	}
	return res, nil
}

// gpuReplicas puts the replicas on the prefetch stage's GPUs, one each,
// fed from their queues; a no-op for cpu:N devices. It returns what frees
// them.
func (p *Pipeline) gpuReplicas(cfg *trainer.Config) (func() error, error) {
	none := func() error { return nil }
	if p.devs == nil || len(p.devs.GPUs) == 0 {
		return none, nil
	}
	arch, err := cfg.Model.Build(cfg.Input, cfg.Classes, cfg.Seed)
	if err != nil {
		return none, err
	}
	var rs []*gpu.Replica
	red := &gpu.PeerReducer{}
	closeAll := func() error {
		var errs []error
		if len(rs) > 0 {
			errs = append(errs, red.Close(rs[0]))
		}
		for _, r := range rs {
			errs = append(errs, r.Close())
		}
		return errors.Join(errs...)
	}
	for _, ord := range p.devs.GPUs {
		r, err := gpu.New(ord, arch)
		if err != nil {
			closeAll()
			return none, err
		}
		rs = append(rs, r)
		cfg.Accelerators = append(cfg.Accelerators, r)
	}
	cfg.DeviceReducer = red
	return closeAll, nil
}

// stepLogger appends a TrainStep to path every LogEvery steps, then calls
// next.
func (p *Pipeline) stepLogger(path string, truncate bool, next func(trainer.StepStats)) func(trainer.StepStats) {
	var loss float64
	var correct, images int
	last := time.Now()
	return func(s trainer.StepStats) {
		loss += s.Loss * float64(s.Images)
		correct += s.Correct
		images += s.Images
		if s.Step%int64(p.cfg.Train.LogEvery) == 0 && images > 0 {
			rec := TrainStep{Step: s.Step, Epoch: s.Epoch, Loss: loss / float64(images), Accuracy: float64(correct) / float64(images),
				LR: s.LR, ImagesPerSec: float64(images) / time.Since(last).Seconds()}
			appendJSONLine(path, rec, truncate)
			truncate = false
			loss, correct, images, last = 0, 0, 0, time.Now()
		}
		if next != nil {
			next(s)
		}
	}
}

// trainIdentity describes what a checkpoint must match: the stages (the
// data, its augmentation and batching) and the model. Where the global
// batches go is left out (the pipeline stage's ranks, the prefetch stage's
// devices): a run stopped on 8 GPUs or ranks resumes on 4, reading the same
// global batches from the step it stopped at.
func (p *Pipeline) trainIdentity() string {
	id := p.cfg.Source.Info().Identity
	for _, s := range p.stages[1:] {
		if s.Name() != "eval" && s.Name() != "pipeline" && s.Name() != "train" && s.Name() != "prefetch" {
			id += " | " + s.String()
		}
	}
	m := p.cfg.Train.Model
	return id + fmt.Sprintf(" | model %s depth=%d width=%d seed=%d", m.Name, m.Depth, m.Width, p.cfg.Seed)
}

func appendJSONLine(path string, v any, truncate bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if truncate {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// evalPipeline is the held-out data as the model sees it: the eval source,
// the training's decode stage and image operations with each random one
// replaced by its deterministic counterpart (transform.EvalOps), the training
// normalisation on the host, NCHW float32. Its samples must come out in the
// shape the model takes.
func (p *Pipeline) evalPipeline() (*Pipeline, error) {
	seed := p.cfg.Seed
	var src source.Source = p.cfg.Eval.Source
	if p.group != nil {
		// Each rank evaluates its share of the held-out batches; the
		// trainer adds the figures back in order.
		rb := &rankBatches{Source: src, rank: p.at.rank, world: p.at.world, batch: p.cfg.Eval.Batch}
		if rb.Len() == 0 {
			return nil, fmt.Errorf("the %d held-out samples make fewer batches of %d than the job has ranks (%d), and rank %d would have none: use a smaller eval batch",
				src.Len(), p.cfg.Eval.Batch, p.at.world, p.at.rank)
		}
		src = rb
	}
	stages := []Stage{Source(src)}
	var names []string
	info := p.cfg.Eval.Source.Info()
	shape := transform.Shape{C: info.C, H: info.H, W: info.W} // H, W 0: sizes vary (encoded)
	for _, s := range p.stages {
		if s.Name() == "decode" {
			stages = append(stages, s)
			names = append(names, s.String())
			continue
		}
		if s.Op() == nil {
			continue
		}
		ops, err := transform.EvalOps(s.Op(), shape)
		if err != nil {
			return nil, fmt.Errorf("held-out images: %w", err)
		}
		for _, op := range ops {
			if shape, err = op.OutShape(shape); err != nil {
				return nil, fmt.Errorf("held-out images: %s: %w", op, err)
			}
			stages = append(stages, Map(op))
			names = append(names, op.String())
		}
	}
	if p.cfg.Norm != nil {
		stages = append(stages, Normalize(p.cfg.Norm))
	}
	stages = append(stages, Options(Settings{Workers: p.Workers(), OnError: p.cfg.OnError, Seed: &seed}),
		Batching(p.cfg.Eval.Batch, false), ToTensor(transform.NCHW, transform.Float32))
	e, err := New(stages...)
	if err != nil {
		return nil, fmt.Errorf("held-out images: %w", err)
	}
	if got, want := e.out.Shape, p.out.Shape; got != want {
		e.Close()
		steps := strings.Join(names, ", ")
		if steps == "" {
			steps = "no image operations"
		}
		return nil, fmt.Errorf("held-out images come out %s (after %s), and the model takes %s: the random stages are left out of evaluation, so the deterministic ones must make the training shape (e.g. resize and center_crop)", got, steps, want)
	}
	return e, nil
}

// trainFeed hands the pipeline's batches to the trainer: each device's
// slices to its replica, or the host batches to a single replica.
type trainFeed struct{ p *Pipeline }

func (f *trainFeed) Epoch(ctx context.Context, e int) (trainer.EpochFeed, error) {
	return f.EpochFrom(ctx, e, 0)
}

// EpochFrom starts epoch e at global batch first (a resumed epoch), without
// making the batches before it: on any number of ranks and devices, the
// rank's batch first is its slice of global batch first.
func (f *trainFeed) EpochFrom(ctx context.Context, e, first int) (trainer.EpochFeed, error) {
	if f.p.devs != nil {
		x, err := f.p.eng.DeviceEpochFrom(ctx, e, first)
		if err != nil {
			return nil, err
		}
		return &deviceFeed{p: f.p, x: x}, nil
	}
	x, err := f.p.EpochFrom(ctx, e, first)
	if err != nil {
		return nil, err
	}
	return &hostFeed{p: f.p, x: x}, nil
}

// batchTensor views NCHW float32 batch bytes as a tensor, without copying.
func batchTensor(p *Pipeline, data []byte, n int) *nn.Tensor {
	s := p.out.Shape
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/4)
	return &nn.Tensor{Shape: []int{n, s.C, s.H, s.W}, Data: f[:n*s.Len()]}
}

type deviceFeed struct {
	p *Pipeline
	x *DeviceEpoch
}

func (f *deviceFeed) Next(r int) (trainer.Batch, error) {
	db, err := f.x.Next(r)
	if err != nil {
		return trainer.Batch{}, err
	}
	if data := db.Data(); data != nil {
		return trainer.Batch{X: batchTensor(f.p, data, db.N), Labels: db.Labels, Samples: db.Samples, Release: db.Release}, nil
	}
	// A GPU's slice: the replica on that GPU reads it where it is.
	ptr, ok := prefetch.DevicePointer(db.Buffer)
	if !ok {
		db.Release()
		return trainer.Batch{}, fmt.Errorf("pipe: %s: a batch in memory the trainer cannot address", db.Name)
	}
	s := f.p.out.Shape
	dev := &trainer.DeviceTensor{Shape: []int{db.N, s.C, s.H, s.W}, Ptr: ptr}
	return trainer.Batch{Dev: dev, Labels: db.Labels, Samples: db.Samples, Release: db.Release}, nil
}

func (f *deviceFeed) Stall(r int) time.Duration { return f.x.Stall(r) }
func (f *deviceFeed) Close() error              { return f.x.Close() }

type hostFeed struct {
	p *Pipeline
	x *Epoch
}

func (f *hostFeed) Next(r int) (trainer.Batch, error) {
	if r != 0 {
		return trainer.Batch{}, fmt.Errorf("pipe: replica %d of a pipeline without devices", r)
	}
	b, err := f.x.Next()
	if errors.Is(err, io.EOF) {
		return trainer.Batch{}, io.EOF
	}
	if err != nil {
		return trainer.Batch{}, err
	}
	return trainer.Batch{X: batchTensor(f.p, b.Data, b.N), Labels: b.Labels, Samples: b.Samples, Release: b.Release}, nil
}

func (f *hostFeed) Stall(int) time.Duration {
	return time.Duration(f.x.Stats().StallSeconds * float64(time.Second))
}
func (f *hostFeed) Close() error { return f.x.Close() }

// rankBatches is a rank's share of a held-out source in a job of world
// ranks: the source's batches rank, rank+world, rank+2·world, … of batch
// samples each, in order, as one source. Batched by batch again, its
// batches are those batches of the whole set, which Trainer.Evaluate
// expects. Its Close closes the source.
type rankBatches struct {
	source.Source
	rank, world, batch int
}

func (s *rankBatches) Len() int {
	n := s.Source.Len()
	batches := (n + s.batch - 1) / s.batch
	if batches <= s.rank {
		return 0
	}
	mine := (batches - s.rank + s.world - 1) / s.world
	l := mine * s.batch
	if (batches-1)%s.world == s.rank {
		l -= batches*s.batch - n // the set's last batch is this rank's, and short
	}
	return l
}

func (s *rankBatches) Read(i int, rec *source.Record) error {
	k, j := i/s.batch, i%s.batch
	return s.Source.Read((k*s.world+s.rank)*s.batch+j, rec)
}
