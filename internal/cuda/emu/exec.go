//go:build linux

package emu

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"unsafe"
)

// Thread states.
const (
	stReady uint8 = iota
	stBarrier
	stExited
	stFault
)

// thread is one CUDA thread: its registers and where it stands.
type thread struct {
	regs  []uint64
	pc    int32
	state uint8
	id    int32 // linear index in the block
	// exitPC is where an exited thread left (for barrier errors).
	exitPC int32
}

// raceWord is what racecheck knows of one 4-byte word of shared memory in
// the current barrier interval: its last writer and its readers (the first
// two distinct ones), with the instructions they used. A field whose
// interval is not the current one is stale.
type raceWord struct {
	wIntv, rIntv  uint32
	writer, wPC   int32
	reader, rPC   int32
	reader2, r2PC int32
	multiple      bool
}

// worker runs blocks of one launch, one at a time: the state of one
// streaming multiprocessor.
type worker struct {
	l       *launch
	k       *Kernel
	code    []inst
	threads []thread
	regs    []uint64 // every thread's registers, end to end
	shared  []byte
	race    []raceWord
	// interval numbers the barrier intervals of this worker's blocks;
	// race entries of other intervals are stale.
	interval uint32
	block    [3]uint32
	order    []int32
	rng      rng
	// last is the allocation the previous global access hit.
	last  *allocation
	fault *Error
	// steps counts the instructions run, for Driver.Instructions.
	steps uint64
}

// empty is the allocation a worker starts from: it holds no address.
var empty = &allocation{}

// newWorker returns a worker for l: one its kernel used before when there
// is one of the right size (register files of a few megabytes are worth
// keeping), else a new one.
func newWorker(l *launch) *worker {
	k := l.k
	n := 1
	if k.barriers {
		// Threads wait for each other at barriers: each needs its own
		// registers. Without barriers one set serves every thread in turn.
		n = l.threads
	}
	w, _ := k.workers.Get().(*worker)
	if w == nil || len(w.threads) != n || len(w.order) != l.threads || len(w.shared) != k.SharedBytes+l.dynShared {
		w = &worker{k: k, code: k.code, threads: make([]thread, n), regs: make([]uint64, n*k.nslots),
			shared: make([]byte, k.SharedBytes+l.dynShared), race: make([]raceWord, (k.SharedBytes+l.dynShared+3)/4),
			order: make([]int32, l.threads)}
		for i := range w.threads {
			r := w.regs[i*k.nslots : (i+1)*k.nslots]
			w.threads[i].regs = r
			copy(r[int(k.params)+len(k.Params):], k.consts)
		}
	}
	w.l, w.last, w.fault, w.steps = l, empty, nil, 0
	for i := range w.threads {
		r := w.threads[i].regs
		r[k.specials+spNtidX], r[k.specials+spNtidY], r[k.specials+spNtidZ] = uint64(l.block[0]), uint64(l.block[1]), uint64(l.block[2])
		r[k.specials+spNctaidX], r[k.specials+spNctaidY], r[k.specials+spNctaidZ] = uint64(l.grid[0]), uint64(l.grid[1]), uint64(l.grid[2])
		copy(r[k.params:], l.params)
	}
	return w
}

// release gives w back to its kernel for the next launch.
func (w *worker) release() {
	w.l, w.last = nil, nil
	w.k.workers.Put(w)
}

// tid returns the coordinates of linear thread i.
func (w *worker) tid(i int32) [3]uint32 {
	b := w.l.block
	u := uint32(i)
	return [3]uint32{u % b[0], u / b[0] % b[1], u / (b[0] * b[1])}
}

func (w *worker) setTid(t *thread, i int32) {
	c := w.tid(i)
	s := w.k.specials
	t.regs[s+spTidX], t.regs[s+spTidY], t.regs[s+spTidZ] = uint64(c[0]), uint64(c[1]), uint64(c[2])
	t.id, t.pc, t.state = i, 0, stReady
}

