/*
 * karui-bench: seed004.real — seed 004's workloads as real programs
 * sharing this machine (SPEC U4), the measured counterpart of §5.3's
 * simulation: K programs at once, each with more workers than there are
 * processors, on three ways of managing threads.
 *
 * The programs are karui-bench-seed004 (bench/seed004/): MULT, FORCE and
 * WAVE, the sets K copies of one of them (K = 1, 2, 4, 8; --quick 1, 2,
 * 4) and `mixed`, K programs taken in turn from MULT, FORCE and WAVE
 * (K = 3, 6, 12; --quick 3); --n K runs that K alone.  Systems:
 *
 *   karui        microprocesses on as many VPs as this process may use
 *                processors (2 here), in each program: the paper's simple
 *                two-level scheme, in which every program sizes itself as
 *                if it were alone
 *   karui-1vp    the same on one VP each
 *   pthread      a kernel thread per worker (the paper's kernel threads
 *                only)
 *   karui-carea  karui with kr_config.alloc = &kr_carea and vps 0 (one VP
 *                per processor), the C-area sharing the processors among
 *                the K programs: the paper's proposed scheme.  Each run's
 *                K programs share a segment of their own,
 *                KARUI_CAREA_SEGMENT=/karui-carea-bench-<pid>-<n> in their
 *                environment, removed (shm_unlink) after the run, so that
 *                no run meets another's programs or the user's
 *
 * One run forks the K children at once and waits for all of them (wait4);
 * the makespan runs from before the first fork to the last child's end,
 * so it includes the programs' starts.  Per run, summed over the K
 * children (wait4's rusage counts all of a child's threads): the kernel's
 * voluntary context switches (ru_nvcsw: a thread that blocked) and
 * involuntary ones (ru_nivcsw: a thread preempted while it could run).
 * And for karui-carea, summed over the K programs' kr_carea_stats_get:
 * suspensions (microprocesses stopped in the middle when a program's grant
 * fell) and recoveries (those another VP of the program took over).
 * Each row is the median of 3 runs (--quick: 1), with min and max; the
 * systems alternate run by run so that a slow phase of the machine falls
 * on all of them.  Rows: metric <set>.makespan (ms), <set>.voluntary and
 * <set>.involuntary (switches), x = K, each with its ratio to karui's;
 * <set>.suspensions and <set>.recoveries (karui-carea's); and the ratios
 * of medians that the C-area is judged by, unit "x", system karui-carea:
 * <set>.makespan carea/karui, <set>.makespan carea/pthread and
 * <set>.involuntary pthread/carea.
 *
 * Every child prints its result's checksum; all runs of a workload, on
 * every system, must print the same one (the first run's), or the row
 * fails.  Before the timed runs, each system runs each workload once at a
 * tiny size, untimed: it warms the page cache and the loader, and a system
 * that cannot run is reported once, as failed, and left out; so is
 * karui-carea when its programs run without the C-area (attached=0).  A
 * run that takes longer than XR_TIMEOUT seconds is killed and fails its
 * row.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exp.h"

#define XR "seed004.real"
#define XR_PROG "karui-bench-seed004"
enum { XR_KMAX = 12, XR_REPS = 3, XR_TIMEOUT = 300 };

enum { XR_KARUI, XR_1VP, XR_PTHREAD, XR_CAREA, XR_NSYS };
static const struct xr_sys {
	const char *name, *mode;
	unsigned vps; /* --vps; 0: the processors (karui), none (others) */
} XR_SYS[XR_NSYS] = {
	{"karui", "karui", 0},
	{"karui-1vp", "karui", 1},
	{"pthread", "pthread", 0},
	{"karui-carea", "carea", 0},
};

enum { XR_MULT, XR_FORCE, XR_WAVE, XR_NPROG };
static const char *const XR_PROGS[XR_NPROG] = {"mult", "force", "wave"};
/* each program's arguments for the untimed warm-up run */
static const char *const XR_TINY[XR_NPROG][2] = {
	{"--size", "32"}, {"--steps", "10"}, {"--steps", "10"}};

