/*
 * karui L2 — blocking calls (kr_blocking_begin / _end) and the spare VPs.
 *
 * Blocking sections (kr_blocking_begin / _end) belong to the
 * microprocess: one that switches away inside a section hands its VP back
 * to the others (the VP counts as running again) and takes the section to
 * the VP it resumes on (kr__sw_blocked).
 *
 * Blocking calls.  karui keeps `active` (workers neither inside a blocking
 * call nor parked) at the target, the configured VP count or what a
 * processor allocator sets (alloc.h): a microprocess
 * that enters a blocking call takes its VP out of `active`, and if that
 * leaves too few, a parked spare VP is resumed or a new one started; it
 * runs the other microprocesses.  When the call returns, the VP counts
 * again, and a spare that goes idle while there are too many parks
 * (kr__vp_retire; under an allocator any VP does).  Spares stay until
 * kr_fini.  Both tell the event
 * source first (its `leave`), which moves requests only this VP would
 * see complete.
 *
 * The work of a VP that is away.  What a VP inside a blocking call had
 * queued, and the timers armed in its heap, would otherwise wait for an
 * idle VP, and a spare kept busy by others is never idle.  So while any VP
 * is blocked, every running VP, at its timers' turn (each 8th scheduling
 * point, rt.h), fires the blocked VPs' due timers and takes their queued
 * microprocesses, the slot's first, to the tail of its own queue
 * (kr__away_take): the queue moves with the work, as Go's run queue moves
 * with its P when a thread blocks in a system call.  A spare that parks
 * hands what is queued on it to the running VPs, and they fire its
 * timers, until it has none left; threads that are no VP, which make
 * microprocesses ready on every VP's queue in turn, pass over the queues
 * of VPs that are away (sched_default.c, `away`).  G.naway counts the
 * blocked VPs and the parked spares with timers, so that a program with
 * neither pays nothing for this.  Shared queues are shared already; other
 * schedulers see the VP's status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "rt.h"

/* This VP stops looking at the event sources for a while. */
static void poller_leave(void)
{
	const struct kr__sources *s = __atomic_load_n(&G.src, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; s && i < s->n; i++)
		if (s->p[i].leave)
			s->p[i].leave(s->p[i].arg);
}

/* The parked VPs wait on G.park_seq, which every change of what they wait
 * for moves on (their wait starts from the value read under spare_lock,
 * so none is missed); a futex word rather than a condition variable, so
 * that kr__vp_target can move the target from a signal handler. */
