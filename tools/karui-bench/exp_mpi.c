/*
 * karui-bench: mpi.wave and mpi.pipe.
 *
 * mpi.wave — seed 004's WAVE over 2 MPI ranks of this machine
 * (karui-bench-mpi-wave, bench/seed004/mpi_wave.c): the mesh's rows split
 * in two bands, a worker per cell (50 per rank), the links that cross the
 * bands MPI messages.  Systems, each `mpirun -np 2` with the shared-memory
 * and self transports (as tests/mpi_run.sh):
 *
 *   karui          the cells microprocesses on one VP per rank (the two
 *                  ranks share the two processors), MPI through
 *                  libkarui-mpi: a cell waiting for its halo word parks
 *   karui-2vp      the same on two VPs per rank
 *   pthread        a kernel thread per cell, MPI_THREAD_MULTIPLE, MPI's
 *                  blocking calls in the threads
 *   pthread-yield  the same with Open MPI's mpi_yield_when_idle, which
 *                  makes a thread waiting in MPI yield the processor
 *                  between polls (its setting for oversubscribed nodes)
 *
 * --steps 1000 (--quick: 200; --n: sweeps), --grain 100.  Row: metric
 * wave.wall (ms, rank 0's wall_ns: from a barrier before the cells start
 * to the last band's states gathered), x = 2 ranks, each with its ratio
 * to karui's; median of 3 runs (--quick: 1), the systems taking turns run
 * by run.  Every run must print the checksum of the first, or its row
 * fails; a run that takes longer than MW_TIMEOUT seconds is killed (by
 * timeout(1)) and fails its row.
 *
 * mpi.pipe — karui-bench-mpi-pipe (mpi_pipe.c) under `mpirun -np 1`: a
 * ping-pong over a pipe through karui's I/O with libkarui-mpi out (karui),
 * in (-mpi: its event source beside the I/O one, nothing pending) and in
 * with a receive pending all along (-mpi-pending: an idle VP follows MPI's
 * spin and naps), on 1 and 2 VPs (x).  Row: metric pipe.rtt (ns per round
 * trip, the program's median of 5 passes), each with its ratio to the
 * same VPs without MPI; median of 3 runs (--quick: 1).  --n: round trips
 * (20000; --quick: 5000).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exp.h"

#define MW "mpi.wave"
#define MW_PROG "karui-bench-mpi-wave"
enum { MW_REPS = 3, MW_TIMEOUT = 600, MW_RANKS = 2 };

static const struct mw_sys {
	const char *name, *mode, *vps;
	int yield;
} MW_SYS[] = {
	{"karui", "karui", "1", 0},
	{"karui-2vp", "karui", "2", 0},
	{"pthread", "pthread", NULL, 0},
	{"pthread-yield", "pthread", NULL, 1},
};
#define MW_NSYS (sizeof MW_SYS / sizeof MW_SYS[0])

/* `mpirun -np np` of prog_args (NULL-ended) under timeout(1), with the
 * options above and, if yield, Open MPI's mpi_yield_when_idle: what it
 * printed into out (nout bytes, 0-ended); 0, or a reason in why. */
