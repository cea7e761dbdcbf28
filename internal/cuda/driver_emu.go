//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"sync"

	"github.com/pipefeed/pipe/internal/cuda/emu"
)

// Emulated reports that this build's GPUs are emulated (the cudaemu tag).
const Emulated = true

// driver is the process's emulator, made from the environment on first
// use (emu.ConfigFromEnv).
var driver = sync.OnceValues(func() (*emu.Driver, error) {
	c, err := emu.ConfigFromEnv()
	if err != nil {
		return nil, fmt.Errorf("cuda emulator: %w", err)
	}
	return emu.New(c)
})

// Seed returns the emulator's seed, which repeats its thread orders and
// stream delays (PIPE_CUDAEMU_SEED); false with the real driver.
func Seed() (uint64, bool) {
	d, err := driver()
	if err != nil {
		return 0, false
	}
	return d.Seed(), true
}

// Instructions returns how many PTX instructions the emulator has run in
// this process; false with the real driver.
func Instructions() (uint64, bool) {
	d, err := driver()
	if err != nil {
		return 0, false
	}
	return d.Instructions(), true
}

// DeviceCount returns the number of GPUs.
func DeviceCount() (int, error) {
	d, err := driver()
	if err != nil {
		return 0, err
	}
	return d.DeviceCount(), nil
}

// Context is a GPU's primary context.
type Context struct {
	ordinal int
	c       *emu.Context
}

// RetainPrimary retains GPU ordinal's primary context (the one the CUDA
// runtime, and so PyTorch, uses); Release gives it back.
func RetainPrimary(ordinal int) (*Context, error) {
	d, err := driver()
	if err != nil {
		return nil, err
	}
	c, err := d.RetainPrimary(ordinal)
	if err != nil {
		return nil, err
	}
	return &Context{ordinal: ordinal, c: c}, nil
}

// Release releases the primary context; the last release destroys it.
func (c *Context) Release() error {
	d, _ := driver()
	return d.ReleasePrimary(c.ordinal)
}

// SetCurrent makes c the calling OS thread's context (nil for none).
func SetCurrent(c *Context) error {
	d, err := driver()
	if err != nil {
		return err
	}
	if c == nil {
		return d.SetCurrent(nil)
	}
	return d.SetCurrent(c.c)
}

// Current returns the calling OS thread's GPU ordinal, false when no
// context is current.
func Current() (int, bool) {
	d, err := driver()
	if err != nil {
		return 0, false
	}
	c := d.Current()
	if c == nil {
		return 0, false
	}
	return c.Device(), true
}

func drv() *emu.Driver {
	d, _ := driver() // every caller holds a Context, so the driver started
	return d
}

// MemAlloc allocates device memory in the current context.
func MemAlloc(bytes int64) (DevicePtr, error) {
	p, err := drv().MemAlloc(bytes)
	return DevicePtr(p), err
}

// MemFree frees device memory.
func MemFree(p DevicePtr) error { return drv().MemFree(emu.Ptr(p)) }

// MemsetD32Async sets n 32-bit words from p to v, in stream order.
func MemsetD32Async(p DevicePtr, v uint32, n int64, s *Stream) error {
	return drv().MemsetD32Async(emu.Ptr(p), v, n, s.s)
}

// CopyHtoDAsync copies src to dst in stream order. src is read when the
// copy runs: it must stay alive and unchanged until the stream has passed
// the copy.
func CopyHtoDAsync(dst DevicePtr, src []byte, s *Stream) error {
	return drv().CopyHtoDAsync(emu.Ptr(dst), src, s.s)
}

// CopyDtoHAsync copies len(dst) bytes from src in stream order; dst holds
// them once the stream has passed the copy.
func CopyDtoHAsync(dst []byte, src DevicePtr, s *Stream) error {
	return drv().CopyDtoHAsync(dst, emu.Ptr(src), s.s)
}

// CopyDtoH copies len(dst) bytes from src, synchronously. It does not wait
// for any stream (streams are non-blocking).
func CopyDtoH(dst []byte, src DevicePtr) error { return drv().CopyDtoH(dst, emu.Ptr(src)) }

