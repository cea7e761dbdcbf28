package pipe

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// CacheConfig configures a cache stage. Only Dir is required.
type CacheConfig struct {
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
	// decompresses a whole entry), at most 256: 256 augmented CIFAR images,
	// one ImageNet image resized to 256.
	ShardSize int
	// Ahead is how many epochs Run warms in the background ahead of the
	// one being consumed. Default 0.
	Ahead int
	// Memory bounds the decoded shards kept in memory, in bytes. Default
	// 128 MiB: most of a CIFAR-10 epoch. Caches after random stages are
	// read in order and keep at most 32 MiB whatever this says.
	Memory int64
	// Options tune the Badger store (sharding.WithMemTableSize,
	// WithIndexCacheSize, WithReserve); the defaults keep Badger's own
	// memory near 50 MB.
	Options []sharding.CacheOption
}

func (c *CacheConfig) defaults() error {
	if c.Dir == "" {
		return errors.New("dir is required")
	}
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.Memory == 0 {
		c.Memory = 128 << 20
	}
	if c.Epochs < 1 || c.ShardSize < 0 || c.Ahead < 0 || c.Memory < 0 {
		return fmt.Errorf("epochs=%d shard=%d ahead=%d: want epochs ≥ 1, shard ≥ 0 (0: automatic), ahead ≥ 0", c.Epochs, c.ShardSize, c.Ahead)
	}
	return nil
}

// Cache stores the output of every stage before it, per shard of samples, in
// a Badger directory, and reads it back instead of recomputing it.
func Cache(c CacheConfig) Stage {
	shard := "auto"
	if c.ShardSize != 0 {
		shard = strconv.Itoa(c.ShardSize)
	}
	desc := fmt.Sprintf("cache dir=%s epochs=%d shard=%s ahead=%d", c.Dir, max(c.Epochs, 1), shard, c.Ahead)
	return Stage{name: "cache", desc: desc, apply: func(b *builder) error {
		if b.p.cacheCfg != nil {
			return errors.New("a pipeline has at most one cache stage")
		}
		if b.afterBatch || b.haveTensor {
			return errors.New("cache must come before batch and to_tensor: it stores single images")
		}
		if b.p.norm != nil {
			return errors.New("cache after normalize: put the cache before normalize (normalize is applied as the tensor is written, so the cache stores uint8 images either way)")
		}
		cfg := c
		if err := cfg.defaults(); err != nil {
			return err
		}
		b.p.cacheCfg = &cfg
		b.p.cacheAt = len(b.p.ops)
		return nil
	}}
}

