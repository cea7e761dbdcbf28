//go:build linux

package emu

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Ptr is a device address. Every emulated GPU has its own range of the
// 64-bit space, far from where Go or the C library map host memory, so a
// device pointer used as a host pointer (or the other way round) is
// never valid by accident.
type Ptr uint64

const (
	// addressBase is device 0's first address; device i's range starts
	// i·deviceSpan above it.
	addressBase = 0x3000_0000_0000
	deviceSpan  = 1 << 40
	// allocAlign is where allocations start, as cuMemAlloc aligns them.
	allocAlign = 256
	// minGuard is the least unmapped space after an allocation; a guard
	// is as long as its allocation beyond that, so an overrun by up to the
	// allocation's own size lands in no other allocation.
	minGuard = 4096
	// freedKept is how many freed allocations an error message can name.
	freedKept = 4096
	// poison fills new allocations and each block's shared memory: CUDA
	// does not clear either, and 0xff bytes read as NaN floats and -1
	// integers, so code that relies on zeroed memory fails visibly.
	poison = 0xff
)

// allocation is device memory: len(mem) bytes from base.
type allocation struct {
	base  uint64
	mem   []byte
	freed atomic.Bool
	// pending counts queued operations that name the allocation, so a
	// free while a stream still needs it is an error.
	pending atomic.Int64
}

func (a *allocation) end() uint64 { return a.base + uint64(len(a.mem)) }

// span is a freed allocation's range, kept for messages.
type span struct{ base, size uint64 }

// memory is one device's address space.
type memory struct {
	dev   int
	mu    sync.RWMutex
	live  []*allocation // sorted by base
	freed []span        // the last freedKept freed, oldest first
	next  uint64
	used  int64
	limit int64
}

func newMemory(dev int, limit int64) *memory {
	return &memory{dev: dev, next: addressBase + uint64(dev)*deviceSpan, limit: limit}
}

func (m *memory) alloc(n int64) (*allocation, error) {
	if n <= 0 {
		return nil, errorf(ErrInvalidValue, "cuMemAlloc of %d bytes", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used+n > m.limit {
		return nil, errorf(ErrOutOfMemory, "cuMemAlloc of %d bytes: %d of the emulated GPU's %d bytes are in use", n, m.used, m.limit)
	}
	base := (m.next + allocAlign - 1) &^ (allocAlign - 1)
	if base+uint64(n)+minGuard+uint64(n) > addressBase+uint64(m.dev+1)*deviceSpan {
		return nil, errorf(ErrOutOfMemory, "cuMemAlloc of %d bytes: the emulated GPU's address space is used up", n)
	}
	a := &allocation{base: base, mem: make([]byte, n)}
	for i := range a.mem {
		a.mem[i] = poison
	}
	m.next = base + uint64(n) + minGuard + uint64(n)
	m.live = append(m.live, a) // bases only grow: the list stays sorted
	m.used += n
	return a, nil
}

// find returns the live allocation holding addr, or nil.
func (m *memory) find(addr uint64) *allocation {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.live), func(i int) bool { return m.live[i].base > addr }) - 1
	if i >= 0 && addr < m.live[i].end() {
		return m.live[i]
	}
	return nil
}

// span returns the live allocation holding [addr, addr+n), or an error
// that says where the range falls.
func (m *memory) span(addr uint64, n int64) (*allocation, error) {
	a := m.find(addr)
	if a == nil {
		return nil, errorf(ErrInvalidValue, "%s", m.describe(addr, n))
	}
	if n < 0 || uint64(n) > a.end()-addr {
		return nil, errorf(ErrInvalidValue, "%d bytes at %#x (offset %d) run past the end of allocation %#x, which has %d bytes",
			n, addr, addr-a.base, a.base, len(a.mem))
	}
	return a, nil
}

func (m *memory) free(addr uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.live), func(i int) bool { return m.live[i].base >= addr })
	if i == len(m.live) || m.live[i].base != addr {
		return errorf(ErrInvalidValue, "cuMemFree(%#x): %s", addr, m.describeLocked(addr, 1))
	}
	a := m.live[i]
	if n := a.pending.Load(); n > 0 {
		return errorf(ErrInvalidValue, "cuMemFree(%#x): %d queued stream operations still use this allocation (%d bytes)", addr, n, len(a.mem))
	}
	a.freed.Store(true)
	m.live = append(m.live[:i], m.live[i+1:]...)
	m.used -= int64(len(a.mem))
	m.freed = append(m.freed, span{a.base, uint64(len(a.mem))})
	if len(m.freed) > freedKept {
		m.freed = m.freed[1:]
	}
	return nil
}

// describe says where an access of n bytes at addr falls: in or near
// which allocation, live or freed.
func (m *memory) describe(addr uint64, n int64) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.describeLocked(addr, n)
}

func (m *memory) describeLocked(addr uint64, n int64) string {
	for i := len(m.freed) - 1; i >= 0; i-- {
		if f := m.freed[i]; addr >= f.base && addr < f.base+f.size {
			return fmt.Sprintf("%#x is offset %d of freed allocation %#x, which had %d bytes", addr, addr-f.base, f.base, f.size)
		}
	}
	lo := addressBase + uint64(m.dev)*deviceSpan
	if addr < lo || addr >= lo+deviceSpan {
		return fmt.Sprintf("%#x is not in this GPU's memory (cuda:%d has %#x to %#x)", addr, m.dev, lo, lo+deviceSpan)
	}
	i := sort.Search(len(m.live), func(i int) bool { return m.live[i].base > addr }) - 1
	var before, after *allocation
	if i >= 0 {
		before = m.live[i]
		if addr < before.end() {
			return fmt.Sprintf("%d bytes at %#x (offset %d) run past the end of allocation %#x, which has %d bytes", n, addr,
				addr-before.base, before.base, len(before.mem))
		}
	}
	if i+1 < len(m.live) {
		after = m.live[i+1]
	}
	switch {
	case before != nil && (after == nil || addr-before.end() <= after.base-addr):
		return fmt.Sprintf("%#x is offset %d of allocation %#x, which has %d bytes", addr, addr-before.base, before.base, len(before.mem))
	case after != nil:
		return fmt.Sprintf("%#x is %d bytes before allocation %#x, which has %d bytes", addr, after.base-addr, after.base, len(after.mem))
	}
	return fmt.Sprintf("%#x is in no allocation (cuda:%d has none)", addr, m.dev)
}
