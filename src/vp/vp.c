/*
 * karui L0 — virtual processors.  See include/karui/vp.h for the contract.
 *
 * Registry.  Live VPs sit in a fixed table of KR_VP_MAX slots under one
 * mutex; only allocate / adopt / release / join touch it, never a fast path.
 * A slot index is the VP's id and is reused once the VP is gone.
 *
 * Sleep / wakeup.  One process-wide futex counting semaphore:
 *   tokens   pending wakeups (never more than the live VPs: excess is
 *            dropped, since each VP needs at most one reason to look again)
 *   waiters  VPs inside the futex wait
 * kr_vp_sleep_until first spins for KR_VP_SPIN_NS trying to take a token (a
 * producer usually follows quickly), then registers as a waiter and waits on
 * the futex while tokens is 0.  kr_vp_wakeup adds tokens with a CAS loop and
 * issues FUTEX_WAKE only when more VPs wait than wakeups were pending
 * before (the posters of those woke as many).  Ordering: the waiter's
 * increment of `waiters` and the poster's increment of `tokens` are both
 * seq_cst RMWs, so at least one of them sees the other (Dekker): either the
 * poster sees the waiter and wakes it, or the waiter's futex_wait sees
 * tokens != 0 and returns at once.
 *
 * An event source that waits on the same futex (kr_vp_sleep_begin /
 * kr_vp_sleep_end) joins the protocol: it counts as a waiter between the
 * two, and its wait on `tokens` is woken by the same FUTEX_WAKE.  Such a
 * wait can stay queued after its VP stopped counting (io_uring's
 * FUTEX_WAIT lives until it fires), ahead of the real sleepers in the
 * futex's queue: `stale` counts them and kr_vp_wakeup wakes that many
 * more.  (Passing a swallowed wakeup on when its VP next looked was
 * tried first: a VP that never looks again, such as the main thread in
 * kr_fini, kept it for good.)
 *
 * Alternate signal stacks.  A signal handler runs on the stack of whatever
 * the thread was running: on a VP, a microprocess's stack, which can be a
 * single page with the microprocess's record at its top, and which is full
 * when the signal is the SIGSEGV of its guard page.  So every VP thread gets
 * an alternate signal stack (64 KiB or more, untouched until a signal
 * comes) unless it has one already (an adopted thread's own, or a
 * sanitizer's), and handlers installed with SA_ONSTACK run there.  Threads
 * started here block every signal but those of their own faults (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS: a fault signal that is blocked
 * kills the process without running its handler), so such handlers run on
 * them for their own faults only; VP 0 and adopted threads keep the
 * application's mask.
 *
 * Fork.  The child of a fork has one thread, the one that called fork: the
 * parent's VPs are not there.  A pthread_atfork child handler (registered
 * at the first kr_vp_allocate or kr_vp_adopt) makes L0 forget them: an
 * empty registry, the semaphore at zero, and the forking thread no VP, so
 * that every call that needs one returns EPERM at once and the child may
 * start VPs of its own.  A thread started here blocks nearly every signal,
 * which neither the child nor a program it execs must inherit: it gets
 * back `appmask`, the mask of the application's thread that started it
 * (for a VP started by a VP, that VP's appmask); an adopted thread's mask
 * is the application's own (its appmask is its mask when adopted) and
 * stays.  The VPs' memory is not freed in the child: the layers above
 * still point at it, frozen.  The registry's lock, which a thread the
 * child does not have may have held at the fork, is made anew there.
 * Rejected: taking that lock in a prepare handler (a fork would wait for
 * kr_vp_allocate's mmaps, to protect state that the child resets anyway).
 *
 * Rejected: a futex word per VP with a list of sleepers (the wakeup of a VP
 * that is between "announce idle" and "sleep" needs extra states; the
 * semaphore gives that for free); condition variables (a mutex on every
 * wakeup).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vp_internal.h"

__thread kr_vp *kr__vp_self __attribute__((tls_model("initial-exec")));

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static kr_vp *reg[KR_VP_MAX];
static unsigned reg_live;   /* under reg_lock, but kr_vp_wakeup reads it
			       without: stored atomically */
static int fork_hooked; /* under reg_lock: fork_child is registered */

static struct {
	_Alignas(64) uint32_t tokens;
	uint32_t waiters;
	uint32_t stale;   /* event-source waits still queued, their VP awake */
} sem;

/* The child of a fork (see the top): no VPs. */
static void fork_child(void)
{
	kr_vp *vp = kr__vp_self;
	kr__vp_self = NULL;
	if (vp && !vp->adopted)
		pthread_sigmask(SIG_SETMASK, &vp->appmask, NULL);
	pthread_mutex_init(&reg_lock, NULL);
	memset(reg, 0, sizeof reg);
	reg_live = 0;
	memset(&sem, 0, sizeof sem);
}

