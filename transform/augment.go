package transform

import (
	"fmt"
	"math"
	"sync"
)

// augOp is one operation of rand_augment and trivial_augment, in the
// order of torchvision's augmentation space (the index a draw picks).
type augOp int

const (
	augIdentity augOp = iota
	augShearX
	augShearY
	augTranslateX
	augTranslateY
	augRotate
	augBrightness
	augColor
	augContrast
	augSharpness
	augPosterize
	augSolarize
	augAutoContrast
	augEqualize
	numAugOps
)

var augNames = [numAugOps]string{"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
	"Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"}

func (k augOp) String() string { return augNames[k] }

// signed reports whether the operation's magnitude takes a random sign.
func (k augOp) signed() bool { return k >= augShearX && k <= augSharpness }

// geometric reports whether the operation moves pixels.
func (k augOp) geometric() bool { return k >= augShearX && k <= augRotate }

// linspace32 is element i of torch.linspace(start, end, n) in float32,
// as torch 1.13's CPU kernel (AVX2) computes it, bit for bit: elements
// come in vectors of 8, two vectors at a time; a vector's first element
// is a fused multiply-add from the nearer end (start + j·step in the first
// half, end - (n-1-j)·step in the second), its other lanes add lane·step
// to it; the elements past the last pair of vectors come from the nearer
// end each.
func linspace32(start, end float32, n, i int) float32 {
	if n == 1 {
		return start
	}
	step := (end - start) / float32(n-1)
	from := func(j int) float32 {
		if j < n/2 {
			return float32(math.FMA(float64(step), float64(j), float64(start)))
		}
		return float32(math.FMA(-float64(step), float64(n-1-j), float64(end)))
	}
	if i >= n/16*16 {
		return from(i)
	}
	b := i / 8 * 8
	return from(b) + float32(float32(i-b)*step)
}

// magnitude is the unsigned magnitude of operation k at bin i of n bins,
// for an image of h×w pixels, as torchvision's augmentation space holds
// it: RandAugment's, or with wide TrivialAugmentWide's. Operations
// without a magnitude have 0.
func magnitude(k augOp, i, n, h, w int, wide bool) float64 {
	ramp := func(ra, ta float64) float64 {
		top := ra
		if wide {
			top = ta
		}
		return float64(linspace32(0, float32(top), n, i))
	}
	switch k {
	case augShearX, augShearY:
		return ramp(0.3, 0.99)
	case augTranslateX:
		return ramp(150.0/331.0*float64(w), 32)
	case augTranslateY:
		return ramp(150.0/331.0*float64(h), 32)
	case augRotate:
		return ramp(30, 135)
	case augBrightness, augColor, augContrast, augSharpness:
		return ramp(0.9, 0.99)
	case augPosterize:
		steps := 4.0
		if wide {
			steps = 6
		}
		return 8 - math.RoundToEven(float64(float32(i)/float32(float64(n-1)/steps)))
	case augSolarize:
		return float64(linspace32(255, 0, n, i))
	}
	return 0
}

// augment holds what rand_augment and trivial_augment share: the
// sampling and fill of the geometric operations, and a pool of scratch
// images for chains of operations.
type augment struct {
	interp  Sampling
	fill    uint8
	scratch *sync.Pool
}

func newAugment(interp Sampling, fill int) augment {
	return augment{interp: interp, fill: uint8(fill), scratch: &sync.Pool{New: func() any { return new(Image) }}}
}

