package mpi

import (
	"os"
	"testing"
)

// TestLaunched: the launchers' variables say whether and as what the
// process was started; a single srun task or a batch script is no job.
func TestLaunched(t *testing.T) {
	vars := []string{"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "PMIX_RANK", "PMI_SIZE"}
	for _, c := range []struct {
		env  map[string]string
		want Launch
		ok   bool
	}{
		{map[string]string{}, Launch{}, false},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "PMIX_RANK": "1"}, Launch{"mpirun", 4, "OMPI_COMM_WORLD_SIZE=4"}, true},
		{map[string]string{"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8"}, Launch{"srun", 8, "SLURM_STEP_NUM_TASKS=8"}, true},
		{map[string]string{"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1"}, Launch{}, false},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "8"}, Launch{}, false},
		{map[string]string{"PMIX_RANK": "3"}, Launch{"a PMIx launcher", 0, "PMIX_RANK=3"}, true},
		{map[string]string{"PMI_SIZE": "2"}, Launch{"a PMI launcher", 2, "PMI_SIZE=2"}, true},
	} {
		for _, v := range vars {
			if val, ok := c.env[v]; ok {
				t.Setenv(v, val)
			} else {
				t.Setenv(v, "")
				os.Unsetenv(v)
			}
		}
		if got, ok := Launched(); got != c.want || ok != c.ok {
			t.Errorf("%v: %+v %v, want %+v %v", c.env, got, ok, c.want, c.ok)
		}
	}
}
