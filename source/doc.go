// Package source reads datasets of labelled images: CIFAR-10 and CIFAR-100
// in their official binary distribution (the .tar.gz archive, the directory
// extracted from it, or a single batch file; fetched into a cache and
// checked against the published checksum when asked), folders of JPEG and
// PNG files labelled by class directory or by a CSV, TFRecord files of
// tf.train.Example records, WebDataset tar shards, and a synthetic dataset
// with CIFAR's shape that needs no files.
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
// wraps the context's. What the work writes (downloads, indexes,
// decompressed copies) appears under its final name only whole: it is
// written to a temporary name and renamed, and removed if the work fails or
// is cancelled.
//
// Bad data is found at open where that is cheap: sources that check every
// record then ([Checker]) list the bad ones before any batch is made, so a
// pipeline can stop at once or know what it will skip. An error about a
// particular record is a [*RecordError] that names the file, the byte
// offset and the sample index, so a person can find the bad bytes; it wraps
// a sentinel such as [ErrLabel], [ErrFormat] or [ErrCRC] for errors.Is.
// [Fingerprinter] names the exact data a source read, so that a cache of
// its output is found again only for that data.
package source
