/*
 * libkarui-mpi (include/karui/mpi.h), on 2 ranks or more under mpirun
 * (tests/mpi_run.sh), each rank on the VPs given by --vps (default 1).
 *
 * MPI cannot start again in a process, nor in a child of a process that
 * started it, so the tests split in two.  Those that need no MPI run
 * first, each in a child of its own (KT_RUN), before any MPI_Init.  Then
 * each rank runs the MPI tests one after another in its own process: a
 * failed check ends the rank, and mpirun the job, with the check's line;
 * a hang is bounded by the script's timeout.  Each test's name is printed
 * by rank 0 once every rank has passed it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "karui/mpi.h"
#include "kt.h"

static int rank, size;
static unsigned vps = 1;

/* ---------------- without MPI ---------------- */

/* The calls' bad input and EPERM before kr_mpi_init are test_api's. */
static void kr_mpi_init_needs_karui_running(void)
{
	KT_EQ(kr_mpi_init(NULL, NULL), EPERM);
	kr_config cfg = {.vps = 1};
	KT_EQ(kr_init(&cfg), 0);
	int x = 0;
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- on every rank ---------------- */

/* Ranks pair off: 0 with 1, 2 with 3, ... */
static int peer(void) { return rank ^ 1; }

static void kr_mpi_init_adds_the_event_source_once(void)
{
	KT_EQ(kr_mpi_init(NULL, NULL), EBUSY);
	int level = 0;
	KT_EQ(kr_mpi_lock(), 0);
	KT_EQ(MPI_Query_thread(&level), MPI_SUCCESS);
	KT_EQ(kr_mpi_unlock(), 0);
	KT_CHECK(level >= MPI_THREAD_SERIALIZED);
	KT_EQ(kr_mpi_unlock(), EPERM); /* not held */
}

/* A recv parks its microprocess alone: on one VP, the receiver is made
 * first and waits; the sender, made second, can run only if the VP is
 * free, and its synchronous send completes only when the peer's receiver
 * has matched it.  Were the VP blocked in MPI, neither rank would send. */
static void *receiver(void *arg)
{
	int x = -1;
	MPI_Status st;
	KT_EQ(kr_mpi_recv(&x, 1, MPI_INT, peer(), 7, MPI_COMM_WORLD, &st), 0);
	KT_EQ(x, 1000 + peer());
	KT_EQ(st.MPI_SOURCE, peer());
	KT_EQ(st.MPI_TAG, 7);
	return NULL;
}

static void *sender(void *arg)
{
	int x = 1000 + rank;
	KT_EQ(kr_mpi_ssend(&x, 1, MPI_INT, peer(), 7, MPI_COMM_WORLD), 0);
	return NULL;
}

static void a_receive_parks_only_its_microprocess(void)
{
	if (peer() >= size) /* the last of an odd number of ranks */
		return;
	kr_mp *r, *s;
	KT_EQ(kr_mp_create(&r, NULL, receiver, NULL), 0);
	KT_EQ(kr_mp_create(&s, NULL, sender, NULL), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(kr_mp_join(s, NULL), 0);
}

/* Many microprocesses, each in a ping-pong of its own with its twin on
 * the peer rank (the tag tells them apart), all waiting at once. */
enum { PAIRS = 64, ROUNDS = 50 };

static void *pinger(void *arg)
{
	int tag = (int)(intptr_t)arg;
	unsigned long v = (unsigned long)tag;
	for (int i = 0; i < ROUNDS; i++) {
		if (rank == 0) {
			KT_EQ(kr_mpi_send(&v, 1, MPI_UNSIGNED_LONG, 1, tag, MPI_COMM_WORLD), 0);
			KT_EQ(kr_mpi_recv(&v, 1, MPI_UNSIGNED_LONG, 1, tag, MPI_COMM_WORLD, NULL), 0);
		} else {
			KT_EQ(kr_mpi_recv(&v, 1, MPI_UNSIGNED_LONG, 0, tag, MPI_COMM_WORLD, NULL), 0);
			v = v * 3 + 1;
			KT_EQ(kr_mpi_send(&v, 1, MPI_UNSIGNED_LONG, 0, tag, MPI_COMM_WORLD), 0);
		}
	}
	return (void *)v;
}

/* PAIRS pingers started, and joined with the results their rounds give. */
static void pingers_start(kr_mp **m)
{
	for (int i = 0; i < PAIRS; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, pinger, (void *)(intptr_t)i), 0);
}

static void pingers_join(kr_mp **m)
{
	for (int i = 0; i < PAIRS; i++) {
		void *res;
		KT_EQ(kr_mp_join(m[i], &res), 0);
		unsigned long want = (unsigned long)i;
		for (int k = 0; k < ROUNDS; k++)
			want = want * 3 + 1;
		KT_CHECK((unsigned long)res == want);
	}
}

static void many_microprocesses_wait_at_once(void)
{
	if (rank > 1)
		return;
	kr_mp *m[PAIRS];
	pingers_start(m);
	pingers_join(m);
}

/* Collectives park too; a microprocess waiting in one leaves the VP to
 * another that waits for a message a peer sends after its own
 * collective. */
static void *late_message(void *arg)
{
	int x = 0;
	KT_EQ(kr_mpi_recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, NULL), 0);
	KT_EQ(x, 42);
	return NULL;
}

