/*
 * karui L2 — the default scheduler module (scheduling level 1's built-in).
 *
 * Queues.  A ready-queue module (sched.h) is instantiated once for the
 * process (KR_RQ_SHARED) or once per VP.  Each instance sits next to a spin
 * lock in its own cache line; every call into the module is made with that
 * lock held, so modules are sequential code.  mp->queued names the instance
 * a microprocess is in (written under that instance's lock), which lets
 * take/reprio find it.
 *
 *   ready(mp)    push onto the caller's VP's instance (a thread that is no
 *                VP: onto VP instances in turn); then, if some VP is idle,
 *                kr_sched_unpark(1).
 *   next(prev)   push prev (if any) and pop, under one lock acquisition;
 *                when the own instance is empty, steal from the others
 *                (per-VP modules with a steal function).
 *   idle()       announce idleness, look once more, park (on L0 or the
 *                event source) until a wakeup, an I/O completion or the
 *                earliest timer of any VP.
 *
 * The slot.  With kr_rq_ws, each VP's instance also holds one runnable
 * microprocess outside its lock, in `slot`: the oldest of the instance,
 * ahead of its list.  Only the VP that owns the instance fills it, and only
 * when it is empty and the list is too (read without the lock: a foreign
 * push that read misses is concurrent with this one, and is ordered after
 * it).  Anyone takes from it with an exchange: the owner first of all,
 * idle VPs and thieves after the list.  So the common hand-over of one VP,
 * a microprocess waking another and then sleeping, costs a store and an
 * exchange instead of two lock round trips and list updates (a channel
 * round trip: 711 to 629 instructions with the channel's own changes, 53
 * to 47 ns; docs/benchmarks.md).  A yield puts its caller into the slot it
 * has just emptied when the list is empty: two microprocesses yielding to
 * each other never take the lock.  FIFO order holds: whatever goes into
 * the list while the slot is full is younger.  Unlike a slot that every
 * wakeup takes (Go's runnext), a pair that wakes each other cannot keep
 * the rest of the queue waiting.  mp->queued is the instance with bit 0
 * set while mp is in the slot; take() removes it with a CAS.
 *
 * Lost wakeups.  An idle VP increments `nidle` (seq_cst) *before* it looks
 * at the queues for the last time, each look under the instance's lock; a
 * producer reads `nidle` *inside* the critical section of its push.  If the
 * idle VP's look at instance Q came first, its increment happened before
 * its unlock of Q, which happened before the producer's lock of Q: the
 * producer sees nidle > 0 and posts a wakeup.  Otherwise the look comes
 * after the push and finds the work.  A producer that fills a slot stores
 * it with a seq_cst exchange and then reads `nidle` (seq_cst), and the
 * last look reads each slot with seq_cst operations: in their single total
 * order either the look comes after the store and takes the microprocess,
 * or the increment comes before the producer's read, which posts a
 * wakeup.  L0's wakeups are counting, so a wakeup posted before the VP
 * actually sleeps is not lost either.
 *
 * Rejected: a lock-free deque per VP (Chase–Lev): its owner pop needs a
 * store-load fence, which costs what the uncontended spin lock costs, and it
 * cannot hold the priority and removal operations the level-3 interface
 * promises.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched_default.h"

static struct inst *inst_new(const kr_rq_ops *rq)
{
	size_t sz = (sizeof(struct inst) + rq->size + 63) & ~(size_t)63;
	struct inst *i = aligned_alloc(64, sz);
	if (!i)
		return NULL;
	memset(i, 0, sz);
	rq->init(i->q);
	return i;
}

static void inst_free(const kr_rq_ops *rq, struct inst *i)
{
	if (!i)
		return;
	if (rq->fini)
		rq->fini(i->q);
	free(i);
}

static int d_init(kr_sched *s, const kr_rq_ops *rq, unsigned nvp)
{
	struct dsched *d = calloc(1, sizeof *d);
	if (!d)
		return ENOMEM;
	d->rq = rq;
	d->nvp = nvp;
	d->shared = !!(rq->flags & KR_RQ_SHARED);
	if (d->shared && !(d->one = inst_new(rq))) {
		free(d);
		return ENOMEM;
	}
	d->kind = rq == &kr_rq_fifo || rq == &kr_rq_ws ? RQ_LIST_TAIL
		: rq == &kr_rq_lifo ? RQ_LIST_HEAD : RQ_OTHER;
	s->data = d;
	return 0;
}

static void d_fini(kr_sched *s)
{
	struct dsched *d = D(s);
	inst_free(d->rq, d->one);
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		inst_free(d->rq, d->per[i]);
	free(d);
	s->data = NULL;
}

static int d_vp_init(kr_sched *s, kr_vp *vp)
{
	struct dsched *d = D(s);
	struct inst *i = d->one;
	if (!d->shared) {
		if (!(i = inst_new(d->rq)))
			return ENOMEM;
		i->slotted = d->rq == &kr_rq_ws;
		__atomic_store_n(&d->per[vp->id], i, __ATOMIC_RELEASE);
	}
	*kr_sched_vp_data(vp) = i;
	return 0;
}


/* Off a VP: the next VP instance in turn. */
struct inst *kr__d_foreign(struct dsched *d)
{
	if (d->shared)
		return d->one;
	for (;;) {
		unsigned k = __atomic_fetch_add(&d->rr, 1, __ATOMIC_RELAXED) % KR_VP_MAX;
		struct inst *i = __atomic_load_n(&d->per[k], __ATOMIC_ACQUIRE);
		if (i)
			return i;
	}
}




