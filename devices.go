package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/transform"
)

// PrefetchConfig configures a prefetch stage.
type PrefetchConfig struct {
	// Depth is how many batches each device's queue holds ahead of its
	// consumer. Default 2.
	Depth int
	// Devices names the devices: "cpu:N" for N simulated devices in host
	// memory (any machine), or "all" / "cuda:0,1" for GPUs (the cuda build).
	// Default "cpu:1".
	Devices string
	// CopyDelay slows every copy of a simulated device, for tests.
	CopyDelay time.Duration
}

// ErrNoCUDA is returned for GPU devices in a build without the cuda tag.
var ErrNoCUDA = prefetch.ErrNoCUDA

// deviceSpec is a parsed devices= setting.
type deviceSpec struct {
	cuda  bool
	cpu   int   // simulated devices
	gpus  []int // CUDA ordinals
	label string
}

func (s deviceSpec) n() int {
	if s.cuda {
		return len(s.gpus)
	}
	return s.cpu
}

// parseDevices parses devices=: cpu:N, all (every GPU the driver sees) or
// cuda:I,J,... In a build without the cuda tag, GPU specs give ErrNoCUDA.
func parseDevices(spec string) (deviceSpec, error) {
	if spec == "" {
		spec = "cpu:1"
	}
	if rest, ok := strings.CutPrefix(spec, "cpu:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 64 {
			return deviceSpec{}, fmt.Errorf("devices=%s: want cpu:N with 1 ≤ N ≤ 64", spec)
		}
		return deviceSpec{cpu: n, label: "cpu"}, nil
	}
	s := deviceSpec{cuda: true, label: "cuda"}
	switch rest, ok := strings.CutPrefix(spec, "cuda:"); {
	case spec == "all":
		n, err := prefetch.CUDADevices()
		if err != nil {
			return deviceSpec{}, fmt.Errorf("devices=%s: %w", spec, err)
		}
		if n == 0 {
			return deviceSpec{}, fmt.Errorf("devices=%s: the CUDA driver sees no GPU", spec)
		}
		for i := range n {
			s.gpus = append(s.gpus, i)
		}
	case ok:
		for _, f := range strings.Split(rest, ",") {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 {
				return deviceSpec{}, fmt.Errorf("devices=%s: %q is not a GPU number (want cuda:0 or cuda:0,1,...)", spec, f)
			}
			if slices.Contains(s.gpus, i) {
				return deviceSpec{}, fmt.Errorf("devices=%s: cuda:%d given twice", spec, i)
			}
			s.gpus = append(s.gpus, i)
		}
		if _, err := prefetch.CUDADevices(); err != nil {
			return deviceSpec{}, fmt.Errorf("devices=%s: %w", spec, err)
		}
	default:
		return deviceSpec{}, fmt.Errorf("devices=%s: want cpu:N, all, or cuda:I,J,...", spec)
	}
	return s, nil
}

// openDevices opens the pipeline's devices, once; Close closes them.
func (p *Pipeline) openDevices() error {
	if p.devs != nil {
		return nil
	}
	s := p.devSpec
	var devs []prefetch.Device
	fail := func(err error) error {
		for _, d := range devs {
			d.Close()
		}
		return err
	}
	for i := range s.n() {
		if s.cuda {
			g, err := prefetch.NewCUDA(s.gpus[i])
			if err != nil {
				return fail(err)
			}
			devs = append(devs, g)
			continue
		}
		var opts []prefetch.CPUOption
		if p.prefetch.CopyDelay > 0 {
			opts = append(opts, prefetch.WithCopyDelay(p.prefetch.CopyDelay))
		}
		devs = append(devs, prefetch.NewCPU(i, opts...))
	}
	p.devs = devs
	// Each device's buffers live as long as the devices: depth queued, one
	// being consumed, one being filled.
	per := p.batch / len(devs)
	for _, dev := range devs {
		free := make(chan *devSlot, p.prefetch.Depth+2)
		for range p.prefetch.Depth + 2 {
			s, err := p.newSlot(dev, per)
			if err != nil {
				p.closeDevices()
				return err
			}
			free <- s
		}
		p.devFree = append(p.devFree, free)
	}
	// Page-locked slabs where the devices offer them: copies from pageable
	// memory are staged by the driver and run at a fraction of the rate.
	if a, ok := devs[0].(prefetch.HostAllocator); ok {
		p.hostAlloc = a
	}
	return nil
}

