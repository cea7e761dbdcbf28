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
	"github.com/pipefeed/pipe/fields"
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
	// FieldView is one field of a Batch (Batch.Field).
	FieldView = engine.FieldView
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

// Fields declares the fields every sample carries (see package fields);
// the source must be opened with the same schema (source.WithFields).
func Fields(s *fields.Schema) Stage { return pipefile.Fields(s) }

// MixUp mixes each finished batch's samples with torchvision's MixUp (see
// pipefile.MixUp); its soft targets are the field fields.Targets.
func MixUp(alpha, p float64, classes int) Stage { return pipefile.MixUp(alpha, p, classes) }

// CutMix pastes a box of each batch's previous sample into each sample,
// with torchvision's CutMix (see pipefile.CutMix).
func CutMix(alpha, p float64, classes int) Stage { return pipefile.CutMix(alpha, p, classes) }

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
	cfg    *pipefile.Compiled
	eng    *engine.Engine
	cache  *cache.Cache
	out    *transform.TensorWriter
	host   *transform.TensorWriter
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

// Source returns the pipeline's dataset.
func (p *Pipeline) Source() source.Source { return p.cfg.Source }

// Stages returns the stages the pipeline was built from.
func (p *Pipeline) Stages() []Stage { return p.stages }

// Tensor describes the batches consumers get: layout, dtype and per-sample
// shape.
func (p *Pipeline) Tensor() *transform.TensorWriter { return p.out }

// Schema is the fields every sample carries, as the fields stage declared
// them; nil without one (an image and an int label).
func (p *Pipeline) Schema() *fields.Schema { return p.cfg.Schema }

// FieldLayout is where a batch's fields other than the image and the int
// label lie in each host slab: from byte offset, laid out by regions
// (Batch.Field reads them), mixup's and cutmix's targets last; none
// without a fields stage or those.
func (p *Pipeline) FieldLayout() (offset int, regions []fields.Region) {
	return p.eng.FieldLayout()
}

// SlabBytes is the bytes of one host slab (the images of a batch, then its
// fields), which a host allocator (SetHostAllocator) is asked for.
func (p *Pipeline) SlabBytes() int { return p.eng.SlabBytes() }

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
// .pipe line opens, is written as "source NAME # IDENTITY". URLs are written
// as given, secrets included, so that the text opens the same data: show it
// through source.RedactURLs.
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

// CheckOrders checks that a source streaming its shards through a shard
// cache smaller than them can read epochs [first, first+n) in their order
// (at most engine.MaxCheckedEpochs of them), and returns how many it
// checked: 0 where nothing streams. Run and Fit check the epochs they will
// run before the first; the refusal, a *source.OrderError, names the first
// epoch that fails and a cache_size and a shuffle buffer that pass.
func (p *Pipeline) CheckOrders(first, n int) (checked int, err error) {
	return p.eng.CheckOrders(first, n)
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
// Before the first it checks the epochs' orders (CheckOrders). It returns
// when the epochs are done, ctx is cancelled, or an error stops the
// pipeline; no goroutine it started is left running.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) ([]EpochStats, error) {
	return p.eng.Run(ctx, o)
}

// Warm fills the cache for cache epochs [0, epochs) (all distinct epochs the
// cache has when epochs is 0), computing only shards that are missing, so
// an interrupted warm resumes where it stopped. Work runs on WarmWorkers
// goroutines; progress, if not nil, is called after every shard.
func (p *Pipeline) Warm(ctx context.Context, epochs int, progress func(WarmProgress)) (WarmProgress, error) {
	return p.eng.Warm(ctx, epochs, progress)
}

// WarmWorkers is the goroutines Warm runs: the pipeline's workers, but
// under workers=auto every core the memory budget allows, as a warm has
// no consumer to wait for.
func (p *Pipeline) WarmWorkers() int { return p.eng.WarmWorkers() }

// Augmented returns the image the pipeline makes for the sample at position
// i of epoch e's plan, before it is written as a tensor, with its label and
// global index. It is meant for previews and debugging.
func (p *Pipeline) Augmented(e, i int) (img *transform.Image, label, index int, err error) {
	return p.eng.Augmented(e, i)
}

// AugmentedFields is Augmented with the sample's mask and boxes as the
// pipeline moves them with the image (nil without either), for previews.
func (p *Pipeline) AugmentedFields(e, i int) (img *transform.Image, f *transform.Fields, label, index int, err error) {
	return p.eng.AugmentedFields(e, i)
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
	// Source names the data, the secrets of its URLs redacted
	// (source.RedactURLs); SourceSamples and Classes are its size.
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
	Tensor, HostTensor *transform.TensorWriter
	NormalizeOnDevice  bool
	// Fields is the fields stage's schema (nil without one), and
	// FieldRegions where a batch holds each field beyond the image and the
	// int label, FieldBytes their bytes in a batch.
	Fields       *fields.Schema
	FieldRegions []fields.Region
	FieldBytes   int
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
	s := Summary{Source: source.RedactURLs(info.Identity), SourceSamples: cfg.Source.Len(), Classes: len(info.Classes),
		Samples: p.Samples(), Batches: p.Batches(), BatchSize: p.at.batch, FileBatch: p.at.fileBatch, Elastic: cfg.Elastic, GlobalBatch: p.GlobalBatch(), Seed: cfg.Seed, ShuffleBuffer: cfg.ShuffleBuffer,
		Rank: p.at.rank, World: p.at.world, Tensor: p.out, HostTensor: p.host, NormalizeOnDevice: cfg.NormOnDevice,
		Procs: p.procs(), Workers: p.Workers(), OnError: cfg.OnError, Cache: p.CacheInfo(), Train: cfg.Train != nil}
	if cfg.Schema != nil {
		s.Fields = cfg.Schema
		_, s.FieldRegions = p.eng.FieldLayout()
		s.FieldBytes = p.eng.SlabBytes() - p.eng.ImageBytes()
	}
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
