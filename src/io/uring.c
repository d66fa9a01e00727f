/*
 * karui L3 io — the io_uring back end.
 *
 * A ring per VP, set up by the VP itself with IORING_SETUP_SINGLE_ISSUER |
 * DEFER_TASKRUN: only that VP submits to it and reaps it, so nothing here
 * takes a lock.  Why: a completion is task work that the kernel runs on
 * the thread that submitted the request.  With one ring shared by all VPs
 * (karui's first design) that thread was usually running elsewhere and was
 * interrupted at once (an IPI per completion, which cost HTTP servers
 * much of their throughput; figures:
 * docs/notes/2026-11-25-measurements.md).  Deferred task
 * work waits until the VP asks for its completions, at a point it chooses.
 *
 * A call fills a submission entry in its VP's ring (two with a deadline:
 * the request and a linked timeout), with user_data pointing at a
 * completion record on the caller's stack, and the caller sleeps until the
 * record is marked done.  Nothing enters the kernel then (reads of files
 * aside, below): the VP's next poll (every 8th scheduling point of a busy
 * VP, every round of the idle loop) or wait submits what is queued and
 * collects the completions in one io_uring_enter, and only if there is
 * something to submit or the kernel flagged completions
 * (IORING_SQ_TASKRUN).  For each completion: read the
 * record's mp, store the result, mark it done (release), kr_mp_unpark(mp); the
 * record is not touched after the mark.
 *
 * Reads of files.  A read of a regular file whose pages are cached
 * completes inside the io_uring_enter that submits it (the kernel tries it
 * without waiting first), so waiting for the next poll only cost a park, a
 * switch and a wakeup.  So a read or readv is submitted at once, by the
 * VP's poll run there and then (kr__poll_now: other microprocesses'
 * completions that it collects are handled as at any poll), and the
 * caller looks for its completion before it parks (the record has no mp
 * meanwhile: nothing wakes a microprocess that runs); one that is not done
 * (a file read from disk) waits as any other.  The same request as before,
 * only sooner: results, short counts at the end of file and errors are the
 * kernel's as they were.  Reads of sockets, pipes and other pollable fds
 * keep being batched: the first read of an fd that does not complete at
 * once looks at what the fd is (fstat), and the fd table keeps the answer
 * until the fd's next kr_io_cancel or kr_close (its cancel generation).
 * An fd closed with close(2) and reused keeps the old answer, which is
 * only slower (a file's reads batched, a socket's submitted one by one).
 *
 * An idle VP waits in its ring for a completion, its timers' deadline, or
 * an L0 wakeup: a FUTEX_WAIT request on L0's futex word (kr_vp_sleep_begin)
 * stays queued in the ring, so kr_vp_wakeup wakes ring waiters and L0
 * sleepers alike.  When the VP wakes for another reason, the request stays
 * queued for its next sleep, and L0 counts it meanwhile (kr_vp_sleep_end
 * with queued), so that wakeups go past it.
 *
 * Across VPs.  A microprocess may run on another VP by the time it wants
 * its request cancelled (kr_mp_cancel): the cancel is a message
 * (IORING_OP_MSG_RING) to the ring that holds the request, whose VP
 * submits it.  kr_io_cancel and kr_close: a table counts the requests in
 * flight per fd, and an fd with none (the common case) costs nothing;
 * otherwise every ring cancels by fd and the caller waits until all have
 * (so a close cannot let a later fd of the same number be cancelled).  A
 * request on its way to another ring (its VP left, see below) that the
 * cancel may have missed cancels itself once resubmitted: it sees the
 * fd's cancel generation move.
 *
 * Leaving.  A VP about to enter a blocking call or to park as a spare
 * cancels what its ring holds; the callers of requests cancelled that way
 * submit them again on the VP they run on next.  Requests on sockets and
 * pipes are cancelled at once; for those the kernel's workers are running
 * (a regular file), which end soon either way, the VP waits up to 100 ms
 * (LEAVE_WAIT_NS); what is left after that completes when the VP is back
 * (and a kr_io_cancel meanwhile does not reach it).  The ring is then
 * `away`: it cannot answer a kr_io_cancel's message until its VP is back,
 * which may be never if the blocking call waits for that cancel, so a
 * cancel skips it, and one that had sent a message before is answered
 * before the VP goes.
 * A microprocess that runs long without a scheduling point holds back its
 * VP's completions the same way (docs/limits.md).
 *
 * Needs Linux 6.7 (FUTEX_WAIT in io_uring); without it, epoll.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "karui/vp.h"
#include "io_internal.h"
#include "../core/trace.h" /* kr__poll_now, the parks' reasons */