static const struct xr_set {
	const char *name;
	int nprog, prog[XR_NPROG]; /* the K programs: prog[i % nprog] */
	int ks[4], nks, nks_quick;
} XR_SETS[] = {
	{"mult", 1, {XR_MULT}, {1, 2, 4, 8}, 4, 3},
	{"force", 1, {XR_FORCE}, {1, 2, 4, 8}, 4, 3},
	{"wave", 1, {XR_WAVE}, {1, 2, 4, 8}, 4, 3},
	{"mixed", 3, {XR_MULT, XR_FORCE, XR_WAVE}, {3, 6, 12}, 3, 1},
};
#define XR_NSETS (sizeof XR_SETS / sizeof XR_SETS[0])

/* what one run of K programs measured; the last two, karui-carea's alone */
enum { XR_MAKESPAN, XR_VOL, XR_INVOL, XR_SUSP, XR_RECOV, XR_NMET };
static const char *const XR_MET[XR_NMET] = {"makespan", "voluntary", "involuntary",
					    "suspensions", "recoveries"};
static const char *const XR_UNIT[XR_NMET] = {"ms", "switches", "switches", "count", "count"};

struct xr_run {
	double v[XR_NMET];
	char why[200]; /* empty: the run went well */
};

/* The checksum every run of a program must print: [tiny][program] */
static struct {
	int have;
	unsigned long long sum;
	const char *sys;
} xr_ref[2][XR_NPROG];

static unsigned xr_processors(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}

static double xr_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static volatile sig_atomic_t xr_alarmed;
static void xr_on_alarm(int sig)
{
	(void)sig;
	xr_alarmed = 1;
}

/* Start one program with its stdout on a pipe (*out: the read end), and
 * KARUI_CAREA_SEGMENT=seg in its environment unless seg is NULL. */
static pid_t xr_spawn(const char *exe, char *const argv[], const char *seg, int *out)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (seg)
			setenv("KARUI_CAREA_SEGMENT", seg, 1);
		execv(exe, argv);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0)
		close(p[0]);
	else
		*out = p[0];
	return pid;
}

/* The value of "key=" in a child's line, in base `base`; 0 when absent. */
static int xr_field(const char *line, const char *key, int base, unsigned long long *v)
{
	char pat[32];
	snprintf(pat, sizeof pat, " %s=", key);
	const char *p = strstr(line, pat);
	if (!p)
		return 0;
	char *end;
	*v = strtoull(p + strlen(pat), &end, base);
	return end != p + strlen(pat);
}

