/*
 * karui-bench-mpi-pipe — a ping-pong over a pipe through karui's I/O, with
 * libkarui-mpi out or in: the program of karui-bench's mpi.pipe, which
 * shows what MPI's event source beside the I/O one costs karui's I/O.
 *
 *   mpirun -np 1 karui-bench-mpi-pipe out|in|pending [--vps N] [--rounds N]
 *
 * Two microprocesses on --vps VPs (default 1) pass a word back and forth
 * over two pipes with kr_read / kr_write, --rounds round trips (default
 * 20000) after 1000 to warm up:
 *
 *   out      no MPI: the I/O back end is karui's one event source
 *   in       kr_mpi_init first: the layer's source beside the I/O one,
 *            nothing pending in it
 *   pending  the same with a receive of the layer's pending all along (a
 *            microprocess in kr_mpi_recv from itself, released at the
 *            end): an idle VP follows MPI's spin and naps
 *
 * It prints one line:
 *
 *   pipe out vps=1 rounds=20000 rtt_ns=...
 *
 * rtt_ns: the median of 5 passes of --rounds / 5 round trips, ns per
 * round trip.  Exit status 0, or 1 with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "karui.h"
#include "karui/mpi.h"

enum { PASSES = 5, WARM = 1000 };

static int ab[2], ba[2]; /* the pipes: ping's writes, pong's writes */
static long rounds;

static void check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "karui-bench-mpi-pipe: %s: %s\n", what, strerror(err));
		exit(1);
	}
}

static void xfer(int rd, int wr, unsigned *v)
{
	size_t got;
	if (wr >= 0) {
		check(kr_write(wr, v, sizeof *v, &got), "kr_write");
		if (got != sizeof *v)
			check(EIO, "kr_write (short)");
	}
	if (rd >= 0) {
		check(kr_read(rd, v, sizeof *v, &got), "kr_read");
		if (got != sizeof *v)
			check(EIO, "kr_read (short)");
	}
}

static void *pong(void *arg)
{
	unsigned v;
	for (long i = 0; i < WARM + rounds; i++) {
		xfer(ab[0], -1, &v);
		v++;
		xfer(-1, ba[1], &v);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void *ping(void *arg)
{
	unsigned v = 0;
	for (long i = 0; i < WARM; i++)
		xfer(ba[0], ab[1], &v);
	double ns[PASSES];
	long per = rounds / PASSES;
	for (int p = 0; p < PASSES; p++) {
		uint64_t t0 = kr_now();
		for (long i = 0; i < per; i++)
			xfer(ba[0], ab[1], &v);
		ns[p] = (double)(kr_now() - t0) / (double)per;
	}
	for (long i = (long)PASSES * per; i < rounds; i++)
		xfer(ba[0], ab[1], &v);
	if (v != (unsigned)(WARM + rounds))
		check(EIO, "the word came back wrong");
	qsort(ns, PASSES, sizeof ns[0], cmp);
	static double med;
	med = ns[PASSES / 2];
	return &med;
}

static void *held(void *arg)
{
	int x = 0;
	check(kr_mpi_recv(&x, 1, MPI_INT, 0, 77, MPI_COMM_SELF, NULL), "kr_mpi_recv");
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long vps = 1;
	rounds = 20000;
	for (int i = 2; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--vps"))
			vps = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atol(argv[i + 1]);
	int mpi = !strcmp(mode, "in") || !strcmp(mode, "pending");
	if ((!mpi && strcmp(mode, "out")) || vps < 1 || vps > 64 || rounds < PASSES) {
		fprintf(stderr, "usage: mpirun -np 1 karui-bench-mpi-pipe out|in|pending "
				"[--vps N] [--rounds N]\n");
		return 1;
	}
	kr_config cfg = {.vps = (unsigned)vps};
	check(kr_init(&cfg), "kr_init");
	if (mpi)
		check(kr_mpi_init(&argc, &argv), "kr_mpi_init");
	if (pipe2(ab, O_CLOEXEC) || pipe2(ba, O_CLOEXEC))
		check(errno, "pipe2");
	kr_mp *h = NULL, *a, *b;
	if (!strcmp(mode, "pending"))
		check(kr_mp_create(&h, NULL, held, NULL), "kr_mp_create");
	check(kr_mp_create(&b, NULL, pong, NULL), "kr_mp_create");
	check(kr_mp_create(&a, NULL, ping, NULL), "kr_mp_create");
	void *res;
	check(kr_mp_join(a, &res), "kr_mp_join");
	check(kr_mp_join(b, NULL), "kr_mp_join");
	if (h) {
		int x = 1;
		check(kr_mpi_send(&x, 1, MPI_INT, 0, 77, MPI_COMM_SELF), "kr_mpi_send");
		check(kr_mp_join(h, NULL), "kr_mp_join");
	}
	printf("pipe %s vps=%ld rounds=%ld rtt_ns=%.0f\n", mode, vps, rounds, *(double *)res);
	if (mpi)
		check(kr_mpi_fini(), "kr_mpi_fini");
	check(kr_fini(), "kr_fini");
	return 0;
}
