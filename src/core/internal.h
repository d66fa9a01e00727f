/*
 * karui L2 internals: the microprocess record, the per-VP worker, and the
 * hooks between the core, the stack allocator and the scheduler modules.
 */
#ifndef KARUI_CORE_INTERNAL_H
#define KARUI_CORE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "karui/core.h"
#include "karui/ctx.h"
#include "karui/sched.h"
#include "../vp/vp_internal.h"
#include "../arch/spin.h"
#include "../arch/tls.h"

/* Generations.  Every life of a record has a generation, 1..65535, that
 * the record's state words carry and the handles too: a handle is the
 * record's address with the generation in its top 16 bits, which user
 * addresses leave free on x86-64 and aarch64 (below 2^47 and 2^48 unless a
 * mapping asks for more).  Every call that takes a handle checks its
 * generation, and those that change the record's state (wakeups, cancels,
 * claims, join, detach) in the same atomic operation, so a stale handle,
 * or a late internal wakeup, never acts on a new life of the record.  A
 * record fresh from the stack pool reads generation 0, which no handle
 * has.  See life.c. */
#define KR_GEN_SHIFT 48
#define KR_ADDR_MASK (((uintptr_t)1 << KR_GEN_SHIFT) - 1)
_Static_assert(sizeof(void *) == 8, "handles keep their generation in a pointer's top bits");

/* mp->wstate: the wakeup protocol (see park.c) in bits 0-1, a pending
 * cancel in bit 2, the generation in bits 16-31: the record's present
 * life's while it lives, the next one's once it has ended.  The states
 * are numbered so that a wakeup takes one off any but NOTIFIED.  Bits 3
 * and 4 belong to served waits (served.c): WS_THIRD while a timer or a
 * cancel decides whether it ends the served wait, WS_INTR once one has
 * ended it; the permit's operations keep them. */
enum { WS_NOTIFIED = 0, WS_RUN = 1, WS_SLEEP = 2, WS_STATE = 3, WS_CANCEL = 4,
       WS_THIRD = 8, WS_INTR = 16 };
#define WS_GEN 0xffff0000u
/* mp->join: the join protocol in the low bits (or the joiner's record),
 * the generation in the top 16 bits.  REAPED: ended, and joined (its
 * joiner releases it), or detached; it carries no generation, which is as
 * good: the life is over for every handle. */
enum { JS_NONE = 0, JS_DETACHED = 1, JS_REAPED = 2, JS_DONE = 3 };

#if defined(__SANITIZE_ADDRESS__)
#define KR_SANITIZED 1 /* reused stacks are unpoisoned in stack.c */
#else
#define KR_SANITIZED 0
#endif

/* The record sits at the top of the microprocess's stack, 64-byte aligned,
 * with the first frame in the line just below it.  Line 0 holds everything
 * that create, the queues, the switch, the permit, join and exit touch,
 * and the served waits' `served`, which a server writes next to the queue
 * fields it fills; line 1 what create, start, exit and the stack cache
 * need; line 2 is cold (the bounds of the stack are for the sanitizers,
 * the debuggers and the stack pool, which find the region from the record
 * and its class) but for `wgen`, which a served wait's sleeper writes in
 * its own record.
 * A cached record keeps keys == NULL and is_main == 0, so create does not
 * write them: a create touches two lines of the record. */
