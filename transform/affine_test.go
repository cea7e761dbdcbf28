package transform

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
)

// boundaryTol is how close to a rounding boundary (a half-integer source
// coordinate) nearest sampling may pick the other pixel than torch does:
// points exactly on one (which rotations by 30° make) fall to either side
// in torch's float32 grid.
const boundaryTol = 1e-6

// compareWarp compares got, the warp of an image under g, with want,
// torchvision's: with nearest sampling equal except where the sampled
// point lies within boundaryTol of a pixel boundary, with bilinear within
// 1 per value. It returns a description of the first difference, or "".
func compareWarp(got, want []byte, g *Geometry, s Sampling) string {
	if len(got) != len(want) {
		return "wrong size"
	}
	n := g.OH * g.OW
	for i := range got {
		d := int(got[i]) - int(want[i])
		if d == 0 || (s == SampleBilinear && (d == 1 || d == -1)) {
			continue
		}
		p := i % n
		y, x := p/g.OW, p%g.OW
		bx, by := rowStart(&g.M, y)
		ix, iy := bx+g.M[0]*float64(x), by+g.M[3]*float64(x)
		near := func(v float64) bool { return math.Abs(v-math.Floor(v)-0.5) < boundaryTol }
		if s == SampleNearest && (near(ix) || near(iy)) {
			continue
		}
		return fmt.Sprintf("channel %d pixel (%d, %d): %d, torchvision %d", i/n, y, x, got[i], want[i])
	}
	return ""
}

// TestRotateAffineMatchTorchvision: rotate and affine warp the image as
// torchvision 0.14's functional rotate and affine do on a uint8 tensor with
// the same parameters and fill (nearest: exactly, but for points within
// 1e-6 of a pixel boundary; bilinear: within 1 per value), including
// rotate's expanded output size.
func TestRotateAffineMatchTorchvision(t *testing.T) {
	data, err := os.ReadFile("testdata/affine.bin")
	if err != nil {
		t.Fatal(err)
	}
	N, B := SampleNearest, SampleBilinear
	type warpCase struct {
		name string
		g    Geometry
		s    Sampling
		fill uint8
		h, w int
	}
	var cases []warpCase
	for _, c := range []struct { // as ROTATE in testdata/gen_affine.py
		angle  float64
		s      Sampling
		expand bool
		fill   uint8
		h, w   int
	}{
		{30, N, false, 0, 37, 41}, {30, B, false, 0, 37, 41}, {-17.5, N, false, 128, 32, 48},
		{-17.5, B, false, 128, 32, 48}, {90, N, false, 0, 32, 48}, {180, B, false, 0, 37, 41},
		{45, B, true, 0, 37, 41}, {-63, N, true, 200, 32, 48},
	} {
		g := rotation(Shape{3, c.h, c.w}, c.angle, c.expand)
		cases = append(cases, warpCase{fmt.Sprintf("rotate %g expand=%t", c.angle, c.expand), g, c.s, c.fill, c.h, c.w})
	}
	for _, c := range []struct { // as AFFINE in testdata/gen_affine.py
		angle, tx, ty, scale, shx, shy float64
		s                              Sampling
		fill                           uint8
		h, w                           int
	}{
		{12, 3, -5, 1.3, 10, -7, N, 0, 37, 41}, {12, 3, -5, 1.3, 10, -7, B, 0, 37, 41},
		{-40, 0, 0, 0.7, 0, 20, B, 50, 32, 48}, {-40, 0, 0, 0.7, 0, 20, N, 50, 32, 48},
		{0, -7, 2, 1, 35, 0, B, 0, 37, 41},
	} {
		m := inverseAffine(0, 0, c.angle, c.tx, c.ty, c.scale, c.shx, c.shy)
		cases = append(cases, warpCase{fmt.Sprintf("affine %g %g,%g %g %g,%g", c.angle, c.tx, c.ty, c.scale, c.shx, c.shy), affineGeometry(m, c.h, c.w, c.h, c.w), c.s, c.fill, c.h, c.w})
	}
	if c := cases[6]; c.g.OH != 57 || c.g.OW != 57 {
		t.Errorf("rotate 45 expand of 41x37: %dx%d, torchvision 57x57", c.g.OW, c.g.OH)
	}
	if c := cases[7]; c.g.OH != 58 || c.g.OW != 52 {
		t.Errorf("rotate -63 expand of 48x32: %dx%d, torchvision 52x58", c.g.OW, c.g.OH)
	}
	var dst Image
	for _, c := range cases {
		n := 3 * c.g.OH * c.g.OW
		if len(data) < n {
			t.Fatalf("testdata/affine.bin ends before case %s", c.name)
		}
		warp(&dst, formulaImage(3, c.h, c.w), &c.g, c.s, c.fill)
		if d := compareWarp(dst.Pix, data[:n], &c.g, c.s); d != "" {
			t.Errorf("%s %s fill=%d: %s", c.name, c.s, c.fill, d)
		}
		data = data[n:]
	}
	if len(data) != 0 {
		t.Fatalf("testdata/affine.bin has %d bytes past its cases", len(data))
	}
}

