/*
 * karui-mpi — MPI calls that park only the calling microprocess
 * (include/karui/mpi.h), a layer of its own above L3: libkarui-mpi, built
 * when the build finds MPI; libkarui knows nothing of it.
 *
 * The thread level.  Microprocesses move between VPs, so MPI is called
 * from several kernel threads; never two at once, since every MPI call of
 * the layer (and of the program, through kr_mpi_lock) is made under one
 * spin lock, M.lock.  So MPI_THREAD_SERIALIZED is enough, and it is what
 * kr_mpi_init asks for: MPI_THREAD_MULTIPLE would make Open MPI take its
 * own locks in every call and in its progress engine on top of ours, for
 * nothing.  A program that initialised MPI itself at SERIALIZED or more
 * is accepted as it is.
 *
 * A call.  kr_mpi_send and the others take the lock, start the
 * nonblocking form (MPI_Isend, ...), test it once (an eager send or a
 * message already there completes at once: no park), and otherwise put
 * the request into the pending table (M.req, with M.ent: the waiter and
 * where its status goes), release the lock and park until the waiter's
 * count of requests left reaches 0.  The waiter lives on the
 * microprocess's stack: progress touches it last with the release
 * decrement that may end the wait, and unparks with the handle it read
 * before.  An unpark that comes after the waiter saw the count reach 0
 * leaves a permit, a spurious return of a later kr_mp_park, which
 * level-2 code allows for (core.h).  Room in the table is made before the
 * MPI call starts, so that a request once started is always waited for.
 *
 * Progress.  The layer is one of karui's event sources (kr_poller_add),
 * shared:
 *   poll   (busy VPs at every 8th scheduling point, the idle loop each
 *          time round) MPI_Testsome over the pending table, if there is
 *          anything in it and the lock is free (trylock: a VP never waits
 *          for another's progress), and unparks the owners of what
 *          completed;
 *   wait   (one idle VP at a time, the others sleep on L0) tests in a
 *          loop: for a while with a sched_yield between tests (which
 *          costs a system call where the processor is free, and gives
 *          it to another rank or program where it is not), then with
 *          naps on a futex that grow from NAP_FIRST_NS to the longest
 *          nap, until something completes, the deadline passes or a
 *          kick comes; with nothing pending it sleeps on the futex until
 *          the deadline or a kick;
 *   kick   (kr_sched_unpark: a microprocess became ready, or the table
 *          stopped being empty, so that a VP asleep with nothing pending
 *          starts testing: the layer calls kr_sched_unpark(0) then) sets
 *          the futex word and wakes a napper.  The word stays set until a
 *          wait consumes it, so a kick that comes just before the wait
 *          starts is not lost;
 *   due    (beside karui's I/O, whose source the idle VP sleeps in, so
 *          that completions of either kind wake it; wait and kick are
 *          then not called) the same schedule as wait's, as times: test
 *          again at once (the core gives the processor away first) for
 *          the spin, then after each nap; KR_FOREVER with nothing
 *          pending.  It counts from the first time it sees M.epoch
 *          move, which the table's filling and every completion do.
 * Open MPI's shared-memory and TCP transports give no descriptor to wait
 * on, so an idle VP must test: the naps trade latency (a message that
 * comes during a nap is seen up to a nap late, once the spin is over) for
 * CPU (an idle rank wakes once a nap, not a core spinning for ever).  A
 * spin shorter than the peers' answer lets both sides fall into naps and
 * stay there (a round trip of a nap, 0.3 to 1 ms, where a 500 us spin
 * gives a few us).  The spin (500 us) and the longest nap (1 ms) are the
 * environment's KARUI_MPI_SPIN_US and KARUI_MPI_NAP_US if set;
 * docs/mpi.md gives the figures.
 *
 * Errors.  MPI's codes become errno codes (err_of); Testsome's
 * MPI_ERR_IN_STATUS gives each request its own.  An error of Testsome as a
 * whole ends every pending wait with it (their requests are lost to MPI
 * too).
 *
 * Teardown.  kr_mpi_fini (EBUSY while anyone waits) or, at kr_fini, the
 * event source's fini: the lock is taken, M.on cleared (progress and the
 * calls look at it under the lock), MPI finalised if kr_mpi_init
 * initialised it, the table freed.  A VP still inside wait when the
 * source is removed leaves it at the kick that kr_poller_remove makes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "karui/mpi.h"

/* An idle VP tests, yielding, for spin_ns, then naps on the futex
 * between tests, from NAP_FIRST_NS doubling up to nap_max_ns: set at
 * kr_mpi_init from KARUI_MPI_SPIN_US and KARUI_MPI_NAP_US (microseconds,
 * 0 to 1000000), else the defaults. */
