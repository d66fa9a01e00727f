/*
 * karui image layer — calls between μprocesses (seed 003 §4.4.2, §5.7;
 * SPEC P4): a μprocess exports a table of procedures, and another party
 * calls (μprocess, procedure number, arguments, result) on its own
 * microprocess, by pointer, as a subroutine.
 *
 * The export.  The program's own code makes a system call of karui's
 * (KR_UPROC_NR_EXPORT, karui/uproc_export.h: an inline syscall, no link
 * dependency), trapped as any of its calls: karui copies the table (each
 * procedure checked to be the μprocess's memory), and takes the exporting
 * thread's thread pointer and tid for the calls.  The first export, or the
 * first call, makes the μprocess's struct kr__xcall: its lock, the table,
 * a stack for the calls (CALL_STACK, one of its regions, so that its end
 * unmaps it and a signal frame there is its own), and the thread a call
 * runs as (a struct kr__uthr whose `xcall` names it).
 *
 * The call (kr_uproc_call from a host microprocess; KR_UPROC_NR_CALL, by
 * pid, from a μprocess's code, served in its trap, so on its microprocess
 * too).  The caller takes the callee's lock (a kr_mutex: a call may park),
 * then on its own microprocess: the call's thread named as the one running
 * there (a microprocess-local key, which kr__uthr_self reads first: the
 * host's kr_mp_udata is the host's) and in the VP's record (gs:24); then
 * gate.S's kr__img_call moves to the call stack, installs the callee's
 * thread pointer, says BLOCK and calls the procedure; on its return, ALLOW
 * and the VP's own thread pointer, and the caller's stack.  The callee's
 * system calls trap as its main thread's would and are served for the
 * call's thread: its fds, pid, memory; one that waits parks the caller's
 * microprocess, which may go on on another VP (the way back reads %gs
 * there).  No switch to another microprocess, no copy: arguments are
 * words, pointers into one address space.
 *
 * Concurrency: one call at a time per μprocess, the seed's own way (§4.4.2:
 * a legacy library's μprocess takes one call at a time; §7.1: N of them
 * serve N threads).  The lock is held for the whole call, so a procedure
 * that is not thread-safe (a static buffer: crypt(), getpwnam()) is safe,
 * and its exporter's thread, which lends the call its TLS, is to stay in a
 * wait of karui's (pause()) and run none of that code meanwhile.  A call
 * into a μprocess from inside a call into it is EDEADLK.  While a call is
 * in flight the callee's code is that of a μprocess with two threads:
 * nothing of it is rewritten (rewrite.c) once it has exported or been
 * called.
 *
 * Signals.  The call's thread blocks every signal: one sent to the callee
 * goes to its own threads (kill, kr_uproc_kill, its timer), and a fault in
 * a procedure is, as a blocked fault is in the kernel, the end of the
 * callee (128 + the signal): its handlers do not run in a call.  A signal
 * for a calling μprocess waits for the call's end (it is in a system call);
 * a wait of the procedure that its kill cuts short restarts.
 *
 * Ends.  The call's thread ends like any thread of the callee (uproc.c:
 * thr_end), on the caller's stack below the call (its die_sp, which
 * kr__img_call sets): the procedure's fault (EFAULT), its exit or the
 * callee's end told to it (ESRCH: kr__thr_stop_others pokes the call in
 * flight as it pokes threads, and it ends at its next way back from karui
 * or kick); kr__call_gone then returns to kr__img_call's caller through
 * kr__img_call_back, and the call returns the error.  The callee's end
 * waits for the call in flight (kr__call_close takes the lock) before it
 * unmaps anything, then refuses every later call (ESRCH); an exec in the
 * callee withdraws its exports.  A poke leaves a cancel and a wakeup on
 * the caller's microprocess, which the call spends before it returns.
 * The struct goes with the μprocess's (kr_uproc_wait), or with the last
 * caller by pid.
 *
 * Rejected: running the procedure on a microprocess of the callee's (a
 * switch each way, the seed's "RPC"); on the caller's own stack (64 KiB
 * for a host microprocess, and a trap's kernel frame takes 3 KiB of it);
 * a lock per procedure (the library's state is the μprocess's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <karui/uproc_export.h>

#include "sys.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define CALL_STACK ((size_t)1 << 20)
_Static_assert(KR_UPROC_CALL_ARGS == 6, "kr__img_call passes six registers");
_Static_assert(__builtin_offsetof(struct kr__xcall, arg) == 32 &&
		       __builtin_offsetof(struct kr__xcall, die_sp) == 80,
	       "gate.S's XC_ARG, XC_DIE");

/* the call in flight on each microprocess (kr__uthr_self) */
static kr_key callkey;
static int callkey_made; /* atomic */

