package sysmem

import (
	"slices"
	"testing"
)

// TestCgroupDirs: the memory cgroups of a process, its own and those above
// it, under cgroup v2, v1's memory controller, or both (a hybrid host, as
// in CI), mounted whole or from a container's cgroup.
func TestCgroupDirs(t *testing.T) {
	for _, c := range []struct {
		name, self, mountinfo string
		want                  []cgroupDir
	}{
		{"v2", "0::/user.slice/job.scope\n",
			"25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			[]cgroupDir{{"/sys/fs/cgroup/user.slice/job.scope", true}, {"/sys/fs/cgroup/user.slice", true}, {"/sys/fs/cgroup", true}}},
		{"v2 in a cgroup namespace", "0::/\n",
			"25 1 0:22 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
			[]cgroupDir{{"/sys/fs/cgroup", true}}},
		{"hybrid", "4:memory:/process_api/abc\n1:cpu:/\n0::/\n",
			"31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			[]cgroupDir{{"/sys/fs/cgroup/memory/process_api/abc", false}, {"/sys/fs/cgroup/memory/process_api", false}, {"/sys/fs/cgroup/memory", false}, {"/sys/fs/cgroup/unified", true}}},
		{"v1 mounted from a container's cgroup", "9:memory,cpu:/docker/abc\n",
			"40 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,cpu,memory\n",
			[]cgroupDir{{"/sys/fs/cgroup/memory", false}}},
		{"a cgroup outside the mount", "0::/other\n",
			"25 1 0:22 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
			nil},
	} {
		if got := cgroupDirs(c.self, c.mountinfo); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
