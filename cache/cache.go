package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/transform"
)

// Config configures a cache stage. Only Dir is required; WithDefaults says
// every default.
type Config struct {
	// Dir is the cache directory (a Badger database).
	Dir string
	// Epochs is how many distinct epochs are cached when a random stage
	// comes before the cache; epoch e ≥ Epochs reuses epoch e mod Epochs
	// (data echoing). Default 1. Ignored when nothing random precedes the
	// cache: then one copy serves every epoch.
	Epochs int
	// ShardSize is the number of samples per cache entry. Default (0):
	// as many as make about 1 MiB when random stages precede the cache (it
	// is then read in order), about 256 KiB otherwise (read shuffled, a miss
	// decompresses a whole entry), at most 256 (see AutoShardSize).
	ShardSize int
	// Ahead is how many epochs a run warms in the background ahead of the
	// one being consumed. Default 0.
	Ahead int
	// Memory bounds the decoded shards kept in memory, in bytes. Default
	// 128 MiB: most of a CIFAR-10 epoch. Caches after random stages are
	// read in order and keep at most 32 MiB whatever this says.
	Memory int64
	// Options tune the Badger store (store.WithMemTableSize,
	// WithIndexCacheSize, WithReserve); the defaults keep Badger's own
	// memory near 50 MB.
	Options []store.Option
}

// The defaults of Config.Epochs and Config.Memory.
const (
	DefaultEpochs = 1
	DefaultMemory = 128 << 20
)

