package cache

// A sample's fields in an entry: after its pixels, when the sample's flags
// have flagFields.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/transform"
)

// flagFields marks a sample whose fields follow its pixels: the mask
// (a byte 1 then uint16 H, W, a byte of value size, the values; or a byte
// 0), the boxes (a byte 1 then a uint32 count of 4 float32 corners and an
// int64 class each; or a byte 0), then a uint32 count of values, each as a
// uint32 count of bytes and the bytes, a uint32 count of int64s and them,
// a uint32 count of float32s and them.
const flagFields = 2

// SampleFields appends a sample of a pipeline with fields: as Sample, then
// f's mask and boxes as the cached stages left them (f nil: none) and
// vals, the record's values of its other fields.
func (w *Writer) SampleFields(label int, img *transform.Image, state uint64, f *transform.Fields, vals []fields.Value) {
	w.next()
	w.buf = appendHeader(w.buf, label, img.C, img.H, img.W, flagFields, state)
	w.buf = append(w.buf, img.Pix...)
	b := w.buf
	if f != nil && f.Mask.Pix != nil {
		m := f.Mask
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint16(b, uint16(m.H))
		b = binary.LittleEndian.AppendUint16(b, uint16(m.W))
		b = append(b, byte(m.Size))
		b = append(b, m.Pix[:m.H*m.W*m.Size]...)
	} else {
		b = append(b, 0)
	}
	if f != nil && f.HasBoxes {
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f.Boxes)))
		for _, x := range f.Boxes {
			for _, v := range [4]float32{x.X0, x.Y0, x.X1, x.Y1} {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			}
			b = binary.LittleEndian.AppendUint64(b, uint64(x.Class))
		}
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(vals)))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Bytes)))
		b = append(b, v.Bytes...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Ints)))
		for _, x := range v.Ints {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.Floats)))
		for _, x := range v.Floats {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	w.buf = b
}

// Fields decodes the fields of a sample written by SampleFields into f and
// vals, reusing their memory: the mask aliases the entry's bytes (valid as
// long as the sample is), the boxes and values are copied. vals must have
// one Value per value written. An entry whose bytes do not hold what its
// counts say is corrupt (store.ErrCorrupt).
func (s Sample) Fields(f *transform.Fields, vals []fields.Value) error {
	if s.fields == nil {
		return fmt.Errorf("%w: the cached sample has no fields (the cache was written without them)", store.ErrCorrupt)
	}
	r := reader{b: s.fields}
	f.Mask = transform.Mask{}
	if r.byte() == 1 {
		h, w, size := int(r.u16()), int(r.u16()), int(r.byte())
		f.Mask = transform.Mask{H: h, W: w, Size: size, Pix: r.bytes(h * w * size)}
	}
	f.Boxes, f.HasBoxes = f.Boxes[:0], false
	if r.byte() == 1 {
		f.HasBoxes = true
		n := int(r.u32())
		if n > len(r.b)/24 {
			return corruptFields()
		}
		for range n {
			var q [4]float32
			for i := range q {
				q[i] = math.Float32frombits(r.u32())
			}
			f.Boxes = append(f.Boxes, transform.Box{X0: q[0], Y0: q[1], X1: q[2], Y1: q[3], Class: int64(r.u64())})
		}
	}
	if n := int(r.u32()); n != len(vals) {
		if r.bad {
			return corruptFields()
		}
		return fmt.Errorf("%w: the cached sample has %d field values, the pipeline %d", store.ErrCorrupt, n, len(vals))
	}
	for i := range vals {
		v := &vals[i]
		v.Bytes = append(v.Bytes[:0], r.bytes(int(r.u32()))...)
		n := int(r.u32())
		if n > len(r.b)/8 {
			return corruptFields()
		}
		v.Ints = v.Ints[:0]
		for range n {
			v.Ints = append(v.Ints, int64(r.u64()))
		}
		if n = int(r.u32()); n > len(r.b)/4 {
			return corruptFields()
		}
		v.Floats = v.Floats[:0]
		for range n {
			v.Floats = append(v.Floats, math.Float32frombits(r.u32()))
		}
	}
	if r.bad || len(r.b) != 0 {
		return corruptFields()
	}
	return nil
}

func corruptFields() error {
	return fmt.Errorf("%w: a sample's fields run past its bytes", store.ErrCorrupt)
}

// reader reads little-endian values from b; reading past the end sets bad
// and gives zeros.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad, r.b = true, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
