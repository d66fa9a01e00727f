/*
 * karui-bench-mpi-wave — seed 004's WAVE (wave.c) over MPI ranks: the
 * example of libkarui-mpi (docs/mpi.md), and the program of karui-bench's
 * mpi.wave.
 *
 *   mpirun -np P karui-bench-mpi-wave karui|pthread [--vps N] [--steps N]
 *                                                   [--grain N]
 *
 * The 10 x 10 mesh is cut into P bands of whole rows (P <= 10), rank r
 * holding rows [r * 10 / P, (r + 1) * 10 / P): a worker per cell of its
 * band.  Links inside a band are seed004.h's one-word mailboxes, as in
 * wave.c; the south links that cross from the last row of a band to the
 * first row of the next are MPI messages, tagged with the column: the halo
 * exchange.  A crossing link is a synchronous send (MPI_Ssend), which
 * completes once the receiver has matched it, so that it is a mailbox of
 * one word too and a cell still runs at most one sweep ahead of the cells
 * it feeds; Open MPI's eager sends would let the upper bands run the whole
 * run ahead.
 *
 *   karui    the cells are microprocesses on --vps VPs (default: the
 *            processors the rank may use); MPI through libkarui-mpi
 *            (MPI_THREAD_SERIALIZED): a cell waiting for its halo word
 *            parks, and its VP runs the band's other cells
 *   pthread  a kernel thread per cell, MPI_THREAD_MULTIPLE, each crossing
 *            cell calling MPI_Ssend / MPI_Recv itself: MPI's blocking
 *            calls wait in the thread (Open MPI polls its progress engine
 *            there)
 *
 * At the end every rank sends its band's states to rank 0, which prints
 * one line:
 *
 *   wave karui ranks=2 vps=1 workers=50 steps=4000 grain=100 checksum=... wall_ns=...
 *
 * workers are rank 0's cells; checksum is FNV-1a over the 100 cells' final
 * states in order, the same for every P, both modes, and
 * `karui-bench-seed004 wave` with the same --steps and --grain (a cell's
 * inputs, sweep by sweep, do not depend on where or when anything runs);
 * wall_ns runs on rank 0 from a barrier before the cells start to the
 * last band's states received.  Exit status 0, or 1 with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "karui/mpi.h"
#include "seed004.h"

#define SIDE S4_WAVE_SIDE

struct band {
	int rank, ranks;
	unsigned row0, rows; /* the band: rows [row0, row0 + rows) */
	long sweeps, grain;
	uint64_t *state;                    /* rows * SIDE, by local cell */
	struct s4_mailbox *south, *east;    /* the links a local cell sends on */
};

static int mpi_err(int rc) { return rc == MPI_SUCCESS ? 0 : EIO; }

/* The crossing links, in the mode's way. */
static void halo_send(struct band *b, uint64_t x, unsigned col)
{
	if (s4_mode == S4_PTHREAD)
		s4_check(mpi_err(MPI_Ssend(&x, 1, MPI_UINT64_T, b->rank + 1, (int)col,
					   MPI_COMM_WORLD)),
			 "MPI_Ssend");
	else
		s4_check(kr_mpi_ssend(&x, 1, MPI_UINT64_T, b->rank + 1, (int)col, MPI_COMM_WORLD),
			 "kr_mpi_ssend");
}

static uint64_t halo_recv(struct band *b, unsigned col)
{
	uint64_t x;
	if (s4_mode == S4_PTHREAD)
		s4_check(mpi_err(MPI_Recv(&x, 1, MPI_UINT64_T, b->rank - 1, (int)col,
					  MPI_COMM_WORLD, MPI_STATUS_IGNORE)),
			 "MPI_Recv");
	else
		s4_check(kr_mpi_recv(&x, 1, MPI_UINT64_T, b->rank - 1, (int)col, MPI_COMM_WORLD,
				     MPI_STATUS_IGNORE),
			 "kr_mpi_recv");
	return x;
}

/* wave.c's cell, on global row i, with the band's edges crossing ranks. */
static void cell(void *arg, unsigned id)
{
	struct band *b = arg;
	unsigned i = b->row0 + id / SIDE, j = id % SIDE;
	int first = i == b->row0, last = i == b->row0 + b->rows - 1;
	uint64_t x = b->state[id];
	for (long s = 0; s < b->sweeps; s++) {
		if (i > 0)
			x ^= first ? halo_recv(b, j) : s4_mailbox_recv(&b->south[id - SIDE]);
		if (j > 0)
			x += s4_mailbox_recv(&b->east[id - 1]);
		x = s4_wave_work(x, b->grain);
		if (i < SIDE - 1) {
			if (last)
				halo_send(b, x, j);
			else
				s4_mailbox_send(&b->south[id], x);
		}
		if (j < SIDE - 1)
			s4_mailbox_send(&b->east[id], x >> 1);
	}
	b->state[id] = x;
}

/* Rank 0: the 100 states, its own band's and every other's (tag SIDE,
 * beyond the columns'), in order. */
