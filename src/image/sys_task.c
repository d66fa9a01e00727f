/*
 * karui image layer — a μprocess's system calls on itself as a task: its
 * identity (pid, tid, parent, name, limits), its thread pointer, its
 * sleeps and its end.  The calls that make processes (fork, vfork,
 * clone, exec, wait4) are sys_exec.c's; threads and futexes thread.c's.
 *
 * A μprocess has a pid of its own (above any real pid), and the host's
 * pid is its parent's; each of its threads a tid (the first's is the
 * pid).  A sleep parks the calling thread's microprocess alone until its
 * time or a signal.  A thread's thread pointer is kept here and installed
 * whenever it runs (uproc.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
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

long kr__sys_gettid(struct kr_uproc *up, long nr, long a[6])
{
	return kr__uthr_self()->tid;
}

long kr__sys_getppid(struct kr_uproc *up, long nr, long a[6])
{
	return up->ppid;
}

long kr__sys_set_tid_address(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__uthr *t = kr__uthr_self();
	t->tidaddr = (uintptr_t)a[0];
	return t->tid;
}

/* sched_getaffinity, sched_getparam, sched_getscheduler, getpriority's
 * PRIO_PROCESS...: of itself or one of its threads (by the tid karui gave
 * it), the kernel's answer for the calling thread; of another process's
 * pid, the kernel's for that pid. */
long kr__sys_sched_of(struct kr_uproc *up, long nr, long a[6])
{
	long b[6];
	memcpy(b, a, sizeof b);
	if (kr__uproc_is_self(up, (pid_t)a[0]))
		b[0] = 0;
	return kr__pass(nr, b);
}

long kr__sys_arch_prctl(struct kr_uproc *up, long nr, long a[6])
{
	struct kr__uthr *t = kr__uthr_self();
	switch (a[0]) {
	case ARCH_SET_FS:
		t->fs = (uint64_t)a[1];
		return 0;
	case ARCH_GET_FS:
		return PUT(a[1], t->fs);
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
	kr__uthr_end(kr__uthr_self(), (int)a[0], nr == SYS_exit_group ? KR__END_EXIT : KR__END_THREAD);
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
	kr__uthr_self()->ran_since = kr_now();
	return 0;
}
