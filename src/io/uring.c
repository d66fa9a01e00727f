/*
 * karui L3 io — the io_uring back end.
 *
 * One ring for the process.  A call fills a submission entry (two with a
 * deadline: the request and a linked timeout) under `sq_lock`, with
 * user_data pointing at a completion record on the caller's stack, and the
 * caller sleeps until the record is marked done.  Nothing enters the
 * kernel at that point: queued entries are submitted together by the next
 * poll (every 8th scheduling point of a busy VP, every round of an idle
 * loop) or by the idle VP's wait, which submits and waits in one
 * io_uring_enter.  So a VP serving many connections makes one system call
 * per round, not one per request.  Under the lock only liburing's
 * user-space tail moves; the io_uring_enter calls themselves run unlocked
 * (the kernel serialises them).
 *
 * Completions are reaped by whoever holds `cq_lock` (a trylock: a VP that
 * finds another reaping moves on).  For each: read the record's mp, store
 * the result, mark it done (release), kr_wakeup(mp): the record is not
 * touched after the mark, as the caller may already have returned.
 * Entries with user_data 0 (timeouts, kicks, cancels) carry nothing.
 *
 * Kick (another VP made work while the poller waits): a NOP submitted at
 * once; its completion ends the wait.  Cancel: IORING_OP_ASYNC_CANCEL by
 * fd, submitted at once, so it matches what is in flight now and never a
 * later fd of the same number; a cancelled microprocess (kr_mp_cancel)
 * cancels its own request the same way, by its user_data.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "karui/ctx.h"
#include "io_internal.h"

#define RING_ENTRIES 2048

static struct {
	struct io_uring ring;
	kr_spin sq_lock;
	kr_spin cq_lock;
} U;

struct done {
	kr_mp *mp;
	uint32_t done;          /* atomic */
	int res;
	struct __kernel_timespec ts;    /* the linked timeout's, read at submit */
};

static const int needed_ops[] = {
	IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READV, IORING_OP_WRITEV,
	IORING_OP_RECV, IORING_OP_SEND, IORING_OP_ACCEPT, IORING_OP_CONNECT,
	IORING_OP_POLL_ADD, IORING_OP_LINK_TIMEOUT, IORING_OP_ASYNC_CANCEL, IORING_OP_NOP,
};

/* Make queued entries visible to the kernel (sq_lock held); how many the
 * kernel has not consumed yet. */
static unsigned sq_flush(void)
{
	struct io_uring_sq *sq = &U.ring.sq;
	unsigned tail = sq->sqe_tail;
	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	return tail - io_uring_smp_load_acquire(sq->khead);
}

/* n free entries (sq_lock held): submit what is queued if there is no room. */
static struct io_uring_sqe *sqe_get(unsigned n)
{
	while (io_uring_sq_space_left(&U.ring) < n) {
		unsigned q = sq_flush();
		if (q)
			io_uring_enter(U.ring.ring_fd, q, 0, 0, NULL);
	}
	return io_uring_get_sqe(&U.ring);
}

static void reap(void)
{
	if (!kr_spin_trylock(&U.cq_lock))
		return;
	if (io_uring_cq_has_overflow(&U.ring))
		io_uring_get_events(&U.ring);
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_for_each_cqe(&U.ring, head, cqe) {
		struct done *d = (struct done *)(uintptr_t)cqe->user_data;
		n++;
		if (!d)
			continue;
		kr_mp *mp = d->mp;
		d->res = cqe->res;
		__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
		kr_wakeup(mp);
	}
	io_uring_cq_advance(&U.ring, n);
	kr_spin_unlock(&U.cq_lock);
}

static void submit_queued(void)
{
	if (U.ring.sq.sqe_head == __atomic_load_n(&U.ring.sq.sqe_tail, __ATOMIC_RELAXED))
		return;
	kr_spin_lock(&U.sq_lock);
	unsigned q = sq_flush();
	kr_spin_unlock(&U.sq_lock);
	if (q)
		io_uring_enter(U.ring.ring_fd, q, 0, 0, NULL);
}

static void u_poll(void *arg)
{
	(void)arg;
	submit_queued();
	if (io_uring_cq_ready(&U.ring) || io_uring_cq_has_overflow(&U.ring))
		reap();
}

static void u_wait(void *arg, uint64_t usec)
{
	(void)arg;
	kr_spin_lock(&U.sq_lock);
	unsigned q = sq_flush();
	kr_spin_unlock(&U.sq_lock);
	if (!io_uring_cq_ready(&U.ring)) {
		struct __kernel_timespec ts = {.tv_sec = (long long)(usec / 1000000),
					       .tv_nsec = (long long)(usec % 1000000) * 1000};
		struct io_uring_getevents_arg ga = {
			.ts = usec == UINT64_MAX ? 0 : (uint64_t)(uintptr_t)&ts};
		io_uring_enter2(U.ring.ring_fd, q, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
				(sigset_t *)&ga, sizeof ga);
	} else if (q) {
		io_uring_enter(U.ring.ring_fd, q, 0, 0, NULL);
	}
	reap();
}

/* Put one entry with user_data 0 in the ring and submit at once. */
static void submit_now(void (*prep)(struct io_uring_sqe *, uintptr_t), uintptr_t arg)
{
	kr_spin_lock(&U.sq_lock);
	struct io_uring_sqe *sqe = sqe_get(1);
	prep(sqe, arg);
	io_uring_sqe_set_data64(sqe, 0);
	unsigned q = sq_flush();
	kr_spin_unlock(&U.sq_lock);
	io_uring_enter(U.ring.ring_fd, q, 0, 0, NULL);
}

