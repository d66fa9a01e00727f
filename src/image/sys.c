/*
 * karui image layer — what each system call of a μprocess does (seed
 * 003's Table 1).  kr__sys gets the call's number and six arguments as
 * the kernel would, and returns what the kernel would: a value or -errno.
 *
 * Four kinds of calls (docs/uproc.md lists each one):
 *  - the μprocess's own state, emulated here: its fds (every call that
 *    takes or makes one goes through its table, fd.c), its working
 *    directory (relative paths and AT_FDCWD are resolved against it: the
 *    path calls become their *at forms), umask, pid, thread pointer
 *    (arch_prctl), signal dispositions and mask, brk;
 *  - its end: exit, exit_group, a fatal signal to itself;
 *  - calls that would wait: on a pipe, a terminal, a kernel pipe or
 *    socket, a sleep; they park only the μprocess's microprocess;
 *  - the rest of what a process may do that touches only itself (time,
 *    memory it maps, which is recorded so that it goes with the μprocess,
 *    uname, getrandom, ...), passed to the kernel;
 * and what a μprocess may not do: calls on the whole process's
 * identity (setuid and the like: EPERM) and those not done yet (fork,
 * exec, threads, and any call not listed: ENOSYS, with one line on the
 * μprocess's stderr for the ones a program means to use).
 *
 * Every pointer a μprocess passes is its own word: what karui reads or
 * writes there goes through uaccess.S (GET, PUT, kr__ustr, kr__uprobe),
 * so that a bad one is -EFAULT for that call as in the kernel; what only
 * the kernel reads is passed on for the kernel to check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "uproc.h"

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif
#ifndef ARCH_SET_FS
#define ARCH_SET_GS 0x1001
#define ARCH_SET_FS 0x1002
#define ARCH_GET_FS 0x1003
#define ARCH_GET_GS 0x1004
#endif

/* An object at the μprocess's address u: 0 or -EFAULT. */
#define GET(obj, u) kr__ucopy(&(obj), (const void *)(u), sizeof(obj))
#define PUT(u, obj) kr__ucopy((void *)(u), &(obj), sizeof(obj))

/* A wait longer than this (100 years) is as good as for ever, and its
 * nanoseconds do not overflow. */
#define SLEEP_MAX_S (100l * 365 * 86400)

static long pass(long nr, long a[6])
{
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	return r == -1 ? -errno : r;
}

static void say(struct kr_uproc *up, const char *what)
{
	char msg[160];
	int n = snprintf(msg, sizeof msg, "karui: %s is not supported in a μprocess yet\n", what);
	struct kr__ufile *f = kr__fd_get(&up->fds, 2);
	if (!f || n <= 0)
		return;
	if (f->kind == UF_PIPE)
		kr__upipe_rw(f->pipe, 1, msg, (size_t)n);
	else
		(void)!write(f->hostfd, msg, (size_t)n);
}

/* ---------------- fds ---------------- */

#define FILE_OR(up, fd, err)                                                                   \
	struct kr__ufile *f = kr__fd_get(&(up)->fds, (int)(fd));                                  \
	if (!f)                                                                                    \
		return -(err)

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
	return pass(nr, b);
}

/* The call with argument i (an fd) made a host fd; pipes: `onpipe`. */
static long with_fd(struct kr_uproc *up, long nr, long a[6], int i, long onpipe)
{
	FILE_OR(up, a[i], EBADF);
	if (f->kind != UF_HOST)
		return onpipe;
	long b[6];
	memcpy(b, a, sizeof b);
	b[i] = f->hostfd;
	return pass(nr, b);
}

/* A new host fd opened with `flags` (O_CLOEXEC already) becomes the
 * μprocess's lowest free fd.  The file keeps what F_SETFL can change and
 * the access mode, as the kernel keeps them from the open's flags. */
static long adopt(struct kr_uproc *up, long r, long flags, int cloexec)
{
	if (r < 0)
		return r;
	struct kr__ufile *f =
		kr__ufile_host((int)r, (int)(flags & (O_ACCMODE | O_APPEND | O_NONBLOCK)));
	if (!f)
		return -ENOMEM;
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
	return adopt(up, r < 0 ? -errno : r, flags, cloexec);
}

