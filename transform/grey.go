package transform

import "fmt"

// GrayscaleOp replaces, with probability P, each pixel of a 3-channel image
// by its grey level 0.2989·R + 0.587·G + 0.114·B in all three channels
// (torchvision's RandomGrayscale on a uint8 tensor, bit for bit: the sum is
// formed in float32 and truncated, as rgb_to_grayscale does). A 1-channel
// image is already grey and passes unchanged.
type GrayscaleOp struct {
	P float64
}

// Grayscale returns the grayscale operation; p is in [0, 1].
func Grayscale(p float64) (*GrayscaleOp, error) {
	if !(p >= 0 && p <= 1) {
		return nil, paramErr("grayscale", "p=%g: must be between 0 and 1", p)
	}
	return &GrayscaleOp{P: p}, nil
}

func (o *GrayscaleOp) Name() string   { return "grayscale" }
func (o *GrayscaleOp) Random() bool   { return true }
func (o *GrayscaleOp) String() string { return fmt.Sprintf("grayscale p=%g", o.P) }

func (o *GrayscaleOp) OutShape(in Shape) (Shape, error) {
	if in.C != 1 && in.C != 3 {
		return Shape{}, fmt.Errorf("grayscale: needs 1 or 3 channels, not %d", in.C)
	}
	return in, nil
}

// Apply draws once whatever the image, so the draws of later stages do not
// depend on the channel count.
func (o *GrayscaleOp) Apply(dst, src *Image, r *Rand) bool {
	if r.Float64() >= o.P || src.C != 3 {
		return false
	}
	grey(dst, src)
	return true
}

// grey writes src's grey level into every channel of dst. Each product is
// rounded to float32 before the sum (the conversions also keep the compiler
// from fusing them into FMAs), as torch evaluates the expression.
func grey(dst, src *Image) {
	dst.Resize(3, src.H, src.W)
	r, g, b := src.Plane(0), src.Plane(1), src.Plane(2)
	dr, dg, db := dst.Plane(0), dst.Plane(1), dst.Plane(2)
	g, b = g[:len(r)], b[:len(r)]
	dr, dg, db = dr[:len(r)], dg[:len(r)], db[:len(r)]
	for i := range r {
		v := float32(float32(float32(0.2989)*float32(r[i]))+float32(float32(0.587)*float32(g[i]))) + float32(float32(0.114)*float32(b[i]))
		y := uint8(v)
		dr[i], dg[i], db[i] = y, y, y
	}
}
