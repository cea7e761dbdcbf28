//go:build amd64 && !purego

#include "textflag.h"

// Bytes 15..0: PSHUFB with this mask reverses a 16-byte register.
DATA reverseMask<>+0(SB)/8, $0x08090a0b0c0d0e0f
DATA reverseMask<>+8(SB)/8, $0x0001020304050607
GLOBL reverseMask<>(SB), RODATA|NOPTR, $16

// func windowRowsSSSE3(dst, src *byte, offs *int32, rows, w int, scol, dcol *int32, border, flags int)
//
// For each of rows output rows of w bytes (w a multiple of 16) at dst: if
// offs[r] is rowZero, the row is zeros; otherwise the w bytes at
// src+offs[r] are copied (reversed when flags&1) and then, for each border
// entry i, byte dcol[i] of the row is set to the byte at
// src+offs[r]+scol[i], or to zero when flags&2.
TEXT ·windowRowsSSSE3(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ offs+16(FP), BX
	MOVQ rows+24(FP), CX
	MOVQ w+32(FP), DX
	MOVQ scol+40(FP), R9
	MOVQ dcol+48(FP), R10
	MOVQ border+56(FP), R11
	MOVQ flags+64(FP), R12
	MOVOU reverseMask<>(SB), X7
	PXOR X6, X6

rowloop:
	TESTQ CX, CX
	JZ done
	MOVLQSX (BX), AX
	ADDQ $4, BX
	CMPQ AX, $-2147483648
	JEQ zerorow
	LEAQ (SI)(AX*1), R13
	XORQ R14, R14
	TESTQ $1, R12
	JNZ mirrorloop

copyloop:
	MOVOU (R13)(R14*1), X0
	MOVOU X0, (DI)(R14*1)
	ADDQ $16, R14
	CMPQ R14, DX
	JLT copyloop
	JMP borders

mirrorloop:
	MOVOU (R13)(R14*1), X0
	PSHUFB X7, X0
	MOVQ DX, AX
	SUBQ R14, AX
	MOVOU X0, -16(DI)(AX*1)
	ADDQ $16, R14
	CMPQ R14, DX
	JLT mirrorloop

borders:
	XORQ R14, R14
	TESTQ $2, R12
	JNZ zeroborder

borderloop:
	CMPQ R14, R11
	JGE nextrow
	MOVLQSX (R9)(R14*4), AX
	MOVBLZX (R13)(AX*1), AX
	MOVLQSX (R10)(R14*4), R8
	MOVB AX, (DI)(R8*1)
	INCQ R14
	JMP borderloop

zeroborder:
	CMPQ R14, R11
	JGE nextrow
	MOVLQSX (R10)(R14*4), R8
	MOVB $0, (DI)(R8*1)
	INCQ R14
	JMP zeroborder

zerorow:
	XORQ R14, R14

zeroloop:
	MOVOU X6, (DI)(R14*1)
	ADDQ $16, R14
	CMPQ R14, DX
	JLT zeroloop

nextrow:
	ADDQ DX, DI
	DECQ CX
	JMP rowloop

done:
	RET
