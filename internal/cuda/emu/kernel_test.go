//go:build linux

package emu

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// blockSum sums each block's slice of in into out[block] through a
// shared-memory tree, as the trainer's batch-norm kernels do. The
// comments mark lines the tests take out or change.
const blockSum = `.version 7.8
.target sm_80
.address_size 64

.visible .entry block_sum(
	.param .u64 block_sum_param_0,
	.param .u64 block_sum_param_1
)
.maxntid 64, 1, 1
{
	.reg .pred %p<3>;
	.reg .b32 %r<11>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<8>;
	.shared .align 4 .b8 _ZZ9block_sumE2sh[256];

	ld.param.u64 %rd1, [block_sum_param_0];
	ld.param.u64 %rd2, [block_sum_param_1];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	setp.ge.u32 %p1, %r1, 1000000; // EXIT
	@%p1 bra $L_done;
	mad.lo.s32 %r4, %r2, %r3, %r1;
	mul.wide.s32 %rd5, %r4, 4;
	add.s64 %rd6, %rd4, %rd5;
	ld.global.f32 %f1, [%rd6];
	shl.b32 %r5, %r1, 2;
	mov.u32 %r6, _ZZ9block_sumE2sh;
	add.s32 %r7, %r6, %r5;
	st.shared.f32 [%r7], %f1;
	bar.sync 0; // FIRST
	shr.u32 %r8, %r3, 1;
$L_loop:
	setp.ge.u32 %p1, %r1, %r8;
	@%p1 bra $L_skip;
	shl.b32 %r9, %r8, 2;
	add.s32 %r10, %r7, %r9;
	ld.shared.f32 %f2, [%r10];
	ld.shared.f32 %f3, [%r7];
	add.rn.f32 %f3, %f3, %f2;
	st.shared.f32 [%r7], %f3;
$L_skip:
	bar.sync 0; // LOOP
	shr.u32 %r8, %r8, 1;
	setp.ne.s32 %p2, %r8, 0;
	@%p2 bra $L_loop;
	setp.ne.s32 %p1, %r1, 0;
	@%p1 bra $L_done;
	ld.shared.f32 %f1, [%r6];
	mul.wide.u32 %rd7, %r2, 4;
	add.s64 %rd7, %rd3, %rd7;
	st.global.f32 [%rd7], %f1;
$L_done:
	ret;
}
`

// edit returns blockSum with the line marked tag replaced by with.
func edit(tag, with string) string {
	lines := strings.Split(blockSum, "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "// "+tag) {
			lines[i] = with
		}
	}
	return strings.Join(lines, "\n")
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func bytesOf(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// runBlockSum launches src over blocks·threads values 1, 2, 3, … and
// returns the block sums, or the error the stream reports.
func runBlockSum(t *testing.T, d *Driver, src string, blocks, threads, inValues int) ([]float32, error) {
	t.Helper()
	var sums []float32
	var runErr error
	on(t, d, 0, func(c *Context) {
		m, err := d.LoadModule("block_sum.ptx", src)
		if err != nil {
			t.Fatal(err)
		}
		fn := must[*Function](t)(m.Function("block_sum"))
		s := must[*Stream](t)(d.StreamCreate())
		in := make([]float32, inValues)
		for i := range in {
			in[i] = float32(i + 1)
		}
		pin := must[Ptr](t)(d.MemAlloc(int64(4 * len(in))))
		pout := must[Ptr](t)(d.MemAlloc(int64(4 * blocks)))
		if err := d.CopyHtoDAsync(pin, bytesOf(in), s); err != nil {
			t.Fatal(err)
		}
		if err := fn.Launch(Dim3{blocks, 1, 1}, Dim3{threads, 1, 1}, 0, s, pout, pin); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 4*blocks)
		if err := d.CopyDtoHAsync(out, pout, s); err != nil {
			runErr = err
			return
		}
		runErr = s.Synchronize()
		sums = f32s(out)
	})
	return sums, runErr
}

func TestBarrierReduction(t *testing.T) {
	d := newDriver(t)
	sums, err := runBlockSum(t, d, blockSum, 5, 64, 5*64)
	if err != nil {
		t.Fatal(err)
	}
	for b, got := range sums {
		lo, hi := 64*b+1, 64*b+64
		if want := float32((lo + hi) * 64 / 2); got != want {
			t.Errorf("block %d: sum %g, want %g", b, got, want)
		}
	}
}

