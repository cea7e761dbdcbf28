package transform

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// fuzzMaxPixels is the fuzz targets' pixel limit: every seed that should
// decode fits (the largest is 243×171), and whatever header an input
// claims, no decoder may hold more than a few MiB for it, so that a run
// under a memory limit (CI's) catches a decoder allocating from the header
// before checking it.
const fuzzMaxPixels = 1 << 16

// FuzzDecodeJPEG decodes JPEGs with the build's decoder (libjpeg-turbo in
// the jpegturbo build, image/jpeg otherwise), whole and through DecodeFor:
// no panic, an error is ErrDecode, and a success is an image of the size
// its header gives, within the limit. Seeds: baseline, progressive, CMYK,
// greyscale and restart-marker files; truncated and corrupt ones; headers
// claiming gigapixels.
func FuzzDecodeJPEG(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	colour := photo(f, 48, 32)
	var grey bytes.Buffer
	g := image.NewGray(image.Rect(0, 0, 21, 13))
	for i := range g.Pix {
		g.Pix[i] = uint8(i * 7)
	}
	if err := jpeg.Encode(&grey, g, &jpeg.Options{Quality: 75}); err != nil {
		f.Fatal(err)
	}
	badSOF := bytes.Clone(colour)
	i := bytes.Index(badSOF, []byte{0xff, 0xc0})
	badSOF[i+5], badSOF[i+6] = 0xff, 0xff // height 65535
	for _, b := range [][]byte{
		colour, colour[:len(colour)/3], grey.Bytes(), badSOF,
		greyJPEG(false, 16, 16, 1, true), greyJPEG(true, 40, 25, 4, true),
		greyJPEG(false, 256, 256, 256, true), greyJPEG(true, 256, 257, 16, true),
		greyJPEG(false, 65535, 65535, 16, false), greyJPEG(true, 32768, 32768, 16, false),
		greyJPEG(false, 8200, 8200, 16, true), greyJPEG(true, 300, 300, 8, false),
	} {
		f.Add(b)
	}
	f.Fuzz(fuzzDecode)
}

// FuzzDecodePNG is FuzzDecodeJPEG for PNGs (Go's image/png in both
// builds). Seeds: 8- and 16-bit RGB(A), greyscale and paletted files;
// truncated ones, one with a bad CRC; headers claiming gigapixels.
func FuzzDecodePNG(f *testing.F) {
	rgba := image.NewNRGBA(image.Rect(0, 0, 24, 16))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 13)
	}
	g16 := image.NewGray16(image.Rect(0, 0, 9, 31))
	for i := range g16.Pix {
		g16.Pix[i] = uint8(i * 5)
	}
	pal := image.NewPaletted(image.Rect(0, 0, 17, 5), color.Palette{color.Black, color.White, color.RGBA{200, 10, 30, 255}})
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i % 3)
	}
	rgba64 := image.NewRGBA64(image.Rect(0, 0, 7, 7))
	for i := range rgba64.Pix {
		rgba64.Pix[i] = uint8(i * 3)
	}
	for _, m := range []image.Image{rgba, image.NewGray(image.Rect(0, 0, 256, 256)), g16, pal, rgba64} {
		var buf bytes.Buffer
		if err := png.Encode(&buf, m); err != nil {
			f.Fatal(err)
		}
		b := buf.Bytes()
		badCRC := bytes.Clone(b)
		badCRC[29] ^= 1 // in IHDR's CRC
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(badCRC)
	}
	for _, b := range [][]byte{hugePNG(f, 200000, 200000), hugePNG(f, 8200, 8200), hugePNG(f, 300, 300), hugePNG(f, 2, 1)} {
		f.Add(b)
	}
	f.Fuzz(fuzzDecode)
}

// fuzzDecoder is the decoder the fuzz targets reuse from one input to the
// next, as a worker does from one image to the next.
var fuzzDecoder = &Decoder{Reduce: true, MaxPixels: fuzzMaxPixels}

// fuzzDecode is the body of the decoder fuzz targets.
func fuzzDecode(t *testing.T, data []byte) {
	d := fuzzDecoder
	var m Image
	if err := d.Decode(&m, data); err != nil {
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("Decode: %v, not ErrDecode", err)
		}
	} else {
		checkFuzzDecoded(t, &m, data)
	}
	rrc, _ := RandomResizedCrop(16, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	r := NewRand(1, 0, 0)
	applied, err := d.DecodeFor(&m, data, rrc, &r)
	switch {
	case err != nil:
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("DecodeFor: %v, not ErrDecode", err)
		}
	case applied:
		if m.Shape() != (Shape{3, 16, 16}) || len(m.Pix) != 3*16*16 {
			t.Fatalf("DecodeFor gives %s with %d bytes, want 3x16x16", m.Shape(), len(m.Pix))
		}
	default:
		checkFuzzDecoded(t, d.Decoded(), data)
	}
}

// checkFuzzDecoded checks an image decoded from data: RGB, within the
// limit, and the size Go's reader of data's header says where it reads it.
func checkFuzzDecoded(t *testing.T, m *Image, data []byte) {
	t.Helper()
	if m.C != 3 || m.H < 1 || m.W < 1 || m.H*m.W > fuzzMaxPixels || len(m.Pix) != 3*m.H*m.W {
		t.Fatalf("decoded %s with %d bytes (limit %d pixels)", m.Shape(), len(m.Pix), fuzzMaxPixels)
	}
	if c, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && (c.Width != m.W || c.Height != m.H) {
		t.Fatalf("decoded %dx%d, the header says %dx%d", m.W, m.H, c.Width, c.Height)
	}
}
