/* karui — x86-64 protection keys: what domains (src/domain, KR_EPC_H) and
 * isolated μprocesses (src/image/iso.c) share (x86_64/pkeys.c). */
#ifndef KARUI_ARCH_PKEYS_H
#define KARUI_ARCH_PKEYS_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#if defined(__x86_64__)
/* PKRU's offset in the standard XSAVE format (CPUID leaf 0xD, sub-leaf 9);
 * 0 where the CPU has no PKRU state.  Read once, then from memory. */
unsigned kr__pkru_off(void);
/* The PKRU a signal's return restores: in the frame's XSAVE area, marked
 * present; NULL where the frame has none.  For signal handlers (no stack
 * protector, no thread-local data); kr__pkru_off must have been called. */
uint32_t *kr__frame_pkru(ucontext_t *uc);
/* The first of the n bytes at p, from p[from] on, that begins an
 * instruction that writes PKRU (WRPKRU, or an XRSTOR but the C library's
 * lazy-binding form that leaves PKRU alone), outside [glo, ghi) (a gate's
 * own; p[0] is at address `at`): its index, or -1.  The bytes before
 * p[from] are context only.  Byte by byte, as ERIM scans. */
long kr__writes_pkru(const unsigned char *p, size_t from, size_t n, uintptr_t at, uintptr_t glo,
		     uintptr_t ghi);
static inline uint32_t kr__rdpkru(void)
{
	uint32_t v;
	__asm__ volatile("rdpkru" : "=a"(v) : "c"(0) : "rdx");
	return v;
}
#endif

#endif
