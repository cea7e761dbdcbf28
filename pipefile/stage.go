package pipefile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/transform"
)

// Stage is one step of a pipeline, made by a constructor of this package
// (re-exported by package pipe) or from a .pipe line by its Spec. Its
// String is its canonical .pipe line, every parameter written out, so a
// pipeline's stages print as a file that builds the same pipeline.
type Stage struct {
	name string
	line string
	// src is a source stage's opened source, or open opens it (a source
	// stage from a .pipe line, before Open).
	src  source.Source
	open func(ctx context.Context, o *OpenOptions) (source.Source, error)
	op   transform.Op // set for image operations
	// apply records the stage in a Config; it checks what can be checked
	// without the data: order and parameters.
	apply func(*Config) error
}

func (s Stage) String() string { return s.line }

// Name is the stage's registry name.
func (s Stage) Name() string { return s.name }

// Source returns a source stage's source, or nil before it is opened.
func (s Stage) Source() source.Source { return s.src }

// Op returns an image operation stage's operation, or nil.
func (s Stage) Op() transform.Op { return s.op }

// Config is a pipeline's stages gathered and checked for order and
// parameters, before anything is read. Compile makes it.
type Config struct {
	Source source.Source
	// Ops are the image operations in order; Ops[:CacheAt] precede the
	// cache stage.
	Ops     []transform.Op
	CacheAt int
	Cache   *cache.Config
	// Decode is set by a decode stage; Reduce is its reduce= and
	// MaxPixels its max_pixels=.
	Decode, Reduce bool
	MaxPixels      int
	Norm           *transform.Normalization
	NormOnDevice   bool
	Layout         transform.Layout
	DType          transform.DType
	Shuffle        bool
	ShuffleBuffer  int
	Seed           uint64
	SeedSet        bool
	Rank, World    int
	Elastic        bool
	Batch          int
	DropLast       bool
	Workers        int   // 0: one per core
	AutoWorkers    bool  // workers=auto (the default)
	AutoDepth      bool  // prefetch depth=auto (the default)
	Memory         int64 // workers=auto's and depth=auto's budget in bytes; 0: engine.DefaultMemory
	OnError        engine.Policy
	Prefetch       *PrefetchConfig
	Train          *TrainConfig
	Eval           *EvalConfig

	afterBatch, haveTensor, afterPrefetch, afterTrain bool
	given                                             map[string]bool // the stages seen, but image operations
}

// ErrConfig is wrapped by every error about stages that do not fit
// together, as opposed to errors reading data.
var ErrConfig = errors.New("invalid pipeline")

// StageError is an error in one stage: Index is its position in the stage
// list (from 0).
type StageError struct {
	Index int
	Stage string
	Err   error
}

// Error is the stage's name and the error, said once where the error
// already starts with the name (a source's own errors do).
func (e *StageError) Error() string {
	msg := e.Err.Error()
	if strings.HasPrefix(msg, e.Stage+": ") {
		return msg
	}
	return e.Stage + ": " + msg
}
func (e *StageError) Unwrap() error { return e.Err }

// Errorf is a StageError about stage i of stages, wrapping ErrConfig.
func Errorf(stages []Stage, i int, format string, args ...any) error {
	return &StageError{Index: i, Stage: stages[i].name, Err: fmt.Errorf("%w: %w", ErrConfig, fmt.Errorf(format, args...))}
}

// Compile checks the order and parameters of stages and gathers them into a
// Config. It reads no data: sources may still be unopened.
func Compile(stages []Stage) (*Config, error) {
	c := &Config{World: 1, Layout: transform.NCHW, DType: transform.Float32, AutoWorkers: true}
	for i, s := range stages {
		err := c.add(i, s)
		switch {
		case err != nil:
		case s.name == "source":
			c.Source = s.src
		case s.name == "eval":
			c.Eval.Source = s.src
		}
		if err != nil {
			return nil, Errorf(stages, i, "%w", err)
		}
	}
	switch {
	case len(stages) == 0:
		return nil, fmt.Errorf("%w: no source stage", ErrConfig)
	case c.Batch == 0:
		return nil, fmt.Errorf("%w: no batch stage (add e.g. \"batch 256\")", ErrConfig)
	case c.Eval != nil && c.Train == nil:
		return nil, Errorf(stages, Index(stages, "eval"), "eval needs a train stage before it")
	}
	return c, nil
}

