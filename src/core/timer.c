/*
 * karui L2 — the timer heap of a VP (docs/architecture.md, "Time": sleeps
 * and timeouts in the scheduler's timer heap; CLOCK_MONOTONIC).
 *
 * A timer is a node on the stack of the microprocess that sleeps with a
 * deadline (kr_mp_park_until in park.c, or a served wait: served.c), armed
 * in the heap of the VP it went to sleep on: a binary min-heap of node
 * pointers, each node knowing its index so that cancelling is O(log n).  A spin lock guards each heap, because
 * the sleeper may be resumed, and cancel its timer, on another VP, and idle
 * VPs expire the timers of busy ones.  h->next mirrors the earliest
 * deadline (KR_FOREVER: empty) for lock-free polling on the switch paths.
 *
 * Firing and cancelling race.  Expiry takes a due node out under the lock
 * and marks it FIRING; the fire callback (timer_fire) decides the outcome and
 * marks it FIRED, after which nobody touches the node again.  A cancel that
 * finds the node gone from the heap waits for FIRED — a window of a few
 * instructions with no lock held — so that when kr_mp_park_until returns, its
 * node is dead and no late timer can wake the microprocess's next sleep.
 *
 * Firing (the end of this file).  A fired timer ends its sleep unless a
 * wakeup ended it first (timer_fire); a served wait's, unless its server
 * took it first (served.c).  A busy VP looks at its own heap at
 * every 8th scheduling point (timers_due in rt.h), an idle VP at every
 * VP's, and sleeps no longer than the earliest deadline of all
 * (kr_sched_idle_deadline).
 */
#include <errno.h>
#include <stdlib.h>

#include "alloc.h"
#include "rt.h"

void kr__timers_init(struct kr_timers *h)
{
	h->lock = (kr_spin)KR_SPIN_INIT;
	h->next = KR_FOREVER;
	h->v = NULL;
	h->n = h->cap = 0;
}

void kr__timers_fini(struct kr_timers *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

static void put(struct kr_timers *h, uint32_t i, struct kr_timer *t)
{
	h->v[i] = t;
	t->idx = i;
}

static void sift_up(struct kr_timers *h, uint32_t i)
{
	struct kr_timer *t = h->v[i];
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (h->v[p]->when <= t->when)
			break;
		put(h, i, h->v[p]);
		i = p;
	}
	put(h, i, t);
}

static void sift_down(struct kr_timers *h, uint32_t i)
{
	struct kr_timer *t = h->v[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1]->when < h->v[c]->when)
			c++;
		if (t->when <= h->v[c]->when)
			break;
		put(h, i, h->v[c]);
		i = c;
	}
	put(h, i, t);
}

static void publish_next(struct kr_timers *h)
{
	__atomic_store_n(&h->next, h->n ? h->v[0]->when : KR_FOREVER, __ATOMIC_RELEASE);
}

/* Take node i out of the heap (lock held). */
static void unlink_at(struct kr_timers *h, uint32_t i)
{
	struct kr_timer *last = h->v[--h->n];
	if (i < h->n) {
		put(h, i, last);
		if (i > 0 && h->v[(i - 1) / 2]->when > last->when)
			sift_up(h, i);
		else
			sift_down(h, i);
	}
}

int kr__timer_arm(struct kr_timers *h, struct kr_timer *t)
{
	kr__spin_lock(&h->lock);
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? 2 * h->cap : 16;
		struct kr_timer **v = realloc(h->v, cap * sizeof *v);
		if (!v) {
			kr__spin_unlock(&h->lock);
			return ENOMEM;
		}
		h->v = v;
		h->cap = cap;
	}
	t->heap = h;
	__atomic_store_n(&t->state, KR_TIMER_ARMED, __ATOMIC_RELAXED);
	put(h, h->n++, t);
	sift_up(h, t->idx);
	publish_next(h);
	kr__spin_unlock(&h->lock);
	return 0;
}

