//go:build jpegturbo

package jpegturbo

/*
#cgo LDFLAGS: -l:libjpeg.a
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>
#include "huff.h"
#include "rgb.h"

#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>

// pj_split3_ssse3 splits the packed RGB pixels of s into three planes, 16
// at a time with PSHUFB, and returns how many it did (n rounded down to
// a multiple of 16).
__attribute__((target("ssse3")))
static int pj_split3_ssse3(const unsigned char *s, unsigned char *r, unsigned char *g, unsigned char *b, int n) {
	const __m128i r0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i r1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
	const __m128i r2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
	const __m128i g0 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i g1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
	const __m128i g2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
	const __m128i b0 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
	const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
	int x = 0;
	for (; x + 16 <= n; x += 16) {
		__m128i v0 = _mm_loadu_si128((const __m128i *)(s + 3 * x));
		__m128i v1 = _mm_loadu_si128((const __m128i *)(s + 3 * x + 16));
		__m128i v2 = _mm_loadu_si128((const __m128i *)(s + 3 * x + 32));
		_mm_storeu_si128((__m128i *)(r + x), _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, r0), _mm_shuffle_epi8(v1, r1)), _mm_shuffle_epi8(v2, r2)));
		_mm_storeu_si128((__m128i *)(g + x), _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, g0), _mm_shuffle_epi8(v1, g1)), _mm_shuffle_epi8(v2, g2)));
		_mm_storeu_si128((__m128i *)(b + x), _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, b0), _mm_shuffle_epi8(v1, b1)), _mm_shuffle_epi8(v2, b2)));
	}
	return x;
}
#endif

// pj_split3 splits n packed RGB pixels into three planes.
static void pj_split3(const unsigned char *s, unsigned char *r, unsigned char *g, unsigned char *b, int n) {
	int x = 0;
#if defined(__x86_64__) || defined(__i386__)
	if (__builtin_cpu_supports("ssse3")) x = pj_split3_ssse3(s, r, g, b, n);
#endif
	for (; x < n; x++) {
		r[x] = s[3 * x];
		g[x] = s[3 * x + 1];
		b[x] = s[3 * x + 2];
	}
}

typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	int truncated;          // the scan data ran out before the blocks did
	unsigned row, rows;     // the iMCU row where it did, of the image's
	char msg[JMSG_LENGTH_MAX];
} pj_err;

typedef struct {
	struct jpeg_decompress_struct d;
	pj_err err;
	int started; // jpeg_read_header succeeded on the current buffer
	int libhuff; // decode Huffman scans with libjpeg's own decoder, not huff.c's
	int own;     // the last decode used huff.c's
	int librgb;  // convert colours with libjpeg's converter and split its output, not rgb.c's
	int direct;  // the last decode used rgb.c's
	pj_huff huff;
	pj_rgb rgb;
} pj_dec;

static void pj_error_exit(j_common_ptr c) {
	pj_err *e = (pj_err *)c->err;
	if (c->err->msg_code == JERR_NO_BACKING_STORE)
		// jmemnobs.c's answer to a whole-image buffer over max_memory_to_use.
		snprintf(e->msg, sizeof e->msg, "the image's coefficient buffer needs more than the %ld bytes allowed", c->mem->max_memory_to_use);
	else
		(*c->err->format_message)(c, e->msg);
	longjmp(e->jump, 1);
}

// pj_short records that the scan data ran out in iMCU row row of rows,
// the first time.
static void pj_short(pj_err *e, unsigned row, unsigned rows) {
	if (e->truncated) return;
	e->truncated = 1;
	e->row = row;
	e->rows = rows;
}

// Warnings (level -1) are corrupt data libjpeg worked around. The scan
// data running out before its blocks are decoded is an error, as the file
// it comes from is truncated: the end of the file (JWRN_JPEG_EOF), or a
// marker where more data should be (JWRN_HIT_MARKER: a file cut short and
// given an EOI), for which libjpeg leaves the rest grey.
static void pj_emit_message(j_common_ptr c, int level) {
	pj_err *e = (pj_err *)c->err;
	if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER) && c->is_decompressor) {
		j_decompress_ptr d = (j_decompress_ptr)c;
		pj_short(e, d->input_iMCU_row, d->total_iMCU_rows);
	}
}

// pj_truncated reports whether the scan data has run out, through libjpeg's
// warnings or huff.c's (own: it decodes), with the error in pj_msg.
static int pj_truncated(pj_dec *p, int own) {
	if (own && p->huff.truncated) pj_short(&p->err, p->huff.row, p->d.total_iMCU_rows);
	if (!p->err.truncated) return 0;
	snprintf(p->err.msg, sizeof p->err.msg, "premature end of JPEG file: truncated scan data: %u of %u MCU rows", p->err.row, p->err.rows);
	return 1;
}

static pj_dec *pj_new(void) {
	pj_dec *p = calloc(1, sizeof(pj_dec));
	if (!p) return NULL;
	p->d.err = jpeg_std_error(&p->err.pub);
	p->err.pub.error_exit = pj_error_exit;
	p->err.pub.emit_message = pj_emit_message;
	if (setjmp(p->err.jump)) {
		free(p);
		return NULL;
	}
	jpeg_create_decompress(&p->d);
	return p;
}

static void pj_free(pj_dec *p) {
	jpeg_destroy_decompress(&p->d);
	free(p);
}

static const char *pj_msg(pj_dec *p) { return p->err.msg; }

static void pj_set_libhuff(pj_dec *p, int on) { p->libhuff = on; }
static int pj_own(pj_dec *p) { return p->own; }
static void pj_set_librgb(pj_dec *p, int on) { p->librgb = on; }
static int pj_direct(pj_dec *p) { return p->direct; }
static int pj_ycbcr(pj_dec *p) { return p->d.jpeg_color_space == JCS_YCbCr && p->d.num_components == 3; }

// pj_header reads the header of buf; buf must stay valid until pj_decode
// or pj_abort. maxmem caps the memory libjpeg allocates for the image (0:
// no cap); its whole-image buffers, allocated by jpeg_start_decompress,
// are what it bounds. Returns 0, or -1 with the message in pj_msg.
static int pj_header(pj_dec *p, const unsigned char *buf, unsigned long n, long maxmem, int *w, int *h) {
	p->err.truncated = 0;
	p->started = 0;
	if (setjmp(p->err.jump)) {
		jpeg_abort_decompress(&p->d);
		return -1;
	}
	p->d.mem->max_memory_to_use = maxmem;
	jpeg_mem_src(&p->d, buf, n);
	jpeg_read_header(&p->d, TRUE);
	p->started = 1;
	*w = p->d.image_width;
	*h = p->d.image_height;
	return 0;
}

// pj_frame reports, of the header read, what pj_need's arithmetic needs:
// the blocks the scans must code (over the grid of whole MCUs, a single
// component's MCU being one block, as pipe's decoder counts them), whether
// the image has several scans (so a whole-image coefficient buffer), and
// the bytes after the first scan's header.
static void pj_frame(pj_dec *p, long *blocks, int *multi, long *avail) {
	struct jpeg_decompress_struct *d = &p->d;
	long w = d->image_width, h = d->image_height;
	if (d->num_components == 1) {
		*blocks = ((w + 7) / 8) * ((h + 7) / 8);
	} else {
		long mx = (w + 8L * d->max_h_samp_factor - 1) / (8L * d->max_h_samp_factor);
		long my = (h + 8L * d->max_v_samp_factor - 1) / (8L * d->max_v_samp_factor);
		*blocks = 0;
		for (int i = 0; i < d->num_components; i++)
			*blocks += mx * d->comp_info[i].h_samp_factor * my * d->comp_info[i].v_samp_factor;
	}
	*multi = d->progressive_mode || d->comps_in_scan < d->num_components;
	*avail = (long)d->src->bytes_in_buffer;
}

static int pj_components(pj_dec *p) { return p->d.num_components; }

static void pj_abort(pj_dec *p) {
	if (p->started) jpeg_abort_decompress(&p->d);
	p->started = 0;
}

// pj_scaled is the output size of an n-pixel side at scale num/8.
static int pj_scaled(int n, int num) { return (int)(((long)n * num + 7) / 8); }

// pj_decode decodes the window [x0, x0+cw) × [y0, y0+ch) of the image at
// scale num/8 (window in scaled pixels) into out as three planes of cw×ch
// (R, G, B). Greyscale is repeated into the planes; CMYK and YCCK are
// converted as Go's image/color does, Adobe's inverted values undone.
static int pj_decode(pj_dec *p, int num, int x0, int y0, int cw, int ch, unsigned char *out) {
	struct jpeg_decompress_struct *d = &p->d;
	JSAMPLE *row = NULL;
	if (setjmp(p->err.jump)) {
		free(row);
		jpeg_abort_decompress(d);
		p->started = 0;
		return -1;
	}
	d->scale_num = num;
	d->scale_denom = 8;
	int gray = d->jpeg_color_space == JCS_GRAYSCALE;
	int cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
	d->out_color_space = gray ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
	jpeg_start_decompress(d);
	if (pj_truncated(p, 0)) {
		// A progressive or multi-scan JPEG has been read whole: its
		// missing scans would only give grey rows.
		jpeg_abort_decompress(d);
		p->started = 0;
		return -1;
	}
	int own = p->own = !p->libhuff && pj_huff_install(d, &p->huff);
	if (x0 < 0 || y0 < 0 || cw <= 0 || ch <= 0 ||
	    x0 + cw > (int)d->output_width || y0 + ch > (int)d->output_height) {
		snprintf(p->err.msg, sizeof p->err.msg, "window %dx%d+%d+%d outside the %dx%d output",
			cw, ch, x0, y0, (int)d->output_width, (int)d->output_height);
		jpeg_abort_decompress(d);
		p->started = 0;
		return -1;
	}
	// libjpeg treats the edges of a cropped row as image edges: fancy
	// chroma upsampling then repeats the last chroma sample where the
	// whole image has a neighbour. A margin of 16 columns (wider than an
	// iMCU's chroma reach) each side keeps the window's pixels as a full
	// decode gives them.
	int m0 = x0 < 16 ? 0 : x0 - 16;
	int m1 = x0 + cw + 16 > (int)d->output_width ? (int)d->output_width : x0 + cw + 16;
	JDIMENSION xoff = m0, width = m1 - m0;
	if (width < d->output_width) jpeg_crop_scanline(d, &xoff, &width);
	int skip = x0 - (int)xoff; // columns left of the window in each row
	int nc = d->output_components;
	row = malloc((size_t)d->output_width * nc);
	if (!row) {
		snprintf(p->err.msg, sizeof p->err.msg, "out of memory");
		jpeg_abort_decompress(d);
		p->started = 0;
		return -1;
	}
	if (y0 > 0) jpeg_skip_scanlines(d, y0);
	// From here libjpeg's colour conversion may write the planes itself.
	int direct = p->direct = nc == 3 && !p->librgb && pj_rgb_install(d, &p->rgb, out, skip, cw, ch);
	size_t plane = (size_t)cw * ch;
	unsigned char *r = out, *g = out + plane, *b = out + 2 * plane;
	for (int y = 0; y < ch; y++) {
		JSAMPROW rows[1] = {row};
		if (jpeg_read_scanlines(d, rows, 1) != 1 || (direct && p->rgb.y != y + 1)) {
			snprintf(p->err.msg, sizeof p->err.msg, "no scanline %d", y0 + y);
			free(row);
			jpeg_abort_decompress(d);
			p->started = 0;
			return -1;
		}
		if (pj_truncated(p, own)) {
			// The data has ended: every row left would be grey, and the
			// result is an error anyway.
			free(row);
			jpeg_abort_decompress(d);
			p->started = 0;
			return -1;
		}
		const JSAMPLE *s = row + (size_t)skip * nc;
		size_t o = (size_t)y * cw;
		if (direct) {
			// rgb.c has written the row.
		} else if (nc == 3) {
			pj_split3(s, r + o, g + o, b + o, cw);
		} else if (nc == 1) {
			memcpy(r + o, s, cw);
			memcpy(g + o, s, cw);
			memcpy(b + o, s, cw);
		} else {
			int inv = d->saw_Adobe_marker;
			for (int x = 0; x < cw; x++) {
				unsigned c = s[4 * x], m = s[4 * x + 1], yy = s[4 * x + 2], k = s[4 * x + 3];
				if (inv) { c = 255 - c; m = 255 - m; yy = 255 - yy; k = 255 - k; }
				unsigned w = 0xffff - k * 0x101;
				r[o + x] = (unsigned char)(((0xffff - c * 0x101) * w / 0xffff) >> 8);
				g[o + x] = (unsigned char)(((0xffff - m * 0x101) * w / 0xffff) >> 8);
				b[o + x] = (unsigned char)(((0xffff - yy * 0x101) * w / 0xffff) >> 8);
			}
		}
	}
	free(row);
	int truncated = pj_truncated(p, own);
	jpeg_abort_decompress(d);
	p->started = 0;
	if (truncated) return -1;
	return 0;
}

// pj_encode encodes w×h pixels of nc interleaved components (1: grey, 3:
// RGB, 4: CMYK) with libjpeg, for the tests of pipe's own decoder: hs and
// vs are the sampling factors of each component, separate puts each
// component in its own sequential scan. Returns 0, or -1 with the
// message in msg.
static int pj_encode(const unsigned char *pix, int w, int h, int nc, const int *hs, const int *vs,
                     int quality, int progressive, int separate, int restart, int ycck, int optimize,
                     unsigned char **out, unsigned long *outlen, char *msg) {
	struct jpeg_compress_struct c;
	pj_err err;
	static jpeg_scan_info scans[4];
	unsigned char *buf = NULL;
	unsigned long n = 0;
	c.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = pj_error_exit;
	if (setjmp(err.jump)) {
		snprintf(msg, JMSG_LENGTH_MAX, "%s", err.msg);
		jpeg_destroy_compress(&c);
		free(buf);
		return -1;
	}
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &buf, &n);
	c.image_width = w;
	c.image_height = h;
	c.input_components = nc;
	c.in_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
	jpeg_set_defaults(&c);
	if (nc == 4 && ycck) jpeg_set_colorspace(&c, JCS_YCCK);
	jpeg_set_quality(&c, quality, TRUE);
	for (int i = 0; i < c.num_components; i++) {
		c.comp_info[i].h_samp_factor = hs[i];
		c.comp_info[i].v_samp_factor = vs[i];
	}
	c.restart_interval = restart;
	c.optimize_coding = optimize;
	if (progressive) {
		jpeg_simple_progression(&c);
	} else if (separate) {
		for (int i = 0; i < c.num_components; i++) {
			scans[i].comps_in_scan = 1;
			scans[i].component_index[0] = i;
			scans[i].Ss = 0;
			scans[i].Se = 63;
			scans[i].Ah = 0;
			scans[i].Al = 0;
		}
		c.scan_info = scans;
		c.num_scans = c.num_components;
	}
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < c.image_height) {
		JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * w * nc);
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	*out = buf;
	*outlen = n;
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	// libjpeg mallocs in every worker's thread: under ulimit -v, in one
	// arena rather than 64 MiB of address space a thread.
	_ "github.com/pipefeed/pipe/internal/onearena"
)

// Version is the libjpeg-turbo release linked in ("libjpeg-turbo 2.1.5").
var Version = fmt.Sprintf("libjpeg-turbo %d.%d.%d", C.LIBJPEG_TURBO_VERSION_NUMBER/1000000,
	C.LIBJPEG_TURBO_VERSION_NUMBER/1000%1000, C.LIBJPEG_TURBO_VERSION_NUMBER%1000)

// Compiled reports whether this build decodes with libjpeg-turbo.
const Compiled = true

// Decoder is one libjpeg decompressor, reused image after image. It is not
// safe for concurrent use: give each worker its own.
type Decoder struct {
	// MaxMemory caps, in bytes, what libjpeg allocates for one image (0:
	// no cap), as its max_memory_to_use; Header applies it. What it bounds
	// is the whole-image coefficient buffer of progressive and multi-scan
	// JPEGs, 2 bytes per coefficient of every component, which
	// jpeg_start_decompress allocates: a JPEG needing more is an error
	// from Decode, before the buffer is allocated.
	MaxMemory int
	d         *C.pj_dec
	pin       runtime.Pinner
	buf       []byte // the data whose header was read, pinned until Decode
	w, h      int    // its size
}

// New returns a decoder. Its C memory is freed when it is garbage
// collected.
func New() (*Decoder, error) {
	p := C.pj_new()
	if p == nil {
		return nil, errors.New("libjpeg: cannot create a decompressor")
	}
	d := &Decoder{d: p}
	runtime.AddCleanup(d, func(p *C.pj_dec) { C.pj_free(p) }, p)
	if LibjpegOnly {
		d.libHuffman(true)
		d.libColor(true)
	}
	return d, nil
}

// LibjpegOnly, set by the environment variable PIPE_LIBJPEG_ONLY=1, makes
// new decoders use libjpeg-turbo's own Huffman decoder and colour
// converter instead of huff.c's and rgb.c's: the same pixels, slower; a
// way to rule them out when a JPEG decodes strangely.
var LibjpegOnly = os.Getenv("PIPE_LIBJPEG_ONLY") == "1"

// Header reads the header of data and returns the image's size. data must
// not change until Decode or Abort.
func (d *Decoder) Header(data []byte) (w, h int, err error) {
	d.Abort()
	if len(data) == 0 {
		return 0, 0, errors.New("empty")
	}
	d.pin.Pin(&data[0])
	d.buf = data
	var cw, ch C.int
	if C.pj_header(d.d, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.long(d.MaxMemory), &cw, &ch) != 0 {
		err := d.err()
		d.Abort()
		return 0, 0, err
	}
	d.w, d.h = int(cw), int(ch)
	return d.w, d.h, nil
}

// Need returns about how many bytes libjpeg will allocate decoding the
// image whose header Header read, the window of cw×ch pixels at (x0, y0)
// at scale num/8: the whole-image coefficient buffer of a progressive or
// multi-scan JPEG (2 bytes a coefficient), and rows of samples. It refuses,
// before anything is allocated, what pipe's own decoder refuses then: an
// image whose blocks cannot fit in the scan bytes it has (every block
// costs at least one bit of the scans) and one whose coefficients would
// exceed MaxMemory.
func (d *Decoder) Need(num, x0, y0, cw, ch int) (int, error) {
	n, err := d.need()
	if err != nil {
		d.Abort()
	}
	return n, err
}

func (d *Decoder) need() (int, error) {
	if d.buf == nil {
		return 0, errors.New("libjpeg: Decode without a header")
	}
	var blocks, avail C.long
	var multi C.int
	C.pj_frame(d.d, &blocks, &multi, &avail)
	if int64(blocks) > 8*int64(avail) {
		return 0, fmt.Errorf("premature end of JPEG file: %d bytes of scan data cannot hold the %d blocks of a %dx%d image", avail, blocks, d.w, d.h)
	}
	n := 64 * d.w * int(C.pj_components(d.d))
	if multi != 0 {
		coef := 128 * int(blocks)
		if d.MaxMemory > 0 && coef > d.MaxMemory {
			return 0, fmt.Errorf("the image's coefficient buffer needs %d bytes, more than the %d bytes allowed", coef, d.MaxMemory)
		}
		n += coef
	}
	return n, nil
}

// Decode decodes the window of cw×ch pixels at (x0, y0) of the image whose
// header Header read, at scale num/8 (1 ≤ num ≤ 8; the window is in scaled
// pixels), into dst as R, G and B planes; dst holds at least 3·cw·ch bytes.
// It refuses what Need refuses, before libjpeg allocates anything.
func (d *Decoder) Decode(dst []byte, num, x0, y0, cw, ch int) error {
	defer d.Abort()
	if _, err := d.need(); err != nil {
		return err
	}
	if num < 1 || num > 8 {
		return fmt.Errorf("libjpeg: scale %d/8 outside 1/8..8/8", num)
	}
	if len(dst) < 3*cw*ch || cw <= 0 || ch <= 0 {
		return fmt.Errorf("libjpeg: %d bytes for a %dx%d window", len(dst), cw, ch)
	}
	if C.pj_decode(d.d, C.int(num), C.int(x0), C.int(y0), C.int(cw), C.int(ch), (*C.uchar)(unsafe.Pointer(&dst[0]))) != 0 {
		return d.err()
	}
	return nil
}

// Abort forgets the current image, if any.
func (d *Decoder) Abort() {
	if d.buf != nil {
		C.pj_abort(d.d)
		d.pin.Unpin()
		d.buf = nil
	}
}

// libHuffman makes d decode Huffman-coded scans with libjpeg-turbo's own
// entropy decoder instead of huff.c's (for the tests that compare them).
func (d *Decoder) libHuffman(on bool) {
	C.pj_set_libhuff(d.d, cint(on))
}

// plainHuffman makes huff.c's decoder the one built without BMI2 (for the
// tests: both builds must decode alike).
func plainHuffman(on bool) {
	C.pj_no_bmi2 = cint(on)
}

// libColor makes d convert colours with libjpeg's converter and split its
// packed RGB into planes, instead of rgb.c's one pass (for the tests that
// compare them).
func (d *Decoder) libColor(on bool) {
	C.pj_set_librgb(d.d, cint(on))
}

// ycbcr reports whether the image whose header was read is YCbCr.
func (d *Decoder) ycbcr() bool { return C.pj_ycbcr(d.d) != 0 }

// directColor reports whether the last Decode converted with rgb.c's.
func (d *Decoder) directColor() bool { return C.pj_direct(d.d) != 0 }

// ownHuffman reports whether the last Decode used huff.c's decoder.
func (d *Decoder) ownHuffman() bool { return C.pj_own(d.d) != 0 }

// cint is C's truth value of b.
func cint(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func (d *Decoder) err() error { return errors.New(C.GoString(C.pj_msg(d.d))) }

// yccRGB converts len(y) pixels into planes as decoding does (for its test).
func yccRGB(y, cb, cr, r, g, b []byte) {
	if len(y) == 0 {
		return
	}
	C.pj_ycc_rgb((*C.uchar)(&y[0]), (*C.uchar)(&cb[0]), (*C.uchar)(&cr[0]), (*C.uchar)(&r[0]), (*C.uchar)(&g[0]), (*C.uchar)(&b[0]), C.int(len(y)))
}

// split3 splits len(r) packed RGB pixels of s into r, g and b, as decoding
// does (for its test).
func split3(s, r, g, b []byte) {
	if len(r) == 0 {
		return
	}
	C.pj_split3((*C.uchar)(&s[0]), (*C.uchar)(&r[0]), (*C.uchar)(&g[0]), (*C.uchar)(&b[0]), C.int(len(r)))
}

// EncodeOptions are the settings of a test JPEG that Encode writes.
type EncodeOptions struct {
	Quality     int    // 1-100
	H, V        [4]int // sampling factors of each component
	Progressive bool   // libjpeg's simple progression
	Separate    bool   // one sequential scan per component
	Restart     int    // restart interval in MCUs, 0 for none
	YCCK        bool   // a 4-component image stored as YCCK, not CMYK
	Optimize    bool   // optimised Huffman tables
}

// Encode encodes w×h pixels of nc interleaved components (1: grey, 3: RGB,
// 4: CMYK) with libjpeg-turbo: the test images pipe's own decoder is
// compared with libjpeg on.
func Encode(pix []byte, w, h, nc int, o EncodeOptions) ([]byte, error) {
	if len(pix) < w*h*nc || w <= 0 || h <= 0 || (nc != 1 && nc != 3 && nc != 4) {
		return nil, fmt.Errorf("libjpeg: %d bytes for %dx%dx%d", len(pix), w, h, nc)
	}
	var hs, vs [4]C.int
	for i := range nc {
		hs[i], vs[i] = C.int(max(o.H[i], 1)), C.int(max(o.V[i], 1))
	}
	var out *C.uchar
	var n C.ulong
	msg := (*C.char)(C.malloc(C.JMSG_LENGTH_MAX))
	defer C.free(unsafe.Pointer(msg))
	if C.pj_encode((*C.uchar)(unsafe.Pointer(&pix[0])), C.int(w), C.int(h), C.int(nc), &hs[0], &vs[0],
		C.int(o.Quality), cint(o.Progressive), cint(o.Separate), C.int(o.Restart), cint(o.YCCK), cint(o.Optimize), &out, &n, msg) != 0 {
		return nil, errors.New("libjpeg: " + C.GoString(msg))
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}