enum { NAP_FIRST_NS = 20000 };
static uint64_t spin_ns, nap_max_ns;

struct waiter {
	kr_mp *mp;
	int left; /* atomic: requests not completed yet */
	int err;  /* the first error; under M.lock until left is 0 */
};

struct entry {
	struct waiter *w;
	MPI_Status *st; /* NULL: ignored */
};

static struct {
	kr_spin lock;         /* every MPI call, and all below */
	int on;               /* atomic; written under lock: between init and fini */
	int finalize;         /* kr_mpi_init initialised MPI */
	int n, cap;           /* n atomic: the pending requests */
	MPI_Request *req;     /* the pending requests, [0, n) */
	struct entry *ent;    /* their waiters */
	int *idx;             /* Testsome's scratch */
	MPI_Status *sts;
	uint32_t kicked;      /* futex word: a kick not consumed yet */
	uint32_t napping;     /* a VP sleeps on kicked */
	uint32_t epoch;       /* atomic, written under lock: the table filled
	                         or a request completed (due_cb) */
	/* due_cb's, on one VP at a time (the core's G.polling) */
	uint32_t seen;        /* the epoch its schedule counts from */
	uint64_t t0, nap;     /* when it saw it; the next nap */
} M = {.lock = KR_SPIN_INIT};

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* MPI's code as an errno code (under M.lock: MPI_Error_class is MPI). */
static int err_of(int rc)
{
	if (rc == MPI_SUCCESS)
		return 0;
	int cls = rc;
	if (MPI_Error_class(rc, &cls) != MPI_SUCCESS)
		return EIO;
	switch (cls) {
	case MPI_SUCCESS:
		return 0;
	case MPI_ERR_BUFFER:
	case MPI_ERR_COUNT:
	case MPI_ERR_TYPE:
	case MPI_ERR_TAG:
	case MPI_ERR_COMM:
	case MPI_ERR_RANK:
	case MPI_ERR_ROOT:
	case MPI_ERR_OP:
	case MPI_ERR_ARG:
	case MPI_ERR_REQUEST:
		return EINVAL;
	case MPI_ERR_TRUNCATE:
		return EMSGSIZE;
	case MPI_ERR_NO_MEM:
		return ENOMEM;
	default:
		return EIO;
	}
}

static void futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static void kick(void *arg)
{
	__atomic_store_n(&M.kicked, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&M.napping, __ATOMIC_SEQ_CST))
		futex(&M.kicked, FUTEX_WAKE, INT_MAX, NULL);
}

/* Sleep on the futex for ns (KR_FOREVER: no limit) unless kicked. */
static void nap(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	__atomic_store_n(&M.napping, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&M.kicked, __ATOMIC_SEQ_CST))
		futex(&M.kicked, FUTEX_WAIT, 0, ns == KR_FOREVER ? NULL : &ts);
	__atomic_store_n(&M.napping, 0, __ATOMIC_RELAXED);
}

/* One request of w's is over (under M.lock).  The decrement that ends
 * the wait is the last touch of w, which may be gone right after. */
static void complete(struct entry e, const MPI_Status *st, int err)
{
	struct waiter *w = e.w;
	kr_mp *mp = w->mp;
	if (e.st)
		*e.st = *st;
	if (err && !w->err)
		w->err = err;
	if (__atomic_sub_fetch(&w->left, 1, __ATOMIC_RELEASE) == 0)
		kr_mp_unpark(mp);
}