// WithDefaults returns c with its defaults set, or an error for values out
// of range.
func (c Config) WithDefaults() (Config, error) {
	if c.Dir == "" {
		return c, errors.New("dir is required")
	}
	if c.Epochs == 0 {
		c.Epochs = DefaultEpochs
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.Epochs < 1 || c.ShardSize < 0 || c.Ahead < 0 || c.Memory < 0 {
		return c, fmt.Errorf("epochs=%d shard=%d ahead=%d memory=%d: want epochs ≥ 1, shard ≥ 0 (0: automatic), ahead ≥ 0, memory ≥ 0", c.Epochs, c.ShardSize, c.Ahead, c.Memory)
	}
	return c, nil
}

// Spec says what a cache holds: the fingerprint's parts (source, decoder,
// seed and plan where entries follow it, the stages before the cache) and
// the shape of an epoch.
type Spec struct {
	Config
	// Parts are hashed, in order, into the fingerprint.
	Parts []string
	// Stages describes the cached stages for `pipe cache ls`.
	Stages string
	// Samples is the number of samples per cache epoch.
	Samples int
	// Ordered reports that a random stage precedes the cache: entries are
	// per cache epoch and in plan order.
	Ordered bool
}

// layout names the entry encoding of this package in the store.
const layout = "pipe-samples-v1"

// orderedBudget bounds the decoded shards an ordered cache keeps in memory:
// they are read in sequence, so a few per worker are enough.
const orderedBudget = 32 << 20

// Cache is one pipeline's cache: its store, the fingerprint of what it holds,
// the decoded shards in memory and the warnings met. It is safe for
// concurrent use by the workers of an epoch.
type Cache struct {
	cfg      Config
	fp       store.Fingerprint
	store    *store.Store // nil when the cache could not be opened
	openErr  error        // why, when it could not
	readOnly atomic.Bool  // set when a write failed: go on without writing
	ordered  bool
	samples  int
	shards   *shardLRU
	warnMu   sync.Mutex
	warnings []string
	warned   map[string]bool
	corrupt  atomic.Int64
	misses   atomic.Int64 // shards computed
}

// Describe returns the cache s describes without opening its directory: its
// fingerprint and Info are known but nothing is read or written (for tools
// that work on the directory themselves, like pipe cache gc).
func Describe(s Spec) *Cache {
	c := &Cache{cfg: s.Config, fp: store.NewFingerprint(s.Parts...), ordered: s.Ordered, samples: s.Samples,
		warned: map[string]bool{}}
	budget := s.Memory
	if c.ordered {
		budget = min(budget, orderedBudget)
	}
	c.shards = newShardLRU(budget)
	return c
}

// Open opens the cache s describes. Errors that leave the data readable (a
// locked, read-only or unwritable directory) become warnings and a live
// recompute; a directory of a newer format is an error. A damaged store is
// repaired (store.WithRepair) with a warning that says what was done; one
// that cannot be (read-only) is warned about and the run computes live.
func Open(s Spec) (*Cache, error) {
	c := Describe(s)
	st, err := store.Open(s.Dir, append([]store.Option{store.WithRepair(true)}, s.Options...)...)
	switch {
	case errors.Is(err, store.ErrNewerFormat):
		return nil, err
	case errors.Is(err, store.ErrDamaged):
		c.openErr = err
		c.Warn("damaged", fmt.Sprintf("%v: computing live", err))
		return c, nil
	case err != nil:
		c.openErr = err
		c.Warn("open", fmt.Sprintf("cache disabled, computing live: %v", err))
		return c, nil
	}
	for i, r := range st.Repairs() {
		c.Warn(fmt.Sprintf("repair %d", i), r)
	}
	c.store = st
	if st.ReadOnly() {
		c.readOnly.Store(true)
		c.Warn("write", fmt.Sprintf("cache %s is read-only: reading what it holds, computing the rest live", s.Dir))
		return c, nil
	}
	// The meta is written once, and again where it was written before
	// EveryEpoch was recorded.
	if m, err := st.GetMeta(c.fp); err != nil || m.EveryEpoch != !c.ordered {
		meta := store.Meta{Stages: s.Stages, Samples: s.Samples, ShardSize: s.ShardSize, Epochs: 1, EveryEpoch: !c.ordered, Created: time.Now().UTC()}
		if err == nil {
			meta.Created = m.Created
		}
		if c.ordered {
			meta.Epochs = s.Epochs
		}
		err := st.PutMeta(c.fp, meta)
		switch {
		case errors.Is(err, store.ErrDamaged):
			c.noteDamage(err)
		case err != nil:
			c.readOnly.Store(true)
			c.Warn("write", fmt.Sprintf("cache %s is not writable, reading what it has and computing the rest live: %v", s.Dir, err))
		}
	}
	return c, nil
}

// Close closes the store.
func (c *Cache) Close() error {
	if c.store == nil {
		return nil
	}
	return c.store.Close()
}

// Ordered reports that entries follow the plan, per cache epoch.
func (c *Cache) Ordered() bool { return c.ordered }

// ShardSize is the number of samples per entry.
func (c *Cache) ShardSize() int { return c.cfg.ShardSize }

// Samples is the number of samples per cache epoch.
func (c *Cache) Samples() int { return c.samples }

// Shards is the number of entries per cache epoch.
func (c *Cache) Shards() int { return (c.samples + c.cfg.ShardSize - 1) / c.cfg.ShardSize }

// Ahead is the configured number of epochs to warm ahead of a run.
func (c *Cache) Ahead() int { return c.cfg.Ahead }

// Epoch is the cache epoch whose entries serve epoch e.
func (c *Cache) Epoch(e int) int {
	if !c.ordered {
		return 0
	}
	return e % c.cfg.Epochs
}

// Distinct is the number of distinct cache epochs.
func (c *Cache) Distinct() int {
	if c.ordered {
		return c.cfg.Epochs
	}
	return 1
}

// Readable reports whether the store is open and not found damaged.
func (c *Cache) Readable() bool { return c.store != nil && c.store.Damaged() == nil }

// Writable reports whether entries can be written.
func (c *Cache) Writable() bool { return c.Readable() && !c.readOnly.Load() }

// damaged returns the error of a store found damaged, at open or since
// (wrapping store.ErrDamaged), or nil.
func (c *Cache) damaged() error {
	if errors.Is(c.openErr, store.ErrDamaged) {
		return c.openErr
	}
	if c.store != nil {
		return c.store.Damaged()
	}
	return nil
}

// noteDamage turns reading and writing off for a store found damaged while
// open, with one warning; the run goes on computing live. (The store marks
// a writable directory, so that the next open rebuilds it, and its error
// says so.)
func (c *Cache) noteDamage(err error) {
	c.readOnly.Store(true)
	c.Warn("damaged", fmt.Sprintf("%v: computing live from here on", err))
}

// Counters returns the shards computed and the damaged entries found so
// far.
func (c *Cache) Counters() (misses, corrupt int64) { return c.misses.Load(), c.corrupt.Load() }

// PostRand is the generator of the stages after the cache for sample idx of
// epoch e, given the state the stages before it left (state) in cache epoch
// ce. Where the cache holds epoch e itself, the stream simply continues, so
// the output equals that of the same pipeline without a cache stage; an
// echoed epoch (e ≥ Epochs) draws afresh for its own epoch.
func (c *Cache) PostRand(seed uint64, e, ce, idx int, state uint64) transform.Rand {
	if c.ordered && e == ce {
		return transform.RandAt(state)
	}
	return transform.NewRand(seed, e, int64(idx))
}

// Warn records a warning once per key.
func (c *Cache) Warn(key, msg string) {
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	if c.warned[key] {
		return
	}
	c.warned[key] = true
	c.warnings = append(c.warnings, msg)
}

// Info describes a cache for summaries.
type Info struct {
	Dir         string
	Fingerprint string
	// Epochs is the number of distinct cached epochs; Echo reports that
	// epoch e ≥ Epochs reuses epoch e mod Epochs.
	Epochs    int
	Echo      bool
	ShardSize int
	Shards    int // per epoch
	Enabled   bool
	// Disabled says why the store cannot be read ("" when Enabled): it
	// could not be opened, or was found damaged.
	Disabled string
	Warnings []string
	// Ordered reports entries in plan order, per rank: an echoed epoch then
	// also replays its cache epoch's order.
	Ordered bool
}

// Info returns the cache's description, with the warnings met so far.
func (c *Cache) Info() *Info {
	info := &Info{Dir: c.cfg.Dir, Fingerprint: string(c.fp), Epochs: c.Distinct(), ShardSize: c.cfg.ShardSize,
		Shards: c.Shards(), Enabled: c.Readable(), Echo: c.ordered, Ordered: c.ordered}
	switch {
	case c.openErr != nil:
		info.Disabled = c.openErr.Error()
	case c.store == nil:
		info.Disabled = "the cache was not opened"
	case c.store.Damaged() != nil:
		info.Disabled = c.store.Damaged().Error()
	}
	c.warnMu.Lock()
	info.Warnings = append(info.Warnings, c.warnings...)
	c.warnMu.Unlock()
	return info
}

// ReadChunk reads the samples at positions [lo, hi) of entry shard of
// cache epoch ce in place from the store, verified, and calls emit with
// each in order (i counts from 0 at lo; indices[i] is the sample's index;
// its image is valid during the call) until emit returns false. It
// reports false where the entry cannot be read so: missing, corrupt, the
// cache closed, its store damaged (warned once) or failing (warned); the
// caller then computes those samples, as for any miss, and a corrupt
// entry is rewritten. scratch holds the entry's offsets between calls.
func (c *Cache) ReadChunk(ce, shard, lo, hi int, indices []int, scratch *[]int, emit func(i int, s Sample) bool) bool {
	if c.store == nil {
		return false
	}
	err := c.store.View(c.fp, ce, shard, layout, func(e *store.Entry) error {
		data, offs, err := ChunkBytes(e, lo, hi, *scratch)
		if err != nil {
			return err
		}
		*scratch = offs
		for i, o := range offs {
			next := len(data)
			if i+1 < len(offs) {
				next = offs[i+1]
			}
			if !emit(i, ParseSample(data[o:next], indices[i])) {
				return nil
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrDamaged):
		c.noteDamage(err)
	case errors.Is(err, store.ErrMiss), errors.Is(err, store.ErrCorrupt):
	default:
		c.Warn("read", fmt.Sprintf("cache read failed, computing live: %v", err))
	}
	return false
}

// AutoShardSize is the default samples per cache entry for the images the
// operations pre make from images of shape in, at most 256: about 1 MiB of
// them when the cache is read in order (random stages before it), about
// 256 KiB when it is read in the shuffled order of the samples, where a
// miss decompresses a whole entry for one sample. (Measured: 1 MiB entries
// read 14 % faster than 256 KiB ones for warm, ordered CIFAR; 256 KiB
// entries, one ImageNet image each, read 48 % faster than 1 MiB ones
// shuffled.) Where the images' size varies (decode, resize), it assumes
// 3×256×341, a photo resized to 256.
func AutoShardSize(in transform.Shape, pre []transform.Op) int {
	s, ordered := in, false
	for _, op := range pre {
		if next, err := op.OutShape(s); err == nil {
			s = next
		}
		ordered = ordered || op.Random()
	}
	bytes := 3 * 256 * 341
	if s.Fixed() {
		bytes = s.Len()
	}
	target := 256 << 10
	if ordered {
		target = 1 << 20
	}
	return min(256, max(1, target/bytes))
}

// ShardID names an entry: shard Index of cache epoch Epoch.
type ShardID struct{ Epoch, Index int }

// ComputeFunc computes entry id, appending its encoding (see Writer) to dst.
// It is called once per shard however many workers need it.
type ComputeFunc func(ctx context.Context, id ShardID, dst []byte) ([]byte, error)

// Shard returns the decoded entry id, pinned until Release: from memory, or
// read from the store, or computed with compute and stored, once however
// many goroutines ask. A damaged entry is counted, reported, recomputed
// and rewritten; a failed write turns writing off with one warning.
func (c *Cache) Shard(ctx context.Context, id ShardID, compute ComputeFunc) (*Shard, error) {
	s, created := c.shards.acquire(id)
	if created {
		s.err = c.fill(ctx, s, compute)
		close(s.ready)
		if s.err != nil {
			c.shards.release(s)
			return nil, s.err
		}
		c.shards.filled(s) // the pin is released by the caller
		return s, nil
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		c.shards.release(s)
		return nil, context.Cause(ctx)
	}
	if s.err != nil {
		err := s.err
		c.shards.release(s)
		return nil, err
	}
	return s, nil
}

// Release unpins a shard from Shard.
func (c *Cache) Release(s *Shard) { c.shards.release(s) }

// fill reads shard s from the store, or computes it (and stores it).
func (c *Cache) fill(ctx context.Context, s *Shard, compute ComputeFunc) error {
	s.First = s.id.Index * c.cfg.ShardSize
	if c.store != nil {
		raw, err := c.store.Get(c.fp, s.id.Epoch, s.id.Index, layout, s.raw)
		switch {
		case err == nil:
			s.raw = raw
			err := s.parse()
			if err == nil {
				return nil
			}
			c.corrupt.Add(1)
			c.Warn(fmt.Sprintf("corrupt %d %d", s.id.Epoch, s.id.Index), fmt.Sprintf("cache entry epoch %d shard %d does not parse (%v): recomputed and rewritten", s.id.Epoch, s.id.Index, err))
		case errors.Is(err, store.ErrCorrupt):
			c.corrupt.Add(1)
			c.Warn(fmt.Sprintf("corrupt %d %d", s.id.Epoch, s.id.Index), fmt.Sprintf("%v: recomputed and rewritten", err))
		case errors.Is(err, store.ErrMiss):
		case errors.Is(err, store.ErrDamaged):
			c.noteDamage(err)
		default:
			c.Warn("read", fmt.Sprintf("cache read failed, computing live: %v", err))
		}
	}
	c.misses.Add(1) // once per shard: fills are single-flight
	raw, err := compute(ctx, s.id, s.raw[:0])
	if err != nil {
		return err
	}
	s.raw = raw
	if err := s.parse(); err != nil {
		return err
	}
	c.put(s.id, raw)
	return nil
}

// put writes a computed shard; a failed write (full or read-only disk)
// turns writing off with one warning, and the run goes on.
func (c *Cache) put(id ShardID, raw []byte) {
	if !c.Writable() {
		return
	}
	err := c.store.Put(c.fp, id.Epoch, id.Index, layout, raw)
	switch {
	case errors.Is(err, store.ErrDamaged):
		c.noteDamage(err)
	case err != nil:
		c.readOnly.Store(true)
		c.Warn("write", fmt.Sprintf("cache write failed, going on without writing: %v", err))
	}
}

// ErrNotWritable is returned by Warm for a cache that cannot be written. A
// damaged store that could not be repaired is reported as such instead
// (wrapping store.ErrDamaged).
var ErrNotWritable = errors.New("cache cannot be written")

func (c *Cache) notWritable() error {
	if err := c.damaged(); err != nil {
		return err
	}
	return fmt.Errorf("cache %s: %w: %s", c.cfg.Dir, ErrNotWritable, strings.Join(c.Info().Warnings, "; "))
}