func (c *Config) add(i int, s Stage) error {
	switch {
	case c.afterTrain && s.name != "eval":
		return errors.New("only eval may follow train")
	case c.afterPrefetch && s.name != "train" && s.name != "eval":
		return errors.New("nothing may follow prefetch: it hands batches to the devices")
	case i > 0 && s.name == "source":
		return errors.New("source must be the first stage")
	case i == 0 && s.name != "source":
		return fmt.Errorf("the first stage must be source, not %s", s.name)
	}
	// Every stage but the image operations is given once: a second would
	// merge with the first or override it without a word.
	if s.op == nil {
		if c.given[s.name] {
			return errors.New("given twice: write all its parameters on one line")
		}
		if c.given == nil {
			c.given = map[string]bool{}
		}
		c.given[s.name] = true
	}
	c.afterTrain = c.afterTrain || s.name == "train"
	c.afterPrefetch = c.afterPrefetch || s.name == "prefetch"
	return s.apply(c)
}

// Index is the position of the first stage called name, or -1.
func Index(stages []Stage, name string) int {
	for i, s := range stages {
		if s.name == name {
			return i
		}
	}
	return -1
}

// Source makes a source stage from an opened source; it must be the first
// stage. Its line is the .pipe source line that opens the same data
// (sourceLine), from the source's Info().Args.
func Source(src source.Source) Stage {
	return Stage{name: "source", line: sourceLine(src.Info()), src: src, apply: setSource}
}

// sourceLine is the canonical line of an opened source, as the registry's
// source of that name writes it (every parameter with a value, defaults
// filled in), so that the pipeline's String parses back. A source the
// registry does not know, or one without Args, is written as its name
// with its identity in a comment: parsing that back says which source is
// unknown or which parameter is missing.
func sourceLine(info source.Info) string {
	spec := Lookup("source", info.Name)
	if spec == nil || len(info.Args) == 0 {
		return "source " + info.Name + " # " + info.Identity
	}
	a := Args{spec: spec, vals: map[string]string{}}
	for _, p := range spec.Params {
		if p.Default != "" {
			a.vals[p.Name] = p.Default
		}
	}
	for _, arg := range info.Args {
		if spec.Param(arg.Name) == nil {
			return "source " + info.Name + " # " + info.Identity
		}
		a.vals[arg.Name] = arg.Value
	}
	return a.Line()
}

// setSource records nothing: Compile takes the opened source from the stage,
// and add checks that it is first and given once.
func setSource(*Config) error { return nil }

// Shuffle permutes the samples anew every epoch; seed also keys the random
// augmentations (it is the pipeline's seed). It is ShuffleBuffer(seed, 0).
func Shuffle(seed uint64) Stage { return ShuffleBuffer(seed, 0) }

// ShuffleBuffer is Shuffle as a streaming reader does it, for sharded
// sources (tfrecord, webdataset): shards in a new random order each epoch,
// read in sequence through a shuffle buffer of buffer samples (see
// sharding.WithShuffleBuffer); a source without shards is one shard.
// Buffer 0 is Shuffle's full permutation.
func ShuffleBuffer(seed uint64, buffer int) Stage {
	return Stage{name: "shuffle", line: fmt.Sprintf("shuffle seed=%d buffer=%d", seed, buffer), apply: func(c *Config) error {
		if buffer < 0 {
			return fmt.Errorf("buffer=%d: want 0 (a full permutation) or more", buffer)
		}
		if err := checkMax("buffer", buffer, samplesBound); err != nil {
			return err
		}
		if err := c.setSeed(seed); err != nil {
			return err
		}
		c.Shuffle, c.ShuffleBuffer = true, buffer
		return nil
	}}
}

func (c *Config) setSeed(seed uint64) error {
	if c.SeedSet && c.Seed != seed {
		return fmt.Errorf("seed=%d conflicts with seed=%d set earlier", seed, c.Seed)
	}
	c.Seed, c.SeedSet = seed, true
	return nil
}

// Map applies a per-sample image operation (random_crop, flip, resize, …:
// the constructors of package transform).
func Map(op transform.Op) Stage {
	return Stage{name: op.Name(), line: op.String(), op: op, apply: func(c *Config) error {
		if c.afterBatch || c.haveTensor {
			return fmt.Errorf("%s must come before batch and to_tensor: it works on single images", op.Name())
		}
		if c.Norm != nil {
			return fmt.Errorf("%s after normalize: normalize must follow every image operation (it is applied as the tensor is written)", op.Name())
		}
		c.Ops = append(c.Ops, op)
		return nil
	}}
}

