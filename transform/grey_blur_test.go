package transform

import (
	"os"
	"testing"
)

// formulaImage is the c×h×w image testdata/gen_gray_blur.py builds.
func formulaImage(c, h, w int) *Image {
	m := &Image{}
	m.Resize(c, h, w)
	i := 0
	for ch := 0; ch < c; ch++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.Pix[i] = uint8((x*x*37 + y*y*11 + x*y*5 + ch*89 + x*13 + y*7) % 256)
				i++
			}
		}
	}
	return m
}

// TestGrayscaleMatchesTorchvision: the grey level of every pixel is
// torchvision's rgb_to_grayscale on the same uint8 image, exactly, in all
// three channels, and on the colours where its float32 sum and truncation
// give another grey than float64, rounding or 0.299 would.
func TestGrayscaleMatchesTorchvision(t *testing.T) {
	want, err := os.ReadFile("testdata/gray.bin")
	if err != nil {
		t.Fatal(err)
	}
	var dst Image
	grey(&dst, formulaImage(3, 32, 32))
	if len(want) != 32*32 {
		t.Fatalf("testdata/gray.bin: %d bytes, want %d", len(want), 32*32)
	}
	for c := 0; c < 3; c++ {
		for i, v := range dst.Plane(c) {
			if v != want[i] {
				t.Fatalf("channel %d pixel %d: %d, torchvision %d", c, i, v, want[i])
			}
		}
	}
	edges, err := os.ReadFile("testdata/gray_edges.bin")
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) == 0 || len(edges)%4 != 0 {
		t.Fatalf("testdata/gray_edges.bin: %d bytes, want 4-byte records", len(edges))
	}
	px := &Image{}
	px.Resize(3, 1, 1)
	for i := 0; i < len(edges); i += 4 {
		copy(px.Pix, edges[i:i+3])
		grey(&dst, px)
		if dst.Pix[0] != edges[i+3] {
			t.Fatalf("rgb %v: grey %d, torchvision %d", edges[i:i+3], dst.Pix[0], edges[i+3])
		}
	}
}

// TestGaussianBlurMatchesTorchvision: blur is torchvision's gaussian_blur
// on the same uint8 image, kernel and sigma, within 1 per value.
func TestGaussianBlurMatchesTorchvision(t *testing.T) {
	data, err := os.ReadFile("testdata/blur.bin")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		kernel int
		sigma  float64
		h, w   int
	}{ // as BLUR in testdata/gen_gray_blur.py
		{23, 0.1, 24, 21}, {23, 2.0, 24, 21}, {23, 1.37, 24, 21}, {5, 0.8, 24, 21}, {3, 5.0, 24, 21},
	}
	var dst Image
	for _, c := range cases {
		n := 3 * c.h * c.w
		if len(data) < n {
			t.Fatalf("testdata/blur.bin too short for kernel=%d sigma=%g", c.kernel, c.sigma)
		}
		want := data[:n]
		data = data[n:]
		src := formulaImage(3, c.h, c.w)
		blur(&dst, src, c.kernel, c.sigma)
		off := 0
		for i, v := range dst.Pix {
			if d := int(v) - int(want[i]); d < -1 || d > 1 {
				t.Fatalf("kernel=%d sigma=%g value %d: %d, torchvision %d", c.kernel, c.sigma, i, v, want[i])
			}
			if v != want[i] {
				off++
			}
		}
		t.Logf("kernel=%d sigma=%g: %d of %d values off by 1", c.kernel, c.sigma, off, n)
	}
	if len(data) != 0 {
		t.Fatalf("testdata/blur.bin: %d bytes beyond the cases", len(data))
	}
}

// TestGrayscaleAndBlurDraws: grayscale fires at its probability and leaves a
// 1-channel image alone; both ops reject bad parameters; a blur with a
// sigma range draws a different sigma for different samples.
func TestGrayscaleAndBlurDraws(t *testing.T) {
	src := formulaImage(3, 16, 16)
	op, err := Grayscale(0.3)
	if err != nil {
		t.Fatal(err)
	}
	var dst Image
	fired := 0
	for i := range 2000 {
		r := NewRand(1, 0, int64(i))
		if op.Apply(&dst, src, &r) {
			fired++
		}
	}
	if fired < 500 || fired > 700 {
		t.Errorf("grayscale p=0.3 fired %d times in 2000", fired)
	}
	one := formulaImage(1, 16, 16)
	all, _ := Grayscale(1)
	if r := NewRand(1, 0, 0); all.Apply(&dst, one, &r) {
		t.Error("grayscale changed a 1-channel image")
	}
	if _, err := all.OutShape(Shape{C: 4, H: 8, W: 8}); err == nil {
		t.Error("grayscale accepted 4 channels")
	}
	for _, p := range []float64{-0.1, 1.5} {
		if _, err := Grayscale(p); err == nil {
			t.Errorf("grayscale p=%g accepted", p)
		}
	}
	for _, k := range []int{0, 4, MaxBlurKernel + 2} {
		if _, err := GaussianBlur(k, [2]float64{1, 1}); err == nil {
			t.Errorf("gaussian_blur kernel=%d accepted", k)
		}
	}
	for _, s := range [][2]float64{{0, 1}, {2, 1}} {
		if _, err := GaussianBlur(3, s); err == nil {
			t.Errorf("gaussian_blur sigma=%v accepted", s)
		}
	}
	b, err := GaussianBlur(9, [2]float64{0.1, 3})
	if err != nil {
		t.Fatal(err)
	}
	var d0, d1 Image
	r0, r1 := NewRand(1, 0, 0), NewRand(1, 0, 1)
	b.Apply(&d0, src, &r0)
	b.Apply(&d1, src, &r1)
	if string(d0.Pix) == string(d1.Pix) {
		t.Error("two samples drew the same blur")
	}
}

// TestGaussianBlurSmallImages: images narrower or shorter than the kernel's
// half (which torchvision refuses) reflect periodically, a constant image
// stays constant, and an empty one is no error.
func TestGaussianBlurSmallImages(t *testing.T) {
	var dst Image
	for _, hw := range [][2]int{{1, 1}, {1, 9}, {7, 1}, {3, 30}, {0, 5}, {5, 0}} {
		src := &Image{}
		src.Resize(3, hw[0], hw[1])
		for i := range src.Pix {
			src.Pix[i] = 201
		}
		for _, sigma := range []float64{0.1, 1, 8} {
			blur(&dst, src, 23, sigma)
			if dst.Shape() != src.Shape() {
				t.Fatalf("%v: blurred to %v", src.Shape(), dst.Shape())
			}
			for i, v := range dst.Pix {
				if v != 201 {
					t.Fatalf("%v sigma=%g: value %d is %d, want 201", src.Shape(), sigma, i, v)
				}
			}
		}
	}
}

func BenchmarkGrayscale(b *testing.B) {
	src := formulaImage(3, 224, 224)
	var dst Image
	b.ReportAllocs()
	b.SetBytes(int64(len(src.Pix)))
	for range b.N {
		grey(&dst, src)
	}
}

func BenchmarkGaussianBlur23(b *testing.B) {
	src := formulaImage(3, 224, 224)
	op, _ := GaussianBlur(23, [2]float64{0.1, 2})
	var dst Image
	b.ReportAllocs()
	b.SetBytes(int64(len(src.Pix)))
	for i := range b.N {
		r := NewRand(1, 0, int64(i))
		op.Apply(&dst, src, &r)
	}
}
