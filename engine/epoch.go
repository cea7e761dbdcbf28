package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// chunkSamples is the most samples handed to a worker at once: large enough
// that scheduling costs nothing next to the work (64 CIFAR images are about
// 200 µs), small enough that a batch spreads over every worker.
const chunkSamples = 64

// extraSlabs is how many finished or filling batches may wait beyond one per
// worker: the depth of the reorder window and of the prefetch.
const extraSlabs = 2

// Batch is a batch of samples in one slab. It is valid until Release; after
// Release its memory belongs to a later batch.
type Batch struct {
	// Epoch and Index place the batch in the plan: batch Index of Epoch.
	Epoch, Index int
	// N is the number of samples; less than the batch size for the final
	// batch without drop_last, or where records were skipped.
	N int
	// Data holds N samples of the host tensor's SampleBytes each, in the
	// pipeline's layout and DType.
	Data []byte
	// DType is the element type of Data: the pipeline's, but uint8 on the
	// host where normalize runs on the devices.
	DType transform.DType
	// Labels holds the N labels.
	Labels []int32
	// Samples holds the N global sample indices the batch was made from.
	Samples []int
	// Fields holds the fields of a pipeline with a fields stage other
	// than the image and the int label (masks, boxes, …), and the targets
	// of a pipeline that mixes (Spec.Mix), laid out by Regions
	// (fields.Schema.Layout for the batch size, not N: a region's first N
	// samples are set); nil without either. Field gives a field's view.
	Fields  []byte
	Regions []fields.Region

	owner *Epoch // nil once released
	slab  *prefetch.Slab
}

// ErrDType is returned by a typed view of a batch of another element type.
var ErrDType = errors.New("batch element type")

// Float32 views Data as float32 values without copying. It fails with
// ErrDType unless the batch is float32 (a uint8 batch, such as the host
// side of normalize where=device, has no float32 view).
func (b *Batch) Float32() ([]float32, error) {
	if b.DType != transform.Float32 {
		return nil, fmt.Errorf("pipe: Float32 of a %s batch: %w", b.DType, ErrDType)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/4), nil
}

// Float16 views Data as the bits of float16 values without copying; it
// fails with ErrDType unless the batch is float16.
func (b *Batch) Float16() ([]uint16, error) {
	if b.DType != transform.Float16 {
		return nil, fmt.Errorf("pipe: Float16 of a %s batch: %w", b.DType, ErrDType)
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/2), nil
}

// Release hands the batch's slab back for reuse. Calling it twice panics.
func (b *Batch) Release() {
	x := b.owner
	if x == nil {
		panic("pipe: Batch released twice")
	}
	b.owner = nil
	x.held.Add(-1)
	x.slabs.Put(b.slab)
}

// job is the state of one batch in flight; there is one per slab, reused.
type job struct {
	batch   Batch
	slab    *prefetch.Slab
	first   int // plan position of the batch's first sample
	indices []int
	pending atomic.Int32
	done    chan struct{} // one token when every chunk has finished
	mu      sync.Mutex
	skipped []skipped // samples of the batch skipped under on_error=skip
}

type skipped struct {
	k   int // position in the batch
	err *source.RecordError
}

type chunk struct {
	j      *job
	lo, hi int
}

// Epoch streams the batches of one epoch in plan order. Get one from
// Engine.Epoch, call Next until it returns io.EOF or an error, and Close
// it. Next is for one goroutine; Close and Stats are safe from any, at any
// time, and Close again.
type Epoch struct {
	e      *Engine
	slabs  *prefetch.SlabPool // e.slabs when the epoch started
	epoch  int
	from   int             // the first batch produced (EpochFrom)
	ctx    context.Context // the group's: cancelled by Close, a failure or a panic
	cancel context.CancelCauseFunc
	pool   pond.Pool
	group  pond.TaskGroup
	jobs   []job
	ready  chan *job
	chunks chan chunk
	closed atomic.Bool
	once   sync.Once
	failed atomic.Pointer[error]
	start  time.Time
	held   atomic.Int32

	statsMu sync.Mutex
	stats   EpochStats
	// active is how many workers take chunks: all of them, but under
	// workers=auto, where the tuner sets it. A worker i ≥ active waits for
	// gate to close (setActive closes it and makes another).
	active atomic.Int32
	gateMu sync.Mutex
	gate   chan struct{}
	// busy is the nanoseconds workers have spent on chunks.
	busy atomic.Int64
	// win is the tuner's window, kept by Next.
	win span
	// cacheBase holds the cache counters at the epoch's start.
	cacheBase [2]int64
	// stopAhead ends the source's read-ahead (source.ReadAheader).
	stopAhead func()
}

