/*
 * The default scheduler's state and its hot paths, inline, so that the core
 * (mp.c) calls them directly when the default scheduler is in use instead
 * of through kr_sched_ops (see sched_default.c for the design).  With a
 * built-in list queue (fifo, lifo, ws) the queue operations are inlined
 * too; any other ready-queue module is called through its kr_rq_ops.
 */
#ifndef KARUI_CORE_SCHED_DEFAULT_H
#define KARUI_CORE_SCHED_DEFAULT_H

#include <errno.h>
#include <stdint.h>

#include "list.h"

struct inst {
	_Alignas(64) kr_spin lock;
	_Alignas(16) unsigned char q[];
};

enum { RQ_OTHER, RQ_LIST_TAIL, RQ_LIST_HEAD }; /* how push works, for lists */

struct dsched {
	const kr_rq_ops *rq;
	int shared;
	int kind;                       /* RQ_*: inline list operations */
	unsigned nvp;
	struct inst *one;               /* KR_RQ_SHARED */
	struct inst *per[KR_VP_MAX];    /* by VP id */
	uint32_t nidle;
	uint32_t rr;                    /* foreign wakeups: next VP to use */
};

static inline struct dsched *D(kr_sched *s) { return s->data; }

/* The instance vp pops from: kept in the VP's scheduler word. */
static inline struct inst *own(struct dsched *d, kr_vp *vp)
{
	(void)d;
	return ((struct kr_worker *)vp->upper)->sched_vp;
}

/* `kind` is d->kind, passed by callers that read it before an atomic, so
 * that the compiler can drop the branches it rules out. */
static inline __attribute__((always_inline)) void push_as(struct dsched *d, int kind,
							  struct inst *i, kr_mp *mp)
{
	if (kind == RQ_LIST_TAIL)
		mpl_push_tail((struct mplist *)i->q, mp);
	else if (kind == RQ_LIST_HEAD)
		mpl_push_head((struct mplist *)i->q, mp);
	else
		d->rq->push(i->q, mp);
	/* atomic: take and reprio read it without the lock */
	__atomic_store_n(&mp->queued, i, __ATOMIC_RELAXED);
}

static inline void push_locked(struct dsched *d, struct inst *i, kr_mp *mp)
{
	push_as(d, d->kind, i, mp);
}

static inline __attribute__((always_inline)) kr_mp *pop_as(struct dsched *d, int kind,
							   struct inst *i)
{
	kr_mp *mp;
	if (kind != RQ_OTHER) {
		struct mplist *l = (struct mplist *)i->q;
		mp = mpl_pop_head(l);
		/* the next one to run: its record and the frame just below it
		 * (never a prefetch of NULL: that costs a page walk) */
		if (l->head) {
			__builtin_prefetch(l->head, 1);
			__builtin_prefetch((char *)l->head - 64);
		}
	} else {
		mp = d->rq->pop(i->q);
	}
	if (mp)
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	return mp;
}

static inline kr_mp *pop_locked(struct dsched *d, struct inst *i)
{
	return pop_as(d, d->kind, i);
}

kr_mp *kr__d_steal(struct dsched *d, kr_vp *vp);
struct inst *kr__d_foreign(struct dsched *d);

/* The fast paths take `mine`, the caller's VP's instance (the core has it
 * at hand in its worker), or NULL off a VP; the ops-table entries below
 * look it up. */
static inline __attribute__((always_inline)) void kr__d_ready_in(kr_sched *s, struct inst *mine,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	struct inst *i = mine ? mine : kr__d_foreign(d);
	kr_spin_lock(&i->lock);
	push_locked(d, i, mp);
	uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
	kr_spin_unlock(&i->lock);
	if (idle)
		kr_sched_unpark(1);
}

static inline __attribute__((always_inline)) kr_mp *kr__d_next_in(kr_sched *s, kr_vp *vp,
								  struct inst *i, kr_mp *prev)
{
	struct dsched *d = D(s);
	kr_spin_lock(&i->lock);
	if (prev)
		push_locked(d, i, prev);
	kr_mp *mp = pop_locked(d, i);
	kr_spin_unlock(&i->lock);
	return mp ? mp : kr__d_steal(d, vp);
}

/* The fast paths below work on a built-in list queue whose lock is free at
 * once; anything else goes to the general path.  1: *kind is the kind of
 * list, and the lock is held; 0: nothing done. */
