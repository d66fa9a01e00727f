/* L3 io: deadlines and cancellation (src/io/io.c and the back ends' cancel):
 * timed reads, cancels and closes that end blocked reads on every VP, and
 * bad input.  Run on both back ends (kt_io.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_io.h"

static void timed_read_times_out_and_takes_nothing(void)
{
	init(1);
	int p[2];
	mkpipe(p);
	char c;
	size_t n = 9;
	short ev = 9;
	uint64_t t0 = kr_now();
	KT_EQ(kr_read_until(p[0], &c, 1, &n, in_ms(50)), ETIMEDOUT);
	KT_EQ(n, 0);
	KT_CHECK(kr_now() - t0 >= 50 * MS);
	KT_EQ(kr_poll_until(p[0], POLLIN, &ev, in_ms(20)), ETIMEDOUT);
	KT_EQ(ev, 0);
	KT_EQ(write(p[1], "ab", 2), 2);
	KT_EQ(kr_poll_until(p[0], POLLIN, &ev, in_ms(1000)), 0);
	KT_CHECK(ev & POLLIN);
	KT_EQ(kr_read_until(p[0], &c, 1, &n, in_ms(1000)), 0); /* the byte is still there */
	KT_EQ(n, 1);
	KT_EQ(c, 'a');
	KT_EQ(kr_read_until(p[0], &c, 1, &n, kr_now()), 0); /* ready: a past deadline is fine */
	KT_EQ(n, 1);
	KT_EQ(c, 'b');
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

struct blk {
	int fd;
	int res;        /* the call's result, 99 until it returns: atomic */
	size_t n;       /* the count, or the accepted fd */
	unsigned vp;    /* the VP the read was made on */
	kr_vp *on;      /* the same, NULL until the call starts: atomic */
};

static void blk_start(struct blk *b)
{
	b->vp = kr_vp_id(kr_vp_self());
	__atomic_store_n(&b->on, kr_vp_self(), __ATOMIC_RELEASE);
}

static void blk_end(struct blk *b, int res) { __atomic_store_n(&b->res, res, __ATOMIC_RELEASE); }
static int blk_res(struct blk *b) { return __atomic_load_n(&b->res, __ATOMIC_ACQUIRE); }

/* b's call has started and waits: it started on the VP that runs the
 * caller now (so it has left it), or its VP has gone to sleep since (with
 * nothing left to run).  A call of io.h that waits has no scheduling
 * point before its wait. */
static int blk_waits(struct blk *b)
{
	kr_vp *v = __atomic_load_n(&b->on, __ATOMIC_ACQUIRE);
	return v && (v == kr_vp_self() || kr_vp_status(v) == KR_VP_SLEEPING);
}

static int all_wait(struct blk *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!blk_waits(&b[i]))
			return 0;
	return 1;
}

static void *blocked_reader(void *a)
{
	struct blk *b = a;
	char c;
	size_t n;
	blk_start(b);
	int res = kr_read(b->fd, &c, 1, &n);
	b->n = n;
	blk_end(b, res);
	return NULL;
}

static void *cancel_from_plain_thread(void *a)
{
	*(int *)a = kr_io_cancel(*(int *)a);
	return NULL;
}

/* Readers on both VPs (with io_uring, in both VPs' rings); the cancel comes
 * from a microprocess, then from a thread that is no VP. */
