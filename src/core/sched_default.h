/*
 * The default scheduler's state and its hot paths, inline, so that the core
 * (rt.h) calls them directly when the default scheduler is in use instead
 * of through kr_sched_ops (see sched_default.c for the design).  With a
 * built-in list queue (fifo, lifo, ws) the queue operations are inlined
 * too; any other ready-queue module is called through its kr_rq_ops.  With
 * ws, a VP's instance also has a slot ahead of its list (sched_default.c,
 * "The slot"), and a new microprocess goes into the slot ("New
 * microprocesses"); with one VP the slot needs no RMW ("One VP").
 */
#ifndef KARUI_CORE_SCHED_DEFAULT_H
#define KARUI_CORE_SCHED_DEFAULT_H

#include <errno.h>
#include <stdint.h>

#include "list.h"

struct inst {
	_Alignas(64) kr_spin lock;
	int slotted;            /* kr_rq_ws: has the slot below */
	int solo;               /* the one VP's (kr__solo): written by that VP
	                           only, before any other VP starts */
	kr_mp *slot;            /* the next to run, outside the lock */
	unsigned fills;         /* woken and new ones put into the slot
	                           (owner-written, atomic) */
	uint32_t watched;       /* an idle VP looks at the slot again soon */
	uint32_t away;          /* AWAY_*: its VP runs nothing (under lock) */
	unsigned *seen;         /* per VP id: the fill last watched in that
	                           VP's slot (this VP's own use) */
	_Alignas(16) unsigned char q[];
};

enum { RQ_OTHER, RQ_LIST_TAIL, RQ_LIST_HEAD }; /* how push works, for lists */
enum { AWAY_NOT = SEAM_AWAY_NOT, AWAY_BLOCKED = SEAM_AWAY_BLOCKED, AWAY_PARKED = SEAM_AWAY_PARKED }; /* inst.away */

struct dsched {
	const kr_rq_ops *rq;
	int shared;
	int kind;                       /* RQ_*: inline list operations */
	unsigned nvp;
	struct inst *one;               /* KR_RQ_SHARED */
	struct inst *per[KR_VP_MAX];    /* by VP id */
	uint32_t nidle;
	uint32_t waking;                /* a wakeup is under way */
	uint32_t rr;                    /* foreign wakeups: next VP to use */
	uint32_t hi;                    /* VP ids below this have had an instance */
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
	if (kind == RQ_OTHER) {
		/* per-VP instances of a module with reprio: mp->queued is
		 * stored, and a fence made, before the module reads mp's
		 * priority (sched_default.c, d_reprio) */
		if (!d->shared && d->rq->reprio) {
			__atomic_store_n(&mp->queued, i, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		}
		d->rq->push(i->q, kr__handle(mp));
	} else if (kind == RQ_LIST_HEAD) {
		mpl_push_head((struct mplist *)i->q, mp);
	} else {
		mpl_push_tail((struct mplist *)i->q, mp);
	}
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
		mp = kr__rec(d->rq->pop(i->q));
	}
	if (mp)
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	return mp;
}

static inline kr_mp *pop_locked(struct dsched *d, struct inst *i)
{
	return pop_as(d, d->kind, i);
}

/* The slot.  mp->queued holds its instance with bit 0 set while mp is in
 * the slot. */
static inline void *in_slot(struct inst *i) { return (char *)i + 1; }
static inline struct inst *slot_of(void *queued)
{
	return (uintptr_t)queued & 1 ? (struct inst *)((char *)queued - 1) : NULL;
}

/* One VP (i->solo): nobody but the owner fills a slot or takes from it,
 * so each exchange and CAS of a slot below is a load and a store, and a
 * fill wakes no one (sched_default.c, "One VP"). */
static inline __attribute__((always_inline)) kr_mp *slot_xchg(struct inst *i, kr_mp *to)
{
	if (__builtin_expect(i->solo, 1)) {
		kr_mp *mp = __atomic_load_n(&i->slot, __ATOMIC_RELAXED);
		__atomic_store_n(&i->slot, to, __ATOMIC_RELAXED);
		return mp;
	}
	/* (the slot's address computed here, not ahead of the test for the
	 * one VP's path, which addresses the slot from i) */
	__asm__("" : "+r"(i));
	return __atomic_exchange_n(&i->slot, to, __ATOMIC_SEQ_CST);
}

