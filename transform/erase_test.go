package transform

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRandomErasingMatchesTorchvision erases the rectangles of
// testdata/erase.txt (made by gen_erase.py with torchvision 0.14's F.erase
// on a float tensor in [0,1]) from the same uint8 input and compares every
// pixel: inside the rectangle the level must be torchvision's value within
// half a step of 255 (the rounding to uint8), outside it must be the input.
func TestRandomErasingMatchesTorchvision(t *testing.T) {
	f, err := os.Open("testdata/erase.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	cases := 0
	for sc.Scan() {
		head := strings.Fields(sc.Text())
		if len(head) < 9 || head[0] != "case" || !sc.Scan() {
			t.Fatalf("bad case line %q", sc.Text())
		}
		var n [7]int
		for i := range n {
			n[i], _ = strconv.Atoi(head[1+i])
		}
		c, h, w, y, x, eh, ew := n[0], n[1], n[2], n[3], n[4], n[5], n[6]
		value, err := ParseEraseValue(strings.Join(head[8:], ","))
		if err != nil {
			t.Fatal(err)
		}
		op, err := RandomErasing(1, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, value)
		if err != nil {
			t.Fatal(err)
		}
		src := &Image{C: c, H: h, W: w, Pix: make([]uint8, c*h*w)}
		for ch := range c {
			for yy := range h {
				for xx := range w {
					src.Pix[(ch*h+yy)*w+xx] = uint8((ch*131 + yy*17 + xx*7 + yy*xx) % 256)
				}
			}
		}
		before := bytes.Clone(src.Pix)
		var dst Image
		var r Rand
		op.erase(&dst, src, y, x, eh, ew, &r)
		want := strings.Fields(sc.Text())
		if len(want) != c*h*w || dst.Shape() != src.Shape() {
			t.Fatalf("%v: %d reference values, output %v", head, len(want), dst.Shape())
		}
		if !bytes.Equal(src.Pix, before) {
			t.Fatalf("%v: the source was modified", head)
		}
		for i, s := range want {
			ref, _ := strconv.ParseFloat(s, 64)
			got := float64(dst.Pix[i]) / 255
			if math.Abs(got-ref) > 0.5/255+1e-6 {
				t.Errorf("%v: value %d (c,y,x)=(%d,%d,%d) is %.6f, torchvision %.6f", head, i, i/(h*w), i/w%h, i%w, got, ref)
			}
		}
		cases++
	}
	if cases < 4 {
		t.Fatalf("read %d cases from testdata/erase.txt, want 4", cases)
	}
}

// TestRandomErasingDraw checks the rectangles drawn over many samples: p
// fires about p of the time, every rectangle lies strictly inside the
// image, its area fraction and aspect ratio fall in scale and ratio (up to
// the rounding of the sides), and Apply erases exactly the drawn rectangle.
func TestRandomErasingDraw(t *testing.T) {
	scale, ratio := [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}
	op, err := RandomErasing(0.5, scale, ratio, EraseValue{Levels: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	const n, h, w = 4000, 60, 80
	src := &Image{C: 3, H: h, W: w, Pix: make([]uint8, 3*h*w)}
	var dst Image
	fired := 0
	for i := range n {
		r := NewRand(7, 0, int64(i))
		r2 := r
		y, x, eh, ew, ok := op.Window(h, w, &r)
		if op.Apply(&dst, src, &r2) != ok {
			t.Fatalf("sample %d: Apply and Window disagree", i)
		}
		if !ok {
			continue
		}
		fired++
		if y < 0 || x < 0 || eh >= h || ew >= w || y+eh > h || x+ew > w {
			t.Fatalf("sample %d: rectangle %dx%d at (%d,%d) outside %dx%d", i, eh, ew, y, x, h, w)
		}
		// Sides are rounded, so bound the unrounded ones by ±0.5.
		lo := (float64(eh) - 0.5) * (float64(ew) - 0.5) / (h * w)
		hi := (float64(eh) + 0.5) * (float64(ew) + 0.5) / (h * w)
		if hi < scale[0] || lo > scale[1] {
			t.Errorf("sample %d: %dx%d is outside the area fractions %v", i, eh, ew, scale)
		}
		if (float64(eh)+0.5)/(float64(ew)-0.5) < ratio[0] || (float64(eh)-0.5)/(float64(ew)+0.5) > ratio[1] {
			t.Errorf("sample %d: %dx%d is outside the aspect ratios %v", i, eh, ew, ratio)
		}
		erased := 0
		for _, v := range dst.Pix {
			if v == 255 {
				erased++
			}
		}
		if erased != 3*eh*ew {
			t.Fatalf("sample %d: %d values erased, want 3×%d×%d", i, erased, eh, ew)
		}
	}
	if fired < n*45/100 || fired > n*55/100 {
		t.Errorf("p=0.5 fired %d times in %d", fired, n)
	}
}

// TestRandomErasingRandomValue: value=random fills the rectangle from the
// sample's generator, the same for the same key and different for another,
// and leaves the rest of the image alone.
func TestRandomErasingRandomValue(t *testing.T) {
	op, err := RandomErasing(1, [2]float64{0.2, 0.3}, [2]float64{0.5, 2}, EraseValue{Random: true})
	if err != nil {
		t.Fatal(err)
	}
	src := &Image{C: 3, H: 40, W: 50, Pix: bytes.Repeat([]byte{7}, 3*40*50)}
	var a, b, c Image
	ra, rb, rc := NewRand(1, 0, 5), NewRand(1, 0, 5), NewRand(1, 0, 6)
	if !op.Apply(&a, src, &ra) || !op.Apply(&b, src, &rb) || !op.Apply(&c, src, &rc) {
		t.Fatal("p=1 did not erase")
	}
	if !bytes.Equal(a.Pix, b.Pix) {
		t.Error("the same key erased differently")
	}
	if bytes.Equal(a.Pix, c.Pix) {
		t.Error("two samples erased alike")
	}
	r := NewRand(1, 0, 5)
	y, x, eh, ew, _ := op.Window(40, 50, &r)
	levels := map[uint8]bool{}
	for ch := range 3 {
		for yy := range 40 {
			for xx := range 50 {
				v := a.Pix[(ch*40+yy)*50+xx]
				if yy >= y && yy < y+eh && xx >= x && xx < x+ew {
					levels[v] = true
				} else if v != 7 {
					t.Fatalf("(%d,%d,%d) outside the rectangle changed to %d", ch, yy, xx, v)
				}
			}
		}
	}
	if len(levels) < 100 {
		t.Errorf("the random fill took %d distinct levels, want near 256", len(levels))
	}
}

func TestRandomErasingParams(t *testing.T) {
	zero := EraseValue{Levels: []float64{0}}
	for _, c := range []struct {
		p            float64
		scale, ratio [2]float64
		value        EraseValue
	}{
		{-0.1, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, zero},
		{0.5, [2]float64{0, 0.33}, [2]float64{0.3, 3.3}, zero},
		{0.5, [2]float64{0.4, 0.3}, [2]float64{0.3, 3.3}, zero},
		{0.5, [2]float64{0.02, 1.5}, [2]float64{0.3, 3.3}, zero},
		{0.5, [2]float64{0.02, 0.33}, [2]float64{0, 3.3}, zero},
		{0.5, [2]float64{0.02, 0.33}, [2]float64{3.3, 0.3}, zero},
		{0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, EraseValue{Levels: []float64{2}}},
		{0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, EraseValue{Levels: []float64{0, 1}}},
	} {
		if _, err := RandomErasing(c.p, c.scale, c.ratio, c.value); !errors.Is(err, ErrParam) {
			t.Errorf("RandomErasing(%g, %v, %v, %s): %v, want ErrParam", c.p, c.scale, c.ratio, c.value, err)
		}
	}
	for _, s := range []string{"", "x", "1.5", "0,0", "0,0,0,0", "-0.1"} {
		if _, err := ParseEraseValue(s); !errors.Is(err, ErrParam) {
			t.Errorf("ParseEraseValue(%q): %v, want ErrParam", s, err)
		}
	}
	three, _ := RandomErasing(0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, EraseValue{Levels: []float64{0.5, 0.5, 0.5}})
	if _, err := three.OutShape(Shape{C: 1, H: 8, W: 8}); err == nil {
		t.Error("three levels accepted a grey image")
	}
}

// BenchmarkRandomErasing erases ImageNet-sized images with every fill; it
// allocates nothing per image once dst has grown.
func BenchmarkRandomErasing(b *testing.B) {
	src := &Image{C: 3, H: 224, W: 224, Pix: make([]uint8, 3*224*224)}
	for _, v := range []string{"0", "random"} {
		b.Run("value="+v, func(b *testing.B) {
			val, _ := ParseEraseValue(v)
			op, err := RandomErasing(1, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, val)
			if err != nil {
				b.Fatal(err)
			}
			var dst Image
			b.SetBytes(int64(len(src.Pix)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := NewRand(1, 0, int64(i))
				op.Apply(&dst, src, &r)
			}
		})
	}
}
