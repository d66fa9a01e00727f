/*
 * karui image layer — a μprocess's system calls on its files: its fds,
 * the paths it names, its working directory and umask, poll, and pipes.
 *
 * Every fd a μprocess passes is looked up in its own table (fd.c), and a
 * call on a host file is made on karui's host fd for it; a karui pipe has
 * no host fd, and the calls that can serve one do so from its stream.  A
 * relative path and AT_FDCWD are resolved against its working directory,
 * which karui keeps as a host fd (and its path, for getcwd): the path
 * calls become their *at forms with that fd, so the host's own working
 * directory never matters.  New host fds are O_CLOEXEC, for the host's
 * sake; what the μprocess sees of their flags is kept in its open file.
 *
 * A read or write that would wait parks only the μprocess's microprocess:
 * a karui pipe's through its stream, a host pipe's, socket's or
 * terminal's through karui's I/O or with the VP handed off (rw).  An open
 * file that karui made for the μprocess alone (a socket, an eventfd, ...:
 * sys_kfd.c, sys_net.c) has an O_NONBLOCK host fd, and the μprocess's own
 * O_NONBLOCK in its open file, which fcntl and FIONBIO report and change:
 * its calls are tried at once and again after each wait for the host fd
 * (kr__fd_wait, kr__fd_again), a wait of its microprocess alone that
 * kr_uproc_kill ends.  poll, ppoll, select and pselect6 look at the fds'
 * readiness every millisecond, parked meanwhile.
 *
 * Paths with no *at form (the xattr calls, inotify_add_watch) are made
 * absolute through the working directory's host fd (kr__cwd_path).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

/* A host fd for dirfd-taking calls: AT_FDCWD is the working directory. */
static int dirfd_of(struct kr_uproc *up, long fd, int *err)
{
	if ((int)fd == AT_FDCWD)
		return up->cwdfd;
	struct kr__ufile *f = kr__fd_get(&up->fds, (int)fd);
	if (!f) {
		*err = EBADF;
		return -1;
	}
	if (f->kind != UF_HOST) {
		*err = ENOTDIR;
		return -1;
	}
	return f->hostfd;
}

/* The call with argument i (a dirfd) made a host fd. */
static long with_dirfd(struct kr_uproc *up, long nr, long a[6], int i)
{
	int err = 0;
	long b[6];
	memcpy(b, a, sizeof b);
	b[i] = dirfd_of(up, a[i], &err);
	if (err)
		return -err;
	return kr__pass(nr, b);
}

long kr__with_fd(struct kr_uproc *up, long nr, long a[6], int i, long onpipe)
{
	FILE_OR(up, a[i], EBADF);
	if (f->kind != UF_HOST)
		return onpipe;
	long b[6];
	memcpy(b, a, sizeof b);
	b[i] = f->hostfd;
	return kr__pass(nr, b);
}

long kr__adopt(struct kr_uproc *up, long r, long flags, int cloexec, int own)
{
	if (r < 0)
		return r;
	struct kr__ufile *f =
		kr__ufile_host((int)r, (int)(flags & (O_ACCMODE | O_APPEND | O_NONBLOCK)));
	if (!f)
		return -ENOMEM;
	if (own) {
		f->own = own;
		f->waits = 1;
	}
	return kr__fd_install(&up->fds, f, 0, cloexec);
}

/* The fd that an absolute path names among the μprocess's own:
 * /dev/stdin, /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (and
 * thread-self, its pid, its task); -1 for any other path. */
static int own_fd_named(const struct kr_uproc *up, const char *path)
{
	static const char *const std[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(path, std[i]))
			return i;
	char pre[3][64];
	snprintf(pre[0], sizeof pre[0], "/proc/%d/fd/", up->pid);
	snprintf(pre[1], sizeof pre[1], "/proc/%d/task/%d/fd/", up->pid, up->pid);
	snprintf(pre[2], sizeof pre[2], "/proc/self/fd/");
	const char *n = NULL;
	if (!strncmp(path, "/dev/fd/", 8))
		n = path + 8;
	else if (!strncmp(path, "/proc/thread-self/fd/", 21))
		n = path + 21;
	for (int i = 0; i < 3 && !n; i++)
		if (!strncmp(path, pre[i], strlen(pre[i])))
			n = path + strlen(pre[i]);
	if (!n || *n < '0' || *n > '9' || strlen(n) > 4)
		return -1;
	char *end;
	long fd = strtol(n, &end, 10);
	return *end ? -1 : (int)fd;
}

/* An open of its own fd n by name: the same pipe end again, or its host
 * file opened anew, as the kernel opens /proc/self/fd/N. */
