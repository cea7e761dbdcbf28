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
// shuffling).
//
// The package also holds the shard store of the cache stage (OpenCache): a
// Badger directory of entries keyed by fingerprint/epoch/shard. Package
// cache decides what goes in an entry; the store keeps bytes and knows
// nothing of what they mean: each entry carries its layout
// name, its format, and a checksum per 64 KiB segment, and is compressed
// with zstd where that saves at least 10 %.
package sharding