static long sys_openat(struct kr_uproc *up, long dirfd, const char *upath, long flags, long mode)
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
		return r < 0 ? r : adopt(up, r, flags, !!(flags & O_CLOEXEC));
	r = syscall(SYS_openat, d, path, flags | O_CLOEXEC, mode);
	if (r < 0)
		return -errno;
	return adopt(up, r, flags, !!(flags & O_CLOEXEC));
}

static int is_tty(int fd)
{
	struct termios t;
	return tcgetattr(fd, &t) == 0;
}

/* The μprocess's killfd (uproc.h), made now if it has none; -1 if no
 * eventfd can be had (the wait is then one kr_uproc_kill cannot end). */
static int kill_fd(struct kr_uproc *up)
{
	int k = __atomic_load_n(&up->killfd, __ATOMIC_ACQUIRE);
	if (k < 0 && (k = eventfd(0, EFD_CLOEXEC)) >= 0)
		__atomic_store_n(&up->killfd, k, __ATOMIC_SEQ_CST);
	return k;
}

static long rw(struct kr_uproc *up, long fd, void *buf, size_t len, int write)
{
	FILE_OR(up, fd, EBADF);
	if (f->kind == UF_PIPE) {
		if (f->end != (write ? KR_UPIPE_WRITE : KR_UPIPE_READ))
			return -EBADF;
		/* its buffer, probed: a read moves at most a pipe's capacity */
		if (kr__uprobe(buf, write || len < KR__PIPE_CAP ? len : KR__PIPE_CAP, !write))
			return -EFAULT;
		long r = kr__upipe_rw(f->pipe, write, buf, len);
		if (r == -EPIPE)
			kr__uproc_signal(up, SIGPIPE);
		return r;
	}
	long r;
	if (kr__ufile_waits(f) && !(f->flags & O_NONBLOCK)) {
		if (is_tty(f->hostfd) || !(kr_io_features() & KR_IO_KEEPS_FD_FLAGS)) {
			/* no O_NONBLOCK on a terminal, or on a pipe or socket whose open
			 * file others may share: karui's epoll back end would set it.
			 * A read waits in poll first, beside the killfd, so that
			 * kr_uproc_kill can end the wait. */
			int k = write ? -1 : kill_fd(up);
			if (__atomic_load_n(&up->killed, __ATOMIC_SEQ_CST))
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
			size_t n = 0;
			int e = write ? kr_write(f->hostfd, buf, len, &n)
				      : kr_read(f->hostfd, buf, len, &n);
			r = e && n == 0 ? -e : (long)n;
		}
	} else {
		r = write ? syscall(SYS_write, f->hostfd, buf, len)
			  : syscall(SYS_read, f->hostfd, buf, len);
		r = r < 0 ? -errno : r;
	}
	if (r == -EPIPE)
		kr__uproc_signal(up, SIGPIPE);
	return r;
}

static long rwv(struct kr_uproc *up, long fd, const struct iovec *iov, long cnt, int write)
{
	if (cnt < 0 || cnt > 1024)
		return -EINVAL;
	long total = 0;
	for (long i = 0; i < cnt; i++) {
		struct iovec v;
		long r = GET(v, &iov[i]);
		if (!r && !v.iov_len)
			continue;
		if (!r)
			r = rw(up, fd, v.iov_base, v.iov_len, write);
		if (r < 0)
			return total ? total : r;
		total += r;
		if ((size_t)r < v.iov_len)
			break;
	}
	return total;
}

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

/* The path at u is "" (for AT_EMPTY_PATH); a bad u is the kernel's to
 * report. */
/* The path at u is "" (or NULL), for AT_EMPTY_PATH: 1, 0 or -EFAULT. */
static long empty_path(long u)
{
	char c = 0;
	long r = u ? kr__ucopy(&c, (const void *)u, 1) : 0;
	return r ? r : !c;
}

