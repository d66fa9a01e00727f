/*
 * karui L3 — a stream's read or write that neither waits nor wakes, for a
 * caller that cannot call functions: image/fast.c, which runs with a
 * μprocess's thread pointer in %fs and its vector registers live (no TLS,
 * no libc, no vector register: general registers only, x86-64).
 *
 * It does what read_until / write_until (stream.c) do in the case where
 * nobody waits on the other side and the call completes at once: a write
 * whose bytes all fit in the ring, a read of a ring that holds bytes.
 * Everything else is declined (-1) before anything changes, and the caller
 * takes the general path: a lock held by someone else, a closed or dead
 * stream, a waiter to serve or wake, a write that would wait, an empty
 * ring, a copy at a distance that 4 KiB aliasing makes slow (copy.h).
 * Bytes move with `rep movsb`.
 */
#ifndef KARUI_SYNC_STREAM_FAST_H
#define KARUI_SYNC_STREAM_FAST_H

#include "copy.h"
#include "karui/sync.h"
#include "../arch/spin.h"

static inline int kr__stream_fast_slow_distance(const void *d, const void *s, size_t n)
{
	size_t dist = ((uintptr_t)d - (uintptr_t)s) % KR_ALIAS_PAGE;
	return n > KR_COPY_PIECE && dist && dist < KR_ALIAS_NEAR;
}

static inline void kr__stream_fast_copy(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

/* Bytes moved (> 0), or -1: declined. */
static inline long kr__stream_fast(kr_stream *s, int write, void *buf, size_t len)
{
	if (!len || !kr__spin_trylock(&s->lock))
		return -1;
	long r = -1;
	if (s->dead || !s->cap || s->rclosed || s->readers.head || s->writers.head)
		goto out;
	unsigned char *p = buf;
	size_t n, at;
	if (write) {
		if (s->wclosed || len > s->cap - s->count)
			goto out;
		n = len;
		at = (s->head + s->count) % s->cap;
	} else {
		if (!s->count)
			goto out;
		n = len < s->count ? len : s->count;
		at = s->head;
	}
	size_t first = n < s->cap - at ? n : s->cap - at;
	unsigned char *ring = s->buf + at;
	if (write ? kr__stream_fast_slow_distance(ring, p, first) ||
			    kr__stream_fast_slow_distance(s->buf, p + first, n - first)
		  : kr__stream_fast_slow_distance(p, ring, first) ||
			    kr__stream_fast_slow_distance(p + first, s->buf, n - first))
		goto out;
	if (write) {
		kr__stream_fast_copy(ring, p, first);
		kr__stream_fast_copy(s->buf, p + first, n - first);
		s->count += n;
	} else {
		kr__stream_fast_copy(p, ring, first);
		kr__stream_fast_copy(p + first, s->buf, n - first);
		s->head = (s->head + n) % s->cap;
		s->count -= n;
	}
	r = (long)n;
out:
	kr__spin_unlock(&s->lock);
	return r;
}

#endif
