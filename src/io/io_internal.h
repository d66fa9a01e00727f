/*
 * karui L3 io — what the front (io.c) hands a back end (uring.c, epoll.c).
 */
#ifndef KARUI_IO_INTERNAL_H
#define KARUI_IO_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "karui/io.h"
#include "karui/sched.h"

enum kr_ioop {
	IO_READ, IO_WRITE, IO_READV, IO_WRITEV, IO_RECV, IO_SEND,
	IO_ACCEPT, IO_CONNECT, IO_POLL,
};

/* One call, as the caller made it. */
struct kr_ioreq {
	int op;                 /* enum kr_ioop */
	int fd;
	int flags;              /* recv/send flags, accept4 flags */
	short events;           /* poll */
	void *buf;              /* read/write/recv/send */
	size_t len;
	const struct iovec *iov;/* readv/writev */
	int iovcnt;
	struct sockaddr *addr;  /* accept (out), connect (in) */
	socklen_t *addrlen;     /* accept */
	socklen_t alen;         /* connect */
	uint64_t deadline;
};

struct kr_iobackend {
	const char *name;
	unsigned features;                      /* KR_IO_* (io.h) */
	/* 0 or a positive errno code; sets *poller */
	int (*init)(kr_poller *poller);
	long (*run)(struct kr_ioreq *r);        /* on a VP */
	int (*cancel)(int fd);                  /* 0 or negative errno */
	void (*forget)(int fd);                 /* fd is about to be closed */
	/* in the child of a fork: let go of the child's copies of the
	 * kernel objects, touching nothing that the parent shares */
	void (*forked)(void);
};

extern const struct kr_iobackend kr__io_uring, kr__io_epoll;

/* Errors of a set-up that may succeed later: no fd or memory left.  A
 * back end or ring that meets one is tried again at a later call. */
static inline int kr__io_transient(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM;
}

/* A back end's poller fini ends with this: the next call starts afresh.
 * It runs on the thread that called kr_init. */
void kr__io_stopped(void);

/* SIGPIPE.  A write to a pipe or socket whose other end is gone sends the
 * writing thread SIGPIPE, which by default ends the process.  karui's
 * calls return EPIPE instead, on every VP: the threads that make the
 * kernel calls (a ring's VP, the VP of an epoll attempt) have SIGPIPE
 * blocked, and the kernel then leaves it pending, harmlessly.  VPs that
 * kr_vp_allocate starts block every signal already; on the thread that
 * called kr_init (or another adopted one) karui blocks it before its first
 * such write, and kr__io_stopped drains it and unblocks it again.
 * Rejected: blocking and unblocking around each write (two system calls
 * on the fast path, and an io_uring write runs later, in its VP's ring);
 * MSG_NOSIGNAL, which pipes and plain write() on sockets do not take. */
extern _Thread_local int kr__io_sigpipe; /* 0: not seen; 1: blocked by karui; 2: was */
void kr__io_block_sigpipe(void);
static inline void kr__io_nosigpipe(void)
{
	if (__builtin_expect(!kr__io_sigpipe, 0))
		kr__io_block_sigpipe();
}

#endif
