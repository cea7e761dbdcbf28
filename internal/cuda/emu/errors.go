//go:build linux

package emu

import "fmt"

// Result is a CUDA driver error code; the emulator answers with the code a
// GPU gives for the same mistake, so errors.Is works alike in both builds'
// tests.
type Result int

const (
	ErrInvalidValue      Result = 1
	ErrOutOfMemory       Result = 2
	ErrInvalidDevice     Result = 101
	ErrInvalidContext    Result = 201
	ErrInvalidPTX        Result = 218
	ErrInvalidHandle     Result = 400
	ErrNotFound          Result = 500
	ErrNotReady          Result = 600
	ErrIllegalAddress    Result = 700
	ErrLaunchResources   Result = 701
	ErrContextDestroyed  Result = 709
	ErrMisalignedAddress Result = 716
	ErrLaunchFailed      Result = 719
)

var resultNames = map[Result]string{
	ErrInvalidValue:      "CUDA_ERROR_INVALID_VALUE",
	ErrOutOfMemory:       "CUDA_ERROR_OUT_OF_MEMORY",
	ErrInvalidDevice:     "CUDA_ERROR_INVALID_DEVICE",
	ErrInvalidContext:    "CUDA_ERROR_INVALID_CONTEXT",
	ErrInvalidPTX:        "CUDA_ERROR_INVALID_PTX",
	ErrInvalidHandle:     "CUDA_ERROR_INVALID_HANDLE",
	ErrNotFound:          "CUDA_ERROR_NOT_FOUND",
	ErrNotReady:          "CUDA_ERROR_NOT_READY",
	ErrIllegalAddress:    "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrLaunchResources:   "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrContextDestroyed:  "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	ErrMisalignedAddress: "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrLaunchFailed:      "CUDA_ERROR_LAUNCH_FAILED",
}

func (r Result) Error() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return fmt.Sprintf("CUDA error %d", int(r))
}

// Error is a failed call: the driver's code and what the emulator knows
// about the cause. errors.Is(err, ErrIllegalAddress) matches the code.
type Error struct {
	Code Result
	Msg  string
}

func (e *Error) Error() string { return e.Code.Error() + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Code }

func errorf(code Result, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}
