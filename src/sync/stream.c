/*
 * karui L3 — byte streams: UNIX pipes between microprocesses (seed 000
 * level 3; seed 003 §4.4.1's one-copy pipe).
 *
 * A bounded ring plus two queues.  Bytes are copied once whenever the
 * other side waits: a writer that finds a reader waiting copies straight
 * into the reader's buffer; a reader that finds the ring empty and a writer
 * waiting copies straight out of the writer's buffer.  Only when nobody
 * waits do bytes go through the ring.  Invariants (under the lock): readers
 * wait only while the ring is empty, writers only while it is full.
 *
 * A read returns as soon as it has at least one byte, like read(2) on a
 * pipe; a write returns when all its bytes are in (the ring or a reader).
 *
 * The ring and 4 KiB aliasing.  A copy whose destination lies just past its
 * source modulo 4 KiB is slow (copy.h), and a ring that a malloc places at
 * random lands in that relation with a caller's buffer by chance.  So a
 * ring of a page or more starts half a page past a page boundary, far,
 * modulo 4 KiB, from the buffers that programs use most: page-aligned ones
 * and large malloc blocks (16 bytes past a page).  Copies at the slow
 * distances anyway go in pieces (kr__copy), which leaves the cost of the
 * aliasing itself.
 */
#include <stdlib.h>

#include "copy.h"
#include "wait.h"

#define CAP_MAX ((size_t)1 << 30)

/* A ring of a page or more starts half a page into its allocation. */
static size_t ring_shift(size_t cap) { return cap >= KR_ALIAS_PAGE ? KR_ALIAS_PAGE / 2 : 0; }

int kr_stream_init(kr_stream *s, size_t capacity)
{
	if (!s || capacity == 0 || capacity > CAP_MAX)
		return EINVAL;
	size_t shift = ring_shift(capacity);
	void *mem = NULL;
	if (shift ? posix_memalign(&mem, KR_ALIAS_PAGE, capacity + shift) != 0
		  : !(mem = malloc(capacity)))
		return ENOMEM;
	*s = (kr_stream){.cap = capacity, .buf = (unsigned char *)mem + shift};
	return 0;
}

static int enter(kr_stream *s)
{
	if (!s)
		return EINVAL;
	kr__spin_lock(&s->lock);
	if (s->dead || !s->cap) {
		kr__spin_unlock(&s->lock);
		return EINVAL;
	}
	return 0;
}

int kr_stream_destroy(kr_stream *s)
{
	int err = enter(s);
	if (err)
		return err;
	if (s->readers.head || s->writers.head) {
		kr__spin_unlock(&s->lock);
		return EBUSY;
	}
	s->dead = 1;
	free(s->buf - ring_shift(s->cap));
	s->buf = NULL;
	kr__spin_unlock(&s->lock);
	return 0;
}

/* Copy up to n bytes into the ring's free space; returns the count. */
static size_t ring_put(kr_stream *s, const unsigned char *p, size_t n)
{
	size_t room = s->cap - s->count;
	if (n > room)
		n = room;
	size_t tail = (s->head + s->count) % s->cap;
	size_t first = n < s->cap - tail ? n : s->cap - tail;
	kr__copy(s->buf + tail, p, first);
	kr__copy(s->buf, p + first, n - first);
	s->count += n;
	return n;
}

static size_t ring_get(kr_stream *s, unsigned char *p, size_t n)
{
	if (n > s->count)
		n = s->count;
	size_t first = n < s->cap - s->head ? n : s->cap - s->head;
	kr__copy(p, s->buf + s->head, first);
	kr__copy(p + first, s->buf, n - first);
	s->head = (s->head + n) % s->cap;
	s->count -= n;
	return n;
}

/* Move bytes of waiting writers into the ring; writers whose bytes are all
 * in leave the queue onto `done`. */
static void refill(kr_stream *s, kr_waitq *done)
{
	struct kr_waiter *w;
	while (s->count < s->cap && (w = s->writers.head)) {
		w->done += ring_put(s, (unsigned char *)w->buf + w->done, w->len - w->done);
		if (w->done < w->len)
			break;
		wq_take(&s->writers, w);
		wq_push(done, w);
	}
}

static __attribute__((noinline)) int write_until(kr_stream *s, const void *buf, size_t len,
						 size_t *done, uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (done)
		*done = 0;
	if (s && !buf && len)
		return EINVAL;
	if (!self)
		return s ? EPERM : EINVAL;
	int err = enter(s);
	if (err)
		return err;
	const unsigned char *p = buf;
	size_t off = 0;
	kr_waitq wake = {0};
	if (s->rclosed || s->wclosed) {
		kr__spin_unlock(&s->lock);
		return EPIPE;
	}
	for (struct kr_waiter *r; off < len && (r = wq_pop(&s->readers));) {
		size_t n = len - off < r->len ? len - off : r->len;
		kr__copy(r->buf, p + off, n);
		r->done = n;
		off += n;
		wq_push(&wake, r);
	}
	if (!s->writers.head) /* keep the byte order behind earlier writers */
		off += ring_put(s, p + off, len - off);
	if (off == len) {
		kr__spin_unlock(&s->lock);
		wq_wake_all(&wake, 0);
		if (done)
			*done = len;
		return 0;
	}
	struct kr_waiter w = {.mp = self, .buf = (void *)buf, .len = len, .done = off};
	wq_push(&s->writers, &w);
	kr__spin_unlock(&s->lock);
	wq_wake_all(&wake, 0);
	err = wq_wait(&w, &s->lock, deadline, 1, KR_WHY_STREAM);
	if (err && w.state == W_WAITING) { /* what is in stays in */
		wq_remove(&s->writers, &w);
		kr__spin_unlock(&s->lock);
	}
	if (done)
		*done = w.done;
	return err;
}

