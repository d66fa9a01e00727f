/*
 * karui L2 — the seam (seam.h) for a scheduler module of the
 * application's (scheduling level 1): each operation calls its
 * kr_sched_ops; and the choice, at kr_init, between that and the default
 * scheduler's own.  What the module's interface has no word for (a VP away,
 * completions kept, the one-VP state) it needs nothing for: its queues
 * are its own, and every VP it serves runs its `next` and `idle`.
 */
#include <errno.h>

#include "rt.h"

static int m_vp_init(kr_sched *s, struct kr_worker *w) { return s->ops->vp_init(s, w->vp); }

/* The module is given handles (sched.h), which the accessors of core.h
 * take; the core works on records. */
static kr_mp *handle_of(kr_mp *mp) { return mp ? kr__handle(mp) : NULL; }

static void m_ready(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	s->ops->ready(s, w ? w->vp : NULL, kr__handle(mp));
}

static void m_spawn(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	s->ops->ready(s, w->vp, kr__handle(mp));
}

static kr_mp *m_next(kr_sched *s, struct kr_worker *w, kr_mp *prev)
{
	return kr__rec(s->ops->next(s, w->vp, handle_of(prev)));
}

static int m_take(kr_sched *s, struct kr_worker *w, kr_mp *mp, kr_mp *prev)
{
	return s->ops->take ? s->ops->take(s, w->vp, kr__handle(mp), handle_of(prev)) : ESRCH;
}

static kr_mp *m_idle(kr_sched *s, struct kr_worker *w) { return kr__rec(s->ops->idle(s, w->vp)); }

static void m_away(kr_sched *s, struct kr_worker *w, uint32_t how)
{
	(void)s, (void)w, (void)how;
}

static void m_adopt(kr_sched *s, struct kr_worker *w, struct kr_worker *o)
{
	(void)s, (void)w, (void)o;
}

static int m_keep(kr_sched *s, struct kr_worker *w)
{
	(void)s, (void)w;
	return 0;
}

static void m_reprio(kr_sched *s, kr_mp *mp, int prio)
{
	if (s->ops->reprio)
		s->ops->reprio(s, kr__handle(mp), prio);
}

static void m_several(kr_sched *s, struct kr_worker *w) { (void)s, (void)w; }

/* (mp is a handle already: the I/O layer's) */
static void m_io_done(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	if (s->ops->io_done)
		s->ops->io_done(s, w ? w->vp : NULL, mp);
}

const struct kr__seam kr__seam_module = {
	.vp_init = m_vp_init,
	.ready = m_ready,
	.spawn = m_spawn,
	.next = m_next,
	.take = m_take,
	.idle = m_idle,
	.away = m_away,
	.adopt = m_adopt,
	.keep = m_keep,
	.reprio = m_reprio,
	.several = m_several,
	.io_done = m_io_done,
};

const struct kr__seam *kr__seam_for(const kr_sched_ops *ops)
{
	return ops == &kr_sched_default ? &kr__seam_default : &kr__seam_module;
}