static void collectives_park_the_caller(void)
{
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, late_message, NULL), 0);
	long sum = 0, me = rank + 1;
	KT_EQ(kr_mpi_allreduce(&me, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), 0);
	KT_EQ(sum, (long)size * (size + 1) / 2);
	int word = rank == 0 ? 12345 : 0;
	KT_EQ(kr_mpi_bcast(&word, 1, MPI_INT, 0, MPI_COMM_WORLD), 0);
	KT_EQ(word, 12345);
	long in_place = rank;
	KT_EQ(kr_mpi_allreduce(MPI_IN_PLACE, &in_place, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD), 0);
	KT_EQ(in_place, size - 1);
	int x = 42;
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, (rank + 1) % size, 99, MPI_COMM_WORLD), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mpi_barrier(MPI_COMM_WORLD), 0);
}

/* A message that comes while the rank has nothing else to run: its VP
 * waits in the layer's idle loop (spin, then naps) and still sees it. */
static void an_idle_rank_sees_a_late_message(void)
{
	int x = 0;
	if (rank == 0) {
		KT_EQ(kr_mp_sleep_for(50 * 1000000ull), 0);
		x = 5;
		KT_EQ(kr_mpi_send(&x, 1, MPI_INT, 1, 5, MPI_COMM_WORLD), 0);
	} else if (rank == 1) {
		KT_EQ(kr_mpi_recv(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, NULL), 0);
		KT_EQ(x, 5);
	}
}

