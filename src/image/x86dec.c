/*
 * karui image layer — x86-64 instruction lengths.
 *
 * Rewriting code in a μprocess's private copy (rewrite.c) is safe only at
 * instruction boundaries: a patch that starts inside an instruction, or a
 * jump written over the next instruction's first byte, breaks the program
 * the first time it runs there.  kr__x86_decode finds those boundaries:
 * given the bytes at p it says how long the instruction is, what kind of
 * control transfer it is (direct jumps, conditional jumps, calls and
 * their targets; indirect ones; returns; syscall and cpuid, the sites
 * karui rewrites; instructions that trap), and whether it addresses
 * memory relative to %rip (such an instruction cannot be moved elsewhere
 * unchanged).
 *
 * It covers what GCC and glibc's hand-written assembly emit in 64-bit
 * code: the legacy prefixes (66 67 f0 f2 f3 and the segment ones),
 * REX, the one-byte map, the 0f, 0f38 and 0f3a maps, VEX (c4, c5: maps
 * 0f, 0f38, 0f3a), EVEX (62: maps 0f, 0f38, 0f3a, 5 and 6 of AVX-512 and
 * AVX512-FP16), x87, 3DNow!, SSE4a's extrq/insertq, and the ModRM, SIB,
 * displacement and immediate rules with the sizes the prefixes choose
 * (66 shrinks imm32 to imm16 unless REX.W; mov r64,imm64; moffs with
 * 8-byte offsets, 4 under 67; f6/f7 carry an immediate for /0 and /1
 * only; 0f 20-23 ignore ModRM.mod; a SIB base of 101 under mod 00 takes a
 * disp32; mod 00 rm 101 is %rip-relative).  A REX followed by another
 * prefix is ignored, as the CPU ignores it (objdump lists it as an
 * instruction of its own).  Unassigned opcodes inside the 0f38, 0f3a,
 * VEX and EVEX maps take their map's form (ModRM; imm8 in 0f3a): every
 * assigned one has it, so the length is what a later CPU would use.
 *
 * It answers 0 (not decoded) for what is invalid in 64-bit mode (the
 * opcodes 32-bit code alone has: push/pop of segment registers, daa,
 * pusha, bound, les/lds as such, far absolute call/jmp, into, aam/aad,
 * salc; groups' undefined /reg forms fe /2-7, ff /7, c6/c7 /1-6, far
 * indirect branches to a register; VEX and EVEX after 66, f2, f3, f0 or
 * REX), for encodings whose length or meaning CPUs disagree on or that
 * compilers never emit (66 before a rel32 branch: 16-bit on AMD, ignored
 * on Intel; AMD's XOP; APX's REX2 and EVEX map 4; VEX and EVEX maps it
 * does not know), for anything longer than 15 bytes, and for an
 * instruction that does not fit in the `max` bytes it may read.  A
 * caller treats 0 as "do not touch": the site keeps its slow, safe path.
 *
 * Why a length decoder and not a disassembler: karui never needs to know
 * which instruction it has beyond the few kinds above, and every extra
 * field a table carries is a field that can be wrong.  The length of an
 * x86 instruction depends on the prefixes, the map, the opcode's
 * operand form (ModRM or not, the immediate's size) and, within a few
 * groups, ModRM.reg; nothing else.  So two 256-entry tables (one-byte
 * map, 0f map) of "ModRM? which immediate?" and a handful of exceptions
 * written out as code describe every length, small enough to review
 * against the manuals line by line, and checked in tests/test_x86dec.c
 * against objdump over the whole of ld.so, libc and three programs.
 * Mnemonics, operands and operand validity (a lock on a register
 * destination, an SSE opcode without its mandatory prefix) are not
 * checked: they do not change the length, and a disassembler would be
 * tens of times larger for no boundary it finds better.
 */
#include <string.h>

#include "uproc.h"

/* table entries: ModRM follows (MR), then one of the immediate forms */
enum {
	NO = 0,   /* no immediate */
	IB = 1,   /* imm8 */
	IW = 2,   /* imm16 */
	IZ = 3,   /* imm16 under 66 (without REX.W), else imm32 */
	IV = 4,   /* mov r,imm: imm64 with REX.W, imm16 under 66, else imm32 */
	IWB = 5,  /* enter: imm16, imm8 */
	MO = 6,   /* moffs: 8 bytes, 4 under 67 */
	J8 = 7,   /* rel8 */
	JZ = 8,   /* rel32 (66: refused) */
	G3 = 9,   /* f6/f7: IB/IZ for /0 and /1, none else */
	MR = 0x10,
	XX = 0xff /* invalid in 64-bit mode, or a prefix or escape seen before */
};

