/*
 * karui L3 — channels: typed (fixed-size) messages, unbuffered or bounded.
 *
 * One spin lock guards the ring and both queues.  An element is copied
 * once on its way whenever someone waits for it: a send with a waiting
 * receiver copies into the receiver's variable; a receive that empties a
 * ring slot refills it from the first waiting sender; on an unbuffered
 * channel the receiver copies straight from the blocked sender.  A
 * receiver waits only when the ring is empty and no sender waits, and a
 * sender only when the ring is full and no receiver waits.
 *
 * Waits are served waits (wait.h, src/core/served.c): the partner that
 * takes a waiter out of its queue claims it and makes it ready, and
 * neither touches the waiter's permit, so a hand-over between VPs costs
 * the channel's lock and the ready queue's locked instructions only.  A
 * waiter whose wait a timer or a cancel ended first is skipped (LEFT) and
 * the next one served.
 *
 * kr_chan_send and kr_chan_recv hand a scalar-sized element to a waiting
 * partner with no call but the partner's ready, a tail call (the L2 fast
 * paths' rule), and put it into or take it from the ring with no call when
 * nobody waits on the other side: the lock is taken with a trylock, and
 * anything else goes on in send_locked / recv_locked, or from the start if
 * the lock was busy; a fast path that finds it must wait goes straight to
 * send_wait / recv_wait.  The parts that may block run through
 * KR_BLOCKING (arch/blocking.h).
 */
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "wait.h"

#define RING_MAX ((size_t)1 << 30) /* bytes */

int kr_chan_init(kr_chan *ch, size_t esize, size_t capacity)
{
	if (!ch || esize == 0 || esize > KR_CHAN_ESIZE_MAX || capacity > RING_MAX / esize)
		return EINVAL;
	unsigned char *buf = NULL;
	if (capacity && !(buf = malloc(esize * capacity)))
		return ENOMEM;
	*ch = (kr_chan){.esize = esize, .cap = capacity, .buf = buf};
	return 0;
}

int kr_chan_destroy(kr_chan *ch)
{
	if (!ch)
		return EINVAL;
	kr__spin_lock(&ch->lock);
	int err = ch->dead || !ch->esize ? EINVAL
		  : ch->senders.head || ch->receivers.head ? EBUSY : 0;
	if (!err) {
		ch->dead = 1;
		free(ch->buf);
		ch->buf = NULL;
	}
	kr__spin_unlock(&ch->lock);
	return err;
}

/* One element.  Scalar and pointer sizes are copied inline, without a call
 * into the C library's memcpy. */
static inline int scalar(size_t n) { return n == 4 || n == 8 || n == 16; }

static inline void put_scalar(void *dst, const void *src, size_t n)
{
	if (n == 8)
		memcpy(dst, src, 8);
	else if (n == 4)
		memcpy(dst, src, 4);
	else
		memcpy(dst, src, 16);
}

static inline void put(void *dst, const void *src, size_t n)
{
	if (scalar(n))
		put_scalar(dst, src, n);
	else
		kr__copy(dst, src, n);
}

static inline unsigned char *slot(kr_chan *ch, size_t i)
{
	return ch->buf + ((ch->head + i) % ch->cap) * ch->esize;
}

static inline int live(const kr_chan *ch) { return !ch->dead && ch->esize; }

/* Lock ch; EINVAL (unlocked) if it is not a live channel. */
static int enter(kr_chan *ch)
{
	if (!ch)
		return EINVAL;
	kr__spin_lock(&ch->lock);
	if (!live(ch)) {
		kr__spin_unlock(&ch->lock);
		return EINVAL;
	}
	return 0;
}

/* The checks of a send or receive, then enter(). */
static int begin(kr_chan *ch, const void *elem, kr_mp *self, int try)
{
	if (!elem && ch)
		return EINVAL;
	if (!self && !try)
		return EPERM;
	return enter(ch);
}

/* The fast paths' lock: 1 if ch was free at once and is live; else 0,
 * nothing held, and the general path follows (for a dead channel too). */
static inline int fast_enter(kr_chan *ch, const void *elem, kr_mp *self)
{
	if (!ch || !elem || !self || !kr__spin_trylock(&ch->lock))
		return 0;
	if (live(ch))
		return 1;
	kr__spin_unlock(&ch->lock);
	return 0;
}

