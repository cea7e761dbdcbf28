package pipe

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// Policy says what a pipeline does with a corrupt record.
type Policy int

const (
	// Fail stops the epoch with the record's error (the default).
	Fail Policy = iota
	// Skip leaves the record out of its batch, counts it and lists it in
	// the run summary. The plan does not move: other samples and other
	// ranks see exactly what they would have.
	Skip
)

func (p Policy) String() string {
	if p == Skip {
		return "skip"
	}
	return "fail"
}

// Stage is one step of a pipeline, built by the functions of this package or
// from a .pipe line. Its String is the canonical .pipe line.
type Stage struct {
	name  string
	desc  string
	src   source.Source // set for source stages
	op    transform.Op  // set for image operations
	apply func(*builder) error
}

func (s Stage) String() string { return s.desc }

// Name is the stage's registry name.
func (s Stage) Name() string { return s.name }

// builder collects stages in order and checks that they fit together.
type builder struct {
	p          *Pipeline
	afterBatch bool
	haveTensor bool
	layout     transform.Layout
	dtype      transform.DType
	seedSet    bool
	decode     bool
}

// Source sets the dataset; it must be the first stage.
func Source(src source.Source) Stage {
	return Stage{name: "source", desc: "source " + src.Info().Identity, src: src, apply: func(b *builder) error {
		if b.p.src != nil {
			return errors.New("a pipeline has one source")
		}
		b.p.src = src
		return nil
	}}
}

// Shuffle permutes the samples anew every epoch; seed also keys the random
// augmentations (it is the pipeline's seed).
func Shuffle(seed uint64) Stage { return ShuffleBuffer(seed, 0) }

// ShuffleBuffer is Shuffle as a streaming reader does it, for sharded
// sources (tfrecord, webdataset): shards in a new random order each epoch,
// read in sequence through a shuffle buffer of buffer samples (see
// sharding.WithShuffleBuffer); a source without shards is one. Buffer 0 is
// Shuffle's full permutation.
func ShuffleBuffer(seed uint64, buffer int) Stage {
	desc := fmt.Sprintf("shuffle seed=%d", seed)
	if buffer > 0 {
		desc += fmt.Sprintf(" buffer=%d", buffer)
	}
	return Stage{name: "shuffle", desc: desc, apply: func(b *builder) error {
		if b.seedSet && b.p.seed != seed {
			return fmt.Errorf("seed=%d conflicts with seed=%d set earlier", seed, b.p.seed)
		}
		if buffer < 0 {
			return fmt.Errorf("buffer=%d: want 0 (a full permutation) or more", buffer)
		}
		b.p.shuffle, b.p.seed, b.seedSet, b.p.shuffleBuffer = true, seed, true, buffer
		return nil
	}}
}

// Map applies a per-sample image operation.
func Map(op transform.Op) Stage {
	return Stage{name: op.Name(), desc: op.String(), op: op, apply: func(b *builder) error {
		if b.afterBatch || b.haveTensor {
			return fmt.Errorf("%s must come before batch and to_tensor: it works on single images", op.Name())
		}
		if b.p.norm != nil {
			return fmt.Errorf("%s after normalize: normalize must follow every image operation (it is applied as the tensor is written)", op.Name())
		}
		b.p.ops = append(b.p.ops, op)
		return nil
	}}
}

// Decode turns the encoded images of a source such as image_folder (JPEG,
// PNG) into RGB pixels. It comes right after the source, before any image
// operation; a cache after it stores decoded images, so later epochs skip
// the decoding. In the jpegturbo build, when the first operation is resize
// or random_resized_crop, only the window it reads is decoded, and with
// reduce at the smallest DCT scale of 1/8, 1/4 and 1/2 that still gives it at
// least as many pixels as it outputs.
func Decode(reduce bool) Stage {
	return Stage{name: "decode", desc: fmt.Sprintf("decode reduce=%t", reduce), apply: func(b *builder) error {
		if b.decode {
			return errors.New("decode given twice")
		}
		if len(b.p.ops) > 0 || b.p.cacheCfg != nil {
			return errors.New("decode must come before image operations and the cache: they work on pixels")
		}
		b.decode, b.p.reduce = true, reduce
		return nil
	}}
}

// decoding describes the decode stage as this build carries it out, for
// cache fingerprints: the decoder's pixels differ from Go's.
func (p *Pipeline) decoding() string {
	if transform.RegionDecoding() {
		return fmt.Sprintf("decode decoder=%s reduce=%t", transform.DecoderName(), p.reduce)
	}
	return "decode decoder=" + transform.DecoderName()
}

