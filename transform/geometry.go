package transform

import (
	"fmt"
	"math"

	"github.com/pipefeed/pipe/fields"
)

// GeometryKind says how a Geometry maps output pixels to input pixels.
type GeometryKind int

const (
	// GeomIdentity: the operation left the sample as it was.
	GeomIdentity GeometryKind = iota
	// GeomWindow: a window of whole pixels, possibly mirrored (crops,
	// shifts, flips, center crops).
	GeomWindow
	// GeomResample: a window of the input resampled to the output size
	// (resize, random_resized_crop).
	GeomResample
	// GeomAffine: an affine map (rotate, affine).
	GeomAffine
)

// Geometry is what one spatial operation did to a sample's coordinates,
// drawn once per sample and applied to the image and to every spatial
// field: the mask (nearest-neighbour) and the boxes (by their corners).
type Geometry struct {
	Kind GeometryKind
	// OH, OW is the output's size.
	OH, OW int
	// GeomWindow: output pixel (y, x) shows input pixel (Y+y, X+x), read
	// through Fill where that lies outside the input; with MirrorX the
	// columns are mirrored (output x shows input X+OW-1-x), with MirrorY
	// the rows.
	Y, X             int
	MirrorX, MirrorY bool
	Fill             Fill
	// GeomResample: the input window of height SH and width SW whose
	// top-left corner is at (SY, SX), in pixels, resampled to OH×OW.
	SY, SX, SH, SW float64
	// GeomAffine: M maps an output point (x, y), in pixel units with
	// pixel centres at half-integers, to the input point
	// (M[0]x+M[1]y+M[2], M[3]x+M[4]y+M[5]). A mask reads 0 outside the
	// input.
	M [6]float64
}

// Spatial is implemented by the operations that move pixels (random_crop,
// shift, flip, center_crop, resize, random_resized_crop, rotate, affine):
// their random draw is separate from the pixels, so that one draw moves
// the image and its mask and boxes alike.
type Spatial interface {
	Op
	// Geometry draws the operation's random parameters for an input of
	// shape in, consuming r exactly as Apply does.
	Geometry(in Shape, r *Rand) Geometry
	// ApplyGeometry makes the image for a drawn geometry, as Apply does
	// after its draw; it returns false, leaving dst untouched, when g is
	// the identity.
	ApplyGeometry(dst, src *Image, g Geometry) bool
}

// Mask is a segmentation mask: an H×W image of class ids of Size bytes
// each (1 or 2, little-endian), which spatial operations move as they
// move the image, sampling the nearest pixel. Pix may alias memory the
// mask does not own; operations never write to their source mask.
type Mask struct {
	Pix  []byte
	H, W int
	Size int
}

// Box is an object's box in pixels of the image, left, top, right,
// bottom (X0 ≤ X1, Y0 ≤ Y1), with its class.
type Box struct {
	X0, Y0, X1, Y1 float32
	Class          int64
}

// Fields are what travels with an image through the operations: spatial
// operations move them with the image's geometry; the others leave them.
type Fields struct {
	// Mask is the mask; its Pix is nil when the sample has none.
	Mask Mask
	// Boxes are the boxes, clipped to the image after every operation;
	// nil when the sample has none (HasBoxes tells an image with no
	// boxes from a pipeline without them).
	Boxes    []Box
	HasBoxes bool
	// MinArea drops, after the last operation, every box whose area is
	// below it, and every box of zero width or height.
	MinArea float64
	// Normalized says the boxes come as fractions of the image's width
	// and height (as TFRecords hold them): the chain scales them to
	// pixels of the decoded image before its first operation, and leaves
	// Normalized set, for the next sample's boxes.
	Normalized bool

	// Move's scratch: two masks (the moved mask is one of them, so the
	// next move writes the other) and the source row and column of each
	// output row and column.
	buf        [2][]byte
	rows, cols []int
}

// FieldsOp is implemented by an operation that moves the fields its own
// way (rand_augment, whose random sub-operations may be geometric or
// colour ones): the chain calls ApplyFields in place of Apply when the
// sample has fields.
type FieldsOp interface {
	Op
	// ApplyFields is Apply, drawing from r exactly as Apply does, that
	// also moves f as the image moved.
	ApplyFields(dst, src *Image, f *Fields, r *Rand) bool
}

// PixelOp is implemented by the operations that change pixels' values but
// leave every pixel where it was (color_jitter, grayscale, gaussian_blur,
// random_erasing): a sample's mask and boxes pass them unchanged.
type PixelOp interface {
	Op
	// KeepsPlaces marks the operation; it does nothing.
	KeepsPlaces()
}

func (o *ColorJitterOp) KeepsPlaces()   {}
func (o *GrayscaleOp) KeepsPlaces()     {}
func (o *GaussianBlurOp) KeepsPlaces()  {}
func (o *RandomErasingOp) KeepsPlaces() {}