static void park_wake(int n)
{
	__atomic_fetch_add(&G.park_seq, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &G.park_seq, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static void spare_run(void)
{
	pthread_mutex_lock(&G.spare_lock);
	__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
	if (G.spare_parked) {
		G.spare_parked--;
		G.spare_tokens++;
		park_wake(1);
	} else if (G.nspares < KR_VP_MAX &&
		   kr_vp_allocate(&G.spares[G.nspares], 1, kr__vp_main, &G.spares) == 0) {
		G.nspares++;
	} else {
		/* no thread: the running VPs take the blocked VP's work */
		__atomic_fetch_sub(&G.active, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&G.spare_lock);
}

int kr__vp_retire(struct kr_worker *w, uint64_t deadline)
{
	uint32_t a = __atomic_load_n(&G.active, __ATOMIC_RELAXED);
	while (a > __atomic_load_n(&G.target, __ATOMIC_RELAXED))
		if (__atomic_compare_exchange_n(&G.active, &a, a - 1, 1, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			break;
	if (a <= __atomic_load_n(&G.target, __ATOMIC_RELAXED))
		return 0;
	int r = 1;
	poller_leave();
	/* A shared event source needs a VP waiting in it whenever all are
	 * idle (and `due` sources one that asks them: runtime.c, park_many).  This one may have been that VP while the others went to
	 * sleep on L0 (kr_sched_park_until), and it is not coming back: wake one
	 * of them to take its place. */
	const struct kr__sources *s = __atomic_load_n(&G.src, __ATOMIC_ACQUIRE);
	if (s && (s->shared || s->sleeper < 0))
		kr_vp_wakeup(1);
	seam_away(w, SEAM_AWAY_PARKED);
	/* Its timers are the other VPs' to fire (none are armed here until
	 * it runs again): the running ones' at their timers' turn (see the
	 * top), and the idle ones', which may have gone to sleep before they
	 * were armed (a microprocess that slept inside a blocking section
	 * made this VP count as running, and so this spare one too many):
	 * wake one, to sleep again with them in its deadline. */
	if (__atomic_load_n(&w->timers.next, __ATOMIC_ACQUIRE) != KR_FOREVER) {
		__atomic_store_n(&w->away_timers, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&G.naway, 1, __ATOMIC_RELAXED);
		kr_sched_unpark(1);
	}
	kr_vp_publish(KR_VP_SUSPENDED);
	pthread_mutex_lock(&G.spare_lock);
	G.spare_parked++;
	for (;;) {
		if (G.spare_tokens) {
			G.spare_tokens--; /* spare_run counted us active again */
			break;
		}
		a = __atomic_load_n(&G.active, __ATOMIC_RELAXED);
		if (__atomic_load_n(&G.stopping, __ATOMIC_ACQUIRE) ||
		    a < __atomic_load_n(&G.target, __ATOMIC_RELAXED)) {
			/* the target rose (kr__vp_target), or karui stops */
			__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
			G.spare_parked--;
			break;
		}
		uint64_t now = deadline == KR_FOREVER ? 0 : kr_now();
		if (deadline != KR_FOREVER && now >= deadline) {
			/* the caller's deadline: it runs, above the target */
			__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
			G.spare_parked--;
			r = 2;
			break;
		}
		uint32_t seq = __atomic_load_n(&G.park_seq, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&G.spare_lock);
		struct timespec ts, *t = NULL;
		if (deadline != KR_FOREVER) {
			ts.tv_sec = (time_t)((deadline - now) / 1000000000u);
			ts.tv_nsec = (long)((deadline - now) % 1000000000u);
			t = &ts;
		}
		syscall(SYS_futex, &G.park_seq, FUTEX_WAIT_PRIVATE, seq, t, NULL, 0);
		pthread_mutex_lock(&G.spare_lock);
	}
	pthread_mutex_unlock(&G.spare_lock);
	if (__atomic_exchange_n(&w->away_timers, 0, __ATOMIC_RELAXED))
		__atomic_fetch_sub(&G.naway, 1, __ATOMIC_RELAXED);
	seam_away(w, SEAM_AWAY_NOT);
	kr_vp_publish(KR_VP_RUNNING);
	return r;
}

/* Atomics and a futex wake only: a signal handler may call it (alloc.h).
 * The parked VPs count themselves active again as they see the room. */
void kr__vp_target(unsigned n)
{
	unsigned old = __atomic_exchange_n(&G.target, n, __ATOMIC_RELAXED);
	if (n > old)
		park_wake((int)(n - old));
}

/* karui stops: the parked VPs see G.stopping. */
void kr__spares_kick(void)
{
	park_wake(INT32_MAX);
}

/* The VP of the running microprocess goes into a blocking section
 * (kr_blocking_begin, or a microprocess that switched away inside one
 * resuming here: kr__sw_blocked), and out of it (kr_blocking_end, the
 * switch away, an exit inside one: mp_end). */
static void blocking_begin(struct kr_worker *w)
{
	if (kr__solo_on()) /* a spare may start: several VPs from now on */
		kr__permits_several();
	w->blocked = 1;
	w->fast = NULL;
	poller_leave();
	seam_away(w, SEAM_AWAY_BLOCKED);
	kr_vp_publish(KR_VP_BLOCKED);
	__atomic_fetch_add(&G.naway, 1, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&G.active, 1, __ATOMIC_RELAXED) <
	    __atomic_load_n(&G.target, __ATOMIC_RELAXED))
		spare_run();
}

void kr__blocking_end(struct kr_worker *w)
{
	w->blocked = 0;
	w->fast = seam_fast(w);
	__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&G.naway, 1, __ATOMIC_RELAXED);
	seam_away(w, SEAM_AWAY_NOT);
	kr_vp_publish(KR_VP_RUNNING);
}

/* A running VP, at its timers' turn, takes over the work of the VPs that
 * are away: blocked ones, and parked spares with timers (see the top).
 * A parked spare's heap, once empty, stays so until it runs again: the
 * one that finds it so (or the spare, resuming) stops counting it. */
void kr__away_take(struct kr_worker *w)
{
	if (w->blocked) /* a yield inside a section: not a running VP's turn */
		return;
	unsigned hi = __atomic_load_n(&kr__workers_hi, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < hi; i++) {
		struct kr_worker *o = __atomic_load_n(&kr__workers[i], __ATOMIC_ACQUIRE);
		if (!o || o == w)
			continue;
		int st = kr_vp_status(o->vp);
		if (st == KR_VP_BLOCKED) {
			kr__timers_run_of(o);
			seam_adopt(w, o);
		} else if (st == KR_VP_SUSPENDED &&
			   __atomic_load_n(&o->away_timers, __ATOMIC_RELAXED)) {
			kr__timers_run_of(o);
			if (__atomic_load_n(&o->timers.next, __ATOMIC_ACQUIRE) == KR_FOREVER &&
			    __atomic_exchange_n(&o->away_timers, 0, __ATOMIC_RELAXED))
				__atomic_fetch_sub(&G.naway, 1, __ATOMIC_RELAXED);
		}
	}
}

int kr_blocking_begin(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (w->blocked)
		return EBUSY;
	blocking_begin(w);
	return 0;
}

int kr_blocking_end(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (!w->blocked)
		return EINVAL;
	kr__blocking_end(w);
	return 0;
}

/* A switch away inside a blocking section: the VP counts as running while
 * self waits, and the section goes on where self resumes. */
__attribute__((noinline)) void kr__sw_blocked(struct kr_worker *w, kr_mp *self, kr_mp *next)
{
	kr__blocking_end(w);
	sw_plain(w, self, next);
	blocking_begin(W());
}