/* Under reg_lock, before the first VP: 0 or ENOMEM (tried again next time). */
static int fork_hook(void)
{
	if (!fork_hooked && pthread_atfork(NULL, NULL, fork_child) == 0)
		fork_hooked = 1;
	return fork_hooked ? 0 : ENOMEM;
}

static int slot_get(kr_vp *vp)
{
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (!reg[i]) {
			reg[i] = vp;
			vp->id = i;
			__atomic_store_n(&reg_live, reg_live + 1, __ATOMIC_RELAXED);
			return 0;
		}
	return EAGAIN;
}

static void slot_put(kr_vp *vp)
{
	reg[vp->id] = NULL;
	__atomic_store_n(&reg_live, reg_live - 1, __ATOMIC_RELAXED);
}

#define ALTSTACK_MIN ((size_t)64 << 10)

static size_t altstack_size(void)
{
	size_t k = (size_t)getauxval(AT_MINSIGSTKSZ) * 4; /* the kernel's frame, 4 times */
	return k > ALTSTACK_MIN ? (k + 4095) & ~(size_t)4095 : ALTSTACK_MIN;
}

/* A VP with memory for its alternate signal stack, or NULL (ENOMEM). */
static kr_vp *vp_new(void)
{
	kr_vp *vp = aligned_alloc(64, sizeof *vp);
	if (!vp)
		return NULL;
	memset(vp, 0, sizeof *vp);
	void *p = mmap(NULL, altstack_size(), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(vp);
		return NULL;
	}
	vp->altstack = p;
	return vp;
}

static void vp_free(kr_vp *vp)
{
	munmap(vp->altstack, altstack_size());
	free(vp);
}

/* On the VP's thread: use vp->altstack unless the thread has a stack. */
static void altstack_install(kr_vp *vp)
{
	stack_t cur, ss = {.ss_sp = vp->altstack, .ss_size = altstack_size()};
	if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE))
		vp->altstack_on = sigaltstack(&ss, NULL) == 0;
}

/* On the VP's thread, before vp->altstack goes. */
static void altstack_remove(kr_vp *vp)
{
	stack_t ss = {.ss_flags = SS_DISABLE};
	if (vp->altstack_on)
		sigaltstack(&ss, NULL);
	vp->altstack_on = 0;
}

/* kr_vp_allocate's start gate: threads wait until every one of them has
 * been created, and run fn only if all were (all start or none does).
 * The caller does not wait for them to pass: the gate is shared, and the
 * last of the caller and its threads to leave it frees it. */
struct gate {
	pthread_mutex_t m;
	pthread_cond_t c;
	int state;        /* 0 closed, 1 go, -1 abort */
	unsigned refs;    /* the caller and the threads not yet through */
};

static void gate_put(struct gate *g)
{
	pthread_mutex_lock(&g->m);
	unsigned left = --g->refs;
	pthread_mutex_unlock(&g->m);
	if (!left) {
		pthread_cond_destroy(&g->c);
		pthread_mutex_destroy(&g->m);
		free(g);
	}
}

static int gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->m);
	while (g->state == 0)
		pthread_cond_wait(&g->c, &g->m);
	int go = g->state > 0;
	pthread_mutex_unlock(&g->m);
	gate_put(g);
	return go;
}

static void gate_open(struct gate *g, int state)
{
	pthread_mutex_lock(&g->m);
	g->state = state;
	pthread_cond_broadcast(&g->c);
	pthread_mutex_unlock(&g->m);
	gate_put(g);
}

