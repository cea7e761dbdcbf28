//go:build cuda && !cudaemu

package cuda

/*
#cgo LDFLAGS: -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// Emulated reports that this build's GPUs are emulated (the cudaemu tag).
const Emulated = false

// Seed returns false: the real driver has no emulator seed.
func Seed() (uint64, bool) { return 0, false }

// Instructions returns false: the real driver counts no instructions.
func Instructions() (uint64, bool) { return 0, false }

// DeviceCount returns the number of GPUs the driver sees.
func DeviceCount() (int, error) { return cu.NumDevices() }

// Context is a GPU's primary context.
type Context struct {
	ordinal int
	dev     cu.Device
	ctx     cu.CUContext
}

// contexts maps the driver's contexts to pipe's, for Current.
var contexts sync.Map // cu.CUContext → int

// RetainPrimary retains GPU ordinal's primary context (the one the CUDA
// runtime, and so PyTorch, uses); Release gives it back.
func RetainPrimary(ordinal int) (*Context, error) {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, err
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, err
	}
	contexts.Store(ctx, ordinal)
	return &Context{ordinal: ordinal, dev: dev, ctx: ctx}, nil
}

// Release releases the primary context; the last release destroys it.
func (c *Context) Release() error { return c.dev.ReleasePrimaryCtx() }

// SetCurrent makes c the calling OS thread's context (nil for none).
func SetCurrent(c *Context) error {
	if c == nil {
		return cu.SetCurrentContext(cu.CUContext{})
	}
	return cu.SetCurrentContext(c.ctx)
}

// Current returns the calling OS thread's GPU ordinal, false when no
// context is current.
func Current() (int, bool) {
	ctx, err := cu.CurrentContext()
	if err != nil || ctx == (cu.CUContext{}) {
		return 0, false
	}
	o, ok := contexts.Load(ctx)
	if !ok {
		return 0, false
	}
	return o.(int), true
}

// MemAlloc allocates device memory in the current context.
func MemAlloc(bytes int64) (DevicePtr, error) {
	p, err := cu.MemAlloc(bytes)
	return DevicePtr(p), err
}

// MemFree frees device memory.
func MemFree(p DevicePtr) error { return cu.MemFree(cu.DevicePtr(p)) }

// MemsetD32Async sets n 32-bit words from p to v, in stream order.
func MemsetD32Async(p DevicePtr, v uint32, n int64, s *Stream) error {
	return cu.MemsetD32Async(cu.DevicePtr(p), uint(v), n, s.s)
}

func host(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// CopyHtoDAsync copies src to dst in stream order. src is read when the
// copy runs: it must stay alive and unchanged until the stream has passed
// the copy.
func CopyHtoDAsync(dst DevicePtr, src []byte, s *Stream) error {
	if len(src) == 0 {
		return nil
	}
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), host(src), int64(len(src)), s.s)
}

// CopyDtoHAsync copies len(dst) bytes from src in stream order; dst holds
// them once the stream has passed the copy.
func CopyDtoHAsync(dst []byte, src DevicePtr, s *Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return cu.MemcpyDtoHAsync(host(dst), cu.DevicePtr(src), int64(len(dst)), s.s)
}

// CopyDtoH copies len(dst) bytes from src, synchronously. It does not wait
// for any stream (streams are non-blocking).
func CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return cu.MemcpyDtoH(host(dst), cu.DevicePtr(src), int64(len(dst)))
}

// CopyDtoDAsync copies n bytes between device addresses, in stream order.
func CopyDtoDAsync(dst, src DevicePtr, n int64, s *Stream) error {
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), n, s.s)
}

// CopyPeerAsync copies n bytes from src in srcCtx's GPU to dst in dstCtx's,
// in stream order.
func CopyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s *Stream) error {
	return cu.MemcpyPeerAsync(cu.DevicePtr(dst), dstCtx.ctx, cu.DevicePtr(src), srcCtx.ctx, n, s.s)
}

// MemHostAlloc returns n bytes of page-locked host memory, usable by
// every context (CU_MEMHOSTALLOC_PORTABLE), outside the Go heap. A context
// must be current. (cu leaves cuMemHostAlloc out, so it is called here.)
func MemHostAlloc(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	var p unsafe.Pointer
	if r := C.cuMemHostAlloc(&p, C.size_t(n), C.CU_MEMHOSTALLOC_PORTABLE); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemHostAlloc of %d bytes: CUDA error %d", n, int(r))
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// MemFreeHost frees memory from MemHostAlloc. A context must be current.
func MemFreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if r := C.cuMemFreeHost(host(b)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuMemFreeHost: CUDA error %d", int(r))
	}
	return nil
}

// Stream is a non-blocking stream: its work runs in order, and in any
// order against other streams' unless events order them.
type Stream struct{ s cu.Stream }

// NewStream makes a non-blocking stream in the current context.
func NewStream() (*Stream, error) {
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return nil, err
	}
	return &Stream{s}, nil
}

// Synchronize waits for the stream's work, returning the first failure of
// any work in the context (failures are sticky).
func (s *Stream) Synchronize() error { return s.s.Synchronize() }

// WaitEvent makes work queued on s after it wait for e's last record.
func (s *Stream) WaitEvent(e *Event) error { return s.s.Wait(e.e, 0) }

// Destroy finishes the stream's work and destroys it.
func (s *Stream) Destroy() error { return s.s.Destroy() }

// Event marks a point in a stream (blocking synchronisation, timing).
type Event struct{ e cu.Event }

// NewEvent makes an event in the current context. Its Synchronize sleeps
// rather than spins (CU_EVENT_BLOCKING_SYNC).
func NewEvent() (*Event, error) {
	e, err := cu.MakeEvent(cu.BlockingSyncEvent)
	if err != nil {
		return nil, err
	}
	return &Event{e}, nil
}

// Record marks the current end of s's work.
func (e *Event) Record(s *Stream) error { return e.e.Record(s.s) }

// Done reports whether the event's last record has completed.
func (e *Event) Done() (bool, error) {
	err := e.e.Query()
	if err == cu.NotReady {
		return false, nil
	}
	return err == nil, err
}

// Synchronize waits for the event's last record.
func (e *Event) Synchronize() error { return e.e.Synchronize() }

// Destroy destroys the event.
func (e *Event) Destroy() error { return cu.DestroyEvent(&e.e) }

func elapsed(start, end *Event) (float64, error) { return start.e.Elapsed(end.e) }

// Module is PTX loaded into a context.
type Module struct {
	name string
	m    cu.Module
}

// LoadModule loads PTX text into the current context (the driver compiles
// it for the GPU); name (a file name) is how errors refer to it.
func LoadModule(name, ptx string) (*Module, error) {
	m, err := cu.LoadData(ptx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Module{name: name, m: m}, nil
}

// Function returns the module's kernel name.
func (m *Module) Function(name string) (*Function, error) {
	f, err := m.m.Function(name)
	if err != nil {
		return nil, fmt.Errorf("%s: kernel %s: %w", m.name, name, err)
	}
	return &Function{name: name, f: f}, nil
}

// Unload unloads the module.
func (m *Module) Unload() error { return m.m.Unload() }

// Function is a kernel.
type Function struct {
	name string
	f    cu.Function
}

// Launch queues the kernel on s with grid blocks of block threads and
// sharedBytes of dynamic shared memory. Arguments are typed: DevicePtr for
// a pointer, int64 or uint64 for a long long, int32, uint32, int (a C int,
// which it must fit) or bool (0 or 1) for an int, float32 for a float,
// float64 for a double. Each goes in an eight-byte slot of its own, from
// which the driver reads as many low bytes as the parameter has.
func (f *Function) Launch(grid, block Dim3, sharedBytes int, s *Stream, args ...any) error {
	a, err := marshal(args)
	if err != nil {
		return fmt.Errorf("launching %s: %w", f.name, err)
	}
	slots := make([]uint64, len(a))
	params := make([]unsafe.Pointer, len(a))
	for i, v := range a {
		switch x := v.(type) {
		case DevicePtr:
			slots[i] = uint64(x)
		case int32:
			slots[i] = uint64(uint32(x))
		case uint32:
			slots[i] = uint64(x)
		case int64:
			slots[i] = uint64(x)
		case uint64:
			slots[i] = x
		case float32:
			slots[i] = uint64(math.Float32bits(x))
		case float64:
			slots[i] = math.Float64bits(x)
		}
		params[i] = unsafe.Pointer(&slots[i])
	}
	return f.f.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes, s.s, params)
}
