package transform

import (
	"fmt"
	"math"
	"testing"
)

// testImage returns a C×H×W image whose pixels encode their own coordinates.
func testImage(c, h, w int) *Image {
	m := &Image{}
	m.Resize(c, h, w)
	for i := range m.Pix {
		m.Pix[i] = uint8(i*7 + 3)
	}
	return m
}

// refWindow is the obvious per-pixel definition window must match.
func refWindow(src *Image, oy, ox, h, w int, f Fill, mirror bool) *Image {
	out := &Image{}
	out.Resize(src.C, h, w)
	for c := 0; c < src.C; c++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				wx := x
				if mirror {
					wx = w - 1 - x
				}
				sy, sx := f.source(oy+y, src.H), f.source(ox+wx, src.W)
				var v uint8
				if sy >= 0 && sx >= 0 {
					v = src.Pix[(c*src.H+sy)*src.W+sx]
				}
				out.Pix[(c*h+y)*w+x] = v
			}
		}
	}
	return out
}

func TestWindowMatchesReference(t *testing.T) {
	src := testImage(3, 7, 5)
	for _, f := range []Fill{FillZero, FillReflect, FillEdge, FillWrap} {
		for _, mirror := range []bool{false, true} {
			for oy := -9; oy <= 9; oy += 3 {
				for ox := -8; ox <= 8; ox++ {
					for _, hw := range [][2]int{{4, 4}, {7, 5}, {9, 11}, {1, 1}} {
						var got Image
						window(&got, src, oy, ox, hw[0], hw[1], f, mirror)
						want := refWindow(src, oy, ox, hw[0], hw[1], f, mirror)
						if string(got.Pix) != string(want.Pix) {
							t.Fatalf("fill=%s mirror=%v oy=%d ox=%d %v: got %v want %v", f, mirror, oy, ox, hw, got.Pix, want.Pix)
						}
					}
				}
			}
		}
	}
}

func TestFillSource(t *testing.T) {
	// A row "abcd" (indices 0..3) extended two pixels either side.
	cases := []struct {
		f    Fill
		want []int
	}{
		{FillZero, []int{-1, -1, 0, 1, 2, 3, -1, -1}},
		{FillReflect, []int{2, 1, 0, 1, 2, 3, 2, 1}},
		{FillEdge, []int{0, 0, 0, 1, 2, 3, 3, 3}},
		{FillWrap, []int{2, 3, 0, 1, 2, 3, 0, 1}},
	}
	for _, c := range cases {
		for i, want := range c.want {
			if got := c.f.source(i-2, 4); got != want {
				t.Errorf("%s: source(%d, 4) = %d, want %d", c.f, i-2, got, want)
			}
		}
	}
	if got := FillReflect.source(-3, 1); got != 0 {
		t.Errorf("reflect on a 1-pixel row = %d, want 0", got)
	}
}

func TestRandomCropHandComputed(t *testing.T) {
	// 1×2×2 image [1 2; 3 4], pad 1 with zeros, crop 2×2: every crop position
	// must appear and nothing else.
	src := &Image{Pix: []uint8{1, 2, 3, 4}, C: 1, H: 2, W: 2}
	op, err := RandomCrop(2, 1, FillZero)
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]bool{}
	padded := [4][4]uint8{{0, 0, 0, 0}, {0, 1, 2, 0}, {0, 3, 4, 0}, {0, 0, 0, 0}}
	for y := 0; y < 3; y++ {
		for x := 0; x < 3; x++ {
			valid[fmt.Sprint([]uint8{padded[y][x], padded[y][x+1], padded[y+1][x], padded[y+1][x+1]})] = true
		}
	}
	seen := map[string]int{}
	var dst Image
	for i := range 9000 {
		r := NewRand(1, 0, int64(i))
		op.Apply(&dst, src, &r)
		k := fmt.Sprint(dst.Pix)
		if !valid[k] {
			t.Fatalf("crop produced %s, not a window of the padded image", k)
		}
		seen[k]++
	}
	if len(seen) != 9 {
		t.Fatalf("saw %d distinct crops, want all 9", len(seen))
	}
	for k, n := range seen {
		if n < 800 || n > 1200 {
			t.Errorf("crop %s drawn %d times of 9000, want about 1000", k, n)
		}
	}
}