static void *vp_thread(void *p)
{
	kr_vp *vp = p;
	struct gate *g = vp->upper; /* the gate, until fn runs */
	if (!gate_wait(g))
		return NULL;
	vp->upper = NULL;
	sigset_t faults;
	sigemptyset(&faults);
	sigaddset(&faults, SIGSEGV);
	sigaddset(&faults, SIGBUS);
	sigaddset(&faults, SIGILL);
	sigaddset(&faults, SIGFPE);
	sigaddset(&faults, SIGTRAP);
	sigaddset(&faults, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
	altstack_install(vp);
	kr__vp_self = vp;
	kr__vp_set_status(vp, KR_VP_RUNNING);
	vp->fn(vp, vp->arg);
	kr__vp_set_status(vp, KR_VP_EXITED);
	kr__vp_self = NULL;
	altstack_remove(vp);
	return NULL;
}

int kr_vp_allocate(kr_vp **out, unsigned n, kr_vp_main fn, void *arg)
{
	if (n == 0 || !fn)
		return EINVAL;
	if (n > KR_VP_MAX)
		return EAGAIN;
	kr_vp **vps = calloc(n, sizeof *vps);
	if (!vps)
		return ENOMEM;
	int err = 0;
	unsigned made = 0;
	pthread_mutex_lock(&reg_lock);
	if (reg_live + n > KR_VP_MAX)
		err = EAGAIN;
	else
		err = fork_hook();
	/* slots taken now, threads created below: a failure undoes both */
	for (; !err && made < n; made++) {
		kr_vp *vp = vp_new();
		if (!vp) {
			err = ENOMEM;
			break;
		}
		vp->fn = fn;
		vp->arg = arg;
		slot_get(vp);
		vps[made] = vp;
	}
	pthread_mutex_unlock(&reg_lock);
	/* Every thread waits at the gate; fn runs only if all were created.
	 * Threads start with all signals blocked and inherit nothing else
	 * (vp_thread unblocks the fault signals).  Their appmask is the
	 * application's: the caller's mask, or the calling VP's appmask. */
	struct gate *g = err ? NULL : malloc(sizeof *g);
	if (!err && !g)
		err = ENOMEM;
	if (g)
		*g = (struct gate){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1 + made};
	unsigned started = 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	const sigset_t *app = kr__vp_self ? &kr__vp_self->appmask : &old;
	for (; !err && started < made; started++) {
		vps[started]->appmask = *app;
		vps[started]->upper = g;
		if (pthread_create(&vps[started]->thread, NULL, vp_thread, vps[started])) {
			err = EAGAIN;
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (g) {
		/* the references of threads that were never created */
		pthread_mutex_lock(&g->m);
		g->refs -= made - started;
		pthread_mutex_unlock(&g->m);
		gate_open(g, err ? -1 : 1);
	}
	for (unsigned i = 0; err && i < started; i++)
		pthread_join(vps[i]->thread, NULL);
	if (err) {
		pthread_mutex_lock(&reg_lock);
		for (unsigned i = 0; i < made; i++) {
			slot_put(vps[i]);
			vp_free(vps[i]);
			vps[i] = NULL;
		}
		pthread_mutex_unlock(&reg_lock);
	}
	if (out)
		for (unsigned i = 0; i < n; i++)
			out[i] = vps[i];
	free(vps);
	return err;
}

int kr_vp_adopt(kr_vp **out)
{
	if (kr__vp_self)
		return EEXIST;
	kr_vp *vp = vp_new();
	if (!vp)
		return ENOMEM;
	pthread_mutex_lock(&reg_lock);
	int err = fork_hook();
	if (!err)
		err = slot_get(vp);
	pthread_mutex_unlock(&reg_lock);
	if (err) {
		vp_free(vp);
		return err;
	}
	vp->adopted = 1;
	vp->thread = pthread_self();
	pthread_sigmask(SIG_SETMASK, NULL, &vp->appmask);
	altstack_install(vp);
	kr__vp_self = vp;
	kr__vp_set_status(vp, KR_VP_RUNNING);
	if (out)
		*out = vp;
	return 0;
}

int kr_vp_release(void)
{
	kr_vp *vp = kr__vp_self;
	if (!vp)
		return EPERM;
	if (!vp->adopted)
		return EINVAL;
	if (vp->upper) /* a layer above runs here (karui, kr_init to kr_fini) */
		return EBUSY;
	kr__vp_self = NULL;
	altstack_remove(vp);
	pthread_mutex_lock(&reg_lock);
	slot_put(vp);
	pthread_mutex_unlock(&reg_lock);
	vp_free(vp);
	return 0;
}

int kr_vp_join(kr_vp *vp)
{
	if (!vp || vp->adopted)
		return EINVAL;
	if (vp == kr__vp_self)
		return EDEADLK;
	int err = pthread_join(vp->thread, NULL);
	if (err)
		return err;
	pthread_mutex_lock(&reg_lock);
	slot_put(vp);
	pthread_mutex_unlock(&reg_lock);
	vp_free(vp);
	return 0;
}

kr_vp *kr_vp_self(void) { return kr__vp_self; }
unsigned kr_vp_id(const kr_vp *vp) { return vp ? vp->id : UINT_MAX; }
void *kr_vp_area(kr_vp *vp) { return vp ? vp->area : NULL; }

unsigned kr_vp_count(void)
{
	pthread_mutex_lock(&reg_lock);
	unsigned n = reg_live;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

int kr_vp_status(const kr_vp *vp)
{
	return vp ? (int)__atomic_load_n(&vp->status, __ATOMIC_ACQUIRE) : 0;
}

static int take_token(void)
{
	uint32_t t = __atomic_load_n(&sem.tokens, __ATOMIC_RELAXED);
	while (t)
		if (__atomic_compare_exchange_n(&sem.tokens, &t, t - 1, 1,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

uint64_t kr_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int kr_vp_sleep_until(uint64_t deadline)
{
	kr_vp *vp = kr__vp_self;
	if (!vp)
		return EPERM;
	if (take_token())
		return 0;
	uint64_t start = kr_now();
	if (start >= deadline)
		return ETIMEDOUT;
	while (kr_now() - start < KR_VP_SPIN_NS) {
		if (take_token())
			return 0;
		for (unsigned j = 0; j < 64; j++)
			kr_cpu_relax();
	}
	kr__vp_set_status(vp, KR_VP_SLEEPING);
	int ret = ETIMEDOUT;
	__atomic_fetch_add(&sem.waiters, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		if (take_token()) {
			ret = 0;
			break;
		}
		struct timespec rel, *prel = NULL;
		if (deadline != KR_FOREVER) {
			uint64_t now = kr_now();
			if (now >= deadline)
				break;
			uint64_t left = deadline - now;
			rel.tv_sec = (time_t)(left / 1000000000u);
			rel.tv_nsec = (long)(left % 1000000000u);
			prel = &rel;
		}
		syscall(SYS_futex, &sem.tokens, FUTEX_WAIT_PRIVATE, 0, prel, NULL, 0);
	}
	__atomic_fetch_sub(&sem.waiters, 1, __ATOMIC_RELAXED);
	kr__vp_set_status(vp, KR_VP_RUNNING);
	return ret;
}

int kr_vp_sleep_begin(uint32_t **word, int queued)
{
	kr_vp *vp = kr__vp_self;
	if (!word)
		return EINVAL;
	if (!vp)
		return EPERM;
	if (take_token())
		return 0;
	kr__vp_set_status(vp, KR_VP_SLEEPING);
	__atomic_fetch_add(&sem.waiters, 1, __ATOMIC_SEQ_CST);
	if (queued)
		__atomic_fetch_sub(&sem.stale, 1, __ATOMIC_SEQ_CST);
	if (take_token()) {
		kr_vp_sleep_end(queued);
		return 0;
	}
	*word = &sem.tokens;
	return EAGAIN;
}

int kr_vp_sleep_end(int queued)
{
	kr_vp *vp = kr__vp_self;
	if (!vp)
		return EPERM;
	if (queued)
		__atomic_fetch_add(&sem.stale, 1, __ATOMIC_SEQ_CST);
	int ret = take_token() ? 0 : ETIMEDOUT;
	__atomic_fetch_sub(&sem.waiters, 1, __ATOMIC_RELAXED);
	kr__vp_set_status(vp, KR_VP_RUNNING);
	return ret;
}

void kr_vp_wait_ended(void)
{
	__atomic_fetch_sub(&sem.stale, 1, __ATOMIC_SEQ_CST);
}

int kr_vp_wakeup(unsigned n)
{
	if (n == 0)
		return EINVAL;
	uint32_t cap = __atomic_load_n(&reg_live, __ATOMIC_RELAXED);
	uint32_t t = __atomic_load_n(&sem.tokens, __ATOMIC_RELAXED), nt;
	do {
		nt = t + n > cap ? (t > cap ? t : cap) : t + n;
		if (nt == t)
			break;
	} while (!__atomic_compare_exchange_n(&sem.tokens, &t, nt, 1,
					      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* t wakeups were pending already: their posters woke as many
	 * sleepers, so only sleepers beyond t need a FUTEX_WAKE */
	uint32_t w = __atomic_load_n(&sem.waiters, __ATOMIC_SEQ_CST);
	if (w > t) {
		/* queued waits of VPs that no longer sleep come first in the
		 * futex's queue: wake past them */
		uint64_t k = (uint64_t)(n < w - t ? n : w - t) +
			     __atomic_load_n(&sem.stale, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &sem.tokens, FUTEX_WAKE_PRIVATE, k > INT_MAX ? INT_MAX : (int)k,
			NULL, NULL, 0);
	}
	return 0;
}

void (*kr__vp_status_hook)(kr_vp *vp, int status);

int kr_vp_publish(int status)
{
	if (!kr__vp_self)
		return EPERM;
	if (status < KR_VP_RUNNING || status > KR_VP_SUSPENDED)
		return EINVAL;
	kr__vp_set_status(kr__vp_self, status);
	return 0;
}

int kr_vp_switch(void)
{
	if (!kr__vp_self)
		return EPERM;
	sched_yield();
	return 0;
}
