//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// baselineMCUBMI2 and baselineMCUAMD64 are baselineMCUGo, step for step,
// and leave the same state. Both are BODY; they differ in FILL8 and
// SHL_ACC_AX, the macros of the common path: BMI2's SHLX and SHRX and
// BMI1's ANDN, or shifts by CL.
//
// Registers: R9 acc; R10 n, in its low byte (the common path subtracts
// whole table entries, whose low bytes are the bits they take, and n
// never exceeds 64); R13 p; R11 &data[0]; R12 the block's index; DI the
// block; SI its table; R8 k-64; BX &zigzag; AX the table entry e; CX, DX
// and R14 scratch. Locals: highs and ones, constants of refill's 0xFF
// test; c63, 63; dlen and lim, len(data) and len(data)-8; site and ssite,
// where fillslow and search go back to.
//
// The code relies on what huffTable.build makes: the fast entries' runs
// plus one are at most 16, or 64, so that k stays under 128 and zigzag
// needs no mask; an AC symbol's extra bits are at most 15.

// EXTEND takes CX = s (1 to 15) bits off acc into AX, as extend does,
// using DX and R14.
#define EXTEND \
	MOVQ  R9, DX; \
	SARQ  $63, DX; \
	NOTQ  DX;            /* -1 if the top bit is clear: a negative value */ \
	MOVQ  R9, AX; \
	ROLQ  CX, AX; \
	MOVL  $1, R14; \
	SHLQ  CX, R14; \
	DECQ  R14; \
	ANDQ  R14, AX;       /* the s bits */ \
	ANDQ  R14, DX; \
	SUBQ  DX, AX; \
	SHLQ  CX, R9; \
	SUBQ  CX, R10

// ACSYM decodes one AC symbol the fast table holds, leaving for acslow if
// it does not and for blockdone at the end of the block.
#define ACSYM \
	MOVQ    R9, CX; \
	SHRQ    $53, CX; \
	MOVL    (SI)(CX*4), AX; \
	TESTB   $0x80, AL; \
	JNE     acslow; \
	SHL_ACC_AX; \
	SUBQ    AX, R10; \
	MOVBLZX AH, CX;              /* the run plus one */ \
	SHRL    $16, AX; \
	ADDQ    CX, R8; \
	MOVBLZX 63(BX)(R8*1), CX;    /* zigzag[k-1] */ \
	MOVW    AX, (DI)(CX*2); \
	JGE     blockdone            /* k >= 64, from the ADDQ */

#define BODY \
	MOVQ  b+0(FP), DX; \
	MOVQ  bitReader_data(DX), R11; \
	MOVQ  bitReader_data+8(DX), CX; \
	MOVQ  CX, dlen-32(SP); \
	SUBQ  $8, CX; \
	MOVQ  CX, lim-56(SP); \
	MOVQ  bitReader_p(DX), R13; \
	MOVQ  bitReader_acc(DX), R9; \
	MOVQ  bitReader_n(DX), R10; \
	LEAQ  ·zigzag(SB), BX; \
	MOVQ  $0x8080808080808080, AX; \
	MOVQ  AX, highs-16(SP); \
	MOVQ  $0xfefefefefefefeff, AX; \
	MOVQ  AX, ones-24(SP); \
	MOVQ  $63, c63-64(SP); \
	MOVQ  blocks+8(FP), DI; \
	XORL  R12, R12; \
	CMPQ  nb+16(FP), $0; \
	JLE   done; \
	\
block: \
	MOVQ  dcs+32(FP), SI; \
	MOVQ  (SI)(R12*8), SI; \
	FILL8(dcfill); \
dcfilled: \
	MOVQ  R9, CX; \
	SHRQ  $53, CX; \
	MOVL  (SI)(CX*4), AX; \
	TESTB $0x80, AL; \
	JNE   dcslow; \
	SHL_ACC_AX; \
	SUBQ  AX, R10; \
	SARL  $16, AX; \
	XORL  R14, R14;                 /* four AC symbols before a refill */ \
dcdiff: \
	MOVQ  comps+24(FP), DX; \
	MOVQ  (DX)(R12*8), DX; \
	ADDL  component_pred(DX), AX; \
	MOVL  AX, component_pred(DX); \
	MOVW  AX, (DI); \
	\
	MOVQ  acs+40(FP), SI; \
	MOVQ  (SI)(R12*8), SI; \
	MOVQ  $-63, R8; \
	TESTQ R14, R14; \
	JNE   acloop; \
	ACSYM; \
	ACSYM; \
	ACSYM; \
	ACSYM; \
