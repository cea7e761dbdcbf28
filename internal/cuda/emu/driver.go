//go:build linux

package emu

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/alitto/pond/v2"
	"golang.org/x/sys/unix"
)

// Config sets up a Driver.
type Config struct {
	// Devices is the number of emulated GPUs (1 to MaxDevices).
	Devices int
	// Seed keys every random choice: thread and block orders, stream
	// delays. The same seed repeats them.
	Seed uint64
	// MaxDelay bounds the random pause a stream takes before an
	// operation (about one operation in eight pauses); 0 for none.
	MaxDelay time.Duration
	// Memory is each GPU's memory in bytes.
	Memory int64
}

// MaxDevices is the most GPUs a Driver emulates.
const MaxDevices = 8

// The environment variables FromEnv reads.
const (
	EnvDevices = "PIPE_CUDAEMU_DEVICES" // default 2
	EnvSeed    = "PIPE_CUDAEMU_SEED"    // default: drawn from the clock
	EnvDelay   = "PIPE_CUDAEMU_DELAY"   // a Go duration; default 2ms
)

// DefaultConfig is what FromEnv starts from.
var DefaultConfig = Config{Devices: 2, MaxDelay: 2 * time.Millisecond, Memory: 8 << 30}

// ConfigFromEnv returns DefaultConfig with the environment's settings: the
// device count, the seed (drawn from the clock when unset) and the delay.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig
	c.Seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(EnvDevices); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDevices {
			return c, fmt.Errorf("%s=%s: want 1 to %d", EnvDevices, s, MaxDevices)
		}
		c.Devices = n
	}
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return c, fmt.Errorf("%s=%s: want an unsigned integer", EnvSeed, s)
		}
		c.Seed = v
	}
	if s := os.Getenv(EnvDelay); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%s: want a duration such as 2ms (0 for none)", EnvDelay, s)
		}
		c.MaxDelay = d
	}
	return c, nil
}

// Driver is an emulated CUDA driver: GPUs, their primary contexts, the
// context current on each OS thread, and pinned host memory. Its methods
// follow the driver API's rules (a call that needs a context fails with
// ErrInvalidContext on a thread that has none current) and are safe for
// concurrent use.
type Driver struct {
	cfg     Config
	devices []*device
	pool    pond.Pool // runs the blocks of launches
	steps   atomic.Uint64

	mu      sync.Mutex
	current map[int]*Context // by OS thread id
	pinned  map[uintptr]*pinnedBlock
}

type device struct {
	ord     int
	mem     *memory
	mu      sync.Mutex
	primary *Context
	refs    int
	// generation counts the device's primary contexts, for seeds.
	generation int
}

// pinnedBlock is page-locked host memory: mapped outside the Go heap, so
// it never moves. pending counts the queued copies that use it.
type pinnedBlock struct {
	mem     []byte
	pending int64
}

// New starts a driver.
func New(c Config) (*Driver, error) {
	if c.Devices < 1 || c.Devices > MaxDevices {
		return nil, fmt.Errorf("emu: %d devices: want 1 to %d", c.Devices, MaxDevices)
	}
	if c.Memory <= 0 {
		c.Memory = DefaultConfig.Memory
	}
	d := &Driver{cfg: c, pool: pond.NewPool(runtime.GOMAXPROCS(0)), current: map[int]*Context{}, pinned: map[uintptr]*pinnedBlock{}}
	for i := range c.Devices {
		d.devices = append(d.devices, &device{ord: i, mem: newMemory(i, c.Memory)})
	}
	return d, nil
}

// Seed returns the seed the driver draws its choices from.
func (d *Driver) Seed() uint64 { return d.cfg.Seed }

// seedNote is appended to the errors of work on streams, whose order the
// seed decides.
func (d *Driver) seedNote() string {
	return fmt.Sprintf(" [cudaemu seed %d: %s=%d repeats the thread orders and delays]", d.cfg.Seed, EnvSeed, d.cfg.Seed)
}

// Instructions returns how many PTX instructions the driver's kernels
// have run (each thread's count, predicated-off ones included).
func (d *Driver) Instructions() uint64 { return d.steps.Load() }

// DeviceCount is cuDeviceGetCount.
func (d *Driver) DeviceCount() int { return len(d.devices) }

func (d *Driver) device(ord int) (*device, error) {
	if ord < 0 || ord >= len(d.devices) {
		return nil, errorf(ErrInvalidDevice, "device %d: the emulator has %d (cuda:0 to cuda:%d)", ord, len(d.devices), len(d.devices)-1)
	}
	return d.devices[ord], nil
}

// Context is a device's primary context.
type Context struct {
	d   *Driver
	dev *device
	gen int

	mu        sync.Mutex
	sticky    error
	destroyed bool
	streams   map[*Stream]bool
	created   int // streams made, for their seeds
	allocs    map[uint64]*allocation
}

