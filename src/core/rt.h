/*
 * karui L2 — the core's shared runtime state, for the files of L2 only:
 * the workers, the scheduler's dispatch, the switch and the inline fast
 * paths that life.c, park.c, blocking.c, runtime.c and timer.c share.
 *
 * Concepts.  A worker is L2's view of a VP: the microprocess it runs (cur)
 * and an idle context that looks for work when no microprocess can run.
 * The scheduler module (sched.h) decides which microprocess runs next; the
 * files of L2 do everything else: create, exit and join (life.c), sleep,
 * wakeup and the switches themselves (park.c), blocking sections
 * (blocking.c), start-up, shut-down and the idle loop (runtime.c), the
 * timers (timer.c).
 *
 * The hard problem: a microprocess that stops running (yield, sleep, exit)
 * must be findable by other VPs as early as possible, but must not be
 * resumed anywhere before its own VP has finished saving its context.
 * Two words settle it: on_cpu, below, and wstate, the wakeup permit
 * (park.c):
 *
 *   on_cpu   1 from the moment a VP decides to run the microprocess until
 *            that VP has switched away from it; cleared (release) by the
 *            switch itself once it is off the microprocess's stack
 *            (kr__ctx_switch's `left`, src/arch/ctx_init.h), so that the
 *            context resumed has nothing to complete and a fast path can
 *            end with the switch as a tail call (in the sanitizer builds
 *            the resumed context clears it in C: done_left()).  Anyone
 *            about to run a microprocess first
 *            checks (acquire) that on_cpu == 0, almost always already
 *            true.  So a yielding microprocess can be queued before it
 *            switches, and one going to sleep can be woken before it has
 *            left.  Only a context that holds nothing half switched out
 *            (an idle loop, a running microprocess) may *wait* for on_cpu:
 *            a VP that is leaving X must not wait for Y while the VP that
 *            is leaving Y waits for X.  route() sends such a switch through
 *            the idle context, which finishes leaving X first.
 *
 * Thread pointer: after any switch the code may run on another kernel
 * thread, so the worker is re-read (KR_TLS_GET) after every switch and
 * never kept across one.
 *
 * Rejected: doing all state changes on the next context after the switch
 * (Go's mcall to g0): it costs a second lock round trip on every yield.
 */
#ifndef KARUI_CORE_RT_H
#define KARUI_CORE_RT_H

#include "internal.h"
#include "permit.h"
#include "trace.h"
#include "../arch/ctx_init.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

/* A set of event sources (runtime.c), never changed once published:
 * kr_poller_add and _remove publish a new one, and the old ones stay until
 * kr_fini, for the VPs that may still be reading them (a VP waiting on a
 * source that is gone is woken: kr_sched_unpark(0)).  poll, arg and own
 * are what kr__poll calls: the one source's, or kr__poll_all's. */
struct kr__sources {
	void (*poll)(void *arg);
	void *arg;
	int own;                /* the one source is KR_POLLER_PER_VP */
	unsigned n;
	int sleeper;            /* the source without `due`, or -1 */
	int shared;             /* one VP at a time waits in the sleeper */
	kr_poller p[KR_POLLER_MAX];
	struct kr__sources *older; /* on G.spare_sets: the next one */
	struct kr__sources *all;   /* on G.sets: the next one */
};

