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
 * first, which counts.  FUTEX_WAKE_OP does the kernel's
 * futex_atomic_op_inuser on its second word with a compare-and-swap of
 * uaccess.S (EFAULT for a word it cannot write), under both buckets'
 * locks, then its wakes.  The checks come in the kernel's order, so a
 * bad call gets the kernel's error.
 *
 * PI futexes.  The word is the kernel's: its owner's tid (the thread's
 * karui gave it), FUTEX_WAITERS while others wait here, FUTEX_OWNER_DIED.
 * A lock takes a free word with a compare-and-swap under its bucket's lock
 * (the kernel's futex_lock_pi_atomic), or sets FUTEX_WAITERS, looks for
 * the owner among the μprocess's threads (ESRCH: none) and waits as a
 * W_PI waiter; the owner's unlock, which FUTEX_WAITERS sends here, writes
 * the first W_PI waiter's tid (with FUTEX_WAITERS) and wakes it, owning
 * the word, or frees the word when none waits.  FUTEX_WAIT_REQUEUE_PI
 * waits as W_RQ at its first word; FUTEX_CMP_REQUEUE_PI gives its first
 * waiter the PI word if it is free (woken, owning it), and moves the
 * others onto the PI word as W_PI.  A plain wake or requeue that meets
 * a PI waiter is EINVAL, as the kernel's.  The priority inheritance
 * itself is none: a μprocess's threads all run at the priority of the
 * microprocess that started it (no call of it changes one), so an owner
 * never runs below its waiters.
 *
 * The robust list.  set_robust_list names the list of the robust
 * mutexes a thread holds; when it ends, each one whose word still holds
 * its tid is marked FUTEX_OWNER_DIED (its waiters bit kept) and one
 * waiter woken, so that the next lock returns EOWNERDEAD, as the
 * kernel's exit_robust_list does: a bad list ends the walk, 2048 entries
 * at most.  A PI one with a waiter is given to it instead, and then every
 * PI word the thread still holds goes to its first waiter with
 * FUTEX_OWNER_DIED, as the kernel's exit_pi_state_list does (a walk of
 * the buckets, made only while some W_PI waiter exists).
 *
 * Rejected: a per-thread list of the PI words it holds, as the kernel's
 * pi_state_list: every uncontended lock and unlock is the μprocess's own
 * compare-and-swap, which karui never sees, so the list could only hold
 * the contended ones, which the buckets already do.
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

/* A waiter: W_WAIT (FUTEX_WAIT, _BITSET), W_PI (FUTEX_LOCK_PI, _PI2, or a
 * requeued FUTEX_WAIT_REQUEUE_PI: it waits to be handed the PI word at
 * addr), W_RQ (FUTEX_WAIT_REQUEUE_PI before its requeue to `to`). */
enum { W_WAIT, W_PI, W_RQ };

struct fwait {
	uintptr_t addr;     /* changed by a requeue, under both buckets' locks */
	uint32_t bits;
	int kind;           /* W_*: changed by a requeue, as addr */
	uintptr_t to;       /* W_RQ: the PI word it may be requeued to */
	uint32_t tid;       /* W_PI, W_RQ: its thread's, which the word gets */
	kr_mp *mp;
	int woken;          /* atomic: a wake took it off its bucket */
	struct fwait *next, **pprev;
};

#define NBUCKETS 256
static struct fbucket {
	kr_spin lock;
	struct fwait *head, **tail;
} buckets[NBUCKETS];

/* W_PI waiters anywhere: a thread's end looks for the PI words it holds
 * only when there are some (kr__thr_robust).  Atomic. */
static int npi;

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
	if (w->kind == W_PI)
		__atomic_add_fetch(&npi, 1, __ATOMIC_RELAXED);
}

static void w_unlink(struct fbucket *b, struct fwait *w)
{
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	else
		b->tail = w->pprev;
	if (w->kind == W_PI)
		__atomic_sub_fetch(&npi, 1, __ATOMIC_RELAXED);
}

/* w, off its bucket, goes on (under the bucket's lock). */
static void w_wake(struct fbucket *b, struct fwait *w)
{
	w_unlink(b, w);
	kr_mp *mp = w->mp; /* w is the waiter's: gone once it sees woken */
	__atomic_store_n(&w->woken, 1, __ATOMIC_RELEASE);
	kr_mp_unpark(mp);
}