// TestRaceDetected: without the barrier in the loop, a thread reads what
// another wrote in the same interval; racecheck names both and the word,
// whatever order the threads run in.
func TestRaceDetected(t *testing.T) {
	for seed := range uint64(4) {
		d, _ := New(Config{Devices: 1, Seed: seed})
		_, err := runBlockSum(t, d, edit("LOOP", ""), 2, 64, 128)
		if !errors.Is(err, ErrLaunchFailed) {
			t.Fatalf("seed %d: %v, want a race", seed, err)
		}
		msg := err.Error()
		for _, want := range []string{"kernel block_sum", "shared-memory race", "of sh (_ZZ9block_sumE2sh)", "block_sum.ptx:", "seed"} {
			if !strings.Contains(msg, want) {
				t.Errorf("seed %d: %q does not say %q", seed, msg, want)
			}
		}
		if seed == 0 {
			t.Log(msg)
		}
	}
}

// TestBarrierNotReachedByExitedThreads: threads that exit before a barrier
// the others wait at are an error, not a hang.
func TestBarrierNotReachedByExitedThreads(t *testing.T) {
	d := newDriver(t)
	_, err := runBlockSum(t, d, edit("EXIT", "\tsetp.ge.u32 %p1, %r1, 32;"), 1, 64, 64)
	if err == nil || !strings.Contains(err.Error(), "32 of them exited without reaching it") {
		t.Fatalf("%v, want the barrier reported", err)
	}
	t.Log(err)
}

// TestOutOfBounds: a load past the input stops the kernel with where it
// happened and the allocation it missed; the error sticks to the context.
func TestOutOfBounds(t *testing.T) {
	d := newDriver(t)
	_, err := runBlockSum(t, d, blockSum, 3, 64, 3*64-1)
	if !errors.Is(err, ErrIllegalAddress) {
		t.Fatalf("%v, want an illegal address", err)
	}
	for _, want := range []string{"kernel block_sum, block (2,0,0), thread (63,0,0)", "ld.global.f32 %f1, [%rd6]",
		"4-byte load at", "offset 764 of allocation", "which has 764 bytes", "sticky"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	t.Log(err)
}

func TestLaunchChecks(t *testing.T) {
	d := newDriver(t)
	on(t, d, 0, func(c *Context) {
		m := must[*LoadedModule](t)(d.LoadModule("block_sum.ptx", blockSum))
		fn := must[*Function](t)(m.Function("block_sum"))
		s := must[*Stream](t)(d.StreamCreate())
		p := must[Ptr](t)(d.MemAlloc(256))
		for _, c := range []struct {
			grid, block Dim3
			shared      int
			args        []any
			want        string
		}{
			{Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, []any{p}, "1 arguments for 2 parameters"},
			{Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, []any{p, int64(5)}, "argument 1 (block_sum_param_1, .u64) is a int64, want Ptr (the kernel uses it as an address)"},
			{Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, []any{p, int32(5)}, "argument 1 (block_sum_param_1, .u64) is a int32"},
			{Dim3{1, 1, 1}, Dim3{128, 1, 1}, 0, []any{p, p}, "more than the kernel's .maxntid 64"},
			{Dim3{1, 1, 1}, Dim3{32, 33, 1}, 0, []any{p, p}, "more than 1024"},
			{Dim3{1, 70000, 1}, Dim3{64, 1, 1}, 0, []any{p, p}, "dimension 1 must be 1 to 65535"},
			{Dim3{1, 1, 1}, Dim3{64, 1, 1}, 48 << 10, []any{p, p}, "more than 49152"},
		} {
			err := fn.Launch(c.grid, c.block, c.shared, s, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("launch %v %v %v: %v, want %q", c.grid, c.block, c.args, err, c.want)
			}
		}
		if _, err := d.LoadModule("bad.ptx", strings.Replace(blockSum, "add.rn.f32 %f3, %f3, %f2;", "add.sat.f32 %f3, %f3, %f2;", 1)); err == nil ||
			!strings.Contains(err.Error(), `bad.ptx:43: instruction "add.sat.f32" is not implemented`) {
			t.Errorf("an unknown instruction: %v", err)
		}
		if _, err := m.Function("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a missing kernel: %v", err)
		}
	})
}

