package sysmem

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestLimitSeesUlimit: under ulimit -v, Limit is that limit and says so,
// and Least is what it leaves.
func TestLimitSeesUlimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("limits are read on Linux only")
	}
	if os.Getenv("SYSMEM_CHILD") != "" {
		n, what := Limit()
		if n != 3000000*1024 || what != "ulimit -v" || !strings.Contains(Describe(), "3.1 GB (ulimit -v)") {
			t.Fatalf("under ulimit -v 3000000: %d, %q, %q", n, what, Describe())
		}
		// The address space in use counts: the Go runtime's
		// reservations alone are more than 100 MiB.
		if h := Least(); h.What != "ulimit -v" || h.Limit != n || h.Used < 100<<20 || h.Free() != n-h.Used {
			t.Fatalf("under ulimit -v 3000000, Least is %s (%d free)", h, h.Free())
		}
		return
	}
	n, _ := Limit()
	if n == 0 {
		t.Fatal("no limit known on Linux: the machine's RAM at least")
	}
	sh := "ulimit -v 3000000 && exec " + os.Args[0] + " -test.run '^TestLimitSeesUlimit$'"
	cmd := exec.Command("bash", "-c", sh)
	cmd.Env = append(os.Environ(), "SYSMEM_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