/* MPI_Testsome over the pending table: how many requests completed. */
static int progress(void)
{
	if (!__atomic_load_n(&M.n, __ATOMIC_RELAXED) || kr_spin_trylock(&M.lock))
		return 0;
	int n = M.n, out = 0;
	if (!__atomic_load_n(&M.on, __ATOMIC_RELAXED) || !n) {
		kr_spin_unlock(&M.lock);
		return 0;
	}
	int rc = MPI_Testsome(n, M.req, &out, M.idx, M.sts);
	if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
		/* the whole call failed: nothing of the table can be trusted */
		int err = err_of(rc);
		MPI_Status none = {0};
		for (int i = 0; i < n; i++)
			complete(M.ent[i], &none, err);
		__atomic_store_n(&M.n, 0, __ATOMIC_RELAXED);
		kr_spin_unlock(&M.lock);
		return n;
	}
	if (out == MPI_UNDEFINED)
		out = 0;
	for (int k = 0; k < out; k++) {
		int i = M.idx[k];
		struct entry e = M.ent[i];
		M.ent[i].w = NULL;
		complete(e, &M.sts[k], rc == MPI_ERR_IN_STATUS ? err_of(M.sts[k].MPI_ERROR) : 0);
	}
	if (out) {
		__atomic_store_n(&M.epoch, M.epoch + 1, __ATOMIC_RELAXED);
		int j = 0;
		for (int i = 0; i < n; i++) {
			if (!M.ent[i].w)
				continue;
			M.req[j] = M.req[i];
			M.ent[j++] = M.ent[i];
		}
		__atomic_store_n(&M.n, j, __ATOMIC_RELAXED);
	}
	kr_spin_unlock(&M.lock);
	return out;
}

static void poll_cb(void *arg) { progress(); }

static void wait_cb(void *arg, uint64_t deadline)
{
	uint64_t t0 = kr_now(), naps = NAP_FIRST_NS;
	for (;;) {
		if (__atomic_exchange_n(&M.kicked, 0, __ATOMIC_ACQUIRE))
			return;
		int pending = __atomic_load_n(&M.n, __ATOMIC_RELAXED) != 0;
		if (pending && progress())
			return;
		uint64_t now = kr_now();
		if (now >= deadline)
			return;
		if (pending && now - t0 < spin_ns) {
			sched_yield();
			continue;
		}
		uint64_t left = deadline == KR_FOREVER ? KR_FOREVER : deadline - now;
		if (!pending) {
			nap(left);
			continue;
		}
		if (naps > nap_max_ns)
			naps = nap_max_ns;
		nap(naps < left ? naps : left);
		naps *= 2;
	}
}

static uint64_t due_cb(void *arg)
{
	if (!__atomic_load_n(&M.n, __ATOMIC_RELAXED))
		return KR_FOREVER;
	uint64_t now = kr_now();
	uint32_t e = __atomic_load_n(&M.epoch, __ATOMIC_RELAXED);
	if (e != M.seen) {
		M.seen = e;
		M.t0 = now;
		M.nap = NAP_FIRST_NS;
	}
	if (now - M.t0 < spin_ns)
		return now;
	uint64_t nap = M.nap < nap_max_ns ? M.nap : nap_max_ns;
	M.nap = nap * 2;
	return now + nap;
}

/* Under M.lock: M.on cleared, MPI finalised if the layer started it, the
 * table freed. */
static void stop_locked(void)
{
	__atomic_store_n(&M.on, 0, __ATOMIC_RELEASE);
	if (M.finalize)
		MPI_Finalize();
	M.finalize = 0;
	free(M.req);
	free(M.ent);
	free(M.idx);
	free(M.sts);
	M.req = NULL, M.ent = NULL, M.idx = NULL, M.sts = NULL;
	__atomic_store_n(&M.n, 0, __ATOMIC_RELAXED);
	M.cap = 0;
}

/* kr_fini, after every VP stopped, with the source still set. */
static void fini_cb(void *arg)
{
	kr_spin_lock(&M.lock);
	if (__atomic_load_n(&M.on, __ATOMIC_RELAXED))
		stop_locked();
	kr_spin_unlock(&M.lock);
}

static const kr_poller source = {
	.poll = poll_cb, .wait = wait_cb, .kick = kick, .fini = fini_cb, .due = due_cb};

/* An environment variable's microseconds, in ns; dflt if unset or not
 * a number from 0 to 1000000. */
static uint64_t env_us(const char *name, unsigned long dflt)
{
	const char *s = getenv(name);
	char *end;
	errno = 0;
	unsigned long v = s ? strtoul(s, &end, 10) : dflt;
	if (s && (errno || end == s || *end || v > 1000000 || *s == '-'))
		v = dflt;
	return (uint64_t)v * 1000;
}

