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
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// photo is a large JPEG with smooth gradients and fine texture, as a
// photograph has, for the reduced-scale paths.
func photo(tb testing.TB, w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			t := 40 * math.Sin(float64(x)/37) * math.Cos(float64(y)/23)
			m.Set(x, y, color.RGBA{uint8(float64(x*200/w) + t + 20), uint8(float64(y*200/h) - t + 30), uint8(128 + t + float64((x^y)&7)), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func meanAbsDiff(a, b []byte) float64 {
	s := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

// TestDecoderMatchesGo decodes the ImageNet sample with the build's decoder
// and with Go's image/jpeg: the same sizes, and pixels within the few
// levels by which IDCTs and chroma upsampling differ. Decode and a
// Decoder give the same bytes.
func TestDecoderMatchesGo(t *testing.T) {
	names, data := shareddata.ImageNetJPEGs(t)
	d := NewDecoder(false)
	var a, b, c Image
	worst := 0.0
	for i := range data {
		if err := d.Decode(&a, data[i]); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if err := decodeGo(&b, data[i]); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if a.Shape() != b.Shape() {
			t.Fatalf("%s: %s, Go decodes %s", names[i], a.Shape(), b.Shape())
		}
		worst = max(worst, meanAbsDiff(a.Pix, b.Pix))
		if err := Decode(&c, data[i]); err != nil || !bytes.Equal(c.Pix, a.Pix) {
			t.Fatalf("%s: Decode differs from Decoder.Decode (%v)", names[i], err)
		}
	}
	t.Logf("%s vs image/jpeg: worst mean |difference| %.3f levels", DecoderName(), worst)
	if worst > 3 {
		t.Errorf("worst mean |difference| %.2f levels, want ≤ 3", worst)
	}
}

// TestDecodeForEqualsDecodeThenOp checks that without Reduce, decoding only
// the window an op reads gives exactly the bytes of decoding the whole
// image and applying the op, for resize and random_resized_crop under
// every filter, and leaves the generator in the same state.
func TestDecodeForEqualsDecodeThenOp(t *testing.T) {
	// A photo-like 4:2:0 JPEG, and Pillow-made progressive and 4:4:4 ones;
	// then a quarter of the real ImageNet sample where it is present (a
	// quarter keeps the test short).
	names, data := []string{"photo"}, [][]byte{photo(t, 1200, 900)}
	for _, name := range []string{"progressive.jpg", "subsample444.jpg"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		names, data = append(names, name), append(data, b)
	}
	if _, err := os.Stat(filepath.Join(shareddata.Root(), "imagenet-sample")); err == nil {
		n, d := shareddata.ImageNetJPEGs(t)
		names, data = append(names, n[:25]...), append(data, d[:25]...)
	} else {
		t.Logf("without the real ImageNet sample: %v", err)
	}
	var ops []RegionOp
	for _, f := range []Interp{Bilinear, Bicubic, Lanczos} {
		rrc, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, f)
		rs, _ := Resize(160, f)
		ops = append(ops, rrc, rs)
	}
	d := NewDecoder(false)
	var full, want, got Image
	for i := range data {
		if err := d.Decode(&full, data[i]); err != nil {
			t.Fatal(err)
		}
		for oi, op := range ops {
			for draw := range 4 {
				r1 := NewRand(7, draw, int64(i))
				r2 := r1
				wantOut := &full
				if op.Apply(&want, &full, &r1) {
					wantOut = &want
				}
				applied, err := d.DecodeFor(&got, data[i], op, &r2)
				if err != nil {
					t.Fatalf("%s: %v", names[i], err)
				}
				gotOut := &got
				if !applied {
					gotOut = d.Decoded()
				}
				if gotOut.Shape() != wantOut.Shape() || !bytes.Equal(gotOut.Pix, wantOut.Pix) {
					t.Fatalf("%s, %s draw %d: DecodeFor gives %s (mean |diff| %.2f), decode then op %s",
						names[i], op, draw, gotOut.Shape(), diffOrInf(gotOut, wantOut), wantOut.Shape())
				}
				if r1 != r2 {
					t.Fatalf("%s, op %d: generators differ after the op", names[i], oi)
				}
			}
		}
	}
}

func diffOrInf(a, b *Image) float64 {
	if a.Shape() != b.Shape() {
		return math.Inf(1)
	}
	return meanAbsDiff(a.Pix, b.Pix)
}

// TestDecodeForReduced checks the reduced-scale path: on a large photo it
// decodes at a fraction of the scale and stays within a few levels of the
// full-scale result.
func TestDecodeForReduced(t *testing.T) {
	data := photo(t, 1600, 1200)
	rs, _ := Resize(256, Bilinear)
	rrc, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	exact, reduced := NewDecoder(false), NewDecoder(true)
	var a, b Image
	for _, op := range []RegionOp{rs, rrc} {
		for draw := range 8 {
			r1 := NewRand(3, draw, 0)
			r2 := r1
			if _, err := exact.DecodeFor(&a, data, op, &r1); err != nil {
				t.Fatal(err)
			}
			if _, err := reduced.DecodeFor(&b, data, op, &r2); err != nil {
				t.Fatal(err)
			}
			if a.Shape() != b.Shape() {
				t.Fatalf("%s: %s vs %s", op, a.Shape(), b.Shape())
			}
			if d := meanAbsDiff(a.Pix, b.Pix); d > 2.5 {
				t.Errorf("%s draw %d: reduced-scale decode differs by %.2f levels on average", op, draw, d)
			}
		}
	}
	r := NewRand(3, 0, 0)
	reg := rs.Region(1200, 1600, &r)
	if m := scaleFor(reg); m != 2 {
		t.Errorf("resize 256 of 1600x1200 decodes at %d/8, want 2/8 (300 rows)", m)
	}
}

// TestDecoderErrors: bad bytes give ErrDecode from the build's decoder,
// and the decoder still works afterwards.
func TestDecoderErrors(t *testing.T) {
	good := photo(t, 64, 48)
	bad := map[string][]byte{
		"empty": nil, "text": []byte("hello"), "jpeg magic only": good[:3],
		"truncated": good[:len(good)/2], "bad SOF": func() []byte {
			b := bytes.Clone(good)
			i := bytes.Index(b, []byte{0xff, 0xc0})
			b[i+5], b[i+6] = 0, 0 // height 0
			return b
		}(),
	}
	rrc, _ := RandomResizedCrop(32, [2]float64{0.5, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	for _, reduce := range []bool{false, true} {
		d := NewDecoder(reduce)
		var m Image
		for name, data := range bad {
			if err := d.Decode(&m, data); !errors.Is(err, ErrDecode) {
				t.Errorf("Decode %s: %v", name, err)
			}
			r := NewRand(1, 0, 0)
			if _, err := d.DecodeFor(&m, data, rrc, &r); !errors.Is(err, ErrDecode) {
				t.Errorf("DecodeFor %s: %v", name, err)
			}
			if err := d.Decode(&m, good); err != nil || m.Shape() != (Shape{3, 48, 64}) {
				t.Fatalf("after %s: %v %s", name, err, m.Shape())
			}
		}
	}
}

// TestChainApplyEncoded: a chain on encoded bytes gives what decoding and
// then applying the chain gives, the first op fused or not.
func TestChainApplyEncoded(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 90, 70))); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{photo(t, 320, 240), buf.Bytes()} {
		testChainApplyEncoded(t, data)
	}
}

func testChainApplyEncoded(t *testing.T, data []byte) {
	rrc, _ := RandomResizedCrop(64, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	flip, _ := Flip(Horizontal, 0.5)
	cc, _ := CenterCrop(60)
	d := NewDecoder(false)
	var full Image
	if err := d.Decode(&full, data); err != nil {
		t.Fatal(err)
	}
	for _, ops := range [][]Op{{rrc, flip}, {rrc}, {cc, flip}, {flip}} {
		for s := range 6 {
			c1, c2 := NewChain(ops), NewChain(ops)
			want := c1.Apply(&full, NewRand(5, s, 0))
			got, err := c2.ApplyEncoded(d, data, NewRand(5, s, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got.Shape() != want.Shape() || !bytes.Equal(got.Pix, want.Pix) || c1.Rand() != c2.Rand() {
				t.Fatalf("%v seed %d: ApplyEncoded differs from Decode+Apply", ops, s)
			}
			var dst Image
			dst.Pix = make([]byte, 0, want.Shape().Len())
			if err := c2.ApplyEncodedTo(d, &dst, data, NewRand(5, s, 0)); err != nil || !bytes.Equal(dst.Pix, want.Pix) {
				t.Fatalf("%v seed %d: ApplyEncodedTo differs (%v)", ops, s, err)
			}
		}
	}
}

// TestDecoderCMYKAndGrey decodes a CMYK JPEG with an Adobe marker (as
// Photoshop and Pillow write them) and a greyscale one, made by Pillow in
// testdata: the build's decoder gives RGB within a few levels of Go's
// image/jpeg, and
// greyscale has three equal channels.
func TestDecoderCMYKAndGrey(t *testing.T) {
	d := NewDecoder(false)
	for _, name := range []string{"cmyk.jpg", "gray.jpg"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var a, b Image
		if err := d.Decode(&a, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := decodeGo(&b, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Shape() != (Shape{3, 16, 24}) || b.Shape() != a.Shape() {
			t.Fatalf("%s: %s and %s", name, a.Shape(), b.Shape())
		}
		if diff := meanAbsDiff(a.Pix, b.Pix); diff > 3 {
			t.Errorf("%s: %s and image/jpeg differ by %.2f levels on average", name, DecoderName(), diff)
		}
		if name == "gray.jpg" && (!bytes.Equal(a.Plane(0), a.Plane(1)) || !bytes.Equal(a.Plane(0), a.Plane(2))) {
			t.Errorf("greyscale decoded with unequal channels")
		}
		// Pixel (0, 0) of the CMYK image is C=0 M=0 Y=0 K=40: a grey of
		// about 255·(1-40/255) = 215.
		if name == "cmyk.jpg" {
			if r := a.Pix[0]; r < 205 || r > 225 {
				t.Errorf("cmyk pixel (0,0) red = %d, want about 215", r)
			}
		}
	}
}

// decodeGo decodes a JPEG with Go's image/jpeg, the reference of the tests
// that compare against an independent decoder.
func decodeGo(dst *Image, data []byte) error {
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return err
	}
	planes(dst, img)
	return nil
}

// TestResizeOfAStripIsRefused: an operation whose output, for an encoded
// image of an extreme shape, is over the decoder's limits refuses the image
// as too large before allocating it, whether the resize is fused with the
// decode (JPEG), runs after it (PNG), or follows another operation (resize
// shorter=256 of an 8192×1 strip would make 2,097,152×256 pixels: 1.6 GB).
func TestResizeOfAStripIsRefused(t *testing.T) {
	strip := image.NewGray(image.Rect(0, 0, 8192, 1))
	var j, p bytes.Buffer
	if err := jpeg.Encode(&j, strip, nil); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&p, strip); err != nil {
		t.Fatal(err)
	}
	resize, err := Resize(256, Bilinear)
	if err != nil {
		t.Fatal(err)
	}
	flip, err := Flip(Horizontal, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		ops  []Op
	}{{"jpeg", j.Bytes(), []Op{resize}}, {"png", p.Bytes(), []Op{resize}}, {"flip then resize", j.Bytes(), []Op{flip, resize}}} {
		var d Decoder
		_, err := NewChain(c.ops).ApplyEncoded(&d, c.data, NewRand(1, 0, 0))
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrDecode) {
			t.Errorf("%s: %v, want ErrTooLarge", c.name, err)
		}
		d.Release()
	}
	// A strip within the limits still resizes.
	small := image.NewGray(image.Rect(0, 0, 64, 8))
	j.Reset()
	jpeg.Encode(&j, small, nil)
	var d Decoder
	defer d.Release()
	out, err := NewChain([]Op{resize}).ApplyEncoded(&d, j.Bytes(), NewRand(1, 0, 0))
	if err != nil || out.H != 256 || out.W != 2048 {
		t.Fatalf("64x8 resized: %v, %v", out, err)
	}
}