static int mpi_capture(const char *timeout, const char *mpirun, const char *np, int yield,
		       char *const *prog_args, const char *name, char *out, size_t nout,
		       char *why, size_t nwhy)
{
	char limit[16];
	snprintf(limit, sizeof limit, "%d", MW_TIMEOUT);
	char *argv[48];
	int a = 0;
	argv[a++] = "timeout", argv[a++] = limit, argv[a++] = (char *)mpirun;
	argv[a++] = "--allow-run-as-root", argv[a++] = "--oversubscribe";
	argv[a++] = "--bind-to", argv[a++] = "none";
	argv[a++] = "--mca", argv[a++] = "btl", argv[a++] = "self,vader";
	argv[a++] = "--mca", argv[a++] = "btl_vader_single_copy_mechanism", argv[a++] = "none";
	if (yield)
		argv[a++] = "--mca", argv[a++] = "mpi_yield_when_idle", argv[a++] = "1";
	argv[a++] = "-np", argv[a++] = (char *)np;
	for (int i = 0; prog_args[i] && a < 47; i++)
		argv[a++] = prog_args[i];
	argv[a] = NULL;
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		snprintf(why, nwhy, "pipe: %s", strerror(errno));
		return -1;
	}
	setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
	pid_t pid = kb_start(timeout, argv, -1, p[1], -1);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		snprintf(why, nwhy, "cannot start timeout(1)");
		return -1;
	}
	size_t len = 0;
	ssize_t n;
	while (len < nout - 1 && (n = read(p[0], out + len, nout - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	out[len] = 0;
	close(p[0]);
	int st = kb_wait(pid, NULL);
	if (st != 0) {
		snprintf(why, nwhy, "%s: exit status %d%s", name, st,
			 st == 124 ? " (killed by the timeout)" : "");
		return -1;
	}
	return 0;
}

/* One run: rank 0's wall_ns in ms into *ms and its checksum into *sum;
 * 0, or a reason in why. */
static int mw_run(const char *timeout, const char *mpirun, const char *exe,
		  const struct mw_sys *y, const char *steps, double *ms,
		  unsigned long long *sum, char *why, size_t nwhy)
{
	char *args[12];
	int a = 0;
	args[a++] = (char *)exe, args[a++] = (char *)y->mode;
	if (y->vps)
		args[a++] = "--vps", args[a++] = (char *)y->vps;
	args[a++] = "--steps", args[a++] = (char *)steps;
	args[a++] = "--grain", args[a++] = "100";
	args[a] = NULL;
	char out[4096];
	if (mpi_capture(timeout, mpirun, "2", y->yield, args, y->name, out, sizeof out, why, nwhy))
		return -1;
	char *line = strstr(out, "wave "), *w, *c;
	if (!line || !(w = strstr(line, " wall_ns=")) || !(c = strstr(line, " checksum="))) {
		snprintf(why, nwhy, "%s printed no result line", y->name);
		return -1;
	}
	*ms = strtod(w + 9, NULL) / 1e6;
	*sum = strtoull(c + 10, NULL, 16);
	return 0;
}

/* Why the experiment's program cannot run here (`noexe`: it was not
 * built), or NULL, with the paths of mpirun and timeout(1) found (each
 * PATH_MAX bytes). */
static const char *mpi_skip(const char *exe, const char *noexe, char *mpirun, char *timeout)
{
	return access(exe, X_OK)			     ? noexe
	       : kb_find_prog("mpirun", mpirun, PATH_MAX)   ? "no mpirun (scripts/deps.sh installs openmpi-bin)"
	       : kb_find_prog("timeout", timeout, PATH_MAX) ? "no timeout(1)"
							    : NULL;
}

void kb_mpi_wave(const kb_ctx *c)
{
	char timeout[PATH_MAX], mpirun[PATH_MAX], exe[PATH_MAX], steps[24];
	snprintf(exe, sizeof exe, "%s/%s", c->dir, MW_PROG);
	snprintf(steps, sizeof steps, "%ld", c->n ? c->n : c->quick ? 200 : 1000);
	const char *skip = mpi_skip(exe, "no " MW_PROG " (the build found no MPI)", mpirun, timeout);
	int want[MW_NSYS];
	for (size_t y = 0; y < MW_NSYS; y++) {
		want[y] = kb_want(c, MW, MW_SYS[y].name);
		if (want[y] && skip) {
			kb_row_none(MW, MW_SYS[y].name, "skipped", skip);
			want[y] = 0;
		}
	}
	int reps = c->quick ? 1 : MW_REPS;
	double v[MW_NSYS][MW_REPS];
	char why[MW_NSYS][200] = {{0}};
	unsigned long long ref = 0;
	const char *ref_sys = NULL;
	for (int rep = 0; rep < reps; rep++)
		for (size_t y = 0; y < MW_NSYS; y++) {
			if (!want[y] || why[y][0])
				continue;
			fprintf(stderr, "karui-bench: %s, %s (run %d of %d) ...\n", MW,
				MW_SYS[y].name, rep + 1, reps);
			unsigned long long sum;
			if (mw_run(timeout, mpirun, exe, &MW_SYS[y], steps, &v[y][rep], &sum, why[y],
				   sizeof why[y]))
				continue;
			if (!ref_sys)
				ref = sum, ref_sys = MW_SYS[y].name;
			else if (sum != ref)
				snprintf(why[y], sizeof why[y], "checksum %016llx differs from %s's %016llx",
					 sum, ref_sys, ref);
		}
	double karui = 0;
	for (size_t y = 0; y < MW_NSYS; y++) {
		if (!want[y])
			continue;
		if (why[y][0]) {
			kb_row_none(MW, MW_SYS[y].name, "failed", why[y]);
			continue;
		}
		double med = kb_row(c, MW, MW_SYS[y].name, "wave.wall", "ms", v[y], reps,
				    y == 0 ? 0 : karui, MW_RANKS);
		if (y == 0)
			karui = med;
	}
}

/* ---------------- mpi.pipe ---------------- */

#define MP "mpi.pipe"
#define MP_PROG "karui-bench-mpi-pipe"

static const struct {
	const char *name, *mode, *vps;
} MP_SYS[] = {
	{"karui", "out", "1"},
	{"karui-mpi", "in", "1"},
	{"karui-mpi-pending", "pending", "1"},
	{"karui-2vp", "out", "2"},
	{"karui-2vp-mpi", "in", "2"},
	{"karui-2vp-mpi-pending", "pending", "2"},
};
#define MP_NSYS (sizeof MP_SYS / sizeof MP_SYS[0])

void kb_mpi_pipe(const kb_ctx *c)
{
	char timeout[PATH_MAX], mpirun[PATH_MAX], exe[PATH_MAX], rounds[24];
	snprintf(exe, sizeof exe, "%s/%s", c->dir, MP_PROG);
	snprintf(rounds, sizeof rounds, "%ld", c->n ? c->n : c->quick ? 5000 : 20000);
	const char *skip = mpi_skip(exe, "no " MP_PROG " (the build found no MPI)", mpirun, timeout);
	int want[MP_NSYS];
	for (size_t y = 0; y < MP_NSYS; y++) {
		want[y] = kb_want(c, MP, MP_SYS[y].name);
		if (want[y] && skip) {
			kb_row_none(MP, MP_SYS[y].name, "skipped", skip);
			want[y] = 0;
		}
	}
	int reps = c->quick ? 1 : MW_REPS;
	double v[MP_NSYS][MW_REPS];
	char why[MP_NSYS][200] = {{0}};
	for (int rep = 0; rep < reps; rep++)
		for (size_t y = 0; y < MP_NSYS; y++) {
			if (!want[y] || why[y][0])
				continue;
			fprintf(stderr, "karui-bench: %s, %s (run %d of %d) ...\n", MP,
				MP_SYS[y].name, rep + 1, reps);
			char *args[] = {exe,		(char *)MP_SYS[y].mode, "--vps",
					(char *)MP_SYS[y].vps, "--rounds",	   rounds,
					NULL};
			char out[1024], *r;
			if (mpi_capture(timeout, mpirun, "1", 0, args, MP_SYS[y].name, out,
					sizeof out, why[y], sizeof why[y]))
				continue;
			if (!(r = strstr(out, " rtt_ns="))) {
				snprintf(why[y], sizeof why[y], "%s printed no result line",
					 MP_SYS[y].name);
				continue;
			}
			v[y][rep] = strtod(r + 8, NULL);
		}
	/* each against the same VPs without MPI */
	double base[2] = {0, 0};
	for (size_t y = 0; y < MP_NSYS; y++) {
		if (!want[y])
			continue;
		if (why[y][0]) {
			kb_row_none(MP, MP_SYS[y].name, "failed", why[y]);
			continue;
		}
		int two = MP_SYS[y].vps[0] == '2';
		double med = kb_row(c, MP, MP_SYS[y].name, "pipe.rtt", "ns", v[y], reps,
				    y % 3 == 0 ? 0 : base[two], two ? 2 : 1);
		if (y % 3 == 0)
			base[two] = med;
	}
}