int kr_mpi_init(int *argc, char ***argv)
{
	kr_stats st;
	if (kr_stats_get(&st))
		return EPERM;
	pthread_mutex_lock(&init_lock);
	if (__atomic_load_n(&M.on, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&init_lock);
		return EBUSY;
	}
	spin_ns = env_us("KARUI_MPI_SPIN_US", 500);
	nap_max_ns = env_us("KARUI_MPI_NAP_US", 1000);
	/* the source first: MPI, once finalised, cannot start again */
	int err = kr_poller_add(&source);
	if (err) {
		pthread_mutex_unlock(&init_lock);
		return err;
	}
	int inited = 0, finalized = 0, level = MPI_THREAD_SINGLE;
	kr_spin_lock(&M.lock);
	MPI_Initialized(&inited);
	MPI_Finalized(&finalized);
	if (finalized)
		err = EIO;
	else if (inited)
		err = MPI_Query_thread(&level) != MPI_SUCCESS ? EIO
		      : level < MPI_THREAD_SERIALIZED          ? ENOTSUP
								: 0;
	else if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level) != MPI_SUCCESS)
		err = EIO;
	else {
		M.finalize = 1;
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		if (level < MPI_THREAD_SERIALIZED)
			err = ENOTSUP;
	}
	if (!err)
		__atomic_store_n(&M.on, 1, __ATOMIC_RELEASE);
	else if (M.finalize)
		stop_locked();
	kr_spin_unlock(&M.lock);
	if (err)
		kr_poller_remove(&source);
	pthread_mutex_unlock(&init_lock);
	return err;
}

int kr_mpi_fini(void)
{
	pthread_mutex_lock(&init_lock);
	kr_spin_lock(&M.lock);
	int err = !__atomic_load_n(&M.on, __ATOMIC_RELAXED) ? EPERM : M.n ? EBUSY : 0;
	if (!err)
		stop_locked();
	kr_spin_unlock(&M.lock);
	if (!err)
		kr_poller_remove(&source); /* which ends a wait_cb under way */
	pthread_mutex_unlock(&init_lock);
	return err;
}

/* ---------------- the calls ---------------- */

/* Take M.lock for a call that will wait for k requests: 0 with the lock
 * held and room for them in the table, or the error (lock not held). */
static int begin(int k)
{
	if (!kr_mp_self())
		return EPERM;
	kr_spin_lock(&M.lock);
	if (!__atomic_load_n(&M.on, __ATOMIC_RELAXED)) {
		kr_spin_unlock(&M.lock);
		return EPERM;
	}
	if (k > INT_MAX / 4 - M.n) { /* no table that large */
		kr_spin_unlock(&M.lock);
		return ENOMEM;
	}
	if (M.n + k > M.cap) {
		int cap = M.cap ? M.cap : 16;
		while (cap < M.n + k)
			cap *= 2;
		MPI_Request *req = realloc(M.req, (size_t)cap * sizeof *req);
		if (req)
			M.req = req;
		struct entry *ent = realloc(M.ent, (size_t)cap * sizeof *ent);
		if (ent)
			M.ent = ent;
		int *idx = realloc(M.idx, (size_t)cap * sizeof *idx);
		if (idx)
			M.idx = idx;
		MPI_Status *sts = realloc(M.sts, (size_t)cap * sizeof *sts);
		if (sts)
			M.sts = sts;
		if (!req || !ent || !idx || !sts) {
			kr_spin_unlock(&M.lock);
			return ENOMEM;
		}
		M.cap = cap;
	}
	return 0;
}

/* MPI's error rc from a start call, under M.lock, which it releases. */
static int fail(int rc)
{
	int err = err_of(rc);
	kr_spin_unlock(&M.lock);
	return err;
}

/* Under M.lock, which it releases: wait for the n requests (active or
 * null) and set them to MPI_REQUEST_NULL; their statuses go to sts[i]
 * (sts NULL: ignored).  The first error. */
