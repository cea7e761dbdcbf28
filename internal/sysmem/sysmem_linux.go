package sysmem

import (
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

const cgroupWhat = "the cgroup's memory limit"

func limit() (uint64, string) {
	var best Headroom
	for _, h := range headrooms() {
		if best.Limit == 0 || h.Limit < best.Limit {
			best = h
		}
	}
	return best.Limit, best.What
}

func least() Headroom {
	var best Headroom
	for _, h := range headrooms() {
		if best.Limit == 0 || h.Free() < best.Free() {
			best = h
		}
	}
	return best
}

// headrooms is every limit on the process's memory, with what each
// holds: RAM (MemTotal, the kernel's total RAM), each cgroup's, and
// ulimit -v.
func headrooms() []Headroom {
	var hs []Headroom
	if m := readKeyed("/proc/meminfo"); m["MemTotal:"] > 0 {
		total, avail := m["MemTotal:"]<<10, m["MemAvailable:"]<<10
		hs = append(hs, Headroom{Limit: total, What: "RAM", Used: total - min(avail, total)})
	}
	hs = append(hs, cgroupLimits()...)
	if n := addressLimit(); n > 0 {
		hs = append(hs, Headroom{Limit: n, What: "ulimit -v", Used: readKeyed("/proc/self/status")["VmSize:"] << 10})
	}
	return hs
}

// addressLimit is the soft RLIMIT_AS (ulimit -v) in bytes, 0 for none.
func addressLimit() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) != nil || rl.Cur == ^uint64(0) {
		return 0
	}
	return rl.Cur
}

// cgroupLimits reads the memory limits of this process's cgroup and of
// the cgroups above it (each binds it), with what each holds.
func cgroupLimits() []Headroom {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var hs []Headroom
	for _, dir := range cgroupDirs(string(self), string(mounts)) {
		if h, ok := dir.read(); ok {
			hs = append(hs, h)
		}
	}
	return hs
}

// A cgroupDir is the directory of a memory cgroup, under cgroup v2 or v1.
type cgroupDir struct {
	path string
	v2   bool
}

// cgroupDirs returns the directories of the memory cgroups of the process
// whose /proc/PID/cgroup and /proc/PID/mountinfo are given: its own and
// each above it, up to the hierarchy's mount point, for cgroup v2 and for
// v1's memory controller, whichever are mounted. A hierarchy mounted from
// a cgroup below its root (a container's, without a cgroup namespace) is
// walked from there.
func cgroupDirs(self, mountinfo string) []cgroupDir {
	type mount struct{ root, point string }
	var v2, v1 *mount
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := &mount{f[3], f[4]}
		switch {
		case g[0] == "cgroup2" && v2 == nil:
			v2 = m
		case g[0] == "cgroup" && v1 == nil && strings.Contains(","+g[2]+",", ",memory,"):
			v1 = m
		}
	}
	var dirs []cgroupDir
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var m *mount
		switch {
		case parts[0] == "0" && parts[1] == "":
			m = v2
		case strings.Contains(","+parts[1]+",", ",memory,"):
			m = v1
		}
		if m == nil {
			continue
		}
		rel := parts[2]
		if m.root != "/" {
			r, ok := strings.CutPrefix(rel, m.root)
			if !ok || r != "" && r[0] != '/' {
				continue
			}
			rel = r
		}
		for d := path.Join(m.point, rel); ; d = path.Dir(d) {
			dirs = append(dirs, cgroupDir{d, m == v2})
			if len(d) <= len(m.point) {
				break
			}
		}
	}
	return dirs
}

// read reads the cgroup's memory limit and what it holds, less the file
// pages it can reclaim (not shared memory: tmpfs and shm pages are on the
// anonymous lists); ok is false where it has no limit.
func (c cgroupDir) read() (h Headroom, ok bool) {
	limit, usage, active, inactive := "memory.max", "memory.current", "active_file", "inactive_file"
	if !c.v2 {
		limit, usage, active, inactive = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_active_file", "total_inactive_file"
	}
	n, err := readUint(path.Join(c.path, limit))
	// "max", or v1's page-rounded 2^63 for none.
	if err != nil || n == 0 || n >= 1<<62 {
		return Headroom{}, false
	}
	used, _ := readUint(path.Join(c.path, usage))
	stat := readKeyed(path.Join(c.path, "memory.stat"))
	used -= min(used, stat[active]+stat[inactive])
	return Headroom{Limit: n, What: cgroupWhat, Used: used}, true
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyed reads a file of "key value" lines (/proc/meminfo, memory.stat)
// into a map from each key to its first number.
func readKeyed(file string) map[string]uint64 {
	b, _ := os.ReadFile(file)
	m := make(map[string]uint64)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				m[f[0]] = n
			}
		}
	}
	return m
}

func threadStack() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err != nil || rl.Cur == 0 || rl.Cur >= 64<<20 {
		return 8 << 20
	}
	return max(rl.Cur, 1<<20)
}
