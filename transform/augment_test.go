package transform

import (
	"bufio"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// narrowImage is the low-contrast image testdata/gen_affine.py builds:
// formulaImage's values modulo 40+30c, plus 60.
func narrowImage(c, h, w int) *Image {
	m := formulaImage(c, h, w)
	n := h * w
	for i, v := range m.Pix {
		m.Pix[i] = uint8(int(v)%(40+30*(i/n)) + 60)
	}
	return m
}

func augOpNamed(t *testing.T, name string) augOp {
	t.Helper()
	for k, n := range augNames {
		if n == name {
			return augOp(k)
		}
	}
	t.Fatalf("no operation %q", name)
	return 0
}

// TestAugmentOpsMatchTorchvision: each operation of rand_augment and
// trivial_augment, at a given signed magnitude, is torchvision 0.14's
// _apply_op of it on the same uint8 image (the function RandAugment and
// TrivialAugmentWide call): the colour operations exactly, the geometric
// ones as rotate and affine match F.affine (nearest: exactly but for
// points within 1e-6 of a pixel boundary; bilinear: within 1 per value).
func TestAugmentOpsMatchTorchvision(t *testing.T) {
	data, err := os.ReadFile("testdata/augment.bin")
	if err != nil {
		t.Fatal(err)
	}
	N, B := SampleNearest, SampleBilinear
	imgs := []*Image{formulaImage(3, 37, 41), narrowImage(3, 37, 41)}
	var dst Image
	for _, c := range []struct { // as AUG in testdata/gen_affine.py
		name string
		mag  float64
		s    Sampling
		fill int
		img  int
	}{
		{"Identity", 0, N, 0, 0}, {"ShearX", 0.3, N, 0, 0}, {"ShearX", -0.2, B, 0, 0},
		{"ShearY", -0.99, B, 77, 0}, {"ShearY", 0.5, N, 0, 0}, {"TranslateX", 13.9, N, 0, 0},
		{"TranslateX", -20.5, B, 9, 0}, {"TranslateY", -7.3, N, 0, 0}, {"Rotate", 30, N, 0, 0},
		{"Rotate", -135, B, 0, 0}, {"Brightness", 0.9, N, 0, 0}, {"Brightness", -0.6, N, 0, 0},
		{"Brightness", 0.33, N, 0, 1}, {"Color", 0.5, N, 0, 0}, {"Color", -0.99, N, 0, 0},
		{"Contrast", 0.7, N, 0, 1}, {"Contrast", -0.9, N, 0, 0}, {"Sharpness", 0.9, N, 0, 0},
		{"Sharpness", -0.99, N, 0, 1}, {"Posterize", 4, N, 0, 0}, {"Posterize", 2, N, 0, 0},
		{"Posterize", 7, N, 0, 0}, {"Solarize", 128, N, 0, 0}, {"Solarize", 93.5, N, 0, 0},
		{"Solarize", 0, N, 0, 0}, {"Solarize", 255, N, 0, 0}, {"AutoContrast", 0, N, 0, 0},
		{"AutoContrast", 0, N, 0, 1}, {"Equalize", 0, N, 0, 0}, {"Equalize", 0, N, 0, 1},
	} {
		src := imgs[c.img]
		n := len(src.Pix)
		if len(data) < n {
			t.Fatalf("testdata/augment.bin ends before case %s %g", c.name, c.mag)
		}
		want := data[:n]
		data = data[n:]
		k := augOpNamed(t, c.name)
		a := newAugment(c.s, c.fill)
		got := src.Pix
		dst.Resize(0, 0, 0)
		if a.apply(&dst, src, k, c.mag, nil) {
			got = dst.Pix
		}
		if k.geometric() {
			g := a.geometry(k, c.mag, src.Shape())
			if d := compareWarp(got, want, &g, c.s); d != "" {
				t.Errorf("%s %g %s fill=%d: %s", c.name, c.mag, c.s, c.fill, d)
			}
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s %g on image %d: value %d (channel %d) is %d, torchvision %d", c.name, c.mag, c.img, i, i/(37*41), got[i], want[i])
				break
			}
		}
	}
	if len(data) != 0 {
		t.Fatalf("testdata/augment.bin has %d bytes past its cases", len(data))
	}
}

