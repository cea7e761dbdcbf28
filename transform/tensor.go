package transform

import (
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// Layout is the memory order of a batch tensor.
type Layout int

const (
	// NCHW is channels-first: sample n, channel c, row y, column x at
	// ((n*C+c)*H+y)*W+x. cuDNN and PyTorch prefer it.
	NCHW Layout = iota
	// NHWC is channels-last: ((n*H+y)*W+x)*C+c. TensorFlow's default.
	NHWC
)

func (l Layout) String() string {
	if l == NHWC {
		return "nhwc"
	}
	return "nchw"
}

// ParseLayout returns the Layout with the given name.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "nchw":
		return NCHW, nil
	case "nhwc":
		return NHWC, nil
	}
	return 0, fmt.Errorf("%w: unknown layout %q (want nchw or nhwc)", ErrParam, s)
}

// DType is the element type of a batch tensor.
type DType int

const (
	// Float32 is IEEE-754 binary32, native byte order.
	Float32 DType = iota
	// Float16 is IEEE-754 binary16 stored as uint16, native byte order.
	Float16
	// Uint8 is the raw pixel value 0..255.
	Uint8
)

var dtypeNames = [...]string{"float32", "float16", "uint8"}

func (d DType) String() string { return dtypeNames[d] }

// Size is the number of bytes of one element.
func (d DType) Size() int { return [...]int{4, 2, 1}[d] }

// ParseDType returns the DType with the given name.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown dtype %q (want float32, float16 or uint8)", ErrParam, s)
}

// Normalization maps a pixel v of channel c to (v/255 - Mean[c]) / Std[c],
// with mean and std given on the [0, 1] scale as torchvision's Normalize
// after ToTensor. A single value applies to every channel.
type Normalization struct {
	Mean, Std []float64
}

// Normalize returns the normalize operation. Std values must be positive.
func Normalize(mean, std []float64) (*Normalization, error) {
	if len(mean) == 0 || len(std) == 0 {
		return nil, paramErr("normalize", "mean and std need at least one value each")
	}
	if len(mean) != len(std) && len(mean) != 1 && len(std) != 1 {
		return nil, paramErr("normalize", "mean has %d values and std %d: give one per channel or one for all", len(mean), len(std))
	}
	for _, s := range std {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, paramErr("normalize", "std=%g: must be positive", s)
		}
	}
	for _, m := range mean {
		if math.IsNaN(m) || math.IsInf(m, 0) {
			return nil, paramErr("normalize", "mean=%g: must be finite", m)
		}
	}
	return &Normalization{Mean: mean, Std: std}, nil
}

func (n *Normalization) String() string {
	return "normalize mean=" + floats(n.Mean) + " std=" + floats(n.Std)
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = fmt.Sprint(f)
	}
	return strings.Join(s, ",")
}

func pick(v []float64, c int) float64 {
	if len(v) == 1 {
		return v[0]
	}
	return v[c]
}

// channels checks the normalization against an image's channel count.
func (n *Normalization) channels(c int) error {
	for _, v := range [][]float64{n.Mean, n.Std} {
		if len(v) != 1 && len(v) != c {
			return fmt.Errorf("normalize: %d values for %d channels", len(v), c)
		}
	}
	return nil
}

// TensorWriter writes images into batch memory in a given layout and dtype,
// applying the normalization on the way. Float outputs without a
// normalization are scaled to [0, 1] (torchvision's ToTensor).
//
// Each channel's mapping is a 256-entry table, so conversion costs one load
// and one store per value whatever the normalization.
type TensorWriter struct {
	Layout Layout
	DType  DType
	Norm   *Normalization // nil: no normalization
	Shape  Shape          // per-sample input shape, fixed

	lut32 [][256]float32
	lut16 [][256]uint16
}

