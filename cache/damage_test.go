package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/fb"
	"go.uber.org/goleak"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/internal/faults"
	"github.com/pipefeed/pipe/transform"
)

// noisyCompute generates entries that live in Badger's value log, as real
// ones do: sample k of cache epoch e has label k, state 1000+k, and 1,200
// pixels drawn from (e, k), which do not compress.
func noisyCompute(c *Cache) ComputeFunc {
	return func(ctx context.Context, id ShardID, dst []byte) ([]byte, error) {
		first := id.Index * c.ShardSize()
		n := min(c.ShardSize(), c.Samples()-first)
		w := NewWriter(dst, n)
		for k := first; k < first+n; k++ {
			w.Sample(k, &transform.Image{Pix: noisyPixels(id.Epoch, k), C: 1, H: 1, W: 1200}, uint64(1000+k))
		}
		return w.Bytes(), nil
	}
}

func noisyPixels(epoch, k int) []byte {
	r := rand.New(rand.NewPCG(uint64(epoch), uint64(k)))
	pix := make([]byte, 1200)
	for i := range pix {
		pix[i] = byte(r.Uint32())
	}
	return pix
}

// checkShards reads every shard of every cache epoch and fails the test on
// a sample other than the one computed.
func checkShards(t *testing.T, what string, c *Cache) {
	t.Helper()
	for e := range c.Distinct() {
		for s := range c.Shards() {
			sh, err := c.Shard(context.Background(), ShardID{e, s}, noisyCompute(c))
			if err != nil {
				t.Errorf("%s: epoch %d shard %d: %v", what, e, s, err)
				continue
			}
			for i := range sh.Len() {
				k := sh.First + i
				smp := sh.Sample(i, k)
				if smp.Label != k || smp.State != uint64(1000+k) || string(smp.Img.Pix) != string(noisyPixels(e, k)) {
					t.Errorf("%s: epoch %d sample %d is not the one computed", what, e, k)
				}
			}
			c.Release(sh)
		}
	}
}

func damageSpec(dir string) Spec {
	return Spec{Config: Config{Dir: dir, ShardSize: 4, Epochs: 3, Memory: 1 << 20}, Parts: []string{"damage"}, Samples: 60, Ordered: true}
}

// warmFixture warms a cache of 3 epochs × 15 entries, closes it, and opens
// and closes it once more, so that its newest value log holds no entry.
func warmFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	c, err := Open(damageSpec(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Warm(context.Background(), 0, 3, 2, func() ComputeFunc { return noisyCompute(c) }, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err = Open(damageSpec(dir)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDamagedCache flips five bits, for each of 12 seeds, in the cache's
// table and, separately, in its newest (empty) value log, then opens it,
// warms it with two workers and reads every sample, as pipe warm and a run
// would. Nothing may panic or hang, every sample read is the one computed,
// the warm succeeds, and damage found is in the warnings with what was
// done; a damaged value log header loses no entry. (Before: table flips
// made the warm fail with a Badger panic, or hang in Close; value log flips
// disabled the cache, and pipe warm said it "cannot be written".)
func TestDamagedCache(t *testing.T) {
	base := warmFixture(t)
	for _, k := range []struct {
		name, ext string
		last      bool
	}{{"table", ".sst", false}, {"newest value log", ".vlog", true}} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 12; seed++ {
				dir := faults.CopyDir(t, base)
				faults.FlipBits(t, faults.File(t, dir, k.ext, k.last), seed, 5)
				what := fmt.Sprintf("seed %d", seed)
				faults.Within(t, 10*time.Second, what, func() {
					c, err := Open(damageSpec(dir))
					if err != nil {
						t.Fatalf("%s: open: %v", what, err)
					}
					defer func() {
						if err := c.Close(); err != nil {
							t.Errorf("%s: close: %v", what, err)
						}
					}()
					st, err := c.Warm(context.Background(), 0, 3, 2, func() ComputeFunc { return noisyCompute(c) }, nil)
					if err != nil {
						t.Fatalf("%s: warm: %v", what, err)
					}
					warnings := strings.Join(c.Info().Warnings, "\n")
					switch {
					case warnings == "":
					case !strings.Contains(warnings, "damaged cache store") || !strings.Contains(warnings, dir):
						t.Errorf("%s: warnings %q", what, warnings)
					case k.last && (st.Written > 0 || !strings.Contains(warnings, "repaired, no entry lost")):
						t.Errorf("%s: %d entries written again; warnings %q", what, st.Written, warnings)
					}
					checkShards(t, what, c)
					if misses, _ := c.Counters(); misses > 0 {
						t.Errorf("%s: %d shards computed after the warm", what, misses)
					}
				})
			}
		})
	}
}

// damageTables rewrites, in place, the entry count at the end of every
// block of every table in dir, past the block's checksum check: Badger
// reads the count before it checks the checksum, and panics on slice
// bounds.
func damageTables(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		u32 := func(at int) int { return int(binary.BigEndian.Uint32(b[at:])) }
		end := len(b) - 8 - u32(len(b)-4) // the index's end
		ti := fb.GetRootAsTableIndex(b[end-u32(end):end], 0)
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		var bo fb.BlockOffset
		for i := range ti.OffsetsLength() {
			ti.Offsets(&bo, i)
			blockEnd := int(bo.Offset() + bo.Len())
			f.WriteAt([]byte{0x7f, 0xff, 0xff, 0xff}, int64(blockEnd-8-u32(blockEnd-4)))
		}
		f.Close()
	}
}

