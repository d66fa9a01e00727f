/*
 * karui image layer — a μprocess's system calls on its signals: its
 * dispositions, mask and alternate stack, its waits for signals, its
 * ITIMER_REAL, and the signals it sends.
 *
 * What it sets is kept and reported as the kernel would, and signal.c
 * delivers by it: its handlers run, on its own stack or its alternate
 * one; an ignored signal is dropped (one pending when it comes to be
 * ignored too); one it blocks waits, pending, until it unblocks it.
 * pause and rt_sigsuspend wait until a signal is to be delivered, and
 * return EINTR once its handler has run (rt_sigsuspend's mask stays for
 * that handler); rt_sigtimedwait takes a pending signal of its set
 * instead.  Its only timer, ITIMER_REAL, is a microprocess of its own that
 * sends it SIGALRM.  It may send signals to itself and to the other
 * μprocesses of the host, by their pids (kill, tkill, tgkill), as
 * kr_uproc_kill does; a pid of no μprocess is ESRCH (no real process can
 * be reached), and a process group is the μprocess of that pid alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "sys.h"

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif

long kr__sys_sigaction(struct kr_uproc *up, long nr, long a[6])
{
	long sig = a[0], size = a[3];
	const struct sigaction_k *act = (const struct sigaction_k *)a[1];
	struct sigaction_k *old = (struct sigaction_k *)a[2];
	if (sig < 1 || sig > 64 || size != 8)
		return -EINVAL;
	if (act && (sig == SIGKILL || sig == SIGSTOP))
		return -EINVAL;
	struct sigaction_k na, oa = up->sig[sig];
	if ((act && GET(na, act)) || (old && PUT(old, oa)))
		return -EFAULT;
	if (act) {
		na.mask &= ~KR__UNBLOCKABLE;
		uint64_t keep = ~((uint64_t)1 << (sig - 1));
		int drop = na.handler == (uint64_t)SIG_IGN ||
			   (na.handler == (uint64_t)SIG_DFL && !kr__sig_ends((int)sig));
		kr__uproc_lock(); /* its threads */
		kr__spin_lock(&up->siglock); /* against senders */
		up->sig[sig] = na;
		/* a pending signal now ignored is dropped, its threads' too */
		if (drop) {
			__atomic_fetch_and(&up->sigpending, keep, __ATOMIC_SEQ_CST);
			KR__FOR_THREADS(up, o)
				__atomic_fetch_and(&o->sigpending, keep, __ATOMIC_SEQ_CST);
		}
		kr__spin_unlock(&up->siglock);
		kr__uproc_unlock();
	}
	return 0;
}

long kr__sys_sigprocmask(struct kr_uproc *up, long nr, long a[6])
{
	long how = a[0], size = a[3];
	const uint64_t *set = (const uint64_t *)a[1];
	uint64_t *old = (uint64_t *)a[2];
	if (size != 8)
		return -EINVAL;
	struct kr__uthr *t = kr__uthr_self();
	uint64_t m = t->sigmask, s;
	if ((set && GET(s, set)) || (old && PUT(old, m)))
		return -EFAULT;
	if (!set)
		return 0;
	switch (how) {
	case SIG_BLOCK:
		m |= s;
		break;
	case SIG_UNBLOCK:
		m &= ~s;
		break;
	case SIG_SETMASK:
		m = s;
		break;
	default:
		return -EINVAL;
	}
	__atomic_store_n(&t->sigmask, m & ~KR__UNBLOCKABLE, __ATOMIC_SEQ_CST);
	kr__sig_recheck(t);
	return 0;
}

long kr__sigmask_push(struct kr_uproc *up, long umask, long size, uint64_t *saved)
{
	struct kr__uthr *t = kr__uthr_self();
	*saved = t->sigmask;
	if (!umask)
		return 0;
	uint64_t m;
	if (size != 8)
		return -EINVAL;
	if (GET(m, umask))
		return -EFAULT;
	__atomic_store_n(&t->sigmask, m & ~KR__UNBLOCKABLE, __ATOMIC_SEQ_CST);
	kr__sig_recheck(t);
	return 0;
}

