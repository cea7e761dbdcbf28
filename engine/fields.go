package engine

// A sample's fields beyond the image and the int label: where they live in
// a slab, how a read record's values become what the chain moves, and how
// they are written into their regions.

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// fieldLayout is where a batch's fields live: regions laid out for e.rows
// samples, from byte at of each slab (after the images' bytes, aligned).
type fieldLayout struct {
	regions   []fields.Region
	images    int
	at, bytes int
	// spatial says the chain moves fields (a mask or boxes).
	spatial bool
	// index maps a kind to its field's position in the schema (-1: none).
	index [fields.Targets + 1]int
}

// layoutFields lays out s's schema in slabs of rows samples of sb bytes,
// and after it the targets of its mix stages.
func layoutFields(s *Spec, rows, sb int) (fieldLayout, error) {
	l := fieldLayout{images: rows * sb, at: alignSlab(rows * sb)}
	for i := range l.index {
		l.index[i] = -1
	}
	if s.Schema == nil {
		return l.addTargets(s.Mix, rows), nil
	}
	for i, f := range s.Schema.Fields {
		l.index[f.Kind] = i
	}
	var err error
	l.regions, l.bytes, err = s.Schema.Layout(rows, s.Out.Shape.H, s.Out.Shape.W)
	l.spatial = s.Schema.Has(fields.Mask) || s.Schema.Has(fields.Boxes)
	return l.addTargets(s.Mix, rows), err
}

func alignSlab(n int) int { return (n + 63) &^ 63 }

// slabBytes is the bytes of one slab: the images, then the fields.
func (l *fieldLayout) slabBytes() int {
	if len(l.regions) == 0 {
		return l.images
	}
	return l.at + l.bytes
}

// FieldView is one field of a batch: the N samples' values of Region's
// Shape and DType in Data, and, for boxes, classes and tokens, how many
// of each sample's are set in Counts (the rest are zeros).
type FieldView struct {
	fields.Region
	Data   []byte
	Counts []int32
}

// Field returns the batch's field of kind k (fields.Label: the labels as
// int32), or false where the pipeline has none. Its memory is the batch's,
// valid until Release.
func (b *Batch) Field(k fields.Kind) (FieldView, bool) {
	if k == fields.Label {
		return FieldView{Region: fields.Region{Kind: k, DType: fields.Int32, Counts: -1},
			Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.Labels))), 4*len(b.Labels))}, true
	}
	for _, r := range b.Regions {
		if r.Kind != k {
			continue
		}
		n := r.SampleBytes()
		v := FieldView{Region: r, Data: b.Fields[r.Offset : r.Offset+b.N*n]}
		if r.Counts >= 0 {
			v.Counts = int32s(b.Fields[r.Counts : r.Counts+4*b.N])
		}
		return v, true
	}
	return FieldView{}, false
}

func int32s(b []byte) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// Float32 views the values as float32 (boxes, labels, a float32 tensor).
func (v FieldView) Float32() ([]float32, error) {
	if v.DType != fields.Float32 {
		return nil, fmt.Errorf("pipe: Float32 of the %s field of %s: %w", v.Kind, v.DType, ErrDType)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/4), nil
}

// Int64 views the values as int64 (classes, an int64 tensor).
func (v FieldView) Int64() ([]int64, error) {
	if v.DType != fields.Int64 {
		return nil, fmt.Errorf("pipe: Int64 of the %s field of %s: %w", v.Kind, v.DType, ErrDType)
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/8), nil
}

// Int32 views the values as int32 (tokens, labels, an int32 tensor).
func (v FieldView) Int32() ([]int32, error) {
	if v.DType != fields.Int32 {
		return nil, fmt.Errorf("pipe: Int32 of the %s field of %s: %w", v.Kind, v.DType, ErrDType)
	}
	return int32s(v.Data), nil
}

// Uint16 views the values as uint16 (a uint16 mask or tensor).
func (v FieldView) Uint16() ([]uint16, error) {
	if v.DType != fields.Uint16 {
		return nil, fmt.Errorf("pipe: Uint16 of the %s field of %s: %w", v.Kind, v.DType, ErrDType)
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/2), nil
}

// corners is a box of format ft as left, top, right, bottom.
func corners(ft fields.BoxFormat, a, b, c, d float32) transform.Box {
	switch ft {
	case fields.XYWH:
		return transform.Box{X0: a, Y0: b, X1: a + c, Y1: b + d}
	case fields.CXCYWH:
		return transform.Box{X0: a - c/2, Y0: b - d/2, X1: a + c/2, Y1: b + d/2}
	}
	return transform.Box{X0: a, Y0: b, X1: c, Y1: d}
}

