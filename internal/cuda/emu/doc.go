// Package emu is a CPU emulator of the part of the CUDA driver that pipe
// uses, for tests and CI: no GPU runs here, and nothing here is a GPU to a
// user.
//
// It interprets the PTX pipe ships. ParsePTX reads a module and decodes
// every instruction into a compact form whose operands are all slots of a
// thread's register file (registers, special registers, parameters and
// constants); an instruction the interpreter does not implement is a load
// error naming it and its line. A launch runs the grid's blocks on as many
// goroutines as there are processors, in a random order; within a block
// the threads run one at a time, each until it reaches bar.sync or exits,
// in an order drawn afresh for every barrier interval, and the barrier
// releases when every thread is at it (a barrier that some exited thread
// never reached is an error). Shared memory is checked like
// compute-sanitizer's racecheck: per 4-byte word, the last writer and the
// readers of the current barrier interval, so a read of a word another
// thread wrote in the same interval, or a write to a word another thread
// read or wrote in it, stops the kernel with both threads, the variable and
// the offset named. Device memory is allocations in an address range of
// each emulated GPU's own; every access is checked against the allocation
// it falls in, and an access outside one, or misaligned, or into freed
// memory, stops the kernel with an error naming the kernel, block, thread,
// PTX line, address and the nearest allocation.
//
// Floating point rounds as PTX says, per instruction, to nearest even:
// Go's float32 and float64 arithmetic does, and fma.rn.f32 is rounded once
// (see fma32). rcp.approx.ftz.f64 is computed exactly (correctly rounded,
// subnormals flushed); a GPU's approximation differs in the low bits.
//
// The Driver around the interpreter keeps CUDA's rules: a context current
// per OS thread (a call on a thread without one fails with
// ErrInvalidContext), primary contexts retained and released, streams that
// each run their operations in order on their own goroutine with random
// pauses between them (so work on different streams interleaves in any
// order unless events order it), copies that read or write host memory
// when they run, events, peer copies between several emulated GPUs, pinned
// host memory outside the Go heap, and sticky errors: a kernel's fault
// surfaces from the next call that waits on the context and from every
// call after it. Config.Seed keys every random choice; errors of stream
// work print it.
//
// It is Linux only (thread IDs and anonymous mappings through
// golang.org/x/sys/unix), as the cudaemu build is; elsewhere the package
// is this comment.
package emu
