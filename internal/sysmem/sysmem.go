// Package sysmem says how much memory this process may use, for the checks
// that refuse, with the figures, what cannot fit (slabs, a model's
// parameters) before allocating it, and how much of it is left, for the
// budgets sized to fit inside it (the decoders').
package sysmem

import "fmt"

// Limit returns the bytes this process may use: the least of the machine's
// RAM, its cgroup's memory limit and its address-space limit (ulimit -v),
// with what that least one is; 0 and "" where none is known.
func Limit() (uint64, string) { return limit() }

// Describe says what Limit found, e.g. "this machine has 24.9 GB" or "this
// process may use 2.0 GB (ulimit -v)", for an error message.
func Describe() string {
	n, what := Limit()
	switch {
	case n == 0:
		return "more than any machine has"
	case what == "RAM":
		return fmt.Sprintf("this machine has %.1f GB", float64(n)/1e9)
	}
	return fmt.Sprintf("this process may use %.1f GB (%s)", float64(n)/1e9, what)
}

// Headroom is what one of the limits Limit reads leaves this process.
type Headroom struct {
	// Limit is the limit in bytes, and What names it as Limit does.
	Limit uint64
	What  string
	// Used is what counts against the limit now: for RAM, what the
	// kernel does not count as available; for a cgroup's limit, what the
	// cgroup's processes hold, less the file pages the kernel can
	// reclaim; for ulimit -v, the process's whole address space, the Go
	// runtime's reservations (about 1.2 GiB on linux/amd64) included.
	Used uint64
}

// Free is what the limit leaves: Limit less Used, or 0.
func (h Headroom) Free() uint64 {
	if h.Used >= h.Limit {
		return 0
	}
	return h.Limit - h.Used
}

// String says what h is, e.g. "ulimit -v of 2048 MiB, 1335 MiB of it in
// use".
func (h Headroom) String() string {
	if h.Limit == 0 {
		return "no memory limit known"
	}
	return fmt.Sprintf("%s of %d MiB, %d MiB of it in use", h.What, h.Limit>>20, h.Used>>20)
}

// Least returns the limit that leaves this process the least now, of the
// machine's RAM, the memory limits of its cgroup and the cgroups above it,
// and its address-space limit; the zero Headroom where none is known.
func Least() Headroom { return least() }

// ThreadStack is the address space a thread's stack reserves: the soft
// RLIMIT_STACK, which glibc gives each thread it starts (8 MiB where it is
// unlimited or unknown, at least 1 MiB, at most 64 MiB). An address-space
// limit (ulimit -v) counts it whole, however little of it is touched.
func ThreadStack() uint64 { return threadStack() }
