/*
 * karui L2 — microprocess life cycle, sleep/wakeup and switching.
 *
 * Concepts.  A worker is L2's view of a VP: the microprocess it runs (cur)
 * and an idle context that looks for work when no microprocess can run.
 * The scheduler module (sched.h) decides which microprocess runs next; this
 * file does everything else: create, exit, join, sleep, wakeup, the
 * switches themselves and start-up/shut-down.
 *
 * The hard problem: a microprocess that stops running (yield, sleep, exit)
 * must be findable by other VPs as early as possible, but must not be
 * resumed anywhere before its own VP has finished saving its context.
 * Two words settle it:
 *
 *   on_cpu   1 from the moment a VP decides to run the microprocess until
 *            that VP has switched away from it; cleared (release) by the
 *            *next* context on that VP, right after kr_ctx_switch returns
 *            there (finish()).  Anyone about to run a microprocess first
 *            checks (acquire) that on_cpu == 0, almost always already
 *            true.  So a yielding microprocess can be queued before it
 *            switches, and one going to sleep can be woken before it has
 *            left.  Only a context that holds nothing half switched out
 *            (an idle loop, a running microprocess) may *wait* for on_cpu:
 *            a VP that is leaving X must not wait for Y while the VP that
 *            is leaving Y waits for X.  route() sends such a switch through
 *            the idle context, which finishes leaving X first.
 *   wstate   the wakeup permit: RUN, SLEEP or NOTIFIED.  kr_mp_park moves
 *            RUN -> SLEEP with one CAS *before* switching away (a NOTIFIED
 *            permit makes the CAS fail; kr_mp_park consumes it with an
 *            acquire RMW and returns).  kr_mp_unpark moves SLEEP -> RUN (only
 *            the winner of that CAS makes the microprocess ready: never
 *            twice), or RUN / NOTIFIED -> NOTIFIED, always with a release
 *            RMW, so whoever consumes the permit sees what every waker
 *            wrote before waking it.  A cancel sets its bit in the RMW of
 *            its wakeup.
 *
 * Generations (internal.h).  A record is reused as soon as its microprocess
 * has been joined, or has ended detached, and a handle or an internal
 * wakeup (a server's, an I/O completion's) may still name it.  So wstate
 * and join carry the record's generation, the handles too, and every RMW
 * made for a handle expects the handle's generation: a stale one fails,
 * and acts on nothing.  wstate's generation goes up by one when the
 * microprocess ends, so that from then on no wakeup, cancel or claim acts
 * on it, and the next create takes it as it is; join's stays until the
 * record is reaped.  So a stale handle could name a new life only after
 * 65,535 more.  A record that comes back from the stack pool has been
 * zeroed, and takes the creating VP's count instead, so that it does not
 * start again where its stale handles are (it may, by chance, land on
 * one of them).
 * Rejected: a handle that indexes a table of records (a load more on every
 * call, and a table to grow); the 64-byte alignment's six low bits for more
 * generation bits (a handle would no longer serve as a mutex's owner
 * token, whose low bits the mutex uses).
 *
 * An ending microprocess cannot free its own stack while running on it.
 * It sets on_cpu = 2 before its last switch; finish() on the next context
 * then returns the stack (detached case).  A joiner frees the stack itself
 * after waiting for on_cpu == 0.
 *
 * Join: mp->join holds JS_NONE, JS_DETACHED, JS_DONE, JS_REAPED or the
 * joiner's record.  The joiner CASes NONE -> itself and blocks without
 * going through kr_mp_park: it is in no queue and its permit is untouched
 * (a kr_mp_unpark meant for it stays pending), so only mp's exit can resume
 * it.  The exit CASes NONE -> DONE, or joiner -> REAPED and switches
 * straight to it (no ready queue, no claim: the seed's sleep_and_wakeup);
 * a detached one stores REAPED.  Whoever moves DONE -> REAPED (a join or a
 * detach of an ended microprocess) releases the record: one CAS, one
 * winner.  Before blocking, a joiner walks up the chain of its own joiners
 * (join_cycle): if it leads to the microprocess it joins, the join would
 * wait for itself, and it is undone with EDEADLK.  The registering CAS and
 * the walk's loads are sequentially consistent, so of two joins that
 * close a cycle at once, at least one sees the other.
 *
 * Blocking sections (kr_blocking_enter / _leave) belong to the
 * microprocess: one that switches away inside a section hands its VP back
 * to the others (the VP counts as running again) and takes the section to
 * the VP it resumes on (sw_blocked).
 *
 * Thread pointer: after any switch the code may run on another kernel
 * thread, so the worker is re-read (KR_TLS_GET) after every switch and
 * never kept across one.
 *
 * Rejected: doing all state changes on the next context after the switch
 * (Go's mcall to g0): it costs a second lock round trip on every yield; a
 * mutex per microprocess: an atomic more on every sleep and wakeup.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched_default.h"
#include "../arch/ctx_init.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

__thread struct kr_worker *kr__w __attribute__((tls_model("initial-exec")));

static struct {
	int running;
	uint32_t stopping;
	struct kr_sched sched;
	kr_mp *main;
	kr_mp *handoff;         /* kr_fini: the main mp waiting for VP 0 */
	struct kr_worker *w0;
	kr_vp **vps;            /* VPs 1.. started by kr_init */
	unsigned nvps;
	pthread_mutex_t lock;   /* kr_init against a concurrent kr_init */
	int busy;               /* under lock: from kr_init's check to the end
	                           of its failure, or of kr_fini */
	/* the event source (sched.h) */
	kr_poller poller;
	uint32_t poller_on;     /* poller set: busy VPs poll it */
	struct kr_worker *polling; /* the VP inside poller.wait, if any */
	/* blocking calls: workers that are neither blocked nor parked
	 * spares, and the spare VPs (see kr_blocking_enter) */
	uint32_t active;
	pthread_mutex_t spare_lock;
	pthread_cond_t spare_cv;
	unsigned spare_parked, spare_tokens, nspares;
	kr_vp *spares[KR_VP_MAX];
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .spare_lock = PTHREAD_MUTEX_INITIALIZER,
       .spare_cv = PTHREAD_COND_INITIALIZER};

/* per-worker counters, owner-written, summed by readers */
struct counters {
	unsigned long created, ended;   /* created also numbers the ids */
};
static struct counters cnt[KR_VP_MAX];
/* every worker by VP id, for idle VPs to expire the timers of busy ones */
static struct kr_worker *workers[KR_VP_MAX];

static inline struct kr_worker *W(void) { return KR_TLS_GET(kr__w); }

#define SCHED (&G.sched)
#define OPS (G.sched.ops)
/* The default scheduler is called directly, any other through its ops. */
#define IS_DEFAULT (OPS == &kr_sched_default)
#define NEXT(w, prev)                                                          \
	(IS_DEFAULT ? kr__d_next_in(SCHED, (w)->vp, (w)->sched_vp, prev)            \
		    : OPS->next(SCHED, (w)->vp, prev))
#define TAKE(w, mp, prev)                                                      \
	(IS_DEFAULT ? kr__d_take_in(SCHED, (w)->sched_vp, mp, prev)                 \
	 : OPS->take ? OPS->take(SCHED, (w)->vp, mp, prev) : ESRCH)
/* w may be NULL: a thread that is no VP */
#define READY(w, mp)                                                           \
	(IS_DEFAULT ? kr__d_ready_in(SCHED, (w) ? (w)->sched_vp : NULL, mp)          \
		    : OPS->ready(SCHED, (w) ? (w)->vp : NULL, mp))

