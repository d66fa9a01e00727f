/*
 * karui-bench-seed004 — seed 004's workloads as a real program, the
 * program `karui-bench run seed004.real` runs K copies of at once.
 *
 *   karui-bench-seed004 mult|force|wave pthread|karui|carea [OPTIONS]
 *     --vps N          karui: VPs (default: the processors this process
 *                      may use)
 *     --segment /NAME  carea: the C-area's segment (default: the
 *                      environment's KARUI_CAREA_SEGMENT, else the user's)
 *     --size N         mult: the matrices' order; force: bodies
 *     --steps N        force: time steps; wave: sweeps
 *     --grain N        wave: iterations of work between two receives
 *
 * It prints one line on stdout, words of the form key=value after the
 * workload and the mode:
 *
 *   mult karui vps=2 workers=16 size=768 steps=0 grain=0 checksum=... wall_ns=...
 *
 * checksum (16 hex digits) is the result's, the same in every mode for the
 * same sizes; wall_ns is the workload's time, from before its data is made
 * to after its last worker has been joined (the runtime's start and stop
 * are outside).  In carea mode the line goes on with the process's
 * kr_carea_stats_get figures at the end of the workload:
 *
 *   ... attached=1 nvp=2 grant=1 suspensions=12 recoveries=12 preemptions=0
 *       deferred=3 allocations=40
 *
 * attached=0 means karui ran without the C-area (carea.h says when).
 * Exit status 0, or 1 with a message on stderr.
 *
 * The layer of seed004.h, which this program's workloads call, is
 * layer.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seed004.h"

/* ---------------- the program ---------------- */

static const struct {
	const char *name;
	uint64_t (*run)(struct s4_args *a, unsigned *workers);
} WORKLOADS[] = {{"mult", s4_mult}, {"force", s4_force}, {"wave", s4_wave}};
#define NWORKLOADS (sizeof WORKLOADS / sizeof WORKLOADS[0])

static const char *const MODES[] = {"pthread", "karui", "carea"};
#define NMODES (sizeof MODES / sizeof MODES[0])

static int usage(void)
{
	fprintf(stderr, "usage: karui-bench-seed004 mult|force|wave pthread|karui|carea "
			"[--vps N] [--segment /NAME] [--size N] [--steps N] [--grain N]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	size_t w = 0, m = 0;
	while (w < NWORKLOADS && strcmp(argv[1], WORKLOADS[w].name))
		w++;
	while (m < NMODES && strcmp(argv[2], MODES[m]))
		m++;
	if (w == NWORKLOADS || m == NMODES)
		return usage();
	s4_mode = (enum s4_mode)m;
	struct s4_args a = {0};
	long vps = 0;
	kr_carea_config ca = {0};
	unsigned allowed = S4_OPT_VPS | S4_OPT_SIZE | S4_OPT_STEPS | S4_OPT_GRAIN;
	if (s4_mode == S4_CAREA)
		allowed |= S4_OPT_SEGMENT;
	if (s4_options(argc, argv, 3, allowed, &a, &vps, &ca.segment))
		return usage();
	if (vps > KR_VP_MAX || (vps && s4_mode != S4_KARUI))
		return usage();
	if (s4_mode == S4_KARUI) {
		kr_config cfg = {.vps = vps ? (unsigned)vps : s4_processors()};
		vps = cfg.vps;
		s4_check(kr_init(&cfg), "kr_init");
	} else if (s4_mode == S4_CAREA) {
		kr_config cfg = {.alloc = &kr_carea};
		s4_check(kr_carea_configure(&ca), "kr_carea_configure");
		s4_check(kr_init(&cfg), "kr_init");
	}
	unsigned workers;
	uint64_t t0 = s4_now_ns();
	uint64_t sum = WORKLOADS[w].run(&a, &workers);
	uint64_t wall = s4_now_ns() - t0;
	kr_carea_stats st;
	if (s4_mode == S4_CAREA) {
		s4_check(kr_carea_stats_get(&st), "kr_carea_stats_get");
		vps = st.nvp;
	}
	if (s4_mode != S4_PTHREAD)
		s4_check(kr_fini(), "kr_fini");
	printf("%s %s vps=%ld workers=%u size=%ld steps=%ld grain=%ld checksum=%016llx "
	       "wall_ns=%llu", WORKLOADS[w].name, MODES[m], vps, workers, a.size, a.steps,
	       a.grain, (unsigned long long)sum, (unsigned long long)wall);
	if (s4_mode == S4_CAREA)
		printf(" attached=%d nvp=%u grant=%u suspensions=%llu recoveries=%llu "
		       "preemptions=%llu deferred=%llu allocations=%llu", st.attached, st.nvp,
		       st.grant, (unsigned long long)st.suspensions,
		       (unsigned long long)st.recoveries, (unsigned long long)st.preemptions,
		       (unsigned long long)st.deferred, (unsigned long long)st.allocations);
	printf("\n");
	return 0;
}
