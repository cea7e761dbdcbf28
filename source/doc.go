// Package source reads datasets of labelled images: CIFAR-10 and CIFAR-100
// in their official binary distribution (the .tar.gz archive, the directory
// extracted from it, or a single batch file; fetched into a cache and
// checked against the published checksum when asked), folders of JPEG and
// PNG files labelled by class directory or by a CSV, TFRecord files of
// tf.train.Example records, WebDataset tar shards, and a synthetic dataset
// with CIFAR's shape that needs no files.
//
// An image folder reads more than an image and a label when asked
// ([WithFields]): each image's mask from a folder that mirrors the image
// folder, and label and multi-label columns of its labels file (a CSV, or
// JSON).
//
// Whatever the format, a [Source] is random access by index and safe for
// concurrent use: the pipeline's workers read different samples at once,
// and a full shuffle is a permutation of indexes, not a buffer of samples.
// Sources decode nothing they do not have to. A CIFAR record is
// already pixels, so Read hands out a view of the loaded file rather than a
// copy; the other file formats hold compressed images, so Read hands out
// their encoded bytes ([Info].Encoded) and a later decode stage, run by the
// workers, makes the pixels.
//
// TFRecord and WebDataset are formats for streaming, read front to back.
// They get random access from an index built when they open: the offset of
// every record or member. The TFRecord index, and the plain copy of a
// gzipped file or shard, go into an index directory under the file's
// fingerprint, so that work is done once per version of the file. Because
// their samples still read best in sequence, these sources report how many
// samples each file holds ([Sharded]), and a streaming shuffle visits the
// files in random order, reading each in sequence through a shuffle buffer.
//
// Opening is where the slow work happens: a download, an index build, a
// decompression, a listing of every file in a large folder. Every
// constructor that touches files or the network therefore takes a context
// first, and cancelling it stops that work promptly with an error that
// wraps the context's. A download also ends by itself when the server
// cannot be reached (a connect timeout) or stops sending (an idle timeout:
// a slow server that keeps sending is waited for). A download happens only
// when no path is given: a path that is given and missing is an error, so a
// typing mistake is not a download. What the work writes (downloads,
// indexes, decompressed copies) appears under its final name only whole: it
// is written to a temporary name and renamed, and removed if the work
// fails, times out or is cancelled.
//
// TFRecord and WebDataset paths may also be URLs (s3:// on any
// S3-compatible store, http://, https://), with brace groups and, for s3://,
// globs matched by listing: the shards are fetched whole, with retries and
// resumption, into a shard cache on local disk shared by the processes of
// the machine (see [Remote] and package remote), and then read like local
// files, so the samples and their order are those of the same files on
// disk. Errors name the URL, and a fingerprint names each shard by URL,
// size and ETag. An image folder may be a URL too: its class folders are
// found by listing an s3:// prefix, or a flat folder's labels CSV names its
// files (the only way over http(s)://); each file goes through the same
// cache, fetched in the background from open and at once by a Read that
// reaches it first. TFRecord and WebDataset shards more than the shard
// cache may hold (a cache limit below their total) are not fetched at open
// but streamed: their indexes (and TFRecord labels) are stored at the first
// open, an epoch hands the source its order ([ReadAheader]), and the shards
// come in that order a few ahead of the reads, each let go once the epoch
// has read it, so the dataset need not fit on local disk. An order that
// would read too many samples from shards let go to make room is refused
// ([OrderError]: ReadAhead, or [OrderChecker] ahead of a run), naming a
// cache size that passes. [Download]'s errors name a URL with its secrets
// redacted; [RedactURLs] hides them in any text (an identity, a message).
//
// Bad data is found at open where that is cheap: sources that check every
// record then ([Checker]) list the bad ones before any batch is made, so a
// pipeline can stop at once or know what it will skip. Damage is a bad
// record, not a failure to open, wherever the records around it can still
// be read: a label past [MaxClasses] (or past the named classes), a label
// or JSON member that does not parse, and the end of a file that cannot be
// parsed — a partial CIFAR record, a TFRecord or tar header cut short or
// garbled; in an image folder, a symbolic link that leads to no file
// ([ErrBrokenLink]). A format whose records are found by walking the file (TFRecord,
// tar) cannot find any record past a header it cannot trust, so the rest
// of that file is one bad record at the header's offset, after every good
// record before it. A size read from a file is believed only as far as
// the file goes: a record's memory is allocated only for bytes the file
// holds, and only up to [MaxRecordBytes]. An error about a particular record is a [*RecordError]
// that names the file, the byte offset and the sample index, so a person
// can find the bad bytes; it wraps a sentinel such as [ErrLabel],
// [ErrFormat] or [ErrCRC] for errors.Is. ([ErrCRC] wraps [ErrChecksum]: a
// CRC mismatch is damaged data like any other checksum mismatch, which
// callers that tell data errors from usage errors count on.)
// [Fingerprinter] names the exact data a source read, so that a cache of
// its output is found again only for that data.
package source