/* ---------------- sanitizer annotations of the switch ---------------- */

#if defined(__SANITIZE_ADDRESS__)
static void ctx_bounds(struct kr_worker *w, kr_mp *mp, const void **lo, size_t *sz)
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

/* ---------------- switching ---------------- */

/* On the context that was just resumed: complete the switch away from
 * `from` (NULL when the switch came from an idle loop). */
static inline __attribute__((always_inline)) void finish(void *from)
{
	kr_mp *p = from;
	if (!p)
		return;
	if (__builtin_expect(p->on_cpu == 2, 0)) {
		release_record(W(), p); /* a detached mp that ended */
		return;
	}
	__atomic_store_n(&p->on_cpu, 0, __ATOMIC_RELEASE);
}

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
	*to = &w->idle_ctx;
	return NULL;
}

/* Leave `self` (already queued, sleeping or ended-and-joinable) for `next`,
 * or for the idle loop when next is NULL.  Returns when self is resumed. */
static inline __attribute__((always_inline)) void sw_plain(struct kr_worker *w, kr_mp *self,
							   kr_mp *next)
{
	kr_ctx *to;
	next = route(w, next, &to);
#if defined(__SANITIZE_ADDRESS__)
	void *fake;
	ASAN_START(w, &fake, next);
	TSAN_SWITCH(w, next);
	finish(kr__ctx_switch(&self->ctx, to, self));
	ASAN_FINISH(fake);
#else
	TSAN_SWITCH(w, next);
	finish(kr__ctx_switch(&self->ctx, to, self));
#endif
}

static void blocking_begin(struct kr_worker *w);
static void blocking_end(struct kr_worker *w);

/* A switch away inside a blocking section: the VP counts as running while
 * self waits, and the section goes on where self resumes. */
static __attribute__((noinline)) void sw_blocked(struct kr_worker *w, kr_mp *self, kr_mp *next)
{
	blocking_end(w);
	sw_plain(w, self, next);
	blocking_begin(W());
}

static inline __attribute__((always_inline)) void sw(struct kr_worker *w, kr_mp *self, kr_mp *next)
{
	if (__builtin_expect(w->blocked, 0))
		sw_blocked(w, self, next);
	else
		sw_plain(w, self, next);
}

/* ---------------- timers ---------------- */

static int claim_sleeper(kr_mp *mp);

/* A deadline passed: end the sleep unless a wakeup ended it first. */
static void timer_fire(struct kr_timer *t)
{
	kr_mp *mp = t->mp;
	int won = claim_sleeper(mp);
	t->won = won;
	__atomic_store_n(&t->state, KR_TIMER_FIRED, __ATOMIC_RELEASE);
	if (won) /* mp cannot run before this: the claim made us its waker */
		READY(W(), mp);
}

/* At a scheduling point: while this VP has timers, look at the clock (31 ns
 * here, three yields' worth) at every 8th point.  Idle VPs look at every
 * VP's timers each time round their loop, so a timer is late by at most
 * 8 scheduling points of its VP or one idle VP's wake-up.  timers_due says
 * whether this point is one to look; timers_run looks. */
static inline __attribute__((always_inline)) int timers_due(struct kr_worker *w)
{
	return __builtin_expect(__atomic_load_n(&w->timers.next, __ATOMIC_RELAXED) != KR_FOREVER ||
				__atomic_load_n(&G.poller_on, __ATOMIC_RELAXED), 0) &&
	       !(++w->ticks & 7);
}

static __attribute__((noinline)) void timers_run(struct kr_worker *w)
{
	if (__atomic_load_n(&G.poller_on, __ATOMIC_ACQUIRE))
		G.poller.poll(G.poller.arg);
	uint64_t next = __atomic_load_n(&w->timers.next, __ATOMIC_RELAXED);
	if (next == KR_FOREVER)
		return;
	uint64_t now = kr_now();
	if (now >= next)
		kr__timers_expire(&w->timers, now, timer_fire);
}

static inline __attribute__((always_inline)) void timers_poll(struct kr_worker *w)
{
	if (timers_due(w))
		timers_run(w);
}

static void timers_run_all(void)
{
	uint64_t now = 0;
	for (unsigned i = 0; i < KR_VP_MAX; i++) {
		struct kr_worker *o = __atomic_load_n(&workers[i], __ATOMIC_ACQUIRE);
		if (!o)
			continue;
		uint64_t next = __atomic_load_n(&o->timers.next, __ATOMIC_ACQUIRE);
		if (next == KR_FOREVER)
			continue;
		if (!now)
			now = kr_now();
		if (now >= next)
			kr__timers_expire(&o->timers, now, timer_fire);
	}
}

uint64_t kr_sched_idle_deadline(void)
{
	uint64_t first = KR_FOREVER;
	for (unsigned i = 0; i < KR_VP_MAX; i++) {
		struct kr_worker *o = __atomic_load_n(&workers[i], __ATOMIC_ACQUIRE);
		uint64_t next = o ? __atomic_load_n(&o->timers.next, __ATOMIC_ACQUIRE) : KR_FOREVER;
		if (next < first)
			first = next;
	}
	return first;
}

/* ---------------- the event source ---------------- */

int kr_poller_set(const kr_poller *p)
{
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	if (p && (!p->poll || !p->wait || (!p->kick && !(p->flags & KR_POLLER_PER_VP))))
		return EINVAL;
	pthread_mutex_lock(&G.lock);
	int err = 0;
	if (p && G.poller_on)
		err = EBUSY;
	else if (p) {
		G.poller = *p;
		__atomic_store_n(&G.poller_on, 1, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&G.poller_on, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&G.lock);
	return err;
}

/* Each VP waits on its own event source (KR_POLLER_PER_VP), which takes
 * L0 wakeups itself; or one VP at a time waits on a shared source and the
 * others sleep on L0.  Lost wakeups in the second case: the poller
 * publishes itself (seq_cst) and then takes a pending L0 wakeup if there
 * is one; kr_sched_unpark posts the L0 wakeup (seq_cst) and then looks for
 * a poller to kick.  One of the two sees the other, as in L0's own
 * protocol. */
void kr_sched_park(uint64_t deadline)
{
	uint64_t trim = kr__stacks_trim(kr_now());
	if (trim < deadline)
		deadline = trim;
	struct kr_worker *w = W(), *none = NULL;
	int on = w && __atomic_load_n(&G.poller_on, __ATOMIC_ACQUIRE);
	if (on && (G.poller.flags & KR_POLLER_PER_VP)) {
		G.poller.wait(G.poller.arg, deadline);
		return;
	}
	if (on && __atomic_compare_exchange_n(&G.polling, &none, w, 0, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED)) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (kr_vp_sleep(0) != 0) {
			kr_vp_publish(KR_VP_SLEEPING);
			G.poller.wait(G.poller.arg, deadline);
			kr_vp_publish(KR_VP_RUNNING);
		}
		__atomic_store_n(&G.polling, NULL, __ATOMIC_RELEASE);
		return;
	}
	kr_vp_sleep(deadline);
}

void kr_sched_unpark(unsigned n)
{
	kr_vp_wakeup(n);
	/* G.polling is set only for a shared source (never KR_POLLER_PER_VP),
	 * after kr_sched_park saw poller_on: reading G.poller before it
	 * would race with kr_poller_set filling it in. */
	struct kr_worker *p = __atomic_load_n(&G.polling, __ATOMIC_SEQ_CST);
	/* the poller itself wakes microprocesses from inside its wait */
	if (p && p != W())
		G.poller.kick(G.poller.arg);
}

