package transform

import (
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// BenchmarkDecodeImageNet decodes the real ImageNet sample (100 JPEGs at
// their original sizes) on one core with the build's Decoder (Go's
// image/jpeg, or libjpeg-turbo with -tags jpegturbo): compare images/s with
// bench/torch/imagenet.py decode (Pillow).
func BenchmarkDecodeImageNet(b *testing.B) {
	_, data := shareddata.ImageNetJPEGs(b)
	var m Image
	d := NewDecoder(false)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := d.Decode(&m, data[n%len(data)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkDecodeRandomResizedCrop is the recipe's first two steps on one
// core: decode and random_resized_crop 224, as a chain on the encoded bytes
// runs them (with -tags jpegturbo: the crop's window only, at a reduced
// scale when reduce is on), against decoding in full then cropping; over
// the ImageNet sample, and over a 2000×1500 photo-like JPEG (made here),
// where reduced scales apply to most crops.
func BenchmarkDecodeRandomResizedCrop(b *testing.B) {
	_, imagenet := shareddata.ImageNetJPEGs(b)
	large := [][]byte{photo(b, 2000, 1500)}
	rrc, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	for _, bc := range []struct {
		name   string
		data   [][]byte
		fused  bool
		reduce bool
	}{
		{"imagenet/full-then-crop", imagenet, false, false}, {"imagenet/window", imagenet, true, false}, {"imagenet/window-reduced", imagenet, true, true},
		{"2000x1500/full-then-crop", large, false, false}, {"2000x1500/window", large, true, false}, {"2000x1500/window-reduced", large, true, true},
	} {
		data := bc.data
		b.Run(bc.name, func(b *testing.B) {
			d := NewDecoder(bc.reduce)
			c := NewChain([]Op{rrc})
			var m Image
			n := 0
			for b.Loop() {
				in := data[n%len(data)]
				r := NewRand(1, 0, int64(n))
				if bc.fused {
					if _, err := c.ApplyEncoded(d, in, r); err != nil {
						b.Fatal(err)
					}
				} else {
					if err := d.Decode(&m, in); err != nil {
						b.Fatal(err)
					}
					c.Apply(&m, r)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