struct kr_mp {
	/* line 0 */
	kr_ctx ctx;             /* must stay first: the switch saves into it */
	uint32_t on_cpu;        /* 1 while a VP has not yet left this context */
	uint32_t wstate;        /* WS_*: atomic */
	kr_rq_link link;        /* ready-queue links (owned by the queue) */
	void *queued;           /* default scheduler: instance it is queued in;
	                           NULL in no queue, as when it ends: a record
	                           comes out of the cache with NULL here */
	uintptr_t join;         /* generation | JS_* or the joiner's record: atomic */
	int prio;
	uint32_t served;        /* served.c: the generation of the served wait a
	                           server took last (or 0), atomic */
	/* line 1 */
	union {
		kr_mp_fn fn;    /* until it starts */
		void *result;   /* once it has ended */
	};
	void *arg;
	void *udata;            /* kr_attr.udata (kr_mp_udata) */
	struct kr_keyvals *keys;/* lazily allocated */
	const struct kr_stack_class *cls;
	kr_mp *free_next;       /* stack cache links while free */
	unsigned long id;
	uintptr_t upper;        /* owned by L3 (sync/entry.c: the calls this
	                           microprocess accepted and has not answered);
	                           0 at each create */
	/* line 2 */
	uintptr_t joining;      /* in kr_mp_join: the handle of the record it
	                           joins (life.c's join_cycle), else 0: atomic */
	uint32_t is_main;
	uint32_t region;        /* the region's number in its class (stack.c) */
	/* the stack region: [stack_lo, stack_lo + stack_size) usable, this
	 * record at its top */
	unsigned char *stack_lo;
	size_t stack_size;
	void *tsan_fiber;       /* ThreadSanitizer builds only */
	uint32_t wgen;          /* served.c: its latest served wait's generation
	                           (odd), even once a wait ended unserved;
	                           atomic, written by its own microprocess only */
	uint32_t trace_vp;      /* trace.c, while tracing: the VP it last ran
	                           on (or was made on), plus 1; atomic */
};
_Static_assert(offsetof(struct kr_mp, served) + 4 <= 64 && offsetof(struct kr_mp, upper) + 8 <= 128,
	       "the hot fields of a record fit its first two cache lines");
_Static_assert(sizeof(struct kr_mp) <= 192, "a record takes three cache lines");


/* timer.c: a VP's timer heap and its nodes (see timer.c) */
enum { KR_TIMER_ARMED = 1, KR_TIMER_FIRING, KR_TIMER_FIRED };
struct kr_timer {
	uint64_t when;          /* kr_now() deadline */
	kr_mp *mp;              /* the sleeper */
	struct kr_timers *heap; /* where it was armed */
	uint32_t idx;           /* position in the heap while ARMED */
	uint32_t state;         /* KR_TIMER_*: written under the heap's lock,
	                           FIRED by the fire callback (release) */
	int won;                /* the timer, not a wakeup, ended the sleep */
	uint32_t served;        /* a served wait's generation (served.c), else 0 */
};
struct kr_timers {
	kr_spin lock;
	uint64_t next;          /* earliest deadline, KR_FOREVER: none (atomic) */
	struct kr_timer **v;
	uint32_t n, cap;
};
void kr__timers_init(struct kr_timers *h);
void kr__timers_fini(struct kr_timers *h);
int kr__timer_arm(struct kr_timers *h, struct kr_timer *t);  /* 0 or ENOMEM */
/* 1: taken out before it fired; 0: it fired (and that is over) */
int kr__timer_cancel(struct kr_timer *t);
/* fire every node due at `now`; fire() must end by marking the node FIRED */
void kr__timers_expire(struct kr_timers *h, uint64_t now, void (*fire)(struct kr_timer *));

