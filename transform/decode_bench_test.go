package transform

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// BenchmarkDecodeImageNet decodes the real ImageNet sample (100 JPEGs at
// their original sizes) on one core: compare images/s with
// bench/torch/imagenet.py decode (Pillow).
func BenchmarkDecodeImageNet(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join(shareddata.Path(b, "imagenet-sample"), "*.JPEG"))
	var data [][]byte
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d)
	}
	var m Image
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := Decode(&m, data[n%len(data)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
}
