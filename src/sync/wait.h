/*
 * karui L3 — the waiter: how every primitive of sync.h blocks a
 * microprocess and hands it what it waited for.
 *
 * A waiter lives on the blocked microprocess's stack and is linked into
 * the object's queue under the object's spin lock.  Whoever serves it
 * (post, unlock, signal, send, write, reply, close) takes it out of the
 * queue under that lock — wq_take, wq_pop and wq_take_all mark it MOVED
 * as they do — does the hand-over (the unit, the mutex, the bytes), and
 * then, with no lock held, marks it DONE (release) and wakes its
 * microprocess.  The waiter sleeps until it sees DONE (acquire), so a
 * wakeup it did not expect only costs a loop.  After DONE the server never
 * touches the node again: it reads `mp` first.
 *
 * Timeouts.  When kr_mp_park_until reports the deadline, the waiter takes
 * the object's lock and looks: still WAITING means still queued, and it
 * leaves (the caller unlinks it and unlocks); anything else means a server
 * already took it, and the hand-over is completed as if no deadline had
 * passed.  MOVED therefore covers a node between its server's unlock and
 * DONE as well as one put into a second queue (a condition waiter moved
 * onto its mutex, an accepted call).
 *
 * Direct hand-off.  A microprocess that serves a waiter and is about to
 * block itself (a condition wait releasing a contended mutex) gives the VP
 * straight to the waiter with kr_mp_park_and_switch: no trip through the
 * ready queue (seed 000's sleep_and_wakeup).
 *
 * Served waits (channels).  The waits above park on the permit, and their
 * servers wake it: two RMWs per hand-over besides the object's lock.  A
 * channel's waiter waits instead with the protocol of src/core/served.c,
 * which leaves the permit alone: it carries its wait's generation (gen),
 * the server that pops it claims it (wq_pop_served: the claim fails only
 * if a timer or a cancel ended that wait first, and the waiter is then
 * LEFT for its microprocess to find), and serves it with wq_serve, which
 * makes it ready and nothing else can.  On its deadline or a cancel the
 * waiter takes the lock, leaves the queue if still WAITING (LEFT: nothing
 * to undo), and returns ETIMEDOUT or ECANCELED; a waiter a server has
 * claimed is always served.  A kr_mp_unpark meanwhile stays pending for
 * the next kr_mp_park.
 */
#ifndef KARUI_SYNC_WAIT_H
#define KARUI_SYNC_WAIT_H

#include <errno.h>
#include <stdint.h>

#include "karui/sync.h"
#include "../arch/blocking.h" /* KR_BLOCKING */
#include "../core/served.h" /* kr__self, served waits */
#include "../core/trace.h" /* the parks' reasons */

enum { W_WAITING = 0, W_MOVED, W_DONE, W_LEFT };

struct kr_waiter {
	struct kr_waiter *next, *prev;
	kr_mp *mp;
	uint32_t state;         /* W_*: atomic */
	int status;             /* what the blocked call returns */
	void *buf;              /* payload: element, bytes, message */
	size_t len, done;       /* stream: bytes asked for / moved */
	union {
		void *aux;      /* cond: the mutex; accept: the call */
		uint32_t gen;   /* a served wait's generation (served.h) */
	};
};

/* A waiter with only what every wait reads: the fields a primitive does
 * not use stay unset (a channel's waiter: no len, done or aux). */
static inline void wq_init(struct kr_waiter *w, kr_mp *self, void *buf)
{
	w->mp = self;
	w->state = W_WAITING;
	w->buf = buf;
}

/* A queue's head is stored atomically (relaxed: a plain store on every
 * target): a mutex's moved list is read by callers that may turn out not
 * to own it (monitor.c). */
static inline void wq_set_head(kr_waitq *q, struct kr_waiter *w)
{
	__atomic_store_n(&q->head, w, __ATOMIC_RELAXED);
}