// EpochStats measures one epoch.
type EpochStats struct {
	Epoch   int `json:"epoch"`
	Images  int `json:"images"`
	Batches int `json:"batches"`
	// Seconds is wall time from the start of the epoch to its last batch.
	Seconds      float64 `json:"seconds"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// StallSeconds is how long the consumer waited in Next for a batch: the
	// time it was starved. SlabWaitSeconds is how long the producer waited
	// for a released slab: the time the consumer held it back.
	StallSeconds    float64 `json:"stall_seconds"`
	SlabWaitSeconds float64 `json:"slab_wait_seconds"`
	Skipped         int     `json:"skipped"`
	Workers         int     `json:"workers"`
	// CacheMisses counts the cache entries (shards) computed in the epoch
	// and CacheHits those read (set when the epoch is complete);
	// CacheCorrupt counts damaged entries found and rewritten. Absent
	// without a cache stage.
	CacheHits    int64 `json:"cache_hits,omitempty"`
	CacheMisses  int64 `json:"cache_misses,omitempty"`
	CacheCorrupt int64 `json:"cache_corrupt,omitempty"`
	// Checksum is set by consumers that hash the output (see Checksum).
	Checksum string `json:"checksum,omitempty"`
	// Devices holds each device's figures with a prefetch stage.
	Devices []DeviceStats `json:"devices,omitempty"`
	// Auto reports workers=auto and depth=auto: what the tuner chose and
	// why. Absent where both are fixed.
	Auto *AutoStats `json:"auto,omitempty"`
}

// Corrupt returns the first corrupt record the source found when it opened
// (a truncated file, a label out of range, …), saying how many more there
// are, where on_error=fail stops the run before its first batch on them;
// nil where there are none or they are skipped.
func (e *Engine) Corrupt() error {
	c, ok := e.s.Source.(source.Checker)
	if !ok || e.s.OnError != Fail {
		return nil
	}
	bad := c.Corrupt()
	if len(bad) == 0 {
		return nil
	}
	more := ""
	if len(bad) > 1 {
		more = fmt.Sprintf(" (and %d more; on_error=skip would skip them)", len(bad)-1)
	}
	return fmt.Errorf("%w%s", bad[0], more)
}

// ErrBusy is returned by Engine.Epoch while another epoch is open.
var ErrBusy = errors.New("pipe: an epoch of this pipeline is already running")

// Epoch starts producing epoch n. The work stops when ctx is done, Next
// fails or returns io.EOF, or Close is called; no goroutine outlives that.
func (e *Engine) Epoch(ctx context.Context, n int) (*Epoch, error) {
	return e.EpochFrom(ctx, n, 0)
}

// EpochFrom is Epoch from batch first on: batches first, first+1, … of
// epoch n, equal to those of an Epoch that started at 0 (every sample's
// augmentation depends only on the seed, the epoch and the sample), without
// computing the ones before. It resumes an epoch stopped in the middle.
func (e *Engine) EpochFrom(ctx context.Context, n, first int) (*Epoch, error) {
	if first < 0 || first > e.Batches() {
		return nil, fmt.Errorf("engine: batch %d of an epoch of %d batches", first, e.Batches())
	}
	if !e.running.CompareAndSwap(false, true) {
		return nil, ErrBusy
	}
	x, err := e.startEpoch(ctx, n, first)
	if err != nil {
		e.running.Store(false)
		return nil, err
	}
	return x, nil
}

func (e *Engine) startEpoch(ctx context.Context, n, first int) (*Epoch, error) {
	s := &e.s
	if err := e.Corrupt(); err != nil {
		return nil, err
	}
	workers := e.Workers()
	nslabs := workers + extraSlabs + e.held
	// Under workers=auto the pool may grow to the tuner's limit: the slabs
	// of its most workers, allocated as it grows.
	limit, auto := nslabs, e.autoWorkers()
	if auto {
		limit = max(nslabs, e.tune.slabLimit())
	}
	reuse := e.slabs != nil && e.slabs.Pinned() == (e.hostAlloc != nil) &&
		(e.slabs.Len() == nslabs && e.slabs.Limit() == limit || auto && e.slabs.Limit() == limit)
	if !reuse {
		if e.slabs != nil {
			if err := e.slabs.Close(); err != nil {
				return nil, err
			}
		}
		if err := checkMemory(nslabs, e.rows, (e.fl.slabBytes()+e.rows-1)/e.rows); err != nil {
			return nil, err
		}
		pool, err := prefetch.NewGrowableSlabPool(nslabs, limit, e.fl.slabBytes(), e.rows, e.hostAlloc)
		if err != nil {
			e.slabs = nil
			return nil, err
		}
		e.slabs = pool
	}
	if err := e.slabs.Grow(nslabs); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	x := &Epoch{
		e: e, slabs: e.slabs, epoch: n, from: first, cancel: cancel,
		jobs:   make([]job, limit),
		ready:  make(chan *job, limit),
		chunks: make(chan chunk, limit*((e.rows+chunkSamples-1)/chunkSamples)),
		start:  time.Now(),
		gate:   make(chan struct{}),
	}
	for i := range x.jobs {
		x.jobs[i].done = make(chan struct{}, 1)
	}
	x.stats = EpochStats{Epoch: n, Workers: workers}
	if c := s.Cache; c != nil {
		misses, corrupt := c.Counters()
		x.cacheBase = [2]int64{misses, corrupt}
	}
	x.stats.SlabWaitSeconds = -e.slabs.Wait().Seconds()
	// A source that streams its shards fetches ahead of the epoch's
	// reads. Through an augmentation cache the reads follow the cache's
	// shards, not this order, and the source fetches on demand; either
	// way Close ends the fetches under way.
	x.stopAhead = func() {}
	if ra, ok := s.Source.(source.ReadAheader); ok {
		var order func() []int
		if s.Cache == nil {
			order = func() []int {
				o := make([]int, max(min(e.Batches()*s.Batch, s.Plan.Len())-first*s.Batch, 0))
				s.Plan.Fill(e.planEpoch(n), first*s.Batch, o)
				return o
			}
		}
		stop, err := ra.ReadAhead(order)
		if err != nil {
			err = e.orderError(err, n)
			cancel(err)
			return nil, err
		}
		x.stopAhead = stop
	}
	// One goroutine produces, workers transform: one pond group, whose
	// context ends with the first failure or panic, and which Close waits
	// for. Under workers=auto the pool holds the tuner's most workers, of
	// which the first active take chunks (see work).
	tasks := workers
	if auto {
		tasks = max(workers, limit-extraSlabs-e.held)
		x.win.start = x.start
	}
	x.active.Store(int32(workers))
	x.pool = pond.NewPool(tasks + 1)
	x.group = x.pool.NewGroupContext(ctx)
	x.ctx = x.group.Context()
	x.group.SubmitErr(func() error { x.produce(); return nil })
	for i := range tasks {
		x.group.SubmitErr(func() error { x.work(i); return nil })
	}
	return x, nil
}

// fail records the first error and cancels the epoch.
func (x *Epoch) fail(err error) {
	x.failed.CompareAndSwap(nil, &err)
	x.cancel(err)
}

func (x *Epoch) err() error {
	if e := x.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (x *Epoch) produce() {
	defer close(x.chunks)
	defer close(x.ready)
	s := &x.e.s
	nb := x.e.Batches()
	for b := x.from; b < nb; b++ {
		lo := b * s.Batch
		hi := min(lo+s.Batch, s.Plan.Len())
		slab, err := x.slabs.Get(x.ctx)
		if err != nil {
			return
		}
		j := &x.jobs[slab.ID]
		if j.indices == nil {
			j.indices = x.e.indexBuf(slab.ID)
		}
		j.slab, j.indices, j.first = slab, j.indices[:hi-lo], lo
		s.Plan.Fill(x.e.planEpoch(x.epoch), lo, j.indices)
		j.skipped = j.skipped[:0]
		j.batch = Batch{Epoch: x.epoch, Index: b, N: hi - lo, DType: s.Host.DType}
		n := (hi - lo + chunkSamples - 1) / chunkSamples
		j.pending.Store(int32(n))
		x.ready <- j // never blocks: one place per slab
		for c := lo; c < hi; c += chunkSamples {
			select {
			case x.chunks <- chunk{j: j, lo: c - lo, hi: min(hi, c+chunkSamples) - lo}:
			case <-x.ctx.Done():
				return
			}
		}
	}
}

// work transforms chunks until the producer closes the channel or the epoch
// stops. It must not wait for the close alone: pond skips a task whose
// group is already cancelled, so a Close that comes before the producer
// has started leaves nobody to close chunks.
//
// Worker i takes chunks while i < active; its scratch is made on its first
// chunk, so that a worker the tuner never wakes costs nothing, and dropped
// when the tuner parks it, so that a shrink gives the memory back (the
// parked goroutine keeps only its stack).
func (x *Epoch) work(i int) {
	sb := x.e.s.Host.SampleBytes()
	var w *worker
	for {
		if w != nil && i >= int(x.active.Load()) {
			w = nil
		}
		if !x.wait(i) {
			return
		}
		if w == nil {
			w = x.e.newWorker()
		}
		var c chunk
		var ok bool
		select {
		case c, ok = <-x.chunks:
		case <-x.ctx.Done():
			return
		}
		if !ok {
			return
		}
		if x.ctx.Err() == nil {
			t := time.Now()
			x.transform(w, c, sb)
			// The chunk is written: the last image's memory goes back
			// to the process's decode budget, not to wait with us.
			w.dec.Release()
			x.busy.Add(int64(time.Since(t)))
		}
		if c.j.pending.Add(-1) == 0 {
			c.j.done <- struct{}{}
		}
	}
}

// skip applies the error policy to a bad record; it reports whether the
// chunk may go on.
func (x *Epoch) skip(j *job, k int, err error) bool {
	var re *source.RecordError
	if x.e.s.OnError == Fail || !errors.As(err, &re) {
		x.fail(err)
		return false
	}
	j.mu.Lock()
	j.skipped = append(j.skipped, skipped{k, re})
	j.mu.Unlock()
	return true
}

// Next returns the next batch in plan order, or io.EOF after the last one.
// The batch is valid until its Release; hold at most a few at once, because
// batches not released hold back production.
func (x *Epoch) Next() (*Batch, error) {
	if x.closed.Load() {
		if err := x.err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	if int(x.held.Load()) >= x.slabs.Len() {
		return nil, fmt.Errorf("pipe: Next with all %d batches held: Release batches before asking for more", x.slabs.Len())
	}
	t := time.Now()
	var j *job
	finished := false
	select {
	case j = <-x.ready:
	case <-x.ctx.Done():
	}
	if j != nil {
		select {
		case <-j.done:
			finished = true
		case <-x.ctx.Done():
		}
	}
	stall := time.Since(t).Seconds()
	if !finished || x.ctx.Err() != nil {
		stopped := x.ctx.Err() != nil
		x.addStall(stall)
		// Stop the workers first: they may still be writing into j's slab.
		x.Close()
		if j != nil {
			x.slabs.Put(j.slab)
		}
		if err := x.err(); err != nil {
			return nil, err
		}
		if stopped {
			return nil, context.Cause(x.ctx)
		}
		return nil, io.EOF
	}
	b := &j.batch
	sb := x.e.s.Host.SampleBytes()
	b.Data = j.slab.Data[:b.N*sb]
	b.Labels = j.slab.Labels[:b.N]
	if fl := &x.e.fl; len(fl.regions) > 0 {
		b.Fields, b.Regions = j.slab.Data[fl.at:fl.at+fl.bytes], fl.regions
	}
	b.Samples = j.indices
	nskip := 0
	if len(j.skipped) > 0 {
		nskip = x.compact(j, sb)
	}
	if err := x.mix(b); err != nil {
		x.fail(err)
		x.Close()
		x.slabs.Put(j.slab)
		return nil, err
	}
	x.statsMu.Lock()
	x.stats.StallSeconds += stall
	x.stats.Images += b.N
	x.stats.Batches++
	x.stats.Skipped += nskip
	x.statsMu.Unlock()
	if x.e.autoWorkers() {
		x.observe(b.N, stall)
	}
	x.held.Add(1)
	b.owner, b.slab = x, j.slab
	return b, nil
}

func (x *Epoch) addStall(s float64) {
	x.statsMu.Lock()
	x.stats.StallSeconds += s
	x.statsMu.Unlock()
}

// compact closes the holes skipped samples left in a batch, keeping order,
// and returns how many there were.
func (x *Epoch) compact(j *job, sb int) int {
	b := &j.batch
	// Workers record skips as they meet them; report them in plan order.
	slices.SortFunc(j.skipped, func(a, b skipped) int { return a.k - b.k })
	keep := make([]int, 0, b.N-len(j.skipped))
	out, next := 0, 0
	for k := 0; k < b.N; k++ {
		if next < len(j.skipped) && j.skipped[next].k == k {
			next++
			continue
		}
		if out != k {
			copy(j.slab.Data[out*sb:(out+1)*sb], j.slab.Data[k*sb:(k+1)*sb])
			j.slab.Labels[out] = j.slab.Labels[k]
			if fl := &x.e.fl; len(fl.regions) > 0 {
				fl.moveFields(j.slab.Data[fl.at:], out, k)
			}
		}
		keep = append(keep, j.indices[k])
		out++
	}
	b.N = out
	b.Data, b.Labels, b.Samples = b.Data[:out*sb], b.Labels[:out], keep
	x.e.addSkipped(j.skipped)
	return len(j.skipped)
}

// Stats returns the epoch's figures so far; they are complete once Next has
// returned io.EOF.
func (x *Epoch) Stats() EpochStats {
	x.statsMu.Lock()
	s := x.stats
	x.statsMu.Unlock()
	if s.Seconds == 0 {
		s.Seconds = time.Since(x.start).Seconds()
	}
	if s.Seconds > 0 {
		s.ImagesPerSec = float64(s.Images) / s.Seconds
	}
	s.SlabWaitSeconds += x.slabs.Wait().Seconds()
	if t := x.e.tune; t != nil {
		s.Auto = t.stats(x.epoch, x.e.s.Devices != nil)
		s.Workers = int(x.active.Load())
	}
	if c := x.e.s.Cache; c != nil {
		// An epoch needs each of its shards once; those not computed
		// were read.
		misses, corrupt := c.Counters()
		s.CacheMisses = misses - x.cacheBase[0]
		s.CacheCorrupt = corrupt - x.cacheBase[1]
		if x.closed.Load() && x.err() == nil {
			s.CacheHits = int64(c.Shards()) - s.CacheMisses
		}
	}
	return s
}

// Close stops the epoch and waits for its goroutines. Slabs of batches not
// yet delivered go back to the pool; delivered batches stay valid until
// their Release. It returns the epoch's error, if it failed.
func (x *Epoch) Close() error {
	x.once.Do(func() {
		x.statsMu.Lock()
		x.stats.Seconds = time.Since(x.start).Seconds()
		x.statsMu.Unlock()
		x.cancel(context.Canceled)
		// Before waiting for the workers: a read waiting for a fetch
		// ends with it.
		x.stopAhead()
		if err := x.group.Wait(); errors.Is(err, pond.ErrPanic) {
			x.fail(fmt.Errorf("pipe: pipeline goroutine: %w", err))
		}
		x.pool.StopAndWait()
		// A producer stopped before it started never closes ready: drain
		// what is there without waiting for the close.
	drain:
		for {
			select {
			case j, ok := <-x.ready:
				if !ok {
					break drain
				}
				x.slabs.Put(j.slab)
			default:
				break drain
			}
		}
		x.closed.Store(true)
		x.e.running.Store(false)
	})
	return x.err()
}
