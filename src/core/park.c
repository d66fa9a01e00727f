/*
 * karui L2 — parking and waking microprocesses, and switching between
 * them: kr_mp_park and its timed and cancellable forms, kr_mp_sleep_for /
 * _until, kr_mp_unpark, kr_mp_cancel, kr_mp_switch_to,
 * kr_mp_park_and_switch and kr_mp_yield.
 *
 * A sleeper can be woken before it has left its VP: on_cpu (rt.h) keeps
 * it from running anywhere until then.  Whether it sleeps at all is its
 * wakeup permit's to say (permit.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rt.h"

/* block's general path (rt.h). */
__attribute__((noinline)) void kr__block_slow(struct kr_worker *w, kr_mp *self, int why, int due)
{
	if (due)
		kr__timers_run(w);
	kr_mp *next = seam_next(w, NULL);
	if (next == self)
		return; /* woken and popped again before we even left */
	sw(w, self, next, why);
}

/* ---------------- sleep / wakeup ---------------- */

/* Returns 0: `return sleep_self(...)` makes the switch a tail call.
 * `why`, here and below, is what the trace records (trace.h): a constant
 * in each copy of the parks, which only their general paths read. */
static inline int sleep_self(struct kr_worker *w, kr_mp *self, int why, uint32_t mode)
{
	return permit_sleep(self, mode) ? block(w, self, why) : 0;
}

/* The calls below, when wakeups posted to the one VP wait: they go first,
 * and the call starts again.  Out of line, so that the fast paths save no
 * register for them. */
static __attribute__((noinline)) int park_posted(void)
{
	kr__permits_apply();
	return kr_mp_park();
}

static __attribute__((noinline)) int park_until_posted(uint64_t deadline, int why)
{
	kr__permits_apply();
	return kr__park_until_why(deadline, why);
}

static __attribute__((noinline)) int park_cancellable_posted(uint64_t deadline, int why)
{
	kr__permits_apply();
	return kr__park_cancellable_why(deadline, why);
}

int kr_mp_park(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t mode = permit_mode();
	if (permit_posted(mode))
		return park_posted();
	return sleep_self(w, w->cur, KR_WHY_PARK, mode);
}

/* Back out of a sleep that has been announced (SLEEP) but not started.
 * 1: done; 0: a wakeup came in between and made us ready, so we block
 * (returning at once or soon) to keep the ready queue consistent. */
static int unsleep(struct kr_worker *w, kr_mp *self, uint32_t mode, int why)
{
	if (permit_claim(self, __atomic_load_n(&self->wstate, __ATOMIC_RELAXED), mode))
		return 1;
	block(w, self, why);
	return 0;
}

/* The timer is armed after the announcement RUN -> SLEEP, so that it can
 * only end this sleep; a fire before the switch away is a wakeup racing
 * with block(), which the on_cpu protocol already handles.  Out of line,
 * so that the timer's frame stays off the untimed sleeps' path. */
static __attribute__((noinline)) int sleep_deadline(struct kr_worker *w, kr_mp *self,
						    uint64_t deadline, uint32_t mode, int why)
{
	if (!permit_sleep(self, mode))
		return 0;
	if (kr_now() >= deadline)
		return unsleep(w, self, mode, why) ? ETIMEDOUT : 0;
	struct kr_timer t = {.when = deadline, .mp = self};
	int err = kr__timer_arm(&w->timers, &t);
	if (err)
		return unsleep(w, self, mode, why) ? err : 0;
	block(w, self, why);
	if (kr__timer_cancel(&t))
		return 0;
	return t.won ? ETIMEDOUT : 0;
}

static inline int sleep_timed(struct kr_worker *w, kr_mp *self, uint64_t deadline,
			      uint32_t mode, int why)
{
	if (deadline == KR_FOREVER)
		return sleep_self(w, self, why, mode);
	return sleep_deadline(w, self, deadline, mode, why);
}

static inline __attribute__((always_inline)) int park_until_as(uint64_t deadline, int why)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t mode = permit_mode();
	if (permit_posted(mode))
		return park_until_posted(deadline, why);
	return sleep_timed(w, w->cur, deadline, mode, why);
}

