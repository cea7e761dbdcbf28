//go:build jpegturbo

package jpegturbo

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestSplit3 checks the PSHUFB split of packed RGB into planes against a
// plain loop, for every length up to 100 (whole blocks of 16 and tails).
func TestSplit3(t *testing.T) {
	for n := range 100 {
		s := make([]byte, 3*n)
		for i := range s {
			s[i] = byte(i*7 + i/3)
		}
		r, g, b := make([]byte, n), make([]byte, n), make([]byte, n)
		split3(s, r, g, b)
		for x := range n {
			if r[x] != s[3*x] || g[x] != s[3*x+1] || b[x] != s[3*x+2] {
				t.Fatalf("n=%d pixel %d: %d %d %d, want %d %d %d", n, x, r[x], g[x], b[x], s[3*x], s[3*x+1], s[3*x+2])
			}
		}
	}
}

// huffmanFiles are JPEGs covering what huff.c must decode as libjpeg does:
// 4:2:0, 4:2:2 at quality 100 (long codes, large coefficients), 4:4:4,
// restart markers every 3 MCUs and every MCU row, greyscale and Adobe
// CMYK, plus the ImageNet sample where present. The restart and q100 files
// were made by libjpeg-turbo's cjpeg (-restart 3B / -restart 1,
// -sample 2x1 -quality 100) from a synthetic 243x171 photograph.
func huffmanFiles(t *testing.T) map[string][]byte {
	t.Helper()
	names, _ := filepath.Glob("../../testdata/*.jpg")
	more, _ := filepath.Glob(filepath.Join(shareddata.Root(), "imagenet-sample", "*.JPEG"))
	names = append(names, more...)
	files := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = b
	}
	if len(files) < 7 {
		t.Fatalf("found %d test JPEGs under ../../testdata, want at least 7", len(files))
	}
	return files
}

// decodeWith decodes the window of data at scale num/8, with libjpeg's
// Huffman decoder (lib) or huff.c's, and with libjpeg's colour conversion
// and a split into planes (lib) or rgb.c's; it says which of ours ran.
func decodeWith(t *testing.T, d *Decoder, lib bool, data []byte, num, x0, y0, cw, ch int) ([]byte, bool, error) {
	out, own, _, err := decodeWith2(t, d, lib, lib, data, num, x0, y0, cw, ch)
	return out, own, err
}

func decodeWith2(t *testing.T, d *Decoder, libHuff, libRGB bool, data []byte, num, x0, y0, cw, ch int) (out []byte, own, direct bool, err error) {
	t.Helper()
	d.libHuffman(libHuff)
	d.libColor(libRGB)
	if _, _, err := d.Header(data); err != nil {
		t.Fatal(err)
	}
	out = make([]byte, 3*cw*ch)
	err = d.Decode(out, num, x0, y0, cw, ch)
	return out, d.ownHuffman(), d.directColor(), err
}

// TestOwnHuffmanMatchesLibjpeg decodes every test image whole and in random
// windows at every DCT scale with libjpeg-turbo's entropy decoder and
// colour converter, and with huff.c's and rgb.c's, one and both: the pixels
// must be the same bytes, and ours must have run on every baseline (and
// colour) file.
func TestOwnHuffmanMatchesLibjpeg(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "best", true: "no-bmi2"}[plain], func(t *testing.T) {
			plainHuffman(plain)
			defer plainHuffman(false)
			testOwnHuffman(t)
		})
	}
}

