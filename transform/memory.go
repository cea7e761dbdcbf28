package transform

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pipefeed/pipe/internal/sysmem"
)

// DefaultDecodeMemory is the process's decode memory budget unless the
// PIPE_DECODE_MEMORY environment variable or [SetDecodeMemory] asks for
// another, or the process's memory limit leaves less room (see
// [SetDecodeMemory]): 1 GiB. That holds any one image at
// [DefaultMaxPixels] (at most 976 MiB: a progressive 4:4:4 CMYK JPEG's
// coefficients and planes and the RGB result) and two progressive 4:2:0
// ones of 8192×8192 (480 MiB each) at once; ImageNet's photographs never
// reach it.
const DefaultDecodeMemory = 1 << 30

// ownBytes is how much memory of each kind, a decode's buffers and the
// window it decodes, a Decoder keeps for itself from one image to the next,
// outside the budget: 8 MiB holds a 2.8-megapixel window and the buffers of
// a 5-megapixel baseline JPEG, so a worker decoding ImageNet's photographs
// (a megapixel at most, mostly far less) never asks the budget for
// anything.
const ownBytes = 8 << 20

var (
	// room is what the process's memory limits left it as it started.
	room = sysmem.Least()
	// decodeMemory is the process's budget: PIPE_DECODE_MEMORY's, or
	// the default, fitted.
	decodeMemory = newBudget(budgetFromEnv())
)

// fit is the budget for n bytes asked: n, or half of what the process's
// memory limits left it as it started (less its threads' stacks under an
// address-space limit) where that is less.
func fit(n int64) int64 {
	if room.Limit == 0 {
		return n
	}
	return min(n, int64(min(usable()/2, math.MaxInt64)))
}

// usable is what the process's memory limits left it as it started, less
// the stacks of the threads it will start where the limit is ulimit -v.
func usable() uint64 {
	free := room.Free()
	return free - min(free, stackRoom())
}

// stackRoom is the address space the threads the runtime starts take
// under an address-space limit (ulimit -v), which counts each one's stack
// as it is reserved, not as it is touched: two threads a processor (one
// decoding in libjpeg or blocked, one of the collector's) and eight more,
// of sysmem.ThreadStack each. Under a cgroup's or the machine's limit a
// stack costs the
// few pages it touches, and nothing is set aside. It is read as the
// process starts, with GOMAXPROCS then: the cores, or what the
// environment asks.
func stackRoom() uint64 {
	if room.What != "ulimit -v" {
		return 0
	}
	return uint64(2*runtime.GOMAXPROCS(0)+8) * sysmem.ThreadStack()
}

// SetDecodeMemory asks for a decode memory budget of n bytes for the
// process (n ≤ 0: DefaultDecodeMemory) and returns the budget it
// replaces. The budget is n, or half of what the process's memory limit
// left it as it started where that is less: the least of the machine's
// available RAM, what its cgroup's memory limit (memory.max, and those of
// the cgroups above it) leaves, and what its address-space limit (ulimit
// -v) leaves, the Go runtime's reservations (about 1.2 GiB on
// linux/amd64) counted. The other half is for the rest of the process:
// the garbage collector lets the heap grow to twice what is live before
// it collects, and a decode's buffers are live; the pipeline's slabs, its
// threads' stacks and the files it reads. See [DescribeDecodeMemory].
//
// Every Decoder of the process shares the budget, so what decoding holds
// at once does not grow with the number of workers. A decode whose buffers
// or window would take more than a Decoder keeps for itself (8 MiB of
// each: the most it keeps is 16 MiB) takes that memory from the budget
// before allocating it, waiting, in turn with other such decodes, until
// the budget has room; the memory comes back when the decode is over (its
// buffers) or at the decoder's next call or Release (its window). An
// image needing more than the whole budget is not decoded: it is an
// [ErrOverBudget] error, a record that on_error=skip skips. So decoding
// holds at most the budget plus 16 MiB a Decoder (a worker). Buffers
// given back are kept, up to the budget, for the next large images,
// rather than left to the garbage collector. Photographs of the size
// ImageNet holds never reach the budget, so it costs the common case
// nothing; a folder of large photographs decoded whole on many cores may
// want a larger one.
//
// What the budget does not count: an image a caller passes to
// [Decoder.Decode] (the caller's), images the operations after the
// decode write (their outputs), and, once a PNG is decoded, the image Go's
// PNG decoder allocated for it, which the budget counts while it decodes
// but the garbage collector frees.
func SetDecodeMemory(n int64) int64 {
	if n <= 0 {
		n = DefaultDecodeMemory
	}
	return decodeMemory.setLimit(n)
}