int kr_mp_park_until(uint64_t deadline) { return park_until_as(deadline, KR_WHY_PARK); }

/* kr_mp_park_cancellable_until's end with wakeups posted meanwhile to the one
 * VP, maybe a cancel: they are applied first. */
static __attribute__((noinline)) int cancellable_end_posted(int err)
{
	kr__permits_apply();
	return permit_take_cancel(W()->cur, SOLO_ON) ? ECANCELED : err;
}

/* A cancel stored before its wakeup is seen after any sleep that wakeup
 * ends, or that a permit it left ends at once.  The record is read again
 * after the sleep rather than kept in a register across it (see block),
 * and so is kr__solo: the state may have ended meanwhile. */
static inline __attribute__((always_inline)) int park_cancellable_as(uint64_t deadline, int why)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uint32_t mode = permit_mode();
	if (permit_posted(mode))
		return park_cancellable_posted(deadline, why);
	if (permit_take_cancel(w->cur, mode))
		return ECANCELED;
	int err = sleep_timed(w, w->cur, deadline, mode, why);
	mode = permit_mode();
	if (permit_posted(mode))
		return cancellable_end_posted(err);
	return permit_take_cancel(W()->cur, mode) ? ECANCELED : err;
}

int kr_mp_park_cancellable_until(uint64_t deadline)
{
	return park_cancellable_as(deadline, KR_WHY_PARK);
}

/* The parks of L3 (trace.h: kr__park_for), each a copy with its reason, so
 * that the reason costs them nothing; the two with a variable reason are
 * for their rarer waits. */
int kr__park_sem(uint64_t deadline) { return park_cancellable_as(deadline, KR_WHY_SEM); }
int kr__park_cond(uint64_t deadline) { return park_cancellable_as(deadline, KR_WHY_COND); }
int kr__park_stream(uint64_t deadline) { return park_cancellable_as(deadline, KR_WHY_STREAM); }
int kr__park_entry(uint64_t deadline) { return park_cancellable_as(deadline, KR_WHY_ENTRY); }
int kr__park_mutex(uint64_t deadline) { return park_until_as(deadline, KR_WHY_MUTEX); }
int kr__park_barrier(uint64_t deadline) { return park_until_as(deadline, KR_WHY_BARRIER); }
__attribute__((noinline)) int kr__park_cancellable_why(uint64_t deadline, int why)
{
	return park_cancellable_as(deadline, why);
}
__attribute__((noinline)) int kr__park_until_why(uint64_t deadline, int why)
{
	return park_until_as(deadline, why);
}

int kr_mp_sleep_until(uint64_t deadline)
{
	if (!W())
		return EPERM;
	int woken = 0, err;
	while ((err = kr__park_cancellable_why(deadline, KR_WHY_SLEEP)) == 0)
		woken = 1;
	if (woken) /* the last wait's end applied what was posted */
		permit_keep(W()->cur);
	return err == ETIMEDOUT ? 0 : err;
}

int kr_mp_sleep_for(uint64_t ns)
{
	uint64_t now = kr_now();
	return kr_mp_sleep_until(ns > KR_FOREVER - 1 - now ? KR_FOREVER - 1 : now + ns);
}

/* The wakeup of h, with a cancel or not, on the one VP (mode SOLO_ON:
 * a load and a store) or anywhere else (0: an RMW); w: the caller's
 * worker, NULL off a VP; `ended` is what a stale handle gets. */
static inline __attribute__((always_inline)) int wake_as(struct kr_worker *w, kr_mp *h,
							 int cancel, int ended, uint32_t mode)
{
	switch (permit_wake(h, cancel, mode)) {
	case PERMIT_STALE:
		return ended;
	case PERMIT_ASLEEP:
		return kr__ready_tail(w, kr__rec(h));
	default:
		if (cancel) /* not parked: it may be in a served wait (served.c) */
			kr__served_third(w, h);
		return 0;
	}
}