struct inst; /* the default scheduler's instance (seam.h) */
struct kr_worker {
	kr_mp *cur;             /* running microprocess, NULL in the idle loop */
	kr_mp *pending;         /* for the idle loop to run first (route()) */
	kr_mp idle;             /* the idle loop's context (idle.ctx), and an
	                           on_cpu that nobody waits for: only these two
	                           are used (rt.h: left_word) */
	kr_mp *left;            /* sanitizer builds: the context the last switch
	                           on this VP left (rt.h: done_left) */
	kr_mp *dead;            /* a detached record that ended here (rt.h:
	                           release_dead) */
	kr_vp *vp;
	void *sched_vp;         /* kr_sched_vp_data */
	struct counters *cnt;   /* this VP's counters (rt.h) */
	struct kr_stack_cache *stacks;
	unsigned char *idle_stack_lo;   /* VP 0 only: its idle loop's stack */
	size_t idle_stack_size;
	int tick;               /* scheduling points left until the timers'
	                           and the event source's turn (rt.h) */
	struct inst *dq;        /* sched_vp under the default scheduler, else
	                           NULL: set once, by its vp_init (seam.h) */
	struct inst *fast;      /* dq while the fast paths apply: a slot
	                           (kr_rq_ws), no blocking section; else NULL
	                           (seam.h: seam_fast) */
	const kr_poller *kick_src; /* atomic: while it waits for the shared
	                           sources (G.polling), the source whose kick
	                           ends that wait; NULL: L0's wakeup does */
	int own_source;         /* inside a poll or wait of its own event source
	                           (KR_POLLER_PER_VP: sched_default.h,
	                           own_keeps) */
	int soon;               /* the next scheduling points are early turns
	                           for kept completions; this many of them are
	                           left until the regular one (kr__turn_soon) */
	uint64_t kept_at;       /* the poll or wait of its own event source that
	                           first made ready what it keeps, until that has
	                           run or an idle VP was woken for it; 0: none
	                           (sched_default.c, "Completions stay") */
	int spare;              /* started for a blocking call (blocking.c) */
	kr_mp *held;            /* taken from this VP by kr__preempt, for its
	                           idle loop to give to the allocator (alloc.h) */
	void (*hold)(kr_mp *mp, uintptr_t arg); /* or, if not NULL, to this
	                           (kr__preempt_hold), with hold_arg */
	uintptr_t hold_arg;
	uintptr_t tp;           /* its thread's thread pointer (preempt.c) */
	int blocked;            /* inside kr_blocking_begin/end */
	uint32_t away_timers;   /* parked as a spare with timers armed, and
	                           counted in naway (blocking.c; atomic) */
	void *tsan_idle;        /* ThreadSanitizer: the idle loop's fiber */
	struct kr_trace_buf *trace; /* trace.c: this VP's events, NULL when
	                           not tracing */
	int waking;             /* who makes microprocesses ready here besides
	                           the running one: KR_BY_TIMER while its
	                           timers fire, KR_BY_IO in a poll (trace.c) */
	struct kr_timers timers;
};

enum { KR_BY_MP, KR_BY_TIMER, KR_BY_IO };

#define KR_KEPT_UNDATED 1 /* kept_at until its poll or wait returns */

/* The next scheduling point of w, the calling VP, is to be a turn: an
 * early one, which only looks at the completions the default scheduler
 * keeps (kr__timers_run), and again at each point after it while they are
 * kept; the regular turn comes when it would have. */
static inline void kr__turn_soon(struct kr_worker *w)
{
	if (!w->soon) {
		w->soon = w->tick;
		w->tick = 1;
	}
}

struct kr_sched {
	const kr_sched_ops *ops;
	const kr_rq_ops *rq;
	unsigned nvp;
	void *data;             /* kr_sched_data */
};

/* The scheduler seam (seam.h): the operations of the scheduler in use. */
enum { SEAM_AWAY_NOT, SEAM_AWAY_BLOCKED, SEAM_AWAY_PARKED };
struct kr__seam {
	int (*vp_init)(kr_sched *s, struct kr_worker *w);
	void (*ready)(kr_sched *s, struct kr_worker *w, kr_mp *mp);
	void (*spawn)(kr_sched *s, struct kr_worker *w, kr_mp *mp);
	kr_mp *(*next)(kr_sched *s, struct kr_worker *w, kr_mp *prev);
	int (*take)(kr_sched *s, struct kr_worker *w, kr_mp *mp, kr_mp *prev);
	kr_mp *(*idle)(kr_sched *s, struct kr_worker *w);
	void (*away)(kr_sched *s, struct kr_worker *w, uint32_t how);
	void (*adopt)(kr_sched *s, struct kr_worker *w, struct kr_worker *o);
	int (*keep)(kr_sched *s, struct kr_worker *w);
	void (*reprio)(kr_sched *s, kr_mp *mp, int prio);
	void (*several)(kr_sched *s, struct kr_worker *w);
	/* mp: a handle, as the I/O layer has it; NULL: none */
	void (*io_done)(kr_sched *s, struct kr_worker *w, kr_mp *mp);
	int solo; /* it can take the one-VP state (permit.h, "One VP") */
};
/* The seam that serves a scheduler module: the default's own, or seam.c's. */
const struct kr__seam *kr__seam_for(const kr_sched_ops *ops) __attribute__((visibility("hidden")));
extern const struct kr__seam kr__seam_default __attribute__((visibility("hidden")));
extern const struct kr__seam kr__seam_module __attribute__((visibility("hidden")));

