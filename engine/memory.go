package engine

import (
	"fmt"
	"math/bits"
)

// checkMemory refuses slabs that cannot fit: n slabs of rows samples of
// sampleBytes each, against the machine's physical memory where it is known
// (physicalMemory). The product is checked for overflow first, so that a
// batch size no machine could hold is an error naming the figures rather
// than a panic in make.
func checkMemory(n, rows, sampleBytes int) error {
	hi, per := bits.Mul64(uint64(rows), uint64(sampleBytes))
	hi2, all := bits.Mul64(per, uint64(n))
	total := physicalMemory()
	if hi == 0 && hi2 == 0 && all < 1<<62 && (total == 0 || all <= total) {
		return nil
	}
	need := fmt.Sprintf("%d slabs of %d samples × %d bytes", n, rows, sampleBytes)
	if hi == 0 && hi2 == 0 {
		need += fmt.Sprintf(" = %.1f GB", float64(all)/1e9)
	}
	have := "more than any machine has"
	if total > 0 {
		have = fmt.Sprintf("and this machine has %.1f GB", float64(total)/1e9)
	}
	return fmt.Errorf("engine: batches do not fit in memory: %s (a slab per worker and %d more), %s; lower the batch size or the workers", need, extraSlabs, have)
}
