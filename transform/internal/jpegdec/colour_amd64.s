//go:build amd64 && !purego

#include "textflag.h"

// AVX2 versions of output.go's colour conversion and upsampling kernels,
// bit-exact with them. Each loop takes 32 samples a step and ends with a
// step that overlaps the one before it, so the rows must be at least one
// step long and the outputs must not overlap the inputs.
//
// The 8-bit samples are widened to 16-bit words in place within each
// 128-bit lane (VPUNPCKLBW gives samples 0-7 and 16-23, VPUNPCKHBW 8-15 and
// 24-31), which VPACKUSWB and VPERM2I128 undo.

// Words, to be broadcast.
DATA w128<>+0(SB)/2, $128
GLOBL w128<>(SB), RODATA|NOPTR, $2
DATA w1<>+0(SB)/2, $1
GLOBL w1<>(SB), RODATA|NOPTR, $2
DATA w2<>+0(SB)/2, $2
GLOBL w2<>(SB), RODATA|NOPTR, $2
DATA w7<>+0(SB)/2, $7
GLOBL w7<>(SB), RODATA|NOPTR, $2
DATA w8<>+0(SB)/2, $8
GLOBL w8<>(SB), RODATA|NOPTR, $2

// Byte pairs for VPMADDUBSW: 3·a + b and 9·a + 3·b.
DATA b31<>+0(SB)/2, $0x0103
GLOBL b31<>(SB), RODATA|NOPTR, $2
DATA b93<>+0(SB)/2, $0x0309
GLOBL b93<>(SB), RODATA|NOPTR, $2

// yccRGBGo's constants: the word pair (-f0344, f0285) for VPMADDWD, the
// rounding half of its 32-bit sum, and f0402 (0x66e9) and -f0228 (0xc5a2)
// as whole vectors, to be memory operands: the registers are all taken.
DATA yccG<>+0(SB)/2, $-22554
DATA yccG<>+2(SB)/2, $18734
GLOBL yccG<>(SB), RODATA|NOPTR, $4
DATA yccHalf<>+0(SB)/4, $32768
GLOBL yccHalf<>(SB), RODATA|NOPTR, $4
DATA yccR<>+0(SB)/8, $0x66e966e966e966e9
DATA yccR<>+8(SB)/8, $0x66e966e966e966e9
DATA yccR<>+16(SB)/8, $0x66e966e966e966e9
DATA yccR<>+24(SB)/8, $0x66e966e966e966e9
GLOBL yccR<>(SB), RODATA|NOPTR, $32
DATA yccB<>+0(SB)/8, $0xc5a2c5a2c5a2c5a2
DATA yccB<>+8(SB)/8, $0xc5a2c5a2c5a2c5a2
DATA yccB<>+16(SB)/8, $0xc5a2c5a2c5a2c5a2
DATA yccB<>+24(SB)/8, $0xc5a2c5a2c5a2c5a2
GLOBL yccB<>(SB), RODATA|NOPTR, $32

// The loop of each kernel: i (CX) steps by 32 to last (DX) inclusive, and
// when that misses last, one more step runs at last.
#define NEXT(loop, done) \
	ADDQ $32, CX; \
	CMPQ CX, DX; \
	JLE  loop; \
	LEAQ -32(CX), AX; \
	CMPQ AX, DX; \
	JEQ  done; \
	MOVQ DX, CX; \
	JMP  loop

// YCC converts the 16 pixels that UNPACK takes from Y0 (Y), Y1 (Cb) and Y2
// (Cr) into words of B, R and G; it needs Y15 zero, Y14 128s, Y13 ones,
// Y12 yccG pairs, Y11 yccHalf and uses Y3-Y7.
#define YCC(UNPACK, B, R, G) \
	UNPACK     Y15, Y0, Y3; \
	UNPACK     Y15, Y1, Y4; \
	VPSUBW     Y14, Y4, Y4; \
	UNPACK     Y15, Y2, Y5; \
	VPSUBW     Y14, Y5, Y5; \
	VPADDW     Y4, Y4, Y6; \
	VPMULHW    yccB<>(SB), Y6, Y7; \
	VPADDW     Y13, Y7, Y7; \
	VPSRAW     $1, Y7, Y7; \
	VPADDW     Y6, Y7, Y7; \
	VPADDW     Y3, Y7, B; \
	VPADDW     Y5, Y5, Y6; \
	VPMULHW    yccR<>(SB), Y6, Y7; \
	VPADDW     Y13, Y7, Y7; \
	VPSRAW     $1, Y7, Y7; \
	VPADDW     Y5, Y7, Y7; \
	VPADDW     Y3, Y7, R; \
	VPUNPCKLWD Y5, Y4, Y6; \
	VPUNPCKHWD Y5, Y4, Y7; \
	VPMADDWD   Y12, Y6, Y6; \
	VPMADDWD   Y12, Y7, Y7; \
	VPADDD     Y11, Y6, Y6; \
	VPADDD     Y11, Y7, Y7; \
	VPSRAD     $16, Y6, Y6; \
	VPSRAD     $16, Y7, Y7; \
	VPACKSSDW  Y7, Y6, Y6; \
	VPSUBW     Y5, Y6, Y6; \
	VPADDW     Y3, Y6, G

