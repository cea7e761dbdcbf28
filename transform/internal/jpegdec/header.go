package jpegdec

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by the error for a JPEG this decoder does not
// decode: arithmetic-coded, lossless, hierarchical or 12-bit ones, and
// component counts other than 1, 3 and 4.
var ErrUnsupported = errors.New("unsupported JPEG")

// ErrTruncated is wrapped by the error for data that ends inside a scan, or
// before the end of a progressive or multi-scan image.
var ErrTruncated = errors.New("premature end of JPEG file")

// Markers.
const (
	mSOF0 = 0xC0 // baseline
	mSOF1 = 0xC1 // extended sequential, Huffman
	mSOF2 = 0xC2 // progressive, Huffman
	mDHT  = 0xC4
	mJPG  = 0xC8
	mDAC  = 0xCC
	mRST0 = 0xD0
	mRST7 = 0xD7
	mSOI  = 0xD8
	mEOI  = 0xD9
	mSOS  = 0xDA
	mDQT  = 0xDB
	mDNL  = 0xDC
	mDRI  = 0xDD
	mAPP0 = 0xE0
	mAPPE = 0xEE
)

// Colour spaces of the image data, as libjpeg's default_decompress_parms
// guesses them.
const (
	csGray = iota
	csYCbCr
	csRGB
	csCMYK
	csYCCK
)

// component is one colour component of the frame, with its geometry for
// the decode in progress.
type component struct {
	id   byte
	h, v int // sampling factors
	tq   int // quantisation table selector
	q    [64]int32
	qset bool // q latched (from the first scan that includes the component)

	bw, bh   int // blocks per row and per column of the padded MCU grid
	ss       int // DCT scaled size at the current scale
	dsw, dsh int // libjpeg's downsampled_width and _height at that scale
	fx, fy   int // upsampling factors, output pixels per sample
	fancy    bool
	bx0, bx1 int // block columns the window needs
	plane    []byte
	stride   int
	py0      int     // the first sample row plane holds
	coef     []int16 // the whole-image coefficients of a multi-scan image
	pred     int32   // DC prediction
	dct, act int     // table selectors in the current scan
	row      []byte  // an upsampled row
}

// Decoder decodes JPEGs, reusing its memory from one image to the next. It
// is not safe for concurrent use.
type Decoder struct {
	// MaxMemory caps, in bytes, what one image's buffers (sample planes and
	// a multi-scan image's coefficients) may take; 0 is no cap. An image
	// needing more is an error before anything is allocated.
	MaxMemory int
	// Scratch, when it holds at least the bytes Need gives, is the memory
	// the next Decode takes the image's buffers from, instead of memory of
	// the decoder's own, which it keeps for the next image. That Decode
	// sets Scratch back to nil and keeps no reference to it once it
	// returns.
	Scratch []byte

	data        []byte
	w, h        int
	nc          int
	comp        [4]component
	hmax, vmax  int
	progressive bool
	frame       bool
	cs          int
	jfif        bool
	adobe       bool
	transform   int
	qt          [4][64]int32 // natural order
	qdef        [4]bool
	dc, ac      [4]huffTable
	ri          int // restart interval in MCUs
	sos         int // offset of the first SOS marker

	// The decode in progress.
	outW, outH   int
	mcusX, mcusY int
	blocks       [10][64]int16
	mem          []byte
	coefMem      []int16
}

// New returns a decoder.
func New() *Decoder { return &Decoder{} }

// Scaled is the length an n-pixel side has when decoded at scale num/8,
// rounded up as libjpeg rounds it.
func Scaled(n, num int) int { return (n*num + 7) / 8 }

func formatErr(format string, a ...any) error { return fmt.Errorf(format, a...) }

// reset forgets the last image, keeping the memory of its buffers (and not
// copying the Huffman tables, 100 KB).
func (d *Decoder) reset() {
	for i := range d.comp {
		d.comp[i] = component{row: d.comp[i].row}
	}
	for i := range d.dc {
		d.dc[i].defined, d.ac[i].defined = false, false
	}
	d.data, d.w, d.h, d.nc, d.hmax, d.vmax = nil, 0, 0, 0, 0, 0
	d.progressive, d.frame, d.jfif, d.adobe = false, false, false, false
	d.cs, d.transform, d.ri, d.sos = 0, 0, 0, 0
	d.qdef = [4]bool{}
}

