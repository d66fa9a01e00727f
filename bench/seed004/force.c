/*
 * FORCE (seed 004 §5.2): an n-body simulation in time steps, 16 workers,
 * each step in two phases that all workers begin together at a barrier
 * (Table 2: a barrier of all threads at short intervals).
 *
 *   phase 1  each worker computes the acceleration of its own bodies from
 *            the positions of all bodies (softened gravity, direct sum)
 *   phase 2  each worker moves its own bodies: velocity, then position
 *            (semi-implicit Euler)
 *
 * The barrier before phase 1 keeps every position a worker reads from
 * being moved under it, the one before phase 2 keeps every position from
 * moving before all have been read.  The paper's program divided the work
 * as Barnes and Hut do; here each worker owns a fixed slice of the bodies
 * (--size, a multiple of 16; default 32, 2 per worker), which keeps the
 * interval between barriers near the paper's 1.7 x 10^3 instructions: a
 * worker's phase 1 is about 3,600 instructions, its phase 2 a few dozen.
 * --steps sets the number of steps (default 20000: about 0.15 s of work
 * on one core).
 *
 * The checksum hashes the final positions and velocities: every body's
 * sum runs over the others in index order, whoever computes it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "seed004.h"

#define FORCE_WORKERS 16
#define FORCE_BODIES 32
#define FORCE_STEPS 20000
#define FORCE_DT 0.001
#define FORCE_SOFT 0.01 /* softening: no division by a vanishing distance */

struct body {
	double p[3], v[3], a[3], mass;
};

struct force {
	long n, steps;
	struct body *b;
	struct s4_barrier phase;
};

static void accelerate(struct force *f, long i)
{
	struct body *me = &f->b[i];
	double a[3] = {0, 0, 0};
	for (long j = 0; j < f->n; j++) {
		const struct body *o = &f->b[j];
		double d[3] = {o->p[0] - me->p[0], o->p[1] - me->p[1], o->p[2] - me->p[2]};
		double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + FORCE_SOFT;
		double s = o->mass / (r2 * sqrt(r2));
		for (int k = 0; k < 3; k++)
			a[k] += d[k] * s;
	}
	for (int k = 0; k < 3; k++)
		me->a[k] = a[k];
}

static void force_worker(void *arg, unsigned id)
{
	struct force *f = arg;
	long per = f->n / FORCE_WORKERS, lo = (long)id * per;
	for (long s = 0; s < f->steps; s++) {
		s4_barrier_wait(&f->phase);
		for (long i = lo; i < lo + per; i++)
			accelerate(f, i);
		s4_barrier_wait(&f->phase);
		for (long i = lo; i < lo + per; i++)
			for (int k = 0; k < 3; k++) {
				f->b[i].v[k] += f->b[i].a[k] * FORCE_DT;
				f->b[i].p[k] += f->b[i].v[k] * FORCE_DT;
			}
	}
}

uint64_t s4_force(struct s4_args *args, unsigned *workers)
{
	if (!args->size)
		args->size = FORCE_BODIES;
	if (!args->steps)
		args->steps = FORCE_STEPS;
	if (args->size % FORCE_WORKERS)
		s4_check(EINVAL, "force: --size must be a multiple of 16");
	struct force f = {.n = args->size, .steps = args->steps};
	f.b = calloc((size_t)f.n, sizeof *f.b);
	if (!f.b)
		s4_check(ENOMEM, "force: bodies");
	/* bodies on a slightly irregular lattice, at rest, of unequal masses */
	for (long i = 0; i < f.n; i++) {
		f.b[i].p[0] = (double)(i % 4) + 0.01 * (double)(i % 7);
		f.b[i].p[1] = (double)(i / 4 % 4) + 0.01 * (double)(i % 5);
		f.b[i].p[2] = (double)(i / 16) + 0.01 * (double)(i % 3);
		f.b[i].mass = 1.0 + 0.1 * (double)(i % 10);
	}
	*workers = FORCE_WORKERS;
	s4_barrier_init(&f.phase, FORCE_WORKERS);
	s4_workers(FORCE_WORKERS, force_worker, &f);
	s4_barrier_destroy(&f.phase);
	uint64_t h = S4_FNV;
	for (long i = 0; i < f.n; i++)
		h = s4_hash(s4_hash(h, f.b[i].p, sizeof f.b[i].p), f.b[i].v, sizeof f.b[i].v);
	free(f.b);
	return h;
}
