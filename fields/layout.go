package fields

import "fmt"

// Region is where one field other than the image and the int label lives
// in a batch's memory: Batch values of Shape and DType per sample, from
// Offset, then (for boxes, classes and tokens) the samples' counts as
// int32 from Counts (boxes and classes share the boxes' counts).
type Region struct {
	Kind  Kind
	DType DType
	// Shape is one sample's shape: [H, W] of a mask, [Max, 4] of boxes,
	// [Max] of classes and tokens, [Classes] of labels, a tensor's own,
	// [classes] of targets.
	Shape []int
	// Offset is the region's first byte in the batch's field memory, and
	// Counts that of its counts (-1: it has none).
	Offset, Counts int
}

// SampleBytes is the bytes of one sample's values.
func (r *Region) SampleBytes() int {
	n := r.DType.Size()
	for _, d := range r.Shape {
		n *= d
	}
	return n
}

// regionAlign aligns every region (and every counts array), so that each
// can be viewed as its element type, as the batch's image data is.
const regionAlign = 64

func alignUp(n int) int { return (n + regionAlign - 1) &^ (regionAlign - 1) }

// Layout lays out the fields of s other than the image and the int label
// for batches of batch samples whose images are h×w (a mask's size), and
// returns the regions in schema order and the bytes they take in all.
func (s *Schema) Layout(batch, h, w int) ([]Region, int, error) {
	if batch < 1 {
		return nil, 0, fmt.Errorf("fields: layout of a batch of %d", batch)
	}
	var regions []Region
	off := 0
	boxCounts := -1
	for _, f := range s.Fields {
		r := Region{Kind: f.Kind, Counts: -1}
		switch f.Kind {
		case Image, Label:
			continue
		case Mask:
			if h < 1 || w < 1 {
				return nil, 0, fmt.Errorf("%w: a mask needs images of one size (crop or resize them first), not %dx%d", ErrSchema, w, h)
			}
			r.DType, r.Shape = f.DType, []int{h, w}
		case Boxes:
			r.DType, r.Shape = Float32, []int{f.Max, 4}
		case Classes:
			r.DType, r.Shape = Int64, []int{f.Max}
		case Labels:
			r.DType, r.Shape = Float32, []int{f.Classes}
		case Tokens:
			r.DType, r.Shape = Int32, []int{f.Max}
		case Tensor:
			r.DType, r.Shape = f.DType, f.Shape
		}
		r.Offset = off
		off = alignUp(off + batch*r.SampleBytes())
		switch f.Kind {
		case Boxes, Tokens:
			r.Counts = off
			off = alignUp(off + 4*batch)
			if f.Kind == Boxes {
				boxCounts = r.Counts
			}
		}
		regions = append(regions, r)
	}
	for i := range regions {
		if regions[i].Kind == Classes {
			regions[i].Counts = boxCounts
		}
	}
	return regions, off, nil
}