static long open_own_fd(struct kr_uproc *up, int n, long flags)
{
	FILE_OR(up, n, ENOENT);
	int cloexec = !!(flags & O_CLOEXEC);
	if (f->kind == UF_PIPE) {
		int acc = (int)(flags & O_ACCMODE);
		if (acc != (f->end == KR_UPIPE_READ ? O_RDONLY : O_WRONLY))
			return -EACCES;
		struct kr__ufile *g = kr__ufile_pipe(f->pipe, f->end);
		return g ? kr__fd_install(&up->fds, g, 0, cloexec) : -ENOMEM;
	}
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", f->hostfd);
	long r = syscall(SYS_openat, AT_FDCWD, self, flags | O_CLOEXEC, 0);
	return kr__adopt(up, r < 0 ? -errno : r, flags, cloexec, 0);
}

static long openat_(struct kr_uproc *up, long dirfd, const char *upath, long flags, long mode)
{
	char path[PATH_MAX];
	long r = kr__ustr(path, upath, sizeof path);
	if (r < 0)
		return r;
	int err = 0;
	int d = dirfd_of(up, dirfd, &err);
	if (err)
		return -err;
	if (flags & (O_CREAT | __O_TMPFILE))
		mode &= ~(long)up->umask;
	int own = path[0] == '/' ? own_fd_named(up, path) : -1;
	if (own >= 0)
		return open_own_fd(up, own, flags);
	r = path[0] == '/' ? kr__proc_open(up, path, flags) : KR__NOT_PROC;
	if (r != KR__NOT_PROC)
		return r < 0 ? r : kr__adopt(up, r, flags, !!(flags & O_CLOEXEC), 0);
	r = syscall(SYS_openat, d, path, flags | O_CLOEXEC, mode);
	if (r < 0)
		return -errno;
	return kr__adopt(up, r, flags, !!(flags & O_CLOEXEC), 0);
}

long kr__sys_open(struct kr_uproc *up, long nr, long a[6])
{
	return openat_(up, AT_FDCWD, (const char *)a[0], a[1], a[2]);
}

long kr__sys_creat(struct kr_uproc *up, long nr, long a[6])
{
	return openat_(up, AT_FDCWD, (const char *)a[0], O_CREAT | O_WRONLY | O_TRUNC, a[1]);
}

long kr__sys_openat(struct kr_uproc *up, long nr, long a[6])
{
	return openat_(up, a[0], (const char *)a[1], a[2], a[3]);
}

/* ---------------- reads and writes ---------------- */

static int is_tty(int fd)
{
	struct termios t;
	return tcgetattr(fd, &t) == 0;
}

/* The calling thread's killfd (uproc.h), made now if it has none; -1 if
 * no eventfd can be had (the wait is then one kr_uproc_kill cannot end). */