int kr__timer_cancel(struct kr_timer *t)
{
	struct kr_timers *h = t->heap;
	kr__spin_lock(&h->lock);
	/* FIRING -> FIRED happens outside the lock: an atomic read */
	int armed = __atomic_load_n(&t->state, __ATOMIC_RELAXED) == KR_TIMER_ARMED;
	if (armed) {
		unlink_at(h, t->idx);
		publish_next(h);
	}
	kr__spin_unlock(&h->lock);
	if (!armed)
		while (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != KR_TIMER_FIRED)
			kr_cpu_relax();
	return armed;
}

void kr__timers_expire(struct kr_timers *h, uint64_t now, void (*fire)(struct kr_timer *))
{
	for (;;) {
		kr__spin_lock(&h->lock);
		if (!h->n || h->v[0]->when > now) {
			kr__spin_unlock(&h->lock);
			return;
		}
		struct kr_timer *t = h->v[0];
		unlink_at(h, 0);
		publish_next(h);
		__atomic_store_n(&t->state, KR_TIMER_FIRING, __ATOMIC_RELAXED);
		kr__spin_unlock(&h->lock);
		fire(t);
	}
}

/* ---------------- firing ---------------- */

/* A deadline passed: end the sleep unless a wakeup ended it first (a
 * served wait's: unless its server took it first, served.c). */
static void timer_fire(struct kr_timer *t)
{
	if (t->served) {
		kr__served_fire(t);
		return;
	}
	kr_mp *mp = t->mp;
	int won = permit_claim_sleeper(mp);
	t->won = won;
	__atomic_store_n(&t->state, KR_TIMER_FIRED, __ATOMIC_RELEASE);
	if (won) /* mp cannot run before this: the claim made us its waker */
		seam_ready(W(), mp);
}

/* The due timers of worker o fire here; *now: the clock, read once when
 * first needed (0 until then). */
static void run_of(struct kr_worker *o, uint64_t *now)
{
	uint64_t next = __atomic_load_n(&o->timers.next, __ATOMIC_ACQUIRE);
	if (next == KR_FOREVER)
		return;
	if (!*now)
		*now = kr_now();
	if (*now >= next) {
		struct kr_worker *w = W();
		w->waking = KR_BY_TIMER;
		kr__timers_expire(&o->timers, *now, timer_fire);
		w->waking = KR_BY_MP;
	}
}

__attribute__((noinline)) void kr__timers_run(struct kr_worker *w)
{
	if (w->soon) {
		int rest = w->soon - 1, again = seam_keep(w);
		w->soon = 0;
		if (rest) {
			if (again)
				w->soon = rest;
			w->tick = again ? 1 : rest;
			return;
		}
		if (again)
			kr__turn_soon(w);
	}
	permit_posts_run();
	kr__poll(w);
	uint64_t now = 0;
	run_of(w, &now);
	if (__atomic_load_n(&G.naway, __ATOMIC_RELAXED)) {
		kr__away_take(w);
		if (G.alloc) /* it counts in naway (alloc.h) */
			G.alloc->turn(w);
	}
}

void kr__timers_run_of(struct kr_worker *o)
{
	uint64_t now = 0;
	run_of(o, &now);
}

void kr__timers_run_all(void)
{
	uint64_t now = 0;
	unsigned hi = __atomic_load_n(&kr__workers_hi, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < hi; i++) {
		struct kr_worker *o = __atomic_load_n(&kr__workers[i], __ATOMIC_ACQUIRE);
		if (o)
			run_of(o, &now);
	}
}

uint64_t kr_sched_idle_deadline(void)
{
	uint64_t first = KR_FOREVER;
	unsigned hi = __atomic_load_n(&kr__workers_hi, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < hi; i++) {
		struct kr_worker *o = __atomic_load_n(&kr__workers[i], __ATOMIC_ACQUIRE);
		uint64_t next = o ? __atomic_load_n(&o->timers.next, __ATOMIC_ACQUIRE) : KR_FOREVER;
		if (next < first)
			first = next;
	}
	return first;
}
