//go:build jpegturbo

// YCbCr to planar RGB in one pass, in place of libjpeg-turbo's converter
// to packed RGB followed by a split into planes. The arithmetic is that of
// libjpeg-turbo's SIMD converters (jdcolext-avx2.asm), so the pixels are
// the same: R = Y + Cr + 0.402·Cr, G = Y - 0.34414·Cb + 0.28586·Cr - Cr,
// B = Y + 2·Cb - 0.228·Cb, in 16-bit fixed point.

#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>
#include "rgb.h"

#define F_0_402 26345 // FIX(1.40200) - FIX(1)
#define F_0_228 14942 // FIX(2) - FIX(1.77200)
#define F_0_344 22554 // FIX(0.34414)
#define F_0_285 18734 // FIX(1) - FIX(0.71414)

static inline unsigned char pj_clamp(int v) { return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v; }

// pj_ycc_px is one pixel of the SIMD arithmetic: pmulhw is the high half
// of the 32-bit product, rounded down.
static inline void pj_ycc_px(int y, int cb, int cr, unsigned char *r, unsigned char *g, unsigned char *b) {
	cb -= 128;
	cr -= 128;
	int by = ((((2 * cb) * -F_0_228) >> 16) + 1) >> 1;
	by += cb + cb;
	int ry = ((((2 * cr) * F_0_402) >> 16) + 1) >> 1;
	ry += cr;
	int gy = ((cb * -F_0_344 + cr * F_0_285 + (1 << 15)) >> 16) - cr;
	*r = pj_clamp(y + ry);
	*g = pj_clamp(y + gy);
	*b = pj_clamp(y + by);
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2")))
static int pj_ycc_rgb_avx2(const unsigned char *yp, const unsigned char *cbp, const unsigned char *crp,
                           unsigned char *rp, unsigned char *gp, unsigned char *bp, int n) {
	const __m256i c128 = _mm256_set1_epi16(128), one = _mm256_set1_epi16(1);
	const __m256i f402 = _mm256_set1_epi16(F_0_402), f228 = _mm256_set1_epi16(-F_0_228);
	const __m256i f344_285 = _mm256_set1_epi32((int)((uint32_t)(uint16_t)F_0_285 << 16 | (uint16_t)-F_0_344));
	const __m256i half = _mm256_set1_epi32(1 << 15);
	int x = 0;
	for (; x + 16 <= n; x += 16) {
		__m256i y = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(yp + x)));
		__m256i cb = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(cbp + x))), c128);
		__m256i cr = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(crp + x))), c128);
		__m256i by = _mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(_mm256_add_epi16(cb, cb), f228), one), 1);
		by = _mm256_add_epi16(by, _mm256_add_epi16(cb, cb));
		__m256i ry = _mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(_mm256_add_epi16(cr, cr), f402), one), 1);
		ry = _mm256_add_epi16(ry, cr);
		__m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(cb, cr), f344_285);
		__m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(cb, cr), f344_285);
		lo = _mm256_srai_epi32(_mm256_add_epi32(lo, half), 16);
		hi = _mm256_srai_epi32(_mm256_add_epi32(hi, half), 16);
		__m256i gy = _mm256_sub_epi16(_mm256_packs_epi32(lo, hi), cr);
		__m256i r = _mm256_add_epi16(y, ry), g = _mm256_add_epi16(y, gy), b = _mm256_add_epi16(y, by);
		// packus works within 128-bit lanes: pack r with g, and b with
		// itself, then gather the halves.
		__m256i rg = _mm256_permute4x64_epi64(_mm256_packus_epi16(r, g), 0xD8); // r0-15 | g0-15
		__m256i bb = _mm256_permute4x64_epi64(_mm256_packus_epi16(b, b), 0xD8);
		_mm_storeu_si128((__m128i *)(rp + x), _mm256_castsi256_si128(rg));
		_mm_storeu_si128((__m128i *)(gp + x), _mm256_extracti128_si256(rg, 1));
		_mm_storeu_si128((__m128i *)(bp + x), _mm256_castsi256_si128(bb));
	}
	return x;
}
#endif

void pj_ycc_rgb(const unsigned char *y, const unsigned char *cb, const unsigned char *cr,
                unsigned char *r, unsigned char *g, unsigned char *b, int n) {
	int x = 0;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx2")) x = pj_ycc_rgb_avx2(y, cb, cr, r, g, b, n);
#endif
	for (; x < n; x++) pj_ycc_px(y[x], cb[x], cr[x], r + x, g + x, b + x);
}

static void pj_rgb_start(j_decompress_ptr d) { (void)d; }

static void pj_rgb_convert(j_decompress_ptr d, JSAMPIMAGE in, JDIMENSION row, JSAMPARRAY out, int n) {
	pj_rgb *c = (pj_rgb *)d->cconvert;
	(void)out;
	for (int i = 0; i < n && c->y < c->ch; i++, c->y++) {
		size_t o = (size_t)c->y * c->cw;
		pj_ycc_rgb(in[0][row + i] + c->skip, in[1][row + i] + c->skip, in[2][row + i] + c->skip,
		           c->r + o, c->g + o, c->b + o, c->cw);
	}
}

int pj_rgb_install(j_decompress_ptr d, pj_rgb *c, unsigned char *out, int skip, int cw, int ch) {
#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 2000000 || LIBJPEG_TURBO_VERSION_NUMBER >= 4000000
	return 0; // the module layouts copied in this file are those of 2.x and 3.x
#endif
#if defined(__x86_64__)
	if (!__builtin_cpu_supports("avx2")) return 0;
#else
	return 0;
#endif
	if (d->jpeg_color_space != JCS_YCbCr || d->out_color_space != JCS_RGB || d->num_components != 3 ||
	    d->quantize_colors || !d->do_fancy_upsampling || d->cconvert == NULL)
		return 0;
	size_t plane = (size_t)cw * ch;
	c->r = out;
	c->g = out + plane;
	c->b = out + 2 * plane;
	c->skip = skip;
	c->cw = cw;
	c->ch = ch;
	c->y = 0;
	c->pub.start_pass = pj_rgb_start;
	c->pub.color_convert = pj_rgb_convert;
	d->cconvert = (struct jpeg_color_deconverter *)&c->pub;
	return 1;
}