static int kill_fd(void)
{
	struct kr__uthr *t = kr__uthr_self();
	int k = __atomic_load_n(&t->killfd, __ATOMIC_ACQUIRE);
	if (k < 0 && (k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0)
		__atomic_store_n(&t->killfd, k, __ATOMIC_SEQ_CST);
	return k;
}

void kr__disown(struct kr__ufile *f)
{
	int fl = fcntl(f->hostfd, F_GETFL);
	if (fl >= 0)
		fcntl(f->hostfd, F_SETFL, (fl & ~O_NONBLOCK) | (f->flags & O_NONBLOCK));
	f->own = 0;
}

long kr__fd_wait(struct kr_uproc *up, struct kr__ufile *f, short events, uint64_t deadline)
{
	if (f->own || (kr_io_features() & KR_IO_KEEPS_FD_FLAGS)) {
		short rev;
		int e = kr_poll_until(f->hostfd, events, &rev, deadline);
		kr__iso_here(); /* its buffer goes to the kernel next (iso.c) */
		return e == ECANCELED ? -EINTR : -e;
	}
	/* a host file it may share, on the epoll back end: not karui's I/O,
	 * which would make it O_NONBLOCK (rw) */
	int k = kill_fd();
	if (kr__sig_intr())
		return -EINTR;
	struct pollfd pf[2] = {{.fd = f->hostfd, .events = events}, {.fd = k, .events = POLLIN}};
	int n;
	kr_blocking_begin();
	do {
		uint64_t now = kr_now();
		long ms = deadline == KR_FOREVER ? -1
			  : deadline > now	 ? (long)((deadline - now + 999999) / 1000000)
						 : 0;
		n = poll(pf, k >= 0 ? 2 : 1, (int)(ms > INT_MAX ? INT_MAX : ms));
	} while ((n < 0 && errno == EINTR) || (n == 0 && kr_now() < deadline));
	kr_blocking_end();
	kr__iso_here();
	if (n > 0 && k >= 0 && pf[1].revents)
		return -EINTR;
	return n < 0 ? -errno : n ? 0 : -ETIMEDOUT;
}

uint64_t kr__sock_deadline(int fd, int send)
{
	struct timeval tv;
	socklen_t l = sizeof tv;
	if (getsockopt(fd, SOL_SOCKET, send ? SO_SNDTIMEO : SO_RCVTIMEO, &tv, &l) ||
	    (!tv.tv_sec && !tv.tv_usec))
		return KR_FOREVER;
	return kr_now() + (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

long kr__fd_again(struct kr_uproc *up, struct kr__ufile *f, short events, int dontwait,
		  uint64_t *deadline)
{
	if (dontwait || (f->flags & O_NONBLOCK))
		return -EAGAIN;
	if (!*deadline)
		*deadline = kr__sock_deadline(f->hostfd, events & POLLOUT);
	long w = kr__fd_wait(up, f, events, *deadline);
	return w == -ETIMEDOUT ? -EAGAIN : w;
}

/* A read or write of an open file karui made for the μprocess alone
 * (eventfd, timerfd, inotify; sockets: sys_net.c; signalfd:
 * sys_sigfd.c): tried at once on the
 * O_NONBLOCK host fd, and again after each wait for it. */
static long own_rw(struct kr_uproc *up, struct kr__ufile *f, void *buf, size_t len, int write)
{
	if (f->own == KR__OWN_SOCK)
		return kr__sock_rw(up, f, buf, len, write);
	if (f->own == KR__OWN_SIGFD) /* no write, as the kernel's */
		return write ? -EINVAL : kr__sigfd_read(up, f, buf, len);
	uint64_t deadline = 0;
	long r;
	do
		r = write ? kr__pass(SYS_write, (long[6]){f->hostfd, (long)buf, (long)len})
			  : kr__pass(SYS_read, (long[6]){f->hostfd, (long)buf, (long)len});
	while (r == -EAGAIN && !(r = kr__fd_again(up, f, write ? POLLOUT : POLLIN, 0, &deadline)));
	return r;
}

/* One read or write that may wait, on a pipe or through karui's I/O: a
 * count or -errno. */
static long wait_rw(struct kr__ufile *f, void *buf, size_t len, int write)
{
	if (f->kind == UF_PIPE)
		return kr__upipe_rw(f->pipe, write, buf, len);
	size_t n = 0;
	int e = write ? kr_write(f->hostfd, buf, len, &n) : kr_read(f->hostfd, buf, len, &n);
	return e && n == 0 ? -e : (long)n;
}

/* The same for an isolated μprocess (iso.c), whose memory nobody may write
 * or read while it waits (a pipe's other side, io_uring): through its
 * thread's bounce buffer, copied on its own microprocess.  A write goes
 * in pieces of the buffer's size, each whole before the next. */
static long bounced_rw(struct kr__ufile *f, char *buf, size_t len, int write)
{
	char *b = kr__iso_bounce(kr__uthr_self());
	if (!b)
		return -ENOMEM;
	size_t done = 0;
	do {
		size_t n = len - done < KR__PIPE_CAP ? len - done : KR__PIPE_CAP;
		if (write && kr__ucopy(b, buf + done, n))
			return done ? (long)done : -EFAULT;
		long r = wait_rw(f, b, n, write);
		kr__iso_here();
		if (r <= 0)
			return done ? (long)done : r;
		if (!write)
			return kr__ucopy(buf, b, (size_t)r) ? -EFAULT : r;
		done += (size_t)r;
		if ((size_t)r < n)
			break;
	} while (done < len);
	return (long)done;
}

static long rw(struct kr_uproc *up, long fd, void *buf, size_t len, int write)
{
	FILE_OR(up, fd, EBADF);
	int iso = __atomic_load_n(&kr__mm(up)->iso_on, __ATOMIC_RELAXED);
	if (f->kind == UF_PIPE) {
		if (f->end != (write ? KR_UPIPE_WRITE : KR_UPIPE_READ))
			return -EBADF;
		if (kr__upipe_probe(kr__mm(up), buf, len, write))
			return -EFAULT;
		long r = iso ? bounced_rw(f, buf, len, write) : wait_rw(f, buf, len, write);
		if (r == -EPIPE)
			kr__uproc_signal(SIGPIPE);
		return r;
	}
	long r;
	if (f->own) {
		r = own_rw(up, f, buf, len, write);
	} else if (kr__ufile_waits(f) && !(f->flags & O_NONBLOCK)) {
		if (is_tty(f->hostfd) || !(kr_io_features() & KR_IO_KEEPS_FD_FLAGS)) {
			/* no O_NONBLOCK on a terminal, or on a pipe or socket whose open
			 * file others may share: karui's epoll back end would set it.
			 * A read waits in poll first, beside the killfd, so that
			 * kr_uproc_kill can end the wait. */
			int k = write ? -1 : kill_fd();
			if (kr__sig_intr())
				return -EINTR;
			struct pollfd pf[2] = {{.fd = f->hostfd, .events = POLLIN}, {.fd = k, .events = POLLIN}};
			kr_blocking_begin();
			while (k >= 0 && poll(pf, 2, -1) < 0 && errno == EINTR)
				;
			if (pf[1].revents) {
				r = -EINTR;
			} else {
				r = write ? syscall(SYS_write, f->hostfd, buf, len)
					  : syscall(SYS_read, f->hostfd, buf, len);
				r = r < 0 ? -errno : r;
			}
			kr_blocking_end();
		} else {
			r = iso ? bounced_rw(f, buf, len, write) : wait_rw(f, buf, len, write);
		}
	} else {
		r = write ? syscall(SYS_write, f->hostfd, buf, len)
			  : syscall(SYS_read, f->hostfd, buf, len);
		r = r < 0 ? -errno : r;
	}
	if (r == -EPIPE)
		kr__uproc_signal(SIGPIPE);
	return r;
}

long kr__sys_rw(struct kr_uproc *up, long nr, long a[6])
{
	return rw(up, a[0], (void *)a[1], (size_t)a[2], nr == SYS_write);
}

long kr__sys_rwv(struct kr_uproc *up, long nr, long a[6])
{
	const struct iovec *iov = (const struct iovec *)a[1];
	long cnt = a[2];
	if (cnt < 0 || cnt > 1024)
		return -EINVAL;
	struct kr__ufile *f = kr__fd_get(&up->fds, (int)a[0]);
	if (f && f->own == KR__OWN_SOCK) { /* one call, as the kernel's, waiting once */
		long r = kr__sock_rwv(up, f, iov, cnt, nr == SYS_writev);
		if (r == -EPIPE)
			kr__uproc_signal(SIGPIPE);
		return r;
	}
	long total = 0;
	for (long i = 0; i < cnt; i++) {
		struct iovec v;
		long r = GET(v, &iov[i]);
		if (!r && !v.iov_len)
			continue;
		if (!r)
			r = rw(up, a[0], v.iov_base, v.iov_len, nr == SYS_writev);
		if (r < 0)
			return total ? total : r;
		total += r;
		if ((size_t)r < v.iov_len)
			break;
	}
	return total;
}

/* pread64, lseek and the like: a pipe cannot seek. */
long kr__sys_seekable(struct kr_uproc *up, long nr, long a[6])
{
	return kr__with_fd(up, nr, a, 0, -ESPIPE);
}

/* fsync, getdents64 and the like: nothing a pipe can do (fadvise64:
 * ESPIPE, as the kernel says for a pipe). */
long kr__sys_on_fd(struct kr_uproc *up, long nr, long a[6])
{
	return kr__with_fd(up, nr, a, 0, nr == SYS_fadvise64 ? -ESPIPE : -EINVAL);
}

/* ---------------- the fd table ---------------- */

long kr__sys_close(struct kr_uproc *up, long nr, long a[6])
{
	return kr__fd_close(&up->fds, (int)a[0]);
}

long kr__sys_close_range(struct kr_uproc *up, long nr, long a[6])
{
	kr__fd_close_range(&up->fds, a[0], a[1]);
	return 0;
}

long kr__sys_dup(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	return kr__fd_install(&up->fds, f, 0, 0);
}

static long dup3_(struct kr_uproc *up, long oldfd, long newfd, long flags, int dup2)
{
	FILE_OR(up, oldfd, EBADF);
	if (newfd < 0 || newfd >= KR_UFD_MAX)
		return -EBADF;
	if (oldfd == newfd)
		return dup2 ? newfd : -EINVAL;
	if (flags & ~O_CLOEXEC)
		return -EINVAL;
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	int e = kr__fd_set(&up->fds, (int)newfd, f, !!(flags & O_CLOEXEC));
	if (e) {
		kr__ufile_put(f);
		return e;
	}
	return newfd;
}

long kr__sys_dup2(struct kr_uproc *up, long nr, long a[6])
{
	return dup3_(up, a[0], a[1], 0, 1);
}

long kr__sys_dup3(struct kr_uproc *up, long nr, long a[6])
{
	return dup3_(up, a[0], a[1], a[2], 0);
}

long kr__sys_fcntl(struct kr_uproc *up, long nr, long a[6])
{
	long fd = a[0], cmd = a[1], arg = a[2];
	FILE_OR(up, fd, EBADF);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (arg < 0 || arg >= KR_UFD_MAX)
			return -EINVAL;
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
		return kr__fd_install(&up->fds, f, (int)arg, cmd == F_DUPFD_CLOEXEC);
	case F_GETFD:
		return kr__fd_cloexec(&up->fds, (int)fd) ? FD_CLOEXEC : 0;
	case F_SETFD:
		kr__fd_set_cloexec(&up->fds, (int)fd, !!(arg & FD_CLOEXEC));
		return 0;
	case F_GETFL:
		if (f->kind == UF_HOST) {
			long r = fcntl(f->hostfd, F_GETFL);
			if (r >= 0 && f->own)
				r = (r & ~O_NONBLOCK) | (f->flags & O_NONBLOCK);
			return r < 0 ? -errno : r;
		}
		return f->flags;
	case F_SETFL:
		if (f->kind == UF_HOST &&
		    fcntl(f->hostfd, F_SETFL, f->own ? arg | O_NONBLOCK : arg) < 0)
			return -errno; /* (its flags as they were) */
		f->flags = (f->flags & O_ACCMODE) | (arg & (O_APPEND | O_NONBLOCK));
		return 0;
	default:
		if (f->kind != UF_HOST)
			return -EINVAL;
		{
			long b[6] = {f->hostfd, cmd, arg};
			return kr__pass(SYS_fcntl, b);
		}
	}
}

static long pipe2_(struct kr_uproc *up, int *fds, long flags)
{
	if (flags & ~(O_CLOEXEC | O_NONBLOCK | O_DIRECT))
		return -EINVAL;
	kr_upipe *p;
	int e = kr_upipe_create(&p);
	if (e)
		return -e;
	struct kr__ufile *r = kr__ufile_pipe(p, KR_UPIPE_READ);
	struct kr__ufile *w = r ? kr__ufile_pipe(p, KR_UPIPE_WRITE) : NULL;
	kr_upipe_close(p, KR_UPIPE_READ);
	kr_upipe_close(p, KR_UPIPE_WRITE);
	if (!w) {
		if (r)
			kr__ufile_put(r);
		return -ENOMEM;
	}
	int cloexec = !!(flags & O_CLOEXEC);
	int rfd = kr__fd_install(&up->fds, r, 0, cloexec);
	if (rfd < 0) {
		kr__ufile_put(w);
		return rfd;
	}
	int wfd = kr__fd_install(&up->fds, w, 0, cloexec);
	if (wfd < 0) {
		kr__fd_close(&up->fds, rfd);
		return wfd;
	}
	int pair[2] = {rfd, wfd};
	if (PUT(fds, pair)) {
		kr__fd_close(&up->fds, rfd);
		kr__fd_close(&up->fds, wfd);
		return -EFAULT;
	}
	return 0;
}

long kr__sys_pipe(struct kr_uproc *up, long nr, long a[6])
{
	return pipe2_(up, (int *)a[0], 0);
}

long kr__sys_pipe2(struct kr_uproc *up, long nr, long a[6])
{
	return pipe2_(up, (int *)a[0], a[1]);
}

/* ---------------- what an fd is ---------------- */

/* fstat of a karui pipe, into the μprocess's *ust */
static long pipe_stat(struct stat *ust)
{
	struct stat st = {
		.st_mode = S_IFIFO | 0600,
		.st_nlink = 1,
		.st_uid = getuid(),
		.st_gid = getgid(),
		.st_blksize = 4096,
	};
	return PUT(ust, st);
}

/* The path at u is "" (or NULL), for AT_EMPTY_PATH: 1, 0 or -EFAULT. */
static long empty_path(long u)
{
	char c = 0;
	long r = u ? kr__ucopy(&c, (const void *)u, 1) : 0;
	return r ? r : !c;
}

long kr__sys_fstat(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind == UF_PIPE)
		return pipe_stat((struct stat *)a[1]);
	return kr__with_fd(up, nr, a, 0, -EBADF);
}

long kr__sys_newfstatat(struct kr_uproc *up, long nr, long a[6])
{
	long r;
	if ((a[3] & AT_EMPTY_PATH) && (r = empty_path(a[1]))) {
		if (r < 0)
			return r;
		FILE_OR(up, a[0], EBADF);
		if (f->kind == UF_PIPE)
			return pipe_stat((struct stat *)a[2]);
	}
	return with_dirfd(up, nr, a, 0);
}

long kr__sys_statx(struct kr_uproc *up, long nr, long a[6])
{
	long r;
	if ((a[2] & AT_EMPTY_PATH) && (r = empty_path(a[1]))) {
		if (r < 0)
			return r;
		FILE_OR(up, a[0], EBADF);
		if (f->kind == UF_PIPE)
			return -ENOSYS; /* glibc falls back to fstat */
	}
	return with_dirfd(up, nr, a, 0);
}

long kr__sys_ioctl(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind == UF_PIPE) {
		if (a[1] == FIONREAD && f->end == KR_UPIPE_READ) {
			size_t buffered;
			kr__upipe_state(f->pipe, &buffered, NULL, NULL);
			int n = (int)buffered;
			return PUT(a[2], n);
		}
		return -ENOTTY;
	}
	if (f->own && a[1] == FIONBIO) { /* its own O_NONBLOCK, as F_SETFL */
		int on;
		if (GET(on, a[2]))
			return -EFAULT;
		f->flags = on ? f->flags | O_NONBLOCK : f->flags & ~O_NONBLOCK;
		return 0;
	}
	/* requests that name another fd: its number is the μprocess's, never
	 * the host's */
	if (a[1] == FICLONE) {
		struct kr__ufile *src = kr__fd_get(&up->fds, (int)a[2]);
		if (!src || src->kind != UF_HOST)
			return -EBADF;
		long b[6] = {f->hostfd, FICLONE, src->hostfd};
		return kr__pass(SYS_ioctl, b);
	}
	if (a[1] == FICLONERANGE) {
		struct file_clone_range r;
		if (GET(r, a[2]))
			return -EFAULT;
		struct kr__ufile *src = kr__fd_get(&up->fds, (int)r.src_fd);
		if (!src || src->kind != UF_HOST || r.src_fd < 0 || r.src_fd > INT_MAX)
			return -EBADF;
		r.src_fd = src->hostfd;
		return ioctl(f->hostfd, FICLONERANGE, &r) < 0 ? -errno : 0;
	}
	if (a[1] == FIDEDUPERANGE)
		return -EOPNOTSUPP; /* its destinations are fds of the host's numbering */
	return kr__with_fd(up, nr, a, 0, -ENOTTY);
}

