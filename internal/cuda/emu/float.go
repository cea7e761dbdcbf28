//go:build linux

package emu

import "math"

// fma32 is fma.rn.f32: a·b+c rounded once, to nearest even, to float32.
//
// The product of two float32 values is exact in float64 (48 significant
// bits), but the float64 sum p+c is rounded, and rounding that again to
// float32 can round twice the wrong way (an exact sum just above a float32
// midpoint lands on the midpoint, and the tie goes to even). So the sum is
// rounded to odd instead: TwoSum gives its exact error, and when that is
// not zero the result is moved to the neighbour with an odd last bit. A
// value rounded to odd with two or more extra bits (float64 has 29 more)
// rounds to nearest correctly (Boldo and Melquiond, 2008).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	// Rounding s to float32 goes wrong only when s is a float32 midpoint
	// (its 29 bits below float32's precision are 1 then zeros): rounding
	// is monotonic, so an exact sum on either side of a midpoint rounds to
	// the midpoint or stays on its side. Below float32's normal range
	// fewer bits are dropped, so that case takes the exact path too;
	// infinities and NaN have zero low bits.
	if bits := math.Float64bits(s); bits&(1<<29-1) != 1<<28 && bits>>52&0x7ff >= 1023-126 {
		return float32(s)
	}
	if s != s {
		return float32(s)
	}
	// TwoSum: s + e is exactly p + c.
	bv := s - p
	e := (p - (s - bv)) + (float64(c) - bv)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		if e > 0 {
			s = math.Nextafter(s, math.Inf(1))
		} else {
			s = math.Nextafter(s, math.Inf(-1))
		}
	}
	return float32(s)
}

// rng is the emulator's generator (splitmix64): thread orders, block
// orders and stream delays are drawn from it, keyed by the seed.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng { return rng{seed} }

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix(r.s)
}

// intn returns a value in [0, n).
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func (r *rng) shuffle(s []int32) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}

// f32ToF16 is cvt.rn.f16.f32: f rounded to nearest even half precision,
// subnormal halves included; overflow gives infinity, NaN the canonical
// NaN (0x7fff).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b >> 23 & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return 0x7fff
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A subnormal half counts units of 2^-24: the value is
		// (mant|1<<23)·2^(exp-150), so shift right by 126-exp.
		m := mant | 1<<23
		if exp == 0 {
			m = mant // a float32 subnormal is far below a half's range
		}
		shift := uint(126 - exp)
		if shift > 24 {
			return sign
		}
		return sign | uint16(roundShift(m, shift))
	}
	// A carry out of the mantissa moves to the exponent, to infinity at
	// the top.
	return sign | (uint16(e)<<10 + uint16(roundShift(mant, 13)))
}

// roundShift is m >> s rounded to nearest even.
func roundShift(m uint32, s uint) uint32 {
	q, rem, half := m>>s, m&(1<<s-1), uint32(1)<<(s-1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// f16ToF32 is cvt.f32.f16 (exact).
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp, mant := uint32(h>>10&0x1f), uint32(h&0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		return math.Float32frombits(sign) + float32(mant)*0x1p-24*sign1(sign)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

func sign1(s uint32) float32 {
	if s != 0 {
		return -1
	}
	return 1
}