// Device returns the ordinal of the context's GPU.
func (c *Context) Device() int { return c.dev.ord }

// RetainPrimary is cuDevicePrimaryCtxRetain: the device's primary context,
// made on first use, counted until ReleasePrimary.
func (d *Driver) RetainPrimary(ord int) (*Context, error) {
	dev, err := d.device(ord)
	if err != nil {
		return nil, err
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.primary == nil {
		dev.generation++
		dev.primary = &Context{d: d, dev: dev, gen: dev.generation, streams: map[*Stream]bool{}, allocs: map[uint64]*allocation{}}
	}
	dev.refs++
	return dev.primary, nil
}

// ReleasePrimary is cuDevicePrimaryCtxRelease: the last release destroys
// the context, finishing its streams' work and freeing its memory, which
// also clears a sticky error.
func (d *Driver) ReleasePrimary(ord int) error {
	dev, err := d.device(ord)
	if err != nil {
		return err
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.refs == 0 {
		return errorf(ErrInvalidContext, "cuDevicePrimaryCtxRelease(%d): the primary context is not retained", ord)
	}
	if dev.refs--; dev.refs > 0 {
		return nil
	}
	c := dev.primary
	dev.primary = nil
	c.mu.Lock()
	streams := c.streams
	c.streams = nil
	c.mu.Unlock()
	for s := range streams {
		s.shut()
	}
	c.mu.Lock()
	c.destroyed = true
	for base := range c.allocs {
		dev.mem.free(base)
	}
	c.allocs = nil
	c.mu.Unlock()
	return nil
}

// SetCurrent is cuCtxSetCurrent: c becomes the calling OS thread's
// context (nil: none). The caller must hold its goroutine on its thread
// (runtime.LockOSThread), as with the real driver.
func (d *Driver) SetCurrent(c *Context) error {
	tid := unix.Gettid()
	d.mu.Lock()
	defer d.mu.Unlock()
	if c == nil {
		delete(d.current, tid)
		return nil
	}
	c.mu.Lock()
	destroyed := c.destroyed
	c.mu.Unlock()
	if destroyed {
		return errorf(ErrContextDestroyed, "cuCtxSetCurrent: the context of cuda:%d was destroyed", c.dev.ord)
	}
	d.current[tid] = c
	return nil
}

// Current is cuCtxGetCurrent: the calling thread's context, or nil.
func (d *Driver) Current() *Context {
	tid := unix.Gettid()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current[tid]
}

// ctx returns the calling thread's context for call, or the error the
// driver gives: no context, a destroyed one, or its sticky error.
func (d *Driver) ctx(call string) (*Context, error) {
	c := d.Current()
	if c == nil {
		return nil, errorf(ErrInvalidContext, "%s: no context is current on this OS thread (thread %d): make one current with the goroutine locked to its thread", call, unix.Gettid())
	}
	return c, c.usable(call)
}

// usable returns nil, or why the context takes no more calls.
func (c *Context) usable(call string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return errorf(ErrContextDestroyed, "%s: the context of cuda:%d was destroyed", call, c.dev.ord)
	}
	return c.sticky
}

// fail makes err the context's sticky error, as a GPU does after a kernel
// faults: every later call in the context returns it.
func (c *Context) fail(err *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sticky == nil {
		c.sticky = &Error{Code: err.Code, Msg: err.Msg + c.d.seedNote() + " (sticky: the context is unusable until its last release)"}
	}
}

func (c *Context) stickyErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sticky
}

// MemAlloc is cuMemAlloc in the current context. New memory holds 0xff
// bytes, not zeros (CUDA does not clear it).
func (d *Driver) MemAlloc(n int64) (Ptr, error) {
	c, err := d.ctx("cuMemAlloc")
	if err != nil {
		return 0, err
	}
	a, err := c.dev.mem.alloc(n)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.allocs[a.base] = a
	c.mu.Unlock()
	return Ptr(a.base), nil
}

// MemFree is cuMemFree. Freeing memory that a queued copy still names is
// an error; a queued kernel that touches freed memory faults.
func (d *Driver) MemFree(p Ptr) error {
	c, err := d.ctx("cuMemFree")
	if err != nil {
		return err
	}
	if err := c.dev.mem.free(uint64(p)); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.allocs, uint64(p))
	c.mu.Unlock()
	return nil
}

// memoryOf returns the device memory holding addr, on any GPU (addresses
// are unified).
func (d *Driver) memoryOf(addr uint64) *memory {
	if addr >= addressBase {
		if i := int((addr - addressBase) / deviceSpan); i < len(d.devices) {
			return d.devices[i].mem
		}
	}
	return nil
}

