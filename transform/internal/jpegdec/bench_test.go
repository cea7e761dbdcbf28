package jpegdec

import (
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// BenchmarkDecode decodes the real ImageNet sample whole, on one core.
// SetBytes is the sample's mean JPEG size, so MB/s is of compressed data.
func BenchmarkDecode(b *testing.B) {
	benchSample(b, func(w, h int) [4]int { return [4]int{0, 0, w, h} })
}

// BenchmarkHuffman is the entropy decoding of the ImageNet sample alone:
// each image decoded for the window of its last pixel, so every block is
// Huffman-decoded and one goes through the IDCT.
func BenchmarkHuffman(b *testing.B) {
	benchSample(b, func(w, h int) [4]int { return [4]int{w - 1, h - 1, 1, 1} })
}

// benchSample decodes the window win gives of each image of the ImageNet
// sample in turn.
func benchSample(b *testing.B, win func(w, h int) [4]int) {
	_, data := shareddata.ImageNetJPEGs(b)
	d := New()
	dst := make([]byte, 3*4096*4096)
	b.SetBytes(meanSize(data))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		in := data[n%len(data)]
		w, h, err := d.Header(in)
		if err != nil {
			b.Fatal(err)
		}
		r := win(w, h)
		if err := d.Decode(dst, 8, r[0], r[1], r[2], r[3]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
}

// meanSize is the mean length of the JPEGs in data.
func meanSize(data [][]byte) int64 {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	return int64(n / len(data))
}