/* ---------------- poll ---------------- */

/* Readiness of the μprocess's fds without waiting. */
static int poll_now(struct kr_uproc *up, struct pollfd *p, unsigned long n)
{
	int ready = 0;
	for (unsigned long i = 0; i < n; i++) {
		p[i].revents = 0;
		if (p[i].fd < 0)
			continue;
		struct kr__ufile *f = kr__fd_get(&up->fds, p[i].fd);
		if (!f) {
			p[i].revents = POLLNVAL;
		} else if (f->kind == UF_PIPE) {
			size_t buffered, room;
			unsigned closed;
			kr__upipe_state(f->pipe, &buffered, &room, &closed);
			if (f->end == KR_UPIPE_READ)
				p[i].revents = (buffered ? POLLIN : 0) |
					       (closed & KR_STREAM_WCLOSED ? POLLHUP : 0);
			else
				p[i].revents = closed & KR_STREAM_RCLOSED ? POLLERR
									  : (room ? POLLOUT : 0);
			p[i].revents &= (short)(p[i].events | POLLHUP | POLLERR);
		} else if (f->own == KR__OWN_SIGFD) { /* the calling thread's signals */
			p[i].revents = kr__sigfd_ready(f) ? p[i].events & POLLIN : 0;
		} else {
			struct pollfd h = {.fd = f->hostfd, .events = p[i].events};
			if (poll(&h, 1, 0) > 0)
				p[i].revents = h.revents;
		}
		kr__fd_done(f);
		ready += p[i].revents != 0;
	}
	return ready;
}

