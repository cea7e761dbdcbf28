//go:build amd64 && !purego

#include "textflag.h"

// The accurate integer IDCTs of idct.go (idct8Go, idct4Go) in AVX2, after
// the design of libjpeg-turbo's jidctint-avx2.asm: coefficients are
// dequantised with 16-bit multiplies, both passes work on 16-bit inputs
// with VPMADDWD, and the first pass's outputs are saturated to 16 bits.
//
// Unlike libjpeg-turbo, no input sum is formed in 16 bits: each output of
// a pass is Σ M[k][u]·x[u] over pairs (x[u], x[u']) with constant 16-bit
// factors, the butterflies of jidctint.c multiplied out (for instance the
// odd part's tmp0 is x7·(F0298-F0899-F1961+F1175) + x1·(F1175-F0899) +
// x3·(F1175-F1961) + x5·F1175). The 32-bit sums are the Go code's modulo
// 2^32, so the samples are the Go code's whenever every dequantised
// coefficient and every first-pass output the Go code reads fits in 16
// bits, which the coefficients of real images always give (libjpeg-turbo's
// SIMD code needs the same).
//
// Layout. A "pair" register holds, for eight lanes i, the words
// (x[a][i], x[b][i]) as one dword; lanes 0-3 are in the low 128 bits and
// lanes 4-7 in the high. The first pass's lanes are the block's columns
// and its pairs the rows (0, 4), (1, 5), (2, 6), (3, 7); the second
// pass's lanes are the rows and its pairs the same columns, so both passes
// use the same factors. VPMADDWD of a pair register gives eight dword
// results, one a lane.

// DEQUANT turns the block's rows, Y0 = rows 0|1, Y1 = 2|3, Y2 = 4|5,
// Y3 = 6|7, and the table at DX into the dequantised pairs Y4 = (0, 4),
// Y5 = (1, 5), Y6 = (2, 6), Y7 = (3, 7), by columns. Coefficients and
// table meet as rows (a, b) by columns 0-3 | 4-7, the order VPACKSSDW
// gives the table in; the products keep their low 16 bits, as VPMULLW
// does in libjpeg-turbo. Table entries above 32767 saturate: a nonzero
// coefficient times one leaves 16 bits anyway.
#define DEQUANT \
	VPERMQ     $0xd8, Y0, Y0; \
	VPERMQ     $0xd8, Y1, Y1; \
	VPERMQ     $0xd8, Y2, Y2; \
	VPERMQ     $0xd8, Y3, Y3; \
	VMOVDQU    (DX), Y8; \
	VPACKSSDW  32(DX), Y8, Y8; \
	VPMULLW    Y8, Y0, Y0; \
	VMOVDQU    64(DX), Y9; \
	VPACKSSDW  96(DX), Y9, Y9; \
	VPMULLW    Y9, Y1, Y1; \
	VMOVDQU    128(DX), Y10; \
	VPACKSSDW  160(DX), Y10, Y10; \
	VPMULLW    Y10, Y2, Y2; \
	VMOVDQU    192(DX), Y11; \
	VPACKSSDW  224(DX), Y11, Y11; \
	VPMULLW    Y11, Y3, Y3; \
	VPUNPCKLWD Y2, Y0, Y4; \
	VPUNPCKHWD Y2, Y0, Y5; \
	VPUNPCKLWD Y3, Y1, Y6; \
	VPUNPCKHWD Y3, Y1, Y7