/* The fast paths: take w, the first waiter of q (ch locked), if no timer
 * or cancel ended its wait first; 0: it is out of q, LEFT, and the
 * general path goes on. */
static inline int claim_first(kr_waitq *q, struct kr_waiter *w)
{
	wq_pop(q);
	if (__builtin_expect(served_claim(w->mp, w->gen, 0), 1))
		return 1;
	__atomic_store_n(&w->state, W_LEFT, __ATOMIC_RELAXED);
	return 0;
}

/* The fast paths' end: serve w, claimed, copying a scalar-sized element
 * from src to dst. */
static inline int hand_off(kr_chan *ch, struct kr_waiter *w, void *dst, const void *src)
{
	put_scalar(dst, src, ch->esize);
	kr__spin_unlock(&ch->lock);
	return wq_serve(w, 0);
}

/* A send that waits for a receiver or for room, ch locked and live. */
static __attribute__((noinline)) int send_wait_until(kr_chan *ch, const void *elem,
						     kr_mp *self, uint64_t deadline)
{
	struct kr_waiter w;
	wq_init(&w, self, (void *)elem);
	return wq_block_served(&ch->senders, &ch->lock, &w, deadline);
}

/* Without a deadline the wait keeps nothing in registers across the
 * clock's call (the timed one apart). */
static __attribute__((noinline)) int send_wait(kr_chan *ch, const void *elem, kr_mp *self,
					       uint64_t deadline)
{
	if (deadline != KR_FOREVER)
		return send_wait_until(ch, elem, self, deadline);
	struct kr_waiter w;
	wq_init(&w, self, (void *)elem);
	return wq_block_served(&ch->senders, &ch->lock, &w, KR_FOREVER);
}

/* The rest of a send, ch locked and live. */
static __attribute__((noinline)) int send_locked(kr_chan *ch, const void *elem, kr_mp *self,
						 uint64_t deadline, int try)
{
	if (ch->closed) {
		kr__spin_unlock(&ch->lock);
		return EPIPE;
	}
	struct kr_waiter *r = wq_pop_served(&ch->receivers, !self);
	if (r) {
		put(r->buf, elem, ch->esize);
		kr__spin_unlock(&ch->lock);
		return wq_serve(r, 0);
	}
	if (ch->count < ch->cap) {
		put(slot(ch, ch->count++), elem, ch->esize);
		kr__spin_unlock(&ch->lock);
		return 0;
	}
	if (try) {
		kr__spin_unlock(&ch->lock);
		return EAGAIN;
	}
	return send_wait(ch, elem, self, deadline);
}

static __attribute__((noinline)) int send(kr_chan *ch, const void *elem, uint64_t deadline, int try)
{
	kr_mp *self = kr__self();
	int err = begin(ch, elem, self, try);
	return err ? err : KR_BLOCKING(send_locked, ch, elem, self, deadline, try);
}

int kr_chan_send(kr_chan *ch, const void *elem)
{
	kr_mp *self = kr__self();
	if (!fast_enter(ch, elem, self))
		return send(ch, elem, KR_FOREVER, 0);
	struct kr_waiter *r = ch->receivers.head;
	if (ch->closed || !scalar(ch->esize))
		return KR_BLOCKING(send_locked, ch, elem, self, KR_FOREVER, 0);
	if (r) {
		if (claim_first(&ch->receivers, r))
			return hand_off(ch, r, r->buf, elem);
		return KR_BLOCKING(send_locked, ch, elem, self, KR_FOREVER, 0);
	}
	if (ch->count == ch->cap) /* unbuffered, or full: wait */
		return KR_BLOCKING(send_wait, ch, elem, self, KR_FOREVER, 0);
	put_scalar(slot(ch, ch->count++), elem, ch->esize);
	kr__spin_unlock(&ch->lock);
	return 0;
}

int kr_chan_send_until(kr_chan *ch, const void *elem, uint64_t deadline)
{
	return send(ch, elem, deadline, 0);
}
int kr_chan_trysend(kr_chan *ch, const void *elem) { return send(ch, elem, 0, 1); }

