package pipe

import (
	"context"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// cifarRecipe is the benchmark recipe over real CIFAR-10 train,
// with extra stages before normalize.
func cifarRecipe(b *testing.B, dtype transform.DType, extra ...Stage) *Pipeline {
	return mustBench(b, cifarStages(b, dtype, false, extra)...)
}

// cifarStages is the recipe's stage list; normalize runs on the devices when
// onDevice is set (the caller adds the prefetch stage).
func cifarStages(b *testing.B, dtype transform.DType, onDevice bool, extra []Stage) []Stage {
	src, err := source.OpenCIFAR10(context.Background(), shareddata.Path(b, "cifar10/cifar-10-binary.tar.gz"), source.Train)
	if err != nil {
		b.Fatal(err)
	}
	crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	stages := append([]Stage{Source(src), Shuffle(42), Map(crop), Map(flip)}, extra...)
	if dtype != transform.Uint8 {
		norm, _ := transform.Normalize([]float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616})
		if onDevice {
			stages = append(stages, DeviceNormalize(norm))
		} else {
			stages = append(stages, Normalize(norm))
		}
	}
	return append(stages, Batching(256, false), ToTensor(transform.NCHW, dtype))
}

func mustBench(b *testing.B, stages ...Stage) *Pipeline {
	p, err := New(stages...)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkCIFAREpoch streams whole epochs of real CIFAR-10 (50,000 images)
// per op; images/s is the end-to-end figure. allocs/op is per epoch: it
// must not grow with the number of batches or samples.
func BenchmarkCIFAREpoch(b *testing.B) {
	for _, dt := range []transform.DType{transform.Float32, transform.Uint8} {
		b.Run(dt.String(), func(b *testing.B) {
			p := cifarRecipe(b, dt)
			defer p.Close()
			benchEpochs(b, p, 0)
		})
	}
}

// BenchmarkCIFARCache compares, in one run, computing epochs live with
// reading them from a warm cache placed after the random stages (3 distinct
// epochs, warmed before the timer starts), float32 output.
func BenchmarkCIFARCache(b *testing.B) {
	dir := b.TempDir()
	for _, c := range []struct {
		name  string
		cache bool
	}{{"live", false}, {"warm", true}} {
		b.Run(c.name, func(b *testing.B) {
			var extra []Stage
			if c.cache {
				extra = []Stage{Cache(CacheConfig{Dir: dir, Epochs: 3})}
			}
			p := cifarRecipe(b, transform.Float32, extra...)
			defer p.Close()
			if c.cache {
				if _, err := p.Warm(context.Background(), 0, nil); err != nil {
					b.Fatal(err)
				}
			}
			benchEpochs(b, p, 3)
		})
	}
}

// BenchmarkCIFARPrefetch compares, in one run, the recipe without a prefetch
// stage and with prefetch depth=3 on 2 simulated CPU devices, float32 out:
// normalised on the host (float32 crosses to the devices) or on the devices
// (uint8 crosses, a quarter of the bytes).
func BenchmarkCIFARPrefetch(b *testing.B) {
	prefetch := Prefetch(PrefetchConfig{Depth: 3, Devices: "cpu:2"})
	for _, c := range []struct {
		name     string
		onDevice bool
		tail     []Stage
	}{
		{"none", false, nil},
		{"cpu2-depth3", false, []Stage{prefetch}},
		{"cpu2-depth3-normdevice", true, []Stage{prefetch}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := mustBench(b, append(cifarStages(b, transform.Float32, c.onDevice, nil), c.tail...)...)
			defer p.Close()
			benchEpochs(b, p, 0)
		})
	}
}

// benchEpochs runs one epoch per iteration (epochs cycle through 0..cycle-1
// when cycle > 0, as for a cache of that many epochs) and reports images/s.
//
// It runs under the GOMAXPROCS the pipeline asks for (Summary.Procs), as
// pipe does.
func benchEpochs(b *testing.B, p *Pipeline, cycle int) {
	if n := p.Summary().Procs; n > runtime.GOMAXPROCS(0) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	}
	b.ReportAllocs()
	e := 0
	for b.Loop() {
		first := e
		if cycle > 0 {
			first = e % cycle
		}
		if _, err := p.Run(context.Background(), RunOptions{FirstEpoch: first}); err != nil {
			b.Fatal(err)
		}
		e++
	}
	b.ReportMetric(float64(b.N*p.Samples())/b.Elapsed().Seconds(), "images/s")
}