// PASS8 is one 8-point pass of jpeg_idct_islow over the pairs Y4-Y7,
// descaled by shift after adding round: outputs 0-7 as dwords in Y0, Y2,
// Y4, Y5, Y7, Y6, Y3, Y1.
#define PASS8(round, shift) \
	VPMADDWD k04a<>(SB), Y4, Y8; \
	VPMADDWD k04b<>(SB), Y4, Y9; \
	VPADDD   round, Y8, Y8; \
	VPADDD   round, Y9, Y9; \
	VPMADDWD k26a<>(SB), Y6, Y10; \
	VPMADDWD k26b<>(SB), Y6, Y11; \
	VPADDD   Y10, Y8, Y12; \
	VPSUBD   Y10, Y8, Y13; \
	VPADDD   Y11, Y9, Y14; \
	VPSUBD   Y11, Y9, Y15; \
	VPMADDWD k15o3<>(SB), Y5, Y8; \
	VPMADDWD k37o3<>(SB), Y7, Y9; \
	VPADDD   Y9, Y8, Y8; \
	VPADDD   Y8, Y12, Y0; \
	VPSUBD   Y8, Y12, Y1; \
	VPMADDWD k15o2<>(SB), Y5, Y8; \
	VPMADDWD k37o2<>(SB), Y7, Y9; \
	VPADDD   Y9, Y8, Y8; \
	VPADDD   Y8, Y14, Y2; \
	VPSUBD   Y8, Y14, Y3; \
	VPMADDWD k15o1<>(SB), Y5, Y8; \
	VPMADDWD k37o1<>(SB), Y7, Y9; \
	VPADDD   Y9, Y8, Y8; \
	VPADDD   Y8, Y15, Y4; \
	VPSUBD   Y8, Y15, Y6; \
	VPMADDWD k15o0<>(SB), Y5, Y8; \
	VPMADDWD k37o0<>(SB), Y7, Y9; \
	VPADDD   Y9, Y8, Y8; \
	VPADDD   Y8, Y13, Y5; \
	VPSUBD   Y8, Y13, Y7; \
	VPSRAD   $shift, Y0, Y0; \
	VPSRAD   $shift, Y1, Y1; \
	VPSRAD   $shift, Y2, Y2; \
	VPSRAD   $shift, Y3, Y3; \
	VPSRAD   $shift, Y4, Y4; \
	VPSRAD   $shift, Y5, Y5; \
	VPSRAD   $shift, Y6, Y6; \
	VPSRAD   $shift, Y7, Y7

// DCONLY sets AX to eight copies of the sample of a block whose only
// nonzero coefficient is the DC, computed as idct8Go and idct4Go do (in
// 32 bits, whatever the values).
#define DCONLY \
	MOVWLSX (SI), AX; \
	IMULL   (DX), AX; \
	SHLL    $2, AX; \
	ADDL    $16, AX; \
	SARL    $5, AX; \
	ADDL    $128, AX; \
	MOVL    $255, CX; \
	CMPL    AX, CX; \
	CMOVLGT CX, AX; \
	XORL    CX, CX; \
	TESTL   AX, AX; \
	CMOVLLT CX, AX; \
	MOVQ    $0x0101010101010101, CX; \
	IMULQ   CX, AX

// LOADBLOCK loads the block at SI into Y0-Y3 and jumps to full unless
// only its DC is nonzero.
#define LOADBLOCK(full) \
	VMOVDQU (SI), Y0; \
	VMOVDQU 32(SI), Y1; \
	VMOVDQU 64(SI), Y2; \
	VMOVDQU 96(SI), Y3; \
	VPOR    Y1, Y2, Y4; \
	VPOR    Y3, Y4, Y4; \
	VPTEST  Y4, Y4; \
	JNZ     full; \
	VPTEST  acmask<>(SB), Y0; \
	JNZ     full

// func idct8AVX2(blk *[64]int16, q *[64]int32, dst *byte, stride int)
//
// idct8Go, writing 8 rows of 8 samples at dst, stride apart.
TEXT ·idct8AVX2(SB), NOSPLIT, $0-32
	MOVQ blk+0(FP), SI
	MOVQ q+8(FP), DX
	MOVQ dst+16(FP), DI
	MOVQ stride+24(FP), BX
	LEAQ (BX)(BX*2), R8 // 3·stride
	LEAQ (DI)(BX*4), R9 // row 4
	LOADBLOCK(idct8full)
	DCONLY
	MOVQ AX, (DI)
	MOVQ AX, (DI)(BX*1)
	MOVQ AX, (DI)(BX*2)
	MOVQ AX, (DI)(R8*1)
	MOVQ AX, (R9)
	MOVQ AX, (R9)(BX*1)
	MOVQ AX, (R9)(BX*2)
	MOVQ AX, (R9)(R8*1)
	VZEROUPPER
	RET