/* sendrecv around the ring, and a request of the program's own. */
static void sendrecv_and_own_requests(void)
{
	int out = rank, in = -1;
	MPI_Status st;
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	KT_EQ(kr_mpi_sendrecv(&out, 1, MPI_INT, to, 3, &in, 1, MPI_INT, from, 3, MPI_COMM_WORLD,
			      &st),
	      0);
	KT_EQ(in, from);
	KT_EQ(st.MPI_SOURCE, from);

	MPI_Request r[2];
	int a = -1, b = 100 + rank;
	KT_EQ(kr_mpi_lock(), 0);
	KT_EQ(MPI_Irecv(&a, 1, MPI_INT, from, 4, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
	KT_EQ(MPI_Isend(&b, 1, MPI_INT, to, 4, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
	KT_EQ(kr_mpi_unlock(), 0);
	MPI_Status sts[2];
	KT_EQ(kr_mpi_waitall(2, r, sts), 0);
	KT_EQ(a, 100 + from);
	KT_CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
	KT_EQ(sts[0].MPI_TAG, 4);
	/* a null request completes at once */
	KT_EQ(kr_mpi_wait(&r[0], MPI_STATUS_IGNORE), 0);
}

static void *off_vp_send(void *arg)
{
	int x = 0;
	*(int *)arg = kr_mpi_send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
	return NULL;
}

/* MPI's errors come back as errno codes, and the layer goes on. */
static void errors_are_errno_codes(void)
{
	int x[8] = {0}, y[4];
	KT_EQ(kr_mpi_send(x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD), EINVAL); /* no such rank */
	KT_EQ(kr_mpi_send(x, 1, MPI_INT, 0, -2, MPI_COMM_WORLD), EINVAL);        /* bad tag */
	KT_EQ(kr_mpi_recv(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), EINVAL);
	/* more requests than any table holds: ENOMEM, before any is read */
	MPI_Request none = MPI_REQUEST_NULL;
	KT_EQ(kr_mpi_waitall(INT_MAX, &none, NULL), ENOMEM);
	/* a message longer than the receive: EMSGSIZE */
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	KT_EQ(kr_mpi_send(x, 8, MPI_INT, to, 11, MPI_COMM_WORLD), 0);
	KT_EQ(kr_mpi_recv(y, 4, MPI_INT, from, 11, MPI_COMM_WORLD, NULL), EMSGSIZE);
	/* from a thread that is no VP */
	pthread_t t;
	int err = 0;
	KT_EQ(pthread_create(&t, NULL, off_vp_send, &err), 0);
	KT_EQ(pthread_join(t, NULL), 0);
	KT_EQ(err, EPERM);
	/* still working */
	KT_EQ(kr_mpi_barrier(MPI_COMM_WORLD), 0);
}

/* ---------------- beside karui's I/O ---------------- */

/* Both event sources at once: the first call of karui's I/O adds its
 * source beside the layer's; from then on an idle VP sleeps in the I/O
 * source, and MPI's naps are the timeouts of that sleep. */
enum { ECHOES = 200 };

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	for (int i = 0; i < ECHOES; i++) {
		unsigned v;
		size_t got;
		KT_EQ(kr_read(fd, &v, sizeof v, &got), 0);
		KT_EQ(got, sizeof v);
		v = v * 2 + 1;
		KT_EQ(kr_write(fd, &v, sizeof v, &got), 0);
		KT_EQ(got, sizeof v);
	}
	return NULL;
}

static void *echo_client(void *arg)
{
	int fd = (int)(intptr_t)arg;
	for (unsigned i = 0; i < ECHOES; i++) {
		unsigned v = i + 1000u * (unsigned)rank;
		size_t got;
		KT_EQ(kr_write(fd, &v, sizeof v, &got), 0);
		KT_EQ(kr_read(fd, &v, sizeof v, &got), 0);
		KT_EQ(got, sizeof v);
		KT_EQ(v, (i + 1000u * (unsigned)rank) * 2 + 1);
		if (i % 50 == 0)
			KT_EQ(kr_mp_sleep_for(1000000), 0);
	}
	return NULL;
}

/* A pipe's reader whose writer is a thread that is no VP, after a
 * while: the read completes while the VPs are idle. */
static void *late_pipe_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct timespec ts = {0, 30 * 1000000};
	nanosleep(&ts, NULL);
	char c = 'L';
	KT_EQ(write(fd, &c, 1), 1);
	return NULL;
}

static void *late_pipe_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c = 0;
	size_t got;
	KT_EQ(kr_read(fd, &c, 1, &got), 0);
	KT_EQ(got, 1);
	KT_EQ(c, 'L');
	return NULL;
}

/* In one process, at once: the ping-pongs of many_microprocesses_wait_at_once,
 * an echo over a socketpair through kr_read and kr_write with sleeps in
 * between, and a pipe written late by a plain thread; then, on rank 1, a
 * message that comes while the rank has nothing else to run. */
static void mpi_and_io_in_one_process(void)
{
	if (rank > 1)
		return;
	int sv[2], p[2];
	KT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	KT_EQ(pipe2(p, O_CLOEXEC), 0);
	kr_mp *e, *c, *r, *m[PAIRS];
	pthread_t t;
	KT_EQ(kr_mp_create(&e, NULL, echo, (void *)(intptr_t)sv[1]), 0);
	KT_EQ(kr_mp_create(&c, NULL, echo_client, (void *)(intptr_t)sv[0]), 0);
	KT_EQ(kr_mp_create(&r, NULL, late_pipe_reader, (void *)(intptr_t)p[0]), 0);
	KT_EQ(pthread_create(&t, NULL, late_pipe_writer, (void *)(intptr_t)p[1]), 0);
	pingers_start(m);
	pingers_join(m);
	KT_EQ(kr_mp_join(e, NULL), 0);
	KT_EQ(kr_mp_join(c, NULL), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(pthread_join(t, NULL), 0);
	an_idle_rank_sees_a_late_message();
	KT_EQ(kr_close(sv[0]), 0);
	KT_EQ(kr_close(sv[1]), 0);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(p[1]), 0);
}

static void *recv_word(void *arg)
{
	int x = 0;
	KT_EQ(kr_mpi_recv(&x, 1, MPI_INT, peer(), 21, MPI_COMM_WORLD, NULL), 0);
	KT_EQ(x, 2100 + peer());
	return NULL;
}

/* A rank whose microprocesses wait on a pipe and on an MPI message for a
 * second: its VPs nap (MPI's schedule) in the I/O source, and use little
 * CPU (MPI alone: about 3% of a processor, docs/mpi.md). */
static void a_rank_waiting_on_both_uses_little_cpu(void)
{
	if (rank > 1)
		return;
	int p[2];
	KT_EQ(pipe2(p, O_CLOEXEC), 0);
	kr_mp *a, *b;
	KT_EQ(kr_mp_create(&a, NULL, recv_word, NULL), 0);
	KT_EQ(kr_mp_create(&b, NULL, late_pipe_reader, (void *)(intptr_t)p[0]), 0);
	KT_EQ(kr_mp_sleep_for(100 * 1000000ull), 0); /* past the spin */
	long c0 = kt_proc_ticks(0);
	KT_CHECK(c0 >= 0);
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_sleep_for(1000 * 1000000ull), 0);
	double wall = (double)(kr_now() - t0) / 1e9 * (double)sysconf(_SC_CLK_TCK);
	long used = kt_proc_ticks(0) - c0;
	fprintf(stderr, "  rank %d: %ld ticks of CPU in %.0f\n", rank, used, wall);
	KT_CHECK(used < wall / 4);
	int x = 2100 + rank;
	size_t got;
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, peer(), 21, MPI_COMM_WORLD), 0);
	KT_EQ(kr_write(p[1], "L", 1, &got), 0);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(p[1]), 0);
}

