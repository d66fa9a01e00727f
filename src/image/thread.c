/*
 * karui image layer — a μprocess's threads (clone with CLONE_THREAD, as
 * glibc's pthread_create makes them) and its futexes.
 *
 * A thread is a microprocess of its own, with what the kernel keeps per
 * thread (struct kr__uthr: its tid, thread pointer, signal mask and
 * alternate stack, its pending signals, the call it is in); what the
 * kernel keeps per process (memory, fds, working directory, signal
 * dispositions) is its μprocess's, shared.  clone copies the calling
 * thread's registers, vector state included, out of the call's trap frame
 * into a signal frame of karui's, with the stack and thread pointer the
 * call gives and %rax 0; the new microprocess resumes the thread from it
 * through the gate's rt_sigreturn (kr__thr_resume), as a vfork's parent
 * resumes.  Its calls come through the same trap as every call of the
 * μprocess, each served for the thread that makes it (kr__uthr_self).
 *
 * The end (uproc.c: kr__uthr_end).  exit ends the calling thread: its
 * CLONE_CHILD_CLEARTID word is cleared and woken (pthread_join waits on
 * it), its struct freed, its microprocess ended.  exit_group, a signal
 * whose default action ends the process, or a fault with no handler end
 * the μprocess: each of its threads is told (attn, its wait cut short,
 * its VP kicked if it computes) and ends as it comes back from karui; the
 * first thread, which ends last, releases the μprocess.  An exec ends the
 * other threads first, as the kernel's; one in a thread other than the
 * first is taken over by the first once the others have ended (uproc.c),
 * as the kernel's de_thread makes the exec's thread the leader.
 *
 * Futexes.  One address space holds the host and every μprocess, so a
 * futex is keyed by its address alone, private or shared: a table of
 * buckets, each a short lock and a FIFO of waiters, each waiter a
 * microprocess parked (cancellably: a signal ends the wait) with its
 * `woken` word.  A wait reads the word under its bucket's lock, through
 * uaccess.S (a bad address is EFAULT); a wake takes waiters off under the
 * same lock, so none is lost between the read and the park.  A waiter
 * that times out or is cancelled takes itself off, unless a wake took it
 * first, which counts.
 *
 * The robust list.  set_robust_list names the list of the robust
 * mutexes a thread holds; when it ends, each one whose word still holds
 * its tid is marked FUTEX_OWNER_DIED (its waiters bit kept) and one
 * waiter woken, so that the next lock returns EOWNERDEAD, as the
 * kernel's exit_robust_list does: a bad list ends the walk, 2048 entries
 * at most, and entries of PI mutexes are passed over.
 *
 * Not done: the PI futex operations and FUTEX_WAKE_OP are ENOSYS, and an exec, from a
 * thread other than the first, of a program that cannot be a μprocess's
 * (uproc.c: stand_for) is ENOSYS (sys_exec.c says so).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sys.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* what pthread_create asks, at least */
#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD)
/* and what else it may ask: the rest is EINVAL */
#define THREAD_MAY                                                                             \
	(THREAD_FLAGS | CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_SETTID | \
	 CLONE_CHILD_CLEARTID | CLONE_DETACHED | CLONE_UNTRACED | CSIGNAL)

/* ---------------- threads ---------------- */

/* The new thread's microprocess: its end runs here, its code from the
 * frame clone saved. */
static void *thr_run(void *arg)
{
	struct kr__uthr *t = arg;
	char here;
	t->die_sp = ((uintptr_t)&here - 256) & ~(uintptr_t)15;
	kr__thr_resume(t, 0, 0);
}