// DecodeMemory returns the process's decode memory budget in bytes.
func DecodeMemory() int64 {
	decodeMemory.mu.Lock()
	defer decodeMemory.mu.Unlock()
	return decodeMemory.limit
}

// DescribeDecodeMemory says what the decode memory budget is and what
// chose it, for a run's summary: "1024 MiB; RAM of 24105 MiB left 22915
// MiB as the process started", or, where that limit chose it, "371 MiB,
// half of the 742 MiB that ulimit -v of 2048 MiB left as the process
// started (1024 MiB asked)".
func DescribeDecodeMemory() string {
	decodeMemory.mu.Lock()
	defer decodeMemory.mu.Unlock()
	return decodeMemory.describe()
}

// describe is DescribeDecodeMemory's text for b. Under b.mu.
func (b *budget) describe() string {
	switch {
	case room.Limit == 0:
		return fmt.Sprintf("%d MiB; no memory limit known", b.limit>>20)
	case b.limit < b.asked && stackRoom() > 0:
		return fmt.Sprintf("%d MiB, half of the %d MiB that %s of %d MiB left as the process started, less %d MiB for its threads' stacks (%d MiB asked)",
			b.limit>>20, room.Free()>>20, room.What, room.Limit>>20, min(stackRoom(), room.Free())>>20, b.asked>>20)
	case b.limit < b.asked:
		return fmt.Sprintf("%d MiB, half of the %d MiB that %s of %d MiB left as the process started (%d MiB asked)",
			b.limit>>20, room.Free()>>20, room.What, room.Limit>>20, b.asked>>20)
	}
	return fmt.Sprintf("%d MiB; %s of %d MiB left %d MiB as the process started", b.limit>>20, room.What, room.Limit>>20, room.Free()>>20)
}

// envErr is PIPE_DECODE_MEMORY's error, where it is set to what is not a
// size: see DecodeMemoryError.
var envErr error

// budgetFromEnv reads PIPE_DECODE_MEMORY: a number of bytes, with an
// optional K, M or G (powers of 1024). Unset, it is DefaultDecodeMemory;
// not such a size, too, and envErr says so.
func budgetFromEnv() int64 {
	v := os.Getenv("PIPE_DECODE_MEMORY")
	n, err := parseBytes(v)
	if err == nil && n <= 0 && strings.TrimSpace(v) != "" {
		err = fmt.Errorf("%q is not a positive size", v)
	}
	if err != nil {
		envErr = fmt.Errorf("PIPE_DECODE_MEMORY=%s: %w (want bytes, or a number and K, M or G, such as 512M or 2G)", v, err)
	}
	if err != nil || n <= 0 {
		return DefaultDecodeMemory
	}
	return n
}

// DecodeMemoryError reports a PIPE_DECODE_MEMORY that is not a size, which
// leaves the budget at its default: a pipeline that decodes refuses to run
// on it rather than run on a budget its user did not ask for.
func DecodeMemoryError() error { return envErr }

// parseBytes reads a size: digits, then optionally K, M or G (any case,
// with or without a trailing B or iB). "" is 0.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	shift := 0
	u := strings.ToUpper(s)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "B"), "I")
	switch {
	case strings.HasSuffix(u, "K"):
		shift = 10
	case strings.HasSuffix(u, "M"):
		shift = 20
	case strings.HasSuffix(u, "G"):
		shift = 30
	}
	if shift > 0 {
		u = u[:len(u)-1]
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n << shift, nil
}

