//go:build jpegturbo

package jpegdec

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/transform/internal/jpegturbo"
)

// The jpegturbo build links libjpeg-turbo, the reference: these tests
// decode every test image, whole and in windows at every DCT scale, with
// both decoders, and require the same bytes.

// testImage is a w×h image of nc interleaved components with smooth
// gradients, edges and noise, so that every kind of coefficient occurs.
func testImage(rng *rand.Rand, w, h, nc int) []byte {
	pix := make([]byte, w*h*nc)
	fx, fy := rng.Float64()*6, rng.Float64()*6
	for y := range h {
		for x := range w {
			for c := range nc {
				v := 128 + 100*sinApprox(fx*float64(x+c*7)/float64(w)+fy*float64(y)/float64(h))
				if (x/5+y/7+c)%9 == 0 {
					v = 255 - v // edges
				}
				v += float64(rng.IntN(41) - 20)
				pix[(y*w+x)*nc+c] = byte(min(max(v, 0), 255))
			}
		}
	}
	return pix
}

// sinApprox is a triangle wave in [-1, 1].
func sinApprox(t float64) float64 {
	t -= float64(int(t))
	if t < 0 {
		t++
	}
	if t < 0.5 {
		return 4*t - 1
	}
	return 3 - 4*t
}

// generated encodes test images of every sampling, scan structure and
// awkward size with libjpeg.
func generated(t *testing.T) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	type layout struct {
		name string
		nc   int
		h, v [4]int
		ycck bool
	}
	layouts := []layout{
		{"444", 3, [4]int{1, 1, 1}, [4]int{1, 1, 1}, false},
		{"422", 3, [4]int{2, 1, 1}, [4]int{1, 1, 1}, false},
		{"420", 3, [4]int{2, 1, 1}, [4]int{2, 1, 1}, false},
		{"440", 3, [4]int{1, 1, 1}, [4]int{2, 1, 1}, false},
		{"411", 3, [4]int{4, 1, 1}, [4]int{1, 1, 1}, false},
		{"grey", 1, [4]int{1}, [4]int{1}, false},
		{"grey22", 1, [4]int{2}, [4]int{2}, false},
		{"cmyk", 4, [4]int{1, 1, 1, 1}, [4]int{1, 1, 1, 1}, false},
		{"ycck420", 4, [4]int{2, 1, 1, 2}, [4]int{2, 1, 1, 2}, true},
	}
	sizes := [][2]int{{1, 1}, {2, 3}, {7, 9}, {17, 33}, {64, 48}, {101, 75}}
	out := map[string][]byte{}
	for _, l := range layouts {
		for si, sz := range sizes {
			for _, o := range []jpegturbo.EncodeOptions{
				{Quality: 90},
				{Quality: 75, Progressive: true},
				{Quality: 50, Restart: 3, Optimize: true},
				{Quality: 95, Separate: true},
				{Quality: 85, Progressive: true, Restart: 2},
			} {
				if si < 3 && (o.Restart > 0 || o.Separate) {
					continue
				}
				o.H, o.V, o.YCCK = l.h, l.v, l.ycck
				w, h := sz[0], sz[1]
				data, err := jpegturbo.Encode(testImage(rng, w, h, l.nc), w, h, l.nc, o)
				if err != nil {
					t.Fatalf("encode %s %dx%d %+v: %v", l.name, w, h, o, err)
				}
				out[fmt.Sprintf("%s-%dx%d-q%d-p%v-s%v-r%d", l.name, w, h, o.Quality, o.Progressive, o.Separate, o.Restart)] = data
			}
		}
	}
	return out
}

// files returns the repository's test JPEGs and the generated ones.
func files(t *testing.T) map[string][]byte {
	t.Helper()
	out := generated(t)
	names, _ := filepath.Glob("../../testdata/*.jpg")
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = data
	}
	return out
}

