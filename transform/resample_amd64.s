//go:build amd64 && !purego

#include "textflag.h"

DATA half<>+0(SB)/4, $0x3f000000 // 0.5
GLOBL half<>(SB), RODATA|NOPTR, $4
DATA top<>+0(SB)/4, $0x437f0000 // 255.0
GLOBL top<>(SB), RODATA|NOPTR, $4

// func cvtRowAVX2(dst *float32, src *byte, n8 int)
//
// dst[i] = float32(src[i]) for i < 8·n8.
TEXT ·cvtRowAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), CX
	TESTQ CX, CX
	JZ   cvtdone

cvtloop:
	VPMOVZXBD (SI), Y0
	VCVTDQ2PS Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       cvtloop

cvtdone:
	VZEROUPPER
	RET

// func hpassAVX2(dst, row *float32, idx *int32, wgt *float32, taps, n8, stride int)
//
// For i < 8·n8: dst[i] = Σ_k wgt[k·stride+i] · row[idx[k·stride+i]], the
// products rounded, then summed in k order from zero (no FMA): the bits
// of the Go loop it replaces. taps ≥ 1.
TEXT ·hpassAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ row+8(FP), SI
	MOVQ idx+16(FP), R8
	MOVQ wgt+24(FP), R9
	MOVQ taps+32(FP), R10
	MOVQ n8+40(FP), CX
	MOVQ stride+48(FP), R11
	SHLQ $2, R11
	XORQ BX, BX

hblock:
	TESTQ CX, CX
	JZ    hdone
	VXORPS Y0, Y0, Y0
	LEAQ  (R8)(BX*1), R12
	LEAQ  (R9)(BX*1), R13
	MOVQ  R10, DX

htap:
	VMOVDQU    (R12), Y2
	VPCMPEQD   Y3, Y3, Y3
	VGATHERDPS Y3, (SI)(Y2*4), Y4
	VMULPS     (R13), Y4, Y4
	VADDPS     Y4, Y0, Y0
	ADDQ       R11, R12
	ADDQ       R11, R13
	DECQ       DX
	JNZ        htap
	VMOVUPS    Y0, (DI)(BX*1)
	ADDQ       $32, BX
	DECQ       CX
	JMP        hblock

hdone:
	VZEROUPPER
	RET

// func vpassAVX2(dst *byte, mid *float32, stride int, wgt *float32, taps, n8 int)
//
// For i < 8·n8: v = Σ_k wgt[k] · mid[k·stride+i] (rounded products summed
// in k order from zero), dst[i] = v rounded half up and clamped to 0..255,
// as clampByte does. taps ≥ 1.
TEXT ·vpassAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ mid+8(FP), SI
	MOVQ stride+16(FP), R11
	SHLQ $2, R11
	MOVQ wgt+24(FP), R9
	MOVQ taps+32(FP), R10
	MOVQ n8+40(FP), CX
	VBROADCASTSS half<>(SB), Y5
	VBROADCASTSS top<>(SB), Y6
	VXORPS Y7, Y7, Y7

vblock:
	TESTQ CX, CX
	JZ    vdone
	VXORPS Y0, Y0, Y0
	MOVQ  SI, R12
	MOVQ  R9, R13
	MOVQ  R10, DX

vtap:
	VBROADCASTSS (R13), Y1
	VMULPS       (R12), Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         R11, R12
	ADDQ         $4, R13
	DECQ         DX
	JNZ          vtap
	VADDPS       Y5, Y0, Y0
	VMAXPS       Y7, Y0, Y0
	VMINPS       Y6, Y0, Y0
	VCVTTPS2DQ   Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKUSDW    X1, X0, X0
	VPACKUSWB    X0, X0, X0
	VMOVQ        X0, (DI)
	ADDQ         $8, DI
	ADDQ         $32, SI
	DECQ         CX
	JMP          vblock

vdone:
	VZEROUPPER
	RET