// budget is memory shared by the decoders of the process: large buffers
// handed out and counted, taken back into a pool for reuse, and counted
// until the garbage collector has freed them once dropped, so that what
// it counts is address space the process holds.
type budget struct {
	mu   sync.Mutex
	wake sync.Cond
	// limit is the budget: asked, fitted (see fit).
	limit, asked int64
	// used is the bytes handed out, idle, and garbage; idle the buffers
	// given back, for the next large decodes.
	used int64
	idle [][]byte
	// garbage is buffers dropped from the pool and images Go's PNG
	// decoder made, until the collector frees them (a cleanup says so).
	garbage int64
	// dropped counts garbage made and collectedAt its value when a
	// waiting request last ran the collector, so that it runs once for
	// each.
	dropped, collectedAt uint64
	// Requests are served in the order they come (tickets), so that a
	// large one is not passed for ever by smaller ones.
	next, turn uint64
	peak       int64 // the most used has been, for the tests
}

// newBudget returns a budget of n bytes asked, fitted (see fit).
func newBudget(n int64) *budget {
	b := &budget{limit: fit(n), asked: n}
	b.wake.L = &b.mu
	return b
}

// setLimit makes the budget n bytes asked, fitted, and returns the one it
// replaces.
func (b *budget) setLimit(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.limit
	b.limit, b.asked = fit(n), n
	for len(b.idle) > 0 && b.used-b.garbage > n {
		b.discard(b.idle[0])
		b.idle = b.idle[1:]
	}
	b.wake.Broadcast()
	return old
}

// get waits its turn, then until the budget has room, and returns a
// buffer of at least n0 and one of at least n1 bytes (none for a size 0),
// with extra bytes counted beside them: memory a decode uses that is not
// in a buffer of pipe's (libjpeg's, Go's PNG decoder's). Everything a
// decode needs is asked for at once, so that no decode waits holding
// memory another waits for; and a request that does not fit waits only
// for memory handed out to decodes in progress, which end. A request for
// more than the whole budget is an ErrOverBudget error, at its turn.
func (b *budget) get(n0, n1 int, extra int64) (bufs [2][]byte, err error) {
	b.mu.Lock()
	t := b.next
	b.next++
	sizes := [2]int{n0, n1}
	var fresh [2]bool
	for {
		if b.turn == t {
			if need := requestSize(sizes, extra); need > b.limit {
				err = fmt.Errorf("%w: decoding it takes %d MiB, and the budget is %s", ErrOverBudget, (need+1<<20-1)>>20, b.describe())
				break
			}
			ok, collect := b.take(sizes, extra, &bufs, &fresh)
			if ok {
				break
			}
			if collect {
				// The room is garbage: free it before allocating more.
				b.collectedAt = b.dropped
				b.mu.Unlock()
				runtime.GC()
				b.mu.Lock()
				continue
			}
		}
		b.wake.Wait()
	}
	b.turn++
	b.wake.Broadcast()
	b.mu.Unlock()
	// Fresh buffers are made outside the lock: zeroing hundreds of
	// megabytes takes a while.
	for i, n := range sizes {
		if fresh[i] {
			bufs[i] = make([]byte, bufSize(n))
		}
	}
	return bufs, err
}

// requestSize is the least a request takes of the budget: fresh buffers
// of the sizes (rounded by bufSize) and the extra bytes.
func requestSize(sizes [2]int, extra int64) int64 {
	for _, n := range sizes {
		if n > 0 {
			extra += int64(bufSize(n))
		}
	}
	return extra
}

// bufSize rounds a fresh buffer's size up to a sixteenth of a power of
// two, so that the next image of about the same size can reuse it.
func bufSize(n int) int {
	step := 1 << max(0, bits.Len(uint(n))-4)
	return (n + step - 1) &^ (step - 1)
}