// imagenetCopies returns a flat directory and labels CSV holding the real
// ImageNet sample n times over (symbolic links), so an epoch is long
// enough to measure.
func imagenetCopies(b *testing.B, n int) (dir, labels string) {
	src := shareddata.Path(b, "imagenet-sample")
	rows, err := os.ReadFile(filepath.Join(src, "labels.csv"))
	if err != nil {
		b.Fatal(err)
	}
	dir = b.TempDir()
	var csv strings.Builder
	csv.WriteString("file,label\n")
	for _, line := range strings.Split(strings.TrimSpace(string(rows)), "\n")[1:] {
		file, label, _ := strings.Cut(line, ",")
		for i := range n {
			name := fmt.Sprintf("%d_%s", i, file)
			if err := os.Symlink(filepath.Join(src, file), filepath.Join(dir, name)); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&csv, "%s,%s\n", name, label)
		}
	}
	labels = filepath.Join(b.TempDir(), "labels.csv")
	if err := os.WriteFile(labels, []byte(csv.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, labels
}

// BenchmarkImageNet runs the ImageNet training recipe (decode,
// random_resized_crop 224, flip, normalize, batch 64, float32 NCHW) over the
// real sample (10 copies: 1,000 JPEGs an epoch) at the files' own sizes:
// live, and from a warm cache after decode + resize 256 (3 epochs,
// warmed before the timer). With -tags jpegturbo, decode is libjpeg-turbo's
// and "live" decodes only the crop's window; "live-full" turns that off
// (decode reduce=false). Compare images/s with bench/torch/imagenet.py
// loader --workers 2.
func BenchmarkImageNet(b *testing.B) {
	dir, labels := imagenetCopies(b, 10)
	cacheDir := b.TempDir()
	rrc, _ := transform.RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, transform.Bilinear)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	norm, _ := transform.Normalize([]float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225})
	resize, _ := transform.Resize(256, transform.Bilinear)
	for _, c := range []struct {
		name   string
		reduce bool
		pre    []Stage
	}{
		{"live", true, nil},
		{"live-full", false, nil},
		{"warm-cache", true, []Stage{Map(resize), Cache(CacheConfig{Dir: cacheDir, Epochs: 1})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			src, err := source.OpenFolder(context.Background(), dir, source.WithLabels(labels))
			if err != nil {
				b.Fatal(err)
			}
			stages := append([]Stage{Source(src), Decode(DecodeConfig{FullScale: !c.reduce}), Shuffle(1)}, c.pre...)
			stages = append(stages, Map(rrc), Map(flip), Normalize(norm), Batching(64, false), ToTensor(transform.NCHW, transform.Float32))
			p := mustBench(b, stages...)
			defer p.Close()
			if c.pre != nil {
				if _, err := p.Warm(context.Background(), 0, nil); err != nil {
					b.Fatal(err)
				}
			}
			benchEpochs(b, p, 0)
		})
	}
}

// imagenetMaskCopies is imagenetCopies with a mask for every image: the
// images in dir/images, their masks in dir/masks (segMask's two
// rectangles, PNG, at each image's size), as bench/torch/imagenet.py seg
// makes them.
func imagenetMaskCopies(b *testing.B, n int) (dir, labels string) {
	src := shareddata.Path(b, "imagenet-sample")
	rows, err := os.ReadFile(filepath.Join(src, "labels.csv"))
	if err != nil {
		b.Fatal(err)
	}
	dir = b.TempDir()
	for _, d := range []string{"images", "masks"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var csv strings.Builder
	csv.WriteString("file,label\n")
	for k, line := range strings.Split(strings.TrimSpace(string(rows)), "\n")[1:] {
		file, label, _ := strings.Cut(line, ",")
		f, err := os.Open(filepath.Join(src, file))
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := jpeg.DecodeConfig(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		mask := segMask(cfg.Width, cfg.Height, k)
		for i := range n {
			name := fmt.Sprintf("%d_%s", i, file)
			if err := os.Symlink(filepath.Join(src, file), filepath.Join(dir, "images", name)); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "masks", strings.TrimSuffix(name, filepath.Ext(name))+".png"), mask, 0o644); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&csv, "%s,%s\n", name, label)
		}
	}
	labels = filepath.Join(b.TempDir(), "labels.csv")
	if err := os.WriteFile(labels, []byte(csv.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "images"), labels
}

// BenchmarkImageNetAugment runs BenchmarkImageNet's live recipe with
// more: "randaugment" adds rand_augment n=2 m=9 after the flip (compare
// bench/torch/imagenet.py loader --randaugment); "mask" reads a mask
// beside every image (fields image mask label), which the crop and flip
// move, and batches it (compare bench/torch/imagenet.py seg; against
// BenchmarkImageNet/live it is the cost of the added field).
func BenchmarkImageNetAugment(b *testing.B) {
	rrc, _ := transform.RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, transform.Bilinear)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	norm, _ := transform.Normalize([]float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225})
	ra, _ := transform.RandAugment(2, 9, 31, transform.SampleNearest, 0)
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Mask}, {Kind: fields.Label}}, MinArea: 1}
	for _, c := range []struct {
		name string
		mask bool
		ops  []Stage
	}{
		{"randaugment", false, []Stage{Map(rrc), Map(flip), Map(ra)}},
		{"mask", true, []Stage{Map(rrc), Map(flip)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var src source.Source
			var err error
			stages := []Stage{}
			if c.mask {
				dir, labels := imagenetMaskCopies(b, 10)
				src, err = source.OpenFolder(context.Background(), dir, source.WithLabels(labels), source.WithFields(schema))
				stages = append(stages, Source(src), Fields(schema))
			} else {
				dir, labels := imagenetCopies(b, 10)
				src, err = source.OpenFolder(context.Background(), dir, source.WithLabels(labels))
				stages = append(stages, Source(src))
			}
			if err != nil {
				b.Fatal(err)
			}
			stages = append(stages, Decode(DecodeConfig{}), Shuffle(1))
			stages = append(stages, c.ops...)
			stages = append(stages, Normalize(norm), Batching(64, false), ToTensor(transform.NCHW, transform.Float32))
			p := mustBench(b, stages...)
			defer p.Close()
			benchEpochs(b, p, 0)
		})
	}
}