/* w, off a's list, onto b's at addr2 as `kind` (under both locks). */
static void w_move(struct fbucket *a, struct fbucket *b, struct fwait *w, uintptr_t addr2,
		   int kind)
{
	w_unlink(a, w);
	__atomic_store_n(&w->addr, addr2, __ATOMIC_RELEASE);
	w->kind = kind;
	w_link(b, w);
}

/* The kernel's futex_wake under b's lock: up to n waiters on addr whose
 * bits meet `bits` (one at least, as the kernel's, even for n <= 0); a
 * PI waiter met there is EINVAL. */
static long wake_locked(struct fbucket *b, uintptr_t addr, int n, uint32_t bits)
{
	long woke = 0;
	for (struct fwait *w = b->head, *nx; w; w = nx) {
		nx = w->next;
		if (w->addr != addr)
			continue;
		if (w->kind != W_WAIT)
			return -EINVAL;
		if (!(w->bits & bits))
			continue;
		w_wake(b, w);
		if (++woke >= n)
			break;
	}
	return woke;
}

long kr__futex_wake(uintptr_t addr, int n, uint32_t bits)
{
	struct fbucket *b = bucket(addr);
	b_lock(b);
	long woke = wake_locked(b, addr, n, bits);
	b_unlock(b);
	return woke;
}

/* w, linked, waits: 0 when a wake took it off its bucket, -ETIMEDOUT at
 * its deadline, -EINTR for a signal, off its bucket then unless a wake
 * took it first, which counts.  A requeue may move it meanwhile. */
static long park(struct fwait *w, uint64_t deadline)
{
	for (;;) {
		int e = kr_mp_park_cancellable_until(deadline);
		if (__atomic_load_n(&w->woken, __ATOMIC_ACQUIRE)) {
			kr__uthr_self()->ran_since = kr_now();
			return 0;
		}
		if (!e)
			continue; /* a permit of another wake-up */
		struct fbucket *b;
		for (;;) {
			uintptr_t at = __atomic_load_n(&w->addr, __ATOMIC_ACQUIRE);
			b = bucket(at);
			b_lock(b);
			if (__atomic_load_n(&w->addr, __ATOMIC_RELAXED) == at)
				break;
			b_unlock(b);
		}
		int woken = __atomic_load_n(&w->woken, __ATOMIC_ACQUIRE);
		if (!woken)
			w_unlink(b, w);
		b_unlock(b);
		if (woken)
			return 0;
		return e == ECANCELED ? -EINTR : -e;
	}
}

/* w waits at its addr if the word there is val: the kernel's futex_wait
 * (w->kind W_WAIT) and futex_wait_requeue_pi's first half (W_RQ). */
static long wait_at(struct fwait *w, int val, uint64_t deadline)
{
	struct fbucket *b = bucket(w->addr);
	int v;
	b_lock(b);
	if (kr__ucopy(&v, (const void *)w->addr, sizeof v)) {
		b_unlock(b);
		return -EFAULT;
	}
	if (v != val) {
		b_unlock(b);
		return -EAGAIN;
	}
	w_link(b, w);
	b_unlock(b);
	return park(w, deadline);
}

/* ---- PI futexes: the word holds its owner's tid, FUTEX_WAITERS while
 * others wait in karui, FUTEX_OWNER_DIED after a robust owner's end ---- */

/* The first thread waiting to own the PI word at addr (under b's lock). */
static struct fwait *pi_first(struct fbucket *b, uintptr_t addr)
{
	struct fwait *w = b->head;
	while (w && (w->addr != addr || w->kind != W_PI))
		w = w->next;
	return w;
}

/* Whether tid (not 0) names a thread that lives, as the kernel's
 * attach_to_pi_owner looks: one of the calling μprocess's. */
static int pi_owner_lives(uint32_t tid)
{
	return kr__uproc_is_self(kr__uthr_self()->up, (pid_t)tid);
}

/* The kernel's futex_lock_pi_atomic under b's lock, for the thread tid:
 * 1, it owns the word now (with FUTEX_WAITERS if `waiters` or others
 * wait); 0, another does (FUTEX_WAITERS set now); -ESRCH: the word names
 * no thread that lives; -EDEADLK: tid owns it already; -EFAULT; -EAGAIN:
 * the word changed meanwhile. */
