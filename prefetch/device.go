package prefetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Device is one accelerator, or a simulated one: it owns device memory and
// copies host memory into it asynchronously, in the order copies are asked
// for (one copy stream per device).
type Device interface {
	// Name is the device's name in summaries: "cpu:0", "cuda:1".
	Name() string
	// Alloc returns device memory of n bytes.
	Alloc(n int) (Buffer, error)
	// CopyAsync starts copying src into dst[:len(src)] and returns at once.
	// src must stay unchanged until the returned Event completes: the
	// caller keeps the host slab it points into until then.
	CopyAsync(dst Buffer, src []byte) (Event, error)
	// Close waits for copies in flight and releases the device's
	// resources; buffers must not be used after it.
	Close() error
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

// ErrClosed is returned for work asked of a closed device.
var ErrClosed = errors.New("prefetch: device closed")

// CPU is a simulated device in host memory: Alloc gives separate buffers,
// and CopyAsync copies into them on the device's own goroutine, in order.
// It exercises every queueing, slicing and release path of a real device on
// any machine.
type CPU struct {
	name   string
	delay  time.Duration
	mu     sync.Mutex // guards closed and sends on reqs
	closed bool
	reqs   chan *cpuCopy
	exited chan struct{}
	// copyNanos is the time spent copying, for bandwidth figures.
	copyNanos atomic.Int64
	copied    atomic.Int64
}

// CPUOption configures a CPU device.
type CPUOption func(*CPU)

// WithCopyDelay makes every copy take at least d longer: a slow device, for
// tests of what must wait for copies. Default: 0.
func WithCopyDelay(d time.Duration) CPUOption { return func(c *CPU) { c.delay = d } }

// NewCPU returns simulated device number index. Its copy goroutine runs
// until Close.
func NewCPU(index int, opts ...CPUOption) *CPU {
	c := &CPU{name: fmt.Sprintf("cpu:%d", index), reqs: make(chan *cpuCopy, 64), exited: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	go c.stream()
	return c
}

type cpuBuffer struct{ b []byte }

func (b *cpuBuffer) Len() int     { return len(b.b) }
func (b *cpuBuffer) Host() []byte { return b.b }

type cpuCopy struct {
	dst  []byte
	src  []byte
	done chan struct{}
	err  error
}

func (e *cpuCopy) Wait(ctx context.Context) error {
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *CPU) Name() string { return c.name }

func (c *CPU) Alloc(n int) (Buffer, error) { return &cpuBuffer{b: aligned(n)}, nil }

func (c *CPU) CopyAsync(dst Buffer, src []byte) (Event, error) {
	d, ok := dst.(*cpuBuffer)
	if !ok {
		return nil, fmt.Errorf("prefetch: %s: buffer from another device", c.name)
	}
	if len(src) > len(d.b) {
		return nil, fmt.Errorf("prefetch: %s: copy of %d bytes into a %d-byte buffer", c.name, len(src), len(d.b))
	}
	req := &cpuCopy{dst: d.b, src: src, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.reqs <- req
	return req, nil
}

// stream runs the device's copies in order, like a copy stream, until Close
// (finishing every copy asked for before it).
func (c *CPU) stream() {
	defer close(c.exited)
	for req := range c.reqs {
		c.run(req)
	}
}

func (c *CPU) run(req *cpuCopy) {
	t := time.Now()
	// A slow device waits before it reads the source, so a source reused
	// too early shows up as wrong bytes on the device.
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	copy(req.dst, req.src)
	c.copyNanos.Add(int64(time.Since(t)))
	c.copied.Add(int64(len(req.src)))
	close(req.done)
}

// Close finishes the copies already asked for and stops the copy goroutine.
func (c *CPU) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	<-c.exited
	return nil
}

// Copied reports the bytes copied and the time the copies took.
func (c *CPU) Copied() (int64, time.Duration) {
	return c.copied.Load(), time.Duration(c.copyNanos.Load())
}
