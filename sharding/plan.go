package sharding

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/pipefeed/pipe/internal/splitmix"
)

// Plan is the sample order of a dataset across epochs for one rank.
type Plan struct {
	n           int
	streamTotal int // samples in shards, checked against n
	shuffle     bool
	seed        uint64
	rank, world int
	// slice, when not 0, is the layout of a training job (WithSlices):
	// rank takes slice rank of every global batch of world·slice.
	slice int
	// global, when not 0, is an elastic plan's global batch (WithElastic):
	// an epoch is whole global batches, each sliced among the ranks.
	global int

	// A streaming plan (WithShuffleBuffer): shard sizes and buffer length,
	// and the global order of the epochs asked for last, computed once.
	shards []int
	buffer int
	mu     sync.Mutex
	orders [2]streamOrder
}

type streamOrder struct {
	epoch int
	order []int32
}

// Option configures a Plan.
type Option func(*Plan) error

// WithShuffle permutes the samples anew each epoch from seed. Default: no
// shuffle, samples in index order.
func WithShuffle(seed uint64) Option {
	return func(p *Plan) error { p.shuffle, p.seed = true, seed; return nil }
}

// WithShuffleBuffer makes the epochs' order that of a streaming reader (as
// tf.data and WebDataset shuffle): the shards, of the given sizes in index
// order, are read in a new random order each epoch, one after another,
// through a shuffle buffer of buffer samples that emits a random one of
// those it holds for each sample it takes in. Reads stay sequential within
// a shard; samples move at most about buffer places from their shard's
// stream. Each rank takes an equal contiguous block of the epoch's order,
// so it reads few shards, and the ranks still get ⌊n / world⌋ samples each
// whatever the shards' sizes. The plan keeps the order of the last two
// epochs asked for (4 bytes a sample each).
func WithShuffleBuffer(seed uint64, shards []int, buffer int) Option {
	return func(p *Plan) error {
		if buffer < 1 {
			return fmt.Errorf("sharding: shuffle buffer %d: want at least 1", buffer)
		}
		total := 0
		for i, s := range shards {
			if s < 0 {
				return fmt.Errorf("sharding: shard %d has %d samples", i, s)
			}
			total += s
		}
		if total > math.MaxInt32 {
			return fmt.Errorf("sharding: %d samples is more than a streaming plan's %d", total, math.MaxInt32)
		}
		p.shuffle, p.seed, p.shards, p.buffer = true, seed, shards, buffer
		p.streamTotal = total
		return nil
	}
}

// WithRank makes the plan that of rank of world ranks. Default: rank 0 of 1.
func WithRank(rank, world int) Option {
	return func(p *Plan) error {
		if world < 1 || rank < 0 || rank >= world {
			return fmt.Errorf("sharding: rank %d of world %d: want 0 ≤ rank < world", rank, world)
		}
		p.rank, p.world = rank, world
		return nil
	}
}

// WithSlices lays the ranks' shares out as a training job whose ranks split
// each global batch of world·b samples, in order, as one process splits a
// batch among its devices: rank r takes entries [r·b, (r+1)·b) of every
// world·b consecutive entries of the epoch's order. The epoch's last,
// shorter global batch is split the same way, each rank taking an equal
// slice of what its ⌊n / world⌋ samples leave; the last n mod world entries
// sit out, as they do without it. So batch k of every rank's epoch, batched
// by b, is slice r of the global batch k that one process batching by
// world·b makes. Default (0): rank r takes every world-th entry from r.
func WithSlices(b int) Option {
	return func(p *Plan) error {
		if b < 1 {
			return fmt.Errorf("sharding: slices of %d samples: want at least 1", b)
		}
		p.slice = b
		return nil
	}
}