/* A signal that the call's mask let through stays under that mask for its
 * handler, whose frame holds the mask from before (signal.c), as the
 * kernel's saved_sigmask. */
void kr__sigmask_pop(struct kr_uproc *up, uint64_t saved)
{
	struct kr__uthr *t = kr__uthr_self();
	uint64_t p = __atomic_load_n(&t->sigpending, __ATOMIC_SEQ_CST) |
		     __atomic_load_n(&up->sigpending, __ATOMIC_SEQ_CST);
	if (p & ~t->sigmask & saved) {
		t->saved_mask = saved;
		t->has_saved_mask = 1;
		__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
		return;
	}
	__atomic_store_n(&t->sigmask, saved, __ATOMIC_SEQ_CST);
	kr__sig_recheck(t);
}

long kr__sys_sigpending(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__uthr *t = kr__uthr_self();
	uint64_t p = (__atomic_load_n(&t->sigpending, __ATOMIC_RELAXED) |
		      __atomic_load_n(&up->sigpending, __ATOMIC_RELAXED)) &
		     t->sigmask;
	return PUT(a[0], p);
}

/* As the kernel's: SS_ONSTACK while it runs on it (a handler's), when it
 * cannot be changed (EPERM). */
long kr__sys_sigaltstack(struct kr_uproc *up, long nr, long a[6])
{
	const stack_t *uss = (const stack_t *)a[0];
	stack_t *uold = (stack_t *)a[1];
	struct kr__uthr *t = kr__uthr_self();
	stack_t ss, old = t->altstack;
	int on = !(old.ss_flags & SS_DISABLE) && t->usp > (uintptr_t)old.ss_sp &&
		 t->usp <= (uintptr_t)old.ss_sp + old.ss_size;
	if (on)
		old.ss_flags = SS_ONSTACK | (old.ss_flags & (int)SS_AUTODISARM);
	if (uss && GET(ss, uss))
		return -EFAULT;
	if (uss) {
		int mode = ss.ss_flags & (int)~SS_AUTODISARM;
		if (on)
			return -EPERM;
		if (mode != 0 && mode != SS_DISABLE && mode != SS_ONSTACK)
			return -EINVAL;
		if (mode == SS_DISABLE)
			ss = (stack_t){.ss_flags = SS_DISABLE};
		else if (ss.ss_size < (size_t)MINSIGSTKSZ)
			return -ENOMEM;
		else
			ss.ss_flags &= (int)SS_AUTODISARM;
	}
	if (uold && PUT(uold, old))
		return -EFAULT;
	if (uss)
		t->altstack = ss;
	return 0;
}

/* ---------------- ITIMER_REAL ---------------- */

/* A microprocess of the μprocess's sends it SIGALRM, as kr_uproc_kill
 * would, when the time comes; a change unparks it. */