// TestCurrentContextPerThread: a call on an OS thread without a current
// context fails as on a GPU, and a context current on one thread is not on
// another.
func TestCurrentContextPerThread(t *testing.T) {
	d := newDriver(t)
	on(t, d, 0, func(c *Context) {
		var wg sync.WaitGroup
		var err error
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			_, err = d.MemAlloc(16)
		}()
		wg.Wait()
		if !errors.Is(err, ErrInvalidContext) {
			t.Errorf("MemAlloc on another thread: %v, want CUDA_ERROR_INVALID_CONTEXT", err)
		}
		if _, err := d.MemAlloc(16); err != nil {
			t.Errorf("MemAlloc on the context's thread: %v", err)
		}
	})
	if _, err := d.MemAlloc(16); !errors.Is(err, ErrInvalidContext) {
		t.Errorf("MemAlloc after the context was released: %v", err)
	}
}

// TestStickyError: after a fault every call in the context fails, until
// the last release destroys it; a new context then works.
func TestStickyError(t *testing.T) {
	d := newDriver(t)
	if _, err := runBlockSum(t, d, blockSum, 2, 64, 10); !errors.Is(err, ErrIllegalAddress) {
		t.Fatalf("%v", err)
	}
	on(t, d, 0, func(c *Context) {
		if _, err := d.MemAlloc(16); err != nil {
			t.Errorf("a new context after the faulty one was released: %v", err)
		}
	})
	on(t, d, 0, func(c *Context) {
		c2 := must[*Context](t)(d.RetainPrimary(0))
		defer d.ReleasePrimary(0)
		m := must[*LoadedModule](t)(d.LoadModule("block_sum.ptx", blockSum))
		fn := must[*Function](t)(m.Function("block_sum"))
		s := must[*Stream](t)(d.StreamCreate())
		p := must[Ptr](t)(d.MemAlloc(4))
		if err := fn.Launch(Dim3{1, 1, 1}, Dim3{64, 1, 1}, 0, s, p, p); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); !errors.Is(err, ErrIllegalAddress) {
			t.Fatalf("%v", err)
		}
		if _, err := d.MemAlloc(16); !errors.Is(err, ErrIllegalAddress) || c2 != c {
			t.Errorf("MemAlloc after the fault: %v, want the sticky error", err)
		}
	})
}