// func yccRGBAVX2(y, cb, cr, rp, gp, bp *byte, n int)
//
// yccRGBGo for n ≥ 32 pixels.
TEXT ·yccRGBAVX2(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), SI
	MOVQ cb+8(FP), R8
	MOVQ cr+16(FP), R9
	MOVQ rp+24(FP), R10
	MOVQ gp+32(FP), R11
	MOVQ bp+40(FP), R12
	MOVQ n+48(FP), DX
	SUBQ $32, DX
	XORQ CX, CX
	VPXOR        Y15, Y15, Y15
	VPBROADCASTW w128<>(SB), Y14
	VPBROADCASTW w1<>(SB), Y13
	VPBROADCASTD yccG<>(SB), Y12
	VPBROADCASTD yccHalf<>(SB), Y11

yccloop:
	VMOVDQU (SI)(CX*1), Y0
	VMOVDQU (R8)(CX*1), Y1
	VMOVDQU (R9)(CX*1), Y2
	YCC(VPUNPCKLBW, Y8, Y9, Y10)
	YCC(VPUNPCKHBW, Y0, Y1, Y2)
	VPACKUSWB Y0, Y8, Y8
	VPACKUSWB Y1, Y9, Y9
	VPACKUSWB Y2, Y10, Y10
	VMOVDQU   Y9, (R10)(CX*1)
	VMOVDQU   Y10, (R11)(CX*1)
	VMOVDQU   Y8, (R12)(CX*1)
	NEXT(yccloop, yccdone)

yccdone:
	VZEROUPPER
	RET

// INTERLEAVE stores the 64 output samples of input samples i to i+31 at
// out+2·i (DI+2·CX): EL and OL hold the even and odd ones, as words, of the
// samples VPUNPCKLBW widened, EH and OH of those VPUNPCKHBW did. Each word
// E | O<<8 is an output pair; it uses Y0 and Y1.
#define INTERLEAVE(EL, OL, EH, OH) \
	VPSLLW     $8, OL, OL; \
	VPOR       OL, EL, EL; \
	VPSLLW     $8, OH, OH; \
	VPOR       OH, EH, EH; \
	VPERM2I128 $0x20, EH, EL, Y0; \
	VPERM2I128 $0x31, EH, EL, Y1; \
	VMOVDQU    Y0, (DI)(CX*2); \
	VMOVDQU    Y1, 32(DI)(CX*2)

// func fancyH2AVX2(out, in *byte, n int)
//
// fancyH2Cols(out, in, 1, n-1) for n ≥ 34 input samples.
TEXT ·fancyH2AVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ in+8(FP), SI
	MOVQ n+16(FP), DX
	SUBQ $33, DX
	MOVQ $1, CX
	VPBROADCASTW b31<>(SB), Y15
	VPBROADCASTW w1<>(SB), Y14
	VPBROADCASTW w2<>(SB), Y13

h2loop:
	VMOVDQU    -1(SI)(CX*1), Y0
	VMOVDQU    (SI)(CX*1), Y1
	VMOVDQU    1(SI)(CX*1), Y2
	VPUNPCKLBW Y0, Y1, Y3
	VPUNPCKHBW Y0, Y1, Y4
	VPUNPCKLBW Y2, Y1, Y5
	VPUNPCKHBW Y2, Y1, Y6
	VPMADDUBSW Y15, Y3, Y3
	VPMADDUBSW Y15, Y4, Y4
	VPMADDUBSW Y15, Y5, Y5
	VPMADDUBSW Y15, Y6, Y6
	VPADDW     Y14, Y3, Y3
	VPADDW     Y14, Y4, Y4
	VPADDW     Y13, Y5, Y5
	VPADDW     Y13, Y6, Y6
	VPSRLW     $2, Y3, Y3
	VPSRLW     $2, Y4, Y4
	VPSRLW     $2, Y5, Y5
	VPSRLW     $2, Y6, Y6
	INTERLEAVE(Y3, Y5, Y4, Y6)
	NEXT(h2loop, h2done)