// compare decodes data whole and in windows at every DCT scale with both
// decoders and fails at the first byte they disagree on.
func compare(t *testing.T, name string, data []byte, rng *rand.Rand, windows int) {
	t.Helper()
	lib, err := jpegturbo.New()
	if err != nil {
		t.Fatal(err)
	}
	ours := New()
	w, h, err := lib.Header(data)
	if err != nil {
		t.Fatalf("%s: libjpeg: %v", name, err)
	}
	lib.Abort()
	for _, num := range []int{8, 4, 2, 1} {
		sw, sh := Scaled(w, num), Scaled(h, num)
		wins := [][4]int{{0, 0, sw, sh}}
		for range windows {
			cw, ch := 1+rng.IntN(sw), 1+rng.IntN(sh)
			wins = append(wins, [4]int{rng.IntN(sw - cw + 1), rng.IntN(sh - ch + 1), cw, ch})
		}
		for _, win := range wins {
			want := make([]byte, 3*win[2]*win[3])
			if _, _, err := lib.Header(data); err != nil {
				t.Fatal(err)
			}
			if err := lib.Decode(want, num, win[0], win[1], win[2], win[3]); err != nil {
				t.Fatalf("%s %d/8 %v: libjpeg: %v", name, num, win, err)
			}
			got := make([]byte, len(want))
			gw, gh, err := ours.Header(data)
			if err != nil || gw != w || gh != h {
				t.Fatalf("%s: header %dx%d, %v; libjpeg %dx%d", name, gw, gh, err, w, h)
			}
			if err := ours.Decode(got, num, win[0], win[1], win[2], win[3]); err != nil {
				t.Fatalf("%s %d/8 %v: %v", name, num, win, err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				n := win[2] * win[3]
				t.Fatalf("%s (%dx%d) %d/8 window %v: byte %d (plane %d, x %d, y %d) is %d, libjpeg gives %d",
					name, w, h, num, win, i, i/n, i%n%win[2], i%n/win[2], got[i], want[i])
			}
		}
	}
}

func TestSamePixelsAsLibjpeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	all := files(t)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		t.Run(name, func(t *testing.T) { compare(t, name, all[name], rng, 3) })
	}
}

func TestSamePixelsAsLibjpegImageNet(t *testing.T) {
	names, data := shareddata.ImageNetJPEGs(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range names {
		compare(t, names[i], data[i], rng, 2)
	}
}

// BenchmarkLibjpeg is BenchmarkDecode and BenchmarkHuffman with
// libjpeg-turbo (and the jpegturbo build's own Huffman decoder), the
// figures pipe's decoder is measured against.
func BenchmarkLibjpeg(b *testing.B) {
	_, data := shareddata.ImageNetJPEGs(b)
	for _, whole := range []bool{true, false} {
		b.Run(map[bool]string{true: "decode", false: "huffman"}[whole], func(b *testing.B) {
			d, err := jpegturbo.New()
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 3*4096*4096)
			n, size := 0, 0
			for b.Loop() {
				in := data[n%len(data)]
				w, h, err := d.Header(in)
				if err != nil {
					b.Fatal(err)
				}
				x0, y0, cw, ch := 0, 0, w, h
				if !whole {
					x0, y0, cw, ch = w-1, h-1, 1, 1
				}
				if err := d.Decode(dst, 8, x0, y0, cw, ch); err != nil {
					b.Fatal(err)
				}
				n++
				size += len(in)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(float64(size)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}

var writeGolden = flag.Bool("golden", false, "TestWriteGolden: write testdata/*.jpg and testdata/golden.txt")

// TestWriteGolden, with -golden, writes the package's test JPEGs (a
// selection of the generated ones) and the hashes of libjpeg-turbo's
// decodes of them and of transform's test JPEGs, which TestGolden checks
// in every build.
func TestWriteGolden(t *testing.T) {
	if !*writeGolden {
		t.Skip("-golden writes testdata/golden.txt")
	}
	gen := generated(t)
	os.MkdirAll("testdata", 0o755)
	for name, data := range gen {
		if !strings.Contains(name, "-64x48-") && !strings.Contains(name, "-17x33-") {
			continue
		}
		if err := os.WriteFile(filepath.Join("testdata", name+".jpg"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := goldenFiles(t)
	names, data := shareddata.ImageNetJPEGs(t)
	for i := range names {
		files["imagenet-sample/"+names[i]] = data[i]
	}
	lib, err := jpegturbo.New()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for name, data := range files {
		w, h, err := lib.Header(data)
		if err != nil {
			t.Fatal(err)
		}
		lib.Abort()
		for _, num := range []int{8, 4, 2, 1} {
			for _, win := range goldenWindows(w, h, num) {
				pix := make([]byte, 3*win[2]*win[3])
				if _, _, err := lib.Header(data); err != nil {
					t.Fatal(err)
				}
				if err := lib.Decode(pix, num, win[0], win[1], win[2], win[3]); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, goldenKey(name, num, win)+" "+pixelHash(pix))
			}
		}
	}
	slices.Sort(lines)
	head := "# SHA-256 (first 12 bytes) of " + jpegturbo.Version + "'s RGB planes for each test JPEG, DCT scale and window.\n" +
		"# Written by: go test -tags jpegturbo -run TestWriteGolden ./transform/internal/jpegdec -golden\n"
	if err := os.WriteFile("testdata/golden.txt", []byte(head+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
