/*
 * karui L3 io — the public calls (include/karui/io.h) and the choice of
 * back end.
 *
 * The back end starts with the first call after kr_init: io_uring unless
 * KARUI_IO=epoll is set, the program runs under valgrind, or the kernel
 * refuses the ring (then epoll), and adds itself to the core's event
 * sources (kr_poller_add; beside libkarui-mpi's, if that is in, an idle VP
 * sleeps in this one).  A ring that cannot be set up for want of fds or
 * memory (EMFILE, ENFILE, ENOMEM) is no reason to give io_uring up for the
 * process's life: the call returns that error and the next one tries
 * again.  kr_fini calls the event source's fini, which stops the back
 * end; the next kr_init starts from scratch.
 *
 * Fork.  The child of a fork made while karui runs shares the back end's
 * kernel objects with the parent: the rings, memory included (a request
 * the child queued would complete in the parent, which would take the
 * child's record for one of its own), and the epoll set (a registration
 * the child removed would be gone for the parent too).  A pthread_atfork
 * child handler (registered at the first call) lets go of the child's
 * copies, unmapping and closing them without a word to the objects, and
 * unblocks SIGPIPE again if karui had blocked it on the forking thread;
 * the back end does not start there (EPERM: karui does not run, and
 * cannot).  So kr_close is close(2) in the child, and kr_io_cancel
 * returns EPERM.  start_lock is made anew there (a thread the child lacks
 * may have held it).
 *
 * The back ends keep the kernel's convention (a count, or a negative errno
 * code, as io_uring reports it); the public calls turn it into karui's (0
 * or a positive errno code, the count in an out-parameter) here, inlined,
 * so that each builds one frame.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_internal.h"
#include "../core/internal.h" /* kr__forked */

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct kr_iobackend *cur;  /* atomic: NULL until started */
static int start_err;                   /* why neither back end started */
static int fork_hooked;                 /* under start_lock: fork_child is registered */

static int try_start(const struct kr_iobackend *b)
{
	kr_poller p = {0};
	int err = b->init(&p);
	if (err)
		return err;
	err = kr_poller_add(&p);
	if (err && p.fini)
		p.fini(p.arg);
	return err;
}

static int start_uring(void)
{
#ifdef KARUI_HAVE_URING
	return try_start(&kr__io_uring);
#else
	return ENOSYS;
#endif
}

/* valgrind does not model io_uring: it cannot see the kernel fill a
 * buffer (the bytes read look uninitialised), and a run can hang.  It runs
 * the program with its preload libraries in LD_PRELOAD (and takes them
 * out for a program the client execs unless it follows it there), which
 * needs no header of valgrind's at build time. */
static int under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");
	return p && strstr(p, "/vgpreload_");
}

static void fork_child(void);

/* The back end, started now if need be; NULL and *err when none could
 * start.  *err is read under start_lock: another caller's start may reset
 * start_err as soon as the lock is dropped. */
static const struct kr_iobackend *backend(int *err)
{
	const struct kr_iobackend *b = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	if (__builtin_expect(b != NULL, 1))
		return b;
	pthread_mutex_lock(&start_lock);
	if (!(b = cur) && !fork_hooked)
		fork_hooked = pthread_atfork(NULL, NULL, fork_child) == 0;
	if (!b && !fork_hooked) {
		start_err = ENOMEM; /* transient: the next call tries again */
	} else if (!b && kr__forked) {
		start_err = EPERM;
	} else if (!b) {
		const char *want = getenv("KARUI_IO");
		int epoll_only = (want && strcmp(want, "epoll") == 0) || under_valgrind();
		int err = epoll_only ? ENOSYS : start_uring();
		if (!err)
			b = &kr__io_uring;
		else if (kr__io_transient(err))
			start_err = err; /* not epoll for good: io_uring may start later */
		else if ((start_err = try_start(&kr__io_epoll)) == 0)
			b = &kr__io_epoll;
		__atomic_store_n(&cur, b, __ATOMIC_RELEASE);
	}
	*err = start_err;
	pthread_mutex_unlock(&start_lock);
	return b;
}