// runBlock runs one block to its end: every thread until it exits, with
// barriers releasing when every thread has reached them. Threads run one
// at a time, in a random order drawn for each barrier interval.
func (w *worker) runBlock(b [3]uint32, seed uint64) *Error {
	w.block = b
	w.rng = newRNG(seed)
	for i := range w.shared {
		w.shared[i] = poison
	}
	w.interval++
	for i := range w.threads {
		r := w.threads[i].regs
		s := w.k.specials
		r[s+spCtaidX], r[s+spCtaidY], r[s+spCtaidZ] = uint64(b[0]), uint64(b[1]), uint64(b[2])
	}
	n := int32(w.l.threads)
	for i := range n {
		w.order[i] = i
	}
	w.rng.shuffle(w.order)
	if !w.k.barriers {
		t := &w.threads[0]
		for _, i := range w.order {
			w.setTid(t, i)
			if w.run(t) == stFault {
				return w.fault
			}
		}
		return nil
	}
	for i := range n {
		w.setTid(&w.threads[i], i)
	}
	for {
		for _, i := range w.order {
			t := &w.threads[i]
			if t.state != stReady {
				continue
			}
			switch w.run(t) {
			case stFault:
				return w.fault
			case stExited:
				t.exitPC = t.pc
			}
		}
		// Every thread is at a barrier or gone.
		var at, gone []int32
		for i := range n {
			if w.threads[i].state == stBarrier {
				at = append(at, i)
			} else {
				gone = append(gone, i)
			}
		}
		if len(at) == 0 {
			return nil
		}
		if len(gone) > 0 {
			t, e := &w.threads[at[0]], &w.threads[gone[0]]
			return w.errAt(t, ErrLaunchFailed, t.pc-1, fmt.Sprintf("bar.sync waits for all %d threads of the block, but %d of them exited without reaching it (thread %s left at %s)",
				n, len(gone), coords(w.tid(e.id)), w.where(e.exitPC)))
		}
		pc := w.threads[at[0]].pc
		for _, i := range at {
			if t := &w.threads[i]; t.pc != pc {
				return w.errAt(t, ErrLaunchFailed, t.pc-1, fmt.Sprintf("divergent barrier: thread %s waits at %s, thread %s at %s",
					coords(w.tid(int32(at[0]))), w.where(pc-1), coords(w.tid(i)), w.where(t.pc-1)))
			}
		}
		for _, i := range at {
			w.threads[i].state = stReady
		}
		w.interval++
		w.rng.shuffle(w.order)
	}
}

func coords(c [3]uint32) string { return fmt.Sprintf("(%d,%d,%d)", c[0], c[1], c[2]) }

// where names instruction pc: file:line and its text.
func (w *worker) where(pc int32) string {
	line := w.k.lines[pc]
	return fmt.Sprintf("%s:%d (%s)", w.k.mod.Name, line, w.k.mod.line(line))
}

// errAt makes the fault of thread t at instruction pc.
func (w *worker) errAt(t *thread, code Result, pc int32, msg string) *Error {
	return errorf(code, "kernel %s, block %s, thread %s, at %s: %s", w.k.Name, coords(w.block), coords(w.tid(t.id)), w.where(pc), msg)
}

func (w *worker) fail(t *thread, code Result, pc int32, format string, args ...any) uint8 {
	w.fault = w.errAt(t, code, pc, fmt.Sprintf(format, args...))
	t.state = stFault
	return stFault
}

// global returns the n bytes at addr in device memory, checked against the
// allocation they fall in, or nil after recording the fault.
func (w *worker) global(t *thread, pc int32, addr uint64, n uint64, store bool) []byte {
	a := w.last
	off := addr - a.base
	if off < uint64(len(a.mem)) && uint64(len(a.mem))-off >= n && addr&(n-1) == 0 && !a.freed.Load() {
		return a.mem[off : off+n : off+n]
	}
	return w.globalSlow(t, pc, addr, n, store)
}

