package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/alitto/pond/v2"
	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// RunOptions configures Run.
type RunOptions struct {
	// Epochs to run, starting at FirstEpoch. Default: 1.
	Epochs, FirstEpoch int
	// Checksum hashes every output byte and label of each epoch in order
	// into EpochStats.Checksum. Off by default: it costs throughput.
	Checksum bool
	// OnBatch, if set, sees every batch before it is released. With a
	// prefetch stage batches live on the devices: use OnImages, or
	// DeviceEpoch for the slices themselves.
	OnBatch func(*Batch) error
	// OnImages, if set, is told the size of every global batch delivered.
	OnImages func(n int)
	// OnEpoch, if set, is called with each epoch's stats as it ends.
	OnEpoch func(EpochStats)
	// Consume, if set, makes each batch's consumer take this long, as a
	// training step would: with a prefetch stage, one consumer per device,
	// each on its own goroutine, so the stall figures say whether the
	// pipeline keeps such a trainer fed. It cannot go with Checksum.
	Consume time.Duration
}

// Run streams whole epochs, releasing every batch, and returns their stats.
// Before the first it checks the epochs' orders (CheckOrders). It returns
// when the epochs are done, ctx is cancelled, or an error stops
// the pipeline; no goroutine it started is left running.
func (e *Engine) Run(ctx context.Context, o RunOptions) ([]EpochStats, error) {
	if o.Epochs == 0 {
		o.Epochs = 1
	}
	if o.Consume > 0 && o.Checksum {
		return nil, errors.New("pipe: Consume and Checksum together: a checksum needs the batches in order, which concurrent consumers do not keep")
	}
	if _, err := e.CheckOrders(o.FirstEpoch, o.Epochs); err != nil {
		return nil, err
	}
	stopAhead := e.warmAhead(ctx, o.FirstEpoch, o.Epochs)
	defer stopAhead()
	var all []EpochStats
	for n := o.FirstEpoch; n < o.FirstEpoch+o.Epochs; n++ {
		s, err := e.runEpoch(ctx, n, o)
		if err != nil {
			return all, err
		}
		all = append(all, s)
		if o.OnEpoch != nil {
			o.OnEpoch(s)
		}
	}
	return all, nil
}

func (e *Engine) runEpoch(ctx context.Context, n int, o RunOptions) (EpochStats, error) {
	if e.s.Devices != nil {
		return e.runDeviceEpoch(ctx, n, o)
	}
	x, err := e.Epoch(ctx, n)
	if err != nil {
		return EpochStats{}, err
	}
	defer x.Close()
	var sum *Checksum
	if o.Checksum {
		sum = NewChecksum()
	}
	for {
		b, err := x.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.Stats(), err
		}
		if sum != nil {
			sum.Add(b)
		}
		if o.OnBatch != nil {
			err = o.OnBatch(b)
		}
		if o.OnImages != nil {
			o.OnImages(b.N)
		}
		if o.Consume > 0 {
			time.Sleep(o.Consume)
		}
		b.Release()
		if err != nil {
			return x.Stats(), err
		}
	}
	s := x.Stats()
	if sum != nil {
		s.Checksum = sum.String()
	}
	return s, nil
}

// runDeviceEpoch streams an epoch through the devices, taking each global
// batch's slices from every device in turn, as replicas stepping together
// would; the checksum covers the bytes in device memory.
func (e *Engine) runDeviceEpoch(ctx context.Context, n int, o RunOptions) (EpochStats, error) {
	x, err := e.DeviceEpoch(ctx, n)
	if err != nil {
		return EpochStats{}, err
	}
	defer x.Close()
	if o.Consume > 0 {
		return x.consume(o)
	}
	var sum *Checksum
	if o.Checksum {
		sum = NewChecksum()
	}
	var scratch []byte
	for {
		images := 0
		for d := range len(x.devs) {
			db, err := x.Next(d)
			if errors.Is(err, io.EOF) {
				if d != 0 {
					return EpochStats{}, fmt.Errorf("pipe: device %d ended before device 0", d)
				}
				if err := x.Close(); err != nil {
					return EpochStats{}, err
				}
				s, ds := x.Stats()
				s.Devices = ds
				if sum != nil {
					s.Checksum = sum.String()
				}
				return s, nil
			}
			if err != nil {
				return EpochStats{}, err
			}
			if sum != nil {
				data := db.Data()
				if data == nil { // GPU memory: read it back
					if cap(scratch) < db.Bytes() {
						scratch = make([]byte, db.Bytes())
					}
					data = scratch[:db.Bytes()]
					if err := db.CopyTo(data); err != nil {
						return EpochStats{}, err
					}
				}
				sum.AddSamples(data, db.Labels)
				sum.addFields(db.N, db.Fields, db.Regions)
			}
			images += db.N
			db.Release()
		}
		if o.OnImages != nil {
			o.OnImages(images)
		}
	}
}

