// Package prefetch moves finished batches toward the devices that consume
// them. Today it owns the bounded pool of host slabs that batches are
// written into: a producer that finds no free slab waits, and that wait is
// counted, so "is the pipeline blocked on its consumer?" has a number.
// Per-device queues and asynchronous host-to-device copies build on the same
// slabs (pinned under CUDA).
package prefetch