static long pi_take_locked(struct fbucket *b, uintptr_t addr, uint32_t tid, int waiters)
{
	uint32_t v, nv;
	if (kr__ucopy(&v, (const void *)addr, sizeof v))
		return -EFAULT;
	if ((v & FUTEX_TID_MASK) == tid)
		return -EDEADLK;
	if (!(v & FUTEX_TID_MASK))
		nv = (v & FUTEX_OWNER_DIED) | tid | (waiters || pi_first(b, addr) ? FUTEX_WAITERS : 0);
	else
		nv = v | FUTEX_WAITERS;
	long was = kr__ucmpxchg32((uint32_t *)addr, v, nv);
	if (was < 0)
		return was;
	if ((uint32_t)was != v)
		return -EAGAIN;
	if (!(v & FUTEX_TID_MASK))
		return 1;
	return pi_owner_lives(v & FUTEX_TID_MASK) ? 0 : -ESRCH;
}

/* The PI word at addr, which holds v, to its first waiter (under b's
 * lock), FUTEX_WAITERS and the bits `set` with its tid: 1; 0, none waits;
 * -EFAULT; -EAGAIN: the word changed meanwhile. */
static long pi_give_locked(struct fbucket *b, uintptr_t addr, uint32_t v, uint32_t set)
{
	struct fwait *w = pi_first(b, addr);
	if (!w)
		return 0;
	long was = kr__ucmpxchg32((uint32_t *)addr, v, set | FUTEX_WAITERS | w->tid);
	if (was < 0)
		return was;
	if ((uint32_t)was != v)
		return -EAGAIN;
	w_wake(b, w);
	return 1;
}

/* FUTEX_LOCK_PI, _LOCK_PI2, _TRYLOCK_PI. */
static long lock_pi(uintptr_t addr, int try, uint64_t deadline)
{
	struct kr__uthr *me = kr__uthr_self();
	struct fwait w = {.addr = addr, .kind = W_PI, .tid = (uint32_t)me->tid, .mp = kr_mp_self()};
	struct fbucket *b = bucket(addr);
	long r;
	b_lock(b);
	while ((r = pi_take_locked(b, addr, w.tid, 0)) == -EAGAIN)
		;
	if (!r && !try)
		w_link(b, &w);
	b_unlock(b);
	if (r)
		return r < 0 ? r : 0;
	if (try)
		return -EAGAIN;
	return park(&w, deadline);
}

/* FUTEX_UNLOCK_PI: to the first waiter, or free. */
static long unlock_pi(uintptr_t addr)
{
	uint32_t me = (uint32_t)kr__uthr_self()->tid;
	struct fbucket *b = bucket(addr);
	for (;;) {
		uint32_t v;
		long r;
		b_lock(b);
		if (kr__ucopy(&v, (const void *)addr, sizeof v)) {
			r = -EFAULT;
		} else if ((v & FUTEX_TID_MASK) != me) {
			r = -EPERM;
		} else if (addr & 3) {
			r = -EINVAL; /* the kernel's order: the owner first */
		} else if (!(r = pi_give_locked(b, addr, v, 0))) {
			long was = kr__ucmpxchg32((uint32_t *)addr, v, 0);
			r = was < 0 ? was : (uint32_t)was == v ? 0 : -EAGAIN;
		}
		b_unlock(b);
		if (r != -EAGAIN)
			return r < 0 ? r : 0;
	}
}

/* FUTEX_WAIT_REQUEUE_PI: a wait at addr that ends owning the PI word at
 * addr2 (0), as FUTEX_CMP_REQUEUE_PI gives it or requeues it there. */
static long wait_requeue_pi(uintptr_t addr, int val, uint64_t deadline, uintptr_t addr2)
{
	if (addr == addr2 || (addr2 & 3))
		return -EINVAL;
	struct fwait w = {.addr = addr,
			  .bits = FUTEX_BITSET_MATCH_ANY,
			  .kind = W_RQ,
			  .to = addr2,
			  .tid = (uint32_t)kr__uthr_self()->tid,
			  .mp = kr_mp_self()};
	long r = wait_at(&w, val, deadline);
	/* a signal once requeued: the kernel's EWOULDBLOCK, not a restart */
	return r == -EINTR && w.kind == W_PI ? -EAGAIN : r;
}