// consume runs one consumer per device, each taking o.Consume per slice,
// as data-parallel replicas would: one pond group, cancelled with the
// epoch by the first failure.
func (x *DeviceEpoch) consume(o RunOptions) (EpochStats, error) {
	var mu sync.Mutex
	pool := pond.NewPool(len(x.devs))
	defer pool.StopAndWait()
	g := pool.NewGroup()
	for d := range x.devs {
		g.SubmitErr(func() error {
			for {
				db, err := x.Next(d)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					x.cancel(err)
					return err
				}
				time.Sleep(o.Consume)
				if o.OnImages != nil {
					mu.Lock()
					o.OnImages(db.N)
					mu.Unlock()
				}
				db.Release()
			}
		})
	}
	if err := g.Wait(); err != nil {
		x.cancel(err)
		return EpochStats{}, err
	}
	if err := x.Close(); err != nil {
		return EpochStats{}, err
	}
	s, ds := x.Stats()
	s.Devices = ds
	return s, nil
}

// warmAhead starts warming, on one goroutine of a pond group, the cache
// epochs that the epochs after the current one will read, up to the
// cache's ahead= setting and the run's last epoch. The returned function
// stops it and waits for it, so it never outlives Run. Warming is best
// effort: an error only stops it (the epochs then compute what they miss
// themselves).
func (e *Engine) warmAhead(ctx context.Context, first, epochs int) func() {
	c := e.s.Cache
	if c == nil || c.Ahead() == 0 || !c.Writable() || !c.Ordered() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	pool := pond.NewPool(1)
	pool.NewGroupContext(ctx).SubmitErr(func() error {
		for n := first + 1; n < first+epochs && n <= first+c.Ahead(); n++ {
			if n >= c.Distinct() && c.Epoch(n) < first {
				break // echoed epochs are already there
			}
			if _, err := c.Warm(ctx, c.Epoch(n), 1, 1, e.newCompute, nil); err != nil {
				return err
			}
		}
		return nil
	})
	return func() { cancel(); pool.StopAndWait() }
}

// newCompute returns a function that computes cache entries with scratch
// of its own, for one goroutine.
func (e *Engine) newCompute() cache.ComputeFunc { return e.newWorker().compute }

// WarmWorkers is the workers a Warm runs: the engine's worker count, but
// under workers=auto the most the tuner allows (the cores, or fewer where
// the memory budget says so), as a warm has no consumer to wait for.
func (e *Engine) WarmWorkers() int {
	if e.autoWorkers() {
		return e.tune.slabLimit() - extraSlabs - e.held
	}
	return e.Workers()
}

// Warm fills the cache for cache epochs [0, epochs) (every distinct epoch
// the cache has when epochs is 0 or more), computing only shards that are
// missing, so an interrupted warm resumes where it stopped. It runs
// WarmWorkers workers; a failure or a panic in any worker fails the warm.
func (e *Engine) Warm(ctx context.Context, epochs int, progress func(cache.WarmProgress)) (cache.WarmProgress, error) {
	c := e.s.Cache
	if c == nil {
		return cache.WarmProgress{}, errors.New("pipe: the pipeline has no cache stage to warm")
	}
	if epochs <= 0 || epochs > c.Distinct() {
		epochs = c.Distinct()
	}
	return c.Warm(ctx, 0, epochs, e.WarmWorkers(), e.newCompute, progress)
}

// Checksum hashes the output of an epoch with 64-bit xxHash: every data byte
// in order, and every label (little-endian int32) in order, as two streams
// combined at the end; with a fields stage, a third stream holds each
// sample's fields in order (each region's values, then its count). It is
// fast enough to run beside the pipeline, any changed byte or reordering
// changes it, and it does not depend on how the stream is cut into batches
// or into per-device slices.
type Checksum struct {
	data, labels, fields *xxhash.Digest
	hasFields            bool
}

// NewChecksum returns an empty checksum.
func NewChecksum() *Checksum {
	return &Checksum{data: xxhash.New(), labels: xxhash.New(), fields: xxhash.New()}
}

