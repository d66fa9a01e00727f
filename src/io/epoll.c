/*
 * karui L3 io — the epoll back end (when io_uring is not available).
 *
 * A call is tried at once without blocking (O_NONBLOCK on the fd, set when
 * karui first sees it; MSG_DONTWAIT for recv/send).  On EAGAIN the caller
 * waits for the fd to become readable or writable and tries again.
 *
 * Per fd, a record (two-level table by fd number) holds a spin lock, a
 * readiness sequence number per direction and the waiters of each
 * direction (sync/wait.h's waiter, on the caller's stack).  The fd is
 * registered once, edge-triggered, for both directions.  The poller, for
 * each event, bumps the sequence of each direction it reports and takes
 * that direction's waiters out, under the lock, then wakes them.  A caller
 * reads the sequence *before* its attempt and queues itself only if it is
 * unchanged, under the same lock: an edge that came after the attempt has
 * bumped it, so the caller tries again instead of sleeping through it.
 *
 * The poller: busy VPs look (epoll_wait, no timeout) at most every 50 µs
 * and only while someone waits; an idle VP waits in epoll_wait.  A kick is
 * a write to an eventfd in the epoll set.
 *
 * Regular files (epoll refuses them) are always "ready": the call is made
 * as it is, inside kr_blocking_begin/end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_internal.h"
#include "../sync/wait.h"

#define CHUNK 4096
#define NCHUNKS 1024            /* fds up to 4M */

enum { REG_NONE = 0, REG_EPOLL, REG_PLAIN /* epoll refused it */ };

struct fdrec {
	kr_spin lock;
	uint32_t reg;           /* REG_*: written under lock */
	uint32_t seq[2];        /* readiness edges seen: read, write */
	kr_waitq q[2];          /* waiters: read, write */
};

static struct {
	int ep, efd;
	struct fdrec *tab[NCHUNKS];
	kr_spin tab_lock;
	uint32_t waiting;       /* microprocesses queued (atomic) */
	uint64_t last_poll;     /* kr_now() of the last busy look */
} E;

static struct fdrec *rec_get(int fd)
{
	unsigned c = (unsigned)fd / CHUNK;
	if (c >= NCHUNKS)
		return NULL;
	struct fdrec *t = __atomic_load_n(&E.tab[c], __ATOMIC_ACQUIRE);
	if (!t) {
		kr__spin_lock(&E.tab_lock);
		if (!(t = E.tab[c])) {
			t = calloc(CHUNK, sizeof *t);
			__atomic_store_n(&E.tab[c], t, __ATOMIC_RELEASE);
		}
		kr__spin_unlock(&E.tab_lock);
		if (!t)
			return NULL;
	}
	return &t[(unsigned)fd % CHUNK];
}

/* Register fd on first use: 0, or a negative errno code. */
static int rec_register(struct fdrec *r, int fd)
{
	if (__atomic_load_n(&r->reg, __ATOMIC_ACQUIRE) != REG_NONE)
		return 0;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.ptr = r};
	uint32_t reg = REG_EPOLL;
	if (epoll_ctl(E.ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		if (errno == EPERM)
			reg = REG_PLAIN;
		else if (errno != EEXIST || epoll_ctl(E.ep, EPOLL_CTL_MOD, fd, &ev) != 0)
			return -errno;
	}
	if (reg == REG_EPOLL && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return -errno;
	__atomic_store_n(&r->reg, reg, __ATOMIC_RELEASE);
	return 0;
}

static void serve(struct fdrec *r, uint32_t ev)
{
	kr_waitq woken[2] = {{0}};
	kr__spin_lock(&r->lock);
	if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		__atomic_fetch_add(&r->seq[0], 1, __ATOMIC_RELEASE);
		woken[0] = wq_take_all(&r->q[0]);
	}
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
		__atomic_fetch_add(&r->seq[1], 1, __ATOMIC_RELEASE);
		woken[1] = wq_take_all(&r->q[1]);
	}
	kr__spin_unlock(&r->lock);
	/* (taken, not yet woken: each waiter waits on) */
	for (int d = 0; d < 2; d++)
		for (struct kr_waiter *w = woken[d].head; w; w = w->next)
			kr__mp_io_done(w->mp);
	wq_wake_all(&woken[0], 0);
	wq_wake_all(&woken[1], 0);
}

/* Serve what epoll reports.  A kick is for the VP waiting in epoll_wait
 * (e_wait): a busy VP's look (e_poll) leaves the eventfd readable, or it
 * would take the kick from under a waiter that has been woken but not yet
 * looked (which then sleeps on, with work queued for it). */
static void drain(int timeout_ms, int waiter)
{
	struct epoll_event evs[128];
	int n = epoll_wait(E.ep, evs, 128, timeout_ms);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.ptr) {
			serve(evs[i].data.ptr, evs[i].events);
		} else if (waiter) {
			uint64_t v;
			ssize_t ignored = read(E.efd, &v, sizeof v);
			(void)ignored;
		}
	}
}