idct8full:
	DEQUANT
	PASS8(round1<>(SB), 11)

	// To 16 bits, rows (0, 1) (2, 3) (4, 5) (6, 7) by columns 0-3 | 4-7,
	// and transposed into pairs of columns by rows.
	VPACKSSDW   Y2, Y0, Y8
	VPACKSSDW   Y5, Y4, Y9
	VPACKSSDW   Y6, Y7, Y10
	VPACKSSDW   Y1, Y3, Y11
	VPERM2I128  $0x20, Y10, Y8, Y0 // rows 0, 1 | 4, 5 of columns 0-3
	VPERM2I128  $0x31, Y10, Y8, Y1 // columns 4-7
	VPERM2I128  $0x20, Y11, Y9, Y2 // rows 2, 3 | 6, 7
	VPERM2I128  $0x31, Y11, Y9, Y3
	VPUNPCKLWD  Y1, Y0, Y4         // row 0 | 4 as (0, 4) (1, 5) (2, 6) (3, 7)
	VPUNPCKHWD  Y1, Y0, Y5         // row 1 | 5
	VPUNPCKLWD  Y3, Y2, Y6         // row 2 | 6
	VPUNPCKHWD  Y3, Y2, Y7         // row 3 | 7
	VPUNPCKLDQ  Y5, Y4, Y0
	VPUNPCKLDQ  Y7, Y6, Y1
	VPUNPCKHDQ  Y5, Y4, Y2
	VPUNPCKHDQ  Y7, Y6, Y3
	VPUNPCKLQDQ Y1, Y0, Y4         // (0, 4) by rows
	VPUNPCKHQDQ Y1, Y0, Y5         // (1, 5)
	VPUNPCKLQDQ Y3, Y2, Y6         // (2, 6)
	VPUNPCKHQDQ Y3, Y2, Y7         // (3, 7)

	// round2 also adds 128<<18, the centring: the sums of 16-bit inputs
	// stay within ±61214·32768, so it cannot overflow.
	PASS8(round2<>(SB), 18)

	// Columns to bytes, which the rounding constant has centred: each
	// lane then holds 4 columns of 4 rows, bytes by columns.
	VPACKSSDW  Y2, Y0, Y8
	VPACKSSDW  Y5, Y4, Y9
	VPACKSSDW  Y6, Y7, Y10
	VPACKSSDW  Y1, Y3, Y11
	VPACKUSWB  Y9, Y8, Y8  // columns 0-3, rows 0-3 | 4-7
	VPACKUSWB  Y11, Y10, Y10
	VPSHUFB    tr4x4<>(SB), Y8, Y8
	VPSHUFB    tr4x4<>(SB), Y10, Y10
	VPUNPCKLDQ Y10, Y8, Y0 // rows 0, 1 | 4, 5
	VPUNPCKHDQ Y10, Y8, Y1 // rows 2, 3 | 6, 7
	VEXTRACTI128 $1, Y0, X2
	VEXTRACTI128 $1, Y1, X3
	VMOVQ      X0, (DI)
	VMOVHPS    X0, (DI)(BX*1)
	VMOVQ      X1, (DI)(BX*2)
	VMOVHPS    X1, (DI)(R8*1)
	VMOVQ      X2, (R9)
	VMOVHPS    X2, (R9)(BX*1)
	VMOVQ      X3, (R9)(BX*2)
	VMOVHPS    X3, (R9)(R8*1)
	VZEROUPPER
	RET

// func idct4AVX2(blk *[64]int16, q *[64]int32, dst *byte, stride int)
//
// idct4Go, writing 4 rows of 4 samples at dst, stride apart. Row 4 and
// column 4 of the coefficients go into the sums with factor 0.
TEXT ·idct4AVX2(SB), NOSPLIT, $0-32
	MOVQ blk+0(FP), SI
	MOVQ q+8(FP), DX
	MOVQ dst+16(FP), DI
	MOVQ stride+24(FP), BX
	LEAQ (BX)(BX*2), R8
	LOADBLOCK(idct4full)
	DCONLY
	MOVL AX, (DI)
	MOVL AX, (DI)(BX*1)
	MOVL AX, (DI)(BX*2)
	MOVL AX, (DI)(R8*1)
	VZEROUPPER
	RET