/* FUTEX_REQUEUE, FUTEX_CMP_REQUEUE (cmp: *addr must be val3), and
 * FUTEX_CMP_REQUEUE_PI (pi), as the kernel's futex_requeue: of the
 * waiters on addr, nwake are woken and up to nmove more moved to addr2;
 * with pi, the first is given the PI word at addr2 if it is free, and
 * the others (it too, if not) wait to own it.  How many of them. */
static long futex_requeue(uintptr_t addr, int nwake, int nmove, uintptr_t addr2, int cmp,
			  int val3, int pi)
{
	if (nwake < 0 || nmove < 0)
		return -EINVAL;
	if (pi && (addr == addr2 || nwake != 1))
		return -EINVAL;
	if (addr2 & 3)
		return -EINVAL;
	int probe;
	if (!pi && (kr__ucopy(&probe, (const void *)addr, sizeof probe) ||
		    kr__ucopy(&probe, (const void *)addr2, sizeof probe)))
		return -EFAULT; /* both words must be the μprocess's, as the kernel's keys */
	struct fbucket *a = bucket(addr), *b = bucket(addr2);
	long done = 0, r = 0;
	b_lock2(a, b);
	int v;
	if (cmp && kr__ucopy(&v, (const void *)addr, sizeof v)) {
		r = -EFAULT;
		goto out;
	}
	if (cmp && v != val3) {
		r = -EAGAIN;
		goto out;
	}
	if (pi) { /* the kernel's futex_proxy_trylock_atomic */
		struct fwait *top = a->head;
		while (top && top->addr != addr)
			top = top->next;
		if (!top)
			goto out;
		if (top->kind != W_RQ || top->to != addr2) {
			r = -EINVAL;
			goto out;
		}
		while ((r = pi_take_locked(b, addr2, top->tid, nmove > 0)) == -EAGAIN)
			;
		if (r < 0)
			goto out;
		if (r == 1) {
			w_wake(a, top); /* it owns the word */
			done = 1;
		}
		r = 0;
	}
	for (struct fwait *w = a->head, *nx; w && done - nwake < nmove; w = nx) {
		nx = w->next;
		if (w->addr != addr)
			continue;
		if (w->kind != (pi ? W_RQ : W_WAIT) || (pi && w->to != addr2)) {
			r = -EINVAL;
			break;
		}
		if (++done <= nwake && !pi)
			w_wake(a, w);
		else if (a != b || addr != addr2)
			w_move(a, b, w, addr2, pi ? W_PI : W_WAIT);
	}
out:
	b_unlock2(a, b);
	return r ? r : done;
}

/* FUTEX_WAKE_OP: the kernel's futex_atomic_op_inuser on the word at addr2
 * (its old value compared), then up to nwake waiters on addr woken, and
 * up to nwake2 on addr2 if the comparison holds. */
static long wake_op(uintptr_t addr, int nwake, uintptr_t addr2, int nwake2, uint32_t op)
{
	if (addr2 & 3)
		return -EINVAL;
	uint32_t kind = (op >> 28) & 7, cmp = (op >> 24) & 15;
	int32_t oparg = (int32_t)(op << 8) >> 20, cmparg = (int32_t)(op << 20) >> 20;
	if (op & ((uint32_t)FUTEX_OP_OPARG_SHIFT << 28))
		oparg = (int32_t)(1u << (oparg & 31)); /* the kernel takes 31 bits of a bad shift */
	if (kind > FUTEX_OP_XOR)
		return -ENOSYS;
	struct fbucket *a = bucket(addr), *b = bucket(addr2);
	b_lock2(a, b);
	uint32_t old;
	long was = kr__ucopy(&old, (const void *)addr2, sizeof old);
	while (!was) {
		uint32_t nv = (uint32_t)oparg;
		switch (kind) {
		case FUTEX_OP_ADD:
			nv = old + (uint32_t)oparg;
			break;
		case FUTEX_OP_OR:
			nv = old | (uint32_t)oparg;
			break;
		case FUTEX_OP_ANDN:
			nv = old & ~(uint32_t)oparg;
			break;
		case FUTEX_OP_XOR:
			nv = old ^ (uint32_t)oparg;
			break;
		}
		was = kr__ucmpxchg32((uint32_t *)addr2, old, nv);
		if (was >= 0 && (uint32_t)was == old)
			break;
		if (was >= 0)
			old = (uint32_t)was;
		was = was < 0 ? was : 0;
	}
	long r;
	int32_t o = (int32_t)old;
	int hit = 0;
	switch (cmp) {
	case FUTEX_OP_CMP_EQ:
		hit = o == cmparg;
		break;
	case FUTEX_OP_CMP_NE:
		hit = o != cmparg;
		break;
	case FUTEX_OP_CMP_LT:
		hit = o < cmparg;
		break;
	case FUTEX_OP_CMP_LE:
		hit = o <= cmparg;
		break;
	case FUTEX_OP_CMP_GT:
		hit = o > cmparg;
		break;
	case FUTEX_OP_CMP_GE:
		hit = o >= cmparg;
		break;
	default:
		hit = -1;
	}
	if (was < 0) {
		r = -EFAULT;
	} else if (hit < 0) {
		r = -ENOSYS; /* the word changed all the same, as the kernel's */
	} else {
		r = wake_locked(a, addr, nwake, FUTEX_BITSET_MATCH_ANY);
		if (r >= 0 && hit) {
			long r2 = wake_locked(b, addr2, nwake2, FUTEX_BITSET_MATCH_ANY);
			r = r2 < 0 ? r2 : r + r2;
		}
	}
	b_unlock2(a, b);
	return r;
}