/* Take mp out of i's slot if it is there: 1 if taken. */
static inline __attribute__((always_inline)) int slot_cas(struct inst *i, kr_mp *mp)
{
	if (__builtin_expect(i->solo, 1)) {
		if (__atomic_load_n(&i->slot, __ATOMIC_RELAXED) != mp)
			return 0;
		__atomic_store_n(&i->slot, NULL, __ATOMIC_RELAXED);
		return 1;
	}
	kr_mp *e = mp;
	return __atomic_compare_exchange_n(&i->slot, &e, NULL, 0, __ATOMIC_SEQ_CST,
					   __ATOMIC_RELAXED);
}

/* Take what the slot holds, if anything: the owner VP and idle VPs alike,
 * so an exchange (seq_cst: an idle VP's last look, see sched_default.c).
 * slot_grab is the exchange, for a caller that has seen the slot full. */
static inline kr_mp *slot_grab(struct inst *i)
{
	kr_mp *mp = slot_xchg(i, NULL);
	if (mp)
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	return mp;
}

static inline kr_mp *slot_take(struct inst *i)
{
	return __atomic_load_n(&i->slot, __ATOMIC_SEQ_CST) ? slot_grab(i) : NULL;
}

static inline int list_empty(struct inst *i)
{
	return !__atomic_load_n(&((struct mplist *)i->q)->head, __ATOMIC_RELAXED);
}

/* The owner VP only: 1 if a woken mp can go into the slot, which is empty
 * and has nothing queued behind it (mp is then the oldest runnable of i).
 * The list's head is read without the lock: a foreign push it misses is
 * concurrent with this one and may be ordered after it. */
static inline int slot_free(struct inst *i)
{
	return !__atomic_load_n(&i->slot, __ATOMIC_RELAXED) && list_empty(i);
}

/* The owner VP puts a caller back into its free slot: no new work, no one
 * to wake, so a release store. */
static inline void slot_put(struct inst *i, kr_mp *mp)
{
	__atomic_store_n(&mp->queued, in_slot(i), __ATOMIC_RELAXED);
	__atomic_store_n(&i->slot, mp, __ATOMIC_RELEASE);
}

/* A thief, whose instance is `me`, looks at VP v's slot in i: it takes
 * the slot's microprocess if that is a fill it saw there when it last
 * watched the slot (or no fill at all: a caller put back); else *fresh,
 * and with `note` the fill is recorded (a watch follows). */
static inline kr_mp *slot_look(struct inst *me, unsigned v, struct inst *i, int note, int *fresh)
{
	if (!__atomic_load_n(&i->slot, __ATOMIC_SEQ_CST))
		return NULL;
	unsigned f = __atomic_load_n(&i->fills, __ATOMIC_RELAXED);
	if (me->seen[v] == f)
		return slot_grab(i);
	if (note)
		me->seen[v] = f;
	*fresh = 1;
	return NULL;
}

/* A producer that saw an idle VP (nidle > 0): 1 if it is to post the
 * wakeup, which no other producer has posted and no idle VP has answered
 * yet (sched_default.c, one wakeup at a time). */
static inline __attribute__((always_inline)) int wake_claim(struct dsched *d)
{
	return !__atomic_load_n(&d->waking, __ATOMIC_RELAXED) &&
	       !__atomic_exchange_n(&d->waking, 1, __ATOMIC_SEQ_CST);
}

/* What a VP makes ready in its own instance from inside a poll or wait
 * of its own event source (I/O completions of its ring) it keeps: 1, and
 * no idle VP is woken now (sched_default.c, "Completions stay"); its next
 * scheduling point looks at them (d_kept, sched_default.c).  Per-VP list queues only.
 * Called only where another VP is idle, so the common push pays nothing
 * for it. */