// autoShardSize is the default samples per cache entry for the images the
// stages pre make from in, at most 256: about 1 MiB of them when the cache
// is read in order (random stages before it), about 256 KiB when it is
// read in the shuffled order of the samples, where a miss decompresses a
// whole entry for one sample. (Measured: 1 MiB entries read 14 % faster
// than 256 KiB ones for warm, ordered CIFAR; 256 KiB entries, one ImageNet
// image each, read 48 % faster than 1 MiB ones shuffled.) Where the images'
// size varies (decode, resize), it assumes 3×256×341, a photo resized to
// 256.
func autoShardSize(in transform.Shape, pre []transform.Op) int {
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

// orderedBudget bounds the decoded shards an ordered cache keeps in memory.
const orderedBudget = 32 << 20

// cacheOpenOptions are passed to every sharding.OpenCache; tests use it to
// make a disk look full.
var cacheOpenOptions []sharding.CacheOption

// pipeCache is a pipeline's cache: the store, the fingerprint of what it
// holds and the decoded shards in memory.
type pipeCache struct {
	cfg      CacheConfig
	store    *sharding.Cache // nil when the cache could not be opened
	readOnly atomic.Bool     // set when a write failed: go on without writing
	fp       sharding.Fingerprint
	// random reports that a random stage precedes the cache. Then entries
	// are per cache epoch and in plan order: shard s holds the samples at
	// positions [s*ShardSize, (s+1)*ShardSize) of the epoch's plan, so an
	// epoch reads its shards in sequence. Otherwise one copy serves every
	// epoch and shard s holds sample indices [s*ShardSize, ...).
	random    bool
	layout    string
	samples   int
	shards    *shardLRU
	warnMu    sync.Mutex
	warnings  []string
	warned    map[string]bool
	corrupt   atomic.Int64
	misses    atomic.Int64 // shards computed
	lastEpoch int
}

// planEpoch is the epoch whose plan orders epoch e: with an ordered cache,
// an echoed epoch replays its cache epoch's order along with its entries.
func (p *Pipeline) planEpoch(e int) int {
	if p.cache != nil && p.cache.random {
		return p.cache.cacheEpoch(e)
	}
	return e
}

// cacheEpoch is the epoch whose cached entries serve epoch e.
func (c *pipeCache) cacheEpoch(e int) int {
	if !c.random {
		return 0
	}
	return e % c.cfg.Epochs
}

func (c *pipeCache) warn(key, msg string) {
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	if c.warned[key] {
		return
	}
	c.warned[key] = true
	c.warnings = append(c.warnings, msg)
}

// openCache sets up the pipeline's cache. Errors that leave the data
// readable (a locked, read-only or unwritable directory) become warnings and
// a live recompute; a directory of a newer format is an error.
func (p *Pipeline) openCache() error {
	cfg := p.cacheCfg
	pre := p.ops[:p.cacheAt]
	if cfg.ShardSize == 0 {
		cfg.ShardSize = autoShardSize(p.inShape, pre)
	}
	c := &pipeCache{cfg: *cfg, warned: map[string]bool{}, samples: p.src.Len()}
	for _, op := range pre {
		c.random = c.random || op.Random()
	}
	srcID := p.src.Info().Identity
	if f, ok := p.src.(source.Fingerprinter); ok {
		id, err := f.Fingerprint()
		if err != nil {
			return err
		}
		srcID = id
	}
	parts := []string{"pipe cache v1", srcID, fmt.Sprintf("shard=%d", cfg.ShardSize)}
	if p.src.Info().Encoded {
		parts = append(parts, p.decoding())
	}
	if c.random {
		// Entries follow the plan, which the seed and the rank decide.
		parts = append(parts, fmt.Sprintf("seed=%d order=plan rank=%d world=%d", p.seed, p.rank, p.world))
		if b := p.plan.Buffer(); b > 0 {
			parts = append(parts, fmt.Sprintf("shuffle buffer=%d", b))
		}
		c.samples = p.plan.Len()
	}
	var stages []string
	for _, op := range pre {
		stages = append(stages, op.String())
	}
	parts = append(parts, stages...)
	c.fp = sharding.NewFingerprint(parts...)
	c.layout = "pipe-samples-v1"
	budget := cfg.Memory
	if c.random {
		// Ordered entries are read in sequence: a few shards per worker
		// in memory are enough.
		budget = min(budget, orderedBudget)
	}
	c.shards = newShardLRU(budget)
	if p.cacheClosed {
		p.cache = c
		return nil
	}
	store, err := sharding.OpenCache(cfg.Dir, append(append([]sharding.CacheOption(nil), cfg.Options...), cacheOpenOptions...)...)
	switch {
	case errors.Is(err, sharding.ErrNewerFormat):
		return err
	case err != nil:
		c.warn("open", fmt.Sprintf("cache disabled, computing live: %v", err))
	default:
		c.store = store
		if store.ReadOnly() {
			c.readOnly.Store(true)
			c.warn("write", fmt.Sprintf("cache %s is read-only: reading what it holds, computing the rest live", cfg.Dir))
		} else if _, err := store.GetMeta(c.fp); err != nil {
			meta := sharding.Meta{Stages: strings.Join(append([]string{srcID}, stages...), "\n"),
				Samples: c.samples, ShardSize: cfg.ShardSize, Epochs: 1, Created: time.Now().UTC()}
			if c.random {
				meta.Epochs = cfg.Epochs
			}
			if err := store.PutMeta(c.fp, meta); err != nil {
				c.readOnly.Store(true)
				c.warn("write", fmt.Sprintf("cache %s is not writable, reading what it has and computing the rest live: %v", cfg.Dir, err))
			}
		}
	}
	p.cache = c
	return nil
}

// Shard encoding: a count, an offset table, then per sample a 20-byte
// header (label, C, H, W, flags, and the random generator's state after the
// stages before the cache) and its pixels, or for a sample skipped under
// on_error=skip, its error as "file\x00offset\x00message".
const (
	sampleHeader = 20
	flagSkipped  = 1
)

// shard is one decoded cache entry: the samples of indices
// [first, first+n) of one cache epoch.
type shard struct {
	id    shardID
	first int
	raw   []byte
	offs  []uint32
	ready chan struct{}
	err   error
	refs  int
	elem  *list.Element
}

type shardID struct{ epoch, index int }

func (s *shard) parse() error {
	if len(s.raw) < 4 {
		return fmt.Errorf("%w: shard too short", sharding.ErrCorrupt)
	}
	n := int(binary.LittleEndian.Uint32(s.raw))
	if 4+4*n > len(s.raw) {
		return fmt.Errorf("%w: offset table past the end", sharding.ErrCorrupt)
	}
	s.offs = s.offs[:0]
	for i := range n {
		o := binary.LittleEndian.Uint32(s.raw[4+4*i:])
		if int(o)+sampleHeader > len(s.raw) {
			return fmt.Errorf("%w: sample %d past the end", sharding.ErrCorrupt, i)
		}
		s.offs = append(s.offs, o)
	}
	return nil
}

// sample returns entry i of the shard, which is sample index: its image
// (aliasing the shard's memory), label, generator state and, for a skipped
// sample, its error.
func (s *shard) sample(i, index int) (img transform.Image, label int, state uint64, skipped *source.RecordError) {
	end := len(s.raw)
	if i+1 < len(s.offs) {
		end = int(s.offs[i+1])
	}
	return parseSample(s.raw[s.offs[i]:end], index)
}

// parseSample decodes one encoded sample (header and body) whose sample
// index is index.
func parseSample(b []byte, index int) (img transform.Image, label int, state uint64, skipped *source.RecordError) {
	label = int(int32(binary.LittleEndian.Uint32(b)))
	c, h, w := int(binary.LittleEndian.Uint16(b[4:])), int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
	flags := binary.LittleEndian.Uint16(b[10:])
	state = binary.LittleEndian.Uint64(b[12:])
	body := b[sampleHeader:]
	if flags&flagSkipped != 0 {
		parts := strings.SplitN(string(body), "\x00", 3)
		re := &source.RecordError{Index: index, Err: errors.New(parts[len(parts)-1])}
		if len(parts) == 3 {
			re.File = parts[0]
			fmt.Sscan(parts[1], &re.Offset)
		}
		return transform.Image{}, label, 0, re
	}
	return transform.Image{Pix: body[:c*h*w], C: c, H: h, W: w}, label, state, nil
}

// chunkBytes returns, verified, the encoded samples [i0, i1) of an entry
// and their offsets relative to the returned bytes; nothing is returned
// unless every byte they need has passed its checksum.
func chunkBytes(e *sharding.Entry, i0, i1 int, offs []int) ([]byte, []int, error) {
	head, err := e.Bytes(0, 4)
	if err != nil {
		return nil, nil, err
	}
	count := int(binary.LittleEndian.Uint32(head))
	if i0 < 0 || i1 > count || i0 >= i1 {
		return nil, nil, fmt.Errorf("%w: samples [%d, %d) of an entry of %d", sharding.ErrCorrupt, i0, i1, count)
	}
	tbl, err := e.Bytes(4+4*i0, 4*(min(i1+1, count)-i0))
	if err != nil {
		return nil, nil, err
	}
	start := int(binary.LittleEndian.Uint32(tbl))
	stop := e.Len()
	if i1 < count {
		stop = int(binary.LittleEndian.Uint32(tbl[4*(i1-i0):]))
	}
	offs = offs[:0]
	for i := range i1 - i0 {
		o := int(binary.LittleEndian.Uint32(tbl[4*i:])) - start
		offs = append(offs, o)
	}
	if start < 4+4*count || stop < start {
		return nil, nil, fmt.Errorf("%w: bad offsets", sharding.ErrCorrupt)
	}
	data, err := e.Bytes(start, stop-start)
	if err != nil {
		return nil, nil, err
	}
	prev := 0
	for i, o := range offs {
		next := len(data)
		if i+1 < len(offs) {
			next = offs[i+1]
		}
		if o < prev || next < o+sampleHeader {
			return nil, nil, fmt.Errorf("%w: bad offsets", sharding.ErrCorrupt)
		}
		prev = o
	}
	return data, offs, nil
}

// shardLRU keeps decoded shards within a byte budget. Shards in use are
// pinned by a reference count; evicted shards give their buffers back for
// reuse, so a steady state does not allocate shard-sized memory.
type shardLRU struct {
	mu     sync.Mutex
	budget int64
	bytes  int64
	byID   map[shardID]*shard
	order  *list.List // front: most recently used
	free   [][]byte
}

func newShardLRU(budget int64) *shardLRU {
	return &shardLRU{budget: budget, byID: map[shardID]*shard{}, order: list.New()}
}

// acquire returns the shard for id, pinned. created reports that the caller
// must fill it (raw, offs or err) and then close its ready channel.
func (l *shardLRU) acquire(id shardID) (s *shard, created bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.byID[id]; s != nil {
		s.refs++
		l.order.MoveToFront(s.elem)
		return s, false
	}
	s = &shard{id: id, ready: make(chan struct{}), refs: 1}
	if n := len(l.free); n > 0 {
		s.raw, l.free = l.free[n-1][:0], l.free[:n-1]
	}
	s.elem = l.order.PushFront(s)
	l.byID[id] = s
	return s, true
}

// release unpins a shard and evicts unpinned shards beyond the budget.
// A shard whose fill failed is dropped at once, so a later epoch retries.
func (l *shardLRU) release(s *shard) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.refs--
	if s.err != nil && s.refs == 0 {
		l.drop(s)
	}
	for e := l.order.Back(); e != nil && l.bytes > l.budget; {
		prev := e.Prev()
		if v := e.Value.(*shard); v.refs == 0 {
			l.drop(v)
		}
		e = prev
	}
}