static int finish(int n, MPI_Request *reqs, MPI_Status *sts)
{
	struct waiter w = {.mp = kr_mp_self()};
	int was = M.n, m = M.n, left = 0;
	for (int i = 0; i < n; i++) {
		MPI_Status scratch, *st = sts ? &sts[i] : &scratch;
		int flag = 0, rc = MPI_Test(&reqs[i], &flag, st);
		if (rc != MPI_SUCCESS || flag) {
			int err = err_of(rc);
			if (err && !w.err)
				w.err = err;
			reqs[i] = MPI_REQUEST_NULL;
			continue;
		}
		M.req[m] = reqs[i];
		M.ent[m++] = (struct entry){&w, sts ? &sts[i] : NULL};
		left++;
	}
	__atomic_store_n(&w.left, left, __ATOMIC_RELAXED);
	__atomic_store_n(&M.n, m, __ATOMIC_RELAXED);
	if (left && !was)
		__atomic_store_n(&M.epoch, M.epoch + 1, __ATOMIC_RELAXED);
	kr_spin_unlock(&M.lock);
	if (!left)
		return w.err;
	if (!was)
		kr_sched_unpark(0);
	while (__atomic_load_n(&w.left, __ATOMIC_ACQUIRE))
		kr_mp_park();
	for (int i = 0; i < n; i++)
		reqs[i] = MPI_REQUEST_NULL;
	return w.err;
}

static int bad_buf(const void *buf, int count) { return count < 0 || (count && !buf); }

int kr_mpi_wait(MPI_Request *req, MPI_Status *status)
{
	if (!req)
		return EINVAL;
	int err = begin(1);
	return err ? err : finish(1, req, status);
}

int kr_mpi_waitall(int n, MPI_Request *reqs, MPI_Status *statuses)
{
	if (n < 0 || (n && !reqs))
		return EINVAL;
	int err = begin(n);
	return err ? err : finish(n, reqs, statuses);
}

/* One operation: started by `start` (an MPI_I... call that sets r_),
 * then waited for, the caller parked meanwhile; *status (may be NULL) its
 * status. */
#define ONE(status, start)                                                     \
	({                                                                     \
		MPI_Request r_;                                                \
		int e_ = begin(1), rc_ = e_ ? 0 : (start);                     \
		e_ ? e_ : rc_ ? fail(rc_) : finish(1, &r_, (status));          \
	})

int kr_mpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
		MPI_Comm comm)
{
	if (bad_buf(buf, count))
		return EINVAL;
	return ONE(NULL, MPI_Isend(buf, count, type, dest, tag, comm, &r_));
}

int kr_mpi_ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
		 MPI_Comm comm)
{
	if (bad_buf(buf, count))
		return EINVAL;
	return ONE(NULL, MPI_Issend(buf, count, type, dest, tag, comm, &r_));
}

int kr_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
		MPI_Status *status)
{
	if (bad_buf(buf, count))
		return EINVAL;
	return ONE(status, MPI_Irecv(buf, count, type, source, tag, comm, &r_));
}

int kr_mpi_sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
		    void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
		    MPI_Comm comm, MPI_Status *status)
{
	if (bad_buf(sbuf, scount) || bad_buf(rbuf, rcount))
		return EINVAL;
	int err = begin(2);
	if (err)
		return err;
	MPI_Request r[2];
	MPI_Status st[2];
	int rc = MPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &r[0]);
	if (rc)
		return fail(rc);
	rc = MPI_Isend(sbuf, scount, stype, dest, stag, comm, &r[1]);
	if (rc) {
		/* the receive is started: take it back before failing */
		MPI_Cancel(&r[0]);
		MPI_Request_free(&r[0]);
		return fail(rc);
	}
	err = finish(2, r, st);
	if (status)
		*status = st[0];
	return err;
}

int kr_mpi_barrier(MPI_Comm comm)
{
	return ONE(NULL, MPI_Ibarrier(comm, &r_));
}

int kr_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	if (bad_buf(buf, count))
		return EINVAL;
	return ONE(NULL, MPI_Ibcast(buf, count, type, root, comm, &r_));
}

int kr_mpi_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
		     MPI_Comm comm)
{
	if ((sbuf != MPI_IN_PLACE && bad_buf(sbuf, count)) || bad_buf(rbuf, count))
		return EINVAL;
	return ONE(NULL, MPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r_));
}

int kr_mpi_lock(void)
{
	kr_spin_lock(&M.lock);
	if (__atomic_load_n(&M.on, __ATOMIC_RELAXED))
		return 0;
	kr_spin_unlock(&M.lock);
	return EPERM;
}

int kr_mpi_unlock(void)
{
	if (!__atomic_load_n(&M.on, __ATOMIC_ACQUIRE))
		return EPERM;
	if (kr_spin_trylock(&M.lock) == 0) { /* it was not held */
		kr_spin_unlock(&M.lock);
		return EPERM;
	}
	kr_spin_unlock(&M.lock);
	return 0;
}
