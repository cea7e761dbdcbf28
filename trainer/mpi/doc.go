// Package mpi makes the processes of an MPI job (mpirun -np N, srun) one
// trainer.Group, whose Comm averages the replicas' gradients across them:
// Open MPI through cgo, in the build with the tag mpi (scripts/openmpi
// installs Debian's libopenmpi-dev and openmpi-bin). Without the tag, Init
// returns ErrNoMPI and the rest of the API is there, so the default build
// needs no MPI at all; Launched, which reads what the launcher put in the
// environment, works in both.
//
// The all-reduce is deterministic, so that N processes train the model one
// process with N replicas trains, bit for bit. A reduction tree or ring
// (MPI_Allreduce) adds in an order that depends on the algorithm and the
// number of ranks; here every element's sum is taken in the order of the
// job's replicas, rank-major, exactly as trainer.LocalAllReduce takes it
// in one process. The vector is cut into one segment per rank; an
// MPI_Alltoallv sends each rank every replica's copy of its segment (not a
// partial sum, which would change the order), the rank adds its segment's
// rows in order and scales them, and an MPI_Allgatherv hands the averaged
// segments to everyone. Each rank sends and receives about twice the
// vector per step with one replica per rank, as a ring all-reduce does, in
// two collective calls; the price of the order is that a rank with D
// replicas sends all D copies of each segment (D times the bytes), which
// does not arise with one replica (or one GPU) per rank.
//
// Open MPI stops a job whose process dies under mpirun, but a launcher may
// not (srun without --kill-on-bad-exit), and a process that hangs or is
// stopped is not dead: the others would wait in their next collective
// forever. So each rank sends a heartbeat to the next one around a ring on
// a communicator of its own, from its own goroutine (Open MPI is started
// with MPI_THREAD_MULTIPLE), and a rank that hears nothing from the
// previous one for Options.Timeout calls Options.Lost, which by default
// reports the silent rank and stops the job with MPI_Abort.
//
// A NCCL reducer of GPU buffers would sit beside Comm rather than inside
// it: it would take a Comm as its trainer.Group, broadcast the NCCL id
// from rank 0 through it, and average device memory with the same
// segment-wise order.
package mpi
