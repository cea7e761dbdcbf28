package trainer

import (
	"errors"
	"fmt"
)

// Group is the processes (ranks) of a job that train one model together,
// each holding Config.Replicas replicas. The job's replicas are numbered
// rank-major: local replica d of rank r is replica r·Replicas+d, and that
// is the order in which every sum across the job is taken, so that ranks ×
// replicas train the model that one process with all the replicas trains,
// bit for bit. A Group's calls are collective: every rank makes the same
// calls in the same order, and a call returns on one rank only when every
// rank has made it.
//
// The Group carries the job's bookkeeping (figures, checkpoints, the check
// that every rank runs the same thing); the gradients travel through the
// AllReducer, which for host buffers is usually the same value (trainer/mpi's
// Comm is both). A reducer of device buffers (NCCL) would sit beside it and
// use the Group to start: NCCL's communicator is made from an id that one
// rank creates and Broadcasts.
type Group interface {
	// Rank is this process's place in the job, 0 ≤ Rank < Size.
	Rank() int
	Size() int
	// LocalRank and LocalSize place the process among the job's ranks on
	// its machine: which GPU it drives, what share of the cores it takes.
	LocalRank() int
	LocalSize() int
	// AllGather64 returns every rank's vals, one after the other in rank
	// order; every rank passes the same number of values.
	AllGather64(vals []float64) ([]float64, error)
	// Broadcast returns root's buf on every rank (buf is ignored on the
	// others).
	Broadcast(buf []byte, root int) ([]byte, error)
	// Barrier returns once every rank has called it.
	Barrier() error
}

// RankError says that another rank of the job failed (rank Rank), so this
// one stopped too: that rank reports what went wrong.
type RankError struct{ Rank int }

func (e *RankError) Error() string {
	return fmt.Sprintf("trainer: rank %d failed (its own output says why); this rank stopped with it", e.Rank)
}

// ErrJob is wrapped by errors about ranks that do not fit together: another
// model, batch or replica count on one of them.
var ErrJob = errors.New("the job's ranks do not agree")

// single reports whether g is no group or a group of one.
func single(g Group) bool { return g == nil || g.Size() <= 1 }

// gatherInts gathers one int per rank.
func gatherInts(g Group, v int) ([]int, error) {
	all, err := g.AllGather64([]float64{float64(v)})
	if err != nil {
		return nil, err
	}
	out := make([]int, len(all))
	for i, x := range all {
		out[i] = int(x)
	}
	return out, nil
}
