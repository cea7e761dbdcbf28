package jpegdec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// The IDCT kernels (idct8, idct4: assembly on amd64 with AVX2, the Go code
// elsewhere and with the purego tag) must give the Go code's samples.
// They dequantise with 16-bit products and keep the first pass's outputs
// in 16 bits, as libjpeg-turbo's SIMD code does, so they agree wherever
// those values fit, which real image data always gives; the tests draw
// realistic blocks and skip the rare one outside that range.

// stdLuma is the example luminance table of the JPEG standard (K.1), in
// natural order, which libjpeg scales by quality.
var stdLuma = [64]int32{
	16, 11, 10, 16, 24, 40, 51, 61,
	12, 12, 14, 19, 26, 58, 60, 55,
	14, 13, 16, 24, 40, 57, 69, 56,
	14, 17, 22, 29, 51, 87, 80, 62,
	18, 22, 37, 56, 68, 109, 103, 77,
	24, 35, 55, 64, 81, 104, 113, 92,
	49, 64, 78, 87, 103, 121, 120, 101,
	72, 92, 95, 98, 112, 100, 103, 99,
}

// qualityTable is stdLuma scaled as libjpeg's jpeg_quality_scaling does.
func qualityTable(quality int) *[64]int32 {
	scale := 200 - 2*quality
	if quality < 50 {
		scale = 5000 / quality
	}
	var q [64]int32
	for i, v := range stdLuma {
		q[i] = min(max((v*int32(scale)+50)/100, 1), 255)
	}
	return &q
}

// randomTable is a table of libjpeg's at a random quality, or of random
// values 1..255.
func randomTable(rng *rand.Rand) *[64]int32 {
	if rng.IntN(2) == 0 {
		return qualityTable(1 + rng.IntN(100))
	}
	var q [64]int32
	for i := range q {
		q[i] = 1 + rng.Int32N(255)
	}
	return &q
}

// randomBlock fills blk with quantised coefficients as a photo gives them:
// the DC anywhere in ±1024 (the DCT of level-shifted 8-bit samples), the
// AC with amplitudes decaying along the zigzag, most quantising to zero.
// One block in eight has only a DC and one in ten is dense, with slowly
// decaying amplitudes.
func randomBlock(rng *rand.Rand, blk *[64]int16, q *[64]int32) {
	*blk = [64]int16{}
	quant := func(v float64, q int32) int16 { return int16(math.Round(v / float64(q))) }
	blk[0] = quant(rng.Float64()*2048-1024, q[0])
	amp, decay := 500.0, 6.0
	switch rng.IntN(40) {
	case 0, 1, 2, 3, 4:
		return
	case 5, 6, 7, 8:
		amp, decay = 300, 25
	}
	amp *= rng.Float64()
	for k := 1; k < 64; k++ {
		i := zigzag[k]
		blk[i] = quant(rng.NormFloat64()*amp*math.Exp(-float64(k)/decay), q[i])
	}
}

// inRange reports whether the kernels' 16-bit arithmetic holds the block:
// its dequantised coefficients and the first pass's outputs fit in int16.
// Only the coefficients and the first pass's columns the Go code of the
// size reads count: idct4Go skips row 4 and column 4.
func inRange(blk *[64]int16, q *[64]int32, size int) bool {
	fits := func(v int64) bool { return v == int64(int16(v)) }
	var x [64]int64
	for i := range x {
		x[i] = int64(blk[i]) * int64(q[i])
		if size == 8 || i/8 != 4 && i%8 != 4 {
			if !fits(x[i]) {
				return false
			}
		}
	}
	for c := range 8 {
		col := func(r int) int64 { return x[8*r+c] }
		var ws []int64
		if size == 8 {
			z1 := (col(2) + col(6)) * fix0_541196100
			tmp2, tmp3 := z1-col(6)*fix1_847759065, z1+col(2)*fix0_765366865
			tmp0, tmp1 := (col(0)+col(4))<<constBits, (col(0)-col(4))<<constBits
			t10, t13, t11, t12 := tmp0+tmp3, tmp0-tmp3, tmp1+tmp2, tmp1-tmp2
			o0, o1, o2, o3 := col(7), col(5), col(3), col(1)
			z5 := (o0 + o2 + o1 + o3) * fix1_175875602
			z1, z2 := (o0+o3)*-fix0_899976223, (o1+o2)*-fix2_562915447
			z3, z4 := (o0+o2)*-fix1_961570560+z5, (o1+o3)*-fix0_390180644+z5
			o0 = o0*fix0_298631336 + z1 + z3
			o1 = o1*fix2_053119869 + z2 + z4
			o2 = o2*fix3_072711026 + z2 + z3
			o3 = o3*fix1_501321110 + z1 + z4
			ws = []int64{t10 + o3, t10 - o3, t11 + o2, t11 - o2, t12 + o1, t12 - o1, t13 + o0, t13 - o0}
		} else {
			if c == 4 {
				continue
			}
			tmp0 := col(0) << (constBits + 1)
			tmp2 := col(2)*fix1_847759065 - col(6)*fix0_765366865
			o0 := -col(7)*fix0_211164243 + col(5)*fix1_451774981 - col(3)*fix2_172734803 + col(1)*fix1_061594337
			o2 := -col(7)*fix0_509795579 - col(5)*fix0_601344887 + col(3)*fix0_899976223 + col(1)*fix2_562915447
			ws = []int64{tmp0 + tmp2 + o2, tmp0 + tmp2 - o2, tmp0 - tmp2 + o0, tmp0 - tmp2 - o0}
		}
		n := uint(constBits - pass1Bits)
		if size == 4 {
			n++
		}
		for _, v := range ws {
			if !fits((v + 1<<(n-1)) >> n) {
				return false
			}
		}
	}
	return true
}