struct step {
	const char *name;
	void (*fn)(void);
};
#define STEP(f) {#f, f}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--vps"))
			vps = (unsigned)atoi(argv[i + 1]);
	kt_args(1, argv);
	KT_RUN(kr_mpi_init_needs_karui_running);
	if (kt_fail)
		return kt_finish();

	kr_config cfg = {.vps = vps};
	KT_EQ(kr_init(&cfg), 0);
	alarm(240);
	KT_EQ(kr_mpi_init(&argc, &argv), 0);
	KT_EQ(kr_mpi_lock(), 0);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	KT_EQ(kr_mpi_unlock(), 0);
	if (size < 2) {
		kr_mpi_fini();
		kr_fini();
		KT_SKIP("needs 2 ranks or more");
	}
	static const struct step steps[] = {
		STEP(kr_mpi_init_adds_the_event_source_once),
		STEP(a_receive_parks_only_its_microprocess),
		STEP(many_microprocesses_wait_at_once),
		STEP(collectives_park_the_caller),
		STEP(an_idle_rank_sees_a_late_message),
		STEP(sendrecv_and_own_requests),
		STEP(errors_are_errno_codes),
		/* from here on, karui's I/O is in too */
		STEP(mpi_and_io_in_one_process),
		STEP(a_rank_waiting_on_both_uses_little_cpu),
		STEP(many_microprocesses_wait_at_once),
		STEP(collectives_park_the_caller),
		STEP(sendrecv_and_own_requests),
	};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		steps[i].fn();
		KT_EQ(kr_mpi_barrier(MPI_COMM_WORLD), 0);
		kt_pass++;
		if (rank == 0)
			printf("ok      %s (%d ranks, %u VPs each)\n", steps[i].name, size, vps);
	}
	KT_EQ(kr_mpi_fini(), 0);
	KT_EQ(kr_mpi_fini(), EPERM);
	int x = 0;
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_fini(), 0);
	return rank == 0 ? kt_finish() : 0;
}
