//go:build linux

package emu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Stream is a non-blocking CUDA stream: its own goroutine runs its
// operations in the order they were queued, after a random pause before
// each (Config.MaxDelay), so operations on different streams interleave in
// any order unless events order them. Copies touch host memory when they
// run, not when they are queued. (The legacy default stream is not
// emulated: pipe makes every stream with CU_STREAM_NON_BLOCKING.)
type Stream struct {
	ctx *Context
	id  int
	rng rng
	// launches counts the kernels launched, for their seeds.
	launches uint64

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []streamOp
	queued uint64 // operations ever queued
	done   uint64 // operations finished
	closed bool
	exited chan struct{}
}

// streamOp is one queued operation: run does the work (skipped once the
// context has a sticky error); after runs in any case (events complete);
// release undoes what queuing counted.
type streamOp struct {
	run     func() *Error
	after   func()
	release func()
}

// StreamCreate is cuStreamCreate(CU_STREAM_NON_BLOCKING) in the current
// context.
func (d *Driver) StreamCreate() (*Stream, error) {
	c, err := d.ctx("cuStreamCreate")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.created++
	s := &Stream{ctx: c, id: c.created, exited: make(chan struct{}),
		rng: newRNG(mix(d.cfg.Seed ^ uint64(c.dev.ord)<<48 ^ uint64(c.gen)<<32 ^ uint64(c.created)))}
	s.cond = sync.NewCond(&s.mu)
	c.streams[s] = true
	c.mu.Unlock()
	go s.loop()
	return s, nil
}

func (s *Stream) String() string { return fmt.Sprintf("stream %d of cuda:%d", s.id, s.ctx.dev.ord) }

func (s *Stream) loop() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		o := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.pause()
		if o.run != nil && s.ctx.stickyErr() == nil {
			if err := o.run(); err != nil {
				s.ctx.fail(err)
			}
		}
		if o.after != nil {
			o.after()
		}
		if o.release != nil {
			o.release()
		}
		s.mu.Lock()
		s.done++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// pause waits a random while: one operation in eight waits up to
// MaxDelay, half the others yield the processor.
func (s *Stream) pause() {
	max := s.ctx.d.cfg.MaxDelay
	if max <= 0 {
		return
	}
	switch v := s.rng.next(); {
	case v%8 == 0:
		time.Sleep(time.Duration((v >> 8) % uint64(max)))
	case v%2 == 0:
		runtime.Gosched()
	}
}

// enqueue queues o on s, which must belong to the calling thread's
// context.
func (s *Stream) enqueue(call string, o streamOp) error {
	c, err := s.ctx.d.ctx(call)
	if err == nil && c != s.ctx {
		err = errorf(ErrInvalidHandle, "%s: %s belongs to another context than the thread's current one (cuda:%d)", call, s, c.dev.ord)
	}
	if err != nil {
		if o.release != nil {
			o.release()
		}
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if o.release != nil {
			o.release()
		}
		return errorf(ErrInvalidHandle, "%s: %s is destroyed", call, s)
	}
	s.queue = append(s.queue, o)
	s.queued++
	s.cond.Broadcast()
	return nil
}

// Synchronize is cuStreamSynchronize: it waits for the operations queued
// so far and returns the context's sticky error, if any.
func (s *Stream) Synchronize() error {
	if _, err := s.ctx.d.ctx("cuStreamSynchronize"); err != nil {
		return err
	}
	s.mu.Lock()
	target := s.queued
	for s.done < target {
		s.cond.Wait()
	}
	s.mu.Unlock()
	return s.ctx.usable("cuStreamSynchronize")
}

// Destroy is cuStreamDestroy: the queued work finishes, then the stream
// goes.
func (s *Stream) Destroy() error {
	if _, err := s.ctx.d.ctx("cuStreamDestroy"); err != nil {
		return err
	}
	s.ctx.mu.Lock()
	live := s.ctx.streams[s]
	delete(s.ctx.streams, s)
	s.ctx.mu.Unlock()
	if !live {
		return errorf(ErrInvalidHandle, "cuStreamDestroy: %s is destroyed already", s)
	}
	s.shut()
	return nil
}

// shut finishes the queued work and stops the goroutine.
func (s *Stream) shut() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.exited
}

// hold counts a queued operation against allocations and pinned host
// memory, so they are not freed under it; the returned function releases
// them.
func (d *Driver) hold(allocs []*allocation, host []byte) func() {
	for _, a := range allocs {
		a.pending.Add(1)
	}
	d.pin(host, 1)
	return func() {
		for _, a := range allocs {
			a.pending.Add(-1)
		}
		d.pin(host, -1)
	}
}