/* Waits by looking again every millisecond: simple, and no busy VP.  On
 * a copy of the μprocess's array, whose revents it gets at the end. */
static long poll_(struct kr_uproc *up, struct pollfd *up_p, unsigned long n, long ms)
{
	if (n > KR_UFD_MAX)
		return -EINVAL;
	struct pollfd few[16], *p = n <= 16 ? few : malloc(n * sizeof *p);
	if (!p)
		return -ENOMEM;
	long r = kr__ucopy(p, up_p, n * sizeof *p);
	uint64_t end = ms < 0 ? KR_FOREVER : kr_now() + (uint64_t)ms * 1000000u;
	while (!r && !(r = poll_now(up, p, n)) && kr_now() < end)
		if (kr_mp_sleep_for(1000000) == ECANCELED)
			r = -EINTR;
	if (r >= 0 && kr__ucopy(up_p, p, n * sizeof *p))
		r = -EFAULT;
	if (p != few)
		free(p);
	return r;
}

long kr__sys_poll(struct kr_uproc *up, long nr, long a[6])
{
	return poll_(up, (struct pollfd *)a[0], (unsigned long)a[1], a[2]);
}

long kr__sys_ppoll(struct kr_uproc *up, long nr, long a[6])
{
	struct timespec t;
	if (a[2] && GET(t, a[2]))
		return -EFAULT;
	if (a[2] && (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000))
		return -EINVAL;
	if (a[2] && t.tv_sec > SLEEP_MAX_S)
		t.tv_sec = SLEEP_MAX_S;
	long ms = a[2] ? t.tv_sec * 1000 + (t.tv_nsec + 999999) / 1000000 : -1;
	uint64_t saved;
	long r = kr__sigmask_push(up, a[3], a[4], &saved);
	if (r)
		return r;
	r = kr__sig_intr()
		    ? -EINTR /* a signal its mask let through */
		    : poll_(up, (struct pollfd *)a[0], (unsigned long)a[1], ms);
	kr__sigmask_pop(up, saved);
	return r;
}

