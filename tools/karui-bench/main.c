/*
 * karui-bench — the experiments of the seeds, karui against its peers in
 * the same run.
 *
 *   karui-bench list
 *   karui-bench run NAME|all [--quick] [--json] [--only SYSTEM] [--n N]
 *   karui-bench count SYSTEM EXPERIMENT N     (one run, for callgrind)
 *   karui-bench locked SYSTEM EXPERIMENT [N]  (locked instructions by site)
 *   karui-bench serve-pthread | serve-epoll [THREADS]   (the http peers)
 *
 * Each (experiment, system) pair is run once to warm up (caches, branch
 * predictors, the CPU's clock, the runtime's own caches: the run is not
 * counted) and then `repeats` times; the median is reported with min and
 * max, and every peer's ratio to karui's median
 * (peer / karui: above 1, karui is faster or smaller).  Progress goes to
 * stderr; results to stdout, as a table or as one JSON object per line.
 *
 * The `instructions` experiment runs `karui-bench count` under
 * valgrind --tool=callgrind twice, with N and 2N operations, and reports
 * (Ir(2N) - Ir(N)) / N: the instructions of one operation, set-up and
 * tear-down cancelled out, and the same for the locked instructions (the
 * atomic read-modify-writes; callgrind.c).  Counts repeat exactly from run
 * to run.  `karui-bench locked` lists where the locked ones are.
 *
 * Go goroutines run in a separate program (bench/peers/go, installed as
 * karui-bench-go next to this binary) that prints one JSON line per repeat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exp.h"

#define MAXSYS 8

struct sys {
	const char *name;
	kb_fn fn;          /* NULL: the Go program */
	const char *go;    /* Go program's experiment name */
	long div;          /* iterations divided by this (slow peers) */
	long ncap;         /* cap on n (0: none) */
};

struct exp {
	const char *name, *what, *metric, *unit;
	long iters, n;     /* full run; --quick divides iters by 10 (and see quick_n) */
	struct sys sys[MAXSYS];
	double scale;      /* ns in one unit of the metric (0: the unit is ns) */
	long quick_n;      /* n with --quick (0: n) */
};