struct kr__uthr *kr__call_self(void)
{
	return __atomic_load_n(&callkey_made, __ATOMIC_ACQUIRE) ? kr_key_get(callkey) : NULL;
}

/* up's calls, made now if need be; NULL: ENOMEM.  Under the layer's lock. */
static struct kr__xcall *xc_get(struct kr_uproc *up)
{
	if (up->xc)
		return up->xc;
	if (!callkey_made) {
		if (kr_key_create(&callkey, NULL))
			return NULL;
		__atomic_store_n(&callkey_made, 1, __ATOMIC_RELEASE);
	}
	struct kr__xcall *xc = calloc(1, sizeof *xc);
	if (!xc)
		return NULL;
	kr_mutex_init(&xc->lock);
	kr_cond_init(&xc->cv);
	xc->die_sp = &xc->thr.die_sp;
	xc->closed = up->xc_closed;
	xc->refs = 1;
	struct kr__uthr *t = &xc->thr;
	t->magic = KR_UTHR_MAGIC;
	t->up = up;
	t->xcall = xc;
	t->killfd = -1;
	t->altstack.ss_flags = SS_DISABLE;
	__atomic_store_n(&up->fds.shared, 1, __ATOMIC_RELEASE); /* calls use its fds too */
	__atomic_store_n(&up->xc, xc, __ATOMIC_RELEASE);
	return xc;
}

/* A reference let go; under the layer's lock. */
static void xc_put(struct kr__xcall *xc)
{
	if (--xc->refs)
		return;
	if (xc->thr.killfd >= 0)
		close(xc->thr.killfd);
	kr_cond_destroy(&xc->cv);
	kr_mutex_destroy(&xc->lock);
	free(xc->tab);
	free(xc->thr.bounce);
	xc->thr.magic = 0;
	free(xc);
}

void kr__call_free(struct kr_uproc *up)
{
	kr__uproc_lock();
	if (up->xc)
		xc_put(up->xc);
	up->xc = NULL;
	kr__uproc_unlock();
}

struct kr__uthr *kr__call_poke(struct kr_uproc *up, struct kr__uthr *keep)
{
	struct kr__xcall *xc = up->xc;
	if (!xc || &xc->thr == keep)
		return NULL;
	/* against run's end: a call that saw no poke is not poked */
	__atomic_store_n(&xc->poked, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&xc->thr.mp, __ATOMIC_SEQ_CST) ? &xc->thr : NULL;
}

void kr__call_close(struct kr_uproc *up, int end)
{
	kr__uproc_lock();
	if (end)
		up->xc_closed = 1;
	struct kr__xcall *xc = up->xc;
	kr__uproc_unlock();
	if (!xc)
		return;
	kr_mutex_lock(&xc->lock); /* after the call in flight */
	if (end)
		xc->closed = 1;
	free(xc->tab);
	xc->tab = NULL;
	xc->n = 0;
	xc->stk_lo = xc->stk_hi = 0; /* its regions go (or went: exec) */
	kr_cond_broadcast(&xc->cv);
	kr_mutex_unlock(&xc->lock);
}

