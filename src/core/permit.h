/*
 * karui L2 — the wakeup permit of each microprocess (its wstate word)
 * and the one-VP state: the one API through which the files of L2 read
 * and change them.  park.c parks, wakes and switches with it, timer.c and
 * the idle loop claim sleepers, life.c starts and ends lives
 * (generations) with it, served.c ends served waits with its bits
 * WS_THIRD and WS_INTR; permit.c holds what threads that are no VP post
 * to the one VP.
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
 *            Bits WS_THIRD and WS_INTR are the served waits' (served.c),
 *            which leave the permit itself alone: a cancel, or a served
 *            wait's timer, holds WS_THIRD while it decides whether it ends
 *            the wait and sets WS_INTR when it does; the sleeper drops
 *            WS_INTR once that wait is over.  Every operation here keeps
 *            the two bits, and a third party changes them only with a CAS
 *            that checks the generation (or, on the one VP, a store), so
 *            that a stale handle changes nothing.
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
 * post the handle and cancel bit to an array under a lock (permit.c),
 * checking the handle's generation as the RMW would, and the first post
 * since the VP last looked wakes it (kr_sched_unpark: an
 * idle VP takes it from L0 or its event source).  The VP is then the only
 * writer of every permit, and changes them with a relaxed load and store:
 * a park, a wakeup, a claim and a consumed cancel or permit cost no locked
 * instruction.  The VP applies the posts, as its own wakeups, at the
 * start of every call that reads or changes a permit (permit_mode: one
 * load of kr__solo, whose SOLO_POSTED bit says there are some), after a sleep
 * that may have been cancelled meanwhile, at a scheduling point that looks
 * at the timers and before it goes idle.  Applying them first at each such
 * call keeps the order of happens-before: a post that precedes the call
 * (through the program's own synchronisation, which makes the VP see
 * SOLO_POSTED) acts before it, as an RMW made then would have; a post that
 * is concurrent with it may act later, which is an order an RMW could have
 * had too.  A post whose handle's life ends before the VP applies it is
 * dropped, as end_rest's store drops a late RMW: a wakeup owed to no one.
 * Every access stays atomic (relaxed), so that the change to RMWs is well
 * defined: kr_blocking_begin ends the state for good before it can start
 * a spare (kr__permits_several): it takes what was posted and clears kr__solo
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
#ifndef KARUI_CORE_PERMIT_H
#define KARUI_CORE_PERMIT_H

#include "internal.h"

/* ---------------- the mode of a call ---------------- */

/* kr__solo, read once by a call on a VP that reads or changes permits,
 * before it reads one: the `mode` the operations below take.  If
 * permit_posted, the call applies what was posted first
 * (kr__permits_apply) and starts again, so that a wakeup posted before
 * it, in happens-before order, acts first; else nonzero: the one-VP
 * state, where the call changes permits with loads and stores. */
static inline uint32_t permit_mode(void) { return __atomic_load_n(&kr__solo, __ATOMIC_RELAXED); }
static inline int permit_posted(uint32_t mode) { return __builtin_expect(mode > SOLO_ON, 0); }

/* kr_init: the one-VP state begins, or not, with nothing posted
 * (permit.c). */
void kr__permits_start(int on);
/* The one VP applies what threads that are no VP posted to it, as its
 * own wakeups (park.c). */
void kr__permits_apply(void);
/* The one-VP state ends for good, before a second VP starts (park.c). */
void kr__permits_several(void);

/* At a scheduling point that looks at the timers, and in the idle loop:
 * the wakeups posted to the one VP. */
static inline void permit_posts_run(void)
{
	if (__atomic_load_n(&kr__solo, __ATOMIC_RELAXED) & SOLO_POSTED)
		kr__permits_apply();
}

/* ---------------- generations ---------------- */

/* Is h of another generation than wstate word s?  Generation 0 is no
 * handle's (the pointers that scheduler modules are given have it): it
 * matches only a record fresh from the pool, where an RMW of a wakeup
 * changes nothing that the record's next create keeps. */
static inline int permit_stale(const kr_mp *h, uint32_t s)
{
	return ((uint32_t)((uintptr_t)h >> (KR_GEN_SHIFT - 16)) ^ s) & WS_GEN;
}

/* Does h name a life of its record that has not ended? */
static inline int permit_live(const kr_mp *h)
{
	return !permit_stale(h, __atomic_load_n(&kr__rec(h)->wstate, __ATOMIC_ACQUIRE));
}

/* A life begins on record mp, running: its generation (the record's
 * last, or one made from `seed` for a record fresh from the pool). */
static inline uint32_t permit_begin(kr_mp *mp, unsigned long seed)
{
	uint32_t g = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED) & WS_GEN;
	if (__builtin_expect(!g, 0))
		g = (uint32_t)(seed | 1) << 16;
	__atomic_store_n(&mp->wstate, g | WS_RUN, __ATOMIC_RELAXED);
	return g;
}

