package jpegdec

// The inverse DCTs of libjpeg-turbo: the accurate integer 8×8 one
// (jidctint.c's jpeg_idct_islow) and the reduced 4×4, 2×2 and 1×1 ones of
// jidctred.c, which decode at the DCT scales 1/2, 1/4 and 1/8. Each takes a
// block of coefficients in natural order and its quantisation table, and
// writes samples. The results are clamped to 0..255 with saturation, as
// libjpeg-turbo's SIMD IDCTs do (its C code wraps values beyond ±512,
// which only corrupt data reaches).

const (
	constBits = 13
	pass1Bits = 2

	fix0_211164243 = 1730
	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_509795579 = 4176
	fix0_541196100 = 4433
	fix0_601344887 = 4926
	fix0_720959822 = 5906
	fix0_765366865 = 6270
	fix0_850430095 = 6967
	fix0_899976223 = 7373
	fix1_061594337 = 8697
	fix1_175875602 = 9633
	fix1_272758580 = 10426
	fix1_451774981 = 11893
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_172734803 = 17799
	fix2_562915447 = 20995
	fix3_072711026 = 25172
	fix3_624509785 = 29692
)

// clampSample turns a level-shifted IDCT output into a sample.
func clampSample(x int32) byte {
	x += 128
	if uint32(x) > 255 {
		if x < 0 {
			return 0
		}
		return 255
	}
	return byte(x)
}

// descale divides x by 2^n, rounding.
func descale(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }

// idct8Go is jpeg_idct_islow.
func idct8Go(blk *[64]int16, q *[64]int32, dst []byte, stride int) {
	var ws [64]int32
	for c := range 8 {
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[32+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := int32(blk[c]) * q[c] << pass1Bits
			for r := range 8 {
				ws[8*r+c] = dc
			}
			continue
		}
		dq := func(r int) int32 { return int32(blk[8*r+c]) * q[8*r+c] }
		o := islow(dq(0), dq(1), dq(2), dq(3), dq(4), dq(5), dq(6), dq(7))
		for r, v := range o {
			ws[8*r+c] = descale(v, constBits-pass1Bits)
		}
	}
	for r := range 8 {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+8 : r*stride+8]
		if w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			for i := range out {
				out[i] = v
			}
			continue
		}
		o := islow(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
		for i, v := range o {
			out[i] = clampSample(descale(v, constBits+pass1Bits+3))
		}
	}
}

// islow is one pass of jpeg_idct_islow over the coefficients x0 … x7 of a
// column or row: its eight outputs, before descaling.
func islow(x0, x1, x2, x3, x4, x5, x6, x7 int32) [8]int32 {
	// Even part.
	z1 := (x2 + x6) * fix0_541196100
	tmp2 := z1 + x6*-fix1_847759065
	tmp3 := z1 + x2*fix0_765366865
	tmp0 := (x0 + x4) << constBits
	tmp1 := (x0 - x4) << constBits
	tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
	tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
	// Odd part.
	tmp0, tmp1, tmp2, tmp3 = x7, x5, x3, x1
	z1 = tmp0 + tmp3
	z2 := tmp1 + tmp2
	z3 := tmp0 + tmp2
	z4 := tmp1 + tmp3
	z5 := (z3 + z4) * fix1_175875602
	tmp0 *= fix0_298631336
	tmp1 *= fix2_053119869
	tmp2 *= fix3_072711026
	tmp3 *= fix1_501321110
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 = z3*-fix1_961570560 + z5
	z4 = z4*-fix0_390180644 + z5
	tmp0 += z1 + z3
	tmp1 += z2 + z4
	tmp2 += z2 + z3
	tmp3 += z1 + z4
	return [8]int32{tmp10 + tmp3, tmp11 + tmp2, tmp12 + tmp1, tmp13 + tmp0,
		tmp13 - tmp0, tmp12 - tmp1, tmp11 - tmp2, tmp10 - tmp3}
}

