//go:build !cuda && !cudaemu

package gpu

import (
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/trainer"
)

// Compiled reports whether this build has the GPU trainer (the cuda or
// cudaemu tag).
const Compiled = false

// Replica is a model replica on a GPU; this build has none.
type Replica struct{ trainer.Accelerator }

// New returns prefetch.ErrNoCUDA: this build has no CUDA.
func New(ordinal int, arch *trainer.Model) (*Replica, error) { return nil, prefetch.ErrNoCUDA }

// PeerReducer averages GPU replicas' gradients; this build has none.
type PeerReducer struct{}

// ReduceGradients returns prefetch.ErrNoCUDA.
func (*PeerReducer) ReduceGradients([]trainer.Accelerator) error { return prefetch.ErrNoCUDA }

// Close does nothing.
func (*PeerReducer) Close(*Replica) error { return nil }
