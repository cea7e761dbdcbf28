package transform

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

func img(c, h, w int, f func(c, y, x int) uint8) *Image {
	m := &Image{}
	m.Resize(c, h, w)
	for ci := range c {
		for y := range h {
			for x := range w {
				m.Pix[(ci*h+y)*w+x] = f(ci, y, x)
			}
		}
	}
	return m
}

// TestResizeHandComputed checks the antialiased bilinear filter against
// weights worked out by hand, and that a constant image stays constant
// under every filter.
func TestResizeHandComputed(t *testing.T) {
	// One row 0, 40, 80, 120 shrunk to 2 columns: output 0 centres at
	// 1.0 with the triangle stretched ×2, so pixels 0, 1, 2 weigh
	// 0.75, 0.75, 0.25 (sum 1.75): (0·.75 + 40·.75 + 80·.25)/1.75 = 28.57.
	src := img(1, 1, 4, func(_, _, x int) uint8 { return uint8(40 * x) })
	var dst Image
	resample(&dst, src, 0, 0, 1, 4, 1, 2, Bilinear)
	// Output 1 centres at 3.0: pixels 1, 2, 3 weigh .25, .75, .75:
	// (40·.25 + 80·.75 + 120·.75)/1.75 = 91.43.
	if dst.Pix[0] != 29 || dst.Pix[1] != 91 {
		t.Errorf("bilinear 4→2: %v, want [29 91]", dst.Pix)
	}
	// Doubling 0, 100: output centres at 0.25, 0.75, 1.25, 1.75 of the
	// source → 0, 25 (0.75·0+0.25·100), 75, 100 after clamping at the edges.
	src = img(1, 1, 2, func(_, _, x int) uint8 { return uint8(100 * x) })
	resample(&dst, src, 0, 0, 1, 2, 1, 4, Bilinear)
	if want := []uint8{0, 25, 75, 100}; !bytes.Equal(dst.Pix, want) {
		t.Errorf("bilinear 2→4: %v, want %v", dst.Pix, want)
	}
	flat := img(3, 37, 53, func(c, _, _ int) uint8 { return uint8(50 + 60*c) })
	for _, f := range []Interp{Bilinear, Bicubic, Lanczos} {
		for _, s := range [][2]int{{10, 14}, {37, 53}, {80, 100}} {
			resample(&dst, flat, 0, 0, 37, 53, s[0], s[1], f)
			for c := range 3 {
				for _, v := range dst.Plane(c) {
					if v != uint8(50+60*c) {
						t.Fatalf("%s to %v: constant %d became %d", f, s, 50+60*c, v)
					}
				}
			}
		}
	}
}

func TestResizeAndCenterCropShapes(t *testing.T) {
	r, _ := Resize(256, Bilinear)
	for _, c := range []struct{ h, w, wh, ww int }{{375, 500, 256, 341}, {500, 375, 341, 256}, {256, 256, 256, 256}} {
		src := img(3, c.h, c.w, func(int, int, int) uint8 { return 7 })
		var dst Image
		out := &dst
		if !r.Apply(&dst, src, nil) {
			out = src
		}
		if out.H != c.wh || out.W != c.ww {
			t.Errorf("resize shorter=256 of %dx%d: %dx%d, want %dx%d", c.h, c.w, out.H, out.W, c.wh, c.ww)
		}
	}
	// 5×7 → 3: top-left at round(1), round(2) = (1, 2).
	cc, _ := CenterCrop(3)
	src := img(1, 5, 7, func(_, y, x int) uint8 { return uint8(10*y + x) })
	var dst Image
	cc.Apply(&dst, src, nil)
	if want := []uint8{12, 13, 14, 22, 23, 24, 32, 33, 34}; !bytes.Equal(dst.Pix, want) {
		t.Errorf("center_crop 3 of 5x7: %v, want %v", dst.Pix, want)
	}
	// Smaller than the crop: zero padding around the image.
	cc, _ = CenterCrop(4)
	cc.Apply(&dst, img(1, 2, 2, func(int, int, int) uint8 { return 9 }), nil)
	if want := []uint8{0, 0, 0, 0, 0, 9, 9, 0, 0, 9, 9, 0, 0, 0, 0, 0}; !bytes.Equal(dst.Pix, want) {
		t.Errorf("center_crop 4 of 2x2: %v", dst.Pix)
	}
}

