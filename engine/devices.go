package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/prefetch"
)

// openDevices opens the engine's devices, once; Close closes them.
func (e *Engine) openDevices() error {
	if e.devs != nil {
		return nil
	}
	spec := e.s.Devices
	var devs []prefetch.Device
	fail := func(err error) error {
		for _, d := range devs {
			d.Close()
		}
		return err
	}
	for i := range spec.N() {
		if spec.Open != nil {
			d, err := spec.Open(i)
			if err != nil {
				return fail(fmt.Errorf("device %d: %w", i, err))
			}
			devs = append(devs, d)
			continue
		}
		if len(spec.GPUs) > 0 {
			g, err := prefetch.NewCUDA(spec.GPUs[i])
			if err != nil {
				return fail(err)
			}
			devs = append(devs, g)
			continue
		}
		devs = append(devs, prefetch.NewCPU(i))
	}
	e.devs = devs
	// Each device's buffers live as long as the devices: depth queued, one
	// being consumed, one being filled.
	per := e.rows / len(devs)
	depth, room := spec.Depth, spec.Depth+2
	if e.autoDepth() {
		_, depth = e.tune.current()
		room = MaxDepth + 2
	}
	for _, dev := range devs {
		free := make(chan *devSlot, room)
		for range depth + 2 {
			s, err := e.newSlot(dev, per)
			if err != nil {
				e.closeDevices()
				return err
			}
			free <- s
		}
		e.devFree = append(e.devFree, free)
		slots := new(atomic.Int64)
		slots.Store(int64(depth + 2))
		e.devSlots = append(e.devSlots, slots)
	}
	// Page-locked slabs where the devices offer them: copies from pageable
	// memory are staged by the driver and run at a fraction of the rate.
	if a, ok := devs[0].(prefetch.HostAllocator); ok {
		e.hostAlloc = a
	}
	return nil
}

// closeDevices closes the devices and frees pinned slabs.
func (e *Engine) closeDevices() error {
	var errs []error
	if e.slabs != nil && e.slabs.Pinned() {
		errs = append(errs, e.slabs.Close())
		e.slabs = nil
	}
	for d, free := range e.devFree {
		for range len(free) {
			s := <-free
			errs = append(errs, e.devs[d].Free(s.buf))
			if s.staging != nil {
				errs = append(errs, e.devs[d].Free(s.staging))
			}
			if s.fieldBuf != nil {
				errs = append(errs, e.devs[d].Free(s.fieldBuf))
			}
		}
	}
	for _, d := range e.devs {
		errs = append(errs, d.Close())
	}
	e.devs, e.devFree, e.devSlots, e.hostAlloc = nil, nil, nil, nil
	return errors.Join(errs...)
}

// DeviceBatch is one device's slice of a global batch, in device memory. It
// is valid until Release (and never after the Pipeline is closed).
type DeviceBatch struct {
	// Epoch and Index place the global batch this slice belongs to.
	Epoch, Index int
	// Device is the device number, Name its name.
	Device int
	Name   string
	// N is the number of samples: the global batch's N / devices.
	N int
	// Buffer is the device memory holding the N samples, laid out as the
	// pipeline's Tensor(); Labels and Samples are host copies, and so are
	// Targets, the [N, classes] soft targets of a pipeline that mixes
	// (Spec.Mix; nil without).
	Buffer  prefetch.Buffer
	Labels  []int32
	Samples []int
	Targets []float32
	// Fields and Regions are the slice's fields other than the image and
	// the int label (targets included), in host memory (as Labels), laid
	// out for the slice's samples; nil without a fields or mix stage.
	// Field gives a view. FieldBuffer holds the same bytes in device
	// memory, copied before the images (Next waits for both).
	Fields      []byte
	Regions     []fields.Region
	FieldBuffer prefetch.Buffer

	owner *DeviceEpoch
	slot  *devSlot
}

// Bytes is the size of the slice's samples in Buffer.
func (b *DeviceBatch) Bytes() int { return b.N * b.owner.e.s.Out.SampleBytes() }

// Data returns the samples' bytes where the device memory is host
// addressable (the CPU device), or nil: use CopyTo for a GPU.
func (b *DeviceBatch) Data() []byte {
	h := b.Buffer.Host()
	if h == nil {
		return nil
	}
	return h[:b.Bytes()]
}

// CopyTo copies the samples' bytes from device memory into dst, which must
// hold Bytes(). It waits for the device and is meant for checks, not for
// the hot path.
func (b *DeviceBatch) CopyTo(dst []byte) error {
	if len(dst) < b.Bytes() {
		return fmt.Errorf("pipe: CopyTo of %d bytes into %d", b.Bytes(), len(dst))
	}
	return b.owner.devs[b.Device].Read(dst[:b.Bytes()], b.Buffer)
}