static void *alarm_main(void *arg)
{
	struct kr_uproc *up = arg;
	struct kr__alarm *al = &up->alarm;
	while (!__atomic_load_n(&al->stop, __ATOMIC_ACQUIRE)) {
		uint64_t at = __atomic_load_n(&al->at, __ATOMIC_ACQUIRE);
		if (at && kr_now() >= at) {
			uint64_t every = __atomic_load_n(&al->every, __ATOMIC_RELAXED);
			__atomic_compare_exchange_n(&al->at, &at, every ? at + every : 0, 0,
						    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
			kr__uproc_kill_pid(up->pid, 0, SIGALRM, SI_KERNEL, 0);
		} else {
			kr_mp_park_until(at ? at : KR_FOREVER);
		}
	}
	return NULL;
}

void kr__alarm_stop(struct kr_uproc *up)
{
	if (!up->alarm.mp)
		return;
	__atomic_store_n(&up->alarm.stop, 1, __ATOMIC_RELEASE);
	kr_mp_unpark(up->alarm.mp);
	kr_mp_join(up->alarm.mp, NULL);
	up->alarm.mp = NULL;
}

static uint64_t ns_of_tv(const struct timeval *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_usec * 1000u;
}

static struct timeval tv_of_ns(uint64_t ns)
{
	return (struct timeval){(time_t)(ns / 1000000000u), (suseconds_t)(ns % 1000000000u / 1000u)};
}

/* The timer as it stands: what is left, and the interval. */
static struct itimerval itimer_now(struct kr_uproc *up)
{
	uint64_t at = __atomic_load_n(&up->alarm.at, __ATOMIC_ACQUIRE), now = kr_now();
	uint64_t left = at > now ? at - now : at ? 1000 : 0; /* due: 1 µs, as the kernel */
	return (struct itimerval){tv_of_ns(__atomic_load_n(&up->alarm.every, __ATOMIC_RELAXED)),
				  tv_of_ns(left)};
}

static long itimer_set(struct kr_uproc *up, const struct itimerval *v)
{
	uint64_t left = ns_of_tv(&v->it_value);
	if (left && !up->alarm.mp) {
		kr_attr ma = {.stack_size = 16 << 10};
		int e = kr_mp_create(&up->alarm.mp, &ma, alarm_main, up);
		if (e)
			return -e;
	}
	__atomic_store_n(&up->alarm.every, left ? ns_of_tv(&v->it_interval) : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&up->alarm.at, left ? kr_now() + left : 0, __ATOMIC_RELEASE);
	if (up->alarm.mp)
		kr_mp_unpark(up->alarm.mp);
	return 0;
}

static long setitimer_(struct kr_uproc *up, long which, const struct itimerval *unew,
		       struct itimerval *uold)
{
	struct itimerval v, old = itimer_now(up);
	if (which != ITIMER_REAL)
		return -EINVAL; /* ITIMER_VIRTUAL, ITIMER_PROF: not kept */
	if (unew && GET(v, unew))
		return -EFAULT;
	if (unew && (v.it_value.tv_sec < 0 || v.it_value.tv_usec < 0 ||
		     v.it_value.tv_usec >= 1000000 || v.it_interval.tv_sec < 0 ||
		     v.it_interval.tv_usec < 0 || v.it_interval.tv_usec >= 1000000))
		return -EINVAL;
	if (uold && PUT(uold, old))
		return -EFAULT;
	if (unew) {
		if (v.it_value.tv_sec > SLEEP_MAX_S)
			v.it_value.tv_sec = SLEEP_MAX_S;
		if (v.it_interval.tv_sec > SLEEP_MAX_S)
			v.it_interval.tv_sec = SLEEP_MAX_S;
		return itimer_set(up, &v);
	}
	return 0;
}

long kr__sys_setitimer(struct kr_uproc *up, long nr, long a[6])
{
	return setitimer_(up, a[0], (const struct itimerval *)a[1], (struct itimerval *)a[2]);
}

long kr__sys_getitimer(struct kr_uproc *up, long nr, long a[6])
{
	return a[0] == ITIMER_REAL ? setitimer_(up, a[0], NULL, (struct itimerval *)a[1]) : -EINVAL;
}

long kr__sys_alarm(struct kr_uproc *up, long nr, long a[6])
{
	unsigned long s = (unsigned long)a[0];
	struct itimerval old = itimer_now(up);
	struct itimerval v = {{0, 0}, {(time_t)(s > SLEEP_MAX_S ? SLEEP_MAX_S : s), 0}};
	long e = itimer_set(up, &v);
	if (e)
		return e;
	/* what was left, in seconds, rounded as the kernel does */
	return old.it_value.tv_sec + (old.it_value.tv_usec >= 500000 ||
				      (!old.it_value.tv_sec && old.it_value.tv_usec));
}

/* ---------------- signals it sends ---------------- */

/* To itself or to another μprocess of the host (its pid), or (tid) to a
 * thread of that μprocess (tgid pid) or of whichever (pid 0). */
static long send_to(struct kr_uproc *up, long pid, long tid, long sig, int code)
{
	if (sig < 0 || sig > 64)
		return -EINVAL;
	if (pid == up->pid && !tid) {
		kr__uproc_send(up, NULL, (int)sig, code, up->pid);
		return 0;
	}
	if (pid < 0 || pid > INT_MAX || tid < 0 || tid > INT_MAX || (!pid && !tid))
		return -ESRCH;
	return kr__uproc_kill_pid((pid_t)pid, (pid_t)tid, (int)sig, code, up->pid);
}

long kr__sys_kill(struct kr_uproc *up, long nr, long a[6])
{
	long pid = (int)a[0];
	/* its process group (0): itself; a group -N: the μprocess N alone */
	return send_to(up, pid == 0 ? up->pid : pid < -1 ? -pid : pid == -1 ? 0 : pid, 0,
		       (int)a[1], SI_USER);
}

long kr__sys_tkill(struct kr_uproc *up, long nr, long a[6])
{
	return (int)a[0] <= 0 ? -EINVAL : send_to(up, 0, (int)a[0], (int)a[1], SI_TKILL);
}

long kr__sys_tgkill(struct kr_uproc *up, long nr, long a[6])
{
	if ((int)a[0] <= 0 || (int)a[1] <= 0)
		return -EINVAL;
	return send_to(up, (int)a[0], (int)a[1], (int)a[2], SI_TKILL);
}

/* ---------------- waits for signals ---------------- */

/* Until a signal is to be delivered (kr__sig_queue's cancel wakes it). */
static void wait_intr(void)
{
	while (!kr__sig_intr())
		kr_mp_park_cancellable_until(KR_FOREVER);
}

long kr__sys_pause(struct kr_uproc *up, long nr, long a[6])
{
	wait_intr();
	return -EINTR;
}

long kr__sys_sigsuspend(struct kr_uproc *up, long nr, long a[6])
{
	uint64_t saved;
	long r = kr__sigmask_push(up, a[0], a[1], &saved);
	if (r)
		return r;
	wait_intr();
	kr__sigmask_pop(up, saved);
	return -EINTR;
}

/* A pending signal of its set, taken: it waits for one (within the
 * timeout: EAGAIN), a signal it does not block ending the wait (EINTR). */
long kr__sys_sigtimedwait(struct kr_uproc *up, long nr, long a[6])
{
	uint64_t set;
	struct timespec t;
	siginfo_t si;
	if (a[3] != 8)
		return -EINVAL;
	if (GET(set, a[0]) || (a[2] && GET(t, a[2])))
		return -EFAULT;
	if (a[2] && (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000))
		return -EINVAL;
	if (a[2] && t.tv_sec > SLEEP_MAX_S)
		t.tv_sec = SLEEP_MAX_S;
	set &= ~KR__UNBLOCKABLE;
	uint64_t deadline = a[2] ? kr_now() + (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec
				 : KR_FOREVER;
	int sig;
	struct kr__uthr *th = kr__uthr_self();
	__atomic_store_n(&th->waitset, set, __ATOMIC_SEQ_CST);
	while (!(sig = kr__sig_take(th, set, &si)) && !kr__sig_intr())
		if (kr_mp_park_cancellable_until(deadline) == ETIMEDOUT)
			break;
	__atomic_store_n(&th->waitset, 0, __ATOMIC_SEQ_CST);
	if (!sig && !(sig = kr__sig_take(th, set, &si)))
		return kr__sig_intr() ? -EINTR : -EAGAIN;
	if (a[1] && PUT(a[1], si))
		return -EFAULT;
	return sig;
}

/* rt_sigreturn: served on the way back, with the kernel's frame there
 * (signal.c). */
long kr__sys_sigreturn(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__uthr *t = kr__uthr_self();
	t->sigreturn = 1;
	__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
	return 0;
}
