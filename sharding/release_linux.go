//go:build linux

package sharding

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

func releaseMapped(b []byte) {
	if len(b) < releaseThreshold {
		return
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := addr + uintptr(len(b))
	if !inVlog(addr, end) {
		return
	}
	page := uintptr(os.Getpagesize())
	start := (addr + page - 1) &^ (page - 1) // whole pages inside the value
	stop := end &^ (page - 1)
	if stop <= start {
		return
	}
	unix.Madvise(b[start-addr:stop-addr], unix.MADV_DONTNEED)
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
