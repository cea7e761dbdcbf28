package prefetch

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Slab is host memory for one batch. Data is aligned to Align bytes, so any
// element type can be viewed in it; Labels holds one label per sample.
type Slab struct {
	Data   []byte
	Labels []int32
	// ID is the slab's index in its pool, 0 ≤ ID < pool size, for callers
	// that keep per-slab state beside it.
	ID int
}

// Align is the alignment of every Slab.Data.
const Align = 64

// SlabPool is a set of equal slabs. Get blocks while every slab is out,
// which is how a slow consumer holds back its producers with bounded memory.
// A pool may Grow up to the limit it was made with, never shrink.
type SlabPool struct {
	// slabs has the pool's limit as its length; the first n are allocated.
	// Grow writes slabs[i] before it stores n, so that a reader of n sees
	// them.
	slabs         []*Slab
	n             atomic.Int64
	bytes, labels int
	alloc         HostAllocator // nil: Go memory
	free          chan *Slab
	out           atomic.Int64
	wait          atomic.Int64 // nanoseconds Get spent blocked
}

// NewSlabPool allocates n slabs of bytes bytes and labels labels each, the
// data from alloc (page-locked memory for a GPU) or, if alloc is nil, from
// the Go heap. Close frees memory from alloc.
func NewSlabPool(n, bytes, labels int, alloc HostAllocator) (*SlabPool, error) {
	return NewGrowableSlabPool(n, n, bytes, labels, alloc)
}

// NewGrowableSlabPool is NewSlabPool of a pool that Grow may take up to
// limit slabs (limit ≥ n).
func NewGrowableSlabPool(n, limit, bytes, labels int, alloc HostAllocator) (*SlabPool, error) {
	if n < 1 || limit < n || bytes < 0 || labels < 0 {
		return nil, fmt.Errorf("prefetch: slab pool of %d slabs (up to %d) of %d bytes: want 1 ≤ n ≤ limit", n, limit, bytes)
	}
	p := &SlabPool{slabs: make([]*Slab, limit), bytes: bytes, labels: labels, free: make(chan *Slab, limit), alloc: alloc}
	if err := p.Grow(n); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Grow allocates slabs until the pool has n (at most its limit), and makes
// them free. It is for one goroutine at a time, concurrent with Get and Put.
func (p *SlabPool) Grow(n int) error {
	n = min(n, len(p.slabs))
	for i := int(p.n.Load()); i < n; i++ {
		data := aligned(p.bytes)
		if p.alloc != nil {
			var err error
			if data, err = p.alloc.AllocHost(p.bytes); err != nil {
				return fmt.Errorf("prefetch: slab %d of %d (%d bytes): %w", i+1, n, p.bytes, err)
			}
		}
		s := &Slab{Data: data, Labels: make([]int32, p.labels), ID: i}
		p.slabs[i] = s
		p.n.Store(int64(i + 1))
		p.free <- s
	}
	return nil
}

// Limit is the most slabs the pool may grow to.
func (p *SlabPool) Limit() int { return len(p.slabs) }

// Pinned reports whether the slabs come from a device's allocator.
func (p *SlabPool) Pinned() bool { return p.alloc != nil }

// Close frees the slabs' memory where a device allocated it. No slab may be
// in use.
func (p *SlabPool) Close() error {
	if p.alloc == nil {
		return nil
	}
	var first error
	for _, s := range p.slabs[:p.Len()] {
		if err := p.alloc.FreeHost(s.Data); err != nil && first == nil {
			first = err
		}
		s.Data = nil
	}
	p.alloc = nil
	return first
}

func aligned(n int) []byte {
	b := make([]byte, n+Align)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1))
	return b[off : off+n : off+n]
}

// Get returns a free slab, waiting until one is put back or ctx is done.
func (p *SlabPool) Get(ctx context.Context) (*Slab, error) {
	select {
	case s := <-p.free:
		p.out.Add(1)
		return s, nil
	default:
	}
	t := time.Now()
	defer func() { p.wait.Add(int64(time.Since(t))) }()
	select {
	case s := <-p.free:
		p.out.Add(1)
		return s, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Put returns a slab to the pool. Putting a slab twice, or one from another
// pool, panics: either is a bug that would let two batches share memory.
func (p *SlabPool) Put(s *Slab) {
	if s.ID < 0 || s.ID >= p.Len() || p.slabs[s.ID] != s {
		panic("prefetch: Put of a slab from another pool")
	}
	if p.out.Add(-1) < 0 {
		panic("prefetch: slab put back twice")
	}
	p.free <- s
}

// Len is the number of slabs; Out is how many are taken now.
func (p *SlabPool) Len() int { return int(p.n.Load()) }
func (p *SlabPool) Out() int { return int(p.out.Load()) }

// Bytes is the memory the pool holds.
func (p *SlabPool) Bytes() int64 {
	return int64(p.Len()) * int64(p.bytes+4*p.labels)
}

// Wait is the total time Get has spent blocked for a free slab.
func (p *SlabPool) Wait() time.Duration { return time.Duration(p.wait.Load()) }
