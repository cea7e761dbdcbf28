// Package sharding decides which samples each rank reads, in what order, in
// every epoch: the plan. A plan is a pure function of (dataset length, seed,
// epoch, rank, world size), so every process of a job agrees on it without
// talking, and a resumed run replays it exactly.
//
// An epoch's order is a permutation of all sample indices keyed by seed and
// epoch: a Feistel network computed index by index, so nothing of size N is
// ever held in memory, whatever the dataset's length. Rank r of w takes every
// w-th entry starting at r, so ranks are disjoint and equal in size; when
// the length does not divide by w, the last N mod w entries of the
// permutation are left out of that epoch (a different few each epoch when
// shuffling). The ranks of a training job lay their shares out otherwise
// (WithSlices): each global batch of the epoch's order is cut into one
// contiguous slice per rank, in rank order, exactly as one process cuts a
// batch among its devices, so that ranks × devices see the batches one
// process with all the devices sees.
//
// The package also holds the shard store of the cache stage (OpenCache): a
// Badger directory of entries keyed by fingerprint/epoch/shard. Package
// cache decides what goes in an entry; the store keeps bytes and knows
// nothing of what they mean: each entry carries its layout
// name, its format, and a checksum per 64 KiB segment, and is compressed
// with zstd where that saves at least 10 %.
//
// Badger trusts its own files, and damage to them does worse than lose
// entries: a damaged table makes it panic (in its own goroutines while
// opening, where nothing can recover it), exit through log.Fatal, or serve
// a key's value pointer into the wrong place; a damaged value pointer can
// leave a value log file read-locked so that its Close never returns; a
// flipped bit in a value log header, the MANIFEST's header or the
// KEYREGISTRY makes it refuse the store. So the store checks before Badger
// opens a directory, under Badger's own directory lock: pipe's format
// record, the KEYREGISTRY, the MANIFEST (its header, and every change in
// it replays), every table the manifest lists (lengths bounded, the
// index's and every block's checksum) and every value log header. Damage
// found is an error wrapping ErrDamaged, or with WithRepair is repaired.
// Where the bytes are known they are written again, no entry lost, and the
// store checked once more: a value log header holds a data key ID that is
// always 0, and the KEYREGISTRY only a random IV and Badger's sanity text
// in clear, since the store is never encrypted; the MANIFEST's header is
// Badger's magic and version; the format record is pipe's own (entries
// carry their own format and layout, checked as they are read). Anything
// else rebuilds the store empty. Once
// open, every call into Badger recovers a panic as ErrDamaged, after which
// the store is not entered again and its directory is marked for repair at
// the next open; an empty value from Badger (it could not read the value
// log) is a damaged entry; and Close waits for Badger only so long.
package sharding
