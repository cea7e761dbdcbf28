package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/pipefeed/pipe/source/remote"
)

// ReadAheader is implemented by sources that fetch their data ahead of the
// reads: URL shards streamed through a shard cache smaller than the dataset.
// Before an epoch's reads start, ReadAhead is told the samples the epoch
// reads, in order (nil where the order is not known, as through an
// augmentation cache: reads then fetch on demand); it returns stop, which
// ends the read-ahead and the fetches under way and lets go of the epoch's
// shards once the reads are over, or an error when the order cannot be
// streamed in the cache (a full shuffle reads every shard throughout the
// epoch). Reads without a ReadAhead still work, fetching on demand.
type ReadAheader interface {
	ReadAhead(order []int) (stop func(), err error)
}

// shardStream reads the shards of a URL source through a shard cache
// smaller than the dataset (cache_size= below the shards' total), so no
// shard stays open for the run: a shard is fetched into the cache and
// opened when a read needs it or read-ahead reaches it, and closed once the
// epoch has read every sample it will read from it (outside an epoch's
// plan, when more than maxOpen shards are open, the least recently used
// idle one), after which the cache may evict it.
type shardStream struct {
	what    string // the source, for errors
	store   *remote.Store
	cache   *remote.Cache
	objs    []remote.Object
	base    context.Context // ends when the source closes (stopAll)
	stopAll context.CancelFunc

	mu     sync.Mutex
	shards map[int]*openShard
	clock  int64
	ctx    context.Context // fetches started now end with it: the plan's, else base
	// The epoch's plan, from planShards: each shard's reads still to
	// come (nil: no plan), its place in the order the epoch first reads
	// the shards (-1: not read), and the furthest place a read reached.
	left    []int
	pos     []int
	reached int
	moved   chan struct{} // closed and replaced when reached moves
}

// openShard is a shard being fetched or open.
type openShard struct {
	ready chan struct{} // closed once fh or err is set
	fh    *os.File
	err   error
	refs  int   // reads under way
	used  int64 // the clock at its last use
}

// maxOpen bounds the shards open outside an epoch's plan.
const maxOpen = 4

func newShardStream(what string, store *remote.Store, cache *remote.Cache, objs []remote.Object) *shardStream {
	base, stopAll := context.WithCancel(context.Background())
	return &shardStream{what: what, store: store, cache: cache, objs: objs, base: base, stopAll: stopAll, ctx: base,
		shards: map[int]*openShard{}, moved: make(chan struct{})}
}

// fit is how many of the largest shards the cache holds.
func (s *shardStream) fit() int {
	var largest int64 = 1
	for _, o := range s.objs {
		largest = max(largest, o.Size)
	}
	return int(max(s.cache.Limit/largest, 1))
}

// start begins fetching shard i. s.mu is held.
func (s *shardStream) start(i int) *openShard {
	o := &openShard{ready: make(chan struct{})}
	s.shards[i] = o
	ctx, obj := s.ctx, s.objs[i]
	go func() {
		p, _, release, err := s.cache.Fetch(ctx, s.store, obj)
		if err == nil {
			if o.fh, err = os.Open(p); err != nil {
				err = fmt.Errorf("%s: shard cache: %w", obj.URL, err)
			}
			release()
		}
		s.mu.Lock()
		o.err = err
		close(o.ready)
		if s.shards[i] != o && o.refs == 0 && o.fh != nil {
			o.fh.Close() // let go of while it was fetched, and unread
		}
		s.mu.Unlock()
	}()
	return o
}

