/*
 * karui L2 — the scheduler seam: all that the core (life.c, park.c,
 * blocking.c, runtime.c, timer.c) asks of the scheduler in use.  Those
 * files call the scheduler through this header only, and name no
 * scheduler module.
 *
 * The operations, for worker w, the caller's VP:
 *   vp_init(w)         w's VP starts (on that VP)
 *   ready(w, mp)       mp became runnable (w NULL: a thread that is no VP)
 *   spawn(w, mp)       a new microprocess, made on w
 *   next(w, prev)      what w runs next; prev, if not NULL, is the caller,
 *                      which stays runnable; NULL: nothing
 *   take(w, mp, prev)  mp, queued, out for a direct switch to it; prev
 *                      (if not NULL) stays runnable: 0, or ESRCH if mp is
 *                      in no queue
 *   idle(w)            w found nothing: wait until work may have come
 *   away(w, how)       w's VP stops running microprocesses for a while
 *                      (SEAM_AWAY_BLOCKED: a blocking section;
 *                      SEAM_AWAY_PARKED: a spare that parks) or runs them
 *                      again (SEAM_AWAY_NOT): the others serve its queue
 *                      meanwhile
 *   adopt(w, o)        w takes over what o, a VP that is away, has queued
 *   keep(w)            at w's turn, while w keeps what its own event
 *                      source made ready: 1 if it still does
 *   reprio(mp, prio)   mp's priority changed (kr_mp_prio says so already)
 *   io_done(w, mp)     the I/O mp waits for completed (NULL: nobody is
 *                      told; the default scheduler's)
 *   several(w)         the one-VP state ends (kr__permits_several)
 * Each is one call through the table that kr_init settles once (G.seam):
 * the default scheduler's (sched_default.c), or the one that serves a
 * kr_sched_ops module of the application's (seam.c).
 *
 * Fast forms.  The default scheduler's common cases need no call: they
 * are inline below, gated by two words of the worker: w->dq, its
 * instance under the default scheduler (NULL under any other), set once
 * by its vp_init, and w->fast, the same while the fast paths apply (a
 * slotted instance, no blocking section; seam_fast).  Each fast form
 * either does the whole operation or nothing (SEAM_BUSY, NULL): the
 * caller then takes the general form.
 */
#ifndef KARUI_CORE_SEAM_H
#define KARUI_CORE_SEAM_H

#include "sched_default.h"

#define SEAM (G.seam)

static inline int seam_vp_init(struct kr_worker *w) { return SEAM->vp_init(SCHED, w); }
static inline void seam_ready(struct kr_worker *w, kr_mp *mp) { SEAM->ready(SCHED, w, mp); }
static inline void seam_spawn(struct kr_worker *w, kr_mp *mp) { SEAM->spawn(SCHED, w, mp); }
static inline kr_mp *seam_next(struct kr_worker *w, kr_mp *prev)
{
	return SEAM->next(SCHED, w, prev);
}
static inline int seam_take(struct kr_worker *w, kr_mp *mp, kr_mp *prev)
{
	return SEAM->take(SCHED, w, mp, prev);
}
static inline kr_mp *seam_idle(struct kr_worker *w) { return SEAM->idle(SCHED, w); }
static inline void seam_away(struct kr_worker *w, uint32_t how) { SEAM->away(SCHED, w, how); }
static inline void seam_adopt(struct kr_worker *w, struct kr_worker *o)
{
	SEAM->adopt(SCHED, w, o);
}
static inline int seam_keep(struct kr_worker *w) { return SEAM->keep(SCHED, w); }
static inline void seam_reprio(kr_mp *mp, int prio) { SEAM->reprio(SCHED, mp, prio); }
static inline void seam_io_done(struct kr_worker *w, kr_mp *mp)
{
	if (SEAM->io_done)
		SEAM->io_done(SCHED, w, mp);
}
static inline void seam_several(struct kr_worker *w) { SEAM->several(SCHED, w); }

