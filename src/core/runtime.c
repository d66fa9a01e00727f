/*
 * karui L2 — the runtime: kr_init and kr_fini, the workers and their VPs,
 * the idle loop, the event sources' hooks (kr_poller_add, kr_sched_park_until,
 * kr_sched_unpark, kr__poll_now, kr_sched_poll), kr_stats_get, and the accessors of
 * scheduler modules.
 *
 * A worker lives from its VP's start until karui stops, after every VP has
 * ended: until then idle VPs may look at any worker's timers.  The idle
 * loop runs first what route() handed it (rt.h), and is the one context
 * of its VP that may wait for a microprocess's on_cpu.  kr_init's claim
 * holds until kr_fini is over, so that a second kr_init sees it however
 * far the first one has got; kr_fini ends on the thread kr_init was
 * called on, resumed there by VP 0's idle loop.
 *
 * Fork.  The child of a fork made while karui runs has one thread, the
 * one that called fork, and karui's state as it was at that moment, maybe
 * half way through a change that a VP the child does not have was making.
 * A pthread_atfork child handler (registered by the first kr_init) stops
 * karui there for good and touches nothing else: the thread is no worker
 * (the calls for microprocesses return EPERM), `running` is 0 (so do the
 * calls that work while karui runs), `busy` stays (kr_init returns EBUSY:
 * the caller may be on a microprocess's stack, which a new karui would
 * not know of), and kr__forked makes the calls that read the rest from
 * any thread (keys, statistics) return EPERM.  Nothing is freed: the
 * child may be running on one of the stacks.  G.lock, which kr_init
 * takes, is made anew (a thread the child lacks may have held it).  A
 * microprocess whose function returns in the child ends the process with
 * exit(0), as the last thread of a process does (life.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "rt.h"
#include "../arch/procmap.h"

__thread struct kr_worker *kr__w __attribute__((tls_model("initial-exec")));
int kr__forked;

struct kr__rt kr__rt = {.lock = PTHREAD_MUTEX_INITIALIZER,
			.spare_lock = PTHREAD_MUTEX_INITIALIZER};

/* each VP's counters (rt.h), by VP id */
static struct counters cnt[KR_VP_MAX];
struct kr_worker *kr__workers[KR_VP_MAX];
uint32_t kr__workers_hi;

/* ---------------- the event sources ---------------- */

/* Several sources: each polled in turn, and what a source of its own
 * makes ready kept by the VP (rt.h, kr__poll). */
static void poll_all(void *arg)
{
	const struct kr__sources *s = arg;
	struct kr_worker *w = W();
	for (unsigned i = 0; i < s->n; i++) {
		w->own_source = s->p[i].flags & KR_POLLER_PER_VP;
		s->p[i].poll(s->p[i].arg);
	}
}

/* Under G.lock: the memory of the sets.  kr_poller_add keeps one spare
 * set for each source in force but one, so that kr_poller_remove never
 * fails for want of memory; every set allocated stays on G.sets until
 * kr_fini (a VP may still be reading one that was replaced). */
static int sets_reserve(unsigned n)
{
	while (G.nspare_sets < n) {
		struct kr__sources *s = calloc(1, sizeof *s);
		if (!s)
			return ENOMEM;
		s->all = G.sets;
		G.sets = s;
		s->older = G.spare_sets;
		G.spare_sets = s;
		G.nspare_sets++;
	}
	return 0;
}

static struct kr__sources *set_take(void)
{
	struct kr__sources *s = G.spare_sets;
	G.spare_sets = s->older;
	G.nspare_sets--;
	memset(s, 0, offsetof(struct kr__sources, all));
	return s;
}

/* Under G.lock: s holds the n sources of from (NULL: none) but the one at
 * `drop` (-1: none), then p (NULL: none), and is published in place of the
 * set in force; then the wait of the VP that waits for the shared sources
 * ends, so that it looks at the new set. */