/* The runtime's state (runtime.c), G in the files of L2. */
struct kr__rt {
	int running;
	uint32_t stopping;
	struct kr_sched sched;
	const struct kr__seam *seam; /* the scheduler's, settled by kr_init (seam.h) */
	kr_mp *main;
	kr_mp *handoff;         /* kr_fini: the main mp waiting for VP 0 */
	struct kr_worker *w0;
	kr_vp **vps;            /* VPs 1.. started by kr_init */
	unsigned nvps;
	pthread_mutex_t lock;   /* kr_init against a concurrent kr_init */
	int busy;               /* under lock: from kr_init's check to the end
	                           of its failure, or of kr_fini */
	int fork_hooked;        /* under lock: fork_child is registered */
	/* the event sources (sched.h; runtime.c) */
	struct kr__sources *src; /* atomic: the set, NULL: none */
	struct kr__sources *sets, *spare_sets; /* under lock: every set
	                           allocated, and the spare ones (runtime.c) */
	unsigned nspare_sets;
	struct kr_worker *polling; /* the VP waiting for the shared sources */
	/* blocking calls: workers that are neither blocked nor parked
	 * spares, and the spare VPs (see kr_blocking_begin) */
	uint32_t active;
	uint32_t target;        /* how many may be active: kr_config.vps, or
	                           what the allocator sets (alloc.h) */
	const struct kr_alloc *alloc; /* kr_config.alloc, or NULL */
	uint32_t naway;         /* workers away with work for the running VPs:
	                           inside a blocking section, or parked as a
	                           spare with timers armed (blocking.c) */
	pthread_mutex_t spare_lock;
	uint32_t park_seq;      /* parked VPs wait on it (blocking.c) */
	unsigned spare_parked, spare_tokens, nspares;
	kr_vp *spares[KR_VP_MAX];
};
extern struct kr__rt kr__rt __attribute__((visibility("hidden")));
#define G kr__rt

/* per-worker counters, owner-written, summed by readers */
struct counters {
	unsigned long created, ended;   /* created also numbers the ids */
};
/* every worker by VP id, for idle VPs to expire the timers of busy ones;
 * the ids below kr__workers_hi have had one (it only grows) */
extern struct kr_worker *kr__workers[KR_VP_MAX] __attribute__((visibility("hidden")));
extern uint32_t kr__workers_hi __attribute__((visibility("hidden")));

static inline struct kr_worker *W(void) { return KR_TLS_GET(kr__w); }

#define SCHED (&G.sched)
#include "seam.h"

/* ---------------- sanitizer annotations of the switch ---------------- */

#if defined(__SANITIZE_ADDRESS__)
static inline void ctx_bounds(struct kr_worker *w, kr_mp *mp, const void **lo, size_t *sz)
{
	if (mp) {
		*lo = mp->stack_lo;
		*sz = mp->stack_size;
	} else {
		*lo = w->idle_stack_lo;
		*sz = w->idle_stack_size;
	}
}
#define ASAN_START(w, save, to)                                                \
	do {                                                                   \
		const void *lo_;                                               \
		size_t sz_;                                                    \
		ctx_bounds(w, to, &lo_, &sz_);                                 \
		__sanitizer_start_switch_fiber(save, lo_, sz_);                \
	} while (0)
#define ASAN_FINISH(save) __sanitizer_finish_switch_fiber(save, NULL, NULL)
#else
#define ASAN_START(w, save, to) ((void)0)
#define ASAN_FINISH(save) ((void)0)
#endif

/* ThreadSanitizer: every context is a TSan fiber (the idle loop of VPs
 * 1.. runs on its thread's own).  A switch is announced just before it
 * happens, with synchronisation, as a switch on one VP orders everything
 * before it before everything after it. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define TSAN_SWITCH(w, to) __tsan_switch_to_fiber((to) ? (to)->tsan_fiber : (w)->tsan_idle, 0)
#define TSAN_NEW(mp) ((mp)->tsan_fiber = __tsan_create_fiber(0))
#define TSAN_FREE(mp) __tsan_destroy_fiber((mp)->tsan_fiber)
#define TSAN_THREAD() __tsan_get_current_fiber()
#define TSAN_FIBER() __tsan_create_fiber(0)
#define TSAN_DROP(f) __tsan_destroy_fiber(f)
#else
#define TSAN_THREAD() NULL
#define TSAN_FIBER() NULL
#define TSAN_DROP(f) ((void)(f))
#define TSAN_SWITCH(w, to) ((void)0)
#define TSAN_NEW(mp) ((void)0)
#define TSAN_FREE(mp) ((void)0)
#endif

/* A record goes back to the stack cache. */
static inline void release_record(struct kr_worker *w, kr_mp *mp)
{
	TSAN_FREE(mp);
	kr__stack_put(w->stacks, mp);
}

/* A detached microprocess that ended on w waits in w->dead until w is
 * surely off its stack: its VP releases it at the next detached end, in
 * the idle loop, or when karui stops. */
