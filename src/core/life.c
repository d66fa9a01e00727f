/*
 * karui L2 — the life cycle of a microprocess: kr_mp_create, its first
 * frame and its end (return or kr_mp_exit), kr_mp_join, kr_mp_detach; its
 * id, user data and priority.
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
 * A detached one leaves its record in its VP's w->dead, which the VP
 * releases once it is surely off that stack (rt.h: release_dead).  A
 * joiner frees the stack itself after waiting for on_cpu == 0, which the
 * last switch clears once off it.
 *
 * Join: mp->join holds JS_NONE, JS_DETACHED, JS_DONE, JS_REAPED or the
 * joiner's record.  The joiner CASes NONE -> itself and blocks without
 * going through kr_mp_park: it is in no queue and its permit is untouched
 * (a kr_mp_unpark meant for it stays pending), so only mp's exit can resume
 * it.  The exit CASes NONE -> DONE, or joiner -> REAPED and switches
 * straight to it (no ready queue, no claim: the seed's sleep_and_wakeup);
 * a detached one stores REAPED.  Whoever moves DONE -> REAPED (a join or a
 * detach of an ended microprocess) releases the record: one CAS, one
 * winner.  With one VP (kr__solo, permit.h) join, detach and exit all run
 * on that VP, one after another, and nothing else writes the word: each
 * CAS is a load, a compare and a store there (JOIN_CAS).
 * An exit that finds a joiner registered still needs its CAS on several
 * VPs: the joiner's undo of a join that closes a cycle (join_cycle) writes
 * the word too, and of the exit and the undo exactly one may win.
 *
 * Join cycles.  A joiner records whom it joins (joining) before its
 * registering CAS, and, if someone joins it in turn, walks down the chain
 * of joins from the microprocess it joins (join_cycle): mp joins y, y
 * joins z, ...; if the chain reaches the joiner, the join would wait for
 * itself, and it is undone with EDEADLK.  Walking down rather than up the
 * chain of the joiner's own joiners keeps the common shapes O(1): in a
 * chain of nested joins, or a tree whose parents join their children, the
 * joined one has not started or joins nothing, while the chain above the
 * joiner is as long as the nesting is deep.  A link read is checked to
 * belong to the life it names (the join word's generation, read after
 * the link), so the walk never follows a record that ended or was reused;
 * a chain that reaches the joiner is a real cycle, since each of its
 * members waits, through the others, for the joiner, which runs.  Of two
 * joins that close a cycle at once, at least one sees the other: each
 * stores its link before its registering CAS and loads the others' after
 * its own; the walk's loads and the CAS are sequentially consistent, and
 * the relaxed store of the link is ordered before the CAS by the CAS
 * itself on both architectures (lock cmpxchg on x86-64; a release
 * store-exclusive or casal on aarch64, whose store and later acquire load
 * are not reordered), without a fence of its own on the fast path.
 * Rejected: walking up the joiner's own chain (O(depth) per join, O(n^2)
 * for a chain of n nested joins).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "rt.h"

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

void *kr_mp_udata(const kr_mp *mp) { return mp ? kr__rec(mp)->udata : NULL; }

/* ---------------- create / exit / join / detach ---------------- */

/* A CAS of mp->join, expecting *j (updated when it fails), with the
 * order given (the failure's: acquire).  In the one-VP state (internal.h)
 * a load, a compare and a store: join, detach and exit all run on that
 * VP, and no other thread writes the word. */
#define JOIN_CAS(mp, j, to, order)                                               \
	(kr__solo_on() ? join_swap(mp, j, to)                                    \
		       : __atomic_compare_exchange_n(&(mp)->join, j, to, 0, order,    \
						     __ATOMIC_ACQUIRE))
static inline int join_swap(kr_mp *mp, uintptr_t *j, uintptr_t to)
{
	uintptr_t v = __atomic_load_n(&mp->join, __ATOMIC_RELAXED);
	if (v != *j) {
		*j = v;
		return 0;
	}
	__atomic_store_n(&mp->join, to, __ATOMIC_RELAXED);
	return 1;
}

static kr_ctx_transfer mp_end(kr_mp *self, void *result);

/* A microprocess's first frame.  It returns where to go once the
 * microprocess is over, so that the switch away happens from the
 * trampoline with every call matched by its return (see switch.S). */