// closeDevices closes the devices and frees pinned slabs.
func (p *Pipeline) closeDevices() error {
	var errs []error
	if p.slabs != nil && p.slabs.Pinned() {
		errs = append(errs, p.slabs.Close())
		p.slabs = nil
	}
	for d, free := range p.devFree {
		for range len(free) {
			s := <-free
			errs = append(errs, p.devs[d].Free(s.buf))
			if s.staging != nil {
				errs = append(errs, p.devs[d].Free(s.staging))
			}
		}
	}
	for _, d := range p.devs {
		errs = append(errs, d.Close())
	}
	p.devs, p.devFree, p.hostAlloc = nil, nil, nil
	return errors.Join(errs...)
}

// Prefetch sends every global batch to the devices, cut into contiguous,
// equal per-device slices, each copied asynchronously into device memory
// and queued for that device's consumer. It must be the last stage.
func Prefetch(c PrefetchConfig) Stage {
	if c.Depth == 0 {
		c.Depth = 2
	}
	if c.Devices == "" {
		c.Devices = "cpu:1"
	}
	return Stage{name: "prefetch", desc: fmt.Sprintf("prefetch depth=%d devices=%s", c.Depth, c.Devices), apply: func(b *builder) error {
		if c.Depth < 1 {
			return fmt.Errorf("depth=%d: must be at least 1", c.Depth)
		}
		spec, err := parseDevices(c.Devices)
		if err != nil {
			return err
		}
		if !b.afterBatch {
			return errors.New("prefetch moves batches: it comes after batch (and to_tensor)")
		}
		cfg := c
		b.p.prefetch, b.p.devSpec, b.p.devices = &cfg, spec, spec.n()
		return nil
	}}
}

// DeviceNormalize is Normalize run on the devices (the .pipe stage
// "normalize ... where=device"): batches travel as uint8, a quarter of the
// bytes of float32, and each device converts its slice with the same
// arithmetic (prefetch.Norm). It needs a prefetch stage and a float dtype.
func DeviceNormalize(n *transform.Normalization) Stage {
	return Stage{name: "normalize", desc: n.String() + " where=device", apply: func(b *builder) error {
		if b.p.norm != nil {
			return errors.New("normalize given twice")
		}
		b.p.norm, b.p.normOnDevice = n, true
		return nil
	}}
}

// deviceTensor splits the output tensor t for normalize where=device: the
// host writes uint8 in t's layout, and the devices convert it with the
// returned kernel.
func deviceTensor(t *transform.Tensor) (*transform.Tensor, *prefetch.Norm, error) {
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

// checkPrefetch checks that every batch of an epoch divides among the
// devices.
func (p *Pipeline) checkPrefetch() error {
	n := p.devices
	if p.batch%n != 0 {
		return fmt.Errorf("batch %d does not divide into %d devices: use a batch size that is a multiple of %d", p.batch, n, n)
	}
	if last := p.plan.Len() % p.batch; !p.dropLast && last != 0 && last%n != 0 {
		return fmt.Errorf("the last batch of an epoch has %d samples, which does not divide into %d devices: set drop_last=true on batch", last, n)
	}
	return nil
}

// Devices is the number of devices batches go to (1 without a prefetch
// stage).
func (p *Pipeline) Devices() int { return max(p.devices, 1) }

// HasPrefetch reports whether the pipeline ends in a prefetch stage.
func (p *Pipeline) HasPrefetch() bool { return p.prefetch != nil }

// DeviceKind names the kind of the pipeline's devices: "cpu" for the
// simulated ones, "cuda" for GPUs.
func (p *Pipeline) DeviceKind() string { return p.devSpec.label }

// NormalizesOnDevice reports whether normalize runs on the devices, so that
// batches cross to them as uint8 (HostTensor) and become Tensor there.
func (p *Pipeline) NormalizesOnDevice() bool { return p.devNorm != nil }

// HostTensor describes the batches as the host writes them: Tensor, or its
// uint8 form when normalize runs on the devices.
func (p *Pipeline) HostTensor() *transform.Tensor { return p.tensor }

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
	// pipeline's Tensor(); Labels and Samples are host copies.
	Buffer  prefetch.Buffer
	Labels  []int32
	Samples []int

	owner *DeviceEpoch
	slot  *devSlot
}

// Bytes is the size of the slice's samples in Buffer.
func (b *DeviceBatch) Bytes() int { return b.N * b.owner.p.out.SampleBytes() }

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
	ev      prefetch.Event
	batch   DeviceBatch
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
	p       *Pipeline
	host    *Epoch
	devs    []prefetch.Device
	queues  []*prefetch.Queue[*devSlot]
	free    []chan *devSlot // the pipeline's
	pending chan pendingHost
	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	failed  atomic.Pointer[error]
	// freeWait is the time the producer waited for a free buffer, per device.
	freeWait []atomic.Int64
	copies0  []prefetch.CopyStats
	closed   bool
	start    time.Time
	end      time.Time // set by Close
}

