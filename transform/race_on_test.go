//go:build race

package transform

// underRace reports whether the tests run under the race detector, whose
// shadow memory takes terabytes of address space.
const underRace = true
