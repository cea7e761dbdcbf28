package pipe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// cached is the recipe with a cache after the random crop; a flip after the
// cache checks that stages on both sides draw exactly what they would
// without a cache.
func cached(src source.Source, cfg *CacheConfig, extra ...Stage) []Stage {
	return cachedWith(src, 7, 4, cfg, extra...)
}

func cachedWith(src source.Source, seed uint64, pad int, cfg *CacheConfig, extra ...Stage) []Stage {
	crop, _ := transform.RandomCrop(32, pad, transform.FillReflect)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	shift, _ := transform.Shift(0.1, 0.1, transform.FillEdge)
	norm, _ := transform.Normalize([]float64{0.5}, []float64{0.25})
	stages := []Stage{Source(src), Shuffle(seed), Map(crop), Map(shift)}
	if cfg != nil {
		stages = append(stages, Cache(*cfg))
	}
	stages = append(stages, Map(flip), Normalize(norm), Batching(50, false), ToTensor(transform.NCHW, transform.Float32))
	return append(stages, extra...)
}

func runSums(t *testing.T, p *Pipeline, epochs int) ([]string, []EpochStats) {
	t.Helper()
	stats, err := p.Run(context.Background(), RunOptions{Epochs: epochs, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, s := range stats {
		sums = append(sums, s.Checksum)
	}
	return sums, stats
}

func total(stats []EpochStats, f func(EpochStats) int64) int64 {
	var n int64
	for _, s := range stats {
		n += f(s)
	}
	return n
}

// TestCacheIsExact is the cache contract: for epochs the cache holds, the
// stream is byte-identical with no cache, a cold cache and a warm cache, and
// whatever the worker count.
func TestCacheIsExact(t *testing.T) {
	dir := t.TempDir()
	cfg := &CacheConfig{Dir: dir, Epochs: 3, ShardSize: 64}
	plain := mustNew(t, cached(synth(t, 600), nil)...)
	want, _ := runSums(t, plain, 3)

	cold := mustNew(t, cached(synth(t, 600), cfg)...)
	got, stats := runSums(t, cold, 3)
	cold.Close()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("cold cache %v, no cache %v", got, want)
	}
	if h, m := total(stats, func(s EpochStats) int64 { return s.CacheHits }), total(stats, func(s EpochStats) int64 { return s.CacheMisses }); h != 0 || m != 3*10 {
		t.Errorf("cold run: %d hits, %d misses; want 0 and 30", h, m)
	}
	for _, w := range []int{1, 5} {
		warm := mustNew(t, cached(synth(t, 600), cfg, Options(Settings{Workers: w, OnError: Fail}))...)
		got, stats := runSums(t, warm, 3)
		warm.Close()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("warm cache, %d workers: %v, want %v", w, got, want)
		}
		if m := total(stats, func(s EpochStats) int64 { return s.CacheMisses }); m != 0 {
			t.Errorf("warm run with %d workers missed %d shards", w, m)
		}
	}
}

