package transform

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"

	"github.com/pipefeed/pipe/transform/internal/jpegdec"
	"github.com/pipefeed/pipe/transform/internal/jpegturbo"
)

// Region is what a [RegionOp] reads and writes for one input: the window
// of Y, X, H, W source pixels it resamples to OH×OW.
type Region struct{ Y, X, H, W, OH, OW int }

// A RegionOp reads one window of its input and resamples it to its output
// (resize, random_resized_crop), so a decoder that can decode part of a JPEG
// at a reduced DCT scale can do that op's work with far less of it: see
// [Decoder.DecodeFor].
type RegionOp interface {
	Op
	// Region draws the op's parameters for an h×w input, exactly as Apply
	// would for that input, and returns the window and output size.
	Region(h, w int, r *Rand) Region
	// Filter is the resampling filter.
	Filter() Interp
}

// jpegCodec is a JPEG decoder of windows at DCT scales: pipe's own
// (jpegdec), or libjpeg-turbo in the jpegturbo build. Both give the same
// pixels.
type jpegCodec interface {
	Header(data []byte) (w, h int, err error)
	// Need is the memory a decode of the window takes beside its output,
	// or the error that decode would be, found before anything is
	// allocated for it.
	Need(num, x0, y0, cw, ch int) (int, error)
	Decode(dst []byte, num, x0, y0, cw, ch int) error
	Abort()
}

// DecoderName names the JPEG decoder of this build: pipe's own, in Go, or
// the libjpeg-turbo release of the jpegturbo build. Both decode to the
// same pixels (see [DecodedPixels]).
func DecoderName() string {
	if jpegturbo.Compiled {
		return jpegturbo.Version
	}
	return "pipe's JPEG decoder (Go)"
}

// DecodedPixels names the pixels every build's JPEG decoder gives, for
// cache fingerprints: libjpeg-turbo's with its default settings (accurate
// integer IDCT, fancy upsampling), which pipe's own decoder reproduces byte
// for byte, at every DCT scale and in every window. Caches made by one
// build are read by the other.
func DecodedPixels() string { return "libjpeg-turbo" }

// DecoderModules says whose Huffman decoder and colour conversion the
// jpegturbo build runs inside libjpeg-turbo: pipe's, or libjpeg's own where
// the environment sets PIPE_LIBJPEG_ONLY=1 (read once, at start). It is ""
// in the default build.
func DecoderModules() string {
	switch {
	case !jpegturbo.Compiled:
		return ""
	case jpegturbo.LibjpegOnly:
		return "libjpeg's own Huffman decoder and colour conversion (PIPE_LIBJPEG_ONLY=1)"
	}
	return "pipe's Huffman decoder and colour conversion"
}

// DecodesInC reports whether JPEGs are decoded in C, through cgo (the
// jpegturbo build): a worker in a C call holds its thread, which the
// scheduler then has to work around.
func DecodesInC() bool { return jpegturbo.Compiled }

// DefaultMaxPixels is the largest image, in pixels (width × height), that
// [Decode] and a [Decoder] whose MaxPixels is 0 decode: 2²⁶ = 67,108,864,
// an 8192×8192 square. It is above the largest camera photographs (a 61-MP
// full-frame sensor writes 9504×6336), and it bounds what one image can
// cost a worker, where a header of a few bytes could otherwise claim
// gigabytes: 192 MiB for the RGB result, plus what the decoder holds
// beside it. In the jpegturbo build that is at most 528 MiB (libjpeg's cap
// of 8 bytes a pixel plus 16 MiB, enough for the whole-image coefficient
// buffer of a progressive 4:4:4 CMYK JPEG). In the default build it is
// at most 12 bytes a pixel plus 16 MiB for that same JPEG (its
// coefficients, 8 bytes a pixel, and sample planes, 4), 512 MiB for a
// 16-bit RGBA PNG, and a few bytes a pixel for other images. Twice
// the pixels would double each figure. What all workers decoding such
// images hold at once is bounded by the decode memory budget
// ([SetDecodeMemory]), which by default holds any one of them, unless the
// process's memory limit leaves less room: an image needing more than the
// budget is then an [ErrOverBudget] error.
const DefaultMaxPixels = 1 << 26

