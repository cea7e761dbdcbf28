package transform

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
)

// ErrDecode is wrapped by every error Decode returns for bytes that are not
// a readable JPEG or PNG.
var ErrDecode = errors.New("cannot decode image")

// Decode decodes a JPEG or PNG into dst as 3-channel CHW RGB: a JPEG to
// the pixels libjpeg-turbo gives (with pipe's own decoder, or libjpeg-turbo
// in the jpegturbo build), a PNG with Go's decoder. Greyscale is repeated
// into the three channels, CMYK and YCCK JPEGs are converted, and alpha is
// dropped. dst's memory is reused when it is large enough. An image over
// [DefaultMaxPixels] is refused from its header, before its pixels are
// allocated, with [ErrTooLarge]. A [Decoder] has a configurable limit,
// and keeps its memory from one image to the next.
func Decode(dst *Image, data []byte) error { return NewDecoder(false).Decode(dst, data) }

// pngHeader reads a PNG's header: its size, within limit pixels, and the
// bytes a pixel Go's decoder allocates for it.
func pngHeader(data []byte, limit int) (w, h, bpp int, err error) {
	switch {
	case len(data) >= 8 && bytes.Equal(data[:8], []byte("\x89PNG\r\n\x1a\n")):
	case len(data) == 0:
		return 0, 0, 0, fmt.Errorf("%w: empty", ErrDecode)
	default:
		return 0, 0, 0, fmt.Errorf("%w: not JPEG or PNG (starts % x)", ErrDecode, data[:min(len(data), 4)])
	}
	// The header first: Go's decoder allocates the whole image as soon as
	// it knows its size.
	c, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if err := checkSize(c.Width, c.Height, limit); err != nil {
		return 0, 0, 0, err
	}
	switch c.ColorModel {
	case color.GrayModel:
		bpp = 1
	case color.Gray16Model:
		bpp = 2
	case color.RGBAModel, color.NRGBAModel:
		bpp = 4
	default: // 16-bit colour; a palette takes 1 but is counted as 8
		bpp = 8
	}
	return c.Width, c.Height, bpp, nil
}

// planes writes img into dst as RGB planes.
func planes(dst *Image, img image.Image) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst.Resize(3, h, w)
	r, g, bl := dst.Plane(0), dst.Plane(1), dst.Plane(2)
	switch m := img.(type) {
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			copy(r[y*w:], row)
			copy(g[y*w:], row)
			copy(bl[y*w:], row)
		}
	case *image.RGBA:
		interleaved(r, g, bl, m.Pix, m.Stride, w, h, 4)
	case *image.NRGBA:
		interleaved(r, g, bl, m.Pix, m.Stride, w, h, 4)
	default:
		for y := range h {
			for x := range w {
				cr, cg, cb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				r[y*w+x], g[y*w+x], bl[y*w+x] = uint8(cr>>8), uint8(cg>>8), uint8(cb>>8)
			}
		}
	}
}

func isJPEG(data []byte) bool {
	return len(data) >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff
}

// interleaved splits packed RGB(A) rows into planes.
func interleaved(r, g, b, pix []byte, stride, w, h, n int) {
	for y := range h {
		row := pix[y*stride : y*stride+n*w]
		o := y * w
		for x := range w {
			r[o+x], g[o+x], b[o+x] = row[n*x], row[n*x+1], row[n*x+2]
		}
	}
}