// take hands out what get asks for if it fits (ok): idle buffers reused
// (the smallest that hold each size) and fresh ones (marked in fresh, for
// the caller to make). Where it fits only once idle buffers not reused are
// dropped and the garbage is freed, it drops those and asks for a
// collection (collect, once for each garbage made), then waits for the
// cleanups; with nothing handed out it goes ahead instead of waiting, so
// that garbage something still holds waits for nobody.
func (b *budget) take(sizes [2]int, extra int64, bufs *[2][]byte, fresh *[2]bool) (ok, collect bool) {
	var pick [2][]byte
	var idle, reused, add int64
	for _, buf := range b.idle {
		idle += int64(cap(buf))
	}
	for i, n := range sizes {
		if n == 0 {
			continue
		}
		for _, buf := range b.idle {
			if cap(buf) >= n && !sameBuf(buf, pick[0]) && (pick[i] == nil || cap(buf) < cap(pick[i])) {
				pick[i] = buf
			}
		}
		if pick[i] != nil {
			reused += int64(cap(pick[i]))
		} else {
			add += int64(bufSize(n))
		}
	}
	picked := func(buf []byte) bool { return sameBuf(buf, pick[0]) || sameBuf(buf, pick[1]) }
	held := b.used - idle - b.garbage // handed out to decodes in progress
	need := held + reused + add + extra
	if b.used+add+extra > b.limit {
		if held > 0 && need > b.limit {
			return false, false // wait for decodes in progress to end
		}
		spare := idle - reused
		slices.SortFunc(b.idle, func(x, y []byte) int { return cap(x) - cap(y) })
		b.idle = slices.DeleteFunc(b.idle, func(buf []byte) bool {
			if picked(buf) || need+spare <= b.limit {
				return false
			}
			spare -= int64(cap(buf))
			b.discard(buf)
			return true
		})
		if b.garbage > 0 && b.collectedAt != b.dropped {
			return false, true
		}
		if held > 0 {
			return false, false // wait for the garbage's cleanups
		}
	}
	for i, n := range sizes {
		bufs[i], fresh[i] = pick[i], pick[i] == nil && n > 0
	}
	b.idle = slices.DeleteFunc(b.idle, picked)
	b.used += add + extra
	b.peak = max(b.peak, b.used)
	return true, false
}

// sameBuf reports whether x and y start at the same byte.
func sameBuf(x, y []byte) bool {
	return cap(x) > 0 && cap(y) > 0 && &x[:1][0] == &y[:1][0]
}

// put takes buf back into the pool, and extra bytes counted beside it.
// A buffer the pool has no room for (after an image that needed more than
// the budget) is dropped.
func (b *budget) put(buf []byte, extra int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= extra
	if cap(buf) > 0 {
		if b.used-b.garbage > b.limit {
			b.discard(buf)
		} else {
			b.idle = append(b.idle, buf[:cap(buf)])
		}
	}
	b.wake.Broadcast()
}

// discard drops buf, counted until the collector frees it. Under b.mu.
func (b *budget) discard(buf []byte) {
	n := int64(cap(buf))
	b.garbage += n
	b.dropped++
	runtime.AddCleanup(&buf[:1][0], b.collected, n)
}

// leave counts the n bytes of extra memory a decode used, which p (the
// start of it) holds, as garbage until the collector frees them.
func (b *budget) leave(p *byte, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.garbage += n
	b.dropped++
	runtime.AddCleanup(p, b.collected, n)
}

// collected is the cleanup of garbage of n bytes.
func (b *budget) collected(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.garbage -= n
	b.wake.Broadcast()
}

// lent is the budget's memory a Decoder holds between calls: the window
// of the image it decoded last. It is given back by the decoder's next
// call or Release, or, for a decoder dropped without, when the decoder is
// garbage collected (the buffer is then the garbage collector's, as a
// caller may still hold the image).
type lent struct{ buf []byte }

// lend records that l holds buf.
func (b *budget) lend(l *lent, buf []byte) {
	b.mu.Lock()
	l.buf = buf
	b.mu.Unlock()
}

// giveBack puts l's buffer back into the pool.
func (b *budget) giveBack(l *lent) {
	b.mu.Lock()
	buf := l.buf
	l.buf = nil
	b.mu.Unlock()
	if buf != nil {
		b.put(buf, 0)
	}
}

// forget drops l's buffer, whose decoder is gone: it is garbage once the
// images that may still point into it are.
func (b *budget) forget(l *lent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l.buf != nil {
		b.discard(l.buf)
		l.buf = nil
		b.wake.Broadcast()
	}
}

// newLent returns a lent record for d whose memory is forgotten when d is
// collected.
func newLent(d *Decoder) *lent {
	l := &lent{}
	runtime.AddCleanup(d, func(l *lent) { decodeMemory.forget(l) }, l)
	return l
}