// CopyDtoDAsync copies n bytes between device addresses, in stream order.
func CopyDtoDAsync(dst, src DevicePtr, n int64, s *Stream) error {
	return drv().CopyDtoDAsync(emu.Ptr(dst), emu.Ptr(src), n, s.s)
}

// CopyPeerAsync copies n bytes from src in srcCtx's GPU to dst in dstCtx's,
// in stream order.
func CopyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s *Stream) error {
	return drv().CopyPeerAsync(emu.Ptr(dst), dstCtx.c, emu.Ptr(src), srcCtx.c, n, s.s)
}

// MemHostAlloc returns n bytes of page-locked host memory, usable by
// every context, outside the Go heap.
func MemHostAlloc(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	return drv().MemHostAlloc(n)
}

// MemFreeHost frees memory from MemHostAlloc.
func MemFreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return drv().MemFreeHost(b)
}

// Stream is a non-blocking stream: its work runs in order, and in any
// order against other streams' unless events order them.
type Stream struct{ s *emu.Stream }

// NewStream makes a non-blocking stream in the current context.
func NewStream() (*Stream, error) {
	s, err := drv().StreamCreate()
	if err != nil {
		return nil, err
	}
	return &Stream{s}, nil
}

// Synchronize waits for the stream's work, returning the first failure of
// any work in the context (failures are sticky).
func (s *Stream) Synchronize() error { return s.s.Synchronize() }

// WaitEvent makes work queued on s after it wait for e's last record.
func (s *Stream) WaitEvent(e *Event) error { return s.s.WaitEvent(e.e) }

// Destroy finishes the stream's work and destroys it.
func (s *Stream) Destroy() error { return s.s.Destroy() }

// Event marks a point in a stream (blocking synchronisation, timing).
type Event struct{ e *emu.Event }

// NewEvent makes an event in the current context.
func NewEvent() (*Event, error) {
	e, err := drv().EventCreate()
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
	if err == emu.ErrNotReady {
		return false, nil
	}
	return err == nil, err
}

// Synchronize waits for the event's last record.
func (e *Event) Synchronize() error { return e.e.Synchronize() }

// Destroy destroys the event.
func (e *Event) Destroy() error { return e.e.Destroy() }

func elapsed(start, end *Event) (float64, error) {
	ms, err := emu.Elapsed(start.e, end.e)
	return float64(ms), err
}

// Module is PTX loaded into a context.
type Module struct{ m *emu.LoadedModule }

// LoadModule loads PTX text into the current context; name (a file name)
// is how errors refer to it.
func LoadModule(name, ptx string) (*Module, error) {
	m, err := drv().LoadModule(name, ptx)
	if err != nil {
		return nil, err
	}
	return &Module{m}, nil
}

// Function returns the module's kernel name.
func (m *Module) Function(name string) (*Function, error) {
	f, err := m.m.Function(name)
	if err != nil {
		return nil, err
	}
	return &Function{f}, nil
}

// Unload unloads the module.
func (m *Module) Unload() error { return m.m.Unload() }

// Function is a kernel.
type Function struct{ f *emu.Function }

// Launch queues the kernel on s with grid blocks of block threads and
// sharedBytes of dynamic shared memory. Arguments are typed: DevicePtr for
// a pointer, int64 or uint64 for a long long, int32, uint32, int (a C int,
// which it must fit) or bool (0 or 1) for an int, float32 for a float,
// float64 for a double. The emulator checks each against the kernel's
// parameters, pointers against integers included.
func (f *Function) Launch(grid, block Dim3, sharedBytes int, s *Stream, args ...any) error {
	a, err := marshal(args)
	if err != nil {
		return fmt.Errorf("launching %s: %w", f.f.Kernel().Name, err)
	}
	for i, v := range a {
		if p, ok := v.(DevicePtr); ok {
			a[i] = emu.Ptr(p)
		}
	}
	return f.f.Launch(emu.Dim3(grid), emu.Dim3(block), sharedBytes, s.s, a...)
}