/* select and pselect6: the sets made a poll array, its events as the
 * kernel maps them; a wait looks again every millisecond, as poll's */
#define SEL_IN (POLLRDNORM | POLLRDBAND | POLLIN | POLLHUP | POLLERR)
#define SEL_OUT (POLLWRBAND | POLLWRNORM | POLLOUT | POLLERR)
#define SEL_EX POLLPRI

static long select_(struct kr_uproc *up, long nfds, const long uset[3], uint64_t end)
{
	static const short ev[3] = {SEL_IN, SEL_OUT, SEL_EX};
	if ((int)nfds < 0)
		return -EINVAL;
	int n = (int)nfds < KR_UFD_MAX ? (int)nfds : KR_UFD_MAX;
	uint64_t set[3][KR_UFD_MAX / 64] = {{0}};
	size_t bytes = ((size_t)n + 63) / 64 * 8; /* the kernel reads whole longs */
	for (int k = 0; k < 3; k++)
		if (uset[k] && kr__ucopy(set[k], (const void *)uset[k], bytes))
			return -EFAULT;
	struct pollfd *p = malloc((size_t)(n ? n : 1) * sizeof *p);
	if (!p)
		return -ENOMEM;
	unsigned long m = 0;
	for (int fd = 0; fd < n; fd++) {
		short e = 0;
		for (int k = 0; k < 3; k++)
			e |= set[k][fd / 64] >> (fd % 64) & 1 ? ev[k] : 0;
		if (e)
			p[m++] = (struct pollfd){.fd = fd, .events = e};
	}
	long r = 0;
	for (;;) {
		if (poll_now(up, p, m)) {
			for (unsigned long i = 0; i < m && !r; i++)
				if (p[i].revents & POLLNVAL)
					r = -EBADF;
			for (unsigned long i = 0; i < m && r >= 0; i++)
				for (int k = 0; k < 3; k++)
					r += (p[i].events & ev[k] & p[i].revents) != 0;
		}
		if (r || kr_now() >= end)
			break;
		if (kr_mp_sleep_for(1000000) == ECANCELED) {
			r = -EINTR;
			break;
		}
	}
	if (r >= 0) {
		memset(set, 0, sizeof set);
		for (unsigned long i = 0; i < m; i++)
			for (int k = 0; k < 3; k++)
				if (p[i].events & ev[k] & p[i].revents)
					set[k][p[i].fd / 64] |= (uint64_t)1 << (p[i].fd % 64);
		for (int k = 0; k < 3; k++)
			if (uset[k] && kr__ucopy((void *)uset[k], set[k], bytes))
				r = -EFAULT;
	}
	free(p);
	return r;
}