long kr__thr_clone(struct kr__uthr *p, unsigned long flags, uintptr_t stack, uintptr_t ptid,
		   uintptr_t ctid, uint64_t tls)
{
	struct kr_uproc *up = p->up;
	if ((flags & THREAD_FLAGS) != THREAD_FLAGS || (flags & ~(unsigned long)THREAD_MAY)) {
		kr__say(up, "a thread that does not share its fds, working directory and signal "
			    "handlers");
		return -EINVAL;
	}
	if (!p->uc) /* a rewritten site: never clone's (uproc.c) */
		return -ENOSYS;
	if (up->vparent) /* a vfork child runs on its parent's memory and thread */
		return -EAGAIN;
	kr__thr_reap(up);
	struct kr__uthr *t = calloc(1, sizeof *t);
	if (!t)
		return -EAGAIN;
	t->magic = KR_UTHR_MAGIC;
	t->up = up;
	t->killfd = -1;
	t->altstack.ss_flags = SS_DISABLE; /* the kernel's, for CLONE_VM */
	t->sigmask = p->sigmask;
	t->fs = flags & CLONE_SETTLS ? tls : p->fs;
	if (flags & CLONE_CHILD_CLEARTID)
		t->tidaddr = ctid;
	if (!(t->vframe = kr__frame_save(p->uc))) {
		free(t);
		return -EAGAIN;
	}
	if (stack) {
		ucontext_t *uc = (ucontext_t *)(t->vframe->frame + 8);
		uc->uc_mcontext.gregs[REG_RSP] = (greg_t)stack;
		t->vframe->top = stack;
	}
	t->tid = kr__uproc_new_pid();
	if (((flags & CLONE_PARENT_SETTID) && kr__ucopy((void *)ptid, &t->tid, sizeof t->tid)) ||
	    ((flags & CLONE_CHILD_SETTID) && kr__ucopy((void *)ctid, &t->tid, sizeof t->tid))) {
		free(t->vframe);
		free(t);
		return -EFAULT;
	}
	/* its stack, whose memory sanitizers forget at its end */
	for (size_t i = 0; stack && i < up->reg.n; i++)
		if (up->reg.r[i].lo < stack && stack <= up->reg.r[i].hi) {
			t->stk_lo = up->reg.r[i].lo;
			t->stk_hi = up->reg.r[i].hi;
		}
	kr_attr ma = {.stack_size = KR__MP_STACK_OF(up), .udata = t};
	int e = EAGAIN;
	/* its fds are looked up by both at once from now on */
	__atomic_store_n(&up->fds.shared, 1, __ATOMIC_RELEASE);
	kr__uproc_lock();
	/* linked with its microprocess set, which a signal's sender reads */
	if (!__atomic_load_n(&up->dying, __ATOMIC_SEQ_CST) &&
	    !(e = kr_mp_create(&t->mp, &ma, thr_run, t))) {
		t->next = up->threads;
		up->threads = t;
		__atomic_add_fetch(&up->nthreads, 1, __ATOMIC_RELAXED);
		up->threaded = 1;
	}
	kr__uproc_unlock();
	if (e) {
		free(t->vframe);
		free(t);
		return -EAGAIN;
	}
	return t->tid;
}

