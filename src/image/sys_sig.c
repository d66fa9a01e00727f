/*
 * karui image layer — a μprocess's system calls on its signals: its
 * dispositions, mask and alternate stack, its ITIMER_REAL, and the
 * signals it sends itself.
 *
 * The μprocess's handlers never run: what it sets is kept and reported
 * as the kernel would, and decides what a signal does to it — nothing
 * when it ignores it (or when the default ignores it), its end with
 * 128 + the signal otherwise (a caught signal too, as the default action
 * would; uproc.c: kr__uproc_signal, kr_uproc_kill).  A signal it blocks
 * waits until it unblocks it.  Its only timer, ITIMER_REAL, is a
 * microprocess of its own that sends it SIGALRM as kr_uproc_kill would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/time.h>

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
		up->sig[sig] = na;
		/* kr_uproc_kill reads it from another thread */
		__atomic_store_n(&up->sig[sig].handler, na.handler, __ATOMIC_RELAXED);
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
	uint64_t m = up->sigmask, s;
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
	__atomic_store_n(&up->sigmask, m, __ATOMIC_SEQ_CST);
	kr__sig_recheck(up);
	return 0;
}

long kr__sigmask_push(struct kr_uproc *up, long umask, long size, uint64_t *saved)
{
	*saved = up->sigmask;
	if (!umask)
		return 0;
	uint64_t m;
	if (size != 8)
		return -EINVAL;
	if (GET(m, umask))
		return -EFAULT;
	__atomic_store_n(&up->sigmask, m, __ATOMIC_SEQ_CST);
	kr__sig_recheck(up);
	return 0;
}

void kr__sigmask_pop(struct kr_uproc *up, uint64_t saved)
{
	__atomic_store_n(&up->sigmask, saved, __ATOMIC_SEQ_CST);
	kr__sig_recheck(up);
}

long kr__sys_sigpending(struct kr_uproc *up, long nr, long a[6])
{
	uint64_t p = __atomic_load_n(&up->sigpending, __ATOMIC_RELAXED) & up->sigmask;
	return PUT(a[0], p);
}

/* Kept and reported as the kernel does; its handlers never run on it. */
long kr__sys_sigaltstack(struct kr_uproc *up, long nr, long a[6])
{
	const stack_t *uss = (const stack_t *)a[0];
	stack_t *uold = (stack_t *)a[1];
	stack_t ss, old = up->altstack;
	if (uss && GET(ss, uss))
		return -EFAULT;
	if (uss) {
		int mode = ss.ss_flags & (int)~SS_AUTODISARM;
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
		up->altstack = ss;
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
			kr_uproc_kill(up, SIGALRM);
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

static long to_self(struct kr_uproc *up, long pid, long sig)
{
	if (pid != up->pid)
		return -ESRCH;
	return kr__uproc_signal(up, (int)sig);
}

long kr__sys_kill(struct kr_uproc *up, long nr, long a[6])
{
	return to_self(up, a[0] == 0 ? up->pid : a[0] < 0 ? -a[0] : a[0], a[1]);
}

long kr__sys_tkill(struct kr_uproc *up, long nr, long a[6])
{
	return to_self(up, a[0], a[1]);
}

long kr__sys_tgkill(struct kr_uproc *up, long nr, long a[6])
{
	return a[0] == up->pid ? to_self(up, a[1], a[2]) : -ESRCH;
}

/* pause, rt_sigsuspend: only kr_uproc_kill's signals come, and end it. */
long kr__sys_pause(struct kr_uproc *up, long nr, long a[6])
{
	while (kr_mp_park_cancellable_until(KR_FOREVER) != ECANCELED)
		;
	return -EINTR;
}