// ToTensor returns the writer for images of the given fixed shape. A
// normalization needs a float dtype: normalised values do not fit uint8.
func ToTensor(layout Layout, dtype DType, norm *Normalization, shape Shape) (*TensorWriter, error) {
	if !shape.Fixed() {
		return nil, fmt.Errorf("to_tensor: images have varying size %s; add a crop or resize that fixes it", shape)
	}
	if norm != nil {
		if dtype == Uint8 {
			return nil, paramErr("to_tensor", "dtype=uint8 cannot hold normalized values; use float32 or float16, or drop normalize")
		}
		if err := norm.channels(shape.C); err != nil {
			return nil, err
		}
	}
	t := &TensorWriter{Layout: layout, DType: dtype, Norm: norm, Shape: shape}
	if dtype == Uint8 {
		return t, nil
	}
	t.lut32 = make([][256]float32, shape.C)
	for c := range t.lut32 {
		mean, std := 0.0, 1.0
		if norm != nil {
			mean, std = pick(norm.Mean, c), pick(norm.Std, c)
		}
		for v := range 256 {
			t.lut32[c][v] = float32((float64(v)/255 - mean) / std)
		}
	}
	if dtype == Float16 {
		t.lut16 = make([][256]uint16, shape.C)
		for c := range t.lut16 {
			for v := range 256 {
				t.lut16[c][v] = Float32To16(t.lut32[c][v])
			}
		}
	}
	return t, nil
}

func (t *TensorWriter) String() string {
	return fmt.Sprintf("to_tensor layout=%s dtype=%s", t.Layout, t.DType)
}

// SampleBytes is the number of bytes one sample occupies in a batch.
func (t *TensorWriter) SampleBytes() int { return t.Shape.Len() * t.DType.Size() }

// Dims returns the tensor dimensions of a batch of n samples, in layout order.
func (t *TensorWriter) Dims(n int) [4]int {
	s := t.Shape
	if t.Layout == NHWC {
		return [4]int{n, s.H, s.W, s.C}
	}
	return [4]int{n, s.C, s.H, s.W}
}

// Write converts img, which must have t.Shape, into dst[:t.SampleBytes()].
// dst must be aligned to the dtype's size.
func (t *TensorWriter) Write(dst []byte, img *Image) {
	n := t.Shape.Len()
	if img.C*img.H*img.W != n || len(dst) < n*t.DType.Size() {
		panic(fmt.Sprintf("transform: TensorWriter.Write of %s image into %d bytes, want %s", img.Shape(), len(dst), t.Shape))
	}
	hw := img.H * img.W
	switch t.DType {
	case Uint8:
		out := dst[:n:n]
		if t.Layout == NCHW || img.C == 1 {
			copy(out, img.Pix)
			return
		}
		for c := 0; c < img.C; c++ {
			p := img.Plane(c)
			for i, v := range p {
				out[i*img.C+c] = v
			}
		}
	case Float32:
		out := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), n)
		for c := 0; c < img.C; c++ {
			lut := &t.lut32[c]
			p := img.Plane(c)
			if t.Layout == NCHW {
				o := out[c*hw : c*hw+len(p)]
				for i, v := range p {
					o[i] = lut[v]
				}
				continue
			}
			for i, v := range p {
				out[i*img.C+c] = lut[v]
			}
		}
	case Float16:
		out := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), n)
		for c := 0; c < img.C; c++ {
			lut := &t.lut16[c]
			p := img.Plane(c)
			if t.Layout == NCHW {
				o := out[c*hw : c*hw+len(p)]
				for i, v := range p {
					o[i] = lut[v]
				}
				continue
			}
			for i, v := range p {
				out[i*img.C+c] = lut[v]
			}
		}
	}
}

// Float32To16 converts f to IEEE-754 binary16 bits, rounding to nearest even;
// out-of-range values become ±Inf and NaN stays NaN.
func Float32To16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f: // overflow or Inf
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		half := uint32(1) << (shift - 1)
		r := man >> shift
		rem := man & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the right answer
	}
	return sign | uint16(r)
}

// Float16To32 converts IEEE-754 binary16 bits to float32 exactly.
func Float16To32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: man × 2^-24
		v := float32(man) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