// Release hands the device buffer back for a later batch. Calling it twice
// panics.
func (b *DeviceBatch) Release() {
	x := b.owner
	if x == nil {
		panic("pipe: DeviceBatch released twice")
	}
	b.owner = nil
	x.free[b.Device] <- b.slot
}

// devSlot is a device buffer with the host-side parts of its batch.
type devSlot struct {
	buf prefetch.Buffer
	// staging receives the uint8 slice when normalize runs on the device,
	// which then writes buf.
	staging prefetch.Buffer
	labels  []int32
	samples []int
	// fields holds the slice's fields (host memory), laid out by regions
	// for the slot's samples, and fieldBuf their copy in device memory;
	// nil without a fields or mix stage.
	fields   []byte
	regions  []fields.Region
	fieldBuf prefetch.Buffer
	ev       prefetch.Event
	batch    DeviceBatch
}

// pendingHost is a host batch whose slices are being copied: its slab goes
// back only when every copy from it has completed.
type pendingHost struct {
	b   *Batch
	evs []prefetch.Event
}

// DeviceEpoch streams one epoch to the devices: Next(d) gives device d its
// slices of the global batches, in order. Each device's consumer may run on
// its own goroutine. Close it when done.
type DeviceEpoch struct {
	e       *Engine
	host    *Epoch
	devs    []prefetch.Device
	queues  []*prefetch.Queue[*devSlot]
	free    []chan *devSlot // the engine's
	pending chan pendingHost
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pool    pond.Pool
	group   pond.TaskGroup
	failed  atomic.Pointer[error]
	// freeWait is the time the producer waited for a free buffer, per device.
	freeWait  []atomic.Int64
	copies0   []prefetch.CopyStats
	mu        sync.Mutex
	closing   bool // Close has begun
	producing bool // produce has begun
	start     time.Time
	end       atomic.Int64 // unix nanoseconds, set by Close
	dwin      depthWindow  // depth=auto's window, kept by produce
}

// ErrNoPrefetch is returned by DeviceEpoch for a spec without devices.
var ErrNoPrefetch = errors.New("pipe: the pipeline has no prefetch stage")

// DeviceEpoch starts epoch n on the engine's devices, opening them on
// first use (Close closes them).
func (e *Engine) DeviceEpoch(ctx context.Context, n int) (*DeviceEpoch, error) {
	return e.DeviceEpochFrom(ctx, n, 0)
}