static const uint8_t map1[256] = {
	/* 00 */ MR, MR, MR, MR, IB, IZ, XX, XX, MR, MR, MR, MR, IB, IZ, XX, XX,
	/* 10 */ MR, MR, MR, MR, IB, IZ, XX, XX, MR, MR, MR, MR, IB, IZ, XX, XX,
	/* 20 */ MR, MR, MR, MR, IB, IZ, XX, XX, MR, MR, MR, MR, IB, IZ, XX, XX,
	/* 30 */ MR, MR, MR, MR, IB, IZ, XX, XX, MR, MR, MR, MR, IB, IZ, XX, XX,
	/* 40 */ XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX,
	/* 50 */ NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO,
	/* 60 */ XX, XX, XX, MR, XX, XX, XX, XX, IZ, MR | IZ, IB, MR | IB, NO, NO, NO, NO,
	/* 70 */ J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8, J8,
	/* 80 */ MR | IB, MR | IZ, XX, MR | IB, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 90 */ NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, XX, NO, NO, NO, NO, NO,
	/* a0 */ MO, MO, MO, MO, NO, NO, NO, NO, IB, IZ, NO, NO, NO, NO, NO, NO,
	/* b0 */ IB, IB, IB, IB, IB, IB, IB, IB, IV, IV, IV, IV, IV, IV, IV, IV,
	/* c0 */ MR | IB, MR | IB, IW, NO, XX, XX, MR | IB, MR | IZ, IWB, NO, IW, NO, NO, IB, XX, NO,
	/* d0 */ MR, MR, MR, MR, XX, XX, XX, NO, MR, MR, MR, MR, MR, MR, MR, MR,
	/* e0 */ J8, J8, J8, J8, IB, IB, IB, IB, JZ, JZ, XX, J8, NO, NO, NO, NO,
	/* f0 */ XX, NO, XX, XX, NO, NO, MR | G3, MR | G3, NO, NO, NO, NO, NO, NO, MR, MR,
};

/* 0f xx; 0f 38 and 0f 3a are handled before this table */
static const uint8_t map2[256] = {
	/* 00 */ MR, MR, MR, MR, XX, NO, NO, NO, NO, NO, XX, NO, XX, MR, NO, MR | IB,
	/* 10 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 20 */ MR, MR, MR, MR, XX, XX, XX, XX, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 30 */ NO, NO, NO, NO, NO, NO, XX, NO, XX, XX, XX, XX, XX, XX, XX, XX,
	/* 40 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 50 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 60 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* 70 */ MR | IB, MR | IB, MR | IB, MR | IB, MR, MR, MR, NO, MR, MR, XX, XX, MR, MR, MR, MR,
	/* 80 */ JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ, JZ,
	/* 90 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* a0 */ NO, NO, NO, MR, MR | IB, MR, XX, XX, NO, NO, NO, MR, MR | IB, MR, MR, MR,
	/* b0 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR | IB, MR, MR, MR, MR, MR,
	/* c0 */ MR, MR, MR | IB, MR, MR | IB, MR | IB, MR | IB, MR, NO, NO, NO, NO, NO, NO, NO, NO,
	/* d0 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* e0 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
	/* f0 */ MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR, MR,
};

/* VEX and EVEX map 0f: the opcodes that take an imm8 (shifts by
 * immediate, pshufd, cmpps, pinsrw, pextrw, shufps) */
static int vex_map1_imm(uint8_t op)
{
	return (op >= 0x70 && op <= 0x73) || op == 0xc2 || (op >= 0xc4 && op <= 0xc6);
}

static int32_t rd32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	return (int32_t)v;
}

