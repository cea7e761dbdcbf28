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

// BenchmarkSampleFields is a segmentation and detection sample (a VOC-sized
// 500×375 image with a uint8 mask and 10 boxes) through random_resized_crop
// 224 and a horizontal flip: "image" is the image alone (Apply), "fields"
// moves the mask and boxes with it (ApplySample), so their difference is
// what the fields cost.
func BenchmarkSampleFields(b *testing.B) {
	src := testImage(3, 375, 500)
	rrc, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	flip, _ := Flip(Horizontal, 0.5)
	chain := NewChain([]Op{rrc, flip})
	mask := Mask{Pix: make([]byte, 375*500), H: 375, W: 500, Size: 1}
	boxes := make([]Box, 10)
	for i := range boxes {
		boxes[i] = Box{X0: float32(40 * i), Y0: float32(30 * i), X1: float32(40*i + 60), Y1: float32(30*i + 50), Class: int64(i)}
	}
	for _, withFields := range []bool{false, true} {
		name := "image"
		if withFields {
			name = "fields"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var f Fields
			i := int64(0)
			for b.Loop() {
				r := NewRand(42, 0, i)
				if withFields {
					f.Mask, f.Boxes = mask, append(f.Boxes[:0], boxes...)
					if _, err := chain.ApplySample(src, &f, r); err != nil {
						b.Fatal(err)
					}
				} else {
					chain.Apply(src, r)
				}
				i++
			}
		})
	}
}