// DeviceEpochFrom is DeviceEpoch from global batch first on (see
// EpochFrom): it resumes an epoch stopped in the middle.
func (e *Engine) DeviceEpochFrom(ctx context.Context, n, first int) (*DeviceEpoch, error) {
	if e.s.Devices == nil {
		return nil, ErrNoPrefetch
	}
	if err := e.openDevices(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	// The host epoch runs under this epoch's context: cancelling it ends the
	// producer's Next.
	host, err := e.EpochFrom(ctx, n, first)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	nd := len(e.devs)
	x := &DeviceEpoch{e: e, host: host, devs: e.devs, free: e.devFree, cancel: cancel, start: time.Now(),
		// At most slabs-2 host batches wait in pending and one more with
		// the releaser, so the producer's Next always finds a slab free.
		pending:  make(chan pendingHost, max(e.slabs.Len()-2, 1)),
		freeWait: make([]atomic.Int64, nd)}
	// Under depth=auto a queue may hold any of the buffers, which bound
	// it: the tuner deepens it by adding buffers.
	qdepth := e.s.Devices.Depth
	if e.autoDepth() {
		qdepth = MaxDepth + 2
		x.dwin = depthWindow{start: x.start, stall: make([]time.Duration, nd), wait: make([]time.Duration, nd)}
	}
	for _, dev := range x.devs {
		x.copies0 = append(x.copies0, dev.Stats())
		x.queues = append(x.queues, prefetch.NewQueue[*devSlot](qdepth))
	}
	// The producer and the releaser: one pond group, whose context ends
	// with a panic in either, and which Close waits for.
	x.pool = pond.NewPool(2)
	x.group = x.pool.NewGroupContext(ctx)
	x.ctx = x.group.Context()
	x.group.SubmitErr(func() error { x.produce(); return nil })
	x.group.SubmitErr(func() error { x.releaseHost(); return nil })
	return x, nil
}

func (e *Engine) newSlot(dev prefetch.Device, per int) (*devSlot, error) {
	s := &devSlot{labels: make([]int32, per), samples: make([]int, per)}
	var err error
	if s.buf, err = dev.Alloc(per * e.s.Out.SampleBytes()); err != nil {
		return nil, err
	}
	if e.s.DevNorm != nil {
		if s.staging, err = dev.Alloc(per * e.s.Host.SampleBytes()); err != nil {
			dev.Free(s.buf)
			return nil, err
		}
	}
	if len(e.fl.regions) > 0 {
		l, err := layoutFields(&e.s, per, 0)
		if err == nil {
			s.regions, s.fields = l.regions, make([]byte, l.bytes)
			s.fieldBuf, err = dev.Alloc(l.bytes)
		}
		if err != nil {
			dev.Free(s.buf)
			if s.staging != nil {
				dev.Free(s.staging)
			}
			return nil, err
		}
	}
	return s, nil
}

func (x *DeviceEpoch) fail(err error) {
	x.failed.CompareAndSwap(nil, &err)
	x.cancel(err)
}

// produce cuts host batches into device slices and starts their copies.
func (x *DeviceEpoch) produce() {
	x.mu.Lock()
	if x.closing {
		x.mu.Unlock()
		return // Close came first and closed pending
	}
	x.producing = true
	x.mu.Unlock()
	defer close(x.pending)
	defer func() {
		for _, q := range x.queues {
			q.Close()
		}
	}()
	n := len(x.devs)
	sb := x.e.s.Host.SampleBytes()
	vals := x.e.s.Host.Shape.Len()
	for {
		hb, err := x.host.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			x.fail(err)
			return
		}
		per := hb.N / n
		evs := make([]prefetch.Event, 0, n)
		for d, dev := range x.devs {
			var slot *devSlot
			select {
			case slot = <-x.free[d]:
			default:
				t := time.Now()
				select {
				case slot = <-x.free[d]:
				case <-x.ctx.Done():
				}
				x.freeWait[d].Add(int64(time.Since(t)))
			}
			if slot == nil {
				x.toRelease(pendingHost{hb, evs})
				return
			}
			lo, hi := d*per, (d+1)*per
			// The fields go first: a device runs its work in order, so
			// the images' event, which Next waits for, follows them.
			copySlice(slot.fields, slot.regions, hb.Fields, hb.Regions, lo, hi)
			var err error
			if slot.fieldBuf != nil {
				_, err = dev.CopyAsync(slot.fieldBuf, slot.fields)
			}
			var ev prefetch.Event
			if err == nil {
				ev, err = x.send(dev, slot, hb.Data[lo*sb:hi*sb], per*vals)
			}
			if ev != nil {
				evs = append(evs, ev)
			}
			if err != nil {
				x.free[d] <- slot
				x.toRelease(pendingHost{hb, evs})
				x.fail(err)
				return
			}
			copy(slot.labels, hb.Labels[lo:hi])
			copy(slot.samples, hb.Samples[lo:hi])
			slot.batch = DeviceBatch{Epoch: hb.Epoch, Index: hb.Index, Device: d, Name: dev.Name(), N: per,
				Buffer: slot.buf, Labels: slot.labels[:per], Samples: slot.samples[:per], Fields: slot.fields, Regions: slot.regions,
				FieldBuffer: slot.fieldBuf}
			if v, ok := slot.batch.Field(fields.Targets); ok {
				slot.batch.Targets, _ = v.Float32()
			}
			if err := x.queues[d].Put(x.ctx, slot); err != nil {
				x.free[d] <- slot
				x.toRelease(pendingHost{hb, evs})
				return
			}
		}
		// The slab goes back once its copies are done; this blocks while
		// the other slabs wait for copies, so Next never finds all held.
		x.toRelease(pendingHost{hb, evs})
		if x.e.autoDepth() {
			if err := x.observeDepth(); err != nil {
				x.fail(err)
				return
			}
		}
	}
}

// send starts a slice's copy, and its conversion where normalize runs on the
// device. It returns the copy's event, which the host slab waits for, and
// sets slot.ev to the event the consumer waits for.
func (x *DeviceEpoch) send(dev prefetch.Device, slot *devSlot, src []byte, vals int) (prefetch.Event, error) {
	if x.e.s.DevNorm == nil {
		ev, err := dev.CopyAsync(slot.buf, src)
		slot.ev = ev
		return ev, err
	}
	ev, err := dev.CopyAsync(slot.staging, src)
	if err != nil {
		return nil, err
	}
	slot.ev, err = dev.NormalizeAsync(slot.buf, slot.staging, vals, x.e.s.DevNorm)
	return ev, err
}

// toRelease hands a host batch to the releaser, or releases it here once
// the epoch is stopping (the releaser may never have started).
func (x *DeviceEpoch) toRelease(ph pendingHost) {
	select {
	case x.pending <- ph:
	case <-x.ctx.Done():
		ph.release()
	}
}

func (ph pendingHost) release() {
	for _, ev := range ph.evs {
		// Wait even when cancelled: the slab must not be reused while
		// a copy still reads it.
		ev.Wait(context.Background())
	}
	ph.b.Release()
}

