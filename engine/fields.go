package engine

// A sample's fields beyond the image and the int label: where they live in
// a slab, how a read record's values become what the chain moves, and how
// they are written into their regions.

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/pipefeed/pipe/cache"
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
	return fieldView(k, b.N, b.Labels, b.Fields, b.Regions)
}

// Field returns the slice's field of kind k, as Batch.Field does, in host
// memory valid until Release.
func (b *DeviceBatch) Field(k fields.Kind) (FieldView, bool) {
	return fieldView(k, b.N, b.Labels, b.Fields, b.Regions)
}

func fieldView(k fields.Kind, n int, labels []int32, mem []byte, regions []fields.Region) (FieldView, bool) {
	if k == fields.Label {
		return FieldView{Region: fields.Region{Kind: k, DType: fields.Int32, Counts: -1},
			Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(labels))), 4*len(labels))}, true
	}
	for _, r := range regions {
		if r.Kind != k {
			continue
		}
		v := FieldView{Region: r, Data: mem[r.Offset : r.Offset+n*r.SampleBytes()]}
		if r.Counts >= 0 {
			v.Counts = int32s(mem[r.Counts : r.Counts+4*n])
		}
		return v, true
	}
	return FieldView{}, false
}

// copySlice copies samples [lo, hi) of the fields in src (laid out by
// from) to the start of dst's regions (laid out by to, the same fields).
func copySlice(dst []byte, to []fields.Region, src []byte, from []fields.Region, lo, hi int) {
	for i, r := range from {
		n := r.SampleBytes()
		copy(dst[to[i].Offset:], src[r.Offset+lo*n:r.Offset+hi*n])
		if r.Counts >= 0 {
			copy(dst[to[i].Counts:], src[r.Counts+4*lo:r.Counts+4*hi])
		}
	}
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

// moving makes the fields the chain moves from a record's values: the mask
// decoded (or, from a source of pixels, as it is), the boxes as corners
// with their classes; nil where the pipeline moves none. Its errors are
// about the record.
func (w *worker) moving(s *Spec, l *fieldLayout, rec *source.Record) (*transform.Fields, error) {
	if s.Schema == nil {
		return nil, nil
	}
	if len(rec.Fields) != len(s.Schema.Fields) {
		return nil, fmt.Errorf("the source read %d values for the %d fields %s", len(rec.Fields), len(s.Schema.Fields), s.Schema)
	}
	if !l.spatial {
		return nil, nil
	}
	f := &w.fields
	f.Mask = transform.Mask{}
	f.Boxes, f.HasBoxes = f.Boxes[:0], false
	f.MinArea, f.Normalized = s.Schema.MinArea, s.Schema.Normalized
	if i := l.index[fields.Mask]; i >= 0 {
		b, size := rec.Fields[i].Bytes, s.Schema.Fields[i].DType.Size()
		switch {
		case rec.Enc != nil:
			if err := w.dec.DecodeMask(&w.mask, b, size); err != nil {
				return nil, fmt.Errorf("mask: %w", err)
			}
			f.Mask = w.mask
		case len(b) != rec.H*rec.W*size:
			return nil, fmt.Errorf("%w: a mask of %d bytes for a %dx%d image of %s class ids", fields.ErrValue, len(b), rec.W, rec.H, s.Schema.Fields[i].DType)
		default:
			// A source of pixels gives its masks' values.
			f.Mask = transform.Mask{Pix: b, H: rec.H, W: rec.W, Size: size}
		}
	}
	if i := l.index[fields.Boxes]; i >= 0 {
		f.HasBoxes = true
		v, max := rec.Fields[i].Floats, s.Schema.Fields[i].Max
		if len(v)%4 != 0 {
			return nil, fmt.Errorf("%w: boxes: %d numbers, not 4 a box", fields.ErrValue, len(v))
		}
		n := len(v) / 4
		if n > max {
			return nil, fmt.Errorf("%w: %d boxes, over max_boxes=%d", fields.ErrValue, n, max)
		}
		var classes []int64
		if c := l.index[fields.Classes]; c >= 0 {
			if classes = rec.Fields[c].Ints; len(classes) != n {
				return nil, fmt.Errorf("%w: %d boxes but %d classes", fields.ErrValue, n, len(classes))
			}
		}
		for b := range n {
			q := v[4*b : 4*b+4]
			box := corners(s.Schema.BoxFormat, q[0], q[1], q[2], q[3])
			if classes != nil {
				box.Class = classes[b]
			}
			if !(box.X0 <= box.X1 && box.Y0 <= box.Y1) {
				return nil, fmt.Errorf("%w: box %d is %v (%s): its corners are out of order or not numbers", fields.ErrValue, b, q, s.Schema.BoxFormat)
			}
			f.Boxes = append(f.Boxes, box)
		}
	}
	return f, nil
}

// unmoved is what a cache entry stores of a record's values: those of the
// fields that are not moved with the image (the mask and boxes are stored
// as the cached stages moved them), the rest empty.
func (w *worker) unmoved(l *fieldLayout, vals []fields.Value) []fields.Value {
	w.vals = append(w.vals[:0], vals...)
	for _, k := range []fields.Kind{fields.Mask, fields.Boxes, fields.Classes} {
		if i := l.index[k]; i >= 0 {
			w.vals[i] = fields.Value{}
		}
	}
	return w.vals
}

// cached makes the record and fields of a sample read from the cache: its
// values in w.crec, its mask (aliasing the entry) and boxes in w.fields,
// which is returned where the pipeline moves fields. Without a fields
// stage, both are nil.
func (w *worker) cached(s *Spec, l *fieldLayout, cs cache.Sample) (*source.Record, *transform.Fields, error) {
	if s.Schema == nil {
		return nil, nil, nil
	}
	n := len(s.Schema.Fields)
	if cap(w.crec.Fields) < n {
		w.crec.Fields = make([]fields.Value, n)
	}
	w.crec.Fields = w.crec.Fields[:n]
	if err := cs.Fields(&w.fields, w.crec.Fields); err != nil {
		return nil, nil, err
	}
	if !l.spatial {
		return &w.crec, nil, nil
	}
	// The cached stages made the boxes pixels.
	w.fields.MinArea, w.fields.Normalized = s.Schema.MinArea, false
	return &w.crec, &w.fields, nil
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

// ImageBytes is the bytes of one host slab's images.
func (e *Engine) ImageBytes() int { return e.fl.images }

// SlabBytes is the bytes of one host slab: its rows' images, then, with
// fields, their regions. A host allocator (SetHostAllocator) is asked for
// slabs of this size.
func (e *Engine) SlabBytes() int { return e.fl.slabBytes() }
