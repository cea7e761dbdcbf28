//go:build amd64 && !purego

#include "textflag.h"

// The normalize kernels of the CPU device: n uint8 values (a multiple of
// 24) become float(v)*scale[i%24] + bias[i%24], eight lanes at a time, the
// product and the sum rounded apart (VMULPS then VADDPS, no FMA), as
// Norm.Value computes them. sb holds 24 scales then 24 biases: the pattern
// repeats every 24 values, which covers 1 to 4 interleaved channels.

// func affine32AVX2(dst *float32, src *byte, n int, sb *[48]float32)
TEXT ·affine32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ sb+24(FP), AX
	VMOVUPS 0(AX), Y8
	VMOVUPS 32(AX), Y9
	VMOVUPS 64(AX), Y10
	VMOVUPS 96(AX), Y11
	VMOVUPS 128(AX), Y12
	VMOVUPS 160(AX), Y13

loop32:
	CMPQ CX, $24
	JLT  done32
	VPMOVZXBD 0(SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD 16(SI), Y2
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VMULPS    Y8, Y0, Y0
	VMULPS    Y9, Y1, Y1
	VMULPS    Y10, Y2, Y2
	VADDPS    Y11, Y0, Y0
	VADDPS    Y12, Y1, Y1
	VADDPS    Y13, Y2, Y2
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	ADDQ      $24, SI
	ADDQ      $96, DI
	SUBQ      $24, CX
	JMP       loop32

done32:
	VZEROUPPER
	RET

// func affine16AVX2(dst *uint16, src *byte, n int, sb *[48]float32)
// As affine32AVX2, then each float rounded to binary16, nearest even.
TEXT ·affine16AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ sb+24(FP), AX
	VMOVUPS 0(AX), Y8
	VMOVUPS 32(AX), Y9
	VMOVUPS 64(AX), Y10
	VMOVUPS 96(AX), Y11
	VMOVUPS 128(AX), Y12
	VMOVUPS 160(AX), Y13

loop16:
	CMPQ CX, $24
	JLT  done16
	VPMOVZXBD 0(SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD 16(SI), Y2
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VMULPS    Y8, Y0, Y0
	VMULPS    Y9, Y1, Y1
	VMULPS    Y10, Y2, Y2
	VADDPS    Y11, Y0, Y0
	VADDPS    Y12, Y1, Y1
	VADDPS    Y13, Y2, Y2
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VCVTPS2PH $0, Y2, X2
	VMOVDQU   X0, 0(DI)
	VMOVDQU   X1, 16(DI)
	VMOVDQU   X2, 32(DI)
	ADDQ      $24, SI
	ADDQ      $48, DI
	SUBQ      $24, CX
	JMP       loop16

done16:
	VZEROUPPER
	RET
