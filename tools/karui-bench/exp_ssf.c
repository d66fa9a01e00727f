/*
 * karui-bench: seed002.ssf — seed 002 §5.2, SSF sped up by a faster switch.
 *
 * The simulator of tools/ssf (its library, linked in: the same machine and
 * programs as karui-ssf) runs each program — sum, barrier, prodcons — on x
 * simulated CPUs (4 with --quick; 2, 4 and 8 otherwise; --n N: N alone)
 * with every agent switched by karui, by swapcontext and by kernel threads
 * with a hand-off.  Rows per (program, x, system):
 *
 *   metric <program>          ms per run: the simulation from its first
 *                             cycle to its last (start-up excluded)
 *   metric <program>.cycles   the simulated cycles, which must be karui's
 *                             on every system: ratio_to_karui 1
 *
 * The size of a run (the program's scale) is chosen once per (program, x)
 * from two karui runs, so that a run makes about TARGET switches (one per
 * agent per cycle); every system then runs that same simulation.
 * The systems' runs alternate, round by round, so that a slow phase of a
 * shared machine falls on all of them alike.  A system whose result check
 * fails, or whose cycles differ from karui's, is reported as failed rather
 * than timed.  pthread runs take a few hundred times as long, so they get
 * PT_REPS timed runs (still after a warm-up).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exp.h"
#include "ssf.h"

enum { TARGET_QUICK = 30000, TARGET = 200000, PT_REPS = 3 };

static const char *const SYS[] = {"karui", "ucontext", "pthread"};
#define NSYS (sizeof SYS / sizeof SYS[0])

/* The switches of `program` on `cpus` at `scale` (karui runs it); 0 on error. */
static double switches_at(const char *program, unsigned cpus, unsigned scale)
{
	ssf_result r;
	char why[160];
	if (ssf_run(&ssf_backend_karui, program, cpus, scale, &r, why, sizeof why) != 0)
		return 0;
	return (double)r.switches;
}

static unsigned clamp_scale(double s)
{
	return s < 1 ? 1 : s > SSF_SCALE_MAX ? SSF_SCALE_MAX : (unsigned)s;
}

/* The scale that gives `program` about `target` switches on `cpus`: the
 * first round's cold misses make switches grow slower than the scale, so
 * one correction from a run at the first guess. */
static unsigned scale_for(const char *program, unsigned cpus, double target)
{
	double one = switches_at(program, cpus, 1);
	if (one <= 0)
		return 1;
	unsigned s = clamp_scale(target / one);
	double got = switches_at(program, cpus, s);
	return got > 0 ? clamp_scale(s * target / got) : s;
}

/* One run; 0, or -1 with why[] filled. */
static int run_once(const char *sys, const char *program, unsigned cpus, unsigned scale,
		    double *ms, uint64_t *cycles, char *why, size_t len)
{
	ssf_result r;
	if (ssf_run(ssf_backend_find(sys), program, cpus, scale, &r, why, len) != 0)
		return -1;
	if (!r.ok) {
		snprintf(why, len, "result check failed: %s", r.check);
		return -1;
	}
	*ms = r.wall_ns / 1e6;
	*cycles = r.cycles;
	return 0;
}

static void one(const kb_ctx *c, const char *exp, const char *program, unsigned cpus)
{
	unsigned scale = scale_for(program, cpus, c->quick ? TARGET_QUICK : TARGET);
	double ms[NSYS][16];
	uint64_t cycles[NSYS] = {0};
	int want[NSYS], reps[NSYS];
	char why[NSYS][200];
	for (size_t s = 0; s < NSYS; s++) {
		want[s] = kb_want(c, exp, SYS[s]);
		reps[s] = !strcmp(SYS[s], "pthread") && c->reps > PT_REPS ? PT_REPS : c->reps;
		why[s][0] = 0;
	}
	/* round r runs each system once (r = -1: the warm-up), so that a slow
	 * phase of a shared machine falls on all of them alike */
	for (int r = -1; r < c->reps; r++) {
		for (size_t s = 0; s < NSYS; s++) {
			double t;
			if (!want[s] || why[s][0] || r >= reps[s])
				continue;
			if (run_once(SYS[s], program, cpus, scale, &t, &cycles[s], why[s],
				     sizeof why[s]) == 0 && r >= 0)
				ms[s][r] = t;
		}
	}
	char metric[32];
	snprintf(metric, sizeof metric, "%s.cycles", program);
	double karui_ms = 0, karui_cycles = 0;
	for (size_t s = 0; s < NSYS; s++) {
		if (!want[s])
			continue;
		if (!why[s][0] && s > 0 && karui_cycles > 0 && (double)cycles[s] != karui_cycles)
			snprintf(why[s], sizeof why[s], "%s on %u CPUs: %llu cycles, karui %.0f",
				 program, cpus, (unsigned long long)cycles[s], karui_cycles);
		if (why[s][0]) {
			kb_row_none(exp, SYS[s], "failed", why[s]);
			continue;
		}
		double cyc[16];
		for (int i = 0; i < reps[s]; i++)
			cyc[i] = (double)cycles[s];
		double med = kb_row(c, exp, SYS[s], program, "ms", ms[s], reps[s],
				    s ? karui_ms : 0, cpus);
		kb_row(c, exp, SYS[s], metric, "cycles", cyc, reps[s], s ? karui_cycles : 0, cpus);
		if (s == 0) {
			karui_ms = med;
			karui_cycles = (double)cycles[s];
		}
	}
}

void kb_seed002_ssf(const kb_ctx *c)
{
	static const unsigned CPUS[] = {2, 4, 8}, QUICK[] = {4};
	const unsigned *x = c->quick ? QUICK : CPUS;
	size_t nx = c->quick ? 1 : 3;
	unsigned only = c->n >= 2 && c->n <= (long)SSF_CPUS_MAX ? (unsigned)c->n : 0;
	if (only) {
		x = &only;
		nx = 1;
	}
	for (int p = 0; ssf_program_names[p]; p++)
		for (size_t i = 0; i < nx; i++)
			one(c, "seed002.ssf", ssf_program_names[p], x[i]);
}
