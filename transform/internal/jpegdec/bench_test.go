package jpegdec

import (
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// BenchmarkDecode decodes the real ImageNet sample whole, on one core.
func BenchmarkDecode(b *testing.B) {
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
		if err := d.Decode(dst, 8, 0, 0, w, h); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkHuffman is the entropy decoding of the ImageNet sample alone:
// each image decoded for the window of its last pixel, so every block is
// Huffman-decoded and one goes through the IDCT. SetBytes is the sample's
// mean JPEG size, so MB/s is of compressed data.
func BenchmarkHuffman(b *testing.B) {
	_, data := shareddata.ImageNetJPEGs(b)
	d := New()
	var dst [3]byte
	b.SetBytes(meanSize(data))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		in := data[n%len(data)]
		w, h, err := d.Header(in)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Decode(dst[:], 8, w-1, h-1, 1, 1); err != nil {
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