func testOwnHuffman(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for name, data := range huffmanFiles(t) {
		w, h, err := d.Header(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		progressive := name == "progressive.jpg"
		colour := d.ycbcr()
		for _, num := range []int{8, 4, 2, 1} {
			sw, sh := Scaled(w, num), Scaled(h, num)
			windows := [][4]int{{0, 0, sw, sh}}
			for range 3 {
				cw, ch := 1+rng.IntN(sw), 1+rng.IntN(sh)
				windows = append(windows, [4]int{rng.IntN(sw - cw + 1), rng.IntN(sh - ch + 1), cw, ch})
			}
			for _, win := range windows {
				want, _, _, err := decodeWith2(t, d, true, true, data, num, win[0], win[1], win[2], win[3])
				if err != nil {
					t.Fatalf("%s %d/8 %v: libjpeg: %v", name, num, win, err)
				}
				for _, c := range []struct{ libHuff, libRGB bool }{{false, true}, {true, false}, {false, false}} {
					got, own, direct, err := decodeWith2(t, d, c.libHuff, c.libRGB, data, num, win[0], win[1], win[2], win[3])
					if err != nil {
						t.Fatalf("%s %d/8 %v %+v: %v", name, num, win, c, err)
					}
					if !c.libHuff && own == progressive {
						t.Fatalf("%s: huff.c used=%v", name, own)
					}
					if !c.libRGB && colour && !direct {
						t.Fatalf("%s: rgb.c not used", name)
					}
					if !bytes.Equal(got, want) {
						i := 0
						for got[i] == want[i] {
							i++
						}
						t.Fatalf("%s %d/8 window %v, lib Huffman %v, lib colour %v: byte %d (plane %d) is %d, libjpeg gives %d",
							name, num, win, c.libHuff, c.libRGB, i, i/(win[2]*win[3]), got[i], want[i])
					}
				}
			}
		}
	}
}

// TestYCCRGB checks rgb.c's conversion (AVX2 for whole blocks of 16, plain
// C for the rest) against libjpeg-turbo's SIMD arithmetic written out in
// Go, for every Y, Cb and Cr.
func TestYCCRGB(t *testing.T) {
	const n = 1 << 24
	y, cb, cr := make([]byte, n), make([]byte, n), make([]byte, n)
	for i := range n {
		y[i], cb[i], cr[i] = byte(i), byte(i>>8), byte(i>>16)
	}
	r, g, b := make([]byte, n), make([]byte, n), make([]byte, n)
	yccRGB(y, cb, cr, r, g, b)
	yccRGB(y[:7], cb[:7], cr[:7], r[:7], g[:7], b[:7]) // the plain C path
	clamp := func(v int) byte { return byte(min(max(v, 0), 255)) }
	for i := range n {
		Y, Cb, Cr := int(y[i]), int(cb[i])-128, int(cr[i])-128
		by := (((2*Cb*-14942)>>16)+1)>>1 + 2*Cb
		ry := (((2*Cr*26345)>>16)+1)>>1 + Cr
		gy := (Cb*-22554+Cr*18734+1<<15)>>16 - Cr
		if r[i] != clamp(Y+ry) || g[i] != clamp(Y+gy) || b[i] != clamp(Y+by) {
			t.Fatalf("Y %d Cb %d Cr %d: %d %d %d, want %d %d %d", y[i], cb[i], cr[i], r[i], g[i], b[i], clamp(Y+ry), clamp(Y+gy), clamp(Y+by))
		}
	}
}

// TestOwnHuffmanBadData: a file cut short is an error with either entropy
// decoder; corrupt entropy-coded bytes decode, or fail, without
// crashing or reading out of bounds, and leave the decoder usable.
func TestOwnHuffmanBadData(t *testing.T) {
	files := huffmanFiles(t)
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"restart420.jpg", "restart444.jpg", "q100-422.jpg", "subsample444.jpg"} {
		data := files[name]
		w, h, err := d.Header(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range []bool{true, false} {
			if _, _, err := decodeWith(t, d, lib, data[:len(data)*2/3], 8, 0, 0, w, h); err == nil {
				t.Errorf("%s cut to 2/3 (libjpeg Huffman %v): no error", name, lib)
			}
		}
		rng := rand.New(rand.NewPCG(3, 4))
		start := bytes.Index(data, []byte{0xFF, 0xDA}) + 16 // into the scan
		for range 30 {                                      // cut anywhere in the scan: never a crash
			decodeWith(t, d, false, data[:start+rng.IntN(len(data)-start)], 8, 0, 0, w, h)
		}
		for range 200 {
			bad := bytes.Clone(data)
			for range 1 + rng.IntN(4) {
				bad[start+rng.IntN(len(bad)-start-2)] = byte(rng.Uint32())
			}
			decodeWith(t, d, false, bad, 8, 0, 0, w, h) // must not crash
			decodeWith(t, d, false, bad, 2, 0, 0, Scaled(w, 2), Scaled(h, 2))
		}
		want, _, err := decodeWith(t, d, true, data, 8, 0, 0, w, h)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := decodeWith(t, d, false, data, 8, 0, 0, w, h)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after corrupt inputs: err %v, equal %v", name, err, bytes.Equal(got, want))
		}
	}
}

