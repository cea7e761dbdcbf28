// Package remote reads datasets kept in object storage: S3 and the stores
// that speak its protocol (MinIO, Ceph, versitygw, Google Cloud Storage's
// interoperability endpoint, Cloudflare R2), through minio-go, and plain
// HTTP(S) servers, through net/http with Range requests.
//
// A [Store] turns a pattern into objects ([Store.List]): braces expand as
// in a shell and WebDataset (shard-{000..099}.tar), and a glob in an s3://
// URL is matched against a listing from the prefix before it. Reading an
// object ([Store.Open]) survives a network that misbehaves: 5xx answers,
// throttling (429, SlowDown), refused or reset connections, no answer and
// stalled transfers are retried with exponential back-off and jitter for a
// time budget (Options.RetryFor), and a transfer that breaks is taken up
// at the offset it reached by a ranged GET conditional on the version
// first seen. Every answer is checked against what was asked for (status,
// Content-Range, Content-Length, ETag or Last-Modified) before a byte of
// it is read, so the bytes never mix two versions or two ranges of an
// object. What retrying cannot mend (a missing bucket or key, refused
// credentials, a redirect, an untrusted certificate, a malformed URL)
// fails at once. Every error names the URL. Listings are bounded in keys,
// pages, page size and time. [Waits] tells what requests wait for, so a
// command can say so while it waits.
// Requests in flight are bounded (Options.Concurrency), each streaming
// through one fixed buffer, so memory does not grow with shard size.
//
// A [Cache] keeps whole shards on local disk, so that epochs after the
// first, and other processes of the machine (the ranks of an MPI job),
// read them locally. It is keyed by URL and versioned by ETag, size and
// Last-Modified, checks each shard it hands out against the checksum taken
// when it was fetched (fetching a damaged one again), is shared through a
// lock file per shard, and bounded by an LRU limit.
package remote