// DecodeConfig configures a decode stage; its zero value is the default.
type DecodeConfig struct {
	// FullScale turns off reduced-scale decoding (the .pipe parameter
	// reduce=false): by default, where the first operation is resize or
	// random_resized_crop, a JPEG is decoded at the smallest DCT scale of
	// 1/8, 1/4 and 1/2 that still gives it at least as many pixels as it
	// outputs, in every build.
	FullScale bool
	// MaxPixels is the largest image, width × height, decoded (the .pipe
	// parameter max_pixels=); 0 means transform.DefaultMaxPixels, whose
	// doc says why that default. A larger image is refused from its
	// header, before its pixels are allocated, as a corrupt record
	// (on_error=skip skips it). Negative values are an error.
	MaxPixels int
}

// Decode turns the encoded images of a source such as image_folder (JPEG,
// PNG) into RGB pixels. It comes right after the source, before any image
// operation; a cache after it stores decoded images, so later epochs skip
// the decoding. When the first operation is resize or random_resized_crop,
// only the window of a JPEG it reads is decoded, in every build.
func Decode(d DecodeConfig) Stage {
	limit := d.MaxPixels
	if limit == 0 {
		limit = transform.DefaultMaxPixels
	}
	line := fmt.Sprintf("decode reduce=%t max_pixels=%d", !d.FullScale, limit)
	return Stage{name: "decode", line: line, apply: func(c *Config) error {
		if len(c.Ops) > 0 || c.Cache != nil {
			return errors.New("decode must come before image operations and the cache: they work on pixels")
		}
		if d.MaxPixels < 0 {
			return fmt.Errorf("max_pixels=%d: want a pixel count ≥ 1, or 0 for the default (%d)", d.MaxPixels, transform.DefaultMaxPixels)
		}
		c.Decode, c.Reduce, c.MaxPixels = true, !d.FullScale, limit
		return nil
	}}
}

// Normalize maps pixels to (v/255 - mean) / std per channel as the tensor
// is written; it must follow every image operation and needs a float dtype.
func Normalize(n *transform.Normalization) Stage { return normalize(n, false) }

// DeviceNormalize is Normalize run on the devices (the .pipe parameter
// where=device): batches travel as uint8, a quarter of the bytes of
// float32, and each device converts its slice with the same arithmetic
// (prefetch.Norm). It needs a prefetch stage and a float dtype.
func DeviceNormalize(n *transform.Normalization) Stage { return normalize(n, true) }

func normalize(n *transform.Normalization, device bool) Stage {
	where := "host"
	if device {
		where = "device"
	}
	return Stage{name: "normalize", line: n.String() + " where=" + where, apply: func(c *Config) error {
		c.Norm, c.NormOnDevice = n, device
		return nil
	}}
}

// Batching groups samples into batches of size (the .pipe stage "batch");
// with dropLast the final short batch of an epoch is left out. Every
// pipeline needs one.
func Batching(size int, dropLast bool) Stage {
	return Stage{name: "batch", line: fmt.Sprintf("batch size=%d drop_last=%t", size, dropLast), apply: func(c *Config) error {
		if size < 1 {
			return fmt.Errorf("size=%d: must be at least 1", size)
		}
		if err := checkMax("size", size, batchBound); err != nil {
			return err
		}
		c.afterBatch, c.Batch, c.DropLast = true, size, dropLast
		return nil
	}}
}

// ToTensor sets the layout and element type of batches. A pipeline without
// one is NCHW float32, as if it ended in ToTensor(NCHW, Float32).
func ToTensor(layout transform.Layout, dtype transform.DType) Stage {
	return Stage{name: "to_tensor", line: fmt.Sprintf("to_tensor layout=%s dtype=%s", layout, dtype), apply: func(c *Config) error {
		c.haveTensor, c.Layout, c.DType = true, layout, dtype
		return nil
	}}
}

// The special values of Settings.Workers.
const (
	// AutoWorkers sizes the pool as the first epoch runs (workers=auto,
	// the default): see engine.Auto.
	AutoWorkers = 0
	// PerCore is one worker per core (workers=0 in a .pipe file).
	PerCore = -1
)

