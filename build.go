package pipe

// Building a pipeline: from stages or a file to a Pipeline whose stages
// have been checked against the data, with its plan, cache and engine.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/transform"
)

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
	if err := checkSchema(info, cfg.Schema); err != nil {
		return pipefile.Errorf(stages, max(0, pipefile.Index(stages, "fields")), "%w", err)
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
	mix, err := p.mixing(stages)
	if err != nil {
		return err
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
		Source: cfg.Source, Schema: cfg.Schema, InShape: in, Ops: cfg.Ops, CacheAt: cfg.CacheAt, Reduce: cfg.Reduce, MaxPixels: cfg.MaxPixels,
		Host: p.host, Out: p.out, DevNorm: devNorm, Seed: cfg.Seed, Plan: p.plan,
		Batch: at.batch, DropLast: cfg.DropLast, Workers: cfg.Workers, OnError: cfg.OnError,
		Cache: p.cache, Devices: p.devs, Auto: p.auto(), Mix: mix,
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
func deviceTensor(t *transform.TensorWriter) (*transform.TensorWriter, *prefetch.Norm, error) {
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
	// The fingerprint and the cache's description are stored: a URL's
	// secrets stay out of them, and a presigned URL whose signature
	// rotates still finds its entries.
	srcID = source.RedactURLs(srcID)
	parts := []string{"pipe cache v1", srcID, fmt.Sprintf("shard=%d", c.ShardSize)}
	if cfg.Source.Info().Encoded {
		parts = append(parts, p.decoding())
	}
	if cfg.Schema != nil {
		// What an entry holds beside its image.
		parts = append(parts, "fields "+cfg.Schema.String())
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
	// Compile the unopened stages first: a mistake in their order or
	// parameters is reported before a download or an index build, not
	// after. build compiles the opened ones, whose sources are set; the
	// second compile reads no data and costs microseconds.
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

// mixing is the mixup and cutmix stages' engine.Mix, with the source's
// classes where they give no num_classes; nil without them.
func (p *Pipeline) mixing(stages []Stage) (*engine.Mix, error) {
	if p.cfg.Mix == nil {
		return nil, nil
	}
	m := *p.cfg.Mix
	if m.Classes == 0 {
		m.Classes = len(p.cfg.Source.Info().Classes)
	}
	if m.Classes == 0 {
		i := pipefile.Index(stages, "mixup")
		if i < 0 {
			i = pipefile.Index(stages, "cutmix")
		}
		return nil, pipefile.Errorf(stages, i, "source %s names no classes, and the targets need their number: give num_classes=", p.cfg.Source.Info().Name)
	}
	return &m, nil
}

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
	if m := p.cfg.Mix; m != nil {
		if p.devs != nil && len(p.devs.GPUs) > 0 {
			return errors.New("the GPU trainer does not learn from soft targets yet: mixup and cutmix train on the CPU (prefetch devices=cpu:N, or no prefetch)")
		}
		if k := len(p.cfg.Source.Info().Classes); m.Classes != 0 && m.Classes != k {
			return fmt.Errorf("mixup and cutmix make targets over num_classes=%d, and the model has the source's %d classes", m.Classes, k)
		}
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
		if s.Name() == "decode" || s.Name() == "fields" {
			// The held-out samples carry the same fields (the source
			// was opened with them), which the trainer leaves.
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

// checkSchema checks that the source reads the fields the pipeline
// declares: a source opened with another schema, or with none, would give
// values the engine cannot place.
func checkSchema(info source.Info, s *fields.Schema) error {
	switch {
	case s == nil && info.Fields != nil:
		return fmt.Errorf("source %s reads the fields %s, but the pipeline has no fields stage to declare them", info.Name, info.Fields)
	case s == nil:
		return nil
	case info.Fields == nil:
		return fmt.Errorf("source %s was opened without the fields %s: open it with source.WithFields (a .pipe file does)", info.Name, s)
	case info.Fields.String() != s.String():
		return fmt.Errorf("source %s reads the fields %s, not the %s the fields stage declares", info.Name, info.Fields, s)
	}
	return nil
}