idct4full:
	DEQUANT
	VPMADDWD r4k04<>(SB), Y4, Y8
	VPADDD   r4round1<>(SB), Y8, Y8 // tmp0
	VPMADDWD r4k26<>(SB), Y6, Y9    // tmp2
	VPADDD   Y9, Y8, Y10            // tmp10
	VPSUBD   Y9, Y8, Y11            // tmp12
	VPMADDWD r4k15o0<>(SB), Y5, Y8
	VPMADDWD r4k37o0<>(SB), Y7, Y9
	VPADDD   Y9, Y8, Y8             // odd tmp0
	VPMADDWD r4k15o2<>(SB), Y5, Y12
	VPMADDWD r4k37o2<>(SB), Y7, Y13
	VPADDD   Y13, Y12, Y12          // odd tmp2
	VPADDD   Y12, Y10, Y0
	VPSUBD   Y12, Y10, Y3
	VPADDD   Y8, Y11, Y1
	VPSUBD   Y8, Y11, Y2
	VPSRAD   $12, Y0, Y0
	VPSRAD   $12, Y1, Y1
	VPSRAD   $12, Y2, Y2
	VPSRAD   $12, Y3, Y3

	// To 16 bits and transposed: Y1 = [(0, 4) | (1, 5)] and
	// Y3 = [(2, 6) | (3, 7)], by rows 0-3.
	VPACKSSDW  Y1, Y0, Y0         // rows 0, 1 by columns 0-3 | 4-7
	VPACKSSDW  Y3, Y2, Y2         // rows 2, 3
	VPERM2I128 $0x20, Y2, Y0, Y1  // rows 0, 1 | 2, 3 of columns 0-3
	VPERM2I128 $0x31, Y2, Y0, Y3  // columns 4-7
	VPUNPCKLWD Y3, Y1, Y0         // row 0 | 2 as (0, 4) (1, 5) (2, 6) (3, 7)
	VPUNPCKHWD Y3, Y1, Y2         // row 1 | 3
	VPUNPCKLDQ Y2, Y0, Y1
	VPUNPCKHDQ Y2, Y0, Y3
	VPERMQ     $0xd8, Y1, Y1
	VPERMQ     $0xd8, Y3, Y3

	// Even part in the low lane, odd in the high. These sums can wrap
	// for extreme inputs, as idct4Go's do, so the centring comes after
	// the shift, as there.
	VPMADDWD   r4ka<>(SB), Y1, Y4
	VPMADDWD   r4kb<>(SB), Y3, Y5
	VPADDD     Y5, Y4, Y4
	VPADDD     r4round2<>(SB), Y4, Y4 // [tmp10 | tmp0]
	VPMADDWD   r4kc<>(SB), Y1, Y6
	VPMADDWD   r4kd<>(SB), Y3, Y7
	VPADDD     Y7, Y6, Y6
	VPADDD     r4round2<>(SB), Y6, Y6 // [tmp12 | tmp2]
	VPERM2I128 $0x20, Y6, Y4, Y8      // [tmp10 | tmp12]
	VPERM2I128 $0x31, Y4, Y6, Y9      // [tmp2 | tmp0]
	VPADDD     Y9, Y8, Y10            // [out0 | out1]
	VPSUBD     Y9, Y8, Y11            // [out3 | out2]
	VPSRAD     $19, Y10, Y10
	VPSRAD     $19, Y11, Y11
	VPACKSSDW  Y11, Y10, Y10
	VEXTRACTI128 $1, Y10, X11
	VPACKSSWB  X11, X10, X10          // out0, out3, out1, out2 by rows
	VPXOR      bias80<>(SB), X10, X10
	VPSHUFB    r4rows<>(SB), X10, X10
	VMOVD      X10, (DI)
	VPEXTRD    $1, X10, (DI)(BX*1)
	VPEXTRD    $2, X10, (DI)(BX*2)
	VPEXTRD    $3, X10, (DI)(R8*1)
	VZEROUPPER
	RET

// Constants; pairs (a, b) are dwords a | b<<16.

// (x0, x4)·(1, 1)<<13: tmp0
DATA k04a<>+0x0(SB)/8, $0x2000200020002000
DATA k04a<>+0x8(SB)/8, $0x2000200020002000
DATA k04a<>+0x10(SB)/8, $0x2000200020002000
DATA k04a<>+0x18(SB)/8, $0x2000200020002000
GLOBL k04a<>(SB), RODATA|NOPTR, $32

