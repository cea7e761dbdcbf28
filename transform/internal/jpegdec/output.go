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
	out := c.row[:cw:cw]
	last := c.dsw - 1
	switch {
	case c.fx == 1 && c.fy == 1:
		o := (oy-c.py0)*c.stride + x0
		return c.plane[o : o+cw : o+cw]
	case c.fancy && c.fx == 2 && c.fy == 1 && c.dsw > 2:
		row := c.plane[(oy-c.py0)*c.stride:]
		for i := range out {
			x := x0 + i
			s := x >> 1
			v := 3 * int(row[s])
			if x&1 == 0 {
				out[i] = byte((v + int(row[max(s-1, 0)]) + 1) >> 2)
			} else {
				out[i] = byte((v + int(row[min(s+1, last)]) + 2) >> 2)
			}
		}
	case c.fancy && c.fx == 1 && c.fy == 2:
		near, far, bias := c.rows(oy)
		for i := range out {
			x := x0 + i
			out[i] = byte((3*int(near[x]) + int(far[x]) + bias) >> 2)
		}
	case c.fancy && c.fx == 2 && c.fy == 2 && c.dsw > 2:
		near, far, _ := c.rows(oy)
		sum := func(s int) int { return 3*int(near[s]) + int(far[s]) }
		for i := range out {
			x := x0 + i
			s := x >> 1
			if x&1 == 0 {
				out[i] = byte((3*sum(s) + sum(max(s-1, 0)) + 8) >> 4)
			} else {
				out[i] = byte((3*sum(s) + sum(min(s+1, last)) + 7) >> 4)
			}
		}
	default:
		row := c.plane[(oy/c.fy-c.py0)*c.stride:]
		for i := range out {
			out[i] = row[(x0+i)/c.fx]
		}
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

// yccRGB converts YCbCr to RGB with the arithmetic of libjpeg-turbo's SIMD
// converters (jdcolext-avx2.asm), in 16-bit fixed point: R = Y + Cr +
// 0.402·Cr, G = Y - 0.34414·Cb + 0.28586·Cr - Cr, B = Y + 2·Cb - 0.228·Cb.
func yccRGB(y, cb, cr, r, g, b []byte) {
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

func clamp(v int32) byte {
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return byte(v)
}

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
