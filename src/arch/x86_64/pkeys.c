/*
 * karui — x86-64 protection keys, the parts that domains (KR_EPC_H,
 * src/domain/domain.c) and isolated μprocesses (src/image/iso.c) share:
 * where a signal frame keeps PKRU, and the scan that tells whether code
 * could write PKRU itself.
 *
 * The frame.  The kernel saves PKRU with the rest of the XSAVE state in
 * a signal frame and restores it from there at rt_sigreturn, and runs the
 * handler itself with only key 0 open.  A handler that is to change what
 * the interrupted code may reach writes the frame's PKRU (and marks the
 * component present in XSTATE_BV: absent, XRSTOR would give its initial
 * value, every key open).
 *
 * The scan.  A protection key protects nothing against code that writes
 * PKRU: WRPKRU (0f 01 ef), or XRSTOR (0f ae /5 with a memory operand)
 * from a buffer whose PKRU it chose.  As ERIM does, code given a PKRU it
 * must keep is scanned byte by byte, so that a sequence that straddles
 * two instructions (reached by a jump into the middle of one) counts
 * too; the callers allow the instructions of their own gates.  One XRSTOR
 * form is allowed: the C library's lazy binding restores the vector
 * registers it saved with `mov $imm, %eax; xor %edx, %edx` before it, the
 * immediate without PKRU's bit (9).
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <string.h>

#include "../pkeys.h"

static unsigned pkru_off; /* 0: not read yet, or none */
static int pkru_read;

unsigned kr__pkru_off(void)
{
	if (!__atomic_load_n(&pkru_read, __ATOMIC_ACQUIRE)) {
		unsigned a, b = 0, c, d;
		if (!__get_cpuid_count(0xd, 9, &a, &b, &c, &d))
			b = 0;
		__atomic_store_n(&pkru_off, b, __ATOMIC_RELAXED);
		__atomic_store_n(&pkru_read, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&pkru_off, __ATOMIC_RELAXED);
}

__attribute__((no_stack_protector)) uint32_t *kr__frame_pkru(ucontext_t *uc)
{
	unsigned char *x = (unsigned char *)uc->uc_mcontext.fpregs;
	unsigned off = __atomic_load_n(&pkru_off, __ATOMIC_RELAXED);
	uint32_t magic, size;
	uint64_t features, bv;
	if (!x || !off)
		return NULL;
	memcpy(&magic, x + 464, 4); /* struct _fpx_sw_bytes, in the FXSAVE area */
	memcpy(&features, x + 472, 8);
	memcpy(&size, x + 480, 4);
	if (magic != 0x46505853u || !(features & (1u << 9)) || off + 4 > size)
		return NULL;
	memcpy(&bv, x + 512, 8); /* the XSAVE header's XSTATE_BV */
	bv |= 1u << 9;
	memcpy(x + 512, &bv, 8);
	return (uint32_t *)(x + off);
}

/* An XRSTOR at p[i] whose features are set just before it without PKRU. */
static int xrstor_without_pkru(const unsigned char *p, uintptr_t i)
{
	if (i < 7 || p[i - 7] != 0xb8 || p[i - 2] != 0x31 || p[i - 1] != 0xd2)
		return 0;
	uint32_t features;
	memcpy(&features, p + i - 6, 4);
	return !(features & 1u << 9);
}

long kr__writes_pkru(const unsigned char *p, size_t from, size_t n, uintptr_t at, uintptr_t glo,
		     uintptr_t ghi)
{
	for (size_t i = from; i + 3 <= n; i++) {
		if (p[i] != 0x0f)
			continue;
		unsigned char op = p[i + 1], m = p[i + 2];
		if (op == 0x01 && m == 0xef && !(at + i >= glo && at + i < ghi))
			return (long)i;
		if (op == 0xae && (m >> 3 & 7) == 5 && m >> 6 != 3 && !xrstor_without_pkru(p, i))
			return (long)i;
	}
	return -1;
}