static inline __attribute__((always_inline)) int wake_solo(struct kr_worker *w, kr_mp *h,
							   int cancel, int ended)
{
	return wake_as(w, h, cancel, ended, SOLO_ON);
}

static inline __attribute__((always_inline)) int wake_rmw(struct kr_worker *w, kr_mp *h,
							  int cancel, int ended)
{
	return wake_as(w, h, cancel, ended, 0);
}

/* ---------------- one VP ---------------- */

/* A post, applied on the VP (mode: permit.h's). */
static void post_apply(struct kr_worker *w, const struct kr__post *p, uint32_t mode)
{
	if (p->how == POST_READY)
		seam_ready(w, kr__rec(p->h));
	else
		wake_as(w, p->h, p->how == POST_CANCEL, 0, mode);
}

/* Nothing applied posts again: the array stays the VP's until its next
 * take. */
__attribute__((noinline)) void kr__permits_apply(void)
{
	unsigned n;
	struct kr__post *v = kr__permits_take(SOLO_ON, &n);
	struct kr_worker *w = W();
	for (unsigned k = 0; k < n; k++)
		post_apply(w, &v[k], SOLO_ON);
}

/* The one-VP state ends for good, before a second VP starts: what was
 * posted is applied with RMWs, as threads that are no VP from now on make
 * theirs (the release of kr__solo's 0 orders this VP's plain stores
 * before their RMWs). */
void kr__permits_several(void)
{
	struct kr_worker *w = W();
	seam_several(w);
	unsigned n;
	struct kr__post *v = kr__permits_take(0, &n);
	for (unsigned k = 0; k < n; k++)
		post_apply(w, &v[k], 0);
}

/* kr_mp_unpark and kr_mp_cancel off a VP. */
static __attribute__((noinline)) int wake_foreign(kr_mp *h, int cancel, int ended)
{
	if (__atomic_load_n(&kr__solo, __ATOMIC_ACQUIRE)) {
		int r = kr__permit_post(h, cancel);
		if (r != PERMIT_SEVERAL)
			return r == PERMIT_STALE ? ended : 0;
	}
	return wake_rmw(NULL, h, cancel, ended);
}

/* A wakeup on the one VP while wakeups posted to it wait: they go first. */
static __attribute__((noinline)) int wake_posted(kr_mp *h, int cancel, int ended)
{
	kr__permits_apply();
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
	uint32_t mode = permit_mode();
	if (permit_posted(mode))
		return wake_posted(h, cancel, ended);
	if (mode)
		return wake_solo(w, h, cancel, ended);
	return wake_rmw(w, h, cancel, ended);
}

void kr__mp_ready_any(kr_mp *h)
{
	struct kr_worker *w = W();
	if (w)
		seam_ready(w, kr__rec(h));
	else if (!__atomic_load_n(&kr__solo, __ATOMIC_ACQUIRE) ||
		 kr__permit_post(h, POST_READY) == PERMIT_SEVERAL)
		kr__ready_tail(NULL, kr__rec(h));
}

int kr_mp_unpark(kr_mp *mp) { return wake(mp, 0, ESRCH); }
int kr_mp_cancel(kr_mp *mp) { return wake(mp, 1, ESRCH); }
int kr__wake_waiter(kr_mp *mp) { return wake(mp, 0, 0); }

void kr__mp_io_done(kr_mp *mp) { seam_io_done(W(), mp); }

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
	return permit_stale(h, *s) ? ESRCH : 0;
}

/* A direct switch's target was neither asleep nor queued: running, being
 * woken, or it has ended meanwhile. */
static __attribute__((noinline)) int not_taken(const kr_mp *h)
{
	return permit_live(h) ? EBUSY : ESRCH;
}

/* The general end of a direct switch to mp, which the caller has already
 * claimed or taken out of its queue: make self ready (SELF_READY), or
 * wake an idle VP for self, which is queued (SELF_UNPARK), then switch. */