static const struct exp EXPS[] = {
	{"yield", "two flows on one core yielding to each other", "yield", "ns",
	 2000000, 0,
	 {{"karui", kb_karui_yield},
	  {"bare-switch", kb_bare_switch},
	  {"bare-fpctl", kb_bare_fpctl_switch},
	  {"boost-fiber", kb_fiber_yield},
	  {"go", NULL, "yield"},
	  {"pthread", kb_pthread_yield, NULL, 20}}},
	{"switch_to", "direct hand-off between two flows", "switch", "ns",
	 2000000, 0,
	 {{"karui", kb_karui_switch},
	  {"bare-switch", kb_bare_switch},
	  {"bare-fpctl", kb_bare_fpctl_switch},
	  {"boost-fcontext", kb_fcontext_switch},
	  {"ucontext", kb_ucontext_switch, NULL, 10}}},
	{"create_join", "create a flow that does nothing and join it, one at a time",
	 "create+join", "ns", 1000000, 0,
	 {{"karui", kb_karui_create_join},
	  {"bare-switch", kb_bare_create_join},
	  {"boost-fcontext", kb_fcontext_create_join},
	  {"ucontext", kb_ucontext_create_join, NULL, 10},
	  {"boost-fiber", kb_fiber_create_join},
	  {"go", NULL, "create_join"},
	  {"pthread", kb_pthread_create_join, NULL, 200}}},
	{"create_batch", "create n flows, then join them all (per flow)",
	 "create+join", "ns", 1, 10000,
	 {{"karui", kb_karui_create_batch},
	  {"boost-fiber", kb_fiber_create_batch},
	  {"go", NULL, "create_batch"},
	  {"pthread", kb_pthread_create_batch, NULL, 1, 2000}}},
	{"many", "n flows alive at once, each blocked: create time and memory per flow",
	 "create", "ns", 1, 100000,
	 {{"karui", kb_karui_many},
	  {"boost-fiber", kb_fiber_many},
	  {"go", NULL, "many"},
	  {"pthread", kb_pthread_many, NULL, 1, 5000}}},
	{"mutex", "uncontended lock + unlock (seed 000 Table 3)", "lock+unlock", "ns",
	 20000000, 0,
	 {{"karui", kb_karui_mutex},
	  {"spin-lock", kb_spin_mutex},
	  {"boost-fiber", kb_fiber_mutex},
	  {"go", NULL, "mutex"},
	  {"pthread", kb_pthread_mutex}}},
	{"monitor", "monitor enter, signal with no waiter, exit (seed 000 Table 3)",
	 "enter+signal+exit", "ns", 20000000, 0,
	 {{"karui", kb_karui_monitor},
	  {"boost-fiber", kb_fiber_monitor},
	  {"go", NULL, "monitor"},
	  {"pthread", kb_pthread_monitor}}},
	{"condvar_pingpong",
	 "two flows, one monitor, two condition variables, one core (seed 000 Table 4)",
	 "round trip", "ns", 2000000, 0,
	 {{"karui", kb_karui_condvar_pingpong},
	  {"boost-fiber", kb_fiber_condvar_pingpong},
	  {"go", NULL, "condvar_pingpong"},
	  {"pthread", kb_pthread_condvar_pingpong, NULL, 20}}},
	{"sem_pingpong", "two flows, two semaphores, one core", "round trip", "ns",
	 2000000, 0,
	 {{"karui", kb_karui_sem_pingpong},
	  {"pthread", kb_pthread_sem_pingpong, NULL, 20}}},
	{"chan_pingpong", "two flows, two unbuffered channels, one core", "round trip",
	 "ns", 2000000, 0,
	 {{"karui", kb_karui_chan_pingpong},
	  {"bare-switch", kb_bare_pingpong},
	  {"boost-fiber", kb_fiber_chan_pingpong},
	  {"go", NULL, "chan_pingpong"}}},
	{"chan_relay",
	 "chan_pingpong with both flows in one function, blocking under the same return addresses",
	 "round trip", "ns", 2000000, 0,
	 {{"karui", kb_karui_chan_relay},
	  {"bare-switch", kb_bare_relay},
	  {"boost-fiber", kb_fiber_chan_relay},
	  {"go", NULL, "chan_relay"}}},
	{"chan_pingpong_2vp", "chan_pingpong on 2 VPs, the flows where the scheduler puts them",
	 "round trip", "ns", 1000000, 0,
	 {{"karui", kb_karui_chan_pingpong_2vp}}},
	{"rendezvous", "entry call, accept, reply, one core", "call", "ns", 2000000, 0,
	 {{"karui", kb_karui_rendezvous},
	  {"boost-fiber", kb_fiber_rendezvous},
	  {"go", NULL, "rendezvous"},
	  {"pthread", kb_pthread_rendezvous, NULL, 20}}},
	{"stream", "4 KiB blocks from a writer to a reader through a pipe",
	 "4 KiB block", "ns", 50000, 0,
	 {{"karui", kb_karui_stream},
	  {"go", NULL, "stream"},
	  {"unix-pipe", kb_unix_pipe_stream}}},
	{"skynet", "a spawn tree of n leaves, 10 children per flow, on 2 cores (default settings)",
	 "tree", "ms", 1, 1000000,
	 {{"karui", kb_karui_skynet},
	  {"go", NULL, "skynet"},
	  {"boost-fiber", kb_fiber_skynet}}, 1e6, 100000},
	{"prodcons", "64 producers, 64 consumers, one monitor, pauses of 2 ms; n items",
	 "run", "ms", 1000000, 0,
	 {{"karui", kb_karui_prodcons},
	  {"karui-1vp", kb_karui_prodcons_1vp},
	  {"go", NULL, "prodcons"},
	  {"pthread", kb_pthread_prodcons}}, 1e6},
};
#define NEXPS (sizeof EXPS / sizeof EXPS[0])

/* systems and operations counted by the `instructions` experiment; with
 * `in`, only the instructions executed inside that function (callgrind's
 * --toggle-collect), reported as `metric` */