/* The calling thread's worker: NULL off a VP.  Re-read after each switch. */
extern __thread struct kr_worker *kr__w __attribute__((tls_model("initial-exec")));

/* 1 in the child of a fork made while karui ran (runtime.c: Fork): its state
 * is the parent's, frozen, and the calls that read it from any thread
 * return EPERM. */
extern int kr__forked;

/* One VP (permit.h, "One VP"): SOLO_ON while karui runs on a single VP with
 * the default scheduler and has started no spare VP.  That VP is then the
 * only thread that changes its slot, the join words and the permits, and
 * it does so with loads and stores instead of read-modify-writes;
 * SOLO_POSTED: threads that are no VP have posted wakeups for it to
 * apply.  Cleared for good before a spare starts (kr__permits_several). */
enum { SOLO_ON = 1, SOLO_POSTED = 2 };
extern uint32_t kr__solo __attribute__((visibility("hidden")));

static inline int kr__solo_on(void) { return __atomic_load_n(&kr__solo, __ATOMIC_RELAXED) != 0; }

/* A handle's record. */
static inline kr_mp *kr__rec(const kr_mp *h) { return (kr_mp *)((uintptr_t)h & KR_ADDR_MASK); }

/* The handle of the life that record mp holds now: wstate's generation,
 * which moves on only when that life ends. */
static inline kr_mp *kr__handle(kr_mp *mp)
{
	uint32_t g = __atomic_load_n(&mp->wstate, __ATOMIC_RELAXED) & WS_GEN;
	return (kr_mp *)((uintptr_t)mp | (uintptr_t)g << (KR_GEN_SHIFT - 16));
}

/* The running microprocess's record, NULL off a VP (and in an idle loop). */
static inline kr_mp *kr__cur(void)
{
	struct kr_worker *w = KR_TLS_GET(kr__w);
	return w ? w->cur : NULL;
}

/* kr_mp_self() inline, for the layers above L2 inside the library: the
 * primitives of L3 take the caller's identity (its handle, so that every
 * wakeup they owe it carries its generation) on every call. */
static inline kr_mp *kr__self(void)
{
	kr_mp *mp = kr__cur();
	return mp ? kr__handle(mp) : NULL;
}

/* kr_mp_unpark for L3's servers: 0 also when mp has ended.  A waiter that
 * sees DONE before its server's wakeup (its deadline passed while it was
 * being served, or another wakeup came) may return, end and be joined
 * first; that wakeup is then owed to no one, and its generation keeps it
 * from a new microprocess in the same record. */
int kr__wake_waiter(kr_mp *mp);
/* For karui's I/O layer: the I/O mp (a handle) waits for completed (the
 * scheduler's io_done notifier, if it has one), just before mp is woken. */
void kr__mp_io_done(kr_mp *mp);

/* Served waits (served.c, served.h): the ends of a wait that touch no
 * permit.  kr__served_start: kr_init settles how their stores are ordered
 * (membarrier or fences); kr__served_third: a cancel just made (the
 * permit's RMW with its bit) ends the served wait of h that no server has
 * taken yet; kr__served_fire: a served wait's timer fired (timer.c). */
void kr__served_start(void);
void kr__served_third(struct kr_worker *w, kr_mp *h);
void kr__served_fire(struct kr_timer *t);

/* The event source's poll, now, on the calling VP (none off a VP), as at
 * a busy VP's timers' turn: what it completes for others is kept as
 * there (sched_default.h: own_keeps).  For L3's calls that submit at once
 * what may complete at once (src/io/uring.c, reads of files). */
void kr__poll_now(void);

/* stack.c: a VP's cache of free stacks, a list per size class (slot 0 is
 * the one the fast paths below look at first) */
#define KR_STACK_SLOTS 8
struct kr_stack_cache {
	struct {
		const struct kr_stack_class *cls;
		kr_mp *head;
		size_t n;       /* owner-written (kr__stack_count); read by statistics */
	} slot[KR_STACK_SLOTS];
	size_t max;
	struct kr_stack_cache *next;    /* the registry, for statistics */
};

/* A list's count moves by d.  Only the cache's VP writes it, but
 * kr_stats_get reads it from any thread: an atomic store (no RMW), so
 * that the two do not race. */