// checkIDCT runs kernel and ref on blk into separate buffers at a random
// stride and offset and fails unless they write the same size×size samples
// and nothing else.
func checkIDCT(t *testing.T, rng *rand.Rand, size int, blk *[64]int16, q *[64]int32, kernel, ref func(*[64]int16, *[64]int32, []byte, int)) {
	t.Helper()
	stride := size + rng.IntN(3)*rng.IntN(24)
	off := rng.IntN(8)
	n := off + (size-1)*stride + size
	got, want := make([]byte, n+8), make([]byte, n+8)
	for i := range got {
		got[i], want[i] = byte(i*7), byte(i*7)
	}
	in := *blk
	kernel(blk, q, got[off:n], stride)
	ref(blk, q, want[off:n], stride)
	if *blk != in {
		t.Fatalf("the %d×%d IDCT changed its block", size, size)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("%d×%d IDCT, stride %d: byte %d (row %d, column %d) is %d, the Go code gives %d\nblock %v\ntable %v",
			size, size, stride, i-off, (i-off)/stride, (i-off)%stride, got[i], want[i], *blk, *q)
	}
}

func testIDCT(t *testing.T, size int, kernel, ref func(*[64]int16, *[64]int32, []byte, int)) {
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	const blocks = 200_000
	var blk [64]int16
	q, skipped := randomTable(rng), 0
	for i := range blocks {
		if i%64 == 0 {
			q = randomTable(rng)
		}
		randomBlock(rng, &blk, q)
		if !inRange(&blk, q, size) {
			skipped++
			continue
		}
		checkIDCT(t, rng, size, &blk, q, kernel, ref)
	}
	// The DC-only shortcut is exact for any DC and table.
	for range 10_000 {
		blk = [64]int16{int16(rng.Uint32())}
		q[0] = 1 + rng.Int32N(65535)
		checkIDCT(t, rng, size, &blk, q, kernel, ref)
	}
	if skipped > blocks/100 {
		t.Fatalf("%d of %d blocks out of 16-bit range", skipped, blocks)
	}
	t.Logf("%d of %d blocks out of 16-bit range, skipped", skipped, blocks)
}

func TestIDCT8(t *testing.T) { testIDCT(t, 8, idct8, idct8Go) }
func TestIDCT4(t *testing.T) { testIDCT(t, 4, idct4, idct4Go) }

func TestIDCTAllocatesNothing(t *testing.T) {
	var blk [64]int16
	blk[0], blk[1], blk[8] = 10, -3, 2
	q, dst := qualityTable(75), make([]byte, 64)
	for _, f := range []func(*[64]int16, *[64]int32, []byte, int){idct8, idct4} {
		if a := testing.AllocsPerRun(10, func() { f(&blk, q, dst, 8) }); a != 0 {
			t.Fatalf("%v allocations", a)
		}
	}
}

// benchIDCT runs the Go IDCT as "go" and the kernel the build chose as
// "avx2" (the same Go code with the purego tag or without AVX2) over a
// fixed set of blocks of a quality-85 image, one block an operation.
func benchIDCT(b *testing.B, size int, kernel, ref func(*[64]int16, *[64]int32, []byte, int)) {
	rng := rand.New(rand.NewPCG(5, 6))
	q := qualityTable(85)
	blks := make([][64]int16, 1024)
	for i := range blks {
		randomBlock(rng, &blks[i], q)
	}
	dst := make([]byte, 64*size)
	for _, k := range []struct {
		name string
		f    func(*[64]int16, *[64]int32, []byte, int)
	}{{"go", ref}, {"avx2", kernel}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(64)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k.f(&blks[i%len(blks)], q, dst, 64)
				i++
			}
		})
	}
}

func BenchmarkIDCT8(b *testing.B) { benchIDCT(b, 8, idct8, idct8Go) }
func BenchmarkIDCT4(b *testing.B) { benchIDCT(b, 4, idct4, idct4Go) }
