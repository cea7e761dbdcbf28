package engine

import (
	"fmt"
	"math/bits"

	"github.com/pipefeed/pipe/internal/sysmem"
)

// checkMemory refuses slabs that cannot fit: n slabs of rows samples of
// sampleBytes each, against the memory this process may use where it is
// known (sysmem.Limit: RAM, cgroup, ulimit -v). The product is checked for overflow first, so that a
// batch size no machine could hold is an error naming the figures rather
// than a panic in make.
func checkMemory(n, rows, sampleBytes int) error {
	hi, per := bits.Mul64(uint64(rows), uint64(sampleBytes))
	hi2, all := bits.Mul64(per, uint64(n))
	total, _ := sysmem.Limit()
	if hi == 0 && hi2 == 0 && all < 1<<62 && (total == 0 || all <= total) {
		return nil
	}
	need := fmt.Sprintf("%d slabs of %d samples × %d bytes", n, rows, sampleBytes)
	if hi == 0 && hi2 == 0 {
		need += fmt.Sprintf(" = %.1f GB", float64(all)/1e9)
	}
	return fmt.Errorf("engine: batches do not fit in memory: %s (a slab per worker and %d more), and %s; lower the batch size or the workers", need, extraSlabs, sysmem.Describe())
}
