package transform

import "fmt"

// Image is an 8-bit image in CHW layout: the value of channel c at row y,
// column x is Pix[(c*H+y)*W+x]. Pix may alias memory the image does not own
// (a record of a source); operations never write to their source image.
type Image struct {
	Pix     []uint8
	C, H, W int
}

// Shape is the size of an image: channels, height, width. A zero dimension
// means "varies from sample to sample", as for a folder of JPEGs before a
// crop or resize fixes it.
type Shape struct {
	C, H, W int
}

// Fixed reports whether every dimension is known.
func (s Shape) Fixed() bool { return s.C > 0 && s.H > 0 && s.W > 0 }

// Len is the number of values in an image of this shape.
func (s Shape) Len() int { return s.C * s.H * s.W }

func (s Shape) String() string {
	d := func(n int) string {
		if n == 0 {
			return "?"
		}
		return fmt.Sprint(n)
	}
	return d(s.C) + "x" + d(s.H) + "x" + d(s.W)
}

// Shape returns the image's shape.
func (m *Image) Shape() Shape { return Shape{m.C, m.H, m.W} }

// Resize sets the image's dimensions, growing Pix only when its capacity is
// too small, so a reused scratch image stops allocating once it has seen the
// largest size.
func (m *Image) Resize(c, h, w int) {
	n := c * h * w
	if cap(m.Pix) < n {
		m.Pix = make([]uint8, n)
	}
	m.Pix = m.Pix[:n]
	m.C, m.H, m.W = c, h, w
}

// Plane returns channel c as an H*W row-major slice.
func (m *Image) Plane(c int) []uint8 {
	n := m.H * m.W
	return m.Pix[c*n : (c+1)*n : (c+1)*n]
}