// geometry is the geometry of operation k with the signed magnitude mag
// on an image of shape in, as torchvision's _apply_op makes it: shears
// about the top-left corner (center=[0, 0]) by atan(mag) in degrees,
// translations by int(mag) pixels, rotations about the centre; identity
// for the colour operations.
func (a *augment) geometry(k augOp, mag float64, in Shape) Geometry {
	var m [6]float64
	hw, hh := float64(in.W)/2, float64(in.H)/2
	switch k {
	case augShearX:
		m = inverseAffine(-hw, -hh, 0, 0, 0, 1, math.Atan(mag)*(180/piF), 0)
	case augShearY:
		m = inverseAffine(-hw, -hh, 0, 0, 0, 1, 0, math.Atan(mag)*(180/piF))
	case augTranslateX:
		m = inverseAffine(0, 0, 0, math.Trunc(mag), 0, 1, 0, 0)
	case augTranslateY:
		m = inverseAffine(0, 0, 0, 0, math.Trunc(mag), 1, 0, 0)
	case augRotate:
		return rotation(in, mag, false)
	default:
		return Geometry{Kind: GeomIdentity, OH: in.H, OW: in.W}
	}
	return affineGeometry(m, in.H, in.W, in.H, in.W)
}

// apply writes operation k with the signed magnitude mag on src into dst,
// as torchvision's _apply_op on a uint8 tensor with fill given, or
// returns false when the result is src (dst untouched). A geometric
// operation moves f (when not nil) as it moves the image.
func (a *augment) apply(dst, src *Image, k augOp, mag float64, f *Fields) bool {
	switch k {
	case augIdentity:
		return false
	case augShearX, augShearY, augTranslateX, augTranslateY, augRotate:
		g := a.geometry(k, mag, src.Shape())
		if f != nil {
			f.Move(g)
		}
		warp(dst, src, &g, a.interp, a.fill)
	case augBrightness:
		var lut [1][256]uint8
		r, q := blendRatios(1 + mag)
		for v := range lut[0] {
			lut[0][v] = mix(float32(v), 0, r, q)
		}
		applyLUT(dst, src, lut[:])
	case augColor:
		if src.C != 3 {
			return false
		}
		saturate(dst, src, 1+mag)
	case augContrast:
		var lut [1][256]uint8
		mean := meanGrey(src)
		r, q := blendRatios(1 + mag)
		for v := range lut[0] {
			lut[0][v] = mix(float32(v), mean, r, q)
		}
		applyLUT(dst, src, lut[:])
	case augSharpness:
		if src.H <= 2 || src.W <= 2 {
			return false
		}
		sharpen(dst, src, 1+mag)
	case augPosterize:
		bits := int(mag)
		if bits >= 8 {
			return false
		}
		var lut [1][256]uint8
		for v := range lut[0] {
			lut[0][v] = uint8(v) &^ (1<<(8-bits) - 1)
		}
		applyLUT(dst, src, lut[:])
	case augSolarize:
		var lut [1][256]uint8
		for v := range lut[0] {
			lut[0][v] = uint8(v)
			if float32(v) >= float32(mag) {
				lut[0][v] = 255 - uint8(v)
			}
		}
		applyLUT(dst, src, lut[:])
	case augAutoContrast:
		var luts [3][256]uint8
		for c := range src.C {
			autocontrastLUT(&luts[c], src.Plane(c))
		}
		applyLUT(dst, src, luts[:src.C])
	case augEqualize:
		var luts [3][256]uint8
		for c := range src.C {
			equalizeLUT(&luts[c], src.Plane(c))
		}
		applyLUT(dst, src, luts[:src.C])
	}
	return true
}

// chain applies the operations ks with their signed magnitudes mags to
// src, the result in dst, through a scratch image from the pool, moving f
// with them (when not nil); it returns false when every operation left
// the image as it was.
func (a *augment) chain(dst, src *Image, ks []augOp, mags []float64, f *Fields) bool {
	tmp := a.scratch.Get().(*Image)
	defer a.scratch.Put(tmp)
	cur := src
	for i, k := range ks {
		next := dst
		if cur == dst {
			next = tmp
		}
		if a.apply(next, cur, k, mags[i], f) {
			cur = next
		}
	}
	if cur == tmp {
		dst.Resize(tmp.C, tmp.H, tmp.W)
		copy(dst.Pix, tmp.Pix)
	}
	return cur != src
}