static const struct {
	const char *sys, *exp;
	kb_fn fn;
	const char *in, *metric;
} COUNTS[] = {
	{"karui", "yield", kb_karui_yield},
	{"karui", "switch_to", kb_karui_switch},
	{"karui", "create_join", kb_karui_create_join},
	{"karui", "create_join", kb_karui_create_join, "kr_mp_create", "create"},
	{"bare-switch", "switch_to", kb_bare_switch},
	{"bare-fpctl", "switch_to", kb_bare_fpctl_switch},
	{"bare-switch", "create_join", kb_bare_create_join},
	{"boost-fcontext", "switch_to", kb_fcontext_switch},
	{"boost-fiber", "yield", kb_fiber_yield},
	{"boost-fiber", "create_join", kb_fiber_create_join},
	{"karui", "mutex", kb_karui_mutex},
	{"spin-lock", "mutex", kb_spin_mutex},
	{"karui", "condvar_pingpong", kb_karui_condvar_pingpong},
	{"karui", "chan_pingpong", kb_karui_chan_pingpong},
	{"bare-switch", "chan_pingpong", kb_bare_pingpong},
	{"karui", "chan_relay", kb_karui_chan_relay},
	{"karui", "sem_pingpong", kb_karui_sem_pingpong},
	{"karui", "rendezvous", kb_karui_rendezvous},
	{"boost-fiber", "mutex", kb_fiber_mutex},
	{"boost-fiber", "condvar_pingpong", kb_fiber_condvar_pingpong},
	{"boost-fiber", "chan_pingpong", kb_fiber_chan_pingpong},
	{"boost-fiber", "chan_relay", kb_fiber_chan_relay},
	{"boost-fiber", "rendezvous", kb_fiber_rendezvous},
};
#define NCOUNTS (sizeof COUNTS / sizeof COUNTS[0])

