//go:build mpi

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run this test binary as the pipe command (TestMain) under
// mpirun, in the build with -tags mpi; they skip where mpirun is missing
// (scripts/openmpi installs it).

// trainJob is a short training whose devices, threads and out directory
// come from the environment, so that one file runs as one process with
// devices=cpu:2 and as two ranks of devices=cpu:1 (one thread a replica in
// both: a replica's sums depend on its thread count).
const trainJob = `source synthetic n=%d
shuffle seed=9
random_crop size=32 pad=4 fill=reflect
flip horizontal
normalize mean=0.5 std=0.25
batch 64
to_tensor layout=nchw dtype=float32
prefetch devices=cpu:${DEVICES}
train %s epochs=%d lr=0.1 schedule=cosine threads=${THREADS} log_every=2 out=${OUT}
eval split=test batch=100
`

// mpirun starts np ranks of pipe with args and env added, its output going
// to stdout and stderr (nil: kept and returned).
func mpirun(t *testing.T, ctx context.Context, np int, env []string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (scripts/openmpi installs Open MPI)")
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--oversubscribe", "-np", strconv.Itoa(np), os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "PIPE_AS_COMMAND=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.Env = append(cmd.Env, env...)
	// At the deadline mpirun is asked to stop its ranks (SIGTERM), which
	// a SIGKILL of mpirun would leave running.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// single runs the file as one process with devices=cpu:2 and returns its
// --json epochs.
func single(t *testing.T, file, out string, args ...string) []map[string]any {
	t.Helper()
	t.Setenv("DEVICES", "2")
	t.Setenv("THREADS", "2")
	t.Setenv("OUT", out)
	stdout, errs, code := pipeCmd(t, append([]string{"run", file, "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("one process: exit %d: %s", code, errs)
	}
	return jsonLines(t, stdout)
}

// job is the environment of two ranks of one device and one thread each.
func jobEnv(out string) []string { return []string{"DEVICES=1", "THREADS=1", "OUT=" + out} }

// sameEpoch compares two runs' reports of an epoch, times aside.
func sameEpoch(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for _, k := range []string{"epoch", "steps", "images", "train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr", "params_hash"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("%s: epoch %v: %s = %v, want %v", what, want["epoch"], k, got[k], want[k])
		}
	}
}

// TestMPIRunEqualsDevices: mpirun -np 2 pipe run trains, bit for bit, the
// model one process with devices=cpu:2 trains: the same params_hash and
// figures every epoch, in --json, metrics.jsonl and steps.jsonl; rank 0
// alone prints and writes; the text output says how the batch is split.
func TestMPIRunEqualsDevices(t *testing.T) {
	dir := t.TempDir()
	file := writePipe(t, fmt.Sprintf(trainJob, 512, "resnet depth=8 width=4", 3))
	want := single(t, file, dir+"/one")

	cmd := mpirun(t, context.Background(), 2, jobEnv(dir+"/job"), "run", file, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun: %v\n%s", err, stderr.String())
	}
	got := jsonLines(t, stdout.String())
	if len(got) != len(want) || len(want) != 3 {
		t.Fatalf("%d epochs from mpirun (rank 0 alone prints), %d from one process, want 3", len(got), len(want))
	}
	for i := range want {
		sameEpoch(t, "mpirun -np 2 vs devices=cpu:2", got[i], want[i])
		if _, ok := got[i]["allreduce_seconds"]; !ok {
			t.Errorf("epoch %d lacks allreduce_seconds: %v", i, got[i])
		}
	}
	if want[0]["params_hash"] == want[1]["params_hash"] {
		t.Error("the epochs did not change the parameters")
	}
	for _, name := range []string{"metrics.jsonl", "steps.jsonl"} {
		a, _ := os.ReadFile(filepath.Join(dir, "one", name))
		b, _ := os.ReadFile(filepath.Join(dir, "job", name))
		al, bl := jsonLines(t, string(a)), jsonLines(t, string(b))
		if len(al) != len(bl) || len(al) == 0 {
			t.Fatalf("%s: %d lines from one process, %d from the job", name, len(al), len(bl))
		}
		for i := range al {
			for _, k := range []string{"step", "loss", "accuracy", "lr", "train_loss", "test_loss", "params_hash"} {
				if fmt.Sprint(al[i][k]) != fmt.Sprint(bl[i][k]) {
					t.Errorf("%s line %d: %s = %v from the job, %v from one process", name, i, k, bl[i][k], al[i][k])
				}
			}
		}
	}

	cmd = mpirun(t, context.Background(), 2, jobEnv(dir+"/text"), "run", file)
	out, err := cmd.CombinedOutput()
	for _, w := range []string{"per-device 32 × 1 devices × 2 ranks = global 64", "ranks    2, started by mpirun (Open MPI",
		"reduce   gradient all-reduce", "trained  3 epochs"} {
		if err != nil || !strings.Contains(string(out), w) {
			t.Errorf("mpirun run: %v: the output lacks %q:\n%s", err, w, out)
		}
	}
	if n := strings.Count(string(out), "trained  3 epochs"); n != 1 {
		t.Errorf("%d ranks printed the summary, want rank 0 alone", n)
	}
}

// startJob starts a long training under mpirun (its ranks' process ids
// written into a directory) and returns it once rank 0 has reported an
// epoch: the command, its end (Wait's error), the ranks' process ids and
// its output.
func startJob(t *testing.T, ctx context.Context, file, out string, args ...string) (*exec.Cmd, chan error, []int, *lines) {
	t.Helper()
	pids := t.TempDir()
	cmd := mpirun(t, ctx, 2, append(jobEnv(out), "PIPE_TEST_PIDDIR="+pids), append([]string{"run", file, "--json"}, args...)...)
	output := &lines{first: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-output.first:
	case err := <-done:
		t.Fatalf("the job ended before its first epoch: %v\n%s", err, output)
	}
	var ranks []int
	for r := range 2 {
		b, err := os.ReadFile(filepath.Join(pids, fmt.Sprintf("rank%d", r)))
		pid, _ := strconv.Atoi(string(b))
		if err != nil || pid == 0 {
			t.Fatalf("rank %d's process id: %v", r, err)
		}
		ranks = append(ranks, pid)
	}
	return cmd, done, ranks, output
}

// lines is a job's output, written from two goroutines; first is closed
// when an epoch's JSON object arrives.
type lines struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first chan struct{}
	once  sync.Once
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(p, []byte(`"epoch":`)) {
		l.once.Do(func() { close(l.first) })
	}
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMPIDeadOrHungRankStopsTheJob: a rank killed mid-training (SIGKILL)
// or stopped (SIGSTOP: alive to the launcher, silent to the others) stops
// the whole job within seconds, with an error that names the rank; nothing
// hangs (the test's deadline).
func TestMPIDeadOrHungRankStopsTheJob(t *testing.T) {
	file := writePipe(t, fmt.Sprintf(trainJob, 512, "resnet depth=8 width=4", 100))
	for _, c := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGKILL, "rank 1 with PID"},                             // mpirun: "process rank 1 with PID … exited on signal 9"
		{syscall.SIGSTOP, "pipe: rank 0: mpi: rank 1 sent no heartbeat"}, // rank 0's heartbeat
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, done, ranks, output := startJob(t, ctx, file, t.TempDir(), "--rank-timeout", "3s")
			defer syscall.Kill(ranks[1], syscall.SIGKILL)
			start := time.Now()
			syscall.Kill(ranks[1], c.sig)
			err := <-done
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("the job still ran %s after rank 1 got %v:\n%s", took, c.sig, output.String())
			}
			if err == nil || took > 20*time.Second || !strings.Contains(output.String(), c.want) {
				t.Errorf("after %v to rank 1: exit %v in %s; want an error naming rank 1 (%q) within 20 s:\n%s",
					c.sig, err, took.Round(time.Millisecond), c.want, output.String())
			}
			t.Logf("%v: the job stopped in %.1f s", c.sig, took.Seconds())
		})
	}
}

