//go:build amd64 && !purego

#include "textflag.h"

// MixUp's float32 blend: dst[i] = src[i]*m + dst[i]*l for n values (a
// multiple of 8), eight lanes at a time, 32 values a turn, each product
// and the sum rounded apart (VMULPS then VADDPS, no FMA), as the Go loop
// in mixer.mixup computes them. dst and src do not overlap.

// func blend32AVX2(dst, src *float32, n int, m, l float32)
TEXT ·blend32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS m+24(FP), Y8
	VBROADCASTSS l+28(FP), Y9

loop32:
	CMPQ    CX, $32
	JLT     loop8
	VMULPS  0(SI), Y8, Y0
	VMULPS  32(SI), Y8, Y1
	VMULPS  64(SI), Y8, Y2
	VMULPS  96(SI), Y8, Y3
	VMULPS  0(DI), Y9, Y4
	VMULPS  32(DI), Y9, Y5
	VMULPS  64(DI), Y9, Y6
	VMULPS  96(DI), Y9, Y7
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     loop32

loop8:
	CMPQ    CX, $8
	JLT     done
	VMULPS  0(SI), Y8, Y0
	VMULPS  0(DI), Y9, Y4
	VADDPS  Y4, Y0, Y0
	VMOVUPS Y0, 0(DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     loop8

done:
	VZEROUPPER
	RET
