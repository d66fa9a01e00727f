/*
 * karui-ssf — SSF, the clock-level multiprocessor simulator of seed 002,
 * from the command line (ssf.h has the machine):
 *
 *   karui-ssf [--backend karui|ucontext|pthread|all] [--program sum|barrier|prodcons|all]
 *             [--cpus N] [--scale K]
 *
 * Defaults: karui, sum, 4 CPUs, scale 1.  Each run prints its result check,
 * the simulated cycles, the switches and the wall time.  With several back
 * ends, each program's runs must agree on cycles, switches and the final
 * memory.  Exit status: 0 all checks passed (and runs agreed), 1 a check
 * failed or runs disagreed, 2 bad arguments or a run that could not start.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssf.h"

static int usage(const char *msg, const char *arg)
{
	if (msg)
		fprintf(stderr, "karui-ssf: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	fprintf(stderr, "usage: karui-ssf [--backend karui|ucontext|pthread|all]"
			" [--program sum|barrier|prodcons|all] [--cpus 1..%u] [--scale 1..%u]\n",
		SSF_CPUS_MAX, SSF_SCALE_MAX);
	return 2;
}

static int number(const char *s, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = s && *s >= '0' && *s <= '9' ? strtoul(s, &end, 10) : 0;
	if (!s || *s < '0' || *s > '9' || *end || errno || v < 1 || v > max)
		return EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* name, or every name of `all` for "all"; NULL-terminated into out */
static int choose(const char *name, const char *const *all, const char **out)
{
	int n = 0;
	for (; all[n]; n++)
		if (strcmp(name, "all") == 0)
			out[n] = all[n];
	if (strcmp(name, "all") == 0) {
		out[n] = NULL;
		return 0;
	}
	for (int i = 0; all[i]; i++)
		if (strcmp(name, all[i]) == 0) {
			out[0] = all[i];
			out[1] = NULL;
			return 0;
		}
	return EINVAL;
}

int main(int argc, char **argv)
{
	const char *bes[8], *progs[8];
	unsigned cpus = 4, scale = 1;
	choose("karui", ssf_backend_names, bes);
	choose("sum", ssf_program_names, progs);
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0)
			return usage(NULL, NULL), 0;
		if (!v)
			return usage("missing value or unknown option", o);
		i++;
		if (strcmp(o, "--backend") == 0) {
			if (choose(v, ssf_backend_names, bes))
				return usage("unknown back end", v);
		} else if (strcmp(o, "--program") == 0) {
			if (choose(v, ssf_program_names, progs))
				return usage("unknown program", v);
		} else if (strcmp(o, "--cpus") == 0) {
			if (number(v, SSF_CPUS_MAX, &cpus))
				return usage("--cpus wants 1 to 32", v);
		} else if (strcmp(o, "--scale") == 0) {
			if (number(v, SSF_SCALE_MAX, &scale))
				return usage("--scale wants 1 to 1000", v);
		} else {
			return usage("unknown option", o);
		}
	}
	int status = 0;
	for (int p = 0; progs[p]; p++) {
		ssf_result first = {0}, r;
		for (int b = 0; bes[b]; b++) {
			char why[160] = "";
			int e = ssf_run(ssf_backend_find(bes[b]), progs[p], cpus, scale, &r, why,
					sizeof why);
			if (e) {
				fprintf(stderr, "karui-ssf: %s on %s: %s\n", progs[p], bes[b], why);
				return 2;
			}
			printf("%-8s %-8s %2u CPUs  %s: %s; %llu cycles, %llu switches, %.3f ms"
			       " (%.1f ns per switch)\n",
			       progs[p], bes[b], cpus, r.ok ? "ok" : "FAILED", r.check,
			       (unsigned long long)r.cycles, (unsigned long long)r.switches,
			       r.wall_ns / 1e6, r.wall_ns / (double)r.switches);
			if (!r.ok)
				status = 1;
			if (b == 0) {
				first = r;
			} else if (r.cycles != first.cycles || r.switches != first.switches ||
				   r.digest != first.digest) {
				printf("%-8s %-8s differs from %s: the simulation is not deterministic\n",
				       progs[p], bes[b], bes[0]);
				status = 1;
			}
		}
	}
	return status;
}
