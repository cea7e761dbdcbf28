package transform

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zlib"
)

// maskPNG is what the decoder keeps between PNG masks: the zlib reader,
// the IDAT chunks of the mask being read, and two rows, so that a mask
// decodes without allocating once they have grown.
type maskPNG struct {
	zr   io.ReadCloser
	idat idatReader
	rows [2][]byte
	one  [1]byte // what a read past the pixels reads into
}

// idatReader reads the concatenated data of a PNG's IDAT chunks, as a
// flate.Reader (so the inflater needs no buffer of its own).
type idatReader struct {
	parts [][]byte
}

func (r *idatReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func (r *idatReader) ReadByte() (byte, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	b := r.parts[0][0]
	r.parts[0] = r.parts[0][1:]
	return b, nil
}

// decodeMaskPNG decodes a PNG mask of the kinds masks are stored as —
// 8-bit greyscale or paletted, or 16-bit greyscale, not interlaced — into
// dst, its size bounded as an image's, verifying every chunk's CRC and the
// stream's Adler-32 as image/png does. It reports false, having read
// nothing, for any other PNG, or bytes whose header it cannot read, which
// the general path decodes or refuses.
func (d *Decoder) decodeMaskPNG(dst *Mask, data []byte, size int) (bool, error) {
	if len(data) < 33 || string(data[:8]) != "\x89PNG\r\n\x1a\n" || binary.BigEndian.Uint32(data[8:]) != 13 || string(data[12:16]) != "IHDR" {
		return false, nil
	}
	w, h := int(binary.BigEndian.Uint32(data[16:])), int(binary.BigEndian.Uint32(data[20:]))
	depth, ctype, method, interlace := data[24], data[25], data[26]|data[27], data[28]
	if w <= 0 || h <= 0 || method != 0 || interlace != 0 || !(depth == 8 && (ctype == 0 || ctype == 3) || depth == 16 && ctype == 0) {
		return false, nil
	}
	if err := checkSize(w, h, d.maxPixels()); err != nil {
		return true, err
	}
	m := &d.mask
	m.idat.parts = m.idat.parts[:0]
	for at := 8; ; {
		if at+12 > len(data) {
			return true, fmt.Errorf("%w: the mask PNG ends inside a chunk, before IEND", ErrDecode)
		}
		n := int(binary.BigEndian.Uint32(data[at:]))
		if n > len(data)-at-12 {
			return true, fmt.Errorf("%w: the mask PNG's chunk at byte %d runs past its end", ErrDecode, at)
		}
		typ, body := data[at+4:at+8], data[at+8:at+8+n]
		if crc32.ChecksumIEEE(data[at+4:at+8+n]) != binary.BigEndian.Uint32(data[at+8+n:]) {
			return true, fmt.Errorf("%w: the mask PNG's %q chunk at byte %d fails its CRC", ErrDecode, typ, at)
		}
		at += 12 + n
		if string(typ) == "IDAT" {
			m.idat.parts = append(m.idat.parts, body)
		}
		if string(typ) == "IEND" {
			break
		}
	}
	var err error
	if m.zr == nil {
		m.zr, err = zlib.NewReader(&m.idat)
	} else {
		err = m.zr.(zlib.Resetter).Reset(&m.idat, nil)
	}
	if err != nil {
		return true, fmt.Errorf("%w: the mask PNG's image data: %v", ErrDecode, err)
	}
	bpp := int(depth) / 8
	stride := w * bpp
	for i := range m.rows {
		if cap(m.rows[i]) < stride+1 {
			m.rows[i] = make([]byte, stride+1)
		}
		m.rows[i] = m.rows[i][:stride+1]
	}
	prev, cur := m.rows[0], m.rows[1]
	clear(prev)
	resizeMask(dst, h, w, size)
	for y := range h {
		if _, err := io.ReadFull(m.zr, cur); err != nil {
			return true, fmt.Errorf("%w: the mask PNG's image data ends at row %d of %d: %v", ErrDecode, y, h, err)
		}
		if err := unfilter(cur[0], cur[1:], prev[1:], bpp); err != nil {
			return true, fmt.Errorf("%w: the mask PNG's row %d: %v", ErrDecode, y, err)
		}
		row, out := cur[1:], dst.Pix[y*w*size:(y+1)*w*size]
		switch {
		case depth == 8 && size == 1:
			copy(out, row)
		case depth == 8:
			for x, v := range row {
				binary.LittleEndian.PutUint16(out[2*x:], uint16(v))
			}
		case size == 1:
			for x := range w {
				v := binary.BigEndian.Uint16(row[2*x:])
				if v > 255 {
					return true, fmt.Errorf("%w: the 16-bit mask holds %d at (%d, %d), over 255: read it as uint16", ErrDecode, v, x, y)
				}
				out[x] = byte(v)
			}
		default:
			for x := range w {
				binary.LittleEndian.PutUint16(out[2*x:], binary.BigEndian.Uint16(row[2*x:]))
			}
		}
		prev, cur = cur, prev
	}
	// Reading past the pixels checks the stream's Adler-32.
	if n, err := m.zr.Read(m.one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("more data than its rows")
		}
		return true, fmt.Errorf("%w: the mask PNG's image data: %v", ErrDecode, err)
	}
	return true, nil
}

// unfilter undoes PNG filter f on row cur, given the row before it (zeros
// for the first), pixels of bpp bytes apart.
func unfilter(f byte, cur, prev []byte, bpp int) error {
	switch f {
	case 0:
	case 1:
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case 2:
		for i := range cur {
			cur[i] += prev[i]
		}
	case 3:
		for i := range bpp {
			cur[i] += prev[i] / 2
		}
		for i := bpp; i < len(cur); i++ {
			cur[i] += byte((int(cur[i-bpp]) + int(prev[i])) / 2)
		}
	case 4:
		for i := range bpp {
			cur[i] += prev[i]
		}
		for i := bpp; i < len(cur); i++ {
			cur[i] += paeth(cur[i-bpp], prev[i], prev[i-bpp])
		}
	default:
		return fmt.Errorf("unknown filter %d", f)
	}
	return nil
}

// paeth is the PNG Paeth predictor of a (left), b (above), c (above left).
func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := max(p-int(a), int(a)-p), max(p-int(b), int(b)-p), max(p-int(c), int(c)-p)
	if pa <= pb && pa <= pc {
		return a
	}
	if pb <= pc {
		return b
	}
	return c
}