// Header reads the markers of data up to its first scan and returns the
// image's size. data must not change until Decode.
func (d *Decoder) Header(data []byte) (w, h int, err error) {
	d.reset()
	if len(data) == 0 {
		return 0, 0, errors.New("empty")
	}
	if len(data) < 2 || data[0] != 0xFF || data[1] != mSOI {
		return 0, 0, errors.New("not a JPEG file: starts with no SOI marker")
	}
	d.data = data
	p := 2
	for {
		m, at, err := d.nextMarker(p)
		if err != nil {
			return 0, 0, err
		}
		if m == mSOS {
			if !d.frame {
				return 0, 0, errors.New("scan before the frame header (SOF)")
			}
			d.sos = at
			return d.w, d.h, nil
		}
		if m == mEOI {
			return 0, 0, errors.New("no image: EOI before any scan")
		}
		seg, next, err := d.segment(at)
		if err != nil {
			return 0, 0, err
		}
		if err := d.tables(m, seg); err != nil {
			return 0, 0, err
		}
		p = next
	}
}

// nextMarker finds the marker at or after p, skipping any bytes before it
// (as libjpeg does, with a warning) and fill bytes, and returns its code and
// the offset of its 0xFF.
func (d *Decoder) nextMarker(p int) (m byte, at int, err error) {
	data := d.data
	for {
		for p < len(data) && data[p] != 0xFF {
			p++
		}
		for p+1 < len(data) && data[p+1] == 0xFF {
			p++
		}
		if p+1 >= len(data) {
			return 0, 0, fmt.Errorf("%w: no marker where one should be", ErrTruncated)
		}
		if data[p+1] != 0 {
			return data[p+1], p, nil
		}
		p += 2
	}
}

// segment returns the body of the marker segment at, and the offset after
// it.
func (d *Decoder) segment(at int) ([]byte, int, error) {
	if at+4 > len(d.data) {
		return nil, 0, fmt.Errorf("%w: in a marker segment", ErrTruncated)
	}
	n := int(d.data[at+2])<<8 | int(d.data[at+3])
	if n < 2 {
		return nil, 0, fmt.Errorf("marker 0x%02X: bad length %d", d.data[at+1], n)
	}
	if at+2+n > len(d.data) {
		return nil, 0, fmt.Errorf("%w: in a marker segment", ErrTruncated)
	}
	return d.data[at+4 : at+2+n], at + 2 + n, nil
}

// tables handles one marker segment outside a scan.
func (d *Decoder) tables(m byte, seg []byte) error {
	switch {
	case m == mSOF0 || m == mSOF1 || m == mSOF2:
		if d.frame {
			return errors.New("two frame headers (SOF)")
		}
		return d.sof(seg, m == mSOF2)
	case m == mDHT:
		return d.dht(seg)
	case m == mDQT:
		return d.dqt(seg)
	case m == mDRI:
		if len(seg) != 2 {
			return errors.New("DRI: bad length")
		}
		d.ri = int(seg[0])<<8 | int(seg[1])
	case m == mAPP0:
		if len(seg) >= 5 && string(seg[:5]) == "JFIF\x00" {
			d.jfif = true
		}
	case m == mAPPE:
		if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
			d.adobe = true
			d.transform = int(seg[11])
		}
	case m == mDAC || (m >= 0xC9 && m <= 0xCF && m != mDAC):
		return fmt.Errorf("%w: arithmetic coding (marker 0x%02X)", ErrUnsupported, m)
	case m == 0xC3 || (m >= 0xC5 && m <= 0xC7):
		return fmt.Errorf("%w: lossless or hierarchical (marker 0x%02X)", ErrUnsupported, m)
	case m == mDNL:
		return fmt.Errorf("%w: DNL marker", ErrUnsupported)
	case m == mSOI:
		return errors.New("a second SOI marker")
	case m >= mRST0 && m <= mRST7:
		return fmt.Errorf("RST%d marker outside a scan", m-mRST0)
	}
	return nil
}