// filled counts the memory of a shard just filled against the budget.
func (l *shardLRU) filled(s *shard) {
	l.mu.Lock()
	l.bytes += int64(cap(s.raw))
	l.mu.Unlock()
}

func (l *shardLRU) drop(s *shard) {
	if l.byID[s.id] != s {
		return
	}
	delete(l.byID, s.id)
	l.order.Remove(s.elem)
	l.bytes -= int64(cap(s.raw))
	if s.err == nil && cap(s.raw) > 0 && len(l.free) < 8 {
		l.free = append(l.free, s.raw)
	}
}

// shardFor returns the decoded shard holding entry key (a plan position for
// an ordered cache, a sample index otherwise) for epoch e, pinned; the
// caller releases it with p.cache.shards.release(s). It reads the store,
// or computes and stores the shard, once however many workers ask.
func (x *Epoch) shardFor(w *worker, key int) (*shard, error) {
	c := x.p.cache
	id := shardID{epoch: c.cacheEpoch(x.epoch), index: key / c.cfg.ShardSize}
	s, created := c.shards.acquire(id)
	if created {
		s.err = x.p.fillShard(x.ctx, w, s)
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
	case <-x.ctx.Done():
		c.shards.release(s)
		return nil, context.Cause(x.ctx)
	}
	if s.err != nil {
		err := s.err
		c.shards.release(s)
		return nil, err
	}
	return s, nil
}