// TestAugmentMagnitudesMatchTorchvision: the magnitude of every operation
// at every bin is the value of torchvision's augmentation spaces
// (RandAugment's for a 41x37 image, TrivialAugmentWide's), float32 for
// float32, and the operations with a random sign are its signed ones.
func TestAugmentMagnitudesMatchTorchvision(t *testing.T) {
	f, err := os.Open("testdata/magnitudes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			t.Fatalf("testdata/magnitudes.txt: short line %q", sc.Text())
		}
		wide := fs[0] == "trivial"
		bins, err := strconv.Atoi(fs[1])
		if err != nil {
			t.Fatal(err)
		}
		k := augOpNamed(t, fs[2])
		if k.signed() != (fs[3] == "signed") {
			t.Errorf("%s: signed %v, torchvision %s", k, k.signed(), fs[3])
		}
		vals := fs[4:]
		if len(vals) == 0 {
			vals = []string{"0"}
		}
		if len(vals) != 1 && len(vals) != bins {
			t.Fatalf("%s %s: %d values for %d bins", fs[0], k, len(vals), bins)
		}
		for i := range bins {
			want, err := strconv.ParseFloat(vals[min(i, len(vals)-1)], 64)
			if err != nil {
				t.Fatal(err)
			}
			if got := magnitude(k, i, bins, 37, 41, wide); got != want {
				t.Errorf("%s %s bin %d of %d: %v, torchvision %v", fs[0], k, i, bins, got, want)
			}
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != 2*5*int(numAugOps) { // BINS in testdata/gen_affine.py
		t.Fatalf("testdata/magnitudes.txt: %d lines, want %d", lines, 2*5*numAugOps)
	}
}

// TestAugmentChoices: over many samples' generators, rand_augment picks
// every operation, at rates within 5 standard deviations of uniform, with
// both signs for the signed ones and the magnitude of bin m;
// trivial_augment picks every operation and every bin, and nothing
// outside them.
func TestAugmentChoices(t *testing.T) {
	const draws = 28000
	ra, err := RandAugment(2, 9, 31, SampleNearest, 0)
	if err != nil {
		t.Fatal(err)
	}
	ta, err := TrivialAugment(31, SampleNearest, 0)
	if err != nil {
		t.Fatal(err)
	}
	var count [numAugOps]int
	var neg [numAugOps]int
	for i := range draws / 2 {
		r := NewRand(7, 0, int64(i))
		for range 2 {
			k, mag := ra.draw(&r, 37, 41)
			if k < 0 || k >= numAugOps {
				t.Fatalf("rand_augment drew operation %d", k)
			}
			want := magnitude(k, 9, 31, 37, 41, false)
			if mag != want && mag != -want || (mag < 0 && !k.signed()) {
				t.Fatalf("rand_augment %s magnitude %v, want ±%v", k, mag, want)
			}
			count[k]++
			if mag < 0 {
				neg[k]++
			}
		}
	}
	mean := float64(draws) / float64(numAugOps)
	sd := math.Sqrt(mean * (1 - 1/float64(numAugOps)))
	for k, c := range count {
		if math.Abs(float64(c)-mean) > 5*sd {
			t.Errorf("rand_augment chose %s %d times in %d, expected %.0f±%.0f", augOp(k), c, draws, mean, sd)
		}
		if augOp(k).signed() && (neg[k] == 0 || neg[k] == c) {
			t.Errorf("rand_augment %s: %d of %d negative", augOp(k), neg[k], c)
		}
	}
	var ops [numAugOps]int
	bins := make(map[float64]bool)
	for i := range draws {
		r := NewRand(7, 1, int64(i))
		k, mag := ta.draw(&r, 37, 41)
		ops[k]++
		if k == augRotate {
			bins[math.Abs(mag)] = true
		}
	}
	for k, c := range ops {
		if c == 0 {
			t.Errorf("trivial_augment never chose %s", augOp(k))
		}
	}
	for i := range 31 {
		if !bins[magnitude(augRotate, i, 31, 37, 41, true)] {
			t.Errorf("trivial_augment never rotated by bin %d", i)
		}
	}
	if len(bins) != 31 {
		t.Errorf("trivial_augment rotated by %d magnitudes, want the 31 bins'", len(bins))
	}
}

// TestAugmentDeterministic: rand_augment and trivial_augment give the same
// image for the same generator, and consume it alike whatever the image.
func TestAugmentDeterministic(t *testing.T) {
	ra, _ := RandAugment(3, 14, 31, SampleBilinear, 3)
	ta, _ := TrivialAugment(31, SampleBilinear, 3)
	src := formulaImage(3, 37, 41)
	for _, op := range []Op{ra, ta} {
		changed := 0
		for i := range 200 {
			r1, r2 := NewRand(3, 2, int64(i)), NewRand(3, 2, int64(i))
			var a, b Image
			ok1, ok2 := op.Apply(&a, src, &r1), op.Apply(&b, src, &r2)
			if ok1 != ok2 || (ok1 && string(a.Pix) != string(b.Pix)) || r1 != r2 {
				t.Fatalf("%s: sample %d differs between two runs", op, i)
			}
			r3 := NewRand(3, 2, int64(i))
			op.Apply(&a, narrowImage(3, 37, 41), &r3)
			if r3 != r1 {
				t.Fatalf("%s: sample %d drew differently from another image", op, i)
			}
			if ok1 {
				changed++
			}
		}
		if changed < 150 {
			t.Errorf("%s changed %d of 200 images", op, changed)
		}
	}
}

// TestAugmentParams: the constructors refuse what torchvision would not
// take, with ErrParam, and String is canonical.
func TestAugmentParams(t *testing.T) {
	for _, err := range []error{
		errOf(RandAugment(0, 9, 31, SampleNearest, 0)),
		errOf(RandAugment(2, 31, 31, SampleNearest, 0)),
		errOf(RandAugment(2, -1, 31, SampleNearest, 0)),
		errOf(RandAugment(2, 0, 1, SampleNearest, 0)),
		errOf(RandAugment(2, 9, 31, Sampling(7), 0)),
		errOf(RandAugment(2, 9, 31, SampleNearest, 256)),
		errOf(TrivialAugment(1, SampleNearest, 0)),
		errOf(TrivialAugment(31, SampleNearest, -1)),
	} {
		if !errors.Is(err, ErrParam) {
			t.Errorf("got %v, want ErrParam", err)
		}
	}
	ra, _ := RandAugment(2, 9, 31, SampleNearest, 0)
	if s := ra.String(); s != "rand_augment n=2 m=9 num_bins=31 interpolation=nearest fill=0" {
		t.Errorf("String: %q", s)
	}
	ta, _ := TrivialAugment(31, SampleBilinear, 128)
	if s := ta.String(); s != "trivial_augment num_bins=31 interpolation=bilinear fill=128" {
		t.Errorf("String: %q", s)
	}
	if _, err := ra.OutShape(Shape{4, 8, 8}); err == nil {
		t.Error("rand_augment took a 4-channel image")
	}
}

// BenchmarkRandAugment runs rand_augment n=2 m=9 on a 224×224×3 image.
func BenchmarkRandAugment(b *testing.B) {
	src := formulaImage(3, 224, 224)
	for _, s := range []Sampling{SampleNearest, SampleBilinear} {
		b.Run(s.String(), func(b *testing.B) {
			op, _ := RandAugment(2, 9, 31, s, 0)
			benchOp(b, op, src)
		})
	}
}

// TestAugmentSmallImages: every operation of rand_augment, and rotate
// with expand, handle images down to one pixel, grey or colour, keeping
// their shape (expand: within the diagonal plus 2); evaluation runs none of them.
func TestAugmentSmallImages(t *testing.T) {
	rot, _ := Rotate(180, SampleBilinear, 9, true, 1)
	for _, s := range []Shape{{1, 1, 1}, {3, 1, 1}, {3, 1, 5}, {1, 2, 2}, {3, 3, 1}, {3, 3, 3}} {
		src := testImage(s.C, s.H, s.W)
		for _, interp := range []Sampling{SampleNearest, SampleBilinear} {
			a := newAugment(interp, 5)
			for k := range numAugOps {
				for _, mag := range []float64{magnitude(k, 30, 31, s.H, s.W, true), -magnitude(k, 30, 31, s.H, s.W, true)} {
					var dst Image
					if a.apply(&dst, src, k, mag, nil) && dst.Shape() != s {
						t.Errorf("%s %g on %v: shape %v", k, mag, s, dst.Shape())
					}
				}
			}
		}
		for i := range 20 {
			r := NewRand(0, 0, int64(i))
			var dst Image
			rot.Apply(&dst, src, &r)
			if d := math.Hypot(float64(s.H), float64(s.W)); float64(dst.H) > d+2 || float64(dst.W) > d+2 || dst.C != s.C {
				t.Errorf("rotate expand of %v: %v", s, dst.Shape())
			}
		}
	}
	ra, _ := RandAugment(2, 9, 31, SampleNearest, 0)
	ta, _ := TrivialAugment(31, SampleNearest, 0)
	aff, _ := Affine(10, [2]float64{}, [2]float64{1, 1}, [4]float64{}, SampleNearest, 0)
	for _, op := range []Op{ra, ta, rot, aff} {
		if ops, err := EvalOps(op, Shape{3, 32, 32}); err != nil || len(ops) != 0 {
			t.Errorf("%s: evaluation runs %v (%v), want nothing", op, ops, err)
		}
	}
}

// objectSample is a 1-channel h×w image whose pixels are the class ids of
// its mask (a rectangle of class 1 over [x0, x1)×[y0, y1) on class 0),
// with the rectangle's box.
func objectSample(h, w, x0, y0, x1, y1 int) (*Image, Fields) {
	img := &Image{}
	img.Resize(1, h, w)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			img.Pix[y*w+x] = 1
		}
	}
	f := Fields{
		Mask:     Mask{Pix: append([]byte(nil), img.Pix...), H: h, W: w, Size: 1},
		Boxes:    []Box{{X0: float32(x0), Y0: float32(y0), X1: float32(x1), Y1: float32(y1), Class: 1}},
		HasBoxes: true,
	}
	return img, f
}

