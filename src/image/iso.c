/*
 * karui image layer — μprocesses in domains of their own (EPC-S): a stray
 * write from one μprocess into another's memory faults and ends only the
 * writer (docs/domains.md, "μprocesses in domains").
 *
 * What is closed.  An isolated μprocess's writable memory: the writable
 * segments of its program and ld.so, its stack, and whatever it maps or
 * makes writable afterwards (heap, threads' stacks and TLS, private and
 * shared writable mmaps).  up->wr lists those ranges and up->wrx the
 * ones that are executable too, kept by its mmap, munmap, mremap and
 * mprotect (uproc.c: kr__uproc_mapped and the others).  Closing is
 * mprotect(PROT_NONE) on each range, adjacent ones in one call; opening
 * gives each its recorded protection back.  Read-only mappings (its text,
 * read-only data, read-only files) stay readable: kept images share them,
 * and closing them would cost a system call each for no integrity gained.
 *
 * When it is open.  Page protection is the process's, not a thread's.
 * Each VP (its record, struct kr__img_vp) *shows* at most one isolated
 * μprocess, the one whose code it entered last: kr__uthr_here, which
 * every way back into a μprocess's code passes, makes the VP show that
 * thread's μprocess (its memory's owner, kr__mm), or none when that
 * μprocess is not isolated.  A μprocess is open while one VP or more shows
 * it: opened when the first starts to, closed when the last stops (iso_n,
 * under L.lock).  A VP goes on showing it while it runs the host's code
 * (karui, the host's microprocesses), so calls back and forth between
 * karui and one μprocess change nothing; only the code of another
 * μprocess closes it.  On one VP the protection is exact: while another
 * μprocess's code runs, an isolated one's writable memory is closed.  On
 * several VPs it is open while its code runs on one of them, as EPC-S
 * domains are.
 *
 * Where karui waits for it.  karui serves a μprocess's system calls in a
 * signal handler on the μprocess's own stack, and a call that waits
 * leaves there what others write while it waits: its place in a wait
 * queue, an I/O request's result, its saved context.  An isolated
 * μprocess's calls (and its time slice's yield) run instead on its
 * microprocess's own stack, below die_sp (kr__iso_sys, gate.S's
 * kr__img_on; KR__ISO_MP_STACK bytes), which is karui's memory.
 *
 * karui's own code on the μprocess's behalf.  A system call of it may
 * wait, and go on on a VP that shows another μprocess meanwhile.  Where
 * karui then hands its buffer to the kernel (a read or write after a wait
 * for readiness, sys_fd.c), kr__iso_here shows it first.  A plain access
 * of karui's (a copy out of a pipe, a result written back) that finds the
 * memory closed faults: the fault handler (gate.S) asks kr__iso_fault,
 * which, when the address is in the writable memory of the μprocess whose
 * call it is, shows that μprocess on this VP and lets the access go on.
 * An address of another μprocess is not opened: karui's uaccess copies
 * return EFAULT for it, as the kernel does for a bad pointer.  So a
 * μprocess cannot make karui write into another's memory either.
 *
 * Nothing writes into a closed μprocess's memory from elsewhere: karui
 * pipes hand bytes straight into a waiting reader's buffer or out of a
 * waiting writer's, on the other side's microprocess, and io_uring fills
 * a read's buffer from the kernel's own context; an isolated μprocess's
 * pipe reads and writes, and its reads and writes that may wait, go
 * through a buffer of karui's (kr__iso_bounce) and are copied on its own
 * microprocess.
 *
 * Rejected: a hook in the core's switch, as the scheduling trace has
 * (trace.c), to show a μprocess whenever one of its microprocesses is
 * switched in: it would have to turn the core's fast paths off for the
 * whole process while any isolated μprocess lives, and it buys nothing
 * over kr__uthr_here, since no μprocess code runs but through it.
 * Closing a μprocess whenever its VP goes back to the host's code: a
 * system call would then cost two more mprotect each, and the host is
 * not confined anyway.  Showing it again after each wait in each handler
 * alone: waits are many and deep (pipes, futexes, wait4, poll, sleeps),
 * and one forgotten would take the host down; the fault handler covers
 * every plain access, and the waits before a kernel call are few.
 *
 * EPC-H (protection keys, a key per isolated μprocess, PKRU switched at
 * the same points) would make the view exact per VP; no host here has
 * PKU, and it is not done.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "uproc.h"

static struct {
	kr_spin lock; /* the counts, the VPs' `shown`, opening and closing */
} L;

/* an isolated μprocess has started: the fault handler asks kr__iso_fault */
int kr__iso_live;

/* Set [lo, hi) of each range of l, adjacent ones together, to prot. */
static void protect_all(const struct kr__rlist *l, int prot)
{
	for (size_t i = 0; i < l->n;) {
		uintptr_t lo = l->r[i].lo, hi = l->r[i].hi;
		for (i++; i < l->n && l->r[i].lo == hi; i++)
			hi = l->r[i].hi;
		mprotect((void *)lo, hi - lo, prot);
	}
}

static void open_mem(struct kr_uproc *m)
{
	protect_all(&m->wr, PROT_READ | PROT_WRITE);
	protect_all(&m->wrx, PROT_READ | PROT_WRITE | PROT_EXEC);
	m->iso_open = 1;
}

static void close_mem(struct kr_uproc *m)
{
	protect_all(&m->wr, PROT_NONE);
	m->iso_open = 0;
}