/* The seeds' experiments with shapes of their own (exp.h: kb_ctx). */
static const struct seed {
	const char *name, *what, *systems;
	void (*run)(const kb_ctx *c);
} SEEDS[] = {
	{"seed000.table2",
	 "create/terminate, a chain of n nested processes: first pass, cached passes",
	 "karui ucontext ucontext-mprot boost-fiber go pthread", kb_seed000_table2},
	{"seed000.table5",
	 "a parallel database query of 8 microprocesses with speculative work, x = VPs",
	 "karui-fifo karui-prio karui-needed", kb_seed000_table5},
	{"seed001.ipc",
	 "synchronous calls between two processes: NullProc, ArgNoRtn, ArgRtn_NoCopy, "
	 "ArgRtn_Copy, x = the argument in KiB (2, 4, 8), us per call (--n: calls per repeat)",
	 "pipe-rpc unix-rpc udp-rpc sysv-msgq sun-rpc-udp", kb_seed001_ipc},
	{"seed001.count",
	 "instructions of one EPC call (NullProc, ArgRtn_Copy at 8 KiB) per protection "
	 "mode, single-stepped; EPC-H in a VM whose CPU has protection keys where this "
	 "one has none",
	 "", kb_seed001_count},
	{"seed002.fig3", "2,000,000 switches between two flows at call depth L = C = 1..10",
	 "karui boost-fcontext ucontext call-only", kb_seed002_fig3},
	{"seed002.fig4", "2,000,000 switches between two flows, L = 1, C = 1..10",
	 "karui boost-fcontext ucontext call-only", kb_seed002_fig4},
	{"seed002.ssf",
	 "SSF, a clock-level multiprocessor simulator switching every agent every cycle: "
	 "ms per run of sum, barrier, prodcons on x CPUs (--n: x)",
	 "karui ucontext pthread", kb_seed002_ssf},
	{"seed004.table1",
	 "instructions of create, stop, resume, switch, exit under callgrind, one VP",
	 "karui boost-fiber", kb_seed004_table1},
	{"seed004.real",
	 "K programs of MULT, FORCE or WAVE (bench/seed004) at once, x = K: makespan ms, "
	 "kernel context switches", "karui karui-1vp pthread karui-carea", kb_seed004_real},
	{"seed004.sim",
	 "seed 004's emulator: thread-management instructions per CPU-second, 8 CPUs, "
	 "x = processes (Figure 6) or grain scale (Figure 7); --n: the most processes",
	 "k-only two-level sched-act proposed", kb_seed004_sim},
	{"carea.stop",
	 "a microprocess stopped in the middle by the C-area, or a thread preempted by "
	 "another program: us until it runs again (--n: the other program's visits)",
	 "karui-carea pthread", kb_carea_stop},
	{"carea.faults",
	 "N flows that fault on 2 ms pages (one notifier) and N that compute 2 ms, "
	 "on one processor: makespan ms (--n: N)",
	 "karui pthread", kb_carea_faults},
	{"seed003.table2", "a null program started and waited for, us per program (--n: "
	 "programs per repeat)", "karui karui-kept karui-not-kept fork-exec posix-spawn pthread",
	 kb_seed003_table2},
	{"seed003.table3", "a byte passed back and forth between two programs, lmbench lat_ctx "
	 "style, ns per hop (a write, a switch, a read) and per switch (the hop less a write "
	 "and a read with no switch), one CPU but -2vp, -2cpu (--n: round trips)",
	 "karui karui-threads karui-mp karui-2vp pthread process pthread-2cpu process-2cpu",
	 kb_seed003_table3},
	{"seed003.pipe", "5000 blocks of 4 KiB from one program to another through a pipe "
	 "(--n: blocks): total and transfer ms", "karui karui-1vp unix-pipe", kb_seed003_pipe},
	{"seed003.pipeline", "`cat words | grep zonation` over a words file of 2.4 MB or more, "
	 "ms per command (-script: per line of a script, in a running shell)",
	 "karui-sh bash dash karui-uproc karui-uproc-iso karui-uproc-1vp karui-uproc-iso-1vp "
	 "karui-sh-script bash-script dash-script "
	 "floor-serial floor-parallel",
	 kb_seed003_pipeline},
	{"seed003.table5", "a call of int foo(void), ns: as a function, into a μprocess "
	 "(kr_uproc_call), by a SysV message queue and a UNIX socket round trip between two "
	 "processes (--n: calls per run; IPC: n/50)", "karui function msgq unix-socket",
	 kb_seed003_table5},
	{"uproc.syscall", "ns per getppid() from a program's code (--n: calls per run)",
	 "karui karui-trap native", kb_uproc_syscall},
	{"uproc.signalfd", "ns per raise() and the read of that signal from a signalfd, from a "
	 "program's code (--n: rounds per run)", "karui karui-trap native", kb_uproc_signalfd},
	{"uproc.count", "cat programs alive at once, each blocked on its stdin, and memory per "
	 "program (--n: how many)", "karui process", kb_uproc_count},
	{"seed003.table6", "a hello-world program's memory by region while it waits on its "
	 "stdin, and how many fit in vm.max_map_count", "karui process", kb_seed003_table6},
	{"seed003.cgi", "CGI programs (hello.c, hello.pl) over HTTP under wrk, --n connections "
	 "(16): req/s, latency, CPU per request", "karui lighttpd", kb_seed003_cgi},
	{"io.files", "many small files read from the page cache, "
	 "ms per pass (--n: files)", "karui karui-epoll read", kb_io_files},
	{"uproc.threads", "Debian's threaded programs (xz -T2, zstd -T2, pigz -p 2, sort "
	 "--parallel=2) and a std::thread loop, natively and under karui-run: wall and CPU ms "
	 "(--n: MB of input)", "karui native", kb_uproc_threads},
	{"pthread.compat", "threaded programs (xz -T4, zstd -T4, pigz -p 4, sort --parallel=4, "
	 "a std::thread loop, sysbench threads and mutex), natively and with "
	 "LD_PRELOAD=libkarui-pthread.so: wall and CPU ms (--n: MB of input)", "karui native",
	 kb_pthread_compat},
	{"uproc.make", "make -j2 of a C project of 8 files, natively and under karui-run (its "
	 "compilers μprocesses too): wall and CPU ms (--n: files)", "karui native", kb_uproc_make},
	{"uproc.script", "a shell script of 1000 external commands run by karui-sh, dash and "
	 "bash: wall and CPU ms (--n: commands)", "karui-sh dash bash", kb_uproc_script},
	{"trace", "a yield's switch with the scheduling trace on (karui-trace) and off, ns per "
	 "switch and per event", "karui karui-trace", kb_trace},
	{"mpi.wave", "seed 004's WAVE on 2 MPI ranks, 50 workers per rank, the rows split "
	 "between the ranks: ms per run (--n: sweeps)", "karui karui-2vp pthread pthread-yield",
	 kb_mpi_wave},
	{"mpi.pipe", "a word back and forth over a pipe between two microprocesses through "
	 "kr_read / kr_write, with libkarui-mpi out, in, and in with a receive pending: ns per "
	 "round trip, x = VPs (--n: round trips)", "karui karui-mpi karui-mpi-pending karui-2vp "
	 "karui-2vp-mpi karui-2vp-mpi-pending", kb_mpi_pipe},
};
#define NSEEDS (sizeof SEEDS / sizeof SEEDS[0])

/* The seeds' tables that are experiments above under their own names. */
static const struct {
	const char *name, *what;
	const char *members[3];
} GROUPS[] = {
	{"seed000.table3", "lock/unlock and monitor enter/exit without a switch",
	 {"mutex", "monitor"}},
	{"seed000.table4", "two condition-variable operations with a switch",
	 {"condvar_pingpong"}},
};
#define NGROUPS (sizeof GROUPS / sizeof GROUPS[0])

static int json, quick;
static const char *only;
static long n_override;
static char self_dir[PATH_MAX];

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct stat3 {
	double med, min, max;
	int runs;
};

