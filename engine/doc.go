// Package engine runs the epochs of a built pipeline: plan → workers →
// [cache] → slabs → devices. It is driven by an immutable Spec (the source,
// the image operations, the tensor layouts, the plan, the batch size, the
// cache and the devices) and knows nothing of the .pipe syntax.
//
// How an epoch runs: one producer takes a free slab for each batch in plan
// order and hands the batch's samples to the workers in chunks of 64; the
// workers read a chunk's records, run the operations and write the results
// straight into the slab; Next hands batches out in plan order as they
// complete. The number of slabs (workers + 2) bounds both the reorder
// window and memory. The producer and the workers are one pond group: a
// failure, a panic (returned as an error with its stack) or a cancellation
// stops them all before Next returns, and Close waits for every one.
//
// A source that reads ahead (source.ReadAheader: URL shards streamed
// through a shard cache smaller than the dataset) is handed the epoch's
// order before the first read, and its read-ahead ends with Close, which
// also ends the fetches reads wait on; through a cache the order is not
// the reads', and the source fetches on demand. Run (and the trainer,
// through Engine.CheckOrders) first has such a source simulate every epoch
// it will read (source.OrderChecker), so an order the shard cache cannot
// stream is refused before the first batch rather than as its epoch starts.
//
// With a fields stage (Spec.Schema), a sample carries more than an image
// and an int label: each slab holds, after the batch's images, one region
// per field (fields.Schema.Layout), which the workers write beside the
// image; a mask and boxes move through the chain with the image
// (transform's Chain.ApplySample), and Batch.Field views a field. A cache
// entry holds a sample's fields as its cached stages left them, and each
// device's slice carries its samples' fields in host memory.
//
// With a cache, the operations before the cache come from its entries
// (package cache), read in place where the cache is ordered and through
// the shared shard memory otherwise, and only the operations after it run.
//
// A device epoch cuts each host batch into equal, contiguous per-device
// slices, copies them asynchronously into device memory (package
// prefetch), normalising on the device where the spec says so, and queues
// them per device; a host slab goes back once every copy from it has
// completed. Its producer and releaser are a pond group too.
//
// With Spec.Auto, a tuner sizes the workers and the devices' depth as an
// epoch runs: it measures windows of the epoch at the consumer's Next and
// keeps a change only where the medians of several windows say so beyond
// their noise (see Auto). What to do with a window is decided by a state
// machine with no clock of its own (tuning.go), tested by feeding it
// windows; auto.go measures and applies. The pool is made at the tuner's
// most workers and an atomic count gates how many take chunks; the slabs
// grow with them.
//
// Output is a pure function of the spec, the epoch and the source's bytes:
// a sample's random draws come from a generator keyed by (seed, epoch,
// sample index), so neither the worker count nor the timing changes a
// byte. Batch-level mixing (Spec.Mix: MixUp, CutMix) runs in Next on a
// complete batch, with draws keyed by (seed, epoch, batch index).
//
// Errors begin "pipe:", not "engine:": the engine's Epoch, Batch and
// DeviceEpoch are what package pipe hands its users (type aliases there),
// who never import this package, so its errors speak as the one they
// called.
package engine
