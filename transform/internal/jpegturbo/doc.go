// Package jpegturbo decodes JPEGs with libjpeg-turbo through cgo: whole
// images, or one window of an image at a reduced DCT scale (M/8), which is
// what makes random_resized_crop and resize cheap on large photographs.
// Two steps are pipe's own, swapped in for libjpeg's modules after
// jpeg_start_decompress: the Huffman decoder of baseline scans (huff.c)
// and YCbCr to planar RGB conversion (rgb.c); both give libjpeg's exact
// output, faster. It is its own package because a package using cgo
// cannot hold Go assembly, and package transform has some. Only the jpegturbo build has
// its functions; it links libjpeg statically (Debian's libjpeg62-turbo-dev,
// which scripts/libjpeg-turbo fetches where it is not installed).
package jpegturbo

// Scaled is the length an n-pixel side has when decoded at scale num/8, as
// libjpeg rounds it (up).
func Scaled(n, num int) int { return (n*num + 7) / 8 }