int kr__x86_decode(const uint8_t *p, size_t max, struct kr__insn *out)
{
	memset(out, 0, sizeof *out);
	size_t n = max < 15 ? max : 15, i = 0;
	int p66 = 0, p67 = 0, pf2 = 0, pf3 = 0, lock = 0, rex = 0;

	/* prefixes; a REX counts only right before the opcode */
	for (;; i++) {
		if (i >= n)
			return 0;
		uint8_t b = p[i];
		if ((b & 0xf0) == 0x40) {
			rex = b;
			continue;
		}
		if (b == 0x66)
			p66 = 1;
		else if (b == 0x67)
			p67 = 1;
		else if (b == 0xf2)
			pf2 = 1;
		else if (b == 0xf3)
			pf3 = 1;
		else if (b == 0xf0)
			lock = 1;
		else if (b != 0x2e && b != 0x36 && b != 0x3e && b != 0x26 && b != 0x64 &&
			 b != 0x65)
			break;
		rex = 0;
	}
	int rexw = rex & 8;

	uint8_t op = p[i++];
	uint8_t t;          /* the table entry */
	int map = 0;        /* 0: one-byte, 1: 0f, 2: 0f38, 3: 0f3a, 5, 6 */
	int ignore_mod = 0; /* 0f 20-23: ModRM.mod reads as 11 */
	int vex = 0;        /* VEX or EVEX */

	if (op == 0xc4 || op == 0xc5 || op == 0x62) {
		if (p66 || pf2 || pf3 || lock || rex)
			return 0;
		if (op == 0xc5) {           /* c5 [R vvvv L pp] op */
			map = 1;
			i += 1;
		} else if (op == 0xc4) {    /* c4 [RXB mmmmm] [W vvvv L pp] op */
			if (i >= n)
				return 0;
			map = p[i] & 0x1f;
			if (map < 1 || map > 3)
				return 0;
			i += 2;
		} else {                    /* 62 [RXBR' 0 mmm] [W vvvv 1 pp] [z L'L b V' aaa] op */
			if (i >= n)
				return 0;
			map = p[i] & 0x07;
			if (map == 0 || map == 4 || map == 7)
				return 0;
			i += 3;
		}
		if (i >= n)
			return 0;
		uint8_t esc = op;
		op = p[i++];
		t = MR | ((map == 3 || (map == 1 && vex_map1_imm(op))) ? IB : NO);
		if (map == 1 && op == 0x77) {
			if (esc == 0x62)
				return 0;   /* no EVEX form */
			t = NO;             /* vzeroupper, vzeroall */
		}
		vex = 1;
	} else if (op == 0x0f) {
		if (i >= n)
			return 0;
		op = p[i++];
		if (op == 0x38 || op == 0x3a) {
			map = op == 0x38 ? 2 : 3;
			if (i >= n)
				return 0;
			op = p[i++];
			t = MR | (map == 3 ? IB : NO);
		} else {
			map = 1;
			t = map2[op];
			if (t == XX)
				return 0;
			if (op == 0xb8 && !pf3)
				return 0;   /* jmpe (IA-64 only); f3 0f b8 is popcnt */
			if (op == 0x78 && (p66 || pf2))
				t = MR | IW; /* extrq/insertq: two imm8 */
			ignore_mod = op >= 0x20 && op <= 0x23;
		}
	} else {
		t = map1[op];
		if (t == XX)
			return 0;
	}

	/* ModRM, SIB, displacement */
	int reg = -1, mod = 3, rm = 0;
	if (t & MR) {
		if (i >= n)
			return 0;
		uint8_t m = p[i++];
		reg = (m >> 3) & 7;
		mod = ignore_mod ? 3 : m >> 6;
		rm = m & 7;
		if (mod != 3) {
			if (rm == 4) {
				if (i >= n)
					return 0;
				uint8_t sib = p[i++];
				if (mod == 0 && (sib & 7) == 5)
					i += 4;
			} else if (mod == 0 && rm == 5) {
				out->riprel = 1;
				i += 4;
			}
			if (mod == 1)
				i += 1;
			else if (mod == 2)
				i += 4;
		}
	}

	/* the groups whose /reg changes the length or is undefined */
	if (map == 0) {
		switch (op) {
		case 0x8f:
			if (reg != 0)
				return 0;   /* AMD XOP */
			break;
		case 0xc6:
		case 0xc7:
			/* mov /0; xabort and xbegin: c6 f8 ib, c7 f8 rel32 */
			if (reg != 0 && !(reg == 7 && mod == 3 && rm == 0))
				return 0;
			break;
		case 0xfe:
			if (reg > 1)
				return 0;
			break;
		case 0xff:
			if (reg == 7 || ((reg == 3 || reg == 5) && mod == 3))
				return 0;
			break;
		}
	}

	/* immediate */
	int imm = 0;
	int z = p66 && !rexw ? 2 : 4;
	switch (t & 0x0f) {
	case IB:
	case J8:
		imm = 1;
		break;
	case IW:
		imm = 2;
		break;
	case IZ:
		imm = z;
		break;
	case IV:
		imm = rexw ? 8 : z;
		break;
	case IWB:
		imm = 3;
		break;
	case MO:
		imm = p67 ? 4 : 8;
		break;
	case JZ:
		if (p66)
			return 0;
		imm = 4;
		break;
	case G3:
		imm = reg > 1 ? 0 : op == 0xf6 ? 1 : z;
		break;
	}
	i += imm;
	if (i > n)
		return 0;
	out->len = (uint8_t)i;

	/* kind and target */
	if (map == 0) {
		switch (op) {
		case 0xeb:
		case 0xe9:
			out->kind = KR_INSN_JMP;
			break;
		case 0xe8:
			out->kind = KR_INSN_CALL;
			break;
		case 0xc2:
		case 0xc3:
		case 0xca:
		case 0xcb:
			out->kind = KR_INSN_RET;
			break;
		case 0xcc:
		case 0xf1:
		case 0xf4:
			out->kind = KR_INSN_UD;
			break;
		case 0xff:
			if (reg == 2 || reg == 3)
				out->kind = KR_INSN_CALL_IND;
			else if (reg == 4 || reg == 5)
				out->kind = KR_INSN_JMP_IND;
			break;
		default:
			if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3))
				out->kind = KR_INSN_JCC;
			break;
		}
	} else if (map == 1 && !vex) {
		if (op >= 0x80 && op <= 0x8f)
			out->kind = KR_INSN_JCC;
		else if (op == 0x05)
			out->kind = KR_INSN_SYSCALL;
		else if (op == 0xa2)
			out->kind = KR_INSN_CPUID;
		else if (op == 0x0b || op == 0xb9 || op == 0xff)
			out->kind = KR_INSN_UD;   /* ud2, ud1, ud0 */
	}
	if ((t & 0x0f) == J8)
		out->target = (int64_t)i + (int8_t)p[i - 1];
	else if ((t & 0x0f) == JZ)
		out->target = (int64_t)i + rd32(p + i - 4);
	return (int)i;
}
