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
 * μprocesses of the host, by their pids (kill, tkill, tgkill; with a
 * siginfo of its own, rt_sigqueueinfo and rt_tgsigqueueinfo), as
 * kr_uproc_kill does; a pid of no μprocess is ESRCH (no real process can
 * be reached), and a process group is the μprocess of that pid alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
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
			kr__sigfd_sync(up, 0);
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

/* ---------------- timers: ITIMER_REAL, timer_create ---------------- */

/* A microprocess of the μprocess's sends a timer's signal, as
 * kr_uproc_kill would, when the time comes; a change unparks it. */
static void *timer_main(void *arg)
{
	struct kr__alarm *al = arg;
	while (!__atomic_load_n(&al->stop, __ATOMIC_ACQUIRE)) {
		uint64_t at = __atomic_load_n(&al->at, __ATOMIC_ACQUIRE);
		if (at && kr_now() >= at) {
			uint64_t every = __atomic_load_n(&al->every, __ATOMIC_RELAXED);
			__atomic_compare_exchange_n(&al->at, &at, every ? at + every : 0, 0,
						    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
			if (al->signo)
				kr__uproc_send_timer(al->up, al->tid, al->signo, al->code, al->id,
						     al->sival);
		} else {
			kr_mp_park_until(at ? at : KR_FOREVER);
		}
	}
	return NULL;
}

/* Armed to fire in `left` ns (0: disarmed), then every `every` ns. */
static long timer_arm(struct kr__alarm *al, uint64_t left, uint64_t every)
{
	if (left && !al->mp) {
		kr_attr ma = {.stack_size = 16 << 10};
		int e = kr_mp_create(&al->mp, &ma, timer_main, al);
		if (e)
			return -e;
	}
	__atomic_store_n(&al->every, left ? every : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&al->at, left ? kr_now() + left : 0, __ATOMIC_RELEASE);
	if (al->mp)
		kr_mp_unpark(al->mp);
	return 0;
}

static void timer_stop(struct kr__alarm *al)
{
	if (!al->mp)
		return;
	__atomic_store_n(&al->stop, 1, __ATOMIC_RELEASE);
	kr_mp_unpark(al->mp);
	kr_mp_join(al->mp, NULL);
	al->mp = NULL;
}

void kr__timers_delete(struct kr_uproc *up)
{
	for (unsigned i = 0; i < sizeof up->timers / sizeof *up->timers; i++) {
		kr__uproc_lock();
		struct kr__alarm *al = up->timers[i];
		up->timers[i] = NULL;
		kr__uproc_unlock();
		if (al) {
			timer_stop(al);
			free(al);
		}
	}
}

void kr__alarm_stop(struct kr_uproc *up)
{
	timer_stop(&up->alarm);
	kr__timers_delete(up);
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
	struct kr__alarm *al = &up->alarm;
	al->up = up;
	al->signo = SIGALRM;
	al->code = SI_KERNEL;
	return timer_arm(al, ns_of_tv(&v->it_value), ns_of_tv(&v->it_interval));
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

/* timer_create's: on CLOCK_REALTIME, CLOCK_MONOTONIC or CLOCK_BOOTTIME,
 * a signal to the μprocess (SIGEV_SIGNAL), to one of its threads
 * (SIGEV_THREAD_ID: glibc's SIGEV_THREAD is one) or none (SIGEV_NONE). */
struct ksigevent {
	uint64_t value;
	int signo, notify, tid;
	int pad[11];
};

static struct kr__alarm *timer_of(struct kr_uproc *up, long id)
{
	if (id < 0 || id >= (long)(sizeof up->timers / sizeof *up->timers))
		return NULL;
	return __atomic_load_n(&up->timers[id], __ATOMIC_ACQUIRE);
}

long kr__sys_timer_create(struct kr_uproc *up, long nr, long a[6])
{
	long clock = a[0];
	struct ksigevent ev = {.signo = SIGALRM, .notify = SIGEV_SIGNAL};
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME)
		return -EINVAL;
	if (a[1] && GET(ev, a[1]))
		return -EFAULT;
	if (ev.notify != SIGEV_NONE && ev.notify != SIGEV_SIGNAL && ev.notify != SIGEV_THREAD_ID)
		return -EINVAL;
	if (ev.notify != SIGEV_NONE && (ev.signo < 1 || ev.signo > 64))
		return -EINVAL;
	if (ev.notify == SIGEV_THREAD_ID && ev.tid <= 0)
		return -EINVAL;
	struct kr__alarm *al = calloc(1, sizeof *al);
	if (!al)
		return -EAGAIN;
	int id = -1;
	kr__uproc_lock();
	for (unsigned i = 0; i < sizeof up->timers / sizeof *up->timers && id < 0; i++)
		if (!up->timers[i])
			id = (int)i;
	*al = (struct kr__alarm){.up = up,
				 .signo = ev.notify == SIGEV_NONE ? 0 : ev.signo,
				 .code = SI_TIMER,
				 .id = id,
				 .tid = ev.notify == SIGEV_THREAD_ID ? ev.tid : 0,
				 .clock = (clockid_t)clock,
				 .sival = a[1] ? ev.value : (uint64_t)id};
	if (id >= 0)
		__atomic_store_n(&up->timers[id], al, __ATOMIC_RELEASE);
	kr__uproc_unlock();
	if (id < 0) {
		free(al);
		return -EAGAIN;
	}
	if (PUT(a[2], id)) {
		kr__uproc_lock();
		up->timers[id] = NULL;
		kr__uproc_unlock();
		free(al);
		return -EFAULT;
	}
	return 0;
}

static struct itimerspec timer_now(struct kr__alarm *al)
{
	uint64_t at = __atomic_load_n(&al->at, __ATOMIC_ACQUIRE), now = kr_now();
	uint64_t left = at > now ? at - now : at ? 1 : 0, every = __atomic_load_n(&al->every, __ATOMIC_RELAXED);
	return (struct itimerspec){{(time_t)(every / 1000000000u), (long)(every % 1000000000u)},
				   {(time_t)(left / 1000000000u), (long)(left % 1000000000u)}};
}

long kr__sys_timer_settime(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__alarm *al = timer_of(up, a[0]);
	struct itimerspec v, old;
	if (!al || (a[1] & ~(long)TIMER_ABSTIME))
		return -EINVAL;
	if (GET(v, a[2]))
		return -EFAULT;
	if (v.it_value.tv_sec < 0 || v.it_value.tv_nsec < 0 || v.it_value.tv_nsec >= 1000000000 ||
	    v.it_interval.tv_sec < 0 || v.it_interval.tv_nsec < 0 ||
	    v.it_interval.tv_nsec >= 1000000000)
		return -EINVAL;
	old = timer_now(al);
	if (a[3] && PUT(a[3], old))
		return -EFAULT;
	for (struct timespec *ts = &v.it_interval; ts <= &v.it_value; ts++)
		if (ts->tv_sec > SLEEP_MAX_S)
			ts->tv_sec = SLEEP_MAX_S;
	uint64_t left = (uint64_t)v.it_value.tv_sec * 1000000000u + (uint64_t)v.it_value.tv_nsec;
	uint64_t every = (uint64_t)v.it_interval.tv_sec * 1000000000u + (uint64_t)v.it_interval.tv_nsec;
	if (left && (a[1] & TIMER_ABSTIME)) {
		struct timespec c;
		clock_gettime(al->clock, &c);
		uint64_t now = (uint64_t)c.tv_sec * 1000000000u + (uint64_t)c.tv_nsec;
		left = left > now ? left - now : 1; /* passed: at once */
	}
	return timer_arm(al, left, every);
}

long kr__sys_timer_gettime(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__alarm *al = timer_of(up, a[0]);
	if (!al)
		return -EINVAL;
	struct itimerspec v = timer_now(al);
	return PUT(a[1], v);
}

long kr__sys_timer_getoverrun(struct kr_uproc *up, long nr, long a[6])
{
	return timer_of(up, a[0]) ? 0 : -EINVAL;
}

long kr__sys_timer_delete(struct kr_uproc *up, long nr, long a[6])
{
	if (a[0] < 0 || a[0] >= (long)(sizeof up->timers / sizeof *up->timers))
		return -EINVAL;
	kr__uproc_lock();
	struct kr__alarm *al = up->timers[a[0]];
	up->timers[a[0]] = NULL;
	kr__uproc_unlock();
	if (!al)
		return -EINVAL;
	timer_stop(al);
	free(al);
	return 0;
}

/* ---------------- signals it sends ---------------- */

/* To itself or to another μprocess of the host (its pid), or (tid) to a
 * thread of that μprocess (tgid pid) or of whichever (pid 0); its siginfo
 * says `code`, `from` and (sigqueue) `value`. */
static long send_to(struct kr_uproc *up, long pid, long tid, long sig, int code, pid_t from,
		    uint64_t value)
{
	if (sig < 0 || sig > 64)
		return -EINVAL;
	if (pid == up->pid && !tid) {
		kr__uproc_send(up, NULL, (int)sig, code, from, value);
		return 0;
	}
	/* a call's thread (call.c) to the tid it shares with its exporter: to
	 * itself (raise, abort() in a procedure) */
	struct kr__uthr *t = kr__uthr_self();
	if (t->xcall && tid == t->tid && (!pid || pid == up->pid))
		return kr__uproc_signal((int)sig);
	if (pid < 0 || pid > INT_MAX || tid < 0 || tid > INT_MAX || (!pid && !tid))
		return -ESRCH;
	return kr__uproc_kill_pid((pid_t)pid, (pid_t)tid, (int)sig, code, from, value);
}

long kr__sys_kill(struct kr_uproc *up, long nr, long a[6])
{
	long pid = (int)a[0];
	/* its process group (0): itself; a group -N: the μprocess N alone */
	return send_to(up, pid == 0 ? up->pid : pid < -1 ? -pid : pid == -1 ? 0 : pid, 0,
		       (int)a[1], SI_USER, up->pid, 0);
}

long kr__sys_tkill(struct kr_uproc *up, long nr, long a[6])
{
	return (int)a[0] <= 0 ? -EINVAL : send_to(up, 0, (int)a[0], (int)a[1], SI_TKILL, up->pid, 0);
}

long kr__sys_tgkill(struct kr_uproc *up, long nr, long a[6])
{
	if ((int)a[0] <= 0 || (int)a[1] <= 0)
		return -EINVAL;
	return send_to(up, (int)a[0], (int)a[1], (int)a[2], SI_TKILL, up->pid, 0);
}

/* rt_sigqueueinfo, rt_tgsigqueueinfo: as kill and tgkill, with the
 * siginfo it gives (its code, pid and value; the uid is its own); a code
 * of kill's or the kernel's to another process is EPERM, as in the kernel. */
long kr__sys_sigqueueinfo(struct kr_uproc *up, long nr, long a[6])
{
	int tg = nr == SYS_rt_tgsigqueueinfo;
	long pid = (int)a[0], tid = tg ? (int)a[1] : 0, sig = (int)a[1 + tg];
	siginfo_t si;
	if (tg && (pid <= 0 || tid <= 0))
		return -EINVAL;
	if (GET(si, a[2 + tg]))
		return -EFAULT;
	if ((si.si_code >= 0 || si.si_code == SI_TKILL) &&
	    !kr__uproc_is_self(up, (pid_t)(tg ? tid : pid)))
		return -EPERM;
	return send_to(up, pid, tid, sig, si.si_code, si.si_pid, (uint64_t)si.si_value.sival_ptr);
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