kr_mp *kr__d_steal(struct dsched *d, kr_vp *vp)
{
	if (d->shared || !d->rq->steal)
		return NULL;
	unsigned me = vp->id;
	for (unsigned k = 1; k < KR_VP_MAX; k++) {
		struct inst *i = __atomic_load_n(&d->per[(me + k) % KR_VP_MAX], __ATOMIC_ACQUIRE);
		if (!i)
			continue;
		kr_mp *mp = NULL;
		if (kr__spin_trylock(&i->lock)) {
			if ((mp = d->rq->steal(i->q)))
				__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
			kr__spin_unlock(&i->lock);
		}
		if (mp || (i->slotted && (mp = slot_take(i))))
			return mp;
	}
	return NULL;
}


static kr_mp *d_idle(kr_sched *s, kr_vp *vp)
{
	struct dsched *d = D(s);
	__atomic_fetch_add(&d->nidle, 1, __ATOMIC_SEQ_CST);
	/* The last look must not skip a busy lock, as stealing does. */
	kr_mp *mp = kr__d_next(s, vp, NULL);
	for (unsigned k = 0; !mp && !d->shared && k < KR_VP_MAX; k++) {
		struct inst *i = __atomic_load_n(&d->per[k], __ATOMIC_ACQUIRE);
		if (!i)
			continue;
		kr__spin_lock(&i->lock);
		mp = pop_locked(d, i);
		kr__spin_unlock(&i->lock);
		if (!mp && i->slotted)
			mp = slot_take(i);
	}
	if (!mp) {
		kr_sched_park(kr_sched_idle_deadline());
		mp = kr__d_next(s, vp, NULL);
	}
	__atomic_fetch_sub(&d->nidle, 1, __ATOMIC_RELAXED);
	return mp;
}


static void d_reprio(kr_sched *s, kr_mp *mp, int prio)
{
	struct dsched *d = D(s);
	for (;;) {
		struct inst *i = __atomic_load_n((struct inst **)&mp->queued, __ATOMIC_ACQUIRE);
		if (!i || !d->rq->reprio) {
			__atomic_store_n(&mp->prio, prio, __ATOMIC_RELAXED);
			/* it may have been queued meanwhile: look again */
			if (__atomic_load_n((struct inst **)&mp->queued, __ATOMIC_ACQUIRE) == i)
				return;
			continue;
		}
		kr__spin_lock(&i->lock);
		if (__atomic_load_n(&mp->queued, __ATOMIC_RELAXED) == i) {
			d->rq->reprio(i->q, mp, prio);
			kr__spin_unlock(&i->lock);
			return;
		}
		kr__spin_unlock(&i->lock);
	}
}

const kr_sched_ops kr_sched_default = {
	.name = "default",
	.init = d_init,
	.fini = d_fini,
	.vp_init = d_vp_init,
	.ready = kr__d_ready,
	.next = kr__d_next,
	.idle = d_idle,
	.take = kr__d_take,
	.reprio = d_reprio,
};