/* A receive that waits for a sender, ch locked and live: the ring is
 * empty and no sender waits. */
static __attribute__((noinline)) int recv_wait_until(kr_chan *ch, void *elem, kr_mp *self,
						     uint64_t deadline)
{
	struct kr_waiter w;
	wq_init(&w, self, elem);
	return wq_block_served(&ch->receivers, &ch->lock, &w, deadline);
}

static __attribute__((noinline)) int recv_wait(kr_chan *ch, void *elem, kr_mp *self,
					       uint64_t deadline)
{
	if (deadline != KR_FOREVER)
		return recv_wait_until(ch, elem, self, deadline);
	struct kr_waiter w;
	wq_init(&w, self, elem);
	return wq_block_served(&ch->receivers, &ch->lock, &w, KR_FOREVER);
}

/* The rest of a receive, ch locked and live. */
static __attribute__((noinline)) int recv_locked(kr_chan *ch, void *elem, kr_mp *self,
						 uint64_t deadline, int try)
{
	struct kr_waiter *s = NULL;
	if (ch->count) {
		put(elem, slot(ch, 0), ch->esize);
		ch->head = (ch->head + 1) % ch->cap;
		ch->count--;
		if ((s = wq_pop_served(&ch->senders, !self)))
			put(slot(ch, ch->count++), s->buf, ch->esize);
	} else if ((s = wq_pop_served(&ch->senders, !self))) {
		put(elem, s->buf, ch->esize);
	} else if (ch->closed || try) {
		kr__spin_unlock(&ch->lock);
		return ch->closed ? EPIPE : EAGAIN;
	} else {
		return recv_wait(ch, elem, self, deadline);
	}
	kr__spin_unlock(&ch->lock);
	return s ? wq_serve(s, 0) : 0;
}

static __attribute__((noinline)) int recv(kr_chan *ch, void *elem, uint64_t deadline, int try)
{
	kr_mp *self = kr__self();
	int err = begin(ch, elem, self, try);
	return err ? err : KR_BLOCKING(recv_locked, ch, elem, self, deadline, try);
}

int kr_chan_recv(kr_chan *ch, void *elem)
{
	kr_mp *self = kr__self();
	if (!fast_enter(ch, elem, self))
		return recv(ch, elem, KR_FOREVER, 0);
	struct kr_waiter *s = ch->senders.head;
	if (!ch->count && !s && !ch->closed) /* nothing to take: wait */
		return KR_BLOCKING(recv_wait, ch, elem, self, KR_FOREVER, 0);
	if (!scalar(ch->esize) || (ch->count && s) || !(ch->count || s))
		return KR_BLOCKING(recv_locked, ch, elem, self, KR_FOREVER, 0);
	if (s) { /* unbuffered, a sender waits */
		if (claim_first(&ch->senders, s))
			return hand_off(ch, s, elem, s->buf);
		return KR_BLOCKING(recv_locked, ch, elem, self, KR_FOREVER, 0);
	}
	put_scalar(elem, slot(ch, 0), ch->esize); /* from the ring, no sender to refill it */
	ch->head = (ch->head + 1) % ch->cap;
	ch->count--;
	kr__spin_unlock(&ch->lock);
	return 0;
}

int kr_chan_recv_until(kr_chan *ch, void *elem, uint64_t deadline)
{
	return recv(ch, elem, deadline, 0);
}
int kr_chan_tryrecv(kr_chan *ch, void *elem) { return recv(ch, elem, 0, 1); }

int kr_chan_close(kr_chan *ch)
{
	int err = enter(ch);
	if (err)
		return err;
	if (ch->closed) {
		kr__spin_unlock(&ch->lock);
		return EPIPE;
	}
	ch->closed = 1;
	/* receivers wait only on an empty ring, senders only on a full one:
	 * both get EPIPE now */
	int foreign = !kr__cur();
	kr_waitq r = wq_take_all_served(&ch->receivers, foreign),
		 s = wq_take_all_served(&ch->senders, foreign);
	kr__spin_unlock(&ch->lock);
	wq_serve_all(&r, EPIPE);
	wq_serve_all(&s, EPIPE);
	return 0;
}