/* What is left of a timeout that ends at `end`, in ns. */
static uint64_t left(uint64_t end)
{
	uint64_t now = kr_now();
	return end > now ? end - now : 0;
}

/* The kernel writes back what is left of the timeout, and ignores a
 * failure to. */
long kr__sys_select(struct kr_uproc *up, long nr, long a[6])
{
	struct timeval tv;
	uint64_t end = KR_FOREVER;
	if (a[4]) {
		if (GET(tv, a[4]))
			return -EFAULT;
		if (tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
			return -EINVAL;
		end = kr_now() + (uint64_t)(tv.tv_sec > SLEEP_MAX_S ? SLEEP_MAX_S : tv.tv_sec) *
					 1000000000u + (uint64_t)tv.tv_usec * 1000u;
	}
	long r = select_(up, a[0], (long[3]){a[1], a[2], a[3]}, end);
	if (a[4]) {
		uint64_t ns = left(end);
		tv = (struct timeval){(time_t)(ns / 1000000000u), (suseconds_t)(ns % 1000000000u / 1000u)};
		(void)PUT(a[4], tv);
	}
	return r;
}

/* Its sixth argument: the signal mask for the call, and its size. */
long kr__sys_pselect6(struct kr_uproc *up, long nr, long a[6])
{
	struct timespec ts;
	struct {
		long set, size;
	} sig = {0, 0};
	uint64_t end = KR_FOREVER, saved;
	if (a[4]) {
		if (GET(ts, a[4]))
			return -EFAULT;
		if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000)
			return -EINVAL;
		end = kr_now() + (uint64_t)(ts.tv_sec > SLEEP_MAX_S ? SLEEP_MAX_S : ts.tv_sec) *
					 1000000000u + (uint64_t)ts.tv_nsec;
	}
	if (a[5] && GET(sig, a[5]))
		return -EFAULT;
	long r = kr__sigmask_push(up, sig.set, sig.size, &saved);
	if (r)
		return r;
	r = kr__sig_intr()
		    ? -EINTR /* a signal its mask let through */
		    : select_(up, a[0], (long[3]){a[1], a[2], a[3]}, end);
	kr__sigmask_pop(up, saved);
	if (a[4]) {
		uint64_t ns = left(end);
		ts = (struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
		(void)PUT(a[4], ts);
	}
	return r;
}

/* ---------------- paths, against the working directory ---------------- */

/* faccessat, mkdirat, ...: one dirfd, first (new directories and nodes
 * take its umask). */
long kr__sys_at(struct kr_uproc *up, long nr, long a[6])
{
	if (nr == SYS_mkdirat || nr == SYS_mknodat)
		a[2] &= ~(long)up->umask;
	return with_dirfd(up, nr, a, 0);
}

/* renameat, renameat2, linkat: two dirfds, first and third. */
long kr__sys_at2(struct kr_uproc *up, long nr, long a[6])
{
	int err = 0;
	long b[6];
	memcpy(b, a, sizeof b);
	b[0] = dirfd_of(up, a[0], &err);
	if (!err)
		b[2] = dirfd_of(up, a[2], &err);
	return err ? -err : kr__pass(nr, b);
}

long kr__sys_symlinkat(struct kr_uproc *up, long nr, long a[6])
{
	int err = 0;
	long b[6] = {a[0], dirfd_of(up, a[1], &err), a[2]};
	return err ? -err : kr__pass(nr, b);
}

long kr__sys_stat(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1], nr == SYS_lstat ? AT_SYMLINK_NOFOLLOW : 0};
	return kr__pass(SYS_newfstatat, b);
}