static struct stat3 stats(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_d);
	return (struct stat3){n ? v[n / 2] : 0, n ? v[0] : 0, n ? v[n - 1] : 0, n};
}

static void emit_x(const char *exp, const char *sys, const char *metric, const char *unit,
		   struct stat3 s, double karui, long n, double x, const char *note)
{
	double ratio = karui > 0 ? s.med / karui : 0;
	if (json) {
		printf("{\"experiment\":\"%s\",\"system\":\"%s\",\"metric\":\"%s\",\"value\":%.4g,"
		       "\"unit\":\"%s\",\"min\":%.4g,\"max\":%.4g,\"runs\":%d",
		       exp, sys, metric, s.med, unit, s.min, s.max, s.runs);
		if (n)
			printf(",\"n\":%ld", n);
		if (x >= 0)
			printf(",\"x\":%g", x);
		if (karui > 0)
			printf(",\"ratio_to_karui\":%.4g", ratio);
		if (note)
			printf(",\"note\":\"%s\"", note);
		printf("}\n");
	} else {
		printf("%-13s %-15s %-23s %10.4g %-7s [%.4g .. %.4g]", exp, sys, metric, s.med,
		       unit, s.min, s.max);
		if (n)
			printf(" n=%ld", n);
		if (x >= 0)
			printf(" x=%g", x);
		if (karui > 0 && strcmp(sys, "karui") != 0)
			printf("  %6.2fx karui", ratio);
		if (note)
			printf("  (%s)", note);
		printf("\n");
	}
	fflush(stdout);
}

static void emit(const char *exp, const char *sys, const char *metric, const char *unit,
		 struct stat3 s, double karui, long n)
{
	emit_x(exp, sys, metric, unit, s, karui, n, -1, NULL);
}

/* kind: "skipped" (the system is not available here) or "failed" (it ran
 * and reported an error) */
static void emit_none(const char *exp, const char *sys, const char *kind, const char *why)
{
	if (json)
		printf("{\"experiment\":\"%s\",\"system\":\"%s\",\"%s\":\"%s\"}\n", exp, sys,
		       kind, why);
	else
		printf("%-13s %-15s %s: %s\n", exp, sys, kind, why);
	fflush(stdout);
}

int kb_want(const kb_ctx *c, const char *exp, const char *sys)
{
	if (c->only && strcmp(c->only, sys) && strncmp(sys, "karui", 5))
		return 0;
	fprintf(stderr, "karui-bench: %s / %s ...\n", exp, sys);
	return 1;
}

int kb_repeat(const kb_ctx *c, kb_fn fn, const kb_args *a, double *v)
{
	for (int r = -1; r < c->reps; r++) { /* r = -1: the warm-up */
		kb_res res = {0, -1, -1};
		int err = fn(a, &res);
		if (err)
			return err;
		if (r >= 0)
			v[r] = res.ns_per_op;
	}
	return 0;
}

double kb_row_note(const kb_ctx *c, const char *exp, const char *sys, const char *metric,
		   const char *unit, double *v, int nv, double karui, double x, const char *note)
{
	(void)c;
	struct stat3 st = stats(v, nv);
	emit_x(exp, sys, metric, unit, st, karui, 0, x, note);
	return st.med;
}

double kb_row(const kb_ctx *c, const char *exp, const char *sys, const char *metric,
	      const char *unit, double *v, int nv, double karui, double x)
{
	return kb_row_note(c, exp, sys, metric, unit, v, nv, karui, x, NULL);
}

void kb_row_none(const char *exp, const char *sys, const char *kind, const char *why)
{
	emit_none(exp, sys, kind, why);
}

int kb_two_pipes(int a[2], int b[2])
{
	if (pipe2(a, O_CLOEXEC))
		return errno;
	if (pipe2(b, O_CLOEXEC)) {
		int e = errno;
		close(a[0]);
		close(a[1]);
		return e;
	}
	return 0;
}

static cpu_set_t pin_all; /* the CPUs kb_pin gives back */
static int pinned;

int kb_pin(int on)
{
	if (!on) {
		if (pinned)
			sched_setaffinity(0, sizeof pin_all, &pin_all);
		return pinned = 0;
	}
	if (pinned || sched_getaffinity(0, sizeof pin_all, &pin_all))
		return pinned;
	int cpu = sched_getcpu();
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu >= 0 && CPU_ISSET(cpu, &pin_all) ? cpu : 0, &one);
	return pinned = sched_setaffinity(0, sizeof one, &one) == 0;
}

