package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/sharding"
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
	// Data holds N samples of Tensor().SampleBytes() bytes each, in the
	// pipeline's layout and dtype.
	Data []byte
	// Labels holds the N labels.
	Labels []int32
	// Samples holds the N global sample indices the batch was made from.
	Samples []int

	owner *Epoch // nil once released
	slab  *prefetch.Slab
}

// Float32 views Data as float32 values; the dtype must be float32.
func (b *Batch) Float32() []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/4)
}

// Uint16 views Data as uint16 values (float16 bits).
func (b *Batch) Uint16() []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/2)
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

// worker is the per-goroutine state: scratch images and the records of one
// chunk (each with its own buffer, for sources that generate pixels).
type worker struct {
	chain *transform.Chain // the stages after the cache (all, without one)
	pre   *transform.Chain // the stages before the cache
	recs  [chunkSamples]chunkRecord
	rec   source.Record
	order []int // sample indices of a cache shard being computed
	offs  []int // sample offsets of a chunk read in place from the cache
	img   transform.Image
	out   transform.Image
	dec   *transform.Decoder
}

func (p *Pipeline) newWorker() *worker {
	return &worker{chain: transform.NewChain(p.ops[p.cacheAt:]), pre: transform.NewChain(p.ops[:p.cacheAt]), dec: transform.NewDecoder(p.reduce)}
}

type chunkRecord struct {
	source.Record
	err error
}

// Epoch streams the batches of one epoch in plan order. Get one from
// Pipeline.Epoch, call Next until it returns io.EOF or an error, and Close
// it (Close is safe to call at any time, and again).
type Epoch struct {
	p      *Pipeline
	slabs  *prefetch.SlabPool // p.slabs when the epoch started
	epoch  int
	ctx    context.Context
	cancel context.CancelCauseFunc
	pool   pond.Pool
	jobs   []job
	ready  chan *job
	chunks chan chunk
	closed bool
	failed atomic.Pointer[error]
	start  time.Time
	stats  EpochStats
	held   atomic.Int32
	// cacheBase holds the cache counters at the epoch's start.
	cacheBase [2]int64
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
}

// ErrBusy is returned by Pipeline.Epoch while another epoch is open.
var ErrBusy = errors.New("pipe: an epoch of this pipeline is already running")

// Epoch starts producing epoch e. The work stops when ctx is done, Next
// fails or returns io.EOF, or Close is called; no goroutine outlives that.
func (p *Pipeline) Epoch(ctx context.Context, e int) (*Epoch, error) {
	if p.running {
		return nil, ErrBusy
	}
	if c, ok := p.src.(source.Checker); ok && p.onError == Fail {
		if bad := c.Corrupt(); len(bad) > 0 {
			more := ""
			if len(bad) > 1 {
				more = fmt.Sprintf(" (and %d more; on_error=skip would skip them)", len(bad)-1)
			}
			return nil, fmt.Errorf("%w%s", bad[0], more)
		}
	}
	raiseProcs(p.cgoProcs())
	nslabs := p.workers + extraSlabs
	sb := p.tensor.SampleBytes()
	if p.slabs == nil || p.slabs.Len() != nslabs || p.slabs.Pinned() != (p.hostAlloc != nil) {
		if p.slabs != nil {
			if err := p.slabs.Close(); err != nil {
				return nil, err
			}
		}
		pool, err := prefetch.NewSlabPool(nslabs, p.batch*sb, p.batch, p.hostAlloc)
		if err != nil {
			p.slabs = nil
			return nil, err
		}
		p.slabs = pool
	}
	ctx, cancel := context.WithCancelCause(ctx)
	x := &Epoch{
		p: p, slabs: p.slabs, epoch: e, ctx: ctx, cancel: cancel,
		jobs:   make([]job, nslabs),
		ready:  make(chan *job, nslabs),
		chunks: make(chan chunk, nslabs*((p.batch+chunkSamples-1)/chunkSamples)),
		start:  time.Now(),
	}
	for i := range x.jobs {
		x.jobs[i].done = make(chan struct{}, 1)
		x.jobs[i].indices = p.indexBuf(i)
	}
	x.stats = EpochStats{Epoch: e, Workers: p.workers}
	if c := p.cache; c != nil {
		x.cacheBase = [2]int64{c.misses.Load(), c.corrupt.Load()}
	}
	waitBefore := p.slabs.Wait()
	x.stats.SlabWaitSeconds = -waitBefore.Seconds()
	p.running = true
	// One goroutine produces, p.workers transform; pond owns them all and
	// Close waits for them.
	x.pool = pond.NewPool(p.workers + 1)
	x.pool.Submit(func() { x.guard(x.produce) })
	for range p.workers {
		w := p.newWorker()
		x.pool.Submit(func() { x.guard(func() { x.work(w) }) })
	}
	return x, nil
}

