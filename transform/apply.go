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
func (c *Chain) Apply(src *Image, r Rand) *Image { return c.run(src, r, nil) }

// Rand is the generator as the last Apply or ApplyTo left it.
func (c *Chain) Rand() Rand { return c.r }

// ApplyTo is Apply with the last operation writing straight into dst, whose
// Pix is memory the caller wants the result in (such as a batch slab for
// uint8 CHW output): it saves a copy of every image. dst.Pix must have the
// capacity of the output; where the last operation leaves its input as it
// is, the result is copied into dst.
func (c *Chain) ApplyTo(dst, src *Image, r Rand) {
	if out := c.run(src, r, dst); out != dst {
		dst.Resize(out.C, out.H, out.W)
		copy(dst.Pix, out.Pix)
	}
}

// run applies the ops, the last one into last when it is not nil.
func (c *Chain) run(src *Image, r Rand, last *Image) *Image {
	c.r = r
	cur := src
	for i, op := range c.ops {
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
