// Package sysmem says how much memory this process may use, for the checks
// that refuse, with the figures, what cannot fit (slabs, a model's
// parameters) before allocating it.
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
