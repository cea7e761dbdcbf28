// Package cache is the sample cache of a pipeline's cache stage: what the
// stages before the cache made of each sample, kept in a [store.Store]
// store and read back instead of recomputed.
//
// Samples are grouped into shards (entries) of a fixed number of samples.
// Where nothing random comes before the cache, one copy serves every epoch
// and shard s holds sample indices [s·n, (s+1)·n). Where something random
// does, each of Epochs cache epochs has its own entries, in plan order, so
// an epoch reads its shards in sequence; epoch e ≥ Epochs reuses epoch
// e mod Epochs (data echoing).
//
// An entry is a count, an offset table, then per sample a 20-byte header
// (label, C, H, W, flags, and the state of the sample's random generator
// after the stages before the cache, so the stages after it continue the
// same stream) and its pixels; a sample skipped under on_error=skip keeps its
// error instead. [Writer] encodes entries and [ParseSample] and [ChunkBytes]
// decode them; the store checksums every entry, so a damaged one is found,
// reported, recomputed and rewritten ([Cache.Shard]).
//
// Decoded shards live in memory in an LRU bounded by bytes, shared by the
// workers of an epoch: a shard is read or computed once however many workers
// ask for it at the same time (single flight). What to compute is the
// caller's: the epoch engine passes a [ComputeFunc] that runs its stages.
//
// A store that cannot be opened or written (locked, read-only, full) is not
// an error: the cache warns once and the run computes live. Warming
// ([Cache.Warm]) fills missing entries on a pool of goroutines in a pond
// group: the first error or panic stops the others and is returned.
//
// A damaged store is treated as a damaged entry is, one level up: reported,
// then recomputed and rewritten. [Open] repairs it (store.WithRepair)
// with one warning that names the directory, the damaged files and what
// was done: a damaged value log header, MANIFEST header, KEYREGISTRY or
// format record is written again and nothing is lost; other damage rebuilds
// the store empty, so its entries are computed and written again. A store
// found damaged while open (Badger panicked in a call) is neither read nor
// written again: reads compute live, the warning says so, and the next open
// rebuilds it; a warm fails with an error wrapping store.ErrDamaged.
// Where the directory is read-only the store is not repaired, the warning
// says so, and the run computes live. Damage is never a hang: the store
// recovers Badger's panics and bounds its close.
package cache