_Thread_local int kr__io_sigpipe;

void kr__io_block_sigpipe(void)
{
	sigset_t pipe, old;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	kr__io_sigpipe = sigismember(&old, SIGPIPE) ? 2 : 1;
}

/* The child of a fork (see the top). */
static void fork_child(void)
{
	pthread_mutex_init(&start_lock, NULL);
	if (cur)
		cur->forked();
	cur = NULL;
	if (kr__io_sigpipe == 1) {
		sigset_t pipe;
		sigemptyset(&pipe);
		sigaddset(&pipe, SIGPIPE);
		pthread_sigmask(SIG_UNBLOCK, &pipe, NULL);
	}
	kr__io_sigpipe = 0;
}

/* The back ends' poller fini ends with this, on the thread that called
 * kr_init: a SIGPIPE of karui's writes may be pending there; take it
 * before the thread's own mask comes back. */
void kr__io_stopped(void)
{
	if (kr__io_sigpipe == 1) {
		sigset_t pipe;
		sigemptyset(&pipe);
		sigaddset(&pipe, SIGPIPE);
		const struct timespec zero = {0, 0};
		while (sigtimedwait(&pipe, NULL, &zero) == SIGPIPE)
			;
		pthread_sigmask(SIG_UNBLOCK, &pipe, NULL);
	}
	kr__io_sigpipe = 0;
	__atomic_store_n(&cur, NULL, __ATOMIC_RELEASE);
}

const char *kr_io_backend(void)
{
	int err;
	const struct kr_iobackend *b = backend(&err);
	return b ? b->name : NULL;
}

unsigned kr_io_features(void)
{
	int err;
	const struct kr_iobackend *b = backend(&err);
	return b ? b->features : 0;
}

/* The back end's result for r: a count, or a negative errno code. */
static inline long call(struct kr_ioreq *r)
{
	if (!kr_mp_self())
		return -EPERM;
	if (r->fd < 0)
		return -EBADF;
	int err;
	const struct kr_iobackend *b = backend(&err);
	if (!b)
		return -err;
	return b->run(r);
}

/* A transfer: 0 and the count in *out, or an errno code and 0 in *out. */
static inline int run(struct kr_ioreq *r, size_t *out)
{
	long n = call(r);
	if (__builtin_expect(n >= 0, 1)) {
		*out = (size_t)n;
		return 0;
	}
	*out = 0;
	return (int)-n;
}

int kr_read_until(int fd, void *buf, size_t len, size_t *got, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_READ, .fd = fd, .buf = buf, .len = len, .deadline = deadline};
	return got ? run(&r, got) : EINVAL;
}

int kr_write_until(int fd, const void *buf, size_t len, size_t *done, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_WRITE, .fd = fd, .buf = (void *)buf, .len = len,
			     .deadline = deadline};
	return done ? run(&r, done) : EINVAL;
}

int kr_readv_until(int fd, const struct iovec *iov, int iovcnt, size_t *got, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_READV, .fd = fd, .iov = iov, .iovcnt = iovcnt,
			     .deadline = deadline};
	if (!got)
		return EINVAL;
	if (iovcnt < 0) {
		*got = 0;
		return EINVAL;
	}
	return run(&r, got);
}

int kr_writev_until(int fd, const struct iovec *iov, int iovcnt, size_t *done, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_WRITEV, .fd = fd, .iov = iov, .iovcnt = iovcnt,
			     .deadline = deadline};
	if (!done)
		return EINVAL;
	if (iovcnt < 0) {
		*done = 0;
		return EINVAL;
	}
	return run(&r, done);
}

int kr_recv_until(int fd, void *buf, size_t len, int flags, size_t *got, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_RECV, .fd = fd, .buf = buf, .len = len, .flags = flags,
			     .deadline = deadline};
	return got ? run(&r, got) : EINVAL;
}

