/*
 * karui image layer — signalfd in a μprocess: an fd whose reads take the
 * μprocess's pending signals of a mask, as the kernel's signalfd does.
 *
 * A μprocess's signals are karui's (signal.c), never the kernel's, so the
 * kernel's signalfd cannot serve it: its read would look at the host's
 * signals.  signalfd and signalfd4 make an open file of karui's instead
 * (own KR__OWN_SIGFD, uproc.h) holding the mask (struct kr__sigfd), and a
 * read takes, lowest first, the pending signals of that mask of the
 * calling thread and then of its μprocess (kr__sig_take, as
 * rt_sigtimedwait does), each written as the kernel's struct
 * signalfd_siginfo by the layout its si_code gives (signalfd_copyinfo):
 * the sender's pid and uid (kill, tgkill), a timer's id and sigev_value
 * (timer_create), a child's pid and status (SIGCHLD).  A read with
 * nothing pending waits, parking its microprocess, until a signal of the
 * mask comes (the sender wakes it through the thread's waitset, as
 * rt_sigtimedwait's) or one it does not block does (EINTR, which the
 * way back restarts after a handler with SA_RESTART, as the kernel's
 * -ERESTARTSYS); O_NONBLOCK: EAGAIN.  signalfd on a signalfd fd sets its
 * mask; on an fd of another kind it is EINVAL.
 *
 * Readiness.  poll and select (sys_fd.c) ask kr__sigfd_ready, for the
 * calling thread, as the kernel's signalfd_poll.  An epoll set holds host
 * fds, so the open file has one: an eventfd (close-on-exec, O_NONBLOCK)
 * that, once an epoll set is given it (kr__sigfd_epoll, sys_kfd.c), is
 * readable exactly while a signal of the mask is pending for the
 * μprocess that made the signalfd (its own, or its first thread's), and
 * written again for each new one (an edge for EPOLLET).  kr__sigfd_sync
 * keeps it so, called by signal.c under the μprocess's siglock at every
 * change of those pending sets (before any epoll set, it costs nothing:
 * a signalfd that is only read or polled makes no call of the kernel's); the μprocess holds a list of its
 * signalfds (`sigfds`, changed under that lock and this file's
 * bind_lock, which orders a signalfd's end against its μprocess's end).
 * A μprocess that got the fd from another (a vfork child) reads its own
 * signals, as in the kernel, but an epoll set shows the maker's.  epoll
 * never reports EPOLLOUT on it, as on the kernel's.
 *
 * Across fork (fork.c) the child is a plain process whose signals are
 * the kernel's: each signalfd becomes a kernel signalfd of the same mask
 * there (kr__sigfd_kernel); an exec keeps it as any fd without
 * close-on-exec.  SCM_RIGHTS cannot carry one (EBADF, sys_net.c), as a
 * karui pipe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

struct kr__sigfd {
	uint64_t mask;          /* atomic */
	int efd;                /* its open file's host fd: the eventfd */
	int epoll;              /* an epoll set was given it: efd is kept; and */
	int ready;              /* efd has a count: under up's siglock */
	struct kr_uproc *up;    /* whose signals efd shows; NULL after its end */
	struct kr__sigfd *next; /* up's list */
};

_Static_assert(sizeof(struct signalfd_siginfo) == 128, "the kernel's signalfd_siginfo");

/* the bindings of signalfds to μprocesses: taken before a siglock */
static kr_spin bind_lock;

void kr__sigfd_sync(struct kr_uproc *up, uint64_t fresh)
{
	if (!up->sigfds)
		return;
	uint64_t p = __atomic_load_n(&up->sigpending, __ATOMIC_SEQ_CST) |
		     __atomic_load_n(&up->main.sigpending, __ATOMIC_SEQ_CST);
	for (struct kr__sigfd *s = up->sigfds; s; s = s->next) {
		if (!s->epoll)
			continue;
		uint64_t m = __atomic_load_n(&s->mask, __ATOMIC_RELAXED);
		int want = !!(p & m);
		uint64_t v = 1;
		if (want && (!s->ready || (fresh & m)))
			(void)!write(s->efd, &v, sizeof v);
		else if (!want && s->ready)
			(void)!read(s->efd, &v, sizeof v);
		s->ready = want;
	}
}

