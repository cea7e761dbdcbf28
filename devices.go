package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipefeed/pipe/prefetch"
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
var ErrNoCUDA = errors.New("GPU devices need the cuda build (go build -tags cuda, on a machine with the CUDA driver)")

// parseDevices returns how many simulated CPU devices a spec asks for.
func parseDevices(spec string) (int, error) {
	if spec == "" {
		return 1, nil
	}
	if rest, ok := strings.CutPrefix(spec, "cpu:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 64 {
			return 0, fmt.Errorf("devices=%s: want cpu:N with 1 ≤ N ≤ 64", spec)
		}
		return n, nil
	}
	if spec == "all" || strings.HasPrefix(spec, "cuda:") {
		return 0, fmt.Errorf("devices=%s: %w", spec, ErrNoCUDA)
	}
	return 0, fmt.Errorf("devices=%s: want cpu:N, all, or cuda:I,J,...", spec)
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
		n, err := parseDevices(c.Devices)
		if err != nil {
			return err
		}
		if !b.afterBatch {
			return errors.New("prefetch moves batches: it comes after batch (and to_tensor)")
		}
		cfg := c
		b.p.prefetch, b.p.devices = &cfg, n
		return nil
	}}
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

// DeviceKind names the kind of the pipeline's devices ("cpu" for the
// simulated ones).
func (p *Pipeline) DeviceKind() string { return "cpu" }

// DeviceBatch is one device's slice of a global batch, in device memory. It
// is valid until Release.
type DeviceBatch struct {
	// Epoch and Index place the global batch this slice belongs to.
	Epoch, Index int
	// Device is the device number, Name its name.
	Device int
	Name   string
	// N is the number of samples: the global batch's N / devices.
	N int
	// Buffer is the device memory holding the N samples, in the pipeline's
	// layout and dtype; Labels and Samples are host copies.
	Buffer  prefetch.Buffer
	Labels  []int32
	Samples []int

	owner *DeviceEpoch
	slot  *devSlot
}

// Data returns the samples' bytes where the device memory is host
// addressable (the CPU device), or nil.
func (b *DeviceBatch) Data() []byte {
	h := b.Buffer.Host()
	if h == nil {
		return nil
	}
	return h[:b.N*b.owner.p.tensor.SampleBytes()]
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
	buf     prefetch.Buffer
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
	free    []chan *devSlot
	pending chan pendingHost
	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	failed  atomic.Pointer[error]
	// freeWait is the time the producer waited for a free buffer, per device.
	freeWait []atomic.Int64
	closed   bool
	start    time.Time
}

// DeviceEpoch starts epoch e on the pipeline's devices.
func (p *Pipeline) DeviceEpoch(ctx context.Context, e int) (*DeviceEpoch, error) {
	if p.prefetch == nil {
		return nil, errors.New("pipe: the pipeline has no prefetch stage")
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
	sb := p.tensor.SampleBytes()
	per := p.batch / n
	x := &DeviceEpoch{p: p, host: host, ctx: ctx, cancel: cancel, start: time.Now(),
		// At most slabs-2 host batches wait in pending and one more with
		// the releaser, so the producer's Next always finds a slab free.
		pending:  make(chan pendingHost, max(p.slabs.Len()-2, 1)),
		freeWait: make([]atomic.Int64, n)}
	for d := range n {
		var opts []prefetch.CPUOption
		if p.prefetch.CopyDelay > 0 {
			opts = append(opts, prefetch.WithCopyDelay(p.prefetch.CopyDelay))
		}
		dev := prefetch.NewCPU(d, opts...)
		x.devs = append(x.devs, dev)
		x.queues = append(x.queues, prefetch.NewQueue[*devSlot](p.prefetch.Depth))
		// Depth queued, one being consumed, one being filled.
		free := make(chan *devSlot, p.prefetch.Depth+2)
		for range p.prefetch.Depth + 2 {
			buf, err := dev.Alloc(per * sb)
			if err != nil {
				x.Close()
				return nil, err
			}
			free <- &devSlot{buf: buf, labels: make([]int32, per), samples: make([]int, per)}
		}
		x.free = append(x.free, free)
	}
	x.wg.Add(2)
	go x.produce()
	go x.releaseHost()
	return x, nil
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
		for d := range n {
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
			ev, err := x.devs[d].CopyAsync(slot.buf, hb.Data[lo*sb:hi*sb])
			if err != nil {
				x.free[d] <- slot
				x.pending <- pendingHost{hb, evs}
				x.fail(err)
				return
			}
			evs = append(evs, ev)
			copy(slot.labels, hb.Labels[lo:hi])
			copy(slot.samples, hb.Samples[lo:hi])
			slot.ev = ev
			slot.batch = DeviceBatch{Epoch: hb.Epoch, Index: hb.Index, Device: d, Name: x.devs[d].Name(), N: per,
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
// the last. It waits for the slice's copy to complete.
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
	// StallSeconds is how long this device's consumer waited for data.
	StallSeconds float64 `json:"stall_seconds"`
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
	for d, dev := range x.devs {
		q := x.queues[d].Stats()
		s := DeviceStats{Device: dev.Name(), Batches: q.Items, StallSeconds: q.ConsumerWait.Seconds(),
			ProducerWaitSeconds: (q.ProducerWait + time.Duration(x.freeWait[d].Load())).Seconds()}
		if c, ok := dev.(*prefetch.CPU); ok {
			n, took := c.Copied()
			s.Bytes, s.CopySeconds = n, took.Seconds()
			if took > 0 {
				s.CopyGBps = float64(n) / took.Seconds() / 1e9
			}
		}
		ds = append(ds, s)
	}
	st := x.host.Stats()
	st.Seconds = time.Since(x.start).Seconds()
	if st.Seconds > 0 {
		st.ImagesPerSec = float64(st.Images) / st.Seconds
	}
	return st, ds
}

// Close stops the epoch and waits for everything it started: production,
// copies and the host epoch. Slices not taken are dropped.
func (x *DeviceEpoch) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	x.cancel(context.Canceled) // ends the host epoch, and with it produce
	x.wg.Wait()
	x.host.Close()
	for d, q := range x.queues {
		q.Drain(func(s *devSlot) { x.free[d] <- s })
	}
	for _, dev := range x.devs {
		dev.Close()
	}
	if e := x.failed.Load(); e != nil && !errors.Is(*e, context.Canceled) {
		return *e
	}
	return nil
}
