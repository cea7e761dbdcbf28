// Package store is the shard store of the cache stage (Open): a Badger
// directory of entries keyed by fingerprint/epoch/shard. Package cache,
// the only one that opens it, decides what goes in an entry; the store
// keeps bytes and knows nothing of what they mean: each entry carries its
// layout name, its format, and a checksum per 64 KiB segment, and is
// compressed with zstd where that saves at least 10 %.
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
package store