// WithElastic makes the global batch the unit of the epoch, so that the
// global stream of samples does not depend on the number of ranks: an epoch
// is the ⌊n / global⌋ whole global batches of its order, and rank r of
// world takes entries [r·s, (r+1)·s) of each, s = global / world (global
// must divide by world). The n mod global entries left are the last of the
// epoch's order (different ones each epoch when shuffling). Any world size
// that divides global reads the same global batches, sample for sample, so
// a run stopped at a global batch resumes there on another number of ranks.
// It replaces WithSlices, whose last, shorter global batch depends on the
// world size.
func WithElastic(global int) Option {
	return func(p *Plan) error {
		if global < 1 {
			return fmt.Errorf("sharding: elastic global batch %d: want at least 1", global)
		}
		p.global = global
		return nil
	}
}

// New returns the plan for a dataset of n samples.
func New(n int, opts ...Option) (*Plan, error) {
	p := &Plan{n: n, world: 1}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	if n < p.world {
		return nil, fmt.Errorf("sharding: %d samples cannot give each of %d ranks one", n, p.world)
	}
	if p.global > 0 {
		if p.global%p.world != 0 {
			return nil, fmt.Errorf("sharding: an elastic global batch of %d does not divide among %d ranks", p.global, p.world)
		}
		if p.global > n {
			return nil, fmt.Errorf("sharding: an elastic global batch of %d is more than the %d samples", p.global, n)
		}
		p.slice = p.global / p.world
	}
	if p.buffer > 0 && p.streamTotal != n {
		return nil, fmt.Errorf("sharding: shards hold %d samples, the dataset %d", p.streamTotal, n)
	}
	return p, nil
}

// Buffer is the shuffle buffer's length, or 0 for a full permutation.
func (p *Plan) Buffer() int { return p.buffer }

// Len is the number of samples the rank reads per epoch: ⌊n / world⌋, or
// in an elastic plan its slice of every whole global batch.
func (p *Plan) Len() int {
	if p.global > 0 {
		return p.n / p.global * p.slice
	}
	return p.n / p.world
}

// Elastic is WithElastic's global batch, or 0.
func (p *Plan) Elastic() int { return p.global }

// Shuffled reports whether epochs are permuted.
func (p *Plan) Shuffled() bool { return p.shuffle }

// Seed is the shuffle seed.
func (p *Plan) Seed() uint64 { return p.seed }

// Rank and World return the plan's place in the job.
func (p *Plan) Rank() int  { return p.rank }
func (p *Plan) World() int { return p.world }

// Slice is WithSlices' slice, or 0 where ranks take every world-th entry.
func (p *Plan) Slice() int { return p.slice }

// pos is the position in the epoch's order of the rank's k-th sample.
func (p *Plan) pos(k int) int {
	switch {
	case p.slice > 0:
		b, l := p.slice, p.Len()
		full := l / b * b // the rank's samples in whole global batches
		if k < full {
			return k/b*p.world*b + p.rank*b + k%b
		}
		tail := l - full
		return full*p.world + p.rank*tail + k - full
	case p.buffer > 0:
		return p.rank*p.Len() + k
	}
	return p.rank + k*p.world
}

// At returns the k-th sample (0 ≤ k < Len()) of the rank's epoch e. A
// full permutation needs no per-epoch state, so a plan's memory does not
// grow with the dataset: the shuffle is a keyed permutation computed index
// by index. A streaming plan computes the epoch's order once.
func (p *Plan) At(e, k int) int {
	if p.buffer > 0 {
		return int(p.stream(e)[p.pos(k)])
	}
	j := p.pos(k)
	if !p.shuffle {
		return j
	}
	perm := newPerm(p.n, p.seed, e)
	return perm.at(j)
}

// Epoch appends the rank's sample indices for epoch e, in order, to dst[:0]
// and returns it; pass the previous result to reuse its memory.
func (p *Plan) Epoch(e int, dst []int) []int {
	dst = slices.Grow(dst[:0], p.Len())[:p.Len()]
	p.Fill(e, 0, dst)
	return dst
}

