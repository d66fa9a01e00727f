/*
 * karui-bench: seed 000 Table 2 and seed 002 Figures 3 and 4, karui against
 * the systems that stand for the seeds' peers today.
 *
 * seed000.table2 (seed 000 §4.2.1): the paper's double loop.  The inner
 * loop nests the processes: a chain of n, each creating the next and
 * waiting for it to end, so that all n are alive at the deepest point and
 * no stack or record can be reused within a pass; the outer loop repeats
 * the chain, so its later passes show what the caches save.  "first" is the
 * first pass per process in a fresh program (each repeat is a new process:
 * `karui-bench chain SYS N M`, or the Go program), "cached" the later m
 * passes per process, the paper's ((m+1)n - 1n) / mn.  A process's cost is
 * its creation, two switches (parent to child, child to parent), the
 * parent's join and the child's end.  Unlike the paper, memory is not
 * touched beforehand: a fresh program's first pass pays its page faults.
 *
 * seed002.fig3 (L = C = x) and seed002.fig4 (L = 1, C = x), x = 1..10
 * (seed 002 §5.1): two flows switch 2,000,000 times in all, each from call
 * depth C, reached from depth L by nested calls and left by returns after
 * each switch (bench/peers/nest.c).  call-only is the same loop with a
 * switch that does nothing, the calls' own cost, which the paper measured
 * apart; a system's net switch cost is its figure minus call-only's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exp.h"

/* ---- seed000.table2 ---- */

enum { T2_N = 1000, T2_M = 10 }; /* the paper's 1k and [11-1] */

static const struct {
	const char *sys;
	kb_fn fn; /* NULL: the Go program */
} T2[] = {
	{"karui", kb_karui_chain},
	{"ucontext", kb_ucontext_chain},
	{"ucontext-mprot", kb_ucontext_mprot_chain},
	{"boost-fiber", kb_fiber_chain},
	{"go", NULL},
	{"pthread", kb_pthread_chain},
};
#define NT2 (sizeof T2 / sizeof T2[0])

int kb_chain_once(const char *sys, long n, long m)
{
	for (size_t i = 0; i < NT2; i++)
		if (T2[i].fn && !strcmp(T2[i].sys, sys)) {
			kb_args a = {.iters = m, .n = n};
			kb_res r = {0, -1, -1, -1};
			int err = T2[i].fn(&a, &r);
			if (err) {
				fprintf(stderr, "karui-bench: chain %s: %s\n", sys, strerror(err));
				return 1;
			}
			printf("{\"first\": %.3f, \"cached\": %.3f}\n", r.ns_per_op, r.ns_cached);
			return 0;
		}
	fprintf(stderr, "karui-bench: no chain for '%s'\n", sys);
	return 2;
}

/* One fresh process: 0 and *first, *cached in ns, or -1 (could not run). */
static int chain_process(const kb_ctx *c, const char *sys, int go, long n, double *first,
			 double *cached)
{
	char cmd[PATH_MAX + 128];
	if (go)
		snprintf(cmd, sizeof cmd, "%s/karui-bench-go chain %d %ld 1", c->dir, T2_M, n);
	else
		snprintf(cmd, sizeof cmd, "%s/karui-bench chain %s %ld %d", c->dir, sys, n, T2_M);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[256];
	int got = 0;
	if (fgets(line, sizeof line, p) &&
	    sscanf(line, "{\"first\": %lf, \"cached\": %lf}", first, cached) == 2)
		got = 1;
	return pclose(p) == 0 && got ? 0 : -1;
}

void kb_seed000_table2(const kb_ctx *c)
{
	const char *exp = "seed000.table2";
	long n = c->n ? c->n : T2_N;
	double karui[2] = {0, 0};
	for (size_t i = 0; i < NT2; i++) {
		if (!kb_want(c, exp, T2[i].sys))
			continue;
		if (!T2[i].fn) {
			char go[PATH_MAX + 32];
			snprintf(go, sizeof go, "%s/karui-bench-go", c->dir);
			if (access(go, X_OK) != 0) {
				kb_row_none(exp, T2[i].sys, "skipped",
					    "karui-bench-go not built (no Go toolchain)");
				continue;
			}
		}
		double first[16], cached[16];
		int r = 0;
		for (; r < c->reps; r++)
			if (chain_process(c, T2[i].sys, !T2[i].fn, n, &first[r], &cached[r]) != 0)
				break;
		if (r < c->reps) {
			kb_row_none(exp, T2[i].sys, "failed", "a chain process failed");
			continue;
		}
		for (r = 0; r < c->reps; r++) {
			first[r] /= 1e3;
			cached[r] /= 1e3;
		}
		int k = !strcmp(T2[i].sys, "karui");
		double f = kb_row(c, exp, T2[i].sys, "first", "us", first, c->reps, karui[0], -1);
		double m = kb_row(c, exp, T2[i].sys, "cached", "us", cached, c->reps, karui[1], -1);
		if (k) {
			karui[0] = f;
			karui[1] = m;
		}
	}
}

/* ---- seed002.fig3 / fig4 ---- */

enum { NEST_SWITCHES = 2000000, NEST_DEPTHS = 10 };

static const struct {
	const char *sys;
	kb_fn fn;
	long div; /* fewer switches for a slow system (its figure is per switch) */
} NEST[] = {
	{"karui", kb_karui_nest},
	{"boost-fcontext", kb_fcontext_nest},
	{"ucontext", kb_ucontext_nest, 10},
	{"call-only", kb_call_nest},
};
#define NNEST (sizeof NEST / sizeof NEST[0])

static void nest_fig(const kb_ctx *c, const char *exp, int fig3)
{
	double karui[NEST_DEPTHS + 1] = {0};
	long switches = NEST_SWITCHES / (c->quick ? 10 : 1);
	for (size_t i = 0; i < NNEST; i++) {
		if (!kb_want(c, exp, NEST[i].sys))
			continue;
		for (long x = 1; x <= NEST_DEPTHS; x++) {
			kb_args a = {.iters = switches / (NEST[i].div ? NEST[i].div : 1),
				     .l = fig3 ? x : 1, .c = x};
			double v[16];
			int err = kb_repeat(c, NEST[i].fn, &a, v);
			if (err) {
				kb_row_none(exp, NEST[i].sys, "failed", strerror(err));
				break;
			}
			int k = !strcmp(NEST[i].sys, "karui");
			double med = kb_row(c, exp, NEST[i].sys, "switch", "ns", v, c->reps,
					    k ? 0 : karui[x], (double)x);
			if (k)
				karui[x] = med;
		}
	}
}

void kb_seed002_fig3(const kb_ctx *c)
{
	nest_fig(c, "seed002.fig3", 1);
}

void kb_seed002_fig4(const kb_ctx *c)
{
	nest_fig(c, "seed002.fig4", 0);
}
