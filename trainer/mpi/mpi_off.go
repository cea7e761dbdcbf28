//go:build !mpi

package mpi

import "os"

// Comm is the job's processes: in this build, without MPI, there is never
// one (Init returns ErrNoMPI), and its methods return ErrNoMPI.
type Comm struct{}

// Compiled reports whether this build has MPI (the mpi build tag).
const Compiled = false

// Init returns ErrNoMPI: this build has no MPI.
func Init(Options) (*Comm, error) { return nil, ErrNoMPI }

func (c *Comm) Rank() int                                { return 0 }
func (c *Comm) Size() int                                { return 1 }
func (c *Comm) LocalRank() int                           { return 0 }
func (c *Comm) LocalSize() int                           { return 1 }
func (c *Comm) Library() string                          { return "" }
func (c *Comm) AllReduce([][]float32) error              { return ErrNoMPI }
func (c *Comm) AllReduce64([][]float64) error            { return ErrNoMPI }
func (c *Comm) AllGather64([]float64) ([]float64, error) { return nil, ErrNoMPI }
func (c *Comm) Broadcast([]byte, int) ([]byte, error)    { return nil, ErrNoMPI }
func (c *Comm) Barrier() error                           { return ErrNoMPI }
func (c *Comm) Abort(code int)                           { os.Exit(code) }
func (c *Comm) Close() error                             { return ErrNoMPI }
