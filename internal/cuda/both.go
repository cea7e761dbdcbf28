//go:build cuda && cudaemu

package cuda

// The cuda and cudaemu tags choose between the real driver and the
// emulator: build with one of them.
var _ = theCudaAndCudaemuBuildTagsExcludeEachOther