/* ThreadSanitizer cannot see the kernel carry a message from one ring to
 * another (IORING_OP_MSG_RING), nor so the order it gives: what the
 * sender wrote to the record a message points at (struct xcancel) comes
 * before the receiving VP reads it.  So the sender declares a release on
 * the record before it submits the message, and the receiver an acquire
 * before it reads the record.  (A request's own completion needs nothing:
 * the VP that made it reaps it, on the same thread.) */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define MSG_SENT(p) __tsan_release(p)
#define MSG_TAKEN(p) __tsan_acquire(p)
#else
#define MSG_SENT(p) ((void)0)
#define MSG_TAKEN(p) ((void)0)
#endif

#define RING_ENTRIES 1024
#define LEAVE_WAIT_NS 100000000ull  /* u_leave: 100 ms at most */
#define FD_TABLE_MAX (1u << 22)  /* fds past it are always cancelled everywhere */

/* Not in every liburing's headers yet: the kernel's values. */
#ifndef IORING_OP_FUTEX_WAIT
#define IORING_OP_FUTEX_WAIT 51
#endif
#define KR_FUTEX2_U32_PRIVATE (0x02 | 128)  /* FUTEX2_SIZE_U32 | FUTEX2_PRIVATE */

/* user_data: a pointer (8-aligned) and what it points at in the low bits */
enum { T_REQ, T_FUTEX, T_CANCEL_REQ, T_CANCEL_FD, T_ACK, T_MASK = 7 };
#define RETRY INT_MIN   /* a request cancelled by its VP's leave */

struct ring {
	struct io_uring io;
	uint32_t reqs;          /* requests with a record in flight (atomic:
				 * other VPs read it, only the owner writes) */
	int futex_armed;        /* a FUTEX_WAIT is queued */
	int sleeping;           /* in u_wait, between kr_vp_sleep_begin and _end */
	int leaving;            /* in u_leave: ECANCELED means "move" */
	uint32_t away;          /* its VP has left (u_leave) and not looked at
				 * it since: it answers no message (atomic) */
};

struct fdslot {
	uint32_t inflight;      /* requests on this fd, every ring */
	uint32_t gen;           /* kr_io_cancel / kr_close of this fd */
	uint32_t kind;          /* gen << 2 | FD_*: what a read found fd to be
				 * under that gen; another gen: not known */
};

enum { FD_FILE = 1, FD_POLLED = 2 };

static struct {
	struct ring *r[KR_VP_MAX];      /* by VP id; atomic pointers */
	int fail[KR_VP_MAX];            /* why the VP has no ring */
	struct fdslot *fds;
	size_t nfds;
	uint32_t cancelling;            /* kr_io_cancel calls waiting for rings */
} U;

struct done {
	kr_mp *mp;
	struct ring *ring;
	struct fdslot *slot;
	uint32_t done;          /* atomic */
	int res;
	struct __kernel_timespec ts;    /* the linked timeout's, read at submit */
};

/* kr_io_cancel / kr_close across the rings */
struct xcancel {
	kr_mp *mp;
	int fd;
	uint32_t pending;       /* rings yet to cancel */
};

static const int needed_ops[] = {
	IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READV, IORING_OP_WRITEV,
	IORING_OP_RECV, IORING_OP_SEND, IORING_OP_ACCEPT, IORING_OP_CONNECT,
	IORING_OP_POLL_ADD, IORING_OP_LINK_TIMEOUT, IORING_OP_ASYNC_CANCEL,
	IORING_OP_MSG_RING, IORING_OP_FUTEX_WAIT,
};

