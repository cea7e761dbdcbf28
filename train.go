package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/pipefeed/pipe/fit"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
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

// Fit trains the model of the pipeline's train stage (package fit): after
// every epoch it writes the checkpoint (out/checkpoint.gob) and appends the
// epoch to out/metrics.jsonl; with Resume it first restores the
// checkpoint. In a job of several ranks (WithGroup) every rank calls Fit:
// the ranks train together, rank 0 alone writes the files, and every rank
// resumes from rank 0's checkpoint. An error on one rank leaves the others
// waiting in their next collective call, so a program stops the whole job
// on an error (as pipe does, through MPI_Abort), unless it is a
// trainer.RankError: the failing rank is stopping it.
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
	s := fit.Spec{Config: cfg, Feed: &trainFeed{p: p}, Out: c.Out, LogEvery: c.LogEvery,
		Identity: fit.Identity(p.cfg.Source.Info(), p.stages[1:], cfg), Auto: p.eng.AutoStats}
	if p.devs != nil {
		s.GPUs = p.devs.GPUs
	}
	if p.evalP != nil {
		s.Eval, s.EvalEvery = &trainFeed{p: p.evalP}, p.cfg.Eval.Every
	}
	return fit.Run(ctx, s, o)
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