// maxSide is the longest side decoded, whatever the pixel limit: the cache
// stores sides in 16 bits.
const maxSide = 1 << 15

// ErrTooLarge is wrapped by the error for an image whose header claims more
// pixels than the decoder's limit or a side over 32768. It wraps
// [ErrDecode]: such a file is a corrupt record, which on_error=skip skips.
var ErrTooLarge = fmt.Errorf("%w: too large", ErrDecode)

// ErrOverBudget is wrapped by the error for an image whose decode needs
// more memory than the process's whole decode memory budget
// ([SetDecodeMemory]). It wraps [ErrTooLarge]: such an image is a record
// that on_error=skip skips, where decoding it could exhaust the memory the
// process may use.
var ErrOverBudget = fmt.Errorf("%w for the decode memory budget", ErrTooLarge)

// Decoder decodes JPEG and PNG images to 3-channel CHW RGB (see [Decode]),
// reusing its memory and its JPEG decoder (in the jpegturbo build, a
// libjpeg decompressor) from one image to the next: up to 8 MiB of buffers
// and 8 MiB of decoded window of its own; a large image's memory comes
// from the process's decode memory budget ([SetDecodeMemory]) and goes
// back to it (see [Decoder.Release]). It is not safe for concurrent use:
// keep one per worker.
type Decoder struct {
	// Reduce lets DecodeFor decode at a reduced DCT scale (M/8) when the
	// op's output needs no more pixels than that gives. Without it
	// DecodeFor still decodes only the window the op reads, at full scale,
	// and its result equals Decode followed by the op.
	Reduce bool
	// MaxPixels is the largest image (width × height) decoded; 0, or a
	// negative value, means DefaultMaxPixels. The size is read from the
	// header before any pixel memory is allocated, and a larger image is
	// an ErrTooLarge error. It also caps the JPEG decoder's own memory for
	// one image, at 12 bytes a pixel of the limit plus 16 MiB (8 in the
	// jpegturbo build, libjpeg's; see DefaultMaxPixels).
	MaxPixels int
	codec     jpegCodec
	win       Image  // the decoded window, in own or in lent memory
	own       []byte // the decoder's own memory for windows, ownBytes at most
	lent      *lent  // the budget's memory it holds: a large window
	lentWin   bool   // win is in lent's memory
	mask      maskPNG
}

// NewDecoder returns a decoder with the default pixel limit; reduce sets
// Reduce.
func NewDecoder(reduce bool) *Decoder { return &Decoder{Reduce: reduce} }

// maxPixels is the decoder's limit, MaxPixels or the default.
func (d *Decoder) maxPixels() int {
	if d.MaxPixels > 0 {
		return d.MaxPixels
	}
	return DefaultMaxPixels
}

func (d *Decoder) jpeg() (jpegCodec, error) {
	if d.codec == nil {
		if !jpegturbo.Compiled {
			d.codec = jpegdec.New()
			return d.codec, nil
		}
		t, err := jpegturbo.New()
		if err != nil {
			return nil, decodeErr(err)
		}
		d.codec = t
	}
	return d.codec, nil
}

// Decode decodes data into dst, as the package's Decode does. dst is the
// caller's memory; what decoding takes beside it comes from the process's
// decode memory budget where it is large (see [SetDecodeMemory]).
func (d *Decoder) Decode(dst *Image, data []byte) error {
	d.Release()
	if !isJPEG(data) {
		return d.decodePNG(dst, data)
	}
	t, w, h, err := d.header(data)
	if err != nil {
		return err
	}
	return d.decodeJPEG(t, dst, 8, 0, 0, w, h)
}

// decodeWhole decodes data whole into the decoder's window, as Decode
// would into an image of the caller's, and returns the window: valid until
// the decoder's next call or Release.
func (d *Decoder) decodeWhole(data []byte) (*Image, error) {
	d.Release()
	if !isJPEG(data) {
		return &d.win, d.decodePNG(nil, data)
	}
	t, w, h, err := d.header(data)
	if err != nil {
		return nil, err
	}
	return &d.win, d.decodeJPEG(t, nil, 8, 0, 0, w, h)
}