static long sys_fcntl(struct kr_uproc *up, long fd, long cmd, long arg)
{
	FILE_OR(up, fd, EBADF);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (arg < 0 || arg >= KR_UFD_MAX)
			return -EINVAL;
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
		return kr__fd_install(&up->fds, f, (int)arg, cmd == F_DUPFD_CLOEXEC);
	case F_GETFD:
		return up->fds.fd[fd].cloexec ? FD_CLOEXEC : 0;
	case F_SETFD:
		up->fds.fd[fd].cloexec = !!(arg & FD_CLOEXEC);
		return 0;
	case F_GETFL:
		if (f->kind == UF_HOST) {
			long r = fcntl(f->hostfd, F_GETFL);
			return r < 0 ? -errno : r;
		}
		return f->flags;
	case F_SETFL:
		f->flags = (f->flags & O_ACCMODE) | (arg & (O_APPEND | O_NONBLOCK));
		if (f->kind == UF_HOST && fcntl(f->hostfd, F_SETFL, arg) < 0)
			return -errno;
		return 0;
	default:
		if (f->kind != UF_HOST)
			return -EINVAL;
		{
			long b[6] = {f->hostfd, cmd, arg};
			return pass(SYS_fcntl, b);
		}
	}
}

static long sys_dup3(struct kr_uproc *up, long oldfd, long newfd, long flags, int dup2)
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

static long sys_pipe2(struct kr_uproc *up, int *fds, long flags)
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

/* ---------------- working directory ---------------- */

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

