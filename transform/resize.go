package transform

import (
	"fmt"
	"math"
	"sync"
)

// Interp is a resampling filter.
type Interp int

const (
	Bilinear Interp = iota
	Bicubic
	Lanczos
)

var interpNames = [...]string{"bilinear", "bicubic", "lanczos"}

func (i Interp) String() string { return interpNames[i] }

// ParseInterp returns the Interp with the given name.
func ParseInterp(s string) (Interp, error) {
	for i, n := range interpNames {
		if n == s {
			return Interp(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown interpolation %q (want bilinear, bicubic or lanczos)", ErrParam, s)
}

// support is the filter's radius at scale 1; kernel its weight at x.
func (i Interp) support() float64 { return [...]float64{1, 2, 3}[i] }

func (i Interp) kernel(x float64) float64 {
	x = math.Abs(x)
	switch i {
	case Bicubic: // Keys, a = -0.5, as PIL
		const a = -0.5
		if x < 1 {
			return ((a+2)*x-(a+3))*x*x + 1
		}
		if x < 2 {
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	case Lanczos:
		if x < 3 {
			return sinc(x) * sinc(x/3)
		}
		return 0
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

// taps are the weights of one output pixel: in[start : start+len(w)].
type taps struct {
	start int
	w     []float32
}

// coeffs computes, as PIL's resampler does, the weights mapping the input
// span [lo, lo+size) of n pixels onto out pixels: when shrinking, the filter
// is stretched by the scale, so every input pixel contributes (antialiasing).
func coeffs(dst []taps, buf []float32, lo, size float64, n, out int, f Interp) ([]taps, []float32) {
	scale := size / float64(out)
	fs := max(scale, 1)
	support := f.support() * fs
	dst, buf = dst[:0], buf[:0]
	for i := range out {
		center := lo + (float64(i)+0.5)*scale
		x0 := max(int(center-support+0.5), 0)
		x1 := min(int(center+support+0.5), n)
		start := len(buf)
		var sum float64
		for x := x0; x < x1; x++ {
			w := f.kernel((float64(x) - center + 0.5) / fs)
			buf = append(buf, float32(w))
			sum += w
		}
		if sum != 0 {
			for k := start; k < len(buf); k++ {
				buf[k] = float32(float64(buf[k]) / sum)
			}
		}
		dst = append(dst, taps{start: x0, w: buf[start:len(buf):len(buf)]})
	}
	// buf may have moved while growing: point the taps at its final array.
	off := 0
	for i := range dst {
		n := len(dst[i].w)
		dst[i].w = buf[off : off+n : off+n]
		off += n
	}
	return dst, buf
}

// resampleScratch is the reusable memory of one resample call.
type resampleScratch struct {
	tx, ty []taps
	bx, by []float32
	mid    []float32
	row    []float32 // one source row as floats (AVX2 path)
	idx    []int32   // horizontal taps, tap-major, padded (AVX2 path)
	wgt    []float32
}

var scratchPool = sync.Pool{New: func() any { return new(resampleScratch) }}

// resample writes into dst (C×oh×ow) the region of src with top-left
// (y0, x0) and size h×w (in source pixels, fractional allowed) resampled by
// f: horizontally into a float buffer, then vertically, rounding and
// clamping to bytes.
func resample(dst, src *Image, y0, x0, h, w float64, oh, ow int, f Interp) {
	s := scratchPool.Get().(*resampleScratch)
	defer scratchPool.Put(s)
	s.tx, s.bx = coeffs(s.tx, s.bx, x0, w, src.W, ow, f)
	s.ty, s.by = coeffs(s.ty, s.by, y0, h, src.H, oh, f)
	// Only the source rows some output row reads.
	r0, r1 := s.ty[0].start, 0
	for _, t := range s.ty {
		r1 = max(r1, t.start+len(t.w))
	}
	rows := r1 - r0
	if cap(s.mid) < rows*ow {
		s.mid = make([]float32, rows*ow)
	}
	mid := s.mid[:rows*ow]
	dst.Resize(src.C, oh, ow)
	if resampleKernel {
		resampleAVX2(dst, src, s, mid, r0, r1, oh, ow)
		return
	}
	for c := range src.C {
		plane := src.Plane(c)
		for y := r0; y < r1; y++ {
			in := plane[y*src.W : (y+1)*src.W]
			out := mid[(y-r0)*ow : (y-r0+1)*ow]
			for x, t := range s.tx {
				var acc float32
				px := in[t.start : t.start+len(t.w)]
				for k, wt := range t.w {
					acc += float32(wt * float32(px[k])) // no FMA: the AVX2 kernel's bits
				}
				out[x] = acc
			}
		}
		op := dst.Plane(c)
		for y, t := range s.ty {
			out := op[y*ow : (y+1)*ow]
			for x := range out {
				var acc float32
				for k, wt := range t.w {
					acc += float32(wt * mid[(t.start-r0+k)*ow+x])
				}
				out[x] = clampByte(acc)
			}
		}
	}
}

// resampleAVX2 is resample's two passes with the AVX2 kernels, giving the
// same bits: each source row the vertical taps read is converted to floats
// and filtered horizontally eight outputs at a time (a gather per tap,
// taps padded with zero weights to the longest), then each output row is
// filtered vertically eight pixels at a time. Outputs past the last
// multiple of eight run the Go loops.
func resampleAVX2(dst, src *Image, s *resampleScratch, mid []float32, r0, r1, oh, ow int) {
	c0, c1, T := src.W, 0, 0
	for _, t := range s.tx {
		if len(t.w) > 0 {
			c0, c1 = min(c0, t.start), max(c1, t.start+len(t.w))
		}
		T = max(T, len(t.w))
	}
	if T == 0 {
		clear(dst.Pix)
		return
	}
	n := c1 - c0
	if cap(s.row) < n {
		s.row = make([]float32, n)
	}
	row := s.row[:n]
	if cap(s.idx) < T*ow {
		s.idx, s.wgt = make([]int32, T*ow), make([]float32, T*ow)
	}
	idx, wgt := s.idx[:T*ow], s.wgt[:T*ow]
	for x, t := range s.tx {
		for k := range T {
			if k < len(t.w) {
				idx[k*ow+x], wgt[k*ow+x] = int32(t.start+k-c0), t.w[k]
			} else {
				idx[k*ow+x], wgt[k*ow+x] = int32(max(t.start-c0, 0)), 0
			}
		}
	}
	n8, o8 := n/8, ow/8
	for c := range src.C {
		plane := src.Plane(c)
		for y := r0; y < r1; y++ {
			in := plane[y*src.W+c0 : y*src.W+c1]
			if n8 > 0 {
				cvtRowAVX2(&row[0], &in[0], n8)
			}
			for x := 8 * n8; x < n; x++ {
				row[x] = float32(in[x])
			}
			out := mid[(y-r0)*ow : (y-r0+1)*ow]
			if o8 > 0 {
				hpassAVX2(&out[0], &row[0], &idx[0], &wgt[0], T, o8, ow)
			}
			for x := 8 * o8; x < ow; x++ {
				t := s.tx[x]
				var acc float32
				for k, wt := range t.w {
					acc += float32(wt * row[t.start-c0+k])
				}
				out[x] = acc
			}
		}
		op := dst.Plane(c)
		for y, t := range s.ty {
			out := op[y*ow : (y+1)*ow]
			if len(t.w) == 0 {
				clear(out)
				continue
			}
			base := mid[(t.start-r0)*ow:]
			if o8 > 0 {
				vpassAVX2(&out[0], &base[0], ow, &t.w[0], len(t.w), o8)
			}
			for x := 8 * o8; x < ow; x++ {
				var acc float32
				for k, wt := range t.w {
					acc += float32(wt * base[k*ow+x])
				}
				out[x] = clampByte(acc)
			}
		}
	}
}

func clampByte(v float32) uint8 {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v + 0.5)
}

// ResizeOp scales the image so that its shorter side is Shorter pixels,
// keeping the aspect ratio (torchvision's Resize(int)): the longer side
// becomes ⌊Shorter·long/short⌋.
type ResizeOp struct {
	Shorter int
	Interp  Interp
}

// Resize returns the resize operation; shorter ≥ 1.
func Resize(shorter int, interp Interp) (*ResizeOp, error) {
	if shorter < 1 || shorter > MaxSide {
		return nil, paramErr("resize", "shorter=%d: want 1 to %d (MaxSide)", shorter, MaxSide)
	}
	return &ResizeOp{Shorter: shorter, Interp: interp}, nil
}

func (o *ResizeOp) Name() string { return "resize" }
func (o *ResizeOp) Random() bool { return false }
func (o *ResizeOp) String() string {
	return fmt.Sprintf("resize shorter=%d interpolation=%s", o.Shorter, o.Interp)
}

func (o *ResizeOp) size(h, w int) (int, int) {
	if h <= w {
		return o.Shorter, o.Shorter * w / h
	}
	return o.Shorter * h / w, o.Shorter
}

func (o *ResizeOp) OutShape(in Shape) (Shape, error) {
	if in.H == 0 || in.W == 0 {
		return Shape{C: in.C}, nil // varies with the input
	}
	h, w := o.size(in.H, in.W)
	return Shape{C: in.C, H: h, W: w}, nil
}

// Region is the whole image, resampled to the resized size.
func (o *ResizeOp) Region(h, w int, r *Rand) Region {
	oh, ow := o.size(h, w)
	return Region{H: h, W: w, OH: oh, OW: ow}
}

func (o *ResizeOp) Filter() Interp { return o.Interp }

func (o *ResizeOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry resamples the whole image to the resized size; it is the
// identity where that is the image's size.
func (o *ResizeOp) Geometry(in Shape, r *Rand) Geometry {
	return o.Region(in.H, in.W, r).geometry(in.H, in.W)
}

func (o *ResizeOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyResample(dst, src, g, o.Interp)
}

// geometry is the resampling of the region of an h×w input, or the
// identity where it is the whole input at its own size.
func (reg Region) geometry(h, w int) Geometry {
	if reg.H == h && reg.W == w && reg.OH == h && reg.OW == w {
		return Geometry{Kind: GeomIdentity, OH: reg.OH, OW: reg.OW}
	}
	return reg.resample()
}

// resample is the resampling of the region.
func (reg Region) resample() Geometry {
	return Geometry{Kind: GeomResample, OH: reg.OH, OW: reg.OW,
		SY: float64(reg.Y), SX: float64(reg.X), SH: float64(reg.H), SW: float64(reg.W)}
}

// applyResample makes the image of a GeomResample geometry with filter f.
func applyResample(dst, src *Image, g Geometry, f Interp) bool {
	if g.Kind == GeomIdentity {
		return false
	}
	resample(dst, src, g.SY, g.SX, g.SH, g.SW, g.OH, g.OW, f)
	return true
}

// CenterCropOp takes the central Size×Size window (torchvision's
// CenterCrop): its top-left corner is at round((H-Size)/2),
// round((W-Size)/2); an image smaller than Size is padded with zeros.
type CenterCropOp struct{ Size int }

// CenterCrop returns the center_crop operation; size ≥ 1.
func CenterCrop(size int) (*CenterCropOp, error) {
	if size < 1 || size > MaxSide {
		return nil, paramErr("center_crop", "size=%d: want 1 to %d (MaxSide)", size, MaxSide)
	}
	return &CenterCropOp{Size: size}, nil
}

func (o *CenterCropOp) Name() string   { return "center_crop" }
func (o *CenterCropOp) Random() bool   { return false }
func (o *CenterCropOp) String() string { return fmt.Sprintf("center_crop size=%d", o.Size) }

func (o *CenterCropOp) OutShape(in Shape) (Shape, error) {
	return Shape{C: in.C, H: o.Size, W: o.Size}, nil
}

func (o *CenterCropOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry is the central window; it draws nothing.
func (o *CenterCropOp) Geometry(in Shape, r *Rand) Geometry {
	s := o.Size
	// torchvision: int(round((H - s) / 2.0)), rounding half to even.
	oy := int(math.RoundToEven(float64(in.H-s) / 2))
	ox := int(math.RoundToEven(float64(in.W-s) / 2))
	return Geometry{Kind: GeomWindow, OH: s, OW: s, Y: oy, X: ox, Fill: FillZero}
}

func (o *CenterCropOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWindow(dst, src, g)
}

// RandomResizedCropOp crops a random window of random area and aspect ratio
// and resizes it to Size×Size (torchvision's RandomResizedCrop): the area is
// a uniform fraction in Scale of the image's, the aspect ratio log-uniform
// in Ratio; after 10 draws that do not fit, it falls back to a central crop
// with the aspect ratio clamped to Ratio.
type RandomResizedCropOp struct {
	Size         int
	Scale, Ratio [2]float64
	Interp       Interp
}

// RandomResizedCrop returns the random_resized_crop operation.
func RandomResizedCrop(size int, scale, ratio [2]float64, interp Interp) (*RandomResizedCropOp, error) {
	switch {
	case size < 1 || size > MaxSide:
		return nil, paramErr("random_resized_crop", "size=%d: want 1 to %d (MaxSide)", size, MaxSide)
	case !(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1):
		return nil, paramErr("random_resized_crop", "scale=%g,%g: want 0 < min ≤ max ≤ 1", scale[0], scale[1])
	case !(ratio[0] > 0 && ratio[0] <= ratio[1]) || math.IsInf(ratio[1], 0):
		return nil, paramErr("random_resized_crop", "ratio=%g,%g: want 0 < min ≤ max", ratio[0], ratio[1])
	}
	return &RandomResizedCropOp{Size: size, Scale: scale, Ratio: ratio, Interp: interp}, nil
}

func (o *RandomResizedCropOp) Name() string { return "random_resized_crop" }
func (o *RandomResizedCropOp) Random() bool { return true }

// EvalOps is torchvision's evaluation of a random resized crop of size S:
// resize shorter=round(S·8/7), then center_crop S (256 then 224 for 224).
func (o *RandomResizedCropOp) EvalOps(Shape) ([]Op, error) {
	r, err := Resize(int(math.Round(float64(o.Size)*8/7)), o.Interp)
	if err != nil {
		return nil, err
	}
	c, err := CenterCrop(o.Size)
	if err != nil {
		return nil, err
	}
	return []Op{r, c}, nil
}
func (o *RandomResizedCropOp) String() string {
	return fmt.Sprintf("random_resized_crop size=%d scale=%g,%g ratio=%g,%g interpolation=%s",
		o.Size, o.Scale[0], o.Scale[1], o.Ratio[0], o.Ratio[1], o.Interp)
}

func (o *RandomResizedCropOp) OutShape(in Shape) (Shape, error) {
	return Shape{C: in.C, H: o.Size, W: o.Size}, nil
}

// Window returns the crop (top, left, height, width) for an H×W image.
func (o *RandomResizedCropOp) Window(h, w int, r *Rand) (int, int, int, int) {
	area := float64(h * w)
	lr0, lr1 := math.Log(o.Ratio[0]), math.Log(o.Ratio[1])
	for range 10 {
		target := area * r.Uniform(o.Scale[0], o.Scale[1])
		aspect := math.Exp(r.Uniform(lr0, lr1))
		cw := int(math.RoundToEven(math.Sqrt(target * aspect)))
		ch := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			return r.Intn(h - ch + 1), r.Intn(w - cw + 1), ch, cw
		}
	}
	in := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case in < o.Ratio[0]:
		ch = int(math.RoundToEven(float64(cw) / o.Ratio[0]))
	case in > o.Ratio[1]:
		cw = int(math.RoundToEven(float64(ch) * o.Ratio[1]))
	}
	return (h - ch) / 2, (w - cw) / 2, ch, cw
}

// Region is the window Apply would crop, resampled to Size×Size.
func (o *RandomResizedCropOp) Region(h, w int, r *Rand) Region {
	y, x, ch, cw := o.Window(h, w, r)
	return Region{Y: y, X: x, H: ch, W: cw, OH: o.Size, OW: o.Size}
}

func (o *RandomResizedCropOp) Filter() Interp { return o.Interp }

func (o *RandomResizedCropOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry resamples the drawn window to Size×Size. It is never the
// identity, even where the window is the whole image at its size: the
// resampling is done anyway, as Apply always did.
func (o *RandomResizedCropOp) Geometry(in Shape, r *Rand) Geometry {
	return o.Region(in.H, in.W, r).resample()
}

func (o *RandomResizedCropOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyResample(dst, src, g, o.Interp)
}

// ColorJitterOp changes brightness, contrast, saturation and hue by random
// factors in a random order (torchvision's ColorJitter): the first three
// drawn uniformly from [max(0, 1-v), 1+v] for each value v given, the hue
// shift from [-Hue, Hue] of the colour wheel. Brightness scales the pixels,
// contrast blends with the mean grey level of the image, saturation with
// each pixel's grey level (ITU-R 601 luma), hue rotates each pixel's hue
// (torchvision's adjust_hue).
type ColorJitterOp struct {
	Brightness, Contrast, Saturation, Hue float64
}

// ColorJitter returns the color_jitter operation; the values are ≥ 0, hue
// at most 0.5.
func ColorJitter(brightness, contrast, saturation, hue float64) (*ColorJitterOp, error) {
	for _, v := range []float64{brightness, contrast, saturation, hue} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, paramErr("color_jitter", "brightness=%g contrast=%g saturation=%g hue=%g: want values ≥ 0", brightness, contrast, saturation, hue)
		}
	}
	if hue > 0.5 {
		return nil, paramErr("color_jitter", "hue=%g: want at most 0.5 (half the colour wheel either way)", hue)
	}
	return &ColorJitterOp{Brightness: brightness, Contrast: contrast, Saturation: saturation, Hue: hue}, nil
}

func (o *ColorJitterOp) Name() string { return "color_jitter" }
func (o *ColorJitterOp) Random() bool { return true }
func (o *ColorJitterOp) String() string {
	return fmt.Sprintf("color_jitter brightness=%g contrast=%g saturation=%g hue=%g", o.Brightness, o.Contrast, o.Saturation, o.Hue)
}

func (o *ColorJitterOp) OutShape(in Shape) (Shape, error) {
	if in.C != 3 && (o.Saturation > 0 || o.Contrast > 0 || o.Hue > 0) {
		return Shape{}, fmt.Errorf("color_jitter: contrast, saturation and hue need 3 channels, not %d", in.C)
	}
	return in, nil
}

func factor(v float64, r *Rand) float64 { return r.Uniform(max(0, 1-v), 1+v) }

func (o *ColorJitterOp) Apply(dst, src *Image, r *Rand) bool {
	// A random order, then the factors, as torchvision draws them (a
	// permutation, then one factor per enabled jitter). Without hue the
	// order is of the three others, as before hue was added, so that such
	// a pipeline's stream is what it was.
	order := [4]int{0, 1, 2, 3}
	jitters := 3
	if o.Hue > 0 {
		jitters = 4
	}
	for i := jitters - 1; i > 0; i-- {
		j := r.Intn(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	f := [4]float64{1, 1, 1, 0}
	for i, v := range []float64{o.Brightness, o.Contrast, o.Saturation} {
		if v > 0 {
			f[i] = factor(v, r)
		}
	}
	if o.Hue > 0 {
		f[3] = r.Uniform(-o.Hue, o.Hue)
	}
	if f == [4]float64{1, 1, 1, 0} {
		return false
	}
	dst.Resize(src.C, src.H, src.W)
	copy(dst.Pix, src.Pix)
	n := src.H * src.W
	for _, k := range order[:jitters] {
		if f[k] == 1 && k < 3 || f[k] == 0 && k == 3 {
			continue
		}
		switch k {
		case 3:
			rotateHue(dst, float32(f[k]))
		case 0:
			blend(dst.Pix, 0, float32(f[k]))
		case 1:
			var sum float64
			rr, g, b := dst.Plane(0), dst.Plane(1), dst.Plane(2)
			for i := range n {
				sum += float64(luma(rr[i], g[i], b[i]))
			}
			blend(dst.Pix, float32(sum/float64(n)), float32(f[k]))
		case 2:
			rr, g, b := dst.Plane(0), dst.Plane(1), dst.Plane(2)
			for i := range n {
				grey := luma(rr[i], g[i], b[i])
				ff := float32(f[k])
				rr[i] = clampByte(grey + ff*(float32(rr[i])-grey))
				g[i] = clampByte(grey + ff*(float32(g[i])-grey))
				b[i] = clampByte(grey + ff*(float32(b[i])-grey))
			}
		}
	}
	return true
}

func luma(r, g, b uint8) float32 { return 0.299*float32(r) + 0.587*float32(g) + 0.114*float32(b) }

// blend sets every value v to base + f·(v - base), clamped.
func blend(pix []byte, base, f float32) {
	for i, v := range pix {
		pix[i] = clampByte(base + f*(float32(v)-base))
	}
}