static inline void kr__stack_count(struct kr_stack_cache *k, int si, int d)
{
	__atomic_store_n(&k->slot[si].n, k->slot[si].n + (size_t)(ptrdiff_t)d, __ATOMIC_RELAXED);
}

int kr__stacks_init(size_t per_vp_cache);
void kr__stacks_fini(void);
struct kr_stack_cache *kr__stack_cache_new(void);
void kr__stack_cache_free(struct kr_stack_cache *c);
/* a record at the top of a stack of `size` bytes (mp included, rounded up
 * to its class); its fields other than the stack's are for the caller */
kr_mp *kr__stack_get(struct kr_stack_cache *c, size_t size, int guard);
void kr__stack_put_slow(struct kr_stack_cache *c, kr_mp *mp);
void kr__stack_stats(kr_stats *st);     /* the stacks_* fields */
/* An idle VP returns the memory of stacks left unused for a while; it
 * should look again at the time returned (KR_FOREVER: nothing is kept). */
uint64_t kr__stacks_trim(uint64_t now);

/* The size of the class a stack of `size` bytes comes from: whole pages
 * up to 32 KiB, then multiples of a quarter of the power of two below. */
static inline size_t kr__stack_class_size(size_t size)
{
	size_t p = (size + 4095) >> 12;
	if (p <= 8)
		return p << 12;
	size_t step = (size_t)1 << (61 - __builtin_clzl(p - 1));
	return ((p + step - 1) & ~(step - 1)) << 12;
}

/* A size class of stacks (stack.c).  Its regions are numbered in carving
 * order, 64 to a block of neighbours; each is in exactly one place: live,
 * in a VP's cache, dirty, clean or trimming. */
struct kr_stack_block {
	unsigned char *base;    /* the lowest stack byte of its region 0 */
	uint64_t dirty, clean;  /* free regions: memory kept / returned */
};
struct kr_stack_class {
	size_t size;    /* region bytes without the guard: stack + record */
	size_t stride;  /* size + guard */
	int guard;
	pthread_mutex_t lock;   /* all below */
	struct kr_stack_block *blk;
	uint64_t *any_dirty, *any_clean;        /* a bit per block: a bit set in it */
	size_t nblk, capblk;
	size_t low_dirty, low_clean;    /* no bit set in any_* words below these */
	size_t ndirty;          /* __atomic: trim peeks at it */
	size_t low;             /* fewest dirty since the last trim */
	size_t nclean, trimming, carved;
	uint32_t next;          /* number of the next region carved */
	unsigned char *cur, *end;       /* the reservation being carved */
	size_t chunk;           /* length of the next reservation */
	struct kr_stack_chunk *chunks;  /* every reservation, for kr_fini */
};

/* The first class of the VP's own cache, inline, with no call: NULL when
 * the stack must come from stack.c (another class, an empty list). */
static inline kr_mp *kr__stack_take(struct kr_stack_cache *k, size_t size, int guard)
{
	const struct kr_stack_class *c = k->slot[0].cls;
	kr_mp *mp = k->slot[0].head;
	if (__builtin_expect(!mp || c->size != size || c->guard != guard, 0) ||
	    KR_SANITIZED)
		return NULL;
	k->slot[0].head = mp->free_next;
	kr__stack_count(k, 0, -1);
	if (mp->free_next) /* the next create's record; never prefetch NULL */
		__builtin_prefetch(mp->free_next, 1);
	return mp;
}

static inline kr_mp *kr__stack_get_fast(struct kr_stack_cache *k, size_t size, int guard)
{
	kr_mp *mp = kr__stack_take(k, size, guard);
	return mp ? mp : kr__stack_get(k, size, guard);
}

static inline void kr__stack_put(struct kr_stack_cache *k, kr_mp *mp)
{
	if (__builtin_expect(mp->cls != k->slot[0].cls ||
			     k->slot[0].n >= k->max, 0)) {
		kr__stack_put_slow(k, mp);
		return;
	}
	mp->free_next = k->slot[0].head;
	k->slot[0].head = mp;
	kr__stack_count(k, 0, 1);
}

/* key.c */
void kr__keys_run_destructors(kr_mp *mp);

#endif
