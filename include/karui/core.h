/*
 * karui L2 — microprocesses (seed 000 §2.2 level 2).
 *
 * A microprocess (mp) is a user-level lightweight process: its own stack
 * and saved context, scheduled by karui's user-level scheduler onto the
 * process's virtual processors (L0).  Creating, joining, switching and
 * park/unpark never enter the kernel once stacks are cached.
 *
 * Start-up: kr_init() turns the calling thread into VP 0 and the calling
 * code into the main microprocess, and starts cfg->vps - 1 more VPs.
 * kr_fini(), called by the main microprocess once every other one has
 * finished, stops the VPs and returns the thread to plain pthread life.
 *
 * Scheduling is non-preemptive: a microprocess runs until it blocks,
 * yields or exits.  A microprocess can move between VPs between two
 * scheduling points, so `thread_local` data it sees is its current VP's:
 * use microprocess-local keys (kr_key_*) for per-microprocess data, and
 * don't keep addresses of thread_local objects across kr_mp_yield, kr_mp_park,
 * kr_mp_join or any call that can block.
 *
 * Park / unpark (the seed's sleep / wakeup): every microprocess has one
 * wakeup permit.  kr_mp_unpark(t) makes a parked t runnable, or, if t is
 * not parked, leaves the permit set so that t's next kr_mp_park returns at
 * once.  Parking waits for an unpark; sleeping (kr_mp_sleep_for / _until)
 * lets time pass and ignores unparks.  Wakeups never get lost,
 * and may come from any thread, VP or not.
 *
 * Handles are like pthread_t: a joinable microprocess's handle stays valid
 * until it is joined; after that (and after a detached one ends) its memory
 * goes back to the stack cache and may be reused by a new microprocess.
 * Unlike a pthread_t, a handle carries the generation of the life it
 * names, and every call that takes one checks it: a stale handle is
 * refused (ESRCH; kr_mp_id returns 0), also once its memory holds a new
 * microprocess, and acts on nothing.  The generation has 16 bits: a
 * handle kept while its record is reused tens of thousands of times may
 * name a new microprocess again (docs/limits.md).  The wakeups karui owes
 * a microprocess internally (a server's, an I/O completion's) carry its
 * generation too, so a late one never reaches the next microprocess in
 * the same memory.
 *
 * Fork: the child of a fork() made while karui runs has no karui (the
 * rule block of include/karui.h says what it gets): every call here but
 * the accessors, kr_mp_getprio and kr_init (EBUSY) returns EPERM there.
 *
 * Calls return 0 or a positive errno code, accessors their value (the
 * rule of include/karui.h).  On a thread that is no VP of a running karui
 * they return EPERM, but for kr_init, kr_mp_getprio, kr_key_create,
 * kr_key_delete and kr_stats_get, which work on any thread, and
 * kr_mp_unpark, kr_mp_cancel and kr_mp_setprio, which do while karui runs.
 */
#ifndef KARUI_CORE_H
#define KARUI_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "karui/vp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_mp kr_mp;
typedef void *(*kr_mp_fn)(void *arg);
typedef struct kr_rq_ops kr_rq_ops;
typedef struct kr_sched_ops kr_sched_ops;

#define KR_STACK_MIN 4096u            /* smallest stack, mp record included */
#define KR_STACK_DEFAULT (64u * 1024) /* when kr_attr.stack_size is 0 */
#define KR_STACK_MAX (1ul << 30)
/* below a stack unless KR_MP_NOGUARD (or the page size, if larger): a
 * frame larger than this may step over it (docs/limits.md) */
#define KR_STACK_GUARD (64u * 1024)

#define KR_PRIO_MIN 0
#define KR_PRIO_MAX 31
#define KR_PRIO_DEFAULT 16

enum kr_mp_flags {
	KR_MP_DETACHED = 1u << 0, /* start detached: nobody joins it */
	KR_MP_NOGUARD = 1u << 1,  /* no guard below the stack (seed's red zone off) */
	KR_MP_PRIO = 1u << 2,     /* use kr_attr.prio instead of the creator's priority */
};

typedef struct kr_attr {
	size_t stack_size; /* bytes; 0: KR_STACK_DEFAULT; rounded up to a size
	                      class: whole pages to 32 KiB, then < 25% more */
	unsigned flags;    /* enum kr_mp_flags */
	int prio;          /* with KR_MP_PRIO: KR_PRIO_MIN..KR_PRIO_MAX */
	void *udata;       /* the creator's word for it: kr_mp_udata */
} kr_attr;