// writeFields writes sample k's fields other than the image and the label
// into the slab's regions: f's moved mask and boxes (nil without them) and
// rec's other values. Its errors are about the record.
func writeFields(mem []byte, k int, s *Spec, l *fieldLayout, rec *source.Record, f *transform.Fields) error {
	for _, r := range l.regions {
		n := r.SampleBytes()
		dst := mem[r.Offset+k*n : r.Offset+(k+1)*n]
		count := -1
		i := l.index[r.Kind]
		switch r.Kind {
		case fields.Mask:
			m := f.Mask
			if m.H != r.Shape[0] || m.W != r.Shape[1] || len(m.Pix) != n {
				return fmt.Errorf("%w: the mask came out %dx%d, the images %dx%d", fields.ErrValue, m.W, m.H, r.Shape[1], r.Shape[0])
			}
			copy(dst, m.Pix)
		case fields.Boxes:
			clear(dst)
			for b, box := range f.Boxes {
				q := formatBox(s.Schema.BoxFormat, box)
				for c := range 4 {
					binary.LittleEndian.PutUint32(dst[16*b+4*c:], math.Float32bits(q[c]))
				}
			}
			count = len(f.Boxes)
		case fields.Classes:
			clear(dst)
			for b, box := range f.Boxes {
				binary.LittleEndian.PutUint64(dst[8*b:], uint64(box.Class))
			}
		case fields.Labels:
			clear(dst)
			for _, c := range rec.Fields[i].Ints {
				if c < 0 || c >= int64(r.Shape[0]) {
					return fmt.Errorf("%w: label %d of labels, outside 0..%d (num_labels=%d)", fields.ErrValue, c, r.Shape[0]-1, r.Shape[0])
				}
				binary.LittleEndian.PutUint32(dst[4*c:], math.Float32bits(1))
			}
		case fields.Tokens:
			v := rec.Fields[i].Ints
			if len(v) > r.Shape[0] {
				return fmt.Errorf("%w: %d tokens, over max_tokens=%d", fields.ErrValue, len(v), r.Shape[0])
			}
			clear(dst)
			for t, id := range v {
				if id < math.MinInt32 || id > math.MaxInt32 {
					return fmt.Errorf("%w: token %d is %d, outside int32", fields.ErrValue, t, id)
				}
				binary.LittleEndian.PutUint32(dst[4*t:], uint32(int32(id)))
			}
			count = len(v)
		case fields.Tensor:
			v := rec.Fields[i].Bytes
			if len(v) != n {
				return fmt.Errorf("%w: tensor of %d bytes, not the %d of %s%v", fields.ErrValue, len(v), n, r.DType, r.Shape)
			}
			copy(dst, v)
		}
		if count >= 0 {
			binary.LittleEndian.PutUint32(mem[r.Counts+4*k:], uint32(count))
		}
	}
	return nil
}

// formatBox writes a box's corners in format ft.
func formatBox(ft fields.BoxFormat, b transform.Box) [4]float32 {
	switch ft {
	case fields.XYWH:
		return [4]float32{b.X0, b.Y0, b.X1 - b.X0, b.Y1 - b.Y0}
	case fields.CXCYWH:
		return [4]float32{(b.X0 + b.X1) / 2, (b.Y0 + b.Y1) / 2, b.X1 - b.X0, b.Y1 - b.Y0}
	}
	return [4]float32{b.X0, b.Y0, b.X1, b.Y1}
}

// moveFields moves sample from's fields to position to, as compaction
// moves its image.
func (l *fieldLayout) moveFields(mem []byte, to, from int) {
	for _, r := range l.regions {
		n := r.SampleBytes()
		copy(mem[r.Offset+to*n:r.Offset+(to+1)*n], mem[r.Offset+from*n:r.Offset+(from+1)*n])
		if r.Counts >= 0 {
			copy(mem[r.Counts+4*to:r.Counts+4*to+4], mem[r.Counts+4*from:r.Counts+4*from+4])
		}
	}
}

// FieldLayout is where a batch's fields lie in each host slab: from byte
// offset on, laid out by regions (fields.Schema.Layout for the slabs'
// rows, then the targets of Spec.Mix); no regions without a fields stage
// or a mix, or with only an image and a label.
func (e *Engine) FieldLayout() (offset int, regions []fields.Region) {
	return e.fl.at, e.fl.regions
}

// SlabBytes is the bytes of one host slab: its rows' images, then, with
// fields, their regions. A host allocator (SetHostAllocator) is asked for
// slabs of this size.
func (e *Engine) SlabBytes() int { return e.fl.slabBytes() }