static inline void release_dead(struct kr_worker *w)
{
	if (w->dead) {
		release_record(w, w->dead);
		w->dead = NULL;
	}
}

/* ---------------- switching ---------------- */

/* The word the switch away from `self` releases (on_cpu), and what the
 * context resumed completes (done_left, on the worker it runs on).  The
 * sanitizers must see the release of on_cpu, and the switch's store is
 * hidden from them: their builds give the switch a word nobody reads
 * (w->idle.on_cpu) and clear on_cpu in C, through w->left. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static inline uint32_t *left_word(struct kr_worker *w, kr_mp *self)
{
	w->left = self;
	return &w->idle.on_cpu;
}

static inline void done_left(struct kr_worker *w)
{
	__atomic_store_n(&w->left->on_cpu, 0, __ATOMIC_RELEASE);
}
#else
static inline uint32_t *left_word(struct kr_worker *w, kr_mp *self)
{
	(void)w;
	return &self->on_cpu;
}

static inline void done_left(struct kr_worker *w) { (void)w; }
#endif

static inline __attribute__((always_inline)) void claim_cpu(struct kr_worker *w, kr_mp *next)
{
	while (__atomic_load_n(&next->on_cpu, __ATOMIC_ACQUIRE))
		kr_cpu_relax();
	next->on_cpu = 1;
	w->cur = next;
}

/* The context to switch to in order to run `next` (NULL: nothing to run).
 * Waiting for next->on_cpu here, while the caller is itself half switched
 * out, could deadlock: two VPs, each waiting for the microprocess the other
 * is leaving.  So if next has not been released yet (rare), go through the
 * idle context: it completes the caller's switch first, then waits for next
 * holding nothing (w->pending). */
static inline __attribute__((always_inline)) kr_mp *route(struct kr_worker *w, kr_mp *next,
							   kr_ctx **to)
{
	if (next && __atomic_load_n(&next->on_cpu, __ATOMIC_ACQUIRE) == 0) {
		next->on_cpu = 1;
		w->cur = next;
		*to = &next->ctx;
		return next;
	}
	w->pending = next;
	w->cur = NULL;
	*to = &w->idle.ctx;
	return NULL;
}

/* Leave `self` (already queued, sleeping or ended-and-joinable) for `next`,
 * or for the idle loop when next is NULL.  Returns 0 when self is resumed:
 * `return sw_plain(...)` is a tail call. */
static inline __attribute__((always_inline)) int sw_plain(struct kr_worker *w, kr_mp *self,
							  kr_mp *next)
{
	kr_ctx *to;
	next = route(w, next, &to);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#if defined(__SANITIZE_ADDRESS__)
	void *fake;
#endif
	ASAN_START(w, &fake, next);
	TSAN_SWITCH(w, next);
	kr__ctx_switch(&self->ctx, to, left_word(w, self));
	ASAN_FINISH(fake);
	done_left(W());
	return 0;
#else
	return kr__ctx_switch(&self->ctx, to, &self->on_cpu);
#endif
}

/* blocking.c */
void kr__sw_blocked(struct kr_worker *w, kr_mp *self, kr_mp *next);
void kr__blocking_end(struct kr_worker *w);
void kr__spares_kick(void);
int kr__vp_retire(struct kr_worker *w, uint64_t deadline);

/* The general paths' switch: self stops for `why` (trace.h). */
static inline __attribute__((always_inline)) int sw(struct kr_worker *w, kr_mp *self, kr_mp *next,
						    int why)
{
	trace_switch(w, self, next, why);
	if (__builtin_expect(w->blocked, 0)) {
		kr__sw_blocked(w, self, next);
		return 0;
	}
	return sw_plain(w, self, next);
}

/* ---------------- timers ---------------- */

/* The event sources' poll, on VP w (the idle loop's, and a busy VP's at
 * its timers' turn): what a source of its own makes ready, w keeps
 * (sched_default.h: own_keeps).  With several, kr__poll_all (runtime.c)
 * polls each, and sets own_source for each. */
