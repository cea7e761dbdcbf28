//go:build linux

package emu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/alitto/pond/v2"
)

// Dim3 is a grid or block size.
type Dim3 [3]int

// The launch limits of compute capability 8.0, which the kernels target.
const (
	MaxThreadsPerBlock = 1024
	MaxSharedPerBlock  = 48 << 10 // static shared memory
)

var maxBlock, maxGrid = Dim3{1024, 1024, 64}, Dim3{1<<31 - 1, 65535, 65535}

// launch is a kernel's run: what every block shares.
type launch struct {
	k           *Kernel
	grid, block [3]uint32
	threads     int
	dynShared   int
	params      []uint64
	mem         *memory
	seed        uint64
	stop        atomic.Bool
	pool        pond.Pool
	steps       *atomic.Uint64
}

// errStopped ends a block because another block of its launch faulted.
var errStopped = &Error{Code: ErrLaunchFailed, Msg: "stopped"}

// Launch is cuLaunchKernel on stream s, which must belong to the calling
// thread's context and the function's. Each argument's Go type must match
// its parameter as the PTX declares it: a Ptr for a pointer (a .u64 the
// kernel uses as an address), int64 or uint64 for another .u64 or .s64,
// int32 or uint32 for a 32-bit integer, float32 for .f32, float64 for .f64.
// A mismatch, a wrong count, a block over 1024 threads or the kernel's
// .maxntid, a grid over the limits, or more shared memory than 48 KiB fail
// here, naming the parameter or the limit; a fault while the kernel runs
// becomes the context's sticky error, returned by the next call that
// waits (the stream's Synchronize, an event's).
func (f *Function) Launch(grid, block Dim3, sharedBytes int, s *Stream, args ...any) error {
	k := f.k
	call := "cuLaunchKernel(" + k.Name + ")"
	f.mod.mu.Lock()
	unloaded := f.mod.unloaded
	f.mod.mu.Unlock()
	if unloaded {
		return errorf(ErrInvalidHandle, "%s: its module %s is unloaded", call, f.mod.m.Name)
	}
	if s.ctx != f.mod.ctx {
		return errorf(ErrInvalidHandle, "%s: the kernel was loaded in cuda:%d's context, %s belongs to another", call, f.mod.ctx.dev.ord, s)
	}
	threads := 1
	for i := range 3 {
		if block[i] < 1 || block[i] > maxBlock[i] {
			return errorf(ErrInvalidValue, "%s: block %v: dimension %d must be 1 to %d", call, block, i, maxBlock[i])
		}
		if grid[i] < 1 || grid[i] > maxGrid[i] {
			return errorf(ErrInvalidValue, "%s: grid %v: dimension %d must be 1 to %d", call, grid, i, maxGrid[i])
		}
		threads *= block[i]
	}
	if threads > MaxThreadsPerBlock {
		return errorf(ErrInvalidValue, "%s: block %v has %d threads, more than %d", call, block, threads, MaxThreadsPerBlock)
	}
	if m := k.MaxNTID; m[0] > 0 && threads > m[0]*m[1]*m[2] {
		return errorf(ErrLaunchResources, "%s: block %v has %d threads, more than the kernel's .maxntid %d (its __launch_bounds__)", call, block, threads, m[0]*m[1]*m[2])
	}
	if r := k.ReqNTID; r[0] > 0 && (block[0] != r[0] || block[1] != r[1] || block[2] != r[2]) {
		return errorf(ErrInvalidValue, "%s: block %v, but the kernel requires %v (.reqntid)", call, block, r)
	}
	if sharedBytes < 0 || k.SharedBytes+sharedBytes > MaxSharedPerBlock {
		return errorf(ErrInvalidValue, "%s: %d bytes of shared memory (%d static, %d dynamic), more than %d", call,
			k.SharedBytes+sharedBytes, k.SharedBytes, sharedBytes, MaxSharedPerBlock)
	}
	params, err := marshal(k, args)
	if err != nil {
		return errorf(ErrInvalidValue, "%s: %v", call, err)
	}
	d := s.ctx.d
	l := &launch{k: k, threads: threads, dynShared: sharedBytes, params: params, mem: s.ctx.dev.mem, pool: d.pool, steps: &d.steps}
	for i := range 3 {
		l.grid[i], l.block[i] = uint32(grid[i]), uint32(block[i])
	}
	return s.enqueue(call, streamOp{run: func() *Error {
		s.launches++
		l.seed = mix(s.rng.s ^ s.launches)
		return l.execute()
	}})
}