static void cancel_ends_blocked_reads_and_loses_nothing(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	enum { N = 8 };
	for (int round = 0; round < 2; round++) {
		struct blk b[N];
		kr_mp *m[N];
		for (int i = 0; i < N; i++) {
			b[i] = (struct blk){.fd = p[0], .res = 99};
			KT_EQ(kr_mp_create(&m[i], &small, blocked_reader, &b[i]), 0);
			if (i % 2)
				kr_mp_yield(); /* let the other VP take some */
		}
		KT_WAIT(all_wait(b, N), kr_mp_sleep_for(MS));
		unsigned on[2] = {0, 0};
		for (int i = 0; i < N; i++) {
			KT_EQ(blk_res(&b[i]), 99);
			on[b[i].vp & 1]++;
		}
		if (round == 0) {
			KT_EQ(kr_io_cancel(p[0]), 0);
		} else {
			pthread_t t;
			int arg = p[0];
			KT_EQ(pthread_create(&t, NULL, cancel_from_plain_thread, &arg), 0);
			KT_EQ(kr_blocking_begin(), 0);
			KT_EQ(pthread_join(t, NULL), 0);
			KT_EQ(kr_blocking_end(), 0);
			KT_EQ(arg, 0);
		}
		for (int i = 0; i < N; i++) {
			KT_EQ(kr_mp_join(m[i], NULL), 0);
			KT_EQ(blk_res(&b[i]), ECANCELED);
		}
		fprintf(stderr, "  %s: %u readers on VP 0, %u on VP 1, all cancelled\n",
			round ? "from a plain thread" : "from a microprocess", on[0], on[1]);
	}
	KT_EQ(write(p[1], "z", 1), 1);
	char c = 0;
	size_t n;
	KT_EQ(kr_read_until(p[0], &c, 1, &n, in_ms(1000)), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'z');
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_fini(), 0);
}

/* kr_close of an fd that microprocesses on both VPs wait on ends their
 * reads with -ECANCELED before it closes: a new fd that takes the same
 * number is untouched. */
static void close_ends_reads_on_every_vp_and_spares_the_next_fd(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	enum { N = 6 };
	struct blk b[N];
	kr_mp *m[N];
	for (int i = 0; i < N; i++) {
		b[i] = (struct blk){.fd = p[0], .res = 99};
		KT_EQ(kr_mp_create(&m[i], &small, blocked_reader, &b[i]), 0);
		kr_mp_yield();
	}
	KT_WAIT(all_wait(b, N), kr_mp_sleep_for(MS));
	int fd = p[0];
	struct stat pipe_st, now_st;
	KT_EQ(fstat(fd, &pipe_st), 0);
	KT_EQ(kr_close(p[0]), 0);
	for (int i = 0; i < N; i++) {
		KT_EQ(kr_mp_join(m[i], NULL), 0);
		KT_EQ(blk_res(&b[i]), ECANCELED);
	}
	/* closed: the number names no file, or another one (a sanitizer's
	 * runtime opens files of its own on threads of its own) */
	errno = 0;
	if (fstat(fd, &now_st) == 0)
		KT_CHECK(now_st.st_ino != pipe_st.st_ino || now_st.st_dev != pipe_st.st_dev);
	else
		KT_EQ(errno, EBADF);
	int q[2];
	mkpipe(q);
	fprintf(stderr, "  closed fd %d, the next pipe reads from fd %d\n", fd, q[0]);
	struct blk nb = {.fd = q[0], .res = 99};
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, &small, blocked_reader, &nb), 0);
	KT_WAIT(blk_waits(&nb), kr_mp_sleep_for(MS));
	KT_EQ(kr_mp_sleep_for(20 * MS), 0); /* time for a stray cancel to land */
	KT_EQ(blk_res(&nb), 99); /* still waiting: nothing cancelled it */
	KT_EQ(write(q[1], "n", 1), 1);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(blk_res(&nb), 0);
	KT_EQ(nb.n, 1);
	KT_EQ(kr_close(q[0]), 0);
	KT_EQ(kr_close(q[1]), 0);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_fini(), 0);
}

static void *off_vp(void *a)
{
	char c;
	size_t n;
	*(int *)a = kr_read(0, &c, 1, &n);
	return NULL;
}