static inline void wq_push(kr_waitq *q, struct kr_waiter *w)
{
	w->next = NULL;
	w->prev = q->tail;
	if (q->tail)
		q->tail->next = w;
	else
		wq_set_head(q, w);
	q->tail = w;
}

static inline void wq_remove(kr_waitq *q, struct kr_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		wq_set_head(q, w->next);
	if (w->next)
		w->next->prev = w->prev;
	else
		q->tail = w->prev;
}

/* A server takes w out of q (q's lock held): w is no longer WAITING. */
static inline void wq_take(kr_waitq *q, struct kr_waiter *w)
{
	wq_remove(q, w);
	__atomic_store_n(&w->state, W_MOVED, __ATOMIC_RELAXED);
}

static inline struct kr_waiter *wq_pop(kr_waitq *q)
{
	struct kr_waiter *w = q->head;
	if (!w)
		return NULL;
	wq_set_head(q, w->next); /* wq_remove, knowing w is first */
	if (w->next)
		w->next->prev = NULL;
	else
		q->tail = NULL;
	__atomic_store_n(&w->state, W_MOVED, __ATOMIC_RELAXED);
	return w;
}

/* A server takes every waiter of q out at once (q's lock held). */
static inline kr_waitq wq_take_all(kr_waitq *q)
{
	kr_waitq t = *q;
	*q = (kr_waitq){0};
	for (struct kr_waiter *w = t.head; w; w = w->next)
		__atomic_store_n(&w->state, W_MOVED, __ATOMIC_RELAXED);
	return t;
}

/* A server's last touch: w is out of every queue.  Returns 0, so that
 * callers can end in it: the waiter may have ended already (see
 * kr__wake_waiter), which is no error of the server's. */
static inline int wq_wake(struct kr_waiter *w, int status)
{
	kr_mp *mp = w->mp;
	w->status = status;
	__atomic_store_n(&w->state, W_DONE, __ATOMIC_RELEASE);
	return kr__wake_waiter(mp);
}

/* Serve every waiter of a queue taken out of its object (no lock held). */
static inline void wq_wake_all(kr_waitq *q, int status)
{
	for (struct kr_waiter *w; (w = wq_pop(q));)
		wq_wake(w, status);
}

/* Serve w and block: run w's microprocess at once on this VP if it can be
 * taken (it sleeps or is queued), else wake it the ordinary way.  The
 * caller's own wait loop follows. */
static inline void wq_wake_and_block(struct kr_waiter *w, int status)
{
	kr_mp *mp = w->mp;
	w->status = status;
	__atomic_store_n(&w->state, W_DONE, __ATOMIC_RELEASE);
	if (kr_mp_park_and_switch(mp) != 0)
		kr_mp_unpark(mp);
}

/* Wait until w is DONE and return its status; or, when the deadline
 * passes first (or, if `cancellable`, a kr_mp_cancel comes) and w is still
 * WAITING, return ETIMEDOUT / ECANCELED (or ENOMEM: no room for the timer)
 * with *lock held and w still queued: the caller unlinks it, restores the
 * object and unlocks.  A wait being served completes; a cancel it
 * consumed then stays pending for the next one.  `why`, a constant, is
 * the trace's reason for the park (core/trace.h). */
static inline int wq_wait(struct kr_waiter *w, kr_spin *lock, uint64_t deadline,
			  int cancellable, int why)
{
	while (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE) != W_DONE) {
		int err = kr__park_for(why, cancellable, deadline);
		if (err) {
			kr__spin_lock(lock);
			if (__atomic_load_n(&w->state, __ATOMIC_RELAXED) == W_WAITING)
				return err;
			kr__spin_unlock(lock);
			if (err == ECANCELED)
				kr_mp_cancel(w->mp);
			deadline = KR_FOREVER; /* being served: wait for it */
			cancellable = 0;
		}
	}
	return w->status;
}

/* The common wait of a call: queue w in q (the object's lock held),
 * unlock, wait (cancellable) until the deadline, and on a timeout or a
 * cancel leave q again and unlock.  Inline, so that it costs no frame. */
