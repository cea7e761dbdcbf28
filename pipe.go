package pipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/fit"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/transform"
)

// The types a pipeline is made of and hands out, from the packages that
// implement them.
type (
	// Stage is one step of a pipeline (see package pipefile).
	Stage = pipefile.Stage
	// Policy is what a pipeline does with a corrupt record: Fail or Skip.
	Policy = engine.Policy
	// Batch is one batch of an Epoch, valid until its Release.
	Batch = engine.Batch
	// Epoch streams one epoch's batches in plan order.
	Epoch = engine.Epoch
	// EpochStats measures one epoch.
	EpochStats = engine.EpochStats
	// DeviceEpoch streams one epoch's per-device slices.
	DeviceEpoch = engine.DeviceEpoch
	// DeviceBatch is one device's slice of a global batch.
	DeviceBatch = engine.DeviceBatch
	// DeviceStats are one device's figures for an epoch.
	DeviceStats = engine.DeviceStats
	// AutoStats reports workers=auto and depth=auto; Decision is one of
	// its steps.
	AutoStats = engine.AutoStats
	Decision  = engine.Decision
	// RunOptions configures Pipeline.Run.
	RunOptions = engine.RunOptions
	// TrainEpoch is an epoch of training as reported, TrainStep a few
	// steps' figures, TrainOptions what Pipeline.Fit takes and
	// TrainResult what it returns (package fit).
	TrainEpoch   = fit.Epoch
	TrainStep    = fit.Step
	TrainOptions = fit.Options
	TrainResult  = fit.Result
	// Checksum hashes an epoch's output.
	Checksum = engine.Checksum
	// Buffers is what the staging memory holds (Pipeline.Buffers);
	// DeviceBuffers, one device's part.
	Buffers       = engine.Buffers
	DeviceBuffers = engine.DeviceBuffers

	// CacheConfig configures a cache stage; CacheInfo describes one;
	// WarmProgress reports a warm.
	CacheConfig  = cache.Config
	CacheInfo    = cache.Info
	WarmProgress = cache.WarmProgress

	// DecodeConfig, Settings, PrefetchConfig, TrainConfig and EvalConfig
	// configure the stages of those names.
	DecodeConfig   = pipefile.DecodeConfig
	Settings       = pipefile.Settings
	PrefetchConfig = pipefile.PrefetchConfig
	TrainConfig    = pipefile.TrainConfig
	EvalConfig     = pipefile.EvalConfig

	// StageError is an error about one stage; SyntaxError one at a
	// place in a .pipe file.
	StageError  = pipefile.StageError
	SyntaxError = pipefile.SyntaxError
)

const (
	// Fail stops the epoch with a corrupt record's error (the default).
	Fail = engine.Fail
	// Skip leaves corrupt records out, counts and lists them.
	Skip = engine.Skip
)

var (
	// ErrConfig is wrapped by every error about stages that do not fit
	// together, as opposed to errors reading data.
	ErrConfig = pipefile.ErrConfig
	// ErrBusy is returned for an epoch while another is open.
	ErrBusy = engine.ErrBusy
	// ErrNoCUDA is returned for GPU devices in a build without the cuda
	// tag.
	ErrNoCUDA = prefetch.ErrNoCUDA
	// ErrDType is returned by a typed view of a batch of another dtype.
	ErrDType = engine.ErrDType
)

// The stage constructors: a .pipe line and the Go call of the same name
// build the same stage (`random_crop size=32 pad=4` ⇔
// Map(transform.RandomCrop(32, 4, transform.FillZero))).

// Source sets the dataset; it must be the first stage.
func Source(src source.Source) Stage { return pipefile.Source(src) }

// Shuffle permutes the samples anew every epoch; seed also keys the random
// augmentations.
func Shuffle(seed uint64) Stage { return pipefile.Shuffle(seed) }

// ShuffleBuffer is Shuffle through a shuffle buffer, for sharded sources.
func ShuffleBuffer(seed uint64, buffer int) Stage { return pipefile.ShuffleBuffer(seed, buffer) }

// Map applies a per-sample image operation.
func Map(op transform.Op) Stage { return pipefile.Map(op) }

// Decode turns encoded images into pixels; see pipefile.Decode.
func Decode(d DecodeConfig) Stage { return pipefile.Decode(d) }