// devSpan checks n bytes at p for a copy: in one live allocation, on the
// device of want when want is not nil.
func (d *Driver) devSpan(call string, p Ptr, n int64, want *Context) (*allocation, error) {
	m := d.memoryOf(uint64(p))
	if m == nil {
		return nil, errorf(ErrInvalidValue, "%s: %#x is not device memory", call, uint64(p))
	}
	if want != nil && m != want.dev.mem {
		return nil, errorf(ErrInvalidValue, "%s: %#x is on cuda:%d, not on the context's cuda:%d", call, uint64(p), m.dev, want.dev.ord)
	}
	a, err := m.span(uint64(p), n)
	if err != nil {
		err.(*Error).Msg = call + ": " + err.(*Error).Msg
		return nil, err
	}
	return a, nil
}

// MemHostAlloc is cuMemHostAlloc: n bytes of host memory mapped outside
// the Go heap (so never moved), usable by every context.
func (d *Driver) MemHostAlloc(n int) ([]byte, error) {
	if _, err := d.ctx("cuMemHostAlloc"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, errorf(ErrInvalidValue, "cuMemHostAlloc of %d bytes", n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, errorf(ErrOutOfMemory, "cuMemHostAlloc of %d bytes: %v", n, err)
	}
	d.mu.Lock()
	d.pinned[uintptr(unsafe.Pointer(&b[0]))] = &pinnedBlock{mem: b}
	d.mu.Unlock()
	return b, nil
}

// MemFreeHost is cuMemFreeHost. Freeing memory that a queued copy still
// reads or writes is an error (the copy would touch unmapped memory).
func (d *Driver) MemFreeHost(b []byte) error {
	if _, err := d.ctx("cuMemFreeHost"); err != nil {
		return err
	}
	if len(b) == 0 {
		return errorf(ErrInvalidValue, "cuMemFreeHost of no memory")
	}
	at := uintptr(unsafe.Pointer(&b[0]))
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pinned[at]
	if !ok {
		return errorf(ErrInvalidValue, "cuMemFreeHost(%#x): not memory from cuMemHostAlloc", at)
	}
	if p.pending > 0 {
		return errorf(ErrInvalidValue, "cuMemFreeHost(%#x): %d queued copies still use it", at, p.pending)
	}
	delete(d.pinned, at)
	return unix.Munmap(p.mem)
}

// pin counts a queued copy against the pinned block holding h, if any
// (delta +1 when queued, -1 when done).
func (d *Driver) pin(h []byte, delta int64) {
	if len(h) == 0 {
		return
	}
	at := uintptr(unsafe.Pointer(&h[0]))
	d.mu.Lock()
	defer d.mu.Unlock()
	for base, p := range d.pinned {
		if at >= base && at < base+uintptr(len(p.mem)) {
			p.pending += delta
			return
		}
	}
}

// modules caches parsed PTX by its hash: a module is parsed once however
// many contexts load it.
var modules sync.Map // [32]byte → *Module

// LoadModule is cuModuleLoadData: the PTX text (name is how messages call
// it) parsed and decoded in the current context. PTX the emulator cannot
// run fails here, naming the instruction and line.
func (d *Driver) LoadModule(name, ptx string) (*LoadedModule, error) {
	c, err := d.ctx("cuModuleLoadData")
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(name + "\x00" + ptx))
	m, ok := modules.Load(key)
	if !ok {
		parsed, err := ParsePTX(name, ptx)
		if err != nil {
			return nil, &Error{Code: ErrInvalidPTX, Msg: "cuModuleLoadData: " + err.Error()}
		}
		m, _ = modules.LoadOrStore(key, parsed)
	}
	return &LoadedModule{ctx: c, m: m.(*Module)}, nil
}

// LoadedModule is a module loaded in a context.
type LoadedModule struct {
	ctx      *Context
	m        *Module
	mu       sync.Mutex
	unloaded bool
}

// Module returns the parsed PTX.
func (l *LoadedModule) Module() *Module { return l.m }

// Function is cuModuleGetFunction.
func (l *LoadedModule) Function(name string) (*Function, error) {
	k, ok := l.m.Kernels[name]
	if !ok {
		return nil, errorf(ErrNotFound, "cuModuleGetFunction: %s has no kernel %q", l.m.Name, name)
	}
	return &Function{mod: l, k: k}, nil
}

// Unload is cuModuleUnload: its functions launch no more.
func (l *LoadedModule) Unload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unloaded {
		return errorf(ErrInvalidHandle, "cuModuleUnload: %s is unloaded already", l.m.Name)
	}
	l.unloaded = true
	return nil
}

// Function is a kernel of a loaded module.
type Function struct {
	mod *LoadedModule
	k   *Kernel
}

// Kernel returns the decoded kernel.
func (f *Function) Kernel() *Kernel { return f.k }