// Settings says how the pipeline runs (the .pipe stage "pipeline"); none
// of it changes the output of a rank. The zero value is the default.
type Settings struct {
	// Workers is the transform pool's size: AutoWorkers (0, the default),
	// PerCore (-1), or a number.
	Workers int
	// Memory is the budget in bytes of workers=auto and depth=auto: the
	// host slabs and device buffers they may hold. 0 is the default,
	// engine.DefaultMemory (a quarter of the memory this process may
	// use). Fixed workers and depth are checked against the machine
	// only.
	Memory int64
	// OnError is what a corrupt record does: engine.Fail (the default)
	// or engine.Skip.
	OnError engine.Policy
	// Seed, if not nil, is the pipeline's seed where there is no shuffle
	// stage to set it.
	Seed *uint64
	// Rank and World place the process in a data-parallel job: it reads
	// rank's share of every epoch, of World equal and disjoint shares.
	// World 0 is 1.
	Rank, World int
	// Elastic makes the global batch (the file's batch in a training job,
	// batch × world when streaming) the unit of an epoch: each rank reads
	// its slice of every whole global batch of one global order, so any
	// world size that divides it sees the same global stream and a run
	// resumes on another number of ranks (sharding.WithElastic). The
	// samples of a last, partial global batch sit out. Default false: the
	// order of ranks' shares and an epoch's last samples depend on World.
	Elastic bool
}

// Pipeline makes a stage of settings.
func Pipeline(s Settings) Stage {
	if s.World == 0 {
		s.World = 1
	}
	workers := "auto"
	switch {
	case s.Workers == PerCore:
		workers = "0"
	case s.Workers > 0:
		workers = strconv.Itoa(s.Workers)
	}
	memory := "auto"
	if s.Memory > 0 {
		memory = strconv.FormatInt((s.Memory+(1<<20)-1)>>20, 10)
	}
	line := fmt.Sprintf("pipeline workers=%s memory=%s on_error=%s", workers, memory, s.OnError)
	if s.Seed != nil {
		line += fmt.Sprintf(" seed=%d", *s.Seed)
	}
	line += fmt.Sprintf(" rank=%d world=%d elastic=%t", s.Rank, s.World, s.Elastic)
	return Stage{name: "pipeline", line: line, apply: func(c *Config) error {
		if s.Workers < PerCore {
			return fmt.Errorf("workers=%d: must be AutoWorkers (0), PerCore (-1) or a number of workers", s.Workers)
		}
		if s.Memory < 0 {
			return fmt.Errorf("memory=%d: must be 0 (the default) or a number of bytes", s.Memory)
		}
		if err := checkMax("memory", int(min(s.Memory>>20, 1<<40)), memoryBound); err != nil {
			return err
		}
		if err := checkMax("workers", s.Workers, workersBound); err != nil {
			return err
		}
		if s.World < 1 || s.Rank < 0 || s.Rank >= s.World {
			return fmt.Errorf("rank=%d world=%d: want 0 ≤ rank < world", s.Rank, s.World)
		}
		if err := checkMax("world", s.World, ranksBound); err != nil {
			return err
		}
		if s.Seed != nil {
			if err := c.setSeed(*s.Seed); err != nil {
				return err
			}
		}
		c.AutoWorkers = s.Workers == AutoWorkers
		c.Workers = max(s.Workers, 0)
		c.Memory = s.Memory
		c.OnError, c.Rank, c.World, c.Elastic = s.OnError, s.Rank, s.World, s.Elastic
		return nil
	}}
}

// Cache stores the output of every stage before it, per shard of samples, in
// a Badger directory, and reads it back instead of recomputing it.
func Cache(cfg cache.Config) Stage {
	d, err := cfg.WithDefaults()
	line := fmt.Sprintf("cache dir=%s epochs=%d shard=%d ahead=%d memory=%d", quote(d.Dir), d.Epochs, d.ShardSize, d.Ahead, d.Memory>>20)
	return Stage{name: "cache", line: line, apply: func(c *Config) error {
		if err != nil {
			return err
		}
		if c.afterBatch || c.haveTensor {
			return errors.New("cache must come before batch and to_tensor: it stores single images")
		}
		if err := errors.Join(checkMax("epochs", d.Epochs, epochsBound), checkMax("shard", d.ShardSize, shardBound),
			checkMax("ahead", d.Ahead, epochsBound), checkMax("memory", int(d.Memory>>20), memoryBound)); err != nil {
			return err
		}
		if c.Norm != nil {
			return errors.New("cache after normalize: put the cache before normalize (normalize is applied as the tensor is written, so the cache stores uint8 images either way)")
		}
		c.Cache, c.CacheAt = &d, len(c.Ops)
		return nil
	}}
}