// (x0, x4)·(1, -1)<<13: tmp1
DATA k04b<>+0x0(SB)/8, $0xe0002000e0002000
DATA k04b<>+0x8(SB)/8, $0xe0002000e0002000
DATA k04b<>+0x10(SB)/8, $0xe0002000e0002000
DATA k04b<>+0x18(SB)/8, $0xe0002000e0002000
GLOBL k04b<>(SB), RODATA|NOPTR, $32

// (x2, x6): tmp3 of the even part
DATA k26a<>+0x0(SB)/8, $0x115129cf115129cf
DATA k26a<>+0x8(SB)/8, $0x115129cf115129cf
DATA k26a<>+0x10(SB)/8, $0x115129cf115129cf
DATA k26a<>+0x18(SB)/8, $0x115129cf115129cf
GLOBL k26a<>(SB), RODATA|NOPTR, $32

// (x2, x6): tmp2 of the even part
DATA k26b<>+0x0(SB)/8, $0xd6301151d6301151
DATA k26b<>+0x8(SB)/8, $0xd6301151d6301151
DATA k26b<>+0x10(SB)/8, $0xd6301151d6301151
DATA k26b<>+0x18(SB)/8, $0xd6301151d6301151
GLOBL k26b<>(SB), RODATA|NOPTR, $32

// (x1, x5): odd tmp0
DATA k15o0<>+0x0(SB)/8, $0x25a108d425a108d4
DATA k15o0<>+0x8(SB)/8, $0x25a108d425a108d4
DATA k15o0<>+0x10(SB)/8, $0x25a108d425a108d4
DATA k15o0<>+0x18(SB)/8, $0x25a108d425a108d4
GLOBL k15o0<>(SB), RODATA|NOPTR, $32

// (x3, x7): odd tmp0
DATA k37o0<>+0x0(SB)/8, $0xd39de6dcd39de6dc
DATA k37o0<>+0x8(SB)/8, $0xd39de6dcd39de6dc
DATA k37o0<>+0x10(SB)/8, $0xd39de6dcd39de6dc
DATA k37o0<>+0x18(SB)/8, $0xd39de6dcd39de6dc
GLOBL k37o0<>(SB), RODATA|NOPTR, $32

// (x1, x5): odd tmp1
DATA k15o1<>+0x0(SB)/8, $0x08d5192508d51925
DATA k15o1<>+0x8(SB)/8, $0x08d5192508d51925
DATA k15o1<>+0x10(SB)/8, $0x08d5192508d51925
DATA k15o1<>+0x18(SB)/8, $0x08d5192508d51925
GLOBL k15o1<>(SB), RODATA|NOPTR, $32

// (x3, x7): odd tmp1
DATA k37o1<>+0x0(SB)/8, $0x25a1d39e25a1d39e
DATA k37o1<>+0x8(SB)/8, $0x25a1d39e25a1d39e
DATA k37o1<>+0x10(SB)/8, $0x25a1d39e25a1d39e
DATA k37o1<>+0x18(SB)/8, $0x25a1d39e25a1d39e
GLOBL k37o1<>(SB), RODATA|NOPTR, $32

// (x1, x5): odd tmp2
DATA k15o2<>+0x0(SB)/8, $0xd39e25a1d39e25a1
DATA k15o2<>+0x8(SB)/8, $0xd39e25a1d39e25a1
DATA k15o2<>+0x10(SB)/8, $0xd39e25a1d39e25a1
DATA k15o2<>+0x18(SB)/8, $0xd39e25a1d39e25a1
GLOBL k15o2<>(SB), RODATA|NOPTR, $32

// (x3, x7): odd tmp2
DATA k37o2<>+0x0(SB)/8, $0xe6dcf72de6dcf72d
DATA k37o2<>+0x8(SB)/8, $0xe6dcf72de6dcf72d
DATA k37o2<>+0x10(SB)/8, $0xe6dcf72de6dcf72d
DATA k37o2<>+0x18(SB)/8, $0xe6dcf72de6dcf72d
GLOBL k37o2<>(SB), RODATA|NOPTR, $32

// (x1, x5): odd tmp3
DATA k15o3<>+0x0(SB)/8, $0x19252c6319252c63
DATA k15o3<>+0x8(SB)/8, $0x19252c6319252c63
DATA k15o3<>+0x10(SB)/8, $0x19252c6319252c63
DATA k15o3<>+0x18(SB)/8, $0x19252c6319252c63
GLOBL k15o3<>(SB), RODATA|NOPTR, $32