// CopyHtoDAsync is cuMemcpyHtoDAsync: src is read when the copy runs, so
// it must stay unchanged until the stream has passed it.
func (d *Driver) CopyHtoDAsync(dst Ptr, src []byte, s *Stream) error {
	if len(src) == 0 {
		return nil
	}
	a, err := d.devSpan("cuMemcpyHtoDAsync", dst, int64(len(src)), nil)
	if err != nil {
		return err
	}
	off := uint64(dst) - a.base
	return s.enqueue("cuMemcpyHtoDAsync", streamOp{release: d.hold([]*allocation{a}, src), run: func() *Error {
		copy(a.mem[off:], src)
		return nil
	}})
}

// CopyDtoHAsync is cuMemcpyDtoHAsync: dst is written when the copy runs.
func (d *Driver) CopyDtoHAsync(dst []byte, src Ptr, s *Stream) error {
	if len(dst) == 0 {
		return nil
	}
	a, err := d.devSpan("cuMemcpyDtoHAsync", src, int64(len(dst)), nil)
	if err != nil {
		return err
	}
	off := uint64(src) - a.base
	return s.enqueue("cuMemcpyDtoHAsync", streamOp{release: d.hold([]*allocation{a}, dst), run: func() *Error {
		copy(dst, a.mem[off:])
		return nil
	}})
}

// CopyDtoDAsync is cuMemcpyDtoDAsync, between any devices' memory.
func (d *Driver) CopyDtoDAsync(dst, src Ptr, n int64, s *Stream) error {
	return d.copyDevice("cuMemcpyDtoDAsync", dst, nil, src, nil, n, s)
}

// CopyPeerAsync is cuMemcpyPeerAsync: n bytes from src in srcCtx's GPU to
// dst in dstCtx's.
func (d *Driver) CopyPeerAsync(dst Ptr, dstCtx *Context, src Ptr, srcCtx *Context, n int64, s *Stream) error {
	return d.copyDevice("cuMemcpyPeerAsync", dst, dstCtx, src, srcCtx, n, s)
}

func (d *Driver) copyDevice(call string, dst Ptr, dstCtx *Context, src Ptr, srcCtx *Context, n int64, s *Stream) error {
	if n == 0 {
		return nil
	}
	for _, c := range []*Context{dstCtx, srcCtx} {
		if c != nil {
			if err := c.usable(call); err != nil {
				return err
			}
		}
	}
	da, err := d.devSpan(call, dst, n, dstCtx)
	if err != nil {
		return err
	}
	sa, err := d.devSpan(call, src, n, srcCtx)
	if err != nil {
		return err
	}
	doff, soff := uint64(dst)-da.base, uint64(src)-sa.base
	return s.enqueue(call, streamOp{release: d.hold([]*allocation{da, sa}, nil), run: func() *Error {
		copy(da.mem[doff:doff+uint64(n)], sa.mem[soff:soff+uint64(n)])
		return nil
	}})
}

// CopyHtoD is cuMemcpyHtoD: synchronous, on the legacy default stream,
// which (all of pipe's streams being non-blocking) waits for no stream.
func (d *Driver) CopyHtoD(dst Ptr, src []byte) error {
	if _, err := d.ctx("cuMemcpyHtoD"); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	a, err := d.devSpan("cuMemcpyHtoD", dst, int64(len(src)), nil)
	if err != nil {
		return err
	}
	copy(a.mem[uint64(dst)-a.base:], src)
	return nil
}

// CopyDtoH is cuMemcpyDtoH: synchronous, waiting for no stream (see
// CopyHtoD).
func (d *Driver) CopyDtoH(dst []byte, src Ptr) error {
	if _, err := d.ctx("cuMemcpyDtoH"); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	a, err := d.devSpan("cuMemcpyDtoH", src, int64(len(dst)), nil)
	if err != nil {
		return err
	}
	copy(dst, a.mem[uint64(src)-a.base:])
	return nil
}

