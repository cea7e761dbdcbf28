//go:build mpi

package mpi

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run this test binary under mpirun: a test named TestRank…
// does its work only in a rank (PIPE_MPI_RANK_TEST=1), where it calls Init.

// mpirun runs this test binary's test as a job of np ranks, with env added,
// and returns its output and error, or skips when mpirun is missing.
func mpirun(t *testing.T, ctx context.Context, np int, test string, env ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (scripts/openmpi installs it)")
	}
	cmd := exec.CommandContext(ctx, bin, "--oversubscribe", "-np", fmt.Sprint(np), os.Args[0], "-test.run", "^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), "PIPE_MPI_RANK_TEST=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func inRank(t *testing.T) *Comm {
	t.Helper()
	if os.Getenv("PIPE_MPI_RANK_TEST") != "1" {
		t.Skip("runs as a rank under mpirun (TestCollectives starts it)")
	}
	c, err := Init(Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCollectives: three ranks of two replicas each all-reduce to exactly
// the mean one process takes over the six replicas in order (float64 and
// float32, lengths that do not divide by three, shorter than three, and
// one replica a rank), and gather, broadcast and barrier work.
func TestCollectives(t *testing.T) {
	out, err := mpirun(t, context.Background(), 3, "TestRankCollectives")
	if err != nil || strings.Count(out, "--- PASS: TestRankCollectives") != 3 {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
}

// value is replica g's element i: values of many magnitudes, so that the
// order of the sum shows in its rounding.
func value(g, i int) float64 {
	return math.Sin(float64(g*7919+i)) * math.Pow(10, float64((g*31+i)%9-4))
}

func TestRankCollectives(t *testing.T) {
	c := inRank(t)
	defer c.Close()
	if c.Size() != 3 || c.LocalSize() != 3 || c.LocalRank() != c.Rank() || !strings.Contains(c.Library(), "Open MPI") {
		t.Fatalf("rank %d of %d, local %d of %d, %q", c.Rank(), c.Size(), c.LocalRank(), c.LocalSize(), c.Library())
	}
	for _, n := range []int{1001, 2, 0} {
		for _, d := range []int{2, 1} {
			all := 3 * d
			want64, want32 := make([]float64, n), make([]float32, n)
			for i := range n {
				s, s32 := value(0, i), float32(value(0, i))
				for g := 1; g < all; g++ {
					s += value(g, i)
					s32 += float32(value(g, i))
				}
				want64[i], want32[i] = s*(1/float64(all)), s32*(1/float32(all))
			}
			b64, b32 := make([][]float64, d), make([][]float32, d)
			for k := range d {
				b64[k], b32[k] = make([]float64, n), make([]float32, n)
				for i := range n {
					b64[k][i] = value(c.Rank()*d+k, i)
					b32[k][i] = float32(b64[k][i])
				}
			}
			if err := c.AllReduce64(b64); err != nil {
				t.Fatal(err)
			}
			if err := c.AllReduce(b32); err != nil {
				t.Fatal(err)
			}
			for k := range d {
				if !slices.Equal(b64[k], want64) || !slices.Equal(b32[k], want32) {
					t.Errorf("n=%d, %d replicas a rank: replica %d's mean differs from one process's", n, d, k)
				}
			}
		}
	}
	got, err := c.AllGather64([]float64{float64(c.Rank()), 10})
	if err != nil || !slices.Equal(got, []float64{0, 10, 1, 10, 2, 10}) {
		t.Errorf("AllGather64: %v, %v", got, err)
	}
	var mine []byte
	if c.Rank() == 1 {
		mine = bytes.Repeat([]byte("pipe"), 1000)
	}
	if b, err := c.Broadcast(mine, 1); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("pipe"), 1000)) {
		t.Errorf("Broadcast: %d bytes, %v", len(b), err)
	}
	if err := c.Barrier(); err != nil {
		t.Error(err)
	}
}

// TestSilentRankStopsTheJob: a rank that stops answering (SIGSTOP, so that
// mpirun sees nothing die) is found by the next rank's heartbeat, which
// names it and aborts the job, within the deadline; nothing hangs.
func TestSilentRankStopsTheJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := mpirun(t, ctx, 3, "TestRankStops")
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the job hung for %s:\n%s", took, out)
	}
	if err == nil || !strings.Contains(out, "rank 2: mpi: rank 1 sent no heartbeat") || took > 20*time.Second {
		t.Fatalf("after %s: %v\n%s", took, err, out)
	}
	t.Logf("stopped in %.1f s", took.Seconds())
}

func TestRankStops(t *testing.T) {
	c := inRank(t)
	// Rank 1 stops itself, and again should anything continue it.
	for c.Rank() == 1 {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(10 * time.Millisecond)
	}
	err := c.Barrier()
	t.Errorf("rank %d passed the barrier (%v)", c.Rank(), err)
}

// TestWorldOfOne: a process that a launcher said was one of 2 ranks, but
// that MPI finds alone, is refused with a WorldError.
func TestWorldOfOne(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed (scripts/openmpi installs it)")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRankAlone$", "-test.v")
	cmd.Env = append(os.Environ(), "PIPE_MPI_RANK_TEST=1", "PMI_SIZE=2")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRankAlone") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestRankAlone(t *testing.T) {
	if os.Getenv("PIPE_MPI_RANK_TEST") != "1" {
		t.Skip("run by TestWorldOfOne")
	}
	_, err := Init(Options{})
	if _, ok := err.(*WorldError); !ok || !strings.Contains(err.Error(), "one of 2 ranks (PMI_SIZE=2), but MPI finds a world of 1") {
		t.Fatalf("Init: %v", err)
	}
}