// Release gives back to the process's decode memory budget (see
// [SetDecodeMemory]) what the decoder holds of it between calls: the
// window of a large image it decoded last, which [Decoder.Decoded] and the
// results of [Decoder.DecodeFor] and [Chain.ApplyEncoded] may be, so they
// are not to be used after it. The decoder's next call does the same. A
// pipeline's workers call it after each chunk of samples, so that no
// memory stays with a worker waiting for work; a goroutine that decodes
// with several decoders releases each before decoding with another, since
// a decode waiting for the budget must not wait on its own goroutine. A
// decoder dropped without Release gives the memory back when it is
// garbage collected.
func (d *Decoder) Release() {
	if d.lentWin {
		decodeMemory.giveBack(d.lent)
		d.win, d.lentWin = Image{}, false
	}
}

// decodeJPEG decodes the window of cw×ch pixels at (x0, y0), at scale
// num/8, of the image whose header t read, into dst, or into the
// decoder's window when dst is nil. Memory beyond what the decoder keeps
// for itself (ownBytes of each kind) comes from the budget, asked for
// before any of it is allocated.
func (d *Decoder) decodeJPEG(t jpegCodec, dst *Image, num, x0, y0, cw, ch int) error {
	need, err := t.Need(num, x0, y0, cw, ch)
	if err != nil {
		return decodeErr(err)
	}
	var scratch, win int
	var extra int64
	if need > ownBytes {
		if _, ok := t.(*jpegdec.Decoder); ok {
			scratch = need
		} else {
			extra = int64(need) // libjpeg allocates it
		}
	}
	if dst == nil && 3*cw*ch > ownBytes {
		win = 3 * cw * ch
	}
	var bufs [2][]byte
	if scratch > 0 || win > 0 || extra > 0 {
		if bufs, err = decodeMemory.get(scratch, win, extra); err != nil {
			t.Abort()
			return err
		}
	}
	if dst == nil {
		dst = d.window(ch, cw, bufs[1])
	} else {
		dst.Resize(3, ch, cw)
	}
	if scratch > 0 {
		t.(*jpegdec.Decoder).Scratch = bufs[0]
	}
	err = t.Decode(dst.Pix, num, x0, y0, cw, ch)
	if scratch > 0 || extra > 0 {
		decodeMemory.put(bufs[0], extra)
	}
	return decodeErr(err)
}

