//go:build !mpi

package mpi

import (
	"errors"
	"testing"
)

// TestInitWithoutMPI: the build without the tag has the API, and Init says
// how to get MPI.
func TestInitWithoutMPI(t *testing.T) {
	if c, err := Init(Options{}); c != nil || !errors.Is(err, ErrNoMPI) {
		t.Errorf("Init: %v, %v", c, err)
	}
}
