package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/mpi"
)

// job is the MPI job this process is a rank of, when an MPI launcher
// started it (mpirun, srun), else nil. It is process-wide: main finalises
// it after a run that went well and aborts it after an error.
var job *mpiJob

type mpiJob struct {
	comm   *mpi.Comm
	launch mpi.Launch
	// cores is the rank's share of the machine: GOMAXPROCS before a raise
	// for workers that decode in C.
	cores int
}

// joinJob starts MPI when a launcher started the process as one of several
// ranks, and gives the rank its share of the machine's cores (GOMAXPROCS),
// before the pipeline is loaded with them. timeout is --rank-timeout.
func joinJob(timeout time.Duration) error {
	l, ok := mpi.Launched()
	if !ok || l.Size == 1 || job != nil {
		return nil
	}
	if timeout == 0 {
		timeout = -1
	}
	started := make(chan *mpi.Comm, 1)
	comm, err := mpi.Init(mpi.Options{Timeout: timeout, Lost: func(err error) {
		c := <-started
		fmt.Fprintln(os.Stderr, rankLine(c.Rank(), err))
		c.Abort(1)
	}})
	var we *mpi.WorldError
	switch {
	case errors.Is(err, mpi.ErrNoMPI):
		return usageError{fmt.Errorf("started by %s, but this pipe is built without MPI: build it with -tags mpi (scripts/openmpi installs Open MPI)", l)}
	case errors.As(err, &we):
		return usageError{err}
	case err != nil:
		return err
	}
	started <- comm
	shareCores(comm.LocalSize())
	job = &mpiJob{comm: comm, launch: l, cores: runtime.GOMAXPROCS(0)}
	return nil
}

// rank0 reports whether this process prints the run's output and writes
// its files: alone, or rank 0 of a job.
func rank0() bool { return job == nil || job.comm.Rank() == 0 }

// output is where the command's output goes: stdout on rank 0, nowhere on
// the other ranks of a job.
func output(c *cobra.Command) io.Writer {
	if !rank0() {
		return io.Discard
	}
	return c.OutOrStdout()
}

// rankLine is how a rank of a job reports err.
func rankLine(rank int, err error) string {
	return errorLine(fmt.Errorf("rank %d: %w", rank, err))
}

// endJob ends the job after the command returned err, with exit status
// code, and exits: finalising MPI when it went well, or when the whole job
// stopped together at the same step (a signal, which mpirun hands every
// rank, or a context); else reporting err with the rank and aborting the
// job, so that no rank is left waiting for this one. A rank that stopped
// because another failed (trainer.RankError) gives that rank a few seconds
// to say why and abort the job itself.
func endJob(err error, code int) {
	rank := job.comm.Rank()
	if err != nil {
		fmt.Fprintln(os.Stderr, rankLine(rank, err))
	}
	if err == nil || errors.Is(err, context.Canceled) {
		if cerr := job.comm.Close(); cerr != nil {
			fmt.Fprintln(os.Stderr, rankLine(rank, cerr))
			code = max(code, 1)
		}
		os.Exit(code)
	}
	var re *trainer.RankError
	if errors.As(err, &re) && re.Rank != rank {
		time.Sleep(5 * time.Second)
	}
	job.comm.Abort(code)
}

// shareCores sets GOMAXPROCS to this rank's share of the machine where the
// launcher did not bind the rank to cores of its own (it did where the
// process may use fewer cores than are online): the cores over the job's
// ranks on this machine. The trainer's threads and the pipeline's workers
// default to it. A GOMAXPROCS environment variable is the user's choice.
func shareCores(localRanks int) {
	if os.Getenv("GOMAXPROCS") != "" || localRanks < 2 {
		return
	}
	n := runtime.NumCPU()
	if online := onlineCPUs(); online == 0 || n < online {
		return
	}
	runtime.GOMAXPROCS(max(1, n/localRanks))
}

// onlineCPUs counts the CPUs in /sys/devices/system/cpu/online ("0-3,6"),
// or returns 0 where it cannot.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if !found {
			z, err2 = a, nil
		}
		if err1 != nil || err2 != nil || z < a {
			return 0
		}
		n += z - a + 1
	}
	return n
}