/* Run the Go program; fills ns[], rss[] and peak[] with one value per
 * repeat (-1: none). */
static int run_go(const char *exp, long iters, long n, int reps, double *ns, double *rss,
		  double *peak)
{
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof cmd, "%s/karui-bench-go", self_dir);
	if (access(cmd, X_OK) != 0)
		return -1;
	snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %s %ld %ld %d", exp, iters, n,
		 reps);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int got = 0;
	char line[256];
	while (got < reps && fgets(line, sizeof line, p)) {
		peak[got] = -1;
		if (sscanf(line, "{\"ns_per_op\": %lf, \"rss_kib\": %lf, \"peak\": %lf", &ns[got],
			   &rss[got], &peak[got]) >= 2)
			got++;
	}
	pclose(p);
	return got;
}

static void run_exp(const struct exp *e)
{
	int reps = quick ? 5 : 11;
	long n = n_override ? n_override : quick && e->quick_n ? e->quick_n : e->n;
	double karui = 0, karui_mem = 0, karui_peak = 0;
	double scale = e->scale > 0 ? e->scale : 1;
	for (int i = 0; i < MAXSYS && e->sys[i].name; i++) {
		const struct sys *s = &e->sys[i];
		if (only && strcmp(only, s->name) != 0 && strcmp(s->name, "karui") != 0)
			continue;
		long iters = e->iters / (quick && e->iters > 1 ? 10 : 1) / (s->div ? s->div : 1);
		long sn = s->ncap && n > s->ncap ? s->ncap : n;
		kb_args a = {.iters = iters < 1 ? 1 : iters, .n = sn > 0 ? sn : 1};
		double ns[16], rss[16], peak[16];
		int got = 0, err = 0;
		fprintf(stderr, "karui-bench: %s / %s ...\n", e->name, s->name);
		if (s->fn) {
			for (int r = -1; r < reps; r++) { /* r = -1: the warm-up */
				kb_res res = {0, -1, -1};
				if ((err = s->fn(&a, &res)) != 0)
					break;
				if (r < 0)
					continue;
				ns[got] = res.ns_per_op;
				peak[got] = res.peak;
				rss[got++] = res.rss_kib;
			}
		} else {
			got = run_go(s->go, a.iters, a.n, reps, ns, rss, peak);
			if (got < 0) {
				emit_none(e->name, s->name, "skipped",
					  "karui-bench-go not built (no Go toolchain)");
				continue;
			}
		}
		if (got < reps) {
			emit_none(e->name, s->name, "failed", err ? strerror(err) : "no result");
			continue;
		}
		for (int r = 0; r < got; r++)
			ns[r] /= scale;
		struct stat3 st = stats(ns, got);
		if (!strcmp(s->name, "karui"))
			karui = st.med;
		emit(e->name, s->name, e->metric, e->unit, st, karui, n ? sn : 0);
		if (rss[0] >= 0 && sn) {
			for (int r = 0; r < got; r++)
				rss[r] = rss[r] * 1024.0 / sn;
			struct stat3 m = stats(rss, got);
			if (!strcmp(s->name, "karui"))
				karui_mem = m.med;
			emit(e->name, s->name, "memory", "B/flow", m, karui_mem, sn);
		}
		if (peak[0] >= 0) {
			struct stat3 m = stats(peak, got);
			if (!strcmp(s->name, "karui"))
				karui_peak = m.med;
			emit(e->name, s->name, "peak live", "flows", m, karui_peak, sn);
		}
	}
}

static void emit_http(const char *exp, const char *sys, const char *metric, const char *unit,
		      double *v, int n, int x, double *karui, long conns)
{
	struct stat3 st = stats(v, n);
	if (!strcmp(sys, "karui"))
		*karui = st.med;
	emit_x(exp, sys, metric, unit, st, *karui, conns, x, NULL);
}

static void run_http(void)
{
	kb_http_opts o = {.dir = self_dir, .only = only, .quick = quick,
			  .conns = n_override ? n_override : 100, .emit = emit_http,
			  .none = emit_none};
	kb_run_http(&o);
}