/* Under L.lock: VP v shows `want` (an isolated μprocess, or NULL). */
static void show_locked(struct kr__img_vp *v, struct kr_uproc *want)
{
	struct kr_uproc *old = v->shown;
	if (want && !want->iso_on)
		want = NULL; /* it has ended meanwhile (kr__iso_end) */
	if (old == want)
		return;
	if (old && --old->iso_n == 0)
		close_mem(old);
	if (want && want->iso_n++ == 0 && !want->iso_open)
		open_mem(want);
	__atomic_store_n(&v->shown, want, __ATOMIC_RELAXED);
}

void kr__iso_lock(void)
{
	kr__spin_lock(&L.lock);
}

void kr__iso_unlock(void)
{
	kr__spin_unlock(&L.lock);
}

void kr__iso_show(struct kr__img_vp *v, struct kr_uproc *want)
{
	kr__spin_lock(&L.lock);
	show_locked(v, want);
	kr__spin_unlock(&L.lock);
}

void kr__iso_begin(struct kr_uproc *up)
{
	if (!up->isolate)
		return;
	kr__spin_lock(&L.lock);
	up->iso_on = 1;
	up->iso_open = 1; /* it is open as loaded; closed when no VP shows it */
	up->iso_n = 0;
	kr__spin_unlock(&L.lock);
	__atomic_store_n(&kr__iso_live, 1, __ATOMIC_RELEASE);
}

void kr__iso_end(struct kr_uproc *up)
{
	if (!__atomic_load_n(&up->iso_on, __ATOMIC_RELAXED))
		return;
	kr__uproc_lock(); /* the VPs' records */
	kr__spin_lock(&L.lock);
	for (struct kr__img_vp *v = kr__img_vps(); v; v = v->next)
		if (v->shown == up) {
			__atomic_store_n(&v->shown, NULL, __ATOMIC_RELAXED);
			up->iso_n--;
		}
	if (!up->iso_open)
		open_mem(up);
	up->iso_on = 0;
	kr__spin_unlock(&L.lock);
	kr__uproc_unlock();
}

void kr__iso_here(void)
{
	struct kr__uthr *t = kr__uthr_self();
	if (!t)
		return;
	struct kr_uproc *m = kr__mm(t->up);
	if (!__atomic_load_n(&m->iso_on, __ATOMIC_RELAXED))
		return;
	struct kr__img_vp *v = kr__img_vp_self();
	if (!v && kr__img_arm() == 0)
		v = kr__img_vp_self();
	if (v && __atomic_load_n(&v->shown, __ATOMIC_RELAXED) != m)
		kr__iso_show(v, m);
	else if (!v && !__atomic_load_n(&m->iso_open, __ATOMIC_RELAXED)) {
		kr__spin_lock(&L.lock); /* no record to show it with: open */
		if (m->iso_on && !m->iso_open)
			open_mem(m);
		kr__spin_unlock(&L.lock);
	}
}

/* A fault of karui's code (gate.S: not a μprocess's) at addr: 1 when it
 * was on the closed memory of the μprocess whose call this is, which this
 * VP now shows (the access is made again); 0 for any other fault.  In a
 * signal handler: no allocation, no lock but L's, which no holder keeps
 * across an access to a μprocess's memory. */
int kr__iso_fault(const siginfo_t *si)
{
	static __thread uintptr_t retried; /* a thread with no record: once per address */
	struct kr__uthr *t = kr__uthr_self();
	if (!t)
		return 0;
	struct kr_uproc *m = kr__mm(t->up);
	uintptr_t a = (uintptr_t)si->si_addr;
	struct kr__img_vp *v = kr__img_vp_self();
	int again = 0;
	kr__spin_lock(&L.lock);
	if (m->iso_on && kr__rl_covers(&m->wr, a, a + 1)) {
		if (v && v->shown != m) {
			show_locked(v, m);
			again = 1;
		} else if (!v && !m->iso_open) {
			open_mem(m);
			again = 1;
		} else if (!v && retried != a) {
			again = 1; /* opened meanwhile by another VP */
		}
	}
	kr__spin_unlock(&L.lock);
	retried = again && !v ? a : 0;
	return again;
}

struct sys_args {
	struct kr__uthr *t;
	long nr, *a;
};

static long sys_own(void *p)
{
	struct sys_args c = *(struct sys_args *)p;
	long a[6];
	memcpy(a, c.a, sizeof a);
	long r = kr__sys(c.t, c.nr, a);
	kr__iso_here(); /* before the way back reads its stack again */
	return r;
}

long kr__iso_sys(struct kr__uthr *t, long nr, long a[6])
{
	if (!__atomic_load_n(&kr__mm(t->up)->iso_on, __ATOMIC_RELAXED))
		return kr__sys(t, nr, a);
	struct sys_args c = {t, nr, a};
	return kr__img_on(t->die_sp, sys_own, &c);
}

static long yield_own(void *p)
{
	(void)p;
	kr_mp_yield();
	kr__iso_here();
	return 0;
}

void kr__iso_yield(struct kr__uthr *t)
{
	if (!__atomic_load_n(&kr__mm(t->up)->iso_on, __ATOMIC_RELAXED))
		kr_mp_yield();
	else
		kr__img_on(t->die_sp, yield_own, NULL);
}

void *kr__iso_bounce(struct kr__uthr *t)
{
	if (!t->bounce)
		t->bounce = malloc(KR__PIPE_CAP);
	return t->bounce;
}
