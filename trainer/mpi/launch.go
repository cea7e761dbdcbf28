package mpi

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/pipefeed/pipe/trainer"
)

// A Comm is the job's ranks and averages their replicas' gradients.
var _ interface {
	trainer.Group
	trainer.AllReducer
} = (*Comm)(nil)

// ErrNoMPI is returned by Init in a build without the tag mpi.
var ErrNoMPI = errors.New("mpi: this build has no MPI: build with -tags mpi (scripts/openmpi installs Open MPI)")

// Both twins, mpi.go (the mpi build) and mpi_off.go, define Compiled: a
// build whose twin lacks it fails here.
const _ = Compiled

// Launch is what the environment says about how the process was started.
type Launch struct {
	// Launcher names what started it: "mpirun", "srun" or "a PMI
	// launcher".
	Launcher string
	// Size is the number of ranks it started (0: not said), and Var the
	// variable that says so, as NAME=value.
	Size int
	Var  string
}

func (l Launch) String() string {
	if l.Size == 0 {
		return fmt.Sprintf("%s (%s)", l.Launcher, l.Var)
	}
	return fmt.Sprintf("%s as one of %d ranks (%s)", l.Launcher, l.Size, l.Var)
}

// Launched reports whether an MPI launcher started the process as a rank
// of a job, from the variables launchers set: Open MPI's mpirun
// (OMPI_COMM_WORLD_SIZE), Slurm's srun in a step of several tasks
// (SLURM_STEP_NUM_TASKS, with SLURM_STEP_ID), a PMIx server (PMIX_RANK)
// or a PMI one (PMI_SIZE, as MPICH's hydra and srun --mpi=pmi2 set). A
// single task of srun or a batch script's own shell is not a job.
func Launched() (Launch, bool) {
	if v, ok := os.LookupEnv("OMPI_COMM_WORLD_SIZE"); ok {
		return Launch{Launcher: "mpirun", Size: atoi(v), Var: "OMPI_COMM_WORLD_SIZE=" + v}, true
	}
	if _, ok := os.LookupEnv("SLURM_STEP_ID"); ok {
		if v := os.Getenv("SLURM_STEP_NUM_TASKS"); atoi(v) > 1 {
			return Launch{Launcher: "srun", Size: atoi(v), Var: "SLURM_STEP_NUM_TASKS=" + v}, true
		}
	}
	if v, ok := os.LookupEnv("PMIX_RANK"); ok {
		return Launch{Launcher: "a PMIx launcher", Var: "PMIX_RANK=" + v}, true
	}
	if v, ok := os.LookupEnv("PMI_SIZE"); ok {
		return Launch{Launcher: "a PMI launcher", Size: atoi(v), Var: "PMI_SIZE=" + v}, true
	}
	return Launch{}, false
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Options configures Init. Zero values take the defaults given.
type Options struct {
	// Timeout is how long a rank may stay silent (send no heartbeat)
	// before it is taken for dead or hung. Default 10 s: heartbeats go
	// every Timeout/10 (at most every second), from a goroutine of their
	// own, so a rank busy training is never silent; negative: no
	// heartbeats.
	Timeout time.Duration
	// Lost is called once, from the heartbeat goroutine, when the rank
	// before this one around the ring is silent for Timeout, with a
	// *LostError. The job cannot go on: ranks are waiting in collective
	// calls that will not return. Default: write the error to stderr and
	// Abort(1).
	Lost func(err error)
}

// LostError says that rank Rank sent no heartbeat for Silence.
type LostError struct {
	Rank    int
	Silence time.Duration
}

func (e *LostError) Error() string {
	return fmt.Sprintf("mpi: rank %d sent no heartbeat for %s: it died or hangs, and the job cannot go on without it", e.Rank, e.Silence.Round(time.Second/10))
}

// WorldError says that MPI found another number of ranks than the launcher
// said it started: this process is alone where a job of Want was expected
// (srun without --mpi=pmix, a pipe built against another MPI than the
// launcher's).
type WorldError struct {
	Launch Launch
	Got    int
}

func (e *WorldError) Error() string {
	return fmt.Sprintf("mpi: started by %s, but MPI finds a world of %d: the ranks did not find each other (srun needs --mpi=pmix; mpirun must be Open MPI's, the MPI pipe is built against)",
		e.Launch, e.Got)
}