func (d *Decoder) sof(seg []byte, progressive bool) error {
	if len(seg) < 6 {
		return errors.New("SOF: too short")
	}
	if seg[0] != 8 {
		return fmt.Errorf("%w: %d-bit samples", ErrUnsupported, seg[0])
	}
	d.h = int(seg[1])<<8 | int(seg[2])
	d.w = int(seg[3])<<8 | int(seg[4])
	d.nc = int(seg[5])
	if d.h == 0 {
		return fmt.Errorf("%w: height 0 (a DNL marker gives it)", ErrUnsupported)
	}
	if d.w == 0 {
		return errors.New("SOF: width 0")
	}
	if d.nc != 1 && d.nc != 3 && d.nc != 4 {
		return fmt.Errorf("%w: %d components", ErrUnsupported, d.nc)
	}
	if len(seg) != 6+3*d.nc {
		return errors.New("SOF: bad length")
	}
	d.hmax, d.vmax = 1, 1
	for i := range d.nc {
		c := &d.comp[i]
		c.id = seg[6+3*i]
		c.h, c.v = int(seg[7+3*i]>>4), int(seg[7+3*i]&15)
		c.tq = int(seg[8+3*i])
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
			return fmt.Errorf("SOF: sampling factors %dx%d", c.h, c.v)
		}
		if c.tq > 3 {
			return fmt.Errorf("SOF: quantisation table %d", c.tq)
		}
		for j := range i {
			if d.comp[j].id == c.id {
				return fmt.Errorf("SOF: component id %d twice", c.id)
			}
		}
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	if d.nc == 1 {
		// A single component's sampling factors change nothing: its MCU
		// is one block, as libjpeg decodes it.
		d.comp[0].h, d.comp[0].v, d.hmax, d.vmax = 1, 1, 1, 1
	}
	d.progressive = progressive
	d.frame = true
	d.cs = d.colorSpace()
	return nil
}

// colorSpace is libjpeg's guess of the colour space (jdapimin.c).
func (d *Decoder) colorSpace() int {
	switch d.nc {
	case 1:
		return csGray
	case 3:
		switch {
		case d.jfif:
			return csYCbCr
		case d.adobe:
			if d.transform == 0 {
				return csRGB
			}
			return csYCbCr
		}
		c := d.comp[:3]
		if c[0].id == 82 && c[1].id == 71 && c[2].id == 66 {
			return csRGB
		}
		return csYCbCr
	}
	if d.adobe && d.transform != 0 {
		return csYCCK
	}
	return csCMYK
}

func (d *Decoder) dqt(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, int(seg[0]&15)
		if tq > 3 || pq > 1 {
			return fmt.Errorf("DQT: table %d, precision %d", tq, pq)
		}
		n := 64 << pq
		if len(seg) < 1+n {
			return errors.New("DQT: too short")
		}
		for k := range 64 {
			v := int32(seg[1+k])
			if pq == 1 {
				v = int32(seg[1+2*k])<<8 | int32(seg[2+2*k])
			}
			d.qt[tq][zigzag[k]] = v
		}
		d.qdef[tq] = true
		seg = seg[1+n:]
	}
	return nil
}

func (d *Decoder) dht(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return errors.New("DHT: too short")
		}
		tc, th := seg[0]>>4, int(seg[0]&15)
		if tc > 1 || th > 3 {
			return fmt.Errorf("DHT: table class %d, number %d", tc, th)
		}
		var counts [17]int
		n := 0
		for l := 1; l <= 16; l++ {
			counts[l] = int(seg[l])
			n += counts[l]
		}
		if n > 256 || len(seg) < 17+n {
			return errors.New("DHT: bad table")
		}
		t := &d.dc[th]
		if tc == 1 {
			t = &d.ac[th]
		}
		if err := t.build(&counts, seg[17:17+n], tc == 0); err != nil {
			return err
		}
		seg = seg[17+n:]
	}
	return nil
}

// zigzag maps a zigzag index to the natural (row-major) one; the entries
// past 63 catch runs past the end of a block in corrupt data, as libjpeg's
// jpeg_natural_order does.
var zigzag = [64 + 80]uint8{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
}
