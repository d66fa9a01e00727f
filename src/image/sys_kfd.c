/*
 * karui image layer — a μprocess's system calls on the kernel's other
 * kinds of fd: eventfd, timerfd, memfd, inotify and epoll.
 *
 * Each is the kernel's own object, made for the μprocess as natively and
 * installed in its fd table (sys_fd.c: kr__adopt): its host fd is
 * close-on-exec, as all of karui's, and, but for a memfd (a regular
 * file), O_NONBLOCK, while what the μprocess asked (EFD_CLOEXEC,
 * EFD_NONBLOCK, ...) is its fd's close-on-exec bit and its open file's
 * O_NONBLOCK.  A read that would wait (an eventfd at 0, a timerfd not yet
 * expired, an inotify queue empty) then parks its microprocess alone
 * until the host fd is readable, and an epoll_wait waits for its epoll
 * fd to be (sys_fd.c: kr__fd_wait); kr_uproc_kill ends either wait.
 *
 * The μprocess's epoll set holds the host fds of its own fds, which
 * epoll_ctl translates, with their data as it gave it.  A karui pipe
 * has no host fd, so no epoll set can hold one: EPERM, as the kernel says
 * of a file it cannot poll.  Two fds of one open file (dup) name one host
 * fd, which a set holds once (EEXIST for the second).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

/* eventfd, eventfd2 */
long kr__sys_eventfd(struct kr_uproc *up, long nr, long a[6])
{
	long flags = nr == SYS_eventfd2 ? a[1] : 0;
	long r = kr__pass(SYS_eventfd2, (long[6]){a[0], flags | EFD_CLOEXEC | EFD_NONBLOCK});
	return kr__adopt(up, r, O_RDWR | (flags & EFD_NONBLOCK ? O_NONBLOCK : 0),
			 !!(flags & EFD_CLOEXEC), KR__OWN);
}

long kr__sys_timerfd_create(struct kr_uproc *up, long nr, long a[6])
{
	long r = kr__pass(nr, (long[6]){a[0], a[1] | TFD_CLOEXEC | TFD_NONBLOCK});
	return kr__adopt(up, r, O_RDWR | (a[1] & TFD_NONBLOCK ? O_NONBLOCK : 0),
			 !!(a[1] & TFD_CLOEXEC), KR__OWN);
}

/* a regular file: read and written at once, mapped as any other */
long kr__sys_memfd_create(struct kr_uproc *up, long nr, long a[6])
{
	long r = kr__pass(nr, (long[6]){a[0], a[1] | MFD_CLOEXEC});
	return kr__adopt(up, r, O_RDWR, !!(a[1] & MFD_CLOEXEC), 0);
}

/* inotify_init, inotify_init1 */
long kr__sys_inotify_init(struct kr_uproc *up, long nr, long a[6])
{
	long flags = nr == SYS_inotify_init1 ? a[0] : 0;
	long r = kr__pass(SYS_inotify_init1, (long[6]){flags | IN_CLOEXEC | IN_NONBLOCK});
	return kr__adopt(up, r, O_RDONLY | (flags & IN_NONBLOCK ? O_NONBLOCK : 0),
			 !!(flags & IN_CLOEXEC), KR__OWN);
}

/* Its path against the μprocess's working directory: the call has no
 * *at form (sys_fd.c: kr__cwd_path). */
long kr__sys_inotify_add_watch(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -EINVAL; /* no inotify fd */
	char path[KR__CWD_PATH_MAX];
	long r = kr__cwd_path(up, (const char *)a[1], path);
	if (r < 0)
		return r;
	return kr__pass(nr, (long[6]){f->hostfd, (long)path, a[2]});
}

/* timerfd_settime, timerfd_gettime, inotify_rm_watch: on the host fd (a
 * karui pipe is none of these: EINVAL, as the kernel says) */
long kr__sys_on_kfd(struct kr_uproc *up, long nr, long a[6])
{
	return kr__with_fd(up, nr, a, 0, -EINVAL);
}

/* epoll_create, epoll_create1 */
long kr__sys_epoll_create(struct kr_uproc *up, long nr, long a[6])
{
	long flags = nr == SYS_epoll_create1 ? a[0] : 0;
	if (nr == SYS_epoll_create ? (int)a[0] <= 0 : (flags & ~(long)EPOLL_CLOEXEC) != 0)
		return -EINVAL;
	long r = kr__pass(SYS_epoll_create1, (long[6]){EPOLL_CLOEXEC});
	if (r >= 0 && fcntl((int)r, F_SETFL, O_NONBLOCK)) { /* as every fd karui makes for it */
		int e = errno;
		close((int)r);
		r = -e;
	}
	return kr__adopt(up, r, O_RDWR, !!(flags & EPOLL_CLOEXEC), KR__OWN);
}

long kr__sys_epoll_ctl(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	struct kr__ufile *t = kr__fd_get(&up->fds, (int)a[2]);
	if (!t)
		return -EBADF;
	if (t->kind != UF_HOST)
		return -EPERM; /* a karui pipe: no host fd to poll */
	if (f->kind != UF_HOST)
		return -EINVAL; /* no epoll fd */
	if (t->own == KR__OWN_SIGFD && (a[1] == EPOLL_CTL_ADD || a[1] == EPOLL_CTL_MOD)) {
		/* a signalfd is never writable: its eventfd's EPOLLOUT is not asked */
		struct epoll_event ev;
		if (GET(ev, a[3]))
			return -EFAULT;
		ev.events &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);
		kr__sigfd_epoll(t);
		return kr__pass(nr, (long[6]){f->hostfd, a[1], t->hostfd, (long)&ev});
	}
	return kr__pass(nr, (long[6]){f->hostfd, a[1], t->hostfd, a[3]});
}

/* epoll_wait, epoll_pwait, epoll_pwait2: the kernel's epoll_wait without
 * a wait, and again each time the epoll fd is readable, until it reports
 * something or the timeout passes.  The kernel writes the events where the
 * μprocess said.  epoll_pwait's signal mask is the μprocess's for the
 * time of the call, and for the handler of a signal it lets through. */
long kr__sys_epoll_wait(struct kr_uproc *up, long nr, long a[6])
{
	uint64_t deadline = KR_FOREVER;
	if (nr == SYS_epoll_pwait2) {
		struct timespec t;
		if (a[3] && GET(t, a[3]))
			return -EFAULT;
		if (a[3] && (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000))
			return -EINVAL;
		if (a[3])
			deadline = kr_now() + (uint64_t)(t.tv_sec > SLEEP_MAX_S ? SLEEP_MAX_S : t.tv_sec) *
						      1000000000u + (uint64_t)t.tv_nsec;
	} else if ((int)a[3] >= 0) {
		deadline = kr_now() + (uint64_t)(int)a[3] * 1000000u;
	}
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -EINVAL; /* no epoll fd */
	uint64_t saved;
	long r = nr == SYS_epoll_wait ? kr__sigmask_push(up, 0, 0, &saved)
				      : kr__sigmask_push(up, a[4], a[5], &saved);
	if (r)
		return r;
	for (;;) {
		if (kr__sig_intr()) {
			r = -EINTR; /* a signal its mask let through */
			break;
		}
		r = kr__pass(SYS_epoll_wait, (long[6]){f->hostfd, a[1], a[2], 0});
		if (r || kr_now() >= deadline)
			break;
		r = kr__fd_wait(up, f, POLLIN, deadline);
		if (r) {
			r = r == -ETIMEDOUT ? 0 : r;
			break;
		}
	}
	kr__sigmask_pop(up, saved);
	return r;
}
