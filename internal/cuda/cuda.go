//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"
)

// DevicePtr is an address in a GPU's memory. Addresses are unified: one
// value names one place across every GPU of the process.
type DevicePtr uint64

// Dim3 is a grid (blocks) or block (threads) size, x, y and z.
type Dim3 [3]int

// Bytes returns the memory of s as bytes, aliased (no copy), for copies of
// typed host arrays.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// Do runs f on a locked OS thread with c current: the driver keeps the
// current context per OS thread, and goroutines move between threads, so
// every driver call that needs a context runs inside Do.
func (c *Context) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := SetCurrent(c); err != nil {
		return fmt.Errorf("making %s's context current: %w", c.Name(), err)
	}
	return f()
}

// Ordinal is the context's GPU.
func (c *Context) Ordinal() int { return c.ordinal }

// Name is the context's GPU as pipe names it: "cuda:0", with
// " (emulated)" in the cudaemu build.
func (c *Context) Name() string { return Name(c.ordinal) }

// Name is GPU ordinal's name: "cuda:0", or "cuda:0 (emulated)" in the
// cudaemu build, so an emulated run is never taken for a GPU's.
func Name(ordinal int) string {
	if Emulated {
		return fmt.Sprintf("cuda:%d (emulated)", ordinal)
	}
	return fmt.Sprintf("cuda:%d", ordinal)
}

// Elapsed returns the time between two completed events' records.
func Elapsed(start, end *Event) (time.Duration, error) {
	ms, err := elapsed(start, end)
	if err != nil {
		return 0, err
	}
	return time.Duration(ms * 1e6), nil
}

// marshal checks kernel arguments and turns them into the types both back
// ends pass: DevicePtr, int32, uint32, int64, uint64, float32, float64. A
// Go int is a C int (32 bits) and must fit one (pass an int64 for a long
// long); a bool is a C int, 0 or 1.
func marshal(in []any) ([]any, error) {
	out := make([]any, len(in))
	for i, a := range in {
		switch v := a.(type) {
		case int:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("argument %d: %d does not fit a C int (a Go int is passed as int32; pass an int64 for a long long)", i, v)
			}
			out[i] = int32(v)
		case bool:
			out[i] = int32(0)
			if v {
				out[i] = int32(1)
			}
		case DevicePtr, int32, uint32, int64, uint64, float32, float64:
			out[i] = v
		default:
			return nil, fmt.Errorf("argument %d: a %T (want DevicePtr, int, int32, uint32, int64, uint64, float32, float64 or bool)", i, a)
		}
	}
	return out, nil
}