// ShuffleBuffer is the shuffle stage's buffer, or 0 for a full
// permutation (or no shuffle).
func (p *Pipeline) ShuffleBuffer() int { return p.shuffleBuffer }

// Decoding says how the decode stage decodes JPEGs in this build, or ""
// when the source gives pixels: for the summaries of run and bench.
func (p *Pipeline) Decoding() string {
	if !p.src.Info().Encoded {
		return ""
	}
	if !transform.RegionDecoding() {
		return transform.DecoderName() + " (Go; build with -tags jpegturbo for libjpeg-turbo)"
	}
	s := transform.DecoderName()
	if os.Getenv("PIPE_LIBJPEG_ONLY") == "1" {
		s += " with its own Huffman decoder and colour conversion (PIPE_LIBJPEG_ONLY=1)"
	}
	if n := p.cgoProcs(); n != runtime.GOMAXPROCS(0) {
		s += fmt.Sprintf(", GOMAXPROCS raised to %d (a spare P) so workers in C keep theirs", n)
	}
	// The first operation runs in the chain that decodes, unless a cache
	// comes right after decode.
	if len(p.ops) > 0 && (p.cacheCfg == nil || p.cacheAt > 0) {
		if _, ok := p.ops[0].(transform.RegionOp); ok {
			s += ", only the window " + p.ops[0].Name() + " reads"
			if p.reduce {
				s += ", at reduced DCT scale where it allows"
			}
		}
	}
	return s
}

// apply runs chain c with generator r on a read record: on its pixels
// (through img, the caller's scratch), or on its encoded bytes through d,
// which may do c's first operation as it decodes. A decoding failure is a
// *source.RecordError.
func (p *Pipeline) apply(c *transform.Chain, d *transform.Decoder, img *transform.Image, idx int, rec *source.Record, r transform.Rand) (*transform.Image, error) {
	*img = transform.Image{Pix: rec.Pix, C: rec.C, H: rec.H, W: rec.W}
	out, err := runChain(c, d, img, rec.Enc, r, nil)
	if err != nil {
		return nil, &source.RecordError{File: rec.Path, Index: idx, Err: err}
	}
	return out, nil
}

// runChain runs c with generator r on the encoded image enc through d when
// enc is not nil, else on img; with dst, the last operation writes into
// dst (Chain.ApplyTo), and dst is the result.
func runChain(c *transform.Chain, d *transform.Decoder, img *transform.Image, enc []byte, r transform.Rand, dst *transform.Image) (*transform.Image, error) {
	switch {
	case enc == nil && dst == nil:
		return c.Apply(img, r), nil
	case enc == nil:
		c.ApplyTo(dst, img, r)
		return dst, nil
	case dst == nil:
		return c.ApplyEncoded(d, enc, r)
	default:
		return dst, c.ApplyEncodedTo(d, dst, enc, r)
	}
}

// Normalize maps pixels to (v/255 - mean) / std per channel as the tensor
// is written; it must follow every image operation and needs a float dtype.
func Normalize(n *transform.Normalization) Stage {
	return Stage{name: "normalize", desc: n.String(), apply: func(b *builder) error {
		if b.p.norm != nil {
			return errors.New("normalize given twice")
		}
		b.p.norm = n
		return nil
	}}
}

// Batching groups samples into batches of size (the .pipe stage "batch");
// with dropLast the final short batch of an epoch is left out. Every
// pipeline needs one.
func Batching(size int, dropLast bool) Stage {
	return Stage{name: "batch", desc: fmt.Sprintf("batch size=%d drop_last=%t", size, dropLast), apply: func(b *builder) error {
		if size < 1 {
			return fmt.Errorf("size=%d: must be at least 1", size)
		}
		if b.afterBatch {
			return errors.New("batch given twice")
		}
		b.afterBatch = true
		b.p.batch, b.p.dropLast = size, dropLast
		return nil
	}}
}

// ToTensor sets the layout and element type of batches. Default: NCHW
// float32 when normalize is present, NCHW uint8 otherwise.
func ToTensor(layout transform.Layout, dtype transform.DType) Stage {
	return Stage{name: "to_tensor", desc: fmt.Sprintf("to_tensor layout=%s dtype=%s", layout, dtype), apply: func(b *builder) error {
		if b.haveTensor {
			return errors.New("to_tensor given twice")
		}
		b.haveTensor, b.layout, b.dtype = true, layout, dtype
		return nil
	}}
}