typedef struct kr_config {
	unsigned vps;                 /* VPs in all, the caller's included; 0: 1 */
	const kr_rq_ops *rq;          /* ready-queue module; NULL: kr_rq_ws */
	const kr_sched_ops *sched;    /* scheduler module; NULL: kr_sched_default */
	size_t stack_cache;           /* stacks kept per VP; 0: 64 */
	const struct kr_alloc *alloc; /* processor allocator, which decides how
	                                 many of the VPs run (karui/carea.h:
	                                 &kr_carea; vps 0 then means one per
	                                 processor the process may use); NULL:
	                                 none, all vps run */
	const char *trace;            /* write a scheduling trace to this file at
	                                 kr_fini (docs/trace.md); NULL: the
	                                 environment's KARUI_TRACE, if set */
	size_t trace_size;            /* bytes of trace buffer per VP; 0:
	                                 KARUI_TRACE_SIZE, or 1 MiB */
} kr_config;

/* Start karui on the calling thread.  EINVAL: vps > KR_VP_MAX, or an ops
 * table without its mandatory functions; EBUSY: already started, or being
 * started or stopped by another thread, or the caller is a VP already;
 * EAGAIN / ENOMEM: no threads or memory. */
int kr_init(const kr_config *cfg);

/* Stop karui.  Only the main microprocess may call it (EPERM otherwise),
 * and only when every other microprocess has ended: EBUSY if some have not
 * after 100 ms (one that has just made its last wakeup may still be on its
 * way out, which kr_fini waits for).  The
 * main microprocess ends here: the destructors of its keys run first (and
 * if they start microprocesses, EBUSY after all). */
int kr_fini(void);

/* Create a microprocess running fn(arg).  EINVAL: fn or out NULL, stack
 * size below KR_STACK_MIN or above KR_STACK_MAX, priority out of range,
 * unknown flags; ENOMEM: no memory or mappings left (see docs/limits.md). */
int kr_mp_create(kr_mp **out, const kr_attr *attr, kr_mp_fn fn, void *arg);

/* End the calling microprocess with `result` (returning from fn does the
 * same).  On the main microprocess or off a VP this is a no-op error: it
 * returns EPERM. */
int kr_mp_exit(void *result);

/* Wait for mp to end and collect its result (result may be NULL).  Of
 * joins and detaches of one microprocess, at most one succeeds.  EINVAL:
 * NULL, detached, or being joined by another; EDEADLK: mp is the caller,
 * or waits for it: mp joins the caller, or joins one that joins it, and
 * so on (of two joins that close such a cycle at once, at least one
 * returns EDEADLK); ESRCH: mp has been joined already, or was detached
 * and has ended (stale handle). */
int kr_mp_join(kr_mp *mp, void **result);

/* Nobody will join mp; its resources go when it ends.  EINVAL: NULL,
 * detached already, or being joined; ESRCH: as kr_mp_join. */
int kr_mp_detach(kr_mp *mp);

kr_mp *kr_mp_self(void);            /* NULL off a VP */
/* A number that names mp for as long as the process runs; 0 for NULL or
 * a stale handle. */
unsigned long kr_mp_id(const kr_mp *mp);

/* The word its creator gave it (kr_attr.udata; NULL without attributes,
 * and for the main microprocess).  karui never looks at it: it is for the
 * application, and for its scheduling modules, which may call this from
 * any callback that holds mp (a ready queue's push, for instance: see
 * sched.h, level 3).  mp must be a live handle. */
void *kr_mp_udata(const kr_mp *mp);

/* Let every other runnable microprocess of this VP's queue go first
 * (as the ready-queue policy orders them). */
int kr_mp_yield(void);

/* Park until kr_mp_unpark (or return at once, consuming a pending permit). */
int kr_mp_park(void);

/* Around a call that may block the kernel thread and has no karui
 * version (a read of a regular file, getaddrinfo, a foreign library):
 *
 *     kr_blocking_begin();  n = read(fd, buf, len);  kr_blocking_end();
 *
 * enter publishes the VP as BLOCKED and makes sure the configured number
 * of VPs still run microprocesses: a parked spare VP is resumed, or a new
 * one started, and it takes over the other microprocesses, the blocked
 * VP's queue included.  The section belongs to the microprocess: karui
 * calls made inside it work, and one that waits (a contended lock, a
 * sleep, a yield) counts its VP as running again while it waits, and
 * begins the section again on the VP it resumes on, so that
 * kr_blocking_end ends it wherever the microprocess is then; one that
 * ends inside it ends it too.  enter: EBUSY if already inside; leave:
 * EINVAL if not; both EPERM off a VP. */
int kr_blocking_begin(void);
int kr_blocking_end(void);

