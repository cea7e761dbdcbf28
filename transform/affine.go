package transform

import (
	"fmt"
	"math"
)

// Sampling is how rotate, affine and the geometric operations of
// rand_augment and trivial_augment read the input between its pixels.
type Sampling int

const (
	// SampleNearest reads the pixel nearest to the sampled point (ties to
	// even), as torch's grid_sample with mode="nearest" and as a mask
	// moves (Fields.Move).
	SampleNearest Sampling = iota
	// SampleBilinear blends the four pixels around the sampled point, as
	// torch's grid_sample with mode="bilinear" (no antialiasing).
	SampleBilinear
)

var samplingNames = [...]string{"nearest", "bilinear"}

func (s Sampling) String() string {
	if int(s) < len(samplingNames) {
		return samplingNames[s]
	}
	return fmt.Sprintf("Sampling(%d)", int(s))
}

// SamplingNames lists the accepted sampling names, in order.
func SamplingNames() []string { return samplingNames[:] }

// ParseSampling returns the Sampling with the given name.
func ParseSampling(s string) (Sampling, error) {
	for i, n := range samplingNames {
		if n == s {
			return Sampling(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown interpolation %q (want nearest or bilinear)", ErrParam, s)
}

// piF is π as a runtime float64, so that degrees convert as CPython's
// math.radians and math.degrees do (a float64 division by 180, not the
// exact constant π/180).
var piF = math.Pi

// inverseAffine is torchvision's _get_inverse_affine_matrix(center,
// angle, translate, scale, shear) (inverted=True) for a tensor: the map
// from an output point to the input point it shows, both in pixels about
// the image's centre; angle and shears are in degrees, the angle
// clockwise. Its entries are rounded to float32, as torch holds them.
func inverseAffine(cx, cy, angle, tx, ty, scale, shx, shy float64) [6]float64 {
	rad := piF / 180
	rot, sx, sy := angle*rad, shx*rad, shy*rad
	a := math.Cos(rot-sy) / math.Cos(sy)
	b := -math.Cos(rot-sy)*math.Tan(sx)/math.Cos(sy) - math.Sin(rot)
	c := math.Sin(rot-sy) / math.Cos(sy)
	d := -math.Sin(rot-sy)*math.Tan(sx)/math.Cos(sy) + math.Cos(rot)
	m := [6]float64{d / scale, -b / scale, 0, -c / scale, a / scale, 0}
	m[2] += m[0]*(-cx-tx) + m[1]*(-cy-ty)
	m[5] += m[3]*(-cx-tx) + m[4]*(-cy-ty)
	m[2] += cx
	m[5] += cy
	for i, v := range m {
		m[i] = float64(float32(v))
	}
	return m
}

// affineGeometry is the GeomAffine geometry of torchvision's affine grid
// (_gen_affine_grid) for the centred inverse matrix m, from an h×w input
// to an oh×ow output: output point (x, y) is (x-ow/2, y-oh/2) about the
// output's centre, m maps it about the input's centre, and adding
// (w/2, h/2) gives the input point.
func affineGeometry(m [6]float64, h, w, oh, ow int) Geometry {
	hw, hh := float64(w)/2, float64(h)/2
	ohw, ohh := float64(ow)/2, float64(oh)/2
	return Geometry{Kind: GeomAffine, OH: oh, OW: ow, M: [6]float64{
		m[0], m[1], m[2] + hw - m[0]*ohw - m[1]*ohh,
		m[3], m[4], m[5] + hh - m[3]*ohw - m[4]*ohh,
	}}
}

// expandedSize is the output size of torchvision's rotate with
// expand=True (_compute_affine_output_size): the bounding box of the
// input's corners under m, its edges truncated to 1e-4 before rounding
// outwards, so that 1e-15 of rounding does not add a pixel.
func expandedSize(m [6]float64, h, w int) (oh, ow int) {
	hw, hh := 0.5*float64(w), 0.5*float64(h)
	lo := [2]float64{math.Inf(1), math.Inf(1)}
	hi := [2]float64{math.Inf(-1), math.Inf(-1)}
	for _, p := range [4][2]float64{{-hw, -hh}, {-hw, hh}, {hw, hh}, {hw, -hh}} {
		for i := range 2 {
			v := m[3*i]*p[0] + m[3*i+1]*p[1] + m[3*i+2]
			lo[i], hi[i] = min(lo[i], v), max(hi[i], v)
		}
	}
	const tol = 1e-4
	size := func(i int, half float64) int {
		top := math.Ceil(math.Trunc((hi[i]+half)/tol) * tol)
		bottom := math.Floor(math.Trunc((lo[i]+half)/tol) * tol)
		return int(top - bottom)
	}
	return size(1, hh), size(0, hw)
}

// warp writes the g.OH×g.OW image of src under the GeomAffine geometry g
// into dst. A point outside src reads fill; with bilinear sampling, an
// output pixel whose neighbours are partly outside is torchvision's blend
// for a given fill: v·m + (1-m)·fill, where m is the weight of the
// neighbours inside and v their weighted sum. Bilinear results round to
// the nearest integer, ties to even, as torchvision's cast back to uint8.
// Nearest sampling rounds the point's coordinates to even, computed as
// Fields.Move computes a mask's, so an image and its mask always read the
// same pixel (torch's float32 grid puts a point exactly between two
// pixels on either side).
//
// Rows are done in runs of warpRun pixels: the source offsets (and
// bilinear weights) of a run are computed once, then each channel is a
// tight gather over them.
func warp(dst, src *Image, g *Geometry, s Sampling, fill uint8) {
	dst.Resize(src.C, g.OH, g.OW)
	if len(src.Pix) < src.C*src.H*src.W {
		panic("transform: image buffer shorter than its shape")
	}
	if s == SampleNearest {
		warpNearest(dst, src, &g.M, fill)
		return
	}
	warpBilinear(dst, src, &g.M, fill)
}

const warpRun = 64

// rowStart returns the source coordinates, in pixel indices (pixel
// centres at integers), that output pixel (0, y) samples; each step right
// adds (m[0], m[3]).
func rowStart(m *[6]float64, y int) (x0, y0 float64) {
	fy := float64(y) + 0.5
	return 0.5*m[0] + m[1]*fy + m[2] - 0.5, 0.5*m[3] + m[4]*fy + m[5] - 0.5
}

func warpNearest(dst, src *Image, m *[6]float64, fill uint8) {
	w, plane, oplane := src.W, src.H*src.W, dst.H*dst.W
	fw, fh := float64(src.W), float64(src.H)
	var off [warpRun]int32 // source offset in a plane, -1 for fill
	for y := range dst.H {
		cy := float64(y) + 0.5
		for x0 := 0; x0 < dst.W; x0 += warpRun {
			n := min(warpRun, dst.W-x0)
			for i := range off[:n] {
				// The expression of Fields.Move's mask, so that the image
				// and its mask read the same pixel, ties included.
				cx := float64(x0+i) + 0.5
				sx := math.RoundToEven(m[0]*cx + m[1]*cy + m[2] - 0.5)
				sy := math.RoundToEven(m[3]*cx + m[4]*cy + m[5] - 0.5)
				off[i] = -1
				if sx >= 0 && sy >= 0 && sx < fw && sy < fh {
					off[i] = int32(int(sy)*w + int(sx))
				}
			}
			o := y*dst.W + x0
			for c := range src.C {
				sp := src.Pix[c*plane : (c+1)*plane]
				dp := dst.Pix[c*oplane+o : c*oplane+o+n]
				for i, s := range off[:len(dp)] {
					if s < 0 {
						dp[i] = fill
						continue
					}
					dp[i] = sp[s]
				}
			}
		}
	}
}

func warpBilinear(dst, src *Image, m *[6]float64, fill uint8) {
	w, h, plane, oplane := src.W, src.H, src.H*src.W, dst.H*dst.W
	fw, fh := float64(w-1), float64(h-1)
	// off is the offset of the top-left neighbour, -1 for a pixel with
	// some neighbours outside (done one at a time, from ix and iy), or -2
	// for one with all outside (fill); wt are the weights of the four
	// neighbours, as torch forms them.
	var off [warpRun]int32
	var wt [warpRun][4]float32
	var ix, iy [warpRun]float64
	for y := range dst.H {
		bx, by := rowStart(m, y)
		for x0 := 0; x0 < dst.W; x0 += warpRun {
			n := min(warpRun, dst.W-x0)
			tx, ty := bx+m[0]*float64(x0), by+m[3]*float64(x0)
			for i := range off[:n] {
				ix[i], iy[i] = tx, ty
				switch {
				case !(tx > -1 && ty > -1 && tx < fw+1 && ty < fh+1):
					off[i] = -2
				case !(tx >= 0 && ty >= 0 && tx < fw && ty < fh):
					off[i] = -1
				default:
					xi, yi := int(tx), int(ty)
					fx, fy := float32(tx-float64(xi)), float32(ty-float64(yi))
					wt[i] = [4]float32{(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy}
					off[i] = int32(yi*w + xi)
				}
				tx += m[0]
				ty += m[3]
			}
			o := y*dst.W + x0
			for c := range src.C {
				sp := src.Pix[c*plane : (c+1)*plane]
				dp := dst.Pix[c*oplane+o : c*oplane+o+n]
				for i, s := range off[:len(dp)] {
					if s < 0 {
						if s == -2 {
							dp[i] = fill
						}
						continue
					}
					p := sp[s : int(s)+w+2]
					k := &wt[i]
					v := float32(float32(float32(p[0])*k[0])+float32(float32(p[1])*k[1])) +
						float32(float32(float32(p[w])*k[2])+float32(float32(p[w+1])*k[3]))
					dp[i] = roundHalfEven(v)
				}
			}
			for i, s := range off[:n] {
				if s == -1 {
					bilinearEdge(dst, src, o+i, ix[i], iy[i], fill)
				}
			}
		}
	}
}

// bilinearEdge writes output pixel o (an offset in a plane) of every
// channel from the point (ix, iy), some of whose neighbours lie outside
// src: those count with weight zero, and the fill takes their share.
func bilinearEdge(dst, src *Image, o int, ix, iy float64, fill uint8) {
	w, h := src.W, src.H
	x0, y0 := floor(ix), floor(iy)
	fx, fy := float32(ix-float64(x0)), float32(iy-float64(y0))
	wts := [4]float32{(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy}
	var offs [4]int
	var in float32
	for k, q := range [4][2]int{{x0, y0}, {x0 + 1, y0}, {x0, y0 + 1}, {x0 + 1, y0 + 1}} {
		offs[k] = -1
		if uint(q[0]) < uint(w) && uint(q[1]) < uint(h) {
			offs[k] = q[1]*w + q[0]
			in += wts[k]
		}
	}
	for c := range src.C {
		sp := src.Plane(c)
		var v float32
		for k, s := range offs {
			if s >= 0 {
				v += float32(float32(sp[s]) * wts[k])
			}
		}
		dst.Pix[c*dst.H*dst.W+o] = roundHalfEven(float32(v*in) + float32((1-in)*float32(fill)))
	}
}

// floor is math.Floor for the coordinates of a warp, as an int.
func floor(v float64) int {
	i := int(v)
	if float64(i) > v {
		i--
	}
	return i
}

// roundHalfEven rounds v, a blend of bytes with non-negative weights, to
// the nearest byte, ties to even: adding and taking away 2^23 leaves v
// rounded in float32's default rounding mode.
func roundHalfEven(v float32) uint8 {
	v += 1 << 23
	v -= 1 << 23
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// RotateOp rotates the image, with probability P, by an angle drawn
// uniformly from [-Degrees, Degrees], counter-clockwise for positive
// angles, about its centre (torchvision's RandomRotation on a uint8
// tensor, with fill given). With Expand the output is the size of the
// rotated image's bounding box, so it varies with the angle; otherwise it
// is the input's size. Uncovered pixels are Fill.
type RotateOp struct {
	Degrees float64
	Interp  Sampling
	Fill    uint8
	Expand  bool
	P       float64
}

// Rotate returns the rotate operation: 0 ≤ degrees ≤ 180, fill a pixel
// value 0 to 255, 0 ≤ p ≤ 1.
func Rotate(degrees float64, interp Sampling, fill int, expand bool, p float64) (*RotateOp, error) {
	if !(degrees >= 0 && degrees <= 180) {
		return nil, paramErr("rotate", "degrees=%g: want 0 to 180", degrees)
	}
	if err := checkWarp("rotate", interp, fill); err != nil {
		return nil, err
	}
	if !(p >= 0 && p <= 1) {
		return nil, paramErr("rotate", "p=%g: must be between 0 and 1", p)
	}
	return &RotateOp{Degrees: degrees, Interp: interp, Fill: uint8(fill), Expand: expand, P: p}, nil
}

func checkWarp(op string, interp Sampling, fill int) error {
	if interp != SampleNearest && interp != SampleBilinear {
		return paramErr(op, "unknown interpolation %d", interp)
	}
	if fill < 0 || fill > 255 {
		return paramErr(op, "fill=%d: want a pixel value from 0 to 255", fill)
	}
	return nil
}

func (o *RotateOp) Name() string { return "rotate" }
func (o *RotateOp) Random() bool { return true }
func (o *RotateOp) String() string {
	return fmt.Sprintf("rotate degrees=%g interpolation=%s fill=%d expand=%t p=%g", o.Degrees, o.Interp, o.Fill, o.Expand, o.P)
}

// OutShape is in, or with Expand a size that varies with the angle: at
// most the input's diagonal plus 2 a side (the box's edges round
// outwards), which must not exceed MaxSide.
func (o *RotateOp) OutShape(in Shape) (Shape, error) {
	if !o.Expand {
		return in, nil
	}
	if math.Hypot(float64(in.H), float64(in.W))+2 > MaxSide {
		return Shape{}, fmt.Errorf("rotate: expand=true would make the %s images' rotations longer than %d (MaxSide) a side", in, MaxSide)
	}
	return Shape{C: in.C}, nil
}

// Geometry draws twice, whether or not the rotation happens: first
// against P, then the angle.
func (o *RotateOp) Geometry(in Shape, r *Rand) Geometry {
	fire := r.Float64() < o.P
	angle := r.Uniform(-o.Degrees, o.Degrees)
	if !fire {
		return Geometry{Kind: GeomIdentity, OH: in.H, OW: in.W}
	}
	return rotation(in, angle, o.Expand)
}

// rotation is the geometry of torchvision's rotate by angle degrees
// counter-clockwise about the centre of an image of shape in.
func rotation(in Shape, angle float64, expand bool) Geometry {
	m := inverseAffine(0, 0, -angle, 0, 0, 1, 0, 0)
	oh, ow := in.H, in.W
	if expand {
		oh, ow = expandedSize(m, in.H, in.W)
	}
	return affineGeometry(m, in.H, in.W, oh, ow)
}

func (o *RotateOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWarp(dst, src, g, o.Interp, o.Fill)
}

func (o *RotateOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// AffineOp is torchvision's RandomAffine on a uint8 tensor: an angle
// uniform in [-Degrees, Degrees] (clockwise for positive angles, as
// torchvision's affine), a translation of a whole number of pixels, the
// nearest to one uniform in ±Translate[0] of the width and ±Translate[1]
// of the height, a scale uniform in Scale, and shears in degrees uniform
// in [Shear[0], Shear[1]] along x and [Shear[2], Shear[3]] along y, about
// the image's centre. Uncovered pixels are Fill.
type AffineOp struct {
	Degrees   float64
	Translate [2]float64
	Scale     [2]float64
	Shear     [4]float64
	Interp    Sampling
	Fill      uint8
}

// Affine returns the affine operation: 0 ≤ degrees ≤ 180, translations
// in [0, 1], 0 < scale[0] ≤ scale[1] ≤ 100, -90 < shear lows ≤ highs < 90,
// fill a pixel value 0 to 255.
func Affine(degrees float64, translate, scale [2]float64, shear [4]float64, interp Sampling, fill int) (*AffineOp, error) {
	if !(degrees >= 0 && degrees <= 180) {
		return nil, paramErr("affine", "degrees=%g: want 0 to 180", degrees)
	}
	for _, t := range translate {
		if !(t >= 0 && t <= 1) {
			return nil, paramErr("affine", "translate=%g,%g: want fractions of the size from 0 to 1", translate[0], translate[1])
		}
	}
	if !(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 100) {
		return nil, paramErr("affine", "scale=%g,%g: want 0 < min ≤ max ≤ 100", scale[0], scale[1])
	}
	for i := 0; i < 4; i += 2 {
		if !(shear[i] > -90 && shear[i] <= shear[i+1] && shear[i+1] < 90) {
			return nil, paramErr("affine", "shear=%g,%g,%g,%g: want -90 < min ≤ max < 90 degrees on each axis", shear[0], shear[1], shear[2], shear[3])
		}
	}
	if err := checkWarp("affine", interp, fill); err != nil {
		return nil, err
	}
	return &AffineOp{Degrees: degrees, Translate: translate, Scale: scale, Shear: shear, Interp: interp, Fill: uint8(fill)}, nil
}

func (o *AffineOp) Name() string { return "affine" }
func (o *AffineOp) Random() bool { return true }
func (o *AffineOp) String() string {
	return fmt.Sprintf("affine degrees=%g translate=%g,%g scale=%g,%g shear=%g,%g,%g,%g interpolation=%s fill=%d",
		o.Degrees, o.Translate[0], o.Translate[1], o.Scale[0], o.Scale[1],
		o.Shear[0], o.Shear[1], o.Shear[2], o.Shear[3], o.Interp, o.Fill)
}
func (o *AffineOp) OutShape(in Shape) (Shape, error) { return in, nil }

// Geometry draws six values, in torchvision's order, whatever the ranges:
// the angle, the x and y translations, the scale, the x and y shears.
func (o *AffineOp) Geometry(in Shape, r *Rand) Geometry {
	angle := r.Uniform(-o.Degrees, o.Degrees)
	dx, dy := o.Translate[0]*float64(in.W), o.Translate[1]*float64(in.H)
	tx := math.RoundToEven(r.Uniform(-dx, dx))
	ty := math.RoundToEven(r.Uniform(-dy, dy))
	scale := r.Uniform(o.Scale[0], o.Scale[1])
	shx := r.Uniform(o.Shear[0], o.Shear[1])
	shy := r.Uniform(o.Shear[2], o.Shear[3])
	m := inverseAffine(0, 0, angle, tx, ty, scale, shx, shy)
	return affineGeometry(m, in.H, in.W, in.H, in.W)
}

func (o *AffineOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWarp(dst, src, g, o.Interp, o.Fill)
}

func (o *AffineOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// applyWarp is rotate's and affine's ApplyGeometry: dst warped from src by
// g, or false, dst untouched, where g is the identity (the op did not
// fire).
func applyWarp(dst, src *Image, g Geometry, interp Sampling, fill uint8) bool {
	if g.Kind == GeomIdentity {
		return false
	}
	warp(dst, src, &g, interp, fill)
	return true
}