// blendRatios are torchvision's _blend weights for ratio, as float32: the
// ratio and 1 - ratio (taken in float64 first, as Python does).
func blendRatios(ratio float64) (r, q float32) { return float32(ratio), float32(1 - ratio) }

// mix is torchvision's _blend of one uint8 value a with b: a·r + b·q, each
// product and the sum in float32, clamped to [0, 255] and truncated.
func mix(a, b, r, q float32) uint8 {
	v := float32(a*r) + float32(b*q)
	return uint8(min(max(v, 0), 255))
}

// applyLUT writes luts[c][v] for every value v of channel c of src into
// dst; channels past the last table use the last.
func applyLUT(dst, src *Image, luts [][256]uint8) {
	dst.Resize(src.C, src.H, src.W)
	for c := range src.C {
		t, sp := &luts[min(c, len(luts)-1)], src.Plane(c)
		dp := dst.Plane(c)[:len(sp)]
		for i, v := range sp {
			dp[i] = t[v]
		}
	}
}

// greyAt is rgb_to_grayscale of one pixel, as grey computes it.
func greyAt(r, g, b uint8) uint8 {
	return uint8(float32(float32(float32(0.2989)*float32(r))+float32(float32(0.587)*float32(g))) + float32(float32(0.114)*float32(b)))
}

// meanGrey is torchvision's adjust_contrast mean: of the grey levels of a
// 3-channel image, of the values of a 1-channel one, in float32. The sum
// is exact (an integer), the division float32's.
func meanGrey(src *Image) float32 {
	var sum int64
	n := src.H * src.W
	if src.C == 3 {
		r, g, b := src.Plane(0), src.Plane(1), src.Plane(2)
		for i := range r {
			sum += int64(greyAt(r[i], g[i], b[i]))
		}
	} else {
		n *= src.C
		for _, v := range src.Pix[:n] {
			sum += int64(v)
		}
	}
	return float32(sum) / float32(n)
}

// saturate is torchvision's adjust_saturation: each pixel blended with
// its grey level.
func saturate(dst, src *Image, factor float64) {
	dst.Resize(3, src.H, src.W)
	r, q := blendRatios(factor)
	sr, sg, sb := src.Plane(0), src.Plane(1), src.Plane(2)
	dr, dg, db := dst.Plane(0), dst.Plane(1), dst.Plane(2)
	sg, sb, dr, dg, db = sg[:len(sr)], sb[:len(sr)], dr[:len(sr)], dg[:len(sr)], db[:len(sr)]
	for i := range sr {
		y := float32(greyAt(sr[i], sg[i], sb[i]))
		dr[i] = mix(float32(sr[i]), y, r, q)
		dg[i] = mix(float32(sg[i]), y, r, q)
		db[i] = mix(float32(sb[i]), y, r, q)
	}
}

// sharpen is torchvision's adjust_sharpness: each pixel blended with the
// image smoothed by the 3×3 kernel [1 1 1; 1 5 1; 1 1 1]/13 (rounded to
// an integer; the border rows and columns keep their values). A sum s of
// integers over 13 is never a tie, so round(s/13) = ⌊(2s+13)/26⌋ is
// exactly torch's float32 convolution rounded.
func sharpen(dst, src *Image, factor float64) {
	dst.Resize(src.C, src.H, src.W)
	r, q := blendRatios(factor)
	h, w := src.H, src.W
	for c := range src.C {
		sp, dp := src.Plane(c), dst.Plane(c)
		for y := range h {
			row := sp[y*w : y*w+w]
			out := dp[y*w : y*w+w]
			if y == 0 || y == h-1 {
				for x, v := range row {
					out[x] = mix(float32(v), float32(v), r, q)
				}
				continue
			}
			up, down := sp[(y-1)*w:y*w], sp[(y+1)*w:(y+2)*w]
			out[0] = mix(float32(row[0]), float32(row[0]), r, q)
			out[w-1] = mix(float32(row[w-1]), float32(row[w-1]), r, q)
			for x := 1; x < w-1; x++ {
				s := int(up[x-1]) + int(up[x]) + int(up[x+1]) + int(row[x-1]) + 5*int(row[x]) +
					int(row[x+1]) + int(down[x-1]) + int(down[x]) + int(down[x+1])
				out[x] = mix(float32(row[x]), float32((2*s+13)/26), r, q)
			}
		}
	}
}