// TestWarmOnStoreDamagedWhileOpen: the store's tables are damaged under an
// open cache, so Badger panics in the warm's workers. The warm fails,
// promptly, with an error wrapping store.ErrDamaged; reads then compute
// live; Close returns; nothing is left running; the next open rebuilds the
// store and a warm fills it.
func TestWarmOnStoreDamagedWhileOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := warmFixture(t)
	c, err := Open(damageSpec(dir))
	if err != nil {
		t.Fatal(err)
	}
	damageTables(t, dir)
	faults.Within(t, 10*time.Second, "damaged while open", func() {
		_, err := c.Warm(context.Background(), 0, 3, 4, func() ComputeFunc { return noisyCompute(c) }, nil)
		if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), dir) {
			t.Errorf("warm: %v, want ErrDamaged", err)
		}
		if c.Readable() || c.Writable() {
			t.Error("a damaged store is still read or written")
		}
		checkShards(t, "after damage", c)
		if w := strings.Join(c.Info().Warnings, "\n"); !strings.Contains(w, "damaged cache store") || !strings.Contains(w, "computing live") {
			t.Errorf("warnings %q", w)
		}
		if err := c.Close(); err != nil && !errors.Is(err, store.ErrDamaged) {
			t.Errorf("close: %v", err)
		}
	})
	faults.Within(t, 10*time.Second, "reopened", func() {
		c, err := Open(damageSpec(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if w := strings.Join(c.Info().Warnings, "\n"); !strings.Contains(w, "rebuilt empty") {
			t.Errorf("warnings %q", w)
		}
		st, err := c.Warm(context.Background(), 0, 3, 2, func() ComputeFunc { return noisyCompute(c) }, nil)
		if err != nil || st.Written != 3*c.Shards() {
			t.Errorf("warm after rebuild: %+v, %v", st, err)
		}
	})
}

// TestWarmWorkerPanicStopsAll: a panic in one of many warm workers fails
// the warm with the panic and its stack, and every other goroutine stops.
func TestWarmWorkerPanicStopsAll(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := Open(Spec{Config: Config{Dir: t.TempDir(), ShardSize: 1, Memory: 1 << 20}, Parts: []string{"panic"}, Samples: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	faults.Within(t, 10*time.Second, "warm", func() {
		_, err := c.Warm(context.Background(), 0, 1, 8, func() ComputeFunc { return compute(c, -1, 37) }, nil)
		if err == nil || !strings.Contains(err.Error(), "computing shard 37") || !strings.Contains(err.Error(), "goroutine ") {
			t.Errorf("warm: %v", err)
		}
	})
}

// TestWarmReportsDamageNotUnwritable: a store left damaged (one that could
// not be repaired, in a read-only directory) fails a warm as damaged, not
// as "cannot be written".
func TestWarmReportsDamageNotUnwritable(t *testing.T) {
	c := Describe(damageSpec(t.TempDir()))
	c.openErr = fmt.Errorf("cache %s: %w: table 000001.sst: block 0: checksum mismatch (the directory is read-only, so it is not repaired)", c.cfg.Dir, store.ErrDamaged)
	_, err := c.Warm(context.Background(), 0, 1, 1, func() ComputeFunc { return noisyCompute(c) }, nil)
	if !errors.Is(err, store.ErrDamaged) || errors.Is(err, ErrNotWritable) || strings.Contains(err.Error(), "cannot be written") {
		t.Errorf("warm: %v", err)
	}
}

// TestWarmCancelledAsItStarts: a warm whose context is cancelled as it
// starts returns, thousands of times over, whichever of its goroutines pond
// had started (the workers once waited for a producer that pond skipped,
// its group being cancelled already, and the warm hung).
func TestWarmCancelledAsItStarts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	c, err := Open(Spec{Config: Config{Dir: t.TempDir(), ShardSize: 1, Memory: 1 << 20}, Parts: []string{"cancel"}, Samples: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	faults.Within(t, 30*time.Second, "warms cancelled as they start", func() {
		for i, start := 0, time.Now(); i < 3000 && time.Since(start) < 5*time.Second; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			go cancel()
			_, err := c.Warm(ctx, 0, 1, 8, func() ComputeFunc { return noisyCompute(c) }, nil)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("warm %d: %v", i, err)
				return
			}
		}
	})
}

// storeFileDamage damages one of the files read before any table: Badger's
// MANIFEST and KEYREGISTRY, and pipe's format record.
type storeFileDamage struct {
	name, file string
	damage     func(b []byte) []byte
	// kept: the repair keeps every entry; else the store is rebuilt empty.
	kept bool
}

func setByte(i int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[i] = v; return b }
}

func flipByte(i int) func([]byte) []byte {
	return func(b []byte) []byte { b[(i+len(b))%len(b)] ^= 0x10; return b }
}

func truncateTo(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }

var storeFileDamages = []storeFileDamage{
	{"MANIFEST version", "MANIFEST", setByte(7, 9), true},
	{"MANIFEST magic", "MANIFEST", flipByte(1), true},
	{"MANIFEST external magic", "MANIFEST", setByte(5, 1), true},
	{"MANIFEST truncated in its header", "MANIFEST", truncateTo(5), false},
	{"MANIFEST change checksum", "MANIFEST", flipByte(-1), false},
	{"KEYREGISTRY sanity text", "KEYREGISTRY", flipByte(20), true},
	{"KEYREGISTRY truncated", "KEYREGISTRY", truncateTo(20), true},
	{"KEYREGISTRY empty", "KEYREGISTRY", truncateTo(0), true},
	{"KEYREGISTRY grown", "KEYREGISTRY", func(b []byte) []byte { return append(b, 0, 0, 0, 9, 1, 2, 3, 4, 5) }, true},
	{"pipe-cache.json garbled", "pipe-cache.json", func([]byte) []byte { return []byte(`xx{garb`) }, true},
	{"pipe-cache.json truncated", "pipe-cache.json", truncateTo(12), true},
	{"pipe-cache.json empty", "pipe-cache.json", truncateTo(0), true},
}

func damageFile(t *testing.T, name string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStoreFiles damages the MANIFEST's header or a change in it,
// the KEYREGISTRY or pipe's format record (pipe-cache.json), then opens
// the cache, warms it and reads every sample, as pipe warm and a run would.
// The open repairs the store with exactly one warning that names the
// directory and the file; a damaged header, key registry or format record
// loses no entry (the warm writes none); a damaged change rebuilds the store
// empty. The next open finds nothing to say and computes nothing. (Before:
// a MANIFEST version, a KEYREGISTRY flip or a damaged pipe-cache.json
// disabled the cache for good, and warm failed with Badger's message; a
// MANIFEST magic or a truncated KEYREGISTRY rebuilt the store empty.)
func TestDamagedStoreFiles(t *testing.T) {
	base := warmFixture(t)
	cases := append(slices.Clone(storeFileDamages), storeFileDamage{"MANIFEST version and a table", "MANIFEST", setByte(7, 9), false})
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			dir := faults.CopyDir(t, base)
			damageFile(t, filepath.Join(dir, k.file), k.damage)
			if strings.Contains(k.name, "table") {
				damageTables(t, dir)
			}
			faults.Within(t, 10*time.Second, "damaged", func() {
				c, err := Open(damageSpec(dir))
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer c.Close()
				st, err := c.Warm(context.Background(), 0, 3, 2, func() ComputeFunc { return noisyCompute(c) }, nil)
				if err != nil {
					t.Fatalf("warm: %v", err)
				}
				w := c.Info().Warnings
				outcome, written := "rebuilt empty", 3*c.Shards()
				if k.kept {
					outcome, written = "no entry lost", 0
				}
				if len(w) != 1 || !strings.Contains(w[0], dir) || !strings.Contains(w[0], k.file) || !strings.Contains(w[0], outcome) {
					t.Errorf("warnings %q, want one naming %s, %s and %q", w, dir, k.file, outcome)
				}
				if st.Written != written {
					t.Errorf("the warm wrote %d entries, want %d (warnings %q)", st.Written, written, w)
				}
				checkShards(t, "repaired", c)
				if misses, _ := c.Counters(); misses > 0 {
					t.Errorf("%d shards computed after the warm", misses)
				}
			})
			faults.Within(t, 10*time.Second, "reopened", func() {
				c, err := Open(damageSpec(dir))
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer c.Close()
				if w := c.Info().Warnings; len(w) != 0 {
					t.Errorf("warnings after the repair: %q", w)
				}
				checkShards(t, "reopened", c)
				if misses, _ := c.Counters(); misses > 0 {
					t.Errorf("%d shards computed on the repaired store", misses)
				}
			})
		})
	}
}