static void prep_nop(struct io_uring_sqe *sqe, uintptr_t unused)
{
	(void)unused;
	io_uring_prep_nop(sqe);
}

static void prep_cancel_fd(struct io_uring_sqe *sqe, uintptr_t fd)
{
	io_uring_prep_cancel_fd(sqe, (int)fd, IORING_ASYNC_CANCEL_ALL);
}

/* The request whose completion record is `d`. */
static void prep_cancel_req(struct io_uring_sqe *sqe, uintptr_t d)
{
	io_uring_prep_cancel64(sqe, d, 0);
}

static void u_kick(void *arg)
{
	(void)arg;
	submit_now(prep_nop, 0);
}

static void u_fini(void *arg)
{
	(void)arg;
	io_uring_queue_exit(&U.ring);
	kr__io_stopped();
}

static int u_init(kr_poller *p)
{
	memset(&U, 0, sizeof U);
	struct io_uring_params par = {0};
	int err = io_uring_queue_init_params(RING_ENTRIES, &U.ring, &par);
	if (err)
		return -err;
	struct io_uring_probe *pr = io_uring_get_probe_ring(&U.ring);
	int ok = pr && (par.features & IORING_FEAT_EXT_ARG) && (par.features & IORING_FEAT_NODROP);
	for (size_t i = 0; ok && i < sizeof needed_ops / sizeof needed_ops[0]; i++)
		ok = io_uring_opcode_supported(pr, needed_ops[i]);
	io_uring_free_probe(pr);
	if (!ok) {
		io_uring_queue_exit(&U.ring);
		return ENOSYS;
	}
	*p = (kr_poller){.poll = u_poll, .wait = u_wait, .kick = u_kick, .fini = u_fini};
	return 0;
}

static long u_run(struct kr_ioreq *r)
{
	/* A send almost always fits in the socket buffer: try it at once, as
	 * one system call, rather than park until the next submission. */
	if (r->op == IO_SEND) {
		ssize_t n = send(r->fd, r->buf, r->len, r->flags | MSG_DONTWAIT);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
	}
	struct done d = {.mp = kr_self()};
	int timed = r->deadline != KR_IO_FOREVER;
	kr_spin_lock(&U.sq_lock);
	struct io_uring_sqe *sqe = sqe_get(timed ? 2 : 1);
	switch (r->op) {
	case IO_READ:
		io_uring_prep_read(sqe, r->fd, r->buf, (unsigned)(r->len > UINT32_MAX ? UINT32_MAX : r->len), -1);
		break;
	case IO_WRITE:
		io_uring_prep_write(sqe, r->fd, r->buf, (unsigned)(r->len > UINT32_MAX ? UINT32_MAX : r->len), -1);
		break;
	case IO_READV:
		io_uring_prep_readv(sqe, r->fd, r->iov, (unsigned)r->iovcnt, -1);
		break;
	case IO_WRITEV:
		io_uring_prep_writev(sqe, r->fd, r->iov, (unsigned)r->iovcnt, -1);
		break;
	case IO_RECV:
		io_uring_prep_recv(sqe, r->fd, r->buf, r->len, r->flags);
		break;
	case IO_SEND:
		io_uring_prep_send(sqe, r->fd, r->buf, r->len, r->flags);
		break;
	case IO_ACCEPT:
		io_uring_prep_accept(sqe, r->fd, r->addr, r->addrlen, r->flags);
		break;
	case IO_CONNECT:
		io_uring_prep_connect(sqe, r->fd, r->addr, r->alen);
		break;
	case IO_POLL:
		io_uring_prep_poll_add(sqe, r->fd, (unsigned)(unsigned short)r->events);
		break;
	}
	io_uring_sqe_set_data(sqe, &d);
	if (timed) {
		d.ts.tv_sec = (long long)(r->deadline / 1000000000u);
		d.ts.tv_nsec = (long long)(r->deadline % 1000000000u);
		sqe->flags |= IOSQE_IO_LINK;
		struct io_uring_sqe *t = io_uring_get_sqe(&U.ring);
		io_uring_prep_link_timeout(t, &d.ts, IORING_TIMEOUT_ABS);
		io_uring_sqe_set_data64(t, 0);
	}
	kr_spin_unlock(&U.sq_lock);
	/* A late wakeup from elsewhere can end a sleep early: loop on `done`.
	 * A cancel of the caller cancels the request, which then completes
	 * with -ECANCELED, or with its result if it was too late for that;
	 * then the cancel stays pending for the next wait. */
	int cancelled = 0;
	while (!__atomic_load_n(&d.done, __ATOMIC_ACQUIRE)) {
		if (cancelled) {
			kr_sleep();
		} else if (kr_sleep_cancellable(UINT64_MAX) == ECANCELED) {
			cancelled = 1;
			submit_now(prep_cancel_req, (uintptr_t)&d);
		}
	}
	if (cancelled && d.res != -ECANCELED)
		kr_mp_cancel(d.mp);
	if (d.res == -ECANCELED && timed && !cancelled && kr_now() >= r->deadline)
		return -ETIMEDOUT;
	return d.res;
}

static int u_cancel(int fd)
{
	submit_now(prep_cancel_fd, (uintptr_t)fd);
	return 0;
}

static void u_forget(int fd)
{
	u_cancel(fd);
}

const struct kr_iobackend kr__io_uring = {
	.name = "io_uring",
	.init = u_init,
	.run = u_run,
	.cancel = u_cancel,
	.forget = u_forget,
};
