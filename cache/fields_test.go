package cache

import (
	"errors"
	"reflect"
	"testing"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/transform"
)

// TestFieldsRoundTrip: a sample's mask, boxes and values come back from an
// entry as they went in, beside its image, and a sample without fields
// says so.
func TestFieldsRoundTrip(t *testing.T) {
	img := &transform.Image{Pix: []byte{1, 2, 3, 4, 5, 6}, C: 1, H: 2, W: 3}
	f := &transform.Fields{Mask: transform.Mask{Pix: []byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6}, H: 2, W: 3, Size: 2},
		Boxes: []transform.Box{{X0: 0.5, Y0: 1, X1: 2.25, Y1: 2, Class: 7}, {X1: 1, Y1: 1, Class: -1}}, HasBoxes: true}
	vals := []fields.Value{{}, {Ints: []int64{3, -4}}, {Bytes: []byte("tensor"), Floats: []float32{1.5}}}
	w := NewWriter(nil, 2)
	w.SampleFields(9, img, 42, f, vals)
	w.Sample(8, img, 43)
	raw := w.Bytes()
	s := &Shard{raw: raw}
	if err := s.parse(); err != nil {
		t.Fatal(err)
	}
	got := s.Sample(0, 100)
	if got.Label != 9 || got.State != 42 || !reflect.DeepEqual(got.Img.Pix, img.Pix) {
		t.Fatalf("sample %+v", got)
	}
	var gf transform.Fields
	gv := make([]fields.Value, 3)
	if err := got.Fields(&gf, gv); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gf.Mask, f.Mask) || !reflect.DeepEqual(gf.Boxes, f.Boxes) || !gf.HasBoxes {
		t.Fatalf("fields %+v, want %+v", gf, f)
	}
	for i := range vals {
		if string(gv[i].Bytes) != string(vals[i].Bytes) || !reflect.DeepEqual(gv[i].Ints, vals[i].Ints) && len(vals[i].Ints) > 0 ||
			!reflect.DeepEqual(gv[i].Floats, vals[i].Floats) && len(vals[i].Floats) > 0 {
			t.Fatalf("value %d: %+v, want %+v", i, gv[i], vals[i])
		}
	}
	if err := s.Sample(1, 101).Fields(&gf, gv); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("fields of a sample written without them: %v", err)
	}
	// Every truncation of the fields is refused, never read past.
	one := NewWriter(nil, 1)
	one.SampleFields(9, img, 42, f, vals)
	b := one.Bytes()
	for cut := len(b) - 1; cut >= 4+4+sampleHeader+len(img.Pix); cut-- {
		s := ParseSample(b[8:cut], 0)
		if err := s.Fields(&gf, gv); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("fields cut at %d of %d: %v", cut, len(b), err)
		}
	}
}
