// Package pinned allocates page-locked host memory through the CUDA driver
// (cuMemHostAlloc), the one call gorgonia.org/cu leaves out. It is its own
// package because a package using cgo cannot hold Go assembly, and package
// prefetch has some. Only the cuda build has its functions.
package pinned
