package transform

import "math"

// rotateHue shifts the hue of every pixel of a 3-channel image by f, a
// fraction of the colour wheel in [-0.5, 0.5], in place: torchvision's
// adjust_hue on a uint8 tensor, computed as it computes it — float32
// values v/255, Pillow's RGB→HSV, the hue moved modulo 1, HSV→RGB, and the
// result times 255 truncated to a byte.
func rotateHue(img *Image, f float32) {
	r, g, b := img.Plane(0), img.Plane(1), img.Plane(2)
	for i := range r {
		r[i], g[i], b[i] = hueShift(r[i], g[i], b[i], f)
	}
}

func hueShift(r8, g8, b8 uint8, f float32) (uint8, uint8, uint8) {
	r, g, b := float32(r8)/255, float32(g8)/255, float32(b8)/255
	maxc, minc := max(r, g, b), min(r, g, b)
	cr := maxc - minc
	var s, h float32
	if maxc != minc {
		s = cr / maxc
		rc, gc, bc := (maxc-r)/cr, (maxc-g)/cr, (maxc-b)/cr
		// torchvision sums the three cases, each masked to 0 or 1.
		var hr, hg, hb float32
		if maxc == r {
			hr = bc - gc
		}
		if maxc == g && maxc != r {
			hg = 2 + rc - bc
		}
		if maxc != g && maxc != r {
			hb = 4 + gc - rc
		}
		h = float32(hr+hg) + hb
	} else {
		// Where maxc == minc torchvision's three terms are computed with
		// every difference 0 and a divisor of 1: hr = 0, hg = 0 unless
		// maxc == g != r (never here), hb = 0 unless neither matches.
		h = 0
	}
	h = float32(math.Mod(float64(h/6+1), 1))
	// (h + f) % 1.0 is a floor modulo (torch.remainder).
	h += f
	h -= float32(math.Floor(float64(h)))
	v := maxc
	// The conversions round every product as torch does, so that no
	// compiler fuses a multiply and an add.
	h6 := float32(h * 6)
	i := float32(math.Floor(float64(h6)))
	fr := h6 - i
	p := clamp01(v * (1 - s))
	q := clamp01(v * (1 - float32(s*fr)))
	t := clamp01(v * (1 - float32(s*(1-fr))))
	var ro, gout, bo float32
	switch int32(i) % 6 {
	case 0:
		ro, gout, bo = v, t, p
	case 1:
		ro, gout, bo = q, v, p
	case 2:
		ro, gout, bo = p, v, t
	case 3:
		ro, gout, bo = p, q, v
	case 4:
		ro, gout, bo = t, p, v
	default:
		ro, gout, bo = v, p, q
	}
	return uint8(float32(ro * 255)), uint8(float32(gout * 255)), uint8(float32(bo * 255))
}

func clamp01(v float32) float32 { return min(max(v, 0), 1) }