// idct4Go is jidctred.c's jpeg_idct_4x4.
func idct4Go(blk *[64]int16, q *[64]int32, dst []byte, stride int) {
	var ws [64]int32
	for c := range 8 {
		if c == 4 {
			continue // the second pass does not read column 4
		}
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := int32(blk[c]) * q[c] << pass1Bits
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			continue
		}
		tmp0 := int32(blk[c]) * q[c] << (constBits + 1)
		z2 := int32(blk[16+c]) * q[16+c]
		z3 := int32(blk[48+c]) * q[48+c]
		tmp2 := z2*fix1_847759065 + z3*-fix0_765366865
		tmp10, tmp12 := tmp0+tmp2, tmp0-tmp2
		z1 := int32(blk[56+c]) * q[56+c]
		z2 = int32(blk[40+c]) * q[40+c]
		z3 = int32(blk[24+c]) * q[24+c]
		z4 := int32(blk[8+c]) * q[8+c]
		tmp0 = z1*-fix0_211164243 + z2*fix1_451774981 + z3*-fix2_172734803 + z4*fix1_061594337
		tmp2 = z1*-fix0_509795579 + z2*-fix0_601344887 + z3*fix0_899976223 + z4*fix2_562915447
		const n = constBits - pass1Bits + 1
		ws[c] = descale(tmp10+tmp2, n)
		ws[24+c] = descale(tmp10-tmp2, n)
		ws[8+c] = descale(tmp12+tmp0, n)
		ws[16+c] = descale(tmp12-tmp0, n)
	}
	for r := range 4 {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+4 : r*stride+4]
		if w[1]|w[2]|w[3]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			out[0], out[1], out[2], out[3] = v, v, v, v
			continue
		}
		tmp0 := w[0] << (constBits + 1)
		tmp2 := w[2]*fix1_847759065 + w[6]*-fix0_765366865
		tmp10, tmp12 := tmp0+tmp2, tmp0-tmp2
		z1, z2, z3, z4 := w[7], w[5], w[3], w[1]
		tmp0 = z1*-fix0_211164243 + z2*fix1_451774981 + z3*-fix2_172734803 + z4*fix1_061594337
		tmp2 = z1*-fix0_509795579 + z2*-fix0_601344887 + z3*fix0_899976223 + z4*fix2_562915447
		const n = constBits + pass1Bits + 3 + 1
		out[0] = clampSample(descale(tmp10+tmp2, n))
		out[3] = clampSample(descale(tmp10-tmp2, n))
		out[1] = clampSample(descale(tmp12+tmp0, n))
		out[2] = clampSample(descale(tmp12-tmp0, n))
	}
}

// idct2Go is jidctred.c's jpeg_idct_2x2.
func idct2Go(blk *[64]int16, q *[64]int32, dst []byte, stride int) {
	var ws [16]int32
	for c := 0; c < 8; c++ {
		if c == 2 || c == 4 || c == 6 {
			continue
		}
		if blk[8+c]|blk[24+c]|blk[40+c]|blk[56+c] == 0 {
			dc := int32(blk[c]) * q[c] << pass1Bits
			ws[c], ws[8+c] = dc, dc
			continue
		}
		tmp10 := int32(blk[c]) * q[c] << (constBits + 2)
		tmp0 := int32(blk[56+c])*q[56+c]*-fix0_720959822 +
			int32(blk[40+c])*q[40+c]*fix0_850430095 +
			int32(blk[24+c])*q[24+c]*-fix1_272758580 +
			int32(blk[8+c])*q[8+c]*fix3_624509785
		const n = constBits - pass1Bits + 2
		ws[c] = descale(tmp10+tmp0, n)
		ws[8+c] = descale(tmp10-tmp0, n)
	}
	for r := range 2 {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+2 : r*stride+2]
		if w[1]|w[3]|w[5]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			out[0], out[1] = v, v
			continue
		}
		tmp10 := w[0] << (constBits + 2)
		tmp0 := w[7]*-fix0_720959822 + w[5]*fix0_850430095 + w[3]*-fix1_272758580 + w[1]*fix3_624509785
		const n = constBits + pass1Bits + 3 + 2
		out[0] = clampSample(descale(tmp10+tmp0, n))
		out[1] = clampSample(descale(tmp10-tmp0, n))
	}
}

// idct1 is jidctred.c's jpeg_idct_1x1.
func idct1(blk *[64]int16, q *[64]int32, dst []byte, _ int) {
	dst[0] = clampSample(descale(int32(blk[0])*q[0], 3))
}