// Normalize maps pixels to (v/255 - mean) / std per channel as the tensor
// is written.
func Normalize(n *transform.Normalization) Stage { return pipefile.Normalize(n) }

// DeviceNormalize is Normalize run on the devices (normalize where=device).
func DeviceNormalize(n *transform.Normalization) Stage { return pipefile.DeviceNormalize(n) }

// Batching groups samples into batches (the .pipe stage "batch").
func Batching(size int, dropLast bool) Stage { return pipefile.Batching(size, dropLast) }

// ToTensor sets the layout and element type of batches.
func ToTensor(layout transform.Layout, dtype transform.DType) Stage {
	return pipefile.ToTensor(layout, dtype)
}

// Options sets how the pipeline runs (the .pipe stage "pipeline").
func Options(s Settings) Stage { return pipefile.Pipeline(s) }

// Cache stores the output of every stage before it; see package cache.
func Cache(c CacheConfig) Stage { return pipefile.Cache(c) }

// Prefetch sends batches to the devices, one queue per device.
func Prefetch(c PrefetchConfig) Stage { return pipefile.Prefetch(c) }

// Train trains a model on the batches; start from DefaultTrain.
func Train(c TrainConfig) Stage { return pipefile.Train(c) }

// DefaultTrain is the train stage of model with the .pipe file's defaults.
func DefaultTrain(model string) TrainConfig { return pipefile.DefaultTrain(model) }

// Eval evaluates the trained model on a held-out source.
func Eval(c EvalConfig) Stage { return pipefile.Eval(c) }

// NewChecksum returns an empty checksum.
func NewChecksum() *Checksum { return engine.NewChecksum() }

// Pipeline is a built, validated pipeline. It is safe to run epochs of it one
// after another; one epoch runs at a time. Close it: it owns its sources,
// its cache's store and its devices.
type Pipeline struct {
	stages []Stage
	cfg    *pipefile.Config
	eng    *engine.Engine
	cache  *cache.Cache
	out    *transform.Tensor
	host   *transform.Tensor
	plan   *sharding.Plan
	devs   *engine.Devices
	// cores is GOMAXPROCS when the pipeline was built: the default worker
	// and trainer thread count, whatever a command raises it to later.
	cores int
	evalP *Pipeline // built by Fit
	// group is the job this process is a rank of (WithGroup), or nil.
	group trainer.Group
	// at is where the pipeline runs and its batch sizes, settled while it
	// is built; cfg stays as Compile made it.
	at placement
}

// placement is a pipeline's rank and world and its batch sizes, settled
// once as it is built: joinGroup sets the rank and world and divides a
// training job's global batch among the ranks, resolve cuts a batch larger
// than the rank's epoch to it, and nothing changes them after.
type placement struct {
	rank, world int
	// fileBatch is the batch stage's size; batch the rank's, what each
	// Next returns; global a training step's samples over every rank (in
	// an elastic pipeline, the unit the ranks slice).
	fileBatch, batch, global int
}

// New builds a pipeline from stages: exactly one Source first, then any
// shuffle, decode, image operations, cache and normalize, then batch,
// to_tensor, prefetch, train and eval.
func New(stages ...Stage) (*Pipeline, error) { return build(stages, loadOptions{}) }

func build(stages []Stage, lo loadOptions) (*Pipeline, error) {
	cfg, err := pipefile.Compile(stages)
	if err != nil {
		return nil, err
	}
	at := placement{rank: cfg.Rank, world: cfg.World, fileBatch: cfg.Batch, batch: cfg.Batch}
	if lo.world > 0 {
		if lo.rank < 0 || lo.rank >= lo.world {
			return nil, fmt.Errorf("%w: rank %d of %d: want 0 ≤ rank < world", ErrConfig, lo.rank, lo.world)
		}
		at.rank, at.world = lo.rank, lo.world
	}
	if cfg.Source == nil {
		return nil, pipefile.Errorf(stages, 0, "the source is not open (pipefile.File.Open opens a file's sources)")
	}
	p := &Pipeline{stages: stages, cfg: cfg, cores: runtime.GOMAXPROCS(0), at: at}
	if lo.group != nil && lo.group.Size() > 1 {
		if err := p.joinGroup(lo.group); err != nil {
			return nil, err
		}
	}
	if err := p.resolve(stages, lo.cacheClosed); err != nil {
		if p.cache != nil {
			p.cache.Close()
		}
		return nil, err
	}
	return p, nil
}

