// Package pipe is the library a program imports to build and run pipelines
// that stream deterministic, augmented batches fast enough to keep GPUs
// busy: Pipeline, New, Load, the stage constructors and Fit.
//
// A pipeline is a list of stages, written in Go or in a .pipe file; both
// come from one registry (package pipefile), so a stage has the same name,
// parameters and defaults in both, and Pipeline.String prints a file that
// builds the same pipeline:
//
//	source      cifar10 path=data/cifar-10-binary.tar.gz split=train
//	shuffle     seed=42
//	random_crop size=32 pad=4 fill=reflect
//	flip        horizontal p=0.5
//	normalize   mean=0.4914,0.4822,0.4465 std=0.2470,0.2435,0.2616
//	batch       256
//	to_tensor   layout=nchw dtype=float32
//
// This package wires the others and holds no algorithm: package pipefile
// checks the stages, package engine runs the epochs (workers, reorder
// window, slabs, devices), package cache keeps a cache stage's entries, and
// package fit runs the training (package trainer's loop over trainer/nn's
// model, the checkpoint and metrics files). Output is a pure function of (data, stages, seed,
// epoch, rank, world size): not of the worker count, the timing, or the
// machine.
//
// Fit trains across processes too: loaded with WithGroup (or built with
// NewInGroup) as a rank of a trainer.Group, such as the MPI job of package
// trainer/mpi, each process reads its slice of every global batch and
// evaluates its share of the held-out batches, the ranks all-reduce their
// gradients every step, and rank 0 alone writes the checkpoint and
// metrics; N ranks train the model one process with N devices trains, bit
// for bit.
//
// The library starts no goroutine that outlives the call or the epoch that
// started it, and changes no process-wide setting: Summary says what
// GOMAXPROCS epochs that decode in C should run under, and the program
// decides.
package pipe
