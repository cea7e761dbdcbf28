package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

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
	// fields and mask are the moving fields of a sample and its decoded
	// mask, kept so that their memory is reused.
	fields transform.Fields
	mask   transform.Mask
	// compute computes a cache entry with this worker's scratch; made
	// once, so that reading a cached chunk allocates no closure.
	compute cache.ComputeFunc
}

type chunkRecord struct {
	source.Record
	err error
}

func (e *Engine) newWorker() *worker {
	s := &e.s
	w := &worker{chain: transform.NewChain(s.Ops[s.CacheAt:]), pre: transform.NewChain(s.Ops[:s.CacheAt]),
		dec: &transform.Decoder{Reduce: s.Reduce, MaxPixels: s.MaxPixels}}
	w.compute = func(ctx context.Context, id cache.ShardID, dst []byte) ([]byte, error) {
		return e.computeShard(ctx, w, id, dst)
	}
	return w
}

// runChain runs c with generator r on the encoded image enc through d when
// enc is not nil, else on img; with dst, the last operation writes into
// dst (Chain.ApplyTo), and dst is the result. With f, the chain moves f's
// mask and boxes with the image.
func runChain(c *transform.Chain, d *transform.Decoder, img *transform.Image, enc []byte, r transform.Rand, dst *transform.Image, f *transform.Fields) (*transform.Image, error) {
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

// apply runs chain c with generator r on a read record: on its pixels
// (through img, the caller's scratch), or on its encoded bytes through d,
// which may do c's first operation as it decodes. A decoding failure is a
// *source.RecordError.
func apply(c *transform.Chain, d *transform.Decoder, img *transform.Image, idx int, rec *source.Record, r transform.Rand) (*transform.Image, error) {
	*img = transform.Image{Pix: rec.Pix, C: rec.C, H: rec.H, W: rec.W}
	out, err := runChain(c, d, img, rec.Enc, r, nil, nil)
	if err != nil {
		return nil, &source.RecordError{File: rec.Path, Index: idx, Err: err}
	}
	return out, nil
}

func (x *Epoch) transform(w *worker, c chunk, sb int) {
	s := &x.e.s
	j := c.j
	if s.Cache != nil {
		x.transformCached(w, c, sb)
		return
	}
	// Read the chunk's records first, then transform them: the reads touch
	// records scattered over the dataset, and done back to back their cache
	// misses overlap instead of stalling one sample at a time.
	recs := w.recs[:c.hi-c.lo]
	for i := range recs {
		k := c.lo + i
		recs[i].err = s.Source.Read(j.indices[k], &recs[i].Record)
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
		if rec.Enc == nil && s.InShape.Fixed() && w.img.Shape() != s.InShape {
			x.fail(fmt.Errorf("sample %d: image is %s, the source said %s", idx, w.img.Shape(), s.InShape))
			return
		}
		err := x.write(w, j, k, sb, transform.NewRand(s.Seed, x.epoch, int64(idx)), rec.Label, rec.Enc, &rec.Record)
		if err != nil {
			if !x.skip(j, k, &source.RecordError{File: rec.Path, Index: idx, Err: err}) {
				return
			}
		}
	}
}

// write runs the worker's chain (the stages after any cache) with
// generator r on w.img, or on the encoded image enc when it is not nil, and
// writes the result, with its label, at position k of the batch; with a
// fields stage, rec's fields too, the spatial ones moved with the image
// (rec is nil where the sample comes from the cache, which holds no
// fields). Its errors are about the record: enc's failing to decode, a
// field that does not fit.
func (x *Epoch) write(w *worker, j *job, k, sb int, r transform.Rand, label int, enc []byte, rec *source.Record) error {
	fl := &x.e.fl
	if sc := x.e.s.Schema; sc != nil && rec != nil && len(rec.Fields) != len(sc.Fields) {
		return fmt.Errorf("the source read %d values for the %d fields %s", len(rec.Fields), len(sc.Fields), sc)
	}
	var f *transform.Fields
	if x.e.direct {
		// uint8 NCHW is the image's own layout: the last operation writes
		// straight into the slab.
		w.out = transform.Image{Pix: j.slab.Data[k*sb : k*sb : (k+1)*sb]}
		if _, err := runChain(w.chain, w.dec, &w.img, enc, r, &w.out, f); err != nil {
			return err
		}
	} else {
		out, err := runChain(w.chain, w.dec, &w.img, enc, r, nil, f)
		if err != nil {
			return err
		}
		x.e.s.Host.Write(j.slab.Data[k*sb:(k+1)*sb], out)
	}
	j.slab.Labels[k] = int32(label)
	if len(fl.regions) > 0 {
		return writeFields(j.slab.Data[fl.at:], k, &x.e.s, fl, rec, f)
	}
	return nil
}

// transformCached is transform for a pipeline with a cache stage: the
// stages before the cache come from a cached (or just computed) shard, and
// the stages after it run here. An ordered cache is read in place from the
// store; everything else, and every miss, goes through the shard memory.
func (x *Epoch) transformCached(w *worker, c chunk, sb int) {
	pc := x.e.s.Cache
	if !pc.Ordered() || !pc.Readable() {
		x.transformShards(w, c.j, c.lo, c.hi, sb)
		return
	}
	S := pc.ShardSize()
	ce := pc.Epoch(x.epoch)
	j := c.j
	for k := c.lo; k < c.hi; {
		shardIdx := (j.first + k) / S
		end := min(c.hi, (shardIdx+1)*S-j.first)
		base := shardIdx * S
		var done bool
		read := pc.ReadChunk(ce, shardIdx, j.first+k-base, j.first+end-base, j.indices[k:end], &w.offs, func(i int, s cache.Sample) bool {
			done = !x.emit(w, j, k+i, sb, s, ce)
			return !done
		})
		if !read {
			// Compute (or re-read, check in full, report and rewrite) the
			// shard once for every worker that needs it.
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
func (x *Epoch) emit(w *worker, j *job, k, sb int, s cache.Sample, ce int) bool {
	if s.Skipped != nil {
		return x.skip(j, k, s.Skipped)
	}
	w.img = s.Img
	r := x.e.s.Cache.PostRand(x.e.s.Seed, x.epoch, ce, j.indices[k], s.State)
	x.write(w, j, k, sb, r, s.Label, nil, nil)
	return true
}

// transformShards handles batch positions [lo, hi) of job j through the
// decoded shards in memory, computing and storing what the cache lacks.
func (x *Epoch) transformShards(w *worker, j *job, lo, hi, sb int) {
	pc := x.e.s.Cache
	ce := pc.Epoch(x.epoch)
	for k := lo; k < hi; k++ {
		idx := j.indices[k]
		key := idx
		if pc.Ordered() {
			key = j.first + k // ordered entries: the plan position
		}
		s, err := pc.Shard(x.ctx, cache.ShardID{Epoch: ce, Index: key / pc.ShardSize()}, w.compute)
		if err != nil {
			x.fail(err)
			return
		}
		ok := x.emit(w, j, k, sb, s.Sample(key-s.First, idx), ce)
		pc.Release(s)
		if !ok {
			return
		}
	}
}

// computeShard runs the stages before the cache on the shard's samples and
// encodes them, appended to dst.
func (e *Engine) computeShard(ctx context.Context, w *worker, id cache.ShardID, dst []byte) ([]byte, error) {
	s := &e.s
	c := s.Cache
	first := id.Index * c.ShardSize()
	n := min(c.ShardSize(), c.Samples()-first)
	if n <= 0 {
		return nil, fmt.Errorf("pipe: cache shard %d is past the epoch's %d samples", id.Index, c.Samples())
	}
	if c.Ordered() {
		if cap(w.order) < n {
			w.order = make([]int, n)
		}
		w.order = w.order[:n]
		s.Plan.Fill(id.Epoch, first, w.order)
	}
	enc := cache.NewWriter(dst, n)
	rec := &w.rec
	defer w.dec.Release()
	for i := range n {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		idx := first + i
		if c.Ordered() {
			idx = w.order[i]
		}
		err := s.Source.Read(idx, rec)
		var out *transform.Image
		if err == nil {
			out, err = apply(w.pre, w.dec, &w.img, idx, rec, transform.NewRand(s.Seed, id.Epoch, int64(idx)))
		}
		if err != nil {
			var re *source.RecordError
			if s.OnError == Fail || !errors.As(err, &re) {
				return nil, err
			}
			enc.Skipped(re)
			continue
		}
		enc.Sample(rec.Label, out, w.pre.Rand().State())
	}
	return enc.Bytes(), nil
}