static inline __attribute__((always_inline)) int own_keeps(struct dsched *d)
{
	struct kr_worker *w = kr__w;
	if (!w || !w->own_source || d->shared || d->kind == RQ_OTHER)
		return 0;
	if (!w->kept_at) {
		w->kept_at = KR_KEPT_UNDATED;
		kr__turn_soon(w);
	}
	return 1;
}

/* After a fill of i's slot: wake an idle VP unless one watches it. */
static inline __attribute__((always_inline)) int fill_wakes(struct dsched *d, struct inst *i)
{
	return __atomic_load_n(&d->nidle, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&i->watched, __ATOMIC_SEQ_CST) && !own_keeps(d) && wake_claim(d);
}

/* The owner VP puts mp, woken or new, into its free slot: counted as a
 * fill (thieves leave it alone for a while), and the exchange orders the
 * store before the read of nidle (sched_default.c, lost wakeups).  1: an
 * idle VP is to be woken. */
static inline __attribute__((always_inline)) int slot_fill(struct dsched *d, struct inst *i,
							   kr_mp *mp)
{
	__atomic_store_n(&mp->queued, in_slot(i), __ATOMIC_RELAXED);
	__atomic_store_n(&i->fills, i->fills + 1, __ATOMIC_RELAXED);
	if (__builtin_expect(i->solo, 1)) {
		__atomic_store_n(&i->slot, mp, __ATOMIC_RELAXED);
		return 0;
	}
	(void)__atomic_exchange_n(&i->slot, mp, __ATOMIC_SEQ_CST);
	return fill_wakes(d, i);
}

/* The caller's VP makes prev runnable behind everything in its own i (i
 * locked): into the slot when nothing else is queued, so that the next
 * hand-over needs no lock. */
static inline __attribute__((always_inline)) void requeue_locked(struct dsched *d, int kind,
								 struct inst *i, kr_mp *prev)
{
	if (i->slotted && slot_free(i))
		slot_put(i, prev);
	else
		push_as(d, kind, i, prev);
}

/* next(prev) under i's lock: the oldest runnable (the slot's, else the
 * list's head); prev, if any, stays runnable behind it. */
static inline __attribute__((always_inline)) kr_mp *next_locked(struct dsched *d, int kind,
								struct inst *i, kr_mp *prev)
{
	kr_mp *mp;
	if (!i->slotted) {
		if (prev)
			push_as(d, kind, i, prev);
		return pop_as(d, kind, i);
	}
	if (!(mp = slot_take(i)))
		mp = pop_as(d, kind, i);
	if (!prev)
		return mp;
	if (!mp)
		return prev; /* nothing else to run */
	requeue_locked(d, kind, i, prev);
	return mp;
}

/* The owner puts new mp into its full slot, under i's lock: the one it
 * held, unless a thief has just taken it, goes to the head of the list,
 * still ahead of the rest.  1 if one went to the list. */
static inline __attribute__((always_inline)) int slot_displace(struct inst *i, kr_mp *mp)
{
	__atomic_store_n(&mp->queued, in_slot(i), __ATOMIC_RELAXED);
	__atomic_store_n(&i->fills, i->fills + 1, __ATOMIC_RELAXED);
	kr_mp *o = slot_xchg(i, mp);
	if (!o)
		return 0;
	/* until now o->queued still named the slot: a take() of o waits */
	mpl_push_head((struct mplist *)i->q, o);
	__atomic_store_n(&o->queued, i, __ATOMIC_RELAXED);
	return 1;
}

kr_mp *kr__d_steal(struct dsched *d, kr_vp *vp);
struct inst *kr__d_foreign_locked(struct dsched *d);

/* The fast paths take `mine`, the caller's VP's instance (the core has it
 * at hand in its worker), or NULL off a VP; the ops-table entries below
 * look it up. */
static inline __attribute__((always_inline)) void kr__d_ready_in(kr_sched *s, struct inst *mine,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	struct inst *i = mine;
	if (i)
		kr__spin_lock(&i->lock);
	else
		i = kr__d_foreign_locked(d);
	push_locked(d, i, mp);
	uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
	kr__spin_unlock(&i->lock);
	if (idle && !(mine && own_keeps(d)) && wake_claim(d))
		kr_sched_unpark(1);
}

