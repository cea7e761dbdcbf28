package pipe

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// imagenetRecipe is the ImageNet training recipe over src.
func imagenetRecipe(src source.Source, batch int, extra ...Stage) []Stage {
	rrc, _ := transform.RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, transform.Bilinear)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	norm, _ := transform.Normalize([]float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225})
	stages := append([]Stage{Source(src), Decode(true)}, extra...)
	return append(stages, Shuffle(1), Map(rrc), Map(flip), Normalize(norm), Batching(batch, false), ToTensor(transform.NCHW, transform.Float32))
}

// TestImageNetRecipe runs the recipe over the real ImageNet sample: every
// image decodes, batches are 224×224 float32, and the output does not
// depend on the worker count.
func TestImageNetRecipe(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	open := func() source.Source {
		f, err := source.OpenFolder(dir, source.WithLabels(filepath.Join(dir, "labels.csv")))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var sums []string
	for _, workers := range []int{1, 3} {
		p := mustNew(t, imagenetRecipe(open(), 16, Options(workers, Fail, -1))...)
		if d := p.Tensor().Dims(16); d != [4]int{16, 3, 224, 224} {
			t.Fatalf("dims %v", d)
		}
		stats, err := p.Run(context.Background(), RunOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		if stats[0].Images != 100 {
			t.Errorf("%d images", stats[0].Images)
		}
		sums = append(sums, stats[0].Checksum)
	}
	if sums[0] != sums[1] {
		t.Errorf("checksum %s with 1 worker, %s with 3", sums[0], sums[1])
	}
}

// TestBadImagesSkippedOrFatal: a corrupt JPEG, a zero-byte file and an
// unknown extension stop the run with on_error=fail, naming the file; with
// on_error=skip they are skipped, counted and listed.
func TestBadImagesSkippedOrFatal(t *testing.T) {
	src := shareddata.Path(t, "imagenet-sample")
	files, _ := filepath.Glob(filepath.Join(src, "*.JPEG"))
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	os.MkdirAll(filepath.Join(root, "b"), 0o755)
	for i, f := range files[:6] {
		data, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(root, []string{"a", "b"}[i%2], filepath.Base(f)), data, 0o644)
	}
	good, _ := os.ReadFile(files[6])
	os.WriteFile(filepath.Join(root, "a", "truncated.jpg"), good[:len(good)/3], 0o644)
	os.WriteFile(filepath.Join(root, "b", "empty.jpg"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "b", "notes.txt"), []byte("not an image"), 0o644)

	folder := func() source.Source {
		f, err := source.OpenFolder(root)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	_, err := New(imagenetRecipe(folder(), 3)...)
	if err == nil {
		p := mustNew(t, imagenetRecipe(folder(), 3)...)
		_, err = p.Run(context.Background(), RunOptions{})
	}
	var re *source.RecordError
	if !errors.As(err, &re) || re.File == "" {
		t.Fatalf("on_error=fail: %v", err)
	}
	p := mustNew(t, imagenetRecipe(folder(), 3, Options(0, Skip, -1))...)
	stats, err := p.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	skipped, n := p.Skipped()
	if n != 3 || stats[0].Images != 6 {
		t.Fatalf("skipped %d (%v), delivered %d", n, skipped, stats[0].Images)
	}
	var names []string
	for _, s := range skipped {
		names = append(names, filepath.Base(s.File))
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"truncated.jpg", "empty.jpg", "notes.txt"} {
		if !strings.Contains(got, want) {
			t.Errorf("skipped list %q lacks %s", got, want)
		}
	}
	if !errors.Is(skipped[0], transform.ErrDecode) && !errors.Is(skipped[0], source.ErrFormat) && !errors.Is(skipped[0], source.ErrUnknownFormat) {
		t.Errorf("skip reasons: %v", skipped)
	}
}

func TestDecodeStageErrors(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	f, err := source.OpenFolder(dir, source.WithLabels(filepath.Join(dir, "labels.csv")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	cc, _ := transform.CenterCrop(224)
	for _, c := range []struct {
		stages []Stage
		want   string
	}{
		{[]Stage{Source(f), Map(cc), Batching(4, false)}, "add a decode stage"},
		{[]Stage{Source(f), Map(flip), Decode(true), Batching(4, false)}, "decode must come before image operations"},
		{[]Stage{Source(synth(t, 10)), Decode(true), Batching(4, false)}, "nothing to decode"},
		{[]Stage{Source(f), Decode(true), Batching(4, false)}, "varying size"},
	} {
		if _, err := New(c.stages...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

// TestWebDatasetPipeline: the real WebDataset shard (greyscale PNGs)
// through decode, a crop and batches, from a .pipe file.
func TestWebDatasetPipeline(t *testing.T) {
	shard := shareddata.Path(t, "webdataset/sample.tgz")
	dir := t.TempDir()
	f := filepath.Join(dir, "w.pipe")
	os.WriteFile(f, []byte("source webdataset path="+shard+" index_dir="+dir+"\ndecode\nshuffle seed=1\ncenter_crop 24\nbatch 30\nto_tensor layout=nchw dtype=uint8\n"), 0o644)
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var labels []int32
	stats, err := p.Run(context.Background(), RunOptions{OnBatch: func(b *Batch) error {
		if b.N != 30 || len(b.Data) != 30*3*24*24 {
			t.Errorf("batch of %d, %d bytes", b.N, len(b.Data))
		}
		// Greyscale: the three channels of a sample are equal.
		if !bytes.Equal(b.Data[:576], b.Data[576:1152]) {
			t.Error("greyscale PNG decoded with unequal channels")
		}
		labels = append(labels, b.Labels...)
		return nil
	}})
	if err != nil || stats[0].Images != 90 || len(labels) != 90 {
		t.Fatalf("%v, %+v", err, stats)
	}
}