// resolve checks the stages against the data (the source's shape and kind)
// and builds the tensor, the plan, the cache and the engine.
func (p *Pipeline) resolve(stages []Stage, cacheClosed bool) error {
	cfg := p.cfg
	info := cfg.Source.Info()
	if info.Encoded != cfg.Decode {
		if info.Encoded {
			return fmt.Errorf("%w: source %s gives encoded images (JPEG, PNG): add a decode stage after it", ErrConfig, info.Name)
		}
		return pipefile.Errorf(stages, pipefile.Index(stages, "decode"), "source %s gives pixels already: there is nothing to decode", info.Name)
	}
	if info.Encoded {
		if err := transform.DecodeMemoryError(); err != nil {
			return pipefile.Errorf(stages, pipefile.Index(stages, "decode"), "%w", err)
		}
	}
	in := transform.Shape{C: info.C, H: info.H, W: info.W}
	shape := in
	for i, s := range stages {
		if s.Op() == nil {
			continue
		}
		out, err := s.Op().OutShape(shape)
		if err != nil {
			return pipefile.Errorf(stages, i, "%w", err)
		}
		shape = out
	}
	t, err := transform.ToTensor(cfg.Layout, cfg.DType, cfg.Norm, shape)
	if err != nil {
		// Blame to_tensor if there is one (its dtype or shape), else normalize.
		i := pipefile.Index(stages, "to_tensor")
		if i < 0 {
			i = pipefile.Index(stages, "normalize")
		}
		if i < 0 {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return pipefile.Errorf(stages, i, "%w", err)
	}
	p.out, p.host = t, t
	var devNorm *prefetch.Norm
	if cfg.NormOnDevice {
		i := pipefile.Index(stages, "normalize")
		if cfg.Prefetch == nil {
			return pipefile.Errorf(stages, i, "where=device normalizes on the devices: add a prefetch stage (devices=cpu:N simulates them)")
		}
		if p.host, devNorm, err = deviceTensor(t); err != nil {
			return pipefile.Errorf(stages, i, "%w", err)
		}
	}
	// A batch larger than the rank's epoch is one batch of the epoch: that
	// is the batch in use, which the figures report and the trainer scales
	// its learning rate by.
	at := &p.at
	if n := cfg.Source.Len() / at.world; at.batch > n && !cfg.DropLast && !cfg.Elastic && n > 0 {
		at.batch = n
	}
	at.global = at.batch
	if (p.group != nil && cfg.Train != nil) || cfg.Elastic {
		at.global = at.batch * at.world
	}
	var popts []sharding.Option
	switch {
	case cfg.ShuffleBuffer > 0:
		shards := []int{cfg.Source.Len()}
		if s, ok := cfg.Source.(source.Sharded); ok {
			shards = s.Shards()
		}
		popts = append(popts, sharding.WithShuffleBuffer(cfg.Seed, shards, cfg.ShuffleBuffer))
	case cfg.Shuffle:
		popts = append(popts, sharding.WithShuffle(cfg.Seed))
	}
	popts = append(popts, sharding.WithRank(at.rank, at.world))
	switch {
	case cfg.Elastic:
		// The global batch is this rank's batch times the ranks, in a
		// training job and when streaming alike.
		popts = append(popts, sharding.WithElastic(at.global))
	case p.group != nil && cfg.Train != nil:
		popts = append(popts, sharding.WithSlices(at.batch))
	}
	if p.plan, err = sharding.New(cfg.Source.Len(), popts...); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.DropLast && p.plan.Len() < at.batch {
		return fmt.Errorf("%w: batch %d with drop_last leaves nothing of %d samples", ErrConfig, at.batch, p.plan.Len())
	}
	if cfg.Prefetch != nil {
		i := pipefile.Index(stages, "prefetch")
		if p.devs, err = pipefile.ParseDevices(cfg.Prefetch.Devices); err != nil {
			return pipefile.Errorf(stages, i, "%w", err)
		}
		if err := p.devs.Probe(); err != nil {
			// Not a configuration error: the machine lacks what the file asks.
			return &pipefile.StageError{Index: i, Stage: "prefetch", Err: fmt.Errorf("devices=%s: %w", cfg.Prefetch.Devices, err)}
		}
		p.devs.Depth, p.devs.Open = cfg.Prefetch.Depth, cfg.Prefetch.Open
		if err := p.checkDevices(); err != nil {
			return pipefile.Errorf(stages, i, "%w", err)
		}
	}
	if err := p.checkTrain(); err != nil {
		i := pipefile.Index(stages, "train")
		if i < 0 {
			i = pipefile.Index(stages, "eval")
		}
		return pipefile.Errorf(stages, i, "%w", err)
	}
	if cfg.Cache != nil {
		if p.cache, err = p.openCache(in, cacheClosed); err != nil {
			return err
		}
	}
	p.eng, err = engine.New(engine.Spec{
		Source: cfg.Source, InShape: in, Ops: cfg.Ops, CacheAt: cfg.CacheAt, Reduce: cfg.Reduce, MaxPixels: cfg.MaxPixels,
		Host: p.host, Out: p.out, DevNorm: devNorm, Seed: cfg.Seed, Plan: p.plan,
		Batch: at.batch, DropLast: cfg.DropLast, Workers: cfg.Workers, OnError: cfg.OnError,
		Cache: p.cache, Devices: p.devs, Auto: p.auto(),
	})
	if err != nil {
		return err
	}
	// The model as Fit will build it: its parameters (resnet depth=10 is
	// refused here, so by pipe check too) and its size against memory.
	if cfg.Train != nil {
		if err := trainer.CheckModel(p.trainConfig()); err != nil {
			p.eng.Close()
			return pipefile.Errorf(stages, pipefile.Index(stages, "train"), "%w", err)
		}
	}
	// The evaluation pipeline is built with the training one, so that a
	// check (pipe check) finds what would stop the first evaluation.
	if cfg.Eval != nil {
		if p.evalP, err = p.evalPipeline(); err != nil {
			p.eng.Close()
			return pipefile.Errorf(stages, pipefile.Index(stages, "eval"), "%w", err)
		}
	}
	return nil
}

// auto is workers=auto's and depth=auto's configuration, or nil where both
// are fixed. The tuner may use every core: where a trainer shares them in
// this process, its throughput trials see the trainer slow down and keep
// the workers that feed it best.
func (p *Pipeline) auto() *engine.Auto {
	cfg := p.cfg
	if !cfg.AutoWorkers && !cfg.AutoDepth {
		return nil
	}
	return &engine.Auto{Workers: cfg.AutoWorkers, Depth: cfg.AutoDepth && p.devs != nil, Cores: p.cores, Memory: cfg.Memory}
}

// deviceTensor splits the output tensor t for normalize where=device: the
// host writes uint8 in t's layout, and the devices convert it with the
// returned kernel.
func deviceTensor(t *transform.Tensor) (*transform.Tensor, *prefetch.Norm, error) {
	host, err := transform.ToTensor(t.Layout, transform.Uint8, nil, t.Shape)
	if err != nil {
		return nil, nil, err
	}
	plane := 0
	if t.Layout == transform.NCHW || t.Shape.C == 1 {
		plane = t.Shape.H * t.Shape.W
	}
	k, err := prefetch.NewNorm(t.Norm.Mean, t.Norm.Std, t.Shape.C, plane, t.DType == transform.Float16)
	if err != nil {
		return nil, nil, err
	}
	return host, k, nil
}

// checkDevices checks that every batch of an epoch divides among the
// devices.
func (p *Pipeline) checkDevices() error {
	n, b := p.devs.N(), p.at.batch
	if b%n != 0 {
		return fmt.Errorf("batch %d does not divide into %d devices: use a batch size that is a multiple of %d", b, n, n)
	}
	if last := p.plan.Len() % b; !p.cfg.DropLast && last != 0 && last%n != 0 {
		return fmt.Errorf("the last batch of an epoch has %d samples, which does not divide into %d devices: set drop_last=true on batch", last, n)
	}
	return nil
}

// openCache opens (or with closed, only describes) the cache stage's cache:
// its fingerprint hashes the source's identity, the decoder, the plan
// where entries follow it, and every stage before the cache.
func (p *Pipeline) openCache(in transform.Shape, closed bool) (*cache.Cache, error) {
	cfg := p.cfg
	c := *cfg.Cache
	pre := cfg.Ops[:cfg.CacheAt]
	if c.ShardSize == 0 {
		c.ShardSize = cache.AutoShardSize(in, pre)
	}
	ordered := false
	for _, op := range pre {
		ordered = ordered || op.Random()
	}
	srcID := cfg.Source.Info().Identity
	if f, ok := cfg.Source.(source.Fingerprinter); ok {
		id, err := f.Fingerprint()
		if err != nil {
			return nil, err
		}
		srcID = id
	}
	parts := []string{"pipe cache v1", srcID, fmt.Sprintf("shard=%d", c.ShardSize)}
	if cfg.Source.Info().Encoded {
		parts = append(parts, p.decoding())
	}
	samples := cfg.Source.Len()
	if ordered {
		// Entries follow the plan, which the seed and the rank decide.
		parts = append(parts, fmt.Sprintf("seed=%d order=plan rank=%d world=%d", cfg.Seed, p.at.rank, p.at.world))
		if g := p.plan.Elastic(); g > 0 {
			parts = append(parts, fmt.Sprintf("elastic=%d", g))
		} else if b := p.plan.Slice(); b > 0 {
			parts = append(parts, fmt.Sprintf("slices=%d", b))
		}
		if b := p.plan.Buffer(); b > 0 {
			parts = append(parts, fmt.Sprintf("shuffle buffer=%d", b))
		}
		samples = p.plan.Len()
	}
	var stages []string
	for _, op := range pre {
		stages = append(stages, op.String())
	}
	parts = append(parts, stages...)
	spec := cache.Spec{Config: c, Parts: parts, Stages: strings.Join(append([]string{srcID}, stages...), "\n"),
		Samples: samples, Ordered: ordered}
	if closed {
		return cache.Describe(spec), nil
	}
	return cache.Open(spec)
}

// decoding describes the decode stage as this build carries it out, for
// cache fingerprints: the pixels JPEGs decode to (the same in every build),
// whether windows decode at reduced scale, and max_pixels, which decides
// which images are skipped (written only when not the default, so caches
// made before it existed keep their fingerprints).
func (p *Pipeline) decoding() string {
	s := "decode decoder=" + transform.DecodedPixels() + fmt.Sprintf(" reduce=%t", p.cfg.Reduce)
	if m := p.cfg.MaxPixels; m != 0 && m != transform.DefaultMaxPixels {
		s += fmt.Sprintf(" max_pixels=%d", m)
	}
	return s
}

// Load parses a .pipe file, checks its stages' order and parameters, then
// opens its sources under ctx (a download or an index build stops when ctx
// is done) and builds the pipeline. Errors in the file carry file:line:col;
// errors in how stages fit together point at the line of their stage.
func Load(ctx context.Context, name string, opts ...LoadOption) (*Pipeline, error) {
	f, err := pipefile.ParseFile(ctx, name)
	if err != nil {
		return nil, err
	}
	return loadFile(ctx, f, opts...)
}

// loadFile is Load of a parsed file.
func loadFile(ctx context.Context, f *pipefile.File, opts ...LoadOption) (*Pipeline, error) {
	var lo loadOptions
	for _, o := range opts {
		o(&lo)
	}
	stages, err := f.Stages()
	if err != nil {
		return nil, err
	}
	if _, err := pipefile.Compile(stages); err != nil {
		return nil, positioned(f, err)
	}
	stages, err = f.Open(ctx, stages, &pipefile.OpenOptions{Progress: lo.progress})
	if err != nil {
		return nil, err
	}
	p, err := build(stages, lo)
	if err != nil {
		pipefile.Close(stages)
		return nil, positioned(f, err)
	}
	return p, nil
}

// positioned puts the file and line of the stage an error is about before
// it.
func positioned(f *pipefile.File, err error) error {
	var se *StageError
	if errors.As(err, &se) && se.Index >= 0 && se.Index < len(f.Lines) {
		return fmt.Errorf("%s: %w", f.Pos(se.Index), err)
	}
	return fmt.Errorf("%s: %w", f.Name, err)
}

// LoadOption configures Load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	progress    func(done, total int64)
	cacheClosed bool
	rank, world int // world 0: as the file says
	group       trainer.Group
}