/* Time: kr_now() (vp.h) is CLOCK_MONOTONIC in nanoseconds; deadlines
 * below are on that clock, KR_FOREVER meaning none.  Deadlines live in the timer heap
 * of the VP the waiter went to wait on, checked at its scheduling points
 * and by idle VPs (an idle VP sleeps no longer than the earliest deadline
 * of any VP).  Scheduling is non-preemptive, so a deadline can pass late by
 * as long as the microprocesses running at that moment keep their VPs. */

/* kr_mp_park with a deadline: 0 when woken (or a permit was pending),
 * ETIMEDOUT when the deadline passed first; ENOMEM: no room for the timer. */
int kr_mp_park_until(uint64_t deadline);

/* Let time pass: until `deadline`, or for `ns` nanoseconds.  Wakeups that
 * come meanwhile do not end it; they stay pending for the next kr_mp_park.
 * A cancel does: ECANCELED. */
int kr_mp_sleep_until(uint64_t deadline);
int kr_mp_sleep_for(uint64_t ns);

/* Make mp runnable if it is parked, else set its permit.  From any thread.
 * EINVAL: NULL; ESRCH: mp has ended. */
int kr_mp_unpark(kr_mp *mp);

/* Cancellation.  kr_mp_cancel(mp) ends the wait mp is blocked in, or the
 * next one it starts, with ECANCELED: one cancel ends one wait.  A
 * cancellable wait is kr_mp_park_cancellable_until, kr_mp_sleep_until / _for, every
 * blocking call of sync.h but mutex locking and barriers, and every call
 * of io.h while it waits; one that ends with ECANCELED has left no trace
 * (no unit taken, nothing sent or received, no call accepted).  A wait
 * that is being served when the cancel comes completes, and the cancel
 * stays pending for the next one.  Not cancellable: kr_mp_park,
 * kr_mp_park_until, kr_mp_join, mutex locking, barriers, and what runs
 * between kr_blocking_begin and _end.  From any thread, like
 * kr_mp_unpark (it also wakes mp once); EINVAL: NULL; ESRCH: mp has ended. */
int kr_mp_cancel(kr_mp *mp);

/* kr_mp_park_until that a cancel ends too: ECANCELED, consuming it; a
 * cancel already pending ends it at once.  For primitives of one's own. */
int kr_mp_park_cancellable_until(uint64_t deadline);

/* Hand the processor straight to mp, which must be parked or ready; the
 * caller stays runnable.  EINVAL: NULL or the caller itself; EBUSY: mp is
 * running or being woken elsewhere; ESRCH: mp has ended. */
int kr_mp_switch_to(kr_mp *mp);

/* The composite of seed 000 §3.1 level 2 (the seed's sleep_and_wakeup):
 * the caller parks and mp is unparked and run at once on this VP.  Errors
 * as kr_mp_switch_to; on error the caller has not parked. */
int kr_mp_park_and_switch(kr_mp *mp);

/* Priorities (used by priority ready queues; others keep but ignore them).
 * A change takes effect at once, also for a queued microprocess — the
 * seed's dynamic priority.  From any thread.  EINVAL: NULL or out of
 * range; ESRCH: setprio, mp has ended; getprio, a stale handle; setprio
 * EPERM: karui is not running. */
int kr_mp_setprio(kr_mp *mp, int prio);
int kr_mp_getprio(const kr_mp *mp, int *prio);

/* Microprocess-local storage, like pthread keys.  Destructors run at exit
 * for non-NULL values (the main microprocess's at kr_fini).  A key stays
 * valid however often keys are created and deleted.  EAGAIN: all
 * KR_KEYS_MAX keys in use; EINVAL: bad or deleted key; ENOMEM. */
#define KR_KEYS_MAX 128
typedef unsigned kr_key;
int kr_key_create(kr_key *key, void (*destructor)(void *));
int kr_key_delete(kr_key key);
int kr_key_set(kr_key key, const void *value);
void *kr_key_get(kr_key key); /* NULL if unset, bad key, or off a VP */

/* Counters of this process's scheduler, for tests and tools.  Read while
 * microprocesses come and go, mps_live may also count some that were
 * created and ended during the call, but never fewer than were alive at
 * one moment of it. */
typedef struct kr_stats {
	unsigned long mps_live;     /* created and not yet ended */
	unsigned long stacks_mapped;/* stacks carved from reservations so far */
	unsigned long stacks_cached;/* idle stacks in caches and the pool */
	unsigned long stacks_trimmed;   /* times an idle stack's memory was returned */
	unsigned long stack_trim_calls; /* madvise calls that returned it */
	int stack_guards_inline;    /* 1: guards cost no mapping (MADV_GUARD_INSTALL);
	                               0: each splits one (docs/limits.md) */
} kr_stats;
int kr_stats_get(kr_stats *st);

#ifdef __cplusplus
}
#endif
#endif
