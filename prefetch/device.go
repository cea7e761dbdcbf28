package prefetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"
)

// Device is one accelerator, or a simulated one: it owns device memory and
// works on it asynchronously, in the order work is asked for (one stream
// per device). Its methods may be called from any goroutine.
type Device interface {
	// Name is the device's name in summaries: "cpu:0", "cuda:1".
	Name() string
	// Alloc returns device memory of n bytes.
	Alloc(n int) (Buffer, error)
	// Free releases a buffer from Alloc once the work using it is done.
	Free(b Buffer) error
	// CopyAsync starts copying src into dst[:len(src)] and returns at once.
	// src must stay unchanged until the returned Event completes: the
	// caller keeps the host slab it points into until then.
	CopyAsync(dst Buffer, src []byte) (Event, error)
	// NormalizeAsync converts the first n bytes of src, uint8 values, into
	// n floats in dst with k, after the work asked for before it.
	NormalizeAsync(dst, src Buffer, n int, k *Norm) (Event, error)
	// Read copies the first len(dst) bytes of src into host memory once the
	// work asked for before it is done. It is for checks and checksums, not
	// for the hot path.
	Read(dst []byte, src Buffer) error
	// Stats reports the host-to-device copies made so far.
	Stats() CopyStats
	// Close waits for work in flight and releases the device's resources;
	// buffers must not be used after it.
	Close() error
}

// CopyStats counts a device's host-to-device copies.
type CopyStats struct {
	Bytes int64
	// Time is the time the copies took on the device.
	Time time.Duration
}

// Sub is the copies made since an earlier reading.
func (s CopyStats) Sub(old CopyStats) CopyStats {
	return CopyStats{Bytes: s.Bytes - old.Bytes, Time: s.Time - old.Time}
}

// GBps is the achieved bandwidth in GB/s (0 without copies).
func (s CopyStats) GBps() float64 {
	if s.Time <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Time.Seconds() / 1e9
}

// Buffer is device memory.
type Buffer interface {
	// Len is the buffer's size in bytes.
	Len() int
	// Host returns the buffer's bytes where the device's memory is
	// addressable from the host (the CPU device), or nil.
	Host() []byte
}

// Event is an operation in flight on a device.
type Event interface {
	// Wait blocks until the operation has completed (returning its error)
	// or ctx is done.
	Wait(ctx context.Context) error
}

// HostAllocator is implemented by devices that copy faster from memory they
// allocate themselves (page-locked memory for a GPU). The memory is usable
// with every device of the same kind.
type HostAllocator interface {
	AllocHost(n int) ([]byte, error)
	FreeHost(b []byte) error
}

// ErrClosed is returned for work asked of a closed device.
var ErrClosed = errors.New("prefetch: device closed")

// ErrNoCUDA is returned for GPU devices in a build without the cuda tag.
var ErrNoCUDA = errors.New("GPU devices need the cuda build (go build -tags cuda, on a machine with the CUDA driver)")

// Both twins, cuda.go (the cuda and cudaemu builds) and cuda_off.go,
// define CUDACompiled: a build whose twin lacks it fails here.
const _ = CUDACompiled

// op is an operation on a device's stream; done closes when it completes.
type op struct {
	done chan struct{}
	err  error
}

func newOp() *op { return &op{done: make(chan struct{})} }

func (o *op) Wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// checkCopy checks a copy's sizes against its destination.
func checkCopy(name string, dst Buffer, n int) error {
	if n > dst.Len() {
		return fmt.Errorf("prefetch: %s: copy of %d bytes into a %d-byte buffer", name, n, dst.Len())
	}
	return nil
}

// checkNormalize checks a conversion's sizes against its buffers.
func checkNormalize(name string, dst, src Buffer, n int, k *Norm) error {
	if err := k.check(); err != nil {
		return err
	}
	if n > src.Len() || n*k.outSize() > dst.Len() {
		return fmt.Errorf("prefetch: %s: normalizing %d values from a %d-byte buffer into a %d-byte one", name, n, src.Len(), dst.Len())
	}
	return nil
}