// DeviceEpoch starts epoch e on the pipeline's devices, opening them on
// first use (Pipeline.Close closes them).
func (p *Pipeline) DeviceEpoch(ctx context.Context, e int) (*DeviceEpoch, error) {
	if p.prefetch == nil {
		return nil, errors.New("pipe: the pipeline has no prefetch stage")
	}
	if err := p.openDevices(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	// The host epoch runs under this epoch's context: cancelling it ends the
	// producer's Next.
	host, err := p.Epoch(ctx, e)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	n := p.devices
	x := &DeviceEpoch{p: p, host: host, devs: p.devs, free: p.devFree, ctx: ctx, cancel: cancel, start: time.Now(),
		// At most slabs-2 host batches wait in pending and one more with
		// the releaser, so the producer's Next always finds a slab free.
		pending:  make(chan pendingHost, max(p.slabs.Len()-2, 1)),
		freeWait: make([]atomic.Int64, n)}
	for _, dev := range x.devs {
		x.copies0 = append(x.copies0, dev.Stats())
		x.queues = append(x.queues, prefetch.NewQueue[*devSlot](p.prefetch.Depth))
	}
	x.wg.Add(2)
	go x.produce()
	go x.releaseHost()
	return x, nil
}

func (p *Pipeline) newSlot(dev prefetch.Device, per int) (*devSlot, error) {
	s := &devSlot{labels: make([]int32, per), samples: make([]int, per)}
	var err error
	if s.buf, err = dev.Alloc(per * p.out.SampleBytes()); err != nil {
		return nil, err
	}
	if p.devNorm != nil {
		if s.staging, err = dev.Alloc(per * p.tensor.SampleBytes()); err != nil {
			dev.Free(s.buf)
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
	defer x.wg.Done()
	defer close(x.pending)
	defer func() {
		for _, q := range x.queues {
			q.Close()
		}
	}()
	n := len(x.devs)
	sb := x.p.tensor.SampleBytes()
	vals := x.p.tensor.Shape.Len()
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
				x.pending <- pendingHost{hb, evs}
				return
			}
			lo, hi := d*per, (d+1)*per
			ev, err := x.send(dev, slot, hb.Data[lo*sb:hi*sb], per*vals)
			if ev != nil {
				evs = append(evs, ev)
			}
			if err != nil {
				x.free[d] <- slot
				x.pending <- pendingHost{hb, evs}
				x.fail(err)
				return
			}
			copy(slot.labels, hb.Labels[lo:hi])
			copy(slot.samples, hb.Samples[lo:hi])
			slot.batch = DeviceBatch{Epoch: hb.Epoch, Index: hb.Index, Device: d, Name: dev.Name(), N: per,
				Buffer: slot.buf, Labels: slot.labels[:per], Samples: slot.samples[:per]}
			if err := x.queues[d].Put(x.ctx, slot); err != nil {
				x.free[d] <- slot
				x.pending <- pendingHost{hb, evs}
				return
			}
		}
		// The slab goes back once its copies are done; this blocks while
		// the other slabs wait for copies, so Next never finds all held.
		x.pending <- pendingHost{hb, evs}
	}
}

// send starts a slice's copy, and its conversion where normalize runs on the
// device. It returns the copy's event, which the host slab waits for, and
// sets slot.ev to the event the consumer waits for.
func (x *DeviceEpoch) send(dev prefetch.Device, slot *devSlot, src []byte, vals int) (prefetch.Event, error) {
	if x.p.devNorm == nil {
		ev, err := dev.CopyAsync(slot.buf, src)
		slot.ev = ev
		return ev, err
	}
	ev, err := dev.CopyAsync(slot.staging, src)
	if err != nil {
		return nil, err
	}
	slot.ev, err = dev.NormalizeAsync(slot.buf, slot.staging, vals, x.p.devNorm)
	return ev, err
}

// releaseHost returns each host slab once every copy from it has completed.
func (x *DeviceEpoch) releaseHost() {
	defer x.wg.Done()
	for ph := range x.pending {
		for _, ev := range ph.evs {
			// Wait even when cancelled: the slab must not be reused while
			// a copy still reads it.
			ev.Wait(context.Background())
		}
		ph.b.Release()
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
	end := x.end
	if end.IsZero() {
		end = time.Now()
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
	if x.closed {
		return nil
	}
	x.closed, x.end = true, time.Now()
	x.cancel(context.Canceled) // ends the host epoch, and with it produce
	x.wg.Wait()
	x.host.Close()
	for d, q := range x.queues {
		q.Drain(func(s *devSlot) { x.free[d] <- s })
	}
	if e := x.failed.Load(); e != nil && !errors.Is(*e, context.Canceled) {
		return *e
	}
	return nil
}