enum { SELF_QUEUED, SELF_READY, SELF_UNPARK };
static __attribute__((noinline)) int direct_slow(struct kr_worker *w, kr_mp *self, kr_mp *mp,
						 int how, int why)
{
	if (how == SELF_READY)
		seam_ready(w, self);
	else if (how == SELF_UNPARK)
		kr_sched_unpark(1);
	return sw(w, self, mp, why);
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
	return direct_slow(w, self, mp, SELF_QUEUED, KR_WHY_RUNNABLE);
}

/* A direct switch to a sleeper while wakeups posted to the one VP wait:
 * they go first, and the call starts again. */
static __attribute__((noinline)) int switch_to_posted(kr_mp *h)
{
	kr__permits_apply();
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
	uint32_t mode = 0;
	if ((s & WS_STATE) == WS_SLEEP && permit_posted(mode = permit_mode()))
		return switch_to_posted(h);
	if (permit_claim(mp, s, mode)) {
		int how = owed(seam_requeue_try(w, self));
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how, KR_WHY_RUNNABLE);
	} else {
		int r = seam_take_try(w, mp, self);
		if (r == SEAM_ABSENT)
			return not_taken(h);
		if (r == SEAM_BUSY)
			return switch_to_slow(w, self, h);
		if (w->blocked)
			return direct_slow(w, self, mp, SELF_QUEUED, KR_WHY_RUNNABLE);
	}
	return sw_plain(w, self, mp);
}

static __attribute__((noinline)) int sleep_and_wakeup_slow(struct kr_worker *w, kr_mp *self,
							   kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (seam_take(w, mp, NULL) != 0)
		return not_taken(h);
	if (permit_sleep(self, kr__solo_on()))
		return direct_slow(w, self, mp, SELF_QUEUED, KR_WHY_SWITCH);
	return direct_slow(w, self, mp, SELF_READY, KR_WHY_RUNNABLE);
}

static __attribute__((noinline)) int park_and_switch_posted(kr_mp *h)
{
	kr__permits_apply();
	return kr_mp_park_and_switch(h);
}

/* kr_mp_park_and_switch found a permit pending: the caller's sleep ends at
 * once, so it stays runnable behind mp, which it has claimed or taken. */
static __attribute__((noinline)) int park_and_switch_permit(struct kr_worker *w, kr_mp *self,
							    kr_mp *mp)
{
	int how = owed(seam_requeue_try(w, self));
	if (how != SELF_QUEUED || w->blocked)
		return direct_slow(w, self, mp, how, KR_WHY_RUNNABLE);
	return sw_plain(w, self, mp);
}

/* kr_mp_park_and_switch past its checks, `mode` a constant in each of its
 * two copies (one VP, several), so that each keeps only its own code. */
static inline __attribute__((always_inline)) int park_and_switch_as(struct kr_worker *w,
								   kr_mp *h, kr_mp *mp,
								   uint32_t s, uint32_t mode)
{
	kr_mp *self = w->cur;
	if (!permit_claim(mp, s, mode)) {
		int r = seam_take_try(w, mp, NULL);
		if (r == SEAM_ABSENT)
			return not_taken(h);
		if (r == SEAM_BUSY)
			return sleep_and_wakeup_slow(w, self, h);
	}
	if (!permit_sleep(self, mode))
		return park_and_switch_permit(w, self, mp);
	if (!w->fast) /* a blocking section, another scheduler, a trace */
		return direct_slow(w, self, mp, SELF_QUEUED, KR_WHY_SWITCH);
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
	uint32_t mode = permit_mode();
	if (mode == SOLO_ON)
		return park_and_switch_as(w, h, mp, s, SOLO_ON);
	if (permit_posted(mode))
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
	return next != self ? sw(w, self, next, KR_WHY_RUNNABLE) : 0;
}

/* kr_mp_yield found its VP's slot and list empty, and is in the slot now:
 * it takes itself back and goes on, unless a thief took it meanwhile; then
 * it leaves as a sleeper does (it must not run here while it runs there). */
static __attribute__((noinline)) int yield_alone(struct kr_worker *w, kr_mp *self)
{
	if (!seam_turn_back(w, self))
		kr__block_slow(w, self, KR_WHY_RUNNABLE, 0);
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