// WithDownloadProgress reports the progress of downloads that sources make
// while they open (total is -1 when unknown).
func WithDownloadProgress(f func(done, total int64)) LoadOption {
	return func(o *loadOptions) { o.progress = f }
}

// WithCacheClosed loads the file without opening its cache directory: the
// cache's fingerprint is known (Summary().Cache) but nothing is read or
// written. It is for tools that work on the directory themselves, like
// pipe cache gc.
func WithCacheClosed() LoadOption { return func(o *loadOptions) { o.cacheClosed = true } }

// WithRank makes the pipeline rank's share of world ranks, whatever the
// file's pipeline stage says: for a launcher (torchrun, mpirun, Slurm) that
// gives each process its rank in the environment.
func WithRank(rank, world int) LoadOption {
	return func(o *loadOptions) { o.rank, o.world = rank, world }
}

// Source returns the pipeline's dataset.
func (p *Pipeline) Source() source.Source { return p.cfg.Source }

// Stages returns the stages the pipeline was built from.
func (p *Pipeline) Stages() []Stage { return p.stages }

// Tensor describes the batches consumers get: layout, dtype and per-sample
// shape.
func (p *Pipeline) Tensor() *transform.Tensor { return p.out }

// BatchSize is the number of samples in a full batch of this process's
// epochs, which its devices split. In a training job of several ranks
// (WithGroup) that is the rank's slice of the global batch (GlobalBatch).
func (p *Pipeline) BatchSize() int { return p.at.batch }

