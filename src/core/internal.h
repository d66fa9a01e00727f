/*
 * karui L2 internals: the microprocess record, the per-VP worker, and the
 * hooks between the core, the stack allocator and the scheduler modules.
 */
#ifndef KARUI_CORE_INTERNAL_H
#define KARUI_CORE_INTERNAL_H

#include <stdint.h>

#include "karui/core.h"
#include "karui/ctx.h"
#include "karui/sched.h"
#include "../vp/vp_internal.h"

/* mp->wstate: the wakeup protocol (see mp.c) */
enum { WS_RUN = 0, WS_SLEEP = 1, WS_NOTIFIED = 2 };
/* mp->join: the join protocol (or the joiner's record) */
enum { JS_NONE = 0, JS_DETACHED = 1, JS_WAITING = 2, JS_DONE = 3 };
/* mp->life: what the memory holds.  0 is what a cached (zeroed or
 * recycled) record reads as. */
enum { LIFE_FREE = 0, LIFE_LIVE = 0x6b72756du /* "kr mu" */, LIFE_ENDED = 0x656e6464u };

struct kr_stack_class;

struct kr_mp {
	kr_ctx ctx;             /* must stay first: the switch saves into it */
	uint32_t on_cpu;        /* 1 while a VP has not yet left this context */
	uint32_t wstate;        /* WS_*: atomic */
	kr_rq_link link;        /* ready-queue links (owned by the queue) */
	void *queued;           /* default scheduler: instance it is queued in */
	int prio;
	uintptr_t join;         /* JS_* or the joiner's record: atomic */
	uint32_t life;          /* LIFE_*: atomic */
	uint32_t is_main;
	kr_mp_fn fn;
	void *arg;
	void *result;
	struct kr_keyvals *keys;/* lazily allocated */
	/* the stack region: [lo, lo + size) usable, this record at its top */
	unsigned char *stack_lo;
	size_t stack_size;
	const struct kr_stack_class *cls;
	kr_mp *free_next;       /* stack cache links while LIFE_FREE */
	unsigned long id;
};

struct kr_worker {
	kr_mp *cur;             /* running microprocess, NULL in the idle loop */
	kr_ctx idle_ctx;
	kr_vp *vp;
	void *sched_vp;         /* kr_sched_vp_data */
	struct counters *cnt;   /* this VP's counters (mp.c) */
	struct kr_stack_cache *stacks;
	unsigned char *idle_stack_lo;   /* VP 0 only: its idle loop's stack */
	size_t idle_stack_size;
	void *asan_fake;        /* AddressSanitizer fake-stack handle of the switch */
};

struct kr_sched {
	const kr_sched_ops *ops;
	const kr_rq_ops *rq;
	unsigned nvp;
	void *data;             /* kr_sched_data */
};

/* The calling thread's worker: NULL off a VP.  Re-read after each switch. */
extern __thread struct kr_worker *kr__w __attribute__((tls_model("initial-exec")));

/* stack.c */
int kr__stacks_init(size_t per_vp_cache);
void kr__stacks_fini(void);
struct kr_stack_cache *kr__stack_cache_new(void);
void kr__stack_cache_free(struct kr_stack_cache *c);
/* a fresh record at the top of a stack of `size` bytes (mp included) */
kr_mp *kr__stack_get(struct kr_stack_cache *c, size_t size, int guard);
void kr__stack_put(struct kr_stack_cache *c, kr_mp *mp);
void kr__stack_stats(unsigned long *mapped, unsigned long *cached);

/* key.c */
void kr__keys_run_destructors(kr_mp *mp);

#endif