static int ring_setup(struct io_uring *io)
{
	struct io_uring_params par = {.flags = IORING_SETUP_SINGLE_ISSUER |
					       IORING_SETUP_DEFER_TASKRUN |
					       IORING_SETUP_TASKRUN_FLAG};
	int err = io_uring_queue_init_params(RING_ENTRIES, io, &par);
	if (err)
		return -err;
	struct io_uring_probe *pr = io_uring_get_probe_ring(io);
	int ok = pr && (par.features & IORING_FEAT_EXT_ARG) && (par.features & IORING_FEAT_NODROP);
	for (size_t i = 0; ok && i < sizeof needed_ops / sizeof needed_ops[0]; i++)
		ok = io_uring_opcode_supported(pr, needed_ops[i]);
	io_uring_free_probe(pr);
	if (!ok) {
		io_uring_queue_exit(io);
		return ENOSYS;
	}
	return 0;
}

/* The calling VP's ring, set up on first use; NULL off a VP or when it
 * could not be (why: U.fail).  A set-up that failed for want of fds or
 * memory (kr__io_transient) is tried again when `retry` is set, as it is
 * for the calls of io.h: each call from such a VP tries once (one failing
 * io_uring_setup, while the fds are gone), and returns that error if it
 * fails again, as accept does while no fd is left.  The VP's polls and
 * waits do not try again: they are not the VP's calls, and every 8th
 * scheduling point would pay for it.  A VP whose kernel refused the ring
 * for good (a flag or an op) keeps that error; that is not expected once
 * the first ring has been set up with the same flags. */
static struct ring *own(int retry)
{
	kr_vp *vp = kr_vp_self();
	if (!vp)
		return NULL;
	unsigned id = kr_vp_id(vp);
	struct ring *r = U.r[id];
	if (r || (U.fail[id] && !(retry && kr__io_transient(U.fail[id]))))
		return r;
	if (!(r = calloc(1, sizeof *r))) {
		U.fail[id] = ENOMEM;
		return NULL;
	}
	if ((U.fail[id] = ring_setup(&r->io)) != 0) {
		free(r);
		return NULL;
	}
	kr__io_nosigpipe(); /* the ring's writes run on this thread */
	__atomic_store_n(&U.r[id], r, __ATOMIC_RELEASE);
	return r;
}

static int own_err(void)
{
	kr_vp *vp = kr_vp_self();
	return vp ? U.fail[kr_vp_id(vp)] : EPERM;
}

static struct fdslot *slot(int fd)
{
	return (size_t)fd < U.nfds ? &U.fds[fd] : NULL;
}

/* n free entries: submit what is queued if there is no room. */
static struct io_uring_sqe *sqe_get(struct io_uring *io, unsigned n)
{
	while (io_uring_sq_space_left(io) < n)
		io_uring_submit(io);
	return io_uring_get_sqe(io);
}

/* A message to another VP's ring: a completion there with user_data
 * `data`; if it cannot be delivered, one here with `failed`. */
static void message(struct io_uring *from, struct ring *to, uintptr_t data, uintptr_t failed)
{
	struct io_uring_sqe *sqe = sqe_get(from, 1);
	io_uring_prep_msg_ring(sqe, to->io.ring_fd, 0, data, 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, failed);
}

static void complete(struct ring *r, struct done *d, int res)
{
	kr_mp *mp = d->mp;
	__atomic_store_n(&r->reqs, r->reqs - 1, __ATOMIC_RELAXED);
	if (d->slot)
		__atomic_fetch_sub(&d->slot->inflight, 1, __ATOMIC_RELEASE);
	d->res = res == -ECANCELED && r->leaving ? RETRY : res;
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
	if (mp) { /* none: its caller runs and looks (u_run) */
		kr__mp_io_done(mp);
		kr_mp_unpark(mp);
	}
}

