/*
 * karui L3 — I/O that parks only the calling microprocess (SPEC M6).
 *
 * Each call does what the system call of the same name does, but when it
 * would block, the calling microprocess sleeps and its VP runs the others;
 * the VPs' idle loop waits on the kernel's completions (kr_poller in
 * sched.h).  Two back ends, chosen when the first call is made:
 *
 *   io_uring  a ring per VP (liburing; Linux 6.7 or later).  Requests are
 *             queued in the calling VP's ring and submitted in batches: when
 *             the VP goes idle, and at every 8th scheduling point of a busy
 *             one; but a read of a regular file is submitted at once, and
 *             one that the page cache answers returns without a wait.
 *             Deadlines are linked timeouts; cancellation is the
 *             kernel's.  Only the VP that made a request sees it complete
 *             (a VP about to block in kr_blocking_begin hands its socket and
 *             pipe requests over first).  Where no fd or memory is left for
 *             a ring, the call returns EMFILE, ENFILE or ENOMEM, and the
 *             next call tries again.
 *   epoll     when io_uring is unavailable (kernel.io_uring_disabled, a
 *             seccomp filter, a kernel before 6.7, a build without liburing),
 *             under valgrind (which does not model io_uring; seen at run
 *             time from its preload libraries in LD_PRELOAD), or when
 *             KARUI_IO=epoll is set.  The call is tried without blocking;
 *             on EAGAIN the microprocess waits for the fd's readiness
 *             (edge-triggered, registered once per fd) and tries again.
 *             Such fds are put in O_NONBLOCK mode; regular files, which
 *             epoll refuses, are read and written with kr_blocking_begin.
 *
 * Results follow karui's rule (include/karui.h): 0 or a positive errno
 * code (errno is not touched), and what the system call would return in an
 * out-parameter: the byte count in *got (reads) or *done (writes), the new
 * fd in *newfd, the poll events in *revents; on an error they hold 0 (-1
 * for *newfd).  They are mandatory (NULL: EINVAL), but for kr_write_all's
 * *done.  Each call that waits has two forms: kr_read and the like wait as
 * long as it takes; kr_read_until and the like take an absolute kr_now()
 * deadline as their last argument (KR_FOREVER: none) and return ETIMEDOUT
 * when it passes first; nothing was transferred then.  Calls off a VP return EPERM, but for kr_io_cancel
 * and kr_close, which any thread may make.
 *
 * Broken pipes: a write or send to a pipe or socket whose other end is
 * closed returns EPIPE and raises no SIGPIPE, on every VP and with both
 * back ends (a program's SIGPIPE handler is not called for it).  For
 * that, SIGPIPE stays blocked on the threads that make karui's kernel
 * calls: on the VPs karui starts, which block every signal anyway, and on
 * the thread that called kr_init from the back end's first use there (its
 * ring, or its first epoll write) until kr_fini, where a plain write()
 * meanwhile gets EPIPE without a signal too.
 *
 * Cancellation: kr_io_cancel(fd) ends every karui call in flight on fd
 * with ECANCELED (calls made after it are not affected); kr_close(fd)
 * cancels, forgets and closes fd.  kr_mp_cancel (core.h) ends the call
 * the cancelled microprocess waits in the same way, and nothing was
 * transferred then; a request the kernel had already completed returns
 * its result instead, and the cancel stays pending for the next wait.
 * With the epoll back end a regular file's read or write (a blocking
 * call) cannot be cancelled.  With the epoll back end an fd used here
 * must be closed with kr_close, or a new fd with the same number may wait
 * on the old registration.
 *
 * Fork: the child of a fork() made while karui runs shares the back end's
 * rings and epoll set with the parent, and leaves them alone: it closes
 * its copies of their fds at the fork, kr_close there is close(2),
 * kr_io_cancel returns EPERM, the other calls too (no VP), and
 * kr_io_backend NULL.  A call of the parent's waiting on an fd that the
 * child closes goes on.
 */
#ifndef KARUI_IO_H
#define KARUI_IO_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "karui/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0 with *got == 0: end of file (or len 0).  A write or send may move
 * fewer bytes than asked, as the system call does. */
int kr_read(int fd, void *buf, size_t len, size_t *got);
int kr_read_until(int fd, void *buf, size_t len, size_t *got, uint64_t deadline);
int kr_write(int fd, const void *buf, size_t len, size_t *done);
int kr_write_until(int fd, const void *buf, size_t len, size_t *done, uint64_t deadline);
int kr_readv(int fd, const struct iovec *iov, int iovcnt, size_t *got);
int kr_readv_until(int fd, const struct iovec *iov, int iovcnt, size_t *got, uint64_t deadline);
int kr_writev(int fd, const struct iovec *iov, int iovcnt, size_t *done);
int kr_writev_until(int fd, const struct iovec *iov, int iovcnt, size_t *done, uint64_t deadline);
int kr_recv(int fd, void *buf, size_t len, int flags, size_t *got);
int kr_recv_until(int fd, void *buf, size_t len, int flags, size_t *got, uint64_t deadline);
int kr_send(int fd, const void *buf, size_t len, int flags, size_t *done);
int kr_send_until(int fd, const void *buf, size_t len, int flags, size_t *done, uint64_t deadline);
/* flags as accept4's (SOCK_CLOEXEC, SOCK_NONBLOCK); the new fd in *newfd.
 * EINVAL: one of addr and addrlen NULL but not the other, other flags. */
int kr_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags, int *newfd);
int kr_accept_until(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags, int *newfd,
		    uint64_t deadline);
int kr_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);
int kr_connect_until(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t deadline);
/* Wait until fd has one of `events` (POLLIN, POLLOUT, ...; EINVAL: 0):
 * *revents receives what it has, which may include POLLERR and POLLHUP. */
int kr_poll(int fd, short events, short *revents);
int kr_poll_until(int fd, short events, short *revents, uint64_t deadline);

/* Write all of buf (kr_write until done).  *done (may be NULL, unlike
 * kr_write's) receives how many bytes went out, on an error too: those
 * before it did. */
int kr_write_all(int fd, const void *buf, size_t len, size_t *done);
int kr_write_all_until(int fd, const void *buf, size_t len, size_t *done, uint64_t deadline);

/* EBADF: fd < 0; kr_close also returns close()'s own error. */
int kr_io_cancel(int fd);
int kr_close(int fd);

/* "io_uring" or "epoll": the back end in use (chosen now if none is yet);
 * NULL when neither could start (then every call returns that error). */
const char *kr_io_backend(void);

/* What the back end in use does, for code that must know (0 when none
 * could start).  KR_IO_KEEPS_FD_FLAGS: a call that waits on a pipe or a
 * socket leaves the file's status flags as they are; without it (epoll)
 * the first such call makes the file O_NONBLOCK, for every process that
 * shares the open file. */
enum { KR_IO_KEEPS_FD_FLAGS = 1u << 0 };
unsigned kr_io_features(void);

#ifdef __cplusplus
}
#endif
#endif
