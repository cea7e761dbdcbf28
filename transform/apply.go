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
func (c *Chain) Apply(src *Image, r Rand) *Image { return c.run(src, r, nil, 0) }

// Rand is the generator as the last Apply or ApplyTo left it.
func (c *Chain) Rand() Rand { return c.r }

// ApplyTo is Apply with the last operation writing straight into dst, whose
// Pix is memory the caller wants the result in (such as a batch slab for
// uint8 CHW output): it saves a copy of every image. dst.Pix must have the
// capacity of the output; where the last operation leaves its input as it
// is, the result is copied into dst.
func (c *Chain) ApplyTo(dst, src *Image, r Rand) {
	if out := c.run(src, r, dst, 0); out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
}

// ApplyEncoded decodes data with d and runs the chain on the image, as
// Apply on the decoded image would; when the first op is a [RegionOp], d
// does its work while decoding ([Decoder.DecodeFor]). The decoded image is
// d's; the result is valid until the next call, and d's next call or
// Release.
func (c *Chain) ApplyEncoded(d *Decoder, data []byte, r Rand) (*Image, error) {
	return c.runEncoded(d, data, r, nil)
}

// ApplyEncodedTo is ApplyEncoded with the result in dst, as ApplyTo.
func (c *Chain) ApplyEncodedTo(d *Decoder, dst *Image, data []byte, r Rand) error {
	out, err := c.runEncoded(d, data, r, dst)
	if err == nil && out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
	return err
}

func (c *Chain) runEncoded(d *Decoder, data []byte, r Rand, last *Image) (*Image, error) {
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
		return c.run(img, c.r, last, 0), nil
	}
	next := &c.a
	if last != nil && len(c.ops) == 1 {
		next = last
	}
	applied, err := d.DecodeFor(next, data, op, &c.r)
	if err != nil {
		return nil, err
	}
	cur := next
	if !applied {
		cur = d.Decoded()
	}
	if err := c.fits(d, cur.Shape(), 1); err != nil {
		return nil, err
	}
	return c.run(cur, c.r, last, 1), nil
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
// is not nil.
func (c *Chain) run(src *Image, r Rand, last *Image, first int) *Image {
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
		if op.Apply(next, cur, &c.r) {
			cur = next
		}
	}
	return cur
}
