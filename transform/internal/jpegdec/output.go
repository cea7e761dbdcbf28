package jpegdec

// output upsamples and converts the window's rows into dst's planes.
func (d *Decoder) output(dst []byte, x0, y0, cw, ch int) {
	n := cw * ch
	r, g, b := dst[:n:n], dst[n:2*n:2*n], dst[2*n:3*n:3*n]
	var rows [4][]byte
	for y := range ch {
		for i := range d.nc {
			rows[i] = d.comp[i].upsample(y0+y, x0, cw)
		}
		o := y * cw
		rr, gg, bb := r[o:o+cw], g[o:o+cw], b[o:o+cw]
		switch d.cs {
		case csYCbCr:
			yccRGB(rows[0], rows[1], rows[2], rr, gg, bb)
		case csRGB:
			copy(rr, rows[0])
			copy(gg, rows[1])
			copy(bb, rows[2])
		case csGray:
			copy(rr, rows[0])
			copy(gg, rows[0])
			copy(bb, rows[0])
		default:
			cmykRGB(rows[0], rows[1], rows[2], rows[3], rr, gg, bb, d.cs == csYCCK, d.adobe)
		}
	}
}

// upsample returns cw samples of output row oy from column x0, as
// libjpeg-turbo's upsamplers (jdsample.c) give them: its "fancy" triangle
// filters for 2:1 horizontally, 1:2 vertically and 2:2, and copies
// otherwise. Samples outside the component repeat its edge.
func (c *component) upsample(oy, x0, cw int) []byte {
	switch {
	case c.fx == 1 && c.fy == 1:
		o := (oy-c.py0)*c.stride + x0
		return c.plane[o : o+cw : o+cw]
	case c.fancy && c.fx == 1 && c.fy == 2:
		near, far, bias := c.rows(oy)
		out := c.row[:cw:cw]
		fancyV2(out, near[x0:x0+cw], far[x0:x0+cw], bias)
		return out
	case c.fancy && c.fx == 2 && (c.fy == 1 || c.fy == 2) && c.dsw > 2:
		// The kernels treat the ends of what they are given as the
		// component's edges: give them a sample more than the window
		// needs on each side, unless that side is the edge.
		a, b := max(x0/2-1, 0), min((x0+cw-1)/2+1, c.dsw-1)
		out := c.row[: 2*(b-a+1) : 2*(b-a+1)]
		if c.fy == 1 {
			fancyH2(out, c.plane[(oy-c.py0)*c.stride+a:][:b-a+1])
		} else {
			near, far, _ := c.rows(oy)
			fancyH2V2(out, near[a:b+1], far[a:b+1])
		}
		return out[x0-2*a : x0-2*a+cw]
	}
	out := c.row[:cw:cw]
	row := c.plane[(oy/c.fy-c.py0)*c.stride:]
	for i := range out {
		out[i] = row[(x0+i)/c.fx]
	}
	return out
}

// rows returns, for output row oy of a component upsampled 1:2
// vertically, its sample row, the next nearest (the one above for an even
// row, below for an odd one, the edge row repeated), and the rounding bias
// of the 1:2 filter.
func (c *component) rows(oy int) (near, far []byte, bias int) {
	s := oy >> 1
	f, bias := max(s-1, 0), 1
	if oy&1 == 1 {
		f, bias = min(s+1, c.dsh-1), 2
	}
	return c.plane[(s-c.py0)*c.stride:], c.plane[(f-c.py0)*c.stride:], bias
}

// yccRGBGo converts YCbCr to RGB with the arithmetic of libjpeg-turbo's SIMD
// converters (jdcolext-avx2.asm), in 16-bit fixed point: R = Y + Cr +
// 0.402·Cr, G = Y - 0.34414·Cb + 0.28586·Cr - Cr, B = Y + 2·Cb - 0.228·Cb.
func yccRGBGo(y, cb, cr, r, g, b []byte) {
	const (
		f0402 = 26345 // FIX(1.40200) - FIX(1)
		f0228 = 14942 // FIX(2) - FIX(1.77200)
		f0344 = 22554 // FIX(0.34414)
		f0285 = 18734 // FIX(1) - FIX(0.71414)
	)
	n := len(r)
	y, cb, cr, g, b = y[:n], cb[:n], cr[:n], g[:n], b[:n]
	for i := range r {
		yy := int32(y[i])
		u := int32(cb[i]) - 128
		v := int32(cr[i]) - 128
		by := ((((2*u)*-f0228)>>16)+1)>>1 + 2*u
		ry := ((((2*v)*f0402)>>16)+1)>>1 + v
		gy := (u*-f0344+v*f0285+1<<15)>>16 - v
		r[i] = clamp(yy + ry)
		g[i] = clamp(yy + gy)
		b[i] = clamp(yy + by)
	}
}

