/*
 * WAVE (seed 004 §5.2): a wavefront over a 10 x 10 mesh of workers, one
 * per cell, each synchronising with two neighbours only (Table 2: the
 * shortest interval between synchronisations, about 900 instructions).
 *
 * Every sweep, the cell (i, j) receives a word from its north neighbour
 * (i - 1, j) and one from its west neighbour (i, j - 1) (cells on the
 * edges have fewer), mixes them into its own state with --grain rounds of
 * integer work (9 instructions a round; default 100, the paper's 900
 * instructions), and sends the result to its south and east neighbours.
 * Each link is a mailbox of one word (seed004.h), so a cell runs at most
 * one sweep ahead of the neighbours it feeds; sweeps follow one another
 * as waves from the north-west corner.  --steps sets the sweeps (default
 * 4000: about 0.12 s of work on one core).
 *
 * No deadlock: a cell waiting to receive in sweep s waits for a cell
 * north or west of it, at sweep s or earlier; one waiting to send in sweep
 * s waits for a cell south or east of it that has not finished sweep
 * s - 1.  Each wait points to a smaller (sweep, i + j), so a chain of
 * waits ends at a cell that runs.
 *
 * 100 workers on every system: the paper's mesh is 100 user threads, and
 * its kernel-threads-only scheme ran each as a kernel thread, which is
 * what the pthread mode does (100 threads).  Sharing 16 threads among the
 * cells would make the pthread program a user-level scheduler of its own.
 *
 * The checksum hashes every cell's final state: a cell's inputs, sweep
 * by sweep, do not depend on when anything runs.
 */
#include <errno.h>
#include <stdlib.h>

#include "seed004.h"

#define WAVE_SIDE S4_WAVE_SIDE
#define WAVE_CELLS (WAVE_SIDE * WAVE_SIDE)
#define WAVE_GRAIN 100
#define WAVE_SWEEPS 4000

struct wave {
	long sweeps, grain;
	uint64_t state[WAVE_CELLS];
	struct s4_mailbox south[WAVE_CELLS], east[WAVE_CELLS]; /* the links a cell sends on */
};

/* grain rounds of a multiply-xorshift mix: a chain of dependent integer
 * operations that no compiler folds away */
uint64_t s4_wave_work(uint64_t x, long grain)
{
	for (long r = 0; r < grain; r++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		x ^= x >> 29;
	}
	return x;
}

static void wave_cell(void *arg, unsigned id)
{
	struct wave *w = arg;
	unsigned i = id / WAVE_SIDE, j = id % WAVE_SIDE;
	uint64_t x = w->state[id];
	for (long s = 0; s < w->sweeps; s++) {
		if (i > 0)
			x ^= s4_mailbox_recv(&w->south[id - WAVE_SIDE]);
		if (j > 0)
			x += s4_mailbox_recv(&w->east[id - 1]);
		x = s4_wave_work(x, w->grain);
		if (i < WAVE_SIDE - 1)
			s4_mailbox_send(&w->south[id], x);
		if (j < WAVE_SIDE - 1)
			s4_mailbox_send(&w->east[id], x >> 1);
	}
	w->state[id] = x;
}

void s4_wave_defaults(struct s4_args *args)
{
	if (!args->steps)
		args->steps = WAVE_SWEEPS;
	if (!args->grain)
		args->grain = WAVE_GRAIN;
}

uint64_t s4_wave_seed(unsigned cell) { return 0x9e3779b97f4a7c15ull * (cell + 1); }

uint64_t s4_wave(struct s4_args *args, unsigned *workers)
{
	s4_wave_defaults(args);
	struct wave *w = calloc(1, sizeof *w);
	if (!w)
		s4_check(ENOMEM, "wave: mesh");
	w->sweeps = args->steps;
	w->grain = args->grain;
	for (unsigned c = 0; c < WAVE_CELLS; c++) {
		w->state[c] = s4_wave_seed(c);
		s4_mailbox_init(&w->south[c]);
		s4_mailbox_init(&w->east[c]);
	}
	*workers = WAVE_CELLS;
	s4_workers(WAVE_CELLS, wave_cell, w);
	for (unsigned c = 0; c < WAVE_CELLS; c++) {
		s4_mailbox_destroy(&w->south[c]);
		s4_mailbox_destroy(&w->east[c]);
	}
	uint64_t h = s4_hash(S4_FNV, w->state, sizeof w->state);
	free(w);
	return h;
}
