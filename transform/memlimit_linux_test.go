//go:build linux

package transform

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// memTestWorkers decode at once in TestDecodeMemoryUnderAddressLimit, and
// memTestBudget is the budget they share.
const (
	memTestWorkers = 4
	memTestBudget  = 512 << 20
)

// TestDecodeMemoryUnderAddressLimit checks the process-wide bound on
// decoding memory (SetDecodeMemory) the way issue 24 broke it: workers
// each decoding 8192×8192 JPEGs (the largest the default max_pixels
// allows: a valid 394 KB progressive one, which takes 480 MiB decoded
// whole and 208 MiB through random_resized_crop, and a 171-byte one whose
// header claims as much) under an address-space limit (ulimit -v). The
// test runs this test binary twice: once to measure the address space the
// runtime, the workers' threads and small decodes take (VmPeak), then
// under a limit of that plus the documented bound (the budget, 512 MiB
// here, and 16 MiB a worker) and 256 MiB of slack (the Go heap's own:
// freed spans too small for the next large buffer). Before the bound the
// workers held up to 480 MiB each, and the run died out of memory.
func TestDecodeMemoryUnderAddressLimit(t *testing.T) {
	switch os.Getenv("PIPE_MEMTEST_CHILD") {
	case "probe":
		// Images large enough that the workers sit in the decoder
		// together, as they will with the large ones: in the jpegturbo
		// build each then has a thread of its own (its stack and C
		// heap), which the address space must hold as well.
		memTestChild(t, flatJPEG(2048, 2048), nil)
		return
	case "decode":
		memTestChild(t, flatJPEG(8192, 8192), greyJPEG(false, 8192, 8192, 35, true))
		return
	}
	if testing.Short() {
		t.Skip("decodes 8192x8192 JPEGs for a few seconds")
	}
	if underRace {
		t.Skip("the race detector's shadow memory takes terabytes of address space")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to set ulimit -v with")
	}
	probe, err := memTestRun("probe", 0)
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, probe)
	}
	base := vmPeak(t, probe)
	limit := base + (memTestBudget+memTestWorkers*2*ownBytes+256<<20)>>10
	out, err := memTestRun("decode", limit)
	if err != nil {
		t.Fatalf("%d workers decoding 8192x8192 JPEGs under ulimit -v %d (%d KiB for the runtime and threads, plus the bound): %v\n%s",
			memTestWorkers, limit, base, err, out)
	}
	t.Logf("under ulimit -v %d KiB: VmPeak %d KiB (%d KiB before decoding large images)", limit, vmPeak(t, out), base)
}

// memTestRun runs this test binary as a memTestChild of the kind given,
// under ulimit -v limit KiB unless limit is 0, with the test's budget.
func memTestRun(kind string, limit int64) ([]byte, error) {
	script := `exec "$@"`
	if limit > 0 {
		script = "ulimit -v " + strconv.FormatInt(limit, 10) + " && " + script
	}
	cmd := exec.Command("bash", "-c", script, "bash", os.Args[0], "-test.run=^TestDecodeMemoryUnderAddressLimit$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "PIPE_MEMTEST_CHILD="+kind, fmt.Sprintf("PIPE_DECODE_MEMORY=%d", memTestBudget))
	return cmd.CombinedOutput()
}

// memTestChild decodes big, and refuses bad, on memTestWorkers workers at
// once, each through center_crop (a whole decode) and through
// random_resized_crop (a decode at a reduced scale), releasing after each
// as a pipeline's workers do after each chunk; then it prints its VmPeak.
func memTestChild(t *testing.T, big, bad []byte) {
	if got := DecodeMemory(); got != memTestBudget {
		t.Fatalf("PIPE_DECODE_MEMORY gave a budget of %d", got)
	}
	cc, err := CenterCrop(64)
	if err != nil {
		t.Fatal(err)
	}
	rrc, err := RandomResizedCrop(64, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range memTestWorkers {
		wg.Go(func() {
			d := NewDecoder(true)
			ops := []Op{cc, rrc}
			if w%2 == 1 {
				ops = []Op{rrc, cc}
			}
			for i, op := range ops {
				chain := NewChain([]Op{op})
				out, err := chain.ApplyEncoded(d, big, NewRand(1, i, int64(w)))
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if out.Shape() != (Shape{3, 64, 64}) || bytes.Count(out.Pix, []byte{128}) != len(out.Pix) {
					t.Errorf("worker %d: decoded to %s, not flat grey", w, out.Shape())
				}
				d.Release()
				if bad != nil {
					if _, err := chain.ApplyEncoded(d, bad, NewRand(1, i, int64(w))); !errors.Is(err, ErrDecode) {
						t.Errorf("worker %d: the 171-byte file: %v", w, err)
					}
				}
			}
		})
	}
	wg.Wait()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("vmpeak %s\n", regexp.MustCompile(`VmPeak:\s*(\d+) kB`).FindSubmatch(status)[1])
}

// vmPeak reads a child's VmPeak, in KiB, from its output.
func vmPeak(t *testing.T, out []byte) int64 {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "vmpeak "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no vmpeak line in:\n%s", out)
	return 0
}