static void e_poll(void *arg)
{
	(void)arg;
	if (!__atomic_load_n(&E.waiting, __ATOMIC_RELAXED))
		return;
	uint64_t now = kr_now();
	if (now - __atomic_load_n(&E.last_poll, __ATOMIC_RELAXED) < 50000)
		return;
	__atomic_store_n(&E.last_poll, now, __ATOMIC_RELAXED);
	drain(0, 0);
}

static void e_wait(void *arg, uint64_t deadline)
{
	(void)arg;
	if (deadline == KR_FOREVER) {
		drain(-1, 1);
		return;
	}
	uint64_t now = kr_now(), ms = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
	drain(ms >= INT_MAX ? INT_MAX : (int)ms, 1);
}

static void e_kick(void *arg)
{
	(void)arg;
	uint64_t one = 1;
	ssize_t ignored = write(E.efd, &one, sizeof one);
	(void)ignored;
}

static void e_fini(void *arg)
{
	(void)arg;
	close(E.ep);
	close(E.efd);
	for (unsigned i = 0; i < NCHUNKS; i++)
		free(E.tab[i]);
	kr__io_stopped();
}

/* In the child of a fork: the epoll set is the parent's too; close the
 * child's fds, changing nothing in it. */
static void e_forked(void)
{
	close(E.ep);
	close(E.efd);
	for (unsigned i = 0; i < NCHUNKS; i++)
		free(E.tab[i]);
	memset(&E, 0, sizeof E);
}

static int e_init(kr_poller *p)
{
	memset(&E, 0, sizeof E);
	E.ep = epoll_create1(EPOLL_CLOEXEC);
	if (E.ep < 0)
		return errno;
	E.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (E.efd < 0 || epoll_ctl(E.ep, EPOLL_CTL_ADD, E.efd, &ev) != 0) {
		int err = errno;
		close(E.ep);
		if (E.efd >= 0)
			close(E.efd);
		return err;
	}
	*p = (kr_poller){.poll = e_poll, .wait = e_wait, .kick = e_kick, .fini = e_fini};
	return 0;
}

/* One attempt that does not block: the result, or -EAGAIN. */
static long attempt(struct kr_ioreq *r)
{
	long n;
	switch (r->op) {
	case IO_READ: n = read(r->fd, r->buf, r->len); break;
	case IO_WRITE:
		kr__io_nosigpipe();
		n = write(r->fd, r->buf, r->len);
		break;
	case IO_READV: n = readv(r->fd, r->iov, r->iovcnt); break;
	case IO_WRITEV:
		kr__io_nosigpipe();
		n = writev(r->fd, r->iov, r->iovcnt);
		break;
	case IO_RECV: n = recv(r->fd, r->buf, r->len, r->flags | MSG_DONTWAIT); break;
	case IO_SEND: n = send(r->fd, r->buf, r->len, r->flags | MSG_DONTWAIT); break;
	case IO_ACCEPT: n = accept4(r->fd, r->addr, r->addrlen, r->flags); break;
	case IO_CONNECT:
		if (r->alen) { /* first time: start it */
			n = connect(r->fd, r->addr, r->alen);
			r->alen = 0;
			if (n != 0 && errno == EINPROGRESS)
				return -EAGAIN;
		} else { /* writable again: how did it end? */
			int e = 0;
			socklen_t l = sizeof e;
			struct pollfd pf = {.fd = r->fd, .events = POLLOUT};
			if (poll(&pf, 1, 0) == 0)
				return -EAGAIN;
			if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0)
				return -errno;
			return -e;
		}
		break;
	case IO_POLL: {
		struct pollfd pf = {.fd = r->fd, .events = r->events};
		n = poll(&pf, 1, 0);
		if (n == 0)
			return -EAGAIN;
		if (n > 0)
			return pf.revents;
		break;
	}
	default: return -EINVAL;
	}
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

/* Which directions a blocked call waits for: bit 0 read, bit 1 write. */
static unsigned dirs(const struct kr_ioreq *r)
{
	switch (r->op) {
	case IO_READ: case IO_READV: case IO_RECV: case IO_ACCEPT: return 1;
	case IO_POLL:
		return ((r->events & (POLLIN | POLLPRI | POLLRDHUP)) ? 1u : 0u) |
		       ((r->events & POLLOUT) ? 2u : 0u);
	default: return 2;
	}
}

/* Wait until an edge in one of `want` directions after `seen`: 0, or
 * -ETIMEDOUT / -ECANCELED / -ENOMEM. */