// Workers is the size of the transform pool.
func (p *Pipeline) Workers() int { return p.eng.Workers() }

// SetWorkers changes the pool size for later epochs; 0 means one per core.
// The output does not depend on it.
func (p *Pipeline) SetWorkers(n int) {
	if n <= 0 {
		n = p.cores
	}
	p.eng.SetWorkers(n)
	if p.evalP != nil {
		p.evalP.SetWorkers(n)
	}
}

// Samples is the number of samples an epoch delivers on this rank (before
// skips), and Batches the number of batches.
func (p *Pipeline) Samples() int { return p.eng.Samples() }
func (p *Pipeline) Batches() int { return p.eng.Batches() }

// Devices is the number of devices batches go to (1 without a prefetch
// stage).
func (p *Pipeline) Devices() int {
	if p.devs == nil {
		return 1
	}
	return p.devs.N()
}

// String lists the stages as a .pipe file would: every parameter written
// out, so that parsing it builds the same pipeline, sources opened in Go
// included (their Info().Args). A source of the program's own, which no
// .pipe line opens, is written as "source NAME # IDENTITY".
func (p *Pipeline) String() string {
	lines := make([]string, len(p.stages))
	for i, s := range p.stages {
		lines[i] = s.String()
	}
	return strings.Join(lines, "\n")
}