static inline void kr__poll(struct kr_worker *w)
{
	const struct kr__sources *s = __atomic_load_n(&G.src, __ATOMIC_ACQUIRE);
	if (!s)
		return;
	w->own_source = s->own;
	w->waking = KR_BY_IO;
	s->poll(s->arg);
	w->waking = KR_BY_MP;
	w->own_source = 0;
	if (w->kept_at == KR_KEPT_UNDATED)
		w->kept_at = kr_now();
}
/* timer.c */
void kr__timers_run(struct kr_worker *w);
void kr__timers_run_all(void);
void kr__timers_run_of(struct kr_worker *o);
/* blocking.c */
void kr__away_take(struct kr_worker *w);

/* At a scheduling point: at every 8th, if this VP has timers, look at the
 * clock (a clock read costs a few yields), poll the event source if
 * there is one, apply the wakeups posted to the one VP (permit_posts_run), and
 * take over the timers and the queue of VPs inside blocking calls, and
 * the timers of parked spares (kr__away_take, blocking.c).  Idle VPs look
 * at every VP's timers each time round their loop, so a timer is late by
 * at most 8 scheduling points of its VP (or of a running VP, while its
 * own is away) or one idle VP's wake-up.  timers_due says whether this point is one to look;
 * kr__timers_run (timer.c) looks.  The count goes down on every point,
 * timers or not: one decrement and a branch on the fast paths, the four
 * loads of the rest at every 8th only. */
static inline __attribute__((always_inline)) int timers_due(struct kr_worker *w)
{
	if (__builtin_expect(--w->tick != 0, 1))
		return 0;
	w->tick = 8;
	return __atomic_load_n(&w->timers.next, __ATOMIC_RELAXED) != KR_FOREVER ||
	       __atomic_load_n(&G.src, __ATOMIC_RELAXED) ||
	       (__atomic_load_n(&kr__solo, __ATOMIC_RELAXED) & SOLO_POSTED) ||
	       __atomic_load_n(&G.naway, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void timers_poll(struct kr_worker *w)
{
	if (timers_due(w))
		kr__timers_run(w);
}

/* ---------------- scheduling ---------------- */

/* Let the scheduler pick what runs instead of `self`, which does not stay
 * runnable (it sleeps).  kr__block_slow is the general path: the timers' turn
 * (`due`), another scheduler, a busy lock, an empty queue (steal or go
 * idle), a blocking section. */
void kr__block_slow(struct kr_worker *w, kr_mp *self, int why, int due);

/* Inline, with no call in the common case but the switch; callers keep
 * nothing in registers across it (they re-read W()), so that they need
 * not save any of their own.  `why` (trace.h), a constant, reaches only
 * the general path.  Returns 0: `return block(...)` makes the switch a
 * tail call. */
static inline __attribute__((always_inline)) int block(struct kr_worker *w, kr_mp *self, int why)
{
	kr_mp *next;
	int due = timers_due(w);
	if (due || !(next = seam_next_fast(w))) {
		kr__block_slow(w, self, why, due);
		return 0;
	}
	return next != self ? sw_plain(w, self, next) : 0;
}

/* The end of a fast path that made mp ready under a free lock but saw an
 * idle VP (kr__unpark_one); or could not take the lock at once
 * (kr__ready_slow below, spawn_slow in life.c). */
int kr__unpark_one(void); /* runtime.c */

static __attribute__((noinline, unused)) int kr__ready_slow(struct kr_worker *w, kr_mp *mp)
{
	seam_ready(w, mp);
	return 0;
}

/* seam_ready(w, mp) for the fast paths, w NULL off a VP: no call but tail
 * calls.  Returns 0. */
static inline __attribute__((always_inline)) int kr__ready_tail(struct kr_worker *w, kr_mp *mp)
{
	switch (seam_ready_try(w, mp)) {
	case SEAM_READY:
		return 0;
	case SEAM_READY_IDLE:
		return kr__unpark_one();
	default:
		return kr__ready_slow(w, mp);
	}
}

/* A VP's main function (runtime.c): kr_init's VPs, and the spares
 * (blocking.c), whose arg is not NULL. */
void kr__vp_main(kr_vp *vp, void *arg);

#endif