static kr_ctx_transfer mp_entry(void *unused)
{
	(void)unused;
	done_left(W());
	ASAN_FINISH(NULL);
	kr_mp *self = W()->cur;
	void *result = self->fn(self->arg);
	struct kr_worker *w = W();
	if (__builtin_expect(!w, 0))
		exit(0); /* in the child of a fork (runtime.c) */
	kr_ctx_transfer t = mp_end(w->cur, result); /* self, read again */
#if defined(__SANITIZE_THREAD__)
	/* TSan keeps a shadow call stack per fiber: announce the switch only
	 * where no function returns after it */
	TSAN_SWITCH(W(), W()->cur);
	kr__ctx_jump(t.to, (uint32_t *)t.arg);
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
							  void *arg, void *udata, kr_mp **out)
{
	mp->fn = fn; /* result shares its slot: written when it ends */
	mp->arg = arg;
	mp->on_cpu = 0;
	mp->prio = prio;
	mp->upper = 0;
	mp->udata = udata;
	struct counters *c = w->cnt;
	unsigned long n = c->created + 1;
	mp->id = n * KR_VP_MAX + w->vp->id;
	__atomic_store_n(&c->created, n, __ATOMIC_RELAXED);
	uint32_t g = permit_begin(mp, n);
	uintptr_t hg = (uintptr_t)g << (KR_GEN_SHIFT - 16);
	__atomic_store_n(&mp->join, hg | ((flags & KR_MP_DETACHED) ? JS_DETACHED : JS_NONE),
			 __ATOMIC_RELAXED);
	kr_mp *h = (kr_mp *)((uintptr_t)mp | hg);
	*out = h;
	kr__ctx_init_below(&mp->ctx, mp, mp_entry, kr__ctx_trampoline_counted); /* the stack ends at its record */
	TSAN_NEW(mp);
}

static __attribute__((noinline)) int spawn_slow(struct kr_worker *w, kr_mp *mp)
{
	seam_spawn(w, mp);
	return 0;
}

/* seam_spawn(w, mp) for kr_mp_create's fast path, like kr__ready_tail
 * (rt.h): no call but tail calls.  Returns 0. */
