/*
 * karui L2 — parking and waking microprocesses, and switching between
 * them: kr_mp_park and its timed and cancellable forms, kr_mp_sleep_for /
 * _until, kr_mp_unpark, kr_mp_cancel, kr_mp_switch_to,
 * kr_mp_park_and_switch and kr_mp_yield.
 *
 * A sleeper can be woken before it has left its VP: on_cpu (rt.h) keeps
 * it from running anywhere until then.  Whether it sleeps at all is its
 * wakeup permit's to say:
 *
 *   wstate   the wakeup permit: RUN, SLEEP or NOTIFIED.  kr_mp_park moves
 *            RUN -> SLEEP with one CAS *before* switching away (a NOTIFIED
 *            permit makes the CAS fail; kr_mp_park consumes it with an
 *            acquire RMW and returns).  kr_mp_unpark moves SLEEP -> RUN (only
 *            the winner of that CAS makes the microprocess ready: never
 *            twice), or RUN / NOTIFIED -> NOTIFIED, always with a release
 *            RMW, so whoever consumes the permit sees what every waker
 *            wrote before waking it.  A cancel sets its bit in the RMW of
 *            its wakeup.
 *
 * One VP.  While karui runs on a single VP with the default scheduler and
 * has never started a spare (kr__solo, internal.h), that VP's slot and the
 * join words are touched by that VP alone (sched_default.c and life.c,
 * "One VP"), and the RMWs above only decide between that VP and threads
 * that are no VP: timers fire and I/O completes on the VP itself, and
 * every call that parks, switches, joins or claims needs a VP.  So the
 * threads that are no VP stop writing permits: their wakeups
 * (kr_mp_unpark, kr_mp_cancel, and L3's non-blocking calls and the epoll
 * back end's kr_io_cancel / kr_close, which wake waiters the same way)
 * post the handle and cancel bit to an array under a lock (`P`),
 * checking the handle's generation as the RMW would, and the first post
 * since the VP last looked wakes it (kr_sched_unpark: an
 * idle VP takes it from L0 or its event source).  The VP is then the only
 * writer of every permit, and changes them with a relaxed load and store:
 * a park, a wakeup, a claim and a consumed cancel or permit cost no locked
 * instruction.  The VP applies the posts, as its own wakeups, at the
 * start of every call that reads or changes a permit (solo_now: one load
 * of kr__solo, whose SOLO_POSTED bit says there are some), after a sleep
 * that may have been cancelled meanwhile, at a scheduling point that looks
 * at the timers and before it goes idle.  Applying them first at each such
 * call keeps the order of happens-before: a post that precedes the call
 * (through the program's own synchronisation, which makes the VP see
 * SOLO_POSTED) acts before it, as an RMW made then would have; a post that
 * is concurrent with it may act later, which is an order an RMW could have
 * had too.  A post whose handle's life ends before the VP applies it is
 * dropped, as end_rest's store drops a late RMW: a wakeup owed to no one.
 * Every access stays atomic (relaxed), so that the change to RMWs is well
 * defined: kr_blocking_enter ends the state for good before it can start
 * a spare (kr__solo_end): it takes what was posted and clears kr__solo
 * (release) under the lock, so a poster that comes later sees 0 (under
 * the lock, or by its acquire load) after every plain store the VP made,
 * and the spare starts after them (pthread_create).  The VP applies the
 * posts it took with RMWs, as everyone does from then on.
 *
 * Rejected: a mutex per microprocess: an atomic more on every sleep and
 * wakeup.  For the one VP: a post linked through the record (a record
 * released meanwhile can be trimmed to zeroes, taking the rest of the list
 * with it); posts applied only at scheduling points (a park that a post
 * preceding it, in happens-before order, should have ended would sleep).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* block's general path (rt.h). */
__attribute__((noinline)) void kr__block_slow(struct kr_worker *w, kr_mp *self, int due)
{
	if (due)
		kr__timers_run(w);
	kr_mp *next = seam_next(w, NULL);
	if (next == self)
		return; /* woken and popped again before we even left */
	sw(w, self, next);
}

static __attribute__((noinline)) int ready_slow(struct kr_worker *w, kr_mp *mp)
{
	seam_ready(w, mp);
	return 0;
}

/* seam_ready(w, mp) for the fast paths: no call but tail calls.  Returns
 * 0. */