func clamp(v int32) byte { return byte(min(max(v, 0), 255)) }

// cmykRGB converts CMYK (or YCCK, first to CMYK as libjpeg's
// ycck_cmyk_convert does) to RGB as Go's image/color does, Adobe's
// inverted values undone: the jpegturbo build's conversion.
func cmykRGB(c0, c1, c2, k, r, g, b []byte, ycck, inverted bool) {
	const (
		fixCrR = 91881  // FIX(1.40200)
		fixCbB = 116130 // FIX(1.77200)
		fixCrG = 46802  // FIX(0.71414)
		fixCbG = 22554  // FIX(0.34414)
		half   = 1 << 15
	)
	for i := range r {
		c, m, yy, kk := int32(c0[i]), int32(c1[i]), int32(c2[i]), uint32(k[i])
		if ycck {
			u, v := m-128, yy-128
			lum := c
			c = int32(clamp(255 - (lum + (fixCrR*v+half)>>16)))
			m = int32(clamp(255 - (lum + (-fixCbG*u+half-fixCrG*v)>>16)))
			yy = int32(clamp(255 - (lum + (fixCbB*u+half)>>16)))
		}
		cc, mm, y3 := uint32(c), uint32(m), uint32(yy)
		if inverted {
			cc, mm, y3, kk = 255-cc, 255-mm, 255-y3, 255-kk
		}
		w := 0xffff - kk*0x101
		r[i] = byte(((0xffff - cc*0x101) * w / 0xffff) >> 8)
		g[i] = byte(((0xffff - mm*0x101) * w / 0xffff) >> 8)
		b[i] = byte(((0xffff - y3*0x101) * w / 0xffff) >> 8)
	}
}

// fancyH2Go upsamples in 2:1 horizontally into out, 2·len(in) samples, as
// libjpeg-turbo's h2v1_fancy_upsample does: each output sample is ¾ of
// its nearer input sample and ¼ of the next nearest, the ends of in
// repeated.
func fancyH2Go(out, in []byte) { fancyH2Cols(out, in, 0, len(in)) }

// fancyH2Cols computes only fancyH2Go's output samples 2·lo to 2·hi-1:
// the assembly kernels leave the edges to it.
func fancyH2Cols(out, in []byte, lo, hi int) {
	n := len(in)
	out = out[:2*n]
	for s := lo; s < hi; s++ {
		v := 3 * int(in[s])
		out[2*s] = byte((v + int(in[max(s-1, 0)]) + 1) >> 2)
		out[2*s+1] = byte((v + int(in[min(s+1, n-1)]) + 2) >> 2)
	}
}

// fancyH2V2Go upsamples 2:2 into out, 2·len(near) samples of one output
// row, as libjpeg-turbo's h2v2_fancy_upsample does: near is the row's own
// input row, far the next nearest one (above for an even output row, below
// for an odd one), ¾ and ¼, then the same across.
func fancyH2V2Go(out, near, far []byte) { fancyH2V2Cols(out, near, far, 0, len(near)) }

// fancyH2V2Cols computes only fancyH2V2Go's output samples 2·lo to 2·hi-1.
func fancyH2V2Cols(out, near, far []byte, lo, hi int) {
	n := len(near)
	far, out = far[:n], out[:2*n]
	sum := func(s int) int { return 3*int(near[s]) + int(far[s]) }
	for s := lo; s < hi; s++ {
		v := 3 * sum(s)
		out[2*s] = byte((v + sum(max(s-1, 0)) + 8) >> 4)
		out[2*s+1] = byte((v + sum(min(s+1, n-1)) + 7) >> 4)
	}
}

// fancyV2Go upsamples 1:2 vertically, as libjpeg-turbo's
// h1v2_fancy_upsample does: ¾ of near and ¼ of far, rounded with bias (1
// for an even output row, 2 for an odd one).
func fancyV2Go(out, near, far []byte, bias int) {
	near, far = near[:len(out)], far[:len(out)]
	for i := range out {
		out[i] = byte((3*int(near[i]) + int(far[i]) + bias) >> 2)
	}
}
