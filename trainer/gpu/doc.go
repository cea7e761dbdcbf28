// Package gpu runs the trainer's replicas on NVIDIA GPUs: a Replica is a
// trainer.Accelerator that holds one model in a GPU's memory and trains it
// there, and PeerReducer averages the replicas' gradients across GPUs.
//
// A Replica mirrors the layers of a nn.Model (convolution, dense,
// ReLU, max pooling, global average pooling, flatten, dropout, batch norm,
// residual blocks) and runs each forward and backward pass as CUDA kernels
// written beside it in kernels.cu, compiled to PTX for compute capability
// 8.0 by nvcc (go generate), committed, embedded and loaded through
// gorgonia.org/cu's module API; the only run-time requirement is the NVIDIA
// driver. Matrix products are the package's own tiled GEMM in float32. The
// parameters, the gradients (float64 sums, as the CPU trainer keeps them)
// and the optimiser's state live in three flat device arrays, so an update
// is one kernel and an all-reduce one buffer. Every kernel is deterministic
// (no atomics; sums in orders fixed by the shapes), so a run repeats bit for
// bit, and the element-wise ones round as the CPU's Go does, so they give
// its bits; the tests compare every layer, the loss, each optimiser and whole
// training steps with package trainer's CPU code.
//
// A batch from the pipeline's prefetch queue (DeviceBatch, float32 in the
// same GPU's memory, on the same primary context) is read where it is, with
// no host round trip; a host batch (the evaluation's) is copied in.
//
// The package needs the cuda build tag and cgo; without it, New answers
// prefetch.ErrNoCUDA.
package gpu