// TestCacheEchoes: epoch e ≥ K replays epoch e mod K's order and pre-cache
// output; the stages after the cache draw afresh.
func TestCacheEchoes(t *testing.T) {
	dir := t.TempDir()
	p := mustNew(t, cached(synth(t, 200), &CacheConfig{Dir: dir, Epochs: 2})...)
	defer p.Close()
	if info := p.CacheInfo(); !info.Echo || info.Epochs != 2 || !info.Ordered {
		t.Fatalf("CacheInfo %+v", info)
	}
	var orders [3][]int
	stats, err := p.Run(context.Background(), RunOptions{Epochs: 3, Checksum: true, OnBatch: func(b *Batch) error {
		orders[b.Epoch] = append(orders[b.Epoch], b.Samples...)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if stats[2].Checksum == stats[0].Checksum {
		t.Error("epoch 2 repeats epoch 0 byte for byte: the flip after the cache should draw afresh")
	}
	if stats[2].CacheMisses != 0 {
		t.Errorf("epoch 2 recomputed %d shards; it should reuse epoch 0's", stats[2].CacheMisses)
	}
	if fmt.Sprint(orders[2]) != fmt.Sprint(orders[0]) || fmt.Sprint(orders[1]) == fmt.Sprint(orders[0]) {
		t.Error("epoch 2 should replay epoch 0's order, and epoch 1 have its own")
	}
	// Position by position, epoch 2 shows epoch 0's pre-cache image, flipped
	// or not.
	flip, _ := transform.Flip(transform.Horizontal, 1)
	for i := range 50 {
		a, _, ia, _ := p.Augmented(0, i)
		b, _, ib, _ := p.Augmented(2, i)
		var m transform.Image
		r := transform.NewRand(0, 0, 0)
		flip.Apply(&m, a, &r)
		if ia != ib || (string(b.Pix) != string(a.Pix) && string(b.Pix) != string(m.Pix)) {
			t.Fatalf("position %d: epoch 2 is not epoch 0's image or its mirror", i)
		}
	}
}

func TestCacheFingerprint(t *testing.T) {
	dir := t.TempDir()
	fp := func(stages []Stage) string {
		p := mustNew(t, stages...)
		defer p.Close()
		return p.CacheInfo().Fingerprint
	}
	cfg := &CacheConfig{Dir: dir, Epochs: 2}
	base := fp(cached(synth(t, 100), cfg))
	if fp(cached(synth(t, 100), cfg)) != base {
		t.Fatal("the same pipeline has another fingerprint")
	}
	other, _ := source.NewSynthetic(100, source.Train, 4)
	changed := map[string][]Stage{
		"seed":   cachedWith(synth(t, 100), 8, 4, cfg),
		"source": cached(other, cfg),
		"param":  cachedWith(synth(t, 100), 7, 5, cfg),
		"shard":  cached(synth(t, 100), &CacheConfig{Dir: dir, Epochs: 2, ShardSize: 100}),
	}
	for name, stages := range changed {
		if fp(stages) == base {
			t.Errorf("changing the %s keeps the fingerprint", name)
		}
	}
	// Stages after the cache are not part of it.
	vflip, _ := transform.Flip(transform.Vertical, 0.5)
	after := cached(synth(t, 100), cfg)
	after = append(after[:5], append([]Stage{Map(vflip)}, after[5:]...)...)
	if fp(after) != base {
		t.Error("a stage after the cache changed its fingerprint")
	}
}

func TestCacheCorruptEntryIsRewritten(t *testing.T) {
	dir := t.TempDir()
	cfg := &CacheConfig{Dir: dir, Epochs: 1, ShardSize: 100}
	p := mustNew(t, cached(synth(t, 300), cfg)...)
	want, _ := runSums(t, p, 1)
	p.Close()
	// Flip a byte in the middle of the value log, inside some entry.
	files, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	flipped := false
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if i := bytes.Index(b, []byte("PIPS")); i >= 0 {
			b[i+200] ^= 0x55
			os.WriteFile(f, b, 0o644)
			flipped = true
			break
		}
	}
	if !flipped {
		t.Fatal("no entry found in the value log")
	}
	p = mustNew(t, cached(synth(t, 300), cfg)...)
	got, stats := runSums(t, p, 1)
	warnings := p.CacheInfo().Warnings
	p.Close()
	if got[0] != want[0] {
		t.Fatal("output changed after corruption")
	}
	// Badger may itself cut the value log at the damaged record, losing the
	// entries after it too: each damaged entry is reported once.
	if stats[0].CacheCorrupt < 1 || int64(len(warnings)) != stats[0].CacheCorrupt {
		t.Fatalf("corrupt %d, warnings %q", stats[0].CacheCorrupt, warnings)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "corrupt cache entry") || !strings.Contains(w, "recomputed and rewritten") {
			t.Errorf("warning %q", w)
		}
	}
	p = mustNew(t, cached(synth(t, 300), cfg)...)
	_, stats = runSums(t, p, 1)
	p.Close()
	if stats[0].CacheCorrupt != 0 || stats[0].CacheMisses != 0 {
		t.Errorf("after the rewrite: %+v", stats[0])
	}
}

func TestCacheUnusableDirectories(t *testing.T) {
	plain := mustNew(t, cached(synth(t, 200), nil)...)
	want, _ := runSums(t, plain, 1)

	// Locked by another process (here: another open handle): warn, compute live.
	dir := t.TempDir()
	other, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, cached(synth(t, 200), &CacheConfig{Dir: dir})...)
	got, _ := runSums(t, p, 1)
	info := p.CacheInfo()
	p.Close()
	other.Close()
	if got[0] != want[0] || info.Enabled || len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "in use by another process") {
		t.Errorf("locked: %v %+v", got, info)
	}

	// Written by a newer format: an error, before anything is read.
	future := t.TempDir()
	os.WriteFile(filepath.Join(future, "pipe-cache.json"), []byte(`{"format": 9}`), 0o644)
	if _, err := New(cached(synth(t, 200), &CacheConfig{Dir: future})...); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Errorf("newer format: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips.
func mountTmpfs(t *testing.T, size string, opts ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-t", "tmpfs", "-o", strings.Join(append([]string{"size=" + size}, opts...), ","), "tmpfs", dir}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

func TestCacheReadOnly(t *testing.T) {
	plain := mustNew(t, cached(synth(t, 300), nil)...)
	want, _ := runSums(t, plain, 1)

	// A warm cache on a filesystem remounted read-only is read, not written.
	dir := mountTmpfs(t, "256m")
	cfg := &CacheConfig{Dir: filepath.Join(dir, "c"), ShardSize: 100}
	p := mustNew(t, cached(synth(t, 300), cfg)...)
	runSums(t, p, 1)
	if w := p.CacheInfo().Warnings; len(w) != 0 {
		t.Fatalf("warming on the tmpfs: %q", w)
	}
	p.Close()
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only: %v %s", err, out)
	}
	p = mustNew(t, cached(synth(t, 300), cfg)...)
	got, stats := runSums(t, p, 1)
	info := p.CacheInfo()
	p.Close()
	if got[0] != want[0] || stats[0].CacheHits != 3 || len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "read-only") {
		t.Errorf("read-only: sums %v, %+v, warnings %q", got, stats[0], info.Warnings)
	}

}

