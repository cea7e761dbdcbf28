package pipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	stages := append([]Stage{Source(src), Decode(DecodeConfig{})}, extra...)
	return append(stages, Shuffle(1), Map(rrc), Map(flip), Normalize(norm), Batching(batch, false), ToTensor(transform.NCHW, transform.Float32))
}

// TestImageNetRecipe runs the recipe over the real ImageNet sample: every
// image decodes, batches are 224×224 float32, and the output does not
// depend on the worker count.
func TestImageNetRecipe(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	open := func() source.Source {
		f, err := source.OpenFolder(context.Background(), dir, source.WithLabels(filepath.Join(dir, "labels.csv")))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var sums []string
	for _, workers := range []int{1, 3} {
		p := mustNew(t, imagenetRecipe(open(), 16, Options(Settings{Workers: workers, OnError: Fail}))...)
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
// image format pipe does not decode (.webp) stop the run with
// on_error=fail, naming the file; with on_error=skip they are skipped,
// counted and listed. A file that is no image (notes.txt) is neither: the
// folder passes over it, as torchvision's ImageFolder does.
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
	os.WriteFile(filepath.Join(root, "b", "photo.webp"), []byte("RIFF\x00\x00\x00\x00WEBP"), 0o644)
	os.WriteFile(filepath.Join(root, "b", "notes.txt"), []byte("not an image"), 0o644)

	folder := func() source.Source {
		f, err := source.OpenFolder(context.Background(), root)
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
	p := mustNew(t, imagenetRecipe(folder(), 3, Options(Settings{Workers: 0, OnError: Skip}))...)
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
	for _, want := range []string{"truncated.jpg", "empty.jpg", "photo.webp"} {
		if !strings.Contains(got, want) {
			t.Errorf("skipped list %q lacks %s", got, want)
		}
	}
	if n := p.Source().Info().NonImages; n != 1 || strings.Contains(got, "notes.txt") {
		t.Errorf("%d non-image files passed over (skipped: %q); want notes.txt, and not skipped", n, got)
	}
	if !errors.Is(skipped[0], transform.ErrDecode) && !errors.Is(skipped[0], source.ErrFormat) && !errors.Is(skipped[0], source.ErrUnknownFormat) {
		t.Errorf("skip reasons: %v", skipped)
	}
}

// TestBrokenSymlinksSkippedOrFatal: a dangling symbolic link and a loop of
// them in an image folder stop the run with on_error=fail, naming the path
// and which it is; with on_error=skip they are skipped, counted and listed
// as a corrupt image is, and the other images train.
func TestBrokenSymlinksSkippedOrFatal(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(shareddata.Path(t, "imagenet-sample"), "*.JPEG"))
	root := t.TempDir()
	for i, f := range files[:4] {
		dir := filepath.Join(root, []string{"a", "b"}[i%2])
		os.MkdirAll(dir, 0o755)
		data, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644)
	}
	dangling, loop := filepath.Join(root, "a", "dangling.jpg"), filepath.Join(root, "b", "loop.jpg")
	if err := os.Symlink(filepath.Join(root, "gone.jpg"), dangling); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	os.Symlink("loop.jpg", loop)
	folder := func() source.Source {
		f, err := source.OpenFolder(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	p := mustNew(t, imagenetRecipe(folder(), 2)...)
	_, err := p.Run(context.Background(), RunOptions{})
	var re *source.RecordError
	if !errors.As(err, &re) || re.File != dangling || !errors.Is(err, source.ErrBrokenLink) ||
		!strings.Contains(err.Error(), "a dangling symbolic link") || !strings.Contains(err.Error(), "and 1 more") {
		t.Fatalf("on_error=fail: %v; want the dangling link named, and one more", err)
	}
	p = mustNew(t, imagenetRecipe(folder(), 2, Options(Settings{Workers: 2, OnError: Skip}))...)
	stats, err := p.Run(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	skipped, n := p.Skipped()
	if n != 2 || len(skipped) != 2 || stats[0].Images != 4 || stats[0].Skipped != 2 {
		t.Fatalf("skipped %d (%v), delivered %d; want the 2 links skipped and 4 images", n, skipped, stats[0].Images)
	}
	for _, s := range skipped {
		if s.File == loop && !strings.Contains(s.Error(), "a symbolic link loop") || s.File != loop && s.File != dangling || !errors.Is(s, source.ErrBrokenLink) {
			t.Errorf("skipped %v; want the two links, each saying what is wrong", s)
		}
	}
}

func TestDecodeStageErrors(t *testing.T) {
	dir := shareddata.Path(t, "imagenet-sample")
	f, err := source.OpenFolder(context.Background(), dir, source.WithLabels(filepath.Join(dir, "labels.csv")))
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
		{[]Stage{Source(f), Map(flip), Decode(DecodeConfig{}), Batching(4, false)}, "decode must come before image operations"},
		{[]Stage{Source(synth(t, 10)), Decode(DecodeConfig{}), Batching(4, false)}, "nothing to decode"},
		{[]Stage{Source(f), Decode(DecodeConfig{}), Batching(4, false)}, "varying size"},
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
	p, err := Load(context.Background(), f)
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

// TestFileDatasetRanksExactAndStreaming runs file datasets across ranks:
// TFRecord's two real files (858 and 165 records, so unequal shards) with
// a shuffle buffer, and the ImageNet folder with a full permutation. Every
// rank gets ⌊n / world⌋ samples, the ranks' samples are disjoint, and the
// streaming order reads mostly from one file at a time.
func TestFileDatasetRanksExactAndStreaming(t *testing.T) {
	tf := shareddata.Path(t, "tfrecord")
	inet := shareddata.Path(t, "imagenet-sample")
	dir := t.TempDir()
	for _, c := range []struct {
		name, source, shuffle string
		n, world              int
	}{
		{"tfrecord", "source tfrecord path=" + tf + "/*-of-* index_dir=" + dir + " label_offset=1", "shuffle seed=4 buffer=64", 858 + 165, 3},
		{"image_folder", "source image_folder path=" + inet + " labels=" + inet + "/labels.csv", "shuffle seed=4", 100, 3},
		{"tfrecord-one-rank", "source tfrecord path=" + tf + "/*-of-* index_dir=" + dir + " label_offset=1", "shuffle seed=4 buffer=64", 858 + 165, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := map[int]int{}
			per := c.n / c.world
			for rank := range c.world {
				f := filepath.Join(dir, c.name+".pipe")
				cfg := fmt.Sprintf("%s\ndecode\n%s\ncenter_crop 24\nbatch 50\nto_tensor layout=nchw dtype=uint8\npipeline rank=%d world=%d\n", c.source, c.shuffle, rank, c.world)
				os.WriteFile(f, []byte(cfg), 0o644)
				p, err := Load(context.Background(), f)
				if err != nil {
					t.Fatal(err)
				}
				var order []int
				for e := range 2 {
					var got []int
					_, err = p.Run(context.Background(), RunOptions{FirstEpoch: e, Epochs: 1, OnBatch: func(b *Batch) error {
						got = append(got, b.Samples...)
						return nil
					}})
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != per {
						t.Fatalf("rank %d epoch %d: %d samples, want %d", rank, e, len(got), per)
					}
					if e == 0 {
						order = got
						for _, s := range got {
							seen[s]++
						}
					} else if slices.Equal(order, got) {
						t.Errorf("rank %d: epochs 0 and 1 in the same order", rank)
					}
				}
				p.Close()
				if c.world == 1 && strings.Contains(c.shuffle, "buffer") {
					// Two files: a stream switches file once, the buffer
					// blurs that over about 64 samples; a full
					// permutation would switch ~500 times.
					switches := 0
					for i := 1; i < len(order); i++ {
						if (order[i] < 858) != (order[i-1] < 858) {
							switches++
						}
					}
					if switches > 100 {
						t.Errorf("streaming order switches file %d times", switches)
					}
				}
			}
			if len(seen) != per*c.world {
				t.Errorf("%d distinct samples over the ranks, want %d (disjoint shares)", len(seen), per*c.world)
			}
		})
	}
}
