// Package jpegdec is pipe's JPEG decoder, in Go: baseline and progressive
// Huffman-coded 8-bit JPEGs, decoded to the pixels libjpeg-turbo's defaults
// give (its accurate integer IDCT, its "fancy" chroma upsampling and the
// YCbCr conversion of its SIMD code), byte for byte, which is what Pillow,
// torchvision and TensorFlow decode with. It decodes whole images, or one
// window of an image at a reduced DCT scale (1/8, 1/4, 1/2), as the
// jpegturbo build does with libjpeg-turbo's jpeg_crop_scanline and
// jpeg_skip_scanlines: only the blocks the window needs go through the
// IDCT, and a baseline scan is read no further than the window's last row.
//
// Memory is bounded by the header: Need says, before anything is
// allocated, what a decode will take beside its output, and refuses an
// image whose scans could not fit in the bytes it was given (every block
// costs at least one bit) or whose buffers would exceed MaxMemory; so the
// caller can refuse such a file before allocating its pixels too. The
// buffers come from the decoder's own memory, kept from one image to the
// next, or from Scratch, memory the caller lends for one image.
//
// Arithmetic-coded, lossless, hierarchical and 12-bit JPEGs are refused
// with ErrUnsupported. Progressive files whose scans leave some of the
// first AC coefficients unrefined are decoded without libjpeg's block
// smoothing (which libjpeg applies only then), so their pixels may differ.
package jpegdec
