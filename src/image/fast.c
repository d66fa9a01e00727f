/*
 * karui image layer — the calls a rewritten site (rewrite.c) may finish
 * without saving the vector state.
 *
 * kr__img_fastcall (gate.S) first offers a call to kr__sys_fast, which
 * this file alone makes: it is compiled with -mgeneral-regs-only (no
 * vector register, so none of the μprocess's needs saving), without
 * sanitizers or stack protector (it runs before the VP's thread pointer
 * is back in %fs), and it calls no function: what it cannot finish with
 * the μprocess's state in hand and at most one system call of its own
 * (made inline: with the selector at ALLOW no call traps), it declines
 * with KR__SLOW before changing anything, and the general path (XSAVEC,
 * kr__sys) runs instead.  What it finishes it finishes as kr__sys would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>

#include "uproc.h"

static inline long raw(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

/* A host fd that a plain system call serves (no pipe, nothing that waits). */
static inline int plain_fd(const struct kr_uproc *up, long fd)
{
	if (fd < 0 || fd >= up->fds.n)
		return -1;
	const struct kr__ufile *f = up->fds.fd[fd].f;
	return f && f->kind == UF_HOST && !f->waits ? f->hostfd : -1;
}

struct kr__fast kr__sys_fast(struct kr_uproc *up, long nr, const long *a)
{
	long r;
	int h;
	if (kr__img_trace)
		return (struct kr__fast){KR__SLOW, 0};
	switch (nr) {
	case SYS_getpid:
	case SYS_gettid:
		r = up->pid;
		break;
	case SYS_getppid:
		r = up->ppid;
		break;
	case SYS_read:
	case SYS_write:
	case SYS_pread64:
	case SYS_pwrite64:
	case SYS_lseek:
	case SYS_fstat:
		if ((h = plain_fd(up, a[0])) < 0)
			return (struct kr__fast){KR__SLOW, 0};
		r = raw(nr, h, a[1], a[2], a[3]);
		if (r == -EPIPE) /* SIGPIPE: the general path */
			return (struct kr__fast){KR__SLOW, 0};
		break;
	case SYS_rt_sigprocmask: {
		const uint64_t *set = (const uint64_t *)a[1];
		uint64_t *old = (uint64_t *)a[2];
		if (a[3] != 8 || (set && a[0] != SIG_BLOCK && a[0] != SIG_UNBLOCK &&
				  a[0] != SIG_SETMASK))
			return (struct kr__fast){KR__SLOW, 0};
		uint64_t m = up->sigmask;
		if (old)
			*old = m;
		if (set)
			up->sigmask = a[0] == SIG_BLOCK ? m | *set
				      : a[0] == SIG_UNBLOCK ? m & ~*set : *set;
		r = 0;
		break;
	}
	default:
		return (struct kr__fast){KR__SLOW, 0};
	}
	up->nsys++;
	return (struct kr__fast){r, up->fs};
}
