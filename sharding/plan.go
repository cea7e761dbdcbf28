package sharding

import (
	"fmt"
	"math/bits"
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

// Epoch appends the rank's sample indices for epoch e, in order, to dst[:0]
// and returns it; pass the previous result to reuse its memory.
func (p *Plan) Epoch(e int, dst []int) []int {
	if cap(dst) < p.n {
		dst = make([]int, p.n)
	}
	perm := dst[:p.n]
	for i := range perm {
		perm[i] = i
	}
	if p.shuffle {
		r := newRand(p.seed, e)
		for i := p.n - 1; i > 0; i-- {
			j := r.intn(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
	}
	if p.world == 1 {
		return perm
	}
	// Compact the rank's stride in place: entry k moves to k/world ≤ k.
	out := perm[:0]
	for k := p.rank; k < p.Len()*p.world; k += p.world {
		out = append(out, perm[k])
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

// rand is SplitMix64 keyed by (seed, epoch).
type rand struct{ s uint64 }

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func newRand(seed uint64, epoch int) *rand {
	return &rand{s: mix(mix(seed^0x5851f42d4c957f2d) ^ uint64(epoch))}
}

func (r *rand) intn(n int) int {
	r.s += 0x9e3779b97f4a7c15
	hi, _ := bits.Mul64(mix(r.s), uint64(n))
	return int(hi)
}