void kr__call_gone(struct kr__uthr *t, int status, int how)
{
	struct kr__xcall *xc = t->xcall;
	int sig = status - 128;
	xc->err = how == KR__END_KILLED && (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
					      sig == SIGILL)
			  ? EFAULT
			  : ESRCH;
#if defined(__SANITIZE_ADDRESS__)
	/* the frames left on both stacks, which never return */
	__asan_unpoison_memory_region((void *)xc->stk_lo, xc->stk_hi - xc->stk_lo);
	__asan_unpoison_memory_region((void *)(xc->sp - 65536), 65536);
#endif
	kr__img_call_back(xc);
}

/* The call itself, xc's lock held and the procedure there: on the calling
 * microprocess, as xc's thread. */
static int run(struct kr_uproc *up, struct kr__xcall *xc, uint64_t fn, const long *args,
	       unsigned nargs, long *result)
{
	int e = kr__img_arm();
	if (e)
		return e;
	struct kr__uthr *t = &xc->thr, *outer = kr__call_self();
	if ((e = kr_key_set(callkey, t)))
		return e;
	/* what the kernel keeps per thread, afresh: every signal blocked */
	t->attn = t->stop = t->gone = t->restart = t->sigreturn = t->has_saved_mask = 0;
	t->sigpending = 0;
	t->sigmask = ~(uint64_t)0 & ~KR__UNBLOCKABLE;
	xc->fn = fn;
	memset(xc->arg, 0, sizeof xc->arg);
	if (nargs) /* args may be NULL then */
		memcpy(xc->arg, args, nargs * sizeof *args);
	xc->err = 0;
	long r = 0;
	/* in flight from here (kr__call_poke), unless its end began */
	__atomic_store_n(&t->mp, kr_mp_self(), __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&up->dying, __ATOMIC_SEQ_CST)) {
		xc->err = ESRCH;
	} else {
		kr__uthr_here(t);
		r = kr__img_call(xc);
	}
	__atomic_store_n(&t->mp, NULL, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&xc->poked, __ATOMIC_SEQ_CST)) {
		/* the poke's cancel and wakeup, once it is over, are spent */
		kr__uproc_lock();
		kr__uproc_unlock();
		__atomic_store_n(&xc->poked, 0, __ATOMIC_SEQ_CST);
		while (kr_mp_park_cancellable_until(0) != ETIMEDOUT)
			;
		uint64_t v;
		if (t->killfd >= 0) /* non-blocking */
			(void)!read(t->killfd, &v, sizeof v);
	}
	kr_key_set(callkey, outer);
	if (!xc->err)
		*result = r;
	return xc->err;
}

/* A call into xc's μprocess up: its procedure `proc`, once it has one. */
static int call(struct kr_uproc *up, struct kr__xcall *xc, unsigned proc, const long *args,
		unsigned nargs, long *result)
{
	int e = kr_mutex_lock(&xc->lock);
	if (e)
		return e;
	while (!e && !xc->n && !xc->closed)
		e = kr_cond_wait(&xc->cv, &xc->lock);
	if (!e && xc->closed)
		e = ESRCH;
	if (!e && (proc >= xc->n || !xc->tab[proc]))
		e = EINVAL;
	if (!e)
		e = run(up, xc, xc->tab[proc], args, nargs, result);
	kr_mutex_unlock(&xc->lock);
	return e;
}

int kr_uproc_call(kr_uproc *up, unsigned proc, const long *args, unsigned nargs, long *result)
{
	if (!up || up->magic != KR_UPROC_MAGIC || !result || nargs > KR_UPROC_CALL_ARGS ||
	    (nargs && !args))
		return EINVAL;
	if (!kr_mp_self())
		return EPERM;
	struct kr__xcall *xc = __atomic_load_n(&up->xc, __ATOMIC_ACQUIRE);
	if (!xc) {
		kr__uproc_lock();
		xc = xc_get(up);
		kr__uproc_unlock();
		if (!xc)
			return ENOMEM;
	}
	return call(up, xc, proc, args, nargs, result);
}