// CPU is a simulated device in host memory: Alloc gives separate buffers,
// and the work asked of it runs on the device's own goroutine, in order.
// It exercises every queueing, slicing and release path of a real device on
// any machine.
type CPU struct {
	name  string
	delay time.Duration
	// stream is the device's stream: a pond pool of one goroutine runs the
	// work in order; each operation's task is its event, and a panic in
	// one comes back as that event's error, with its stack.
	stream pond.Pool
	mu     sync.Mutex // guards closed and submissions to stream
	closed bool
	// copyNanos is the time spent copying, for bandwidth figures.
	copyNanos atomic.Int64
	copied    atomic.Int64
}

// taskEvent is an operation on a CPU device's stream.
type taskEvent struct{ t pond.Task }

func (e taskEvent) Wait(ctx context.Context) error {
	select {
	case <-e.t.Done():
		return e.t.Wait()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// CPUOption configures a CPU device.
type CPUOption func(*CPU)

// WithCopyDelay makes every copy take at least d longer: a slow device, for
// tests of what must wait for copies. Default: 0.
func WithCopyDelay(d time.Duration) CPUOption { return func(c *CPU) { c.delay = d } }

// NewCPU returns simulated device number index. Its stream runs until
// Close; at most 64 operations wait on it before a new one blocks.
func NewCPU(index int, opts ...CPUOption) *CPU {
	c := &CPU{name: fmt.Sprintf("cpu:%d", index), stream: pond.NewPool(1, pond.WithQueueSize(64))}
	for _, o := range opts {
		o(c)
	}
	return c
}

type cpuBuffer struct{ b []byte }

func (b *cpuBuffer) Len() int     { return len(b.b) }
func (b *cpuBuffer) Host() []byte { return b.b }

func (c *CPU) Name() string { return c.name }

func (c *CPU) Alloc(n int) (Buffer, error) { return &cpuBuffer{b: aligned(n)}, nil }

func (c *CPU) Free(b Buffer) error {
	if _, ok := b.(*cpuBuffer); !ok {
		return c.foreign()
	}
	return nil
}

func (c *CPU) foreign() error { return fmt.Errorf("prefetch: %s: buffer from another device", c.name) }

func (c *CPU) CopyAsync(dst Buffer, src []byte) (Event, error) {
	d, ok := dst.(*cpuBuffer)
	if !ok {
		return nil, c.foreign()
	}
	if err := checkCopy(c.name, dst, len(src)); err != nil {
		return nil, err
	}
	return c.enqueue(func() error {
		t := time.Now()
		// A slow device waits before it reads the source, so a source
		// reused too early shows up as wrong bytes on the device.
		if c.delay > 0 {
			time.Sleep(c.delay)
		}
		copy(d.b, src)
		c.copyNanos.Add(int64(time.Since(t)))
		c.copied.Add(int64(len(src)))
		return nil
	})
}

func (c *CPU) NormalizeAsync(dst, src Buffer, n int, k *Norm) (Event, error) {
	d, ok1 := dst.(*cpuBuffer)
	s, ok2 := src.(*cpuBuffer)
	if !ok1 || !ok2 {
		return nil, c.foreign()
	}
	if err := checkNormalize(c.name, dst, src, n, k); err != nil {
		return nil, err
	}
	return c.enqueue(func() error {
		k.Apply(d.b, s.b[:n])
		return nil
	})
}

func (c *CPU) Read(dst []byte, src Buffer) error {
	s, ok := src.(*cpuBuffer)
	if !ok {
		return c.foreign()
	}
	if len(dst) > len(s.b) {
		return fmt.Errorf("prefetch: %s: read of %d bytes from a %d-byte buffer", c.name, len(dst), len(s.b))
	}
	ev, err := c.enqueue(func() error { copy(dst, s.b); return nil })
	if err != nil {
		return err
	}
	return ev.Wait(context.Background())
}

// enqueue puts work on the stream.
func (c *CPU) enqueue(run func() error) (Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	return taskEvent{c.stream.SubmitErr(run)}, nil
}

// Close finishes the work already asked for and stops the stream.
func (c *CPU) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stream.StopAndWait()
	return nil
}

// Stats reports the bytes copied and the time the copies took.
func (c *CPU) Stats() CopyStats {
	return CopyStats{Bytes: c.copied.Load(), Time: time.Duration(c.copyNanos.Load())}
}