static void run_instructions(void)
{
	if (system("valgrind --version >/dev/null 2>&1") != 0) {
		emit_none("instructions", "all", "skipped", "valgrind not installed");
		return;
	}
	long n = quick ? 20000 : 100000;
	double karui[NCOUNTS][2] = {{0}}; /* instructions, locked */
	for (size_t i = 0; i < NCOUNTS; i++) {
		if (only && strcmp(only, COUNTS[i].sys) && strcmp("karui", COUNTS[i].sys))
			continue;
		const char *metric = COUNTS[i].metric ? COUNTS[i].metric : COUNTS[i].exp;
		fprintf(stderr, "karui-bench: instructions / %s %s ...\n", COUNTS[i].sys, metric);
		kb_cg a, b;
		int err = kb_cg_run(&a, self_dir, COUNTS[i].sys, COUNTS[i].exp, COUNTS[i].in, 0,
				    NULL, n);
		if (!err && (err = kb_cg_run(&b, self_dir, COUNTS[i].sys, COUNTS[i].exp,
					     COUNTS[i].in, 0, NULL, 2 * n)) != 0)
			kb_cg_free(&a);
		if (err) {
			emit_none("instructions", COUNTS[i].sys, "failed", "callgrind run failed");
			continue;
		}
		double per[2] = {(b.ir - a.ir) / n, (b.locked - a.locked) / n};
		double fences = a.fences < 0 || b.fences < 0 ? 0 : (b.fences - a.fences) / n;
		kb_cg_free(&a);
		kb_cg_free(&b);
		/* the karui figures for the same operation, for the ratios */
		double k[2] = {0, 0};
		for (size_t j = 0; j < i; j++)
			if (!strcmp(COUNTS[j].sys, "karui") && !COUNTS[j].in &&
			    !strcmp(COUNTS[j].exp, metric))
				memcpy(k, karui[j], sizeof k);
		int peer = strcmp(COUNTS[i].sys, "karui") != 0;
		memcpy(karui[i], per, sizeof per);
		char m[64];
		struct stat3 st = {per[0], per[0], per[0], 1};
		emit("instructions", COUNTS[i].sys, metric, "instr", st, peer ? k[0] : 0, 0);
		snprintf(m, sizeof m, "%s.locked", metric);
		st = (struct stat3){per[1], per[1], per[1], 1};
		emit("instructions", COUNTS[i].sys, m, "locked", st, peer ? k[1] : 0, 0);
		if (fences) { /* mfence: only where there is one */
			snprintf(m, sizeof m, "%s.fence", metric);
			st = (struct stat3){fences, fences, fences, 1};
			emit("instructions", COUNTS[i].sys, m, "fence", st, 0, 0);
		}
	}
}

/* `karui-bench locked`: where the locked instructions of one operation are */
static int where(const char *sys, const char *exp, long n)
{
	size_t i = 0;
	while (i < NCOUNTS && (strcmp(COUNTS[i].sys, sys) || strcmp(COUNTS[i].exp, exp)))
		i++;
	if (i == NCOUNTS) {
		fprintf(stderr, "karui-bench: no count for %s %s\n", sys, exp);
		return 2;
	}
	kb_cg a, b;
	int err = kb_cg_run(&a, self_dir, sys, exp, NULL, 0, NULL, n);
	if (!err && (err = kb_cg_run(&b, self_dir, sys, exp, NULL, 0, NULL, 2 * n)) != 0)
		kb_cg_free(&a);
	if (err) {
		fprintf(stderr, "karui-bench: callgrind run failed: %s\n", strerror(err));
		return 1;
	}
	printf("%s %s: %.4g instructions, %.4g locked", sys, exp, (b.ir - a.ir) / n,
	       (b.locked - a.locked) / n);
	if (a.fences >= 0 && b.fences >= 0)
		printf(", %.4g mfence", (b.fences - a.fences) / n);
	printf(" per operation (callgrind, n = %ld and %ld)\n", n, 2 * n);
	printf("per op  where (innermost first)  [object address]\n");
	kb_cg_where(stdout, &a, &b, n);
	kb_cg_free(&a);
	kb_cg_free(&b);
	return 0;
}

static int count(const char *sys, const char *exp, long n)
{
	int err = kb_t1_count(sys, exp, n);
	if (err != ENOENT)
		return err;
	for (size_t i = 0; i < NCOUNTS; i++)
		if (!strcmp(COUNTS[i].sys, sys) && !strcmp(COUNTS[i].exp, exp)) {
			kb_args a = {.iters = n, .n = n};
			kb_res r;
			return COUNTS[i].fn(&a, &r);
		}
	fprintf(stderr, "karui-bench: no count for %s %s\n", sys, exp);
	return EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: karui-bench list\n"
		   "       karui-bench run NAME|all [--quick] [--json] [--only SYSTEM] [--n N]\n"
		   "       karui-bench count SYSTEM EXPERIMENT N\n"
		   "       karui-bench locked SYSTEM EXPERIMENT [N]\n"
		   "       karui-bench serve-pthread | serve-epoll [THREADS]\n");
}

