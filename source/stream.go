package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/pipefeed/pipe/source/remote"
)

// ReadAheader is implemented by sources that fetch their data ahead of the
// reads: URL shards streamed through a shard cache smaller than the dataset.
// Before an epoch's reads start, ReadAhead is given order, which returns
// the samples the epoch reads, in order, and is called only by a source
// that streams (the order of an ImageNet epoch is megabytes); order is nil
// where the order is not known, as through an augmentation cache: reads
// then fetch on demand. ReadAhead returns stop, which
// ends the read-ahead and the fetches under way and lets go of the epoch's
// shards once the reads are over, or an error when the order cannot be
// streamed in the cache (a full shuffle reads every shard throughout the
// epoch). Reads without a ReadAhead still work, fetching on demand.
type ReadAheader interface {
	ReadAhead(order func() []int) (stop func(), err error)
}

// shardStream reads the shards of a URL source through a shard cache
// smaller than the dataset (cache_size= below the shards' total), so no
// shard stays open for the run. Within an epoch's plan, shards are fetched
// in the order the epoch first reads them, a few ahead of the reads, and at
// most as many are held (fetching or open) as the cache holds: to make room
// for the next, the one with the fewest reads to come is let go, and those
// reads (the samples a shuffle buffer keeps long) take a ranged GET each. A
// shard is closed once the epoch has read it, after which the cache may
// evict it. Outside a plan, a read fetches its shard on demand and at most
// maxOpen idle shards stay open. A shard fetched again must be the bytes
// its index was made from (by the checksum the shard cache keeps), else
// the read fails, naming the object as changed (remote.ErrChanged), and
// the stored index goes, so that the next open makes it again; a ranged
// read asks the store for the version listed when the source opened, the
// one the index was made from.
type shardStream struct {
	what    string // the source, for errors
	store   *remote.Store
	cache   *remote.Cache
	objs    []remote.Object
	base    context.Context // ends when the source closes (stopAll)
	stopAll context.CancelFunc
	// hold is how many of the largest shards the cache holds (at least 2):
	// the most an epoch's plan keeps fetching or open; ahead, how far
	// ahead of the reads its read-ahead fetches (a quarter of hold, at
	// most the store's concurrency).
	hold, ahead int

	mu     sync.Mutex
	made   map[int]madeIndex // by shard, where its index is known
	shards map[int]*openShard
	clock  int64
	ctx    context.Context // fetches started now end with it: the plan's, else base
	// The epoch's plan (left nil: none): each shard's reads still to come,
	// its place in the order the epoch first reads the shards (-1: not
	// read), whether it was let go with reads to come, the furthest place a
	// read reached.
	left    []int
	pos     []int
	retired []bool
	reached int
	// moved is closed and replaced, when the read-ahead waits on it, as a
	// read moves on or a shard is let go.
	moved   chan struct{}
	waiting bool
}

// madeIndex is what the index of a shard was made from: the checksum of
// the shard's bytes (xxhash64, as the shard cache keeps it), and the files
// the index is stored in.
type madeIndex struct {
	sum   uint64
	files []string
}

// changedError is a shard fetched again whose bytes are not those its
// index was made from.
type changedError struct{ msg string }

func (e *changedError) Error() string { return e.msg }
func (e *changedError) Unwrap() error { return remote.ErrChanged }

// openShard is a shard being fetched or open.
type openShard struct {
	ready chan struct{} // closed once fh or err is set
	fh    *os.File
	sum   uint64 // the xxhash64 of fh's bytes
	err   error
	refs  int   // reads under way
	used  int64 // the clock at its last use
}

// shardReader reads one shard for one sample: from its open file, or by
// ranged GETs for a shard let go with reads to come.
type shardReader struct {
	o   *openShard // nil: ranged GETs
	s   *shardStream
	i   int
	ctx context.Context
}

func (r *shardReader) ReadAt(p []byte, off int64) (int, error) {
	if r.o != nil {
		return r.o.fh.ReadAt(p, off)
	}
	if err := r.s.store.ReadAt(r.ctx, r.s.objs[r.i], p, off); err != nil {
		return 0, r.s.fetchErr("", err) // the store's error names the URL
	}
	return len(p), nil
}

