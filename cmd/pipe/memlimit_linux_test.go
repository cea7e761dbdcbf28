//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/jpegtest"
)

// TestBenchUnderMemoryLimit runs pipe bench as a user who caps its memory
// does, on the whole process: under ulimit -v 2 GiB (the Go runtime
// reserves about 1.2 GiB of that before anything runs) and in memory
// cgroups of 700 MiB and of 1200 MiB, where the large images decode one at
// a time. Two workers decode, whole (a flip comes first), a folder of two
// valid progressive 8192×8192 JPEGs (480 MiB each, decoded) and three
// small ones, under on_error=skip, in batches of one, so that the two
// large ones decode at once. Each large one decodes or is skipped as too
// large for the decode budget; the small ones decode; pipe exits 0. Before
// the budget fitted inside the limit, the default 1 GiB let both large
// decodes run at once, and the process ran out of memory (ulimit -v) or
// was killed (the cgroup).
func TestBenchUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 8192x8192 JPEGs for a few seconds")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to start pipe under a limit with")
	}
	dir := filepath.Join(t.TempDir(), "images")
	files := map[string][]byte{
		"big1.jpg": jpegtest.Flat(8192, 8192), "big2.jpg": jpegtest.Flat(8192, 8192),
		"s1.jpg": jpegtest.Flat(300, 200), "s2.jpg": jpegtest.Flat(640, 480), "s3.jpg": jpegtest.Flat(2048, 1536),
	}
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, "a", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := writePipe(t, "source image_folder path="+dir+"\npipeline on_error=skip\ndecode\nflip horizontal\ncenter_crop 64\nbatch 1\nto_tensor layout=nchw dtype=uint8\n")
	bench := []string{os.Args[0], "bench", file, "--epochs", "2", "--workers", "2", "-q"}

	t.Run("ulimit -v 2 GiB", func(t *testing.T) {
		checkBenchUnderLimit(t, exec.Command("bash", append([]string{"-c", `ulimit -v 2097152 && exec "$@"`, "bash"}, bench...)...), false)
	})
	for _, c := range []struct {
		mib    int64
		decode bool // room for a large one: none is skipped
	}{{700, false}, {1200, true}} {
		t.Run(fmt.Sprintf("cgroup of %d MiB", c.mib), func(t *testing.T) {
			cg, err := memoryCgroup(t, c.mib<<20)
			if err != nil {
				t.Skipf("no memory cgroup can be made here: %v", err)
			}
			checkBenchUnderLimit(t, exec.Command("bash", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg, "cgroup.procs")}, bench...)...), c.decode)
		})
	}
}

// checkBenchUnderLimit runs cmd, a pipe bench of TestBenchUnderMemoryLimit's
// folder under a limit, and checks what it did; decode says the large
// images must decode.
func checkBenchUnderLimit(t *testing.T, cmd *exec.Cmd, decode bool) {
	t.Helper()
	// GOMAXPROCS of the 2 workers and one more, whatever the machine: at
	// one per core, a many-core machine's garbage collector starts a
	// thread per core, each reserving an 8 MiB stack that ulimit -v
	// counts and the decode budget, sized as pipe starts, does not.
	cmd.Env = append(os.Environ(), "PIPE_AS_COMMAND=1", "PIPE_DECODE_MEMORY=", "GOMAXPROCS=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	text := string(out)
	total := regexp.MustCompile(`(?m)^total +(\d+) images`).FindStringSubmatch(text)
	skipped := regexp.MustCompile(`(?m)^  .*\.jpg: .*`).FindAllString(text, -1)
	if total == nil || fmt.Sprint(10-len(skipped)) != total[1] {
		t.Fatalf("want 10 images over 2 epochs, less those skipped:\n%s", text)
	}
	if decode && len(skipped) > 0 {
		t.Errorf("%d skipped where the limit leaves room for one large image at a time", len(skipped))
	}
	for _, s := range skipped {
		if !strings.Contains(s, "/big") || !strings.Contains(s, "too large for the decode memory budget") {
			t.Errorf("skipped: %s", s)
		}
	}
	budget := regexp.MustCompile(`(?m)^memory +.*`).FindString(text)
	t.Logf("%s; %s images, %d skipped", budget, total[1], len(skipped))
}

// memoryCgroup makes a memory cgroup of limit bytes, without swap, inside
// this process's own (so that whatever bounds this process bounds it too),
// removed when the test ends: under cgroup v2 where this process's cgroup
// hands its children the memory controller, else under v1's.
func memoryCgroup(t *testing.T, limit int64) (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var dir string
	var files [2]string
	for _, line := range strings.Split(string(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			parent := filepath.Join("/sys/fs/cgroup", parts[2])
			delegated, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			if slices.Contains(strings.Fields(string(delegated)), "memory") {
				dir, files = parent, [2]string{"memory.max", "memory.swap.max"}
				break
			}
		} else if slices.Contains(strings.Split(parts[1], ","), "memory") {
			dir, files = filepath.Join("/sys/fs/cgroup/memory", parts[2]), [2]string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
		}
	}
	if dir == "" {
		return "", fmt.Errorf("no memory controller for this process's cgroup in:\n%s", self)
	}
	dir = filepath.Join(dir, fmt.Sprintf("pipe-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, files[0]), []byte(fmt.Sprint(limit)), 0o644); err != nil {
		return "", err
	}
	swap := fmt.Sprint(limit) // v1: memory and swap together
	if files[1] == "memory.swap.max" {
		swap = "0"
	}
	if _, err := os.Stat(filepath.Join(dir, files[1])); err == nil {
		if err := os.WriteFile(filepath.Join(dir, files[1]), []byte(swap), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
