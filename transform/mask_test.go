package transform

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawPNG is a PNG of w×h pixels of the given bit depth and colour type
// whose rows (each with its filter byte 0) are rows, built by hand for
// what image/png does not write (greyscale of fewer than 8 bits).
func rawPNG(w, h int, depth, ctype byte, rows []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		b.Write(c)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	chunk("IHDR", append(ihdr, depth, ctype, 0, 0, 0))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(rows)
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

// values is m's values, widened.
func values(m *Mask) []int {
	v := make([]int, m.H*m.W)
	for i := range v {
		if m.Size == 1 {
			v[i] = int(m.Pix[i])
		} else {
			v[i] = int(binary.LittleEndian.Uint16(m.Pix[2*i:]))
		}
	}
	return v
}

// TestDecodeMask: 8-bit, 16-bit, 2-bit greyscale and paletted PNGs, and a
// greyscale JPEG, decode to their class ids as uint8 and uint16; a 16-bit
// id over 255 is an error for uint8, naming it; colour is refused; the
// pixel limit holds before anything is allocated.
func TestDecodeMask(t *testing.T) {
	const w, h = 7, 5
	id := func(x, y int) int { return (x*3 + y*5) % 20 }
	want := make([]int, w*h)
	gray := image.NewGray(image.Rect(0, 0, w, h))
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	pal := make(color.Palette, 20)
	for i := range pal {
		pal[i] = color.RGBA{uint8(i * 40), uint8(255 - i*9), uint8(i * i), 255}
	}
	paletted := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	rows2 := []byte{} // 2-bit: ids 0-3
	want2 := make([]int, w*h)
	for y := range h {
		rows2 = append(rows2, 0)
		var packed [2]byte
		for x := range w {
			v := id(x, y)
			want[y*w+x] = v
			gray.SetGray(x, y, color.Gray{uint8(v)})
			gray16.SetGray16(x, y, color.Gray16{uint16(v)})
			paletted.SetColorIndex(x, y, uint8(v))
			want2[y*w+x] = v % 4
			packed[x/4] |= byte(v%4) << (6 - 2*(x%4))
		}
		rows2 = append(rows2, packed[:]...)
	}
	d := NewDecoder(false)
	for _, c := range []struct {
		name string
		data []byte
		want []int
	}{
		{"8-bit", encodePNG(t, gray), want},
		{"16-bit", encodePNG(t, gray16), want},
		{"paletted", encodePNG(t, paletted), want},
		{"2-bit", rawPNG(w, h, 2, 0, rows2), want2},
	} {
		for _, size := range []int{1, 2} {
			m := Mask{Pix: make([]byte, 3)}
			if err := d.DecodeMask(&m, c.data, size); err != nil {
				t.Fatalf("%s as %d bytes: %v", c.name, size, err)
			}
			if m.H != h || m.W != w || m.Size != size || len(m.Pix) != w*h*size {
				t.Fatalf("%s as %d bytes: %dx%d mask of %d-byte values in %d bytes", c.name, size, m.W, m.H, m.Size, len(m.Pix))
			}
			if got := values(&m); !equalInts(got, c.want) {
				t.Fatalf("%s as %d bytes: %v, want %v", c.name, size, got, c.want)
			}
		}
	}

	gray16.SetGray16(3, 2, color.Gray16{300})
	data := encodePNG(t, gray16)
	var m Mask
	if err := d.DecodeMask(&m, data, 1); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "300 at (3, 2)") {
		t.Fatalf("16-bit 300 as uint8: %v", err)
	}
	if err := d.DecodeMask(&m, data, 2); err != nil || values(&m)[2*w+3] != 300 {
		t.Fatalf("16-bit 300 as uint16: %v", err)
	}

	// A greyscale JPEG: the decoder's pixels, its first channel.
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, gray, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	var img Image
	if err := Decode(&img, jb.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2} {
		if err := d.DecodeMask(&m, jb.Bytes(), size); err != nil {
			t.Fatalf("JPEG as %d bytes: %v", size, err)
		}
		wantJ := make([]int, w*h)
		for i, v := range img.Plane(0) {
			wantJ[i] = int(v)
		}
		if m.H != h || m.W != w || !equalInts(values(&m), wantJ) {
			t.Fatalf("JPEG as %d bytes: %v, decoded %v", size, values(&m), wantJ)
		}
	}

	rgb := image.NewRGBA(image.Rect(0, 0, w, h))
	jb.Reset()
	if err := jpeg.Encode(&jb, rgb, nil); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"RGB PNG": encodePNG(t, rgb), "RGB JPEG": jb.Bytes()} {
		if err := d.DecodeMask(&m, data, 1); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "class ids") {
			t.Fatalf("%s: %v", name, err)
		}
	}

	small := &Decoder{MaxPixels: w*h - 1}
	if err := small.DecodeMask(&m, encodePNG(t, gray), 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over MaxPixels: %v", err)
	}
	if err := d.DecodeMask(&m, rawPNG(maxSide+1, 1, 8, 0, nil), 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over MaxSide: %v", err)
	}
	if err := d.DecodeMask(&m, encodePNG(t, gray), 4); !errors.Is(err, ErrParam) {
		t.Fatalf("4-byte values: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDecodeMaskKeepsItsMemory: a mask decoded again into the same Mask
// reuses its memory.
func TestDecodeMaskKeepsItsMemory(t *testing.T) {
	data := encodePNG(t, image.NewGray(image.Rect(0, 0, 30, 20)))
	d := NewDecoder(false)
	var m Mask
	if err := d.DecodeMask(&m, data, 2); err != nil {
		t.Fatal(err)
	}
	p := &m.Pix[0]
	if err := d.DecodeMask(&m, data, 1); err != nil || &m.Pix[0] != p {
		t.Fatalf("decoded again: %v, memory reused %v", err, &m.Pix[0] == p)
	}
}
