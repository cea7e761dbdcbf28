//go:build linux

package transform

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pipefeed/pipe/internal/jpegtest"
)

// memTestWorkers decode at once in TestDecodeMemoryUnderAddressLimit.
const memTestWorkers = 4

// TestDecodeMemoryUnderAddressLimit caps the whole process as a user does,
// with ulimit -v, and has memTestWorkers workers decode a valid 394 KB
// progressive 8192×8192 JPEG (the largest the default max_pixels allows:
// 480 MiB decoded whole, 208 MiB through random_resized_crop), a 171-byte
// one whose header claims as much, and small images. The Go runtime alone
// reserves about 1.2 GiB of address space, so under the audit's 2 GiB the
// default budget of 1 GiB does not fit: two whole decodes at once ran the
// process out of memory. Now the budget is at most half of what the limit
// leaves, and each large decode either decodes or is refused with
// ErrOverBudget; the process never dies, small images decode, and under a
// limit with room (4 GiB) nothing is refused.
func TestDecodeMemoryUnderAddressLimit(t *testing.T) {
	if os.Getenv("PIPE_MEMTEST_CHILD") != "" {
		memTestChild(t)
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
	for _, c := range []struct {
		kib         int
		budget      string // PIPE_DECODE_MEMORY
		noneRefused bool
	}{
		{2 << 20, "", false},
		{2 << 20, "512M", false},
		{4 << 20, "", true},
	} {
		t.Run(fmt.Sprintf("ulimit -v %d PIPE_DECODE_MEMORY=%s", c.kib, c.budget), func(t *testing.T) {
			cmd := exec.Command("bash", "-c", fmt.Sprintf(`ulimit -v %d && exec "$@"`, c.kib), "bash",
				os.Args[0], "-test.run=^TestDecodeMemoryUnderAddressLimit$", "-test.count=1", "-test.v")
			// GOMAXPROCS as pipe sets it for memTestWorkers workers
			// decoding through libjpeg (Summary.Procs: one more than the
			// workers): left to the machine's cores, a many-core machine
			// starts a thread per core for the garbage collector, each
			// reserving its 8 MiB stack, which the limit counts.
			cmd.Env = append(os.Environ(), "PIPE_MEMTEST_CHILD=1", "PIPE_DECODE_MEMORY="+c.budget, fmt.Sprintf("GOMAXPROCS=%d", memTestWorkers+1))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%d workers decoding 8192x8192 JPEGs under ulimit -v %d: %v\n%s", memTestWorkers, c.kib, err, out)
			}
			i := bytes.Index(out, []byte("budget "))
			if i < 0 {
				t.Fatalf("no report from the child:\n%s", out)
			}
			report, _, _ := strings.Cut(string(out[i:]), "\n")
			t.Log(report)
			if !c.noneRefused && !strings.Contains(report, "for its threads' stacks") {
				t.Errorf("under ulimit -v %d the budget set nothing aside for the threads' stacks: %s", c.kib, report)
			}
			if c.noneRefused && !strings.Contains(report, " 0 refused") {
				t.Errorf("under ulimit -v %d a large image was refused", c.kib)
			}
		})
	}
}

// memTestChild decodes on memTestWorkers workers at once, each through
// center_crop (a whole decode) and random_resized_crop (a decode at a
// reduced scale), releasing after each as a pipeline's workers do after
// each chunk: the large JPEG, which decodes to flat grey or is refused
// with ErrOverBudget; the 171-byte file, which is ErrDecode; and small
// JPEGs (one whose window takes the budget's memory), which decode. Then
// it prints the budget, what was refused and its VmPeak.
func memTestChild(t *testing.T) {
	big, bad := jpegtest.Flat(8192, 8192), greyJPEG(false, 8192, 8192, 35, true)
	small := [][]byte{jpegtest.Flat(300, 200), jpegtest.Flat(2048, 2048)}
	cc, err := CenterCrop(64)
	if err != nil {
		t.Fatal(err)
	}
	rrc, err := RandomResizedCrop(64, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	if err != nil {
		t.Fatal(err)
	}
	var decoded, refused atomic.Int64
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
				r := NewRand(1, i, int64(w))
				out, err := chain.ApplyEncoded(d, big, r)
				switch {
				case errors.Is(err, ErrOverBudget):
					refused.Add(1)
				case err != nil:
					t.Errorf("worker %d, %s: %v", w, op.Name(), err)
				case out.Shape() != (Shape{3, 64, 64}) || bytes.Count(out.Pix, []byte{128}) != len(out.Pix):
					t.Errorf("worker %d, %s: decoded to %s, not flat grey", w, op.Name(), out.Shape())
				default:
					decoded.Add(1)
				}
				d.Release()
				if _, err := chain.ApplyEncoded(d, bad, r); !errors.Is(err, ErrDecode) || errors.Is(err, ErrOverBudget) {
					t.Errorf("worker %d, %s: the 171-byte file: %v", w, op.Name(), err)
				}
				for _, s := range small {
					if out, err := chain.ApplyEncoded(d, s, r); err != nil || out.Shape() != (Shape{3, 64, 64}) {
						t.Errorf("worker %d, %s: a small JPEG: %v", w, op.Name(), err)
					}
					d.Release()
				}
			}
		})
	}
	wg.Wait()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(status, []byte("VmPeak:"))
	peak, _, _ := strings.Cut(string(status[i+len("VmPeak:"):]), "\n")
	fmt.Printf("budget %s: %d large decodes, %d refused; VmPeak %s\n", DescribeDecodeMemory(), decoded.Load(), refused.Load(), strings.TrimSpace(peak))
}