acloop: \
	FILL8(acfill); \
acfilled: \
	ACSYM; \
	ACSYM; \
	ACSYM; \
	ACSYM; \
	ACSYM; \
	JMP   acloop; \
	\
blockdone: \
	ADDQ  $128, DI; \
	INCQ  R12; \
	CMPQ  R12, nb+16(FP); \
	JLT   block; \
done: \
	MOVBQZX R10, R10; \
	MOVQ  b+0(FP), DX; \
	MOVQ  R13, bitReader_p(DX); \
	MOVQ  R9, bitReader_acc(DX); \
	MOVQ  R10, bitReader_n(DX); \
	RET; \
	\
dcslow:                             /* l and s from the entry, or search */ \
	MOVL  AX, CX; \
	ANDL  $31, CX; \
	SHRL  $8, AX; \
	MOVBLZX AL, AX; \
	TESTL CX, CX; \
	JNE   dcl; \
	MOVQ  $0, ssite-48(SP); \
	JMP   search; \
dcl: \
	SHLQ  CX, R9; \
	SUBQ  CX, R10; \
	MOVL  AX, CX; \
	XORL  AX, AX; \
	TESTL CX, CX; \
	JEQ   dcslowdone; \
	EXTEND; \
dcslowdone: \
	MOVL  $1, R14;                  /* the AC symbols start with a refill */ \
	JMP   dcdiff; \
	\
acslow:                             /* refill to 32 bits, then as acSlow */ \
	MOVBQZX R10, R10; \
	CMPQ  R10, $32; \
	JGE   acslowfilled; \
	FILL8(acslowfill); \
acslowfilled: \
	MOVQ  R9, CX; \
	SHRQ  $53, CX; \
	MOVL  (SI)(CX*4), AX; \
	MOVL  AX, CX; \
	ANDL  $31, CX; \
	SHRL  $8, AX; \
	MOVBLZX AL, AX; \
	TESTL CX, CX; \
	JNE   acl; \
	MOVQ  $1, ssite-48(SP); \
	JMP   search; \
acl: \
	SHLQ  CX, R9; \
	SUBQ  CX, R10; \
	MOVL  AX, CX; \
	ANDL  $15, CX; \
	JEQ   acnos; \
	SHRL  $4, AX; \
	ADDQ  AX, R8; \
	EXTEND; \
	MOVBLZX 64(BX)(R8*1), CX; \
	MOVW  AX, (DI)(CX*2); \
	INCQ  R8; \
	JLT   acloop; \
	JMP   blockdone; \
acnos: \
	CMPL  AX, $0xF0; \
	JNE   blockdone; \
	ADDQ  $16, R8; \
	JLT   acloop; \
	JMP   blockdone; \
	\
search:                             /* t.slow: AX the symbol, CX its length */ \
	MOVQ  R9, AX; \
	SHRQ  $52, AX; \
	MOVL  $12, CX; \
	CMPL  AX, (huffTable_maxcode+48)(SI); \
	JLE   found; \
	MOVQ  R9, AX; \
	SHRQ  $51, AX; \
	MOVL  $13, CX; \
	CMPL  AX, (huffTable_maxcode+52)(SI); \
	JLE   found; \
	MOVQ  R9, AX; \
	SHRQ  $50, AX; \
	MOVL  $14, CX; \
	CMPL  AX, (huffTable_maxcode+56)(SI); \
	JLE   found; \
	MOVQ  R9, AX; \
	SHRQ  $49, AX; \
	MOVL  $15, CX; \
	CMPL  AX, (huffTable_maxcode+60)(SI); \
	JLE   found; \
	MOVQ  R9, AX; \
	SHRQ  $48, AX; \
	MOVL  $16, CX; \
	CMPL  AX, (huffTable_maxcode+64)(SI); \
	JLE   found; \
	XORL  AX, AX; \
	JMP   searched; \
found: \
	ADDL  huffTable_valoff(SI)(CX*4), AX; \
	MOVBLZX AL, AX; \
	MOVBLZX huffTable_val(SI)(AX*1), AX; \
searched: \
	CMPQ  ssite-48(SP), $0; \
	JEQ   dcl; \
	JMP   acl; \
	\
dcfill: \
	MOVQ  $0, site-40(SP); \
	JMP   fillslow; \
acfill: \
	MOVQ  $1, site-40(SP); \
	JMP   fillslow; \
acslowfill: \
	MOVQ  $2, site-40(SP); \
