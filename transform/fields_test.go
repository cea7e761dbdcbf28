package transform

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
)

// fieldOps are the spatial operations the chain tests draw from; crops
// and shifts pad with zeros, so that no padding repeats an object outside
// its box (a reflected or wrapped pad repeats the mask's classes as it
// repeats the image's pixels: TestMaskWindowIsTheImagesWindow holds that).
func fieldOps(t *testing.T) []Op {
	t.Helper()
	var ops []Op
	add := func(op Op, err error) {
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	add(RandomCrop(20, 6, FillZero))
	add(RandomCrop(12, 0, FillZero))
	add(Shift(0.3, 5, FillZero))
	add(Flip(Horizontal, 0.5))
	add(Flip(Vertical, 0.5))
	add(CenterCrop(18))
	add(CenterCrop(30))
	add(Resize(16, Bilinear))
	add(Resize(31, Bicubic))
	add(RandomResizedCrop(17, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear))
	return ops
}

// objects is a sample with up to three rectangles, of classes 1 to 3, in
// an h×w mask and as boxes; rectangles do not overlap, so each class's
// pixels are its rectangle's.
func objects(h, w int, r *Rand) (Mask, []Box) {
	m := Mask{Pix: make([]byte, h*w), H: h, W: w, Size: 1}
	var boxes []Box
	for k := 1; k <= 3; k++ {
		// Rectangle k lies in the k'th third of the columns.
		x0 := (k-1)*w/3 + r.Intn(w/3)
		x1 := x0 + 1 + r.Intn((k*w/3)-x0)
		y0 := r.Intn(h)
		y1 := y0 + 1 + r.Intn(h-y0)
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				m.Pix[y*w+x] = byte(k)
			}
		}
		boxes = append(boxes, Box{X0: float32(x0), Y0: float32(y0), X1: float32(x1), Y1: float32(y1), Class: int64(k)})
	}
	return m, boxes
}

// slack is how far, in output pixels, a mask's class may reach past its
// box after the ops drew from r on an input of shape in: nothing after
// windows, a pixel more after each resample, scaled by the later ones.
func slack(ops []Op, in Shape, r Rand) (sy, sx float64) {
	for _, op := range Fuse(ops) {
		g := op.(Spatial).Geometry(in, &r)
		if g.Kind == GeomResample {
			sy = sy*float64(g.OH)/g.SH + 1
			sx = sx*float64(g.OW)/g.SW + 1
		}
		in = Shape{C: in.C, H: g.OH, W: g.OW}
	}
	return sy, sx
}

// checkObjects checks f against the rule the geometry keeps: every box is
// inside the image, none is below the minimum area, and the pixels of
// each class lie in its box (within the slack); a class whose box was
// dropped has no pixels. Without slack, each box is its class's pixels'
// bounding box exactly.
func checkObjects(t *testing.T, what string, f *Fields, h, w int, sy, sx float64) {
	t.Helper()
	var lo, hi [4][2]int // per class: min and max x, y of its pixels
	for k := range lo {
		lo[k], hi[k] = [2]int{math.MaxInt, math.MaxInt}, [2]int{-1, -1}
	}
	for y := range h {
		for x := range w {
			k := f.Mask.Pix[y*w+x]
			if k > 3 {
				t.Fatalf("%s: class %d at (%d, %d): no such object", what, k, x, y)
			}
			lo[k] = [2]int{min(lo[k][0], x), min(lo[k][1], y)}
			hi[k] = [2]int{max(hi[k][0], x), max(hi[k][1], y)}
		}
	}
	var box [4]*Box
	for i := range f.Boxes {
		b := &f.Boxes[i]
		if b.X0 < 0 || b.Y0 < 0 || b.X1 > float32(w) || b.Y1 > float32(h) || b.X0 >= b.X1 || b.Y0 >= b.Y1 {
			t.Fatalf("%s: box %+v is not a box inside the %dx%d image", what, *b, w, h)
		}
		if a := float64(b.X1-b.X0) * float64(b.Y1-b.Y0); a < f.MinArea {
			t.Fatalf("%s: box %+v of area %g kept below min_area %g", what, *b, a, f.MinArea)
		}
		box[b.Class] = b
	}
	for k := 1; k <= 3; k++ {
		b := box[k]
		if hi[k][0] < 0 {
			continue
		}
		if b == nil {
			if f.MinArea == 0 {
				t.Fatalf("%s: class %d has pixels (%v to %v) but its box was dropped", what, k, lo[k], hi[k])
			}
			continue
		}
		const eps = 1e-3
		if float64(lo[k][0]) < float64(b.X0)-sx-eps || float64(hi[k][0]+1) > float64(b.X1)+sx+eps ||
			float64(lo[k][1]) < float64(b.Y0)-sy-eps || float64(hi[k][1]+1) > float64(b.Y1)+sy+eps {
			t.Fatalf("%s: class %d's pixels span (%v)-(%v), outside its box %+v (slack %g, %g)", what, k, lo[k], hi[k], *b, sx, sy)
		}
		if sx == 0 && sy == 0 && (float64(lo[k][0]) != float64(b.X0) || float64(hi[k][0]+1) != float64(b.X1) ||
			float64(lo[k][1]) != float64(b.Y0) || float64(hi[k][1]+1) != float64(b.Y1)) {
			t.Fatalf("%s: class %d's pixels span (%v)-(%v), not its whole box %+v", what, k, lo[k], hi[k], *b)
		}
	}
}