// TestCacheDiskFull: when free space falls under the reserve, writing stops
// with one warning (Badger would die of SIGBUS on a full disk) and the
// output is still right.
func TestCacheDiskFull(t *testing.T) {
	plain := mustNew(t, cached(synth(t, 300), nil)...)
	want, _ := runSums(t, plain, 1)
	full := []store.Option{store.WithReserve(1 << 60)}
	p := mustNew(t, cached(synth(t, 300), &CacheConfig{Dir: t.TempDir(), ShardSize: 100, Options: full})...)
	got, _ := runSums(t, p, 1)
	info := p.CacheInfo()
	p.Close()
	if got[0] != want[0] || len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "disk nearly full") {
		t.Errorf("full disk: sums %v want %v, warnings %q", got, want, info.Warnings)
	}
	// pipe warm, which exists to write, fails instead.
	p = mustNew(t, cached(synth(t, 300), &CacheConfig{Dir: t.TempDir(), ShardSize: 100, Options: full})...)
	defer p.Close()
	if _, err := p.Warm(context.Background(), 0, nil); err == nil || !strings.Contains(err.Error(), "disk nearly full") {
		t.Errorf("warm on a full disk: %v", err)
	}
}

func TestWarmThenRunHits(t *testing.T) {
	dir := t.TempDir()
	cfg := &CacheConfig{Dir: dir, Epochs: 2, ShardSize: 64}
	p := mustNew(t, cached(synth(t, 500), cfg)...)
	var last WarmProgress
	st, err := p.Warm(context.Background(), 0, func(w WarmProgress) { last = w })
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 2*8 || st.Written != 16 || last.Shards != 16 || st.RawBytes < 2*500*3072 {
		t.Fatalf("warm: %+v", st)
	}
	again, _ := p.Warm(context.Background(), 0, nil)
	if again.Written != 0 || again.Shards != 16 {
		t.Errorf("second warm rewrote %d shards", again.Written)
	}
	_, stats := runSums(t, p, 2)
	p.Close()
	if m := total(stats, func(s EpochStats) int64 { return s.CacheMisses }); m != 0 {
		t.Errorf("run after warm missed %d shards", m)
	}
}

