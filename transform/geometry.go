package transform

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
}