static inline __attribute__((always_inline)) int ready_tail(struct kr_worker *w, kr_mp *mp)
{
	switch (seam_ready_try(w, mp)) {
	case SEAM_READY:
		return 0;
	case SEAM_READY_IDLE:
		return kr__unpark_one();
	default:
		return ready_slow(w, mp);
	}
}

/* ---------------- sleep / wakeup ---------------- */

/* Use up a pending permit: NOTIFIED -> RUN, the generation and a pending
 * cancel stay.  An acquire RMW, so that the sleeper sees what
 * every waker did before its (release RMW) wakeup: a plain store here lost
 * wakeups, the waker's data store and the sleeper's re-check passing each
 * other in the store buffers (tests/test_core.c's mixed stress found it).
 * `solo` (rt.h: solo_now): the one VP, where a store will do. */
static inline void consume_permit(kr_mp *self, uint32_t s, uint32_t solo)
{
	if (solo)
		__atomic_store_n(&self->wstate, s | WS_RUN, __ATOMIC_RELAXED);
	else
		__atomic_fetch_or(&self->wstate, WS_RUN, __ATOMIC_ACQ_REL);
}

/* RUN -> SLEEP, before the switch away; 0 if a pending permit ended that
 * sleep at once (consumed).  Others change the word of a running
 * microprocess only to NOTIFIED (a cancel with it), so a failed CAS means
 * a permit. */
static inline int announce_sleep(kr_mp *self, uint32_t solo)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if ((s & WS_STATE) == WS_RUN) {
		if (solo) {
			__atomic_store_n(&self->wstate, s + 1, __ATOMIC_RELAXED);
			return 1;
		}
		if (__atomic_compare_exchange_n(&self->wstate, &s, s + 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	}
	consume_permit(self, s, solo);
	return 0;
}

/* Returns 0: `return sleep_self(...)` makes the switch a tail call. */
static inline int sleep_self(struct kr_worker *w, kr_mp *self, uint32_t solo)
{
	return announce_sleep(self, solo) ? block(w, self) : 0;
}

/* The calls below, when wakeups posted to the one VP wait: they go first,
 * and the call starts again.  Out of line, so that the fast paths save no
 * register for them. */
static __attribute__((noinline)) int park_posted(void)
{
	kr__posts_run();
	return kr_mp_park();
}

static __attribute__((noinline)) int park_until_posted(uint64_t deadline)
{
	kr__posts_run();
	return kr_mp_park_until(deadline);
}

static __attribute__((noinline)) int park_cancellable_posted(uint64_t deadline)
{
	kr__posts_run();
	return kr_mp_park_cancellable(deadline);
}

int kr_mp_park(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t solo = solo_now();
	if (solo_posted(solo))
		return park_posted();
	return sleep_self(w, w->cur, solo);
}

/* Back out of a sleep that has been announced (SLEEP) but not started.
 * 1: done; 0: a wakeup came in between and made us ready, so we block
 * (returning at once or soon) to keep the ready queue consistent. */
static int unsleep(struct kr_worker *w, kr_mp *self, uint32_t solo)
{
	if (claim_read(self, __atomic_load_n(&self->wstate, __ATOMIC_RELAXED), solo))
		return 1;
	block(w, self);
	return 0;
}

/* The timer is armed after the announcement RUN -> SLEEP, so that it can
 * only end this sleep; a fire before the switch away is a wakeup racing
 * with block(), which the on_cpu protocol already handles.  Out of line,
 * so that the timer's frame stays off the untimed sleeps' path. */
static __attribute__((noinline)) int sleep_deadline(struct kr_worker *w, kr_mp *self,
						    uint64_t deadline, uint32_t solo)
{
	if (!announce_sleep(self, solo))
		return 0;
	if (kr_now() >= deadline)
		return unsleep(w, self, solo) ? ETIMEDOUT : 0;
	struct kr_timer t = {.when = deadline, .mp = self};
	int err = kr__timer_arm(&w->timers, &t);
	if (err)
		return unsleep(w, self, solo) ? err : 0;
	block(w, self);
	if (kr__timer_cancel(&t))
		return 0;
	return t.won ? ETIMEDOUT : 0;
}

static inline int sleep_timed(struct kr_worker *w, kr_mp *self, uint64_t deadline,
			      uint32_t solo)
{
	if (deadline == KR_FOREVER)
		return sleep_self(w, self, solo);
	return sleep_deadline(w, self, deadline, solo);
}

int kr_mp_park_until(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t solo = solo_now();
	if (solo_posted(solo))
		return park_until_posted(deadline);
	return sleep_timed(w, w->cur, deadline, solo);
}

/* Consume a pending cancel.  The plain load keeps the RMW off the common
 * path; the acquire pairs with kr_mp_cancel's release. */
static inline int take_cancel(kr_mp *self, uint32_t solo)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if (!(s & WS_CANCEL))
		return 0;
	if (solo) {
		__atomic_store_n(&self->wstate, s & ~(uint32_t)WS_CANCEL, __ATOMIC_RELAXED);
		return 1;
	}
	return !!(__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_CANCEL, __ATOMIC_ACQUIRE) &
		  WS_CANCEL);
}

