package transform

import "testing"

// BenchmarkCropFlip is the CIFAR augmentation kernel on one core: a reflect-
// padded 32×32 random crop followed by a horizontal flip with p=0.5.
// The "fused" case is what pipelines run; "separate" applies the two ops one
// after the other and is the baseline the fusion is measured against.
func BenchmarkCropFlip(b *testing.B) {
	src := testImage(3, 32, 32)
	crop, _ := RandomCrop(32, 4, FillReflect)
	flip, _ := Flip(Horizontal, 0.5)
	for _, c := range []struct {
		name string
		ops  []Op
	}{
		{"fused", Fuse([]Op{crop, flip})},
		{"separate", []Op{crop, flip}},
	} {
		b.Run(c.name, func(b *testing.B) {
			chain := &Chain{ops: c.ops}
			b.SetBytes(int64(len(src.Pix)))
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				r := NewRand(42, 0, i)
				chain.Apply(src, r)
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkToTensor converts one normalised 32×32×3 image per op.
func BenchmarkToTensor(b *testing.B) {
	src := testImage(3, 32, 32)
	norm, _ := Normalize([]float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616})
	for _, c := range []struct {
		name   string
		layout Layout
		dtype  DType
		norm   *Normalization
	}{
		{"nchw-float32", NCHW, Float32, norm},
		{"nhwc-float32", NHWC, Float32, norm},
		{"nchw-float16", NCHW, Float16, norm},
		{"nchw-uint8", NCHW, Uint8, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			tt, _ := ToTensor(c.layout, c.dtype, c.norm, src.Shape())
			buf := make([]byte, tt.SampleBytes())
			b.SetBytes(int64(len(src.Pix)))
			b.ReportAllocs()
			for b.Loop() {
				tt.Write(buf, src)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