/* Let the scheduler pick what runs instead of `self`, which does not stay
 * runnable (it sleeps).  block_slow is the general path: the timers' turn
 * (`due`), another scheduler, a busy lock, an empty queue (steal or go
 * idle), a blocking section. */
static __attribute__((noinline)) void block_slow(struct kr_worker *w, kr_mp *self, int due)
{
	if (due)
		timers_run(w);
	kr_mp *next = NEXT(w, NULL);
	if (next == self)
		return; /* woken and popped again before we even left */
	sw(w, self, next);
}

/* Inline, with no call in the common case but the switch; callers keep
 * nothing in registers across it (they re-read W()), so that they need
 * not save any of their own. */
static inline __attribute__((always_inline)) void block(struct kr_worker *w, kr_mp *self)
{
	kr_mp *next;
	int due = timers_due(w);
	if (due || !IS_DEFAULT || w->blocked ||
	    !(next = kr__d_next_try(SCHED, w->sched_vp, NULL)))
		block_slow(w, self, due);
	else if (next != self)
		sw_plain(w, self, next);
}

static void idle_loop(struct kr_worker *w);

/* The end of a fast path that made mp ready under a free lock but saw an
 * idle VP; or could not take the lock at once. */
static __attribute__((noinline)) int unpark_one(void)
{
	kr_sched_unpark(1);
	return 0;
}

static __attribute__((noinline)) int ready_slow(struct kr_worker *w, kr_mp *mp)
{
	READY(w, mp);
	return 0;
}

/* READY(w, mp) for the fast paths: no call but tail calls.  Returns 0. */
static inline __attribute__((always_inline)) int ready_tail(struct kr_worker *w, kr_mp *mp)
{
	if (!w || !IS_DEFAULT)
		return ready_slow(w, mp);
	switch (kr__d_ready_try(SCHED, w->sched_vp, mp)) {
	case KR_D_READY:
		return 0;
	case KR_D_READY_IDLE:
		return unpark_one();
	default:
		return ready_slow(w, mp);
	}
}

/* ---------------- sleep / wakeup ---------------- */

/* Use up a pending permit: NOTIFIED -> RUN, the generation and a pending
 * cancel stay.  An acquire RMW, so that the sleeper sees what
 * every waker did before its (release RMW) wakeup: a plain store here lost
 * wakeups, the waker's data store and the sleeper's re-check passing each
 * other in the store buffers (tests/test_core.c's mixed stress found it). */
static inline void consume_permit(kr_mp *self)
{
	__atomic_fetch_or(&self->wstate, WS_RUN, __ATOMIC_ACQ_REL);
}

/* RUN -> SLEEP, before the switch away; 0 if a pending permit ended that
 * sleep at once (consumed).  Others change the word of a running
 * microprocess only to NOTIFIED (a cancel with it), so a failed CAS means
 * a permit. */
