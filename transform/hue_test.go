package transform

import (
	"os"
	"testing"
)

// hueColours is gen_hue.py's image: 4096 colours in a 3×1×4096 image,
// greys and colours with two equal channels among them.
func hueColours() *Image {
	img := &Image{}
	img.Resize(3, 1, 4096)
	for i := range 4096 {
		r, g, b := (i*37)%256, (i*101+7)%256, (i*11+i/16)%256
		if i%64 == 0 {
			g, b = r, r
		}
		if i%64 == 1 {
			b = g
		}
		img.Pix[i], img.Pix[4096+i], img.Pix[2*4096+i] = uint8(r), uint8(g), uint8(b)
	}
	return img
}

// TestHueMatchesTorchvision: color_jitter's hue shift is torchvision's
// adjust_hue on the same uint8 colours and factor, exactly.
func TestHueMatchesTorchvision(t *testing.T) {
	want, err := os.ReadFile("testdata/hue.bin")
	if err != nil {
		t.Fatal(err)
	}
	factors := []float32{-0.5, -0.31, -0.1, 0.03, 0.25, 0.4999, 0.5}
	if len(want) != len(factors)*3*4096 {
		t.Fatalf("testdata/hue.bin: %d bytes, want %d", len(want), len(factors)*3*4096)
	}
	for k, f := range factors {
		img := hueColours()
		src := append([]byte(nil), img.Pix...)
		rotateHue(img, f)
		ref := want[k*3*4096 : (k+1)*3*4096]
		for i, v := range img.Pix {
			if v != ref[i] {
				p := i % 4096
				t.Fatalf("hue %g: rgb %d,%d,%d channel %d: %d, torchvision %d", f, src[p], src[4096+p], src[8192+p], i/4096, v, ref[i])
			}
		}
	}
}

// TestColorJitterHueDraws: with hue the order is a permutation of four
// and the hue factor is drawn last; without it the stream is what it was
// (a permutation of three).
func TestColorJitterHueDraws(t *testing.T) {
	img := hueColours()
	with, _ := ColorJitter(0.2, 0, 0, 0.1)
	without, _ := ColorJitter(0.2, 0, 0, 0)
	var a, b Image
	r1, r2 := NewRand(1, 0, 5), NewRand(1, 0, 5)
	without.Apply(&a, img, &r1)
	// The old three-way draw: two Intn for the order, then the factor.
	r2.Intn(3)
	r2.Intn(2)
	f := r2.Uniform(0.8, 1.2)
	b.Resize(3, 1, 4096)
	copy(b.Pix, img.Pix)
	blend(b.Pix, 0, float32(f))
	if string(a.Pix) != string(b.Pix) || r1 != r2 {
		t.Fatal("color_jitter without hue no longer draws as it did")
	}
	r3 := NewRand(1, 0, 5)
	if !with.Apply(&a, img, &r3) || string(a.Pix) == string(b.Pix) {
		t.Fatal("color_jitter with hue changed nothing, or only the brightness")
	}
}