/* One ring has cancelled.  The last one wakes the caller: a microprocess,
 * or a plain thread waiting on the futex (x may be gone once pending is 0:
 * a FUTEX_WAKE on a stale address wakes at worst a spurious waiter). */
static void ack(struct xcancel *x)
{
	kr_mp *mp = x->mp;
	if (__atomic_sub_fetch(&x->pending, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	__atomic_fetch_sub(&U.cancelling, 1, __ATOMIC_SEQ_CST);
	if (mp)
		kr_mp_unpark(mp);
	else
		syscall(SYS_futex, &x->pending, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void reap(struct ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_for_each_cqe(&r->io, head, cqe) {
		uintptr_t u = (uintptr_t)cqe->user_data;
		void *p = (void *)(u & ~(uintptr_t)T_MASK);
		struct io_uring_sqe *sqe;
		n++;
		switch (u & T_MASK) {
		case T_REQ:
			if (p)
				complete(r, p, cqe->res);
			break;
		case T_FUTEX:
			r->futex_armed = 0;
			if (!r->sleeping)
				kr_vp_wait_ended();
			break;
		case T_CANCEL_REQ:
			sqe = sqe_get(&r->io, 1);
			io_uring_prep_cancel64(sqe, (uintptr_t)p, 0);
			io_uring_sqe_set_data64(sqe, 0);
			break;
		case T_CANCEL_FD:
			MSG_TAKEN(p);
			sqe = sqe_get(&r->io, 1);
			io_uring_prep_cancel_fd(sqe, ((struct xcancel *)p)->fd, IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, u - T_CANCEL_FD + T_ACK);
			break;
		case T_ACK:
			MSG_TAKEN(p);
			ack(p);
			break;
		}
	}
	io_uring_cq_advance(&r->io, n);
}

static int needs_enter(struct ring *r)
{
	return io_uring_sq_ready(&r->io) ||
	       (IO_URING_READ_ONCE(*r->io.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

/* Submit what is queued and collect completions, entering the kernel
 * only when there is something to do. */
static void poll_ring(struct ring *r)
{
	if (needs_enter(r))
		io_uring_submit_and_get_events(&r->io);
	if (io_uring_cq_ready(&r->io))
		reap(r);
}

/* The ring's VP is back after a leave: it answers messages again.  Before
 * the VP makes a request on it, too (u_run; see u_cancel). */
static inline void back(struct ring *r)
{
	if (__builtin_expect(__atomic_load_n(&r->away, __ATOMIC_RELAXED), 0))
		__atomic_store_n(&r->away, 0, __ATOMIC_SEQ_CST);
}

static void u_poll(void *arg)
{
	(void)arg;
	struct ring *r = own(0);
	if (r) {
		back(r);
		poll_ring(r);
	}
}

static void u_wait(void *arg, uint64_t deadline)
{
	(void)arg;
	struct ring *r = own(0);
	uint32_t *word;
	if (!r) {
		kr_vp_sleep_until(deadline);
		return;
	}
	back(r);
	/* No spin first, unlike kr_vp_sleep_until: with the load's client on the
	 * other core, a spin here took its processor from it (figures:
	 * docs/notes/2026-11-25-measurements.md). */
	if (kr_vp_sleep_begin(&word, r->futex_armed) == 0) {
		poll_ring(r);
		return;
	}
	if (!r->futex_armed) {
		struct io_uring_sqe *sqe = sqe_get(&r->io, 1);
		io_uring_prep_rw(IORING_OP_FUTEX_WAIT, sqe, KR_FUTEX2_U32_PRIVATE, word, 0, 0);
		sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
		io_uring_sqe_set_data64(sqe, T_FUTEX);
		r->futex_armed = 1;
	}
	uint64_t now = kr_now(), left = deadline > now ? deadline - now : 0;
	struct __kernel_timespec ts = {.tv_sec = (long long)(left / 1000000000u),
				       .tv_nsec = (long long)(left % 1000000000u)};
	struct io_uring_cqe *cqe;
	r->sleeping = 1;
	io_uring_submit_and_wait_timeout(&r->io, &cqe, 1, deadline == KR_FOREVER ? NULL : &ts, NULL);
	reap(r);
	r->sleeping = 0;
	kr_vp_sleep_end(r->futex_armed);
}

static void u_leave(void *arg)
{
	(void)arg;
	struct ring *r = own(0);
	if (!r)
		return;
	/* a kr_io_cancel that starts from now on skips this ring */
	__atomic_store_n(&r->away, 1, __ATOMIC_SEQ_CST);
	if (r->reqs) {
		struct io_uring_sqe *sqe = sqe_get(&r->io, 1);
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, 0);
		r->leaving = 1;
		io_uring_submit_and_get_events(&r->io);
		reap(r);
		/* What the kernel's workers run (a regular file) ends by
		 * itself, or as cancelled, soon: wait for it, up to
		 * LEAVE_WAIT_NS in all, rather than leave its completion to a
		 * VP that may not look for long. */
		uint64_t until = kr_now() + LEAVE_WAIT_NS;
		for (uint64_t now; r->reqs && (now = kr_now()) < until;) {
			struct __kernel_timespec ts = {.tv_sec = 0,
						       .tv_nsec = (long long)(until - now)};
			struct io_uring_cqe *cqe;
			io_uring_submit_and_wait_timeout(&r->io, &cqe, 1, &ts, NULL);
			reap(r);
		}
		r->leaving = 0;
	}
	/* One that started before may have sent a message here, which only
	 * this VP can answer: answer until no cancel is under way (the
	 * caller of one may be waiting for this VP's blocking call). */
	while (__atomic_load_n(&U.cancelling, __ATOMIC_SEQ_CST)) {
		struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(&r->io, &cqe, 1, &ts, NULL);
		reap(r);
	}
}

static void u_fini(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (U.r[i]) {
			if (U.r[i]->futex_armed)
				kr_vp_wait_ended();
			io_uring_queue_exit(&U.r[i]->io);
			free(U.r[i]);
		}
	if (U.fds)
		munmap(U.fds, U.nfds * sizeof *U.fds);
	memset(&U, 0, sizeof U);
	kr__io_stopped();
}

/* In the child of a fork: the rings' memory is shared with the parent;
 * unmap it and close the child's fds, submitting nothing. */
static void u_forked(void)
{
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (U.r[i]) {
			io_uring_queue_exit(&U.r[i]->io);
			free(U.r[i]);
		}
	if (U.fds)
		munmap(U.fds, U.nfds * sizeof *U.fds);
	memset(&U, 0, sizeof U);
}

static int u_init(kr_poller *p)
{
	memset(&U, 0, sizeof U);
	/* The kernel must take every flag and op: try on a ring of the
	 * caller's own (kept when the caller is a VP). */
	int err;
	if (kr_vp_self()) {
		err = own(1) ? 0 : own_err();
	} else {
		struct io_uring probe;
		if (!(err = ring_setup(&probe)))
			io_uring_queue_exit(&probe);
	}
	if (err) {
		u_fini(NULL);
		return err;
	}
	struct rlimit rl;
	size_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < FD_TABLE_MAX ? rl.rlim_max
										: FD_TABLE_MAX;
	void *t = mmap(NULL, n * sizeof *U.fds, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t != MAP_FAILED) {
		U.fds = t;
		U.nfds = n;
	}
	*p = (kr_poller){.poll = u_poll, .wait = u_wait, .leave = u_leave, .fini = u_fini,
			 .flags = KR_POLLER_PER_VP};
	return 0;
}

static void prep(struct io_uring_sqe *sqe, const struct kr_ioreq *r)
{
	unsigned len = (unsigned)(r->len > UINT32_MAX ? UINT32_MAX : r->len);
	switch (r->op) {
	case IO_READ:
		io_uring_prep_read(sqe, r->fd, r->buf, len, -1);
		break;
	case IO_WRITE:
		io_uring_prep_write(sqe, r->fd, r->buf, len, -1);
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
}

/* Cancel the request of record d, wherever it is; submitted now. */
static void cancel_req(struct done *d)
{
	struct ring *me = own(1);
	if (!me)
		return; /* no ring to say it with: the request runs its course */
	if (me == d->ring) {
		struct io_uring_sqe *sqe = sqe_get(&me->io, 1);
		io_uring_prep_cancel64(sqe, (uintptr_t)d, 0);
		io_uring_sqe_set_data64(sqe, 0);
	} else {
		message(&me->io, d->ring, (uintptr_t)d | T_CANCEL_REQ, 0);
	}
	io_uring_submit(&me->io);
}

/* What fd is, kept in its slot for its cancel generation gen: FD_FILE (a
 * regular file or block device, or fd unknown to fstat) or FD_POLLED. */
static uint32_t learn(struct fdslot *s, int fd, uint32_t gen)
{
	struct stat st;
	uint32_t k = fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)
			     ? FD_POLLED : FD_FILE;
	__atomic_store_n(&s->kind, gen << 2 | k, __ATOMIC_RELAXED);
	return k;
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
	struct fdslot *s = slot(r->fd);
	int timed = r->deadline != KR_FOREVER, cancelled = 0;
	uint32_t gen = s ? __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) : 0;
	uint32_t kind = s ? __atomic_load_n(&s->kind, __ATOMIC_RELAXED) : 0;
	/* a read not known to be of a pollable fd: submitted at once (see the top) */
	int now = s && (r->op == IO_READ || r->op == IO_READV) &&
		  kind != (gen << 2 | FD_POLLED);
	for (;;) {
		struct ring *ring = own(1);
		if (!ring)
			return -own_err();
		back(ring);
		struct done d = {.mp = now ? NULL : kr_mp_self(), .ring = ring, .slot = s};
		struct io_uring_sqe *sqe = sqe_get(&ring->io, timed ? 2 : 1);
		prep(sqe, r);
		io_uring_sqe_set_data(sqe, &d);
		if (timed) {
			d.ts.tv_sec = (long long)(r->deadline / 1000000000u);
			d.ts.tv_nsec = (long long)(r->deadline % 1000000000u);
			sqe->flags |= IOSQE_IO_LINK;
			struct io_uring_sqe *t = io_uring_get_sqe(&ring->io);
			io_uring_prep_link_timeout(t, &d.ts, IORING_TIMEOUT_ABS);
			io_uring_sqe_set_data64(t, 0);
		}
		__atomic_store_n(&ring->reqs, ring->reqs + 1, __ATOMIC_SEQ_CST);
		if (s)
			__atomic_fetch_add(&s->inflight, 1, __ATOMIC_SEQ_CST);
		/* A kr_io_cancel since the call began may have looked for
		 * requests on fd while this one was between two rings (its
		 * VP left, and it is submitted again here): it cancels
		 * itself.  Either the cancel's load of inflight sees the
		 * increment above, and its message reaches this ring after
		 * the request, or this load sees the cancel's generation
		 * (both seq_cst). */
		if (s && __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) != gen)
			cancel_req(&d);
		if (now) {
			kr__poll_now();
			d.mp = kr_mp_self();
			if (!__atomic_load_n(&d.done, __ATOMIC_RELAXED) && (kind & ~3u) != gen << 2)
				now = learn(s, r->fd, gen) == FD_FILE;
		}
		/* A late wakeup from elsewhere can end a sleep early: loop on
		 * `done`.  A cancel of the caller cancels the request, which
		 * then completes with -ECANCELED, or with its result if it was
		 * too late for that; then the cancel stays pending for the
		 * next wait. */
		while (!__atomic_load_n(&d.done, __ATOMIC_ACQUIRE)) {
			if (cancelled) {
				kr__park_until_why(KR_FOREVER, KR_WHY_IO);
			} else if (kr__park_cancellable_why(KR_FOREVER, KR_WHY_IO) == ECANCELED) {
				cancelled = 1;
				cancel_req(&d);
			}
		}
		if (d.res != RETRY) {
			if (cancelled && d.res != -ECANCELED)
				kr_mp_cancel(d.mp);
			if (d.res == -ECANCELED && timed && !cancelled && kr_now() >= r->deadline)
				return -ETIMEDOUT;
			return d.res;
		}
		/* Its VP left: submit it again here, unless it was meant to end
		 * (a kr_io_cancel since the call began). */
		if (cancelled || (s && __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) != gen))
			return -ECANCELED;
		if (timed && kr_now() >= r->deadline)
			return -ETIMEDOUT;
	}
}

/* End every request on fd, in every ring that holds requests, before
 * returning (a ring whose VP is inside a blocking call holds none but
 * those of regular files, and answers when the call returns).  Off a VP
 * the messages go out through a ring made for the call, and the caller
 * waits on a futex. */
static int u_cancel(int fd)
{
	struct fdslot *s = slot(fd);
	if (s) {
		__atomic_fetch_add(&s->gen, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&s->inflight, __ATOMIC_SEQ_CST))
			return 0;
	}
	struct ring *me = own(1);
	struct io_uring tmp, *from = me ? &me->io : &tmp;
	if (!me && kr_vp_self())
		return -own_err();
	int err = me ? 0 : io_uring_queue_init(8, &tmp, 0);
	if (err)
		return err;
	struct xcancel x = {.mp = kr_mp_self(), .fd = fd};
	struct ring *to[KR_VP_MAX];
	unsigned n = 0;
	/* A ring whose VP has left (u_leave) answers no message until it is
	 * back, and holds no request on a socket or pipe: its VP cancelled
	 * them, and their callers submit them again elsewhere (u_run): skip
	 * it.  The cancel counts itself first: of this load of `away` and a
	 * leaving VP's load of U.cancelling (both after their own store,
	 * seq_cst), one sees the other, so a VP that leaves meanwhile answers
	 * before it goes.  ack() ends the count. */
	__atomic_fetch_add(&U.cancelling, 1, __ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if ((to[n] = __atomic_load_n(&U.r[i], __ATOMIC_ACQUIRE)) &&
		    __atomic_load_n(&to[n]->reqs, __ATOMIC_SEQ_CST) &&
		    (to[n] == me || !__atomic_load_n(&to[n]->away, __ATOMIC_SEQ_CST)))
			n++;
	if (!n) {
		__atomic_fetch_sub(&U.cancelling, 1, __ATOMIC_SEQ_CST);
		if (!me)
			io_uring_queue_exit(&tmp);
		return 0;
	}
	x.pending = n;
	MSG_SENT(&x);
	uintptr_t acked = (uintptr_t)&x | T_ACK;
	for (unsigned i = 0; i < n; i++) {
		if (to[i] != me) {
			message(from, to[i], (uintptr_t)&x | T_CANCEL_FD, acked);
			continue;
		}
		struct io_uring_sqe *sqe = sqe_get(from, 1);
		io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, acked);
	}
	io_uring_submit(from);
	if (me) {
		while (__atomic_load_n(&x.pending, __ATOMIC_ACQUIRE))
			kr__park_until_why(KR_FOREVER, KR_WHY_IO);
		return 0;
	}
	uint32_t left;
	while ((left = __atomic_load_n(&x.pending, __ATOMIC_ACQUIRE))) {
		struct io_uring_cqe *cqe;
		if (io_uring_peek_cqe(&tmp, &cqe) == 0) { /* undeliverable */
			ack(&x);
			io_uring_cqe_seen(&tmp, cqe);
			continue;
		}
		struct timespec ms = {0, 1000000};
		syscall(SYS_futex, &x.pending, FUTEX_WAIT_PRIVATE, left, &ms, NULL, 0);
	}
	io_uring_queue_exit(&tmp);
	return 0;
}

static void u_forget(int fd)
{
	u_cancel(fd);
}

const struct kr_iobackend kr__io_uring = {
	.name = "io_uring",
	.features = KR_IO_KEEPS_FD_FLAGS,
	.init = u_init,
	.run = u_run,
	.cancel = u_cancel,
	.forget = u_forget,
	.forked = u_forked,
};
