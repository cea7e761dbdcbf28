package transform

import (
	"image"
	"testing"

	"github.com/disintegration/imaging"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// BenchmarkResizeVsImaging resizes the decoded ImageNet sample to a
// shorter side of 256 (bilinear) from as many goroutines as cores, as the
// worker pool does: with this package's resampler on CHW planes, and with
// github.com/disintegration/imaging on NRGBA images (converted before the
// timer, in imaging's favour). imaging starts goroutines of its own in
// every call; here they compete with the other workers. This is the
// measurement behind not using it for resize and random_resized_crop.
func BenchmarkResizeVsImaging(b *testing.B) {
	_, data := shareddata.ImageNetJPEGs(b)
	var chw []*Image
	var nrgba []*image.NRGBA
	d := NewDecoder(false)
	for _, f := range data {
		m := new(Image)
		if err := d.Decode(m, f); err != nil {
			b.Fatal(err)
		}
		chw = append(chw, m)
		n := image.NewNRGBA(image.Rect(0, 0, m.W, m.H))
		for y := range m.H {
			for x := range m.W {
				o := n.PixOffset(x, y)
				n.Pix[o], n.Pix[o+1], n.Pix[o+2], n.Pix[o+3] = m.Pix[y*m.W+x], m.Pix[(m.H+y)*m.W+x], m.Pix[(2*m.H+y)*m.W+x], 255
			}
		}
		nrgba = append(nrgba, n)
	}
	rs, _ := Resize(256, Bilinear)
	b.Run("pipe", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var out Image
			i := 0
			for pb.Next() {
				rs.Apply(&out, chw[i%len(chw)], nil)
				i++
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	})
	b.Run("imaging", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				m := nrgba[i%len(nrgba)]
				h, w := rs.size(m.Bounds().Dy(), m.Bounds().Dx())
				imaging.Resize(m, w, h, imaging.Linear)
				i++
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	})
}
