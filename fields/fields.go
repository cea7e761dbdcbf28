package fields

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is what a field holds, and so how it is read, moved and batched.
type Kind int

const (
	// Image is the sample's image: decoded and augmented as without a
	// schema, written as the pipeline's tensor. Every schema has one.
	Image Kind = iota
	// Mask is an image of class ids (one channel, uint8 or uint16), moved
	// by every spatial operation as the image is, with nearest-neighbour
	// sampling, and left alone by colour operations.
	Mask
	// Boxes are N boxes of 4 float32 corners in pixels of the image,
	// moved with it (clipped to it, and dropped when smaller than the
	// schema's MinArea), batched as [Max, 4] with a count.
	Boxes
	// Classes are the N int64 classes of the boxes, one per box, dropped
	// with them; batched as [Max] with the boxes' count.
	Classes
	// Label is one int per sample, as without a schema.
	Label
	// Labels are several class ids per sample (multi-label
	// classification), batched as a multi-hot float32 vector of
	// Field.Classes entries.
	Labels
	// Tokens are an int32 sequence (a caption's token ids), batched padded
	// with zeros to Max with its length.
	Tokens
	// Tensor is a raw tensor of a fixed DType and Shape.
	Tensor
	// Targets are the soft class targets that the mixup and cutmix stages
	// make from the labels, float32 [classes] per sample. No source reads
	// them: a schema has no Targets field, and a batch has one wherever
	// its pipeline mixes.
	Targets
)

