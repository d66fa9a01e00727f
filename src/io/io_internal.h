/*
 * karui L3 io — what the front (io.c) hands a back end (uring.c, epoll.c).
 */
#ifndef KARUI_IO_INTERNAL_H
#define KARUI_IO_INTERNAL_H

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
	/* 0 or a positive errno code; sets *poller */
	int (*init)(kr_poller *poller);
	long (*run)(struct kr_ioreq *r);        /* on a VP */
	int (*cancel)(int fd);                  /* 0 or negative errno */
	void (*forget)(int fd);                 /* fd is about to be closed */
};

extern const struct kr_iobackend kr__io_uring, kr__io_epoll;

/* A back end's poller fini ends with this: the next call starts afresh. */
void kr__io_stopped(void);

#endif