/* Reads and writes that may block go through KR_BLOCKING (arch/blocking.h). */
int kr_stream_write(kr_stream *s, const void *buf, size_t len, size_t *done)
{
	return KR_BLOCKING(write_until, s, buf, len, done, KR_FOREVER);
}

int kr_stream_write_until(kr_stream *s, const void *buf, size_t len, size_t *done,
			 uint64_t deadline)
{
	return KR_BLOCKING(write_until, s, buf, len, done, deadline);
}

static __attribute__((noinline)) int read_until(kr_stream *s, void *buf, size_t len, size_t *got,
						uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (!got || (!buf && len))
		return EINVAL;
	*got = 0;
	if (!self)
		return s ? EPERM : EINVAL;
	int err = enter(s);
	if (err)
		return err;
	if (len == 0) {
		kr__spin_unlock(&s->lock);
		return 0;
	}
	if (s->rclosed) {
		kr__spin_unlock(&s->lock);
		return EPIPE;
	}
	kr_waitq wake = {0};
	size_t n = ring_get(s, buf, len);
	/* the ring is empty: the rest straight from waiting writers' buffers */
	for (struct kr_waiter *wr; n < len && !s->count && (wr = s->writers.head);) {
		size_t k = wr->len - wr->done < len - n ? wr->len - wr->done : len - n;
		kr__copy((unsigned char *)buf + n, (unsigned char *)wr->buf + wr->done, k);
		wr->done += k;
		n += k;
		if (wr->done < wr->len)
			break;
		wq_take(&s->writers, wr);
		wq_push(&wake, wr);
	}
	refill(s, &wake);
	*got = n;
	if (!n && s->wclosed) {
		kr__spin_unlock(&s->lock);
		return 0; /* end of stream */
	}
	if (!n) {
		struct kr_waiter w = {.mp = self, .buf = buf, .len = len};
		err = wq_block(&s->readers, &s->lock, &w, deadline, KR_WHY_STREAM);
		*got = w.done; /* 0 if it gave up: nothing was moved */
		return err;
	}
	kr__spin_unlock(&s->lock);
	wq_wake_all(&wake, 0);
	return 0;
}

int kr_stream_read(kr_stream *s, void *buf, size_t len, size_t *got)
{
	return KR_BLOCKING(read_until, s, buf, len, got, KR_FOREVER);
}

int kr_stream_read_until(kr_stream *s, void *buf, size_t len, size_t *got, uint64_t deadline)
{
	return KR_BLOCKING(read_until, s, buf, len, got, deadline);
}

int kr_stream_close_write(kr_stream *s)
{
	int err = enter(s);
	if (err)
		return err;
	if (s->wclosed) {
		kr__spin_unlock(&s->lock);
		return EPIPE;
	}
	s->wclosed = 1;
	/* they wait on an empty ring: end of stream */
	kr_waitq r = wq_take_all(&s->readers);
	kr__spin_unlock(&s->lock);
	wq_wake_all(&r, 0);
	return 0;
}

int kr_stream_close_read(kr_stream *s)
{
	int err = enter(s);
	if (err)
		return err;
	if (s->rclosed) {
		kr__spin_unlock(&s->lock);
		return EPIPE;
	}
	s->rclosed = 1;
	/* writers, and readers (on an empty ring): EPIPE, as a read that
	 * starts now gets */
	kr_waitq w = wq_take_all(&s->writers), r = wq_take_all(&s->readers);
	s->count = 0; /* nobody will read it */
	kr__spin_unlock(&s->lock);
	wq_wake_all(&w, EPIPE);
	wq_wake_all(&r, EPIPE);
	return 0;
}

int kr_stream_poll(kr_stream *s, size_t *buffered, size_t *room, unsigned *closed)
{
	if (!s)
		return EINVAL;
	size_t n = __atomic_load_n(&s->count, __ATOMIC_ACQUIRE);
	if (buffered)
		*buffered = n;
	if (room)
		*room = s->cap - n;
	if (closed)
		*closed = (__atomic_load_n(&s->rclosed, __ATOMIC_ACQUIRE) ? KR_STREAM_RCLOSED : 0) |
			  (__atomic_load_n(&s->wclosed, __ATOMIC_ACQUIRE) ? KR_STREAM_WCLOSED : 0);
	return 0;
}