// (x3, x7): odd tmp3
DATA k37o3<>+0x0(SB)/8, $0x08d425a108d425a1
DATA k37o3<>+0x8(SB)/8, $0x08d425a108d425a1
DATA k37o3<>+0x10(SB)/8, $0x08d425a108d425a1
DATA k37o3<>+0x18(SB)/8, $0x08d425a108d425a1
GLOBL k37o3<>(SB), RODATA|NOPTR, $32

// pass 1 rounding: 1<<(13-2-1)
DATA round1<>+0x0(SB)/8, $0x0000040000000400
DATA round1<>+0x8(SB)/8, $0x0000040000000400
DATA round1<>+0x10(SB)/8, $0x0000040000000400
DATA round1<>+0x18(SB)/8, $0x0000040000000400
GLOBL round1<>(SB), RODATA|NOPTR, $32

// pass 2 rounding, 1<<(13+2+3-1), and the +128 centring
DATA round2<>+0x0(SB)/8, $0x0202000002020000
DATA round2<>+0x8(SB)/8, $0x0202000002020000
DATA round2<>+0x10(SB)/8, $0x0202000002020000
DATA round2<>+0x18(SB)/8, $0x0202000002020000
GLOBL round2<>(SB), RODATA|NOPTR, $32

// 4×4 (x0, x4): x0<<14
DATA r4k04<>+0x0(SB)/8, $0x0000400000004000
DATA r4k04<>+0x8(SB)/8, $0x0000400000004000
DATA r4k04<>+0x10(SB)/8, $0x0000400000004000
DATA r4k04<>+0x18(SB)/8, $0x0000400000004000
GLOBL r4k04<>(SB), RODATA|NOPTR, $32

// 4×4 (x2, x6): even tmp2
DATA r4k26<>+0x0(SB)/8, $0xe7823b21e7823b21
DATA r4k26<>+0x8(SB)/8, $0xe7823b21e7823b21
DATA r4k26<>+0x10(SB)/8, $0xe7823b21e7823b21
DATA r4k26<>+0x18(SB)/8, $0xe7823b21e7823b21
GLOBL r4k26<>(SB), RODATA|NOPTR, $32

// 4×4 (x1, x5): odd tmp0
DATA r4k15o0<>+0x0(SB)/8, $0x2e7521f92e7521f9
DATA r4k15o0<>+0x8(SB)/8, $0x2e7521f92e7521f9
DATA r4k15o0<>+0x10(SB)/8, $0x2e7521f92e7521f9
DATA r4k15o0<>+0x18(SB)/8, $0x2e7521f92e7521f9
GLOBL r4k15o0<>(SB), RODATA|NOPTR, $32

// 4×4 (x3, x7): odd tmp0
DATA r4k37o0<>+0x0(SB)/8, $0xf93eba79f93eba79
DATA r4k37o0<>+0x8(SB)/8, $0xf93eba79f93eba79
DATA r4k37o0<>+0x10(SB)/8, $0xf93eba79f93eba79
DATA r4k37o0<>+0x18(SB)/8, $0xf93eba79f93eba79
GLOBL r4k37o0<>(SB), RODATA|NOPTR, $32

// 4×4 (x1, x5): odd tmp2
DATA r4k15o2<>+0x0(SB)/8, $0xecc25203ecc25203
DATA r4k15o2<>+0x8(SB)/8, $0xecc25203ecc25203
DATA r4k15o2<>+0x10(SB)/8, $0xecc25203ecc25203
DATA r4k15o2<>+0x18(SB)/8, $0xecc25203ecc25203
GLOBL r4k15o2<>(SB), RODATA|NOPTR, $32

// 4×4 (x3, x7): odd tmp2
DATA r4k37o2<>+0x0(SB)/8, $0xefb01ccdefb01ccd
DATA r4k37o2<>+0x8(SB)/8, $0xefb01ccdefb01ccd
DATA r4k37o2<>+0x10(SB)/8, $0xefb01ccdefb01ccd
DATA r4k37o2<>+0x18(SB)/8, $0xefb01ccdefb01ccd
GLOBL r4k37o2<>(SB), RODATA|NOPTR, $32

