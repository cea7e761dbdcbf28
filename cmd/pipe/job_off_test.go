//go:build !mpi

package main

import (
	"strings"
	"testing"
)

// TestLaunchedWithoutMPI: a pipe built without MPI that mpirun (or srun)
// starts as one of several ranks refuses to train alone, and says how to
// build it, with exit status 2.
func TestLaunchedWithoutMPI(t *testing.T) {
	f := writePipe(t, small+"train mlp width=8 epochs=1 out="+t.TempDir()+"\n")
	for _, env := range [][2]string{{"OMPI_COMM_WORLD_SIZE", "2"}, {"PMI_SIZE", "4"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			_, errs, code := pipeCmd(t, "run", f)
			if code != 2 || !strings.Contains(errs, env[0]+"="+env[1]) || !strings.Contains(errs, "built without MPI: build it with -tags mpi") {
				t.Errorf("exit %d: %s", code, errs)
			}
		})
	}
}