// fillShard reads shard s from the store, or computes it (and stores it).
func (p *Pipeline) fillShard(ctx context.Context, w *worker, s *shard) error {
	c := p.cache
	s.first = s.id.index * c.cfg.ShardSize
	if c.store != nil {
		raw, err := c.store.Get(c.fp, s.id.epoch, s.id.index, c.layout, s.raw)
		switch {
		case err == nil:
			s.raw = raw
			if err := s.parse(); err == nil {
				return nil
			} else {
				c.corrupt.Add(1)
				c.warn(fmt.Sprintf("corrupt %d %d", s.id.epoch, s.id.index), fmt.Sprintf("cache entry epoch %d shard %d does not parse (%v): recomputed and rewritten", s.id.epoch, s.id.index, err))
			}
		case errors.Is(err, sharding.ErrCorrupt):
			c.corrupt.Add(1)
			c.warn(fmt.Sprintf("corrupt %d %d", s.id.epoch, s.id.index), fmt.Sprintf("%v: recomputed and rewritten", err))
		case errors.Is(err, sharding.ErrMiss):
		default:
			c.warn("read", fmt.Sprintf("cache read failed, computing live: %v", err))
		}
	}
	c.misses.Add(1) // once per shard: fills are single-flight
	raw, err := p.computeShard(ctx, w, s.id, s.raw[:0])
	if err != nil {
		return err
	}
	s.raw = raw
	if err := s.parse(); err != nil {
		return err
	}
	p.storeShard(s.id, raw)
	return nil
}

