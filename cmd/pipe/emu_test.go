//go:build cudaemu

package main

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// emuJob is a short training on the devices of its one verb: the batch is
// normalised on the device (prefetch.cu's kernel on a GPU) and split
// across the devices' replicas, whose gradients are averaged (the peer
// all-reduce on GPUs).
const emuJob = `source    synthetic n=256 split=train
shuffle   seed=42
normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25 where=device
batch     64
to_tensor layout=nchw dtype=float32
prefetch  depth=2 devices=%s
train     mlp width=32 epochs=2 lr=0.05 threads=1 out=%s
`

// emuRun runs emuJob on devices and returns its --json epochs and the
// parameters of its checkpoint.
func emuRun(t *testing.T, devices string) ([]map[string]any, [][]float32) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	stdout, errs, code := pipeCmd(t, "run", writePipe(t, fmt.Sprintf(emuJob, devices, out)), "--json")
	if code != 0 {
		t.Fatalf("devices=%s: exit %d: %s", devices, code, errs)
	}
	epochs := jsonLines(t, stdout)
	if len(epochs) != 2 {
		t.Fatalf("devices=%s: %d epochs, want 2:\n%s", devices, len(epochs), stdout)
	}
	return epochs, checkpointParams(t, filepath.Join(out, "checkpoint.gob"))
}

// checkpointParams reads the parameters of the checkpoint at path: the gob
// after trainer's header (magic, version, length, SHA-256).
func checkpointParams(t *testing.T, path string) [][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const header = 8 + 4 + 8 + 32
	if len(b) < header || !bytes.HasPrefix(b, []byte("pipeckpt")) {
		t.Fatalf("%s is no checkpoint", path)
	}
	var c struct{ Params [][]float32 }
	if err := gob.NewDecoder(bytes.NewReader(b[header:])).Decode(&c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c.Params
}

// TestEmulatedGPUsTrainAsCPU: pipe run with devices=all on two emulated
// GPUs trains the model devices=cpu:2 trains. The GPU run repeats bit for
// bit (the same params_hash every epoch, whatever the emulator's thread
// orders and stream delays). Against the CPU it agrees within float32
// rounding, not bit for bit, so params_hash differs: the GPU's matrix
// product keeps each output's whole sum over K in one register of fused
// multiply-adds, where the CPU's (trainer/nn/gemm.go) adds K in blocks of kc
// into C, with FMA or without depending on the CPU. The losses agree to
// 1e-5 and every parameter tensor to 1e-4 of its norm, trainer/gpu's
// tolerances.
func TestEmulatedGPUsTrainAsCPU(t *testing.T) {
	gpu, gp := emuRun(t, "all")
	again, ap := emuRun(t, "all")
	cpu, cp := emuRun(t, "cpu:2")
	for i := range gpu {
		if g, a := gpu[i]["params_hash"], again[i]["params_hash"]; g != a || g == nil {
			t.Errorf("epoch %d: devices=all twice: params_hash %v then %v", i, g, a)
		}
		for _, k := range []string{"steps", "images", "lr"} {
			if fmt.Sprint(gpu[i][k]) != fmt.Sprint(cpu[i][k]) {
				t.Errorf("epoch %d: %s = %v on GPUs, %v on CPUs", i, k, gpu[i][k], cpu[i][k])
			}
		}
		g, _ := gpu[i]["train_loss"].(float64)
		c, _ := cpu[i]["train_loss"].(float64)
		if d := math.Abs(g-c) / math.Abs(c); !(d <= 1e-5) {
			t.Errorf("epoch %d: train_loss %v on GPUs, %v on CPUs: relative difference %.2g, want ≤ 1e-5", i, g, c, d)
		}
		t.Logf("epoch %d: train_loss %v on GPUs, %v on CPUs", i, g, c)
	}
	if gpu[0]["params_hash"] == gpu[1]["params_hash"] {
		t.Error("the second epoch did not change the parameters")
	}
	if len(gp) != len(cp) || len(gp) == 0 {
		t.Fatalf("%d parameter tensors from the GPUs' checkpoint, %d from the CPUs'", len(gp), len(cp))
	}
	worst := 0.0
	for i := range gp {
		if len(gp[i]) != len(cp[i]) {
			t.Fatalf("tensor %d: %d values on GPUs, %d on CPUs", i, len(gp[i]), len(cp[i]))
		}
		var d, n float64
		for j := range gp[i] {
			e := float64(gp[i][j]) - float64(cp[i][j])
			d += e * e
			n += float64(cp[i][j]) * float64(cp[i][j])
			if gp[i][j] != ap[i][j] {
				t.Fatalf("tensor %d value %d: devices=all twice: %v then %v", i, j, gp[i][j], ap[i][j])
			}
		}
		r := math.Sqrt(d / max(n, 1e-30))
		worst = max(worst, r)
		if !(r <= 1e-4) {
			t.Errorf("tensor %d: GPUs vs CPUs: relative difference %.2g, want ≤ 1e-4", i, r)
		}
	}
	t.Logf("parameters: GPUs vs CPUs: worst relative difference %.2g over %d tensors", worst, len(gp))
}

// TestEmulatedDevicesNamed: the text output names the emulated GPUs as
// such, so that an emulated run is never taken for a GPU's.
func TestEmulatedDevicesNamed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	file := writePipe(t, strings.Replace(fmt.Sprintf(emuJob, "all", out), "epochs=2", "epochs=1 steps_per_epoch=1", 1))
	stdout, errs, code := pipeCmd(t, "run", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "(emulated)") {
		t.Errorf("the output does not say the GPUs are emulated:\n%s", stdout)
	}
}