static int wait_ready(struct fdrec *r, unsigned want, const uint32_t seen[2], uint64_t deadline)
{
	struct kr_waiter w[2] = {{.mp = kr__self()}, {.mp = kr__self()}};
	kr__spin_lock(&r->lock);
	for (int d = 0; d < 2; d++)
		if ((want >> d & 1) && __atomic_load_n(&r->seq[d], __ATOMIC_RELAXED) != seen[d]) {
			kr__spin_unlock(&r->lock);
			return 0;
		}
	for (int d = 0; d < 2; d++)
		if (want >> d & 1)
			wq_push(&r->q[d], &w[d]);
	__atomic_fetch_add(&E.waiting, 1, __ATOMIC_RELAXED);
	kr__spin_unlock(&r->lock);
	/* Done when either node is served; then take the other one out. */
	int status = 0, cancellable = 1;
	for (;;) {
		int d0 = (want & 1) && __atomic_load_n(&w[0].state, __ATOMIC_ACQUIRE) == W_DONE;
		int d1 = (want & 2) && __atomic_load_n(&w[1].state, __ATOMIC_ACQUIRE) == W_DONE;
		if (d0 || d1) {
			status = d0 ? w[0].status : w[1].status;
			break;
		}
		int err = kr__park_for(KR_WHY_IO, cancellable, deadline);
		if (err) {
			kr__spin_lock(&r->lock);
			int still = 1;
			/* a node taken meanwhile is marked again, outside the
			 * lock, by wq_wake_all: atomic loads */
			for (int d = 0; d < 2; d++)
				if ((want >> d & 1) &&
				    __atomic_load_n(&w[d].state, __ATOMIC_RELAXED) != W_WAITING)
					still = 0;
			if (still) {
				for (int d = 0; d < 2; d++)
					if (want >> d & 1)
						wq_remove(&r->q[d], &w[d]);
				kr__spin_unlock(&r->lock);
				__atomic_fetch_sub(&E.waiting, 1, __ATOMIC_RELAXED);
				return -err;
			}
			kr__spin_unlock(&r->lock);
			/* being served: wait for it, keeping a cancel for later */
			if (err == ECANCELED)
				kr_mp_cancel(w[0].mp);
			deadline = KR_FOREVER;
			cancellable = 0;
		}
	}
	/* the other direction's node, if it is still queued */
	if (want == 3) {
		kr__spin_lock(&r->lock);
		for (int d = 0; d < 2; d++)
			if (__atomic_load_n(&w[d].state, __ATOMIC_RELAXED) == W_WAITING)
				wq_remove(&r->q[d], &w[d]);
		kr__spin_unlock(&r->lock);
		/* a server may be between taking it out and waking it */
		for (int d = 0; d < 2; d++)
			while (__atomic_load_n(&w[d].state, __ATOMIC_ACQUIRE) == W_MOVED)
				kr_cpu_relax();
	}
	__atomic_fetch_sub(&E.waiting, 1, __ATOMIC_RELAXED);
	return -status;
}

static long e_run(struct kr_ioreq *r)
{
	struct fdrec *rec = rec_get(r->fd);
	if (!rec)
		return -ENOMEM;
	int err = rec_register(rec, r->fd);
	if (err)
		return err;
	/* atomic: another VP may be registering fd at the same time */
	if (__atomic_load_n(&rec->reg, __ATOMIC_RELAXED) == REG_PLAIN) {
		kr_blocking_begin();
		long n = attempt(r);
		kr_blocking_end();
		return n;
	}
	unsigned want = dirs(r);
	for (;;) {
		uint32_t seen[2] = {__atomic_load_n(&rec->seq[0], __ATOMIC_ACQUIRE),
				    __atomic_load_n(&rec->seq[1], __ATOMIC_ACQUIRE)};
		long n = attempt(r);
		if (n != -EAGAIN)
			return n;
		if (r->deadline != KR_FOREVER && kr_now() >= r->deadline)
			return -ETIMEDOUT;
		if ((err = wait_ready(rec, want, seen, r->deadline)) != 0)
			return err;
	}
}

static int e_cancel(int fd)
{
	struct fdrec *r = rec_get(fd);
	if (!r)
		return -EBADF;
	kr_waitq woken[2];
	kr__spin_lock(&r->lock);
	for (int d = 0; d < 2; d++)
		woken[d] = wq_take_all(&r->q[d]);
	kr__spin_unlock(&r->lock);
	wq_wake_all(&woken[0], ECANCELED);
	wq_wake_all(&woken[1], ECANCELED);
	return 0;
}

static void e_forget(int fd)
{
	struct fdrec *r = rec_get(fd);
	if (!r)
		return;
	if (__atomic_load_n(&r->reg, __ATOMIC_ACQUIRE) == REG_EPOLL)
		epoll_ctl(E.ep, EPOLL_CTL_DEL, fd, NULL);
	__atomic_store_n(&r->reg, REG_NONE, __ATOMIC_RELEASE);
	e_cancel(fd);
}

const struct kr_iobackend kr__io_epoll = {
	.name = "epoll",
	.features = 0, /* a wait makes the fd O_NONBLOCK */
	.init = e_init,
	.run = e_run,
	.cancel = e_cancel,
	.forget = e_forget,
	.forked = e_forked,
};
