package transform

import "fmt"

// RandomCropOp crops a Size×Size window at a uniformly random position of the
// image padded by Pad pixels on every side (torchvision's
// RandomCrop(size, padding, padding_mode)).
type RandomCropOp struct {
	Size, Pad int
	Fill      Fill
}

// RandomCrop returns the random_crop operation; size ≥ 1, pad ≥ 0.
func RandomCrop(size, pad int, fill Fill) (*RandomCropOp, error) {
	if size < 1 || size > MaxSide {
		return nil, paramErr("random_crop", "size=%d: want 1 to %d (MaxSide)", size, MaxSide)
	}
	if pad < 0 || pad > MaxSide {
		return nil, paramErr("random_crop", "pad=%d: want 0 to %d (MaxSide)", pad, MaxSide)
	}
	if fill < FillZero || fill > FillWrap {
		return nil, paramErr("random_crop", "unknown fill %d", fill)
	}
	return &RandomCropOp{Size: size, Pad: pad, Fill: fill}, nil
}

func (o *RandomCropOp) Name() string { return "random_crop" }
func (o *RandomCropOp) Random() bool { return true }

// EvalOps is center_crop of the crop's size on the unpadded image, or
// nothing when the images are that size already; images smaller than the
// crop, which only padding fills, cannot be evaluated this way.
func (o *RandomCropOp) EvalOps(in Shape) ([]Op, error) {
	if in.H == o.Size && in.W == o.Size {
		return nil, nil
	}
	if in.H > 0 && (in.H < o.Size || in.W < o.Size) {
		return nil, fmt.Errorf("%s: the %dx%d images are smaller than the crop, which only padding fills; evaluation does not pad", o, in.W, in.H)
	}
	c, err := CenterCrop(o.Size)
	if err != nil {
		return nil, err
	}
	return []Op{c}, nil
}
func (o *RandomCropOp) String() string {
	return fmt.Sprintf("random_crop size=%d pad=%d fill=%s", o.Size, o.Pad, o.Fill)
}

func (o *RandomCropOp) OutShape(in Shape) (Shape, error) {
	for _, d := range []int{in.H, in.W} {
		if d > 0 && d+2*o.Pad < o.Size {
			return Shape{}, fmt.Errorf("random_crop: size=%d does not fit a %s image padded by %d", o.Size, in, o.Pad)
		}
	}
	return Shape{C: in.C, H: o.Size, W: o.Size}, nil
}

func (o *RandomCropOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry is the Size×Size window at a uniformly random position of the
// padded image.
func (o *RandomCropOp) Geometry(in Shape, r *Rand) Geometry {
	oy := r.Intn(in.H+2*o.Pad-o.Size+1) - o.Pad
	ox := r.Intn(in.W+2*o.Pad-o.Size+1) - o.Pad
	return Geometry{Kind: GeomWindow, OH: o.Size, OW: o.Size, Y: oy, X: ox, Fill: o.Fill}
}

func (o *RandomCropOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWindow(dst, src, g)
}

// ShiftOp translates the image by a random whole number of pixels, drawn
// uniformly from [-Width, Width] of its width and [-Height, Height] of its
// height, filling uncovered pixels by Fill. Values below 1 are fractions of
// the image size and values of 1 or more are pixels, as Keras's
// ImageDataGenerator(width_shift_range, height_shift_range).
type ShiftOp struct {
	Width, Height float64
	Fill          Fill
}

// Shift returns the shift operation; width, height ≥ 0.
func Shift(width, height float64, fill Fill) (*ShiftOp, error) {
	if !(width >= 0 && height >= 0 && width <= MaxSide && height <= MaxSide) {
		return nil, paramErr("shift", "width=%g height=%g: want 0 to %d (MaxSide) each", width, height, MaxSide)
	}
	if fill < FillZero || fill > FillWrap {
		return nil, paramErr("shift", "unknown fill %d", fill)
	}
	return &ShiftOp{Width: width, Height: height, Fill: fill}, nil
}

func (o *ShiftOp) Name() string { return "shift" }
func (o *ShiftOp) Random() bool { return true }
func (o *ShiftOp) String() string {
	return fmt.Sprintf("shift width=%g height=%g fill=%s", o.Width, o.Height, o.Fill)
}
func (o *ShiftOp) OutShape(in Shape) (Shape, error) { return in, nil }

// maxShift is the largest shift in pixels along a dimension of n pixels.
func maxShift(r float64, n int) int {
	if r < 1 {
		r *= float64(n)
	}
	return int(r)
}

func (o *ShiftOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry is the image's own size, its content moved by the drawn shift.
func (o *ShiftOp) Geometry(in Shape, r *Rand) Geometry {
	my, mx := maxShift(o.Height, in.H), maxShift(o.Width, in.W)
	dy := r.Intn(2*my+1) - my
	dx := r.Intn(2*mx+1) - mx
	// Content moves by (dy, dx): output (y, x) shows source (y-dy, x-dx).
	return Geometry{Kind: GeomWindow, OH: in.H, OW: in.W, Y: -dy, X: -dx, Fill: o.Fill}
}

func (o *ShiftOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWindow(dst, src, g)
}

// applyWindow makes the image of a GeomWindow geometry that does not
// mirror rows.
func applyWindow(dst, src *Image, g Geometry) bool {
	window(dst, src, g.Y, g.X, g.OH, g.OW, g.Fill, g.MirrorX)
	return true
}