// TestMPIResumeContinuesExactly: a job stopped by a signal (mpirun hands it
// to every rank; they stop after the same step, and rank 0 writes the
// checkpoint) and resumed with mpirun … --resume, every rank from rank 0's
// checkpoint, ends with the parameters and figures of an uninterrupted run
// (mlp: a stop in the middle of an epoch keeps no batch-norm statistics).
func TestMPIResumeContinuesExactly(t *testing.T) {
	dir := t.TempDir()
	file := writePipe(t, fmt.Sprintf(trainJob, 2048, "mlp width=64", 12))
	want := single(t, file, dir+"/one")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd, done, _, output := startJob(t, ctx, file, dir+"/job")
	cmd.Process.Signal(syscall.SIGINT)
	if err := <-done; err == nil {
		t.Fatalf("the job ran to its end before the signal stopped it:\n%s", output.String())
	}
	ck, err := os.Stat(filepath.Join(dir, "job", "checkpoint.gob"))
	if err != nil {
		t.Fatalf("no checkpoint after the stop: %v\n%s", err, output.String())
	}

	cmd = mpirun(t, ctx, 2, jobEnv(dir+"/job"), "run", file, "--json", "--resume")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun --resume: %v\n%s", err, stderr.String())
	}
	got := jsonLines(t, stdout.String())
	if len(got) == 0 || len(got) == len(want) {
		t.Fatalf("resumed with %d epochs to go of %d (checkpoint of %d bytes)", len(got), len(want), ck.Size())
	}
	for _, e := range got {
		sameEpoch(t, "stopped and resumed job vs one uninterrupted process", e, want[int(e["epoch"].(float64))])
	}
	t.Logf("resumed at epoch %v", got[0]["epoch"])
}