// fetchErr is the error of a fetch for the source: the context's, naming
// url unless it is "", or else a download failure.
func (s *shardStream) fetchErr(url string, err error) error {
	switch {
	case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: %w", s.what, ErrDownload, err)
	case url != "":
		return fmt.Errorf("%s: %s: %w", s.what, remote.Redact(url), err)
	}
	return fmt.Errorf("%s: %w", s.what, err)
}

// maxOpen bounds the shards open outside an epoch's plan.
const maxOpen = 4

// spreadLimit is the share of an epoch's reads that may go to shards let
// go before them (each a ranged GET) before an order is refused.
const spreadLimit = 0.25

func newShardStream(what string, store *remote.Store, cache *remote.Cache, objs []remote.Object) *shardStream {
	base, stopAll := context.WithCancel(context.Background())
	var largest int64 = 1
	for _, o := range objs {
		largest = max(largest, o.Size)
	}
	hold := int(max(cache.Limit/largest, 2))
	return &shardStream{what: what, store: store, cache: cache, objs: objs, base: base, stopAll: stopAll, ctx: base,
		hold: hold, ahead: readAhead(hold, store.Options().Concurrency),
		made: map[int]madeIndex{}, shards: map[int]*openShard{}, moved: make(chan struct{})}
}

// indexed records that shard i's index, stored in files, was made from
// bytes of checksum sum: a fetch of other bytes fails the reads of the
// shard and removes the files. A source calls it before the shard's first
// read for an index it found stored, and after indexing for one it made.
func (s *shardStream) indexed(i int, sum uint64, files ...string) {
	s.mu.Lock()
	s.made[i] = madeIndex{sum, files}
	s.mu.Unlock()
}

// check returns the error of shard i fetched as bytes of checksum sum, if
// its index was made from others, and removes its stored index.
func (s *shardStream) check(i int, sum uint64) error {
	s.mu.Lock()
	m, ok := s.made[i]
	s.mu.Unlock()
	if !ok || m.sum == sum {
		return nil
	}
	for _, f := range m.files {
		os.Remove(f)
	}
	return &changedError{fmt.Sprintf("%s: %s: the object changed since its index was made (its bytes' checksum is %016x, %016x when indexed); "+
		"start again to re-index it", s.what, remote.Redact(s.objs[i].URL), sum, m.sum)}
}

// signal wakes the read-ahead if it waits. s.mu is held.
func (s *shardStream) signal() {
	if s.waiting {
		s.waiting = false
		close(s.moved)
		s.moved = make(chan struct{})
	}
}

// start begins fetching shard i. s.mu is held.
func (s *shardStream) start(i int) *openShard {
	o := &openShard{ready: make(chan struct{})}
	s.shards[i] = o
	ctx, obj := s.ctx, s.objs[i]
	go func() {
		fh, sum, err := s.cache.Open(ctx, s.store, obj)
		s.mu.Lock()
		o.fh, o.sum, o.err = fh, sum, err
		close(o.ready)
		if s.shards[i] != o && o.refs == 0 && o.fh != nil {
			o.fh.Close() // let go of while it was fetched, and unread
		}
		s.mu.Unlock()
	}()
	return o
}

// acquire returns a reader of shard i, fetching the shard first if it is
// neither open nor let go, for a read that ends with release.
func (s *shardStream) acquire(i int) (*shardReader, error) {
	s.mu.Lock()
	if s.left != nil && s.pos[i] > s.reached {
		s.reached = s.pos[i]
		s.signal()
	}
	if s.left != nil && s.retired[i] {
		r := &shardReader{s: s, i: i, ctx: s.ctx}
		s.mu.Unlock()
		return r, nil
	}
	o := s.shards[i]
	if o == nil {
		o = s.start(i)
	}
	o.refs++
	s.clock++
	o.used = s.clock
	s.mu.Unlock()
	<-o.ready
	err := o.err
	if err == nil {
		err = s.check(i, o.sum)
	}
	if err != nil {
		s.mu.Lock()
		o.refs--
		if s.shards[i] == o {
			delete(s.shards, i) // a later read fetches again
		}
		if o.refs == 0 && o.fh != nil {
			o.fh.Close()
		}
		s.mu.Unlock()
		if o.err == nil {
			return nil, err
		}
		return nil, s.fetchErr(s.objs[i].URL, o.err)
	}
	return &shardReader{o: o, s: s, i: i}, nil
}

