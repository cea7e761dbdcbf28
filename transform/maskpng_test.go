package transform

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"
)

// pngMasks are PNGs of random class-id masks of the kinds decodeMaskPNG
// reads, encoded by image/png (whose encoder filters each row with
// whichever of the five filters suits it, so every filter is met), with
// the values each holds.
func pngMasks(t testing.TB) (files [][]byte, values [][]uint16) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	pal := make(color.Palette, 256)
	for i := range pal {
		pal[i] = color.RGBA{uint8(i), uint8(255 - i), uint8(i * 7), 255}
	}
	for k, size := range [][2]int{{1, 1}, {37, 23}, {64, 64}, {201, 97}} {
		w, h := size[0], size[1]
		vals := make([]uint16, w*h)
		for i := range vals {
			// Runs of a class, as masks have, and noise, which defeats
			// the None filter.
			vals[i] = uint16((i/w/5+i%w/7)%20 + rng.IntN(3))
		}
		var imgs []image.Image
		g, p, g16 := image.NewGray(image.Rect(0, 0, w, h)), image.NewPaletted(image.Rect(0, 0, w, h), pal), image.NewGray16(image.Rect(0, 0, w, h))
		for i, v := range vals {
			g.Pix[i], p.Pix[i] = uint8(v), uint8(v)
			g16.SetGray16(i%w, i/w, color.Gray16{Y: v + uint16(k)*300})
		}
		imgs = append(imgs, g, p, g16)
		for j, img := range imgs {
			var b bytes.Buffer
			if err := png.Encode(&b, img); err != nil {
				t.Fatal(err)
			}
			files = append(files, b.Bytes())
			v := append([]uint16(nil), vals...)
			if j == 2 {
				for i := range v {
					v[i] += uint16(k) * 300
				}
			}
			values = append(values, v)
		}
	}
	return files, values
}

// TestMaskPNGMatchesImagePNG: the mask reader decodes what image/png
// decodes, every filter and kind, 8- and 16-bit, into uint8 and uint16
// masks, and allocates nothing once its memory has grown.
func TestMaskPNGMatchesImagePNG(t *testing.T) {
	files, values := pngMasks(t)
	d := NewDecoder(false)
	var m Mask
	for i, f := range files {
		for _, size := range []int{1, 2} {
			err := d.DecodeMask(&m, f, size)
			over := false
			for _, v := range values[i] {
				over = over || v > 255
			}
			if size == 1 && over {
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("file %d: a 16-bit mask over 255 read as uint8: %v", i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("file %d size %d: %v", i, size, err)
			}
			for p, v := range values[i] {
				if got := maskAt(&m, p); got != v {
					t.Fatalf("file %d size %d: value %d is %d, image/png %d", i, size, p, got, v)
				}
			}
		}
	}
	f := files[len(files)-2] // the largest, paletted
	if n := testing.AllocsPerRun(20, func() { d.DecodeMask(&m, f, 1) }); n != 0 {
		t.Fatalf("%v allocations a mask once warm", n)
	}
}

// TestMaskPNGDamage: a flipped byte in any chunk fails its CRC, and a cut
// file or image data fails, with ErrDecode; none panics.
func TestMaskPNGDamage(t *testing.T) {
	files, _ := pngMasks(t)
	f := files[len(files)-2]
	d := NewDecoder(false)
	var m Mask
	for i := 8; i < len(f); i += 7 {
		b := append([]byte(nil), f...)
		b[i] ^= 0x10
		if err := d.DecodeMask(&m, b, 1); err == nil {
			t.Fatalf("byte %d of %d flipped: no error", i, len(f))
		}
	}
	for n := 33; n < len(f); n += 11 {
		if err := d.DecodeMask(&m, f[:n], 1); !errors.Is(err, ErrDecode) {
			t.Fatalf("cut at %d of %d: %v", n, len(f), err)
		}
	}
}

// maskAt is value i of m.
func maskAt(m *Mask, i int) uint16 {
	if m.Size == 1 {
		return uint16(m.Pix[i])
	}
	return uint16(m.Pix[2*i]) | uint16(m.Pix[2*i+1])<<8
}

// BenchmarkDecodeMask decodes the largest of pngMasks' paletted masks
// (201×97): pipe's mask reader, and image/png, which it replaced.
func BenchmarkDecodeMask(b *testing.B) {
	files, _ := pngMasks(b)
	f := files[len(files)-2]
	b.Run("pipe", func(b *testing.B) {
		d := NewDecoder(false)
		var m Mask
		b.ReportAllocs()
		for b.Loop() {
			if err := d.DecodeMask(&m, f, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image-png", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := png.Decode(bytes.NewReader(f)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
