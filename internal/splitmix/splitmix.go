// Package splitmix holds the SplitMix64 finaliser that pipe's generators are
// built on: the per-sample generator of transform, the shuffle of sharding
// and the synthetic source. One copy, so they cannot drift apart.
package splitmix

// Golden is the SplitMix64 increment, 2^64 divided by the golden ratio.
const Golden = 0x9e3779b97f4a7c15

// Mix is the SplitMix64 finaliser (Stafford's variant 13): a bijection on
// 64-bit values with full avalanche.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
