//go:build !cuda && !cudaemu

package gpu

import (
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

// Compiled reports whether this build has the GPU trainer (the cuda or
// cudaemu tag).
const Compiled = false

// Replica is a model replica on a GPU; this build has none.
type Replica struct{ trainer.Accelerator }

// New returns ErrNoCUDA: this build has no CUDA.
func New(ordinal int, arch *nn.Model) (*Replica, error) { return nil, ErrNoCUDA }

// PeerReducer averages GPU replicas' gradients; this build has none.
type PeerReducer struct{}

// ReduceGradients returns ErrNoCUDA.
func (*PeerReducer) ReduceGradients([]trainer.Accelerator) error { return ErrNoCUDA }

// Close does nothing.
func (*PeerReducer) Close(*Replica) error { return nil }