// decodePNG decodes a PNG into dst, or into the decoder's window when dst
// is nil. Go's decoder allocates the image itself; where that is large,
// the budget counts it while it decodes.
func (d *Decoder) decodePNG(dst *Image, data []byte) error {
	w, h, bpp, err := pngHeader(data, d.maxPixels())
	if err != nil {
		return err
	}
	var win int
	var extra int64
	if n := int64(bpp) * int64(w) * int64(h); n > ownBytes {
		extra = n
	}
	if dst == nil && 3*w*h > ownBytes {
		win = 3 * w * h
	}
	var bufs [2][]byte
	if win > 0 || extra > 0 {
		if bufs, err = decodeMemory.get(0, win, extra); err != nil {
			return err
		}
	}
	if dst == nil {
		dst = d.window(h, w, bufs[1])
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err == nil {
		planes(dst, img)
	}
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
	return nil
}

// pixStart is the first byte of the pixels of an image Go's PNG decoder
// made, or nil.
func pixStart(img image.Image) *byte {
	var pix []byte
	switch m := img.(type) {
	case *image.Gray:
		pix = m.Pix
	case *image.Gray16:
		pix = m.Pix
	case *image.RGBA:
		pix = m.Pix
	case *image.NRGBA:
		pix = m.Pix
	case *image.RGBA64:
		pix = m.Pix
	case *image.NRGBA64:
		pix = m.Pix
	case *image.Paletted:
		pix = m.Pix
	}
	if len(pix) == 0 {
		return nil
	}
	return &pix[0]
}

// window makes the decoder's window a 3×h×w image in buf, memory of the
// budget's that the decoder holds until its next call or Release, or, when
// buf is nil, in memory of its own.
func (d *Decoder) window(h, w int, buf []byte) *Image {
	if buf != nil {
		if d.lent == nil {
			d.lent = newLent(d)
		}
		decodeMemory.lend(d.lent, buf)
		d.win, d.lentWin = Image{Pix: buf[: 3*h*w : 3*h*w], C: 3, H: h, W: w}, true
		return &d.win
	}
	d.win = Image{Pix: d.own}
	d.win.Resize(3, h, w)
	d.own = d.win.Pix
	return &d.win
}

// header reads the JPEG header of data: the decoder, ready to decode, and
// the image's width and height, within the decoder's limit. No pixel or
// coefficient memory is allocated yet: that happens in the decode that
// follows, under the memory cap set here.
func (d *Decoder) header(data []byte) (jpegCodec, int, int, error) {
	t, err := d.jpeg()
	if err != nil {
		return nil, 0, 0, err
	}
	limit := min(d.maxPixels(), maxSide*maxSide)
	switch t := t.(type) {
	case *jpegturbo.Decoder:
		t.MaxMemory = 8*limit + 16<<20
	case *jpegdec.Decoder:
		t.MaxMemory = 12*limit + 16<<20
	}
	w, h, err := t.Header(data)
	if err != nil {
		return nil, 0, 0, decodeErr(err)
	}
	if err := checkSize(w, h, d.maxPixels()); err != nil {
		t.Abort()
		return nil, 0, 0, err
	}
	return t, w, h, nil
}

// decodeErr wraps a JPEG decoder's error in ErrDecode.
func decodeErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrDecode, err)
}

// checkSize checks the size a header gives against limit pixels and
// maxSide.
func checkSize(w, h, limit int) error {
	switch {
	case w <= 0 || h <= 0:
		return fmt.Errorf("%w: %dx%d pixels", ErrDecode, w, h)
	case int64(w)*int64(h) > int64(limit):
		return fmt.Errorf("%w: %dx%d is %d pixels, over the limit of %d (max_pixels)", ErrTooLarge, w, h, int64(w)*int64(h), limit)
	case w > maxSide || h > maxSide:
		return fmt.Errorf("%w: %dx%d has a side over %d pixels", ErrTooLarge, w, h, maxSide)
	}
	return nil
}

// DecodeFor decodes data and applies op to it, drawing op's parameters from
// r, into dst. For a JPEG it first reads the size, lets op choose its
// window, and decodes only that window (plus the margin the filter reads),
// at the smallest DCT scale (1/8, 1/4, 1/2) that keeps the window at least
// as large as op's output when Reduce is set: a 224-pixel crop of a
// 2000-pixel photograph decodes a quarter of the pixels or fewer. A PNG
// it decodes in full into scratch and applies op.
// It reports whether dst holds the result; false means op left the decoded
// image as it was, and the result is in Decoded.
func (d *Decoder) DecodeFor(dst *Image, data []byte, op RegionOp, r *Rand) (bool, error) {
	_, _, applied, err := d.decodeFor(dst, data, op, r)
	return applied, err
}