/* A futex's timeout as a deadline on karui's clock: relative for
 * FUTEX_WAIT; absolute for the others, on CLOCK_REALTIME for
 * FUTEX_LOCK_PI and with FUTEX_CLOCK_REALTIME, else CLOCK_MONOTONIC. */
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
	if ((op & FUTEX_CMD_MASK) != FUTEX_WAIT) {
		struct timespec c;
		clock_gettime((op & FUTEX_CMD_MASK) == FUTEX_LOCK_PI || (op & FUTEX_CLOCK_REALTIME)
				      ? CLOCK_REALTIME
				      : CLOCK_MONOTONIC,
			      &c);
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

/* The checks of the kernel's sys_futex and do_futex, in their order: the
 * timeout, the clock, the operation, then each operation's own. */
long kr__sys_futex(struct kr_uproc *up, long nr, long a[6])
{
	uintptr_t addr = (uintptr_t)a[0], addr2 = (uintptr_t)a[4];
	long op = a[1], cmd = op & FUTEX_CMD_MASK;
	uint64_t deadline = KR_FOREVER;
	long r;
	switch (cmd) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_WAIT_REQUEUE_PI:
		if ((r = deadline_of(op, (uintptr_t)a[3], &deadline)))
			return r;
	}
	if ((op & FUTEX_CLOCK_REALTIME) && cmd != FUTEX_WAIT_BITSET &&
	    cmd != FUTEX_WAIT_REQUEUE_PI && cmd != FUTEX_LOCK_PI2)
		return -ENOSYS;
	if (cmd > FUTEX_LOCK_PI2 || cmd == FUTEX_FD) /* (FUTEX_FD: long gone) */
		return -ENOSYS;
	if (cmd == FUTEX_UNLOCK_PI) /* the owner checked before the address */
		return unlock_pi(addr);
	if (addr & 3)
		return -EINVAL;
	struct fwait w = {.addr = addr, .bits = (uint32_t)a[5], .kind = W_WAIT, .mp = kr_mp_self()};
	switch (cmd) {
	case FUTEX_WAIT:
		w.bits = FUTEX_BITSET_MATCH_ANY;
		return wait_at(&w, (int)a[2], deadline);
	case FUTEX_WAIT_BITSET:
		if (!w.bits)
			return -EINVAL;
		return wait_at(&w, (int)a[2], deadline);
	case FUTEX_WAKE:
		return woke(kr__futex_wake(addr, (int)a[2], FUTEX_BITSET_MATCH_ANY));
	case FUTEX_WAKE_BITSET:
		if (!(uint32_t)a[5])
			return -EINVAL;
		return woke(kr__futex_wake(addr, (int)a[2], (uint32_t)a[5]));
	case FUTEX_REQUEUE:
		return futex_requeue(addr, (int)a[2], (int)a[3], addr2, 0, 0, 0);
	case FUTEX_CMP_REQUEUE:
		return futex_requeue(addr, (int)a[2], (int)a[3], addr2, 1, (int)a[5], 0);
	case FUTEX_WAKE_OP:
		return woke(wake_op(addr, (int)a[2], addr2, (int)a[3], (uint32_t)a[5]));
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
		return lock_pi(addr, 0, deadline);
	case FUTEX_TRYLOCK_PI:
		return lock_pi(addr, 1, KR_FOREVER);
	case FUTEX_WAIT_REQUEUE_PI:
		return wait_requeue_pi(addr, (int)a[2], deadline, addr2);
	default: /* FUTEX_CMP_REQUEUE_PI */
		return woke(futex_requeue(addr, (int)a[2], (int)a[3], addr2, 1, (int)a[5], 1));
	}
}

