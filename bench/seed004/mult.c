/*
 * MULT (seed 004 §5.2): the product of two square matrices of doubles,
 * cut into 4 x 4 blocks, one worker per block of the result: 16 workers
 * that never synchronise until one barrier at the end (Table 2: a barrier
 * of all threads, the longest interval between synchronisations).
 *
 * The paper's matrices are 256 x 256 in blocks of 64 x 64; a product of
 * that size takes a few milliseconds on a core today, less than starting
 * the program, so the order is an argument (--size, a multiple of 4) and
 * its default, 768 (blocks of 192 x 192), makes one run take some tenths
 * of a second on one core.  A worker computes C[bi][bj] = A[bi][*] x
 * B[*][bj] in i-k-j order (the inner loop runs along rows of B and C).
 *
 * The checksum hashes C's bytes: each element is the same sum in the same
 * order whichever worker, thread or VP computes it.
 */
#include <errno.h>
#include <stdlib.h>

#include "seed004.h"

#define MULT_ORDER 768
#define MULT_GRID 4 /* blocks per side: 16 workers */

struct mult {
	long n;
	double *a, *b, *c;
	struct s4_barrier done;
};

static void mult_block(void *arg, unsigned id)
{
	struct mult *m = arg;
	long n = m->n, bs = n / MULT_GRID;
	long r0 = (long)(id / MULT_GRID) * bs, c0 = (long)(id % MULT_GRID) * bs;
	for (long i = r0; i < r0 + bs; i++) {
		double *c = m->c + i * n + c0;
		for (long k = 0; k < n; k++) {
			double aik = m->a[i * n + k];
			const double *b = m->b + k * n + c0;
			for (long j = 0; j < bs; j++)
				c[j] += aik * b[j];
		}
	}
	s4_barrier_wait(&m->done);
}

/* Entries in [-1, 1) from a xorshift generator: the same in every run. */
static void fill(double *x, long len, uint64_t seed)
{
	for (long i = 0; i < len; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		x[i] = (double)(seed >> 11) / (double)(1ull << 52) - 1.0;
	}
}

uint64_t s4_mult(struct s4_args *args, unsigned *workers)
{
	if (!args->size)
		args->size = MULT_ORDER;
	if (args->size % MULT_GRID)
		s4_check(EINVAL, "mult: --size must be a multiple of 4");
	struct mult m = {.n = args->size};
	long len = m.n * m.n;
	m.a = malloc((size_t)len * sizeof *m.a);
	m.b = malloc((size_t)len * sizeof *m.b);
	m.c = calloc((size_t)len, sizeof *m.c);
	if (!m.a || !m.b || !m.c)
		s4_check(ENOMEM, "mult: matrices");
	fill(m.a, len, 0x9e3779b97f4a7c15ull);
	fill(m.b, len, 0xd1b54a32d192ed03ull);
	*workers = MULT_GRID * MULT_GRID;
	s4_barrier_init(&m.done, *workers);
	s4_workers(*workers, mult_block, &m);
	s4_barrier_destroy(&m.done);
	uint64_t h = s4_hash(S4_FNV, m.c, (size_t)len * sizeof *m.c);
	free(m.a);
	free(m.b);
	free(m.c);
	return h;
}
