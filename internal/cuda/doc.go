// Package cuda is pipe's one door to the CUDA driver: the only package
// that imports gorgonia.org/cu or calls the driver through cgo. It offers
// pipe's own types (DevicePtr, Context, Stream, Event, Module, Function)
// and the calls pipe makes: device count, primary contexts, the context
// current on an OS thread (Context.Do locks the goroutine to its thread,
// makes the context current and runs a function), device memory, copies
// (host to device, device to host, device to device, between GPUs, with
// and without streams), streams, events, pinned host memory, modules
// loaded from PTX text and kernel launches with typed arguments.
//
// Two back ends implement it, chosen by build tag:
//
//   - cuda: the real driver, through gorgonia.org/cu and cgo (cuda.h and
//     libcuda). cu initialises the driver when the program starts and
//     exits without a GPU, so this build is for GPU machines.
//   - cudaemu: package emu's emulator, pure Go, no cgo and no CUDA
//     headers: GPUs (PIPE_CUDAEMU_DEVICES, default 2) whose kernels are
//     the very PTX pipe ships, interpreted with bounds, barrier and race
//     checks, and streams that run in random interleavings. It is for
//     tests and CI only: it proves the Go code's driver use and the
//     kernels' logic, never speed, and its devices say "(emulated)" in
//     their names.
//
// Without either tag the package holds only this comment; pipe's
// packages then answer ErrNoCUDA through their own untagged twins.
//
// The seam is narrow on purpose: the real back end stays a thin mapping
// onto cu, so what the emulator exercises is what a GPU run calls.
package cuda
