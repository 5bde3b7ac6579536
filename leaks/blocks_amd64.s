//go:build amd64 && !purego

#include "textflag.h"

DATA lowNibbles<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lowNibbles<>(SB), RODATA|NOPTR, $32

// NIBBLES splits the 32 bytes at off(SI) into their low nibbles (Y0) and
// high nibbles (Y1).
#define NIBBLES(off) \
	VMOVDQU off(SI), Y0 \
	VPSRLW  $4, Y0, Y1  \
	VPAND   Y7, Y0, Y0  \
	VPAND   Y7, Y1, Y1

// HALF makes the masks of the 32 bytes at off(SI), into the low 32 bits
// of alpha and cand: the bytes of the alphabets, from their own nibbles,
// and the offsets where the buckets that the nibbles of the bytes there
// and at the next two all select are not none (Y2), each as a zero
// compare inverted.
#define HALF(off, alpha, cand) \
	NIBBLES(off)                \
	VPSHUFB   Y0, Y8, Y2        \
	VPSHUFB   Y1, Y9, Y3        \
	VPAND     Y3, Y2, Y2        \
	VMOVDQU   192(DI), Y4       \
	VPSHUFB   Y0, Y4, Y4        \
	VMOVDQU   224(DI), Y5       \
	VPSHUFB   Y1, Y5, Y5        \
	VPAND     Y5, Y4, Y4        \
	VPCMPEQB  Y6, Y4, Y4        \
	VPMOVMSKB Y4, alpha         \
	NOTL      alpha             \
	NIBBLES(off+1)              \
	VPSHUFB   Y0, Y10, Y3       \
	VPAND     Y3, Y2, Y2        \
	VPSHUFB   Y1, Y11, Y3       \
	VPAND     Y3, Y2, Y2        \
	NIBBLES(off+2)              \
	VPSHUFB   Y0, Y12, Y3       \
	VPAND     Y3, Y2, Y2        \
	VPSHUFB   Y1, Y13, Y3       \
	VPAND     Y3, Y2, Y2        \
	VPCMPEQB  Y6, Y2, Y2        \
	VPMOVMSKB Y2, cand          \
	NOTL      cand

// func blockMasks(t *blockTables, p *byte, n int, cand, alpha *uint64)
//
// Per block of 64 bytes at SI, two halves of 32: the masks of the first
// half are the low 32 bits, those of the second the high. Y8-Y13 hold the
// needles' tables, Y6 zero, Y7 the low nibbles' mask; X15 and R14 are
// left alone (the Go ABI's zero and g).
TEXT ·blockMasks(SB), NOSPLIT, $0-40
	MOVQ  t+0(FP), DI
	MOVQ  p+8(FP), SI
	MOVQ  n+16(FP), CX
	MOVQ  cand+24(FP), R8
	MOVQ  alpha+32(FP), R9
	TESTQ CX, CX
	JLE   done
	VMOVDQU 0(DI), Y8
	VMOVDQU 32(DI), Y9
	VMOVDQU 64(DI), Y10
	VMOVDQU 96(DI), Y11
	VMOVDQU 128(DI), Y12
	VMOVDQU 160(DI), Y13
	VMOVDQU lowNibbles<>(SB), Y7
	VPXOR   Y6, Y6, Y6

loop:
	HALF(0, R10, R11)
	HALF(32, AX, BX)
	SHLQ $32, AX
	ORQ  R10, AX
	MOVQ AX, (R9)
	SHLQ $32, BX
	ORQ  R11, BX
	MOVQ BX, (R8)
	ADDQ $64, SI
	ADDQ $8, R8
	ADDQ $8, R9
	DECQ CX
	JNZ  loop
	VZEROUPPER

done:
	RET
