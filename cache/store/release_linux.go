//go:build linux

package store

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Badger reads values through memory-mapped value log files, and every page
// read stays mapped: resident memory would grow by each epoch read. After a
// value has been copied out, releaseMapped drops our mapping of its pages
// with MADV_DONTNEED. On a shared file mapping that only unmaps them (the
// data stays in the page cache, and a later read is a minor fault); on any
// other memory it would zero the pages, so it is applied only to ranges that
// /proc/self/maps shows inside a .vlog file mapping.

type region struct{ start, end uintptr }

// releaseMapped queues b, which must no longer be used, for release.
func (c *Store) releaseMapped(b []byte) { c.rel.add(b) }

var vlogMaps struct {
	sync.Mutex
	regions []region // sorted by start
}

// releaseThreshold is the smallest value worth releasing: smaller values
// may live in Badger's memtables, which are not file mappings.
const releaseThreshold = 64 << 10

// prefault maps a large value's pages in one call (MADV_POPULATE_READ,
// Linux 5.14 and later; a no-op error elsewhere) instead of one page fault
// per page as it is read. It changes no data on any kind of mapping.
func prefault(b []byte) {
	if len(b) >= releaseThreshold {
		unix.Madvise(b, unix.MADV_POPULATE_READ)
	}
}

// releaser batches releases: each madvise(MADV_DONTNEED) flushes the TLB of
// every CPU running the process, which is costly (most of all in a VM), so
// spans read are collected and, once releaseBatch bytes are pending, merged
// with their neighbours (values written one after another lie side by side
// in the value log) and released in a few large calls.
type releaser struct {
	mu      sync.Mutex
	spans   []span
	pending int
}

// span is a range of mapped memory: p points at start.
type span struct {
	region
	p unsafe.Pointer
}

// releaseBatch is how much read memory may stay mapped before a release.
const releaseBatch = 32 << 20

func (r *releaser) add(b []byte) {
	if len(b) < releaseThreshold {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, span{region{uintptr(p), uintptr(p) + uintptr(len(b))}, p})
	r.pending += len(b)
	if r.pending >= releaseBatch {
		r.flushLocked()
	}
}

func (r *releaser) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
}

func (r *releaser) flushLocked() {
	sort.Slice(r.spans, func(i, j int) bool { return r.spans[i].start < r.spans[j].start })
	page := uintptr(os.Getpagesize())
	var cur span
	release := func(s span) {
		start := (s.start + page - 1) &^ (page - 1) // whole pages inside
		stop := s.end &^ (page - 1)
		if stop > start && inVlog(s.start, s.end) {
			q := unsafe.Add(s.p, start-s.start)
			unix.Madvise(unsafe.Slice((*byte)(q), stop-start), unix.MADV_DONTNEED)
		}
	}
	for i, s := range r.spans {
		switch {
		case i == 0:
			cur = s
		case s.start <= cur.end+page:
			cur.end = max(cur.end, s.end) // adjacent: one call
		default:
			release(cur)
			cur = s
		}
	}
	if len(r.spans) > 0 {
		release(cur)
	}
	r.spans, r.pending = r.spans[:0], 0
}

// inVlog reports whether [addr, end) lies in one .vlog mapping, reading
// /proc/self/maps again when the range is in none it knows (Badger has
// mapped a new value log file since).
func inVlog(addr, end uintptr) bool {
	vlogMaps.Lock()
	defer vlogMaps.Unlock()
	if find(vlogMaps.regions, addr, end) {
		return true
	}
	vlogMaps.regions = readVlogMaps()
	return find(vlogMaps.regions, addr, end)
}

func find(rs []region, addr, end uintptr) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end > addr })
	return i < len(rs) && rs[i].start <= addr && end <= rs[i].end
}

func readVlogMaps() []region {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var rs []region
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasSuffix(line, ".vlog") {
			continue
		}
		span, _, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(span, "-")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(lo, 16, 64)
		e, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil {
			rs = append(rs, region{uintptr(s), uintptr(e)})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].start < rs[j].start })
	return rs
}

// releaseAll drops our mapping of every .vlog page: after Badger's open-time
// checks, which read the last value log file through its mapping, and now
// and then while writing, which leaves what was written mapped. The value
// logs are MAP_SHARED, so dirty pages stay in the page cache to be written
// back; nothing is lost.
func releaseAll() {
	vlogMaps.Lock()
	vlogMaps.regions = readVlogMaps()
	rs := append([]region(nil), vlogMaps.regions...)
	vlogMaps.Unlock()
	for _, r := range rs {
		unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_DONTNEED)
	}
}