// autocontrastLUT is torchvision's autocontrast of one channel: values
// stretched from [min, max] to [0, 255] by the float32 scale 255/(max-min),
// truncated; a channel of one value is left as it is.
func autocontrastLUT(lut *[256]uint8, p []uint8) {
	lo, hi := uint8(255), uint8(0)
	for _, v := range p {
		lo, hi = min(lo, v), max(hi, v)
	}
	for v := range lut {
		lut[v] = uint8(v)
	}
	if hi <= lo {
		return
	}
	scale := float32(255) / float32(hi-lo)
	for v := int(lo); v < 256; v++ {
		lut[v] = uint8(min(float32(float32(v-int(lo))*scale), 255))
	}
}

// equalizeLUT is torchvision's equalize of one channel (_scale_channel):
// with step the number of pixels outside the highest value present,
// divided by 255 (floor), value v maps to the count of pixels below v,
// plus step/2, divided by step; a channel with step 0 is left as it is.
func equalizeLUT(lut *[256]uint8, p []uint8) {
	var hist [256]int
	for _, v := range p {
		hist[v]++
	}
	top := 255
	for top > 0 && hist[top] == 0 {
		top--
	}
	step := (len(p) - hist[top]) / 255
	for v := range lut {
		lut[v] = uint8(v)
	}
	if step == 0 {
		return
	}
	below := 0
	for v := range lut {
		lut[v] = uint8(min((below+step/2)/step, 255))
		below += hist[v]
	}
}

// RandAugmentOp is torchvision's RandAugment on a uint8 tensor: N times,
// an operation drawn uniformly from the 14 of its augmentation space
// (Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, Brightness,
// Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast,
// Equalize) at bin M of Bins magnitude bins, with a random sign for the
// operations that take one. Shears, translations and rotations sample by
// Interp and fill uncovered pixels with Fill, as RandAugment(fill=[Fill]*C)
// does (with nearest sampling, also as its default fill=None).
type RandAugmentOp struct {
	N, M, Bins int
	Interp     Sampling
	Fill       uint8
	augment
}

// RandAugment returns the rand_augment operation: 1 ≤ n ≤ 16,
// 2 ≤ bins ≤ 1024, 0 ≤ m < bins, fill a pixel value 0 to 255.
func RandAugment(n, m, bins int, interp Sampling, fill int) (*RandAugmentOp, error) {
	if n < 1 || n > maxAugOps {
		return nil, paramErr("rand_augment", "n=%d: want 1 to %d operations", n, maxAugOps)
	}
	if bins < 2 || bins > maxBins {
		return nil, paramErr("rand_augment", "num_bins=%d: want 2 to %d", bins, maxBins)
	}
	if m < 0 || m >= bins {
		return nil, paramErr("rand_augment", "m=%d: want a bin from 0 to num_bins-1 (%d)", m, bins-1)
	}
	if err := checkWarp("rand_augment", interp, fill); err != nil {
		return nil, err
	}
	return &RandAugmentOp{N: n, M: m, Bins: bins, Interp: interp, Fill: uint8(fill), augment: newAugment(interp, fill)}, nil
}

const (
	maxAugOps = 16
	maxBins   = 1024
)

func (o *RandAugmentOp) Name() string { return "rand_augment" }
func (o *RandAugmentOp) Random() bool { return true }
func (o *RandAugmentOp) String() string {
	return fmt.Sprintf("rand_augment n=%d m=%d num_bins=%d interpolation=%s fill=%d", o.N, o.M, o.Bins, o.Interp, o.Fill)
}
func (o *RandAugmentOp) OutShape(in Shape) (Shape, error) { return augShape("rand_augment", in) }