// TestRandomResizedCropDistribution: over many draws, every window lies in
// the image with its area and aspect ratio in the requested ranges; on a
// square image the log aspect ratio is symmetric about 0; and areas that
// always fit (≤ 3/4 of the image here) are uniform, since draws that do not
// fit are redrawn whole. Windows that can never fit fall back to the
// centre crop torchvision takes.
func TestRandomResizedCropDistribution(t *testing.T) {
	op, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, Bilinear)
	for _, size := range [][2]int{{375, 500}, {500, 500}} {
		h, w := size[0], size[1]
		const n = 20000
		below, fits, small := 0, 0, 0
		var mean float64
		for i := range n {
			r := NewRand(1, 0, int64(i))
			y, x, ch, cw := op.Window(h, w, &r)
			if y < 0 || x < 0 || y+ch > h || x+cw > w || ch < 1 || cw < 1 {
				t.Fatalf("window %d,%d %dx%d outside %dx%d", y, x, ch, cw, h, w)
			}
			a := float64(ch*cw) / float64(h*w)
			ar := float64(cw) / float64(ch)
			// Rounding to whole pixels moves values slightly past a range.
			if a < 0.08*0.97 || a > 1 || ar < 0.75*0.97 || ar > 4.0/3*1.03 {
				t.Fatalf("%dx%d draw %d: area %.3f, aspect %.3f", h, w, i, a, ar)
			}
			mean += math.Log(ar) / n
			if ar < 1 {
				below++
			}
			if a < 0.74 {
				fits++
				if a < 0.31 {
					small++
				}
			}
		}
		if h != w {
			continue
		}
		if math.Abs(mean) > 0.01 || math.Abs(float64(below)/n-0.5) > 0.02 {
			t.Errorf("square: log aspect mean %.4f, %.3f below 1", mean, float64(below)/n)
		}
		if want := (0.31 - 0.08) / (0.74 - 0.08); math.Abs(float64(small)/float64(fits)-want) > 0.02 {
			t.Errorf("areas below 0.74: %.3f of them below 0.31, uniform gives %.3f", float64(small)/float64(fits), want)
		}
	}
	// An area no window of these ratios can have: the fallback is the
	// centre crop, clamped to the ratio range (here to width/height 2).
	wide, _ := RandomResizedCrop(32, [2]float64{0.99, 1}, [2]float64{2, 3}, Bilinear)
	r := NewRand(1, 0, 0)
	if y, x, ch, cw := wide.Window(100, 100, &r); y != 25 || x != 0 || ch != 50 || cw != 100 {
		t.Errorf("fallback window %d,%d %dx%d, want 25,0 50x100", y, x, ch, cw)
	}
	var dst Image
	op.Apply(&dst, img(3, 375, 500, func(int, int, int) uint8 { return 1 }), &r)
	if dst.Shape() != (Shape{3, 224, 224}) {
		t.Errorf("output %v", dst.Shape())
	}
}

func TestColorJitter(t *testing.T) {
	src := img(3, 4, 4, func(c, y, x int) uint8 { return uint8(20*c + 10*y + x) })
	none, _ := ColorJitter(0, 0, 0, 0)
	var dst Image
	r := NewRand(1, 0, 0)
	if none.Apply(&dst, src, &r) {
		t.Error("color_jitter with no jitter changed the image")
	}
	op, _ := ColorJitter(0.4, 0.4, 0.4, 0)
	changed := 0
	for i := range 50 {
		r := NewRand(1, 0, int64(i))
		if op.Apply(&dst, src, &r) && !bytes.Equal(dst.Pix, src.Pix) {
			changed++
		}
	}
	if changed < 45 {
		t.Errorf("only %d of 50 jitters changed the image", changed)
	}
	// Saturation alone blends each pixel with its own grey level, which
	// therefore stays (to rounding); brightness alone scales every pixel by
	// one factor.
	sat, _ := ColorJitter(0, 0, 0.9, 0)
	bri, _ := ColorJitter(0.5, 0, 0, 0)
	for i := range 20 {
		r := NewRand(2, 0, int64(i))
		if !sat.Apply(&dst, src, &r) {
			continue
		}
		for p := range 16 {
			if clipped := slices.ContainsFunc([]uint8{dst.Pix[p], dst.Pix[16+p], dst.Pix[32+p]}, func(v uint8) bool { return v == 0 || v == 255 }); clipped {
				continue // clamping moves the grey level
			}
			before := luma(src.Pix[p], src.Pix[16+p], src.Pix[32+p])
			after := luma(dst.Pix[p], dst.Pix[16+p], dst.Pix[32+p])
			if math.Abs(float64(before-after)) > 1 {
				t.Fatalf("saturation moved pixel %d's grey from %.1f to %.1f", p, before, after)
			}
		}
		r = NewRand(3, 0, int64(i))
		bri.Apply(&dst, src, &r)
		f := float64(dst.Pix[47]) / float64(src.Pix[47])
		for p := 20; p < 48; p++ {
			if want := float64(src.Pix[p]) * f; math.Abs(float64(dst.Pix[p])-want) > 1.5 && want < 254 {
				t.Fatalf("brightness: value %d is %d, want about %.1f (factor %.3f)", p, dst.Pix[p], want, f)
			}
		}
	}
	if _, err := ColorJitter(-1, 0, 0, 0); err == nil {
		t.Error("negative brightness accepted")
	}
}