/* The life on record self ends: the next generation (65535 wraps to 1).
 * From now on a wakeup or cancel made for this life fails, and one that
 * this store overwrites is owed to no one. */
static inline void permit_end(kr_mp *self)
{
	uint32_t g = (__atomic_load_n(&self->wstate, __ATOMIC_RELAXED) & WS_GEN) + (1u << 16);
	__atomic_store_n(&self->wstate, g ? g : 1u << 16, __ATOMIC_RELEASE);
}

/* ---------------- sleeping ---------------- */

/* Use up a pending permit: NOTIFIED -> RUN, the generation and a pending
 * cancel stay.  An acquire RMW, so that the sleeper sees what
 * every waker did before its (release RMW) wakeup: a plain store here lost
 * wakeups, the waker's data store and the sleeper's re-check passing each
 * other in the store buffers (tests/test_sched.c's mixed stress found it). */
static inline void permit_consume(kr_mp *self, uint32_t s, uint32_t mode)
{
	if (mode)
		__atomic_store_n(&self->wstate, s | WS_RUN, __ATOMIC_RELAXED);
	else
		__atomic_fetch_or(&self->wstate, WS_RUN, __ATOMIC_ACQ_REL);
}

/* RUN -> SLEEP, before the switch away; 0 if a pending permit ended that
 * sleep at once (consumed).  Others change the word of a running
 * microprocess only to NOTIFIED (a cancel with it) or in its served-wait
 * bits, so a failed CAS means a permit, or a third party that holds
 * WS_THIRD, which also ends the sleep at once (kr_mp_park may return
 * early): SLEEP and WS_THIRD are never set together, so that a claim's
 * one CAS (permit_claim) cannot fail on a third party's look. */
static inline int permit_sleep(kr_mp *self, uint32_t mode)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if ((s & (WS_STATE | WS_THIRD)) == WS_RUN) {
		if (mode) {
			__atomic_store_n(&self->wstate, s + 1, __ATOMIC_RELAXED);
			return 1;
		}
		if (__atomic_compare_exchange_n(&self->wstate, &s, s + 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	}
	permit_consume(self, s, mode);
	return 0;
}

/* SLEEP without a look at the permit: kr_fini's caller, whom VP 0's idle
 * loop alone resumes (permit_claim_sleeper). */
static inline void permit_sleep_for_handoff(kr_mp *self)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	__atomic_store_n(&self->wstate, (s & ~(uint32_t)WS_STATE) | WS_SLEEP, __ATOMIC_RELEASE);
}

/* Consume a pending cancel: 1 if there was one.  The plain load keeps the
 * RMW off the common path; the acquire pairs with kr_mp_cancel's release. */
static inline int permit_take_cancel(kr_mp *self, uint32_t mode)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if (!(s & WS_CANCEL))
		return 0;
	if (mode) {
		__atomic_store_n(&self->wstate, s & ~(uint32_t)WS_CANCEL, __ATOMIC_RELAXED);
		return 1;
	}
	return !!(__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_CANCEL, __ATOMIC_ACQUIRE) &
		  WS_CANCEL);
}

/* After a sleep that wakeups did not end (kr_mp_sleep_until): those that
 * came meanwhile stay pending, as a permit, for the next kr_mp_park. */
static inline void permit_keep(kr_mp *self)
{
	if (kr__solo_on())
		__atomic_store_n(&self->wstate,
				 __atomic_load_n(&self->wstate, __ATOMIC_RELAXED) & ~(uint32_t)WS_STATE,
				 __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_STATE, __ATOMIC_RELEASE);
}

/* ---------------- waking ---------------- */

/* Claim mp, whose wstate read s, if it sleeps: SLEEP -> RUN.  1: the
 * caller now owns making it run.  Testing s first keeps a failing CAS (an
 * atomic) off the common path of switching to a runnable microprocess;
 * the CAS expects s, generation included (the served-wait bits do not
 * change while it sleeps: permit_sleep).  `mode` (permit_mode, posts
 * applied): s is still the word, which only the caller's VP changes, and a
 * store will do. */