var kindNames = [...]string{"image", "mask", "boxes", "classes", "label", "labels", "tokens", "tensor", "targets"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind returns the Kind called name.
func ParseKind(name string) (Kind, error) {
	for i, n := range kindNames {
		if n == name {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown field %q (want one of %s)", ErrSchema, name, strings.Join(kindNames[:], ", "))
}

// Spatial reports whether operations that move pixels move the field too.
func (k Kind) Spatial() bool { return k == Image || k == Mask || k == Boxes }

// DType is the element type of a field's values.
type DType int

const (
	Uint8 DType = iota
	Uint16
	Int32
	Int64
	Float32
)

var dtypeNames = [...]string{"uint8", "uint16", "int32", "int64", "float32"}
var dtypeSizes = [...]int{1, 2, 4, 8, 4}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the bytes of one value.
func (d DType) Size() int { return dtypeSizes[d] }

// ParseDType returns the DType called name.
func ParseDType(name string) (DType, error) {
	for i, n := range dtypeNames {
		if n == name {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown dtype %q (want one of %s)", ErrSchema, name, strings.Join(dtypeNames[:], ", "))
}

// DTypes lists the dtypes' names.
func DTypes() []string { return dtypeNames[:] }

// ErrSchema is wrapped by every error about a schema that cannot be right
// (a mask of float32, boxes without a bound, two images).
var ErrSchema = errors.New("invalid fields")

// ErrValue is wrapped by every error about a sample's value that does not
// fit its field (more boxes than Max, a label past the classes, a tensor
// of the wrong size): the record is corrupt.
var ErrValue = errors.New("field value")

// Field is one field of a schema. Its name, in batches and in pipefeed's
// dicts, is its Kind's.
type Field struct {
	Kind Kind
	// Key is where the source finds the field: a WebDataset member's
	// extension ("jpg", "mask.png"), a JSON member's key ("json:boxes"),
	// a TFRecord feature ("image/encoded"), an image folder's sibling
	// folder ("masks"), a labels file's column. "" is the source's
	// default for the kind.
	Key string
	// DType is the values' type: Uint8 or Uint16 for a mask, that of a
	// tensor; the other kinds have fixed types (see Kind).
	DType DType
	// Shape is a tensor's shape (every dimension ≥ 1).
	Shape []int
	// Max bounds the boxes (and their classes) or tokens of a sample: the
	// batch holds that many, padded, and a sample with more is corrupt.
	Max int
	// Classes is a multi-label vector's length: every label is below it.
	Classes int
}

// BoxFormat is how boxes' four numbers are written, in pixels.
type BoxFormat int

const (
	// XYXY is left, top, right, bottom (torchvision's default).
	XYXY BoxFormat = iota
	// XYWH is left, top, width, height (COCO's).
	XYWH
	// CXCYWH is centre x, centre y, width, height (YOLO's, DETR's).
	CXCYWH
)

var formatNames = [...]string{"xyxy", "xywh", "cxcywh"}

func (f BoxFormat) String() string { return formatNames[f] }

// BoxFormats lists the box formats' names.
func BoxFormats() []string { return formatNames[:] }

// ParseBoxFormat returns the BoxFormat called name.
func ParseBoxFormat(name string) (BoxFormat, error) {
	for i, n := range formatNames {
		if n == name {
			return BoxFormat(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown box format %q (want xyxy, xywh or cxcywh)", ErrSchema, name)
}

// Schema is a pipeline's fields, in batch order, with the settings of its
// boxes.
type Schema struct {
	Fields []Field
	// BoxFormat is how boxes are read and written; Normalized says the
	// source's boxes are fractions of the image's width and height (as
	// the TF Object Detection API writes them) rather than pixels. Boxes
	// in batches are in pixels of the output image.
	BoxFormat  BoxFormat
	Normalized bool
	// MinArea drops a box whose area in output pixels is below it (and
	// any box of zero width or height), with its class, after the last
	// operation.
	MinArea float64
}

// Default is the schema of a pipeline without a fields stage: an image and
// an int label.
func Default() *Schema {
	return &Schema{Fields: []Field{{Kind: Image}, {Kind: Label}}}
}

// MaxBoxes and MaxTokens bound Field.Max: a batch holds Max of them for
// every sample.
const (
	MaxBoxes  = 1 << 16
	MaxTokens = 1 << 20
)

// Check reports the first thing wrong with s: every schema has one image,
// no kind twice, classes only with boxes, masks of uint8 or uint16, and
// the bounds that size a batch.
func (s *Schema) Check() error {
	seen := map[Kind]bool{}
	for _, f := range s.Fields {
		if f.Kind == Targets {
			return fmt.Errorf("%w: targets are made by mixup and cutmix, not read", ErrSchema)
		}
		if f.Kind < Image || f.Kind > Tensor {
			return fmt.Errorf("%w: unknown kind %d", ErrSchema, int(f.Kind))
		}
		if seen[f.Kind] {
			return fmt.Errorf("%w: %s given twice", ErrSchema, f.Kind)
		}
		seen[f.Kind] = true
		switch f.Kind {
		case Mask:
			if f.DType != Uint8 && f.DType != Uint16 {
				return fmt.Errorf("%w: a mask is uint8 or uint16, not %s", ErrSchema, f.DType)
			}
		case Boxes, Classes:
			if f.Max < 1 || f.Max > MaxBoxes {
				return fmt.Errorf("%w: %s: max_boxes=%d: want 1 to %d", ErrSchema, f.Kind, f.Max, MaxBoxes)
			}
		case Tokens:
			if f.Max < 1 || f.Max > MaxTokens {
				return fmt.Errorf("%w: tokens: max_tokens=%d: want 1 to %d", ErrSchema, f.Max, MaxTokens)
			}
		case Labels:
			if f.Classes < 1 || f.Classes > 1<<20 {
				return fmt.Errorf("%w: labels: classes=%d: want 1 to %d", ErrSchema, f.Classes, 1<<20)
			}
		case Tensor:
			if len(f.Shape) == 0 {
				return fmt.Errorf("%w: a tensor needs its shape", ErrSchema)
			}
			n := 1
			for _, d := range f.Shape {
				if d < 1 || n > (1<<30)/d {
					return fmt.Errorf("%w: tensor shape %v: want dimensions ≥ 1 and under 2^30 values", ErrSchema, f.Shape)
				}
				n *= d
			}
		}
	}
	if !seen[Image] {
		return fmt.Errorf("%w: no image: every sample has one", ErrSchema)
	}
	if seen[Classes] && !seen[Boxes] {
		return fmt.Errorf("%w: classes are the boxes' classes: they need boxes", ErrSchema)
	}
	if s.MinArea < 0 || s.MinArea != s.MinArea {
		return fmt.Errorf("%w: min_area=%g: want ≥ 0", ErrSchema, s.MinArea)
	}
	return nil
}

// Field returns the field of kind k, or nil.
func (s *Schema) Field(k Kind) *Field {
	for i := range s.Fields {
		if s.Fields[i].Kind == k {
			return &s.Fields[i]
		}
	}
	return nil
}

// Has reports whether s has a field of kind k.
func (s *Schema) Has(k Kind) bool { return s.Field(k) != nil }

// String is s in a canonical form, the same for equal schemas, for cache
// fingerprints and summaries: "image=jpg mask=mask.png:uint8 label".
func (s *Schema) String() string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Kind.String())
		if f.Key != "" {
			b.WriteString("=" + f.Key)
		}
		switch f.Kind {
		case Mask:
			b.WriteString(":" + f.DType.String())
		case Boxes, Classes, Tokens:
			fmt.Fprintf(&b, "[%d]", f.Max)
		case Labels:
			fmt.Fprintf(&b, "[%d]", f.Classes)
		case Tensor:
			fmt.Fprintf(&b, ":%s%v", f.DType, f.Shape)
		}
	}
	if s.Has(Boxes) {
		fmt.Fprintf(&b, " box_format=%s normalized=%t min_area=%g", s.BoxFormat, s.Normalized, s.MinArea)
	}
	return b.String()
}

// Value is a field's value as a source read it, before it has a type:
// whichever of the three the file holds (a member's bytes, a TFRecord
// feature's int64 or float list).
type Value struct {
	Bytes  []byte
	Ints   []int64
	Floats []float32
}

// Reset empties v, keeping its memory.
func (v *Value) Reset() {
	v.Bytes, v.Ints, v.Floats = v.Bytes[:0], v.Ints[:0], v.Floats[:0]
}