// MemsetD32Async is cuMemsetD32Async: n 32-bit words of v from p.
func (d *Driver) MemsetD32Async(p Ptr, v uint32, n int64, s *Stream) error {
	if n == 0 {
		return nil
	}
	if p%4 != 0 {
		return errorf(ErrInvalidValue, "cuMemsetD32Async: %#x is not 4-byte aligned", uint64(p))
	}
	a, err := d.devSpan("cuMemsetD32Async", p, 4*n, nil)
	if err != nil {
		return err
	}
	off := uint64(p) - a.base
	return s.enqueue("cuMemsetD32Async", streamOp{release: d.hold([]*allocation{a}, nil), run: func() *Error {
		m := a.mem[off : off+4*uint64(n)]
		for i := 0; i < len(m); i += 4 {
			binary.LittleEndian.PutUint32(m[i:], v)
		}
		return nil
	}})
}

// Event is a CUDA event: Record queues a marker on a stream, and the
// event completes when the stream reaches it.
type Event struct {
	ctx *Context

	mu        sync.Mutex
	cond      *sync.Cond
	recorded  uint64 // records queued
	completed uint64 // the latest record the stream has reached
	at        time.Time
	destroyed bool
}

// EventCreate is cuEventCreate in the current context (with timing).
func (d *Driver) EventCreate() (*Event, error) {
	c, err := d.ctx("cuEventCreate")
	if err != nil {
		return nil, err
	}
	e := &Event{ctx: c}
	e.cond = sync.NewCond(&e.mu)
	return e, nil
}

func (e *Event) check(call string) error {
	if _, err := e.ctx.d.ctx(call); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return errorf(ErrInvalidHandle, "%s: the event is destroyed", call)
	}
	return nil
}

// Record is cuEventRecord: the event completes when s reaches this point.
func (e *Event) Record(s *Stream) error {
	if err := e.check("cuEventRecord"); err != nil {
		return err
	}
	if s.ctx != e.ctx {
		return errorf(ErrInvalidHandle, "cuEventRecord: the event belongs to cuda:%d, %s to another context", e.ctx.dev.ord, s)
	}
	e.mu.Lock()
	e.recorded++
	n := e.recorded
	e.mu.Unlock()
	return s.enqueue("cuEventRecord", streamOp{after: func() {
		e.mu.Lock()
		if n > e.completed {
			e.completed, e.at = n, time.Now()
		}
		e.cond.Broadcast()
		e.mu.Unlock()
	}})
}

// Query is cuEventQuery: nil once the latest record completed (or when
// never recorded), ErrNotReady before.
func (e *Event) Query() error {
	if err := e.check("cuEventQuery"); err != nil {
		return err
	}
	e.mu.Lock()
	done := e.completed >= e.recorded
	e.mu.Unlock()
	if !done {
		return ErrNotReady
	}
	return e.ctx.usable("cuEventQuery")
}

// Synchronize is cuEventSynchronize: it waits for the latest record.
func (e *Event) Synchronize() error {
	if err := e.check("cuEventSynchronize"); err != nil {
		return err
	}
	e.mu.Lock()
	target := e.recorded
	for e.completed < target {
		e.cond.Wait()
	}
	e.mu.Unlock()
	return e.ctx.usable("cuEventSynchronize")
}

// Elapsed is cuEventElapsedTime: milliseconds from start's completion to
// end's (the emulator's clock, not a GPU's).
func Elapsed(start, end *Event) (float32, error) {
	for _, e := range []*Event{start, end} {
		if err := e.check("cuEventElapsedTime"); err != nil {
			return 0, err
		}
	}
	start.mu.Lock()
	t0, ok0 := start.at, start.completed >= start.recorded && start.recorded > 0
	start.mu.Unlock()
	end.mu.Lock()
	t1, ok1 := end.at, end.completed >= end.recorded && end.recorded > 0
	end.mu.Unlock()
	if !ok0 || !ok1 {
		return 0, errorf(ErrNotReady, "cuEventElapsedTime: an event has not completed its record")
	}
	return float32(t1.Sub(t0).Seconds() * 1e3), nil
}

// Destroy is cuEventDestroy.
func (e *Event) Destroy() error {
	if err := e.check("cuEventDestroy"); err != nil {
		return err
	}
	e.mu.Lock()
	e.destroyed = true
	e.mu.Unlock()
	return nil
}

// WaitEvent is cuStreamWaitEvent: work queued on s after this call waits
// until e's latest record (at the time of the call) completes.
func (s *Stream) WaitEvent(e *Event) error {
	if err := e.check("cuStreamWaitEvent"); err != nil {
		return err
	}
	e.mu.Lock()
	n := e.recorded
	e.mu.Unlock()
	return s.enqueue("cuStreamWaitEvent", streamOp{after: func() {
		e.mu.Lock()
		for e.completed < n {
			e.cond.Wait()
		}
		e.mu.Unlock()
	}})
}