/* The mutex word at uaddr, if t holds it: its owner died. */
static void robust_one(const struct kr__uthr *t, uintptr_t uaddr)
{
	uint32_t v;
	if ((uaddr & 3) || kr__ucopy(&v, (const void *)uaddr, sizeof v))
		return;
	for (int tries = 0; tries < 64 && (v & FUTEX_TID_MASK) == (uint32_t)t->tid; tries++) {
		long was = kr__ucmpxchg32((uint32_t *)uaddr, v, (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED);
		if (was < 0)
			return;
		if ((uint32_t)was == v) {
			if (v & FUTEX_WAITERS)
				kr__futex_wake(uaddr, 1, FUTEX_BITSET_MATCH_ANY);
			return;
		}
		v = (uint32_t)was;
	}
}

void kr__thr_robust(struct kr__uthr *t)
{
	struct robust_list_head h;
	if (!t->robust || kr__ucopy(&h, (const void *)t->robust, sizeof h))
		return;
	uintptr_t pending = (uintptr_t)h.list_op_pending, e = (uintptr_t)h.list.next;
	for (int n = 0; n < 2048 && e && e != t->robust; n++) {
		uintptr_t next;
		if (kr__ucopy(&next, (const void *)(e & ~(uintptr_t)1), sizeof next))
			break;
		if (!(e & 1) && e != pending) /* (bit 0: a PI mutex) */
			robust_one(t, e + (uintptr_t)h.futex_offset);
		e = next;
	}
	if (pending && !(pending & 1))
		robust_one(t, pending + (uintptr_t)h.futex_offset);
	t->robust = 0;
}

long kr__sys_set_robust_list(struct kr_uproc *up, long nr, long a[6])
{
	if (a[1] != (long)sizeof(struct robust_list_head))
		return -EINVAL;
	kr__uthr_self()->robust = (uintptr_t)a[0];
	return 0;
}

void kr__thr_gone(struct kr__uthr *t)
{
	struct kr_uproc *up = t->up;
	kr__thr_robust(t);
#if defined(__SANITIZE_ADDRESS__)
	/* before its joiner may give the stack to a new thread */
	if (t->stk_hi)
		__asan_unpoison_memory_region((void *)t->stk_lo, t->stk_hi - t->stk_lo);
#endif
	/* pthread_join waits for this word to be 0 */
	if (t->tidaddr) {
		pid_t zero = 0;
		if (!kr__ucopy((void *)t->tidaddr, &zero, sizeof zero))
			kr__futex_wake(t->tidaddr, 1, FUTEX_BITSET_MATCH_ANY);
	}
	free(t->vframe);
	t->vframe = NULL;
	/* Off the list under the lock, where senders find it, onto the ended
	 * ones, which kr__thr_reap joins; then nothing of up is touched: its
	 * first thread may release it at once. */
	kr__uproc_lock();
	struct kr__uthr **pp = &up->threads;
	while (*pp != t)
		pp = &(*pp)->next;
	*pp = t->next;
	t->next = up->ended;
	up->ended = t;
	if (t->killfd >= 0)
		close(t->killfd);
	t->killfd = -1;
	__atomic_sub_fetch(&up->nthreads, 1, __ATOMIC_RELAXED);
	kr_sem_post(&up->thr_sem);
	kr__uproc_unlock();
	kr_mp_exit(NULL);
	__builtin_unreachable();
}

void kr__thr_reap(struct kr_uproc *up)
{
	kr__uproc_lock();
	struct kr__uthr *t = up->ended;
	up->ended = NULL;
	kr__uproc_unlock();
	while (t) {
		struct kr__uthr *n = t->next;
		kr_mp_join(t->mp, NULL); /* it may be on its way out still */
		t->magic = 0;
		free(t->bounce);
		free(t);
		t = n;
	}
}

/* ---------------- futexes ---------------- */

struct fwait {
	uintptr_t addr;     /* changed by a requeue, under both buckets' locks */
	uint32_t bits;
	kr_mp *mp;
	int woken;          /* atomic: a wake took it off its bucket */
	struct fwait *next, **pprev;
};

#define NBUCKETS 256
static struct fbucket {
	kr_spin lock;
	struct fwait *head, **tail;
} buckets[NBUCKETS];

static struct fbucket *bucket(uintptr_t addr)
{
	return &buckets[((addr >> 2) * 0x9e3779b97f4a7c15ull) >> 56];
}

static void b_lock(struct fbucket *b)
{
	kr__spin_lock(&b->lock);
	if (!b->tail)
		b->tail = &b->head;
}

static void b_unlock(struct fbucket *b)
{
	kr__spin_unlock(&b->lock);
}

/* Both buckets of a requeue, in one order (once if they are one). */
static void b_lock2(struct fbucket *a, struct fbucket *b)
{
	if (a > b) {
		struct fbucket *x = a;
		a = b;
		b = x;
	}
	b_lock(a);
	if (b != a)
		b_lock(b);
}

static void b_unlock2(struct fbucket *a, struct fbucket *b)
{
	b_unlock(a);
	if (b != a)
		b_unlock(b);
}

static void w_link(struct fbucket *b, struct fwait *w)
{
	w->next = NULL;
	w->pprev = b->tail;
	*b->tail = w;
	b->tail = &w->next;
}

static void w_unlink(struct fbucket *b, struct fwait *w)
{
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	else
		b->tail = w->pprev;
}

/* Wake up to n waiters on addr whose bits meet `bits`; under b's lock. */
static int wake_locked(struct fbucket *b, uintptr_t addr, int n, uint32_t bits)
{
	int woke = 0;
	for (struct fwait *w = b->head, *nx; w && woke < n; w = nx) {
		nx = w->next;
		if (w->addr != addr || !(w->bits & bits))
			continue;
		w_unlink(b, w);
		kr_mp *mp = w->mp; /* w is the waiter's: gone once it sees woken */
		__atomic_store_n(&w->woken, 1, __ATOMIC_RELEASE);
		kr_mp_unpark(mp);
		woke++;
	}
	return woke;
}

long kr__futex_wake(uintptr_t addr, int n, uint32_t bits)
{
	if (n <= 0 || !bits)
		return 0;
	struct fbucket *b = bucket(addr);
	b_lock(b);
	int woke = wake_locked(b, addr, n, bits);
	b_unlock(b);
	return woke;
}

static long futex_wait(uintptr_t addr, int val, uint64_t deadline, uint32_t bits)
{
	struct fwait w = {.addr = addr, .bits = bits, .mp = kr_mp_self()};
	struct fbucket *b = bucket(addr);
	int v;
	b_lock(b);
	if (kr__ucopy(&v, (const void *)addr, sizeof v)) {
		b_unlock(b);
		return -EFAULT;
	}
	if (v != val) {
		b_unlock(b);
		return -EAGAIN;
	}
	w_link(b, &w);
	b_unlock(b);
	for (;;) {
		int e = kr_mp_park_cancellable_until(deadline);
		if (__atomic_load_n(&w.woken, __ATOMIC_ACQUIRE)) {
			kr__uthr_self()->ran_since = kr_now();
			return 0;
		}
		if (!e)
			continue; /* a permit of another wake-up */
		/* off its bucket, unless a wake took it first; a requeue may
		 * have moved it meanwhile */
		for (;;) {
			uintptr_t at = __atomic_load_n(&w.addr, __ATOMIC_ACQUIRE);
			b = bucket(at);
			b_lock(b);
			if (__atomic_load_n(&w.addr, __ATOMIC_RELAXED) == at)
				break;
			b_unlock(b);
		}
		int woken = __atomic_load_n(&w.woken, __ATOMIC_ACQUIRE);
		if (!woken)
			w_unlink(b, &w);
		b_unlock(b);
		if (woken)
			return 0;
		return e == ECANCELED ? -EINTR : -e;
	}
}

/* FUTEX_REQUEUE, FUTEX_CMP_REQUEUE (cmp: *addr must be val3). */
static long futex_requeue(uintptr_t addr, int nwake, int nmove, uintptr_t addr2, int cmp,
			  int val3)
{
	if (nwake < 0 || nmove < 0 || (addr2 & 3))
		return -EINVAL;
	int probe;
	if (kr__ucopy(&probe, (const void *)addr, sizeof probe) ||
	    kr__ucopy(&probe, (const void *)addr2, sizeof probe))
		return -EFAULT; /* both words must be the μprocess's, as the kernel's keys */
	struct fbucket *a = bucket(addr), *b = bucket(addr2);
	b_lock2(a, b);
	int v;
	if (cmp && kr__ucopy(&v, (const void *)addr, sizeof v)) {
		b_unlock2(a, b);
		return -EFAULT;
	}
	if (cmp && v != val3) {
		b_unlock2(a, b);
		return -EAGAIN;
	}
	long done = wake_locked(a, addr, nwake, FUTEX_BITSET_MATCH_ANY);
	for (struct fwait *w = a->head, *nx; w && nmove > 0; w = nx) {
		nx = w->next;
		if (w->addr != addr)
			continue;
		w_unlink(a, w);
		__atomic_store_n(&w->addr, addr2, __ATOMIC_RELEASE);
		w_link(b, w);
		nmove--;
		done++;
	}
	b_unlock2(a, b);
	return done;
}

/* A futex's timeout as a deadline on karui's clock: relative for
 * FUTEX_WAIT, absolute for FUTEX_WAIT_BITSET on its clock. */
static long deadline_of(long op, uintptr_t ut, uint64_t *deadline)
{
	struct timespec t;
	*deadline = KR_FOREVER;
	if (!ut)
		return 0;
	if (GET(t, ut))
		return -EFAULT;
	if (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000)
		return -EINVAL;
	if (t.tv_sec > SLEEP_MAX_S)
		t.tv_sec = SLEEP_MAX_S;
	uint64_t ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec, now = kr_now();
	if ((op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET) {
		struct timespec c;
		clock_gettime(op & FUTEX_CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC, &c);
		uint64_t at = (uint64_t)c.tv_sec * 1000000000u + (uint64_t)c.tv_nsec;
		ns = ns > at ? ns - at : 0;
	}
	*deadline = now + ns;
	return 0;
}

/* A wake of the μprocess's that woke n threads: a thread that has computed
 * for WAKE_YIELD_NS or more since it last waited yields its VP to them (the
 * kernel's scheduler would have preempted it for a thread that slept);
 * one that waits often, in a hand-off, goes on.  n, for the call. */
#define WAKE_YIELD_NS 1000000u
static long woke(long n)
{
	struct kr__uthr *me;
	if (n > 0 && (me = kr__uthr_self()) && kr_now() - me->ran_since >= WAKE_YIELD_NS) {
		kr_mp_yield();
		me->ran_since = kr_now();
	}
	return n;
}

long kr__sys_futex(struct kr_uproc *up, long nr, long a[6])
{
	uintptr_t addr = (uintptr_t)a[0];
	long op = a[1];
	uint64_t deadline;
	long r;
	if (addr & 3)
		return -EINVAL;
	switch (op & FUTEX_CMD_MASK) {
	case FUTEX_WAIT:
		if ((r = deadline_of(op, (uintptr_t)a[3], &deadline)))
			return r;
		return futex_wait(addr, (int)a[2], deadline, FUTEX_BITSET_MATCH_ANY);
	case FUTEX_WAIT_BITSET:
		if (!(uint32_t)a[5])
			return -EINVAL;
		if ((r = deadline_of(op, (uintptr_t)a[3], &deadline)))
			return r;
		return futex_wait(addr, (int)a[2], deadline, (uint32_t)a[5]);
	case FUTEX_WAKE:
		return woke(kr__futex_wake(addr, (int)a[2], FUTEX_BITSET_MATCH_ANY));
	case FUTEX_WAKE_BITSET:
		if (!(uint32_t)a[5])
			return -EINVAL;
		return woke(kr__futex_wake(addr, (int)a[2], (uint32_t)a[5]));
	case FUTEX_REQUEUE:
		return futex_requeue(addr, (int)a[2], (int)a[3], (uintptr_t)a[4], 0, 0);
	case FUTEX_CMP_REQUEUE:
		return futex_requeue(addr, (int)a[2], (int)a[3], (uintptr_t)a[4], 1, (int)a[5]);
	default:
		return -ENOSYS;
	}
}