/* kr_mp_park_cancellable's end with wakeups posted meanwhile to the one
 * VP, maybe a cancel: they are applied first. */
static __attribute__((noinline)) int cancellable_end_posted(int err)
{
	kr__posts_run();
	return take_cancel(W()->cur, SOLO_ON) ? ECANCELED : err;
}

/* A cancel stored before its wakeup is seen after any sleep that wakeup
 * ends, or that a permit it left ends at once.  The record is read again
 * after the sleep rather than kept in a register across it (see block),
 * and so is kr__solo: the state may have ended meanwhile. */
int kr_mp_park_cancellable(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t solo = solo_now();
	if (solo_posted(solo))
		return park_cancellable_posted(deadline);
	if (take_cancel(w->cur, solo))
		return ECANCELED;
	int err = sleep_timed(w, w->cur, deadline, solo);
	solo = solo_now();
	if (solo_posted(solo))
		return cancellable_end_posted(err);
	return take_cancel(W()->cur, solo) ? ECANCELED : err;
}

int kr_mp_sleep_until(uint64_t deadline)
{
	if (!W())
		return EPERM;
	int woken = 0, err;
	while ((err = kr_mp_park_cancellable(deadline)) == 0)
		woken = 1;
	if (woken) { /* keep the wakeups that came meanwhile for the next kr_mp_park
		      * (the last wait's end applied what was posted) */
		kr_mp *self = W()->cur;
		if (kr__solo_on())
			__atomic_store_n(&self->wstate,
					 __atomic_load_n(&self->wstate, __ATOMIC_RELAXED) &
						 ~(uint32_t)WS_STATE,
					 __ATOMIC_RELAXED);
		else
			__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_STATE, __ATOMIC_RELEASE);
	}
	return err == ETIMEDOUT ? 0 : err;
}

int kr_mp_sleep_for(uint64_t ns)
{
	uint64_t now = kr_now();
	return kr_mp_sleep_until(ns > KR_FOREVER - 1 - now ? KR_FOREVER - 1 : now + ns);
}

/* The wakeup of h, with a cancel or not, on the one VP: a load and a
 * store (see the top).  `ended` is what a stale handle gets. */
static inline __attribute__((always_inline)) int wake_solo(struct kr_worker *w, kr_mp *h,
							   int cancel, int ended)
{
	kr_mp *mp = kr__rec(h);
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED);
	if (gen_differs(h, s)) /* stale, or ended */
		return ended;
	/* SLEEP -> RUN, RUN -> NOTIFIED, NOTIFIED stays */
	__atomic_store_n(&mp->wstate,
			 (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0),
			 __ATOMIC_RELAXED);
	return (s & WS_STATE) == WS_SLEEP ? ready_tail(w, mp) : 0;
}

/* The same wakeup anywhere else.  Always an RMW, even on a permit that is
 * already set (NOTIFIED -> NOTIFIED): the release of every wakeup must
 * reach the sleeper that consumes the permit.  w: the caller's worker,
 * NULL off a VP. */
