// Package prefetch moves finished batches toward the devices that consume
// them: the bounded pool of host slabs that batches are written into (a
// producer that finds no free slab waits, and that wait is counted), the
// Device interface with its two implementations — CPU, a simulated device
// in host memory that runs anywhere (its stream is a one-goroutine pond
// pool, each operation a task), and CUDA (the cuda build tag), a GPU
// with page-locked slabs, one copy stream and events — per-device queues
// with stall accounting, and the normalize kernels that let batches cross
// as uint8 and become floats on the device.
package prefetch
