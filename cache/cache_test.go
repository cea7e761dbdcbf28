package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/internal/golden"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// compute generates the samples of an entry: sample k (an index, or a
// plan position of an ordered cache) has label k, one pixel k and state
// 1000+k; skip, if ≥ 0, is recorded as skipped; panicAt panics at that
// shard.
func compute(c *Cache, skip, panicAt int) ComputeFunc {
	return func(ctx context.Context, id ShardID, dst []byte) ([]byte, error) {
		if id.Index == panicAt {
			panic(fmt.Sprintf("computing shard %d", id.Index))
		}
		first := id.Index * c.ShardSize()
		n := min(c.ShardSize(), c.Samples()-first)
		w := NewWriter(dst, n)
		for k := first; k < first+n; k++ {
			if k == skip {
				w.Skipped(&source.RecordError{File: fmt.Sprintf("img%d.png", k), Offset: 16, Err: errors.New("bad record")})
				continue
			}
			w.Sample(k, &transform.Image{Pix: []byte{byte(k)}, C: 1, H: 1, W: 1}, uint64(1000+k))
		}
		return w.Bytes(), nil
	}
}

// TestCacheData runs the cases in testdata/cache.txt (-update rewrites
// their outputs).
func TestCacheData(t *testing.T) {
	var c *Cache
	var spec Spec
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	tempDir := t.TempDir // the whole run's: a case's ends with it, later ones reopen it
	golden.Run(t, "testdata/cache.txt", func(t *testing.T, tc golden.Case) string {
		cmd := golden.Uncommented(tc.Input)
		var err error
		fields := strings.Fields(cmd)
		args := map[string]string{}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			args[k] = v
		}
		num := func(k string, def int) int {
			if v, ok := args[k]; ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("%s: %s=%q", cmd, k, v)
				}
				return n
			}
			return def
		}
		var got string
		switch fields[0] {
		case "open", "reopen":
			if c != nil {
				c.Close()
			}
			if fields[0] == "open" {
				spec = Spec{Config: Config{Dir: tempDir(), ShardSize: num("shard", 4), Epochs: num("epochs", 1), Memory: 1 << 20},
					Parts: []string{"test"}, Samples: num("samples", 10), Ordered: args["ordered"] == "true"}
			}
			if c, err = Open(spec); err != nil {
				t.Fatal(err)
			}
			got = fmt.Sprintf("%d samples in %d shards of %d, %d distinct epoch(s), ordered=%t", c.Samples(), c.Shards(), c.ShardSize(), c.Distinct(), c.Ordered())
		case "shard":
			misses0, _ := c.Counters()
			_, inMemory := c.shards.byID[ShardID{num("epoch", 0), num("index", 0)}]
			s, err := c.Shard(context.Background(), ShardID{num("epoch", 0), num("index", 0)}, compute(c, num("skip", -1), -1))
			if err != nil {
				got = "error: " + err.Error()
				break
			}
			misses, corrupt := c.Counters()
			how := "read"
			switch {
			case inMemory:
				how = "from memory"
			case misses > misses0:
				how = "computed"
			}
			var labels, pixels, states, skipped []string
			for i := range s.Len() {
				smp := s.Sample(i, s.First+i)
				labels = append(labels, strconv.Itoa(smp.Label))
				if smp.Skipped != nil {
					pixels, states = append(pixels, "-"), append(states, "-")
					skipped = append(skipped, fmt.Sprintf("%s@%d: %v", smp.Skipped.File, smp.Skipped.Offset, smp.Skipped.Err))
					continue
				}
				pixels = append(pixels, strconv.Itoa(int(smp.Img.Pix[0])))
				states = append(states, strconv.FormatUint(smp.State, 10))
			}
			c.Release(s)
			got = fmt.Sprintf("%s: labels [%s] pixels [%s] states [%s]", how, strings.Join(labels, " "), strings.Join(pixels, " "), strings.Join(states, " "))
			if len(skipped) > 0 {
				got += " skipped [" + strings.Join(skipped, "; ") + "]"
			}
			got += fmt.Sprintf("; misses %d, corrupt %d", misses, corrupt)
			for _, w := range c.Info().Warnings {
				got += "\nwarning: " + strings.ReplaceAll(w, spec.Dir, "DIR")
			}
		case "corrupt":
			// An entry whose count promises more offsets than it holds:
			// it passes the store's checksum (it was written whole) but
			// not the entry's own checks.
			if err := c.store.Put(c.fp, num("epoch", 0), num("index", 0), layout, []byte{200, 0, 0, 0, 1, 2}); err != nil {
				t.Fatal(err)
			}
			got = "ok"
		case "damage":
			// Flip one bit of a closed store's file: the first table, or
			// the newest value log.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = nil
			pattern, last := "*.sst", false
			if args["file"] == "newest-vlog" {
				pattern, last = "*.vlog", true
			}
			names, _ := filepath.Glob(filepath.Join(spec.Dir, pattern))
			slices.Sort(names)
			if len(names) == 0 {
				t.Fatalf("%s: no %s", cmd, pattern)
			}
			name := names[0]
			if last {
				name = names[len(names)-1]
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			b[num("byte", 0)] ^= 1 << num("bit", 0)
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got = "flipped " + filepath.Base(name)
		case "echo":
			var out []string
			for _, e := range strings.Split(args["epochs"], ",") {
				n, _ := strconv.Atoi(e)
				out = append(out, fmt.Sprintf("%d->%d", n, c.Epoch(n)))
			}
			got = strings.Join(out, " ")
		case "warm":
			st, err := c.Warm(context.Background(), num("from", 0), num("n", 1), num("workers", 1),
				func() ComputeFunc { return compute(c, -1, num("panic", -1)) }, nil)
			if err != nil {
				msg := err.Error()
				if i := strings.Index(msg, "goroutine "); i > 0 {
					msg = strings.TrimRight(msg[:i], ", \n") + " (with stack)"
				}
				got = "error: " + msg
				break
			}
			got = fmt.Sprintf("shards %d, written %d", st.Shards, st.Written)
		default:
			t.Fatalf("unknown command %q", cmd)
		}
		return got
	})
}

// TestMetaEveryEpoch: the meta of a cache before any random stage says one
// copy serves every epoch (pipe cache ls shows it), also where an older
// pipe wrote the meta without it; an ordered cache's does not.
func TestMetaEveryEpoch(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Config: Config{Dir: dir, ShardSize: 4, Memory: 1 << 20}, Parts: []string{"one copy"}, Samples: 8}
	fp := store.NewFingerprint(spec.Parts...)
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutMeta(fp, store.Meta{Samples: 8, ShardSize: 4, Epochs: 1, Created: created}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ordered := spec
	ordered.Parts, ordered.Ordered, ordered.Epochs = []string{"ordered"}, true, 3
	for _, s := range []Spec{spec, ordered} {
		c, err := Open(s)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	st, err = store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if m, err := st.GetMeta(fp); err != nil || !m.EveryEpoch || !m.Created.Equal(created) {
		t.Errorf("one copy: meta %+v, %v", m, err)
	}
	if m, err := st.GetMeta(store.NewFingerprint(ordered.Parts...)); err != nil || m.EveryEpoch || m.Epochs != 3 {
		t.Errorf("ordered: meta %+v, %v", m, err)
	}
}
