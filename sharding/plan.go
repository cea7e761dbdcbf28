package sharding

import (
	"fmt"
	"math/bits"

	"github.com/pipefeed/pipe/internal/splitmix"
)

// Plan is the sample order of a dataset across epochs for one rank.
type Plan struct {
	n           int
	shuffle     bool
	seed        uint64
	rank, world int
}

// Option configures a Plan.
type Option func(*Plan) error

// WithShuffle permutes the samples anew each epoch from seed. Default: no
// shuffle, samples in index order.
func WithShuffle(seed uint64) Option {
	return func(p *Plan) error { p.shuffle, p.seed = true, seed; return nil }
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
	return p, nil
}

// Len is the number of samples the rank reads per epoch: ⌊n / world⌋.
func (p *Plan) Len() int { return p.n / p.world }

// Shuffled reports whether epochs are permuted.
func (p *Plan) Shuffled() bool { return p.shuffle }

// Seed is the shuffle seed.
func (p *Plan) Seed() uint64 { return p.seed }

// Rank and World return the plan's place in the job.
func (p *Plan) Rank() int  { return p.rank }
func (p *Plan) World() int { return p.world }

// At returns the k-th sample (0 ≤ k < Len()) of the rank's epoch e. It
// needs no per-epoch state, so a plan's memory does not grow with the
// dataset: the shuffle is a keyed permutation computed index by index.
func (p *Plan) At(e, k int) int {
	j := p.rank + k*p.world
	if !p.shuffle {
		return j
	}
	perm := newPerm(p.n, p.seed, e)
	return perm.at(j)
}

// Epoch appends the rank's sample indices for epoch e, in order, to dst[:0]
// and returns it; pass the previous result to reuse its memory.
func (p *Plan) Epoch(e int, dst []int) []int {
	dst = dst[:0]
	perm := newPerm(p.n, p.seed, e)
	for k := range p.Len() {
		j := p.rank + k*p.world
		if p.shuffle {
			j = perm.at(j)
		}
		dst = append(dst, j)
	}
	return dst
}

// Fill writes the rank's samples k0, k0+1, … of epoch e into dst.
func (p *Plan) Fill(e, k0 int, dst []int) {
	perm := newPerm(p.n, p.seed, e)
	for i := range dst {
		j := p.rank + (k0+i)*p.world
		if p.shuffle {
			j = perm.at(j)
		}
		dst[i] = j
	}
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