// TestChainMovesFields: random chains of the spatial operations move a
// mask and boxes together, on the pixel path and on the encoded JPEG and
// PNG paths (with and without a reduced DCT scale): the mask's objects
// stay in their boxes, boxes are clipped to the image or dropped below
// min_area, and the image is the one Apply makes. The encoded paths move
// the fields exactly as the pixel path does.
func TestChainMovesFields(t *testing.T) {
	pool := fieldOps(t)
	for seed := range 400 {
		r := NewRand(uint64(seed), 0, 77)
		var ops []Op
		for range 1 + r.Intn(4) {
			ops = append(ops, pool[r.Intn(len(pool))])
		}
		h, w := 20+r.Intn(40), 20+r.Intn(40)
		src := randomImage(3, h, w, &r)
		mask, boxes := objects(h, w, &r)
		minArea := []float64{0, 4, 30}[seed%3]
		what := chainString(ops) + " on " + src.Shape().String()

		c := NewChain(ops)
		want := NewChain(ops).Apply(src, r)
		f := Fields{Mask: mask, Boxes: append([]Box(nil), boxes...), HasBoxes: true, MinArea: minArea}
		got, err := c.ApplySample(src, &f, r)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Shape() != want.Shape() || !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("%s: ApplySample's image is not Apply's", what)
		}
		if c.Rand() != NewChain(ops).applyRand(src, r) {
			t.Fatalf("%s: ApplySample left the generator elsewhere than Apply", what)
		}
		if f.Mask.H != got.H || f.Mask.W != got.W {
			t.Fatalf("%s: %dx%d mask for a %dx%d image", what, f.Mask.W, f.Mask.H, got.W, got.H)
		}
		sy, sx := slack(ops, src.Shape(), r)
		checkObjects(t, what, &f, got.H, got.W, sy, sx)

		var to Image
		f2 := Fields{Mask: mask, Boxes: append([]Box(nil), boxes...), HasBoxes: true, MinArea: minArea}
		if err := NewChain(ops).ApplySampleTo(&to, src, &f2, r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(to.Pix, want.Pix) || !sameFields(&f, &f2) {
			t.Fatalf("%s: ApplySampleTo differs from ApplySample", what)
		}

		if seed%4 != 0 {
			continue
		}
		// The encoded paths, from the image decoded.
		for _, enc := range []string{"png", "jpeg"} {
			data := encode(t, src, enc)
			var dec Image
			if err := Decode(&dec, data); err != nil {
				t.Fatal(err)
			}
			fd := Fields{Mask: mask, Boxes: append([]Box(nil), boxes...), HasBoxes: true, MinArea: minArea}
			wantImg, err := NewChain(ops).ApplySample(&dec, &fd, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, reduce := range []bool{false, true} {
				fe := Fields{Mask: mask, Boxes: append([]Box(nil), boxes...), HasBoxes: true, MinArea: minArea}
				var out Image
				if err := NewChain(ops).ApplyEncodedSampleTo(NewDecoder(reduce), &out, data, &fe, r); err != nil {
					t.Fatalf("%s, %s: %v", what, enc, err)
				}
				if !sameFields(&fd, &fe) {
					t.Fatalf("%s, %s reduce=%v: the encoded path moved the fields otherwise:\n%+v\n%+v", what, enc, reduce, fe.Boxes, fd.Boxes)
				}
				if !reduce && (out.Shape() != wantImg.Shape() || !bytes.Equal(out.Pix, wantImg.Pix)) {
					t.Fatalf("%s, %s: the encoded path's image is not the pixel path's", what, enc)
				}
				fe = Fields{Mask: mask, Boxes: append([]Box(nil), boxes...), HasBoxes: true, MinArea: minArea}
				img, err := NewChain(ops).ApplyEncodedSample(NewDecoder(reduce), data, &fe, r)
				if err != nil {
					t.Fatal(err)
				}
				if !sameFields(&fd, &fe) || img.Shape() != wantImg.Shape() {
					t.Fatalf("%s, %s reduce=%v: ApplyEncodedSample differs from ApplyEncodedSampleTo", what, enc, reduce)
				}
			}
		}
	}
}

// applyRand is where Apply leaves the generator.
func (c *Chain) applyRand(src *Image, r Rand) Rand {
	c.Apply(src, r)
	return c.Rand()
}

func chainString(ops []Op) string {
	var s []string
	for _, op := range ops {
		s = append(s, op.String())
	}
	return strings.Join(s, "; ")
}

func sameFields(a, b *Fields) bool {
	return a.Mask.H == b.Mask.H && a.Mask.W == b.Mask.W && bytes.Equal(a.Mask.Pix, b.Mask.Pix) && reflect.DeepEqual(a.Boxes, b.Boxes)
}

// encode is img as a PNG or a JPEG of quality 95.
func encode(t *testing.T, img *Image, format string) []byte {
	t.Helper()
	rgba := image.NewRGBA(image.Rect(0, 0, img.W, img.H))
	for y := range img.H {
		for x := range img.W {
			i := y*img.W + x
			n := img.H * img.W
			rgba.Set(x, y, color.RGBA{img.Pix[i], img.Pix[n+i], img.Pix[2*n+i], 255})
		}
	}
	var b bytes.Buffer
	var err error
	if format == "png" {
		err = png.Encode(&b, rgba)
	} else {
		err = jpeg.Encode(&b, rgba, &jpeg.Options{Quality: 95})
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestChainFieldsChecks: a mask of another size than its image is an
// error naming both sizes; normalized boxes are scaled to the decoded
// image's pixels; an operation that moves pixels but not fields is named
// by CheckFields.
func TestChainFieldsChecks(t *testing.T) {
	flip, _ := Flip(Horizontal, 1)
	c := NewChain([]Op{flip})
	src := randomImage(3, 10, 20, new(Rand))
	f := Fields{Mask: Mask{Pix: make([]byte, 10*21), H: 10, W: 21, Size: 1}}
	if _, err := c.ApplySample(src, &f, Rand{}); !errors.Is(err, fields.ErrValue) || !strings.Contains(err.Error(), "21x10") || !strings.Contains(err.Error(), "20x10") {
		t.Fatalf("mask of another size: %v", err)
	}
	f = Fields{Mask: Mask{Pix: make([]byte, 10*20), H: 10, W: 20, Size: 3}}
	if _, err := c.ApplySample(src, &f, Rand{}); !errors.Is(err, fields.ErrValue) {
		t.Fatalf("mask of 3-byte values: %v", err)
	}
	f = Fields{Mask: Mask{Pix: make([]byte, 10), H: 10, W: 20, Size: 1}}
	if err := c.ApplySampleTo(new(Image), src, &f, Rand{}); !errors.Is(err, fields.ErrValue) {
		t.Fatalf("mask shorter than its size: %v", err)
	}

	f = Fields{Boxes: []Box{{X0: 0.25, Y0: 0.5, X1: 0.5, Y1: 1}}, HasBoxes: true, Normalized: true}
	data := encode(t, src, "png")
	if _, err := c.ApplyEncodedSample(NewDecoder(false), data, &f, Rand{}); err != nil {
		t.Fatal(err)
	}
	// Scaled to 5..10 × 5..10, then mirrored in the 20-pixel width.
	if want := (Box{X0: 10, Y0: 5, X1: 15, Y1: 10}); len(f.Boxes) != 1 || f.Boxes[0] != want || !f.Normalized {
		t.Fatalf("normalized boxes: %+v, Normalized %v; want %+v", f.Boxes, f.Normalized, want)
	}

	if err := CheckFields(append(spatialOps(t), mustOps(t)...)); err != nil {
		t.Fatalf("the package's operations: %v", err)
	}
	if err := CheckFields([]Op{flip, unknownOp{}}); !errors.Is(err, fields.ErrSchema) || !strings.HasPrefix(err.Error(), "twist:") {
		t.Fatalf("an op that moves pixels its own way: %v", err)
	}
}

// mustOps are the package's operations that are not spatial.
func mustOps(t *testing.T) []Op {
	t.Helper()
	j, err1 := ColorJitter(0.4, 0.4, 0.4, 0)
	g, err2 := Grayscale(0.2)
	b, err3 := GaussianBlur(5, [2]float64{0.1, 2})
	e, err4 := RandomErasing(0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, EraseValue{Levels: []float64{0}})
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	return []Op{j, g, b, e}
}

// unknownOp moves pixels without saying how.
type unknownOp struct{}

func (unknownOp) Name() string                     { return "twist" }
func (unknownOp) String() string                   { return "twist" }
func (unknownOp) Random() bool                     { return false }
func (unknownOp) OutShape(in Shape) (Shape, error) { return in, nil }
func (unknownOp) Apply(dst, src *Image, r *Rand) bool {
	return false
}

// TestFieldsOpMovesFields: the chain hands a FieldsOp the fields in place
// of calling Apply.
func TestFieldsOpMovesFields(t *testing.T) {
	op := &fieldsFlip{}
	c := NewChain([]Op{op})
	src := randomImage(1, 4, 6, new(Rand))
	f := Fields{Boxes: []Box{{X0: 1, Y0: 1, X1: 2, Y1: 3}}, HasBoxes: true}
	if _, err := c.ApplySample(src, &f, Rand{}); err != nil {
		t.Fatal(err)
	}
	if want := (Box{X0: 4, Y0: 1, X1: 5, Y1: 3}); f.Boxes[0] != want || op.applied != 0 {
		t.Fatalf("boxes %+v, Apply called %d times; want %+v and none", f.Boxes, op.applied, want)
	}
	c.Apply(src, Rand{})
	if op.applied != 1 {
		t.Fatalf("Apply called %d times without fields", op.applied)
	}
}

// fieldsFlip is a horizontal flip that is a FieldsOp, counting Applies.
type fieldsFlip struct{ applied int }

func (*fieldsFlip) Name() string                     { return "fields_flip" }
func (*fieldsFlip) String() string                   { return "fields_flip" }
func (*fieldsFlip) Random() bool                     { return false }
func (*fieldsFlip) OutShape(in Shape) (Shape, error) { return in, nil }
func (o *fieldsFlip) Apply(dst, src *Image, r *Rand) bool {
	o.applied++
	return false
}
func (o *fieldsFlip) ApplyFields(dst, src *Image, f *Fields, r *Rand) bool {
	g := Geometry{Kind: GeomWindow, OH: src.H, OW: src.W, MirrorX: true}
	f.Move(g)
	return applyWindow(dst, src, g)
}

// TestDropBoxes: boxes of no width or height, or below MinArea, go; the
// others keep their order.
func TestDropBoxes(t *testing.T) {
	f := Fields{MinArea: 4, Boxes: []Box{
		{X0: 0, Y0: 0, X1: 2, Y1: 2, Class: 1},
		{X0: 3, Y0: 0, X1: 3, Y1: 9, Class: 2},
		{X0: 0, Y0: 0, X1: 1, Y1: 3.9, Class: 3},
		{X0: 5, Y0: 5, X1: 9, Y1: 6, Class: 4},
		{X0: 5, Y0: 6, X1: 9, Y1: 5, Class: 5},
		{X0: 1, Y0: 1, X1: 9, Y1: 9, Class: 6},
	}}
	f.DropBoxes()
	var kept []int64
	for _, b := range f.Boxes {
		kept = append(kept, b.Class)
	}
	if !reflect.DeepEqual(kept, []int64{1, 4, 6}) {
		t.Fatalf("kept %v, want [1 4 6]", kept)
	}
	f = Fields{Boxes: []Box{{X0: 0, Y0: 0, X1: 0.01, Y1: 0.01}, {X0: 1, Y0: 1, X1: 1, Y1: 2}}}
	f.DropBoxes()
	if len(f.Boxes) != 1 {
		t.Fatalf("MinArea 0 kept %+v: want the box of positive area only", f.Boxes)
	}
}

// TestFieldsMoveAllocatesNothing: once its scratch has grown, a chain
// moving a mask and boxes allocates nothing per sample.
func TestFieldsMoveAllocatesNothing(t *testing.T) {
	if underRace {
		t.Skip("the race detector allocates")
	}
	ops := fieldOps(t)
	c := NewChain(ops)
	src := randomImage(3, 40, 50, new(Rand))
	mask, boxes := objects(40, 50, new(Rand))
	f := Fields{HasBoxes: true, MinArea: 2}
	var dst Image
	dst.Resize(3, 64, 64)
	seed := uint64(0)
	run := func() {
		f.Mask = mask
		f.Boxes = append(f.Boxes[:0], boxes...)
		seed++
		if err := c.ApplySampleTo(&dst, src, &f, NewRand(seed, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		run()
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%g allocations per sample", n)
	}
}