// Options sets how the pipeline runs, none of which changes its output:
// workers (0: one per core) and on_error. seed keys the augmentations when
// there is no shuffle stage; negative leaves it alone.
func Options(workers int, onError Policy, seed int64) Stage {
	return Stage{name: "pipeline", desc: fmt.Sprintf("pipeline workers=%d on_error=%s seed=%d", workers, onError, seed), apply: func(b *builder) error {
		if workers < 0 {
			return fmt.Errorf("workers=%d: must be 0 (one per core) or more", workers)
		}
		if workers > 0 {
			b.p.workers = workers
		}
		b.p.onError = onError
		if seed >= 0 {
			if b.seedSet && b.p.seed != uint64(seed) {
				return fmt.Errorf("seed=%d conflicts with seed=%d set earlier", seed, b.p.seed)
			}
			b.p.seed, b.seedSet = uint64(seed), true
		}
		return nil
	}}
}

// Distributed makes the pipeline read rank's share of every epoch, of world
// ranks: disjoint and equal shares, the same on every process that runs the
// same stages (see package sharding). Default: rank 0 of 1.
func Distributed(rank, world int) Stage {
	return Stage{name: "pipeline", desc: fmt.Sprintf("pipeline rank=%d world=%d", rank, world), apply: func(b *builder) error {
		if world < 1 || rank < 0 || rank >= world {
			return fmt.Errorf("rank=%d world=%d: want 0 ≤ rank < world", rank, world)
		}
		b.p.rank, b.p.world = rank, world
		return nil
	}}
}

// both is a stage made of two, applied in order, shown as a's line.
func both(a, b Stage) Stage {
	return Stage{name: a.name, desc: a.desc, apply: func(bl *builder) error {
		if err := a.apply(bl); err != nil {
			return err
		}
		return b.apply(bl)
	}}
}

// Pipeline is a built, validated pipeline. It is safe to run epochs of it one
// after another; one epoch runs at a time.
type Pipeline struct {
	stages        []Stage
	src           source.Source
	ops           []transform.Op
	norm          *transform.Normalization
	tensor        *transform.Tensor
	direct        bool // uint8 NCHW: images are written into slabs as they are
	inShape       transform.Shape
	shuffle       bool
	reduce        bool // decode at reduced DCT scale where it can
	shuffleBuffer int
	seed          uint64
	rank          int
	world         int
	batch         int
	dropLast      bool
	workers       int
	onError       Policy
	plan          *sharding.Plan
	indices       [][]int // per slab: the sample indices of its batch
	cacheCfg      *CacheConfig
	cacheAt       int // ops[:cacheAt] run before the cache stage (0 without one)
	cache         *pipeCache
	// cacheClosed builds the cache's fingerprint without opening it.
	cacheClosed bool
	prefetch    *PrefetchConfig
	devSpec     deviceSpec
	devices     int               // 0 without a prefetch stage
	devs        []prefetch.Device // opened by the first DeviceEpoch
	devFree     []chan *devSlot   // per device, its free buffers
	hostAlloc   prefetch.HostAllocator
	// out is the tensor consumers get; tensor is what the host writes, the
	// same but for normalize where=device, when the host writes uint8 and
	// devNorm converts it on the devices.
	out          *transform.Tensor
	normOnDevice bool
	devNorm      *prefetch.Norm
	train        *TrainConfig
	eval         *EvalConfig
	evalP        *Pipeline // built by Fit
	slabs        *prefetch.SlabPool
	running      bool
	skipped      []*source.RecordError
	nskipped     int
}

// ErrConfig is wrapped by every error New returns for stages that do not fit
// together, as opposed to errors reading data.
var ErrConfig = errors.New("invalid pipeline")

// StageError is an error New found in one stage: Index is its position in
// the stage list (from 0).
type StageError struct {
	Index int
	Stage string
	Err   error
}