// TestDecode decodes PNGs exactly, JPEGs within a few levels of Go's
// image/jpeg, greyscale into three equal channels, and refuses bad
// bytes with ErrDecode.
func TestDecode(t *testing.T) {
	rgba := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	for y := range 3 {
		for x := range 5 {
			rgba.Set(x, y, color.NRGBA{uint8(50 * x), uint8(80 * y), 7, 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, rgba)
	var m Image
	if err := Decode(&m, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if m.Shape() != (Shape{3, 3, 5}) || m.Pix[0*15+1*5+2] != 100 || m.Pix[1*15+2*5+0] != 160 || m.Pix[2*15+0] != 7 {
		t.Errorf("png: %v %v", m.Shape(), m.Pix)
	}
	gray := image.NewGray(image.Rect(0, 0, 4, 4))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i * 10)
	}
	buf.Reset()
	png.Encode(&buf, gray)
	Decode(&m, buf.Bytes())
	if !bytes.Equal(m.Plane(0), gray.Pix) || !bytes.Equal(m.Plane(2), gray.Pix) {
		t.Errorf("grey png: %v", m.Pix)
	}
	// A JPEG: smooth, so that chroma upsampling methods differ little.
	smooth := image.NewNRGBA(image.Rect(0, 0, 21, 13))
	for y := range 13 {
		for x := range 21 {
			smooth.Set(x, y, color.NRGBA{uint8(60 + 5*x), uint8(90 + 6*y), uint8(40 + 2*x + 3*y), 255})
		}
	}
	buf.Reset()
	jpeg.Encode(&buf, smooth, &jpeg.Options{Quality: 90})
	if err := Decode(&m, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	// JPEGs decode to libjpeg-turbo's pixels: within a few levels of Go's.
	var ref Image
	if err := decodeGo(&ref, buf.Bytes()); err != nil || ref.Shape() != m.Shape() {
		t.Fatalf("jpeg: %v, %s vs %s", err, m.Shape(), ref.Shape())
	}
	if d := meanAbsDiff(m.Pix, ref.Pix); d > 1.5 {
		t.Errorf("jpeg: %.2f levels from image/jpeg on average", d)
	}
	for name, data := range map[string][]byte{
		"empty": nil, "text": []byte("hello"), "truncated jpeg": buf.Bytes()[:len(buf.Bytes())/2],
		"png header only": []byte("\x89PNG\r\n\x1a\n"),
	} {
		if err := Decode(&m, data); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDecodeRealImageNet decodes the ImageNet sample, greyscale ones
// included, into RGB of the files' sizes.
func TestDecodeRealImageNet(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	files, _ := filepath.Glob(filepath.Join(dir, "*.JPEG"))
	greys := 0
	var m Image
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := Decode(&m, data); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cfg, _, _ := image.DecodeConfig(bytes.NewReader(data))
		if m.C != 3 || m.W != cfg.Width || m.H != cfg.Height {
			t.Fatalf("%s: %v, file says %dx%d", f, m.Shape(), cfg.Width, cfg.Height)
		}
		if cfg.ColorModel == color.GrayModel {
			greys++
			if !bytes.Equal(m.Plane(0), m.Plane(1)) {
				t.Errorf("%s: greyscale decoded with unequal channels", f)
			}
		}
	}
	if greys == 0 {
		t.Log("no greyscale JPEG in the sample")
	}
}

// TestResampleKernelMatchesGo checks the AVX2 resampling kernels against
// the Go loops bit for bit, over random images, windows, output sizes
// (multiples of eight and not) and filters, shrinking and enlarging.
func TestResampleKernelMatchesGo(t *testing.T) {
	if !resampleKernel {
		t.Skip("no AVX2 resampling kernel in this build or on this CPU")
	}
	defer func() { resampleKernel = true }()
	r := NewRand(11, 0, 0)
	var a, b Image
	for trial := range 300 {
		h, w := 1+r.Intn(300), 1+r.Intn(300)
		src := img(1+2*r.Intn(2), h, w, func(c, y, x int) uint8 { return uint8(r.Intn(256)) })
		wy, wx := r.Uniform(0, float64(h)/2), r.Uniform(0, float64(w)/2)
		wh, ww := r.Uniform(0.5, float64(h)-wy), r.Uniform(0.5, float64(w)-wx)
		oh, ow := 1+r.Intn(260), 1+r.Intn(260)
		f := Interp(r.Intn(3))
		resampleKernel = true
		resample(&a, src, wy, wx, wh, ww, oh, ow, f)
		resampleKernel = false
		resample(&b, src, wy, wx, wh, ww, oh, ow, f)
		if !bytes.Equal(a.Pix, b.Pix) {
			t.Fatalf("trial %d (%dx%d window %.1f,%.1f %.1fx%.1f to %dx%d %s): AVX2 and Go differ", trial, w, h, wx, wy, ww, wh, ow, oh, f)
		}
	}
}