static inline int announce_sleep(kr_mp *self)
{
	uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
	if ((s & WS_STATE) == WS_RUN &&
	    __atomic_compare_exchange_n(&self->wstate, &s, s + 1, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return 1;
	consume_permit(self);
	return 0;
}

static void sleep_self(struct kr_worker *w, kr_mp *self)
{
	if (announce_sleep(self))
		block(w, self);
}

int kr_mp_park(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	sleep_self(w, w->cur);
	return 0;
}

/* Claim mp, whose wstate read s, if it sleeps: SLEEP -> RUN.  1: the
 * caller now owns making it run.  Testing s first keeps a failing CAS (an
 * atomic) off the common path of switching to a runnable microprocess;
 * the CAS expects s, generation included. */
static inline int claim_read(kr_mp *mp, uint32_t s)
{
	return (s & WS_STATE) == WS_SLEEP &&
	       __atomic_compare_exchange_n(&mp->wstate, &s, s - 1, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Claim a sleeping mp of any generation: the record of a sleep that holds
 * still (a timer's, whose node lives as long as the sleep; kr_fini's). */
static int claim_sleeper(kr_mp *mp)
{
	return claim_read(mp, __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED));
}

/* Back out of a sleep that has been announced (SLEEP) but not started.
 * 1: done; 0: a wakeup came in between and made us ready, so we block
 * (returning at once or soon) to keep the ready queue consistent. */
static int unsleep(struct kr_worker *w, kr_mp *self)
{
	if (claim_sleeper(self))
		return 1;
	block(w, self);
	return 0;
}

/* The timer is armed after the announcement RUN -> SLEEP, so that it can
 * only end this sleep; a fire before the switch away is a wakeup racing
 * with block(), which the on_cpu protocol already handles.  Out of line,
 * so that the timer's frame stays off the untimed sleeps' path. */
static __attribute__((noinline)) int sleep_deadline(struct kr_worker *w, kr_mp *self,
						    uint64_t deadline)
{
	if (!announce_sleep(self))
		return 0;
	if (kr_now() >= deadline)
		return unsleep(w, self) ? ETIMEDOUT : 0;
	struct kr_timer t = {.when = deadline, .mp = self};
	int err = kr__timer_arm(&w->timers, &t);
	if (err)
		return unsleep(w, self) ? err : 0;
	block(w, self);
	if (kr__timer_cancel(&t))
		return 0;
	return t.won ? ETIMEDOUT : 0;
}

static inline int sleep_timed(struct kr_worker *w, kr_mp *self, uint64_t deadline)
{
	if (deadline == KR_FOREVER) {
		sleep_self(w, self);
		return 0;
	}
	return sleep_deadline(w, self, deadline);
}

int kr_mp_park_until(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	return sleep_timed(w, w->cur, deadline);
}

/* Consume a pending cancel.  The plain load keeps the RMW off the common
 * path; the acquire pairs with kr_mp_cancel's release. */
static inline int take_cancel(kr_mp *self)
{
	return (__atomic_load_n(&self->wstate, __ATOMIC_RELAXED) & WS_CANCEL) &&
	       (__atomic_fetch_and(&self->wstate, ~(uint32_t)WS_CANCEL, __ATOMIC_ACQUIRE) &
		WS_CANCEL);
}

/* A cancel stored before its wakeup is seen after any sleep that wakeup
 * ends, or that a permit it left ends at once.  The record is read again
 * after the sleep rather than kept in a register across it (see block). */
int kr_mp_park_cancellable(uint64_t deadline)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (take_cancel(w->cur))
		return ECANCELED;
	int err = sleep_timed(w, w->cur, deadline);
	return take_cancel(W()->cur) ? ECANCELED : err;
}

int kr_mp_sleep_until(uint64_t deadline)
{
	if (!W())
		return EPERM;
	int woken = 0, err;
	while ((err = kr_mp_park_cancellable(deadline)) == 0)
		woken = 1;
	if (woken) /* keep the wakeups that came meanwhile for the next kr_mp_park */
		__atomic_fetch_and(&W()->cur->wstate, ~(uint32_t)WS_STATE, __ATOMIC_RELEASE);
	return err == ETIMEDOUT ? 0 : err;
}

int kr_mp_sleep_for(uint64_t ns)
{
	uint64_t now = kr_now();
	return kr_mp_sleep_until(ns > KR_FOREVER - 1 - now ? KR_FOREVER - 1 : now + ns);
}

/* Is h of another generation than wstate word s?  Generation 0 is no
 * handle's (the pointers that scheduler modules are given have it): it
 * matches only a record fresh from the pool, where an RMW of a wakeup
 * changes nothing that the record's next create keeps. */
static inline int gen_differs(const kr_mp *h, uint32_t s)
{
	return ((uint32_t)((uintptr_t)h >> (KR_GEN_SHIFT - 16)) ^ s) & WS_GEN;
}

/* Does h name a life of its record that has not ended? */
static inline int live_handle(const kr_mp *h)
{
	return !gen_differs(h, __atomic_load_n(&kr__rec(h)->wstate, __ATOMIC_ACQUIRE));
}

/* kr_mp_unpark, kr_mp_cancel (the cancel bit goes in with the wakeup) and
 * kr__wake_waiter; `ended` is what a stale handle gets.  Always an RMW,
 * even on a permit that is already set (NOTIFIED -> NOTIFIED): the release
 * of every wakeup must reach the sleeper that consumes the permit.  Like
 * create, no call in the common case, tail calls otherwise. */
static inline __attribute__((always_inline)) int wake(kr_mp *h, int cancel, int ended)
{
	kr_mp *mp = kr__rec(h);
	if (!mp)
		return EINVAL;
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	uint32_t s = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED), to;
	do {
		if (gen_differs(h, s)) /* stale, or ended */
			return ended;
		/* SLEEP -> RUN, RUN -> NOTIFIED, NOTIFIED stays */
		to = (s - ((s & WS_STATE) != WS_NOTIFIED)) | (cancel ? WS_CANCEL : 0);
	} while (!__atomic_compare_exchange_n(&mp->wstate, &s, to, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return (s & WS_STATE) == WS_SLEEP ? ready_tail(W(), mp) : 0;
}

int kr_mp_unpark(kr_mp *mp) { return wake(mp, 0, ESRCH); }
int kr_mp_cancel(kr_mp *mp) { return wake(mp, 1, ESRCH); }
int kr__wake_waiter(kr_mp *mp) { return wake(mp, 0, 0); }

/* The checks of a direct switch from the caller to h; *mp: its record,
 * *s: its wstate, of h's generation. */
static inline int direct_target_ok(struct kr_worker *w, kr_mp *h, kr_mp **mp, uint32_t *s)
{
	if (!w)
		return EPERM;
	*mp = kr__rec(h);
	if (!*mp)
		return EINVAL;
	if (*mp == w->cur) /* the caller, or a stale handle of its record */
		return h == w->cur->handle ? EINVAL : ESRCH;
	*s = __atomic_load_n(&(*mp)->wstate, __ATOMIC_RELAXED);
	return gen_differs(h, *s) ? ESRCH : 0;
}

/* A direct switch's target was neither asleep nor queued: running, being
 * woken, or it has ended meanwhile. */
static __attribute__((noinline)) int not_taken(const kr_mp *h)
{
	return live_handle(h) ? EBUSY : ESRCH;
}

/* The general end of a direct switch to mp, which the caller has already
 * claimed or taken out of its queue: make self ready (SELF_READY), or
 * wake an idle VP for self, which is queued (SELF_UNPARK), then switch. */
enum { SELF_QUEUED, SELF_READY, SELF_UNPARK };
static __attribute__((noinline)) int direct_slow(struct kr_worker *w, kr_mp *self, kr_mp *mp,
						 int how)
{
	if (how == SELF_READY)
		READY(w, self);
	else if (how == SELF_UNPARK)
		kr_sched_unpark(1);
	sw(w, self, mp);
	return 0;
}

/* What a direct switch still owes for self after kr__d_ready_try. */
static inline int owed(int ready)
{
	return ready == KR_D_READY ? SELF_QUEUED : ready == KR_D_BUSY ? SELF_READY : SELF_UNPARK;
}

static __attribute__((noinline)) int switch_to_slow(struct kr_worker *w, kr_mp *self, kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (TAKE(w, mp, self) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp, SELF_QUEUED);
}

/* Like kr_mp_yield, no call in the common case but the switch; inside a
 * blocking section the general path (direct_slow's sw). */
int kr_mp_switch_to(kr_mp *h)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	uint32_t s;
	int err = direct_target_ok(w, h, &mp, &s);
	if (err)
		return err;
	kr_mp *self = w->cur;
	if (claim_read(mp, s)) {
		int how = owed(IS_DEFAULT ? kr__d_ready_try(SCHED, w->sched_vp, self) : KR_D_BUSY);
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how);
	} else {
		int r = IS_DEFAULT ? kr__d_take_try(SCHED, w->sched_vp, mp, self) : KR_D_BUSY;
		if (r == KR_D_ABSENT)
			return not_taken(h);
		if (r == KR_D_BUSY)
			return switch_to_slow(w, self, h);
		if (w->blocked)
			return direct_slow(w, self, mp, SELF_QUEUED);
	}
	sw_plain(w, self, mp);
	return 0;
}

static __attribute__((noinline)) int sleep_and_wakeup_slow(struct kr_worker *w, kr_mp *self,
							   kr_mp *h)
{
	kr_mp *mp = kr__rec(h);
	if (TAKE(w, mp, NULL) != 0)
		return not_taken(h);
	return direct_slow(w, self, mp, announce_sleep(self) ? SELF_QUEUED : SELF_READY);
}

int kr_mp_park_and_switch(kr_mp *h)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	uint32_t s;
	int err = direct_target_ok(w, h, &mp, &s);
	if (err)
		return err;
	kr_mp *self = w->cur;
	if (!claim_read(mp, s)) {
		int r = IS_DEFAULT ? kr__d_take_try(SCHED, w->sched_vp, mp, NULL) : KR_D_BUSY;
		if (r == KR_D_ABSENT)
			return not_taken(h);
		if (r == KR_D_BUSY)
			return sleep_and_wakeup_slow(w, self, h);
	}
	if (!announce_sleep(self)) {
		/* a pending permit: the caller's sleep ends at once, so it
		 * stays runnable behind mp */
		int how = owed(IS_DEFAULT ? kr__d_ready_try(SCHED, w->sched_vp, self) : KR_D_BUSY);
		if (how != SELF_QUEUED || w->blocked)
			return direct_slow(w, self, mp, how);
	} else if (w->blocked) {
		return direct_slow(w, self, mp, SELF_QUEUED);
	}
	sw_plain(w, self, mp);
	return 0;
}

/* kr_mp_yield's general path: the timers' turn (`due`), another scheduler, a
 * busy queue lock, a blocking section. */
static __attribute__((noinline)) int yield_slow(struct kr_worker *w, int due)
{
	kr_mp *self = w->cur;
	if (due)
		timers_run(w);
	kr_mp *next = NEXT(w, self);
	if (next != self)
		sw(w, self, next);
	return 0;
}

/* The common case makes no call but the switch, and what it leaves to the
 * general path it leaves with a tail call: so kr_mp_yield saves no register of
 * its own, the switch saves the caller's (seed 002). */
int kr_mp_yield(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (timers_due(w))
		return yield_slow(w, 1);
	kr_mp *self = w->cur, *next;
	if (!self) /* a microprocess runs: tells the compiler that self is pushed */
		__builtin_unreachable();
	if (!IS_DEFAULT || w->blocked || !(next = kr__d_next_try(SCHED, w->sched_vp, self)))
		return yield_slow(w, 0);
	if (next != self)
		sw_plain(w, self, next);
	return 0;
}

kr_mp *kr_mp_self(void) { return kr__self(); }

/* Does h name a life of its record that has not been reaped (it may have
 * ended: its id and priority still hold)? */