/* ---------------- fast forms ---------------- */

/* What the fast forms return: nothing done (take the general form);
 * done; done, and an idle VP is to be woken (kr_sched_unpark(1)); mp
 * taken; mp in no queue. */
enum {
	SEAM_BUSY = KR_D_BUSY,
	SEAM_READY = KR_D_READY,
	SEAM_READY_IDLE = KR_D_READY_IDLE,
	SEAM_TAKEN = KR_D_TAKEN,
	SEAM_ABSENT = KR_D_ABSENT,
};

/* w->fast for the worker's state now: set when the worker starts and
 * when a blocking section begins or ends (blocking.c). */
static inline struct inst *seam_fast(struct kr_worker *w)
{
	struct inst *i = w->dq;
	return i && !w->blocked && i->slotted ? i : NULL;
}

/* ready(w, mp); w may be NULL. */
static inline __attribute__((always_inline)) int seam_ready_try(struct kr_worker *w, kr_mp *mp)
{
	struct inst *i;
	if (w && (i = w->fast) && slot_free(i))
		return slot_fill(D(SCHED), i, mp) ? SEAM_READY_IDLE : SEAM_READY;
	if (!w || !w->dq)
		return SEAM_BUSY;
	return kr__d_ready_try(SCHED, w->dq, mp);
}

/* ready(w, self) for a direct switch, whose caller stays runnable
 * behind the one it switches to. */
static inline __attribute__((always_inline)) int seam_requeue_try(struct kr_worker *w,
								  kr_mp *self)
{
	return w->dq ? kr__d_ready_try(SCHED, w->dq, self) : SEAM_BUSY;
}

static inline __attribute__((always_inline)) int seam_spawn_try(struct kr_worker *w, kr_mp *mp)
{
	return w->dq ? kr__d_spawn_try(SCHED, w->dq, mp) : SEAM_BUSY;
}

/* take(w, mp, prev): SEAM_TAKEN, SEAM_ABSENT or SEAM_BUSY. */
static inline __attribute__((always_inline)) int seam_take_try(struct kr_worker *w, kr_mp *mp,
							       kr_mp *prev)
{
	return w->dq ? kr__d_take_try(SCHED, w->dq, mp, prev) : SEAM_BUSY;
}

/* next(w, prev) outside a blocking section; NULL: nothing done or
 * nothing queued (never when prev was requeued). */
static inline __attribute__((always_inline)) kr_mp *seam_next_try(struct kr_worker *w,
								  kr_mp *prev)
{
	return w->dq && !w->blocked ? kr__d_next_try(SCHED, w->dq, prev) : NULL;
}

/* next(w, NULL) for a caller that does not stay runnable. */
static inline __attribute__((always_inline)) kr_mp *seam_next_fast(struct kr_worker *w)
{
	struct inst *i = w->fast;
	return i ? kr__d_next_fast(SCHED, i, NULL) : NULL;
}

/* A yield's turn: self, the caller, goes behind what w has queued, and
 * what runs next comes out.  SEAM_TAKEN: *next is it; SEAM_ABSENT:
 * nothing else was queued, and self is queued now (seam_turn_back takes
 * it back); SEAM_BUSY: nothing done. */
static inline __attribute__((always_inline)) int seam_turn(struct kr_worker *w, kr_mp *self,
							   kr_mp **next)
{
	struct inst *i = w->fast;
	if (!i || !list_empty(i))
		return SEAM_BUSY;
	return (*next = slot_swap(i, self)) ? SEAM_TAKEN : SEAM_ABSENT;
}

/* After SEAM_ABSENT: 1 if self was still queued, and is not now; 0 if
 * another VP took it meanwhile. */
static inline int seam_turn_back(struct kr_worker *w, kr_mp *self)
{
	return slot_grab(w->fast) == self;
}

#endif
