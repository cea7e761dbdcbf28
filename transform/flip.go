package transform

import "fmt"

// Direction is the axis a flip mirrors.
type Direction int

const (
	// Horizontal mirrors left and right.
	Horizontal Direction = iota
	// Vertical mirrors top and bottom.
	Vertical
)

func (d Direction) String() string {
	if d == Vertical {
		return "vertical"
	}
	return "horizontal"
}

// ParseDirection returns the Direction with the given name.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "horizontal":
		return Horizontal, nil
	case "vertical":
		return Vertical, nil
	}
	return 0, fmt.Errorf("%w: unknown direction %q (want horizontal or vertical)", ErrParam, s)
}

// FlipOp mirrors the image along Direction with probability P.
type FlipOp struct {
	Direction Direction
	P         float64
}

// Flip returns the flip operation; 0 ≤ p ≤ 1.
func Flip(d Direction, p float64) (*FlipOp, error) {
	if !(p >= 0 && p <= 1) {
		return nil, paramErr("flip", "p=%g: must be between 0 and 1", p)
	}
	if d != Horizontal && d != Vertical {
		return nil, paramErr("flip", "unknown direction %d", d)
	}
	return &FlipOp{Direction: d, P: p}, nil
}

func (o *FlipOp) Name() string                     { return "flip" }
func (o *FlipOp) Random() bool                     { return true }
func (o *FlipOp) String() string                   { return fmt.Sprintf("flip direction=%s p=%g", o.Direction, o.P) }
func (o *FlipOp) OutShape(in Shape) (Shape, error) { return in, nil }

func (o *FlipOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry mirrors the whole image when the flip fires, and is the
// identity otherwise.
func (o *FlipOp) Geometry(in Shape, r *Rand) Geometry {
	g := Geometry{Kind: GeomIdentity, OH: in.H, OW: in.W}
	if r.Float64() < o.P {
		g.Kind = GeomWindow
		g.MirrorX, g.MirrorY = o.Direction == Horizontal, o.Direction == Vertical
	}
	return g
}

func (o *FlipOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	switch {
	case g.Kind == GeomIdentity:
		return false
	case !g.MirrorY:
		return applyWindow(dst, src, g)
	}
	dst.Resize(src.C, src.H, src.W)
	w := src.W
	for c := 0; c < src.C; c++ {
		sp, dp := src.Plane(c), dst.Plane(c)
		for y := 0; y < src.H; y++ {
			copy(dp[y*w:y*w+w], sp[(src.H-1-y)*w:(src.H-y)*w])
		}
	}
	return true
}