static inline int same_gen(const kr_mp *h)
{
	uintptr_t gen = (uintptr_t)h & ~KR_ADDR_MASK;
	return gen && (__atomic_load_n(&kr__rec(h)->join, __ATOMIC_RELAXED) & ~KR_ADDR_MASK) == gen;
}

unsigned long kr_mp_id(const kr_mp *mp)
{
	return kr__rec(mp) && same_gen(mp) ? kr__rec(mp)->id : 0;
}

/* ---------------- create / exit / join / detach ---------------- */

static kr_ctx_transfer mp_end(kr_mp *self, void *result);

/* A microprocess's first frame.  It returns where to go once the
 * microprocess is over, so that the switch away happens from the
 * trampoline with every call matched by its return (see switch.S). */
static kr_ctx_transfer mp_entry(void *from)
{
	finish(from);
	ASAN_FINISH(NULL);
	kr_mp *self = W()->cur;
	void *result = self->fn(self->arg);
	kr_ctx_transfer t = mp_end(W()->cur, result); /* self, read again */
#if defined(__SANITIZE_THREAD__)
	/* TSan keeps a shadow call stack per fiber: announce the switch only
	 * where no function returns after it */
	TSAN_SWITCH(W(), W()->cur);
	kr__ctx_jump(t.to, t.arg);
#endif
	return t;
}

/* Fill in a record fresh from the stack cache and store its handle in
 * *out.  The generation is wstate's, which the last life's end moved on,
 * or, for a record fresh from the pool (it reads 0), the creating VP's
 * count, odd: never 0.  No RMW made for a stale handle
 * changes the record's words (see end_rest), so plain stores will do: the
 * handle reaches others through the creator. */
static inline __attribute__((always_inline)) void mp_setup(struct kr_worker *w, kr_mp *mp,
							  unsigned flags, int prio, kr_mp_fn fn,
							  void *arg, kr_mp **out)
{
	mp->fn = fn; /* result shares its slot: written when it ends */
	mp->arg = arg;
	mp->on_cpu = 0;
	mp->prio = prio;
	mp->upper = 0;
	struct counters *c = w->cnt;
	unsigned long n = c->created + 1;
	mp->id = n * KR_VP_MAX + w->vp->id;
	__atomic_store_n(&c->created, n, __ATOMIC_RELAXED);
	uint32_t g = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED) & WS_GEN;
	if (__builtin_expect(!g, 0))
		g = (uint32_t)(n | 1) << 16;
	__atomic_store_n(&mp->wstate, g | WS_RUN, __ATOMIC_RELAXED);
	uintptr_t hg = (uintptr_t)g << (KR_GEN_SHIFT - 16);
	__atomic_store_n(&mp->join, hg | ((flags & KR_MP_DETACHED) ? JS_DETACHED : JS_NONE),
			 __ATOMIC_RELAXED);
	kr_mp *h = (kr_mp *)((uintptr_t)mp | hg);
	mp->handle = h;
	*out = h;
	kr__ctx_init_below(&mp->ctx, mp, mp_entry, kr__ctx_trampoline_counted); /* the stack ends at its record */
	TSAN_NEW(mp);
}

/* kr_mp_create in full: the checks, attributes, a stack from beyond the
 * cache's first list, any scheduler, a busy queue lock. */
static __attribute__((noinline)) int create_slow(kr_mp **out, const kr_attr *attr, kr_mp_fn fn,
						 void *arg)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (!out || !fn)
		return EINVAL;
	size_t size = KR_STACK_DEFAULT;
	unsigned flags = 0;
	int prio = w->cur->prio;
	if (attr) {
		flags = attr->flags;
		if (flags & ~(unsigned)(KR_MP_DETACHED | KR_MP_NOGUARD | KR_MP_PRIO))
			return EINVAL;
		if (attr->stack_size) {
			if (attr->stack_size < KR_STACK_MIN || attr->stack_size > KR_STACK_MAX)
				return EINVAL;
			size = kr__stack_class_size(attr->stack_size);
		}
		if (flags & KR_MP_PRIO) {
			if (attr->prio < KR_PRIO_MIN || attr->prio > KR_PRIO_MAX)
				return EINVAL;
			prio = attr->prio;
		}
	}
	kr_mp *mp = kr__stack_get_fast(w->stacks, size, !(flags & KR_MP_NOGUARD));
	if (!mp)
		return ENOMEM;
	mp_setup(w, mp, flags, prio, fn, arg, out);
	READY(w, mp);
	return 0;
}

/* The common case (no attributes, a cached stack, the default scheduler
 * with its lock free) makes no call, and leaves the rest with tail calls:
 * kr_mp_create saves no register of its own. */
int kr_mp_create(kr_mp **out, const kr_attr *attr, kr_mp_fn fn, void *arg)
{
	struct kr_worker *w = W();
	kr_mp *mp;
	if (__builtin_expect(!w || !out || !fn || attr, 0) ||
	    !(mp = kr__stack_take(w->stacks, KR_STACK_DEFAULT, 1)))
		return create_slow(out, attr, fn, arg);
	mp_setup(w, mp, 0, w->cur->prio, fn, arg, out);
	return ready_tail(w, mp);
}

/* The microprocess ends: publish its result and pick the context to resume.
 * The caller makes the switch (trampoline return or kr_ctx_jump). */
/* mp_end without a joiner to resume (detached, or not joined yet): the
 * scheduler picks what runs next. */
static __attribute__((noinline)) kr_ctx_transfer end_next(struct kr_worker *w, kr_mp *self)
{
	timers_poll(w);
	kr_mp *next = NEXT(w, NULL);
	kr_ctx *to;
	next = route(w, next, &to);
	ASAN_START(w, NULL, next);
	return (kr_ctx_transfer){to, self};
}