h2done:
	VZEROUPPER
	RET

// func fancyH2V2AVX2(out, near, far *byte, n int)
//
// fancyH2V2Cols(out, near, far, 1, n-1) for n ≥ 34 input samples.
TEXT ·fancyH2V2AVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ near+8(FP), SI
	MOVQ far+16(FP), R8
	MOVQ n+24(FP), DX
	SUBQ $33, DX
	MOVQ $1, CX
	VPBROADCASTW b31<>(SB), Y15
	VPBROADCASTW b93<>(SB), Y14
	VPBROADCASTW w8<>(SB), Y13
	VPBROADCASTW w7<>(SB), Y12

h2v2loop:
	VMOVDQU    -1(SI)(CX*1), Y0
	VMOVDQU    -1(R8)(CX*1), Y1
	VPUNPCKLBW Y1, Y0, Y2
	VPUNPCKHBW Y1, Y0, Y3
	VMOVDQU    (SI)(CX*1), Y0
	VMOVDQU    (R8)(CX*1), Y1
	VPUNPCKLBW Y1, Y0, Y4
	VPUNPCKHBW Y1, Y0, Y5
	VMOVDQU    1(SI)(CX*1), Y0
	VMOVDQU    1(R8)(CX*1), Y1
	VPUNPCKLBW Y1, Y0, Y6
	VPUNPCKHBW Y1, Y0, Y7

	// Column sums to the left (Y2, Y3) and right (Y6, Y7), and three
	// times the sums (Y4, Y5).
	VPMADDUBSW Y15, Y2, Y2
	VPMADDUBSW Y15, Y3, Y3
	VPMADDUBSW Y14, Y4, Y4
	VPMADDUBSW Y14, Y5, Y5
	VPMADDUBSW Y15, Y6, Y6
	VPMADDUBSW Y15, Y7, Y7
	VPADDW     Y4, Y2, Y2
	VPADDW     Y5, Y3, Y3
	VPADDW     Y4, Y6, Y6
	VPADDW     Y5, Y7, Y7
	VPADDW     Y13, Y2, Y2
	VPADDW     Y13, Y3, Y3
	VPADDW     Y12, Y6, Y6
	VPADDW     Y12, Y7, Y7
	VPSRLW     $4, Y2, Y2
	VPSRLW     $4, Y3, Y3
	VPSRLW     $4, Y6, Y6
	VPSRLW     $4, Y7, Y7
	INTERLEAVE(Y2, Y6, Y3, Y7)
	NEXT(h2v2loop, h2v2done)

h2v2done:
	VZEROUPPER
	RET

// func fancyV2AVX2(out, near, far *byte, n, bias int)
//
// fancyV2Go for n ≥ 32 samples.
TEXT ·fancyV2AVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ near+8(FP), SI
	MOVQ far+16(FP), R8
	MOVQ n+24(FP), DX
	MOVQ bias+32(FP), AX
	SUBQ $32, DX
	XORQ CX, CX
	MOVQ AX, X14
	VPBROADCASTW X14, Y14
	VPBROADCASTW b31<>(SB), Y15

v2loop:
	VMOVDQU    (SI)(CX*1), Y0
	VMOVDQU    (R8)(CX*1), Y1
	VPUNPCKLBW Y1, Y0, Y2
	VPUNPCKHBW Y1, Y0, Y3
	VPMADDUBSW Y15, Y2, Y2
	VPMADDUBSW Y15, Y3, Y3
	VPADDW     Y14, Y2, Y2
	VPADDW     Y14, Y3, Y3
	VPSRLW     $2, Y2, Y2
	VPSRLW     $2, Y3, Y3
	VPACKUSWB  Y3, Y2, Y2
	VMOVDQU    Y2, (DI)(CX*1)
	NEXT(v2loop, v2done)

v2done:
	VZEROUPPER
	RET