// guard turns a panic in a pipeline goroutine into the epoch's error, with
// its stack, instead of a crash with other goroutines still running.
func (x *Epoch) guard(f func()) {
	defer func() {
		if r := recover(); r != nil {
			x.fail(fmt.Errorf("pipe: panic in pipeline goroutine: %v\n%s", r, debug.Stack()))
		}
	}()
	f()
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
	p := x.p
	nb := p.Batches()
	for b := range nb {
		lo := b * p.batch
		hi := min(lo+p.batch, p.plan.Len())
		slab, err := x.slabs.Get(x.ctx)
		if err != nil {
			return
		}
		j := &x.jobs[slab.ID]
		j.slab, j.indices, j.first = slab, j.indices[:hi-lo], lo
		p.plan.Fill(p.planEpoch(x.epoch), lo, j.indices)
		j.skipped = j.skipped[:0]
		j.batch = Batch{Epoch: x.epoch, Index: b, N: hi - lo}
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

func (x *Epoch) work(w *worker) {
	sb := x.p.tensor.SampleBytes()
	for c := range x.chunks {
		if x.ctx.Err() == nil {
			x.transform(w, c, sb)
		}
		if c.j.pending.Add(-1) == 0 {
			c.j.done <- struct{}{}
		}
	}
}

func (x *Epoch) transform(w *worker, c chunk, sb int) {
	p := x.p
	j := c.j
	if p.cache != nil {
		x.transformCached(w, c, sb)
		return
	}
	// Read the chunk's records first, then transform them: the reads touch
	// records scattered over the dataset, and done back to back their cache
	// misses overlap instead of stalling one sample at a time.
	recs := w.recs[:c.hi-c.lo]
	for i := range recs {
		k := c.lo + i
		recs[i].err = p.src.Read(j.indices[k], &recs[i].Record)
		if err := recs[i].err; err != nil && !x.skip(j, k, err) {
			return
		}
	}
	for i := range recs {
		rec := &recs[i]
		if rec.err != nil {
			continue
		}
		k := c.lo + i
		idx := j.indices[k]
		w.img = transform.Image{Pix: rec.Pix, C: rec.C, H: rec.H, W: rec.W}
		if rec.Enc == nil && p.inShape.Fixed() && w.img.Shape() != p.inShape {
			x.fail(fmt.Errorf("sample %d: image is %s, the source said %s", idx, w.img.Shape(), p.inShape))
			return
		}
		err := x.write(w, j, k, sb, transform.NewRand(p.seed, x.epoch, int64(idx), 0), rec.Label, rec.Enc)
		if err != nil {
			if !x.skip(j, k, &source.RecordError{File: rec.Path, Index: idx, Err: err}) {
				return
			}
		}
	}
}

// write runs the worker's chain (the stages after any cache) with
// generator r on w.img, or on the encoded image enc when it is not nil, and
// writes the result, with its label, at position k of the batch. Its only
// error is enc's failing to decode.
func (x *Epoch) write(w *worker, j *job, k, sb int, r transform.Rand, label int, enc []byte) error {
	if x.p.direct {
		// uint8 NCHW is the image's own layout: the last operation writes
		// straight into the slab.
		w.out = transform.Image{Pix: j.slab.Data[k*sb : k*sb : (k+1)*sb]}
		if _, err := runChain(w.chain, w.dec, &w.img, enc, r, &w.out); err != nil {
			return err
		}
	} else {
		out, err := runChain(w.chain, w.dec, &w.img, enc, r, nil)
		if err != nil {
			return err
		}
		x.p.tensor.Write(j.slab.Data[k*sb:(k+1)*sb], out)
	}
	j.slab.Labels[k] = int32(label)
	return nil
}

// transformCached is transform for a pipeline with a cache stage: the
// stages before the cache come from a cached (or just computed) shard, and
// the stages after it run here. An ordered cache is read in place from the
// store; everything else, and every miss, goes through the shard memory.
func (x *Epoch) transformCached(w *worker, c chunk, sb int) {
	pc := x.p.cache
	if !pc.random || pc.store == nil {
		x.transformShards(w, c.j, c.lo, c.hi, sb)
		return
	}
	S := pc.cfg.ShardSize
	ce := pc.cacheEpoch(x.epoch)
	j := c.j
	for k := c.lo; k < c.hi; {
		shardIdx := (j.first + k) / S
		end := min(c.hi, (shardIdx+1)*S-j.first)
		base := shardIdx * S
		var done bool
		err := pc.store.View(pc.fp, ce, shardIdx, pc.layout, func(e *sharding.Entry) error {
			data, offs, err := chunkBytes(e, j.first+k-base, j.first+end-base, w.offs)
			if err != nil {
				return err
			}
			w.offs = offs
			for i, o := range offs {
				next := len(data)
				if i+1 < len(offs) {
					next = offs[i+1]
				}
				img, label, state, skipped := parseSample(data[o:next], j.indices[k+i])
				if !x.emit(w, j, k+i, sb, img, label, state, skipped, ce) {
					done = true
					return nil
				}
			}
			return nil
		})
		switch {
		case err == nil:
		case errors.Is(err, sharding.ErrMiss), errors.Is(err, sharding.ErrCorrupt):
			// Compute (or re-read, check in full, report and rewrite) the
			// shard once for every worker that needs it.
			x.transformShards(w, j, k, end, sb)
		default:
			pc.warn("read", fmt.Sprintf("cache read failed, computing live: %v", err))
			x.transformShards(w, j, k, end, sb)
		}
		if done || x.ctx.Err() != nil {
			return
		}
		k = end
	}
}

// emit runs the stages after the cache on one cached sample and writes it at
// position k of the batch; it reports whether the chunk may go on.
func (x *Epoch) emit(w *worker, j *job, k, sb int, img transform.Image, label int, state uint64, skipped *source.RecordError, ce int) bool {
	p := x.p
	idx := j.indices[k]
	if skipped != nil {
		return x.skip(j, k, skipped)
	}
	w.img = img
	x.write(w, j, k, sb, p.cache.postRand(p.seed, x.epoch, ce, idx, state), label, nil)
	return true
}

// transformShards handles batch positions [lo, hi) of job j through the
// decoded shards in memory, computing and storing what the cache lacks.
func (x *Epoch) transformShards(w *worker, j *job, lo, hi, sb int) {
	pc := x.p.cache
	ce := pc.cacheEpoch(x.epoch)
	for k := lo; k < hi; k++ {
		idx := j.indices[k]
		key := idx
		if pc.random {
			key = j.first + k // ordered entries: the plan position
		}
		s, err := x.shardFor(w, key)
		if err != nil {
			x.fail(err)
			return
		}
		img, label, state, skipped := s.sample(key-s.first, idx)
		ok := x.emit(w, j, k, sb, img, label, state, skipped, ce)
		pc.shards.release(s)
		if !ok {
			return
		}
	}
}

// skip applies the error policy to a bad record; it reports whether the
// chunk may go on.
func (x *Epoch) skip(j *job, k int, err error) bool {
	var re *source.RecordError
	if x.p.onError == Fail || !errors.As(err, &re) {
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
	if x.closed {
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
	x.stats.StallSeconds += time.Since(t).Seconds()
	if !finished || x.ctx.Err() != nil {
		stopped := x.ctx.Err() != nil
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
		x.finish()
		return nil, io.EOF
	}
	b := &j.batch
	sb := x.p.tensor.SampleBytes()
	b.Data = j.slab.Data[:b.N*sb]
	b.Labels = j.slab.Labels[:b.N]
	b.Samples = j.indices
	if len(j.skipped) > 0 {
		x.compact(j, sb)
	}
	x.stats.Images += b.N
	x.stats.Batches++
	x.held.Add(1)
	b.owner, b.slab = x, j.slab
	return b, nil
}

// compact closes the holes skipped samples left in a batch, keeping order.
func (x *Epoch) compact(j *job, sb int) {
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
		}
		keep = append(keep, j.indices[k])
		out++
	}
	b.N = out
	b.Data, b.Labels, b.Samples = b.Data[:out*sb], b.Labels[:out], keep
	x.stats.Skipped += len(j.skipped)
	p := x.p
	p.nskipped += len(j.skipped)
	for _, s := range j.skipped {
		if len(p.skipped) < 1000 {
			p.skipped = append(p.skipped, s.err)
		}
	}
}

func (x *Epoch) finish() {
	x.stats.Seconds = time.Since(x.start).Seconds()
	if x.stats.Seconds > 0 {
		x.stats.ImagesPerSec = float64(x.stats.Images) / x.stats.Seconds
	}
}

// Stats returns the epoch's figures so far; they are complete once Next has
// returned io.EOF.
func (x *Epoch) Stats() EpochStats {
	s := x.stats
	s.SlabWaitSeconds += x.slabs.Wait().Seconds()
	if c := x.p.cache; c != nil {
		// An epoch needs each of its shards once; those not computed
		// were read.
		s.CacheMisses = c.misses.Load() - x.cacheBase[0]
		s.CacheCorrupt = c.corrupt.Load() - x.cacheBase[1]
		if x.closed && x.err() == nil {
			s.CacheHits = int64(x.p.CacheInfo().Shards) - s.CacheMisses
		}
	}
	return s
}

// Close stops the epoch and waits for its goroutines. Slabs of batches not
// yet delivered go back to the pool; delivered batches stay valid until
// their Release.
func (x *Epoch) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	if x.stats.Seconds == 0 {
		x.stats.Seconds = time.Since(x.start).Seconds()
	}
	x.cancel(context.Canceled)
	x.pool.StopAndWait()
	for j := range x.ready {
		x.slabs.Put(j.slab)
	}
	x.p.running = false
	if err := x.err(); err != nil {
		return err
	}
	return nil
}
