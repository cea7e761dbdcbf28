package jpegdec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The kernels (in assembly where the build has it) must give their Go
// references' bytes for every input, write nothing past their outputs and
// allocate nothing.

// kernelLengths are the row lengths the fancy kernels are tested at: every
// length up to 200 and a few long rows.
func kernelLengths() []int {
	var ns []int
	for n := 1; n <= 200; n++ {
		ns = append(ns, n)
	}
	return append(ns, 1000, 1023, 2048, 4099)
}

// kernelRow returns n random samples at a random offset into a larger
// buffer; one row in four is only 0s and 255s, the extremes of the sums.
func kernelRow(rng *rand.Rand, n int) []byte {
	buf := make([]byte, n+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	if rng.IntN(4) == 0 {
		for i := range buf {
			buf[i] = -(buf[i] & 1)
		}
	}
	o := rng.IntN(64)
	return buf[o : o+n : o+n]
}

// guarded returns an n-byte row with canary bytes after it, and a check
// that they are untouched.
func guarded(t *testing.T, n int) (row []byte, check func()) {
	buf := make([]byte, n+64)
	for i := range buf {
		buf[i] = 0xa5
	}
	return buf[:n], func() {
		t.Helper()
		for i, v := range buf[n:] {
			if v != 0xa5 {
				t.Fatalf("n=%d: byte %d past the output written", n, i)
			}
		}
	}
}

func TestYCCRGBExhaustive(t *testing.T) {
	// Each row holds every (Y, Cb) pair under one Cr.
	const n = 1 << 16
	y, cb, cr := make([]byte, n), make([]byte, n), make([]byte, n)
	for i := range n {
		y[i], cb[i] = byte(i), byte(i>>8)
	}
	want, got := make([]byte, 3*n), make([]byte, 3*n)
	for v := range 256 {
		for i := range cr {
			cr[i] = byte(v)
		}
		yccRGBGo(y, cb, cr, want[:n], want[n:2*n], want[2*n:])
		yccRGB(y, cb, cr, got[:n], got[n:2*n], got[2*n:])
		for i := range got {
			if got[i] != want[i] {
				p := i % n
				t.Fatalf("Y=%d Cb=%d Cr=%d: plane %d got %d, want %d", y[p], cb[p], v, i/n, got[i], want[i])
			}
		}
	}
}

func TestYCCRGBLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range kernelLengths() {
		y, cb, cr := kernelRow(rng, n), kernelRow(rng, n), kernelRow(rng, n)
		want := make([]byte, 3*n)
		yccRGBGo(y, cb, cr, want[:n], want[n:2*n], want[2*n:])
		r, checkR := guarded(t, n)
		g, checkG := guarded(t, n)
		b, checkB := guarded(t, n)
		yccRGB(y, cb, cr, r, g, b)
		checkR()
		checkG()
		checkB()
		if got := append(append(append([]byte(nil), r...), g...), b...); !bytes.Equal(got, want) {
			t.Fatalf("n=%d: got %v, want %v", n, got, want)
		}
		if a := testing.AllocsPerRun(10, func() { yccRGB(y, cb, cr, r, g, b) }); a != 0 {
			t.Fatalf("n=%d: %v allocations", n, a)
		}
	}
}

func TestFancyH2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range kernelLengths() {
		in := kernelRow(rng, n)
		want := make([]byte, 2*n)
		fancyH2Go(want, in)
		got, check := guarded(t, 2*n)
		fancyH2(got, in)
		check()
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: in %v\ngot  %v\nwant %v", n, in, got, want)
		}
		if a := testing.AllocsPerRun(10, func() { fancyH2(got, in) }); a != 0 {
			t.Fatalf("n=%d: %v allocations", n, a)
		}
	}
}

func TestFancyH2V2(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range kernelLengths() {
		near, far := kernelRow(rng, n), kernelRow(rng, n)
		want := make([]byte, 2*n)
		fancyH2V2Go(want, near, far)
		got, check := guarded(t, 2*n)
		fancyH2V2(got, near, far)
		check()
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: near %v far %v\ngot  %v\nwant %v", n, near, far, got, want)
		}
		if a := testing.AllocsPerRun(10, func() { fancyH2V2(got, near, far) }); a != 0 {
			t.Fatalf("n=%d: %v allocations", n, a)
		}
	}
}

func TestFancyV2(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range kernelLengths() {
		for bias := 1; bias <= 2; bias++ {
			near, far := kernelRow(rng, n), kernelRow(rng, n)
			want := make([]byte, n)
			fancyV2Go(want, near, far, bias)
			got, check := guarded(t, n)
			fancyV2(got, near, far, bias)
			check()
			if !bytes.Equal(got, want) {
				t.Fatalf("n=%d bias=%d: near %v far %v\ngot  %v\nwant %v", n, bias, near, far, got, want)
			}
			if a := testing.AllocsPerRun(10, func() { fancyV2(got, near, far, bias) }); a != 0 {
				t.Fatalf("n=%d: %v allocations", n, a)
			}
		}
	}
}

// benchKernel runs the Go reference as "go" and the kernel the build
// chose as "avx2": the same Go code where the build has no assembly, with
// the purego tag or without AVX2.
func benchKernel(b *testing.B, bytes int, ref, kernel func()) {
	for _, k := range []struct {
		name string
		f    func()
	}{{"go", ref}, {"avx2", kernel}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			for b.Loop() {
				k.f()
			}
		})
	}
}

// benchRow is the length of the benchmarks' output rows: an ImageNet
// image's width, roughly.
const benchRow = 500

func BenchmarkYCCRGB(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = benchRow
	y, cb, cr := kernelRow(rng, n), kernelRow(rng, n), kernelRow(rng, n)
	out := make([]byte, 3*n)
	r, g, bl := out[:n], out[n:2*n], out[2*n:]
	benchKernel(b, 3*n,
		func() { yccRGBGo(y, cb, cr, r, g, bl) },
		func() { yccRGB(y, cb, cr, r, g, bl) })
}

func BenchmarkFancyH2(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	in, out := kernelRow(rng, benchRow/2), make([]byte, benchRow)
	benchKernel(b, benchRow,
		func() { fancyH2Go(out, in) },
		func() { fancyH2(out, in) })
}

func BenchmarkFancyH2V2(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	near, far, out := kernelRow(rng, benchRow/2), kernelRow(rng, benchRow/2), make([]byte, benchRow)
	benchKernel(b, benchRow,
		func() { fancyH2V2Go(out, near, far) },
		func() { fancyH2V2(out, near, far) })
}

func BenchmarkFancyV2(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 16))
	near, far, out := kernelRow(rng, benchRow), kernelRow(rng, benchRow), make([]byte, benchRow)
	benchKernel(b, benchRow,
		func() { fancyV2Go(out, near, far, 1) },
		func() { fancyV2(out, near, far, 1) })
}