// release ends a read of shard i that acquire began with r; read says
// whether it was one of the epoch's reads.
func (s *shardStream) release(i int, r *shardReader, read bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if read && s.left != nil && s.left[i] > 0 {
		s.left[i]--
	}
	o := r.o
	if o == nil {
		return
	}
	o.refs--
	if s.shards[i] != o {
		if o.refs == 0 {
			o.fh.Close() // let go of while it was read
		}
		return
	}
	if o.refs == 0 && s.left != nil && s.left[i] == 0 {
		s.drop(i, o)
	}
	if o.refs == 0 {
		s.signal()
	}
	s.trim()
}

// drop closes shard i. s.mu is held, and o is ready with no reads.
func (s *shardStream) drop(i int, o *openShard) {
	if o.fh != nil {
		o.fh.Close()
	}
	delete(s.shards, i)
}

// trim closes the least recently used idle shards past maxOpen, outside
// an epoch's plan (within one, a shard closes when its reads are done).
// s.mu is held.
func (s *shardStream) trim() {
	for s.left == nil && len(s.shards) > maxOpen {
		victim, oldest := -1, int64(0)
		for i, o := range s.shards {
			select {
			case <-o.ready:
			default:
				continue
			}
			if o.refs == 0 && (victim < 0 || o.used < oldest) {
				victim, oldest = i, o.used
			}
		}
		if victim < 0 {
			return
		}
		s.drop(victim, s.shards[victim])
	}
}