// The defaults of the prefetch and eval stages.
const (
	defaultDepth     = 2 // where depth=auto starts
	defaultDevices   = "cpu:1"
	defaultEvalSplit = "test"
	defaultEvalEvery = 1
	defaultEvalBatch = 500
)

// PrefetchConfig configures a prefetch stage; its zero value is the
// default.
type PrefetchConfig struct {
	// Depth is how many batches each device's queue holds ahead of its
	// consumer. Default 0: auto, which starts at 2 and deepens the
	// queues on bursty stalls, within the pipeline's memory budget
	// (engine.Auto).
	Depth int
	// Devices names the devices: "cpu:N" for N simulated devices in host
	// memory (any machine), or "all" / "cuda:0,1" for GPUs (the cuda
	// build). Default "cpu:1".
	Devices string
}

// Prefetch sends every global batch to the devices, cut into contiguous,
// equal per-device slices, each copied asynchronously into device memory
// and queued for that device's consumer. It comes after batch; only train
// and eval may follow it.
func Prefetch(p PrefetchConfig) Stage {
	if p.Devices == "" {
		p.Devices = defaultDevices
	}
	depth := "auto"
	if p.Depth != 0 {
		depth = strconv.Itoa(p.Depth)
	}
	return Stage{name: "prefetch", line: fmt.Sprintf("prefetch depth=%s devices=%s", depth, p.Devices), apply: func(c *Config) error {
		if p.Depth < 0 {
			return fmt.Errorf("depth=%d: must be 0 (auto) or at least 1", p.Depth)
		}
		if err := checkMax("depth", p.Depth, depthBound); err != nil {
			return err
		}
		if _, err := ParseDevices(p.Devices); err != nil {
			return err
		}
		if !c.afterBatch {
			return errors.New("prefetch moves batches: it comes after batch (and to_tensor)")
		}
		// The engine starts depth=auto at defaultDepth.
		c.AutoDepth = p.Depth == 0
		q := p
		if c.AutoDepth {
			q.Depth = defaultDepth
		}
		c.Prefetch = &q
		return nil
	}}
}

// ParseDevices parses devices=: cpu:N, all (every GPU the driver sees) or
// cuda:I,J,... It checks the syntax only; whether the GPUs are there is
// the engine's question (engine.Devices.Probe), asked when a pipeline is
// built, so that parsing a file never calls the CUDA driver.
func ParseDevices(spec string) (*engine.Devices, error) {
	if rest, ok := strings.CutPrefix(spec, "cpu:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("devices=%s: want cpu:N with 1 ≤ N ≤ 64", spec)
		}
		return &engine.Devices{CPU: n}, nil
	}
	d := &engine.Devices{}
	rest, ok := strings.CutPrefix(spec, "cuda:")
	switch {
	case spec == "all":
		d.AllGPUs = true
	case ok:
		for _, f := range strings.Split(rest, ",") {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 {
				return nil, fmt.Errorf("devices=%s: %q is not a GPU number (want cuda:0 or cuda:0,1,...)", spec, f)
			}
			if slices.Contains(d.GPUs, i) {
				return nil, fmt.Errorf("devices=%s: cuda:%d given twice", spec, i)
			}
			d.GPUs = append(d.GPUs, i)
		}
	default:
		return nil, fmt.Errorf("devices=%s: want cpu:N, all, or cuda:I,J,...", spec)
	}
	return d, nil
}

// TrainConfig is the train stage: the trainer's configuration, of which the
// pipeline fills in what it decides (input shape, classes, replicas, global
// batch, batches per epoch, seed; Threads 0 means every core), and where
// the run's files go. Start from DefaultTrain: its values are the .pipe
// file's defaults.
type TrainConfig struct {
	trainer.Config
	// Out is the directory for the checkpoint, the metrics and the plots
	// ("" for none).
	Out string
	// LogEvery writes every LogEvery-th step's figures to out/steps.jsonl
	// (0: none).
	LogEvery int
}