// TestMPIResumeOnOtherRanks: an elastic job (pipeline elastic=true) of 2
// ranks stopped mid-run resumes as one process at the exact next global
// batch, and ends with the parameters (params_hash) and figures of one
// process trained all the way: with 2 devices (the same 2 replicas) and
// with 1 (one replica: its gradient is summed in one place rather than two;
// the float64 sums of the float32 16-sample partial gradients are exact at
// these magnitudes, so they round to the same float32 gradient; a model
// with batch norm would differ, each replica normalising with its own
// slice's statistics).
func TestMPIResumeOnOtherRanks(t *testing.T) {
	dir := t.TempDir()
	file := writePipe(t, strings.Replace(fmt.Sprintf(trainJob, 2048, "mlp width=64", 8), "batch 64", "pipeline elastic=true\nbatch 64", 1))
	for _, devices := range []string{"2", "1"} {
		t.Run("devices="+devices, func(t *testing.T) {
			t.Setenv("DEVICES", devices)
			t.Setenv("THREADS", devices)
			t.Setenv("OUT", dir+"/one"+devices)
			stdout, errs, code := pipeCmd(t, "run", file, "--json")
			if code != 0 {
				t.Fatalf("one process: exit %d: %s", code, errs)
			}
			want := jsonLines(t, stdout)

			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			out := dir + "/job" + devices
			cmd, done, _, output := startJob(t, ctx, file, out)
			cmd.Process.Signal(syscall.SIGINT)
			if err := <-done; err == nil {
				t.Fatalf("the job ran to its end before the signal stopped it:\n%s", output.String())
			}
			t.Setenv("OUT", out)
			stdout, errs, code = pipeCmd(t, "run", file, "--json", "--resume")
			if code != 0 {
				t.Fatalf("resumed as one process: exit %d: %s", code, errs)
			}
			got := jsonLines(t, stdout)
			if len(got) == 0 || len(got) == len(want) {
				t.Fatalf("resumed with %d epochs to go of %d", len(got), len(want))
			}
			for _, e := range got {
				sameEpoch(t, "2 ranks resumed as 1 process of "+devices+" device(s) vs 1 process all the way", e, want[int(e["epoch"].(float64))])
			}
			t.Logf("resumed at epoch %v", got[0]["epoch"])
		})
	}
}
