package pipefile

import (
	"context"
	"github.com/pipefeed/pipe/fields"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// goStages is, for every registered stage, a .pipe line that gives only
// what the stage requires and the Go call that should build the same stage
// with the Go API's defaults. A stage registered without an entry here
// fails TestRegistryMatchesGo.
var goStages = map[string]struct {
	line string
	goes func() Stage
}{
	"shuffle":     {"shuffle", func() Stage { return Shuffle(0) }},
	"random_crop": {"random_crop 32", func() Stage { return Map(must(transform.RandomCrop(32, 0, transform.FillZero))) }},
	"flip":        {"flip", func() Stage { return Map(must(transform.Flip(transform.Horizontal, 0.5))) }},
	"shift":       {"shift", func() Stage { return Map(must(transform.Shift(0.1, 0.1, transform.FillZero))) }},
	"cache":       {"cache dir=/tmp/c", func() Stage { return Cache(cache.Config{Dir: "/tmp/c"}) }},
	"decode":      {"decode", func() Stage { return Decode(DecodeConfig{}) }},
	"resize":      {"resize 256", func() Stage { return Map(must(transform.Resize(256, transform.Bilinear))) }},
	"center_crop": {"center_crop 224", func() Stage { return Map(must(transform.CenterCrop(224))) }},
	"random_resized_crop": {"random_resized_crop 224", func() Stage {
		return Map(must(transform.RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, transform.Bilinear)))
	}},
	"color_jitter": {"color_jitter", func() Stage { return Map(must(transform.ColorJitter(0, 0, 0, 0))) }},
	"grayscale":    {"grayscale", func() Stage { return Map(must(transform.Grayscale(0.1))) }},
	"gaussian_blur": {"gaussian_blur 23", func() Stage {
		return Map(must(transform.GaussianBlur(23, [2]float64{0.1, 2})))
	}},
	"random_erasing": {"random_erasing", func() Stage {
		return Map(must(transform.RandomErasing(0.5, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, transform.EraseValue{Levels: []float64{0}})))
	}},
	"rotate": {"rotate 30", func() Stage { return Map(must(transform.Rotate(30, transform.SampleNearest, 0, false, 1))) }},
	"affine": {"affine 10", func() Stage {
		return Map(must(transform.Affine(10, [2]float64{}, [2]float64{1, 1}, [4]float64{}, transform.SampleNearest, 0)))
	}},
	"rand_augment": {"rand_augment", func() Stage { return Map(must(transform.RandAugment(2, 9, 31, transform.SampleNearest, 0))) }},
	"trivial_augment": {"trivial_augment", func() Stage {
		return Map(must(transform.TrivialAugment(31, transform.SampleNearest, 0)))
	}},
	"normalize": {"normalize mean=0.5 std=0.25", func() Stage {
		return Normalize(must(transform.Normalize([]float64{0.5}, []float64{0.25})))
	}},
	"batch":     {"batch 64", func() Stage { return Batching(64, false) }},
	"to_tensor": {"to_tensor", func() Stage { return ToTensor(transform.NCHW, transform.Float32) }},
	"prefetch":  {"prefetch", func() Stage { return Prefetch(PrefetchConfig{}) }},
	"train":     {"train mlp", func() Stage { return Train(DefaultTrain("mlp")) }},
	"eval":      {"eval", func() Stage { return Eval(EvalConfig{}) }},
	"pipeline":  {"pipeline", func() Stage { return Pipeline(Settings{OnError: engine.Fail}) }},
	"mixup":     {"mixup", func() Stage { return MixUp(1, 1, 0) }},
	"cutmix":    {"cutmix", func() Stage { return CutMix(1, 1, 0) }},
	"fields": {"fields image", func() Stage {
		return Fields(&fields.Schema{Fields: []fields.Field{{Kind: fields.Image}}, MinArea: 1})
	}},
}

