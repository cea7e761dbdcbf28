package sysmem

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

func limit() (uint64, string) {
	var best uint64
	var what string
	take := func(n uint64, w string) {
		if n > 0 && (best == 0 || n < best) {
			best, what = n, w
		}
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		take(uint64(si.Totalram)*uint64(si.Unit), "RAM")
	}
	take(cgroupLimit(), "the cgroup's memory limit")
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != ^uint64(0) {
		take(rl.Cur, "ulimit -v")
	}
	return best, what
}

// cgroupLimit reads the memory limit of this process's cgroup: memory.max
// under cgroup v2, memory.limit_in_bytes under v1; 0 for none.
func cgroupLimit() uint64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = "/sys/fs/cgroup" + parts[2] + "/memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			file = "/sys/fs/cgroup/memory" + parts[2] + "/memory.limit_in_bytes"
		default:
			continue
		}
		v, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(v)), 10, 64)
		// "max", or v1's page-rounded 2^63 for none.
		if err == nil && n < 1<<62 {
			return n
		}
	}
	return 0
}