static inline __attribute__((always_inline)) int spawn_tail(struct kr_worker *w, kr_mp *mp)
{
	switch (seam_spawn_try(w, mp)) {
	case SEAM_READY:
		return 0;
	case SEAM_READY_IDLE:
		return kr__unpark_one();
	default:
		return spawn_slow(w, mp);
	}
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
	void *udata = NULL;
	if (attr) {
		flags = attr->flags;
		udata = attr->udata;
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
	mp_setup(w, mp, flags, prio, fn, arg, udata, out);
	seam_spawn(w, mp);
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
	mp_setup(w, mp, 0, w->cur->prio, fn, arg, NULL, out);
	return spawn_tail(w, mp);
}

/* The microprocess ends: publish its result and pick the context to resume.
 * The caller makes the switch (trampoline return or kr_ctx_jump). */
/* mp_end without a joiner to resume (detached, or not joined yet): the
 * scheduler picks what runs next. */
static __attribute__((noinline)) kr_ctx_transfer end_next(struct kr_worker *w, kr_mp *self)
{
	timers_poll(w);
	kr_mp *next = seam_next(w, NULL);
	trace_switch(w, self, next, KR_WHY_EXIT);
	kr_ctx *to;
	next = route(w, next, &to);
	ASAN_START(w, NULL, next);
	return (kr_ctx_transfer){to, left_word(w, self)};
}

/* A detached microprocess ends: its record waits in w->dead (rt.h:
 * release_dead), which first releases the last one's: we run on another
 * stack.  Out of line, so that a joined end saves no register for it. */
static __attribute__((noinline)) kr_ctx_transfer end_detached(struct kr_worker *w, kr_mp *self)
{
	release_dead(w);
	w->dead = self;
	return end_next(w, self);
}

/* `traced`: end_slow's copy, which the trace may see (trace.h). */
static inline __attribute__((always_inline)) kr_ctx_transfer end_rest(struct kr_worker *w,
									 kr_mp *self, void *result,
									 int traced)
{
	self->result = result;
	struct counters *c = w->cnt;
	kr_mp *next = NULL;
	uintptr_t j = __atomic_load_n(&self->join, __ATOMIC_ACQUIRE);
	permit_end(self);
	for (;;) {
		uintptr_t st = j & KR_ADDR_MASK;
		/* live_count counts it as ended once a join or a detach would
		 * find it so */
		if (st == JS_DETACHED) {
			__atomic_store_n(&self->join, JS_REAPED, __ATOMIC_RELAXED);
			__atomic_store_n(&c->ended, c->ended + 1, __ATOMIC_RELEASE);
			return end_detached(w, self);
		}
		if (JOIN_CAS(self, &j, st == JS_NONE ? j | JS_DONE : JS_REAPED, __ATOMIC_ACQ_REL)) {
			__atomic_store_n(&c->ended, c->ended + 1, __ATOMIC_RELEASE);
			if (st != JS_NONE)
				next = (kr_mp *)st; /* the joiner waits for us alone */
			break;
		}
	}
	if (!next)
		return end_next(w, self);
	if (traced)
		trace_switch(w, self, next, KR_WHY_EXIT);
	kr_ctx *to;
	next = route(w, next, &to);
	ASAN_START(w, NULL, next);
	return (kr_ctx_transfer){to, left_word(w, self)};
}

/* Keys to destroy, a blocking section left open, or no fast paths
 * (another scheduler, a trace). */
static __attribute__((noinline)) kr_ctx_transfer end_slow(kr_mp *self, void *result)
{
	if (self->keys)
		kr__keys_run_destructors(self); /* may block: w is read after */
	struct kr_worker *w = W();
	if (w->blocked)
		kr__blocking_end(w);
	return end_rest(w, self, result, 1);
}

/* Like the other fast paths (see kr_mp_yield), no call when a joiner waits and
 * no key is set: the general cases are tail calls. */
static kr_ctx_transfer mp_end(kr_mp *self, void *result)
{
	struct kr_worker *w = W();
	if (__builtin_expect(self->keys || !w->fast, 0))
		return end_slow(self, result);
	return end_rest(w, self, result, 0);
}

int kr_mp_exit(void *result)
{
	struct kr_worker *w = W();
	if (!w || w->cur->is_main)
		return EPERM;
	kr_ctx_transfer t = mp_end(w->cur, result);
	TSAN_SWITCH(W(), W()->cur);
	kr__ctx_jump(t.to, (uint32_t *)t.arg);
}

/* self, with someone joining it, has registered as the joiner of mp (of
 * generation gen): walk down the chain of joins from mp (see the top).
 * 1: the chain reaches self, a cycle, and the registration is undone; 0:
 * none, or mp ended meanwhile (its exit, which the undo's CAS lost to, is
 * on its way to self). */
static __attribute__((noinline)) int join_cycle(kr_mp *self, kr_mp *mp, uintptr_t gen)
{
	uintptr_t h = gen | (uintptr_t)mp;
	for (;;) {
		kr_mp *x = (kr_mp *)(h & KR_ADDR_MASK);
		if (x == self)
			break;
		uintptr_t next = __atomic_load_n(&x->joining, __ATOMIC_SEQ_CST);
		if ((__atomic_load_n(&x->join, __ATOMIC_SEQ_CST) & ~KR_ADDR_MASK) !=
		    (h & ~KR_ADDR_MASK))
			return 0; /* x ended: the link to it is going */
		if (!next)
			return 0;
		h = next;
	}
	uintptr_t j = gen | (uintptr_t)self;
	return JOIN_CAS(mp, &j, gen | JS_NONE, __ATOMIC_ACQ_REL);
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
		if (JOIN_CAS(mp, &j, JS_REAPED, __ATOMIC_ACQ_REL))
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
		return h == kr__handle(self) ? EDEADLK : ESRCH;
	__atomic_store_n(&self->joining, (uintptr_t)h, __ATOMIC_RELAXED); /* before the CAS */
	if (!JOIN_CAS(mp, &j, gen | (uintptr_t)self, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&self->joining, 0, __ATOMIC_RELAXED);
		return join_other(mp, j, gen, result);
	}
	if (__builtin_expect((__atomic_load_n(&self->join, __ATOMIC_SEQ_CST) & KR_ADDR_MASK) >
			     JS_DONE, 0) &&
	    join_cycle(self, mp, gen)) {
		__atomic_store_n(&self->joining, 0, __ATOMIC_RELAXED);
		return EDEADLK;
	}
	/* Not a kr_mp_park: the joiner is in no queue and its permit is
	 * untouched, so nothing but mp's exit resumes it. */
	block(w, self, KR_WHY_JOIN);
	__atomic_store_n(&self->joining, 0, __ATOMIC_RELAXED);
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
	} while (!JOIN_CAS(mp, &j, st == JS_NONE ? gen | JS_DETACHED : JS_REAPED,
			   __ATOMIC_ACQ_REL));
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
	if (!permit_live(h))
		return ESRCH;
	/* first, so that the scheduler's and the module's reprio see it
	 * (and a push that the scheduler's reprio misses: d_reprio) */
	__atomic_store_n(&mp->prio, prio, __ATOMIC_RELAXED);
	seam_reprio(mp, prio);
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

