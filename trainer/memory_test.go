package trainer

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/trainer/nn"
)

// TestModelBeyondMemory: a model whose values would not fit in what the
// process may use is refused by New with the figures, before any of it is
// allocated. A labels file with a label just under source.MaxClasses once
// sized an mlp of 1,048,576 classes, which allocated 4 GiB and died; under
// ulimit -v 3000000 this test would die the same way.
func TestModelBeyondMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memory limits are read on Linux only")
	}
	cfg := Config{Model: nn.ModelSpec{Name: "mlp"}, Input: []int{3, 32, 32}, Classes: 1 << 20, Replicas: 2,
		GlobalBatch: 2, BatchesPerEpoch: 1, LR: 0.1, Optim: nn.OptimConfig{Name: "adam"}}
	if os.Getenv("TRAINER_CHILD") == "" {
		cmd := exec.Command("bash", "-c", "ulimit -v 3000000 && exec "+os.Args[0]+" -test.run '^TestModelBeyondMemory$' -test.v")
		cmd.Env = append(os.Environ(), "TRAINER_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		bytes, params, err := ModelBytes(cfg)
		if err != nil || params != 3072*512+512+512*(1<<20)+(1<<20) || bytes != 2*24*uint64(params) {
			t.Errorf("ModelBytes: %d bytes, %d parameters, %v", bytes, params, err)
		}
		return
	}
	_, err := New(cfg)
	for _, want := range []string{"model mlp width=512 for 1048576 classes", "has 539492864 parameters", "2 replica(s) need 25.9 GB", "adam's state", "3.1 GB (ulimit -v)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("New: %v, want %q in it", err, want)
		}
	}
	cfg.Classes, cfg.Replicas = 10, 1
	if _, err := New(cfg); err != nil {
		t.Fatalf("10 classes: %v", err)
	}
}