func TestFlip(t *testing.T) {
	src := &Image{Pix: []uint8{1, 2, 3, 4, 5, 6}, C: 1, H: 2, W: 3}
	h, _ := Flip(Horizontal, 1)
	v, _ := Flip(Vertical, 1)
	never, _ := Flip(Horizontal, 0)
	var dst Image
	r := NewRand(0, 0, 0)
	if !h.Apply(&dst, src, &r) || fmt.Sprint(dst.Pix) != "[3 2 1 6 5 4]" {
		t.Errorf("horizontal flip = %v", dst.Pix)
	}
	if !v.Apply(&dst, src, &r) || fmt.Sprint(dst.Pix) != "[4 5 6 1 2 3]" {
		t.Errorf("vertical flip = %v", dst.Pix)
	}
	if never.Apply(&dst, src, &r) {
		t.Error("flip with p=0 fired")
	}
	half, _ := Flip(Horizontal, 0.5)
	fired := 0
	for i := range 10000 {
		r := NewRand(3, 1, int64(i))
		if half.Apply(&dst, src, &r) {
			fired++
		}
	}
	if fired < 4700 || fired > 5300 {
		t.Errorf("p=0.5 fired %d of 10000", fired)
	}
}

func TestShiftRange(t *testing.T) {
	src := &Image{C: 1, H: 1, W: 20}
	src.Resize(1, 1, 20)
	for i := range src.Pix {
		src.Pix[i] = uint8(i + 1)
	}
	op, _ := Shift(0.1, 0, FillZero) // at most 2 pixels
	seen := map[int]bool{}
	var dst Image
	for i := range 2000 {
		r := NewRand(0, 0, int64(i))
		op.Apply(&dst, src, &r)
		// Find the shift from where pixel value 10 (index 9) went.
		for x, v := range dst.Pix {
			if v == 10 {
				seen[x-9] = true
			}
		}
	}
	if len(seen) != 5 || !seen[-2] || !seen[2] || seen[3] || seen[-3] {
		t.Errorf("shifts seen %v, want exactly -2..2", seen)
	}
	px, _ := Shift(3, 0, FillEdge) // ≥ 1: pixels
	if m := maxShift(px.Width, 20); m != 3 {
		t.Errorf("width=3 gives max shift %d, want 3 pixels", m)
	}
}

