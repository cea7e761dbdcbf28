// pipe's decoder for baseline Huffman-coded scans (huff.c), which takes the
// place of libjpeg-turbo's own entropy decoder after jpeg_start_decompress.

#include <stdint.h>

#define PJ_FAST 11 // code bits looked up at once

// pj_entropy has the layout of libjpeg's struct jpeg_entropy_decoder
// (jpegint.h, which libjpeg does not install): libjpeg calls decode_mcu
// for every MCU and reads insufficient_data.
typedef struct {
	void (*start_pass)(j_decompress_ptr);
	boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
	boolean insufficient_data;
} pj_entropy;

// pj_htab is one Huffman table unpacked for decoding.
typedef struct {
	// fast is indexed by the next PJ_FAST bits. Bit 7 clear: the code and
	// its extra bits fit; bits 0-4 count them, bits 8-15 hold the zero run
	// before the coefficient (63 for end of block), bits 16-31 its value.
	// Bit 7 set: bits 0-4 are the code's length and bits 8-15 its symbol,
	// or 0 when the code is longer than PJ_FAST bits.
	uint32_t fast[1 << PJ_FAST];
	int32_t maxcode[18]; // the largest code of each length, -1 for none
	int32_t valoff[18];  // the index of a code's symbol in val, less the code
	uint8_t val[256];
} pj_htab;

typedef struct {
	pj_entropy pub;
	const unsigned char *p, *end; // the data not yet in bits
	uint64_t bits;                // bit buffer, next bit in the top bit
	int nbits;                    // bits in bits
	int pad;                      // zero bits past the data (a marker or its end) at the bottom of bits
	int hit;                      // p stands at a marker, or at the end of the data
	int truncated;                // the data ran out before the scan's blocks did
	unsigned row;                 // the iMCU row where it did
	int last_dc[4];
	unsigned restarts_to_go;
	int blocks;
	int ci[10];                 // component of each block of an MCU
	pj_htab *dc[10], *ac[10];   // tables of each block
	pj_htab tabs[8];            // DC 0-3, AC 4-7
	signed char built[8];
} pj_huff;

// pj_huff_install puts h in place of libjpeg's entropy decoder of d, which
// jpeg_start_decompress has set up and which has read nothing yet. It
// returns 0 and leaves libjpeg's where the scan is not one it decodes
// (progressive, arithmetic, several scans, 12-bit).
int pj_huff_install(j_decompress_ptr d, pj_huff *h);

// pj_no_bmi2 set makes pj_huff_install choose the decoder built without
// BMI2 even where the CPU has it (for the tests).
extern int pj_no_bmi2;