static long sys_chdir(struct kr_uproc *up, long dirfd, const char *path)
{
	int err = 0;
	int d = dirfd_of(up, dirfd, &err);
	if (err)
		return -err;
	int fd = openat(d, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return set_cwd(up, fd);
}

static long sys_getcwd(struct kr_uproc *up, char *buf, size_t size)
{
	size_t n = strlen(up->cwd) + 1;
	if (size < n)
		return -ERANGE;
	long r = kr__ucopy(buf, up->cwd, n);
	return r ? r : (long)n;
}

/* ---------------- memory ---------------- */

#define PG 4096ul
static long sys_mmap(struct kr_uproc *up, long a[6])
{
	long b[6];
	memcpy(b, a, sizeof b);
	size_t len = ((size_t)a[1] + PG - 1) & ~(PG - 1);
	if (!(a[3] & MAP_ANONYMOUS)) {
		FILE_OR(up, a[4], EBADF);
		if (f->kind != UF_HOST)
			return -ENODEV;
		b[4] = f->hostfd;
	}
	if ((a[3] & MAP_FIXED) && !kr__rl_covers(&up->reg, (uintptr_t)a[0], (uintptr_t)a[0] + len))
		b[3] = (a[3] & ~MAP_FIXED) | MAP_FIXED_NOREPLACE; /* never over the host's */
	if (a[3] & MAP_GROWSDOWN)
		return -EINVAL;
	/* read-only pages of a file, anywhere: perhaps a spare of its image */
	int type = (int)(a[3] & MAP_TYPE);
	struct kr__file_id id = {0, 0, 0};
	int ro = up->img && !a[0] && a[2] == PROT_READ && !(a[3] & ~(long)MAP_TYPE) &&
		 (type == MAP_PRIVATE || type == MAP_SHARED) && !(a[5] & (PG - 1));
	if (ro) {
		struct stat st;
		if (fstat((int)b[4], &st))
			ro = 0;
		else
			id = kr__file_id_of(&st);
		uintptr_t at = ro ? kr__img_fmap_take(up, &id, a[5], len, type) : 0;
		if (at)
			return (long)at;
	}
	long r = pass(SYS_mmap, b);
	if (r < 0)
		return r == -EEXIST ? -ENOMEM : r;
	if (kr__uproc_mapped(up, (uintptr_t)r, (uintptr_t)r + len, (int)a[2])) {
		munmap((void *)r, len);
		return -ENOMEM;
	}
	if (ro)
		kr__img_fmap_made(up, (uintptr_t)r, &id, a[5], len, type);
	kr__xmap_del(up, (uintptr_t)r, (uintptr_t)r + len);
	/* code from a file: the image starts where offset 0 would be (ld.so
	 * maps a library's segments at their offsets) */
	if ((a[2] & PROT_EXEC) && !(a[3] & MAP_ANONYMOUS) && (uintptr_t)r >= (uintptr_t)a[5]) {
		struct stat st;
		struct kr__file_id id = {0, 0, 0};
		if (fstat((int)b[4], &st) == 0)
			id = kr__file_id_of(&st);
		kr__xmap_add(up, (uintptr_t)r, (uintptr_t)r + len, (uintptr_t)r - (uintptr_t)a[5], &id);
	}
	return r;
}

/* Only what the μprocess mapped may it unmap, move or change. */
static long owned(struct kr_uproc *up, long addr, long len)
{
	size_t l = ((size_t)len + PG - 1) & ~(PG - 1);
	return (addr & (PG - 1)) == 0 && kr__rl_covers(&up->reg, (uintptr_t)addr, (uintptr_t)addr + l);
}

static long sys_munmap(struct kr_uproc *up, long a[6])
{
	if (!owned(up, a[0], a[1]))
		return -EINVAL;
	long r = pass(SYS_munmap, a);
	if (r == 0) {
		uintptr_t hi = (uintptr_t)a[0] + (((size_t)a[1] + PG - 1) & ~(PG - 1));
		kr__uproc_unmapped(up, (uintptr_t)a[0], hi);
		kr__xmap_del(up, (uintptr_t)a[0], hi);
	}
	return r;
}

static long sys_mremap(struct kr_uproc *up, long a[6])
{
	if (!owned(up, a[0], a[1]) || (a[3] & MREMAP_FIXED))
		return -EINVAL;
	long r = pass(SYS_mremap, a);
	if (r < 0)
		return r;
	size_t oldl = ((size_t)a[1] + PG - 1) & ~(PG - 1), newl = ((size_t)a[2] + PG - 1) & ~(PG - 1);
	int w = kr__rl_meets(&up->wr, (uintptr_t)a[0], (uintptr_t)a[0] + oldl) ? PROT_WRITE : 0;
	if (!(a[3] & MREMAP_DONTUNMAP))
		kr__uproc_unmapped(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl);
	else
		kr__img_dirty(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl); /* emptied */
	kr__xmap_del(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl);
	kr__uproc_mapped(up, (uintptr_t)r, (uintptr_t)r + newl, w);
	return r;
}

/* mprotect, madvise, ...: on its own mappings (its stack is one). */
static long on_own(struct kr_uproc *up, long nr, long a[6])
{
	if (!owned(up, a[0], a[1]))
		return -EINVAL;
	long r = pass(nr, a);
	uintptr_t hi = (uintptr_t)a[0] + (((size_t)a[1] + PG - 1) & ~(PG - 1));
	if (r == 0 && nr == SYS_mprotect)
		kr__uproc_protected(up, (uintptr_t)a[0], hi, (int)a[2]);
	/* advice that changes more than content (guards, locks, forking)
	 * would outlive a kept image's restore */
	if (r == 0 && nr == SYS_madvise && a[2] != MADV_DONTNEED && a[2] != MADV_FREE &&
	    a[2] != MADV_WILLNEED && a[2] != MADV_NORMAL && a[2] != MADV_RANDOM &&
	    a[2] != MADV_SEQUENTIAL && a[2] != MADV_COLD && a[2] != MADV_PAGEOUT)
		kr__img_dirty(up, (uintptr_t)a[0], hi);
	if (r == 0 && (nr == SYS_mlock || nr == SYS_munlock))
		kr__img_dirty(up, (uintptr_t)a[0], hi);
	return r;
}

/* ---------------- signals ---------------- */

static long sys_sigaction(struct kr_uproc *up, long sig, const struct sigaction_k *act,
			  struct sigaction_k *old, long size)
{
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

static long sys_sigprocmask(struct kr_uproc *up, long how, const uint64_t *set, uint64_t *old,
			    long size)
{
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

/* Kept and reported as the kernel does; its handlers never run on it. */
static long sys_sigaltstack(struct kr_uproc *up, const stack_t *uss, stack_t *uold)
{
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

/* ITIMER_REAL: a microprocess of the μprocess's sends it SIGALRM, as
 * kr_uproc_kill would, when the time comes; a change unparks it. */
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

static long sys_setitimer(struct kr_uproc *up, long which, const struct itimerval *unew,
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

static long sys_alarm(struct kr_uproc *up, unsigned long s)
{
	struct itimerval old = itimer_now(up);
	struct itimerval v = {{0, 0}, {(time_t)(s > SLEEP_MAX_S ? SLEEP_MAX_S : s), 0}};
	long e = itimer_set(up, &v);
	if (e)
		return e;
	/* what was left, in seconds, rounded as the kernel does */
	return old.it_value.tv_sec + (old.it_value.tv_usec >= 500000 ||
				      (!old.it_value.tv_sec && old.it_value.tv_usec));
}

static long to_self(struct kr_uproc *up, long pid, long sig)
{
	if (pid != up->pid)
		return -ESRCH;
	return kr__uproc_signal(up, (int)sig);
}

/* ---------------- time ---------------- */

static long sys_nanosleep(long clock, long flags, const struct timespec *ureq)
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

/* One thread: nobody wakes it, so the wait ends at its timeout (relative
 * for FUTEX_WAIT; absolute for FUTEX_WAIT_BITSET, on CLOCK_REALTIME with
 * FUTEX_CLOCK_REALTIME) or with kr_uproc_kill. */
static long sys_futex_wait(const long a[6])
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
			kr_stream_poll(&f->pipe->s, &buffered, &room, &closed);
			if (f->end == KR_UPIPE_READ)
				p[i].revents = (buffered ? POLLIN : 0) |
					       (closed & KR_STREAM_WCLOSED ? POLLHUP : 0);
			else
				p[i].revents = closed & KR_STREAM_RCLOSED ? POLLERR
									  : (room ? POLLOUT : 0);
			p[i].revents &= (short)(p[i].events | POLLHUP | POLLERR);
		} else {
			struct pollfd h = {.fd = f->hostfd, .events = p[i].events};
			if (poll(&h, 1, 0) > 0)
				p[i].revents = h.revents;
		}
		ready += p[i].revents != 0;
	}
	return ready;
}

/* Waits by looking again every millisecond: simple, and no busy VP.  On
 * a copy of the μprocess's array, whose revents it gets at the end. */
static long sys_poll(struct kr_uproc *up, struct pollfd *up_p, unsigned long n, long ms)
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

/* ---------------- the table ---------------- */

static long call(struct kr_uproc *up, long nr, long a[6])
{
	struct stat st;
	long r;
	switch (nr) {
	/* fds */
	case SYS_read:
		return rw(up, a[0], (void *)a[1], (size_t)a[2], 0);
	case SYS_write:
		return rw(up, a[0], (void *)a[1], (size_t)a[2], 1);
	case SYS_readv:
		return rwv(up, a[0], (const struct iovec *)a[1], a[2], 0);
	case SYS_writev:
		return rwv(up, a[0], (const struct iovec *)a[1], a[2], 1);
	case SYS_pread64:
	case SYS_pwrite64:
	case SYS_preadv:
	case SYS_pwritev:
	case SYS_preadv2:
	case SYS_pwritev2:
	case SYS_lseek:
		return with_fd(up, nr, a, 0, -ESPIPE);
	case SYS_close:
		return kr__fd_close(&up->fds, (int)a[0]);
	case SYS_close_range:
		for (long fd = a[0]; fd <= a[1] && fd < up->fds.n; fd++)
			kr__fd_close(&up->fds, (int)fd);
		return 0;
	case SYS_open:
		return sys_openat(up, AT_FDCWD, (const char *)a[0], a[1], a[2]);
	case SYS_creat:
		return sys_openat(up, AT_FDCWD, (const char *)a[0], O_CREAT | O_WRONLY | O_TRUNC, a[1]);
	case SYS_openat:
		return sys_openat(up, a[0], (const char *)a[1], a[2], a[3]);
	case SYS_dup: {
		FILE_OR(up, a[0], EBADF);
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
		return kr__fd_install(&up->fds, f, 0, 0);
	}
	case SYS_dup2:
		return sys_dup3(up, a[0], a[1], 0, 1);
	case SYS_dup3:
		return sys_dup3(up, a[0], a[1], a[2], 0);
	case SYS_fcntl:
		return sys_fcntl(up, a[0], a[1], a[2]);
	case SYS_pipe:
		return sys_pipe2(up, (int *)a[0], 0);
	case SYS_pipe2:
		return sys_pipe2(up, (int *)a[0], a[1]);
	case SYS_fstat: {
		FILE_OR(up, a[0], EBADF);
		if (f->kind == UF_PIPE)
			return pipe_stat((struct stat *)a[1]);
		return with_fd(up, nr, a, 0, -EBADF);
	}
	case SYS_newfstatat:
		if ((a[3] & AT_EMPTY_PATH) && (r = empty_path(a[1]))) {
			if (r < 0)
				return r;
			FILE_OR(up, a[0], EBADF);
			if (f->kind == UF_PIPE)
				return pipe_stat((struct stat *)a[2]);
		}
		return with_dirfd(up, nr, a, 0);
	case SYS_statx:
		if ((a[2] & AT_EMPTY_PATH) && (r = empty_path(a[1]))) {
			if (r < 0)
				return r;
			FILE_OR(up, a[0], EBADF);
			if (f->kind == UF_PIPE)
				return -ENOSYS; /* glibc falls back to fstat */
		}
		return with_dirfd(up, nr, a, 0);
	case SYS_ioctl: {
		FILE_OR(up, a[0], EBADF);
		if (f->kind == UF_PIPE) {
			if (a[1] == FIONREAD && f->end == KR_UPIPE_READ) {
				size_t buffered;
				kr_stream_poll(&f->pipe->s, &buffered, NULL, NULL);
				int n = (int)buffered;
				return PUT(a[2], n);
			}
			return -ENOTTY;
		}
		return with_fd(up, nr, a, 0, -ENOTTY);
	}
	case SYS_getdents64:
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_ftruncate:
	case SYS_fadvise64:
	case SYS_fallocate:
	case SYS_flock:
	case SYS_fchmod:
	case SYS_fchown:
	case SYS_fstatfs:
	case SYS_readahead:
	case SYS_syncfs:
	case SYS_fgetxattr:
	case SYS_flistxattr:
	case SYS_fsetxattr:
	case SYS_fremovexattr:
	case SYS_sync_file_range:
		return with_fd(up, nr, a, 0, nr == SYS_fadvise64 ? -ESPIPE : -EINVAL);
	case SYS_copy_file_range:
	case SYS_sendfile:
	case SYS_splice:
	case SYS_tee:
		return -EINVAL; /* callers fall back to read and write */
	case SYS_poll:
		return sys_poll(up, (struct pollfd *)a[0], (unsigned long)a[1], a[2]);
	case SYS_ppoll: {
		struct timespec t;
		if (a[2] && GET(t, a[2]))
			return -EFAULT;
		if (a[2] && (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000))
			return -EINVAL;
		if (a[2] && t.tv_sec > SLEEP_MAX_S)
			t.tv_sec = SLEEP_MAX_S;
		long ms = a[2] ? t.tv_sec * 1000 + (t.tv_nsec + 999999) / 1000000 : -1;
		return sys_poll(up, (struct pollfd *)a[0], (unsigned long)a[1], ms);
	}

	/* paths, against the working directory */
	case SYS_faccessat:
	case SYS_faccessat2:
	case SYS_mkdirat:
	case SYS_mknodat:
	case SYS_fchownat:
	case SYS_futimesat:
	case SYS_unlinkat:
	case SYS_readlinkat:
	case SYS_fchmodat:
	case SYS_utimensat:
	case SYS_name_to_handle_at:
		if (nr == SYS_mkdirat || nr == SYS_mknodat)
			a[2] &= ~(long)up->umask;
		return with_dirfd(up, nr, a, 0);
	case SYS_renameat:
	case SYS_renameat2:
	case SYS_linkat: {
		int err = 0;
		long b[6];
		memcpy(b, a, sizeof b);
		b[0] = dirfd_of(up, a[0], &err);
		if (!err)
			b[2] = dirfd_of(up, a[2], &err);
		return err ? -err : pass(nr, b);
	}
	case SYS_symlinkat: {
		int err = 0;
		long b[6] = {a[0], dirfd_of(up, a[1], &err), a[2]};
		return err ? -err : pass(nr, b);
	}
	case SYS_stat:
	case SYS_lstat: {
		long b[6] = {up->cwdfd, a[0], a[1], nr == SYS_lstat ? AT_SYMLINK_NOFOLLOW : 0};
		return pass(SYS_newfstatat, b);
	}
	case SYS_access: {
		long b[6] = {up->cwdfd, a[0], a[1], 0};
		return pass(SYS_faccessat, b);
	}
	case SYS_readlink: {
		long b[6] = {up->cwdfd, a[0], a[1], a[2]};
		return pass(SYS_readlinkat, b);
	}
	case SYS_unlink:
	case SYS_rmdir: {
		long b[6] = {up->cwdfd, a[0], nr == SYS_rmdir ? AT_REMOVEDIR : 0};
		return pass(SYS_unlinkat, b);
	}
	case SYS_mkdir: {
		long b[6] = {up->cwdfd, a[0], a[1] & ~(long)up->umask};
		return pass(SYS_mkdirat, b);
	}
	case SYS_rename: {
		long b[6] = {up->cwdfd, a[0], up->cwdfd, a[1]};
		return pass(SYS_renameat, b);
	}
	case SYS_link: {
		long b[6] = {up->cwdfd, a[0], up->cwdfd, a[1], 0};
		return pass(SYS_linkat, b);
	}
	case SYS_symlink: {
		long b[6] = {a[0], up->cwdfd, a[1]};
		return pass(SYS_symlinkat, b);
	}
	case SYS_chmod: {
		long b[6] = {up->cwdfd, a[0], a[1]};
		return pass(SYS_fchmodat, b);
	}
	case SYS_chown:
	case SYS_lchown: {
		long b[6] = {up->cwdfd, a[0], a[1], a[2], nr == SYS_lchown ? AT_SYMLINK_NOFOLLOW : 0};
		return pass(SYS_fchownat, b);
	}
	case SYS_truncate:
	case SYS_statfs: {
		int fd = openat(up->cwdfd, (const char *)a[0],
				(nr == SYS_truncate ? O_WRONLY : O_PATH) | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		long r = nr == SYS_truncate ? ftruncate(fd, a[1]) : fstatfs(fd, (void *)a[1]);
		r = r < 0 ? -errno : 0;
		close(fd);
		return r;
	}
	case SYS_chdir:
		return sys_chdir(up, AT_FDCWD, (const char *)a[0]);
	case SYS_fchdir: {
		FILE_OR(up, a[0], EBADF);
		if (f->kind != UF_HOST)
			return -ENOTDIR;
		if (fstat(f->hostfd, &st) || !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		int fd = fcntl(f->hostfd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : set_cwd(up, fd);
	}
	case SYS_getcwd:
		return sys_getcwd(up, (char *)a[0], (size_t)a[1]);
	case SYS_umask: {
		long old = up->umask;
		up->umask = (mode_t)(a[0] & 0777);
		return old;
	}

	/* memory */
	case SYS_mmap:
		return sys_mmap(up, a);
	case SYS_munmap:
		return sys_munmap(up, a);
	case SYS_mremap:
		return sys_mremap(up, a);
	case SYS_mprotect:
	case SYS_madvise:
	case SYS_msync:
	case SYS_mincore:
	case SYS_mlock:
	case SYS_munlock:
		return on_own(up, nr, a);
	case SYS_brk:
		return (long)up->brk; /* never grows: malloc maps instead */

	/* identity and the thread pointer */
	case SYS_getpid:
	case SYS_gettid:
		return up->pid;
	case SYS_getppid:
		return up->ppid;
	case SYS_set_tid_address:
		up->tidaddr = (uintptr_t)a[0];
		return up->pid;
	case SYS_set_robust_list:
		return 0;
	case SYS_rseq:
		return -ENOSYS;
	case SYS_arch_prctl:
		switch (a[0]) {
		case ARCH_SET_FS:
			up->fs = (uint64_t)a[1];
			return 0;
		case ARCH_GET_FS:
			return PUT(a[1], up->fs);
		default:
			return -EINVAL;
		}
	case SYS_prctl:
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
	case SYS_setuid:
	case SYS_setgid:
	case SYS_setreuid:
	case SYS_setregid:
	case SYS_setresuid:
	case SYS_setresgid:
	case SYS_setfsuid:
	case SYS_setfsgid:
	case SYS_setgroups:
	case SYS_capset:
	case SYS_setsid:
	case SYS_setpgid:
	case SYS_chroot:
		return -EPERM;

	/* signals */
	case SYS_rt_sigaction:
		return sys_sigaction(up, a[0], (const struct sigaction_k *)a[1],
				     (struct sigaction_k *)a[2], a[3]);
	case SYS_rt_sigprocmask:
		return sys_sigprocmask(up, a[0], (const uint64_t *)a[1], (uint64_t *)a[2], a[3]);
	case SYS_rt_sigpending: {
		uint64_t p = __atomic_load_n(&up->sigpending, __ATOMIC_RELAXED) & up->sigmask;
		return PUT(a[0], p);
	}
	case SYS_sigaltstack:
		return sys_sigaltstack(up, (const stack_t *)a[0], (stack_t *)a[1]);
	case SYS_alarm:
		return sys_alarm(up, (unsigned long)a[0]);
	case SYS_setitimer:
		return sys_setitimer(up, a[0], (const struct itimerval *)a[1], (struct itimerval *)a[2]);
	case SYS_getitimer:
		return a[0] == ITIMER_REAL ? sys_setitimer(up, a[0], NULL, (struct itimerval *)a[1])
					   : -EINVAL;
	case SYS_kill:
		return to_self(up, a[0] == 0 ? up->pid : a[0] < 0 ? -a[0] : a[0], a[1]);
	case SYS_tkill:
		return to_self(up, a[0], a[1]);
	case SYS_tgkill:
		return a[0] == up->pid ? to_self(up, a[1], a[2]) : -ESRCH;
	case SYS_pause:
	case SYS_rt_sigsuspend:
		/* only kr_uproc_kill's signals come, and end it */
		while (kr_mp_park_cancellable_until(KR_FOREVER) != ECANCELED)
			;
		return -EINTR;

	/* the end */
	case SYS_exit:
	case SYS_exit_group:
		up->exited = 1;
		kr__uproc_end(up, (int)a[0]);
		__builtin_unreachable();

	/* waits that park the microprocess only */
	case SYS_nanosleep:
		return sys_nanosleep(CLOCK_MONOTONIC, 0, (const struct timespec *)a[0]);
	case SYS_clock_nanosleep:
		return sys_nanosleep(a[0], a[1], (const struct timespec *)a[2]);
	case SYS_sched_yield:
		kr_mp_yield();
		return 0;

	case SYS_futex:
		switch (a[1] & FUTEX_CMD_MASK) {
		case FUTEX_WAKE:
		case FUTEX_WAKE_BITSET:
			return 0; /* one thread: nobody to wake */
		case FUTEX_WAIT:
		case FUTEX_WAIT_BITSET:
			return sys_futex_wait(a);
		default:
			return -ENOSYS;
		}

	/* not yet */
	case SYS_clone:
		if (a[0] & CLONE_THREAD)
			return -EAGAIN; /* "no more threads": programs go on with one */
		/* fall through */
	case SYS_fork:
	case SYS_vfork:
		say(up, "fork");
		return -ENOSYS;
	case SYS_clone3:
		return -ENOSYS; /* glibc tries clone next */
	case SYS_execve:
	case SYS_execveat:
		say(up, "exec");
		return -ENOSYS;
	case SYS_wait4:
	case SYS_waitid:
		return -ECHILD;

	/* the kernel's: time, limits, information, randomness */
	case SYS_clock_gettime:
	case SYS_clock_getres:
	case SYS_gettimeofday:
	case SYS_time:
	case SYS_times:
	case SYS_uname:
	case SYS_sysinfo:
	case SYS_getrandom:
	case SYS_getuid:
	case SYS_geteuid:
	case SYS_getgid:
	case SYS_getegid:
	case SYS_getgroups:
	case SYS_getresuid:
	case SYS_getresgid:
	case SYS_getpgrp:
	case SYS_getpgid:
	case SYS_getsid:
	case SYS_getrlimit:
	case SYS_getrusage:
	case SYS_getpriority:
	case SYS_sched_getaffinity:
	case SYS_getcpu:
	case SYS_membarrier:
		return pass(nr, a);
	case SYS_prlimit64:
		if (a[0] != 0 && a[0] != up->pid)
			return -ESRCH;
		if (a[2])
			return -EPERM;
		a[0] = 0;
		return pass(nr, a);
	default:
		return -ENOSYS;
	}
}

/* Every call of a μprocess that karui serves comes here: a kr_uproc_kill
 * that came before it (or a signal it unblocked) ends the μprocess before
 * the call, one that came during it (cutting a wait short) after it, with
 * 128 + the signal, as the kernel ends a process on its way back to it. */
long kr__sys(struct kr_uproc *up, long nr, long a[6])
{
	int k = __atomic_load_n(&up->killed, __ATOMIC_ACQUIRE);
	if (!k) {
		long r = call(up, nr, a);
		if (!(k = __atomic_load_n(&up->killed, __ATOMIC_ACQUIRE)))
			return r;
	}
	kr__uproc_end(up, 128 + k);
	__builtin_unreachable();
}