static void set_publish(struct kr__sources *s, const struct kr__sources *from, int drop,
			const kr_poller *p)
{
	for (unsigned i = 0; from && i < from->n; i++)
		if ((int)i != drop)
			s->p[s->n++] = from->p[i];
	if (p)
		s->p[s->n++] = *p;
	s->sleeper = -1;
	for (unsigned i = 0; i < s->n; i++)
		if (!s->p[i].due)
			s->sleeper = (int)i;
	if (s->n == 1) {
		s->poll = s->p[0].poll;
		s->arg = s->p[0].arg;
		s->own = s->p[0].flags & KR_POLLER_PER_VP;
		s->sleeper = 0;
	} else {
		s->poll = poll_all;
		s->arg = s;
	}
	s->shared = s->sleeper >= 0 && !(s->p[s->sleeper].flags & KR_POLLER_PER_VP);
	__atomic_store_n(&G.src, s, __ATOMIC_RELEASE);
	kr_sched_unpark(0);
}

int kr_poller_add(const kr_poller *p)
{
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	if (!p || !p->poll || !p->wait || (!p->kick && !(p->flags & KR_POLLER_PER_VP)) ||
	    (p->due && (p->flags & KR_POLLER_PER_VP)))
		return EINVAL;
	pthread_mutex_lock(&G.lock);
	const struct kr__sources *s = G.src;
	int err = 0;
	for (unsigned i = 0; s && i < s->n; i++)
		if ((s->p[i].poll == p->poll && s->p[i].arg == p->arg) || (!p->due && !s->p[i].due))
			err = EBUSY;
	if (!err && s && s->n == KR_POLLER_MAX)
		err = ENOSPC;
	if (!err)
		err = sets_reserve((s ? s->n : 0) + 1);
	if (!err)
		set_publish(set_take(), s, -1, p);
	pthread_mutex_unlock(&G.lock);
	return err;
}

int kr_poller_remove(const kr_poller *p)
{
	if (!p)
		return EINVAL;
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	pthread_mutex_lock(&G.lock);
	const struct kr__sources *s = G.src;
	int at = -1;
	for (unsigned i = 0; s && i < s->n; i++)
		if (s->p[i].poll == p->poll && s->p[i].arg == p->arg)
			at = (int)i;
	int per_vp = at >= 0 && (s->p[at].flags & KR_POLLER_PER_VP);
	if (at >= 0 && s->n == 1) {
		__atomic_store_n(&G.src, NULL, __ATOMIC_RELEASE);
		kr_sched_unpark(0);
	} else if (at >= 0) {
		set_publish(set_take(), s, at, NULL);
	}
	if (per_vp) /* every idle VP was waiting in it */
		kr_vp_wakeup(kr_vp_count());
	pthread_mutex_unlock(&G.lock);
	return at < 0 ? ESRCH : 0;
}

/* How an idle VP waits for several sources.  It sleeps in the one without
 * `due` (the sleeper), whose wait the others' kr_sched_unpark(0) ends,
 * and one VP at a time (G.polling) also asks the `due` sources by when
 * they must be polled: until then it sleeps, or if that time has come it
 * gives its processor away and returns, to poll them in the idle loop
 * (MPI's spin).  A shared sleeper is waited in by that VP alone, the
 * others sleep on L0 (as with one source); a KR_POLLER_PER_VP one by every
 * VP, and there the VP that asks keeps its place only while a time is
 * set: a source that has nothing to look for wakes a VP on L0's word when
 * it has (kr_sched_unpark(0)), and whichever wakes asks.  Rejected: the
 * `due` source's own wait (MPI's naps on a futex) with a poll of the other
 * between naps, which would see a socket up to a nap late, and nothing at
 * all while nothing is pending there. */
static void park_many(struct kr_worker *w, const struct kr__sources *s, uint64_t deadline)
{
	const kr_poller *sl = s->sleeper >= 0 ? &s->p[s->sleeper] : NULL;
	struct kr_worker *none = NULL;
	__atomic_store_n(&w->kick_src, s->shared ? sl : NULL, __ATOMIC_RELAXED);
	int asks = __atomic_compare_exchange_n(&G.polling, &none, w, 0, __ATOMIC_SEQ_CST,
					       __ATOMIC_RELAXED);
	if (asks) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		uint64_t due = KR_FOREVER;
		for (unsigned i = 0; i < s->n; i++)
			if (s->p[i].due) {
				uint64_t d = s->p[i].due(s->p[i].arg);
				due = d < due ? d : due;
			}
		if (due <= kr_now()) {
			__atomic_store_n(&G.polling, NULL, __ATOMIC_RELEASE);
			kr_vp_switch();
			return;
		}
		deadline = due < deadline ? due : deadline;
		if (due == KR_FOREVER && !s->shared) {
			__atomic_store_n(&G.polling, NULL, __ATOMIC_RELEASE);
			asks = 0;
		}
	}
	if (sl && (sl->flags & KR_POLLER_PER_VP)) {
		w->own_source = 1;
		sl->wait(sl->arg, deadline);
		w->own_source = 0;
		if (w->kept_at == KR_KEPT_UNDATED)
			w->kept_at = kr_now();
	} else if (sl && asks) {
		if (kr_vp_sleep_until(0) != 0) {
			kr_vp_publish(KR_VP_SLEEPING);
			sl->wait(sl->arg, deadline);
			kr_vp_publish(KR_VP_RUNNING);
		}
	} else {
		kr_vp_sleep_until(deadline);
	}
	if (asks)
		__atomic_store_n(&G.polling, NULL, __ATOMIC_RELEASE);
}

