/*
 * karui L2 — application-specific scheduling (seed 000 §3).
 *
 * Five levels, from least to most work for the application:
 *
 *   4  pick a built-in ready queue:      kr_config.rq = &kr_rq_prio, ...
 *   3  write a ready-queue module:       a kr_rq_ops of your own
 *   2  add primitives on sleep/wakeup:   kr_mp_park, kr_mp_unpark, kr_mp_switch_to,
 *                                        kr_mp_park_and_switch (core.h)
 *   1  write a scheduler module:         a kr_sched_ops of your own
 *   0  write a scheduler on L0 + L1 only: vp.h and ctx.h, no core at all
 *
 * examples/level0 .. level4 show each; tests run them.
 *
 * Ready-queue module (level 3).  An instance holds runnable microprocesses
 * and answers "which next".  The default scheduler calls it with the
 * instance's spin lock held, so a module is plain single-threaded code.  A
 * module with KR_RQ_SHARED has one instance for the whole process (strict
 * order across VPs, one lock); otherwise each VP has its own and idle VPs
 * steal through `steal`.  A queued microprocess's links (kr_rq_link) belong
 * to the module while it is queued.  The kr_mp pointers that modules are
 * given are the handles of core.h, live while the module holds them: a
 * module compares them with each other (and with kr_mp_self), hands them
 * back, and gives them to kr_mp_rqlink and to the accessors of core.h.
 * What a module may order by: the microprocess's priority
 * (kr_mp_getprio), its id (kr_mp_id) and the word its creator gave it
 * (kr_attr.udata, read with kr_mp_udata), such as a deadline.
 *
 * Scheduler module (level 1).  Decides where a microprocess that becomes
 * runnable goes, which one a VP runs next, and what an idle VP does.  It is
 * called from any VP, and `ready` and `reprio` from threads that are no VP
 * too, so it does its own locking.  The core guarantees: a microprocess is handed to
 * `ready` at most once until `next`/`take` returns it; the core never runs
 * one microprocess on two VPs (it waits until the previous VP has left it).
 * The module's side: `idle` waits with kr_sched_park_until (not kr_vp_sleep_until),
 * which returns the memory of freed stacks and waits on the event source,
 * so that I/O completions and timers wake the VP; `ready` wakes an idle VP
 * with kr_sched_unpark (not kr_vp_wakeup), which also reaches a VP that
 * waits on the event source.  A module that sleeps on L0 directly leaves
 * I/O waits unserved while its VPs sleep.
 */
#ifndef KARUI_SCHED_H
#define KARUI_SCHED_H

#include <stddef.h>

#include "karui/core.h"
#include "karui/vp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_rq_link {
	kr_mp *next, *prev;
	int key;        /* the module's own word (e.g. the list it is in) */
} kr_rq_link;

/* The ready-queue links of a microprocess. */
kr_rq_link *kr_mp_rqlink(kr_mp *mp);

enum kr_rq_flags {
	KR_RQ_SHARED = 1u << 0, /* one instance for all VPs */
};

struct kr_rq_ops {
	const char *name;
	size_t size;     /* bytes of one instance (the core allocates it) */
	unsigned flags;  /* enum kr_rq_flags */
	/* mandatory */
	void (*init)(void *q);
	void (*push)(void *q, kr_mp *mp);
	kr_mp *(*pop)(void *q);          /* NULL when empty */
	/* optional (NULL: not supported) */
	kr_mp *(*steal)(void *q);        /* for an idle VP; per-VP queues only */
	int (*remove)(void *q, kr_mp *mp);/* mp is queued here; returns 0 */
	/* mp is queued here and its priority is now prio (kr_mp_getprio says
	 * so already).  A module may hold microprocesses back, pop returning
	 * NULL while they are queued, and release one here: the default
	 * scheduler then wakes an idle VP, as after a push. */
	void (*reprio)(void *q, kr_mp *mp, int prio);
	void (*fini)(void *q);
};

/* Built-in ready queues (level 4). */
extern const kr_rq_ops kr_rq_fifo; /* one shared FIFO: the seed's default */
extern const kr_rq_ops kr_rq_lifo; /* one shared LIFO */
extern const kr_rq_ops kr_rq_prio; /* one shared queue, highest priority first,
                                      FIFO among equals; priorities change live */
extern const kr_rq_ops kr_rq_ws;   /* per VP, idle VPs steal: the default.  With
                                      the default scheduler a new microprocess
                                      runs next on its VP (those made before it
                                      follow, newest first), woken ones in FIFO
                                      order behind; a thief takes what its VP
                                      would run last: in a spawn tree the
                                      oldest, largest subtree */

typedef struct kr_sched kr_sched;

struct kr_sched_ops {
	const char *name;
	/* mandatory */
	int (*init)(kr_sched *s, const kr_rq_ops *rq, unsigned nvp);
	void (*fini)(kr_sched *s);
	int (*vp_init)(kr_sched *s, kr_vp *vp);   /* on the VP itself */
	/* mp became runnable; `vp` is the caller's VP or NULL off a VP */
	void (*ready)(kr_sched *s, kr_vp *vp, kr_mp *mp);
	/* the next microprocess for vp; `prev`, if not NULL, is the caller
	 * and stays runnable (requeue it first); NULL: nothing to run */
	kr_mp *(*next)(kr_sched *s, kr_vp *vp, kr_mp *prev);
	/* vp found nothing: wait until work may have come (or a wakeup
	 * arrives), then return the next microprocess or NULL */
	kr_mp *(*idle)(kr_sched *s, kr_vp *vp);
	/* optional: take queued `mp` out for a direct switch and requeue
	 * `prev` (not NULL): 0, or ESRCH if mp is not queued */
	int (*take)(kr_sched *s, kr_vp *vp, kr_mp *mp, kr_mp *prev);
	/* optional: a priority changed (mp may be queued); kr_mp_getprio
	 * already returns the new one */
	void (*reprio)(kr_sched *s, kr_mp *mp, int prio);
	/* optional, the I/O-completion notifier (seed 004 §3.3): what mp
	 * waited for in one of karui's I/O calls has completed (io_uring) or
	 * become ready (epoll); called at once, where karui saw it (`vp`; NULL
	 * on a thread that is no VP), before mp is made runnable (`ready`
	 * follows, unless mp's wait ended otherwise meanwhile) */
	void (*io_done)(kr_sched *s, kr_vp *vp, kr_mp *mp);
};