func (e *StageError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

func stageErr(i int, s Stage, err error) error {
	return &StageError{Index: i, Stage: s.name, Err: fmt.Errorf("%w: %w", ErrConfig, err)}
}

// New builds a pipeline from stages: exactly one Source first, then any
// shuffle, image operations and normalize, then batch and to_tensor.
func New(stages ...Stage) (*Pipeline, error) {
	p := &Pipeline{workers: defaultWorkers(), world: 1, stages: stages}
	b := &builder{p: p}
	afterPrefetch, afterTrain := false, false
	for i, s := range stages {
		if afterTrain && s.name != "eval" && s.desc != "" {
			return nil, stageErr(i, s, errors.New("only eval may follow train"))
		}
		afterTrain = afterTrain || s.name == "train"
		if afterPrefetch && s.desc != "" && s.name != "train" && s.name != "eval" {
			return nil, stageErr(i, s, errors.New("nothing may follow prefetch: it hands batches to the devices"))
		}
		afterPrefetch = afterPrefetch || s.name == "prefetch"
		if i > 0 && s.name == "source" {
			return nil, stageErr(i, s, errors.New("source must be the first stage"))
		}
		if i == 0 && s.name != "source" {
			return nil, stageErr(i, s, fmt.Errorf("the first stage must be source, not %s", s.name))
		}
		if err := s.apply(b); err != nil {
			return nil, stageErr(i, s, err)
		}
	}
	if p.src == nil {
		return nil, fmt.Errorf("%w: no source stage", ErrConfig)
	}
	if p.batch == 0 {
		return nil, fmt.Errorf("%w: no batch stage (add e.g. \"batch 256\")", ErrConfig)
	}
	info := p.src.Info()
	if info.Encoded != b.decode {
		if info.Encoded {
			return nil, fmt.Errorf("%w: source %s gives encoded images (JPEG, PNG): add a decode stage after it", ErrConfig, info.Name)
		}
		i := slices.IndexFunc(stages, func(s Stage) bool { return s.name == "decode" })
		return nil, stageErr(i, stages[i], fmt.Errorf("source %s gives pixels already: there is nothing to decode", info.Name))
	}
	shape := transform.Shape{C: info.C, H: info.H, W: info.W}
	p.inShape = shape
	for i, s := range stages {
		if s.op == nil {
			continue
		}
		out, err := s.op.OutShape(shape)
		if err != nil {
			return nil, stageErr(i, s, err)
		}
		shape = out
	}
	if !b.haveTensor {
		b.layout, b.dtype = transform.NCHW, transform.Uint8
		if p.norm != nil {
			b.dtype = transform.Float32
		}
	}
	t, err := transform.ToTensor(b.layout, b.dtype, p.norm, shape)
	if err != nil {
		// Blame to_tensor if there is one (its dtype or shape), else normalize.
		i := slices.IndexFunc(stages, func(s Stage) bool { return s.name == "to_tensor" })
		if i < 0 {
			i = slices.IndexFunc(stages, func(s Stage) bool { return s.name == "normalize" })
		}
		if i < 0 {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return nil, stageErr(i, stages[i], err)
	}
	p.tensor, p.out = t, t
	if p.normOnDevice {
		i := slices.IndexFunc(stages, func(s Stage) bool { return s.name == "normalize" })
		if p.prefetch == nil {
			return nil, stageErr(i, stages[i], errors.New("where=device normalizes on the devices: add a prefetch stage (devices=cpu:N simulates them)"))
		}
		if p.tensor, p.devNorm, err = deviceTensor(t); err != nil {
			return nil, stageErr(i, stages[i], err)
		}
	}
	t = p.tensor
	p.direct = t.DType == transform.Uint8 && (t.Layout == transform.NCHW || shape.C == 1)
	var opts []sharding.Option
	switch {
	case p.shuffleBuffer > 0:
		shards := []int{p.src.Len()}
		if s, ok := p.src.(source.Sharded); ok {
			shards = s.Shards()
		}
		opts = append(opts, sharding.WithShuffleBuffer(p.seed, shards, p.shuffleBuffer))
	case p.shuffle:
		opts = append(opts, sharding.WithShuffle(p.seed))
	}
	opts = append(opts, sharding.WithRank(p.rank, p.world))
	if p.plan, err = sharding.New(p.src.Len(), opts...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.dropLast && p.plan.Len() < p.batch {
		return nil, fmt.Errorf("%w: batch %d with drop_last leaves nothing of %d samples", ErrConfig, p.batch, p.plan.Len())
	}
	if p.prefetch != nil {
		if err := p.checkPrefetch(); err != nil {
			i := slices.IndexFunc(stages, func(s Stage) bool { return s.name == "prefetch" })
			return nil, stageErr(i, stages[i], err)
		}
	}
	if err := p.checkTrain(); err != nil {
		i := slices.IndexFunc(stages, func(s Stage) bool { return s.name == "train" || s.name == "eval" })
		return nil, stageErr(i, stages[i], err)
	}
	if p.cacheCfg != nil {
		if err := p.openCache(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Source returns the pipeline's dataset.
func (p *Pipeline) Source() source.Source { return p.src }

// Stages returns the stages the pipeline was built from.
func (p *Pipeline) Stages() []Stage { return p.stages }

// Tensor describes the batches consumers get: layout, dtype and per-sample
// shape.
func (p *Pipeline) Tensor() *transform.Tensor { return p.out }

// BatchSize is the number of samples in a full batch.
func (p *Pipeline) BatchSize() int { return p.batch }

// Workers is the size of the transform pool.
func (p *Pipeline) Workers() int { return p.workers }

// SetWorkers changes the pool size for later epochs; 0 means one per core.
// The output does not depend on it.
func (p *Pipeline) SetWorkers(n int) {
	if n <= 0 {
		n = defaultWorkers()
	}
	p.workers = n
}

// raised remembers the last GOMAXPROCS raise for cgo (see cgoProcs): from
// and to.
var raised struct {
	sync.Mutex
	from, to int
}

// defaultWorkers is one worker per core: GOMAXPROCS, as it was before
// an epoch raised it for cgo.
func defaultWorkers() int {
	raised.Lock()
	defer raised.Unlock()
	n := runtime.GOMAXPROCS(0)
	if n == raised.to && raised.from > 0 {
		return raised.from
	}
	return n
}

// raiseProcs sets GOMAXPROCS to n (above its value) and remembers it.
func raiseProcs(n int) {
	raised.Lock()
	defer raised.Unlock()
	if cur := runtime.GOMAXPROCS(0); n > cur {
		if cur != raised.to {
			raised.from = cur
		}
		raised.to = n
		runtime.GOMAXPROCS(n)
	}
}

// cgoProcs is the GOMAXPROCS an epoch of p runs under: one more than the
// workers (or the cores, if fewer) when they decode JPEGs inside
// libjpeg-turbo and GOMAXPROCS leaves no spare P, else the current value. A worker in a C call keeps
// its P only while another P is idle; with none, the runtime's sysmon
// takes it every tick (20 µs), starts a thread to look for work and parks
// it again, and the worker's return needs a P back: on 2 cores with 2
// workers that was 12,000 context switches a second and 1.6 of the 2 CPUs
// busy, against 3,000 and 1.85 with the spare P (BenchmarkImageNet/live).
// A GOMAXPROCS environment variable is the user's choice and is left be.
func (p *Pipeline) cgoProcs() int {
	n := runtime.GOMAXPROCS(0)
	if !transform.RegionDecoding() || !p.src.Info().Encoded || os.Getenv("GOMAXPROCS") != "" {
		return n
	}
	// More workers than cores gain nothing from more Ps: cores + 1 at most.
	return max(n, min(p.workers, defaultWorkers())+1)
}

// Seed is the pipeline's seed.
func (p *Pipeline) Seed() uint64 { return p.seed }

// Rank and World are the pipeline's place in a data-parallel job.
func (p *Pipeline) Rank() int  { return p.rank }
func (p *Pipeline) World() int { return p.world }

// OnError is the corrupt-record policy.
func (p *Pipeline) OnError() Policy { return p.onError }

// Samples is the number of samples an epoch delivers on this rank (before
// skips), and Batches the number of batches.
func (p *Pipeline) Samples() int {
	if p.dropLast {
		return p.Batches() * p.batch
	}
	return p.plan.Len()
}
func (p *Pipeline) Batches() int { return p.plan.Batches(p.batch, p.dropLast) }

// Ops returns the per-sample image operations in order.
func (p *Pipeline) Ops() []transform.Op { return p.ops }

// String lists the stages as a .pipe file would.
func (p *Pipeline) String() string {
	var s []string
	for _, st := range p.stages {
		if st.desc != "" {
			s = append(s, st.String())
		}
	}
	return strings.Join(s, "\n")
}

// Skipped returns the records skipped so far under on_error=skip (up to the
// first 1000) and how many there were in all.
func (p *Pipeline) Skipped() ([]*source.RecordError, int) { return p.skipped, p.nskipped }

// indexBuf returns the batch-sized index buffer of slab i, kept across
// epochs so that a steady state allocates nothing.
func (p *Pipeline) indexBuf(i int) []int {
	for len(p.indices) <= i {
		p.indices = append(p.indices, make([]int, p.batch))
	}
	return p.indices[i][:p.batch]
}

// Close closes the devices, the cache and the source.
func (p *Pipeline) Close() error {
	errs := []error{p.closeDevices()}
	if p.evalP != nil {
		errs = append(errs, p.evalP.Close())
	} else if p.eval != nil {
		errs = append(errs, p.eval.Source.Close())
	}
	if p.cache != nil && p.cache.store != nil {
		errs = append(errs, p.cache.store.Close())
	}
	errs = append(errs, p.src.Close())
	return errors.Join(errs...)
}
