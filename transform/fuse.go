package transform

// windowFlipOp is a random_crop or shift followed by a horizontal flip, done
// in one pass. It draws exactly the random numbers the two ops draw in
// sequence, so its output is identical to theirs.
type windowFlipOp struct {
	Spatial
	flip *FlipOp
}

func (o *windowFlipOp) String() string { return o.Spatial.String() + "; " + o.flip.String() }

func (o *windowFlipOp) Apply(dst, src *Image, r *Rand) bool {
	return o.ApplyGeometry(dst, src, o.Geometry(src.Shape(), r))
}

// Geometry is the window op's window, mirrored when the flip fires.
func (o *windowFlipOp) Geometry(in Shape, r *Rand) Geometry {
	g := o.Spatial.Geometry(in, r)
	g.MirrorX = r.Float64() < o.flip.P
	return g
}

func (o *windowFlipOp) ApplyGeometry(dst, src *Image, g Geometry) bool {
	return applyWindow(dst, src, g)
}

// Fuse returns ops with adjacent pairs that can run as one pass merged: a
// random_crop or shift followed by a horizontal flip. Given the same
// generator, the fused list produces exactly the output of the original; it
// is an optimisation only, and String of a fused op lists both stages.
func Fuse(ops []Op) []Op {
	out := make([]Op, 0, len(ops))
	for i := 0; i < len(ops); i++ {
		switch w := ops[i].(type) {
		case *RandomCropOp, *ShiftOp:
			if i+1 == len(ops) {
				break
			}
			if f, ok := ops[i+1].(*FlipOp); ok && f.Direction == Horizontal {
				out = append(out, &windowFlipOp{Spatial: w.(Spatial), flip: f})
				i++
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}