// Buffers returns the host slabs and device buffers the pipeline stages
// batches in, and how many are held now: between epochs, with every batch
// released, none is, so a count above zero then is a batch never
// released.
func (p *Pipeline) Buffers() Buffers { return p.eng.Buffers() }

// Skipped returns the records skipped so far under on_error=skip (up to the
// first 1000) and how many there were in all.
func (p *Pipeline) Skipped() ([]*source.RecordError, int) { return p.eng.Skipped() }

// Epoch starts producing epoch e. The work stops when ctx is done, Next
// fails or returns io.EOF, or the epoch is closed; no goroutine outlives
// that.
func (p *Pipeline) Epoch(ctx context.Context, e int) (*Epoch, error) { return p.eng.Epoch(ctx, e) }

// EpochFrom starts epoch e at batch first: the batches an Epoch would give
// from there on, the earlier ones not computed. It resumes an epoch
// stopped in the middle.
func (p *Pipeline) EpochFrom(ctx context.Context, e, first int) (*Epoch, error) {
	return p.eng.EpochFrom(ctx, e, first)
}

// Corrupt returns the corrupt records the source found when it opened, as
// the error an epoch would stop on before its first batch under
// on_error=fail (nil otherwise): what `pipe check` reports.
func (p *Pipeline) Corrupt() error { return p.eng.Corrupt() }

