// Package pipe wires sources, transforms and batching into a Pipeline that
// streams batches in a deterministic order, fast enough to keep GPUs busy.
//
// A pipeline is a list of stages, written in Go or in a .pipe file; both come
// from one registry (see [Stages]), so a stage has the same name and
// parameters in both:
//
//	source      cifar10 path=data/cifar-10-binary.tar.gz split=train
//	shuffle     seed=42
//	random_crop size=32 pad=4 fill=reflect
//	flip        horizontal p=0.5
//	normalize   mean=0.4914,0.4822,0.4465 std=0.2470,0.2435,0.2616
//	batch       256
//	to_tensor   layout=nchw dtype=float32
//
// Output is a pure function of (data, stages, seed, epoch, rank, world
// size): not of the worker count, the timing, or the machine. Each sample's
// random parameters come from a generator keyed by (seed, epoch, sample
// index), and batches come out in plan order whatever order workers finish.
//
// Steady state allocates nothing per sample or per batch: batches are
// written straight into a fixed set of slabs that the consumer releases.
//
// A cache stage stores the output of the stages before it (see Cache and
// Pipeline.Warm); a read from it is byte-identical to a recompute.
package pipe