// marshal checks args against k's parameters and returns their bits.
func marshal(k *Kernel, args []any) ([]uint64, error) {
	if len(args) != len(k.Params) {
		return nil, fmt.Errorf("%d arguments for %d parameters", len(args), len(k.Params))
	}
	out := make([]uint64, len(args))
	for i, a := range args {
		p := k.Params[i]
		bad := func() error {
			want := map[string]string{"u32": "int32 or uint32", "s32": "int32 or uint32", "b32": "int32 or uint32",
				"u64": "int64, uint64 or Ptr", "s64": "int64, uint64 or Ptr", "b64": "int64, uint64 or Ptr",
				"f32": "float32", "f64": "float64"}[p.Type]
			switch {
			case p.Pointer:
				want = "Ptr (the kernel uses it as an address)"
			case p.Integer && p.Size == 8:
				want = "int64 or uint64 (the kernel uses it as a number, not an address)"
			}
			return fmt.Errorf("argument %d (%s, .%s) is a %T, want %s", i, p.Name, p.Type, a, want)
		}
		switch v := a.(type) {
		case Ptr:
			if p.Size != 8 || p.Type == "f64" || (p.Integer && !p.Pointer) {
				return nil, bad()
			}
			out[i] = uint64(v)
		case int64, uint64:
			if p.Size != 8 || p.Type == "f64" || (p.Pointer && !p.Integer) {
				return nil, bad()
			}
			out[i] = toU64(v)
		case int32, uint32:
			if p.Size != 4 || p.Type == "f32" {
				return nil, bad()
			}
			out[i] = toU64(v)
		case float32:
			if p.Type != "f32" {
				return nil, bad()
			}
			out[i] = uint64(math.Float32bits(v))
		case float64:
			if p.Type != "f64" {
				return nil, bad()
			}
			out[i] = math.Float64bits(v)
		default:
			return nil, bad()
		}
	}
	return out, nil
}

func toU64(v any) uint64 {
	switch x := v.(type) {
	case int64:
		return uint64(x)
	case uint64:
		return x
	case int32:
		return uint64(uint32(x))
	case uint32:
		return uint64(x)
	}
	return 0
}

// execute runs every block, on as many workers as there are processors,
// in a random order, and returns the fault of the lowest-numbered block
// that faulted.
func (l *launch) execute() *Error {
	n := int64(l.grid[0]) * int64(l.grid[1]) * int64(l.grid[2])
	// Blocks go out in the order j = (i·stride + offset) mod n, a
	// permutation for a stride prime to n.
	r := newRNG(l.seed)
	offset, stride := int64(r.next()%uint64(n)), int64(1)
	if n > 1 {
		for {
			stride = int64(r.next()%uint64(n-1)) + 1
			if gcd(stride, n) == 1 {
				break
			}
		}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var first *Error
	firstBlock := int64(math.MaxInt64)
	work := func() {
		w := newWorker(l)
		defer func() {
			l.steps.Add(w.steps)
			w.release()
		}()
		for {
			i := next.Add(1) - 1
			if i >= n || l.stop.Load() {
				return
			}
			j := (i*stride + offset) % n
			b := [3]uint32{uint32(j % int64(l.grid[0])), uint32(j / int64(l.grid[0]) % int64(l.grid[1])),
				uint32(j / (int64(l.grid[0]) * int64(l.grid[1])))}
			if err := w.runBlock(b, mix(l.seed^uint64(j))); err != nil {
				l.stop.Store(true)
				if err != errStopped {
					mu.Lock()
					if j < firstBlock {
						first, firstBlock = err, j
					}
					mu.Unlock()
				}
				return
			}
		}
	}
	workers := int(min(n, int64(runtime.GOMAXPROCS(0))))
	if workers == 1 {
		work()
		return first
	}
	g := l.pool.NewGroup()
	for range workers {
		g.Submit(work)
	}
	if err := g.Wait(); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return errorf(ErrLaunchFailed, "kernel %s: the emulator failed: %v", l.k.Name, err)
	}
	return first
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