// 4×4 pass 1 rounding
DATA r4round1<>+0x0(SB)/8, $0x0000080000000800
DATA r4round1<>+0x8(SB)/8, $0x0000080000000800
DATA r4round1<>+0x10(SB)/8, $0x0000080000000800
DATA r4round1<>+0x18(SB)/8, $0x0000080000000800
GLOBL r4round1<>(SB), RODATA|NOPTR, $32

// 4×4 pass 2: [(w0, w4) → tmp10 | (w1, w5) → tmp0]
DATA r4ka<>+0x0(SB)/8, $0x0000400000004000
DATA r4ka<>+0x8(SB)/8, $0x0000400000004000
DATA r4ka<>+0x10(SB)/8, $0x2e7521f92e7521f9
DATA r4ka<>+0x18(SB)/8, $0x2e7521f92e7521f9
GLOBL r4ka<>(SB), RODATA|NOPTR, $32

// 4×4 pass 2: [(w2, w6) → tmp10 | (w3, w7) → tmp0]
DATA r4kb<>+0x0(SB)/8, $0xe7823b21e7823b21
DATA r4kb<>+0x8(SB)/8, $0xe7823b21e7823b21
DATA r4kb<>+0x10(SB)/8, $0xf93eba79f93eba79
DATA r4kb<>+0x18(SB)/8, $0xf93eba79f93eba79
GLOBL r4kb<>(SB), RODATA|NOPTR, $32

// 4×4 pass 2: [(w0, w4) → tmp12 | (w1, w5) → tmp2]
DATA r4kc<>+0x0(SB)/8, $0x0000400000004000
DATA r4kc<>+0x8(SB)/8, $0x0000400000004000
DATA r4kc<>+0x10(SB)/8, $0xecc25203ecc25203
DATA r4kc<>+0x18(SB)/8, $0xecc25203ecc25203
GLOBL r4kc<>(SB), RODATA|NOPTR, $32

// 4×4 pass 2: [(w2, w6) → tmp12 | (w3, w7) → tmp2]
DATA r4kd<>+0x0(SB)/8, $0x187ec4df187ec4df
DATA r4kd<>+0x8(SB)/8, $0x187ec4df187ec4df
DATA r4kd<>+0x10(SB)/8, $0xefb01ccdefb01ccd
DATA r4kd<>+0x18(SB)/8, $0xefb01ccdefb01ccd
GLOBL r4kd<>(SB), RODATA|NOPTR, $32

// 4×4 pass 2 rounding, in the even lane
DATA r4round2<>+0x0(SB)/8, $0x0004000000040000
DATA r4round2<>+0x8(SB)/8, $0x0004000000040000
DATA r4round2<>+0x10(SB)/8, $0x0000000000000000
DATA r4round2<>+0x18(SB)/8, $0x0000000000000000
GLOBL r4round2<>(SB), RODATA|NOPTR, $32

// every coefficient of rows 0 and 1 but the DC
DATA acmask<>+0x0(SB)/8, $0xffffffffffff0000
DATA acmask<>+0x8(SB)/8, $0xffffffffffffffff
DATA acmask<>+0x10(SB)/8, $0xffffffffffffffff
DATA acmask<>+0x18(SB)/8, $0xffffffffffffffff
GLOBL acmask<>(SB), RODATA|NOPTR, $32

// transposes the 4×4 bytes of each lane
DATA tr4x4<>+0x0(SB)/8, $0x0d0905010c080400
DATA tr4x4<>+0x8(SB)/8, $0x0f0b07030e0a0602
DATA tr4x4<>+0x10(SB)/8, $0x0d0905010c080400
DATA tr4x4<>+0x18(SB)/8, $0x0f0b07030e0a0602
GLOBL tr4x4<>(SB), RODATA|NOPTR, $32

// 4×4 output (out0, out3, out1, out2 by rows) to rows
DATA r4rows<>+0x0(SB)/8, $0x050d0901040c0800
DATA r4rows<>+0x8(SB)/8, $0x070f0b03060e0a02
GLOBL r4rows<>(SB), RODATA|NOPTR, $16

// the +128 centring of signed bytes
DATA bias80<>+0x0(SB)/8, $0x8080808080808080
DATA bias80<>+0x8(SB)/8, $0x8080808080808080
GLOBL bias80<>(SB), RODATA|NOPTR, $16