// storeShard writes a computed shard; a failed write (full or read-only
// disk) turns writing off with one warning, and the run goes on.
func (p *Pipeline) storeShard(id shardID, raw []byte) {
	c := p.cache
	if c.store == nil || c.readOnly.Load() {
		return
	}
	if err := c.store.Put(c.fp, id.epoch, id.index, c.layout, raw); err != nil {
		c.readOnly.Store(true)
		c.warn("write", fmt.Sprintf("cache write failed, going on without writing: %v", err))
	}
}

// computeShard runs the stages before the cache on the shard's samples and
// encodes them, appended to dst.
func (p *Pipeline) computeShard(ctx context.Context, w *worker, id shardID, dst []byte) ([]byte, error) {
	c := p.cache
	first := id.index * c.cfg.ShardSize
	n := min(c.cfg.ShardSize, c.samples-first)
	if n <= 0 {
		return nil, fmt.Errorf("pipe: cache shard %d is past the epoch's %d samples", id.index, c.samples)
	}
	if c.random {
		if cap(w.order) < n {
			w.order = make([]int, n)
		}
		w.order = w.order[:n]
		p.plan.Fill(id.epoch, first, w.order)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	table := len(dst)
	dst = append(dst, make([]byte, 4*n)...)
	rec := &w.rec
	for i := range n {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		binary.LittleEndian.PutUint32(dst[table+4*i:], uint32(len(dst)))
		idx := first + i
		if c.random {
			idx = w.order[i]
		}
		err := p.src.Read(idx, rec)
		var out *transform.Image
		if err == nil {
			out, err = p.apply(w.pre, w.dec, &w.img, idx, rec, transform.NewRand(p.seed, id.epoch, int64(idx), 0))
		}
		if err != nil {
			var re *source.RecordError
			if p.onError == Fail || !errors.As(err, &re) {
				return nil, err
			}
			dst = appendSampleHeader(dst, -1, 0, 0, 0, flagSkipped, 0)
			dst = fmt.Appendf(dst, "%s\x00%d\x00%v", re.File, re.Offset, re.Err)
			continue
		}
		dst = appendSampleHeader(dst, rec.Label, out.C, out.H, out.W, 0, w.pre.Rand().State())
		dst = append(dst, out.Pix...)
	}
	return dst, nil
}

func appendSampleHeader(b []byte, label, c, h, w int, flags uint16, state uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(label)))
	b = binary.LittleEndian.AppendUint16(b, uint16(c))
	b = binary.LittleEndian.AppendUint16(b, uint16(h))
	b = binary.LittleEndian.AppendUint16(b, uint16(w))
	b = binary.LittleEndian.AppendUint16(b, flags)
	return binary.LittleEndian.AppendUint64(b, state)
}

// postRand is the generator of the stages after the cache for sample idx of
// epoch e, given the state the stages before it left (state) in cache epoch
// ce. Where the cache holds epoch e itself, the stream simply continues, so
// the output equals that of the same pipeline without a cache stage; an
// echoed epoch (e ≥ K) draws afresh for its own epoch.
func (c *pipeCache) postRand(seed uint64, e, ce, idx int, state uint64) transform.Rand {
	if c.random && e == ce {
		return transform.RandAt(state)
	}
	return transform.NewRand(seed, e, int64(idx), 0)
}