// DefaultTrain is the train stage of model with every parameter at its
// default, as the .pipe line "train MODEL" gives it.
func DefaultTrain(model string) TrainConfig {
	return TrainConfig{Config: trainer.Config{
		Model:  trainer.ModelSpec{Name: model, Depth: 20},
		Epochs: 10, Optim: trainer.OptimConfig{Momentum: 0.9},
		LR: 0.1, Gamma: 0.1,
	}.WithDefaults(), Out: "runs/train"}
}

// Train makes the pipeline train a model on its batches (the .pipe stage
// "train"). It comes after batch and to_tensor (NCHW float32), and after
// prefetch if there is one: each device feeds one replica.
func Train(t TrainConfig) Stage {
	return Stage{name: "train", line: trainLine(t), apply: func(c *Config) error {
		if !c.afterBatch {
			return errors.New("train takes batches: it comes after batch, to_tensor and prefetch")
		}
		if t.Epochs < 1 {
			return fmt.Errorf("epochs=%d: must be at least 1", t.Epochs)
		}
		if err := t.checkBounds(); err != nil {
			return err
		}
		c.Train = &t
		return nil
	}}
}

// checkBounds checks t's sizes against the registry's bounds (the Go API
// has no parser to do it).
func (t TrainConfig) checkBounds() error {
	return errors.Join(checkMax("epochs", t.Epochs, epochsBound), checkMax("steps_per_epoch", t.StepsPerEpoch, stepsBound),
		checkMax("depth", t.Model.Depth, resnetBound), checkMax("width", t.Model.Width, widthBound),
		checkMax("base_batch", t.BaseBatch, batchBound), checkMax("step_every", t.StepEvery, epochsBound),
		checkMax("average_every", t.AverageEvery, stepsBound), checkMax("threads", t.Threads, threadsBound),
		checkMax("log_every", t.LogEvery, stepsBound))
}

// trainLine is t's canonical line: every parameter of the train spec, the
// unset ones at the trainer's defaults.
func trainLine(t TrainConfig) string {
	c := t.Config.WithDefaults()
	m, o := c.Model, c.Optim
	return fmt.Sprintf("train model=%s depth=%d width=%d epochs=%d steps_per_epoch=%d optimizer=%s lr=%g base_batch=%d scale_lr=%s "+
		"momentum=%g nesterov=%t weight_decay=%g schedule=%s warmup=%g step_every=%d gamma=%g label_smoothing=%g mode=%s "+
		"average_every=%d threads=%d out=%s log_every=%d",
		m.Name, m.Depth, m.Width, t.Epochs, c.StepsPerEpoch, o.Name, c.LR, t.BaseBatch, c.ScaleLR,
		o.Momentum, o.Nesterov, o.WeightDecay, c.Schedule, c.WarmupEpochs, c.StepEvery, c.Gamma, c.Smoothing,
		c.Mode, c.AverageEvery, t.Threads, quote(t.Out), t.LogEvery)
}

// EvalConfig is the eval stage: a held-out source, evaluated every Every
// epochs (default 1) in batches of Batch (default 500).
type EvalConfig struct {
	Source source.Source
	// Split names the held-out split, for the stage's line. Default "test".
	Split string
	Every int
	Batch int
}

// Eval evaluates the trained model on a held-out source (the .pipe stage
// "eval"); it needs a train stage.
func Eval(e EvalConfig) Stage {
	s := evalStage(e)
	s.src = e.Source
	return s
}

func evalStage(e EvalConfig) Stage {
	if e.Split == "" {
		e.Split = defaultEvalSplit
	}
	if e.Every == 0 {
		e.Every = defaultEvalEvery
	}
	if e.Batch == 0 {
		e.Batch = defaultEvalBatch
	}
	line := fmt.Sprintf("eval split=%s every=%d batch=%d", e.Split, e.Every, e.Batch)
	return Stage{name: "eval", line: line, apply: func(c *Config) error {
		if e.Every < 1 || e.Batch < 1 {
			return fmt.Errorf("every=%d batch=%d: both must be at least 1", e.Every, e.Batch)
		}
		if err := errors.Join(checkMax("every", e.Every, epochsBound), checkMax("batch", e.Batch, batchBound)); err != nil {
			return err
		}
		cfg := e
		c.Eval = &cfg
		return nil
	}}
}

// quote writes a value so that the parser reads it back whole.
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t#\"") {
		return `"` + v + `"`
	}
	return v
}