// SetHostAllocator makes the host slabs come from a, e.g. memory shared
// with a loader in another process, so that batches reach it uncopied,
// with held more slabs for the batches that consumer holds at once; call it
// before the first epoch, on a pipeline without a prefetch stage.
// SlabLayout then says what the first epoch will ask of a.
func (p *Pipeline) SetHostAllocator(a prefetch.HostAllocator, held int) error {
	return p.eng.SetHostAllocator(a, held)
}

// SlabLayout is what the next epoch allocates: n slabs of bytes bytes, each
// holding up to rows samples.
func (p *Pipeline) SlabLayout() (n, bytes, rows int) { return p.eng.SlabLayout() }

// DeviceEpoch starts epoch e on the pipeline's devices, opening them on
// first use (Close closes them).
func (p *Pipeline) DeviceEpoch(ctx context.Context, e int) (*DeviceEpoch, error) {
	return p.eng.DeviceEpoch(ctx, e)
}

// Run streams whole epochs, releasing every batch, and returns their stats.
// It returns when the epochs are done, ctx is cancelled, or an error stops
// the pipeline; no goroutine it started is left running.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) ([]EpochStats, error) {
	return p.eng.Run(ctx, o)
}

// Warm fills the cache for cache epochs [0, epochs) (all distinct epochs the
// cache has when epochs is 0), computing only shards that are missing, so
// an interrupted warm resumes where it stopped. Work runs on the pipeline's
// worker count; progress, if not nil, is called after every shard.
func (p *Pipeline) Warm(ctx context.Context, epochs int, progress func(WarmProgress)) (WarmProgress, error) {
	return p.eng.Warm(ctx, epochs, progress)
}

// Augmented returns the image the pipeline makes for the sample at position
// i of epoch e's plan, before it is written as a tensor, with its label and
// global index. It is meant for previews and debugging.
func (p *Pipeline) Augmented(e, i int) (img *transform.Image, label, index int, err error) {
	return p.eng.Augmented(e, i)
}

// CacheInfo returns the pipeline's cache, with the warnings met so far, or
// nil without a cache stage.
func (p *Pipeline) CacheInfo() *CacheInfo {
	if p.cache == nil {
		return nil
	}
	return p.cache.Info()
}

// Close closes the devices, the cache, the eval pipeline and the sources.
func (p *Pipeline) Close() error {
	errs := []error{p.eng.Close()}
	if p.evalP != nil {
		errs = append(errs, p.evalP.Close())
	} else if e := p.cfg.Eval; e != nil && e.Source != nil {
		errs = append(errs, e.Source.Close())
	}
	if p.cache != nil {
		errs = append(errs, p.cache.Close())
	}
	errs = append(errs, p.cfg.Source.Close())
	return errors.Join(errs...)
}

// Summary describes a built pipeline: what run and bench print before they
// start.
type Summary struct {
	// Source names the data; SourceSamples and Classes are its size.
	Source                 string
	SourceSamples, Classes int
	// Samples and Batches are one epoch on this rank, of BatchSize: the
	// batch stage's size (this rank's slice of it in a training job), or
	// the epoch's samples where the batch would hold more. FileBatch is
	// the batch stage's size as given.
	Samples, Batches, BatchSize int
	FileBatch                   int
	// Elastic reports pipeline elastic=true: GlobalBatch is the unit the
	// ranks slice, and the stream does not depend on their number.
	Elastic bool
	// GlobalBatch is the batch of a training step over every rank: BatchSize
	// times the ranks of a training job (WithGroup), else BatchSize.
	GlobalBatch int
	Seed        uint64
	// ShuffleBuffer is the shuffle stage's buffer (0: a full permutation).
	ShuffleBuffer int
	Rank, World   int
	// Tensor is what consumers get; HostTensor what crosses to the
	// devices, which differs where normalize runs on them.
	Tensor, HostTensor *transform.Tensor
	NormalizeOnDevice  bool
	// Decode says how JPEGs are decoded, or "" when the source gives
	// pixels.
	Decode string
	// Procs is the GOMAXPROCS epochs of this pipeline should run under: one
	// more than the workers (or the cores, if fewer) where workers decode
	// inside libjpeg-turbo, else the current value. Setting it is the
	// program's decision (see cmd/pipe).
	Procs   int
	Workers int
	// WorkersAuto and DepthAuto report workers=auto and depth=auto, which
	// start at Workers and Depth and are sized as the first epoch runs,
	// within MaxWorkers (the cores, or fewer where the budget says so)
	// and MemoryBudget bytes.
	WorkersAuto, DepthAuto bool
	Depth                  int
	MaxWorkers             int
	MemoryBudget           int64
	OnError                Policy
	// Devices is the number of devices (0 without a prefetch stage) and
	// DeviceKind "cpu" (simulated) or "cuda".
	Devices    int
	DeviceKind string
	Cache      *CacheInfo
	// Train reports a train stage; TrainOut is its out= directory and
	// TrainEpochs its epochs=.
	Train       bool
	TrainOut    string
	TrainEpochs int
}