// CheckFields returns an error naming the first of ops that moves pixels
// without moving a mask and boxes with them: an operation that is neither
// [Spatial], nor a [FieldsOp], nor a [PixelOp]. A pipeline whose samples
// have a mask or boxes checks its operations with it before it starts;
// the error wraps fields.ErrSchema.
func CheckFields(ops []Op) error {
	for _, op := range ops {
		switch op.(type) {
		case Spatial, FieldsOp, PixelOp:
			continue
		}
		return fmt.Errorf("%s: %w: it would move the image's pixels but not the mask and boxes", op.Name(), fields.ErrSchema)
	}
	return nil
}

// check checks, before the first operation, that f fits an image of
// shape in, and scales normalized boxes to its pixels. Its errors wrap
// fields.ErrValue: the record is corrupt.
func (f *Fields) check(in Shape) error {
	if m := &f.Mask; m.Pix != nil {
		if m.Size != 1 && m.Size != 2 {
			return fmt.Errorf("%w: mask of %d-byte values (want 1 or 2)", fields.ErrValue, m.Size)
		}
		if m.H != in.H || m.W != in.W {
			return fmt.Errorf("%w: the mask is %dx%d, its image %dx%d", fields.ErrValue, m.W, m.H, in.W, in.H)
		}
		if len(m.Pix) != m.H*m.W*m.Size {
			return fmt.Errorf("%w: a %dx%d mask of %d-byte values holds %d bytes, not %d", fields.ErrValue, m.W, m.H, m.Size, len(m.Pix), m.H*m.W*m.Size)
		}
	}
	if f.Normalized {
		w, h := float32(in.W), float32(in.H)
		for i := range f.Boxes {
			b := &f.Boxes[i]
			b.X0, b.X1, b.Y0, b.Y1 = b.X0*w, b.X1*w, b.Y0*h, b.Y1*h
		}
	}
	return nil
}

// Move applies g to the fields. The mask is resampled at the nearest
// pixel: GeomWindow reads the same window with the same Fill as the image
// (FillZero gives class 0), mirrored alike; GeomResample reads, as
// torch.nn.functional.interpolate(mode="nearest") on the window (what
// torchvision does to a mask with InterpolationMode.NEAREST), input row
// SY + min(⌊y·SH/OH⌋, SH-1) for output row y, the product in float32 as
// torch forms it, and columns alike (the window in whole pixels, as every
// resampling operation draws it); GeomAffine reads the input pixel
// nearest the point M maps the output pixel's centre to, 0 outside (as
// grid_sample does). The boxes move by their corners, as torchvision's
// transforms.v2 moves them: translated and mirrored by a window, scaled by
// a resample, and by an affine map to the smallest box holding the four
// moved corners; then they are clipped to [0, OW]×[0, OH]. No box is
// dropped here ([Fields.DropBoxes] does that after the last operation).
//
// Move rewrites Boxes in place; the moved mask points at scratch memory
// of f's, which the next move reuses, so once f has grown to the largest
// mask it moves without allocating.
func (f *Fields) Move(g Geometry) {
	if g.Kind == GeomIdentity {
		return
	}
	if f.Mask.Pix != nil {
		f.moveMask(g)
	}
	for i := range f.Boxes {
		f.Boxes[i] = moveBox(f.Boxes[i], g)
	}
}

// DropBoxes removes every box whose width or height is ≤ 0 or whose area
// is below f.MinArea, keeping the order of the rest.
func (f *Fields) DropBoxes() {
	kept := f.Boxes[:0]
	for _, b := range f.Boxes {
		w, h := float64(b.X1)-float64(b.X0), float64(b.Y1)-float64(b.Y0)
		if w > 0 && h > 0 && w*h >= f.MinArea {
			kept = append(kept, b)
		}
	}
	f.Boxes = kept
}

// moveBox moves b by g and clips it to the output.
func moveBox(b Box, g Geometry) Box {
	x0, y0, x1, y1 := float64(b.X0), float64(b.Y0), float64(b.X1), float64(b.Y1)
	switch g.Kind {
	case GeomWindow:
		x0, x1 = x0-float64(g.X), x1-float64(g.X)
		y0, y1 = y0-float64(g.Y), y1-float64(g.Y)
		if g.MirrorX {
			x0, x1 = float64(g.OW)-x1, float64(g.OW)-x0
		}
		if g.MirrorY {
			y0, y1 = float64(g.OH)-y1, float64(g.OH)-y0
		}
	case GeomResample:
		sx, sy := float64(g.OW)/g.SW, float64(g.OH)/g.SH
		x0, x1 = (x0-g.SX)*sx, (x1-g.SX)*sx
		y0, y1 = (y0-g.SY)*sy, (y1-g.SY)*sy
	case GeomAffine:
		// M maps output points to input points; boxes go the other way.
		m := &g.M
		det := m[0]*m[4] - m[1]*m[3]
		a, b, c, d := m[4]/det, -m[1]/det, -m[3]/det, m[0]/det
		px, py := [4]float64{x0, x1, x1, x0}, [4]float64{y0, y0, y1, y1}
		x0, y0, x1, y1 = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
		for i := range px {
			u, v := px[i]-m[2], py[i]-m[5]
			ox, oy := a*u+b*v, c*u+d*v
			x0, x1 = min(x0, ox), max(x1, ox)
			y0, y1 = min(y0, oy), max(y1, oy)
		}
	}
	w, h := float64(g.OW), float64(g.OH)
	return Box{
		X0: float32(clamp(x0, 0, w)), Y0: float32(clamp(y0, 0, h)),
		X1: float32(clamp(x1, 0, w)), Y1: float32(clamp(y1, 0, h)),
		Class: b.Class,
	}
}

