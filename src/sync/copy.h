/*
 * karui L3 — the copy of bytes that a primitive moves between buffers
 * (stream bytes, channel elements of more than 16 bytes).
 *
 * 4 KiB aliasing.  A copy whose destination lies just past its source
 * modulo 4 KiB makes the loads wait on stores they only seem to alias.
 * glibc's memcpy, which moves 4 KiB and more with `rep movsb` on some
 * processors, then runs far slower, at distances of a few bytes to a few
 * dozen and at any size from 4 KiB up.  A primitive's
 * buffer and a caller's fall into that relation by chance (a ring's malloc
 * that moves by a few bytes).  So a copy whose distance modulo 4 KiB is in
 * [1, 64) goes in 2 KiB pieces, below glibc's rep-movsb thresholds, which
 * its vector loops move at full speed whatever the distance.  Any other
 * copy is memcpy's.  (Figures: docs/notes/2026-11-25-measurements.md.)
 */
#ifndef KARUI_SYNC_COPY_H
#define KARUI_SYNC_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { KR_ALIAS_PAGE = 4096, KR_ALIAS_NEAR = 64, KR_COPY_PIECE = 2048 };

static inline void kr__copy(void *dst, const void *src, size_t n)
{
	size_t dist = ((uintptr_t)dst - (uintptr_t)src) % KR_ALIAS_PAGE;
	if (n <= KR_COPY_PIECE || dist == 0 || dist >= KR_ALIAS_NEAR) {
		memcpy(dst, src, n);
		return;
	}
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (; n > KR_COPY_PIECE; n -= KR_COPY_PIECE, d += KR_COPY_PIECE, s += KR_COPY_PIECE)
		memcpy(d, s, KR_COPY_PIECE);
	memcpy(d, s, n);
}

#endif
