package transform

// Chain applies ops in order to one sample, ping-ponging between two scratch
// images it owns, so a worker that keeps a Chain allocates nothing per sample
// once its scratch has grown to the largest image. A Chain is not safe for
// concurrent use; give each worker its own.
type Chain struct {
	ops  []Op
	a, b Image
	r    Rand // lives here so passing &r through the Op interface does not allocate
}

// NewChain returns a chain of ops with adjacent crop/shift + horizontal flip
// pairs fused (see [Fuse]).
func NewChain(ops []Op) *Chain {
	return &Chain{ops: Fuse(ops)}
}

// Apply runs the chain on src, drawing every random parameter from r in stage
// order, and returns the result: src itself when no op changed it, otherwise
// one of the chain's scratch images, valid until the next Apply.
func (c *Chain) Apply(src *Image, r Rand) *Image { return c.run(src, r, nil, 0, nil) }

// Rand is the generator as the last Apply or ApplyTo left it.
func (c *Chain) Rand() Rand { return c.r }

// ApplyTo is Apply with the last operation writing straight into dst, whose
// Pix is memory the caller wants the result in (such as a batch slab for
// uint8 CHW output): it saves a copy of every image. dst.Pix must have the
// capacity of the output; where the last operation leaves its input as it
// is, the result is copied into dst.
func (c *Chain) ApplyTo(dst, src *Image, r Rand) {
	if out := c.run(src, r, dst, 0, nil); out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
}

// ApplySample is Apply for a sample with fields: the same image from the
// same draws, with f moved by every [Spatial] operation as the image is
// (see [Fields.Move]), handed to every [FieldsOp], and left alone by the
// other operations; the boxes too small to keep are dropped at the end
// ([Fields.DropBoxes]). Before the first operation it checks that a mask
// is the image's size (an error wrapping fields.ErrValue, a corrupt
// record, otherwise) and scales normalized boxes to its pixels. f is not
// nil; the chain's operations are to have passed [CheckFields].
func (c *Chain) ApplySample(src *Image, f *Fields, r Rand) (*Image, error) {
	if err := f.check(src.Shape()); err != nil {
		return nil, err
	}
	out := c.run(src, r, nil, 0, f)
	f.DropBoxes()
	return out, nil
}

// ApplySampleTo is ApplySample with the result in dst, as ApplyTo.
func (c *Chain) ApplySampleTo(dst, src *Image, f *Fields, r Rand) error {
	if err := f.check(src.Shape()); err != nil {
		return err
	}
	if out := c.run(src, r, dst, 0, f); out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
	f.DropBoxes()
	return nil
}

// ApplyEncoded decodes data with d and runs the chain on the image, as
// Apply on the decoded image would; when the first op is a [RegionOp], d
// does its work while decoding ([Decoder.DecodeFor]). The decoded image is
// d's; the result is valid until the next call, and d's next call or
// Release.
func (c *Chain) ApplyEncoded(d *Decoder, data []byte, r Rand) (*Image, error) {
	return c.runEncoded(d, data, r, nil, nil)
}

// ApplyEncodedTo is ApplyEncoded with the result in dst, as ApplyTo.
func (c *Chain) ApplyEncodedTo(d *Decoder, dst *Image, data []byte, r Rand) error {
	out, err := c.runEncoded(d, data, r, dst, nil)
	if err == nil && out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
	return err
}

// ApplyEncodedSample is ApplyEncoded for a sample with fields, moving them
// as ApplySample does: the checks and scaling before the first operation
// are against the decoded image's size, and where the decoder does the
// first operation's work ([Decoder.DecodeFor]), f is moved by the region
// it drew. The mask is the whole image's size, not that of a window or
// scale the decoder reads.
func (c *Chain) ApplyEncodedSample(d *Decoder, data []byte, f *Fields, r Rand) (*Image, error) {
	out, err := c.runEncoded(d, data, r, nil, f)
	if err != nil {
		return nil, err
	}
	f.DropBoxes()
	return out, nil
}

// ApplyEncodedSampleTo is ApplyEncodedSample with the result in dst, as
// ApplyTo.
func (c *Chain) ApplyEncodedSampleTo(d *Decoder, dst *Image, data []byte, f *Fields, r Rand) error {
	out, err := c.runEncoded(d, data, r, dst, f)
	if err != nil {
		return err
	}
	if out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
	f.DropBoxes()
	return nil
}

// runEncoded decodes data and runs the chain on it, the last op into last
// when it is not nil, moving f when it is not nil.
func (c *Chain) runEncoded(d *Decoder, data []byte, r Rand, last *Image, f *Fields) (*Image, error) {
	c.r = r
	op, ok := RegionOp(nil), false
	if len(c.ops) > 0 {
		op, ok = c.ops[0].(RegionOp)
	}
	if !ok {
		img, err := d.decodeWhole(data)
		if err != nil {
			return nil, err
		}
		if err := c.fits(d, img.Shape(), 0); err != nil {
			return nil, err
		}
		if f != nil {
			if err := f.check(img.Shape()); err != nil {
				return nil, err
			}
		}
		return c.run(img, c.r, last, 0, f), nil
	}
	next := &c.a
	if last != nil && len(c.ops) == 1 {
		next = last
	}
	in, reg, applied, err := d.decodeFor(next, data, op, &c.r)
	if err != nil {
		return nil, err
	}
	if f != nil {
		if err := f.check(in); err != nil {
			return nil, err
		}
		f.Move(reg.geometry(in.H, in.W))
	}
	cur := next
	if !applied {
		cur = d.Decoded()
	}
	if err := c.fits(d, cur.Shape(), 1); err != nil {
		return nil, err
	}
	return c.run(cur, c.r, last, 1, f), nil
}

// fits checks, from an image of shape s, the outputs of the ops from the
// first'th on against the decoder's limits: sizes vary with encoded images,
// so an operation's output (a resize of a long, thin strip) is bounded here,
// before it is allocated.
func (c *Chain) fits(d *Decoder, s Shape, first int) error {
	for _, op := range c.ops[first:] {
		out, err := op.OutShape(s)
		if err != nil {
			return err
		}
		if err := d.fits(op, s.W, s.H, out.W, out.H); err != nil {
			return err
		}
		s = out
	}
	return nil
}

// run applies the ops from the first'th on, the last one into last when it
// is not nil, moving f when it is not nil.
func (c *Chain) run(src *Image, r Rand, last *Image, first int, f *Fields) *Image {
	c.r = r
	cur := src
	for i := first; i < len(c.ops); i++ {
		op := c.ops[i]
		next := &c.a
		if cur == &c.a {
			next = &c.b
		}
		if last != nil && i == len(c.ops)-1 {
			next = last
		}
		if c.apply(op, next, cur, f) {
			cur = next
		}
	}
	return cur
}

// apply runs op from src into dst, as Apply, moving f with it when f is
// not nil.
func (c *Chain) apply(op Op, dst, src *Image, f *Fields) bool {
	if f != nil {
		switch op := op.(type) {
		case FieldsOp:
			return op.ApplyFields(dst, src, f, &c.r)
		case Spatial:
			g := op.Geometry(src.Shape(), &c.r)
			f.Move(g)
			return op.ApplyGeometry(dst, src, g)
		}
	}
	return op.Apply(dst, src, &c.r)
}