// TestRotateAffineDraws: Geometry consumes the generator as Apply does,
// twice for rotate (p, then the angle, whether or not it fires) and six
// times for affine, and Apply is a pure function of the generator.
func TestRotateAffineDraws(t *testing.T) {
	rot, err := Rotate(30, SampleBilinear, 0, false, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	aff, err := Affine(20, [2]float64{0.1, 0.2}, [2]float64{0.8, 1.2}, [4]float64{-10, 10, -5, 5}, SampleNearest, 7)
	if err != nil {
		t.Fatal(err)
	}
	src := formulaImage(3, 37, 41)
	fired := 0
	for i := range 100 {
		for _, c := range []struct {
			op    Spatial
			draws int
		}{{rot, 2}, {aff, 6}} {
			r1, r2, r3 := NewRand(1, 0, int64(i)), NewRand(1, 0, int64(i)), NewRand(1, 0, int64(i))
			g := c.op.Geometry(src.Shape(), &r1)
			var a, b Image
			ok := c.op.Apply(&a, src, &r2)
			if r1 != r2 {
				t.Fatalf("%s: Geometry and Apply drew differently", c.op)
			}
			for range c.draws {
				r3.Uint64()
			}
			if r3 != r1 {
				t.Fatalf("%s: Geometry did not draw %d times", c.op, c.draws)
			}
			if c.op.ApplyGeometry(&b, src, g) != ok || string(a.Pix) != string(b.Pix) {
				t.Fatalf("%s: ApplyGeometry of the drawn geometry is not Apply", c.op)
			}
			if ok && c.op == Spatial(rot) {
				fired++
			}
		}
	}
	if fired < 30 || fired > 70 {
		t.Errorf("rotate p=0.5 fired %d times in 100", fired)
	}
}

// TestAffineDrawsTorchvisionParams: affine's geometry is torchvision's
// inverse matrix for the parameters drawn as RandomAffine.get_params
// draws them: the translation a whole number of pixels within its range.
func TestAffineDrawsTorchvisionParams(t *testing.T) {
	aff, _ := Affine(20, [2]float64{0.1, 0.2}, [2]float64{0.8, 1.2}, [4]float64{-10, 10, -5, 5}, SampleNearest, 0)
	for i := range 50 {
		r := NewRand(2, 0, int64(i))
		g := aff.Geometry(Shape{3, 37, 41}, &r)
		r = NewRand(2, 0, int64(i))
		angle := r.Uniform(-20, 20)
		tx := math.RoundToEven(r.Uniform(-4.1, 4.1))
		ty := math.RoundToEven(r.Uniform(-7.4, 7.4))
		scale := r.Uniform(0.8, 1.2)
		shx, shy := r.Uniform(-10, 10), r.Uniform(-5, 5)
		want := affineGeometry(inverseAffine(0, 0, angle, tx, ty, scale, shx, shy), 37, 41, 37, 41)
		if g != want || math.Abs(tx) > 4 || math.Abs(ty) > 7 {
			t.Fatalf("sample %d: %+v, want %+v", i, g, want)
		}
	}
}

// errOf is the error of a constructor's two results.
func errOf[T any](_ T, err error) error { return err }

// TestRotateAffineParams: the constructors refuse out-of-range values
// with ErrParam; String is canonical; expand's output size varies.
func TestRotateAffineParams(t *testing.T) {
	for _, err := range []error{
		errOf(Rotate(-1, SampleNearest, 0, false, 1)),
		errOf(Rotate(181, SampleNearest, 0, false, 1)),
		errOf(Rotate(math.NaN(), SampleNearest, 0, false, 1)),
		errOf(Rotate(10, SampleNearest, 256, false, 1)),
		errOf(Rotate(10, SampleNearest, 0, false, 1.5)),
		errOf(Rotate(10, Sampling(2), 0, false, 1)),
		errOf(Affine(10, [2]float64{1.5, 0}, [2]float64{1, 1}, [4]float64{}, SampleNearest, 0)),
		errOf(Affine(10, [2]float64{}, [2]float64{0, 1}, [4]float64{}, SampleNearest, 0)),
		errOf(Affine(10, [2]float64{}, [2]float64{1.2, 1}, [4]float64{}, SampleNearest, 0)),
		errOf(Affine(10, [2]float64{}, [2]float64{1, 1}, [4]float64{-90, 0, 0, 0}, SampleNearest, 0)),
		errOf(Affine(10, [2]float64{}, [2]float64{1, 1}, [4]float64{0, 0, 5, 1}, SampleNearest, 0)),
	} {
		if !errors.Is(err, ErrParam) {
			t.Errorf("got %v, want ErrParam", err)
		}
	}
	rot, _ := Rotate(15, SampleBilinear, 3, true, 0.5)
	if s := rot.String(); s != "rotate degrees=15 interpolation=bilinear fill=3 expand=true p=0.5" {
		t.Errorf("String: %q", s)
	}
	aff, _ := Affine(5, [2]float64{0.1, 0}, [2]float64{0.9, 1.1}, [4]float64{-3, 3, 0, 0}, SampleNearest, 0)
	if s := aff.String(); s != "affine degrees=5 translate=0.1,0 scale=0.9,1.1 shear=-3,3,0,0 interpolation=nearest fill=0" {
		t.Errorf("String: %q", s)
	}
	if s, err := rot.OutShape(Shape{3, 32, 48}); err != nil || s != (Shape{C: 3}) {
		t.Errorf("expand OutShape: %v, %v", s, err)
	}
	if _, err := rot.OutShape(Shape{3, MaxSide, MaxSide}); err == nil {
		t.Error("expand took an image whose rotations exceed MaxSide")
	}
}

// TestWarpAllocs: a warm rotate, affine, rand_augment and trivial_augment
// allocate nothing per image.
func TestWarpAllocs(t *testing.T) {
	if underRace {
		t.Skip("under the race detector sync.Pool drops what it is given")
	}
	rot, _ := Rotate(30, SampleBilinear, 0, false, 1)
	aff, _ := Affine(30, [2]float64{0.1, 0.1}, [2]float64{0.9, 1.1}, [4]float64{-5, 5, 0, 0}, SampleNearest, 0)
	ra, _ := RandAugment(3, 9, 31, SampleBilinear, 0)
	ta, _ := TrivialAugment(31, SampleNearest, 0)
	src := formulaImage(3, 64, 64)
	for _, op := range []Op{rot, aff, ra, ta} {
		var dst Image
		var r Rand // outside run: a generator passed through the Op interface escapes
		i := int64(0)
		run := func() {
			r = NewRand(1, 0, i)
			op.Apply(&dst, src, &r)
			i++
		}
		for range 50 {
			run()
		}
		if n := testing.AllocsPerRun(200, run); n != 0 {
			t.Errorf("%s: %v allocations per image", op, n)
		}
	}
}

// BenchmarkRotate rotates a 224×224×3 image by a random angle up to 30°.
func BenchmarkRotate(b *testing.B) {
	src := formulaImage(3, 224, 224)
	for _, s := range []Sampling{SampleNearest, SampleBilinear} {
		b.Run(s.String(), func(b *testing.B) {
			op, _ := Rotate(30, s, 0, false, 1)
			benchOp(b, op, src)
		})
	}
}

func benchOp(b *testing.B, op Op, src *Image) {
	var dst Image
	var r Rand
	b.SetBytes(int64(len(src.Pix)))
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		r = NewRand(42, 0, i)
		op.Apply(&dst, src, &r)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/image")
}

// TestAffineGeometryConvention: M maps output points to input points in
// pixels with centres at half-integers, as Geometry documents: a
// counter-clockwise quarter turn shows the input's top-right pixel at the
// output's top-left, and a translation by (3, -5) shows input (x-3, y+5)
// at output (x, y); rotate's expanded output is centred on the input.
func TestAffineGeometryConvention(t *testing.T) {
	at := func(g Geometry, x, y float64) (float64, float64) {
		return g.M[0]*x + g.M[1]*y + g.M[2], g.M[3]*x + g.M[4]*y + g.M[5]
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-5 }
	g := rotation(Shape{1, 4, 6}, 90, false)
	// Output (0.5, 0.5) is 2.5 left of and 1.5 above the centre (3, 2);
	// turned a quarter clockwise back it is 1.5 right of and 2.5 above it.
	if x, y := at(g, 0.5, 0.5); !near(x, 4.5) || !near(y, -0.5) {
		t.Errorf("quarter turn: output (0.5, 0.5) reads input (%g, %g), want (4.5, -0.5)", x, y)
	}
	sq := rotation(Shape{1, 4, 4}, 90, false)
	if x, y := at(sq, 0.5, 0.5); !near(x, 3.5) || !near(y, 0.5) {
		t.Errorf("quarter turn of a square: output (0.5, 0.5) reads input (%g, %g), want (3.5, 0.5)", x, y)
	}
	tr := affineGeometry(inverseAffine(0, 0, 0, 3, -5, 1, 0, 0), 37, 41, 37, 41)
	if x, y := at(tr, 10.5, 20.5); !near(x, 7.5) || !near(y, 25.5) {
		t.Errorf("translation: output (10.5, 20.5) reads input (%g, %g), want (7.5, 25.5)", x, y)
	}
	ex := rotation(Shape{1, 32, 48}, 90, true)
	if ex.OH != 48 || ex.OW != 32 {
		t.Fatalf("quarter turn expanded: %dx%d, want 32x48", ex.OW, ex.OH)
	}
	if x, y := at(ex, 16, 24); !near(x, 24) || !near(y, 16) {
		t.Errorf("expanded: the output's centre reads input (%g, %g), want its centre (24, 16)", x, y)
	}
}
