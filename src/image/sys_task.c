/*
 * karui image layer — a μprocess's system calls on itself as a task: its
 * identity (pid, parent, name, limits), its one thread (thread pointer,
 * futexes), its sleeps and its end.  The calls that make processes
 * (fork, vfork, clone, exec, wait4) are sys_exec.c's.
 *
 * A μprocess has a pid of its own (above any real pid), and the host's
 * pid is its parent's.  It has one thread, its microprocess: a futex wake
 * finds nobody, and a futex wait or a sleep parks the microprocess alone
 * until its timeout or kr_uproc_kill.  Its thread pointer is kept here
 * and installed whenever it runs (uproc.c).  Threads are not done yet:
 * a call to make one fails as when threads run out (sys_exec.c), so that
 * programs that can go on with one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

#ifndef ARCH_SET_FS
#define ARCH_SET_GS 0x1001
#define ARCH_SET_FS 0x1002
#define ARCH_GET_FS 0x1003
#define ARCH_GET_GS 0x1004
#endif

/* ---------------- identity ---------------- */

long kr__sys_getpid(struct kr_uproc *up, long nr, long a[6])
{
	return up->pid;
}

long kr__sys_getppid(struct kr_uproc *up, long nr, long a[6])
{
	return up->ppid;
}

long kr__sys_set_tid_address(struct kr_uproc *up, long nr, long a[6])
{
	up->tidaddr = (uintptr_t)a[0];
	return up->pid;
}

long kr__sys_arch_prctl(struct kr_uproc *up, long nr, long a[6])
{
	switch (a[0]) {
	case ARCH_SET_FS:
		up->fs = (uint64_t)a[1];
		return 0;
	case ARCH_GET_FS:
		return PUT(a[1], up->fs);
	default:
		return -EINVAL;
	}
}

long kr__sys_prctl(struct kr_uproc *up, long nr, long a[6])
{
	switch (a[0]) {
	case PR_GET_DUMPABLE:
		return 1;
	case PR_SET_NAME:
	case PR_SET_PDEATHSIG:
	case PR_SET_DUMPABLE:
		return 0;
	default:
		return -EINVAL;
	}
}

/* Its own limits, read from the host's; no change. */
long kr__sys_prlimit64(struct kr_uproc *up, long nr, long a[6])
{
	if (a[0] != 0 && a[0] != up->pid)
		return -ESRCH;
	if (a[2])
		return -EPERM;
	a[0] = 0;
	return kr__pass(nr, a);
}

/* setuid and the like: the host's credentials are every μprocess's, so
 * no change (EPERM); a call that sets each id it names to what it is
 * changes nothing, and succeeds (posix_spawn's POSIX_SPAWN_RESETIDS). */
long kr__sys_setid(struct kr_uproc *up, long nr, long a[6])
{
	uid_t c[3];
	int gid = nr == SYS_setgid || nr == SYS_setregid || nr == SYS_setresgid;
	if (syscall(gid ? SYS_getresgid : SYS_getresuid, &c[0], &c[1], &c[2]))
		return -EPERM;
	uid_t v[3] = {(uid_t)-1, (uid_t)-1, (uid_t)-1};
	switch (nr) {
	case SYS_setuid:
	case SYS_setgid: /* privileged, it sets all three */
		v[0] = v[1] = v[2] = (uid_t)a[0];
		break;
	case SYS_setreuid:
	case SYS_setregid: /* the saved id follows the effective one then */
		v[0] = (uid_t)a[0];
		v[1] = (uid_t)a[1];
		if (v[0] != (uid_t)-1 || (v[1] != (uid_t)-1 && v[1] != c[0]))
			v[2] = v[1] != (uid_t)-1 ? v[1] : c[1];
		break;
	default:
		v[0] = (uid_t)a[0];
		v[1] = (uid_t)a[1];
		v[2] = (uid_t)a[2];
	}
	for (int i = 0; i < 3; i++)
		if (v[i] != (uid_t)-1 && v[i] != c[i])
			return -EPERM;
	return 0;
}

/* ---------------- the end ---------------- */

long kr__sys_exit(struct kr_uproc *up, long nr, long a[6])
{
	up->exited = 1;
	kr__uproc_end(up, (int)a[0]);
	__builtin_unreachable();
}

/* ---------------- waits that park the microprocess only ---------------- */

static long sleep_(long clock, long flags, const struct timespec *ureq)
{
	struct timespec req;
	if (GET(req, ureq))
		return -EFAULT;
	if (req.tv_nsec < 0 || req.tv_nsec >= 1000000000 || req.tv_sec < 0)
		return -EINVAL;
	if (req.tv_sec > SLEEP_MAX_S) /* as good as for ever, without overflow */
		req.tv_sec = SLEEP_MAX_S;
	uint64_t ns = (uint64_t)req.tv_sec * 1000000000u + (uint64_t)req.tv_nsec;
	if (flags & TIMER_ABSTIME) {
		struct timespec now;
		clock_gettime((clockid_t)clock, &now);
		uint64_t n = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		ns = ns > n ? ns - n : 0;
	}
	return kr_mp_sleep_for(ns) == ECANCELED ? -EINTR : 0;
}

long kr__sys_nanosleep(struct kr_uproc *up, long nr, long a[6])
{
	return sleep_(CLOCK_MONOTONIC, 0, (const struct timespec *)a[0]);
}

long kr__sys_clock_nanosleep(struct kr_uproc *up, long nr, long a[6])
{
	return sleep_(a[0], a[1], (const struct timespec *)a[2]);
}

long kr__sys_sched_yield(struct kr_uproc *up, long nr, long a[6])
{
	kr_mp_yield();
	return 0;
}

/* One thread: nobody wakes it, so the wait ends at its timeout (relative
 * for FUTEX_WAIT; absolute for FUTEX_WAIT_BITSET, on CLOCK_REALTIME with
 * FUTEX_CLOCK_REALTIME) or with kr_uproc_kill. */
static long futex_wait(const long a[6])
{
	int v;
	struct timespec t;
	if (GET(v, a[0]))
		return -EFAULT;
	if (v != (int)a[2])
		return -EAGAIN;
	uint64_t deadline = KR_FOREVER;
	if (a[3]) {
		if (GET(t, a[3]))
			return -EFAULT;
		if (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000)
			return -EINVAL;
		if (t.tv_sec > SLEEP_MAX_S)
			t.tv_sec = SLEEP_MAX_S;
		uint64_t ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec, now = kr_now();
		if ((a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET) {
			struct timespec c;
			clock_gettime(a[1] & FUTEX_CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC, &c);
			uint64_t at = (uint64_t)c.tv_sec * 1000000000u + (uint64_t)c.tv_nsec;
			ns = ns > at ? ns - at : 0;
		}
		deadline = now + ns;
	}
	int e;
	while ((e = kr_mp_park_cancellable_until(deadline)) == 0)
		;
	return e == ECANCELED ? -EINTR : -e;
}

long kr__sys_futex(struct kr_uproc *up, long nr, long a[6])
{
	switch (a[1] & FUTEX_CMD_MASK) {
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
		return 0; /* one thread: nobody to wake */
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
		return futex_wait(a);
	default:
		return -ENOSYS;
	}
}