/* A new microprocess, made on the VP whose instance is `mine`: into its
 * slot, ahead of everything queued (sched_default.c, "New
 * microprocesses"); only the owner fills the slot, so one found empty
 * stays empty until then. */
static inline __attribute__((always_inline)) void kr__d_spawn_in(kr_sched *s, struct inst *mine,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	struct inst *i = mine;
	int wake;
	if (i->slotted && !__atomic_load_n(&i->slot, __ATOMIC_RELAXED)) {
		wake = slot_fill(d, i, mp);
	} else {
		kr__spin_lock(&i->lock);
		int listed = 1;
		if (i->slotted)
			listed = slot_displace(i, mp);
		else
			push_locked(d, i, mp);
		uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
		kr__spin_unlock(&i->lock);
		wake = listed ? idle && wake_claim(d) : !i->solo && fill_wakes(d, i);
	}
	if (wake)
		kr_sched_unpark(1);
}

static inline __attribute__((always_inline)) kr_mp *kr__d_next_in(kr_sched *s, kr_vp *vp,
								  struct inst *i, kr_mp *prev)
{
	struct dsched *d = D(s);
	kr_mp *mp;
	if (i->slotted && !prev && (mp = slot_take(i)))
		return mp;
	kr__spin_lock(&i->lock);
	mp = next_locked(d, d->kind, i, prev);
	kr__spin_unlock(&i->lock);
	return mp ? mp : kr__d_steal(d, vp);
}

/* The fast paths below work on a built-in list queue whose lock is free at
 * once; anything else goes to the general path.  1: *kind is the kind of
 * list, and the lock is held; 0: nothing done. */
static inline __attribute__((always_inline)) int list_trylock(struct dsched *d, struct inst *i,
							      int *kind)
{
	*kind = d->kind;
	return *kind != RQ_OTHER && kr__spin_trylock(&i->lock);
}

/* ready(mp) when it needs no call: the caller's own slot when free, or a
 * built-in list queue whose lock is free at once.  KR_D_READY_IDLE: done,
 * and some VP is idle (the caller calls kr_sched_unpark(1)); KR_D_BUSY:
 * nothing done. */
enum { KR_D_BUSY, KR_D_READY, KR_D_READY_IDLE, KR_D_TAKEN, KR_D_ABSENT };
static inline __attribute__((always_inline)) int kr__d_ready_try(kr_sched *s, struct inst *i,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	int kind;
	if (i->slotted && slot_free(i))
		return slot_fill(d, i, mp) ? KR_D_READY_IDLE : KR_D_READY;
	if (!list_trylock(d, i, &kind))
		return KR_D_BUSY;
	push_as(d, kind, i, mp);
	uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
	kr__spin_unlock(&i->lock);
	return idle && !own_keeps(d) && wake_claim(d) ? KR_D_READY_IDLE : KR_D_READY;
}

/* spawn(mp) when it needs no call, as kr__d_ready_try. */
static inline __attribute__((always_inline)) int kr__d_spawn_try(kr_sched *s, struct inst *i,
								 kr_mp *mp)
{
	struct dsched *d = D(s);
	int kind;
	if (i->slotted && !__atomic_load_n(&i->slot, __ATOMIC_RELAXED))
		return slot_fill(d, i, mp) ? KR_D_READY_IDLE : KR_D_READY;
	if (!list_trylock(d, i, &kind))
		return KR_D_BUSY;
	int listed = 1;
	if (i->slotted)
		listed = slot_displace(i, mp);
	else
		push_as(d, kind, i, mp);
	uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
	kr__spin_unlock(&i->lock);
	return (listed ? idle && wake_claim(d) : !i->solo && fill_wakes(d, i))
		       ? KR_D_READY_IDLE
		       : KR_D_READY;
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
	if (i == in_slot(mine)) {
		/* prev takes mp's place when nothing is queued behind it */
		if ((prev && !list_empty(mine)) || !slot_cas(mine, mp))
			return KR_D_BUSY;
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
		if (prev)
			slot_put(mine, prev);
		return KR_D_TAKEN;
	}
	if (i != mine || !list_trylock(d, i, &kind))
		return KR_D_BUSY;
	if (__atomic_load_n(&mp->queued, __ATOMIC_RELAXED) != i) {
		kr__spin_unlock(&i->lock);
		return KR_D_BUSY;
	}
	mpl_remove((struct mplist *)i->q, mp);
	__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	if (prev)
		requeue_locked(d, kind, i, prev);
	kr__spin_unlock(&i->lock);
	return KR_D_TAKEN;
}