// TestAugmentMovesFields: with only geometric operations drawn,
// rand_augment moves a mask exactly as the image (nearest sampling reads
// the same pixel, ties included), and the box drawn into the mask stays
// around the moved object, within a pixel of its extent where at most one
// operation turns or shears the box (after two, the box holds the box of
// a parallelogram, as torchvision's does). Colour operations leave the
// fields as they were.
func TestAugmentMovesFields(t *testing.T) {
	ra, _ := RandAugment(2, 9, 31, SampleNearest, 0)
	for _, c := range []struct {
		ks    []augOp
		mags  []float64
		tight bool
	}{
		{[]augOp{augShearX, augRotate}, []float64{0.3, 30}, false},
		{[]augOp{augTranslateX, augShearY}, []float64{13, -0.2}, true},
		{[]augOp{augRotate, augTranslateY}, []float64{-17, 5}, true},
		{[]augOp{augRotate, augRotate}, []float64{90, 45}, true},
		{[]augOp{augShearY, augTranslateX, augRotate}, []float64{0.25, -6.7, -30}, false},
	} {
		src, f := objectSample(37, 41, 12, 10, 28, 23)
		var dst Image
		if !ra.chain(&dst, src, c.ks, c.mags, &f) {
			t.Fatalf("%v: the image did not move", c.ks)
		}
		if f.Mask.H != dst.H || f.Mask.W != dst.W || string(f.Mask.Pix) != string(dst.Pix) {
			t.Errorf("%v %v: the mask moved otherwise than the image", c.ks, c.mags)
		}
		// The object's extent, in pixel edges.
		x0, y0, x1, y1 := dst.W, dst.H, 0, 0
		for i, v := range f.Mask.Pix {
			if v == 1 {
				x, y := i%dst.W, i/dst.W
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x+1), max(y1, y+1)
			}
		}
		b := f.Boxes[0]
		// How far each side of the box lies outside the object's.
		for _, d := range []float64{float64(x0) - float64(b.X0), float64(y0) - float64(b.Y0), float64(b.X1) - float64(x1), float64(b.Y1) - float64(y1)} {
			if d < -1 || c.tight && d > 1 {
				t.Errorf("%v %v: box %+v, the object spans [%d, %d)×[%d, %d)", c.ks, c.mags, b, x0, x1, y0, y1)
				break
			}
		}
	}
	src, f := objectSample(37, 41, 12, 10, 28, 23)
	before := append([]byte(nil), f.Mask.Pix...)
	var dst Image
	ra.chain(&dst, src, []augOp{augBrightness, augEqualize, augSharpness, augSolarize}, []float64{0.5, 0, 0.9, 0}, &f)
	if string(f.Mask.Pix) != string(before) || f.Boxes[0] != (Box{X0: 12, Y0: 10, X1: 28, Y1: 23, Class: 1}) {
		t.Errorf("colour operations moved the fields: box %+v", f.Boxes[0])
	}
}

