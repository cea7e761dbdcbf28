package source

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/source/remote"
)

// npyOf is an .npy file of format version (1 or 2) with the header
// dict's descr, fortran_order and shape as given, then data, its header
// padded to 64 bytes as numpy pads it.
func npyOf(version byte, descr, fortran, shape string, data []byte) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape)
	pre := 10
	if version > 1 {
		pre = 12
	}
	n := len(dict) + 1
	n += (64 - (pre+n)%64) % 64
	out := append([]byte(npyMagic), version, 0)
	if version > 1 {
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
	} else {
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
	}
	out = append(out, dict...)
	out = append(out, bytes.Repeat([]byte(" "), n-len(dict)-1)...)
	out = append(out, '\n')
	return append(out, data...)
}

// float32LE is xs as little-endian float32 bytes.
func float32LE(xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// detectionSchema is a schema of every kind, as a detection and
// captioning pipeline might declare it.
func detectionSchema() *fields.Schema {
	return &fields.Schema{Fields: []fields.Field{
		{Kind: fields.Image},
		{Kind: fields.Mask, DType: fields.Uint8},
		{Kind: fields.Boxes, Max: 4},
		{Kind: fields.Classes, Max: 4},
		{Kind: fields.Label},
		{Kind: fields.Labels, Classes: 5},
		{Kind: fields.Tokens, Max: 8},
		{Kind: fields.Tensor, DType: fields.Float32, Shape: []int{2, 3}},
	}}
}

// wdsFieldsShard writes a shard of samples named by members (name →
// data, written in order) and opens it with schema.
func wdsFieldsShard(t *testing.T, schema *fields.Schema, members ...string) (*WebDataset, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.tar")
	if err := os.WriteFile(path, tarOf(members...), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWebDataset(t.Context(), path, WithIndexDir(dir), WithFields(schema))
	if err == nil {
		t.Cleanup(func() { w.Close() })
	}
	return w, err
}

// goodSample is the members of a sample of detectionSchema named key.
func goodSample(key string) []string {
	return []string{
		key + ".jpg", "\xff\xd8\xffjpeg " + key,
		key + ".mask.png", "\x89PNG mask " + key,
		key + ".json", `{"boxes": [[1, 2, 3, 4], [5.5, 6, 7, 8e1]], "classes": [7, 9], "labels": [0, 4], "tokens": [3, 1, 4, 1, 5]}`,
		key + ".cls", "2",
		key + ".npy", string(npyOf(1, "<f4", "False", "(2, 3)", float32LE(1, 2, 3, 4, 5, 6))),
	}
}

// TestWebDatasetFields: every kind of field read back from a shard's
// members, by default keys and by named ones (a nested JSON key, a
// text list member, a raw tensor, an .npy of format version 2), with the
// image and label as without fields.
func TestWebDatasetFields(t *testing.T) {
	w, err := wdsFieldsShard(t, detectionSchema(), append(goodSample("a/0"), goodSample("a/1")...)...)
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() != 2 || len(w.Corrupt()) != 0 {
		t.Fatalf("%d samples, corrupt %v", w.Len(), w.Corrupt())
	}
	var rec Record
	for i := range 2 {
		if err := w.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("a/%d", i)
		f := rec.Fields
		if len(f) != 8 || string(rec.Enc) != "\xff\xd8\xffjpeg "+key || rec.Label != 2 || string(f[1].Bytes) != "\x89PNG mask "+key ||
			!slices.Equal(f[2].Floats, []float32{1, 2, 3, 4, 5.5, 6, 7, 80}) || !slices.Equal(f[3].Ints, []int64{7, 9}) ||
			!slices.Equal(f[5].Ints, []int64{0, 4}) || !slices.Equal(f[6].Ints, []int64{3, 1, 4, 1, 5}) ||
			!bytes.Equal(f[7].Bytes, float32LE(1, 2, 3, 4, 5, 6)) {
			t.Fatalf("sample %d: enc %q label %d fields %+v", i, rec.Enc, rec.Label, f)
		}
		for _, k := range []int{0, 4} {
			if v := f[k]; len(v.Bytes)+len(v.Ints)+len(v.Floats) != 0 {
				t.Errorf("sample %d: the %s's value is not empty: %+v", i, detectionSchema().Fields[k].Kind, v)
			}
		}
	}

	named := &fields.Schema{BoxFormat: fields.XYWH, Fields: []fields.Field{
		{Kind: fields.Image, Key: "png"},
		{Kind: fields.Boxes, Key: "json:annotations.boxes", Max: 2},
		{Kind: fields.Classes, Key: "classes.txt", Max: 2},
		{Kind: fields.Tokens, Key: "tok.json", Max: 3},
		{Kind: fields.Tensor, Key: "feat.bin", DType: fields.Uint16, Shape: []int{2}},
		{Kind: fields.Labels, Key: ".labels", Classes: 3},
	}}
	w, err = wdsFieldsShard(t, named,
		"x.jpg", "not the image", "x.png", "\x89PNG image",
		"x.json", `{"label": 1, "annotations": {"n": {"boxes": [[9,9,9]]}, "boxes": [[0, 0, 2, 2]]}, "boxes": "elsewhere"}`,
		"x.classes.txt", "3\n", "x.tok.json", "[10, 20]", "x.feat.bin", "\x01\x02\x03\x04", "x.labels", "0, 2 1")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Read(0, &rec); err != nil || len(w.Corrupt()) != 0 {
		t.Fatalf("%v, corrupt %v", err, w.Corrupt())
	}
	if f := rec.Fields; string(rec.Enc) != "\x89PNG image" || !slices.Equal(f[1].Floats, []float32{0, 0, 2, 2}) || !slices.Equal(f[2].Ints, []int64{3}) ||
		!slices.Equal(f[3].Ints, []int64{10, 20}) || string(f[4].Bytes) != "\x01\x02\x03\x04" || !slices.Equal(f[5].Ints, []int64{0, 2, 1}) {
		t.Fatalf("named keys: enc %q fields %+v", rec.Enc, f)
	}

	jl := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Label, Key: "json:cat"}}}
	w, err = wdsFieldsShard(t, jl, "z.png", "img", "z.cls", "1", "z.json", `{"label": 2, "cat": 3}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Read(0, &rec); err != nil || rec.Label != 3 {
		t.Fatalf("label=json:cat: %v, label %d (corrupt %v)", err, rec.Label, w.Corrupt())
	}
	v2 := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Tensor, DType: fields.Uint8, Shape: []int{3}}}}
	w, err = wdsFieldsShard(t, v2, "y.png", "img", "y.npy", string(npyOf(2, "|u1", "False", "(3,)", []byte{7, 8, 9})))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Read(0, &rec); err != nil || !bytes.Equal(rec.Fields[1].Bytes, []byte{7, 8, 9}) {
		t.Fatalf("an .npy of version 2: %v, %+v (corrupt %v)", err, rec.Fields, w.Corrupt())
	}
}

// TestWebDatasetFieldErrors: a member a field needs missing, or one whose
// value does not parse or fit its field, makes its sample corrupt when the
// shard is indexed — a *RecordError naming the shard and the member,
// wrapping ErrFormat (not what the field's key says) or fields.ErrValue
// (not what the field holds) — which Read returns too, while the sample
// beside it reads.
func TestWebDatasetFieldErrors(t *testing.T) {
	// with replaces member name's data in a good sample, or drops it.
	with := func(name, data string) []string {
		m := goodSample("b")
		for i := 0; i < len(m); i += 2 {
			if m[i] == name {
				if data == "" {
					return append(m[:i:i], m[i+2:]...)
				}
				m[i+1] = data
			}
		}
		return m
	}
	floats := string(float32LE(1, 2, 3, 4, 5, 6))
	for _, c := range []struct {
		name    string
		members []string
		want    error
		says    string
	}{
		{"no mask", with("b.mask.png", ""), ErrFormat, `"b" has no .mask.png member (for mask)`},
		{"no json", with("b.json", ""), ErrFormat, `"b" has no .json member (for boxes=json:boxes)`},
		{"no npy", with("b.npy", ""), ErrFormat, `no .npy member (for tensor)`},
		{"no key", with("b.json", `{"boxes": [], "classes": [], "labels": [], "tok": []}`), ErrFormat, `b.json: tokens: bad format: no "tokens"`},
		{"a box of 3 numbers", with("b.json", `{"boxes": [[1, 2, 3]], "classes": [1], "labels": [], "tokens": []}`), ErrFormat, "has 3 numbers, not 4"},
		{"a box of 5 numbers", with("b.json", `{"boxes": [[1, 2, 3, 4, 5]], "classes": [1], "labels": [], "tokens": []}`), ErrFormat, "more than 4 numbers"},
		{"a flat list of boxes", with("b.json", `{"boxes": [1, 2, 3, 4], "classes": [1], "labels": [], "tokens": []}`), ErrFormat, `"1" is not a list`},
		{"boxes not a list", with("b.json", `{"boxes": {"x": 1}, "classes": [], "labels": [], "tokens": []}`), ErrFormat, "is not a list"},
		{"a box corner not a number", with("b.json", `{"boxes": [[1, 2, "3", 4]], "classes": [1], "labels": [], "tokens": []}`), ErrFormat, "is not a number"},
		{"more boxes than max", with("b.json", `{"boxes": [[0,0,1,1],[0,0,1,1],[0,0,1,1],[0,0,1,1],[0,0,1,1]], "classes": [1,1,1,1,1], "labels": [], "tokens": []}`), fields.ErrValue, "more than max_boxes=4 boxes"},
		{"a class short", with("b.json", `{"boxes": [[0,0,1,1],[0,0,1,1]], "classes": [1], "labels": [], "tokens": []}`), fields.ErrValue, "2 boxes but 1 classes"},
		{"a label past the classes", with("b.json", `{"boxes": [], "classes": [], "labels": [5], "tokens": []}`), fields.ErrValue, "label 5, not in 0..4"},
		{"a token not an integer", with("b.json", `{"boxes": [], "classes": [], "labels": [], "tokens": [1.5]}`), ErrFormat, `"1.5" is not an integer`},
		{"a token past int32", with("b.json", `{"boxes": [], "classes": [], "labels": [], "tokens": [4294967296]}`), fields.ErrValue, "not an int32"},
		{"too many tokens", with("b.json", `{"boxes": [], "classes": [], "labels": [], "tokens": [1,2,3,4,5,6,7,8,9]}`), fields.ErrValue, "more than max_tokens=8 tokens"},
		{"json cut short", with("b.json", `{"boxes": [[1, 2, 3, 4]], "classes": [1`), ErrFormat, "b.json: unexpected EOF"},
		{"json cut short after the label", append(with("b.json", ""), "b.json", `{"boxes": [[1, 2, 3, 4]], "classes": [1`), ErrFormat, "b.json does not parse as JSON"},
		{"npy of float64", with("b.npy", string(npyOf(1, "<f8", "False", "(2, 3)", make([]byte, 48)))), fields.ErrValue, `.npy dtype "<f8", want "<f4" (float32)`},
		{"npy big-endian", with("b.npy", string(npyOf(1, ">f4", "False", "(2, 3)", []byte(floats)))), fields.ErrValue, `dtype ">f4"`},
		{"npy of another shape", with("b.npy", string(npyOf(1, "<f4", "False", "(3, 2)", []byte(floats)))), fields.ErrValue, ".npy shape (3, 2), want [2 3]"},
		{"npy of fewer dimensions", with("b.npy", string(npyOf(1, "<f4", "False", "(6,)", []byte(floats)))), fields.ErrValue, ".npy shape (6,), want [2 3]"},
		{"npy in Fortran order", with("b.npy", string(npyOf(1, "<f4", "True", "(2, 3)", []byte(floats)))), fields.ErrValue, "Fortran order"},
		{"npy data short", with("b.npy", string(npyOf(1, "<f4", "False", "(2, 3)", []byte(floats[:20])))), fields.ErrValue, ".npy data of 20 bytes, want 24"},
		{"not npy", with("b.npy", floats), ErrFormat, "not an .npy file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := wdsFieldsShard(t, detectionSchema(), append(goodSample("a"), c.members...)...)
			if err != nil {
				t.Fatal(err)
			}
			bad := w.Corrupt()
			if len(bad) != 1 || bad[0].Index != 1 || !errors.Is(bad[0], c.want) || !strings.Contains(bad[0].Error(), c.says) || !strings.Contains(bad[0].Error(), "s.tar") {
				t.Fatalf("corrupt %v; want sample 1 wrapping %v saying %q", bad, c.want, c.says)
			}
			var rec Record
			if err := w.Read(1, &rec); err == nil || err.Error() != bad[0].Error() {
				t.Errorf("reading it: %v", err)
			}
			if err := w.Read(0, &rec); err != nil {
				t.Errorf("the good sample: %v", err)
			}
		})
	}
}

// TestFieldKeysRefused: a source refuses, at open, a schema field it
// cannot read, saying why and what to do.
func TestFieldKeysRefused(t *testing.T) {
	with := func(f fields.Field, normalized bool, format fields.BoxFormat) *fields.Schema {
		return &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, f}, Normalized: normalized, BoxFormat: format}
	}
	boxes := fields.Field{Kind: fields.Boxes, Max: 4}
	tf := filepath.Join(t.TempDir(), "x.tfrecord")
	os.WriteFile(tf, tfLabelled(1), 0o644)
	for _, c := range []struct {
		name string
		open func() error
		says string
	}{
		{"a webdataset mask in JSON", func() error {
			_, err := wdsFieldsShard(t, with(fields.Field{Kind: fields.Mask, Key: "json:mask"}, false, 0), goodSample("a")...)
			return err
		}, "a mask is a member's bytes"},
		{"a webdataset tensor in JSON", func() error {
			_, err := wdsFieldsShard(t, with(fields.Field{Kind: fields.Tensor, Key: "json:t", DType: fields.Uint8, Shape: []int{1}}, false, 0), goodSample("a")...)
			return err
		}, "a tensor is a member's bytes"},
		{"a webdataset mask that is an image's extension", func() error {
			_, err := wdsFieldsShard(t, with(fields.Field{Kind: fields.Mask, Key: "png"}, false, 0), goodSample("a")...)
			return err
		}, ".png members are the images"},
		{"a webdataset json key without a name", func() error {
			_, err := wdsFieldsShard(t, with(fields.Field{Kind: fields.Tokens, Key: "json:", Max: 2}, false, 0), goodSample("a")...)
			return err
		}, "no key after json:"},
		{"a webdataset label in a nested JSON key", func() error {
			_, err := wdsFieldsShard(t, with(fields.Field{Kind: fields.Label, Key: "json:a.label"}, false, 0), goodSample("a")...)
			return err
		}, "a label is a top-level key"},
		{"tfrecord OD API boxes not normalized", func() error {
			_, err := OpenTFRecord(t.Context(), tf, WithIndexDir(t.TempDir()), WithFields(with(boxes, false, fields.XYXY)))
			return err
		}, "set normalized=true"},
		{"tfrecord OD API boxes as xywh", func() error {
			_, err := OpenTFRecord(t.Context(), tf, WithIndexDir(t.TempDir()), WithFields(with(boxes, true, fields.XYWH)))
			return err
		}, "name a float feature of 4 numbers a box in your format"},
		{"synthetic given a key", func() error {
			_, err := NewSynthetic(10, Train, 0, WithFields(with(fields.Field{Kind: fields.Mask, Key: "mask.png"}, false, 0)))
			return err
		}, "leave the key out"},
		{"synthetic with one class", func() error {
			_, err := NewSynthetic(10, Train, 0, WithFields(with(fields.Field{Kind: fields.Labels, Classes: 1}, false, 0)))
			return err
		}, "want at least 2"},
		{"synthetic with more classes than a uint8 mask holds", func() error {
			s := with(fields.Field{Kind: fields.Labels, Classes: 300}, false, 0)
			s.Fields = append(s.Fields, fields.Field{Kind: fields.Mask})
			_, err := NewSynthetic(10, Train, 0, WithFields(s))
			return err
		}, "a uint8 mask holds classes below 256"},
	} {
		if err := c.open(); !errors.Is(err, fields.ErrSchema) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want fields.ErrSchema saying %q", c.name, err, c.says)
		}
	}
	if _, err := OpenTFRecord(t.Context(), tf, WithIndexDir(t.TempDir()), WithFields(with(fields.Field{Kind: fields.Boxes, Key: "b", Max: 1}, false, fields.XYWH))); errors.Is(err, fields.ErrSchema) {
		t.Errorf("xywh boxes of a named feature refused: %v", err)
	}
}

// TestWebDatasetFieldsWithoutLabel: without a label field, a sample
// without a label is not corrupt.
func TestWebDatasetFieldsWithoutLabel(t *testing.T) {
	s := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Mask}}}
	w, err := wdsFieldsShard(t, s, "a.jpg", "img", "a.mask.png", "mask")
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := w.Read(0, &rec); err != nil || len(w.Corrupt()) != 0 || string(rec.Fields[1].Bytes) != "mask" || rec.Label != 0 {
		t.Fatalf("%v, corrupt %v, fields %+v", err, w.Corrupt(), rec.Fields)
	}
	s.Fields = append(s.Fields, fields.Field{Kind: fields.Label})
	if w, err = wdsFieldsShard(t, s, "a.jpg", "img", "a.mask.png", "mask"); err != nil {
		t.Fatal(err)
	}
	if c := w.Corrupt(); len(c) != 1 || !strings.Contains(c[0].Error(), `no .cls member and no "label" in a .json member`) {
		t.Fatalf("with a label field: corrupt %v", c)
	}
}

// featureOf is a tf.train.Example Feature: a bytes list of b, a float
// list of f (packed unless unpacked) or an int64 list of i.
type featureOf struct {
	b        [][]byte
	f        []float32
	i        []int64
	unpacked bool
}

func (x featureOf) encode() []byte {
	tagged := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	var list []byte
	switch {
	case x.b != nil:
		for _, b := range x.b {
			list = append(list, tagged(1, b)...)
		}
		return tagged(1, list)
	case x.f != nil:
		var packed []byte
		for _, f := range x.f {
			if x.unpacked {
				list = protowire.AppendFixed32(protowire.AppendTag(list, 1, protowire.Fixed32Type), math.Float32bits(f))
			} else {
				packed = protowire.AppendFixed32(packed, math.Float32bits(f))
			}
		}
		if !x.unpacked {
			list = tagged(1, packed)
		}
		return tagged(2, list)
	default:
		var packed []byte
		for _, i := range x.i {
			packed = protowire.AppendVarint(packed, uint64(i))
		}
		return tagged(3, tagged(1, packed))
	}
}

// tfExampleOf is a serialised tf.train.Example of the features.
func tfExampleOf(feats map[string]featureOf) []byte {
	tagged := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	var all []byte
	keys := make([]string, 0, len(feats))
	for k := range feats {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		all = append(all, tagged(1, append(tagged(1, []byte(k)), tagged(2, feats[k].encode())...))...)
	}
	return tagged(1, all)
}

// odExample is a record as the TF Object Detection API writes it, with a
// segmentation mask, tokens and a tensor, for sample i.
func odExample(i int) map[string]featureOf {
	return map[string]featureOf{
		"image/encoded":                    {b: [][]byte{[]byte(fmt.Sprint("jpeg ", i))}},
		"image/class/label":                {i: []int64{int64(1 + i%3)}},
		"image/segmentation/class/encoded": {b: [][]byte{[]byte(fmt.Sprint("png ", i))}},
		"image/object/bbox/xmin":           {f: []float32{0.1, 0.5}},
		"image/object/bbox/ymin":           {f: []float32{0.2, 0.6}, unpacked: true},
		"image/object/bbox/xmax":           {f: []float32{0.3, 0.7}},
		"image/object/bbox/ymax":           {f: []float32{0.4, 0.8}},
		"image/object/class/label":         {i: []int64{3, int64(i)}},
		"tokens":                           {i: []int64{101, int64(i), 102}},
		"tensor":                           {f: []float32{1, 2, 3, 4, 5, float32(i)}},
	}
}

// tfFieldsFile writes records (a TFRecord file) and opens it with schema
// and label_offset 1.
func tfFieldsFile(t *testing.T, schema *fields.Schema, records ...map[string]featureOf) *TFRecord {
	t.Helper()
	dir := t.TempDir()
	var data []byte
	for _, r := range records {
		data = append(data, tfFrame(tfExampleOf(r))...)
	}
	path := filepath.Join(dir, "od.tfrecord")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := OpenTFRecord(t.Context(), path, WithIndexDir(dir), WithLabelOffset(1), WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// TestTFRecordFields: the OD API's features read as fields — the four box
// lists interleaved left, top, right, bottom, the mask's bytes, the
// objects' classes, tokens, a float list made a tensor's bytes — and the
// image and label as without fields; then features of other types and
// names.
func TestTFRecordFields(t *testing.T) {
	s := detectionSchema()
	s.Normalized = true
	s.Fields[5].Key = "image/class/label" // labels, read as the label's feature, label_offset applied
	src := tfFieldsFile(t, s, odExample(0), odExample(1))
	if len(src.Corrupt()) != 0 {
		t.Fatalf("corrupt %v", src.Corrupt())
	}
	var rec Record
	for i := range 2 {
		if err := src.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		f := rec.Fields
		if string(rec.Enc) != fmt.Sprint("jpeg ", i) || rec.Label != i || string(f[1].Bytes) != fmt.Sprint("png ", i) ||
			!slices.Equal(f[2].Floats, []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}) || !slices.Equal(f[3].Ints, []int64{3, int64(i)}) ||
			!slices.Equal(f[5].Ints, []int64{int64(i)}) || !slices.Equal(f[6].Ints, []int64{101, int64(i), 102}) ||
			!bytes.Equal(f[7].Bytes, float32LE(1, 2, 3, 4, 5, float32(i))) {
			t.Fatalf("record %d: enc %q label %d fields %+v", i, rec.Enc, rec.Label, f)
		}
	}

	other := &fields.Schema{BoxFormat: fields.CXCYWH, Fields: []fields.Field{
		{Kind: fields.Image},
		{Kind: fields.Boxes, Key: "boxes", Max: 2},
		{Kind: fields.Tensor, Key: "raw", DType: fields.Uint16, Shape: []int{2}},
		{Kind: fields.Mask, Key: "seg", DType: fields.Uint16},
		{Kind: fields.Labels, Key: "tags", Classes: 4},
	}}
	r := map[string]featureOf{
		"image/encoded": {b: [][]byte{[]byte("jpeg")}},
		"boxes":         {i: []int64{5, 5, 2, 2}},
		"raw":           {b: [][]byte{{1, 0, 2, 0}}},
		"seg":           {b: [][]byte{[]byte("png")}},
		"tags":          {i: []int64{1, 4}},
	}
	src = tfFieldsFile(t, other, r)
	if err := src.Read(0, &rec); err != nil || len(src.Corrupt()) != 0 {
		t.Fatalf("%v, corrupt %v", err, src.Corrupt())
	}
	if f := rec.Fields; !slices.Equal(f[1].Floats, []float32{5, 5, 2, 2}) || !bytes.Equal(f[2].Bytes, []byte{1, 0, 2, 0}) ||
		string(f[3].Bytes) != "png" || !slices.Equal(f[4].Ints, []int64{0, 3}) || rec.Label != 0 {
		t.Fatalf("named features: %+v, label %d", f, rec.Label)
	}
	ints := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Tensor, Key: "t", DType: fields.Int32, Shape: []int{3}}}}
	src = tfFieldsFile(t, ints, map[string]featureOf{"image/encoded": {b: [][]byte{[]byte("j")}}, "t": {i: []int64{-1, 0, 70000}}})
	if err := src.Read(0, &rec); err != nil || !bytes.Equal(rec.Fields[1].Bytes, []byte{255, 255, 255, 255, 0, 0, 0, 0, 0x70, 0x11, 1, 0}) {
		t.Fatalf("an int64 list as an int32 tensor: %v, %v", err, rec.Fields)
	}
}

// TestTFRecordFieldErrors: a feature a field needs missing, of the wrong
// type, or holding what does not fit the field makes its record corrupt
// when the file opens (listed by Corrupt, returned by Read), naming the
// file and the feature.
func TestTFRecordFieldErrors(t *testing.T) {
	s := detectionSchema()
	s.Normalized = true
	s.Fields = slices.DeleteFunc(s.Fields, func(f fields.Field) bool { return f.Kind == fields.Labels })
	for _, c := range []struct {
		name   string
		change func(map[string]featureOf)
		want   error
		says   string
	}{
		{"no ymax", func(r map[string]featureOf) { delete(r, "image/object/bbox/ymax") }, ErrFormat, `boxes: bad format: no feature "image/object/bbox/ymax"`},
		{"no mask", func(r map[string]featureOf) { delete(r, "image/segmentation/class/encoded") }, ErrFormat, `no feature "image/segmentation/class/encoded"`},
		{"a short ymin", func(r map[string]featureOf) { r["image/object/bbox/ymin"] = featureOf{f: []float32{0.2}} }, ErrFormat, `2 values in "image/object/bbox/xmin" but 1 in "image/object/bbox/ymin"`},
		{"boxes as ints", func(r map[string]featureOf) { r["image/object/bbox/xmax"] = featureOf{i: []int64{1, 2}} }, ErrFormat, `"image/object/bbox/xmax" is an int64 list, not a float list`},
		{"more boxes than max", func(r map[string]featureOf) {
			for _, k := range tfBoxKeys {
				r[k] = featureOf{f: make([]float32, 5)}
			}
		}, fields.ErrValue, "5 boxes, more than max_boxes=4"},
		{"a class short", func(r map[string]featureOf) { r["image/object/class/label"] = featureOf{i: []int64{1}} }, fields.ErrValue, "2 boxes but 1 classes"},
		{"too many tokens", func(r map[string]featureOf) { r["tokens"] = featureOf{i: make([]int64, 9)} }, fields.ErrValue, `feature "tokens" holds 9 values: field value: more than max_tokens=8 tokens`},
		{"tokens as floats", func(r map[string]featureOf) { r["tokens"] = featureOf{f: []float32{1}} }, ErrFormat, `tokens: bad format: feature "tokens" is a float list, not an int64 list`},
		{"a tensor of 5 values", func(r map[string]featureOf) { r["tensor"] = featureOf{f: []float32{1, 2, 3, 4, 5}} }, fields.ErrValue, `feature "tensor" holds 5 values, want 6 (float32 [2 3])`},
		{"a tensor of too many bytes", func(r map[string]featureOf) { r["tensor"] = featureOf{b: [][]byte{make([]byte, 25)}} }, fields.ErrValue, "holds 25 bytes, want 24"},
		{"an empty mask list", func(r map[string]featureOf) { r["image/segmentation/class/encoded"] = featureOf{b: [][]byte{}} }, ErrFormat, "holds no bytes"},
		{"a mask as floats", func(r map[string]featureOf) { r["image/segmentation/class/encoded"] = featureOf{f: []float32{1}} }, ErrFormat, "is a float list, not a bytes list"},
		{"a box corner NaN", func(r map[string]featureOf) {
			r["image/object/bbox/xmin"] = featureOf{f: []float32{float32(math.NaN()), 0}}
		}, fields.ErrValue, "a box corner is NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := odExample(1)
			c.change(bad)
			src := tfFieldsFile(t, s, odExample(0), bad)
			errs := src.Corrupt()
			if len(errs) != 1 || errs[0].Index != 1 || !errors.Is(errs[0], c.want) || !strings.Contains(errs[0].Error(), c.says) || !strings.Contains(errs[0].Error(), "od.tfrecord") {
				t.Fatalf("corrupt %v; want record 1 wrapping %v saying %q", errs, c.want, c.says)
			}
			var rec Record
			if err := src.Read(1, &rec); err == nil || err.Error() != errs[0].Error() {
				t.Errorf("reading it: %v", err)
			}
			if err := src.Read(0, &rec); err != nil {
				t.Errorf("the good record: %v", err)
			}
		})
	}
	// A tensor value its dtype cannot hold.
	u8 := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Tensor, Key: "t", DType: fields.Uint8, Shape: []int{2}}}}
	src := tfFieldsFile(t, u8, map[string]featureOf{"image/encoded": {b: [][]byte{[]byte("j")}}, "t": {f: []float32{1, 2.5}}})
	if c := src.Corrupt(); len(c) != 1 || !errors.Is(c[0], fields.ErrValue) || !strings.Contains(c[0].Error(), "tensor value 2.5 is not a uint8") {
		t.Errorf("2.5 as a uint8: %v", c)
	}
}

// TestSyntheticFields: the fields are the same for an index from two
// opens; the boxes are exactly the mask's rectangles, apart, with their
// classes, drawn into the image outside of which it is the image without
// fields; labels and tokens follow them; a uint16 mask and other box
// formats hold the same.
func TestSyntheticFields(t *testing.T) {
	open := func(s *fields.Schema) *Synthetic {
		src, err := NewSynthetic(200, Train, 3, WithFields(s))
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	s := detectionSchema()
	s.Fields[7].DType = fields.Uint16
	a, b := open(s), open(s)
	plain, _ := NewSynthetic(200, Train, 3)
	var ra, rb, rp Record
	counts := map[int]int{}
	for i := range 200 {
		a.Read(i, &ra)
		b.Read(i, &rb)
		plain.Read(i, &rp)
		if !bytes.Equal(ra.Pix, rb.Pix) || ra.Label != rb.Label || len(ra.Fields) != len(rb.Fields) {
			t.Fatalf("sample %d differs between two opens", i)
		}
		for k := range ra.Fields {
			x, y := ra.Fields[k], rb.Fields[k]
			if !bytes.Equal(x.Bytes, y.Bytes) || !slices.Equal(x.Ints, y.Ints) || !slices.Equal(x.Floats, y.Floats) {
				t.Fatalf("sample %d: %s differs between two opens", i, s.Fields[k].Kind)
			}
		}
		f := ra.Fields
		mask, boxes, classes := f[1].Bytes, f[2].Floats, f[3].Ints
		n := len(boxes) / 4
		counts[n]++
		if len(mask) != 32*32 || n < 1 || n > 3 || len(classes) != n || ra.Label != rp.Label {
			t.Fatalf("sample %d: mask %d bytes, %d boxes, classes %v", i, len(mask), n, classes)
		}
		inBox := make([]int, 32*32) // 1 + the box each pixel is in
		for j := range n {
			x0, y0, x1, y1 := int(boxes[4*j]), int(boxes[4*j+1]), int(boxes[4*j+2]), int(boxes[4*j+3])
			if float32(x0) != boxes[4*j] || x1-x0 < 6 || x1-x0 > 14 || y1-y0 < 6 || y1-y0 > 14 || x0 < 0 || y0 < 0 || x1 > 32 || y1 > 32 ||
				classes[j] < 1 || classes[j] > 4 {
				t.Fatalf("sample %d: box %v class %d", i, boxes[4*j:4*j+4], classes[j])
			}
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					if inBox[y*32+x] != 0 {
						t.Fatalf("sample %d: boxes %d and %d overlap", i, inBox[y*32+x]-1, j)
					}
					inBox[y*32+x] = 1 + j
				}
			}
		}
		var want []int64
		for p, in := range inBox {
			c := byte(0)
			if in > 0 {
				c = byte(classes[in-1])
				if !slices.Contains(want, classes[in-1]) {
					want = append(want, classes[in-1])
				}
			}
			if mask[p] != c {
				t.Fatalf("sample %d: mask pixel (%d, %d) is %d, want %d", i, p%32, p/32, mask[p], c)
			}
			for ch := range 3 {
				q := ch*32*32 + p
				if in == 0 && ra.Pix[q] != rp.Pix[q] {
					t.Fatalf("sample %d: pixel (%d, %d) outside the boxes differs from the image without fields", i, p%32, p/32)
				}
			}
		}
		slices.Sort(want)
		tokens := []int64{int64(1 + ra.Label)}
		for _, c := range classes {
			tokens = append(tokens, 10+c)
		}
		if !slices.Equal(f[5].Ints, want) || !slices.Equal(f[6].Ints, tokens) || len(f[7].Bytes) != 12 {
			t.Fatalf("sample %d: labels %v (want %v), tokens %v (want %v), tensor %d bytes", i, f[5].Ints, want, f[6].Ints, tokens, len(f[7].Bytes))
		}
		if i < 3 {
			t.Logf("sample %d: label %d boxes %v classes %v tokens %v", i, ra.Label, boxes, classes, f[6].Ints)
		}
	}
	if counts[1] == 0 || counts[2] == 0 || counts[3] == 0 {
		t.Errorf("boxes per sample: %v, want 1, 2 and 3 each", counts)
	}

	// The same rectangles in another mask type and box format.
	cx := &fields.Schema{BoxFormat: fields.CXCYWH, Normalized: true, Fields: []fields.Field{
		{Kind: fields.Image}, {Kind: fields.Mask, DType: fields.Uint16}, {Kind: fields.Boxes, Max: 4}, {Kind: fields.Labels, Classes: 5},
	}}
	c := open(cx)
	for i := range 20 {
		a.Read(i, &ra)
		c.Read(i, &rb)
		for j := 0; j < len(ra.Fields[2].Floats); j += 4 {
			x := ra.Fields[2].Floats[j : j+4]
			y := rb.Fields[2].Floats[j : j+4]
			if y[0]*32 != (x[0]+x[2])/2 || y[1]*32 != (x[1]+x[3])/2 || y[2]*32 != x[2]-x[0] || y[3]*32 != x[3]-x[1] {
				t.Fatalf("sample %d: cxcywh normalized %v, xyxy pixels %v", i, y, x)
			}
		}
		for p := range 32 * 32 {
			if binary.LittleEndian.Uint16(rb.Fields[1].Bytes[2*p:]) != uint16(ra.Fields[1].Bytes[p]) {
				t.Fatalf("sample %d: the uint16 mask differs from the uint8 one at %d", i, p)
			}
		}
	}
}

// TestFieldsReadWithoutAllocating: once a record's memory has grown, Read
// with fields allocates no more than Read of the same data without them
// (the synthetic source nothing; the others what their Record.Path
// takes), for each of the three sources.
func TestFieldsReadWithoutAllocating(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "s.tar")
	os.WriteFile(shard, tarOf(append(goodSample("a"), goodSample("b")...)...), 0o644)
	tf := filepath.Join(dir, "od.tfrecord")
	os.WriteFile(tf, append(tfFrame(tfExampleOf(odExample(0))), tfFrame(tfExampleOf(odExample(1)))...), 0o644)
	s := detectionSchema()
	s.Normalized = true
	for _, c := range []struct {
		name string
		open func(opts ...Option) (Source, error)
	}{
		{"webdataset", func(opts ...Option) (Source, error) {
			return OpenWebDataset(t.Context(), shard, append(opts, WithIndexDir(dir))...)
		}},
		{"tfrecord", func(opts ...Option) (Source, error) {
			return OpenTFRecord(t.Context(), tf, append(opts, WithIndexDir(dir), WithLabelOffset(1))...)
		}},
		{"synthetic", func(opts ...Option) (Source, error) { return NewSynthetic(100, Train, 0, opts...) }},
	} {
		allocs := func(opts ...Option) float64 {
			src, err := c.open(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var rec Record
			i := 0
			read := func() {
				if err := src.Read(i%2, &rec); err != nil {
					t.Fatal(err)
				}
				i++
			}
			read()
			read()
			return testing.AllocsPerRun(100, read)
		}
		plain, with := allocs(), allocs(WithFields(s))
		if with != plain || (c.name == "synthetic" && with != 0) {
			t.Errorf("%s: %v allocations a Read with fields, %v without", c.name, with, plain)
		}
	}
}

// TestDefaultFieldsReadAsBefore: the real WebDataset shard and TFRecord
// file read with the default schema (an image and a label) give the same
// samples as without a schema, and two empty values.
func TestDefaultFieldsReadAsBefore(t *testing.T) {
	shard := shareddata.Path(t, "webdataset/sample.tgz")
	tfFile := filepath.Join(shareddata.Path(t, "tfrecord"), "validation-00000-of-00001")
	dir := t.TempDir()
	w0, err := OpenWebDataset(t.Context(), shard, WithIndexDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close()
	w1, err := OpenWebDataset(t.Context(), shard, WithIndexDir(dir), WithFields(fields.Default()))
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	t0, err := OpenTFRecord(t.Context(), tfFile, WithIndexDir(dir), WithLabelOffset(1))
	if err != nil {
		t.Fatal(err)
	}
	defer t0.Close()
	t1, err := OpenTFRecord(t.Context(), tfFile, WithIndexDir(dir), WithLabelOffset(1), WithFields(fields.Default()))
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	for _, p := range [][2]Source{{w0, w1}, {t0, t1}} {
		if p[0].Len() != p[1].Len() || len(p[0].Info().Classes) != len(p[1].Info().Classes) {
			t.Fatalf("%s: %d and %d samples", p[0].Info().Name, p[0].Len(), p[1].Len())
		}
		var a, b Record
		for i := range p[0].Len() {
			if err := p[0].Read(i, &a); err != nil {
				t.Fatal(err)
			}
			if err := p[1].Read(i, &b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Enc, b.Enc) || a.Label != b.Label || a.Path != b.Path || a.Fields != nil || len(b.Fields) != 2 ||
				len(b.Fields[0].Bytes)+len(b.Fields[1].Bytes)+len(b.Fields[1].Ints) != 0 {
				t.Fatalf("%s sample %d: %q label %d, with the default schema %q label %d fields %+v", p[0].Info().Name, i, a.Path, a.Label, b.Path, b.Label, b.Fields)
			}
		}
	}
}

// TestJSONPath: the scanner finds keys past values of every JSON type,
// nested keys, and reports a missing one as missing.
func TestJSONPath(t *testing.T) {
	doc := []byte(` { "s": "a \"}] string", "n": -1.5e3, "t": true, "z": null, "o": {"a": [1, {"b": 2}], "k": {"x": [3]}}, "l": [[1], []] } `)
	for path, want := range map[string]string{"s": `"a \"}] string"`, "n": "-1.5e3", "z": "null", "o.k.x": "[3]", "l": "[[1], []]", "o.a": `[1, {"b": 2}]`} {
		if v, ok, err := jsonPath(doc, path); !ok || err != nil || string(v) != want {
			t.Errorf("%s: %q %v %v, want %s", path, v, ok, err, want)
		}
	}
	for _, path := range []string{"x", "o.b", "o.k.y"} {
		if _, ok, err := jsonPath(doc, path); ok || err != nil {
			t.Errorf("%s: found (%v, %v)", path, ok, err)
		}
	}
	if _, _, err := jsonPath(doc, "s.x"); err == nil {
		t.Error("a key within a string: no error")
	}
	if _, _, err := jsonPath([]byte(`{"a": [1, 2`), "b"); err == nil {
		t.Error("a document cut short: no error")
	}
}

// fieldsFuzzRead reads every record of src with fields as checkSkipAll
// does, and checks each value read against its field.
func fieldsFuzzRead(t *testing.T, src interface {
	Source
	Checker
}, s *fields.Schema, size int64) {
	t.Helper()
	checkSkipAll(t, src, size)
	var rec Record
	for i := range src.Len() {
		if src.Read(i, &rec) != nil {
			continue
		}
		if len(rec.Fields) != len(s.Fields) {
			t.Fatalf("Read(%d): %d values for %d fields", i, len(rec.Fields), len(s.Fields))
		}
		for k := range s.Fields {
			f, v := &s.Fields[k], &rec.Fields[k]
			if err := checkValue(f, v); err != nil {
				t.Fatalf("Read(%d): %s: %v", i, f.Kind, err)
			}
			if f.Kind == fields.Tensor && len(v.Bytes) != tensorBytes(f) {
				t.Fatalf("Read(%d): a tensor of %d bytes", i, len(v.Bytes))
			}
		}
	}
}

// FuzzWebDatasetFields opens a fuzzed shard with fields of every kind.
func FuzzWebDatasetFields(f *testing.F) {
	good := tarOf(append(goodSample("a"), goodSample("b")...)...)
	f.Add(good)
	f.Add(good[:len(good)-1500])
	f.Add(tarOf("x.jpg", "i", "x.json", `{"boxes": [[1,2,3]], "classes": [1e400], "labels": [-1], "tokens": [[]]}`, "x.cls", "1", "x.mask.png", "m",
		"x.npy", string(npyOf(3, "<f4", "False", "(2, 3L)", make([]byte, 24)))))
	f.Add(tarOf("y.jpg", "i", "y.cls", "1", "y.json", `{"boxes": [], "classes": [], "labels": [], "tokens": "\"\\"}`, "y.mask.png", "", "y.npy", "\x93NUMPY\x01\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "s.tar")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := detectionSchema()
		checkBoundedAlloc(t, fuzzAllocLimit(len(b)), func() {
			w, err := OpenWebDataset(t.Context(), file, WithIndexDir(dir), WithFields(s))
			if err != nil {
				if sparse := errors.Is(err, ErrLabel) && strings.Contains(err.Error(), "distinct labels appear"); !errors.Is(err, ErrFormat) && !sparse {
					t.Fatalf("open: %v", err)
				}
				return
			}
			defer w.Close()
			size := int64(len(b))
			if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
				size = -1
			}
			fieldsFuzzRead(t, w, s, size)
		})
	})
}

// FuzzTFRecordFields opens a fuzzed TFRecord file with fields of every
// kind.
func FuzzTFRecordFields(f *testing.F) {
	f.Add(tfExampleOf(odExample(0)))
	bad := odExample(1)
	bad["tensor"] = featureOf{i: []int64{1, 2, 3, 4, 5, 1 << 40}}
	bad["image/object/bbox/ymin"] = featureOf{f: []float32{0.2, 0.3, 0.4}, unpacked: true}
	f.Add(tfExampleOf(bad))
	f.Fuzz(func(t *testing.T, example []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "f.tfrecord")
		data := append(tfFrame(tfExampleOf(odExample(2))), tfFrame(example)...)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s := detectionSchema()
		s.Normalized = true
		checkBoundedAlloc(t, fuzzAllocLimit(len(data)), func() {
			src, err := OpenTFRecord(t.Context(), file, WithIndexDir(dir), WithLabelOffset(1), WithFields(s))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer src.Close()
			if src.Len() != 2 {
				t.Fatalf("%d records", src.Len())
			}
			fieldsFuzzRead(t, src, s, int64(len(data)))
		})
	})
}

// TestRemoteWebDatasetFieldsIndexKept: a URL shard's stored index holds
// where each field's member is, under a key of the schema: a later open
// with the schema reads the members from it (a mask member's size edited
// in it is the size read), one without fields keeps an index of its own,
// and a shard with a sample whose value is bad (not stored) or that lacks
// members (stored) has them found again.
func TestRemoteWebDatasetFieldsIndexKept(t *testing.T) {
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	srv.Put(t, "data", "a.tar", tarOf(append(goodSample("0"), goodSample("1")...)...))
	badBox := goodSample("1")
	badBox[5] = `{"boxes": [[1, 2, 3]], "classes": [1], "labels": [], "tokens": []}`
	srv.Put(t, "data", "bad.tar", tarOf(append(append(goodSample("0"), badBox...), "2.jpg", "i", "2.cls", "1")...))
	cache, index := t.TempDir(), t.TempDir()
	rem := &Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey}),
		Cache: &remote.Cache{Dir: cache}}
	open := func(url string, opts ...Option) *WebDataset {
		t.Helper()
		w, err := OpenWebDataset(t.Context(), url, append(opts, WithRemote(rem), WithIndexDir(index))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	mask := func(w *WebDataset) string {
		t.Helper()
		var rec Record
		if err := w.Read(1, &rec); err != nil || len(w.Corrupt()) != 0 {
			t.Fatalf("sample 1: %v, corrupt %v", err, w.Corrupt())
		}
		return string(rec.Fields[1].Bytes)
	}
	if m := mask(open("s3://data/a.tar", WithFields(detectionSchema()))); m != "\x89PNG mask 1" {
		t.Fatalf("mask %q", m)
	}
	open("s3://data/a.tar")
	saved, _ := filepath.Glob(filepath.Join(index, "a.tar-*.wdsindex"))
	if len(saved) != 2 {
		t.Fatalf("index files %v, want one with fields and one without", saved)
	}
	edited := 0
	for _, f := range saved {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), `"m":[`) {
			continue
		}
		// The mask's member is the second of each sample's: cut it to 4 bytes.
		s := string(b)
		i := strings.LastIndex(s, `"m":[[-1,0],[`)
		j := i + len(`"m":[[-1,0],[`) + strings.Index(s[i+len(`"m":[[-1,0],[`):], "]")
		off, _, _ := strings.Cut(s[i+len(`"m":[[-1,0],[`):j], ",")
		if err := os.WriteFile(f, []byte(s[:i]+`"m":[[-1,0],[`+off+",4"+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		edited++
	}
	if edited != 1 {
		t.Fatalf("%d stored indexes with members", edited)
	}
	if m := mask(open("s3://data/a.tar", WithFields(detectionSchema()))); m != "\x89PNG" {
		t.Fatalf("from the stored index, edited: mask %q, want its first 4 bytes", m)
	}
	for range 2 {
		c := open("s3://data/bad.tar", WithFields(detectionSchema())).Corrupt()
		if len(c) != 2 || !strings.Contains(c[0].Error(), "has 3 numbers, not 4") || !strings.Contains(c[1].Error(), `"2" has no .json member`) {
			t.Fatalf("a box of 3 numbers, a sample without its members: corrupt %v", c)
		}
	}
}

// FuzzJSONScan: on a well-formed JSON object, the scanner finds every key
// (written without escapes or dots) as encoding/json does, and parses a
// list of integers or of boxes exactly when encoding/json does, to the
// same values; on any input it returns rather than panics.
func FuzzJSONScan(f *testing.F) {
	f.Add([]byte(`{"boxes": [[1, 2.5, -3e2, 4]], "classes": [1, -2, 9223372036854775807], "s": "x\"y", "n": {"a": [1, {"b": []}]}}`))
	f.Add([]byte(`{"a": [1.0, 2], "b": [[1,2,3]], "c": [[1,2,3,4,5]], "d": [[1e40, 0, 0, 0]], "e": [1e2]}`))
	f.Add([]byte(`{"a": [9223372036854775808], "b": [-9223372036854775808], "c": [-0], "\u0061": 1}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var m map[string]json.RawMessage
		valid := json.Unmarshal(doc, &m) == nil && m != nil
		for key, raw := range m {
			if strings.ContainsAny(key, `."\`) || !strings.Contains(string(doc), `"`+key+`"`) {
				continue
			}
			v, ok, err := jsonPath(doc, key)
			if !ok || err != nil {
				t.Fatalf("key %q: found %v, %v", key, ok, err)
			}
			// encoding/json keeps the last of keys given twice (or
			// once with escapes), the scanner the first.
			if strings.Count(string(doc), `"`+key+`"`) == 1 && !bytes.Contains(doc, []byte(`\`)) && !bytes.Equal(v, bytes.TrimSpace(raw)) {
				t.Fatalf("key %q: %s, encoding/json %s", key, v, raw)
			}
			var ints []int64
			got, err := appendJSONInts(nil, v, 1<<20)
			if want := json.Unmarshal(v, &ints); (err == nil) != (want == nil && ints != nil) || (err == nil && !slices.Equal(got, ints)) {
				t.Fatalf("key %q: ints %v, %v; encoding/json %v, %v", key, got, err, ints, want)
			}
			var boxes [][]float32
			fl, err := appendJSONBoxes(nil, v, 1<<20)
			want := json.Unmarshal(v, &boxes)
			ok = want == nil && boxes != nil
			var flat []float32
			for _, b := range boxes {
				ok = ok && len(b) == 4
				flat = append(flat, b...)
			}
			if (err == nil) != ok || (err == nil && !slices.Equal(fl, flat)) {
				t.Fatalf("key %q: boxes %v, %v; encoding/json %v, %v", key, fl, err, boxes, want)
			}
		}
		if !valid {
			jsonPath(doc, "a.b")
			appendJSONBoxes(nil, doc, 100)
			appendJSONInts(nil, doc, 100)
		}
	})
}

// FuzzNPYHeader: an .npy header is accepted only for the field's dtype
// and shape, and the data it points at lies within the file.
func FuzzNPYHeader(f *testing.F) {
	f.Add(npyOf(1, "<f4", "False", "(2, 3)", make([]byte, 24)))
	f.Add(npyOf(2, "<f4", "False", "(2,3L)", nil))
	f.Add(npyOf(3, "<f4", "True", "()", nil))
	f.Add([]byte("\x93NUMPY\x01\x00\xff\xff{'descr'"))
	f.Fuzz(func(t *testing.T, b []byte) {
		field := &fields.Field{Kind: fields.Tensor, DType: fields.Float32, Shape: []int{2, 3}}
		n, err := npyData(b, field)
		if err != nil {
			return
		}
		if n > len(b) || n < 10 {
			t.Fatalf("data at %d of %d bytes", n, len(b))
		}
		h := string(b[:n])
		if !strings.Contains(h, "<f4") || !strings.Contains(h, "False") {
			t.Fatalf("accepted %q", h)
		}
	})
}

// TestStreamedTFRecordFieldsChecked: TFRecord files streamed through a
// shard cache smaller than them keep their labels, read once, beside their
// index; a later open with fields does not take the labels stored by an
// open without (whose records were not checked for the fields), so a
// record whose boxes are bad is listed as corrupt all the same.
func TestStreamedTFRecordFieldsChecked(t *testing.T) {
	srv, set := plainServer(t)
	bad := odExample(1)
	bad["image/object/bbox/ymax"] = featureOf{f: []float32{0.4}}
	var size int64
	for k := range 3 {
		data := append(tfFrame(tfExampleOf(odExample(0))), tfFrame(tfExampleOf(bad))...)
		set(fmt.Sprintf("/f%d.tfrecord", k), data, time.Time{})
		size = int64(len(data))
	}
	index := t.TempDir()
	rem := &Remote{Store: remote.New(remote.Options{Concurrency: 1}), Cache: &remote.Cache{Dir: t.TempDir(), Limit: 2 * size}}
	defer rem.Store.Close()
	s := detectionSchema()
	s.Normalized = true
	open := func(opts ...Option) *TFRecord {
		t.Helper()
		src, err := OpenTFRecord(t.Context(), srv.URL+"/f{0..2}.tfrecord", append(opts, WithRemote(rem), WithIndexDir(index), WithLabelOffset(1))...)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if src.stream == nil {
			t.Fatal("3 files through a cache of 2 do not stream")
		}
		return src
	}
	for _, opts := range [][]Option{nil, {WithFields(s)}, nil, {WithFields(s)}} {
		c := open(opts...).Corrupt()
		if len(opts) == 0 && len(c) != 0 {
			t.Fatalf("without fields: corrupt %v", c)
		}
		if len(opts) > 0 && (len(c) != 3 || !strings.Contains(c[0].Error(), `2 values in "image/object/bbox/xmin" but 1 in "image/object/bbox/ymax"`)) {
			t.Fatalf("with fields: corrupt %v, want record 1 of each file", c)
		}
	}
	if labels, _ := filepath.Glob(filepath.Join(index, "*.labels")); len(labels) != 3 {
		t.Errorf("stored labels %v: want those of the open without fields only (a file with a corrupt record is read again)", labels)
	}
}
