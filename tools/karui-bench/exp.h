/* karui-bench: karui's experiment functions beside the peers' (peers.h). */
#ifndef KARUI_BENCH_EXP_H
#define KARUI_BENCH_EXP_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include "peers.h"

int kb_karui_yield(const kb_args *a, kb_res *r);
int kb_karui_switch(const kb_args *a, kb_res *r);
int kb_karui_create_join(const kb_args *a, kb_res *r);
int kb_karui_create_batch(const kb_args *a, kb_res *r);
int kb_karui_many(const kb_args *a, kb_res *r);
int kb_karui_mutex(const kb_args *a, kb_res *r);
int kb_karui_monitor(const kb_args *a, kb_res *r);
int kb_karui_condvar_pingpong(const kb_args *a, kb_res *r);
int kb_karui_sem_pingpong(const kb_args *a, kb_res *r);
int kb_karui_chan_pingpong(const kb_args *a, kb_res *r);
int kb_karui_chan_pingpong_2vp(const kb_args *a, kb_res *r);
int kb_karui_chan_relay(const kb_args *a, kb_res *r);
int kb_karui_rendezvous(const kb_args *a, kb_res *r);
int kb_karui_stream(const kb_args *a, kb_res *r);
int kb_karui_skynet(const kb_args *a, kb_res *r);
int kb_karui_prodcons(const kb_args *a, kb_res *r);
int kb_karui_prodcons_1vp(const kb_args *a, kb_res *r);
int kb_karui_nest(const kb_args *a, kb_res *r);  /* seed002.fig3/fig4 */
int kb_karui_chain(const kb_args *a, kb_res *r); /* seed000.table2 */

/*
 * The seeds' experiments (seed000.table2, seed002.fig3, ...) have shapes of
 * their own: several metrics, a point on an x axis (a nesting depth, a VP
 * count), systems that are variants of karui.  Each runs its systems
 * itself and reports through kb_row, which prints the same table line or
 * JSON object as the other experiments, with "x" when x >= 0.
 */
typedef struct kb_ctx {
	const char *dir;        /* karui-bench's directory (karui-bench-go, servers) */
	const char *only;       /* --only: the one system to run besides karui, or NULL */
	int quick;              /* --quick: the short mode of `make demo` */
	int reps;               /* timed repeats per row: 5 with --quick, else 11 */
	long n;                 /* --n, or 0 */
	int json;               /* --json: stdout is JSON lines only */
} kb_ctx;
/* Is `sys` to run (--only)?  karui and its variants ("karui-...") always
 * are; says so on stderr, the progress line. */
int kb_want(const kb_ctx *c, const char *exp, const char *sys);
/* One warm-up call of fn(a), then c->reps timed ones; v[] (room for 16)
 * gets each ns_per_op.  0 or fn's errno code. */
int kb_repeat(const kb_ctx *c, kb_fn fn, const kb_args *a, double *v);
/* One row: the median, min and max of v[0..nv) (sorted in place), the
 * ratio to `karui` if > 0 (peer / karui), x if >= 0.  Returns the median. */
double kb_row(const kb_ctx *c, const char *exp, const char *sys, const char *metric,
	      const char *unit, double *v, int nv, double karui, double x);
/* kb_row with a note on the row (JSON "note"; no quotes or backslashes). */
double kb_row_note(const kb_ctx *c, const char *exp, const char *sys, const char *metric,
		   const char *unit, double *v, int nv, double karui, double x, const char *note);
/* kind: "skipped" (not available here) or "failed" (ran, reported an error) */
void kb_row_none(const char *exp, const char *sys, const char *kind, const char *why);
/* Two pipes (close-on-exec), or neither: 0 or an errno code */
int kb_two_pipes(int a[2], int b[2]);
/* on = 1: pin the calling thread, and so the processes it starts from
 * then on, to the CPU it runs on (1: pinned, 0: it could not be); on = 0:
 * give it back the CPUs it had before (0). */
int kb_pin(int on);

/* exp_seeds.c */
void kb_seed000_table2(const kb_ctx *c);
void kb_seed002_fig3(const kb_ctx *c);
void kb_seed002_fig4(const kb_ctx *c);
int kb_chain_once(const char *sys, long n, long m); /* `karui-bench chain` */
/* exp_seed001.c: seed 001's calls between two processes */
void kb_seed001_ipc(const kb_ctx *c);
void kb_seed001_count(const kb_ctx *c); /* EPC's instructions per call */
/* exp_table1.c */
void kb_seed004_table1(const kb_ctx *c);
/* exp_table5.c */
void kb_seed000_table5(const kb_ctx *c);
/* exp_seed004_real.c: seed 004's workloads as programs sharing the machine */
void kb_seed004_real(const kb_ctx *c);
/* exp_carea.c */
void kb_carea_stop(const kb_ctx *c);
/* exp_faults.c: faults on slow pages beside computing, on one processor */
void kb_carea_faults(const kb_ctx *c);

/* exp_uproc.c: seed 003's μprocesses against processes */
void kb_seed003_table2(const kb_ctx *c);
void kb_seed003_pipe(const kb_ctx *c);
void kb_seed003_pipeline(const kb_ctx *c);
void kb_uproc_syscall(const kb_ctx *c);
void kb_uproc_signalfd(const kb_ctx *c);
void kb_uproc_count(const kb_ctx *c);
void kb_seed003_table6(const kb_ctx *c);
void kb_seed003_table5(const kb_ctx *c);
void kb_seed003_table3(const kb_ctx *c);
/* Processes, for the μprocess experiments' peers (exp_uproc.c).  Start
 * path with argv by fork + execv, `in`, `out` and `err` as its fds 0, 1
 * and 2 (-1: karui-bench's); every other fd of karui-bench is
 * close-on-exec.  The pid, or -1. */