// TestMaxMemory: MaxMemory caps libjpeg's whole-image coefficient buffer.
// The progressive test image (200×150, about 100 KB of coefficients) is an
// error naming the cap under 64 KiB, and the decoder works afterwards; it
// decodes under 4 MiB and without a cap, and a baseline image, which has
// no such buffer, decodes under 64 KiB.
func TestMaxMemory(t *testing.T) {
	files := huffmanFiles(t)
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	decode := func(name string, maxMemory int) error {
		d.MaxMemory = maxMemory
		w, h, err := d.Header(files[name])
		if err != nil {
			return err
		}
		return d.Decode(make([]byte, 3*w*h), 8, 0, 0, w, h)
	}
	if err := decode("progressive.jpg", 64<<10); err == nil || !strings.Contains(err.Error(), "65536 bytes allowed") {
		t.Errorf("progressive.jpg under a 64 KiB cap: %v", err)
	}
	for _, c := range []struct {
		name      string
		maxMemory int
	}{{"progressive.jpg", 4 << 20}, {"progressive.jpg", 0}, {"restart420.jpg", 64 << 10}} {
		if err := decode(c.name, c.maxMemory); err != nil {
			t.Errorf("%s under a cap of %d bytes: %v", c.name, c.maxMemory, err)
		}
	}
}

// BenchmarkWholeImage decodes the ImageNet sample whole on one goroutine:
// libjpeg-turbo alone (its Huffman decoder and colour converter, then the
// split into planes), with huff.c's Huffman decoder, and with rgb.c's
// conversion as well (what the jpegturbo build does).
func BenchmarkWholeImage(b *testing.B) {
	_, files := shareddata.ImageNetJPEGs(b)
	for _, c := range []struct {
		name            string
		libHuff, libRGB bool
	}{{"libjpeg", true, true}, {"huffman", false, true}, {"huffman+rgb", false, false}} {
		b.Run(c.name, func(b *testing.B) {
			d, err := New()
			if err != nil {
				b.Fatal(err)
			}
			d.libHuffman(c.libHuff)
			d.libColor(c.libRGB)
			var out []byte
			i := 0
			for b.Loop() {
				data := files[i%len(files)]
				i++
				w, h, err := d.Header(data)
				if err != nil {
					b.Fatal(err)
				}
				if n := 3 * w * h; len(out) < n {
					out = make([]byte, n)
				}
				if err := d.Decode(out, 8, 0, 0, w, h); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// TestLibjpegOnly: with PIPE_LIBJPEG_ONLY set, new decoders use libjpeg's
// own modules.
func TestLibjpegOnly(t *testing.T) {
	data := huffmanFiles(t)["restart420.jpg"]
	defer func(v bool) { LibjpegOnly = v }(LibjpegOnly)
	for _, only := range []bool{false, true} {
		LibjpegOnly = only
		d, err := New()
		if err != nil {
			t.Fatal(err)
		}
		w, h, err := d.Header(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(make([]byte, 3*w*h), 8, 0, 0, w, h); err != nil {
			t.Fatal(err)
		}
		if d.ownHuffman() == only || d.directColor() == only {
			t.Fatalf("LibjpegOnly %v: huff.c used %v, rgb.c used %v", only, d.ownHuffman(), d.directColor())
		}
	}
}