/* KR_UPROC_NR_CALL: t calls procedure proc of the μprocess whose pid it names. */
static long call_pid(struct kr__uthr *t, pid_t pid, unsigned proc, uintptr_t uargs,
		     unsigned long nargs, uintptr_t uresult)
{
	long args[KR_UPROC_CALL_ARGS], r;
	if (nargs > KR_UPROC_CALL_ARGS)
		return -EINVAL;
	if ((nargs && kr__ucopy(args, (const void *)uargs, nargs * sizeof *args)) ||
	    kr__uprobe((void *)uresult, sizeof r, 1))
		return -EFAULT;
	kr__uproc_lock();
	struct kr_uproc *up = kr__uproc_by_pid(pid);
	struct kr__xcall *xc = up && !up->real ? xc_get(up) : NULL;
	if (xc)
		xc->refs++; /* its μprocess may be waited for meanwhile */
	kr__uproc_unlock();
	if (!xc)
		return up && !up->real ? -ENOMEM : -ESRCH;
	int e = call(up, xc, proc, args, (unsigned)nargs, &r);
	kr__uproc_lock();
	xc_put(xc);
	kr__uproc_unlock();
	if (!e && PUT(uresult, r))
		return -EFAULT;
	return -e;
}

/* KR_UPROC_NR_EXPORT: t's μprocess exports the n procedures at utab. */
static long export(struct kr__uthr *t, uintptr_t utab, unsigned long n)
{
	struct kr_uproc *up = t->up;
	if (t->xcall)
		return -EBUSY;
	if (n > KR_UPROC_EXPORT_MAX || up->vparent)
		return -EINVAL;
	uint64_t *tab = NULL;
	if (n && !(tab = malloc(n * sizeof *tab)))
		return -ENOMEM;
	if (n && kr__ucopy(tab, (const void *)utab, n * sizeof *tab)) {
		free(tab);
		return -EFAULT;
	}
	for (unsigned long i = 0; i < n; i++)
		if (tab[i] && !kr__sig_ucode(up, tab[i])) {
			free(tab);
			return -EFAULT;
		}
	kr__uproc_lock();
	struct kr__xcall *xc = xc_get(up);
	kr__uproc_unlock();
	if (!xc) {
		free(tab);
		return -ENOMEM;
	}
	kr_mutex_lock(&xc->lock); /* after the call in flight */
	int e = 0;
	if (n && !xc->stk_hi && !(e = kr__uproc_stack(up, CALL_STACK, &xc->stk_lo, &xc->stk_hi)))
		xc->top = xc->stk_hi;
	if (!e) {
		uint64_t *old = xc->tab;
		xc->tab = tab;
		xc->n = (unsigned)n;
		xc->fs = xc->thr.fs = t->fs; /* kr__img_call's, and its traps' */
		xc->thr.tid = t->tid;
		tab = old;
		kr_cond_broadcast(&xc->cv);
	}
	kr_mutex_unlock(&xc->lock);
	free(tab);
	return -e;
}

long kr__call_sys(struct kr__uthr *t, long nr, long a[6])
{
	switch (nr) {
	case KR_UPROC_NR_EXPORT:
		return export(t, (uintptr_t)a[0], (unsigned long)a[1]);
	case KR_UPROC_NR_CALL:
		return call_pid(t, (pid_t)a[0], (unsigned)a[1], (uintptr_t)a[2], (unsigned long)a[3],
				(uintptr_t)a[4]);
	case SYS_clone:
	case SYS_fork:
	case SYS_vfork:
	case SYS_execve:
	case SYS_execveat:
		if (!t->xcall)
			break;
		kr__say(t->up, "a thread, a fork or an exec in a procedure that another party calls");
		return -ENOSYS;
	}
	return KR__NOT_CALL;
}