// TestEventsOrderStreams: a stream that waits for another's event sees its
// work, whatever the delays; a copy reads host memory when it runs.
func TestEventsOrderStreams(t *testing.T) {
	d := newDriver(t)
	on(t, d, 0, func(c *Context) {
		a := must[*Stream](t)(d.StreamCreate())
		b := must[*Stream](t)(d.StreamCreate())
		ev := must[*Event](t)(d.EventCreate())
		p := must[Ptr](t)(d.MemAlloc(1 << 16))
		for round := range 50 {
			src := make([]byte, 1<<16)
			for i := range src {
				src[i] = byte(round + i)
			}
			if err := d.CopyHtoDAsync(p, src, a); err != nil {
				t.Fatal(err)
			}
			if err := ev.Record(a); err != nil {
				t.Fatal(err)
			}
			if err := b.WaitEvent(ev); err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, 1<<16)
			if err := d.CopyDtoHAsync(dst, p, b); err != nil {
				t.Fatal(err)
			}
			if err := b.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if string(dst) != string(src) {
				t.Fatalf("round %d: the copy back ran before the copy in", round)
			}
		}
		if _, err := Elapsed(ev, ev); err != nil {
			t.Error(err)
		}
		for _, s := range []*Stream{a, b} {
			if err := s.Destroy(); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestMissingWaitSeen: the plant of a missing stream wait. Without
// b.WaitEvent the copy back on stream b may run before the copy in on
// stream a, and the emulator's random stream delays make it do so: over
// 200 rounds some copy back reads what was there before.
func TestMissingWaitSeen(t *testing.T) {
	if raceBuild {
		t.Skip("the streams' copies race in Go's memory too, which the race detector reports as a failure of its own")
	}
	d := newDriver(t)
	on(t, d, 0, func(c *Context) {
		a := must[*Stream](t)(d.StreamCreate())
		b := must[*Stream](t)(d.StreamCreate())
		p := must[Ptr](t)(d.MemAlloc(1 << 12))
		stale := 0
		for round := range 200 {
			src := make([]byte, 1<<12)
			for i := range src {
				src[i] = byte(round + i + 1)
			}
			if err := d.CopyHtoDAsync(p, src, a); err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, 1<<12)
			if err := d.CopyDtoHAsync(dst, p, b); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Stream{a, b} {
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
			}
			if string(dst) != string(src) {
				stale++
			}
		}
		t.Logf("%d of 200 copies back ran before their copy in", stale)
		if stale == 0 {
			t.Error("without the wait every copy back still saw its copy in: the streams did not run out of order")
		}
	})
}

// TestPeerCopy moves bytes between the two emulated GPUs.
func TestPeerCopy(t *testing.T) {
	d := newDriver(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := must[*Context](t)(d.RetainPrimary(0))
	defer d.ReleasePrimary(0)
	c1 := must[*Context](t)(d.RetainPrimary(1))
	defer d.ReleasePrimary(1)
	defer d.SetCurrent(nil)
	d.SetCurrent(c1)
	p1 := must[Ptr](t)(d.MemAlloc(64))
	d.SetCurrent(c0)
	p0 := must[Ptr](t)(d.MemAlloc(64))
	s := must[*Stream](t)(d.StreamCreate())
	if err := d.CopyHtoDAsync(p0, []byte(strings.Repeat("peer", 16)), s); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyPeerAsync(p1, c1, p0, c0, 64, s); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyPeerAsync(p1, c0, p0, c0, 64, s); err == nil || !strings.Contains(err.Error(), "is on cuda:1") {
		t.Errorf("a peer copy naming the wrong context: %v", err)
	}
	out := make([]byte, 64)
	if err := d.CopyDtoHAsync(out, p1, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if string(out) != strings.Repeat("peer", 16) {
		t.Errorf("peer copy gave %q", out)
	}
	s.Destroy()
}

// TestFreeUnderQueuedWork: memory a queued copy still uses cannot be
// freed; pinned memory is outside the Go heap and freed once.
func TestFreeUnderQueuedWork(t *testing.T) {
	d, _ := New(Config{Devices: 1, Seed: 3, MaxDelay: 0})
	on(t, d, 0, func(c *Context) {
		s := must[*Stream](t)(d.StreamCreate())
		ev := must[*Event](t)(d.EventCreate())
		block := must[*Event](t)(d.EventCreate())
		// The stream waits for an event recorded on a second stream that
		// is itself held up until the test says.
		hold := must[*Stream](t)(d.StreamCreate())
		p := must[Ptr](t)(d.MemAlloc(64))
		h := must[[]byte](t)(d.MemHostAlloc(64))
		gate := make(chan struct{})
		hold.enqueue("test gate", streamOp{after: func() { <-gate }})
		if err := block.Record(hold); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitEvent(block); err != nil {
			t.Fatal(err)
		}
		if err := d.CopyHtoDAsync(p, h, s); err != nil {
			t.Fatal(err)
		}
		if err := ev.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := ev.Query(); !errors.Is(err, ErrNotReady) {
			t.Errorf("query of a pending event: %v", err)
		}
		if err := d.MemFree(p); err == nil || !strings.Contains(err.Error(), "queued stream operations still use") {
			t.Errorf("freeing memory a queued copy uses: %v", err)
		}
		if err := d.MemFreeHost(h); err == nil || !strings.Contains(err.Error(), "queued copies still use it") {
			t.Errorf("freeing pinned memory a queued copy reads: %v", err)
		}
		close(gate)
		if err := ev.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if err := d.MemFree(p); err != nil {
			t.Error(err)
		}
		if err := d.MemFreeHost(h); err != nil {
			t.Error(err)
		}
		if err := d.MemFreeHost(h); err == nil {
			t.Error("pinned memory freed twice")
		}
		s.Destroy()
		hold.Destroy()
	})
}