func TestConstructorsRejectBadParams(t *testing.T) {
	for name, err := range map[string]error{
		"size=0": func() error { _, err := RandomCrop(0, 4, FillZero); return err }(),
		"pad=-1": func() error { _, err := RandomCrop(32, -1, FillZero); return err }(),
		"p=1.5":  func() error { _, err := Flip(Horizontal, 1.5); return err }(),
		"p=NaN":  func() error { _, err := Flip(Horizontal, math.NaN()); return err }(),
		"std=0":  func() error { _, err := Normalize([]float64{0.5}, []float64{0}); return err }(),
		"shift":  func() error { _, err := Shift(-0.1, 0, FillZero); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestTensorLayouts(t *testing.T) {
	img := testImage(3, 2, 4)
	norm, _ := Normalize([]float64{0.5, 0.25, 0}, []float64{0.5, 1, 2})
	want := func(c, y, x int) float64 {
		v := float64(img.Pix[(c*2+y)*4+x]) / 255
		return (v - norm.Mean[c]) / norm.Std[c]
	}
	for _, layout := range []Layout{NCHW, NHWC} {
		for _, dt := range []DType{Float32, Float16, Uint8} {
			n := norm
			if dt == Uint8 {
				n = nil
			}
			tt, err := ToTensor(layout, dt, n, img.Shape())
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, tt.SampleBytes())
			tt.Write(buf, img)
			for c := 0; c < 3; c++ {
				for y := 0; y < 2; y++ {
					for x := 0; x < 4; x++ {
						i := (c*2+y)*4 + x
						if layout == NHWC {
							i = (y*4+x)*3 + c
						}
						var got, exp float64
						switch dt {
						case Uint8:
							got, exp = float64(buf[i]), float64(img.Pix[(c*2+y)*4+x])
						case Float32:
							got, exp = float64(math.Float32frombits(le32(buf[4*i:]))), want(c, y, x)
						case Float16:
							got, exp = float64(Float16To32(uint16(buf[2*i])|uint16(buf[2*i+1])<<8)), want(c, y, x)
						}
						if math.Abs(got-exp) > 2e-3*math.Max(1, math.Abs(exp)) {
							t.Fatalf("%s %s (c=%d,y=%d,x=%d) = %g, want %g", layout, dt, c, y, x, got, exp)
						}
					}
				}
			}
		}
	}
	if _, err := ToTensor(NCHW, Uint8, norm, img.Shape()); err == nil {
		t.Error("uint8 with normalize accepted")
	}
	if _, err := ToTensor(NCHW, Float32, nil, Shape{3, 0, 0}); err == nil {
		t.Error("varying shape accepted")
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func TestFloat16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := Float16To32(uint16(h))
		if f != f { // NaN
			continue
		}
		if back := Float32To16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
	for _, c := range []struct {
		f float32
		h uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {1e6, 0x7c00}, {5.960464477539063e-08, 0x0001}, {1e-9, 0}} {
		if got := Float32To16(c.f); got != c.h {
			t.Errorf("Float32To16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

func TestRandKeyed(t *testing.T) {
	a, b := NewRand(1, 2, 3), NewRand(1, 2, 3)
	for range 10 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("equal keys gave different streams")
		}
	}
	first := map[uint64]string{}
	for _, k := range [][3]int{{1, 2, 3}, {2, 2, 3}, {1, 3, 3}, {1, 2, 4}} {
		r := NewRand(uint64(k[0]), k[1], int64(k[2]))
		v := r.Uint64()
		if prev, ok := first[v]; ok {
			t.Fatalf("keys %v and %s collide", k, prev)
		}
		first[v] = fmt.Sprint(k)
	}
	r := NewRand(9, 9, 9)
	for range 100000 {
		if n := r.Intn(7); n < 0 || n >= 7 {
			t.Fatalf("Intn(7) = %d", n)
		}
		if f := r.Float64(); f < 0 || f >= 1 {
			t.Fatalf("Float64() = %g", f)
		}
	}
}

func TestFuseIsExact(t *testing.T) {
	src := testImage(3, 9, 11)
	crop, _ := RandomCrop(8, 3, FillReflect)
	shift, _ := Shift(0.3, 0.2, FillEdge)
	flip, _ := Flip(Horizontal, 0.5)
	vflip, _ := Flip(Vertical, 0.5)
	for _, ops := range [][]Op{{crop, flip}, {shift, flip, vflip}, {vflip, crop, flip, shift}} {
		fused := NewChain(ops)
		if len(fused.ops) == len(ops) {
			t.Fatalf("%v: nothing fused", ops)
		}
		plain := &Chain{ops: ops}
		for i := range 500 {
			r1, r2 := NewRand(5, 1, int64(i)), NewRand(5, 1, int64(i))
			a, b := fused.Apply(src, r1), plain.Apply(src, r2)
			if string(a.Pix) != string(b.Pix) || a.Shape() != b.Shape() {
				t.Fatalf("%v sample %d: fused output differs", ops, i)
			}
		}
	}
}

func TestApplyToMatchesApply(t *testing.T) {
	src := testImage(3, 8, 8)
	crop, _ := RandomCrop(8, 2, FillReflect)
	flip, _ := Flip(Horizontal, 0.5)
	vflip, _ := Flip(Vertical, 0.5)
	for _, ops := range [][]Op{nil, {crop}, {crop, flip}, {flip}, {crop, vflip}} {
		c := NewChain(ops)
		for i := range 50 {
			r := NewRand(1, 0, int64(i))
			want := append([]byte(nil), c.Apply(src, r).Pix...)
			buf := make([]byte, 0, len(src.Pix))
			dst := &Image{Pix: buf}
			c.ApplyTo(dst, src, r)
			if string(dst.Pix) != string(want) || &dst.Pix[:1][0] != &buf[:1][0] {
				t.Fatalf("%v sample %d: ApplyTo differs from Apply or wrote elsewhere", ops, i)
			}
		}
	}
}

// TestWindowKernelMatchesReference checks the row kernel (where the CPU has
// one) and the pure-Go loop against the per-pixel definition, for windows
// wide enough to take the kernel, crossing every edge, with sources that
// are exactly their own allocation so that first and last rows must not
// borrow bytes from outside it.
func TestWindowKernelMatchesReference(t *testing.T) {
	saved := rowKernel
	defer func() { rowKernel = saved }()
	for _, kernel := range []bool{false, saved} {
		rowKernel = kernel
		for _, shape := range [][3]int{{3, 32, 32}, {1, 20, 16}, {2, 40, 48}} {
			src := testImage(shape[0], shape[1], shape[2])
			exact := &Image{Pix: append([]byte(nil), src.Pix...), C: src.C, H: src.H, W: src.W}
			for _, f := range []Fill{FillZero, FillReflect, FillEdge, FillWrap} {
				for _, mirror := range []bool{false, true} {
					for _, w := range []int{16, 32, 48} {
						for _, oy := range []int{-6, -1, 0, 3, shape[1] - 10} {
							for ox := -9; ox <= 9; ox += 3 {
								var got Image
								window(&got, exact, oy, ox, 10, w, f, mirror)
								want := refWindow(exact, oy, ox, 10, w, f, mirror)
								if string(got.Pix) != string(want.Pix) {
									t.Fatalf("kernel=%v %v fill=%s mirror=%v w=%d oy=%d ox=%d: differs from the reference", kernel, shape, f, mirror, w, oy, ox)
								}
							}
						}
					}
				}
			}
		}
	}
}
