package prefetch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// The embedded PTX must have been generated from normalize.cu as it is now:
// a kernel edited without `go generate ./prefetch` fails here. A test
// binary run outside the source tree (scripts/gpu-check's bundle) has no
// normalize.cu to hash and skips.
func TestPTXMatchesSource(t *testing.T) {
	src, err := os.ReadFile("normalize.cu")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no normalize.cu here: the test binary runs outside the source tree")
	}
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	first, _, _ := strings.Cut(normalizePTX, "\n")
	if want := "// source sha256: " + hex.EncodeToString(sum[:]); first != want {
		t.Fatalf("normalize.ptx is stale: its first line is %q, normalize.cu hashes to %q; run go generate ./prefetch (needs nvcc)", first, want)
	}
	for _, entry := range []string{".entry normalize_f32(", ".entry normalize_f16("} {
		if !strings.Contains(normalizePTX, entry) {
			t.Errorf("normalize.ptx has no %s", entry)
		}
	}
	// The kernel must round the product and the sum apart, as Norm.Value
	// does; a fused multiply-add would give other bits than the CPU device.
	if strings.Contains(normalizePTX, "fma.") {
		t.Error("normalize.ptx fuses a multiply-add")
	}
}