static void bad_input_is_refused(void)
{
	init(1);
	char c;
	size_t n;
	int fd;
	short ev;
	struct sockaddr_in sa;
	KT_EQ(kr_read(-1, &c, 1, &n), EBADF);
	KT_EQ(kr_io_cancel(-1), EBADF);
	KT_EQ(kr_close(-1), EBADF);
	int p[2];
	mkpipe(p);
	KT_EQ(kr_read(p[0], &c, 1, NULL), EINVAL);
	KT_EQ(kr_write(p[1], &c, 1, NULL), EINVAL);
	KT_EQ(kr_accept(p[0], NULL, NULL, 0, NULL), EINVAL);
	KT_EQ(kr_poll(p[0], POLLIN, NULL), EINVAL);
	/* closed (a number nothing else takes meanwhile: the back end, started
	 * by the read, opens fds of its own, and kr_close does not start it) */
	KT_EQ(dup2(p[0], 900), 900);
	KT_EQ(kr_close(900), 0);
	KT_EQ(kr_read(900, &c, 1, &n), EBADF);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_accept(p[1], (struct sockaddr *)&sa, NULL, 0, &fd), EINVAL);
	KT_EQ(fd, -1);
	KT_EQ(kr_accept(p[1], NULL, NULL, 12345, &fd), EINVAL);
	KT_EQ(kr_connect(p[1], NULL, 0), EINVAL);
	KT_EQ(kr_poll(p[1], 0, &ev), EINVAL);
	KT_EQ(kr_recv(p[1], &c, 1, 0, &n), ENOTSOCK);
	pthread_t t;
	int res = 0;
	KT_EQ(pthread_create(&t, NULL, off_vp, &res), 0);
	pthread_join(t, NULL);
	KT_EQ(res, EPERM);
	KT_EQ(kr_blocking_end(), EINVAL);
	KT_EQ(kr_blocking_begin(), 0);
	KT_EQ(kr_blocking_begin(), EBUSY);
	KT_EQ(kr_blocking_end(), 0);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

static void *blocked_acceptor(void *a)
{
	struct blk *b = a;
	int fd = 99;
	blk_start(b);
	int res = kr_accept(b->fd, NULL, NULL, 0, &fd);
	b->n = (size_t)fd;
	blk_end(b, res);
	return NULL;
}

/* kr_mp_cancel ends the I/O wait of that microprocess only: the others go
 * on waiting, and the bytes that come later go to them. */
static void cancel_of_a_microprocess_ends_only_its_io_wait(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	uint16_t port;
	struct blk b[4];
	kr_mp *m[4];
	for (int i = 0; i < 3; i++)
		b[i] = (struct blk){.fd = p[0], .res = 99};
	b[3] = (struct blk){.fd = listen_any(&port), .res = 99};
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_mp_create(&m[i], &small, i < 3 ? blocked_reader : blocked_acceptor, &b[i]),
		      0);
	KT_WAIT(all_wait(b, 4), kr_mp_sleep_for(MS));
	KT_EQ(kr_mp_cancel(m[1]), 0);
	KT_EQ(kr_mp_cancel(m[3]), 0);
	KT_EQ(kr_mp_join(m[1], NULL), 0);
	KT_EQ(kr_mp_join(m[3], NULL), 0);
	KT_EQ(blk_res(&b[1]), ECANCELED);
	KT_EQ(blk_res(&b[3]), ECANCELED);
	KT_EQ((int)b[3].n, -1);
	KT_EQ(kr_mp_sleep_for(10 * MS), 0); /* time for a stray cancel to land */
	KT_EQ(blk_res(&b[0]), 99); /* still waiting */
	KT_EQ(blk_res(&b[2]), 99);
	KT_EQ(write(p[1], "yz", 2), 2);
	KT_EQ(kr_mp_join(m[0], NULL), 0);
	KT_EQ(kr_mp_join(m[2], NULL), 0);
	KT_EQ(blk_res(&b[0]), 0);
	KT_EQ(b[0].n, 1);
	KT_EQ(blk_res(&b[2]), 0);
	KT_EQ(b[2].n, 1);
	/* the cancel was used up: the next wait runs to its deadline */
	int fd;
	KT_EQ(kr_accept_until(b[3].fd, NULL, NULL, 0, &fd, in_ms(20)), ETIMEDOUT);
	kr_close(b[3].fd);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	io_args(argc, argv);
	KT_RUN(timed_read_times_out_and_takes_nothing);
	KT_RUN(cancel_ends_blocked_reads_and_loses_nothing);
	KT_RUN(close_ends_reads_on_every_vp_and_spares_the_next_fd);
	KT_RUN(bad_input_is_refused);
	KT_RUN(cancel_of_a_microprocess_ends_only_its_io_wait);
	return kt_finish();
}
