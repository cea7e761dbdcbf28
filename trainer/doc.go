// Package trainer will hold the built-in data-parallel trainer: tensors,
// layers, models, optimisers, gradient all-reduce, checkpoints and metrics.
// It consumes the per-device queues of package prefetch and never reads
// files or augments data. It is specified by the trainer issue and is empty
// until that work lands; the pipeline runs without it ("pipe run" without a
// train stage streams epochs and reports throughput).
package trainer
