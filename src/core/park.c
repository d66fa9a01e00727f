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
 * join words are touched by that VP alone (sched_default.c and life.c, "One
 * VP"); kr_blocking_enter ends the state for good before it can start a
 * spare (kr__solo_end).
 *
 * Rejected: a mutex per microprocess: an atomic more on every sleep and
 * wakeup.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "rt.h"

/* block's general path (rt.h). */
__attribute__((noinline)) void kr__block_slow(struct kr_worker *w, kr_mp *self, int due)
{
	if (due)
		kr__timers_run(w);
	kr_mp *next = NEXT(w, NULL);
	if (next == self)
		return; /* woken and popped again before we even left */
	sw(w, self, next);
}

static __attribute__((noinline)) int ready_slow(struct kr_worker *w, kr_mp *mp)
{
	READY(w, mp);
	return 0;
}

/* READY(w, mp) for the fast paths: no call but tail calls.  Returns 0. */
static inline __attribute__((always_inline)) int ready_tail(struct kr_worker *w, kr_mp *mp)
{
	struct inst *i;
	if (w && (i = w->fast) && slot_free(i))
		return slot_fill(D(SCHED), i, mp) ? kr__unpark_one() : 0;
	if (!w || !IS_DEFAULT)
		return ready_slow(w, mp);
	switch (kr__d_ready_try(SCHED, w->sched_vp, mp)) {
	case KR_D_READY:
		return 0;
	case KR_D_READY_IDLE:
		return kr__unpark_one();
	default:
		return ready_slow(w, mp);
	}
}

/* ---------------- one VP ---------------- */

uint32_t kr__solo;

/* kr_init: the one-VP state begins, or not. */
void kr__solo_start(int on)
{
	__atomic_store_n(&kr__solo, on ? SOLO_ON : 0, __ATOMIC_RELEASE);
}

/* The one-VP state ends for good, before a second VP starts: the spare's
 * pthread_create orders this VP's plain stores before its first look. */
void kr__solo_end(void)
{
	((struct inst *)W()->sched_vp)->solo = 0; /* the default scheduler's */
	__atomic_store_n(&kr__solo, 0, __ATOMIC_RELEASE);
}

/* ---------------- sleep / wakeup ---------------- */

/* Use up a pending permit: NOTIFIED -> RUN, the generation and a pending
 * cancel stay.  An acquire RMW, so that the sleeper sees what
 * every waker did before its (release RMW) wakeup: a plain store here lost
 * wakeups, the waker's data store and the sleeper's re-check passing each
 * other in the store buffers (tests/test_core.c's mixed stress found it). */
static inline void consume_permit(kr_mp *self)
{
	__atomic_fetch_or(&self->wstate, WS_RUN, __ATOMIC_ACQ_REL);
}

/* RUN -> SLEEP, before the switch away; 0 if a pending permit ended that
 * sleep at once (consumed).  Others change the word of a running
 * microprocess only to NOTIFIED (a cancel with it), so a failed CAS means
 * a permit. */
static inline int announce_sleep(kr_mp *self)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if ((s & WS_STATE) == WS_RUN &&
	    __atomic_compare_exchange_n(&self->wstate, &s, s + 1, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return 1;
	consume_permit(self);
	return 0;
}

/* Returns 0: `return sleep_self(...)` makes the switch a tail call. */
static inline int sleep_self(struct kr_worker *w, kr_mp *self)
{
	return announce_sleep(self) ? block(w, self) : 0;
}

int kr_mp_park(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	return sleep_self(w, w->cur);
}

/* Back out of a sleep that has been announced (SLEEP) but not started.
 * 1: done; 0: a wakeup came in between and made us ready, so we block
 * (returning at once or soon) to keep the ready queue consistent. */
static int unsleep(struct kr_worker *w, kr_mp *self)
{
	if (claim_sleeper(self))
		return 1;
	block(w, self);
	return 0;
}

/* The timer is armed after the announcement RUN -> SLEEP, so that it can
 * only end this sleep; a fire before the switch away is a wakeup racing
 * with block(), which the on_cpu protocol already handles.  Out of line,
 * so that the timer's frame stays off the untimed sleeps' path. */
static __attribute__((noinline)) int sleep_deadline(struct kr_worker *w, kr_mp *self,
						    uint64_t deadline)
{
	if (!announce_sleep(self))
		return 0;
	if (kr_now() >= deadline)
		return unsleep(w, self) ? ETIMEDOUT : 0;
	struct kr_timer t = {.when = deadline, .mp = self};
	int err = kr__timer_arm(&w->timers, &t);
	if (err)
		return unsleep(w, self) ? err : 0;
	block(w, self);
	if (kr__timer_cancel(&t))
		return 0;
	return t.won ? ETIMEDOUT : 0;
}

static inline int sleep_timed(struct kr_worker *w, kr_mp *self, uint64_t deadline)
{
	if (deadline == KR_FOREVER)
		return sleep_self(w, self);
	return sleep_deadline(w, self, deadline);
}

int kr_mp_park_until(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	return sleep_timed(w, w->cur, deadline);
}

/* Consume a pending cancel.  The plain load keeps the RMW off the common
 * path; the acquire pairs with kr_mp_cancel's release. */
static inline int take_cancel(kr_mp *self)
{
	return (__atomic_load_n(&self->wstate, __ATOMIC_RELAXED) & WS_CANCEL) &&
	       (__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_CANCEL, __ATOMIC_ACQUIRE) &
		WS_CANCEL);
}

/* A cancel stored before its wakeup is seen after any sleep that wakeup
 * ends, or that a permit it left ends at once.  The record is read again
 * after the sleep rather than kept in a register across it (see block). */
int kr_mp_park_cancellable(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (take_cancel(w->cur))
		return ECANCELED;
	int err = sleep_timed(w, w->cur, deadline);
	return take_cancel(W()->cur) ? ECANCELED : err;
}

int kr_mp_sleep_until(uint64_t deadline)
{
	if (!W())
		return EPERM;
	int woken = 0, err;
	while ((err = kr_mp_park_cancellable(deadline)) == 0)
		woken = 1;
	if (woken) /* keep the wakeups that came meanwhile for the next kr_mp_park */
		__atomic_fetch_and(&W()->cur->wstate, ~(uint32_t)WS_STATE, __ATOMIC_RELEASE);
	return err == ETIMEDOUT ? 0 : err;
}

int kr_mp_sleep_for(uint64_t ns)
{
	uint64_t now = kr_now();
	return kr_mp_sleep_until(ns > KR_FOREVER - 1 - now ? KR_FOREVER - 1 : now + ns);
}

/* kr_mp_unpark, kr_mp_cancel (the cancel bit goes in with the wakeup) and
 * kr__wake_waiter; `ended` is what a stale handle gets.  Always an RMW,
 * even on a permit that is already set (NOTIFIED -> NOTIFIED): the release
 * of every wakeup must reach the sleeper that consumes the permit.  Like
 * create, no call in the common case, tail calls otherwise. */
static inline __attribute__((always_inline)) int wake(kr_mp *h, int cancel, int ended)
{
	kr_mp *mp = kr__rec(h);
	if (!mp)
		return EINVAL;
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), to;
	do {
		if (gen_differs(h, s)) /* stale, or ended */
			return ended;
		/* SLEEP -> RUN, RUN -> NOTIFIED, NOTIFIED stays */
		to = (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0);
	} while (!__atomic_compare_exchange_n(&mp->wstate, &s, to, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return (s & WS_STATE) == WS_SLEEP ? ready_tail(W(), mp) : 0;
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
		READY(w, self);
	else if (how == SELF_UNPARK)
		kr_sched_unpark(1);
	return sw(w, self, mp);
}

/* What a direct switch still owes for self after kr__d_ready_try. */
static inline int owed(int ready)
{
	return ready == KR_D_READY ? SELF_QUEUED : ready == KR_D_BUSY ? SELF_READY : SELF_UNPARK;
}

static __attribute__((noinline)) int switch_to_slow(struct kr_worker *w, kr_mp *self, kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (TAKE(w, mp, self) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp, SELF_QUEUED);
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
	if (claim_read(mp, s)) {
		int how = owed(IS_DEFAULT ? kr__d_ready_try(SCHED, w->sched_vp, self) : KR_D_BUSY);
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how);
	} else {
		int r = IS_DEFAULT ? kr__d_take_try(SCHED, w->sched_vp, mp, self) : KR_D_BUSY;
		if (r == KR_D_ABSENT)
			return not_taken(h);
		if (r == KR_D_BUSY)
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
	if (TAKE(w, mp, NULL) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp, announce_sleep(self) ? SELF_QUEUED : SELF_READY);
}

int kr_mp_park_and_switch(kr_mp *h)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	uint32_t s;
	int err = direct_target_ok(w, h, &mp, &s);
	if (err)
		return err;
	kr_mp *self = w->cur;
	if (!claim_read(mp, s)) {
		int r = IS_DEFAULT ? kr__d_take_try(SCHED, w->sched_vp, mp, NULL) : KR_D_BUSY;
		if (r == KR_D_ABSENT)
			return not_taken(h);
		if (r == KR_D_BUSY)
			return sleep_and_wakeup_slow(w, self, h);
	}
	if (!announce_sleep(self)) {
		/* a pending permit: the caller's sleep ends at once, so it
		 * stays runnable behind mp */
		int how = owed(IS_DEFAULT ? kr__d_ready_try(SCHED, w->sched_vp, self) : KR_D_BUSY);
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how);
	} else if (w->blocked) {
		return direct_slow(w, self, mp, SELF_QUEUED);
	}
	return sw_plain(w, self, mp);
}

/* kr_mp_yield's general path: the timers' turn (`due`), another scheduler,
 * a list queue (inline when its lock is free at once), a busy queue lock,
 * a blocking section. */
static __attribute__((noinline)) int yield_slow(struct kr_worker *w, int due)
{
	kr_mp *self = w->cur, *next;
	if (due)
		kr__timers_run(w);
	if (due || !IS_DEFAULT || w->blocked || !(next = kr__d_next_try(SCHED, w->sched_vp, self)))
		next = NEXT(w, self);
	return next != self ? sw(w, self, next) : 0;
}

/* kr_mp_yield found its VP's slot and list empty, and is in the slot now:
 * it takes itself back and goes on, unless a thief took it meanwhile; then
 * it leaves as a sleeper does (it must not run here while it runs there). */
static __attribute__((noinline)) int yield_alone(struct kr_worker *w, struct inst *i, kr_mp *self)
{
	if (slot_grab(i) != self)
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
	struct inst *i = w->fast;
	if (!i || !list_empty(i))
		return yield_slow(w, 0);
	if (!(next = slot_swap(i, self)))
		return yield_alone(w, i, self);
	return sw_plain(w, self, next);
}