// acquire returns shard i, open (its fh), fetching it first if it is not,
// for a read that ends with release.
func (s *shardStream) acquire(i int) (*openShard, error) {
	s.mu.Lock()
	o := s.shards[i]
	if o == nil {
		o = s.start(i)
	}
	o.refs++
	s.clock++
	o.used = s.clock
	if s.left != nil && s.pos[i] > s.reached {
		s.reached = s.pos[i]
		close(s.moved)
		s.moved = make(chan struct{})
	}
	s.mu.Unlock()
	<-o.ready
	if o.err != nil {
		s.mu.Lock()
		o.refs--
		if s.shards[i] == o {
			delete(s.shards, i) // a later read fetches again
		}
		s.mu.Unlock()
		if errors.Is(o.err, context.Canceled) || errors.Is(o.err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: %s: %w", s.what, s.objs[i].URL, o.err)
		}
		return nil, fmt.Errorf("%s: %w: %w", s.what, ErrDownload, o.err)
	}
	return o, nil
}

// release ends a read of shard i, o, that acquire began; read says
// whether it was one of the epoch's reads.
func (s *shardStream) release(i int, o *openShard, read bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.refs--
	if s.shards[i] != o {
		if o.refs == 0 {
			o.fh.Close() // let go of (stop) while it was read
		}
		return
	}
	if read && s.left != nil && s.left[i] > 0 {
		s.left[i]--
	}
	if o.refs == 0 && s.left != nil && s.left[i] == 0 {
		s.drop(i, o)
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

// planShards starts reading ahead of an epoch that reads shards in the
// order seq (each shard once, by first read) with counts[i] reads of shard
// i, and returns stop, which also ends the fetches the epoch's reads began.
// It refuses an order that keeps more shards in use at once than the cache
// holds: live is the most shards between their first and last read at any
// point of the epoch. With counts nil (an epoch whose order is not known)
// it only ties the fetches to stop.
func (s *shardStream) planShards(seq, counts []int, live int) (stop func(), err error) {
	fit := s.fit()
	if counts != nil && live > fit {
		return nil, fmt.Errorf("%s: the epoch's order reads from %d shards at once, and cache_size=%d holds %d of them: "+
			"a full shuffle reads every shard throughout the epoch; shuffle with buffer= (shards in a random order, each read in sequence) or raise cache_size",
			s.what, live, s.cache.Limit, fit)
	}
	ahead := min(max(fit-live, 1), s.store.Options().Concurrency)
	ctx, cancel := context.WithCancel(s.base)
	s.mu.Lock()
	s.ctx = ctx
	if counts == nil {
		seq = nil
	} else {
		s.left, s.pos, s.reached = counts, make([]int, len(s.objs)), -1
	}
	for i := range s.pos {
		s.pos[i] = -1
	}
	for p, i := range seq {
		s.pos[i] = p
	}
	for i, o := range s.shards {
		if o.refs == 0 && counts != nil && counts[i] == 0 {
			select {
			case <-o.ready:
				s.drop(i, o)
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
				if p <= s.reached+ahead {
					if s.shards[i] == nil {
						s.start(i)
					}
					s.mu.Unlock()
					break
				}
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
			s.ctx, s.left, s.pos = s.base, nil, nil
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
	}, nil
}

// planOrder is planShards for an epoch reading the samples of order, each
// in the shard shardOf gives (-1: a read that touches no shard, such as a
// corrupt sample's); a nil order is an epoch whose order is not known.
func (s *shardStream) planOrder(order []int, shardOf func(i int) int) (stop func(), err error) {
	if order == nil {
		return s.planShards(nil, nil, 0)
	}
	n := len(s.objs)
	counts := make([]int, n)
	first, last := make([]int, n), make([]int, n)
	var seq []int
	for k, i := range order {
		sh := shardOf(i)
		if sh < 0 {
			continue // a read that touches no shard
		}
		if counts[sh] == 0 {
			first[sh] = k
			seq = append(seq, sh)
		}
		counts[sh]++
		last[sh] = k
	}
	// The most shards live at once: +1 at each first read, -1 after each
	// last.
	delta := make([]int, len(order)+1)
	for _, sh := range seq {
		delta[first[sh]]++
		delta[last[sh]+1]--
	}
	live, cur := 0, 0
	for _, d := range delta {
		cur += d
		live = max(live, cur)
	}
	return s.planShards(seq, counts, live)
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
