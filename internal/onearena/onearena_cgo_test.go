//go:build linux && cgo

package onearena

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// TestOneArenaUnderUlimit: under ulimit -v, 40 threads started one from
// another (each locked to a goroutine that waits) add little more than
// their stacks to the address space. Without the one arena, each thread
// that started another took a malloc arena of its own, 64 MiB of address
// space, up to 8 a core.
func TestOneArenaUnderUlimit(t *testing.T) {
	const threads = 40
	var stack syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &stack); err != nil || stack.Cur > 64<<20 {
		stack.Cur = 8 << 20 // glibc's default thread stack, unlimited or not
	}
	if os.Getenv("PIPE_ARENA_CHILD") != "" {
		before := vmSize(t)
		release := make(chan struct{})
		started := make(chan struct{})
		for range threads {
			go func() {
				runtime.LockOSThread()
				started <- struct{}{}
				<-release
			}()
			<-started
		}
		grown := vmSize(t) - before
		close(release)
		if per := stack.Cur + 4<<20; grown > threads*per {
			t.Fatalf("%d threads added %d MiB of address space, over %d MiB each (its stack of %d MiB and 4): each has a malloc arena", threads, grown>>20, per>>20, stack.Cur>>20)
		}
		t.Logf("%d threads added %d MiB of address space", threads, grown>>20)
		return
	}
	cmd := exec.Command("bash", "-c", `ulimit -v 4000000 && exec "$@"`, "bash", os.Args[0], "-test.run=^TestOneArenaUnderUlimit$", "-test.v")
	cmd.Env = append(os.Environ(), "PIPE_ARENA_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// vmSize is the process's address space in bytes.
func vmSize(t *testing.T) uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmSize:\s*(\d+) kB`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmSize in:\n%s", status)
	}
	n, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n << 10
}
