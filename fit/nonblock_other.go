//go:build !unix

package fit

// openNonblock is no flag here: the look at the file before it is opened
// is what refuses anything but a regular file.
const openNonblock = 0
