/* L3: byte streams (src/sync/stream.c): order through small and large
 * rings, close, and copies at every distance. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

static kr_stream st;
enum { STREAM_BYTES = 1 << 20 };

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 9)); }

static void *stream_writer(void *a)
{
	static unsigned char buf[7000];
	size_t off = 0, k = 1;
	while (off < STREAM_BYTES) {
		size_t n = (k = k * 1103515245 + 12345) % sizeof buf + 1;
		if (n > STREAM_BYTES - off)
			n = STREAM_BYTES - off;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		size_t done;
		KT_EQ(kr_stream_write(&st, buf, n, &done), 0);
		KT_EQ(done, n);
		off += n;
	}
	KT_EQ(kr_stream_close_write(&st), 0);
	return a;
}

static void *stream_reader(void *a)
{
	static unsigned char buf[5000];
	size_t off = 0, k = 7, got;
	for (;;) {
		size_t n = (k = k * 1103515245 + 12345) % sizeof buf + 1;
		KT_EQ(kr_stream_read(&st, buf, n, &got), 0);
		if (!got)
			break; /* end of stream */
		KT_CHECK(got <= n);
		for (size_t i = 0; i < got; i++)
			KT_EQ(buf[i], pattern(off + i));
		off += got;
	}
	KT_EQ(off, STREAM_BYTES);
	return a;
}

static void stream_run(unsigned vps, size_t cap)
{
	init(vps);
	KT_EQ(kr_stream_init(&st, cap), 0);
	kr_mp *w, *r;
	KT_EQ(kr_mp_create(&r, NULL, stream_reader, NULL), 0);
	KT_EQ(kr_mp_create(&w, NULL, stream_writer, NULL), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(kr_stream_destroy(&st), 0);
	KT_EQ(kr_fini(), 0);
}

/* 1 MiB in random-sized writes and reads arrives whole and in order, with
 * a ring smaller than most writes (the one-copy paths) and a large one. */
static void stream_moves_bytes_in_order_through_a_small_ring(void) { stream_run(2, 100); }
static void stream_moves_bytes_in_order_through_a_large_ring(void) { stream_run(1, 65536); }

static void *stream_write_big(void *a)
{
	static unsigned char buf[10000];
	size_t done = 0;
	int e = kr_stream_write(a, buf, sizeof buf, &done);
	return (void *)(intptr_t)(e == EPIPE && done == 64 ? 1 : 0);
}

static void stream_close_gives_eof_and_epipe(void)
{
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 0), EINVAL);
	KT_EQ(kr_stream_init(&s, 64), 0);
	size_t got = 9;
	char b[16];
	uint64_t t0 = kr_now();
	KT_EQ(kr_stream_read_until(&s, b, sizeof b, &got, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(got, 0);
	char big[100] = {0};
	size_t put = 0;
	KT_EQ(kr_stream_write_until(&s, big, sizeof big, &put, kr_now() + 2 * MS), ETIMEDOUT);
	KT_EQ(put, 64); /* what fitted stays in */
	KT_EQ(kr_stream_read_until(&s, big, sizeof big, &got, 0), 0);
	KT_EQ(got, 64);
	KT_EQ(kr_stream_write(&s, "hello", 5, NULL), 0);
	KT_EQ(kr_stream_close_write(&s), 0);
	KT_EQ(kr_stream_write(&s, "x", 1, NULL), EPIPE);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), 0);
	KT_EQ(got, 5);
	KT_CHECK(memcmp(b, "hello", 5) == 0);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), 0);
	KT_EQ(got, 0); /* end of stream */
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), EINVAL);

	/* a writer blocked on a full ring gets EPIPE when the reader leaves,
	 * and knows how much went in */
	KT_EQ(kr_stream_init(&s, 64), 0);
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, stream_write_big, &s), 0);
	kr_mp_yield();
	KT_EQ(kr_stream_destroy(&s), EBUSY);
	KT_EQ(kr_stream_close_read(&s), 0);
	void *r;
	KT_EQ(kr_mp_join(w, &r), 0);
	KT_EQ((intptr_t)r, 1);
	KT_EQ(kr_stream_write(&s, "x", 1, NULL), EPIPE);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

/* A reader blocked on an empty stream whose read side someone else closes
 * gets EPIPE at once, with nothing read, as a read that starts then does
 * (not ETIMEDOUT at its deadline, KT_WAIT_S away). */
static void *read_a_while(void *a)
{
	char b[16];
	size_t got = 7;
	int err = kr_stream_read_until(a, b, sizeof b, &got, kr_now() + KT_WAIT_S * 1000 * MS);
	return (void *)(intptr_t)(err == EPIPE && got == 0 ? 0 : err ? err : -1);
}

static void close_read_wakes_blocked_readers_with_epipe(void)
{
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 64), 0);
	kr_mp *r[2];
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&r[i], NULL, read_a_while, &s), 0);
	KT_EQ(kr_mp_yield(), 0); /* both block on the empty ring */
	KT_EQ(kr_stream_destroy(&s), EBUSY);
	KT_EQ(kr_stream_close_read(&s), 0);
	for (int i = 0; i < 2; i++) {
		void *res;
		KT_EQ(kr_mp_join(r[i], &res), 0);
		KT_EQ((intptr_t)res, 0);
	}
	size_t got;
	char b[4];
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), EPIPE);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

/* Copies into and out of the ring at every distance, modulo 4 KiB, near
 * the one where memcpy meets 4 KiB aliasing (stream.c copies those in
 * pieces) move every byte. */
static void stream_copies_at_every_distance_arrive_whole(void)
{
	enum { N = 5000, PAGE = 4096 };
	static unsigned char src[PAGE + N], dst[PAGE + N];
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 65536), 0);
	size_t total = 0, covered = 0;
	for (size_t d = PAGE - 70; d != 140; d = (d + 1) % PAGE) {
		uintptr_t tail = (uintptr_t)s.buf + (s.head + s.count) % s.cap;
		unsigned char *from = src + (tail - (uintptr_t)src - d) % PAGE;
		for (size_t i = 0; i < N; i++)
			from[i] = pattern(total + i);
		size_t n = 0;
		KT_EQ(kr_stream_write(&s, from, N, &n), 0);
		KT_EQ(n, N);
		uintptr_t head = (uintptr_t)s.buf + s.head;
		unsigned char *to = dst + (head + d - (uintptr_t)dst) % PAGE;
		memset(dst, 0, sizeof dst);
		KT_EQ(kr_stream_read(&s, to, N, &n), 0);
		KT_EQ(n, N);
		for (size_t i = 0; i < N; i++)
			KT_EQ(to[i], pattern(total + i));
		total += N;
		covered++;
	}
	KT_EQ(covered, 210);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(stream_moves_bytes_in_order_through_a_small_ring);
	KT_RUN(stream_moves_bytes_in_order_through_a_large_ring);
	KT_RUN(stream_close_gives_eof_and_epipe);
	KT_RUN(stream_copies_at_every_distance_arrive_whole);
	KT_RUN(close_read_wakes_blocked_readers_with_epipe);
	return kt_finish();
}
