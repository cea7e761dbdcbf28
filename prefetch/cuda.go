//go:build cuda || cudaemu

package prefetch

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/internal/cuda"
)

// CUDACompiled reports whether this build has CUDA (the cuda or cudaemu
// build tag).
const CUDACompiled = true

// CUDAEmulated reports whether this build's GPUs are emulated (the
// cudaemu tag: tests and CI only).
const CUDAEmulated = cuda.Emulated

// CUDADevices returns the number of GPUs the CUDA driver sees.
func CUDADevices() (int, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return 0, fmt.Errorf("prefetch: counting CUDA devices: %w", err)
	}
	return n, nil
}

// CUDA is one GPU: its primary context, one non-blocking stream that every
// copy and kernel goes through in order, and the normalize kernels loaded
// from the embedded PTX. Completion is tracked with CUDA events by one
// goroutine per device (a task of a one-goroutine pond pool), which also times every copy for the bandwidth
// figures.
type CUDA struct {
	name     string
	ctx      *cuda.Context
	stream   *cuda.Stream
	mod      *cuda.Module
	f32, f16 *cuda.Function

	mu       sync.Mutex // guards closed and the order of work on the stream
	closed   bool
	inflight chan *cudaOp
	// completer runs complete; completion is its task.
	completer  pond.Pool
	completion pond.Task

	evMu   sync.Mutex
	events []*cuda.Event // free events, recycled

	copied, nanos atomic.Int64
}

// cudaOp is work on the stream between two recorded events.
type cudaOp struct {
	*op
	start, end *cuda.Event
	bytes      int64 // for a copy, counted in the bandwidth figures
}

type cudaBuffer struct {
	ptr cuda.DevicePtr
	n   int
	dev *CUDA
}

func (b *cudaBuffer) Len() int     { return b.n }
func (b *cudaBuffer) Host() []byte { return nil }

// NewCUDA opens GPU number ordinal.
func NewCUDA(ordinal int) (*CUDA, error) {
	n, err := CUDADevices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("prefetch: cuda:%d: the driver sees %d GPUs (cuda:0 to cuda:%d)", ordinal, n, n-1)
	}
	g := &CUDA{name: cuda.Name(ordinal), inflight: make(chan *cudaOp, 1024)}
	// The primary context is the one the CUDA runtime (and so PyTorch or
	// cuDNN in the same process) uses: buffers are shared with them.
	if g.ctx, err = cuda.RetainPrimary(ordinal); err != nil {
		return nil, g.errf("retaining the primary context", err)
	}
	err = g.ctx.Do(func() error {
		var err error
		if g.stream, err = cuda.NewStream(); err != nil {
			return g.errf("creating the copy stream", err)
		}
		if g.mod, err = cuda.LoadModule("prefetch/normalize.ptx", normalizePTX); err != nil {
			return g.errf("loading the normalize kernels", err)
		}
		if g.f32, err = g.mod.Function("normalize_f32"); err != nil {
			return g.errf("normalize_f32", err)
		}
		if g.f16, err = g.mod.Function("normalize_f16"); err != nil {
			return g.errf("normalize_f16", err)
		}
		return nil
	})
	if err != nil {
		g.ctx.Release()
		return nil, err
	}
	// The completion goroutine, in a pond pool of its own: Close waits for
	// it, and a panic in it comes back from Close with its stack.
	g.completer = pond.NewPool(1)
	g.completion = g.completer.Submit(g.complete)
	return g, nil
}

func (g *CUDA) errf(what string, err error) error {
	return fmt.Errorf("prefetch: %s: %s: %w", g.name, what, err)
}

func (g *CUDA) Name() string { return g.name }

func (g *CUDA) Alloc(n int) (Buffer, error) {
	b := &cudaBuffer{n: n, dev: g}
	err := g.ctx.Do(func() error {
		var err error
		b.ptr, err = cuda.MemAlloc(int64(max(n, 1)))
		return err
	})
	if err != nil {
		return nil, g.errf(fmt.Sprintf("allocating %d bytes", n), err)
	}
	return b, nil
}

func (g *CUDA) buffer(b Buffer) (*cudaBuffer, error) {
	cb, ok := b.(*cudaBuffer)
	if !ok || cb.dev != g {
		return nil, fmt.Errorf("prefetch: %s: buffer from another device", g.name)
	}
	return cb, nil
}

// Free waits for the stream's work, then frees the buffer.
func (g *CUDA) Free(b Buffer) error {
	cb, err := g.buffer(b)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx.Do(func() error {
		if err := g.stream.Synchronize(); err != nil {
			return g.errf("waiting for the stream", err)
		}
		return cuda.MemFree(cb.ptr)
	})
}

func (g *CUDA) CopyAsync(dst Buffer, src []byte) (Event, error) {
	d, err := g.buffer(dst)
	if err != nil {
		return nil, err
	}
	if err := checkCopy(g.name, dst, len(src)); err != nil {
		return nil, err
	}
	return g.enqueue(int64(len(src)), func() error {
		if len(src) == 0 {
			return nil
		}
		return cuda.CopyHtoDAsync(d.ptr, src, g.stream)
	})
}

// normalizeThreads is the block size of the normalize kernels.
const normalizeThreads = 256