static inline __attribute__((always_inline)) kr_ctx_transfer end_rest(struct kr_worker *w,
									 kr_mp *self, void *result)
{
	self->result = result;
	struct counters *c = w->cnt;
	__atomic_store_n(&c->ended, c->ended + 1, __ATOMIC_RELAXED);
	kr_mp *next = NULL;
	uintptr_t j = __atomic_load_n(&self->join, __ATOMIC_ACQUIRE);
	/* The next generation (65535 wraps to 1): from now on a wakeup or
	 * cancel made for this life fails, and one that this store overwrites
	 * is owed to no one. */
	uint32_t g = (__atomic_load_n(&self->wstate, __ATOMIC_RELAXED) & WS_GEN) + (1u << 16);
	__atomic_store_n(&self->wstate, g ? g : 1u << 16, __ATOMIC_RELEASE);
	for (;;) {
		uintptr_t st = j & KR_ADDR_MASK;
		if (st == JS_DETACHED) {
			__atomic_store_n(&self->join, JS_REAPED, __ATOMIC_RELAXED);
			self->on_cpu = 2; /* finish() on the next context frees us */
			break;
		}
		if (__atomic_compare_exchange_n(&self->join, &j, st == JS_NONE ? j | JS_DONE : JS_REAPED,
						0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (st != JS_NONE)
				next = (kr_mp *)st; /* the joiner waits for us alone */
			break;
		}
	}
	if (!next)
		return end_next(w, self);
	kr_ctx *to;
	next = route(w, next, &to);
	ASAN_START(w, NULL, next);
	return (kr_ctx_transfer){to, self};
}

/* Keys to destroy, or a blocking section left open. */
static __attribute__((noinline)) kr_ctx_transfer end_slow(kr_mp *self, void *result)
{
	if (self->keys)
		kr__keys_run_destructors(self); /* may block: w is read after */
	struct kr_worker *w = W();
	if (w->blocked)
		blocking_end(w);
	return end_rest(w, self, result);
}

/* Like the other fast paths (see kr_mp_yield), no call when a joiner waits and
 * no key is set: the general cases are tail calls. */
static kr_ctx_transfer mp_end(kr_mp *self, void *result)
{
	struct kr_worker *w = W();
	if (__builtin_expect(self->keys || w->blocked, 0))
		return end_slow(self, result);
	return end_rest(w, self, result);
}

int kr_mp_exit(void *result)
{
	struct kr_worker *w = W();
	if (!w || w->cur->is_main)
		return EPERM;
	kr_ctx_transfer t = mp_end(w->cur, result);
	TSAN_SWITCH(W(), W()->cur);
	kr__ctx_jump(t.to, t.arg);
}

/* Walk up the chain of self's joiners, self having just registered as
 * mp's joiner: each of them waits, directly or through the others, for
 * self, which runs, so none can end meanwhile and the chain holds still
 * but for newcomers; it ends at a microprocess that nobody joins, or at mp,
 * and then the join would wait for itself.  1: a cycle, and the
 * registration undone; 0: none, or mp ended meanwhile (its exit, which
 * the undo's CAS lost to, is on its way to self). */
static __attribute__((noinline)) int join_cycle(kr_mp *self, kr_mp *mp, uintptr_t gen)
{
	uintptr_t x = __atomic_load_n(&self->join, __ATOMIC_SEQ_CST) & KR_ADDR_MASK;
	while (x > JS_DONE && (kr_mp *)x != mp)
		x = __atomic_load_n(&((kr_mp *)x)->join, __ATOMIC_SEQ_CST) & KR_ADDR_MASK;
	uintptr_t j = gen | (uintptr_t)self;
	return (kr_mp *)x == mp &&
	       __atomic_compare_exchange_n(&mp->join, &j, gen | JS_NONE, 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

/* The end of a join: mp has ended, and the caller reaped it. */
static inline __attribute__((always_inline)) int reap(kr_mp *mp, void **result)
{
	while (__atomic_load_n(&mp->on_cpu, __ATOMIC_ACQUIRE))
		kr_cpu_relax();
	if (result)
		*result = mp->result;
	release_record(W(), mp);
	return 0;
}

/* A join that found mp's join word other than NONE of its generation, j. */
static __attribute__((noinline)) int join_other(kr_mp *mp, uintptr_t j, uintptr_t gen,
						 void **result)
{
	for (;;) {
		uintptr_t st = j & KR_ADDR_MASK;
		if ((j ^ st) != gen || !gen) /* another life, or REAPED */
			return ESRCH;
		if (st != JS_DONE)
			return EINVAL; /* detached, or someone else joins it */
		/* ended: whoever reaps it releases it */
		if (__atomic_compare_exchange_n(&mp->join, &j, JS_REAPED, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return reap(mp, result);
	}
}

/* The common case (mp has not ended: register, block, reap) tries the CAS
 * that registers the caller as the joiner first; anything else is
 * join_other's. */
int kr_mp_join(kr_mp *h, void **result)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	uintptr_t gen = (uintptr_t)h & ~KR_ADDR_MASK, j = gen; /* NONE */
	kr_mp *mp = (kr_mp *)((uintptr_t)h ^ gen);
	if (!mp)
		return EINVAL;
	kr_mp *self = w->cur;
	if (mp == self) /* the caller, or a stale handle of its record */
		return h == self->handle ? EDEADLK : ESRCH;
	if (!__atomic_compare_exchange_n(&mp->join, &j, gen | (uintptr_t)self, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_ACQUIRE))
		return join_other(mp, j, gen, result);
	if (__builtin_expect((__atomic_load_n(&self->join, __ATOMIC_SEQ_CST) & KR_ADDR_MASK) >
			     JS_DONE, 0) &&
	    join_cycle(self, mp, gen))
		return EDEADLK;
	/* Not a kr_mp_park: the joiner is in no queue and its permit is
	 * untouched, so nothing but mp's exit resumes it. */
	block(w, self);
	return reap(mp, result);
}

int kr_mp_detach(kr_mp *h)
{
	if (!W())
		return EPERM;
	kr_mp *mp = kr__rec(h);
	if (!mp)
		return EINVAL;
	uintptr_t gen = (uintptr_t)h & ~KR_ADDR_MASK, st;
	uintptr_t j = __atomic_load_n(&mp->join, __ATOMIC_ACQUIRE);
	do {
		st = j & KR_ADDR_MASK;
		if ((j ^ st) != gen || !gen) /* another life, or REAPED */
			return ESRCH;
		if (st != JS_NONE && st != JS_DONE)
			return EINVAL; /* detached already, or being joined */
	} while (!__atomic_compare_exchange_n(&mp->join, &j,
					      st == JS_NONE ? gen | JS_DETACHED : JS_REAPED, 0,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	if (st == JS_NONE)
		return 0;
	/* ended, never joined: free it now */
	while (__atomic_load_n(&mp->on_cpu, __ATOMIC_ACQUIRE))
		kr_cpu_relax();
	release_record(W(), mp);
	return 0;
}

/* ---------------- priorities ---------------- */

int kr_mp_setprio(kr_mp *h, int prio)
{
	kr_mp *mp = kr__rec(h);
	if (!mp || prio < KR_PRIO_MIN || prio > KR_PRIO_MAX)
		return EINVAL;
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	if (!live_handle(h))
		return ESRCH;
	if (OPS->reprio)
		OPS->reprio(SCHED, mp, prio);
	else
		__atomic_store_n(&mp->prio, prio, __ATOMIC_RELAXED);
	return 0;
}

int kr_mp_getprio(const kr_mp *h, int *prio)
{
	if (!kr__rec(h) || !prio)
		return EINVAL;
	if (!same_gen(h))
		return ESRCH;
	*prio = __atomic_load_n(&kr__rec(h)->prio, __ATOMIC_RELAXED);
	return 0;
}

/* Modules are given records (generation 0); a handle will do too. */
kr_rq_link *kr_mp_rqlink(kr_mp *mp) { return &kr__rec(mp)->link; }
int kr_mp_prio(const kr_mp *mp) { return __atomic_load_n(&kr__rec(mp)->prio, __ATOMIC_RELAXED); }

void **kr_sched_data(kr_sched *s) { return &s->data; }

void **kr_sched_vp_data(kr_vp *vp)
{
	return &((struct kr_worker *)vp->upper)->sched_vp;
}

/* ---------------- VPs and the idle loop ---------------- */

/* Blocking calls.  karui keeps `active` (workers neither inside a blocking
 * call nor parked as spares) at the configured VP count: a microprocess
 * that enters a blocking call takes its VP out of `active`, and if that
 * leaves too few, a parked spare VP is resumed or a new one started; it
 * runs the other microprocesses (the blocked VP's queue too: idle VPs
 * steal, shared queues are shared).  When the call returns, the VP counts
 * again, and a spare that goes idle while there are too many parks
 * (spare_retire).  Spares stay until kr_fini.  Both tell the event
 * source first (its `leave`), which moves requests only this VP would
 * see complete. */
static void vp_main(kr_vp *vp, void *arg);

/* This VP stops looking at the event source for a while. */
static void poller_leave(void)
{
	if (__atomic_load_n(&G.poller_on, __ATOMIC_ACQUIRE) && G.poller.leave)
		G.poller.leave(G.poller.arg);
}

static void spare_run(void)
{
	pthread_mutex_lock(&G.spare_lock);
	__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
	if (G.spare_parked) {
		G.spare_parked--;
		G.spare_tokens++;
		pthread_cond_signal(&G.spare_cv);
	} else if (G.nspares < KR_VP_MAX &&
		   kr_vp_allocate(1, vp_main, &G.spares, &G.spares[G.nspares]) == 0) {
		G.nspares++;
	} else {
		/* no thread: the blocked VP's work waits for it */
		__atomic_fetch_sub(&G.active, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&G.spare_lock);
}

static void spare_retire(struct kr_worker *w)
{
	uint32_t a = __atomic_load_n(&G.active, __ATOMIC_RELAXED);
	while (a > G.sched.nvp)
		if (__atomic_compare_exchange_n(&G.active, &a, a - 1, 1, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			break;
	if (a <= G.sched.nvp)
		return;
	poller_leave();
	/* A shared event source needs a VP waiting in it whenever all are
	 * idle.  This one may have been that VP while the others went to
	 * sleep on L0 (kr_sched_park), and it is not coming back: wake one
	 * of them to take its place. */
	if (__atomic_load_n(&G.poller_on, __ATOMIC_ACQUIRE) &&
	    !(G.poller.flags & KR_POLLER_PER_VP))
		kr_vp_wakeup(1);
	/* Its timers are left to the idle VPs, which may have gone to sleep
	 * before they were armed (a microprocess that slept inside a
	 * blocking section made this VP count as running, and so this
	 * spare one too many): wake one, to sleep again with them in its
	 * deadline. */
	if (__atomic_load_n(&w->timers.next, __ATOMIC_ACQUIRE) != KR_FOREVER)
		kr_sched_unpark(1);
	kr_vp_publish(KR_VP_SUSPENDED);
	pthread_mutex_lock(&G.spare_lock);
	G.spare_parked++;
	while (!G.spare_tokens && !__atomic_load_n(&G.stopping, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&G.spare_cv, &G.spare_lock);
	if (G.spare_tokens)
		G.spare_tokens--; /* spare_run counted us active again */
	else
		G.spare_parked--;
	pthread_mutex_unlock(&G.spare_lock);
	kr_vp_publish(KR_VP_RUNNING);
}

/* The VP of the running microprocess goes into a blocking section
 * (kr_blocking_enter, or a microprocess that switched away inside one
 * resuming here: sw_blocked), and out of it (kr_blocking_leave, the
 * switch away, an exit inside one: mp_end). */
static void blocking_begin(struct kr_worker *w)
{
	w->blocked = 1;
	poller_leave();
	kr_vp_publish(KR_VP_BLOCKED);
	if (__atomic_sub_fetch(&G.active, 1, __ATOMIC_RELAXED) < G.sched.nvp)
		spare_run();
}

static void blocking_end(struct kr_worker *w)
{
	w->blocked = 0;
	__atomic_fetch_add(&G.active, 1, __ATOMIC_RELAXED);
	kr_vp_publish(KR_VP_RUNNING);
}

int kr_blocking_enter(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (w->blocked)
		return EBUSY;
	blocking_begin(w);
	return 0;
}

int kr_blocking_leave(void)
{
	struct kr_worker *w = W();
	if (!w)
		return EPERM;
	if (!w->blocked)
		return EINVAL;
	blocking_end(w);
	return 0;
}

static void idle_loop(struct kr_worker *w)
{
	for (;;) {
		kr_mp *mp = w->pending; /* handed over by route() */
		w->pending = NULL;
		if (w->spare && !mp)
			spare_retire(w);
		timers_run_all();
		if (__atomic_load_n(&G.poller_on, __ATOMIC_ACQUIRE))
			G.poller.poll(G.poller.arg);
		if (!mp)
			mp = NEXT(w, NULL);
		if (!mp && __atomic_load_n(&G.stopping, __ATOMIC_ACQUIRE)) {
			if (w != G.w0)
				return;
			kr_mp *h = __atomic_load_n(&G.handoff, __ATOMIC_ACQUIRE);
			if (h && claim_sleeper(h))
				mp = h;
		}
		if (!mp)
			mp = OPS->idle(SCHED, w->vp);
		if (!mp)
			continue;
		claim_cpu(w, mp);
#if defined(__SANITIZE_ADDRESS__)
		void *fake;
		ASAN_START(w, &fake, mp);
		TSAN_SWITCH(w, mp);
		void *from = kr__ctx_switch(&w->idle_ctx, &mp->ctx, NULL);
		ASAN_FINISH(fake);
#else
		TSAN_SWITCH(w, mp);
		void *from = kr__ctx_switch(&w->idle_ctx, &mp->ctx, NULL);
#endif
		w->cur = NULL;
		finish(from);
	}
}

/* VP 0's idle loop runs on a stack of its own, first entered when the main
 * microprocess blocks. */
static kr_ctx_transfer idle_entry(void *from)
{
	finish(from);
	ASAN_FINISH(NULL);
	idle_loop(W());
	__builtin_unreachable(); /* VP 0's idle loop ends only with the process */
}

static struct kr_worker *worker_new(kr_vp *vp)
{
	struct kr_worker *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->vp = vp;
	w->cnt = &cnt[vp->id];
	w->stacks = kr__stack_cache_new();
	if (!w->stacks) {
		free(w);
		return NULL;
	}
	vp->upper = w; /* VP 0: kr_vp_release refuses until teardown clears it */
	int err = OPS->vp_init(SCHED, vp);
	if (err) {
		vp->upper = NULL;
		kr__stack_cache_free(w->stacks);
		free(w);
		return NULL;
	}
	kr__timers_init(&w->timers);
	__atomic_store_n(&workers[vp->id], w, __ATOMIC_RELEASE);
	return w;
}

/* Workers live until karui stops, after every VP has ended: until then
 * idle VPs may look at any worker's timers. */
static void worker_free(unsigned id)
{
	struct kr_worker *w = workers[id];
	__atomic_store_n(&workers[id], NULL, __ATOMIC_RELEASE);
	kr__timers_fini(&w->timers);
	kr__stack_cache_free(w->stacks);
	free(w);
}

static void thread_stack(const void **lo, size_t *size)
{
	pthread_attr_t a;
	void *addr = NULL;
	*size = 0;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstack(&a, &addr, size);
		pthread_attr_destroy(&a);
	}
	*lo = addr;
}

static void vp_main(kr_vp *vp, void *arg)
{
	struct kr_worker *w = worker_new(vp);
	if (!w) {
		if (arg) /* a spare: the count spare_run made is void */
			__atomic_fetch_sub(&G.active, 1, __ATOMIC_RELAXED);
		return; /* kr_init's VPs: see its handshake below */
	}
	w->spare = arg != NULL;
	const void *lo;
	thread_stack(&lo, &w->idle_stack_size);
	w->idle_stack_lo = (unsigned char *)lo;
	w->tsan_idle = TSAN_THREAD();
	kr__w = w;
	idle_loop(w);
	kr__w = NULL; /* teardown() frees w */
}

static int ops_valid(const kr_config *cfg)
{
	const kr_rq_ops *r = cfg->rq;
	const kr_sched_ops *s = cfg->sched;
	if (r && (!r->init || !r->push || !r->pop || (r->flags & ~(unsigned)KR_RQ_SHARED)))
		return 0;
	if (s && (!s->init || !s->fini || !s->vp_init || !s->ready || !s->next || !s->idle))
		return 0;
	return 1;
}

static void teardown(void);

/* kr_init failed, or kr_fini is over: another kr_init may start. */
static void unclaim(void)
{
	pthread_mutex_lock(&G.lock);
	G.busy = 0;
	pthread_mutex_unlock(&G.lock);
}

int kr_init(const kr_config *cfg)
{
	kr_config def = {0};
	if (!cfg)
		cfg = &def;
	unsigned nvp = cfg->vps ? cfg->vps : 1;
	if (nvp > KR_VP_MAX || !ops_valid(cfg))
		return EINVAL;
	/* The claim is made under the lock, and held until kr_fini is over:
	 * a second kr_init sees it however far the first one has got. */
	pthread_mutex_lock(&G.lock);
	if (G.busy || kr_vp_self()) {
		pthread_mutex_unlock(&G.lock);
		return EBUSY;
	}
	G.busy = 1;
	int err = kr__stacks_init(cfg->stack_cache ? cfg->stack_cache : 64);
	memset(cnt, 0, sizeof cnt);
	G.sched.ops = cfg->sched ? cfg->sched : &kr_sched_default;
	G.sched.rq = cfg->rq ? cfg->rq : &kr_rq_ws;
	G.sched.nvp = nvp;
	G.sched.data = NULL;
	G.stopping = 0;
	G.handoff = NULL;
	G.active = nvp;
	G.poller_on = 0;
	G.polling = NULL;
	if (!err)
		err = G.sched.ops->init(SCHED, G.sched.rq, nvp);
	pthread_mutex_unlock(&G.lock);
	if (err) {
		unclaim();
		return err;
	}

	kr_vp *vp0;
	/* 64-byte aligned, as the records on stacks are (the mutex's tokens) */
	kr_mp *main = aligned_alloc(64, (sizeof *main + 63) & ~(size_t)63);
	if (main)
		memset(main, 0, sizeof *main);
	if (!main || (err = kr_vp_adopt(&vp0)) != 0) {
		free(main);
		G.sched.ops->fini(SCHED);
		kr__stacks_fini();
		unclaim();
		return err ? err : ENOMEM;
	}
	struct kr_worker *w = worker_new(vp0);
	kr_mp *idle = w ? kr__stack_get(w->stacks, KR_STACK_DEFAULT, 1) : NULL;
	if (!idle) {
		if (w)
			worker_free(vp0->id);
		vp0->upper = NULL;
		kr_vp_release();
		free(main);
		G.sched.ops->fini(SCHED);
		kr__stacks_fini();
		unclaim();
		return ENOMEM;
	}
	w->idle_stack_lo = idle->stack_lo;
	w->idle_stack_size = idle->stack_size;
	kr__ctx_init(&w->idle_ctx, idle->stack_lo, idle->stack_size, idle_entry,
		     kr__ctx_trampoline_counted);
	w->tsan_idle = TSAN_FIBER();
	main->tsan_fiber = TSAN_THREAD();
	const void *lo;
	thread_stack(&lo, &main->stack_size);
	main->stack_lo = (unsigned char *)lo;
	main->is_main = 1;
	main->on_cpu = 1;
	main->prio = KR_PRIO_DEFAULT;
	main->wstate = 1u << 16 | WS_RUN; /* generation 1 */
	main->join = (uintptr_t)1 << KR_GEN_SHIFT | JS_DETACHED;
	main->handle = (kr_mp *)((uintptr_t)main | (uintptr_t)1 << KR_GEN_SHIFT);
	main->id = vp0->id;
	w->cur = main;
	G.main = main;
	G.w0 = w;
	kr__w = w;
	__atomic_store_n(&G.running, 1, __ATOMIC_RELEASE);

	if (nvp > 1) {
		G.vps = calloc(nvp - 1, sizeof *G.vps);
		err = G.vps ? kr_vp_allocate(nvp - 1, vp_main, NULL, G.vps) : ENOMEM;
		G.nvps = err ? 0 : nvp - 1;
		if (err) {
			/* kr_vp_allocate starts all or none */
			teardown();
			unclaim();
			return err;
		}
	}
	return 0;
}

static unsigned long live_count(void)
{
	unsigned long c = 0, e = 0;
	for (unsigned i = 0; i < KR_VP_MAX; i++) {
		c += __atomic_load_n(&cnt[i].created, __ATOMIC_RELAXED);
		e += __atomic_load_n(&cnt[i].ended, __ATOMIC_RELAXED);
	}
	return c - e;
}

static void teardown(void)
{
	struct kr_worker *w = G.w0;
	__atomic_store_n(&G.stopping, 1, __ATOMIC_RELEASE);
	/* A wakeup for every VP that may sleep on L0 or its event source,
	 * spares included: any sleeper takes any wakeup, and a spare that
	 * takes one meant for a VP ends without passing it on. */
	if (G.nvps + G.nspares)
		kr_sched_unpark(G.nvps + G.nspares);
	for (unsigned i = 0; i < G.nvps; i++)
		kr_vp_join(G.vps[i]);
	free(G.vps);
	G.vps = NULL;
	G.nvps = 0;
	pthread_mutex_lock(&G.spare_lock);
	pthread_cond_broadcast(&G.spare_cv);
	pthread_mutex_unlock(&G.spare_lock);
	if (G.nspares)
		kr_sched_unpark(G.nspares);
	for (unsigned i = 0; i < G.nspares; i++)
		kr_vp_join(G.spares[i]);
	G.nspares = G.spare_parked = G.spare_tokens = 0;
	if (G.poller_on && G.poller.fini)
		G.poller.fini(G.poller.arg);
	__atomic_store_n(&G.poller_on, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&G.running, 0, __ATOMIC_RELEASE);
	G.sched.ops->fini(SCHED);
	kr__w = NULL;
	TSAN_DROP(w->tsan_idle);
	kr_vp *vp0 = w->vp;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (workers[i])
			worker_free(i);
	free(G.main);
	G.main = NULL;
	G.w0 = NULL;
	vp0->upper = NULL;
	kr_vp_release();
	kr__stacks_fini();
}

int kr_fini(void)
{
	struct kr_worker *w = W();
	if (!w || !w->cur->is_main)
		return EPERM;
	if (live_count() != 0)
		return EBUSY;
	/* The main microprocess ends here: its keys' destructors run (they
	 * may block, and start microprocesses: then EBUSY after all). */
	if (w->cur->keys) {
		kr__keys_run_destructors(w->cur);
		w = W();
		if (live_count() != 0)
			return EBUSY;
	}
	kr_mp *self = w->cur;
	if (w != G.w0) {
		/* Get back onto the thread kr_init was called on: sleep, and
		 * let VP 0's idle loop resume us. */
		uint32_t s = __atomic_load_n(&self->wstate, __ATOMIC_RELAXED);
		__atomic_store_n(&self->wstate, (s & ~(uint32_t)WS_STATE) | WS_SLEEP,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&G.handoff, self, __ATOMIC_RELEASE);
		__atomic_store_n(&G.stopping, 1, __ATOMIC_RELEASE);
		kr_sched_unpark(G.nvps + G.nspares + 1);
		block(w, self);
	}
	teardown();
	unclaim();
	return 0;
}

int kr_stats_get(kr_stats *st)
{
	if (!st)
		return EINVAL;
	st->mps_live = live_count();
	kr__stack_stats(st);
	return 0;
}
