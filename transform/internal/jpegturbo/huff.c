//go:build jpegturbo

// A decoder for baseline Huffman-coded JPEG scans, faster than libjpeg-turbo
// 2.1's on the photographs pipe reads: one table lookup yields the zero run,
// the coefficient and the bits to drop together wherever a code and its
// extra bits fit in PJ_FAST bits, and the bit buffer takes up to seven
// bytes at a time when none of them is 0xFF. libjpeg's own decoder looks
// the code up, then fetches the extra bits, and refills a byte at a time.
// The output is the same coefficients, so pixels do not change; the
// jpegturbo tests compare the two on every test image.

#include <stdio.h>
#include <string.h>
#include <jpeglib.h>
#include "huff.h"

// pj_nat maps a zigzag index to the natural (row-major) one. Runs past 63
// in corrupt data, and the end-of-block run, land on 63, as libjpeg's
// jpeg_natural_order does for the former.
static const uint8_t pj_nat[64 + 80] = {
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

// pj_extend turns s extra bits x into the coefficient they code (F.12).
static inline int pj_extend(unsigned x, int s) {
	return (int)x - ((x < (1u << (s - 1))) ? (1 << s) - 1 : 0);
}

// pj_build unpacks t; it returns -1 for a table no canonical code fits
// (libjpeg has already refused those, so this is a second guard).
static int pj_build(pj_htab *h, const JHUFF_TBL *t, int dc) {
	int size[257];
	unsigned code[257];
	int n = 0;
	for (int l = 1; l <= 16; l++)
		for (int i = 0; i < t->bits[l]; i++) {
			if (n >= 256) return -1;
			size[n++] = l;
		}
	unsigned c = 0;
	for (int p = 0, l = 1; p < n; l++) {
		while (p < n && size[p] == l) code[p++] = c++;
		if (c >= (1u << l)) return -1;
		c <<= 1;
	}
	for (int l = 1, p = 0; l <= 17; l++) {
		h->maxcode[l] = -1;
		h->valoff[l] = 0;
		if (l <= 16 && t->bits[l]) {
			h->valoff[l] = p - (int)code[p];
			p += t->bits[l];
			h->maxcode[l] = (int32_t)code[p - 1];
		}
	}
	memcpy(h->val, t->huffval, 256);
	for (int i = 0; i < 1 << PJ_FAST; i++) h->fast[i] = 0x80; // longer code
	for (int p = 0; p < n; p++) {
		int l = size[p];
		int sym = t->huffval[p];
		if (dc && sym > 15) return -1;
		if (l > PJ_FAST) continue;
		int s = dc ? sym : sym & 15;
		int r = dc ? 0 : sym >> 4;
		if (!dc && s == 0) r = r == 15 ? 15 : 63; // ZRL, or end of block
		unsigned base = code[p] << (PJ_FAST - l);
		for (unsigned j = 0; j < 1u << (PJ_FAST - l); j++) {
			unsigned i = base + j;
			if (l + s <= PJ_FAST) {
				int v = s ? pj_extend((i >> (PJ_FAST - l - s)) & ((1u << s) - 1), s) : 0;
				h->fast[i] = (uint32_t)v << 16 | (uint32_t)r << 8 | (uint32_t)(l + s);
			} else {
				h->fast[i] = (uint32_t)sym << 8 | 0x80 | (uint32_t)l;
			}
		}
	}
	return 0;
}

// pj_fill tops bits up a byte at a time, undoing 0xFF 0x00 stuffing. At a
// marker or the end of the data it stops reading and adds zeros, as libjpeg
// does, counting them in pad.
static void pj_fill(pj_huff *h) {
	const unsigned char *p = h->p;
	while (h->nbits <= 56) {
		unsigned b = 0;
		if (h->hit) {
			h->pad += 8;
		} else if (p >= h->end) {
			h->hit = 1;
			h->pad += 8;
		} else if (*p != 0xFF) {
			b = *p++;
		} else {
			const unsigned char *q = p + 1;
			while (q < h->end && *q == 0xFF) q++; // fill bytes
			if (q < h->end && *q == 0) {
				b = 0xFF;
				p = q + 1;
			} else {
				h->hit = 1; // a marker: p stays on it
				h->pad += 8;
			}
		}
		h->bits |= (uint64_t)b << (56 - h->nbits);
		h->nbits += 8;
	}
	h->p = p;
}

// PJ_FILL56 leaves at least 56 bits in bits (the locals p, end, bits and
// nbits of the decoding loop, kept out of h so they stay in registers;
// stale low bits are the next byte's own, so or-ing it in again later
// changes nothing), without testing how many it
// has, a branch the predictor misses at every other refill: where none of
// the next 8 bytes is 0xFF it ors them in (taking no byte when bits is
// already full), else pj_fill does it a byte at a time.
#define PJ_FILL56()                                                          \
	do {                                                                     \
		uint64_t w_;                                                         \
		if (__builtin_expect(end - p >= 8, 1) && (memcpy(&w_, p, 8), w_ = __builtin_bswap64(w_), \
		                       ((~w_ - 0x0101010101010101ull) & w_ & 0x8080808080808080ull) == 0)) { \
			bits |= w_ >> nbits;                                             \
			p += (63 - nbits) >> 3;                                          \
			nbits |= 56;                                                     \
		} else {                                                             \
			h->p = p, h->bits = bits, h->nbits = nbits;                      \
			pj_fill(h);                                                      \
			p = h->p, bits = h->bits, nbits = h->nbits;                      \
		}                                                                    \
	} while (0)

#define PJ_DROP(n) \
	do {           \
		bits <<= (n); \
		nbits -= (n); \
	} while (0)

// PJ_AC_SYMBOL decodes one AC symbol of block blk with table t at
// zigzag position k, leaving the loop at end of block; bits must hold 32.
#define PJ_AC_SYMBOL()                                                       \
	e = t->fast[bits >> (64 - PJ_FAST)];                                     \
	if (__builtin_expect(!(e & 0x80), 1)) {                                  \
		/* e & 63 is e & 31 here, and a shift by it needs no mask            \
		   instruction with BMI2's shlx, which ignores the high bits. */     \
		bits <<= e & 63;                                                     \
		nbits -= e & 31;                                                     \
		k += (e >> 8) & 0xFF;                                                \
		blk[pj_nat[k]] = (JCOEF)((int32_t)e >> 16);                          \
		k++;                                                                 \
	} else {                                                                 \
		int n_ = e & 31, sym_;                                               \
		if (n_)                                                              \
			sym_ = (e >> 8) & 0xFF;                                          \
		else                                                                 \
			sym_ = pj_slow(t, bits, &n_);                                    \
		PJ_DROP(n_);                                                         \
		int s_ = sym_ & 15, r_ = sym_ >> 4;                                  \
		if (s_) {                                                            \
			k += r_;                                                         \
			blk[pj_nat[k]] = (JCOEF)pj_extend((unsigned)(bits >> (64 - s_)), s_); \
			PJ_DROP(s_);                                                     \
			k++;                                                             \
		} else if (r_ == 15) {                                               \
			k += 16;                                                         \
		} else {                                                             \
			break;                                                           \
		}                                                                    \
	}

// pj_slow decodes a code longer than PJ_FAST bits (F.16) and returns its
// symbol; a code no table has decodes as 0, as in libjpeg.
static inline int pj_slow(const pj_htab *t, uint64_t bits, int *n) {
	int c16 = (int)(bits >> 48);
	for (int l = PJ_FAST + 1; l <= 16; l++) {
		int c = c16 >> (16 - l);
		if (c <= t->maxcode[l]) {
			*n = l;
			return t->val[(c + t->valoff[l]) & 0xFF];
		}
	}
	*n = 16;
	return 0;
}

// pj_ran_out records that the scan's data ran out, the first time.
static void pj_ran_out(j_decompress_ptr d, pj_huff *h) {
	if (h->truncated) return;
	h->truncated = 1;
	h->row = d->input_iMCU_row;
}

static void pj_restart(j_decompress_ptr d, pj_huff *h) {
	const unsigned char *p = h->p, *end = h->end;
	h->bits = 0;
	h->nbits = 0;
	h->pad = 0;
	h->hit = 0;
	// Skip to the marker (past any garbage, as libjpeg's next_marker does).
	while (p + 1 < end && !(p[0] == 0xFF && p[1] != 0 && p[1] != 0xFF)) p++;
	if (p + 1 < end && p[1] >= 0xD0 && p[1] <= 0xD7) {
		p += 2; // any RSTn: a wrong number resynchronises here
	} else {
		// Another marker, or the end: the scan's data ran out before its
		// blocks did, an error (pj_decode stops at it).
		h->hit = 1;
		pj_ran_out(d, h);
	}
	h->p = p;
	memset(h->last_dc, 0, sizeof h->last_dc);
	h->restarts_to_go = d->restart_interval;
	h->pub.insufficient_data = h->hit;
}

static void pj_start_pass(j_decompress_ptr d) { (void)d; }

// pj_mcu decodes one MCU into mcu (or nowhere, when mcu is NULL: libjpeg
// skipping rows). It is compiled twice, for BMI2's flag-free shifts and
// without.
static inline __attribute__((always_inline)) boolean pj_mcu(j_decompress_ptr d, JBLOCKROW *mcu) {
	pj_huff *h = (pj_huff *)d->entropy;
	if (d->restart_interval) {
		if (h->restarts_to_go == 0) pj_restart(d, h);
		h->restarts_to_go--;
	}
	if (h->pub.insufficient_data) return TRUE; // the MCU stays zero: grey

	JCOEF scratch[DCTSIZE2];
	const unsigned char *p = h->p, *end = h->end;
	uint64_t bits = h->bits;
	int nbits = h->nbits;
	for (int b = 0; b < h->blocks; b++) {
		JCOEF *blk = mcu ? mcu[b][0] : scratch;
		const pj_htab *t = h->dc[b];

		// DC: a size category s, then s bits of difference.
		PJ_FILL56();
		uint32_t e = t->fast[bits >> (64 - PJ_FAST)];
		int diff;
		if (!(e & 0x80)) {
			PJ_DROP(e & 31);
			diff = (int32_t)e >> 16;
		} else {
			int n = e & 31, s;
			if (n)
				s = (e >> 8) & 0xFF;
			else
				s = pj_slow(t, bits, &n);
			PJ_DROP(n);
			diff = 0;
			if (s) {
				diff = pj_extend((unsigned)(bits >> (64 - s)), s);
				PJ_DROP(s);
			}
		}
		int dc = h->last_dc[h->ci[b]] + diff;
		h->last_dc[h->ci[b]] = dc;
		blk[0] = (JCOEF)dc;

		// AC: (run, size) symbols until end of block or position 63, three
		// to a refill: a symbol whose code and extra bits the table holds
		// takes at most PJ_FAST (11) bits, so 56 bits last three of them;
		// only a longer one (3 % of them in ImageNet) makes the loop
		// refill early.
		t = h->ac[b];
		for (int k = 1;;) {
			PJ_FILL56();
			PJ_AC_SYMBOL();
			if (k >= DCTSIZE2) break;
			if (nbits < 32) continue;
			PJ_AC_SYMBOL();
			if (k >= DCTSIZE2) break;
			if (nbits < 32) continue;
			PJ_AC_SYMBOL();
			if (k >= DCTSIZE2) break;
		}
	}
	h->p = p;
	h->bits = bits;
	h->nbits = nbits;
	if (h->pad > nbits) {
		// The MCU used zeros from past a marker or the end: the data ran
		// out, an error (pj_decode stops at it). Like libjpeg, leave the
		// rest of the segment zero until then.
		h->pub.insufficient_data = TRUE;
		pj_ran_out(d, h);
	}
	return TRUE;
}

static boolean pj_decode_mcu(j_decompress_ptr d, JBLOCKROW *mcu) { return pj_mcu(d, mcu); }

#if defined(__x86_64__)
__attribute__((target("bmi2")))
static boolean pj_decode_mcu_bmi2(j_decompress_ptr d, JBLOCKROW *mcu) { return pj_mcu(d, mcu); }
#endif

int pj_no_bmi2; // tests set it to run the plain build of the decoder

int pj_huff_install(j_decompress_ptr d, pj_huff *h) {
#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 2000000 || LIBJPEG_TURBO_VERSION_NUMBER >= 4000000
	return 0; // the module layouts copied in this file are those of 2.x and 3.x
#endif
	if (d->progressive_mode || d->arith_code || d->data_precision != 8 ||
	    d->comps_in_scan != d->num_components || d->comps_in_scan > 4 ||
	    d->blocks_in_MCU > 10 || d->Se != DCTSIZE2 - 1 || d->src == NULL)
		return 0;
	memset(h->built, 0, sizeof h->built);
	for (int i = 0; i < d->comps_in_scan; i++) {
		jpeg_component_info *c = d->cur_comp_info[i];
		int slots[2] = {c->dc_tbl_no, 4 + c->ac_tbl_no};
		for (int j = 0; j < 2; j++) {
			int s = slots[j];
			if (h->built[s]) continue;
			JHUFF_TBL *t = j == 0 ? d->dc_huff_tbl_ptrs[s] : d->ac_huff_tbl_ptrs[s - 4];
			if (t == NULL || pj_build(&h->tabs[s], t, j == 0) != 0) return 0;
			h->built[s] = 1;
		}
	}
	h->blocks = d->blocks_in_MCU;
	for (int b = 0; b < d->blocks_in_MCU; b++) {
		int ci = d->MCU_membership[b];
		jpeg_component_info *c = d->cur_comp_info[ci];
		h->ci[b] = ci;
		h->dc[b] = &h->tabs[c->dc_tbl_no];
		h->ac[b] = &h->tabs[4 + c->ac_tbl_no];
	}
	h->pub.start_pass = pj_start_pass;
	h->pub.decode_mcu = pj_decode_mcu;
#if defined(__x86_64__)
	if (!pj_no_bmi2 && __builtin_cpu_supports("bmi2")) h->pub.decode_mcu = pj_decode_mcu_bmi2;
#endif
	h->pub.insufficient_data = FALSE;
	h->p = d->src->next_input_byte;
	h->end = h->p + d->src->bytes_in_buffer;
	h->bits = 0;
	h->nbits = 0;
	h->pad = 0;
	h->hit = h->truncated = 0;
	memset(h->last_dc, 0, sizeof h->last_dc);
	h->restarts_to_go = d->restart_interval;
	d->entropy = (struct jpeg_entropy_decoder *)&h->pub;
	return 1;
}