static inline __attribute__((always_inline)) int wake_rmw(struct kr_worker *w, kr_mp *h,
							  int cancel, int ended)
{
	kr_mp *mp = kr__rec(h);
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), to;
	do {
		if (gen_differs(h, s)) /* stale, or ended */
			return ended;
		to = (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0);
	} while (!__atomic_compare_exchange_n(&mp->wstate, &s, to, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return (s & WS_STATE) == WS_SLEEP ? ready_tail(w, mp) : 0;
}

/* ---------------- one VP ---------------- */

uint32_t kr__solo;

/* The wakeups posted to the one VP: two arrays, one posted to (`cur`,
 * under the lock) while the VP applies the other.  Each starts in static
 * room, so that a post can always wait for room if memory runs out. */
enum { POSTS_STATIC = 32 };
struct post {
	kr_mp *h;
	int cancel;
};
static struct post posts_room[2][POSTS_STATIC];
static struct {
	kr_spin lock;
	unsigned cur, n;        /* the array posted to, and its count */
	unsigned cap[2];
	struct post *v[2];
} P = {.lock = KR_SPIN_INIT,
       .cap = {POSTS_STATIC, POSTS_STATIC},
       .v = {posts_room[0], posts_room[1]}};

/* kr_init: the one-VP state begins, or not, with nothing posted. */
void kr__solo_start(int on)
{
	kr__spin_lock(&P.lock);
	P.n = 0;
	__atomic_store_n(&kr__solo, on ? SOLO_ON : 0, __ATOMIC_RELEASE);
	kr__spin_unlock(&P.lock);
}

/* The posts so far, for the VP to apply, and kr__solo's new value;
 * *n: how many.  The array returned is no longer posted to. */
static struct post *posts_take(uint32_t solo, unsigned *n)
{
	kr__spin_lock(&P.lock);
	struct post *v = P.v[P.cur];
	*n = P.n;
	P.cur = !P.cur;
	P.n = 0;
	__atomic_store_n(&kr__solo, solo, __ATOMIC_RELEASE);
	kr__spin_unlock(&P.lock);
	return v;
}

/* The one VP applies what was posted to it, as its own wakeups.  Nothing
 * applied posts again: the array stays the VP's until its next take. */
__attribute__((noinline)) void kr__posts_run(void)
{
	unsigned n;
	struct post *v = posts_take(SOLO_ON, &n);
	struct kr_worker *w = W();
	for (unsigned k = 0; k < n; k++)
		wake_solo(w, v[k].h, v[k].cancel, 0);
}

/* The one-VP state ends for good, before a second VP starts: what was
 * posted is applied with RMWs, as threads that are no VP from now on make
 * theirs (the release of kr__solo's 0 orders this VP's plain stores
 * before their RMWs). */
void kr__solo_end(void)
{
	struct kr_worker *w = W();
	seam_several(w);
	unsigned n;
	struct post *v = posts_take(0, &n);
	for (unsigned k = 0; k < n; k++)
		wake_rmw(w, v[k].h, v[k].cancel, 0);
}

/* A thread that is no VP posts the wakeup of h to the one VP, and wakes
 * the VP if this is the first post since it last looked: the VP applies
 * posts at its next scheduling point that looks at the timers, at every
 * change of a permit it makes, and before it goes idle; a VP that has
 * parked takes the wakeup from L0.  A handle that is stale now gets
 * `ended`; one whose life ends before the VP applies it is owed nothing
 * (as in end_rest).  -1: the one-VP state is over, wake by RMW. */
static int post(kr_mp *h, int cancel, int ended)
{
	for (;;) {
		kr__spin_lock(&P.lock);
		uint32_t solo = __atomic_load_n(&kr__solo, __ATOMIC_RELAXED);
		unsigned c = P.cur;
		if (!solo || gen_differs(h, __atomic_load_n(&kr__rec(h)->wstate, __ATOMIC_RELAXED))) {
			kr__spin_unlock(&P.lock);
			return solo ? ended : -1;
		}
		if (P.n < P.cap[c]) {
			P.v[c][P.n++] = (struct post){h, cancel};
			__atomic_store_n(&kr__solo, SOLO_ON | SOLO_POSTED, __ATOMIC_RELAXED);
			kr__spin_unlock(&P.lock);
			if (!(solo & SOLO_POSTED))
				kr_sched_unpark(1);
			return 0;
		}
		/* full: twice the room, allocated with the lock free */
		unsigned cap = 2 * P.cap[c];
		kr__spin_unlock(&P.lock);
		struct post *v = malloc(cap * sizeof *v), *old = v;
		if (!v) { /* the VP empties it soon */
			kr_sched_unpark(1);
			sched_yield();
			continue;
		}
		kr__spin_lock(&P.lock);
		if (P.cur == c && P.cap[c] < cap) {
			memcpy(v, P.v[c], P.n * sizeof *v);
			old = P.v[c];
			P.v[c] = v;
			P.cap[c] = cap;
		}
		kr__spin_unlock(&P.lock);
		if (old != posts_room[0] && old != posts_room[1])
			free(old);
	}
}

/* kr_mp_unpark and kr_mp_cancel off a VP. */
static __attribute__((noinline)) int wake_foreign(kr_mp *h, int cancel, int ended)
{
	if (__atomic_load_n(&kr__solo, __ATOMIC_ACQUIRE)) {
		int r = post(h, cancel, ended);
		if (r >= 0)
			return r;
	}
	return wake_rmw(NULL, h, cancel, ended);
}

/* A wakeup on the one VP while wakeups posted to it wait: they go first. */
static __attribute__((noinline)) int wake_posted(kr_mp *h, int cancel, int ended)
{
	kr__posts_run();
	return wake_solo(W(), h, cancel, ended);
}

/* kr_mp_unpark, kr_mp_cancel (the cancel bit goes in with the wakeup) and
 * kr__wake_waiter; `ended` is what a stale handle gets.  Like create, no
 * call in the common case, tail calls otherwise. */
static inline __attribute__((always_inline)) int wake(kr_mp *h, int cancel, int ended)
{
	if (!kr__rec(h))
		return EINVAL;
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	struct kr_worker *w = W();
	if (!w)
		return wake_foreign(h, cancel, ended);
	uint32_t solo = solo_now();
	if (solo_posted(solo))
		return wake_posted(h, cancel, ended);
	if (solo)
		return wake_solo(w, h, cancel, ended);
	return wake_rmw(w, h, cancel, ended);
}

int kr_mp_unpark(kr_mp *mp) { return wake(mp, 0, ESRCH); }
int kr_mp_cancel(kr_mp *mp) { return wake(mp, 1, ESRCH); }
int kr__wake_waiter(kr_mp *mp) { return wake(mp, 0, 0); }

/* The checks of a direct switch from the caller to h; *mp: its record,
 * *s: its wstate, of h's generation. */
static inline int direct_target_ok(struct kr_worker *w, kr_mp *h, kr_mp **mp, uint32_t *s)
{
	if (!w)
		return EPERM;
	*mp = kr__rec(h);
	if (!*mp)
		return EINVAL;
	if (*mp == w->cur) /* the caller, or a stale handle of its record */
		return h == kr__handle(w->cur) ? EINVAL : ESRCH;
	*s = __atomic_load_n(&(*mp)->wstate, __ATOMIC_RELAXED);
	return gen_differs(h, *s) ? ESRCH : 0;
}

/* A direct switch's target was neither asleep nor queued: running, being
 * woken, or it has ended meanwhile. */
static __attribute__((noinline)) int not_taken(const kr_mp *h)
{
	return live_handle(h) ? EBUSY : ESRCH;
}

/* The general end of a direct switch to mp, which the caller has already
 * claimed or taken out of its queue: make self ready (SELF_READY), or
 * wake an idle VP for self, which is queued (SELF_UNPARK), then switch. */
enum { SELF_QUEUED, SELF_READY, SELF_UNPARK };
static __attribute__((noinline)) int direct_slow(struct kr_worker *w, kr_mp *self, kr_mp *mp,
						 int how)
{
	if (how == SELF_READY)
		seam_ready(w, self);
	else if (how == SELF_UNPARK)
		kr_sched_unpark(1);
	return sw(w, self, mp);
}

/* What a direct switch still owes for self after seam_ready_try. */
static inline int owed(int ready)
{
	return ready == SEAM_READY ? SELF_QUEUED : ready == SEAM_BUSY ? SELF_READY : SELF_UNPARK;
}

static __attribute__((noinline)) int switch_to_slow(struct kr_worker *w, kr_mp *self, kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (seam_take(w, mp, self) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp, SELF_QUEUED);
}

/* A direct switch to a sleeper while wakeups posted to the one VP wait:
 * they go first, and the call starts again. */
static __attribute__((noinline)) int switch_to_posted(kr_mp *h)
{
	kr__posts_run();
	return kr_mp_switch_to(h);
}

/* Like kr_mp_yield, no call in the common case but the switch; inside a
 * blocking section the general path (direct_slow's sw). */
int kr_mp_switch_to(kr_mp *h)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	uint32_t s;
	int err = direct_target_ok(w, h, &mp, &s);
	if (err)
		return err;
	kr_mp *self = w->cur;
	uint32_t solo = 0;
	if ((s & WS_STATE) == WS_SLEEP && solo_posted(solo = solo_now()))
		return switch_to_posted(h);
	if (claim_read(mp, s, solo)) {
		int how = owed(seam_requeue_try(w, self));
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how);
	} else {
		int r = seam_take_try(w, mp, self);
		if (r == SEAM_ABSENT)
			return not_taken(h);
		if (r == SEAM_BUSY)
			return switch_to_slow(w, self, h);
		if (w->blocked)
			return direct_slow(w, self, mp, SELF_QUEUED);
	}
	return sw_plain(w, self, mp);
}

