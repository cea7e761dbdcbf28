// Package source reads datasets of labelled images: CIFAR-10 and CIFAR-100
// in their official binary distributions, and a synthetic dataset with
// CIFAR's shape that needs no files.
//
// A [Source] is random access by index and safe for concurrent use: the
// pipeline's workers read different samples at once. Sources decode nothing
// they do not have to: a CIFAR record is already pixels, so Read hands out a
// view of the loaded file rather than a copy.
//
// Errors about a particular record are [*RecordError] values that name the
// file, the byte offset and the sample index, so a person can find the bad
// bytes; they wrap sentinel errors such as [ErrLabel] for errors.Is.
package source