/* Each VP waits on its own event source (KR_POLLER_PER_VP), which takes
 * L0 wakeups itself; or one VP at a time waits on a shared source and the
 * others sleep on L0.  Lost wakeups in the second case: the poller
 * publishes itself (seq_cst) and then takes a pending L0 wakeup if there
 * is one; kr_sched_unpark posts the L0 wakeup (seq_cst) and then looks for
 * a poller to kick.  One of the two sees the other, as in L0's own
 * protocol.  Several sources: park_many. */
void kr_sched_park_until(uint64_t deadline)
{
	uint64_t trim = kr__stacks_trim(kr_now());
	if (trim < deadline)
		deadline = trim;
	struct kr_worker *w = W(), *none = NULL;
	const struct kr__sources *s = w ? __atomic_load_n(&G.src, __ATOMIC_ACQUIRE) : NULL;
	if (s && s->n > 1) {
		park_many(w, s, deadline);
		return;
	}
	const kr_poller *p = s ? &s->p[0] : NULL;
	if (p && (p->flags & KR_POLLER_PER_VP)) {
		/* what its own source makes ready this VP keeps
		 * (sched_default.h: own_keeps).  Not so with a shared
		 * source, whose waiter must be relieved when it finds work. */
		w->own_source = 1;
		p->wait(p->arg, deadline);
		w->own_source = 0;
		if (w->kept_at == KR_KEPT_UNDATED)
			w->kept_at = kr_now();
		return;
	}
	if (p) {
		__atomic_store_n(&w->kick_src, p, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(&G.polling, &none, w, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED)) {
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (kr_vp_sleep_until(0) != 0) {
				kr_vp_publish(KR_VP_SLEEPING);
				p->wait(p->arg, deadline);
				kr_vp_publish(KR_VP_RUNNING);
			}
			__atomic_store_n(&G.polling, NULL, __ATOMIC_RELEASE);
			return;
		}
	}
	kr_vp_sleep_until(deadline);
}

void kr__poll_now(void)
{
	struct kr_worker *w = W();
	if (w)
		kr__poll(w);
}

/* What this poll makes ready is not kept (kr__poll, own_keeps): the VP is
 * about to run code that reaches no scheduling point for a while, where
 * kept work would wait.  What it kept before is shared now as well: its
 * watch taken as ended (a kept_at long past). */
void kr_sched_poll(void)
{
	struct kr_worker *w = W();
	if (!w)
		return;
	const struct kr__sources *s = __atomic_load_n(&G.src, __ATOMIC_ACQUIRE);
	if (s) {
		w->waking = KR_BY_IO;
		s->poll(s->arg);
		w->waking = KR_BY_MP;
	}
	if (w->kept_at) {
		w->kept_at = KR_KEPT_UNDATED;
		seam_keep(w);
	}
}

/* n = 0 (a source's new work, or a new set): a fence for the Dekker pair
 * with the VP that publishes itself in G.polling and then looks at the
 * sources. */
void kr_sched_unpark(unsigned n)
{
	if (n)
		kr_vp_wakeup(n);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* the poller itself wakes microprocesses from inside its wait */
	struct kr_worker *p = __atomic_load_n(&G.polling, __ATOMIC_SEQ_CST);
	const kr_poller *k = p && p != W() ? __atomic_load_n(&p->kick_src, __ATOMIC_RELAXED) : NULL;
	if (k) {
		k->kick(k->arg);
	} else if (!n) {
		const struct kr__sources *s = __atomic_load_n(&G.src, __ATOMIC_ACQUIRE);
		if (s && !s->shared)
			kr_vp_wakeup(1);
	}
}

