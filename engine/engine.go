package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// Policy says what an epoch does with a corrupt record.
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

// Spec is everything an engine runs: a validated pipeline with its plan.
// New copies it; nothing in it changes afterwards.
type Spec struct {
	Source source.Source
	// Schema is the fields every sample carries (package fields); nil for
	// an image and an int label. The source was opened with it.
	Schema *fields.Schema
	// InShape is the source's image shape (zero dimensions where it varies).
	InShape transform.Shape
	// Ops are the image operations in order; Ops[:CacheAt] run before the
	// cache (CacheAt is 0 without one).
	Ops     []transform.Op
	CacheAt int
	// Reduce lets the decoder decode at a reduced DCT scale (see
	// transform.NewDecoder).
	Reduce bool
	// MaxPixels is the decoder's limit on an image's pixels
	// (transform.Decoder.MaxPixels; 0: transform.DefaultMaxPixels). A
	// larger image is a corrupt record.
	MaxPixels int
	// Host is the tensor the workers write into slabs; Out is what
	// consumers get: Host, but for normalize on the devices, where Host is
	// uint8 and DevNorm converts it on each device.
	Host, Out *transform.TensorWriter
	DevNorm   *prefetch.Norm
	Seed      uint64
	Plan      *sharding.Plan
	Batch     int
	DropLast  bool
	// Workers is the transform pool's size (≥ 1); Engine.SetWorkers
	// changes it between epochs. With Auto.Workers it is where the tuner
	// starts (≤ 0: the most it may use).
	Workers int
	// Auto, if not nil, tunes the workers and the devices' depth as epochs
	// run (see Auto).
	Auto    *Auto
	OnError Policy
	// Cache is the cache stage's cache, opened (or described) by the
	// caller, who closes it; nil without a cache stage.
	Cache *cache.Cache
	// Devices configures the prefetch stage; nil without one.
	Devices *Devices
	// Mix mixes each batch's samples and gives them soft targets (the
	// mixup and cutmix stages); nil without them.
	Mix *Mix
}

// Devices says which devices batches go to and how far ahead.
type Devices struct {
	// Depth is how many slices each device's queue holds ahead of its
	// consumer (≥ 1).
	Depth int
	// CPU is the number of simulated devices in host memory; GPUs the CUDA
	// ordinals. One of them is set.
	CPU  int
	GPUs []int
	// AllGPUs asks for every GPU the driver sees: Probe lists them in GPUs.
	AllGPUs bool
	// Open, when set, opens device i (0 ≤ i < N) in place of the
	// default, prefetch.NewCUDA(GPUs[i]) or prefetch.NewCPU(i): a device
	// of a program's own, or a simulated one made to copy slowly
	// (prefetch.WithCopyDelay).
	Open func(i int) (prefetch.Device, error)
}

// Probe asks the CUDA driver for the GPUs: every one it sees for AllGPUs,
// and for GPUs whether it is there (prefetch.ErrNoCUDA in a build without
// CUDA). Simulated devices need no probe.
func (d *Devices) Probe() error {
	if !d.AllGPUs && len(d.GPUs) == 0 {
		return nil
	}
	n, err := prefetch.CUDADevices()
	if err != nil {
		return err
	}
	if d.AllGPUs {
		if n == 0 {
			return errors.New("the CUDA driver sees no GPU")
		}
		d.GPUs = d.GPUs[:0]
		for i := range n {
			d.GPUs = append(d.GPUs, i)
		}
	}
	return nil
}

// N is the number of devices.
func (d *Devices) N() int {
	if len(d.GPUs) > 0 {
		return len(d.GPUs)
	}
	return d.CPU
}

// Engine runs epochs of one Spec, one at a time. It owns the host slabs,
// kept across epochs, and the devices, opened by the first device epoch
// (a GPU context is too costly to make per epoch); Close releases both.
type Engine struct {
	s       Spec
	direct  bool // uint8 NCHW: images are written into slabs as they are
	fl      fieldLayout
	mix     *mixer // nil without Spec.Mix
	workers atomic.Int64
	running atomic.Bool
	slabs   *prefetch.SlabPool
	indices [][]int // per slab: the sample indices of its batch
	// rows is the most samples a batch can hold: the batch size, or the
	// epoch's samples where they are fewer. Slabs, index buffers and device
	// buffers are sized by it, not by the batch size alone: a batch of 10
	// million over 1,000 samples needs room for 1,000.
	rows int

	devs      []prefetch.Device // opened by the first DeviceEpoch
	devFree   []chan *devSlot   // per device, its free buffers
	devSlots  []*atomic.Int64   // per device, how many buffers it has (grown by the tuner)
	hostAlloc prefetch.HostAllocator
	held      int // slabs a consumer holds beyond the usual (SetHostAllocator)
	// tune is workers=auto and depth=auto's tuner, nil without them.
	tune *tuner

	skipMu   sync.Mutex
	skipped  []*source.RecordError
	nskipped int
}

