/*
 * karui L2 — the built-in ready-queue modules (scheduling level 4).
 *
 *   kr_rq_fifo  one FIFO for the process (KR_RQ_SHARED): strict arrival
 *               order across VPs, as the seed's default scheduler.
 *   kr_rq_lifo  one LIFO for the process: the newest runnable first (good
 *               cache reuse for fork-join; kr_mp_yield is then a no-op while
 *               nothing newer is runnable).
 *   kr_rq_prio  one queue for the process ordered by priority, FIFO among
 *               equals: 32 lists and a bitmap, O(1) everything.  A queued
 *               microprocess's priority can change (reprio): the seed's
 *               dynamic priority, a simple case of priority inheritance.
 *   kr_rq_ws    one list per VP, woken microprocesses at its tail; an idle
 *               VP steals from another VP's tail, the one that VP would
 *               run last.  No lock is shared in the common case: the
 *               default.  The default scheduler adds a slot ahead of the
 *               list and puts new microprocesses first (sched_default.c,
 *               "New microprocesses"), so a spawn tree runs depth first
 *               and a thief takes the oldest, largest subtree.
 *
 * The default scheduler holds the instance's lock around every call, so
 * these are plain sequential code (sched.h).  Removal is O(1) everywhere,
 * which kr_mp_switch_to needs.
 */
#include <errno.h>

#include "list.h"

/* A module is given handles and gives handles back (sched.h); the lists
 * link records. */
static kr_mp *handle_of(kr_mp *mp) { return mp ? kr__handle(mp) : NULL; }

static void l_init(void *q) { *(struct mplist *)q = (struct mplist){0}; }
static void l_push_tail(void *q, kr_mp *h) { mpl_push_tail(q, kr__rec(h)); }
static void l_push_head(void *q, kr_mp *h) { mpl_push_head(q, kr__rec(h)); }
static kr_mp *l_pop(void *q) { return handle_of(mpl_pop_head(q)); }
static kr_mp *l_pop_tail(void *q) { return handle_of(mpl_pop_tail(q)); }
static int l_remove(void *q, kr_mp *h)
{
	mpl_remove(q, kr__rec(h));
	return 0;
}

const kr_rq_ops kr_rq_fifo = {
	.name = "fifo", .size = sizeof(struct mplist), .flags = KR_RQ_SHARED,
	.init = l_init, .push = l_push_tail, .pop = l_pop, .remove = l_remove,
};

const kr_rq_ops kr_rq_lifo = {
	.name = "lifo", .size = sizeof(struct mplist), .flags = KR_RQ_SHARED,
	.init = l_init, .push = l_push_head, .pop = l_pop, .remove = l_remove,
};

const kr_rq_ops kr_rq_ws = {
	.name = "ws", .size = sizeof(struct mplist),
	.init = l_init, .push = l_push_tail, .pop = l_pop, .steal = l_pop_tail,
	.remove = l_remove,
};

#define NPRIO (KR_PRIO_MAX - KR_PRIO_MIN + 1)
_Static_assert(NPRIO <= 32, "one bitmap word");

struct prioq {
	unsigned map; /* bit p: list p is not empty */
	struct mplist l[NPRIO];
};

static void p_init(void *q) { *(struct prioq *)q = (struct prioq){0}; }

static void p_push(void *q, kr_mp *h)
{
	struct prioq *p = q;
	kr_mp *mp = kr__rec(h);
	int i = __atomic_load_n(&mp->prio, __ATOMIC_RELAXED) - KR_PRIO_MIN;
	mp->link.key = i; /* the list it is in, whatever prio becomes */
	mpl_push_tail(&p->l[i], mp);
	p->map |= 1u << i;
}

static kr_mp *p_pop(void *q)
{
	struct prioq *p = q;
	if (!p->map)
		return NULL;
	int i = 31 - __builtin_clz(p->map);
	kr_mp *mp = mpl_pop_head(&p->l[i]);
	if (!p->l[i].head)
		p->map &= ~(1u << i);
	return handle_of(mp);
}

static int p_remove(void *q, kr_mp *h)
{
	struct prioq *p = q;
	kr_mp *mp = kr__rec(h);
	int i = mp->link.key;
	mpl_remove(&p->l[i], mp);
	if (!p->l[i].head)
		p->map &= ~(1u << i);
	return 0;
}

/* mp's priority is already prio (sched.h); link.key still names its list */
static void p_reprio(void *q, kr_mp *mp, int prio)
{
	(void)prio;
	p_remove(q, mp);
	p_push(q, mp);
}

const kr_rq_ops kr_rq_prio = {
	.name = "prio", .size = sizeof(struct prioq), .flags = KR_RQ_SHARED,
	.init = p_init, .push = p_push, .pop = p_pop, .remove = p_remove,
	.reprio = p_reprio,
};