static inline int permit_claim(kr_mp *mp, uint32_t s, uint32_t mode)
{
	if ((s & WS_STATE) != WS_SLEEP)
		return 0;
	if (mode) {
		__atomic_store_n(&mp->wstate, s - 1, __ATOMIC_RELAXED);
		return 1;
	}
	return __atomic_compare_exchange_n(&mp->wstate, &s, s - 1, 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

/* Claim a sleeping mp of any generation: the record of a sleep that holds
 * still (a timer's, whose node lives as long as the sleep; kr_fini's).
 * Called where the posts have just been applied (permit_posts_run). */
static inline int permit_claim_sleeper(kr_mp *mp)
{
	return permit_claim(mp, __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), kr__solo_on());
}

/* The wakeup of h, with a cancel or not: SLEEP -> RUN, RUN -> NOTIFIED,
 * NOTIFIED stays.  PERMIT_STALE: h's life has ended (or never was);
 * PERMIT_ASLEEP: it slept, and the caller is now to make it ready;
 * PERMIT_SET: nothing more to do.  With `mode` set (the one VP) a load and
 * a store; else always an RMW, even on a permit that is already set
 * (NOTIFIED -> NOTIFIED): the release of every wakeup must reach the
 * sleeper that consumes the permit. */
enum { PERMIT_STALE = -1, PERMIT_SET = 0, PERMIT_ASLEEP = 1, PERMIT_SEVERAL = 2 };
static inline __attribute__((always_inline)) int permit_wake(kr_mp *h, int cancel, uint32_t mode)
{
	kr_mp *mp = kr__rec(h);
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), to;
	if (mode) {
		if (permit_stale(h, s))
			return PERMIT_STALE;
		__atomic_store_n(&mp->wstate,
				 (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0),
				 __ATOMIC_RELAXED);
	} else {
		do {
			if (permit_stale(h, s))
				return PERMIT_STALE;
			to = (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0);
		} while (!__atomic_compare_exchange_n(&mp->wstate, &s, to, 0, __ATOMIC_ACQ_REL,
						      __ATOMIC_RELAXED));
	}
	return (s & WS_STATE) == WS_SLEEP ? PERMIT_ASLEEP : PERMIT_SET;
}

/* ---------------- served waits (served.c) ---------------- */

/* The word as the served waits' sleepers and servers read it (acquire:
 * WS_INTR is set with a release). */
static inline uint32_t permit_served_look(kr_mp *mp)
{
	return __atomic_load_n(&mp->wstate, __ATOMIC_ACQUIRE);
}

/* A third party takes WS_THIRD in h's life: 1; 0: another holds it (wait
 * and try again); -1: nothing taken, for that life is over or h sleeps on
 * its permit, in no served wait (its CAS that announced the sleep read
 * the cancel that calls here, if any).  `mode`: the one VP, which alone
 * gets here then, and finds the bit clear. */
static inline int permit_third_try(kr_mp *h, uint32_t mode)
{
	kr_mp *mp = kr__rec(h);
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED);
	if (permit_stale(h, s) || (s & WS_STATE) == WS_SLEEP)
		return -1;
	if (s & WS_THIRD)
		return 0;
	if (mode) {
		__atomic_store_n(&mp->wstate, s | WS_THIRD, __ATOMIC_RELAXED);
		return 1;
	}
	return __atomic_compare_exchange_n(&mp->wstate, &s, s | WS_THIRD, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

/* It drops WS_THIRD, and sets WS_INTR if `intr` (release); nothing if
 * h's life has ended meanwhile (its end dropped both). */
static inline void permit_third_give(kr_mp *h, int intr, uint32_t mode)
{
	kr_mp *mp = kr__rec(h);
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), to;
	do {
		if (permit_stale(h, s))
			return;
		to = (s & ~(uint32_t)WS_THIRD) | (intr ? WS_INTR : 0);
		if (mode) {
			__atomic_store_n(&mp->wstate, to, __ATOMIC_RELEASE);
			return;
		}
	} while (!__atomic_compare_exchange_n(&mp->wstate, &s, to, 0, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

/* The sleeper, at the end of a served wait that it left or a third party
 * ended: drops WS_INTR and takes a pending cancel, once no third party
 * holds WS_THIRD.  Returns what WS_INTR and WS_CANCEL were, or -1 while
 * WS_THIRD is held (wait and try again). */
static inline int permit_served_end(kr_mp *self, uint32_t mode)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED), to;
	do {
		if (s & WS_THIRD)
			return -1;
		to = s & ~(uint32_t)(WS_INTR | WS_CANCEL);
		if (mode) {
			__atomic_store_n(&self->wstate, to, __ATOMIC_RELAXED);
			break;
		}
	} while (!__atomic_compare_exchange_n(&self->wstate, &s, to, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return (int)(s & (WS_INTR | WS_CANCEL));
}

/* A thread that is no VP posts the wakeup of h to the one VP (permit.c),
 * `how` one of POST_*: PERMIT_SET (posted), PERMIT_STALE, or
 * PERMIT_SEVERAL: the one-VP state is over, wake by RMW (permit_wake,
 * mode 0).  POST_READY is no wakeup: h, held off every queue with its
 * permit untouched (kr__preempt_hold), is made ready (kr__mp_ready_any). */
enum { POST_WAKE = 0, POST_CANCEL = 1, POST_READY = 2 };
int kr__permit_post(kr_mp *h, int how);

/* The posts so far, for the VP to apply, and kr__solo's new value
 * (SOLO_ON, or 0 for good); *n: how many.  The array returned is no
 * longer posted to, and stays the VP's until its next take (permit.c). */
struct kr__post {
	kr_mp *h;
	int how;
};
struct kr__post *kr__permits_take(uint32_t solo, unsigned *n);

#endif