/* kr__ready_tail's and spawn_tail's idle VP (rt.h). */
__attribute__((noinline)) int kr__unpark_one(void)
{
	kr_sched_unpark(1);
	return 0;
}

void **kr_sched_data(kr_sched *s) { return &s->data; }

void **kr_sched_vp_data(kr_vp *vp)
{
	return &((struct kr_worker *)vp->upper)->sched_vp;
}

/* ---------------- VPs and the idle loop ---------------- */

static void idle_loop(struct kr_worker *w)
{
	for (;;) {
		kr_mp *mp = w->pending; /* handed over by route() */
		int routed = mp != NULL; /* its switch is traced already */
		w->pending = NULL;
		release_dead(w);
		if (!mp && w->hold) {
			void (*hold)(kr_mp *, uintptr_t) = w->hold;
			kr_mp *held = w->held;
			w->hold = NULL;
			w->held = NULL;
			hold(kr__handle(held), w->hold_arg);
		} else if (!mp && G.alloc) {
			mp = G.alloc->idle(w, w->held);
			w->held = NULL;
		} else if (w->spare && !mp) {
			kr__vp_retire(w, KR_FOREVER);
		}
		permit_posts_run();
		kr__timers_run_all();
		kr__poll(w);
		if (!mp)
			mp = seam_next(w, NULL);
		if (!mp && __atomic_load_n(&G.stopping, __ATOMIC_ACQUIRE)) {
			if (w != G.w0)
				return;
			kr_mp *h = __atomic_load_n(&G.handoff, __ATOMIC_ACQUIRE);
			if (h && permit_claim_sleeper(h))
				mp = h;
		}
		if (!mp)
			mp = seam_idle(w);
		if (!mp)
			continue;
		if (!routed)
			trace_switch(w, NULL, mp, KR_WHY_RUNNABLE);
		claim_cpu(w, mp);
#if defined(__SANITIZE_ADDRESS__)
		void *fake;
#endif
		ASAN_START(w, &fake, mp);
		TSAN_SWITCH(w, mp);
		kr__ctx_switch(&w->idle.ctx, &mp->ctx, left_word(w, &w->idle));
		ASAN_FINISH(fake);
		w->cur = NULL;
		done_left(w);
	}
}

/* VP 0's idle loop runs on a stack of its own, first entered when the main
 * microprocess blocks. */
static kr_ctx_transfer idle_entry(void *unused)
{
	(void)unused;
	done_left(W());
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
	int err = seam_vp_init(w);
	if (err) {
		vp->upper = NULL;
		kr__stack_cache_free(w->stacks);
		free(w);
		return NULL;
	}
	kr__timers_init(&w->timers);
	w->tick = 8;
	w->fast = seam_fast(w);
	__atomic_store_n(&kr__workers[vp->id], w, __ATOMIC_RELEASE);
	kr__preempt_vp(w, vp->id);
	uint32_t hi = __atomic_load_n(&kr__workers_hi, __ATOMIC_RELAXED);
	while (hi <= vp->id && !__atomic_compare_exchange_n(&kr__workers_hi, &hi, vp->id + 1, 1,
							    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	return w;
}

/* Workers live until karui stops, after every VP has ended: until then
 * idle VPs may look at any worker's timers. */
static void worker_free(unsigned id)
{
	struct kr_worker *w = kr__workers[id];
	kr__preempt_vp(NULL, id);
	__atomic_store_n(&kr__workers[id], NULL, __ATOMIC_RELEASE);
	kr__timers_fini(&w->timers);
	release_dead(w);
	kr__stack_cache_free(w->stacks);
	free(w);
}

/* The process's main thread's stack as pthread_getattr_np gives it — the
 * top of the mapping that holds it, less RLIMIT_STACK or down to the end
 * of the mapping below, if nearer — from a few PROCMAP_QUERYs rather than
 * glibc's read of all of /proc/self/maps, slow in a new process (figures:
 * docs/notes/2026-11-27-uprocs.md).  0, or -1 where the kernel cannot say (before Linux 6.11). */
static int main_stack(const void **lo, size_t *size)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return -1;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char here;
	struct procmap_query q = {.size = sizeof q, .query_addr = (uintptr_t)&here};
	int r = ioctl(fd, PROCMAP_QUERY, &q) ? -1 : 0;
	if (!r) {
		uint64_t lim = rl.rlim_cur & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
		uint64_t last = q.vma_end > lim ? q.vma_end - lim : 0;
		for (uint64_t at = last;;) { /* mappings between that and the stack's */
			struct procmap_query n = {.size = sizeof n,
						  .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
						  .query_addr = at};
			if (ioctl(fd, PROCMAP_QUERY, &n) || n.vma_start >= q.vma_start)
				break;
			if (n.vma_end > last)
				last = n.vma_end;
			at = n.vma_end;
		}
		*lo = (const void *)(uintptr_t)last;
		*size = q.vma_end - last;
	}
	close(fd);
	return r;
}

static void thread_stack(const void **lo, size_t *size)
{
	if (gettid() == getpid() && main_stack(lo, size) == 0)
		return;
	pthread_attr_t a;
	void *addr = NULL;
	*size = 0;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstack(&a, &addr, size);
		pthread_attr_destroy(&a);
	}
	*lo = addr;
}