/* Read a child's output (small: it fits the pipe) and check its checksum. */
static void xr_collect(int fd, int prog, const struct xr_sys *y, int tiny, int st,
		       struct xr_run *r)
{
	char line[512];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof line - 1 && (n = read(fd, line + len, sizeof line - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	line[len] = 0;
	close(fd);
	if (r->why[0])
		return;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (WIFSIGNALED(st))
			snprintf(r->why, sizeof r->why, "%s %s ended by signal %d", XR_PROGS[prog],
				 y->mode, WTERMSIG(st));
		else
			snprintf(r->why, sizeof r->why, "%s %s exited with status %d",
				 XR_PROGS[prog], y->mode, WEXITSTATUS(st));
		return;
	}
	unsigned long long sum;
	if (!xr_field(line, "checksum", 16, &sum)) {
		snprintf(r->why, sizeof r->why, "%s %s printed no checksum", XR_PROGS[prog],
			 y->mode);
		return;
	}
	if (!xr_ref[tiny][prog].have) {
		xr_ref[tiny][prog].have = 1;
		xr_ref[tiny][prog].sum = sum;
		xr_ref[tiny][prog].sys = y->name;
	} else if (xr_ref[tiny][prog].sum != sum) {
		snprintf(r->why, sizeof r->why, "%s's checksum %016llx differs from %s's %016llx",
			 XR_PROGS[prog], sum, xr_ref[tiny][prog].sys, xr_ref[tiny][prog].sum);
		return;
	}
	if (strcmp(y->mode, "carea"))
		return;
	unsigned long long attached, susp, recov;
	if (!xr_field(line, "attached", 10, &attached) || !attached ||
	    !xr_field(line, "suspensions", 10, &susp) || !xr_field(line, "recoveries", 10, &recov)) {
		snprintf(r->why, sizeof r->why, "%s ran without the C-area (attached=0)",
			 XR_PROGS[prog]);
		return;
	}
	r->v[XR_SUSP] += (double)susp;
	r->v[XR_RECOV] += (double)recov;
}

/* One run: the K programs of set s at once on system y. */
static void xr_run(const kb_ctx *c, const struct xr_set *s, int k, const struct xr_sys *y,
		   int tiny, struct xr_run *r)
{
	static unsigned segments;
	char exe[PATH_MAX], vps[16], seg[64];
	snprintf(exe, sizeof exe, "%s/%s", c->dir, XR_PROG);
	snprintf(vps, sizeof vps, "%u", y->vps ? y->vps : xr_processors());
	snprintf(seg, sizeof seg, "/karui-carea-bench-%d-%u", (int)getpid(), segments++);
	int carea = !strcmp(y->mode, "carea");
	memset(r, 0, sizeof *r);
	pid_t pid[XR_KMAX];
	int fd[XR_KMAX], prog[XR_KMAX], st[XR_KMAX], n = 0;
	fflush(stdout);
	double t0 = xr_now_ms(), t1 = t0;
	for (; n < k; n++) {
		prog[n] = s->prog[n % s->nprog];
		char *argv[8] = {XR_PROG, (char *)XR_PROGS[prog[n]], (char *)y->mode};
		int a = 3;
		if (!strcmp(y->mode, "karui"))
			argv[a++] = "--vps", argv[a++] = vps;
		if (tiny)
			argv[a++] = (char *)XR_TINY[prog[n]][0], argv[a++] = (char *)XR_TINY[prog[n]][1];
		if ((pid[n] = xr_spawn(exe, argv, carea ? seg : NULL, &fd[n])) < 0) {
			snprintf(r->why, sizeof r->why, "fork: %s", strerror(errno));
			break;
		}
	}
	struct sigaction sa = {.sa_handler = xr_on_alarm}, old;
	sigaction(SIGALRM, &sa, &old); /* no SA_RESTART: wait4 returns EINTR */
	xr_alarmed = 0;
	alarm(XR_TIMEOUT);
	for (int left = n; left > 0;) {
		int status;
		struct rusage ru;
		pid_t p = wait4(-1, &status, 0, &ru);
		if (p < 0 && errno == EINTR && xr_alarmed) {
			for (int i = 0; i < n; i++)
				if (pid[i] > 0)
					kill(pid[i], SIGKILL);
			snprintf(r->why, sizeof r->why, "killed after %d s", XR_TIMEOUT);
			xr_alarmed = 0;
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			break;
		for (int i = 0; i < n; i++)
			if (pid[i] == p) {
				pid[i] = 0;
				st[i] = status;
				r->v[XR_VOL] += (double)ru.ru_nvcsw;
				r->v[XR_INVOL] += (double)ru.ru_nivcsw;
				t1 = xr_now_ms();
				left--;
			}
	}
	alarm(0);
	sigaction(SIGALRM, &old, NULL);
	if (carea)
		shm_unlink(seg);
	r->v[XR_MAKESPAN] = t1 - t0;
	for (int i = 0; i < n; i++)
		xr_collect(fd[i], prog[i], y, tiny, st[i], r);
}

/* One ratio of medians a / b as a row of karui-carea's, unit "x". */
static void xr_ratio(const kb_ctx *c, const char *set, int k, const char *what, double a,
		     double b)
{
	if (a <= 0 || b <= 0)
		return;
	char metric[64];
	double q = a / b;
	snprintf(metric, sizeof metric, "%s.%s", set, what);
	kb_row(c, XR, XR_SYS[XR_CAREA].name, metric, "x", &q, 1, 0, k);
}

/* The rows of one set and K: each system's medians (med stays 0 for a
 * system that did not run), then the ratios the C-area is judged by. */
static void xr_rows(const kb_ctx *c, const struct xr_set *s, int k, const int *want,
		    double v[XR_NSYS][XR_NMET][XR_REPS], char why[XR_NSYS][200], int reps)
{
	double med[XR_NSYS][XR_NMET] = {{0}};
	for (int y = 0; y < XR_NSYS; y++) {
		if (!want[y])
			continue;
		if (why[y][0]) {
			kb_row_none(XR, XR_SYS[y].name, "failed", why[y]);
			continue;
		}
		for (int m = 0; m < (y == XR_CAREA ? XR_NMET : XR_SUSP); m++) {
			char metric[48];
			snprintf(metric, sizeof metric, "%s.%s", s->name, XR_MET[m]);
			med[y][m] = kb_row(c, XR, XR_SYS[y].name, metric, XR_UNIT[m], v[y][m], reps,
					   y == XR_KARUI ? 0 : med[XR_KARUI][m], k);
		}
	}
	double *ca = med[XR_CAREA];
	xr_ratio(c, s->name, k, "makespan carea/karui", ca[XR_MAKESPAN], med[XR_KARUI][XR_MAKESPAN]);
	xr_ratio(c, s->name, k, "makespan carea/pthread", ca[XR_MAKESPAN],
		 med[XR_PTHREAD][XR_MAKESPAN]);
	if (ca[XR_MAKESPAN] > 0)
		xr_ratio(c, s->name, k, "involuntary pthread/carea", med[XR_PTHREAD][XR_INVOL],
			 ca[XR_INVOL]);
}

void kb_seed004_real(const kb_ctx *c)
{
	int want[XR_NSYS], reps = c->quick ? 1 : XR_REPS;
	for (int y = 0; y < XR_NSYS; y++) {
		want[y] = kb_want(c, XR, XR_SYS[y].name);
		for (int p = 0; want[y] && p < XR_NPROG; p++) {
			struct xr_set one = {XR_PROGS[p], 1, {p}};
			struct xr_run r;
			xr_run(c, &one, 1, &XR_SYS[y], 1, &r);
			if (r.why[0]) {
				kb_row_none(XR, XR_SYS[y].name, "failed", r.why);
				want[y] = 0;
			}
		}
	}
	for (size_t si = 0; si < XR_NSETS; si++) {
		const struct xr_set *s = &XR_SETS[si];
		int nks = c->n ? 1 : c->quick ? s->nks_quick : s->nks;
		for (int ki = 0; ki < nks; ki++) {
			int k = c->n ? (int)(c->n < XR_KMAX ? c->n : XR_KMAX) : s->ks[ki];
			double v[XR_NSYS][XR_NMET][XR_REPS];
			char why[XR_NSYS][200] = {{0}};
			for (int rep = 0; rep < reps; rep++)
				for (int y = 0; y < XR_NSYS; y++) {
					if (!want[y] || why[y][0])
						continue;
					fprintf(stderr, "karui-bench: %s / %s, K = %d, %s (run %d of %d) ...\n",
						XR, s->name, k, XR_SYS[y].name, rep + 1, reps);
					struct xr_run r;
					xr_run(c, s, k, &XR_SYS[y], 0, &r);
					memcpy(why[y], r.why, sizeof why[y]);
					for (int m = 0; m < XR_NMET; m++)
						v[y][m][rep] = r.v[m];
				}
			xr_rows(c, s, k, want, v, why, reps);
		}
	}
}
