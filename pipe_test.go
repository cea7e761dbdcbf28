package pipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func synth(t testing.TB, n int) source.Source {
	s, err := source.NewSynthetic(n, source.Train, 3)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func recipe(src source.Source, extra ...Stage) []Stage { return seeded(src, 42, extra...) }

func seeded(src source.Source, seed uint64, extra ...Stage) []Stage {
	crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	shift, _ := transform.Shift(0.1, 0.1, transform.FillEdge)
	norm, _ := transform.Normalize([]float64{0.49, 0.48, 0.45}, []float64{0.25, 0.24, 0.26})
	return append([]Stage{Source(src), Shuffle(seed), Map(crop), Map(flip), Map(shift), Normalize(norm),
		Batching(64, false), ToTensor(transform.NCHW, transform.Float32)}, extra...)
}

func mustNew(t testing.TB, stages ...Stage) *Pipeline {
	t.Helper()
	p, err := New(stages...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func checksums(t *testing.T, p *Pipeline, epochs int) []string {
	t.Helper()
	sums, _ := runSums(t, p, epochs)
	return sums
}

// TestOutputIndependentOfWorkers is the determinism contract: the stream of
// bytes and labels depends on the data, stages, seed and epoch only.
func TestOutputIndependentOfWorkers(t *testing.T) {
	p := mustNew(t, recipe(synth(t, 1000))...)
	p.SetWorkers(1)
	want := checksums(t, p, 3)
	if want[0] == want[1] || want[1] == want[2] {
		t.Fatalf("epochs repeat: %v", want)
	}
	for _, w := range []int{2, 3, 8} {
		p.SetWorkers(w)
		if got := checksums(t, p, 3); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("workers=%d: checksums %v, want %v", w, got, want)
		}
	}
	again := mustNew(t, recipe(synth(t, 1000))...)
	if got := checksums(t, again, 3); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("a second pipeline gives %v, want %v", got, want)
	}
	if got := checksums(t, mustNew(t, seeded(synth(t, 1000), 43)...), 1); got[0] == want[0] {
		t.Error("seed 43 gives the same epoch as seed 42")
	}
}

// TestBatchContents checks batches against a direct computation: every
// sample is the pipeline's own augmentation of the planned index, in order.
func TestBatchContents(t *testing.T) {
	src := synth(t, 200)
	p := mustNew(t, recipe(src)...)
	x, err := p.Epoch(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	sb := p.Tensor().SampleBytes()
	pos, sizes := 0, []int{}
	plan := p.plan.Epoch(1, nil)
	buf := make([]byte, sb)
	for {
		b, err := x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, b.N)
		for k := 0; k < b.N; k++ {
			img, label, idx, err := p.Augmented(1, pos)
			if err != nil {
				t.Fatal(err)
			}
			if idx != plan[pos] || b.Samples[k] != idx || int(b.Labels[k]) != label {
				t.Fatalf("position %d: sample %d label %d, want %d label %d", pos, b.Samples[k], b.Labels[k], idx, label)
			}
			p.Tensor().Write(buf, img)
			if !bytes.Equal(buf, b.Data[k*sb:(k+1)*sb]) {
				t.Fatalf("position %d (sample %d): tensor differs from the direct computation", pos, idx)
			}
			pos++
		}
		b.Release()
	}
	if fmt.Sprint(sizes) != "[64 64 64 8]" {
		t.Errorf("batch sizes %v, want [64 64 64 8]", sizes)
	}
	if s := x.Stats(); s.Images != 200 || s.Batches != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestIdentityPipelineIsTheSource(t *testing.T) {
	src := synth(t, 50)
	p := mustNew(t, Source(src), Batching(16, true), ToTensor(transform.NCHW, transform.Uint8))
	var rec source.Record
	i := 0
	_, err := p.Run(context.Background(), RunOptions{OnBatch: func(b *Batch) error {
		for k := 0; k < b.N; k++ {
			src.Read(i, &rec)
			if !bytes.Equal(b.Data[k*3072:(k+1)*3072], rec.Pix) || int(b.Labels[k]) != rec.Label {
				return fmt.Errorf("sample %d differs from the source", i)
			}
			i++
		}
		return nil
	}})
	if err != nil || i != 48 {
		t.Fatalf("%v after %d samples (drop_last: want 48)", err, i)
	}
}

func writeCIFAR(t *testing.T, n int, badLabels map[int]byte) string {
	dir := t.TempDir()
	var b []byte
	for i := range n {
		rec := make([]byte, 3073)
		rec[0] = byte(i % 10)
		if l, ok := badLabels[i]; ok {
			rec[0] = l
		}
		for j := 1; j < len(rec); j++ {
			rec[j] = byte(i + j)
		}
		b = append(b, rec...)
	}
	p := filepath.Join(dir, "data_batch_1.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCorruptRecordPolicies(t *testing.T) {
	path := writeCIFAR(t, 100, map[int]byte{17: 12, 60: 255})
	open := func() source.Source {
		c, err := source.OpenCIFAR10(context.Background(), path, source.Train)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// fail: an error before any batch, naming file, offset and index.
	p := mustNew(t, Source(open()), Batching(10, false))
	_, err := p.Epoch(context.Background(), 0)
	var re *source.RecordError
	if !errors.As(err, &re) || re.Index != 17 || re.Offset != 17*3073 || !strings.Contains(err.Error(), "data_batch_1.bin") || !strings.Contains(err.Error(), "1 more") {
		t.Fatalf("fail policy: %v", err)
	}
	// skip: the two records are left out, counted and listed; nothing else moves.
	p = mustNew(t, Source(open()), Shuffle(5), Options(Settings{Workers: 3, OnError: Skip}), Batching(10, false))
	var seen []int
	stats, err := p.Run(context.Background(), RunOptions{OnBatch: func(b *Batch) error {
		seen = append(seen, b.Samples...)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if stats[0].Skipped != 2 || stats[0].Images != 98 || len(seen) != 98 {
		t.Fatalf("skip: %+v, %d samples", stats[0], len(seen))
	}
	plan := p.plan.Epoch(0, nil)
	k := 0
	for _, i := range plan {
		if i == 17 || i == 60 {
			continue
		}
		if seen[k] != i {
			t.Fatalf("skipping moved sample %d to position %d", i, k)
		}
		k++
	}
	list, n := p.Skipped()
	if n != 2 || len(list) != 2 {
		t.Fatalf("Skipped() = %v, %d", list, n)
	}
}

// TestRanksSplitEveryEpoch: the ranks of a job together read every sample
// of an epoch once (up to the remainder), each an equal share.
func TestRanksSplitEveryEpoch(t *testing.T) {
	const n, world = 1000, 3
	seen := map[int]int{}
	for r := range world {
		p := mustNew(t, recipe(synth(t, n), Options(Settings{Rank: r, World: world}))...)
		stats, err := p.Run(context.Background(), RunOptions{FirstEpoch: 2, OnBatch: func(b *Batch) error {
			for _, i := range b.Samples {
				seen[i]++
			}
			return nil
		}})
		if err != nil || stats[0].Images != n/world {
			t.Fatalf("rank %d: %v, %+v", r, err, stats)
		}
	}
	if len(seen) != n/world*world {
		t.Errorf("ranks read %d distinct samples, want %d", len(seen), n/world*world)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("sample %d read %d times", i, c)
		}
	}
}

// TestDeviceNormalizedBatchIsNotFloat: a host batch normalised on the
// devices (where=device) holds bytes, and its Float32 view says so
// (engine's tests cover the other dtypes).
func TestDeviceNormalizedBatchIsNotFloat(t *testing.T) {
	norm, err := transform.Normalize([]float64{0.5}, []float64{0.25})
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, Source(synth(t, 64)), DeviceNormalize(norm), Batching(16, false), ToTensor(transform.NCHW, transform.Float32),
		Prefetch(PrefetchConfig{Devices: "cpu:2"}))
	x, err := p.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := x.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Float32(); !errors.Is(err, ErrDType) {
		t.Errorf("Float32 of a %s batch normalised on the devices: %v, want ErrDType", b.DType, err)
	}
	b.Release()
	x.Close()
}