void kr__vp_main(kr_vp *vp, void *arg)
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
	if (G.alloc)
		G.alloc->vp_start(w);
	idle_loop(w);
	if (G.alloc)
		G.alloc->vp_stop(w);
	kr__w = NULL; /* teardown() frees w */
}

/* The processors the process may use (its affinity), 1 at least. */
static unsigned processors(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	unsigned n = (unsigned)CPU_COUNT(&set);
	return n < 1 ? 1 : n > KR_VP_MAX ? KR_VP_MAX : n;
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

/* The child of a fork (see the top). */
static void fork_child(void)
{
	kr__w = NULL;
	pthread_mutex_init(&G.lock, NULL);
	if (G.busy) {
		kr__forked = 1;
		G.running = 0;
		G.src = NULL;
	}
}

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
	unsigned nvp = cfg->vps ? cfg->vps : cfg->alloc ? processors() : 1;
	if (nvp > KR_VP_MAX || !ops_valid(cfg))
		return EINVAL;
	/* The claim is made under the lock, and held until kr_fini is over:
	 * a second kr_init sees it however far the first one has got. */
	pthread_mutex_lock(&G.lock);
	if (G.busy || kr_vp_self()) {
		pthread_mutex_unlock(&G.lock);
		return EBUSY;
	}
	if (!G.fork_hooked)
		G.fork_hooked = pthread_atfork(NULL, NULL, fork_child) == 0;
	if (!G.fork_hooked) {
		pthread_mutex_unlock(&G.lock);
		return ENOMEM;
	}
	G.busy = 1;
	int err = kr__stacks_init(cfg->stack_cache ? cfg->stack_cache : 64);
	memset(cnt, 0, sizeof cnt);
	G.sched.ops = cfg->sched ? cfg->sched : &kr_sched_default;
	G.seam = kr__seam_for(G.sched.ops);
	G.sched.rq = cfg->rq ? cfg->rq : &kr_rq_ws;
	G.sched.nvp = nvp;
	G.sched.data = NULL;
	G.stopping = 0;
	G.handoff = NULL;
	G.active = nvp;
	G.target = nvp;
	G.alloc = cfg->alloc;
	G.naway = G.alloc ? 1 : 0; /* an allocator's turn (alloc.h) */
	G.src = NULL;
	G.polling = NULL;
	kr__permits_start(nvp == 1 && G.seam->solo);
	kr__served_start();
	if (!err)
		err = G.sched.ops->init(SCHED, G.sched.rq, nvp);
	pthread_mutex_unlock(&G.lock);
	if (err) {
		unclaim();
		return err;
	}
	kr__trace_start(cfg);

	kr_vp *vp0;
	/* 64-byte aligned, as the records on stacks are (the mutex's tokens) */
	kr_mp *main = aligned_alloc(64, (sizeof *main + 63) & ~(size_t)63);
	if (main)
		memset(main, 0, sizeof *main);
	if (!main || (err = kr_vp_adopt(&vp0)) != 0) {
		free(main);
		kr__trace_stop();
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
		kr__trace_stop();
		G.sched.ops->fini(SCHED);
		kr__stacks_fini();
		unclaim();
		return ENOMEM;
	}
	w->idle_stack_lo = idle->stack_lo;
	w->idle_stack_size = idle->stack_size;
	kr__ctx_init(&w->idle.ctx, idle->stack_lo, idle->stack_size, idle_entry,
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
	main->id = vp0->id;
	w->cur = main;
	trace_switch(w, NULL, main, KR_WHY_RUNNABLE);
	G.main = main;
	G.w0 = w;
	kr__w = w;
	__atomic_store_n(&G.running, 1, __ATOMIC_RELEASE);
	if (G.alloc) {
		G.target = G.alloc->start(nvp);
		G.alloc->vp_start(w);
	}

	if (nvp > 1) {
		G.vps = calloc(nvp - 1, sizeof *G.vps);
		err = G.vps ? kr_vp_allocate(G.vps, nvp - 1, kr__vp_main, NULL) : ENOMEM;
		G.nvps = err ? 0 : nvp - 1;
		if (err) {
			/* kr_vp_allocate starts all or none */
			teardown();
			unclaim();
			return err;
		}
	}
	if (G.alloc || kr__preempt_wanted())
		kr__preempt_init();
	return 0;
}

/* Ends are read before creations: every microprocess counted as ended
 * was created earlier and is counted as created too, so the count is never
 * negative, even while microprocesses come and go on other VPs. */
static unsigned long live_count(void)
{
	unsigned long c = 0, e = 0;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		e += __atomic_load_n(&cnt[i].ended, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		c += __atomic_load_n(&cnt[i].created, __ATOMIC_RELAXED);
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
	kr__spares_kick();
	for (unsigned i = 0; i < G.nvps; i++)
		kr_vp_join(G.vps[i]);
	free(G.vps);
	G.vps = NULL;
	G.nvps = 0;
	kr__spares_kick();
	if (G.nspares)
		kr_sched_unpark(G.nspares);
	for (unsigned i = 0; i < G.nspares; i++)
		kr_vp_join(G.spares[i]);
	G.nspares = G.spare_parked = G.spare_tokens = 0;
	if (G.alloc) {
		G.alloc->vp_stop(w);
		G.alloc->stop();
		G.alloc = NULL;
	}
	const struct kr__sources *s = G.src;
	for (unsigned i = s ? s->n : 0; i-- > 0;)
		if (s->p[i].fini)
			s->p[i].fini(s->p[i].arg);
	__atomic_store_n(&G.src, NULL, __ATOMIC_RELEASE);
	while (G.sets) {
		struct kr__sources *n = G.sets->all;
		free(G.sets);
		G.sets = n;
	}
	G.spare_sets = NULL;
	G.nspare_sets = 0;
	__atomic_store_n(&G.running, 0, __ATOMIC_RELEASE);
	G.sched.ops->fini(SCHED);
	kr__w = NULL;
	TSAN_DROP(w->tsan_idle);
	kr_vp *vp0 = w->vp;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (kr__workers[i])
			worker_free(i);
	kr__workers_hi = 0;
	free(G.main);
	G.main = NULL;
	G.w0 = NULL;
	vp0->upper = NULL;
	kr_vp_release();
	kr__trace_stop();
	kr__stacks_fini();
}

/* A microprocess's last act may be a wakeup of this one, or the end of
 * what this one waited for (a pipe's writer that puts its end, then
 * returns): it may still be on its way out when kr_fini is called.  Up to
 * FINI_GRACE_NS for the others to end, in naps. */
#define FINI_GRACE_NS 100000000u
static int others_end(void)
{
	uint64_t until = kr_now() + FINI_GRACE_NS;
	while (live_count() != 0) {
		if (kr_now() >= until)
			return 0;
		kr_mp_sleep_for(100000);
	}
	return 1;
}

int kr_fini(void)
{
	struct kr_worker *w = W();
	if (!w || !w->cur->is_main)
		return EPERM;
	if (!others_end())
		return EBUSY;
	w = W(); /* its naps may have moved it to another VP */
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
		permit_sleep_for_handoff(self);
		__atomic_store_n(&G.handoff, self, __ATOMIC_RELEASE);
		__atomic_store_n(&G.stopping, 1, __ATOMIC_RELEASE);
		kr_sched_unpark(G.nvps + G.nspares + 1);
		kr__spares_kick(); /* VP 0 may be parked (alloc.h) */
		block(w, self, KR_WHY_PARK);
	}
	teardown();
	unclaim();
	return 0;
}

int kr_stats_get(kr_stats *st)
{
	if (!st)
		return EINVAL;
	if (kr__forked)
		return EPERM;
	st->mps_live = live_count();
	kr__stack_stats(st);
	return 0;
}