func clamp(v, lo, hi float64) float64 { return min(max(v, lo), hi) }

// moveMask resamples the mask by g into f's scratch.
func (f *Fields) moveMask(g Geometry) {
	m := &f.Mask
	out := &f.buf[0]
	if len(m.Pix) > 0 && len(*out) > 0 && &m.Pix[0] == &(*out)[:1][0] {
		out = &f.buf[1]
	}
	n := g.OH * g.OW * m.Size
	if cap(*out) < n {
		*out = make([]byte, n)
	}
	dst := (*out)[:n]
	if g.Kind == GeomAffine {
		affineMask(dst, m, g)
	} else {
		f.rows, f.cols = grow(f.rows, g.OH), grow(f.cols, g.OW)
		if g.Kind == GeomWindow {
			windowMap(f.rows, g.Y, m.H, g.MirrorY, g.Fill)
			windowMap(f.cols, g.X, m.W, g.MirrorX, g.Fill)
		} else {
			nearestMap(f.rows, g.SY, g.SH, m.H)
			nearestMap(f.cols, g.SX, g.SW, m.W)
		}
		gather(dst, m, f.rows, f.cols)
	}
	*m = Mask{Pix: dst, H: g.OH, W: g.OW, Size: m.Size}
}

func grow(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

// windowMap sets src[i] to the input index (of n) that output index i of
// a window starting at o reads under fill, mirrored when mirror is set;
// -1 for a constant zero.
func windowMap(src []int, o, n int, mirror bool, fill Fill) {
	last := len(src) - 1
	for i := range src {
		j := i
		if mirror {
			j = last - i
		}
		src[i] = fill.source(o+j, n)
	}
}

// nearestMap sets src[i] to the input index, of n, that output index i
// reads when the window [s0, s0+size) is resampled to len(src) by
// torch's nearest interpolation (nearest_idx: ⌊i·scale⌋ with the scale
// and the product in float32, which is not always ⌊i·in/out⌋: 2 rows to
// 82 read row 0 for row 41).
func nearestMap(src []int, s0, size float64, n int) {
	out, in, off := len(src), int(math.Round(size)), int(math.Floor(s0))
	scale := float32(in) / float32(out)
	for i := range src {
		j := min(int(float32(i)*scale), in-1)
		src[i] = min(max(off+j, 0), n-1)
	}
}

// gather writes dst's pixel (y, x) from m's pixel (rows[y], cols[x]), or
// zero where either is -1.
func gather(dst []byte, m *Mask, rows, cols []int) {
	s, ow := m.Size, len(cols)
	for y, sy := range rows {
		d := dst[y*ow*s : (y+1)*ow*s]
		if sy < 0 {
			clear(d)
			continue
		}
		row := m.Pix[sy*m.W*s : (sy+1)*m.W*s]
		if s == 1 {
			for x, sx := range cols {
				if sx < 0 {
					d[x] = 0
				} else {
					d[x] = row[sx]
				}
			}
			continue
		}
		for x, sx := range cols {
			if sx < 0 {
				d[2*x], d[2*x+1] = 0, 0
			} else {
				d[2*x], d[2*x+1] = row[2*sx], row[2*sx+1]
			}
		}
	}
}

// affineMask writes into dst the pixels of m that g's map takes the
// output pixels' centres to, rounded to the nearest pixel (half to even,
// as grid_sample's nearest), 0 outside.
func affineMask(dst []byte, m *Mask, g Geometry) {
	s := m.Size
	M := &g.M
	d := 0
	for y := range g.OH {
		cy := float64(y) + 0.5
		for x := range g.OW {
			cx := float64(x) + 0.5
			sx := math.RoundToEven(M[0]*cx + M[1]*cy + M[2] - 0.5)
			sy := math.RoundToEven(M[3]*cx + M[4]*cy + M[5] - 0.5)
			if sx >= 0 && sy >= 0 && sx < float64(m.W) && sy < float64(m.H) {
				i := (int(sy)*m.W + int(sx)) * s
				copy(dst[d:d+s], m.Pix[i:i+s])
			} else {
				clear(dst[d : d+s])
			}
			d += s
		}
	}
}
