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

/* mp->wstate: the wakeup protocol (see mp.c) */
enum { WS_RUN = 0, WS_SLEEP = 1, WS_NOTIFIED = 2 };
/* mp->join: the join protocol (or the joiner's record) */
enum { JS_NONE = 0, JS_DETACHED = 1, JS_WAITING = 2, JS_DONE = 3 };
/* mp->life: what the memory holds.  0 is what a cached (zeroed or
 * recycled) record reads as. */
enum { LIFE_FREE = 0, LIFE_LIVE = 0x6b72756du /* "kr mu" */, LIFE_ENDED = 0x656e6464u };

#if defined(__SANITIZE_ADDRESS__)
#define KR_SANITIZED 1 /* reused stacks are unpoisoned in stack.c */
#else
#define KR_SANITIZED 0
#endif

/* The record sits at the top of the microprocess's stack, 64-byte aligned,
 * with the first frame in the line just below it.  Line 0 holds everything
 * that create, the queues, the switch, the permit, join and exit touch;
 * line 1 what create, start, exit and the stack cache need; line 2 is
 * cold (the bounds of the stack are for the sanitizers, the debuggers and
 * the stack pool, which find the region from the record and its class).
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
	uintptr_t join;         /* JS_* or the joiner's record: atomic */
	uint32_t life;          /* LIFE_*: atomic */
	int prio;
	/* line 1 */
	union {
		kr_mp_fn fn;    /* until it starts */
		void *result;   /* once it has ended */
	};
	void *arg;
	void *udata;            /* kr_attr.udata (kr_mp_udata) */
	struct kr_keyvals *keys;/* lazily allocated */
	const struct kr_stack_class *cls;
	kr_mp *free_next;       /* stack cache links while LIFE_FREE */
	unsigned long id;
	uint32_t cancel;        /* a kr_mp_cancel not yet consumed: atomic */
	/* line 2 */
	uint32_t is_main;
	/* the stack region: [stack_lo, stack_lo + stack_size) usable, this
	 * record at its top */
	unsigned char *stack_lo;
	size_t stack_size;
	void *tsan_fiber;       /* ThreadSanitizer builds only */
};
_Static_assert(offsetof(struct kr_mp, prio) < 64 && offsetof(struct kr_mp, cancel) < 128,
	       "the hot fields of a record fit its first two cache lines");


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

struct kr_worker {
	kr_mp *cur;             /* running microprocess, NULL in the idle loop */
	kr_mp *pending;         /* for the idle loop to run first (route()) */
	kr_ctx idle_ctx;
	kr_vp *vp;
	void *sched_vp;         /* kr_sched_vp_data */
	struct counters *cnt;   /* this VP's counters (mp.c) */
	struct kr_stack_cache *stacks;
	unsigned char *idle_stack_lo;   /* VP 0 only: its idle loop's stack */
	size_t idle_stack_size;
	unsigned ticks;         /* scheduling points, for polling the timers */
	int spare;              /* started for a blocking call (mp.c) */
	int blocked;            /* inside kr_blocking_enter/leave */
	void *tsan_idle;        /* ThreadSanitizer: the idle loop's fiber */
	struct kr_timers timers;
};

struct kr_sched {
	const kr_sched_ops *ops;
	const kr_rq_ops *rq;
	unsigned nvp;
	void *data;             /* kr_sched_data */
};

/* The calling thread's worker: NULL off a VP.  Re-read after each switch. */
extern __thread struct kr_worker *kr__w __attribute__((tls_model("initial-exec")));

/* kr_mp_self() inline, for the layers above L2 inside the library: the
 * primitives of L3 take the caller's identity on every call. */
static inline kr_mp *kr__self(void)
{
	struct kr_worker *w = KR_TLS_GET(kr__w);
	return w ? w->cur : NULL;
}

/* kr_mp_unpark for L3's servers: 0 also when mp has ended.  A waiter that
 * sees DONE before its server's wakeup (its deadline passed while it was
 * being served, or another wakeup came) may return, end and be joined
 * first; that wakeup is then owed to no one. */
int kr__wake_waiter(kr_mp *mp);

/* stack.c: a VP's cache of free stacks, a list per size class (slot 0 is
 * the one the fast paths below look at first) */
#define KR_STACK_SLOTS 8
struct kr_stack_cache {
	struct {
		const struct kr_stack_class *cls;
		kr_mp *head;
		size_t n;       /* owner-written; read by statistics */
	} slot[KR_STACK_SLOTS];
	size_t max;
	struct kr_stack_cache *next;    /* the registry, for statistics */
};

int kr__stacks_init(size_t per_vp_cache);
void kr__stacks_fini(void);
struct kr_stack_cache *kr__stack_cache_new(void);
void kr__stack_cache_free(struct kr_stack_cache *c);
/* a record at the top of a stack of `size` bytes (mp included); its fields
 * other than the stack's are for the caller to set */
kr_mp *kr__stack_get(struct kr_stack_cache *c, size_t size, int guard);
void kr__stack_put_slow(struct kr_stack_cache *c, kr_mp *mp);
void kr__stack_stats(unsigned long *mapped, unsigned long *cached);
void kr__stacks_trim(void);     /* a VP is about to sleep */

/* A size class of stacks: its pool and the reservation being carved. */
struct kr_stack_class {
	size_t size;    /* region bytes without the guard page: stack + record */
	int guard;
	pthread_mutex_t lock;   /* pool and carving */
	unsigned char **pool;   /* region bases (lowest stack byte), returned */
	size_t npool, cappool;
	unsigned char **dirty;  /* region bases whose memory is kept */
	size_t ndirty, capdirty;
	unsigned char *cur, *end;       /* the reservation being carved */
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
	k->slot[0].n--;
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
	__atomic_store_n(&mp->life, LIFE_FREE, __ATOMIC_RELEASE);
	mp->free_next = k->slot[0].head;
	k->slot[0].head = mp;
	k->slot[0].n++;
}

/* key.c */
void kr__keys_run_destructors(kr_mp *mp);

#endif
