package transform

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// DecodeMask decodes an encoded mask into dst as values of size bytes (1:
// uint8; 2: uint16, little-endian), growing dst.Pix only when it is too
// small. A mask is a PNG of class ids, 8- or 16-bit greyscale (or 1, 2
// or 4-bit, read as the ids the bits hold) or paletted, where the id is
// the palette index (how VOC and ADE20K store theirs), or a greyscale
// JPEG. A colour PNG or JPEG is refused: its colours are not class ids. A
// 16-bit value over 255 is an error where size is 1. The size is read
// from the header and bounded as an image's is (the decoder's MaxPixels,
// MaxSide) before anything is allocated for it; errors wrap [ErrDecode].
//
// Like every call of the decoder, it first releases what the decoder's
// last call returned ([Decoder.Release]): a sample's mask is decoded
// before its image.
func (d *Decoder) DecodeMask(dst *Mask, data []byte, size int) error {
	if size != 1 && size != 2 {
		return fmt.Errorf("%w: mask values of %d bytes (want 1 or 2)", ErrParam, size)
	}
	d.Release()
	if isJPEG(data) {
		return d.decodeMaskJPEG(dst, data, size)
	}
	if ok, err := d.decodeMaskPNG(dst, data, size); ok {
		return err
	}
	w, h, bpp, err := pngHeader(data, d.maxPixels())
	if err != nil {
		return err
	}
	// pngHeader read IHDR, which a PNG must start with: its bit depth and
	// colour type are bytes 24 and 25 of the file.
	depth, ctype := data[24], data[25]
	if ctype != 0 && ctype != 3 {
		return fmt.Errorf("%w: the mask is a colour PNG (colour type %d): store class ids, as greyscale or palette indices", ErrDecode, ctype)
	}
	var extra int64
	if n := int64(bpp) * int64(w) * int64(h); n > ownBytes {
		extra = n
		if _, err := decodeMemory.get(0, 0, extra); err != nil {
			return err
		}
	}
	img, err := png.Decode(bytes.NewReader(data))
	if extra > 0 {
		if p := pixStart(img); p != nil {
			decodeMemory.leave(p, extra)
		} else {
			decodeMemory.put(nil, extra)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	resizeMask(dst, h, w, size)
	switch m := img.(type) {
	case *image.Gray:
		// Go's decoder scales greyscale of fewer than 8 bits to 0-255.
		div := byte(1)
		if depth < 8 {
			div = byte(255 / (1<<depth - 1))
		}
		for y := range h {
			for x, v := range m.Pix[y*m.Stride : y*m.Stride+w] {
				dst.set(y*w+x, uint16(v/div))
			}
		}
	case *image.Paletted:
		for y := range h {
			for x, v := range m.Pix[y*m.Stride : y*m.Stride+w] {
				dst.set(y*w+x, uint16(v))
			}
		}
	case *image.Gray16:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+2*w]
			for x := range w {
				v := binary.BigEndian.Uint16(row[2*x:])
				if size == 1 && v > 255 {
					return fmt.Errorf("%w: the 16-bit mask holds %d at (%d, %d), over 255: read it as uint16", ErrDecode, v, x, y)
				}
				dst.set(y*w+x, v)
			}
		}
	default:
		return fmt.Errorf("%w: the mask PNG decodes to %T: store class ids, as greyscale or palette indices", ErrDecode, img)
	}
	return nil
}

// decodeMaskJPEG decodes a greyscale JPEG mask with the image decoder,
// whose three equal channels it writes into dst.Pix; the first is the
// mask.
func (d *Decoder) decodeMaskJPEG(dst *Mask, data []byte, size int) error {
	c, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if c.ColorModel != color.GrayModel {
		return fmt.Errorf("%w: the mask is a colour JPEG: store class ids, as a greyscale image", ErrDecode)
	}
	t, w, h, err := d.header(data)
	if err != nil {
		return err
	}
	img := Image{Pix: dst.Pix[:0]}
	if err := d.decodeJPEG(t, &img, 8, 0, 0, w, h); err != nil {
		return err
	}
	dst.Pix = img.Pix
	if size == 1 {
		*dst = Mask{Pix: dst.Pix[:w*h], H: h, W: w, Size: 1}
		return nil
	}
	// Widen in place from the end, where no value is read after it is
	// written: the mask's 2·w·h bytes fit in the 3·w·h decoded.
	for i := w*h - 1; i >= 0; i-- {
		binary.LittleEndian.PutUint16(dst.Pix[2*i:], uint16(dst.Pix[i]))
	}
	*dst = Mask{Pix: dst.Pix[:2*w*h], H: h, W: w, Size: 2}
	return nil
}

// resizeMask makes m an h×w mask of size-byte values, growing Pix only
// when it is too small.
func resizeMask(m *Mask, h, w, size int) {
	n := h * w * size
	if cap(m.Pix) < n {
		m.Pix = make([]byte, n)
	}
	*m = Mask{Pix: m.Pix[:n], H: h, W: w, Size: size}
}

// set sets value i of m.
func (m *Mask) set(i int, v uint16) {
	if m.Size == 1 {
		m.Pix[i] = byte(v)
		return
	}
	binary.LittleEndian.PutUint16(m.Pix[2*i:], v)
}