// Summary describes the pipeline.
func (p *Pipeline) Summary() Summary {
	cfg := p.cfg
	info := cfg.Source.Info()
	s := Summary{Source: info.Identity, SourceSamples: cfg.Source.Len(), Classes: len(info.Classes),
		Samples: p.Samples(), Batches: p.Batches(), BatchSize: p.at.batch, FileBatch: p.at.fileBatch, Elastic: cfg.Elastic, GlobalBatch: p.GlobalBatch(), Seed: cfg.Seed, ShuffleBuffer: cfg.ShuffleBuffer,
		Rank: p.at.rank, World: p.at.world, Tensor: p.out, HostTensor: p.host, NormalizeOnDevice: cfg.NormOnDevice,
		Procs: p.procs(), Workers: p.Workers(), OnError: cfg.OnError, Cache: p.CacheInfo(), Train: cfg.Train != nil}
	if info.Encoded {
		s.Decode = p.decodeSummary(s.Procs)
	}
	if a := p.eng.AutoStats(-1); a != nil {
		s.WorkersAuto, s.DepthAuto, s.MaxWorkers, s.MemoryBudget = a.WorkersAuto, a.DepthAuto, a.MaxWorkers, a.BudgetBytes
	}
	if p.devs != nil {
		s.Depth = p.devs.Depth
		if a := p.eng.AutoStats(-1); a != nil && a.DepthAuto {
			s.Depth = a.Depth
		}
		s.Devices, s.DeviceKind = p.devs.N(), "cpu"
		if len(p.devs.GPUs) > 0 {
			s.DeviceKind = "cuda"
		}
	}
	if cfg.Train != nil {
		s.TrainOut, s.TrainEpochs = cfg.Train.Out, cfg.Train.Epochs
	}
	return s
}

// procs is Summary.Procs. A worker in a C call keeps its P only while
// another P is idle; with none, the runtime's sysmon takes it every tick
// (20 µs), starts a thread to look for work and parks it again, and the
// worker's return needs a P back: on 2 cores with 2 workers that was 12,000
// context switches a second and 1.6 of the 2 CPUs busy, against 3,000 and
// 1.85 with the spare P (BenchmarkImageNet/live). A GOMAXPROCS environment
// variable is the user's choice and is left be.
func (p *Pipeline) procs() int {
	n := runtime.GOMAXPROCS(0)
	if !transform.DecodesInC() || !p.cfg.Source.Info().Encoded || os.Getenv("GOMAXPROCS") != "" {
		return n
	}
	// More workers than cores gain nothing from more Ps: cores + 1 at most
	// (as many as workers=auto may grow to).
	w := p.Workers()
	if a := p.eng.AutoStats(-1); a != nil && a.WorkersAuto {
		w = a.MaxWorkers
	}
	return max(n, min(w, p.cores)+1)
}

func (p *Pipeline) decodeSummary(procs int) string {
	s := transform.DecoderName()
	if m := transform.DecoderModules(); m != "" {
		s += " with " + m
	}
	if procs > p.cores {
		s += fmt.Sprintf(", GOMAXPROCS %d (a spare P) so workers in C keep theirs", procs)
	}
	// The first operation runs in the chain that decodes, unless a cache
	// comes right after decode.
	if ops := p.cfg.Ops; len(ops) > 0 && (p.cfg.Cache == nil || p.cfg.CacheAt > 0) {
		if _, ok := ops[0].(transform.RegionOp); ok {
			s += ", only the window " + ops[0].Name() + " reads"
			if p.cfg.Reduce {
				s += ", at reduced DCT scale where it allows"
			}
		}
	}
	return s
}
