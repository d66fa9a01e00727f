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
 *                VP: onto VP instances in turn, passing over those of VPs
 *                that are away, see d_away); then, if some VP is idle,
 *                kr_sched_unpark(1), but for what a VP makes ready in a
 *                poll or wait of its own event source (see "Completions
 *                stay").  A new microprocess goes first (see "New
 *                microprocesses").
 *   next(prev)   push prev (if any) and pop, under one lock acquisition;
 *                when the own instance is empty, steal from the others
 *                (per-VP modules with a steal function).
 *   idle()       announce idleness, look once more, park (on L0 or the
 *                event source) until a wakeup, an I/O completion, the
 *                earliest timer of any VP, or the end of a watch.
 *
 * The slot.  With kr_rq_ws, each VP's instance also holds one runnable
 * microprocess outside its lock, in `slot`: the next one the VP runs,
 * ahead of its list.  Only the VP that owns the instance fills it; anyone
 * takes from it with an exchange: the owner first of all, thieves after
 * the list.  So the common hand-over of one VP, a microprocess waking
 * another and then sleeping, costs a store and an exchange instead of two
 * lock round trips and list updates.  A woken microprocess goes into the
 * slot only when the slot and the list are both empty (the list's head is
 * read without the lock: a foreign push that read misses is concurrent
 * with this one, and is ordered after it), else to the list's tail, so
 * woken ones run in the order they were woken.  A yield puts its caller
 * into the slot it has just emptied when the list is empty: two
 * microprocesses yielding to each other never take the lock.  Unlike a
 * slot that every wakeup takes (Go's runnext), a pair that wakes each
 * other cannot keep the rest of the queue waiting.  mp->queued is the
 * instance with bit 0 set while mp is in the slot; take() removes it with
 * a CAS.
 *
 * New microprocesses.  kr_mp_create puts the new one into its VP's slot;
 * the one the slot held, if any, goes to the head of the list.  So a new
 * microprocess runs at its creator's next scheduling point, and those
 * created before it follow, newest first, ahead of everything else
 * queued.  A spawn tree then runs depth first and keeps about (depth x
 * fan-out) microprocesses alive per VP instead of all of them (figures:
 * docs/notes/2026-11-27-figures-from-source.md), and a thief, which takes from the
 * list's tail, takes the one its VP would run last: in a spawn tree the
 * oldest, the largest subtree; among woken ones the latest.  (Go puts a
 * new goroutine into runnext too, but the one it displaces at the tail of
 * a FIFO: on one P that still keeps most of such a tree alive.)
 *
 * Leaving slots alone.  A microprocess that a VP has just woken or created
 * into its slot usually runs there within a microsecond, when the waker
 * blocks; a thief that takes it moves it, and the monitor or channel it
 * works on, to another cache, and on a busy monitor every hand-over then
 * crosses VPs, which costs more time and CPU than one VP does (figures:
 * docs/notes/2026-11-27-figures-from-source.md).  So the
 * owner counts such fills (`fills`), and a thief takes from a slot only a
 * fill it has seen there before it last parked to watch that slot: one
 * that has waited a whole watch.  An idle VP that finds nothing else to run but a slot's fresh
 * fill marks that slot `watched` and parks for at most SLOT_WATCH_NS, then
 * looks again.  A fill into a watched slot wakes no one, so the owner of a
 * busy slot does not pay for a wakeup on every hand-over; an idle VP that
 * saw every slot empty sleeps until woken, and a fill into an unwatched
 * slot wakes it.  A VP that stops watching with the slot still full wakes
 * another idle VP, if there is one, to take over.  So a microprocess left
 * in a slot by a VP that does not reach a scheduling point is taken by an
 * idle VP within about two watches (docs/limits.md).  A caller put back
 * into the slot by a yield or a switch_to is no fill: thieves take it.
 *
 * One VP.  While karui has a single VP and has started no spare
 * (kr__solo, permit.h), no thief or idle VP exists to take from a slot, and
 * threads that are no VP make microprocesses ready only through the lists
 * (kr__d_foreign), under their locks.  So the owner fills, takes and
 * swaps its slot with relaxed loads and stores instead of exchanges and
 * CASes, and a fill reads no nidle: nobody is idle.  The instance's `solo`
 * says so; the VP clears it (kr__permits_several) before the first spare starts,
 * which orders the VP's stores before the spare's first look at the slot.
 *
 * One wakeup at a time.  A producer that sees an idle VP posts a wakeup
 * only if no other is under way (`waking`, cleared by the VP that comes
 * out of its park, before it looks at the queues): a burst of pushes
 * while an idle VP is waking up costs one wakeup, not one each.  The VP
 * that cleared it looks at every queue before it parks again; if it
 * leaves with work instead, it passes the wakeup on to another idle VP,
 * as Go's spinning threads do.
 *
 * Completions stay.  What a VP's own event source makes ready (the I/O
 * completions of its ring, which only that VP reaps: at its poll, every
 * 8th scheduling point, or in its idle wait) that VP keeps: it wakes no
 * idle VP then.  It looks again at each of its next scheduling points
 * (d_kept, an early turn of kr__timers_run): with its queue empty
 * they have all run; with work still queued a watch (SLOT_WATCH_NS) after
 * that poll, it wakes an idle VP, one at a time as above.  A poll mostly
 * finds a few cheap completions, which the VP runs within microseconds:
 * an idle VP woken for them at once took longer to wake up than that,
 * found them gone in most cases and went back to sleep, two context
 * switches and a futex call for nothing.  Completions that each take long are shared after one
 * of them has run.  Idle VPs still steal kept ones whenever they look on
 * their own (woken by their own ring, a timer or another wakeup).  The
 * price: kept completions wait while the VP runs a microprocess that
 * makes no scheduling point, as those still in its ring do
 * (docs/limits.md).  Per-VP list queues only: with a shared queue or
 * another module, readiness wakes an idle VP at once.
 *
 * Rejected: a lock-free deque per VP (Chase–Lev): its owner pop needs a
 * store-load fence, which costs what the uncontended spin lock costs, and it
 * cannot hold the priority and removal operations the level-3 interface
 * promises.  Stealing from the list's head: in a spawn tree thieves took
 * the smallest subtrees, one after another.  A watch measured with the
 * clock: the park already spaces two looks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched_default.h"

/* How long an idle VP watches a slot before it looks again: a microprocess
 * left in a slot waits at most about twice this for an idle VP. */
#define SLOT_WATCH_NS 100000u

/* Each VP's instance carries the fill counts it has seen in the other
 * VPs' slots (`seen`), after the module's instance. */
static struct inst *inst_new(const kr_rq_ops *rq, int per_vp)
{
	size_t at = (sizeof(struct inst) + rq->size + 63) & ~(size_t)63;
	size_t sz = at + (per_vp ? KR_VP_MAX * sizeof(unsigned) : 0);
	struct inst *i = aligned_alloc(64, (sz + 63) & ~(size_t)63);
	if (!i)
		return NULL;
	memset(i, 0, sz);
	if (per_vp)
		i->seen = (unsigned *)((char *)i + at);
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
	if (d->shared && !(d->one = inst_new(rq, 0))) {
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
		if (!(i = inst_new(d->rq, 1)))
			return ENOMEM;
		i->slotted = d->rq == &kr_rq_ws;
		i->solo = kr__solo_on();
		__atomic_store_n(&d->per[vp->id], i, __ATOMIC_RELEASE);
		uint32_t hi = __atomic_load_n(&d->hi, __ATOMIC_RELAXED);
		while (hi <= vp->id && !__atomic_compare_exchange_n(&d->hi, &hi, vp->id + 1, 1,
								    __ATOMIC_RELEASE,
								    __ATOMIC_RELAXED))
			;
	}
	*kr_sched_vp_data(vp) = i;
	return 0;
}


/* Off a VP: the next VP instance in turn, locked, passing over those of
 * VPs that are away (the check is made under the lock, under which the VP
 * sets it: a parking spare hands on what it finds queued, see d_away).
 * When all are away, a blocked VP's: running VPs take from it, and so
 * does the VP when its call returns. */
struct inst *kr__d_foreign_locked(struct dsched *d)
{
	if (d->shared) {
		kr__spin_lock(&d->one->lock);
		return d->one;
	}
	struct inst *blocked = NULL;
	for (;;) {
		unsigned hi = __atomic_load_n(&d->hi, __ATOMIC_ACQUIRE);
		for (unsigned n = 0; n < hi; n++) {
			unsigned k = __atomic_fetch_add(&d->rr, 1, __ATOMIC_RELAXED) % hi;
			struct inst *i = __atomic_load_n(&d->per[k], __ATOMIC_ACQUIRE);
			if (!i)
				continue;
			kr__spin_lock(&i->lock);
			uint32_t away = i->away;
			if (away == AWAY_NOT)
				return i;
			kr__spin_unlock(&i->lock);
			if (away == AWAY_BLOCKED)
				blocked = i;
		}
		if (blocked) {
			kr__spin_lock(&blocked->lock);
			if (blocked->away != AWAY_PARKED)
				return blocked;
			kr__spin_unlock(&blocked->lock);
		}
	}
}

/* VP i's instance is away (AWAY_BLOCKED: inside a blocking call;
 * AWAY_PARKED: a spare that parks) or back (AWAY_NOT).  A parking spare
 * hands on what is queued on it, to the VPs that run. */
static void d_adopt(kr_sched *s, struct inst *mine, struct inst *theirs);

static void d_away(kr_sched *s, struct inst *i, uint32_t away)
{
	struct dsched *d = D(s);
	if (d->shared)
		return;
	kr__spin_lock(&i->lock);
	i->away = away;
	kr__spin_unlock(&i->lock);
	if (away == AWAY_PARKED)
		d_adopt(s, NULL, i);
}




/* Take from another VP's instance i under its lock: its module's steal,
 * or, for the last look of an idle VP, a pop when it has none. */
static kr_mp *steal_locked(struct dsched *d, struct inst *i)
{
	if (!d->rq->steal)
		return pop_locked(d, i);
	kr_mp *mp = kr__rec(d->rq->steal(i->q));
	if (mp)
		__atomic_store_n(&mp->queued, NULL, __ATOMIC_RELAXED);
	return mp;
}

kr_mp *kr__d_steal(struct dsched *d, kr_vp *vp)
{
	if (d->shared || !d->rq->steal)
		return NULL;
	struct inst *me = own(d, vp);
	unsigned id = vp->id, hi = __atomic_load_n(&d->hi, __ATOMIC_ACQUIRE);
	for (unsigned k = 1; k < hi; k++) {
		unsigned v = (id + k) % hi;
		struct inst *i = __atomic_load_n(&d->per[v], __ATOMIC_ACQUIRE);
		if (!i)
			continue;
		kr_mp *mp = NULL;
		int fresh = 0;
		/* an empty list costs a read, not the lock's line */
		if ((d->kind == RQ_OTHER || !list_empty(i)) && kr__spin_trylock(&i->lock)) {
			mp = steal_locked(d, i);
			kr__spin_unlock(&i->lock);
		}
		if (mp || (i->slotted && (mp = slot_look(me, v, i, 0, &fresh))))
			return mp;
	}
	return NULL;
}

/* Worker w's instance (its kr_sched_vp_data). */
static inline struct inst *inst_of(struct kr_worker *w) { return w->sched_vp; }

/* VP w, at a scheduling point while it keeps what its own event source
 * made ready ("Completions stay"): once its queue is empty they have all
 * run (here or taken by a thief); if it still holds work a watch after
 * the poll that kept the first, an idle VP is woken for it.  1: still
 * kept, to be looked at again at the next scheduling point. */
static int d_kept(kr_sched *s, struct kr_worker *w)
{
	struct dsched *d = D(s);
	struct inst *i = inst_of(w);
	if (!w->kept_at)
		return 0;
	if (i->slotted ? slot_free(i) : list_empty(i)) {
		w->kept_at = 0;
		return 0;
	}
	if (kr_now() - w->kept_at < SLOT_WATCH_NS)
		return 1;
	w->kept_at = 0;
	if (__atomic_load_n(&d->nidle, __ATOMIC_SEQ_CST) && wake_claim(d))
		kr_sched_unpark(1);
	return 0;
}

/* What `theirs`, the instance of a VP that is away, has queued goes to
 * the tail of `mine` (a running VP takes a blocked VP's work), or, with
 * `mine` NULL, to the VPs that run as if made ready by a thread that is
 * no VP (a spare parks): the slot's first, then the list in order
 * (blocking.c, "The work of a VP that is away").  One lock at a time. */
static void d_adopt(kr_sched *s, struct inst *mine, struct inst *theirs)
{
	struct dsched *d = D(s);
	if (d->shared || theirs == mine)
		return;
	kr_mp *mp = theirs->slotted ? slot_take(theirs) : NULL;
	for (;;) {
		if (mp)
			kr__d_ready_in(s, mine, mp);
		if (d->kind != RQ_OTHER && list_empty(theirs))
			return;
		kr__spin_lock(&theirs->lock);
		mp = pop_locked(d, theirs);
		kr__spin_unlock(&theirs->lock);
		if (!mp)
			return;
	}
}

/* An idle VP's last look before it parks, at every instance, under each
 * lock (it must not skip a busy one, as stealing does).  The fresh fills
 * of other VPs' slots are noted and those slots marked watched
 * (watch[v]); *watching: some are. */
static kr_mp *last_look(kr_sched *s, kr_vp *vp, unsigned char *watch, unsigned *nwatch,
			int *watching)
{
	struct dsched *d = D(s);
	struct inst *me = own(d, vp);
	kr_mp *mp = kr__d_next_in(s, vp, own(D(s), vp), NULL);
	unsigned hi = __atomic_load_n(&d->hi, __ATOMIC_ACQUIRE);
	memset(watch, 0, hi);
	*nwatch = hi;
	for (unsigned v = 0; !mp && !d->shared && v < hi; v++) {
		struct inst *i = __atomic_load_n(&d->per[v], __ATOMIC_ACQUIRE);
		if (!i || i == me)
			continue;
		kr__spin_lock(&i->lock);
		mp = steal_locked(d, i);
		kr__spin_unlock(&i->lock);
		int fresh = 0;
		if (!mp && i->slotted && !(mp = slot_look(me, v, i, 1, &fresh)) && fresh) {
			__atomic_store_n(&i->watched, 1, __ATOMIC_SEQ_CST);
			watch[v] = 1;
			*watching = 1;
		}
	}
	return mp;
}

/* The watch of the slots in watch[] (the first hi entries) ends; nidle no
 * longer counts this VP.  A slot still full passes its watch to another
 * idle VP, if any. */
static void unwatch(struct dsched *d, const unsigned char *watch, unsigned hi)
{
	int full = 0;
	for (unsigned v = 0; v < hi; v++) {
		if (!watch[v])
			continue;
		struct inst *i = d->per[v];
		__atomic_store_n(&i->watched, 0, __ATOMIC_SEQ_CST);
		full |= __atomic_load_n(&i->slot, __ATOMIC_SEQ_CST) != NULL;
	}
	if (full && __atomic_load_n(&d->nidle, __ATOMIC_SEQ_CST) && wake_claim(d))
		kr_sched_unpark(1);
}

static kr_mp *d_idle(kr_sched *s, kr_vp *vp)
{
	struct dsched *d = D(s);
	unsigned char watch[KR_VP_MAX];
	unsigned nwatch = 0;
	int watching = 0;
	int answered = 0;
	__atomic_fetch_add(&d->nidle, 1, __ATOMIC_SEQ_CST);
	kr_mp *mp = last_look(s, vp, watch, &nwatch, &watching);
	if (!mp) {
		uint64_t deadline = kr_sched_idle_deadline();
		if (watching) {
			uint64_t end = kr_now() + SLOT_WATCH_NS;
			deadline = end < deadline ? end : deadline;
		}
		kr_sched_park_until(deadline);
		if ((answered = __atomic_load_n(&d->waking, __ATOMIC_RELAXED)))
			__atomic_store_n(&d->waking, 0, __ATOMIC_SEQ_CST);
		mp = kr__d_next_in(s, vp, own(D(s), vp), NULL);
	}
	__atomic_fetch_sub(&d->nidle, 1, __ATOMIC_SEQ_CST);
	if (watching)
		unwatch(d, watch, nwatch);
	/* Pushes made while this VP was being woken posted no wakeup; it
	 * leaves with work of its own, so another idle VP looks for them. */
	if (answered && mp && __atomic_load_n(&d->nidle, __ATOMIC_SEQ_CST) && wake_claim(d))
		kr_sched_unpark(1);
	return mp;
}


/* kr_mp_setprio has stored the new priority; the module moves mp if it
 * is queued.  A push that this misses must read the new priority: with a
 * shared instance the look at mp->queued is made under its lock, which
 * every push holds; with per-VP instances mp may be pushed onto any of
 * them, so the look and the push's read of the priority follow a store
 * and a fence each (push_as), and one of the two sees the other's.  A
 * module may hold microprocesses back (its pop returning NULL while they
 * are queued) and release one here: an idle VP is woken as after a
 * push. */
static void d_reprio(kr_sched *s, kr_mp *mp, int prio)
{
	struct dsched *d = D(s);
	if (!d->rq->reprio)
		return;
	if (!d->shared)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (;;) {
		struct inst *i = d->shared ? d->one
					   : __atomic_load_n((struct inst **)&mp->queued,
							     __ATOMIC_RELAXED);
		if (!i)
			return;
		kr__spin_lock(&i->lock);
		if (__atomic_load_n(&mp->queued, __ATOMIC_RELAXED) == i) {
			d->rq->reprio(i->q, kr__handle(mp), prio);
			uint32_t idle = __atomic_load_n(&d->nidle, __ATOMIC_RELAXED);
			kr__spin_unlock(&i->lock);
			if (idle && wake_claim(d))
				kr_sched_unpark(1);
			return;
		}
		kr__spin_unlock(&i->lock);
		if (d->shared)
			return;
	}
}

/* The module's table, for a scheduler of the application's built on it:
 * it is given handles and gives them back, as any module is (sched.h);
 * the core itself calls the default scheduler through the seam below, on
 * records. */
static void h_ready(kr_sched *s, kr_vp *vp, kr_mp *h)
{
	kr__d_ready_in(s, vp ? own(D(s), vp) : NULL, kr__rec(h));
}

static kr_mp *h_next(kr_sched *s, kr_vp *vp, kr_mp *prev)
{
	kr_mp *mp = kr__d_next_in(s, vp, own(D(s), vp), kr__rec(prev));
	return mp ? kr__handle(mp) : NULL;
}

static kr_mp *h_idle(kr_sched *s, kr_vp *vp)
{
	kr_mp *mp = d_idle(s, vp);
	return mp ? kr__handle(mp) : NULL;
}

static int h_take(kr_sched *s, kr_vp *vp, kr_mp *h, kr_mp *prev)
{
	return kr__d_take_in(s, own(D(s), vp), kr__rec(h), kr__rec(prev));
}

static void h_reprio(kr_sched *s, kr_mp *h, int prio) { d_reprio(s, kr__rec(h), prio); }

const kr_sched_ops kr_sched_default = {
	.name = "default",
	.init = d_init,
	.fini = d_fini,
	.vp_init = d_vp_init,
	.ready = h_ready,
	.next = h_next,
	.idle = h_idle,
	.take = h_take,
	.reprio = h_reprio,
};

/* The seam (seam.h): the core calls the default scheduler here, on the
 * worker's instance, and inline through the fast forms, on w->dq, the
 * same while no trace hides it from them (trace.c). */
static int s_vp_init(kr_sched *s, struct kr_worker *w)
{
	int e = d_vp_init(s, w->vp);
	if (!e)
		w->dq = inst_of(w);
	return e;
}

static void s_ready(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	kr__d_ready_in(s, w ? inst_of(w) : NULL, mp);
}

static void s_spawn(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	kr__d_spawn_in(s, inst_of(w), mp);
}

static kr_mp *s_next(kr_sched *s, struct kr_worker *w, kr_mp *prev)
{
	return kr__d_next_in(s, w->vp, inst_of(w), prev);
}

static int s_take(kr_sched *s, struct kr_worker *w, kr_mp *mp, kr_mp *prev)
{
	return kr__d_take_in(s, inst_of(w), mp, prev);
}

static kr_mp *s_idle(kr_sched *s, struct kr_worker *w) { return d_idle(s, w->vp); }

static void s_away(kr_sched *s, struct kr_worker *w, uint32_t how) { d_away(s, inst_of(w), how); }

static void s_adopt(kr_sched *s, struct kr_worker *w, struct kr_worker *o)
{
	d_adopt(s, inst_of(w), inst_of(o));
}

/* the one VP's instance: RMWs on its slot from now on */
static void s_several(kr_sched *s, struct kr_worker *w)
{
	(void)s;
	inst_of(w)->solo = 0;
}

const struct kr__seam kr__seam_default = {
	.vp_init = s_vp_init,
	.ready = s_ready,
	.spawn = s_spawn,
	.next = s_next,
	.take = s_take,
	.idle = s_idle,
	.away = s_away,
	.adopt = s_adopt,
	.keep = d_kept,
	.reprio = d_reprio,
	.several = s_several,
	.solo = 1,
};