long kr__sys_access(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1], 0};
	return kr__pass(SYS_faccessat, b);
}

long kr__sys_readlink(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1], a[2]};
	return kr__pass(SYS_readlinkat, b);
}

long kr__sys_unlink(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], nr == SYS_rmdir ? AT_REMOVEDIR : 0};
	return kr__pass(SYS_unlinkat, b);
}

long kr__sys_mkdir(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1] & ~(long)up->umask};
	return kr__pass(SYS_mkdirat, b);
}

long kr__sys_rename(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], up->cwdfd, a[1]};
	return kr__pass(SYS_renameat, b);
}

long kr__sys_link(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], up->cwdfd, a[1], 0};
	return kr__pass(SYS_linkat, b);
}

long kr__sys_symlink(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {a[0], up->cwdfd, a[1]};
	return kr__pass(SYS_symlinkat, b);
}

long kr__sys_chmod(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1]};
	return kr__pass(SYS_fchmodat, b);
}

long kr__sys_chown(struct kr_uproc *up, long nr, long a[6])
{
	long b[6] = {up->cwdfd, a[0], a[1], a[2], nr == SYS_lchown ? AT_SYMLINK_NOFOLLOW : 0};
	return kr__pass(SYS_fchownat, b);
}

/* truncate, statfs: on the file opened against the working directory. */
long kr__sys_by_path(struct kr_uproc *up, long nr, long a[6])
{
	int fd = openat(up->cwdfd, (const char *)a[0],
			(nr == SYS_truncate ? O_WRONLY : O_PATH) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	long r = nr == SYS_truncate ? ftruncate(fd, a[1]) : fstatfs(fd, (void *)a[1]);
	r = r < 0 ? -errno : 0;
	close(fd);
	return r;
}

long kr__cwd_path(struct kr_uproc *up, const char *upath, char out[KR__CWD_PATH_MAX])
{
	char path[PATH_MAX];
	long r = kr__ustr(path, upath, sizeof path);
	if (r < 0)
		return r;
	if (path[0] == '/' || !path[0])
		memcpy(out, path, (size_t)r + 1);
	else
		snprintf(out, KR__CWD_PATH_MAX, "/proc/self/fd/%d/%s", up->cwdfd, path);
	return 0;
}

/* getxattr, lsetxattr, ...: the path first. */
long kr__sys_xattr(struct kr_uproc *up, long nr, long a[6])
{
	char path[KR__CWD_PATH_MAX];
	long r = kr__cwd_path(up, (const char *)a[0], path);
	if (r < 0)
		return r;
	long b[6] = {(long)path, a[1], a[2], a[3], a[4]};
	return kr__pass(nr, b);
}

/* ---------------- working directory, umask ---------------- */

static long set_cwd(struct kr_uproc *up, int fd)
{
	char link[64], buf[4096];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, sizeof buf - 1);
	char *s = n > 0 ? strndup(buf, (size_t)n) : NULL;
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	close(up->cwdfd);
	up->cwdfd = fd;
	free(up->cwd);
	up->cwd = s;
	return 0;
}

long kr__sys_chdir(struct kr_uproc *up, long nr, long a[6])
{
	int fd = openat(up->cwdfd, (const char *)a[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return set_cwd(up, fd);
}

long kr__sys_fchdir(struct kr_uproc *up, long nr, long a[6])
{
	struct stat st;
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTDIR;
	if (fstat(f->hostfd, &st) || !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	int fd = fcntl(f->hostfd, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : set_cwd(up, fd);
}

long kr__sys_getcwd(struct kr_uproc *up, long nr, long a[6])
{
	size_t n = strlen(up->cwd) + 1;
	if ((size_t)a[1] < n)
		return -ERANGE;
	long r = kr__ucopy((char *)a[0], up->cwd, n);
	return r ? r : (long)n;
}

long kr__sys_umask(struct kr_uproc *up, long nr, long a[6])
{
	long old = up->umask;
	up->umask = (mode_t)(a[0] & 0777);
	return old;
}