/* next(prev) when it needs no call: the caller's own slot, or a built-in
 * list queue whose lock is free at once (prev NULL: the caller does not
 * stay runnable).  NULL: nothing done or nothing queued, take the general
 * path; never NULL when prev was pushed.  `slotted` is i->slotted, or 1
 * where the caller knows it (kr__d_next_fast). */
static inline __attribute__((always_inline)) kr_mp *next_try_as(kr_sched *s, struct inst *i,
								int slotted, kr_mp *prev)
{
	struct dsched *d = D(s);
	int kind;
	kr_mp *mp;
	/* with prev: swap places with the slot's, if nothing is queued
	 * behind it (the order holds without the lock) */
	if (slotted && __atomic_load_n(&i->slot, __ATOMIC_SEQ_CST) &&
	    (!prev || list_empty(i)) && (mp = slot_grab(i))) {
		if (prev)
			slot_put(i, prev);
		return mp;
	}
	if (!list_trylock(d, i, &kind))
		return NULL;
	mp = next_locked(d, kind, i, prev);
	kr__spin_unlock(&i->lock);
	return mp;
}

static inline __attribute__((always_inline)) kr_mp *kr__d_next_try(kr_sched *s, struct inst *i,
								   kr_mp *prev)
{
	return next_try_as(s, i, i->slotted, prev);
}

/* kr__d_next_try on an instance known to have a slot */
static inline __attribute__((always_inline)) kr_mp *kr__d_next_fast(kr_sched *s, struct inst *i,
								    kr_mp *prev)
{
	return next_try_as(s, i, 1, prev);
}

/* The owner VP, running prev, swaps places with its slot's microprocess
 * in one exchange: prev goes into the slot (a caller put back: no fill),
 * and what the slot held comes out.  The caller has seen the list empty,
 * so that prev goes behind everything queued.  NULL: the slot was empty,
 * and now holds prev. */
static inline __attribute__((always_inline)) kr_mp *slot_swap(struct inst *i, kr_mp *prev)
{
	__atomic_store_n(&prev->queued, in_slot(i), __ATOMIC_RELAXED);
	kr_mp *mp = slot_xchg(i, prev);
	if (mp)
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
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
		struct inst *si = slot_of(i);
		if (si) {
			/* failing: whoever took it clears mp->queued next, or
			 * its owner is about to put it in */
			if (!slot_cas(si, mp)) {
				kr_cpu_relax();
				continue;
			}
			__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
			if (prev) {
				kr__spin_lock(&mine->lock);
				requeue_locked(d, d->kind, mine, prev);
				kr__spin_unlock(&mine->lock);
			}
			return 0;
		}
		kr__spin_lock(&i->lock);
		if (__atomic_load_n(&mp->queued, __ATOMIC_RELAXED) != i) {
			kr__spin_unlock(&i->lock);
			continue;
		}
		if (d->kind != RQ_OTHER)
			mpl_remove((struct mplist *)i->q, mp);
		else
			d->rq->remove(i->q, kr__handle(mp));
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
		struct inst *pi = prev ? mine : NULL;
		if (pi == i)
			push_locked(d, i, prev);
		kr__spin_unlock(&i->lock);
		if (pi && pi != i) {
			kr__spin_lock(&pi->lock);
			push_locked(d, pi, prev);
			kr__spin_unlock(&pi->lock);
		}
		return 0;
	}
}

#endif