static inline __attribute__((always_inline)) int list_trylock(struct dsched *d, struct inst *i,
							      int *kind)
{
	*kind = d->kind;
	return (*kind == RQ_LIST_TAIL || *kind == RQ_LIST_HEAD) && kr_spin_trylock(&i->lock);
}

/* ready(mp) when it needs no call: a built-in list queue whose lock is free
 * at once.  KR_D_READY_IDLE: done, and some VP is idle (the caller calls
 * kr_sched_unpark(1)); KR_D_BUSY: nothing done. */
enum { KR_D_BUSY, KR_D_READY, KR_D_READY_IDLE, KR_D_TAKEN, KR_D_ABSENT };
static inline __attribute__((always_inline)) int kr__d_ready_try(kr_sched *s, struct inst *i,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	int kind;
	if (!list_trylock(d, i, &kind))
		return KR_D_BUSY;
	push_as(d, kind, i, mp);
	uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
	kr_spin_unlock(&i->lock);
	return idle ? KR_D_READY_IDLE : KR_D_READY;
}

/* take(mp, prev) when it needs no call: mp queued in the caller's own
 * instance `mine` of a built-in list queue, whose lock is free at once.
 * KR_D_TAKEN: done; KR_D_ABSENT: mp is in no queue; KR_D_BUSY: nothing
 * done, take the general path. */
static inline __attribute__((always_inline)) int kr__d_take_try(kr_sched *s, struct inst *mine,
								kr_mp *mp, kr_mp *prev)
{
	struct dsched *d = D(s);
	struct inst *i = __atomic_load_n((struct inst **)&mp->queued, __ATOMIC_ACQUIRE);
	if (!i)
		return KR_D_ABSENT;
	int kind;
	if (i != mine || !list_trylock(d, i, &kind))
		return KR_D_BUSY;
	if (mp->queued != i) {
		kr_spin_unlock(&i->lock);
		return KR_D_BUSY;
	}
	mpl_remove((struct mplist *)i->q, mp);
	__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	if (prev)
		push_as(d, kind, i, prev);
	kr_spin_unlock(&i->lock);
	return KR_D_TAKEN;
}

/* next(prev) when it needs no call: a built-in list queue whose lock is
 * free at once (prev NULL: the caller does not stay runnable).  NULL:
 * nothing done or nothing queued, take the general path; never NULL when
 * prev was pushed. */
static inline __attribute__((always_inline)) kr_mp *kr__d_next_try(kr_sched *s, struct inst *i,
								   kr_mp *prev)
{
	struct dsched *d = D(s);
	int kind;
	if (!list_trylock(d, i, &kind))
		return NULL;
	if (prev)
		push_as(d, kind, i, prev);
	kr_mp *mp = pop_as(d, kind, i);
	kr_spin_unlock(&i->lock);
	return mp;
}

static inline __attribute__((always_inline)) int kr__d_take_in(kr_sched *s, struct inst *mine,
								kr_mp *mp, kr_mp *prev)
{
	struct dsched *d = D(s);
	if (d->kind == RQ_OTHER && !d->rq->remove)
		return ESRCH;
	for (;;) {
		struct inst *i = __atomic_load_n((struct inst **)&mp->queued, __ATOMIC_ACQUIRE);
		if (!i)
			return ESRCH;
		kr_spin_lock(&i->lock);
		if (mp->queued != i) {
			kr_spin_unlock(&i->lock);
			continue;
		}
		if (d->kind != RQ_OTHER)
			mpl_remove((struct mplist *)i->q, mp);
		else
			d->rq->remove(i->q, mp);
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
		struct inst *pi = prev ? mine : NULL;
		if (pi == i)
			push_locked(d, i, prev);
		kr_spin_unlock(&i->lock);
		if (pi && pi != i) {
			kr_spin_lock(&pi->lock);
			push_locked(d, pi, prev);
			kr_spin_unlock(&pi->lock);
		}
		return 0;
	}
}

static inline void kr__d_ready(kr_sched *s, kr_vp *vp, kr_mp *mp)
{
	kr__d_ready_in(s, vp ? own(D(s), vp) : NULL, mp);
}

static inline kr_mp *kr__d_next(kr_sched *s, kr_vp *vp, kr_mp *prev)
{
	return kr__d_next_in(s, vp, own(D(s), vp), prev);
}

static inline int kr__d_take(kr_sched *s, kr_vp *vp, kr_mp *mp, kr_mp *prev)
{
	return kr__d_take_in(s, own(D(s), vp), mp, prev);
}

#endif