// Add hashes a batch.
func (c *Checksum) Add(b *Batch) {
	c.AddSamples(b.Data, b.Labels)
	c.addFields(b.N, b.Fields, b.Regions)
}

// addFields hashes the fields of n consecutive samples, laid out in mem
// by regions: each sample's values in every region, then its count.
func (c *Checksum) addFields(n int, mem []byte, regions []fields.Region) {
	if len(regions) == 0 {
		return
	}
	c.hasFields = true
	for i := range n {
		for _, r := range regions {
			k := r.SampleBytes()
			c.fields.Write(mem[r.Offset+i*k : r.Offset+(i+1)*k])
			if r.Counts >= 0 {
				c.fields.Write(mem[r.Counts+4*i : r.Counts+4*i+4])
			}
		}
	}
}

// AddSamples hashes the data bytes and labels of consecutive samples.
func (c *Checksum) AddSamples(data []byte, labels []int32) {
	c.data.Write(data)
	if len(labels) > 0 {
		c.labels.Write(unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 4*len(labels)))
	}
}

// String is the hash in hex.
func (c *Checksum) String() string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:8], c.data.Sum64())
	binary.BigEndian.PutUint64(b[8:], c.labels.Sum64())
	if !c.hasFields {
		return fmt.Sprintf("%016x", xxhash.Sum64(b[:16]))
	}
	binary.BigEndian.PutUint64(b[16:], c.fields.Sum64())
	return fmt.Sprintf("%016x", xxhash.Sum64(b[:]))
}

// Augmented returns the image the pipeline makes for the sample at position
// i of epoch n's plan, before it is written as a tensor, with its label and
// global index: what a batch holds, as a picture. It is meant for previews
// and debugging, not for throughput.
func (e *Engine) Augmented(n, i int) (img *transform.Image, label, index int, err error) {
	img, _, label, index, err = e.augmented(n, i)
	return img, label, index, err
}

// AugmentedFields is Augmented with the sample's mask and boxes as the
// pipeline moves them (nil where it has neither), for previews.
func (e *Engine) AugmentedFields(n, i int) (img *transform.Image, f *transform.Fields, label, index int, err error) {
	return e.augmented(n, i)
}

func (e *Engine) augmented(n, i int) (*transform.Image, *transform.Fields, int, int, error) {
	s := &e.s
	if i < 0 || i >= s.Plan.Len() {
		return nil, nil, 0, 0, fmt.Errorf("pipe: position %d outside the epoch's %d samples", i, s.Plan.Len())
	}
	index := s.Plan.At(e.planEpoch(n), i)
	var rec source.Record
	if err := s.Source.Read(index, &rec); err != nil {
		return nil, nil, 0, 0, err
	}
	w := e.newWorker()
	defer w.dec.Release()
	f, err := w.moving(s, &e.fl, &rec)
	if err != nil {
		return nil, nil, 0, 0, &source.RecordError{File: rec.Path, Index: index, Err: err}
	}
	var out *transform.Image
	if c := s.Cache; c != nil {
		// As a cached pipeline computes it: the stages before the cache
		// for the cache epoch, then the rest.
		ce := c.Epoch(n)
		mid, err := apply(w.pre, w.dec, &w.img, index, &rec, transform.NewRand(s.Seed, ce, int64(index)), f)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		mid = &transform.Image{Pix: append([]byte(nil), mid.Pix...), C: mid.C, H: mid.H, W: mid.W}
		if f != nil {
			f.Mask.Pix = append([]byte(nil), f.Mask.Pix...)
		}
		if out, err = runChain(w.chain, w.dec, mid, nil, c.PostRand(s.Seed, n, ce, index, w.pre.Rand().State()), nil, f); err != nil {
			return nil, nil, 0, 0, &source.RecordError{File: rec.Path, Index: index, Err: err}
		}
	} else if out, err = apply(w.chain, w.dec, &w.img, index, &rec, transform.NewRand(s.Seed, n, int64(index)), f); err != nil {
		return nil, nil, 0, 0, err
	}
	cp := &transform.Image{Pix: append([]byte(nil), out.Pix...), C: out.C, H: out.H, W: out.W}
	if f != nil {
		f = &transform.Fields{Mask: f.Mask, Boxes: append([]transform.Box(nil), f.Boxes...), HasBoxes: f.HasBoxes}
		f.Mask.Pix = append([]byte(nil), f.Mask.Pix...)
	}
	return cp, f, rec.Label, index, nil
}
