//go:build linux

package feed

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is the shared memory: an anonymous memory file mapped here, carved
// into slabs. It is the pipeline's HostAllocator: each AllocHost hands out
// a free slab's area for its images and fields.
type Ring struct {
	Layout
	// slabBytes is the bytes of a slab's images and fields, before its
	// labels.
	slabBytes int
	file      *os.File
	mem       []byte

	mu   sync.Mutex
	used []bool
}

// NewRing creates and maps a ring of the layout for slabs slabs of rows
// samples of sampleBytes each, whose images and fields take slabBytes (the
// pipeline's SlabBytes: rows × sampleBytes without fields).
func NewRing(slabs, rows, sampleBytes, slabBytes int) (*Ring, error) {
	if slabBytes < rows*sampleBytes {
		return nil, fmt.Errorf("feed: slabs of %d bytes cannot hold %d samples of %d bytes", slabBytes, rows, sampleBytes)
	}
	l := layout(slabs, rows, sampleBytes, slabBytes)
	fd, err := unix.MemfdCreate("pipefeed", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("feed: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pipefeed")
	if err := f.Truncate(l.Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("feed: sizing the ring to %d bytes: %w", l.Size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(l.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("feed: mapping the %d-byte ring: %w", l.Size, err)
	}
	r := &Ring{Layout: l, slabBytes: slabBytes, file: f, mem: mem, used: make([]bool, slabs)}
	appendHeader(mem[:0], l)
	return r, nil
}

// File is the memory file, to hand to the loader.
func (r *Ring) File() *os.File { return r.file }

// AllocHost hands out the first n bytes of a free slab (n ≤ the ring's
// slabBytes), where the pipeline writes a batch's images and fields.
func (r *Ring) AllocHost(n int) ([]byte, error) {
	if n > r.slabBytes {
		return nil, fmt.Errorf("feed: a slab of %d bytes from a ring of %d-byte slabs", n, r.slabBytes)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, u := range r.used {
		if !u {
			r.used[i] = true
			off := r.Offset + int64(i)*r.Stride
			return r.mem[off : off+int64(n) : off+int64(n)], nil
		}
	}
	return nil, fmt.Errorf("feed: all %d slabs of the ring are in use", r.Slabs)
}

// FreeHost returns a slab AllocHost handed out.
func (r *Ring) FreeHost(b []byte) error {
	i, err := r.slabOf(b)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.used[i] = false
	r.mu.Unlock()
	return nil
}

// slabOf is the index of the slab whose area b starts.
func (r *Ring) slabOf(b []byte) (int, error) {
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))))
	if len(b) == 0 || off < r.Offset || (off-r.Offset)%r.Stride != 0 || (off-r.Offset)/r.Stride >= int64(r.Slabs) {
		return 0, errors.New("feed: memory that is not a slab of the ring")
	}
	return int((off - r.Offset) / r.Stride), nil
}

// setLabels writes labels into slab i's label area as int64.
func (r *Ring) setLabels(i int, labels []int32) {
	off := r.Offset + int64(i)*r.Stride + r.Labels
	dst := unsafe.Slice((*int64)(unsafe.Pointer(&r.mem[off])), len(labels))
	for k, l := range labels {
		dst[k] = int64(l)
	}
}

// Close unmaps the ring and closes the memory file; the memory is freed
// once the loader has closed it too.
func (r *Ring) Close() error {
	return errors.Join(unix.Munmap(r.mem), r.file.Close())
}