// TestRegistryMatchesGo builds every registered stage both ways, from its
// shortest .pipe line and from the Go constructor with the Go API's
// defaults, and compares their canonical lines: a default that differs
// between the two shows here. Every canonical line names every parameter of
// its spec, so no setting hides from the comparison or from String.
func TestRegistryMatchesGo(t *testing.T) {
	for _, spec := range Stages() {
		if spec.Kind == "source" {
			continue // TestSourcesMatchGo
		}
		c, ok := goStages[spec.Name]
		if !ok {
			t.Errorf("stage %s has no Go twin in goStages", spec.Name)
			continue
		}
		f, err := Parse("x.pipe", "source synthetic\n"+c.line, testEnv)
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		stages, err := f.Stages()
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		got, want := stages[1].String(), c.goes().String()
		if got != want {
			t.Errorf("%s:\n.pipe %q\nGo    %q", spec.Name, got, want)
		}
		for _, p := range spec.Params {
			if p.Name == "seed" && spec.Name == "pipeline" || p.Bare {
				continue // optional: written only when given
			}
			if !strings.Contains(" "+got, " "+p.Name+"=") {
				t.Errorf("%s: canonical line %q lacks %s=", spec.Name, got, p.Name)
			}
		}
		// And the line parses back to itself.
		f2, err := Parse("y.pipe", "source synthetic\n"+got, testEnv)
		if err != nil {
			t.Errorf("%s: canonical line %q does not parse: %v", spec.Name, got, err)
			continue
		}
		again, err := f2.Stages()
		if err != nil || again[1].String() != got {
			t.Errorf("%s: %q reparsed as %v (%v)", spec.Name, got, again, err)
		}
	}
}

// TestSourcesMatchGo opens every registered source from a .pipe line and
// from its Go constructor and compares what they read.
func TestSourcesMatchGo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cifar := filepath.Join(dir, "data_batch_1.bin")
	rec := make([]byte, 10*(1+3072))
	os.WriteFile(cifar, rec, 0o644)
	cifar100 := filepath.Join(dir, "train.bin")
	os.WriteFile(cifar100, make([]byte, 10*(2+3072)), 0o644)
	folder := filepath.Join(dir, "folder", "cat")
	os.MkdirAll(folder, 0o755)
	img, _ := os.Create(filepath.Join(folder, "a.png"))
	png.Encode(img, image.NewRGBA(image.Rect(0, 0, 4, 4)))
	img.Close()
	shared := "../../shared/data"
	cases := map[string]struct {
		line string
		goes func() (source.Source, error)
	}{
		"synthetic": {"source synthetic", func() (source.Source, error) { return source.NewSynthetic(50000, source.Train, 0) }},
		"cifar10": {"source cifar10 path=" + cifar, func() (source.Source, error) {
			return source.OpenCIFAR10(ctx, cifar, source.Train)
		}},
		"cifar100": {"source cifar100 path=" + cifar100, func() (source.Source, error) {
			return source.OpenCIFAR100(ctx, cifar100, source.Train)
		}},
		"image_folder": {"source image_folder path=" + filepath.Dir(folder), func() (source.Source, error) {
			return source.OpenFolder(ctx, filepath.Dir(folder))
		}},
		"tfrecord": {"source tfrecord path=" + shared + "/tfrecord/train-*", func() (source.Source, error) {
			return source.OpenTFRecord(ctx, shared+"/tfrecord/train-*", source.WithFeatureKeys("image/encoded", "image/class/label"))
		}},
		"webdataset": {"source webdataset path=" + shared + "/webdataset/*.tgz", func() (source.Source, error) {
			return source.OpenWebDataset(ctx, shared+"/webdataset/*.tgz", source.WithJSONLabel("label"))
		}},
	}
	for _, spec := range Stages() {
		if spec.Kind != "source" {
			continue
		}
		c, ok := cases[spec.Name]
		if !ok {
			t.Errorf("source %s has no Go twin in this test", spec.Name)
			continue
		}
		if (spec.Name == "tfrecord" || spec.Name == "webdataset") && !exists(shared) {
			t.Logf("%s: %s is absent; skipped", spec.Name, shared)
			continue
		}
		t.Setenv("PIPE_CACHE", t.TempDir())
		f, err := Parse("x.pipe", c.line+"\nbatch 1", testEnv)
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		stages, err := f.Stages()
		if err == nil {
			stages, err = f.Open(ctx, stages, nil)
		}
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		src, err := c.goes()
		if err != nil {
			t.Errorf("%s from Go: %v", spec.Name, err)
			Close(stages)
			continue
		}
		got, want := stages[0].Source(), src
		if got.Info().Identity != want.Info().Identity || got.Len() != want.Len() || len(got.Info().Classes) != len(want.Info().Classes) {
			t.Errorf("%s: .pipe reads %s (%d samples), Go %s (%d)", spec.Name, got.Info().Identity, got.Len(), want.Info().Identity, want.Len())
		}
		Close(stages)
		src.Close()
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