void kr__sigfd_free(struct kr__sigfd *s)
{
	kr__spin_lock(&bind_lock);
	struct kr_uproc *up = s->up;
	if (up) {
		kr__spin_lock(&up->siglock);
		struct kr__sigfd **pp = &up->sigfds;
		while (*pp != s)
			pp = &(*pp)->next;
		*pp = s->next;
		kr__spin_unlock(&up->siglock);
	}
	kr__spin_unlock(&bind_lock);
	free(s);
}

void kr__sigfd_unbind_all(struct kr_uproc *up)
{
	kr__spin_lock(&bind_lock);
	kr__spin_lock(&up->siglock);
	for (struct kr__sigfd *s = up->sigfds; s; s = s->next)
		s->up = NULL;
	up->sigfds = NULL;
	kr__spin_unlock(&up->siglock);
	kr__spin_unlock(&bind_lock);
}

/* Its mask becomes m (an epoll set's: `epoll`, the mask as it was); up,
 * when it has none yet, the μprocess it shows. */
static void set_mask(struct kr__sigfd *s, uint64_t m, struct kr_uproc *up, int epoll)
{
	kr__spin_lock(&bind_lock);
	if (!s->up && up) {
		s->up = up;
		kr__spin_lock(&up->siglock);
		s->next = up->sigfds;
		up->sigfds = s;
		kr__spin_unlock(&up->siglock);
	}
	if (s->up)
		kr__spin_lock(&s->up->siglock);
	__atomic_store_n(&s->mask, m, __ATOMIC_RELAXED);
	s->epoll |= epoll;
	if (s->up) {
		kr__sigfd_sync(s->up, 0);
		kr__spin_unlock(&s->up->siglock);
	}
	kr__spin_unlock(&bind_lock);
}

void kr__sigfd_epoll(struct kr__ufile *f)
{
	set_mask(f->sigfd, __atomic_load_n(&f->sigfd->mask, __ATOMIC_RELAXED), NULL, 1);
}

int kr__sigfd_ready(const struct kr__ufile *f)
{
	struct kr__uthr *t = kr__uthr_self();
	uint64_t p = __atomic_load_n(&t->sigpending, __ATOMIC_SEQ_CST) |
		     __atomic_load_n(&t->up->sigpending, __ATOMIC_SEQ_CST);
	return !!(p & __atomic_load_n(&f->sigfd->mask, __ATOMIC_RELAXED));
}

int kr__sigfd_kernel(const struct kr__ufile *f)
{
	uint64_t m = __atomic_load_n(&f->sigfd->mask, __ATOMIC_RELAXED);
	return (int)syscall(SYS_signalfd4, -1, &m, sizeof m, SFD_CLOEXEC);
}

/* signalfd, signalfd4 */
long kr__sys_signalfd(struct kr_uproc *up, long nr, long a[6])
{
	long flags = nr == SYS_signalfd4 ? a[3] : 0;
	uint64_t m;
	if (a[2] != sizeof m)
		return -EINVAL;
	if (GET(m, a[1]))
		return -EFAULT;
	if (flags & ~(long)(SFD_CLOEXEC | SFD_NONBLOCK))
		return -EINVAL;
	m &= ~KR__UNBLOCKABLE;
	if ((int)a[0] != -1) { /* a new mask */
		FILE_OR(up, (int)a[0], EBADF);
		if (f->kind != UF_HOST || f->own != KR__OWN_SIGFD)
			return -EINVAL;
		set_mask(f->sigfd, m, NULL, 0);
		return (int)a[0];
	}
	struct kr__sigfd *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0) {
		free(s);
		return -errno;
	}
	struct kr__ufile *f =
		kr__ufile_host(s->efd, O_RDWR | (flags & SFD_NONBLOCK ? O_NONBLOCK : 0));
	if (!f) {
		free(s);
		return -ENOMEM;
	}
	f->own = KR__OWN_SIGFD;
	f->waits = 1;
	f->sigfd = s;
	set_mask(s, m, up, 0);
	return kr__fd_install(&up->fds, f, 0, !!(flags & SFD_CLOEXEC));
}