// TestAugmentFieldsInChain: in a chain, rand_augment and trivial_augment
// pass CheckFields, draw as Apply does and make the same image, and for
// every sample the mask follows the image's geometry.
func TestAugmentFieldsInChain(t *testing.T) {
	ra, _ := RandAugment(2, 15, 31, SampleNearest, 0)
	ta, _ := TrivialAugment(31, SampleNearest, 0)
	for _, op := range []Op{ra, ta} {
		if err := CheckFields([]Op{op}); err != nil {
			t.Fatal(err)
		}
		c, plain := NewChain([]Op{op}), NewChain([]Op{op})
		moved := 0
		for i := range 300 {
			src, f := objectSample(37, 41, 12, 10, 28, 23)
			r := NewRand(5, 0, int64(i))
			out, err := c.ApplySample(src, &f, r)
			if err != nil {
				t.Fatal(err)
			}
			want := plain.Apply(src, r)
			if string(out.Pix) != string(want.Pix) || c.Rand() != plain.Rand() {
				t.Fatalf("%s sample %d: ApplySample differs from Apply", op, i)
			}
			if string(f.Mask.Pix) != string(src.Pix) {
				moved++
			}
		}
		if moved < 50 {
			t.Errorf("%s moved the mask of %d samples in 300", op, moved)
		}
	}
}

// TestRotateAffineMoveMasks: in a chain, rotate and affine with nearest
// sampling move a mask to exactly the pixels they move the image to.
func TestRotateAffineMoveMasks(t *testing.T) {
	rot, _ := Rotate(45, SampleNearest, 0, true, 1)
	aff, _ := Affine(30, [2]float64{0.2, 0.1}, [2]float64{0.7, 1.3}, [4]float64{-20, 20, -10, 10}, SampleNearest, 0)
	c := NewChain([]Op{rot, aff})
	if err := CheckFields([]Op{rot, aff}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		src, f := objectSample(37, 41, 12, 10, 28, 23)
		out, err := c.ApplySample(src, &f, NewRand(6, 0, int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if f.Mask.H != out.H || f.Mask.W != out.W || string(f.Mask.Pix) != string(out.Pix) {
			t.Fatalf("sample %d: the mask moved otherwise than the image", i)
		}
	}
}