static inline int wq_block(kr_waitq *q, kr_spin *lock, struct kr_waiter *w, uint64_t deadline,
			   int why)
{
	wq_push(q, w);
	kr__spin_unlock(lock);
	int err = wq_wait(w, lock, deadline, 1, why);
	if (err && w->state == W_WAITING) {
		wq_remove(q, w);
		kr__spin_unlock(lock);
	}
	return err;
}

/* ---------------- served waits (channels) ---------------- */

/* A server takes the first waiter of q whose wait no timer or cancel has
 * ended (q's lock held): it is MOVED, and the server's to serve with
 * wq_serve.  Those it skips are LEFT.  `foreign`: the server runs on a
 * thread that is no VP (served_claim). */
static inline struct kr_waiter *wq_pop_served(kr_waitq *q, int foreign)
{
	struct kr_waiter *w;
	while ((w = wq_pop(q)) && __builtin_expect(!served_claim(w->mp, w->gen, foreign), 0))
		__atomic_store_n(&w->state, W_LEFT, __ATOMIC_RELAXED);
	return w;
}

/* wq_take_all for served waiters: those whose wait has not ended. */
static inline kr_waitq wq_take_all_served(kr_waitq *q, int foreign)
{
	kr_waitq t = {0};
	for (struct kr_waiter *w; (w = wq_pop_served(q, foreign));)
		wq_push(&t, w);
	return t;
}

/* wq_wake for a served waiter: it is made ready, by this server alone.
 * The server reads mp first and touches the node no more after DONE. */
static inline int wq_serve(struct kr_waiter *w, int status)
{
	kr_mp *mp = w->mp;
	w->status = status;
	__atomic_store_n(&w->state, W_DONE, __ATOMIC_RELEASE);
	return kr__serve(mp);
}

static inline void wq_serve_all(kr_waitq *q, int status)
{
	for (struct kr_waiter *w; (w = wq_pop(q));)
		wq_serve(w, status);
}

/* A timer or a cancel ended w's served wait g: leave q unless a server
 * found the wait ended first and left w out (LEFT). */
static __attribute__((noinline)) int wq_leave_served(kr_waitq *q, kr_spin *lock,
						      struct kr_waiter *w, uint32_t g, int why)
{
	kr__spin_lock(lock);
	if (__atomic_load_n(&w->state, __ATOMIC_RELAXED) == W_WAITING)
		wq_remove(q, w);
	kr__spin_unlock(lock);
	return kr__served_end(g, why);
}

/* wq_block as a served wait: queue w in q (the object's lock held),
 * unlock, and wait until a server serves it, the deadline passes or a
 * cancel comes (ETIMEDOUT, ECANCELED, ENOMEM: no room for the timer; w
 * out of q, the lock released).  Inline, so that it costs no frame (GCC
 * made a clone of its own of it, and a call, without always_inline). */
static inline __attribute__((always_inline)) int wq_block_served(kr_waitq *q, kr_spin *lock,
								 struct kr_waiter *w,
								 uint64_t deadline)
{
	if (deadline != KR_FOREVER && kr_now() >= deadline) {
		kr__spin_unlock(lock);
		return ETIMEDOUT;
	}
	kr_mp *self = kr__rec(w->mp);
	uint32_t g = served_begin(self);
	if (__builtin_expect(!g, 0)) {
		kr__spin_unlock(lock);
		return kr__served_abort();
	}
	w->gen = g;
	wq_push(q, w);
	kr__spin_unlock(lock);
	int why = deadline == KR_FOREVER ? kr__served_block() : kr__served_block_until(g, deadline);
	/* served: the wait's generation stays (served.c), and nothing is
	 * left to do; else w is read again, rather than g kept in a register
	 * that the caller would save */
	if (__builtin_expect(!why && __atomic_load_n(&w->state, __ATOMIC_ACQUIRE) == W_DONE, 1))
		return w->status;
	return wq_leave_served(q, lock, w, w->gen, why ? why : ETIMEDOUT);
}

#endif