// decodeFor is DecodeFor that also returns the whole image's size and the
// region op drew for it.
func (d *Decoder) decodeFor(dst *Image, data []byte, op RegionOp, r *Rand) (Shape, Region, bool, error) {
	d.Release()
	if !isJPEG(data) {
		img, err := d.decodeWhole(data)
		if err != nil {
			return Shape{}, Region{}, false, err
		}
		if s, err := op.OutShape(img.Shape()); err == nil {
			if err := d.fits(op, img.W, img.H, s.W, s.H); err != nil {
				return Shape{}, Region{}, false, err
			}
		}
		// Region draws as Apply does, from a copy of the generator.
		rr := *r
		reg := op.Region(img.H, img.W, &rr)
		return img.Shape(), reg, op.Apply(dst, img, r), nil
	}
	t, W, H, err := d.header(data)
	if err != nil {
		return Shape{}, Region{}, false, err
	}
	in := Shape{C: 3, H: H, W: W}
	reg := op.Region(H, W, r)
	if err := d.fits(op, W, H, reg.OW, reg.OH); err != nil {
		t.Abort()
		return Shape{}, Region{}, false, err
	}
	if reg.H == H && reg.W == W && reg.OH == H && reg.OW == W {
		// The op changes nothing: decode the whole image, as Decode would.
		return in, reg, false, d.decodeJPEG(t, nil, 8, 0, 0, W, H)
	}
	num := 8
	if d.Reduce {
		num = scaleFor(reg)
	}
	sw, sh := jpegdec.Scaled(W, num), jpegdec.Scaled(H, num)
	fx, fy := float64(sw)/float64(W), float64(sh)/float64(H)
	wy, wx := float64(reg.Y)*fy, float64(reg.X)*fx
	wh, ww := float64(reg.H)*fy, float64(reg.W)*fx
	if num == 8 && reg.OH == reg.H && reg.OW == reg.W {
		// A crop at full scale: decode the window straight into dst.
		return in, reg, true, d.decodeJPEG(t, dst, 8, reg.X, reg.Y, reg.W, reg.H)
	}
	// The filter reads support·scale pixels either side of an output
	// pixel's centre; with that margin (and one for rounding), every tap
	// the resampling of the whole image would use lies in the window.
	f := op.Filter()
	my := int(math.Ceil(f.support()*max(1, wh/float64(reg.OH)))) + 1
	mx := int(math.Ceil(f.support()*max(1, ww/float64(reg.OW)))) + 1
	y0, y1 := max(0, int(math.Floor(wy))-my), min(sh, int(math.Ceil(wy+wh))+my)
	x0, x1 := max(0, int(math.Floor(wx))-mx), min(sw, int(math.Ceil(wx+ww))+mx)
	if err := d.decodeJPEG(t, nil, num, x0, y0, x1-x0, y1-y0); err != nil {
		return Shape{}, Region{}, false, err
	}
	resample(dst, &d.win, wy-float64(y0), wx-float64(x0), wh, ww, reg.OH, reg.OW, f)
	return in, reg, true, nil
}

// fits refuses an operation's output of ow×oh from a w×h image that is
// over the limits an image decodes within (max_pixels, MaxSide): resize
// shorter=256 of a 32768×1 strip would make 8,388,608×256 pixels, 6 GB.
// The error wraps ErrTooLarge: the image is a corrupt record.
func (d *Decoder) fits(op Op, w, h, ow, oh int) error {
	if ow > maxSide || oh > maxSide || int64(ow)*int64(oh) > int64(d.maxPixels()) {
		return fmt.Errorf("%w: %s would make a %dx%d image %dx%d, over the limit of %d pixels (max_pixels) or %d a side",
			ErrTooLarge, op.Name(), w, h, ow, oh, d.maxPixels(), maxSide)
	}
	return nil
}

// Decoded is the image DecodeFor decoded, valid until the decoder's next
// call or Release: the result when DecodeFor returned false.
func (d *Decoder) Decoded() *Image { return &d.win }

// scaleFor returns the smallest M of the DCT scales M/8 that pipe's decoder
// decodes and libjpeg-turbo decodes with SIMD (1/8, 1/4, 1/2, 1) at which reg's window still has at
// least as many pixels as its output on both axes, so the resampling only
// ever shrinks. libjpeg's other scales (3/8 … 7/8) have plain C IDCTs:
// allowing them made the ImageNet recipe slower (12 pairs of runs, the
// pipeline with reduce=false faster in 11), since ImageNet-sized crops
// then decode at 6/8 or 7/8 instead of at full scale with SIMD.
func scaleFor(reg Region) int {
	for _, m := range []int{1, 2, 4} {
		if reg.H*m >= 8*reg.OH && reg.W*m >= 8*reg.OW {
			return m
		}
	}
	return 8
}
