package transform

// windowOp is an operation that is a single window of its source: a crop or
// a shift. Its parameters can be drawn without touching pixels, which lets a
// following horizontal flip fold into the same pass.
type windowOp interface {
	Op
	// draw consumes the op's random numbers and returns its window.
	draw(src *Image, r *Rand) (oy, ox, h, w int, f Fill)
}

func (o *RandomCropOp) draw(src *Image, r *Rand) (oy, ox, h, w int, f Fill) {
	oy = r.Intn(src.H+2*o.Pad-o.Size+1) - o.Pad
	ox = r.Intn(src.W+2*o.Pad-o.Size+1) - o.Pad
	return oy, ox, o.Size, o.Size, o.Fill
}

func (o *ShiftOp) draw(src *Image, r *Rand) (oy, ox, h, w int, f Fill) {
	my, mx := maxShift(o.Height, src.H), maxShift(o.Width, src.W)
	dy := r.Intn(2*my+1) - my
	dx := r.Intn(2*mx+1) - mx
	// Content moves by (dy, dx): output (y, x) shows source (y-dy, x-dx).
	return -dy, -dx, src.H, src.W, o.Fill
}

// windowFlipOp is a window op followed by a horizontal flip, done in one pass.
// It draws exactly the random numbers the two ops draw in sequence, so its
// output is identical to theirs.
type windowFlipOp struct {
	windowOp
	flip *FlipOp
}

func (o *windowFlipOp) String() string { return o.windowOp.String() + "; " + o.flip.String() }

func (o *windowFlipOp) Apply(dst, src *Image, r *Rand) bool {
	oy, ox, h, w, f := o.draw(src, r)
	mirror := r.Float64() < o.flip.P
	window(dst, src, oy, ox, h, w, f, mirror)
	return true
}

// Fuse returns ops with adjacent pairs that can run as one pass merged: a
// random_crop or shift followed by a horizontal flip. Given the same
// generator, the fused list produces exactly the output of the original; it
// is an optimisation only, and String of a fused op lists both stages.
func Fuse(ops []Op) []Op {
	out := make([]Op, 0, len(ops))
	for i := 0; i < len(ops); i++ {
		if w, ok := ops[i].(windowOp); ok && i+1 < len(ops) {
			if f, ok := ops[i+1].(*FlipOp); ok && f.Direction == Horizontal {
				out = append(out, &windowFlipOp{windowOp: w, flip: f})
				i++
				continue
			}
		}
		out = append(out, ops[i])
	}
	return out
}