// TestDamagedStoreReadOnly: a damaged store on a filesystem that cannot be
// written is not repaired: one warning says so, naming the directory and
// the damage, every sample is computed live and right, and a warm fails as
// damaged. (Needs root, to mount a tmpfs and remount it read-only.)
func TestDamagedStoreReadOnly(t *testing.T) {
	base := warmFixture(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	faults.CopyFiles(t, base, dir)
	damageFile(t, filepath.Join(dir, "MANIFEST"), setByte(7, 9))
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only: %v %s", err, out)
	}
	faults.Within(t, 10*time.Second, "read-only", func() {
		c, err := Open(damageSpec(dir))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer c.Close()
		w := c.Info().Warnings
		if len(w) != 1 || !strings.Contains(w[0], dir) || !strings.Contains(w[0], "MANIFEST") || !strings.Contains(w[0], "read-only, so it is not repaired") || !strings.Contains(w[0], "computing live") {
			t.Errorf("warnings %q", w)
		}
		checkShards(t, "read-only", c)
		if _, err := c.Warm(context.Background(), 0, 3, 2, func() ComputeFunc { return noisyCompute(c) }, nil); !errors.Is(err, store.ErrDamaged) {
			t.Errorf("warm: %v, want ErrDamaged", err)
		}
	})
}
