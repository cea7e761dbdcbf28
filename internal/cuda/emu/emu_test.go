//go:build linux

package emu

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newDriver returns a driver of two GPUs with short delays, seeded by the
// test's name.
func newDriver(t testing.TB) *Driver {
	t.Helper()
	seed := uint64(0)
	for _, c := range t.Name() {
		seed = seed*31 + uint64(c)
	}
	d, err := New(Config{Devices: 2, Seed: seed, MaxDelay: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// on runs f on a locked OS thread with GPU dev's primary context current,
// released afterwards.
func on(t testing.TB, d *Driver, dev int, f func(c *Context)) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := d.RetainPrimary(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.ReleasePrimary(dev); err != nil {
			t.Error(err)
		}
	}()
	if err := d.SetCurrent(c); err != nil {
		t.Fatal(err)
	}
	defer d.SetCurrent(nil)
	f(c)
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// opsKernel wraps one instruction: a, b and c arrive as 64-bit parameters
// and are spread over registers of every class; the destination registers
// are stored to out.
const opsKernel = `.version 7.8
.target sm_80
.address_size 64
.visible .entry op(
	.param .u64 pout,
	.param .u64 pa,
	.param .u64 pb,
	.param .u64 pc
)
{
	.reg .pred %p<10>;
	.reg .b16 %rs<10>;
	.reg .b32 %r<10>;
	.reg .f32 %f<10>;
	.reg .b64 %rd<10>;
	.reg .f64 %fd<10>;
	ld.param.u64 %rd4, [pout];
	cvta.to.global.u64 %rd5, %rd4;
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pc];
	cvt.u32.u64 %r1, %rd1;
	cvt.u32.u64 %r2, %rd2;
	cvt.u32.u64 %r3, %rd3;
	cvt.u16.u64 %rs1, %rd1;
	cvt.u16.u64 %rs2, %rd2;
	cvt.u16.u64 %rs3, %rd3;
	mov.b32 %f1, %r1;
	mov.b32 %f2, %r2;
	mov.b32 %f3, %r3;
	mov.b64 %fd1, %rd1;
	mov.b64 %fd2, %rd2;
	mov.b64 %fd3, %rd3;
	setp.ne.s64 %p1, %rd1, 0;
	setp.ne.s64 %p2, %rd2, 0;
	setp.ne.s64 %p3, %rd3, 0;
	mov.u64 %rd9, 0;
	mov.u32 %r9, 0;
	mov.u16 %rs9, 0;
	mov.f32 %f9, 0f00000000;
	mov.f64 %fd9, 0d0000000000000000;
	mov.pred %p9, 0;
	INSTRUCTION;
	st.global.u64 [%rd5], %rd9;
	st.global.u32 [%rd5+8], %r9;
	st.global.f32 [%rd5+12], %f9;
	st.global.f64 [%rd5+16], %fd9;
	st.global.u16 [%rd5+24], %rs9;
	selp.u32 %r8, 1, 0, %p9;
	st.global.u32 [%rd5+28], %r8;
	ret;
}
`

// value parses a test value: an integer, 1.5f or 1.5d, nanf, nand,
// [-]inff, [-]infd, f:0x… or d:0x… bits.
func value(s string) (uint64, error) {
	switch s {
	case "nanf":
		return uint64(math.Float32bits(float32(math.NaN()))), nil
	case "nand":
		return math.Float64bits(math.NaN()), nil
	case "inff", "-inff":
		return uint64(math.Float32bits(float32(math.Inf(strings.Count(s, "-")*-2 + 1)))), nil
	case "infd", "-infd":
		return math.Float64bits(math.Inf(strings.Count(s, "-")*-2 + 1)), nil
	}
	if b, ok := strings.CutPrefix(s, "f:"); ok {
		return strconv.ParseUint(b, 0, 32)
	}
	if b, ok := strings.CutPrefix(s, "d:"); ok {
		return strconv.ParseUint(b, 0, 64)
	}
	hexInt := strings.Contains(s, "0x") && !strings.Contains(s, "p")
	if !hexInt && strings.HasSuffix(s, "f") {
		f, err := strconv.ParseFloat(s[:len(s)-1], 32)
		return uint64(math.Float32bits(float32(f))), err
	}
	if !hexInt && strings.HasSuffix(s, "d") {
		f, err := strconv.ParseFloat(s[:len(s)-1], 64)
		return math.Float64bits(f), err
	}
	if v, err := strconv.ParseInt(s, 0, 64); err == nil {
		return uint64(v), nil
	}
	return strconv.ParseUint(s, 0, 64)
}

// TestOps runs every case of testdata/ops.txt: one instruction on chosen
// inputs against the result PTX's rules give.
func TestOps(t *testing.T) {
	f, err := os.Open("testdata/ops.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := newDriver(t)
	on(t, d, 0, func(c *Context) {
		s := must[*Stream](t)(d.StreamCreate())
		out := must[Ptr](t)(d.MemAlloc(32))
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			text := strings.TrimSpace(sc.Text())
			if text == "" || text[0] == '#' {
				continue
			}
			fs := strings.Split(text, "|")
			if len(fs) != 5 {
				t.Fatalf("ops.txt:%d: want 5 fields", line)
			}
			for i := range fs {
				fs[i] = strings.TrimSpace(fs[i])
			}
			var v [4]uint64
			for i := range 4 {
				if v[i], err = value(fs[1+i]); err != nil {
					t.Fatalf("ops.txt:%d: %v", line, err)
				}
			}
			ptx := strings.Replace(opsKernel, "INSTRUCTION", fs[0], 1)
			m, err := d.LoadModule(fmt.Sprintf("ops.txt:%d", line), ptx)
			if err != nil {
				t.Errorf("ops.txt:%d: %v", line, err)
				continue
			}
			fn := must[*Function](t)(m.Function("op"))
			if err := fn.Launch(Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, s, out, int64(v[0]), int64(v[1]), int64(v[2])); err != nil {
				t.Fatalf("ops.txt:%d: %v", line, err)
			}
			res := make([]byte, 32)
			if err := d.CopyDtoHAsync(res, out, s); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatalf("ops.txt:%d: %v", line, err)
			}
			dst := strings.Fields(strings.ReplaceAll(fs[0], ",", " "))[1]
			var got, want uint64
			switch {
			case strings.HasPrefix(dst, "%rd"):
				got, want = binary.LittleEndian.Uint64(res), v[3]
			case strings.HasPrefix(dst, "%rs"):
				got, want = uint64(binary.LittleEndian.Uint16(res[24:])), v[3]&0xffff
			case strings.HasPrefix(dst, "%r"):
				got, want = uint64(binary.LittleEndian.Uint32(res[8:])), v[3]&0xffffffff
			case strings.HasPrefix(dst, "%fd"):
				got, want = binary.LittleEndian.Uint64(res[16:]), v[3]
			case strings.HasPrefix(dst, "%f"):
				got, want = uint64(binary.LittleEndian.Uint32(res[12:])), v[3]&0xffffffff
			case strings.HasPrefix(dst, "%p"):
				got, want = uint64(binary.LittleEndian.Uint32(res[28:])), v[3]
			}
			if got != want {
				t.Errorf("ops.txt:%d: %s with a=%s b=%s c=%s: got %#x, want %#x (%s)", line, fs[0], fs[1], fs[2], fs[3], got, want, fs[4])
			}
		}
		if err := s.Destroy(); err != nil {
			t.Error(err)
		}
	})
}