static __attribute__((noinline)) int sleep_and_wakeup_slow(struct kr_worker *w, kr_mp *self,
							   kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (seam_take(w, mp, NULL) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp,
			   announce_sleep(self, kr__solo_on()) ? SELF_QUEUED : SELF_READY);
}

static __attribute__((noinline)) int park_and_switch_posted(kr_mp *h)
{
	kr__posts_run();
	return kr_mp_park_and_switch(h);
}

/* kr_mp_park_and_switch found a permit pending: the caller's sleep ends at
 * once, so it stays runnable behind mp, which it has claimed or taken. */
static __attribute__((noinline)) int park_and_switch_permit(struct kr_worker *w, kr_mp *self,
							    kr_mp *mp)
{
	int how = owed(seam_requeue_try(w, self));
	if (how != SELF_QUEUED || w->blocked)
		return direct_slow(w, self, mp, how);
	return sw_plain(w, self, mp);
}

/* kr_mp_park_and_switch past its checks, `solo` a constant in each of its
 * two copies (one VP, several), so that each keeps only its own code. */
static inline __attribute__((always_inline)) int park_and_switch_as(struct kr_worker *w,
								   kr_mp *h, kr_mp *mp,
								   uint32_t s, uint32_t solo)
{
	kr_mp *self = w->cur;
	if (!claim_read(mp, s, solo)) {
		int r = seam_take_try(w, mp, NULL);
		if (r == SEAM_ABSENT)
			return not_taken(h);
		if (r == SEAM_BUSY)
			return sleep_and_wakeup_slow(w, self, h);
	}
	if (!announce_sleep(self, solo))
		return park_and_switch_permit(w, self, mp);
	if (w->blocked)
		return direct_slow(w, self, mp, SELF_QUEUED);
	return sw_plain(w, self, mp);
}