func (w *worker) globalSlow(t *thread, pc int32, addr uint64, n uint64, store bool) []byte {
	what := "load"
	if store {
		what = "store"
	}
	if addr&(n-1) != 0 {
		w.fail(t, ErrMisalignedAddress, pc, "%d-byte %s at %#x, which is not a multiple of %d", n, what, addr, n)
		return nil
	}
	mem := w.l.mem
	a := mem.find(addr)
	if a == nil || uint64(len(a.mem))-(addr-a.base) < n {
		w.fail(t, ErrIllegalAddress, pc, "%d-byte %s at %#x out of bounds: %s", n, what, addr, mem.describe(addr, int64(n)))
		return nil
	}
	w.last = a
	off := addr - a.base
	return a.mem[off : off+n : off+n]
}

// sharedAt returns the n bytes at addr in the block's shared memory after
// racecheck: a read of a word another thread wrote in the same barrier
// interval, or a write to a word another thread read or wrote in it, is a
// fault. nil after recording the fault.
func (w *worker) sharedAt(t *thread, pc int32, addr uint32, n uint32, store bool) []byte {
	if uint64(addr)+uint64(n) > uint64(len(w.shared)) {
		w.fail(t, ErrIllegalAddress, pc, "%d-byte shared-memory access at %s, past the block's %d bytes", n, w.sharedName(addr), len(w.shared))
		return nil
	}
	if addr&(n-1) != 0 {
		w.fail(t, ErrMisalignedAddress, pc, "%d-byte shared-memory access at %s, which is not a multiple of %d", n, w.sharedName(addr), n)
		return nil
	}
	iv := w.interval
	for word := addr >> 2; word <= (addr+n-1)>>2; word++ {
		e := &w.race[word]
		if store {
			if e.wIntv == iv && e.writer != t.id {
				w.raceFault(t, pc, word, "writes", "written", e.writer, e.wPC)
				return nil
			}
			if e.rIntv == iv && (e.reader != t.id || e.multiple) {
				other, opc := e.reader, e.rPC
				if other == t.id {
					other, opc = e.reader2, e.r2PC
				}
				w.raceFault(t, pc, word, "writes", "read", other, opc)
				return nil
			}
			e.wIntv, e.writer, e.wPC = iv, t.id, pc
			continue
		}
		if e.wIntv == iv && e.writer != t.id {
			w.raceFault(t, pc, word, "reads", "written", e.writer, e.wPC)
			return nil
		}
		switch {
		case e.rIntv != iv:
			e.rIntv, e.reader, e.rPC, e.multiple = iv, t.id, pc, false
		case e.reader != t.id && !e.multiple:
			e.reader2, e.r2PC, e.multiple = t.id, pc, true
		}
	}
	return w.shared[addr : addr+n : addr+n]
}

func (w *worker) raceFault(t *thread, pc int32, word uint32, does, done string, other, opc int32) {
	w.fail(t, ErrLaunchFailed, pc, "shared-memory race: thread %s %s %s, which thread %s %s at %s in the same barrier interval (no bar.sync between them)",
		coords(w.tid(t.id)), does, w.sharedName(word*4), coords(w.tid(other)), done, w.where(opc))
}

// mangledLocal is the name nvcc gives a function's static __shared__
// variable: _ZZ<function>E<len><name>.
var mangledLocal = regexp.MustCompile(`E(\d+)([A-Za-z_]\w*)$`)

// sharedName names byte addr of shared memory: the variable and offset.
func (w *worker) sharedName(addr uint32) string {
	for _, v := range w.k.Shared {
		if int(addr) >= v.Offset && int(addr) < v.Offset+v.Size {
			name := v.Name
			if m := mangledLocal.FindStringSubmatch(name); m != nil {
				if l, _ := strconv.Atoi(m[1]); l == len(m[2]) {
					name = m[2] + " (" + v.Name + ")"
				}
			}
			return fmt.Sprintf("byte %d of %s", int(addr)-v.Offset, name)
		}
	}
	return fmt.Sprintf("shared byte %d (dynamic shared memory)", addr)
}

