//go:build cuda

package pinned

/*
#cgo LDFLAGS: -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Alloc returns n bytes of page-locked host memory usable by every context
// (CU_MEMHOSTALLOC_PORTABLE). A context must be current on the calling
// thread.
func Alloc(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	var p unsafe.Pointer
	if r := C.cuMemHostAlloc(&p, C.size_t(n), C.CU_MEMHOSTALLOC_PORTABLE); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemHostAlloc of %d bytes: CUDA error %d", n, int(r))
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// Free frees memory from Alloc. A context must be current on the calling
// thread.
func Free(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if r := C.cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(b))); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuMemFreeHost: CUDA error %d", int(r))
	}
	return nil
}
