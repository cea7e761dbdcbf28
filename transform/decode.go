package transform

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
)

// ErrDecode is wrapped by every error Decode returns for bytes that are not
// a readable JPEG or PNG.
var ErrDecode = errors.New("cannot decode image")

// Decode decodes a JPEG or PNG into dst as 3-channel CHW RGB with Go's
// decoders: greyscale is repeated into the three channels, CMYK and YCCK
// JPEGs are converted, and alpha is dropped. dst's memory is reused when it
// is large enough. An image over [DefaultMaxPixels] is refused from its
// header, before its pixels are allocated, with [ErrTooLarge]; a [Decoder]
// has a configurable limit, and is faster in the jpegturbo build.
func Decode(dst *Image, data []byte) error { return decode(dst, data, DefaultMaxPixels) }

// decode is Decode with a limit of limit pixels.
func decode(dst *Image, data []byte, limit int) error {
	var config func(io.Reader) (image.Config, error)
	var dec func(io.Reader) (image.Image, error)
	switch {
	case isJPEG(data):
		config, dec = jpeg.DecodeConfig, jpeg.Decode
	case len(data) >= 8 && bytes.Equal(data[:8], []byte("\x89PNG\r\n\x1a\n")):
		config, dec = png.DecodeConfig, png.Decode
	case len(data) == 0:
		return fmt.Errorf("%w: empty", ErrDecode)
	default:
		return fmt.Errorf("%w: not JPEG or PNG (starts % x)", ErrDecode, data[:min(len(data), 4)])
	}
	// The header first: Go's decoders allocate the whole image as soon as
	// they know its size.
	c, err := config(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if err := checkSize(c.Width, c.Height, limit); err != nil {
		return err
	}
	img, err := dec(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst.Resize(3, h, w)
	r, g, bl := dst.Plane(0), dst.Plane(1), dst.Plane(2)
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcr(r, g, bl, m)
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
	case *image.CMYK:
		for y := range h {
			for x := range w {
				i := y*m.Stride + 4*x
				c := color.CMYK{C: m.Pix[i], M: m.Pix[i+1], Y: m.Pix[i+2], K: m.Pix[i+3]}
				cr, cg, cb := color.CMYKToRGB(c.C, c.M, c.Y, c.K)
				r[y*w+x], g[y*w+x], bl[y*w+x] = cr, cg, cb
			}
		}
	default:
		for y := range h {
			for x := range w {
				cr, cg, cb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				r[y*w+x], g[y*w+x], bl[y*w+x] = uint8(cr>>8), uint8(cg>>8), uint8(cb>>8)
			}
		}
	}
	return nil
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

// ycbcr converts a JPEG's YCbCr planes to RGB planes with the JFIF
// equations Go's color.YCbCrToRGB uses (16.16 fixed point), for any chroma
// subsampling.
func ycbcr(r, g, b []byte, m *image.YCbCr) {
	bd := m.Bounds()
	w, h := bd.Dx(), bd.Dy()
	// Chroma columns and rows per luma column and row.
	var cx, cy int
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
		cx, cy = 0, 0
	case image.YCbCrSubsampleRatio422:
		cx, cy = 1, 0
	case image.YCbCrSubsampleRatio420:
		cx, cy = 1, 1
	case image.YCbCrSubsampleRatio440:
		cx, cy = 0, 1
	case image.YCbCrSubsampleRatio411:
		cx, cy = 2, 0
	case image.YCbCrSubsampleRatio410:
		cx, cy = 2, 1
	}
	x0, y0 := bd.Min.X, bd.Min.Y
	for y := range h {
		yrow := m.Y[(y0+y-m.Rect.Min.Y)*m.YStride+(x0-m.Rect.Min.X):]
		crow := ((y0+y)>>cy - m.Rect.Min.Y>>cy) * m.CStride
		o := y * w
		for x := range w {
			ci := crow + ((x0+x)>>cx - m.Rect.Min.X>>cx)
			yy := int32(yrow[x]) * 0x10101
			cb := int32(m.Cb[ci]) - 128
			cr := int32(m.Cr[ci]) - 128
			rr := yy + 91881*cr
			gg := yy - 22554*cb - 46802*cr
			bb := yy + 116130*cb
			r[o+x], g[o+x], b[o+x] = clamp16(rr), clamp16(gg), clamp16(bb)
		}
	}
}

// clamp16 turns a 16.16 fixed-point value into a byte, clamped to 0..255.
func clamp16(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}