static void list(void)
{
	for (size_t i = 0; i < NEXPS; i++) {
		printf("%-13s %s; systems:", EXPS[i].name, EXPS[i].what);
		for (int j = 0; j < MAXSYS && EXPS[i].sys[j].name; j++)
			printf(" %s", EXPS[i].sys[j].name);
		printf("\n");
	}
	for (size_t i = 0; i < NSEEDS; i++)
		printf("%-13s %s; systems: %s\n", SEEDS[i].name, SEEDS[i].what, SEEDS[i].systems);
	for (size_t i = 0; i < NGROUPS; i++) {
		printf("%-13s %s: runs", GROUPS[i].name, GROUPS[i].what);
		for (int j = 0; j < 3 && GROUPS[i].members[j]; j++)
			printf(" %s", GROUPS[i].members[j]);
		printf("\n");
	}
	printf("%-13s HTTP \"hello\" on loopback driven by wrk, --n connections (100); "
	       "systems: karui karui-carea karui-epoll go pthread epoll\n", "http");
	printf("%-13s instructions and locked instructions per operation under callgrind; "
	       "systems: karui bare-switch bare-fpctl boost-fcontext boost-fiber spin-lock\n",
	       "instructions");
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len > 0) {
		exe[len] = 0;
		snprintf(self_dir, sizeof self_dir, "%s", dirname(exe));
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "list")) {
		list();
		return 0;
	}
	if (!strcmp(argv[1], "serve-pthread"))
		return kb_pthread_httpd();
	if (!strcmp(argv[1], "serve-epoll"))
		return argc > 3 ? (usage(stderr), 2) : kb_epoll_httpd(argv[2]);
	if (!strcmp(argv[1], "count")) {
		if (argc != 5 || atol(argv[4]) <= 0) {
			usage(stderr);
			return 2;
		}
		return count(argv[2], argv[3], atol(argv[4])) ? 1 : 0;
	}
	if (!strcmp(argv[1], "chain")) {
		if (argc != 5 || atol(argv[3]) <= 0 || atol(argv[4]) <= 0) {
			usage(stderr);
			return 2;
		}
		return kb_chain_once(argv[2], atol(argv[3]), atol(argv[4]));
	}
	if (!strcmp(argv[1], "locked")) {
		long n = argc == 5 ? atol(argv[4]) : 20000;
		if ((argc != 4 && argc != 5) || n <= 0) {
			usage(stderr);
			return 2;
		}
		return where(argv[2], argv[3], n);
	}
	if (strcmp(argv[1], "run") || argc < 3) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[2];
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--n") && i + 1 < argc && atol(argv[i + 1]) > 0)
			n_override = atol(argv[++i]);
		else {
			fprintf(stderr, "karui-bench: bad option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	int all = !strcmp(name, "all"),
	    found = all || !strcmp(name, "instructions") || !strcmp(name, "http");
	for (size_t i = 0; i < NEXPS; i++)
		found |= !strcmp(name, EXPS[i].name);
	for (size_t i = 0; i < NSEEDS; i++)
		found |= !strcmp(name, SEEDS[i].name);
	const char *const *group = NULL;
	for (size_t i = 0; i < NGROUPS; i++)
		if (!strcmp(name, GROUPS[i].name))
			group = GROUPS[i].members;
	found |= group != NULL;
	if (!found) {
		fprintf(stderr, "karui-bench: no experiment '%s' (see karui-bench list)\n", name);
		return 2;
	}
	if (!json)
		printf("%-13s %-15s %-23s %10s %-7s %s\n", "experiment", "system", "metric",
		       "median", "unit", "[min .. max]  peer/karui");
	for (size_t i = 0; i < NEXPS; i++) {
		int in_group = 0;
		for (int j = 0; group && j < 3 && group[j]; j++)
			in_group |= !strcmp(group[j], EXPS[i].name);
		if (all || in_group || !strcmp(name, EXPS[i].name))
			run_exp(&EXPS[i]);
	}
	kb_ctx ctx = {.dir = self_dir, .only = only, .quick = quick, .reps = quick ? 5 : 11,
		      .n = n_override, .json = json};
	for (size_t i = 0; i < NSEEDS; i++)
		if (all || !strcmp(name, SEEDS[i].name))
			SEEDS[i].run(&ctx);
	if (all || !strcmp(name, "http"))
		run_http();
	if (all || !strcmp(name, "instructions"))
		run_instructions();
	return 0;
}
