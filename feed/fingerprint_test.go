package feed

import (
	"testing"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// TestFingerprint: the same pipeline has the same fingerprint however it is
// run (workers, rank and world are not part of it); another augmentation,
// batch size, seed or dataset has another.
func TestFingerprint(t *testing.T) {
	type recipe struct {
		n, batch, workers int
		p                 float64
		seed              uint64
		rank, world       int
	}
	build := func(r recipe) string {
		t.Helper()
		src, err := source.NewSynthetic(r.n, source.Train, 1)
		if err != nil {
			t.Fatal(err)
		}
		crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
		flip, _ := transform.Flip(transform.Horizontal, r.p)
		p, err := pipe.New(pipe.Source(src), pipe.Shuffle(r.seed), pipe.Map(crop), pipe.Map(flip),
			pipe.Options(pipe.Settings{Workers: r.workers, Rank: r.rank, World: r.world}), pipe.Batching(r.batch, false),
			pipe.ToTensor(transform.NCHW, transform.Float32))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return Fingerprint(p)
	}
	base := recipe{n: 1000, batch: 50, workers: 1, p: 0.5, seed: 5, world: 1}
	want := build(base)
	if len(want) != 32 {
		t.Fatalf("fingerprint %q", want)
	}
	same := base
	same.workers, same.rank, same.world = 3, 1, 2
	if got := build(same); got != want {
		t.Errorf("workers 3, rank 1 of 2: fingerprint %s, want %s", got, want)
	}
	for name, r := range map[string]recipe{
		"flip p": {n: 1000, batch: 50, workers: 1, p: 0.25, seed: 5, world: 1},
		"batch":  {n: 1000, batch: 40, workers: 1, p: 0.5, seed: 5, world: 1},
		"seed":   {n: 1000, batch: 50, workers: 1, p: 0.5, seed: 6, world: 1},
		"data":   {n: 1001, batch: 50, workers: 1, p: 0.5, seed: 5, world: 1},
	} {
		if got := build(r); got == want {
			t.Errorf("%s changed, the fingerprint did not", name)
		}
	}
}

// identified is a source whose identity is a URL, as a bucket's is.
type identified struct {
	source.Source
	id string
}

func (s identified) Info() source.Info {
	i := s.Source.Info()
	i.Identity = s.id
	return i
}

// TestFingerprintWithoutSecrets: a presigned URL whose signature rotates
// names the same stream, so a loader resumes its saved position; another
// object names another.
func TestFingerprintWithoutSecrets(t *testing.T) {
	build := func(id string) string {
		t.Helper()
		src, err := source.NewSynthetic(100, source.Train, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipe.New(pipe.Source(identified{src, id}), pipe.Batching(10, false), pipe.ToTensor(transform.NCHW, transform.Float32))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return Fingerprint(p)
	}
	a := build("webdataset https://h/a.tar?X-Amz-Expires=60&X-Amz-Signature=one label_field=label")
	if b := build("webdataset https://h/a.tar?X-Amz-Expires=60&X-Amz-Signature=two label_field=label"); a != b {
		t.Errorf("a rotated signature changed the fingerprint: %s, %s", a, b)
	}
	if c := build("webdataset https://h/b.tar?X-Amz-Expires=60&X-Amz-Signature=one label_field=label"); a == c {
		t.Error("another object has the same fingerprint")
	}
}