// CacheInfo describes a pipeline's cache for summaries.
type CacheInfo struct {
	Dir         string
	Fingerprint string
	// Epochs is the number of distinct cached epochs; Echo reports that
	// epoch e ≥ Epochs reuses epoch e mod Epochs.
	Epochs    int
	Echo      bool
	ShardSize int
	Shards    int // per epoch
	Enabled   bool
	Warnings  []string
	// Ordered reports entries in plan order, per rank: an echoed epoch then
	// also replays its cache epoch's order.
	Ordered bool
}

// CacheInfo returns the pipeline's cache, or nil without a cache stage.
func (p *Pipeline) CacheInfo() *CacheInfo {
	c := p.cache
	if c == nil {
		return nil
	}
	info := &CacheInfo{Dir: c.cfg.Dir, Fingerprint: string(c.fp), Epochs: 1, ShardSize: c.cfg.ShardSize,
		Shards: (c.samples + c.cfg.ShardSize - 1) / c.cfg.ShardSize, Enabled: c.store != nil}
	if c.random {
		info.Epochs, info.Echo, info.Ordered = c.cfg.Epochs, true, true
	}
	c.warnMu.Lock()
	info.Warnings = append(info.Warnings, c.warnings...)
	c.warnMu.Unlock()
	return info
}

// WarmProgress reports a warm in progress.
type WarmProgress struct {
	Shards, Total int   // shards done (present or written) of all
	Written       int   // shards computed and written by this warm
	RawBytes      int64 // raw bytes of the written shards
	Elapsed       time.Duration
}

// Warm fills the cache for cache epochs [0, epochs) (all distinct epochs the
// cache has when epochs is 0), computing only shards that are missing, so
// an interrupted warm resumes where it stopped. Work runs on the pipeline's
// worker count; progress, if not nil, is called after every shard.
func (p *Pipeline) Warm(ctx context.Context, epochs int, progress func(WarmProgress)) (WarmProgress, error) {
	c := p.cache
	var st WarmProgress
	if c == nil {
		return st, errors.New("pipe: the pipeline has no cache stage to warm")
	}
	if c.store == nil || c.readOnly.Load() {
		return st, fmt.Errorf("pipe: cache %s cannot be written: %s", c.cfg.Dir, strings.Join(p.CacheInfo().Warnings, "; "))
	}
	distinct := 1
	if c.random {
		distinct = c.cfg.Epochs
	}
	if epochs <= 0 || epochs > distinct {
		epochs = distinct
	}
	return p.warm(ctx, 0, epochs, p.workers, progress)
}

// warm fills cache epochs [from, from+n) with the given number of workers.
func (p *Pipeline) warm(ctx context.Context, from, n, workers int, progress func(WarmProgress)) (WarmProgress, error) {
	c := p.cache
	shards := (c.samples + c.cfg.ShardSize - 1) / c.cfg.ShardSize
	start := time.Now()
	var st WarmProgress
	st.Total = n * shards
	var mu sync.Mutex
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan shardID)
	pool := pond.NewPool(workers + 1)
	defer pool.StopAndWait()
	var firstErr error
	report := func(raw int64, wrote bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
				cancel(err)
			}
			return
		}
		st.Shards++
		if wrote {
			st.Written++
			st.RawBytes += raw
		}
		st.Elapsed = time.Since(start)
		if progress != nil {
			progress(st)
		}
	}
	pool.Submit(func() {
		defer close(jobs)
		for e := from; e < from+n; e++ {
			for s := range shards {
				select {
				case jobs <- shardID{epoch: e % max(c.cfg.Epochs, 1), index: s}:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	for range workers {
		w := p.newWorker()
		pool.Submit(func() {
			var buf []byte
			for id := range jobs {
				if ctx.Err() != nil {
					continue
				}
				if c.store.Has(c.fp, id.epoch, id.index) {
					report(0, false, nil)
					continue
				}
				raw, err := p.computeShard(ctx, w, id, buf[:0])
				if err == nil {
					err = c.store.Put(c.fp, id.epoch, id.index, c.layout, raw)
				}
				buf = raw
				report(int64(len(raw)), true, err)
			}
		})
	}
	pool.StopAndWait()
	if firstErr != nil {
		return st, firstErr
	}
	if ctx.Err() != nil {
		return st, context.Cause(ctx)
	}
	return st, nil
}
