package transform

import "math"

// rowZero marks an output row of zeros in the row kernel's offsets.
const rowZero = math.MinInt32

// maxKernelRows bounds the windows the row kernel takes, so the row map
// fits on the stack.
const maxKernelRows = 256

// windowKernel is window through the assembly row kernel, for windows whose
// width is a multiple of 16. Each row is read as w bytes starting at the
// window's left edge in the source row: bytes left or right of the image's
// row come from its neighbours in memory and land exactly on the border
// columns, which the kernel then overwrites from the border map. A row whose
// read would leave src.Pix (only the first or last row of the buffer can)
// is done here in Go instead. It reports false when the window does not fit
// its limits, and the caller goes on in Go.
func windowKernel(dst, src *Image, oy, ox, h, w int, f Fill, mirror bool, scol, dcol []int) bool {
	if !rowKernel || w%16 != 0 || h > maxKernelRows || len(scol) > 2*maxBorder {
		return false
	}
	sh, sw := src.H, src.W
	plane := sh * sw
	if len(src.Pix) < src.C*plane || len(dst.Pix) < src.C*h*w {
		panic("transform: image buffer shorter than its shape")
	}
	var offs [maxKernelRows]int32
	lo, hi := math.MaxInt32, math.MinInt32 // range of the rows' read offsets
	for y := range h {
		offs[y] = rowZero
		if sy := f.source(oy+y, sh); sy >= 0 {
			o := sy*sw + ox
			offs[y] = int32(o)
			lo, hi = min(lo, o), max(hi, o)
		}
	}
	var sc, dc [2 * maxBorder]int32
	for i := range scol {
		sc[i] = int32(scol[i] - ox) // relative to the window's left edge
		dc[i] = int32(dcol[i])
	}
	flags := 0
	if mirror {
		flags |= 1
	}
	if f == FillZero {
		flags |= 2
	}
	n := len(src.Pix)
	for c := 0; c < src.C; c++ {
		base := c * plane
		if base+lo >= 0 && base+hi+w <= n {
			// Every read of this channel stays inside src.Pix.
			windowRowsSSSE3(&dst.Pix[c*h*w], &src.Pix[base], &offs[0], h, w, &sc[0], &dc[0], len(scol), flags)
			continue
		}
		r0 := 0
		for y := 0; y <= h; y++ {
			// A row is done in Go when its read would leave src.Pix.
			bad := y < h && offs[y] != rowZero && (base+int(offs[y]) < 0 || base+int(offs[y])+w > n)
			if y < h && !bad {
				continue
			}
			if y > r0 {
				windowRowsSSSE3(&dst.Pix[(c*h+r0)*w], &src.Pix[base], &offs[r0], y-r0, w, &sc[0], &dc[0], len(scol), flags)
			}
			if bad {
				sy := (int(offs[y]) - ox) / sw
				row := dst.Pix[(c*h+y)*w : (c*h+y+1)*w]
				for x := range row {
					wx := x
					if mirror {
						wx = w - 1 - x
					}
					var v byte
					if sx := f.source(ox+wx, sw); sx >= 0 {
						v = src.Pix[base+sy*sw+sx]
					}
					row[x] = v
				}
			}
			r0 = y + 1
		}
	}
	return true
}