// releaseHost returns each host slab once every copy from it has completed.
func (x *DeviceEpoch) releaseHost() {
	for ph := range x.pending {
		ph.release()
	}
}

// Next returns device d's next slice, in global batch order, or io.EOF after
// the last. It waits for the slice's copy (and conversion) to complete.
func (x *DeviceEpoch) Next(d int) (*DeviceBatch, error) {
	if d < 0 || d >= len(x.devs) {
		return nil, fmt.Errorf("pipe: device %d of %d", d, len(x.devs))
	}
	// Once the epoch is cancelled or has failed, say so, even if slices are
	// still queued (Close takes them back).
	if x.ctx.Err() != nil {
		if e := x.failed.Load(); e != nil {
			return nil, *e
		}
		return nil, context.Cause(x.ctx)
	}
	slot, ok, err := x.queues[d].Get(x.ctx)
	if err == nil && !ok {
		err = io.EOF
	}
	if err != nil {
		if e := x.failed.Load(); e != nil {
			return nil, *e
		}
		return nil, err
	}
	t := time.Now()
	if err := slot.ev.Wait(x.ctx); err != nil {
		x.free[d] <- slot
		return nil, err
	}
	x.queues[d].AddConsumerWait(time.Since(t))
	b := &slot.batch
	b.owner, b.slot = x, slot
	return b, nil
}

// DeviceStats are one device's figures for an epoch.
type DeviceStats struct {
	Device  string `json:"device"`
	Batches int64  `json:"batches"`
	// StallSeconds is how long this device's consumer waited for data, and
	// StallPct that as a percentage of the epoch.
	StallSeconds float64 `json:"stall_seconds"`
	StallPct     float64 `json:"stall_pct"`
	// ProducerWaitSeconds is how long the producer waited for this
	// device's queue or buffers: time its consumer held production back.
	ProducerWaitSeconds float64 `json:"producer_wait_seconds"`
	Bytes               int64   `json:"bytes"`
	CopySeconds         float64 `json:"copy_seconds"`
	CopyGBps            float64 `json:"copy_gb_per_sec"`
}

// Stats returns the host epoch's figures and each device's.
func (x *DeviceEpoch) Stats() (EpochStats, []DeviceStats) {
	var ds []DeviceStats
	end := time.Now()
	if t := x.end.Load(); t != 0 {
		end = time.Unix(0, t)
	}
	secs := end.Sub(x.start).Seconds()
	for d, dev := range x.devs {
		q := x.queues[d].Stats()
		c := dev.Stats().Sub(x.copies0[d])
		ds = append(ds, DeviceStats{Device: dev.Name(), Batches: q.Items, StallSeconds: q.ConsumerWait.Seconds(),
			ProducerWaitSeconds: (q.ProducerWait + time.Duration(x.freeWait[d].Load())).Seconds(),
			Bytes:               c.Bytes, CopySeconds: c.Time.Seconds(), CopyGBps: c.GBps()})
		if secs > 0 {
			ds[d].StallPct = 100 * ds[d].StallSeconds / secs
		}
	}
	st := x.host.Stats()
	st.Seconds = secs
	if st.Seconds > 0 {
		st.ImagesPerSec = float64(st.Images) / st.Seconds
	}
	return st, ds
}

// Close stops the epoch and waits for everything it started: production,
// copies and the host epoch. Slices not taken are dropped; slices taken
// stay valid until released.
func (x *DeviceEpoch) Close() error {
	x.mu.Lock()
	if x.closing {
		x.mu.Unlock()
		return x.err()
	}
	x.closing = true
	x.end.Store(time.Now().UnixNano())
	if !x.producing {
		close(x.pending) // produce will not start: the releaser must end
	}
	x.mu.Unlock()
	x.cancel(context.Canceled) // ends the host epoch, and with it produce
	if err := x.group.Wait(); errors.Is(err, pond.ErrPanic) {
		x.fail(fmt.Errorf("pipe: device epoch goroutine: %w", err))
	}
	x.pool.StopAndWait()
	for ph := range x.pending { // left by a releaser that never started
		ph.release()
	}
	x.host.Close()
	for d, q := range x.queues {
		q.Drain(func(s *devSlot) { x.free[d] <- s })
	}
	return x.err()
}

// err is the epoch's first failure, other than its cancellation.
func (x *DeviceEpoch) err() error {
	if e := x.failed.Load(); e != nil && !errors.Is(*e, context.Canceled) {
		return *e
	}
	return nil
}

// Stall is how long device d's consumer has waited for data so far.
func (x *DeviceEpoch) Stall(d int) time.Duration { return x.queues[d].Stats().ConsumerWait }