func f32(v uint64) float32  { return math.Float32frombits(uint32(v)) }
func f64(v uint64) float64  { return math.Float64frombits(v) }
func u32f(f float32) uint64 { return uint64(math.Float32bits(f)) }
func u64f(f float64) uint64 { return math.Float64bits(f) }

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// run runs thread t until it reaches a barrier, exits or faults.
func (w *worker) run(t *thread) uint8 {
	code, r := w.code, unsafe.Pointer(unsafe.SliceData(t.regs))
	pc := t.pc
	branches := 0
	steps := uint64(0)
	defer func() { w.steps += steps }()
	for {
		in := &code[pc]
		pc++
		steps++
		if in.pred >= 0 && (*slot(r, in.pred) != 0) == in.predNeg {
			continue
		}
		switch in.op {
		case opExit:
			t.pc, t.state = pc-1, stExited
			return stExited
		case opBra:
			pc = int32(in.imm)
			if branches++; branches&(1<<20-1) == 0 && w.l.stop.Load() {
				w.fault, t.state = errStopped, stFault
				return stFault
			}
		case opBar:
			t.pc, t.state = pc, stBarrier
			return stBarrier
		case opMov, opCvta:
			*slot(r, in.d) = *slot(r, in.a)
		case opNotPred:
			*slot(r, in.d) = *slot(r, in.a) ^ 1
		case opPack64:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a))) | *slot(r, in.b)<<32
		case opUnpack64:
			v := *slot(r, in.a)
			*slot(r, in.d), *slot(r, in.c) = uint64(uint32(v)), v>>32
		case opPack32:
			*slot(r, in.d) = uint64(uint16(*slot(r, in.a))) | uint64(uint16(*slot(r, in.b)))<<16
		case opUnpack32:
			v := uint32(*slot(r, in.a))
			*slot(r, in.d), *slot(r, in.c) = uint64(uint16(v)), uint64(v>>16)
		case opSelp:
			if *slot(r, in.c) != 0 {
				*slot(r, in.d) = *slot(r, in.a)
			} else {
				*slot(r, in.d) = *slot(r, in.b)
			}

		case opAdd32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a)) + uint32(*slot(r, in.b)))
		case opSub32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a)) - uint32(*slot(r, in.b)))
		case opMul32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a)) * uint32(*slot(r, in.b)))
		case opMad32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a))*uint32(*slot(r, in.b)) + uint32(*slot(r, in.c)))
		case opMulWideS32:
			*slot(r, in.d) = uint64(int64(int32(*slot(r, in.a))) * int64(int32(*slot(r, in.b))))
		case opMulWideU32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a))) * uint64(uint32(*slot(r, in.b)))
		case opDivS32, opRemS32:
			x, y := int32(*slot(r, in.a)), int32(*slot(r, in.b))
			if y == 0 {
				return w.fail(t, ErrLaunchFailed, pc-1, "integer division by zero (%d / 0)", x)
			}
			if in.op == opDivS32 {
				*slot(r, in.d) = uint64(uint32(x / y))
			} else {
				*slot(r, in.d) = uint64(uint32(x % y))
			}
		case opDivU32, opRemU32:
			x, y := uint32(*slot(r, in.a)), uint32(*slot(r, in.b))
			if y == 0 {
				return w.fail(t, ErrLaunchFailed, pc-1, "integer division by zero (%d / 0)", x)
			}
			if in.op == opDivU32 {
				*slot(r, in.d) = uint64(x / y)
			} else {
				*slot(r, in.d) = uint64(x % y)
			}
		case opMinS32:
			*slot(r, in.d) = uint64(uint32(min(int32(*slot(r, in.a)), int32(*slot(r, in.b)))))
		case opMaxS32:
			*slot(r, in.d) = uint64(uint32(max(int32(*slot(r, in.a)), int32(*slot(r, in.b)))))
		case opMinU32:
			*slot(r, in.d) = uint64(min(uint32(*slot(r, in.a)), uint32(*slot(r, in.b))))
		case opMaxU32:
			*slot(r, in.d) = uint64(max(uint32(*slot(r, in.a)), uint32(*slot(r, in.b))))
		case opNeg32:
			*slot(r, in.d) = uint64(uint32(-int32(*slot(r, in.a))))
		case opAbs32:
			x := int32(*slot(r, in.a))
			if x < 0 {
				x = -x
			}
			*slot(r, in.d) = uint64(uint32(x))
		case opShl32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a)) << uint32(*slot(r, in.b)))
		case opShrS32:
			*slot(r, in.d) = uint64(uint32(int32(*slot(r, in.a)) >> uint32(*slot(r, in.b))))
		case opShrU32:
			*slot(r, in.d) = uint64(uint32(*slot(r, in.a)) >> uint32(*slot(r, in.b)))

		case opAdd64:
			*slot(r, in.d) = *slot(r, in.a) + *slot(r, in.b)
		case opSub64:
			*slot(r, in.d) = *slot(r, in.a) - *slot(r, in.b)
		case opMul64:
			*slot(r, in.d) = *slot(r, in.a) * *slot(r, in.b)
		case opMad64:
			*slot(r, in.d) = *slot(r, in.a)**slot(r, in.b) + *slot(r, in.c)
		case opDivS64, opRemS64:
			x, y := int64(*slot(r, in.a)), int64(*slot(r, in.b))
			if y == 0 {
				return w.fail(t, ErrLaunchFailed, pc-1, "integer division by zero (%d / 0)", x)
			}
			if in.op == opDivS64 {
				*slot(r, in.d) = uint64(x / y)
			} else {
				*slot(r, in.d) = uint64(x % y)
			}
		case opDivU64, opRemU64:
			x, y := *slot(r, in.a), *slot(r, in.b)
			if y == 0 {
				return w.fail(t, ErrLaunchFailed, pc-1, "integer division by zero (%d / 0)", x)
			}
			if in.op == opDivU64 {
				*slot(r, in.d) = x / y
			} else {
				*slot(r, in.d) = x % y
			}
		case opMinS64:
			*slot(r, in.d) = uint64(min(int64(*slot(r, in.a)), int64(*slot(r, in.b))))
		case opMaxS64:
			*slot(r, in.d) = uint64(max(int64(*slot(r, in.a)), int64(*slot(r, in.b))))
		case opMinU64:
			*slot(r, in.d) = min(*slot(r, in.a), *slot(r, in.b))
		case opMaxU64:
			*slot(r, in.d) = max(*slot(r, in.a), *slot(r, in.b))
		case opNeg64:
			*slot(r, in.d) = -*slot(r, in.a)
		case opAbs64:
			x := int64(*slot(r, in.a))
			if x < 0 {
				x = -x
			}
			*slot(r, in.d) = uint64(x)
		case opShl64:
			*slot(r, in.d) = *slot(r, in.a) << uint32(*slot(r, in.b))
		case opShrS64:
			*slot(r, in.d) = uint64(int64(*slot(r, in.a)) >> uint32(*slot(r, in.b)))
		case opShrU64:
			*slot(r, in.d) = *slot(r, in.a) >> uint32(*slot(r, in.b))

		case opAnd:
			*slot(r, in.d) = *slot(r, in.a) & *slot(r, in.b)
		case opOr:
			*slot(r, in.d) = *slot(r, in.a) | *slot(r, in.b)
		case opXor:
			*slot(r, in.d) = *slot(r, in.a) ^ *slot(r, in.b)
		case opNot:
			*slot(r, in.d) = ^*slot(r, in.a)

		case opSetpS16:
			*slot(r, in.d) = b2u(compare(in.cmp, int16(*slot(r, in.a)), int16(*slot(r, in.b))))
		case opSetpU16:
			*slot(r, in.d) = b2u(compare(in.cmp, uint16(*slot(r, in.a)), uint16(*slot(r, in.b))))
		case opSetpS32:
			*slot(r, in.d) = b2u(compare(in.cmp, int32(*slot(r, in.a)), int32(*slot(r, in.b))))
		case opSetpU32:
			*slot(r, in.d) = b2u(compare(in.cmp, uint32(*slot(r, in.a)), uint32(*slot(r, in.b))))
		case opSetpS64:
			*slot(r, in.d) = b2u(compare(in.cmp, int64(*slot(r, in.a)), int64(*slot(r, in.b))))
		case opSetpU64:
			*slot(r, in.d) = b2u(compare(in.cmp, *slot(r, in.a), *slot(r, in.b)))
		case opSetpF32:
			*slot(r, in.d) = b2u(compareFloat(in.cmp, float64(f32(*slot(r, in.a))), float64(f32(*slot(r, in.b)))))
		case opSetpF64:
			*slot(r, in.d) = b2u(compareFloat(in.cmp, f64(*slot(r, in.a)), f64(*slot(r, in.b))))

		// Go rounds every float32 and float64 operation to nearest even;
		// the explicit conversions keep a compiler from fusing a multiply
		// and an add (Go may on some architectures).
		case opAddF32:
			*slot(r, in.d) = u32f(float32(f32(*slot(r, in.a)) + f32(*slot(r, in.b))))
		case opSubF32:
			*slot(r, in.d) = u32f(float32(f32(*slot(r, in.a)) - f32(*slot(r, in.b))))
		case opMulF32:
			*slot(r, in.d) = u32f(float32(f32(*slot(r, in.a)) * f32(*slot(r, in.b))))
		case opDivF32:
			*slot(r, in.d) = u32f(float32(f32(*slot(r, in.a)) / f32(*slot(r, in.b))))
		case opFmaF32:
			*slot(r, in.d) = u32f(fma32(f32(*slot(r, in.a)), f32(*slot(r, in.b)), f32(*slot(r, in.c))))
		case opNegF32:
			*slot(r, in.d) = *slot(r, in.a) ^ 1<<31
		case opAbsF32:
			*slot(r, in.d) = *slot(r, in.a) &^ (1 << 31) & 0xffffffff
		case opMinF32:
			*slot(r, in.d) = u32f(fmin(f32(*slot(r, in.a)), f32(*slot(r, in.b))))
		case opMaxF32:
			*slot(r, in.d) = u32f(fmax(f32(*slot(r, in.a)), f32(*slot(r, in.b))))
		case opSqrtF32:
			// A float64 square root rounded to float32 is the correctly
			// rounded float32 one (53 ≥ 2·24+2 bits).
			*slot(r, in.d) = u32f(float32(math.Sqrt(float64(f32(*slot(r, in.a))))))
		case opRcpF32:
			*slot(r, in.d) = u32f(float32(1 / f32(*slot(r, in.a))))

		case opAddF64:
			*slot(r, in.d) = u64f(float64(f64(*slot(r, in.a)) + f64(*slot(r, in.b))))
		case opSubF64:
			*slot(r, in.d) = u64f(float64(f64(*slot(r, in.a)) - f64(*slot(r, in.b))))
		case opMulF64:
			*slot(r, in.d) = u64f(float64(f64(*slot(r, in.a)) * f64(*slot(r, in.b))))
		case opDivF64:
			*slot(r, in.d) = u64f(float64(f64(*slot(r, in.a)) / f64(*slot(r, in.b))))
		case opFmaF64:
			*slot(r, in.d) = u64f(math.FMA(f64(*slot(r, in.a)), f64(*slot(r, in.b)), f64(*slot(r, in.c))))
		case opNegF64:
			*slot(r, in.d) = *slot(r, in.a) ^ 1<<63
		case opAbsF64:
			*slot(r, in.d) = *slot(r, in.a) &^ (1 << 63)
		case opMinF64:
			*slot(r, in.d) = u64f(fmin(f64(*slot(r, in.a)), f64(*slot(r, in.b))))
		case opMaxF64:
			*slot(r, in.d) = u64f(fmax(f64(*slot(r, in.a)), f64(*slot(r, in.b))))
		case opSqrtF64:
			*slot(r, in.d) = u64f(math.Sqrt(f64(*slot(r, in.a))))
		case opRcpF64:
			*slot(r, in.d) = u64f(float64(1 / f64(*slot(r, in.a))))
		case opRcpApproxFtzF64:
			*slot(r, in.d) = u64f(rcpApproxFtz(f64(*slot(r, in.a))))

		case opExt:
			v := extend(*slot(r, in.a), in.imm&0xff)
			*slot(r, in.d) = extend(v, in.imm>>8)
		case opCvtF32F64:
			*slot(r, in.d) = u32f(float32(f64(*slot(r, in.a))))
		case opCvtF64F32:
			*slot(r, in.d) = u64f(float64(f32(*slot(r, in.a))))
		case opCvtF16F32:
			*slot(r, in.d) = uint64(f32ToF16(f32(*slot(r, in.a))))
		case opCvtF32F16:
			*slot(r, in.d) = u32f(f16ToF32(uint16(*slot(r, in.a))))
		case opCvtF32S:
			*slot(r, in.d) = u32f(float32(int64(extend(*slot(r, in.a), in.imm))))
		case opCvtF32U:
			*slot(r, in.d) = u32f(float32(extend(*slot(r, in.a), in.imm)))
		case opCvtF64S:
			*slot(r, in.d) = u64f(float64(int64(extend(*slot(r, in.a), in.imm))))
		case opCvtF64U:
			*slot(r, in.d) = u64f(float64(extend(*slot(r, in.a), in.imm)))
		case opCvtIF32:
			*slot(r, in.d) = floatToInt(float64(f32(*slot(r, in.a))), in.cmp, in.imm)
		case opCvtIF64:
			*slot(r, in.d) = floatToInt(f64(*slot(r, in.a)), in.cmp, in.imm)

		case opLdG8u, opLdG8s, opLdG16u, opLdG16s, opLdG32u, opLdG32s, opLdG64:
			n := loadSize[in.op-opLdG8u]
			m := w.global(t, pc-1, *slot(r, in.a)+uint64(in.imm), n, false)
			if m == nil {
				return stFault
			}
			*slot(r, in.d) = load(m, in.op-opLdG8u)
		case opLdS8u, opLdS8s, opLdS16u, opLdS16s, opLdS32u, opLdS32s, opLdS64:
			n := loadSize[in.op-opLdS8u]
			m := w.sharedAt(t, pc-1, uint32(*slot(r, in.a))+uint32(in.imm), uint32(n), false)
			if m == nil {
				return stFault
			}
			*slot(r, in.d) = load(m, in.op-opLdS8u)
		case opStG8, opStG16, opStG32, opStG64:
			n := uint64(1) << (in.op - opStG8)
			m := w.global(t, pc-1, *slot(r, in.a)+uint64(in.imm), n, true)
			if m == nil {
				return stFault
			}
			store(m, *slot(r, in.b))
		case opStS8, opStS16, opStS32, opStS64:
			n := uint32(1) << (in.op - opStS8)
			m := w.sharedAt(t, pc-1, uint32(*slot(r, in.a))+uint32(in.imm), n, true)
			if m == nil {
				return stFault
			}
			store(m, *slot(r, in.b))
		default:
			return w.fail(t, ErrLaunchFailed, pc-1, "opcode %d has no implementation (an emulator bug)", in.op)
		}
	}
}