// retire lets go of the open shard, first read before place p and idle,
// with the fewest reads to come, so that another may be fetched; its reads
// to come take ranged GETs. It reports whether there was one. s.mu is held.
func (s *shardStream) retire(p int) bool {
	victim := -1
	for i, o := range s.shards {
		select {
		case <-o.ready:
		default:
			continue
		}
		if o.refs == 0 && s.pos[i] >= 0 && s.pos[i] < p && (victim < 0 || s.left[i] < s.left[victim]) {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	s.drop(victim, s.shards[victim])
	s.retired[victim] = true
	return true
}

// spread simulates an epoch reading shards in order (shard numbers, -1
// for none) holding at most hold shards, each let go as retire does, and
// returns the share of reads that would find their shard let go.
func spread(order []int, counts []int, hold int) float64 {
	left := append([]int(nil), counts...)
	open := map[int]bool{}
	retired := make([]bool, len(counts))
	late, reads := 0, 0
	for _, i := range order {
		if i < 0 {
			continue
		}
		reads++
		switch {
		case open[i]:
		case retired[i]:
			late++
		default:
			if len(open) >= hold {
				victim := -1
				for j := range open {
					// Ties go to the lowest shard, so that a check repeats.
					if victim < 0 || left[j] < left[victim] || left[j] == left[victim] && j < victim {
						victim = j
					}
				}
				delete(open, victim)
				retired[victim] = true
			}
			open[i] = true
		}
		if left[i]--; left[i] == 0 {
			delete(open, i)
		}
	}
	if reads == 0 {
		return 0
	}
	return float64(late) / float64(reads)
}

// planShards starts reading ahead of an epoch that reads shards in the
// order seq (each shard once, by first read) with counts[i] reads of shard
// i, holding at most hold of them, and returns stop, which also
// ends the fetches the epoch's reads began. With counts nil (an epoch whose
// order is not known) it only ties the fetches to stop.
func (s *shardStream) planShards(seq, counts []int) (stop func()) {
	ctx, cancel := context.WithCancel(s.base)
	s.mu.Lock()
	s.ctx = ctx
	if counts == nil {
		seq = nil
	} else {
		s.left, s.pos, s.retired, s.reached = counts, make([]int, len(s.objs)), make([]bool, len(s.objs)), -1
		for i := range s.pos {
			s.pos[i] = -1
		}
		for p, i := range seq {
			s.pos[i] = p
		}
		for i, o := range s.shards {
			select {
			case <-o.ready:
				if o.refs == 0 && counts[i] == 0 {
					s.drop(i, o)
				}
			default:
			}
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		for p, i := range seq {
			for {
				s.mu.Lock()
				if s.shards[i] != nil || s.retired[i] || s.left[i] == 0 {
					s.mu.Unlock()
					break // fetched on demand, or its reads are done
				}
				if p <= s.reached+s.ahead && (len(s.shards) < s.hold || s.retire(p)) {
					s.start(i)
					s.mu.Unlock()
					break
				}
				s.waiting = true
				moved := s.moved
				s.mu.Unlock()
				select {
				case <-moved:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.ctx, s.left, s.pos, s.retired, s.waiting = s.base, nil, nil, nil, false
			for i, o := range s.shards {
				select {
				case <-o.ready:
					if o.refs == 0 {
						s.drop(i, o)
					}
				default:
					// Its fetch ends with the plan's context: let it
					// go (it closes its file when done), so a later read
					// fetches afresh.
					delete(s.shards, i)
				}
			}
			s.trim()
		})
	}
}

// planEach is planShards for a pass that reads each of shards once, in
// that order (an open indexing what is not stored); with none, it plans
// nothing.
func (s *shardStream) planEach(shards []int) (stop func()) {
	if len(shards) == 0 {
		return func() {}
	}
	counts := make([]int, len(s.objs))
	for _, i := range shards {
		counts[i] = 1
	}
	return s.planShards(shards, counts)
}

// planOrder is planShards for an epoch reading the samples of order, each
// in the shard shardOf gives (-1: a read that touches no shard, such as a
// corrupt sample's); a nil order is an epoch whose order is not known.
// order is called only here, when the source streams. It refuses, with an
// [*OrderError], an order that would read more than spreadLimit of its
// samples by ranged GETs, from shards let go to make room.
func (s *shardStream) planOrder(epoch func() []int, shardOf func(i int) int) (stop func(), err error) {
	if epoch == nil {
		return s.planShards(nil, nil), nil
	}
	shards, counts, seq := s.shardsOf(epoch(), shardOf)
	if err := s.refuse(shards, counts); err != nil {
		return nil, err
	}
	return s.planShards(seq, counts), nil
}

// checkOrder is planOrder's refusal without the plan: what ReadAhead
// would say of the order, with nothing fetched (see [OrderChecker]).
func (s *shardStream) checkOrder(epoch func() []int, shardOf func(i int) int) error {
	shards, counts, _ := s.shardsOf(epoch(), shardOf)
	return s.refuse(shards, counts)
}

// shardsOf returns the shard of each read of order (-1: none), each
// shard's reads, and the shards in the order the epoch first reads them.
func (s *shardStream) shardsOf(order []int, shardOf func(i int) int) (shards, counts, seq []int) {
	counts = make([]int, len(s.objs))
	shards = make([]int, len(order))
	for k, i := range order {
		sh := shardOf(i)
		shards[k] = sh
		if sh < 0 {
			continue
		}
		if counts[sh] == 0 {
			seq = append(seq, sh)
		}
		counts[sh]++
	}
	return shards, counts, seq
}

// readAhead is how many shards a stream holding hold shards fetches ahead
// of its reads: a quarter of them, at least one, at most the store's
// requests in flight.
func readAhead(hold, concurrency int) int { return min(max(hold/4, 1), concurrency) }

// lateAt is the share of the reads of shards (with counts) that a stream
// holding hold shards would find let go.
func (s *shardStream) lateAt(shards, counts []int, hold int) float64 {
	return spread(shards, counts, max(hold-readAhead(hold, s.store.Options().Concurrency), 1))
}

// refuse returns the [*OrderError] for reads of shards (with counts) that
// read too many samples late through this cache, or nil, naming the fewest
// shards a cache must hold for them to pass.
func (s *shardStream) refuse(shards, counts []int) error {
	late := s.lateAt(shards, counts, s.hold)
	if late <= spreadLimit {
		return nil
	}
	var largest, total int64
	for _, o := range s.objs {
		largest, total = max(largest, o.Size), total+o.Size
	}
	// The cache holding every shard but one passes or nothing below the
	// dataset does; between, the late share falls as the cache grows.
	lo, hi := s.hold, len(s.objs)
	if s.lateAt(shards, counts, hi-1) <= spreadLimit {
		hi--
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; s.lateAt(shards, counts, mid) <= spreadLimit {
				hi = mid
			} else {
				lo = mid
			}
		}
	}
	size := int64(hi) * largest
	if hi == len(s.objs) {
		size = total
	}
	return &OrderError{Source: s.what, Epoch: -1, Late: late, CacheSize: s.cache.Limit, Hold: s.hold, PassHold: hi, PassSize: size}
}

// ErrOrder is wrapped by an [*OrderError]: an epoch's order that a source
// streaming its shards cannot read through its shard cache.
var ErrOrder = errors.New("the order reads too many samples from shards let go")

// OrderError refuses an epoch's order that would read more than a quarter
// of its samples from shards the stream let go before them, to make room
// in its cache (each such read a ranged GET): a full shuffle, which reads
// every shard throughout the epoch, or a shuffle buffer of more shards'
// samples than the cache holds. It says what would pass.
type OrderError struct {
	Source string
	// Epoch is the epoch refused, -1 where the source was handed an
	// order without it.
	Epoch int
	// Late is the share of the epoch's reads that would find their shard
	// let go, through a cache of CacheSize bytes that holds Hold shards.
	Late      float64
	CacheSize int64
	Hold      int
	// PassSize is the cache_size with which the order passes: the fewest
	// shards, PassHold, it must hold (every shard where nothing smaller
	// passes, the dataset then being fetched once and held).
	PassSize int64
	PassHold int
	// Buffer is the shuffle buffer's length (0: a full shuffle), and
	// PassBuffer the largest smaller one found that passes with CacheSize
	// (0: none); both are known to the plan's owner, which sets them.
	Buffer, PassBuffer int
	// Failing is how many epochs fail of the Checked ones simulated ahead
	// (0: one order alone), the check stopping after a few; PassSize and
	// PassBuffer then pass each of them.
	Failing, Checked int
}

func (e *OrderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", e.Source)
	if e.Epoch >= 0 {
		fmt.Fprintf(&b, "epoch %d: ", e.Epoch)
	}
	fmt.Fprintf(&b, "the order would read %.0f%% of its samples from shards let go before them, as cache_size=%d holds %d shards at once", 100*e.Late, e.CacheSize, e.Hold)
	if e.Failing > 1 {
		fmt.Fprintf(&b, " (%d of the %d epochs checked fail)", e.Failing, e.Checked)
	}
	if e.Buffer == 0 {
		fmt.Fprintf(&b, ": a full shuffle reads every shard throughout the epoch; shuffle with buffer= (shards in a random order, "+
			"each read in sequence, a buffer of a few shards' samples) or raise cache_size (cache_size=%d, %d shards, passes)", e.PassSize, e.PassHold)
		return b.String()
	}
	fmt.Fprintf(&b, ": shuffle buffer=%d keeps samples of more shards in use than that; cache_size=%d (%d shards) passes with it", e.Buffer, e.PassSize, e.PassHold)
	if e.PassBuffer > 0 {
		fmt.Fprintf(&b, ", or buffer=%d with cache_size=%d", e.PassBuffer, e.CacheSize)
	} else {
		fmt.Fprintf(&b, "; no smaller buffer passes with cache_size=%d", e.CacheSize)
	}
	return b.String()
}

func (e *OrderError) Unwrap() error { return ErrOrder }

// OrderChecker is implemented by sources that may stream their shards
// (see [ReadAheader]). CheckOrder returns the error ReadAhead would refuse
// order with, an [*OrderError], without fetching anything, so that every
// epoch of a run can be checked before the first starts; order is called
// only where the source streams. nil: the order streams, or the source
// does not stream.
type OrderChecker interface {
	CheckOrder(order func() []int) error
}

// close stops every fetch and closes every shard.
func (s *shardStream) close() {
	s.stopAll()
	s.mu.Lock()
	shards := s.shards
	s.shards = map[int]*openShard{}
	s.mu.Unlock()
	for _, o := range shards {
		<-o.ready
		s.mu.Lock()
		if o.fh != nil && o.refs == 0 {
			o.fh.Close()
		}
		s.mu.Unlock()
	}
}
