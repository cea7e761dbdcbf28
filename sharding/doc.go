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
package sharding