int kr_mp_park_and_switch(kr_mp *h)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	uint32_t s;
	int err = direct_target_ok(w, h, &mp, &s);
	if (err)
		return err;
	uint32_t solo = solo_now();
	if (solo == SOLO_ON)
		return park_and_switch_as(w, h, mp, s, SOLO_ON);
	if (solo_posted(solo))
		return park_and_switch_posted(h);
	return park_and_switch_as(w, h, mp, s, 0);
}

/* kr_mp_yield's general path: the timers' turn (`due`), another scheduler,
 * a list queue (inline when its lock is free at once), a busy queue lock,
 * a blocking section. */
static __attribute__((noinline)) int yield_slow(struct kr_worker *w, int due)
{
	kr_mp *self = w->cur, *next;
	if (due)
		kr__timers_run(w);
	if (due || !(next = seam_next_try(w, self)))
		next = seam_next(w, self);
	return next != self ? sw(w, self, next) : 0;
}

/* kr_mp_yield found its VP's slot and list empty, and is in the slot now:
 * it takes itself back and goes on, unless a thief took it meanwhile; then
 * it leaves as a sleeper does (it must not run here while it runs there). */
static __attribute__((noinline)) int yield_alone(struct kr_worker *w, kr_mp *self)
{
	if (!seam_turn_back(w, self))
		kr__block_slow(w, self, 0);
	return 0;
}

/* The common case, two or more microprocesses taking turns on a VP, makes
 * no call but the switch: one exchange puts the caller into the VP's slot
 * and takes the next one out, when nothing is queued behind the slot (else
 * the caller goes behind the queue: yield_slow).  What it leaves to the
 * general paths it leaves with tail calls: so kr_mp_yield saves no register
 * of its own, the switch saves the caller's (seed 002). */
int kr_mp_yield(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (timers_due(w))
		return yield_slow(w, 1);
	kr_mp *self = w->cur, *next;
	if (!self) /* a microprocess runs: tells the compiler that self is pushed */
		__builtin_unreachable();
	switch (seam_turn(w, self, &next)) {
	case SEAM_TAKEN:
		return sw_plain(w, self, next);
	case SEAM_ABSENT:
		return yield_alone(w, self);
	default:
		return yield_slow(w, 0);
	}
}

