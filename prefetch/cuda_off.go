//go:build !cuda && !cudaemu

package prefetch

// This build has no CUDA: the CUDA device has the cuda build's API, and
// every way to obtain one answers ErrNoCUDA. (gorgonia.org/cu links libcuda
// and exits the process at init without a GPU, so only the cuda build
// imports it, through internal/cuda.)

// CUDACompiled reports whether this build has CUDA (the cuda or cudaemu
// build tag).
const CUDACompiled = false

// CUDAEmulated reports whether this build's GPUs are emulated (the
// cudaemu tag).
const CUDAEmulated = false

// CUDADevices returns ErrNoCUDA: this build has no CUDA.
func CUDADevices() (int, error) { return 0, ErrNoCUDA }

// CUDA is a GPU; in this build there are none.
type CUDA struct{}

// NewCUDA returns ErrNoCUDA: this build has no CUDA.
func NewCUDA(ordinal int) (*CUDA, error) { return nil, ErrNoCUDA }

func (*CUDA) Name() string                                              { return "cuda" }
func (*CUDA) Alloc(int) (Buffer, error)                                 { return nil, ErrNoCUDA }
func (*CUDA) Free(Buffer) error                                         { return ErrNoCUDA }
func (*CUDA) CopyAsync(Buffer, []byte) (Event, error)                   { return nil, ErrNoCUDA }
func (*CUDA) NormalizeAsync(_, _ Buffer, _ int, _ *Norm) (Event, error) { return nil, ErrNoCUDA }
func (*CUDA) Read([]byte, Buffer) error                                 { return ErrNoCUDA }
func (*CUDA) AllocHost(int) ([]byte, error)                             { return nil, ErrNoCUDA }
func (*CUDA) FreeHost([]byte) error                                     { return ErrNoCUDA }
func (*CUDA) Stats() CopyStats                                          { return CopyStats{} }
func (*CUDA) Close() error                                              { return nil }

var (
	_ Device        = (*CUDA)(nil)
	_ HostAllocator = (*CUDA)(nil)
)

// DevicePointer returns false: this build has no CUDA buffers.
func DevicePointer(Buffer) (uintptr, bool) { return 0, false }