// slot is register i of the register file at r. Decoding made every slot
// an instruction names smaller than the kernel's nslots, and every
// thread's file has nslots registers, so the interpreter reads and writes
// them without bounds checks.
func slot(r unsafe.Pointer, i int32) *uint64 { return (*uint64)(unsafe.Add(r, uintptr(i)<<3)) }

// loadSize is the width of the loads in opLdG8u … opLdG64 order.
var loadSize = [7]uint64{1, 1, 2, 2, 4, 4, 8}

// load reads m (1, 2, 4 or 8 bytes, little-endian) extended as load kind k
// (0 u8, 1 s8, 2 u16, 3 s16, 4 u32, 5 s32, 6 64-bit) says.
func load(m []byte, k opcode) uint64 {
	switch k {
	case 0:
		return uint64(m[0])
	case 1:
		return uint64(int64(int8(m[0])))
	case 2:
		return uint64(binary.LittleEndian.Uint16(m))
	case 3:
		return uint64(int64(int16(binary.LittleEndian.Uint16(m))))
	case 4:
		return uint64(binary.LittleEndian.Uint32(m))
	case 5:
		return uint64(int64(int32(binary.LittleEndian.Uint32(m))))
	}
	return binary.LittleEndian.Uint64(m)
}

// store writes the low len(m) bytes of v into m.
func store(m []byte, v uint64) {
	switch len(m) {
	case 1:
		m[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(m, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(m, uint32(v))
	default:
		binary.LittleEndian.PutUint64(m, v)
	}
}

func compare[T int16 | uint16 | int32 | uint32 | int64 | uint64](c uint8, x, y T) bool {
	switch c {
	case cmpEq:
		return x == y
	case cmpNe:
		return x != y
	case cmpLt:
		return x < y
	case cmpLe:
		return x <= y
	case cmpGt:
		return x > y
	}
	return x >= y
}

// compareFloat is setp on floats: the ordered comparisons are false when
// either operand is NaN, the unordered ones (…u) true.
func compareFloat(c uint8, x, y float64) bool {
	nan := x != x || y != y
	switch c {
	case cmpEq:
		return x == y
	case cmpNe:
		return !nan && x != y
	case cmpLt:
		return x < y
	case cmpLe:
		return x <= y
	case cmpGt:
		return x > y
	case cmpGe:
		return x >= y
	case cmpEqu:
		return nan || x == y
	case cmpNeu:
		return x != y
	case cmpLtu:
		return nan || x < y
	case cmpLeu:
		return nan || x <= y
	case cmpGtu:
		return nan || x > y
	case cmpGeu:
		return nan || x >= y
	case cmpNum:
		return !nan
	}
	return nan
}

// fmin and fmax are PTX's min and max: a NaN operand gives the other one
// (NaN only when both are), and -0 is below +0.
func fmin[T float32 | float64](x, y T) T {
	switch {
	case x != x:
		return y
	case y != y:
		return x
	case x == y:
		if math.Signbit(float64(x)) {
			return x
		}
		return y
	case x < y:
		return x
	}
	return y
}

func fmax[T float32 | float64](x, y T) T {
	switch {
	case x != x:
		return y
	case y != y:
		return x
	case x == y:
		if math.Signbit(float64(x)) {
			return y
		}
		return x
	case x > y:
		return x
	}
	return y
}

// rcpApproxFtz is rcp.approx.ftz.f64, emulated exactly: subnormal inputs
// and results flush to zero of the same sign, and the reciprocal is the
// correctly rounded one. A GPU's is an approximation good to about 2^-23
// that the code around it refines with Newton steps (as nvcc's log does),
// so the refined result can differ from a GPU's in its last bit.
func rcpApproxFtz(x float64) float64 {
	if x != 0 && math.Abs(x) < 0x1p-1022 {
		x = math.Copysign(0, x)
	}
	r := 1 / x
	if r != 0 && math.Abs(r) < 0x1p-1022 {
		r = math.Copysign(0, r)
	}
	return r
}

// floatToInt is cvt.r?i.<int>.<float>: x rounded by mode, saturated to the
// integer type code names (its width, negative for signed); NaN gives 0.
func floatToInt(x float64, mode uint8, code int64) uint64 {
	if x != x {
		return 0
	}
	switch mode {
	case roundZero:
		x = math.Trunc(x)
	case roundNearest:
		x = math.RoundToEven(x)
	case roundDown:
		x = math.Floor(x)
	case roundUp:
		x = math.Ceil(x)
	}
	if code < 0 {
		bits := uint(-code)
		lo, hi := -math.Ldexp(1, int(bits-1)), math.Ldexp(1, int(bits-1))
		switch {
		case x <= lo:
			return uint64(int64(-1) << (bits - 1))
		case x >= hi:
			return uint64(1)<<(bits-1) - 1
		}
		return uint64(int64(x))
	}
	bits := uint(code)
	hi := math.Ldexp(1, int(bits))
	switch {
	case x <= 0:
		return 0
	case x >= hi:
		if bits == 64 {
			return math.MaxUint64
		}
		return uint64(1)<<bits - 1
	}
	return uint64(x)
}