/* The kernel's signalfd_copyinfo: what a siginfo's layout (its si_code)
 * says. */
static void to_ssi(const siginfo_t *si, struct signalfd_siginfo *o)
{
	int c = si->si_code, sig = si->si_signo;
	memset(o, 0, sizeof *o);
	o->ssi_signo = (uint32_t)sig;
	o->ssi_errno = si->si_errno;
	o->ssi_code = c;
	if (c > SI_USER && c < SI_KERNEL && sig == SIGCHLD) {
		o->ssi_pid = (uint32_t)si->si_pid;
		o->ssi_uid = si->si_uid;
		o->ssi_status = si->si_status;
	} else if (c > SI_USER && c < SI_KERNEL) { /* a fault's */
		o->ssi_addr = (uint64_t)(uintptr_t)si->si_addr;
	} else if (c == SI_TIMER) {
		o->ssi_tid = (uint32_t)si->si_timerid;
		o->ssi_overrun = (uint32_t)si->si_overrun;
		o->ssi_ptr = (uint64_t)(uintptr_t)si->si_ptr;
		o->ssi_int = si->si_int;
	} else if (c < 0) { /* tkill, sigqueue and the like */
		o->ssi_pid = (uint32_t)si->si_pid;
		o->ssi_uid = si->si_uid;
		o->ssi_ptr = (uint64_t)(uintptr_t)si->si_ptr;
		o->ssi_int = si->si_int;
	} else { /* kill, the kernel's */
		o->ssi_pid = (uint32_t)si->si_pid;
		o->ssi_uid = si->si_uid;
	}
}

/* A signal of the mask taken, waiting for one unless `nonblock`: its
 * number, -EAGAIN or -EINTR. */
static int take(struct kr__uthr *t, struct kr__sigfd *s, int nonblock, siginfo_t *si)
{
	int sig;
	for (;;) {
		uint64_t m = __atomic_load_n(&s->mask, __ATOMIC_RELAXED);
		__atomic_store_n(&t->waitset, nonblock ? 0 : m, __ATOMIC_SEQ_CST);
		if ((sig = kr__sig_take(t, m, si)) || nonblock || kr__sig_intr())
			break;
		kr_mp_park_cancellable_until(KR_FOREVER);
	}
	__atomic_store_n(&t->waitset, 0, __ATOMIC_SEQ_CST);
	return sig ? sig : nonblock ? -EAGAIN : -EINTR;
}

long kr__sigfd_read(struct kr_uproc *up, struct kr__ufile *f, void *buf, size_t len)
{
	struct kr__uthr *t = kr__uthr_self();
	size_t n = len / sizeof(struct signalfd_siginfo), got = 0;
	if (!n)
		return -EINVAL;
	for (; got < n; got++) {
		siginfo_t si;
		int r = take(t, f->sigfd, got || (f->flags & O_NONBLOCK), &si);
		if (r < 0)
			return got ? (long)(got * sizeof(struct signalfd_siginfo)) : r;
		struct signalfd_siginfo o;
		to_ssi(&si, &o);
		if (kr__ucopy((char *)buf + got * sizeof o, &o, sizeof o))
			return got ? (long)(got * sizeof o) : -EFAULT;
	}
	return (long)(got * sizeof(struct signalfd_siginfo));
}