func augShape(op string, in Shape) (Shape, error) {
	if in.C != 1 && in.C != 3 {
		return Shape{}, fmt.Errorf("%s: needs 1 or 3 channels, not %d", op, in.C)
	}
	return in, nil
}

// Apply draws twice per operation, in turn: the operation, then its sign
// (drawn for every operation, used by those that take one).
func (o *RandAugmentOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyFields(dst, src, nil, r)
}

// ApplyFields is Apply moving f with the geometric operations (shears,
// translations, rotations) and leaving it through the others; f nil is
// Apply.
func (o *RandAugmentOp) ApplyFields(dst, src *Image, f *Fields, r *Rand) bool {
	var ks [maxAugOps]augOp
	var mags [maxAugOps]float64
	for i := range o.N {
		ks[i], mags[i] = o.draw(r, src.H, src.W)
	}
	return o.chain(dst, src, ks[:o.N], mags[:o.N], f)
}

func (o *RandAugmentOp) draw(r *Rand, h, w int) (augOp, float64) {
	k := augOp(r.Intn(int(numAugOps)))
	neg := r.Intn(2) == 1
	mag := magnitude(k, o.M, o.Bins, h, w, false)
	if neg && k.signed() {
		mag = -mag
	}
	return k, mag
}

// TrivialAugmentOp is torchvision's TrivialAugmentWide on a uint8 tensor:
// one operation drawn uniformly from the 14 of its augmentation space (as
// RandAugment's, with wider magnitudes) at a bin drawn uniformly from
// Bins, with a random sign for the operations that take one; Interp and
// Fill as RandAugmentOp's.
type TrivialAugmentOp struct {
	Bins   int
	Interp Sampling
	Fill   uint8
	augment
}

// TrivialAugment returns the trivial_augment operation: 2 ≤ bins ≤ 1024,
// fill a pixel value 0 to 255.
func TrivialAugment(bins int, interp Sampling, fill int) (*TrivialAugmentOp, error) {
	if bins < 2 || bins > maxBins {
		return nil, paramErr("trivial_augment", "num_bins=%d: want 2 to %d", bins, maxBins)
	}
	if err := checkWarp("trivial_augment", interp, fill); err != nil {
		return nil, err
	}
	return &TrivialAugmentOp{Bins: bins, Interp: interp, Fill: uint8(fill), augment: newAugment(interp, fill)}, nil
}

func (o *TrivialAugmentOp) Name() string { return "trivial_augment" }
func (o *TrivialAugmentOp) Random() bool { return true }
func (o *TrivialAugmentOp) String() string {
	return fmt.Sprintf("trivial_augment num_bins=%d interpolation=%s fill=%d", o.Bins, o.Interp, o.Fill)
}
func (o *TrivialAugmentOp) OutShape(in Shape) (Shape, error) { return augShape("trivial_augment", in) }

// Apply draws three times: the operation, its bin, its sign (the last
// two whether or not the operation uses them).
func (o *TrivialAugmentOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyFields(dst, src, nil, r)
}

// ApplyFields is Apply moving f when the operation is geometric; f nil is
// Apply.
func (o *TrivialAugmentOp) ApplyFields(dst, src *Image, f *Fields, r *Rand) bool {
	k, mag := o.draw(r, src.H, src.W)
	return o.apply(dst, src, k, mag, f)
}

func (o *TrivialAugmentOp) draw(r *Rand, h, w int) (augOp, float64) {
	k := augOp(r.Intn(int(numAugOps)))
	bin := r.Intn(o.Bins)
	neg := r.Intn(2) == 1
	mag := magnitude(k, bin, o.Bins, h, w, true)
	if neg && k.signed() {
		mag = -mag
	}
	return k, mag
}