func TestRunWarmsAhead(t *testing.T) {
	dir := t.TempDir()
	p := mustNew(t, cached(synth(t, 500), &CacheConfig{Dir: dir, Epochs: 3, ShardSize: 64, Ahead: 2})...)
	defer p.Close()
	_, stats := runSums(t, p, 3)
	// Epochs 1 and 2 were warmed in the background while 0 ran; whatever the
	// warmer had not reached, the epoch computed itself. Together: 24 shards.
	misses := total(stats, func(s EpochStats) int64 { return s.CacheMisses })
	hits := total(stats, func(s EpochStats) int64 { return s.CacheHits })
	if misses+hits != 24 || hits == 0 {
		t.Errorf("%d misses and %d hits over 3 epochs of 8 shards; the warmer should have supplied some", misses, hits)
	}
}

// TestOneCopyCache: with nothing random before it, the cache holds one copy
// by sample index that every epoch reuses, and the stream is unchanged.
func TestOneCopyCache(t *testing.T) {
	crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
	stages := func(cfg *CacheConfig) []Stage {
		s := []Stage{Source(synth(t, 300)), Shuffle(5)}
		if cfg != nil {
			s = append(s, Cache(*cfg))
		}
		return append(s, Map(crop), Batching(64, false), ToTensor(transform.NCHW, transform.Uint8))
	}
	want, _ := runSums(t, mustNew(t, stages(nil)...), 3)
	p := mustNew(t, stages(&CacheConfig{Dir: t.TempDir(), ShardSize: 100, Epochs: 5})...)
	defer p.Close()
	if info := p.CacheInfo(); info.Echo || info.Ordered || info.Epochs != 1 {
		t.Fatalf("CacheInfo %+v", info)
	}
	got, stats := runSums(t, p, 3)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("one-copy cache %v, no cache %v", got, want)
	}
	if stats[0].CacheMisses != 3 || stats[1].CacheMisses != 0 || stats[2].CacheMisses != 0 {
		t.Errorf("misses per epoch: %d %d %d, want 3 0 0", stats[0].CacheMisses, stats[1].CacheMisses, stats[2].CacheMisses)
	}
}

// TestCacheKeepsSkippedRecords: under on_error=skip, records skipped while
// filling the cache are skipped, and reported the same, when read from it.
func TestCacheKeepsSkippedRecords(t *testing.T) {
	path := writeCIFAR(t, 200, map[int]byte{7: 12, 150: 99})
	dir := t.TempDir()
	run := func() ([]string, []EpochStats, []*source.RecordError) {
		src, err := source.OpenCIFAR10(context.Background(), path, source.Train)
		if err != nil {
			t.Fatal(err)
		}
		crop, _ := transform.RandomCrop(32, 2, transform.FillZero)
		p := mustNew(t, Source(src), Shuffle(1), Options(Settings{Workers: 2, OnError: Skip}), Map(crop),
			Cache(CacheConfig{Dir: dir, ShardSize: 50, Epochs: 2}), Batching(32, false))
		defer p.Close()
		sums, stats := runSums(t, p, 2)
		list, _ := p.Skipped()
		return sums, stats, list
	}
	coldSums, cold, coldList := run()
	warmSums, warm, warmList := run()
	if strings.Join(coldSums, " ") != strings.Join(warmSums, " ") {
		t.Fatal("skipping changed the stream between a cold and a warm cache")
	}
	for e := range 2 {
		if cold[e].Skipped != 2 || warm[e].Skipped != 2 || warm[e].CacheMisses != 0 {
			t.Errorf("epoch %d: cold %+v, warm %+v", e, cold[e], warm[e])
		}
	}
	if fmt.Sprint(coldList) != fmt.Sprint(warmList) || !strings.Contains(fmt.Sprint(warmList), "offset 21511: sample 7: label out of range") {
		t.Errorf("skipped records:\ncold %v\nwarm %v", coldList, warmList)
	}
}
