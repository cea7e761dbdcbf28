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
	b.ReportAllocs()
	n, bytes := 0, 0
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
		bytes += len(in)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// BenchmarkHuffman is the entropy decoding of the ImageNet sample alone:
// each image decoded for the window of its last pixel, so every block is
// Huffman-decoded and one goes through the IDCT. SetBytes is the JPEG's
// size.
func BenchmarkHuffman(b *testing.B) {
	_, data := shareddata.ImageNetJPEGs(b)
	d := New()
	var dst [3]byte
	b.ReportAllocs()
	n, bytes := 0, 0
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
		bytes += len(in)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
}