// Fill writes the rank's samples k0, k0+1, … of epoch e into dst.
func (p *Plan) Fill(e, k0 int, dst []int) {
	if p.buffer > 0 {
		order := p.stream(e)
		for i := range dst {
			dst[i] = int(order[p.pos(k0+i)])
		}
		return
	}
	perm := newPerm(p.n, p.seed, e)
	for i := range dst {
		j := p.pos(k0 + i)
		if p.shuffle {
			j = perm.at(j)
		}
		dst[i] = j
	}
}

// stream returns the global order of epoch e of a streaming plan.
func (p *Plan) stream(e int) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.orders {
		if o.order != nil && o.epoch == e {
			return o.order
		}
	}
	// Replace the older of the two (the one not asked for last).
	p.orders[1] = p.orders[0]
	p.orders[0] = streamOrder{epoch: e, order: streamOrderOf(p.shards, p.buffer, p.seed, e)}
	return p.orders[0].order
}

// streamOrderOf is the order in which a reader of shards (their sizes, in
// index order) in a keyed random order, through a shuffle buffer of buffer
// samples, emits them in epoch e.
func streamOrderOf(shards []int, buffer int, seed uint64, e int) []int32 {
	starts := make([]int, len(shards))
	n := 0
	for i, s := range shards {
		starts[i] = n
		n += s
	}
	out := make([]int32, 0, n)
	buf := make([]int32, 0, min(buffer, n))
	shardPerm := newPerm(len(shards), seed^0x243f6a8885a308d3, e)
	g := splitmix.Mix(splitmix.Mix(seed^0x13198a2e03707344) ^ uint64(e))
	pick := func(m int) int {
		g += splitmix.Golden
		hi, _ := bits.Mul64(splitmix.Mix(g), uint64(m))
		return int(hi)
	}
	for i := range shards {
		si := shardPerm.at(i)
		for j := range shards[si] {
			idx := int32(starts[si] + j)
			if len(buf) < buffer {
				buf = append(buf, idx)
				continue
			}
			k := pick(len(buf))
			out = append(out, buf[k])
			buf[k] = idx
		}
	}
	for len(buf) > 0 {
		k := pick(len(buf))
		out = append(out, buf[k])
		buf[k] = buf[len(buf)-1]
		buf = buf[:len(buf)-1]
	}
	return out
}

// Batches returns how many batches of size b an epoch makes.
func (p *Plan) Batches(b int, dropLast bool) int {
	if dropLast {
		return p.Len() / b
	}
	return (p.Len() + b - 1) / b
}

// perm is a keyed bijection on [0, n): a six-round Feistel network on the
// smallest even number of bits that covers n, walked until its output falls
// in [0, n) (cycle-walking keeps it a bijection on [0, n)). The domain is
// under 4n, so a walk takes under four steps on average. Four rounds of a
// strong round function make a pseudo-random permutation (Luby–Rackoff);
// six keep tiny domains (a few bits a half) uniform, which four do not.
type perm struct {
	n    int
	half uint   // bits in each half
	mask uint64 // half-width mask
	keys [6]uint64
}

func newPerm(n int, seed uint64, epoch int) perm {
	bitsN := bits.Len(uint(max(n-1, 1)))
	half := uint(bitsN+1) / 2
	p := perm{n: n, half: half, mask: 1<<half - 1}
	k := splitmix.Mix(splitmix.Mix(seed^0x5851f42d4c957f2d) ^ uint64(epoch))
	for i := range p.keys {
		k = splitmix.Mix(k + splitmix.Golden)
		p.keys[i] = k
	}
	return p
}

func (p *perm) at(i int) int {
	if p.n <= 1 {
		return i
	}
	x := uint64(i)
	for {
		l, r := x>>p.half, x&p.mask
		for _, k := range p.keys {
			l, r = r, l^(splitmix.Mix(r^k)&p.mask)
		}
		x = l<<p.half | r
		if x < uint64(p.n) {
			return int(x)
		}
	}
}