/* ---------------- the robust list, and the PI words of a thread that ends ---------------- */

/* The kernel's handle_futex_death: the mutex word at uaddr, if t holds it,
 * is its owner's that died (its waiters bit kept, FUTEX_OWNER_DIED set);
 * a plain mutex's waiter is woken, a PI mutex given to its first waiter,
 * which then owns it with FUTEX_OWNER_DIED.  A pending plain one that
 * nobody holds: one waiter woken, who may have missed the unlock. */
static void robust_one(const struct kr__uthr *t, uintptr_t uaddr, int pi, int pending)
{
	uint32_t v;
	if ((uaddr & 3) || kr__ucopy(&v, (const void *)uaddr, sizeof v))
		return;
	if (pending && !pi && !(v & FUTEX_TID_MASK)) {
		kr__futex_wake(uaddr, 1, FUTEX_BITSET_MATCH_ANY);
		return;
	}
	struct fbucket *b = bucket(uaddr);
	for (int tries = 0; tries < 64 && (v & FUTEX_TID_MASK) == (uint32_t)t->tid; tries++) {
		b_lock(b);
		long was = pi ? pi_give_locked(b, uaddr, v, FUTEX_OWNER_DIED) : 0;
		if (!was)
			was = kr__ucmpxchg32((uint32_t *)uaddr, v,
					     (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED) == v ? 1 : -EAGAIN;
		if (was == 1 && !pi && (v & FUTEX_WAITERS))
			wake_locked(b, uaddr, 1, FUTEX_BITSET_MATCH_ANY);
		b_unlock(b);
		if (was != -EAGAIN || kr__ucopy(&v, (const void *)uaddr, sizeof v))
			return;
	}
}

/* The kernel's exit_pi_state_list: each PI word that t holds and another
 * thread waits to own goes to that thread, with FUTEX_OWNER_DIED, robust
 * or not. */
static void pi_words_go(const struct kr__uthr *t)
{
	for (int i = 0; i < NBUCKETS && __atomic_load_n(&npi, __ATOMIC_RELAXED); i++) {
		struct fbucket *b = &buckets[i];
		b_lock(b);
		for (struct fwait *w = b->head, *nx; w; w = nx) {
			nx = w->next;
			uint32_t v;
			if (w->kind != W_PI || kr__ucopy(&v, (const void *)w->addr, sizeof v) ||
			    (v & FUTEX_TID_MASK) != (uint32_t)t->tid)
				continue;
			long r;
			while ((r = pi_give_locked(b, w->addr, v, FUTEX_OWNER_DIED)) == -EAGAIN &&
			       !kr__ucopy(&v, (const void *)w->addr, sizeof v) &&
			       (v & FUTEX_TID_MASK) == (uint32_t)t->tid)
				;
			if (r == 1)
				nx = b->head; /* the list changed under the walk */
		}
		b_unlock(b);
	}
}

void kr__thr_robust(struct kr__uthr *t)
{
	struct robust_list_head h;
	if (t->robust && !kr__ucopy(&h, (const void *)t->robust, sizeof h)) {
		uintptr_t pending = (uintptr_t)h.list_op_pending, e = (uintptr_t)h.list.next;
		for (int n = 0; n < 2048 && e && e != t->robust; n++) {
			uintptr_t next;
			if (kr__ucopy(&next, (const void *)(e & ~(uintptr_t)1), sizeof next))
				break;
			if (e != pending) /* (bit 0: a PI mutex) */
				robust_one(t, (e & ~(uintptr_t)1) + (uintptr_t)h.futex_offset, e & 1, 0);
			e = next;
		}
		if (pending)
			robust_one(t, (pending & ~(uintptr_t)1) + (uintptr_t)h.futex_offset,
				   pending & 1, 1);
	}
	t->robust = 0;
	pi_words_go(t);
}