static uint64_t gather_hash(struct band *b)
{
	uint64_t *all = malloc(SIDE * SIDE * sizeof *all);
	if (!all)
		s4_check(ENOMEM, "states");
	memcpy(all, b->state, b->rows * SIDE * sizeof *all);
	for (int r = 1; r < b->ranks; r++) {
		unsigned row0 = (unsigned)(r * SIDE / b->ranks);
		unsigned rows = (unsigned)((r + 1) * SIDE / b->ranks) - row0;
		int n = (int)(rows * SIDE);
		if (s4_mode == S4_PTHREAD)
			s4_check(mpi_err(MPI_Recv(all + row0 * SIDE, n, MPI_UINT64_T, r, SIDE,
						  MPI_COMM_WORLD, MPI_STATUS_IGNORE)),
				 "MPI_Recv");
		else
			s4_check(kr_mpi_recv(all + row0 * SIDE, n, MPI_UINT64_T, r, SIDE,
					     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
				 "kr_mpi_recv");
	}
	uint64_t h = s4_hash(S4_FNV, all, SIDE * SIDE * sizeof *all);
	free(all);
	return h;
}

static void send_band(struct band *b)
{
	int n = (int)(b->rows * SIDE);
	if (s4_mode == S4_PTHREAD)
		s4_check(mpi_err(MPI_Send(b->state, n, MPI_UINT64_T, 0, SIDE, MPI_COMM_WORLD)),
			 "MPI_Send");
	else
		s4_check(kr_mpi_send(b->state, n, MPI_UINT64_T, 0, SIDE, MPI_COMM_WORLD),
			 "kr_mpi_send");
}

static void barrier(void)
{
	if (s4_mode == S4_PTHREAD)
		s4_check(mpi_err(MPI_Barrier(MPI_COMM_WORLD)), "MPI_Barrier");
	else
		s4_check(kr_mpi_barrier(MPI_COMM_WORLD), "kr_mpi_barrier");
}

static int usage(void)
{
	fprintf(stderr, "usage: mpirun -np P karui-bench-mpi-wave karui|pthread [--vps N] "
			"[--steps N] [--grain N]   (P <= %d)\n", SIDE);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *mode = argv[1];
	if (!strcmp(argv[1], "karui"))
		s4_mode = S4_KARUI;
	else if (!strcmp(argv[1], "pthread"))
		s4_mode = S4_PTHREAD;
	else
		return usage();
	struct s4_args a = {0};
	long vps = 0;
	if (s4_options(argc, argv, 2, S4_OPT_VPS | S4_OPT_STEPS | S4_OPT_GRAIN, &a, &vps, NULL))
		return usage();
	if (vps > KR_VP_MAX || (vps && s4_mode != S4_KARUI))
		return usage();
	s4_wave_defaults(&a);

	struct band b = {.sweeps = a.steps, .grain = a.grain};
	if (s4_mode == S4_KARUI) {
		kr_config cfg = {.vps = vps ? (unsigned)vps : s4_processors()};
		vps = cfg.vps;
		s4_check(kr_init(&cfg), "kr_init");
		s4_check(kr_mpi_init(&argc, &argv), "kr_mpi_init");
		s4_check(kr_mpi_lock(), "kr_mpi_lock");
	} else {
		int level;
		s4_check(mpi_err(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level)),
			 "MPI_Init_thread");
		if (level < MPI_THREAD_MULTIPLE)
			s4_check(ENOTSUP, "MPI_THREAD_MULTIPLE");
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.ranks);
	if (s4_mode == S4_KARUI)
		s4_check(kr_mpi_unlock(), "kr_mpi_unlock");
	if (b.ranks > SIDE)
		s4_check(EINVAL, "more ranks than rows");
	b.row0 = (unsigned)(b.rank * SIDE / b.ranks);
	b.rows = (unsigned)((b.rank + 1) * SIDE / b.ranks) - b.row0;
	unsigned n = b.rows * SIDE;
	b.state = calloc(n, sizeof *b.state);
	b.south = calloc(n, sizeof *b.south);
	b.east = calloc(n, sizeof *b.east);
	if (!b.state || !b.south || !b.east)
		s4_check(ENOMEM, "band");
	for (unsigned c = 0; c < n; c++) {
		b.state[c] = s4_wave_seed(b.row0 * SIDE + c);
		s4_mailbox_init(&b.south[c]);
		s4_mailbox_init(&b.east[c]);
	}

	barrier();
	uint64_t t0 = s4_now_ns();
	s4_workers(n, cell, &b);
	uint64_t sum = 0;
	if (b.rank == 0)
		sum = gather_hash(&b);
	else
		send_band(&b);
	uint64_t wall = s4_now_ns() - t0;

	for (unsigned c = 0; c < n; c++) {
		s4_mailbox_destroy(&b.south[c]);
		s4_mailbox_destroy(&b.east[c]);
	}
	free(b.state);
	free(b.south);
	free(b.east);
	if (s4_mode == S4_KARUI) {
		s4_check(kr_mpi_fini(), "kr_mpi_fini");
		s4_check(kr_fini(), "kr_fini");
	} else {
		MPI_Finalize();
	}
	if (b.rank == 0)
		printf("wave %s ranks=%d vps=%ld workers=%u steps=%ld grain=%ld checksum=%016llx "
		       "wall_ns=%llu\n", mode, b.ranks, vps, n, a.steps, a.grain,
		       (unsigned long long)sum, (unsigned long long)wall);
	return 0;
}