pid_t kb_start(const char *path, char *const argv[], int in, int out, int err);
/* Wait for pid (wait4: *ru, if not NULL, gets its rusage, which counts
 * all its threads and the children it reaped); its status as a shell
 * shows it, or -1. */
struct rusage;
int kb_wait(pid_t pid, struct rusage *ru);
/* name looked up in PATH as a shell does it, into out: 0 or ENOENT */
int kb_find_prog(const char *name, char *out, size_t n);
/* exp_uprun.c: Debian's programs natively and as μprocesses, through
 * karui-run and karui-sh */
void kb_uproc_threads(const kb_ctx *c);
void kb_pthread_compat(const kb_ctx *c);
void kb_uproc_make(const kb_ctx *c);
void kb_uproc_script(const kb_ctx *c);
/* exp_cgi.c: CGI programs as μprocesses (cgi_httpd) against lighttpd's mod_cgi */
void kb_seed003_cgi(const kb_ctx *c);

/* exp_files.c: kr_read_until of files in the page cache, io_uring against epoll */
void kb_io_files(const kb_ctx *c);

/* exp_trace.c: a switch traced against untraced (docs/trace.md) */
void kb_trace(const kb_ctx *c);

/* exp_mpi.c: seed 004's WAVE over 2 MPI ranks, libkarui-mpi against
 * pthreads with MPI_THREAD_MULTIPLE */
void kb_mpi_wave(const kb_ctx *c);
void kb_mpi_pipe(const kb_ctx *c);

/* exp_ssf.c */
void kb_seed002_ssf(const kb_ctx *c);

/* The http experiment (exp_http.c) and what it needs from main.c. */
typedef struct kb_http_opts {
	const char *dir;        /* karui-bench's directory: the servers */
	const char *only;
	int quick;
	long conns;
	/* values[n]: one metric of a server on x threads; *karui: karui's
	 * median of that metric for that x, set by the call for system
	 * "karui" */
	void (*emit)(const char *exp, const char *sys, const char *metric, const char *unit,
		     double *values, int n, int x, double *karui, long conns);
	void (*none)(const char *exp, const char *sys, const char *kind, const char *why);
} kb_http_opts;
void kb_run_http(const kb_http_opts *o);
/* Start the server at path with argv (and env, "NAME=value", if not
 * NULL) in a child process whose stdout is the stream returned, where it
 * says where it listens; NULL when it could not start (*pid, if > 0, is
 * the child to reap). */
FILE *kb_server_start(const char *path, char *const argv[], const char *env, pid_t *pid);
/* One `wrk -t1 -cCONNS -dSECS` run against http://127.0.0.1:PORT/PATH:
 * requests per second (-1: it failed, or answers were not 2xx), *lat its
 * mean latency in ms (-1: not said), *n the requests it counted. */
double kb_wrk(unsigned port, const char *path, long conns, int secs, double *lat, long *n);
/* The CPU time process pid has used so far (with children: and its
 * reaped children), in clock ticks, or -1. */
long long kb_cpu_ticks(pid_t pid, int children);
int kb_pthread_httpd(void); /* `karui-bench serve-pthread` */
int kb_epoll_httpd(const char *threads); /* `karui-bench serve-epoll [THREADS]` */

/* callgrind.c: one `karui-bench count SYS EXP n` run under callgrind (only
 * inside function `in` if not NULL; with `marks`, only between the run's
 * marks, peers.h), counted per instruction; the instructions of the
 * functions that `apart` names (comma-separated) are also added up apart. */
typedef struct kb_cg_site {
	char *ob, *fn;          /* object and symbol, as callgrind names them */
	unsigned long addr;     /* in the object, as objdump prints it */
	double n;               /* executions */
} kb_cg_site;
typedef struct kb_cg {
	double ir;              /* instructions executed */
	double locked;          /* locked instructions (lock prefix, xchg with memory) */
	double fences;          /* mfence; -1: unknown (no objdump, or an object it cannot read) */
	double apart;           /* instructions inside the functions named by `apart` */
	kb_cg_site *site;       /* every locked instruction that ran */
	size_t nsite;
} kb_cg;
int kb_cg_run(kb_cg *r, const char *dir, const char *sys, const char *exp, const char *in,
	      int marks, const char *apart, long n); /* 0 or an errno code */
void kb_cg_free(kb_cg *r);
/* The locked instructions per operation by site, from runs of n and 2n. */
void kb_cg_where(FILE *out, const kb_cg *a, const kb_cg *b, long n);

/* seed004.table1 (exp_table1.c): `karui-bench count SYS t1_OP n` (ENOENT:
 * not one of its runs) */
int kb_t1_count(const char *sys, const char *exp, long n);
/* karui's counts of create, stop, resume, switch and exit into v[]: those
 * of this process's seed004.table1 run, else counted now (callgrind, a few
 * seconds).  0, ENOENT (no valgrind) or EIO. */
int kb_t1_karui(const kb_ctx *c, double v[5]);
/* exp_sim.c: seed 004's emulator, Figures 6 and 7 */
void kb_seed004_sim(const kb_ctx *c);
/* splitmix64's mix of z + its increment: a hash of z (the emulator's
 * grains, the μprocess experiments' generated text and code) */
uint64_t kb_mix64(uint64_t z);
#endif
