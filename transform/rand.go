package transform

import (
	"math/bits"

	"github.com/pipefeed/pipe/internal/splitmix"
)

// Rand is a counter-based random generator: its whole stream is a pure
// function of the key it was made from, so a sample's augmentation never
// depends on which goroutine drew it or what was drawn before. It is a
// SplitMix64 sequence whose starting point is a hash of the key.
//
// The zero Rand is valid (key 0). Rand is a small value; copy it freely.
type Rand struct {
	state uint64
}

// NewRand returns the generator of one sample in one epoch. A sample's
// random operations draw from it in turn, in the chain's order, so adding
// a random stage changes the draws of the random stages after it (and
// nothing else: not another sample's, not another epoch's).
func NewRand(seed uint64, epoch int, sample int64) Rand {
	h := splitmix.Mix(seed + splitmix.Golden)
	h = splitmix.Mix(h ^ (uint64(epoch) + 0x632be59bd9b4e019))
	h = splitmix.Mix(h ^ (uint64(sample) + 0x8cb92ba72f3d8dd7))
	// The last mix is of a stream number, always 0, that the generator
	// once took and never used; it stays so that every draw, and so every
	// output byte and cache entry, is as before.
	h = splitmix.Mix(h ^ 0xd6e8feb86659fd93)
	return Rand{state: h}
}

// State returns the generator's position, to resume it later with
// RandAt: stages after a cache continue the stream where the stages before
// it left off.
func (r Rand) State() uint64 { return r.state }

// RandAt returns the generator at a position State returned.
func RandAt(state uint64) Rand { return Rand{state: state} }

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.state += splitmix.Golden
	return splitmix.Mix(r.state)
}

// Float64 returns a uniform value in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}

// Uniform returns a uniform value in [lo, hi).
func (r *Rand) Uniform(lo, hi float64) float64 {
	return lo + (hi-lo)*r.Float64()
}

// Intn returns a uniform value in [0, n); n must be positive. It uses
// Lemire's multiply-shift, whose bias for n < 2^32 is below 2^-32.
func (r *Rand) Intn(n int) int {
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}
