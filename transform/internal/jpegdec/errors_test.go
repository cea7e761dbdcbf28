package jpegdec

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func testJPEG(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeAll decodes data whole at scale num/8.
func decodeAll(d *Decoder, data []byte, num int) ([]byte, error) {
	w, h, err := d.Header(data)
	if err != nil {
		return nil, err
	}
	pix := make([]byte, 3*Scaled(w, num)*Scaled(h, num))
	return pix, d.Decode(pix, num, 0, 0, Scaled(w, num), Scaled(h, num))
}

// setSOF returns a copy of data with its frame header changed by f.
func setSOF(t *testing.T, data []byte, f func(sof []byte)) []byte {
	out := bytes.Clone(data)
	for _, m := range []byte{mSOF0, mSOF1, mSOF2} {
		if i := bytes.Index(out, []byte{0xFF, m, 0}); i >= 0 {
			f(out[i:])
			return out
		}
	}
	t.Fatal("no SOF")
	return nil
}

// TestBadData: every kind of bad input is a clear error, and the decoder
// decodes a good image afterwards.
func TestBadData(t *testing.T) {
	base := testJPEG(t, "420-64x48-q90-pfalse-sfalse-r0.jpg")
	prog := testJPEG(t, "420-64x48-q75-ptrue-sfalse-r0.jpg")
	d := New()
	want, err := decodeAll(d, base, 8)
	if err != nil {
		t.Fatal(err)
	}
	restart := testJPEG(t, "420-64x48-q50-pfalse-sfalse-r3.jpg")
	lastSOS := bytes.LastIndex(prog, []byte{0xFF, mSOS})
	eoi := func(data []byte) []byte { return append(bytes.Clone(data), 0xFF, mEOI) }
	cases := []struct {
		name string
		data []byte
		is   error
		msg  string
	}{
		{"empty", nil, nil, "empty"},
		{"not a JPEG", []byte("GIF89a"), nil, "no SOI"},
		{"SOI only", []byte{0xFF, 0xD8}, ErrTruncated, ""},
		{"header cut", base[:40], ErrTruncated, ""},
		{"baseline scan cut", base[:len(base)-200], ErrTruncated, "truncated scan data: 2 of 3 MCU rows"},
		// A file cut short and given an EOI: libjpeg warns and leaves the
		// rest grey; here it is an error.
		{"baseline scan cut, then EOI", eoi(base[:len(base)-200]), ErrTruncated, "truncated scan data: 2 of 3 MCU rows"},
		{"restart intervals cut, then EOI", eoi(restart[:len(restart)/2]), ErrTruncated, "truncated scan data: "},
		{"progressive before its last scan", prog[:lastSOS], ErrTruncated, "before the image's last scan"},
		{"progressive inside a scan", prog[:lastSOS+20], ErrTruncated, "truncated scan data: "},
		{"progressive inside a scan, then EOI", eoi(prog[:lastSOS+20]), ErrTruncated, "truncated scan data: "},
		{"arithmetic coding", setSOF(t, base, func(s []byte) { s[1] = 0xC9 }), ErrUnsupported, "arithmetic"},
		{"lossless", setSOF(t, base, func(s []byte) { s[1] = 0xC3 }), ErrUnsupported, "lossless"},
		{"12-bit", setSOF(t, base, func(s []byte) { s[4] = 12 }), ErrUnsupported, "12-bit"},
		{"height 0", setSOF(t, base, func(s []byte) { s[5], s[6] = 0, 0 }), ErrUnsupported, "height 0"},
		{"2 components", setSOF(t, base, func(s []byte) { s[9] = 2 }), ErrUnsupported, "2 components"},
		{"sampling 5", setSOF(t, base, func(s []byte) { s[11] = 0x51 }), nil, "sampling factors"},
		{"8000x8000 claimed", setSOF(t, base, func(s []byte) { s[5], s[6], s[7], s[8] = 0x1F, 0x40, 0x1F, 0x40 }), ErrTruncated, "cannot hold"},
	}
	for _, c := range cases {
		_, err := decodeAll(d, c.data, 8)
		if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.is, c.msg)
		}
		got, err := decodeAll(d, base, 8)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after %s: %v", c.name, err)
		}
	}
	if _, _, err := d.Header(base); err != nil {
		t.Fatal(err)
	}
	for _, win := range [][5]int{{3, 0, 0, 64, 48}, {8, 1, 0, 64, 48}, {8, 0, 0, 0, 1}, {4, 0, 0, 33, 24}} {
		if err := d.Decode(make([]byte, 1<<16), win[0], win[1], win[2], win[3], win[4]); err == nil {
			t.Errorf("scale %d/8 window %v: no error", win[0], win[1:])
		}
		d.Header(base)
	}
}

// TestHugeHeaderAllocatesNothing: a header claiming 8000×8000 pixels
// over a few hundred bytes of scan is refused before its buffers are
// allocated, and a MaxMemory too small for an image is an error, not an
// allocation.
func TestHugeHeaderAllocatesNothing(t *testing.T) {
	base := testJPEG(t, "444-64x48-q90-pfalse-sfalse-r0.jpg")
	huge := setSOF(t, base, func(s []byte) { s[5], s[6], s[7], s[8] = 0x1F, 0x40, 0x1F, 0x40 })
	d := New()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, h, err := d.Header(huge)
	if err != nil || w != 8000 || h != 8000 {
		t.Fatalf("header: %dx%d %v", w, h, err)
	}
	err = d.Decode(make([]byte, 3), 8, 0, 0, 1, 1)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("8000x8000 over %d bytes: %v", len(huge), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("allocated %d bytes refusing it", n)
	}
	d.MaxMemory = 5000
	if _, err := decodeAll(d, base, 8); err == nil || !strings.Contains(err.Error(), "more than the 5000 allowed") {
		t.Errorf("MaxMemory 5000: %v", err)
	}
}

// FuzzDecode: no input panics, hangs or reads out of bounds; whatever
// decodes, decodes to the size its header gives.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"420-64x48-q90-pfalse-sfalse-r0.jpg", "422-17x33-q85-ptrue-sfalse-r2.jpg",
		"440-64x48-q95-pfalse-strue-r0.jpg", "ycck420-17x33-q75-ptrue-sfalse-r0.jpg", "grey-64x48-q50-pfalse-sfalse-r3.jpg"} {
		data := testJPEG(f, name)
		f.Add(data)
		f.Add(data[:len(data)*2/3])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := New()
		d.MaxMemory = 256 << 20
		w, h, err := d.Header(data)
		if err != nil || w*h > 1<<22 {
			return
		}
		for _, num := range []int{8, 2} {
			sw, sh := Scaled(w, num), Scaled(h, num)
			pix := make([]byte, 3*sw*sh)
			if _, _, err := d.Header(data); err != nil {
				t.Fatalf("the header read once fails the second time: %v", err)
			}
			d.Decode(pix, num, 0, 0, sw, sh)
			if sw > 2 && sh > 2 {
				d.Header(data)
				d.Decode(pix, num, 1, 1, sw-2, sh-2)
			}
		}
	})
}
