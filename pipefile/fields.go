package pipefile

// The fields stage: which fields a sample carries, and where the source
// finds them.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/fields"
)

// Fields declares the fields of every sample (see package fields): it comes
// right after the source, which reads each field from its key. Without a
// fields stage a sample is an image and an int label, as it always was.
func Fields(s *fields.Schema) Stage {
	return Stage{name: "fields", line: fieldsLine(s), schema: s, apply: func(c *Compiled) error {
		if err := s.Check(); err != nil {
			return err
		}
		if len(c.Ops) > 0 || c.Decode || c.afterBatch || c.haveTensor || c.Cache != nil {
			return errors.New("fields must come right after the source: the source reads them")
		}
		c.Schema = s
		return nil
	}}
}

// fieldsLine is the canonical line of a schema, as a parsed line prints:
// each field given, as its bare name where it has the source's default
// key, and every setting, the file's default for the fields it lacks.
func fieldsLine(s *fields.Schema) string {
	spec := Lookup("stage", "fields")
	vals := map[string]string{}
	for _, p := range spec.Params {
		if p.Default != "" {
			vals[p.Name] = p.Default
		}
	}
	for _, f := range s.Fields {
		vals[f.Kind.String()] = f.Key
		switch f.Kind {
		case fields.Mask:
			vals["mask_dtype"] = f.DType.String()
		case fields.Boxes:
			vals["max_boxes"] = itoa(f.Max)
		case fields.Labels:
			vals["num_labels"] = itoa(f.Classes)
		case fields.Tokens:
			vals["max_tokens"] = itoa(f.Max)
		case fields.Tensor:
			dims := make([]string, len(f.Shape))
			for i, d := range f.Shape {
				dims[i] = itoa(d)
			}
			vals["tensor_dtype"], vals["tensor_shape"] = f.DType.String(), strings.Join(dims, ",")
		}
	}
	vals["box_format"], vals["normalized"], vals["min_area"] = s.BoxFormat.String(), strconv.FormatBool(s.Normalized), ftoa(s.MinArea)
	if _, ok := vals["tensor_shape"]; !ok {
		vals["tensor_shape"] = ""
	}
	return Args{spec: spec, vals: vals}.Line()
}

// fieldKinds are the fields stage's field parameters, in schema order.
var fieldKinds = []fields.Kind{fields.Image, fields.Mask, fields.Boxes, fields.Classes, fields.Label, fields.Labels, fields.Tokens, fields.Tensor}

// fieldsSpec is the fields stage. A field parameter written alone
// ("fields image mask label") reads the field from the source's default
// key for it; name=KEY names the key.
var fieldsSpec = &StageSpec{Name: "fields", Kind: "stage",
	Summary: "the fields every sample carries (image, mask, boxes, classes, label, labels, tokens, tensor) and the source's key for each; right after the source",
	Params: []Param{
		{Name: "image", Type: String, Bare: true, Doc: "the image (every sample has one): its key, or the source's image"},
		{Name: "mask", Type: String, Bare: true, Doc: "a segmentation mask of class ids (PNG), moved with the image by nearest-neighbour: its key (WebDataset mask.png, a sibling folder masks)"},
		{Name: "boxes", Type: String, Bare: true, Doc: "object boxes moved with the image (clipped, dropped below min_area): their key (WebDataset json:boxes; TFRecord the OD API's bbox lists)"},
		{Name: "classes", Type: String, Bare: true, Doc: "the boxes' classes, one int each: their key (json:classes, image/object/class/label)"},
		{Name: "label", Type: String, Bare: true, Doc: "one int label: its key (cls, image/class/label, a labels column)"},
		{Name: "labels", Type: String, Bare: true, Doc: "several int labels (multi-label), batched as a multi-hot float32 vector of num_labels: their key"},
		{Name: "tokens", Type: String, Bare: true, Doc: "an int sequence (caption tokens), batched as int32 padded with zeros to max_tokens, with lengths: its key"},
		{Name: "tensor", Type: String, Bare: true, Doc: "a raw tensor of tensor_dtype and tensor_shape (an .npy member): its key"},
		{Name: "mask_dtype", Type: Enum, Enum: []string{"uint8", "uint16"}, Default: "uint8", Doc: "the mask's class ids: uint8, or uint16 past 255 classes"},
		Param{Name: "max_boxes", Type: Int, Default: "100", Min: bound(1), Doc: "boxes a batch holds per sample, padded; a sample with more is a corrupt record"}.with(upTo{fields.MaxBoxes, "a batch holds max_boxes for every sample"}),
		{Name: "box_format", Type: Enum, Enum: fields.BoxFormats(), Default: "xyxy", Doc: "how boxes are read and written: xyxy (torchvision), xywh (COCO) or cxcywh"},
		{Name: "normalized", Type: Bool, Default: "false", Doc: "the source's boxes are fractions of the image's size (TFRecords of the OD API); batches hold pixels"},
		{Name: "min_area", Type: Float, Default: "1", Min: bound(0), Doc: "after the last operation, drop boxes of smaller area in pixels (and any of zero width or height)"},
		Param{Name: "num_labels", Type: Int, Default: "0", Min: bound(0), Doc: "length of the labels vector (needed with labels): every label is below it"}.with(upTo{1 << 20, "the vector is batched for every sample"}),
		Param{Name: "max_tokens", Type: Int, Default: "77", Min: bound(1), Doc: "tokens a batch holds per sample, padded; a longer sequence is a corrupt record"}.with(upTo{fields.MaxTokens, "a batch holds max_tokens for every sample"}),
		{Name: "tensor_dtype", Type: Enum, Enum: fields.DTypes(), Default: "float32", Doc: "the tensor's element type"},
		{Name: "tensor_shape", Type: String, Doc: "the tensor's shape, comma-separated (needed with tensor)"},
	},
	Build: func(a Args) (Stage, error) {
		s, err := schemaOf(a)
		if err != nil {
			return Stage{}, err
		}
		return Fields(s), nil
	}}

// schemaOf makes the schema a fields line's arguments declare.
func schemaOf(a Args) (*fields.Schema, error) {
	s := &fields.Schema{MinArea: a.Float("min_area"), Normalized: a.Bool("normalized")}
	s.BoxFormat, _ = fields.ParseBoxFormat(a.String("box_format"))
	for _, k := range fieldKinds {
		name := k.String()
		if !a.Given(name) {
			continue
		}
		f := fields.Field{Kind: k, Key: a.String(name)}
		switch k {
		case fields.Mask:
			f.DType, _ = fields.ParseDType(a.String("mask_dtype"))
		case fields.Boxes, fields.Classes:
			f.Max = a.Int("max_boxes")
		case fields.Tokens:
			f.Max = a.Int("max_tokens")
		case fields.Labels:
			if f.Classes = a.Int("num_labels"); f.Classes < 1 {
				return nil, errors.New("labels needs num_labels=N, the length of its multi-hot vector")
			}
		case fields.Tensor:
			f.DType, _ = fields.ParseDType(a.String("tensor_dtype"))
			for d := range strings.SplitSeq(a.String("tensor_shape"), ",") {
				n, err := strconv.Atoi(strings.TrimSpace(d))
				if err != nil || n < 1 {
					return nil, fmt.Errorf("tensor_shape=%q: want sizes ≥ 1, comma-separated (tensor needs it)", a.String("tensor_shape"))
				}
				f.Shape = append(f.Shape, n)
			}
		}
		s.Fields = append(s.Fields, f)
	}
	if !s.Has(fields.Image) {
		return nil, errors.New("every sample has an image: name it (fields image ...)")
	}
	return s, s.Check()
}
