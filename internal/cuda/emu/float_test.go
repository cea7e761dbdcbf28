//go:build linux

package emu

import (
	"math"
	"math/big"
	"testing"
)

// exactFMA32 is a·b+c computed exactly and rounded once to float32.
func exactFMA32(a, b, c float32) float32 {
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
		return float32(float64(a)*float64(b) + float64(c)) // infinities and NaN: exact in float64
	}
	x := new(big.Float).SetPrec(1000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	if x.Sign() == 0 {
		// big.Float has no signed zero from a sum: IEEE's is -0 only when
		// both terms are -0.
		p := float64(a) * float64(b)
		if math.Signbit(p) && math.Signbit(float64(c)) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	return f
}

// TestFMA32 checks fma.rn.f32 against math/big on the cases where
// rounding a float64 result to float32 rounds twice the wrong way (an
// exact sum just off a float32 midpoint), and on random operands of every
// magnitude.
func TestFMA32(t *testing.T) {
	r := newRNG(1)
	hard, naiveWrong := 0, 0
	check := func(a, b, c float32) {
		t.Helper()
		got, want := fma32(a, b, c), exactFMA32(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	// (2^23+k)(2^23-k) = 2^46 - k², a product just below a power of two,
	// added to c whose last kept bit makes the sum sit just below a
	// float32 midpoint with an even neighbour above.
	for range 20000 {
		k := uint32(r.intn(180) + 1)
		e := r.intn(60) - 30
		a := float32(math.Ldexp(float64(1<<23+k), -23))
		b := float32(math.Ldexp(float64(1<<23-k), -47+e))
		m := uint32(r.intn(1<<22))*2 + 1 // odd: the float32 just below the midpoint
		c := float32(math.Ldexp(float64(1<<23|m), -23+e))
		for _, s := range [][3]float32{{a, b, c}, {-a, b, -c}, {a, -b, -c}} {
			hard++
			naive := float32(float64(s[0])*float64(s[1]) + float64(s[2]))
			if naive != exactFMA32(s[0], s[1], s[2]) {
				naiveWrong++
			}
			check(s[0], s[1], s[2])
		}
	}
	if naiveWrong < hard/2 {
		t.Fatalf("only %d of %d hard cases round twice wrongly through float64: the cases are not hard", naiveWrong, hard)
	}
	t.Logf("%d hard cases (%d that float64-then-float32 rounds wrongly)", hard, naiveWrong)
	rnd := func() float32 {
		for {
			f := math.Float32frombits(uint32(r.next()))
			if !math.IsNaN(float64(f)) {
				return f
			}
		}
	}
	for range 200000 {
		a, b, c := rnd(), rnd(), rnd()
		check(a, b, c)
		// Cancellation: c near -a·b.
		check(a, b, -float32(float64(a)*float64(b))*(1+float32(r.intn(5)-2)*0x1p-23))
	}
	check(0, 5, float32(math.Copysign(0, -1)))
	check(float32(math.Copysign(0, -1)), 5, float32(math.Copysign(0, -1)))
	check(float32(math.Inf(1)), 0, 1)
	check(math.MaxFloat32, 2, -math.MaxFloat32)
}

// TestF16 checks cvt.rn.f16.f32 against the nearest half (ties to even)
// for values around every half, and cvt.f32.f16 both ways.
func TestF16(t *testing.T) {
	for h := range uint32(0x7c00) {
		f := f16ToF32(uint16(h))
		if got := f32ToF16(f); uint32(got) != h {
			t.Fatalf("half %#x → %g → %#x", h, f, got)
		}
		if got := f32ToF16(-f); uint32(got) != h|0x8000 {
			t.Fatalf("half %#x negated → %#x", h, got)
		}
		if h == 0x7bff {
			continue
		}
		lo, hi := float64(f), float64(f16ToF32(uint16(h+1)))
		mid := float32((lo + hi) / 2)
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		for _, c := range []struct {
			f    float32
			want uint16
		}{
			{mid, even},
			{math.Nextafter32(mid, float32(math.Inf(-1))), uint16(h)},
			{math.Nextafter32(mid, float32(math.Inf(1))), uint16(h + 1)},
		} {
			if got := f32ToF16(c.f); got != c.want {
				t.Fatalf("f32ToF16(%g) = %#x, want %#x (between halves %#x and %#x)", c.f, got, c.want, h, h+1)
			}
		}
	}
	if got := f32ToF16(float32(math.Inf(-1))); got != 0xfc00 {
		t.Errorf("-inf: %#x", got)
	}
	if got := f32ToF16(1e6); got != 0x7c00 {
		t.Errorf("1e6: %#x", got)
	}
	if got := f32ToF16(float32(math.NaN())); got != 0x7fff {
		t.Errorf("NaN: %#x", got)
	}
}