func (g *CUDA) NormalizeAsync(dst, src Buffer, n int, k *Norm) (Event, error) {
	d, err := g.buffer(dst)
	if err != nil {
		return nil, err
	}
	s, err := g.buffer(src)
	if err != nil {
		return nil, err
	}
	if err := checkNormalize(g.name, dst, src, n, k); err != nil {
		return nil, err
	}
	fn := g.f32
	if k.Half {
		fn = g.f16
	}
	// normalize_f32/f16(dst, src, n, plane, channels, s0…s3, b0…b3)
	args := []any{d.ptr, s.ptr, uint64(n), uint32(k.Plane), uint32(len(k.Scale))}
	for _, v := range [][]float32{k.Scale, k.Bias} {
		for c := range MaxNormChannels {
			f := float32(0)
			if c < len(v) {
				f = v[c]
			}
			args = append(args, f)
		}
	}
	blocks := min((n+normalizeThreads-1)/normalizeThreads, 1<<20)
	return g.enqueue(0, func() error {
		if n == 0 {
			return nil
		}
		return fn.Launch(cuda.Dim3{blocks, 1, 1}, cuda.Dim3{normalizeThreads, 1, 1}, 0, g.stream, args...)
	})
}

// Read waits for the stream's work, then copies device memory to dst.
func (g *CUDA) Read(dst []byte, src Buffer) error {
	s, err := g.buffer(src)
	if err != nil {
		return err
	}
	if len(dst) > s.n {
		return fmt.Errorf("prefetch: %s: read of %d bytes from a %d-byte buffer", g.name, len(dst), s.n)
	}
	if len(dst) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx.Do(func() error {
		if err := g.stream.Synchronize(); err != nil {
			return g.errf("waiting for the stream", err)
		}
		return cuda.CopyDtoH(dst, s.ptr)
	})
}

// enqueue puts work on the stream between two events, and hands it to the
// completion goroutine.
func (g *CUDA) enqueue(bytes int64, launch func() error) (Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	o := &cudaOp{op: newOp(), bytes: bytes}
	err := g.ctx.Do(func() error {
		var err error
		if o.start, err = g.event(); err != nil {
			return err
		}
		if o.end, err = g.event(); err != nil {
			return err
		}
		if err := o.start.Record(g.stream); err != nil {
			return err
		}
		if err := launch(); err != nil {
			return err
		}
		return o.end.Record(g.stream)
	})
	if err != nil {
		g.recycle(o.start, o.end)
		return nil, g.errf("enqueueing work", err)
	}
	g.inflight <- o
	return o.op, nil
}

// event returns a free event, or a new one (the context must be current).
// Its Synchronize sleeps: the completion goroutine does not spin a core
// the pipeline needs.
func (g *CUDA) event() (*cuda.Event, error) {
	g.evMu.Lock()
	defer g.evMu.Unlock()
	if n := len(g.events); n > 0 {
		e := g.events[n-1]
		g.events = g.events[:n-1]
		return e, nil
	}
	return cuda.NewEvent()
}

func (g *CUDA) recycle(evs ...*cuda.Event) {
	g.evMu.Lock()
	defer g.evMu.Unlock()
	for _, e := range evs {
		if e != nil {
			g.events = append(g.events, e)
		}
	}
}

// complete waits for each operation's end event, in stream order, and
// completes it.
func (g *CUDA) complete() {
	ctxErr := g.ctx.Do(func() error {
		for o := range g.inflight {
			err := o.end.Synchronize()
			if err == nil && o.bytes > 0 {
				if d, err := cuda.Elapsed(o.start, o.end); err == nil {
					g.nanos.Add(int64(d))
					g.copied.Add(o.bytes)
				}
			}
			g.recycle(o.start, o.end)
			if err != nil {
				o.op.err = g.errf("device work failed", err)
			}
			close(o.op.done)
		}
		return nil
	})
	// Without the context no event can be waited for: every operation
	// fails.
	for o := range g.inflight {
		o.op.err = g.errf("device work failed", ctxErr)
		close(o.op.done)
	}
}

// AllocHost returns n bytes of page-locked host memory, usable by every
// context (CU_MEMHOSTALLOC_PORTABLE): copies from it run at the bus's full
// rate and truly asynchronously.
func (g *CUDA) AllocHost(n int) ([]byte, error) {
	var b []byte
	err := g.ctx.Do(func() error {
		var err error
		b, err = cuda.MemHostAlloc(n)
		return err
	})
	if err != nil {
		return nil, g.errf("pinned host memory", err)
	}
	return b, nil
}

// FreeHost frees memory from AllocHost.
func (g *CUDA) FreeHost(b []byte) error {
	return g.ctx.Do(func() error { return cuda.MemFreeHost(b) })
}

// Stats reports the bytes copied and the time the copies took on the GPU
// (measured between events around each copy).
func (g *CUDA) Stats() CopyStats {
	return CopyStats{Bytes: g.copied.Load(), Time: time.Duration(g.nanos.Load())}
}

// Close finishes the work asked for, then releases the stream, the kernels,
// the events and the context.
func (g *CUDA) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.inflight)
	g.mu.Unlock()
	cerr := g.completion.Wait()
	g.completer.StopAndWait()
	err := g.ctx.Do(func() error {
		errs := []error{g.stream.Synchronize(), g.mod.Unload()}
		for _, e := range g.events {
			errs = append(errs, e.Destroy())
		}
		g.events = nil
		errs = append(errs, g.stream.Destroy())
		return errors.Join(errs...)
	})
	if rerr := g.ctx.Release(); err == nil {
		err = rerr
	}
	err = errors.Join(cerr, err)
	if err != nil {
		return g.errf("closing", err)
	}
	return nil
}

var (
	_ Device        = (*CUDA)(nil)
	_ HostAllocator = (*CUDA)(nil)
)

// DevicePointer returns the device address of a CUDA device's buffer, for
// kernels outside this package (the GPU trainer reads its batches where
// they are); false for another device's buffer.
func DevicePointer(b Buffer) (uintptr, bool) {
	cb, ok := b.(*cudaBuffer)
	if !ok {
		return 0, false
	}
	return uintptr(cb.ptr), true
}