int kr_send_until(int fd, const void *buf, size_t len, int flags, size_t *done, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_SEND, .fd = fd, .buf = (void *)buf, .len = len,
			     .flags = flags | MSG_NOSIGNAL, .deadline = deadline};
	return done ? run(&r, done) : EINVAL;
}

int kr_accept_until(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags, int *newfd,
		    uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_ACCEPT, .fd = fd, .addr = addr, .addrlen = addrlen,
			     .flags = flags, .deadline = deadline};
	if (!newfd)
		return EINVAL;
	*newfd = -1;
	if ((addr == NULL) != (addrlen == NULL) || (flags & ~(SOCK_CLOEXEC | SOCK_NONBLOCK)))
		return EINVAL;
	long n = call(&r);
	if (n < 0)
		return (int)-n;
	*newfd = (int)n;
	return 0;
}

int kr_connect_until(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_CONNECT, .fd = fd, .addr = (struct sockaddr *)addr,
			     .alen = addrlen, .deadline = deadline};
	return addr ? (int)-call(&r) : EINVAL;
}

int kr_poll_until(int fd, short events, short *revents, uint64_t deadline)
{
	struct kr_ioreq r = {.op = IO_POLL, .fd = fd, .events = events, .deadline = deadline};
	if (!revents)
		return EINVAL;
	*revents = 0;
	if (!events)
		return EINVAL;
	long n = call(&r);
	if (n < 0)
		return (int)-n;
	*revents = (short)n;
	return 0;
}

int kr_write_all_until(int fd, const void *buf, size_t len, size_t *done, uint64_t deadline)
{
	size_t off = 0, n;
	int err = 0;
	while (off < len && !(err = kr_write_until(fd, (const char *)buf + off, len - off, &n, deadline)))
		off += n;
	if (done)
		*done = off;
	return err;
}

/* The forms that wait as long as it takes. */
int kr_read(int fd, void *buf, size_t len, size_t *got)
{
	return kr_read_until(fd, buf, len, got, KR_FOREVER);
}

int kr_write(int fd, const void *buf, size_t len, size_t *done)
{
	return kr_write_until(fd, buf, len, done, KR_FOREVER);
}

int kr_readv(int fd, const struct iovec *iov, int iovcnt, size_t *got)
{
	return kr_readv_until(fd, iov, iovcnt, got, KR_FOREVER);
}

int kr_writev(int fd, const struct iovec *iov, int iovcnt, size_t *done)
{
	return kr_writev_until(fd, iov, iovcnt, done, KR_FOREVER);
}

int kr_recv(int fd, void *buf, size_t len, int flags, size_t *got)
{
	return kr_recv_until(fd, buf, len, flags, got, KR_FOREVER);
}

int kr_send(int fd, const void *buf, size_t len, int flags, size_t *done)
{
	return kr_send_until(fd, buf, len, flags, done, KR_FOREVER);
}

int kr_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags, int *newfd)
{
	return kr_accept_until(fd, addr, addrlen, flags, newfd, KR_FOREVER);
}

int kr_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	return kr_connect_until(fd, addr, addrlen, KR_FOREVER);
}

int kr_poll(int fd, short events, short *revents)
{
	return kr_poll_until(fd, events, revents, KR_FOREVER);
}

int kr_write_all(int fd, const void *buf, size_t len, size_t *done)
{
	return kr_write_all_until(fd, buf, len, done, KR_FOREVER);
}

int kr_io_cancel(int fd)
{
	if (fd < 0)
		return EBADF;
	int err;
	const struct kr_iobackend *b = backend(&err);
	return b ? -b->cancel(fd) : err;
}

/* A back end that has not started has nothing on fd to forget: kr_close
 * does not start it (a μprocess's end closes its host fds this way). */
int kr_close(int fd)
{
	if (fd < 0)
		return EBADF;
	const struct kr_iobackend *b = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	if (b)
		b->forget(fd);
	return close(fd) ? errno : 0;
}