extern const kr_sched_ops kr_sched_default;

/* For an idle callback: the earliest deadline of any VP's timers (a
 * kr_now() time; KR_FOREVER: none), until which a VP may sleep.  The core
 * expires due timers each time round the idle loop. */
uint64_t kr_sched_idle_deadline(void);

/* How an idle callback waits: on L0 (kr_vp_sleep_until), or, when event
 * sources are set, in the one that can sleep (with others beside it, until
 * the earliest `due` of theirs), so that I/O completions wake it too.
 * Returns when woken, when something completed, or at the deadline
 * (KR_FOREVER: none).  Idle VPs return here the memory of stacks left
 * unused for a while, and return by the time the next ones may be. */
void kr_sched_park_until(uint64_t deadline);

/* For a ready callback that saw an idle VP: kr_vp_wakeup(n), and a kick
 * for the VP waiting on the event sources, if one is.  n = 0, for an
 * event source whose new work the VPs asleep would not see (MPI's first
 * request): only the kick, or, where the VPs sleep on L0's word (a
 * KR_POLLER_PER_VP source, or none that can sleep), one wakeup. */
void kr_sched_unpark(unsigned n);

/* An event source (karui's I/O layer adds one, libkarui-mpi another): the
 * core calls each source's `poll` at every 8th scheduling point of a busy
 * VP and each time round the idle loop, and a `wait` in
 * kr_sched_park_until.  poll and wait submit what was queued and wake the
 * microprocesses whose requests completed (kr_mp_unpark).
 *
 * Without KR_POLLER_PER_VP one VP at a time waits on the source, the
 * others on L0, and `kick` (any thread) makes a running or imminent wait
 * return.  With it, every idle VP waits on the source, which also ends
 * the wait on kr_vp_wakeup (kr_vp_sleep_begin in vp.h); kick is unused.
 * `leave` (optional) runs on a VP that is about to stop looking at the
 * source for a while (a blocking call, a spare VP parking): requests that
 * only this VP would see complete must be moved elsewhere.
 *
 * Several sources (up to KR_POLLER_MAX).  An idle VP sleeps in one only,
 * the one without `due`, and the others' events must end that sleep:
 *   due   (optional) marks a source whose events only its poll sees (an
 *         MPI library's progress, which gives no descriptor to wait on):
 *         the kr_now() time by which it must be polled again, one already
 *         past to be polled again at once (the VP gives its processor away
 *         in between), KR_FOREVER while it has nothing to look for.  One
 *         VP at a time asks, and sleeps in the other source until then.
 *         Such a source's wait runs only when it is alone; where it gets
 *         new work that no VP looks for (KR_FOREVER before), it calls
 *         kr_sched_unpark(0).
 * With only `due` sources set, the VP that asks sleeps on L0 until the
 * earliest time, and kr_sched_unpark(0) is an L0 wakeup. */
enum { KR_POLLER_PER_VP = 1 };
#define KR_POLLER_MAX 4
typedef struct kr_poller {
	void (*poll)(void *arg);
	void (*wait)(void *arg, uint64_t deadline);
	void (*kick)(void *arg);
	void (*leave)(void *arg);
	void (*fini)(void *arg); /* optional: kr_fini, after every VP stopped */
	uint64_t (*due)(void *arg);
	void *arg;
	unsigned flags;
} kr_poller;

/* Poll the event sources now, on this VP, as a busy VP does at every 8th
 * scheduling point: for a caller about to run code that reaches none for
 * a while (a μprocess's), so that what its VP has queued is submitted
 * and what is ready, kept or new, goes to idle VPs at once.  Nothing off
 * a VP or without a source. */
void kr_sched_poll(void);

/* Add an event source, from any thread (the core keeps a copy).  EINVAL:
 * poll or wait missing, kick missing without KR_POLLER_PER_VP, or
 * KR_POLLER_PER_VP with due; EBUSY: the same one (poll and arg) is set,
 * or it has no `due` and one set has none either (an idle VP sleeps in
 * one only); ENOSPC: KR_POLLER_MAX are set; ENOMEM; EPERM: karui is not
 * running.  kr_fini removes every source (calling its fini, the last
 * added first). */
int kr_poller_add(const kr_poller *p);

/* Remove the source added with the same poll and arg, from any thread; a
 * VP inside its wait returns.  ESRCH: none is set; EINVAL: p NULL; EPERM:
 * karui is not running. */
int kr_poller_remove(const kr_poller *p);

/* For scheduler modules: the module's private word in kr_sched, and a
 * per-VP private word. */
void **kr_sched_data(kr_sched *s);
void **kr_sched_vp_data(kr_vp *vp);

#ifdef __cplusplus
}
#endif
#endif
