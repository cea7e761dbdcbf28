package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The embedded PTX must have been generated from kernels.cu as it is now: a
// kernel edited without `go generate ./trainer/gpu` fails here, in every
// build. A test binary run outside the source tree (scripts/gpu-check's
// bundle) has no kernels.cu to hash and skips.
func TestPTXMatchesSource(t *testing.T) {
	src, err := os.ReadFile("kernels.cu")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no kernels.cu here: the test binary runs outside the source tree")
	}
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	first, _, _ := strings.Cut(kernelsPTX, "\n")
	if want := "// source sha256: " + hex.EncodeToString(sum[:]); first != want {
		t.Fatalf("kernels.ptx is stale: its first line is %q, kernels.cu hashes to %q; run go generate ./trainer/gpu (needs nvcc)", first, want)
	}
	if !strings.Contains(kernelsPTX, ".target sm_80") {
		t.Error("kernels.ptx does not target compute capability 8.0")
	}
}

// Every kernel the Go side launches is in the PTX, and the reductions use no
// atomics (they would make sums depend on timing).
func TestPTXHasKernels(t *testing.T) {
	for _, name := range kernelNames {
		if !strings.Contains(kernelsPTX, ".entry "+name+"(") {
			t.Errorf("kernels.ptx has no kernel %s", name)
		}
	}
	if regexp.MustCompile(`\batom\.`).MatchString(kernelsPTX) {
		t.Error("kernels.ptx uses atomics")
	}
}

// The element-wise kernels must round each product and sum apart, as the
// CPU trainer's Go does: a fused multiply-add would give other bits.
func TestPTXElementwiseUnfused(t *testing.T) {
	for _, name := range []string{"relu_fwd", "relu_bwd", "add", "mul", "col2im", "maxpool_bwd", "gap_fwd", "gap_bwd",
		"dropout_fwd", "bn_apply", "bn_bwd_apply", "sgd", "adam", "rmsprop", "plane_sums", "cnhw_to_nchw", "bias_rows"} {
		body := entry(kernelsPTX, name)
		if body == "" {
			t.Errorf("no kernel %s", name)
			continue
		}
		if strings.Contains(body, "fma.") {
			t.Errorf("%s fuses a multiply-add", name)
		}
	}
}

// entry returns the PTX of one kernel, from its .entry to its closing
// brace.
func entry(ptx, name string) string {
	i := strings.Index(ptx, ".entry "+name+"(")
	if i < 0 {
		return ""
	}
	j := strings.Index(ptx[i:], "\n}\n")
	if j < 0 {
		return ptx[i:]
	}
	return ptx[i : i+j]
}
