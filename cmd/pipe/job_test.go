package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestTrainingForRanksAlone: a training file for two ranks started without
// an MPI launcher is refused (it would train a model of its own on half the
// data), with exit status 2; pipe bench of it streams rank 0's share.
func TestTrainingForRanksAlone(t *testing.T) {
	f := writePipe(t, strings.Replace(small, "batch 64", "pipeline world=2\nbatch 64", 1)+"train mlp width=8 epochs=1 out="+t.TempDir()+"\n")
	_, errs, code := pipeCmd(t, "run", f)
	if code != 2 || !strings.Contains(errs, "this process was started alone") || !strings.Contains(errs, "mpirun -np 2") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if _, errs, code := pipeCmd(t, "bench", f, "--epochs", "1"); code != 0 {
		t.Errorf("bench: exit %d: %s", code, errs)
	}
}

// TestOnlineCPUs: the machine's online CPUs are at least the ones this
// process may use (shareCores tells a rank bound to cores from one that is
// not by comparing them).
func TestOnlineCPUs(t *testing.T) {
	n := onlineCPUs()
	if n == 0 {
		t.Skip("no /sys/devices/system/cpu/online here")
	}
	if n < runtime.NumCPU() {
		t.Errorf("%d CPUs online, and this process may use %d", n, runtime.NumCPU())
	}
}