// New returns an engine for s.
func New(s Spec) (*Engine, error) {
	switch {
	case s.Source == nil || s.Plan == nil || s.Host == nil || s.Out == nil:
		return nil, errors.New("engine: Source, Plan, Host and Out are required")
	case s.Batch < 1:
		return nil, fmt.Errorf("engine: batch %d", s.Batch)
	case s.CacheAt < 0 || s.CacheAt > len(s.Ops) || (s.Cache == nil && s.CacheAt != 0):
		return nil, fmt.Errorf("engine: cache at %d of %d operations", s.CacheAt, len(s.Ops))
	case s.Devices != nil && (s.Devices.N() < 1 || s.Devices.Depth < 1):
		return nil, errors.New("engine: devices need at least one device and depth ≥ 1")
	}
	if s.Mix != nil {
		if err := s.Mix.check(); err != nil {
			return nil, err
		}
		m := *s.Mix
		s.Mix = &m
	}
	s.Ops = append([]transform.Op(nil), s.Ops...)
	e := &Engine{s: s, rows: max(1, min(s.Batch, s.Plan.Len()))}
	if s.Mix != nil {
		e.mix = newMixer(s.Mix, s.Host)
	}
	var err error
	if e.fl, err = layoutFields(&e.s, e.rows, s.Host.SampleBytes()); err != nil {
		return nil, err
	}
	if e.fl.spatial {
		if err := transform.CheckFields(s.Ops); err != nil {
			return nil, err
		}
	}
	t := s.Host
	e.direct = t.DType == transform.Uint8 && (t.Layout == transform.NCHW || t.Shape.C == 1)
	if a := s.Auto; a != nil && (a.Workers || a.Depth) {
		e.tune = newTuner(*a, s.Workers, &e.s, e.rows, e.fl.slabBytes())
		if a.Workers {
			w, _ := e.tune.current()
			e.workers.Store(int64(w))
			return e, nil
		}
	}
	e.setWorkers(s.Workers)
	return e, nil
}

// SetWorkers sets the transform pool's size for later epochs; n ≤ 0 means
// one per core (GOMAXPROCS). The output does not depend on it. It ends
// workers=auto: the number set wins.
func (e *Engine) SetWorkers(n int) {
	e.setWorkers(n)
	if e.tune != nil {
		e.tune.fixWorkers(e.Workers())
	}
}

func (e *Engine) setWorkers(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	e.workers.Store(int64(n))
}

// AutoStats reports the tuner as it stands, with epoch n's decisions (n <
// 0: none), or nil where workers and depth are fixed.
func (e *Engine) AutoStats(n int) *AutoStats {
	if e.tune == nil {
		return nil
	}
	return e.tune.stats(n, e.s.Devices != nil)
}

// autoDepth reports whether the tuner sets the devices' depth and has not
// settled it.
func (e *Engine) autoDepth() bool { return e.tune != nil && e.s.Devices != nil && e.tune.cfg.Depth }

// MaxDepth is the deepest a device queue grows under depth=auto.
const MaxDepth = 64

// autoWorkers reports whether the tuner sets the workers.
func (e *Engine) autoWorkers() bool { return e.tune != nil && e.tune.autoWorkers() }

// Workers is the transform pool's size.
func (e *Engine) Workers() int { return int(e.workers.Load()) }

// Batches is the number of batches an epoch delivers (before skips).
func (e *Engine) Batches() int { return e.s.Plan.Batches(e.s.Batch, e.s.DropLast) }

// Samples is the number of samples an epoch delivers (before skips).
func (e *Engine) Samples() int {
	if e.s.DropLast {
		return e.Batches() * e.s.Batch
	}
	return e.s.Plan.Len()
}

// Skipped returns the records skipped so far under on_error=skip (up to the
// first 1000) and how many there were in all.
func (e *Engine) Skipped() ([]*source.RecordError, int) {
	e.skipMu.Lock()
	defer e.skipMu.Unlock()
	return append([]*source.RecordError(nil), e.skipped...), e.nskipped
}

func (e *Engine) addSkipped(errs []skipped) {
	e.skipMu.Lock()
	defer e.skipMu.Unlock()
	e.nskipped += len(errs)
	for _, s := range errs {
		if len(e.skipped) < 1000 {
			e.skipped = append(e.skipped, s.err)
		}
	}
}

// planEpoch is the epoch whose plan orders epoch n: with an ordered cache,
// an echoed epoch replays its cache epoch's order along with its entries.
func (e *Engine) planEpoch(n int) int {
	if c := e.s.Cache; c != nil && c.Ordered() {
		return c.Epoch(n)
	}
	return n
}

// indexBuf returns the batch-sized (rows) index buffer of slab i, kept across
// epochs so that a steady state allocates nothing.
func (e *Engine) indexBuf(i int) []int {
	for len(e.indices) <= i {
		e.indices = append(e.indices, make([]int, e.rows))
	}
	return e.indices[i][:e.rows]
}

// Buffers is the engine's staging memory at a moment: its host slabs and
// each device's buffers, and how many of each are held, by batches not yet
// released or by work in flight. Between epochs, with every batch
// released, nothing is held: a count that stays above zero then is a batch
// never released, and memory that will not come back.
type Buffers struct {
	Slabs     int             `json:"slabs"`      // host slabs (0 before the first epoch)
	SlabsHeld int             `json:"slabs_held"` // of those, not in the pool
	Devices   []DeviceBuffers `json:"devices,omitempty"`
}

// DeviceBuffers are one device's buffers, as [Buffers] counts them.
type DeviceBuffers struct {
	All  int `json:"all"`
	Held int `json:"held"`
}

// Buffers returns what the staging memory holds now. It is safe to call
// while an epoch runs, when the counts are a moment's.
func (e *Engine) Buffers() Buffers {
	var b Buffers
	if e.slabs != nil {
		b.Slabs, b.SlabsHeld = e.slabs.Len(), e.slabs.Out()
	}
	for d, free := range e.devFree {
		all := int(e.devSlots[d].Load())
		b.Devices = append(b.Devices, DeviceBuffers{All: all, Held: all - len(free)})
	}
	return b
}

// Close closes the devices and frees the slabs. The source and the cache
// are the caller's.
func (e *Engine) Close() error {
	err := e.closeDevices()
	if e.mix != nil {
		e.mix.pool.StopAndWait()
	}
	if e.slabs != nil {
		err = errors.Join(err, e.slabs.Close())
		e.slabs = nil
	}
	return err
}