fillslow:                           /* bitReader.fillSlow */ \
	MOVBQZX R10, R10; \
	MOVQ  b+0(FP), DX; \
fsloop: \
	CMPQ  R10, $56; \
	JGT   fsdone; \
	XORL  AX, AX; \
	CMPB  bitReader_hit(DX), $0; \
	JNE   fspad; \
	CMPQ  R13, dlen-32(SP); \
	JGE   fsend; \
	MOVBLZX (R11)(R13*1), AX; \
	CMPL  AX, $0xFF; \
	JEQ   fsff; \
	INCQ  R13; \
	JMP   fsadd; \
fsff: \
	LEAQ  1(R13), CX; \
fsskip: \
	CMPQ  CX, dlen-32(SP); \
	JGE   fsmarker; \
	CMPB  (R11)(CX*1), $0xFF; \
	JNE   fsstuffed; \
	INCQ  CX; \
	JMP   fsskip; \
fsstuffed: \
	CMPB  (R11)(CX*1), $0; \
	JNE   fsmarker; \
	LEAQ  1(CX), R13; \
	JMP   fsadd; \
fsmarker: \
	MOVB  $1, bitReader_hit(DX); \
	XORL  AX, AX; \
	ADDQ  $8, bitReader_pad(DX); \
	JMP   fsadd; \
fsend: \
	MOVB  $1, bitReader_hit(DX); \
fspad: \
	ADDQ  $8, bitReader_pad(DX); \
fsadd: \
	MOVQ  $56, CX; \
	SUBQ  R10, CX; \
	SHLQ  CX, AX; \
	ORQ   AX, R9; \
	ADDQ  $8, R10; \
	JMP   fsloop; \
fsdone: \
	MOVQ  site-40(SP), CX; \
	CMPQ  CX, $1; \
	JLT   dcfilled; \
	JEQ   acfilled; \
	JMP   acslowfilled

// func baselineMCUAsm(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs *[10]*huffTable, acs *[10]*huffTable)
TEXT ·baselineMCUAsm(SB), NOSPLIT, $0-48
	CMPB ·haveBMI2(SB), $0
	JEQ  plain
	JMP  ·baselineMCUBMI2(SB)

plain:
	JMP ·baselineMCUAMD64(SB)

// FILL8 is refill's eight-byte path, or a jump to slow, which sets
// fillslow's site, where a 0xFF or the end of the data is near. The 0xFF
// test is word8's, ~(w+0x0101...) being ^w-0x0101...; 63-n is ~n&63.
#define FILL8(slow) \
	CMPQ   R13, lim-56(SP); \
	JGT    slow; \
	MOVQ   (R11)(R13*1), DX; \
	BSWAPQ DX; \
	MOVQ   $0x0101010101010101, CX; \
	ADDQ   DX, CX; \
	ANDNQ  DX, CX, CX; \
	TESTQ  highs-16(SP), CX; \
	JNE    slow; \
	SHRXQ  R10, DX, DX; \
	ORQ    DX, R9; \
	ANDNL  c63-64(SP), R10, CX; \
	SHRL   $3, CX; \
	ADDQ   CX, R13; \
	ORQ    $56, R10

#define SHL_ACC_AX SHLXQ AX, R9, R9

// func baselineMCUBMI2(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs *[10]*huffTable, acs *[10]*huffTable)
TEXT ·baselineMCUBMI2(SB), NOSPLIT, $64-48
	BODY

#undef FILL8
#undef SHL_ACC_AX

// FILL8 and SHL_ACC_AX without BMI1 and BMI2.
#define FILL8(slow) \
	CMPQ   R13, lim-56(SP); \
	JGT    slow; \
	MOVQ   (R11)(R13*1), DX; \
	BSWAPQ DX; \
	MOVQ   DX, CX; \
	NOTQ   CX; \
	ADDQ   ones-24(SP), CX; \
	ANDQ   DX, CX; \
	TESTQ  highs-16(SP), CX; \
	JNE    slow; \
	MOVQ   R10, CX; \
	SHRQ   CX, DX; \
	ORQ    DX, R9; \
	MOVL   R10, CX; \
	NOTL   CX; \
	ANDL   $63, CX; \
	SHRL   $3, CX; \
	ADDQ   CX, R13; \
	ORQ    $56, R10

#define SHL_ACC_AX MOVL AX, CX; SHLQ CX, R9

// func baselineMCUAMD64(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs *[10]*huffTable, acs *[10]*huffTable)
TEXT ·baselineMCUAMD64(SB), NOSPLIT, $64-48
	BODY
