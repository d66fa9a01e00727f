/*
 * karui-bench: μprocesses (seed 003 §6, include/karui/image.h) against
 * processes, in the same run.
 *
 *   seed003.table2     seed 003's null program (karui-bench-null, main
 *                      returns 0) started and waited for: as a μprocess
 *                      (kr_uproc_spawn + kr_uproc_wait) from its kept image
 *                      (karui), loaded afresh with its image taken to keep
 *                      and then dropped (karui-kept), loaded afresh with no
 *                      image kept (karui-not-kept); by fork + execve +
 *                      waitpid, by posix_spawn + waitpid; a thread that
 *                      does nothing by pthread_create + pthread_join; µs
 *                      per program (Table 2: reused, reusable, not
 *                      reusable, UNIX fork&exec, POSIX thread)
 *   seed003.table3     lmbench lat_ctx's ring of two: a byte passed back
 *                      and forth over two pipes by karui-bench-uprog ping
 *                      and pong, ns per hop and per switch (the hop less
 *                      ping's own write and read with no switch): two
 *                      μprocesses on karui pipes (karui, and karui-2vp),
 *                      two threads of one μprocess (karui-threads: uprog
 *                      threads), two microprocesses of the host on
 *                      kr_upipe calls (karui-mp); two processes on pipe(2)
 *                      (process) and uprog threads as a process (pthread),
 *                      all on one CPU as lat_ctx, and on two (-2cpu)
 *                      (Table 3)
 *   seed003.pipe       5000 blocks of 4 KiB from one program to another
 *                      (karui-bench-uprog write | read): two μprocesses
 *                      joined by a kr_upipe on 2 VPs (karui) and on 1
 *                      (karui-1vp), two processes by pipe(2); "total" from
 *                      the first start to the last end, "transfer" from the
 *                      reader's first byte to its end of file, as the reader
 *                      times it (Table 4, left)
 *   seed003.pipeline   `cat words | grep zonation` over a words file of at
 *                      least 2.4 MB: karui-sh -c, bash -c, dash -c, ms per
 *                      command with the shell's start; the two programs as
 *                      μprocesses joined by a kr_upipe from here on 2 VPs and
 *                      on 1 (karui-uproc, karui-uproc-1vp), and the same two
 *                      isolated (kr_uproc_attr.isolate: karui-uproc-iso,
 *                      karui-uproc-iso-1vp, ratio to the row before); and each shell
 *                      running a script of the line 10 (--quick) or 25 times
 *                      (*-script), ms per line: the pipeline in a running
 *                      shell, as the paper timed it (Table 4, right); and
 *                      its floor, the two programs' own work (line_floor)
 *   uproc.syscall      ns per getppid() of a program that makes N of them:
 *                      as a μprocess with call sites rewritten (karui), with
 *                      every call trapped (karui-trap: KARUI_UPROC_REWRITE=0)
 *                      and as a process (native)
 *   uproc.count        cat μprocesses started one by one, each blocked
 *                      reading its own kr_upipe, up to 1000 (--quick) or to
 *                      the first failure, and the memory each of the first
 *                      1000 adds: resident (Rss, Pss, Private_Dirty), address
 *                      space, page tables, and how much of the address space
 *                      is shared libraries; 1000 cat processes on pipes
 *                      beside them (Table 6)
 *   seed003.table6     seed 003's hello program (karui-bench-hello, which
 *                      then waits on its stdin) by region, while it waits:
 *                      as a μprocess loaded afresh (karui), what it added
 *                      to the host; as a process (process), all it has;
 *                      address space, resident, private and shared KiB per
 *                      region, its mappings, and how many such μprocesses
 *                      the host's mappings left under vm.max_map_count
 *                      allow (Table 6, §6.7's count)
 *
 * karui's side runs in a child process of karui-bench, one per system: a
 * thread that has run a μprocess keeps Syscall User Dispatch switched on,
 * which puts every later system call of the thread, the peers' fork and
 * waitpid included, on the kernel's slow path; KARUI_UPROC_REWRITE is read
 * at the first spawn, so each setting needs a fresh library; and
 * uproc.count may leave a process short of mappings.  The child starts
 * karui (outside every timing), runs a warm-up and c->reps timed repeats
 * (uproc.count, seed003.table6: one run first, then one measurement),
 * and hands the figures back through a pipe.  The peers run in
 * karui-bench itself.  Processes are started with fork + execv; every
 * program's exit status is checked, and a wrong one fails the row.
 *
 * seed003.table6 reads a program's memory page by page from its pagemap
 * (present; mapped there alone, the kernel's "exclusively mapped", which
 * smaps counts as private), over its mappings as maps lists them.  The
 * μprocess's are the parts of the host's mappings that were not there
 * before its spawn: the kernel merges a new anonymous mapping with an old
 * neighbour of the same kind, so smaps' figures per mapping cannot be
 * split between the μprocess and the host.  What the host gained besides
 * them (karui's microprocess stack, its records) is karui's own.  The
 * count of μprocesses that fit is computed, not tried: uproc.count tries.
 *
 * Rejected: timing the start of a μprocess together with karui's own start
 * (a shell, karui-sh, starts karui once and then runs many commands; its
 * row in seed003.pipeline is the figure with everything included).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exp.h"
#include "karui.h"
#include "karui/image.h"

extern char **environ;

#define WORDS "/usr/share/dict/words"
#define WORDS_MIN 2400000L /* seed 003: "about 2.4 MB" */
#define PATTERN "zonation"
#define NO_UPROCS                                                                              \
	"μprocesses unavailable here: kr_uproc_spawn returns ENOTSUP (no Syscall User "         \
	"Dispatch or FSGSBASE)"

enum { PIPE_BLOCKS = 5000, KID_MAXV = 64, COUNT_PROCS = 1000 };

/* ---------------- karui's side, in a child process ---------------- */

struct kid {
	int err;             /* 0, an errno code, or -1 (see why) */
	int nv;
	double v[KID_MAXV];
	char why[200];
};
typedef int (*kid_fn)(const kb_ctx *c, void *arg, struct kid *k);

/* Run fn in a child process on karui with `vps` VPs; rewrite: NULL leaves
 * KARUI_UPROC_REWRITE as it is, "" unsets it, else sets it. */
static void kid_run(const kb_ctx *c, unsigned vps, const char *rewrite, kid_fn fn, void *arg,
		    struct kid *k)
{
	memset(k, 0, sizeof *k);
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		k->err = errno;
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		k->err = errno;
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		if (rewrite && *rewrite)
			setenv("KARUI_UPROC_REWRITE", rewrite, 1);
		else if (rewrite)
			unsetenv("KARUI_UPROC_REWRITE");
		kr_config cfg = {.vps = vps};
		int e = kr_init(&cfg);
		if (!e) {
			e = fn(c, arg, k);
			if (!e)
				e = kr_fini();
		}
		k->err = e;
		size_t off = 0;
		while (off < sizeof *k) {
			ssize_t w = write(p[1], (char *)k + off, sizeof *k - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		_exit(0);
	}
	close(p[1]);
	size_t off = 0;
	while (off < sizeof *k) {
		ssize_t r = read(p[0], (char *)k + off, sizeof *k - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (off < sizeof *k) {
		memset(k, 0, sizeof *k);
		k->err = -1;
		if (WIFSIGNALED(st))
			snprintf(k->why, sizeof k->why, "karui's run ended by signal %d (%s)",
				 WTERMSIG(st), strsignal(WTERMSIG(st)));
		else
			snprintf(k->why, sizeof k->why, "karui's run ended with status %d",
				 WEXITSTATUS(st));
	}
}

/* "skipped" or "failed" for a child's error; 1 if there was one. */
static int kid_failed(const char *exp, const char *sys, const struct kid *k)
{
	if (!k->err)
		return 0;
	if (k->err == ENOTSUP)
		kb_row_none(exp, sys, "skipped", NO_UPROCS);
	else
		kb_row_none(exp, sys, "failed", k->err < 0 ? k->why : strerror(k->err));
	return 1;
}

static int bad_status(struct kid *k, const char *prog, int st, int want)
{
	snprintf(k->why, sizeof k->why, "%s ended with status %d, not %d", prog, st, want);
	return -1;
}

/* Read a pipe end to end of file; the first cap - 1 bytes are kept in buf
 * (NUL-terminated), *lines counts the newlines of all. */
static int drain_upipe(kr_upipe *p, char *buf, size_t cap, long *lines)
{
	char tmp[4096];
	size_t len = 0, got;
	*lines = 0;
	for (;;) {
		int e = kr_upipe_read(p, tmp, sizeof tmp, &got);
		if (e)
			return e;
		if (!got)
			break;
		for (size_t i = 0; i < got; i++)
			*lines += tmp[i] == '\n';
		size_t keep = got < cap - 1 - len ? got : cap - 1 - len;
		memcpy(buf + len, tmp, keep);
		len += keep;
	}
	buf[len] = 0;
	return 0;
}

static int drain_fd(int fd, char *buf, size_t cap, long *lines)
{
	char tmp[4096];
	size_t len = 0;
	*lines = 0;
	for (;;) {
		ssize_t got = read(fd, tmp, sizeof tmp);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return errno;
		if (!got)
			break;
		for (ssize_t i = 0; i < got; i++)
			*lines += tmp[i] == '\n';
		size_t keep = (size_t)got < cap - 1 - len ? (size_t)got : cap - 1 - len;
		memcpy(buf + len, tmp, keep);
		len += keep;
	}
	buf[len] = 0;
	return 0;
}

/* ---------------- processes ---------------- */

pid_t kb_start(const char *path, char *const argv[], int in, int out, int err)
{
	pid_t pid = fork();
	if (pid == 0) {
		if ((in >= 0 && dup2(in, 0) < 0) || (out >= 0 && dup2(out, 1) < 0) ||
		    (err >= 0 && dup2(err, 2) < 0))
			_exit(127);
		execv(path, argv);
		_exit(127);
	}
	return pid;
}

int kb_wait(pid_t pid, struct rusage *ru)
{
	int st;
	while (wait4(pid, &st, 0, ru) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run argv with its stdout read to end of file into buf; its status. */
static int run_proc(const char *path, char *const argv[], char *buf, size_t cap, long *lines)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return -1;
	pid_t pid = kb_start(path, argv, -1, p[1], -1);
	close(p[1]);
	int e = pid < 0 ? errno : drain_fd(p[0], buf, cap, lines);
	close(p[0]);
	int st = pid < 0 ? -1 : kb_wait(pid, NULL);
	return e ? -1 : st;
}

/* build/bin/karui-bench-NAME, next to karui-bench, or NULL (kb_row_none
 * said so) */
static const char *prog_path(const kb_ctx *c, const char *exp, const char *name, char *buf,
			     size_t n)
{
	snprintf(buf, n, "%s/karui-bench-%s", c->dir, name);
	if (access(buf, X_OK) == 0)
		return buf;
	char why[64];
	snprintf(why, sizeof why, "karui-bench-%s is not built", name);
	kb_row_none(exp, "all", "failed", why);
	return NULL;
}

/* ---------------- seed003.table2 ---------------- */

#define TABLE2 "seed003.table2"

static long table2_n(const kb_ctx *c)
{
	return c->n ? c->n : c->quick ? 50 : 100;
}

/* How karui's side starts the null program: from the image kept by the
 * warm-up's runs (REUSED); loaded afresh with no image kept (NOT_KEPT);
 * loaded afresh with its image taken to keep, then dropped (KEPT: what a
 * first start costs when images are kept). */
enum { START_REUSED, START_NOT_KEPT, START_KEPT };

struct start_arg {
	const char *prog;
	int mode;
};

static int start_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct start_arg *a = arg;
	long n = table2_n(c);
	char *argv[] = {"karui-bench-null", NULL};
	if (a->mode == START_NOT_KEPT)
		kr_uproc_keep(0);
	for (int r = -1; r < c->reps; r++) {
		double t0 = kb_now_ns();
		for (long i = 0; i < n; i++) {
			kr_uproc *up;
			int st = -1, e = kr_uproc_spawn(&up, a->prog, argv, NULL);
			if (!e && kr_uproc_reused(up) != (a->mode == START_REUSED && (r >= 0 || i > 0))) {
				snprintf(k->why, sizeof k->why, "a start %s a kept image",
					 a->mode == START_REUSED ? "did not use" : "used");
				kr_uproc_wait(up, &st);
				return -1;
			}
			if (e || (e = kr_uproc_wait(up, &st)))
				return e;
			if (st)
				return bad_status(k, "karui-bench-null", st, 0);
			if (a->mode == START_KEPT) {
				kr_uproc_keep(0);
				kr_uproc_keep(8);
			}
		}
		if (r >= 0)
			k->v[k->nv++] = (kb_now_ns() - t0) / n / 1e3;
	}
	return 0;
}

static int start_fork_exec(const char *prog)
{
	char *argv[] = {"karui-bench-null", NULL};
	pid_t pid = fork();
	if (pid == 0) {
		execve(prog, argv, environ);
		_exit(127);
	}
	return pid < 0 ? -1 : kb_wait(pid, NULL);
}

static int start_posix_spawn(const char *prog)
{
	char *argv[] = {"karui-bench-null", NULL};
	pid_t pid;
	if (posix_spawn(&pid, prog, NULL, NULL, argv, environ))
		return -1;
	return kb_wait(pid, NULL);
}

static void *nothing(void *a)
{
	return a;
}

/* a thread started and joined: what the paper's reused μprocess is set
 * against (SPEC P5: "about as much as creating a thread") */
static int start_pthread(const char *prog)
{
	(void)prog;
	pthread_t t;
	return pthread_create(&t, NULL, nothing, NULL) || pthread_join(t, NULL) ? -1 : 0;
}

void kb_seed003_table2(const kb_ctx *c)
{
	char path[PATH_MAX];
	const char *prog = prog_path(c, TABLE2, "null", path, sizeof path);
	if (!prog)
		return;
	double karui = 0;
	long n = table2_n(c);
	static const struct {
		const char *sys;
		int mode;
	} K[] = {{"karui", START_REUSED},
		 {"karui-kept", START_KEPT},
		 {"karui-not-kept", START_NOT_KEPT}};
	for (size_t i = 0; i < sizeof K / sizeof *K; i++) {
		if (!kb_want(c, TABLE2, K[i].sys))
			continue;
		struct start_arg a = {prog, K[i].mode};
		struct kid k;
		kid_run(c, 1, NULL, start_kid, &a, &k);
		if (kid_failed(TABLE2, K[i].sys, &k))
			continue;
		double m = kb_row(c, TABLE2, K[i].sys, "start+exit", "us", k.v, k.nv, karui, -1);
		if (!karui)
			karui = m;
	}
	static const struct {
		const char *sys;
		int (*once)(const char *prog);
	} P[] = {{"fork-exec", start_fork_exec},
		 {"posix-spawn", start_posix_spawn},
		 {"pthread", start_pthread}};
	for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
		if (!kb_want(c, TABLE2, P[i].sys))
			continue;
		double v[16];
		int st = 0;
		for (int r = -1; r < c->reps && !st; r++) {
			double t0 = kb_now_ns();
			for (long j = 0; j < n && !st; j++)
				st = P[i].once(prog);
			if (r >= 0)
				v[r] = (kb_now_ns() - t0) / n / 1e3;
		}
		if (st) {
			char why[96];
			snprintf(why, sizeof why, "karui-bench-null ended with status %d", st);
			kb_row_none(TABLE2, P[i].sys, "failed", why);
			continue;
		}
		kb_row(c, TABLE2, P[i].sys, "start+exit", "us", v, c->reps, karui, -1);
	}
}

/* ---------------- seed003.pipe ---------------- */

#define PIPE "seed003.pipe"

struct pipe_arg {
	const char *prog;
	char n[24];
};

/* a | b as μprocesses joined by a karui pipe, b's stdout drained into buf
 * (its lines counted); their statuses in *as and *bs (-1: not run).
 * 0 or an errno code. */
static int two_uprocs(const char *apath, char *const *aargv, const char *bpath,
		      char *const *bargv, int isolate, char *buf, size_t cap, long *lines, int *as,
		      int *bs)
{
	kr_upipe *mid, *out;
	*as = *bs = -1;
	int e = kr_upipe_create(&mid);
	if (e)
		return e;
	if ((e = kr_upipe_create(&out))) {
		kr_upipe_close(mid, KR_UPIPE_READ);
		kr_upipe_close(mid, KR_UPIPE_WRITE);
		return e;
	}
	kr_uproc_attr aa, ba;
	kr_uproc_attr_init(&aa);
	kr_uproc_attr_init(&ba);
	aa.isolate = ba.isolate = isolate;
	kr_uproc_attr_fd_pipe(&aa, 1, mid, KR_UPIPE_WRITE);
	kr_uproc_attr_fd_pipe(&ba, 0, mid, KR_UPIPE_READ);
	kr_uproc_attr_fd_pipe(&ba, 1, out, KR_UPIPE_WRITE);
	kr_uproc *au = NULL, *bu = NULL;
	e = kr_uproc_spawn(&au, apath, aargv, &aa);
	if (!e)
		e = kr_uproc_spawn(&bu, bpath, bargv, &ba);
	kr_upipe_close(mid, KR_UPIPE_READ);
	kr_upipe_close(mid, KR_UPIPE_WRITE);
	kr_upipe_close(out, KR_UPIPE_WRITE);
	*lines = 0;
	int de = bu ? drain_upipe(out, buf, cap, lines) : 0;
	kr_upipe_close(out, KR_UPIPE_READ);
	if (au && !e)
		e = kr_uproc_wait(au, as);
	if (bu && !e)
		e = kr_uproc_wait(bu, bs);
	return e ? e : de;
}

/* One run: *total and *transfer in ms; 0, an errno code or -1 (k->why). */
static int pipe_uprocs(const struct pipe_arg *a, struct kid *k, double *total,
		       double *transfer)
{
	char *wargv[] = {"karui-bench-uprog", "write", (char *)a->n, NULL};
	char *rargv[] = {"karui-bench-uprog", "read", (char *)a->n, NULL};
	char buf[64];
	long lines;
	int ws, rs;
	double t0 = kb_now_ns();
	int e = two_uprocs(a->prog, wargv, a->prog, rargv, 0, buf, sizeof buf, &lines, &ws, &rs);
	double t1 = kb_now_ns();
	if (e)
		return e;
	if (ws)
		return bad_status(k, "the writer", ws, 0);
	if (rs)
		return bad_status(k, "the reader", rs, 0);
	*total = (t1 - t0) / 1e6;
	*transfer = atof(buf) / 1e6;
	return 0;
}

static int pipe_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	for (int r = -1; r < c->reps; r++) {
		double total, transfer;
		int e = pipe_uprocs(arg, k, &total, &transfer);
		if (e)
			return e;
		if (r >= 0) {
			k->v[r] = total;
			k->v[c->reps + r] = transfer;
		}
	}
	k->nv = 2 * c->reps;
	return 0;
}

/* The same with two processes and pipe(2); an error message or NULL. */
static const char *pipe_procs(const struct pipe_arg *a, double *total, double *transfer)
{
	static char why[96];
	int mid[2], out[2], e = kb_two_pipes(mid, out);
	if (e)
		return strerror(e);
	char *wargv[] = {"karui-bench-uprog", "write", (char *)a->n, NULL};
	char *rargv[] = {"karui-bench-uprog", "read", (char *)a->n, NULL};
	double t0 = kb_now_ns();
	pid_t w = kb_start(a->prog, wargv, -1, mid[1], -1);
	pid_t r = kb_start(a->prog, rargv, mid[0], out[1], -1);
	close(mid[0]);
	close(mid[1]);
	close(out[1]);
	char buf[64] = "";
	long lines;
	drain_fd(out[0], buf, sizeof buf, &lines);
	close(out[0]);
	int ws = w < 0 ? -1 : kb_wait(w, NULL), rs = r < 0 ? -1 : kb_wait(r, NULL);
	double t1 = kb_now_ns();
	if (ws || rs) {
		snprintf(why, sizeof why, "the %s ended with status %d", ws ? "writer" : "reader",
			 ws ? ws : rs);
		return why;
	}
	*total = (t1 - t0) / 1e6;
	*transfer = atof(buf) / 1e6;
	return NULL;
}

void kb_seed003_pipe(const kb_ctx *c)
{
	struct pipe_arg a;
	char path[PATH_MAX];
	if (!(a.prog = prog_path(c, PIPE, "uprog", path, sizeof path)))
		return;
	snprintf(a.n, sizeof a.n, "%ld", c->n ? c->n : (long)PIPE_BLOCKS);
	double karui[2] = {0, 0};
	for (unsigned vps = 2; vps >= 1; vps--) {
		const char *sys = vps == 2 ? "karui" : "karui-1vp";
		if (!kb_want(c, PIPE, sys))
			continue;
		struct kid k;
		kid_run(c, vps, NULL, pipe_kid, &a, &k);
		if (kid_failed(PIPE, sys, &k))
			continue;
		double t = kb_row(c, PIPE, sys, "total", "ms", k.v, c->reps, karui[0], -1);
		double x = kb_row(c, PIPE, sys, "transfer", "ms", k.v + c->reps, c->reps, karui[1],
				  -1);
		if (vps == 2) {
			karui[0] = t;
			karui[1] = x;
		}
	}
	if (!kb_want(c, PIPE, "unix-pipe"))
		return;
	double total[16], transfer[16];
	for (int r = -1; r < c->reps; r++) {
		double t = 0, x = 0;
		const char *why = pipe_procs(&a, &t, &x);
		if (why) {
			kb_row_none(PIPE, "unix-pipe", "failed", why);
			return;
		}
		if (r >= 0) {
			total[r] = t;
			transfer[r] = x;
		}
	}
	kb_row(c, PIPE, "unix-pipe", "total", "ms", total, c->reps, karui[0], -1);
	kb_row(c, PIPE, "unix-pipe", "transfer", "ms", transfer, c->reps, karui[1], -1);
}

/* ---------------- seed003.pipeline ---------------- */

#define PIPELINE "seed003.pipeline"

struct line_arg {
	char words[PATH_MAX];   /* the file cat reads */
	char cat[PATH_MAX], grep[PATH_MAX];
	long matches;           /* its lines that contain PATTERN */
	char line[PATH_MAX + 64];
	int isolate;            /* the μprocesses in domains of their own */
};

/* words: WORDS, or copies of it in a temporary file up to WORDS_MIN bytes
 * (*tmp set); the lines that contain PATTERN counted.  An error message or
 * NULL. */
static const char *words_file(struct line_arg *a, int *tmp)
{
	static char why[160];
	*tmp = 0;
	FILE *f = fopen(WORDS, "r");
	if (!f) {
		snprintf(why, sizeof why, WORDS ": %s (Debian package wamerican)", strerror(errno));
		return why;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	char buf[65536];
	size_t got;
	while (m && (got = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, got, m);
	fclose(f);
	if (!m || fclose(m) || !len) {
		free(text);
		return "cannot read " WORDS;
	}
	long copies = (WORDS_MIN + (long)len - 1) / (long)len;
	snprintf(a->words, sizeof a->words, WORDS);
	if (copies > 1) {
		snprintf(a->words, sizeof a->words, "/tmp/karui-bench-words-XXXXXX");
		int fd = mkstemp(a->words);
		FILE *o = fd < 0 ? NULL : fdopen(fd, "w");
		for (long i = 0; o && i < copies; i++)
			fwrite(text, 1, len, o);
		if (!o || fclose(o)) {
			if (fd >= 0)
				unlink(a->words);
			free(text);
			return "cannot write the words file in /tmp";
		}
		*tmp = 1;
	}
	a->matches = 0;
	for (char *s = text, *end = text + len; s < end;) {
		char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t l = nl ? (size_t)(nl - s) : (size_t)(end - s);
		a->matches += memmem(s, l, PATTERN, strlen(PATTERN)) != NULL;
		s += l + 1;
	}
	a->matches *= copies;
	free(text);
	return NULL;
}

int kb_find_prog(const char *name, char *out, size_t n)
{
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;; p++) {
		const char *e = strchrnul(p, ':');
		snprintf(out, n, "%.*s/%s", (int)(e - p), p, name);
		if (e > p && access(out, X_OK) == 0)
			return 0;
		if (!*e)
			return ENOENT;
		p = e;
	}
}

static int line_once(const struct line_arg *a, struct kid *k)
{
	char *cargv[] = {"cat", (char *)a->words, NULL};
	char *gargv[] = {"grep", PATTERN, NULL};
	char buf[64];
	long lines;
	int cs, gs;
	int e = two_uprocs(a->cat, cargv, a->grep, gargv, a->isolate, buf, sizeof buf, &lines,
			   &cs, &gs);
	if (e)
		return e;
	if (cs)
		return bad_status(k, "cat", cs, 0);
	if (gs != !a->matches)
		return bad_status(k, "grep", gs, !a->matches);
	if (lines != a->matches) {
		snprintf(k->why, sizeof k->why, "grep printed %ld lines, not %ld", lines,
			 a->matches);
		return -1;
	}
	return 0;
}

static int line_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	for (int r = -1; r < c->reps; r++) {
		double t0 = kb_now_ns();
		int e = line_once(arg, k);
		if (e)
			return e;
		if (r >= 0)
			k->v[k->nv++] = (kb_now_ns() - t0) / 1e6;
	}
	return 0;
}

/* A shell's runs of the line (`shell -c LINE`), or of a script that is the
 * line `times` times (`shell SCRIPT`, ms per line): NULL, or why not. */
static const char *line_shell(const kb_ctx *c, const struct line_arg *a, const char *shell,
			      const char *script, long times, double *v)
{
	static char why[128];
	char *argv[] = {(char *)shell, "-c", (char *)a->line, NULL};
	char *sargv[] = {(char *)shell, (char *)script, NULL};
	for (int r = -1; r < c->reps; r++) {
		char buf[64];
		long lines = 0;
		double t0 = kb_now_ns();
		int st = run_proc(shell, script ? sargv : argv, buf, sizeof buf, &lines);
		double t1 = kb_now_ns();
		if (st != !a->matches) {
			snprintf(why, sizeof why, "the line ended with status %d, not %d", st,
				 !a->matches);
			return why;
		}
		if (lines != a->matches * times) {
			snprintf(why, sizeof why, "grep printed %ld lines, not %ld", lines,
				 a->matches * times);
			return why;
		}
		if (r >= 0)
			v[r] = (t1 - t0) / 1e6 / times;
	}
	return NULL;
}

/* The rows of one way to run the line: karui-sh (in build/bin), bash and
 * dash, found in PATH; base: karui-sh's median or 0. */
static double line_shells(const kb_ctx *c, const struct line_arg *a, const char *ksh,
			  const char *script, long times)
{
	static const char *const SH[] = {"karui-sh", "bash", "dash"};
	double base = 0;
	for (size_t i = 0; i < sizeof SH / sizeof *SH; i++) {
		char sys[32], path[PATH_MAX];
		snprintf(sys, sizeof sys, "%s%s", SH[i], script ? "-script" : "");
		if (!kb_want(c, PIPELINE, sys))
			continue;
		const char *why;
		double v[16];
		if (i == 0)
			snprintf(path, sizeof path, "%s", ksh);
		if (i == 0 ? access(path, X_OK) != 0 : kb_find_prog(SH[i], path, sizeof path) != 0)
			kb_row_none(PIPELINE, sys, "skipped", i ? "not installed" : "karui-sh not built");
		else if ((why = line_shell(c, a, path, script, times, v)))
			kb_row_none(PIPELINE, sys, "failed", why);
		else if (i == 0)
			base = kb_row(c, PIPELINE, sys, script ? "cat|grep, per line" : "cat|grep", "ms",
				      v, c->reps, 0, -1);
		else
			kb_row(c, PIPELINE, sys, script ? "cat|grep, per line" : "cat|grep", "ms", v,
			       c->reps, base, -1);
	}
	return base;
}

/* The line's floor: what the two programs do themselves, with the cost
 * of making a process taken out.  Per repeat, each run as a process once:
 * `cat WORDS` to /dev/null, `grep PATTERN WORDS`, and `true`; a program's
 * own work is its time less true's (a process's creation, exec, loading
 * of the C library and exit).  What is left is each program's start in
 * main (setlocale, the pattern's compilation), cat's read of the file and
 * grep's search: no shell can run the line in less than the two together
 * (floor-serial), or than the longer of them with the two on two cores
 * at once (floor-parallel).  NULL, or why not. */
static const char *line_floor(const kb_ctx *c, const struct line_arg *a, double *serial,
			      double *parallel)
{
	static char why[160];
	char truep[PATH_MAX];
	if (kb_find_prog("true", truep, sizeof truep))
		return "no true in PATH";
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0)
		return "cannot open /dev/null";
	char *targv[] = {"true", NULL};
	char *cargv[] = {"cat", (char *)a->words, NULL};
	char *gargv[] = {"grep", PATTERN, (char *)a->words, NULL};
	const char *bad = NULL;
	for (int r = -1; r < c->reps && !bad; r++) {
		double t[3];
		for (int i = 0; i < 3 && !bad; i++) {
			char buf[64];
			long lines = 0;
			double t0 = kb_now_ns();
			int st = i == 0 ? kb_wait(kb_start(truep, targv, -1, null, -1), NULL)
			       : i == 1 ? kb_wait(kb_start(a->cat, cargv, -1, null, -1), NULL)
					: run_proc(a->grep, gargv, buf, sizeof buf, &lines);
			t[i] = (kb_now_ns() - t0) / 1e6;
			if (st != (i == 2 ? !a->matches : 0) || (i == 2 && lines != a->matches)) {
				snprintf(why, sizeof why, "%s ended with status %d, %ld lines",
					 i == 0 ? "true" : i == 1 ? "cat" : "grep", st, lines);
				bad = why;
			}
		}
		if (r >= 0 && !bad) {
			double cw = t[1] - t[0], gw = t[2] - t[0];
			serial[r] = cw + gw;
			parallel[r] = cw > gw ? cw : gw;
		}
	}
	close(null);
	return bad;
}

void kb_seed003_pipeline(const kb_ctx *c)
{
	static struct line_arg a;
	int tmp;
	const char *why = words_file(&a, &tmp);
	if (!why && (kb_find_prog("cat", a.cat, sizeof a.cat) ||
		     kb_find_prog("grep", a.grep, sizeof a.grep)))
		why = "no cat or grep in PATH";
	if (why) {
		kb_row_none(PIPELINE, "all", "skipped", why);
		return;
	}
	snprintf(a.line, sizeof a.line, "cat %s | grep " PATTERN, a.words);
	struct stat st;
	if (!stat(a.words, &st))
		fprintf(stderr, "karui-bench: " PIPELINE ": `%s` (%.2f MB, %ld matching lines)\n",
			a.line, st.st_size / 1e6, a.matches);
	char ksh[PATH_MAX];
	snprintf(ksh, sizeof ksh, "%s/karui-sh", c->dir);
	double base = line_shells(c, &a, ksh, NULL, 1);
	/* the two as μprocesses, then as isolated ones (ratio to the former) */
	for (unsigned vps = 2; vps >= 1; vps--) {
		double plain = 0;
		for (a.isolate = 0; a.isolate <= 1; a.isolate++) {
			static const char *const S[2][2] = {{"karui-uproc-1vp", "karui-uproc-iso-1vp"},
							    {"karui-uproc", "karui-uproc-iso"}};
			const char *sys = S[vps - 1][a.isolate];
			if (!kb_want(c, PIPELINE, sys))
				continue;
			struct kid k;
			kid_run(c, vps, NULL, line_kid, &a, &k);
			if (kid_failed(PIPELINE, sys, &k))
				continue;
			double m = kb_row(c, PIPELINE, sys, "cat|grep", "ms", k.v, k.nv,
					  a.isolate ? plain : base, -1);
			if (!a.isolate)
				plain = m;
			if (!base)
				base = m;
		}
	}
	a.isolate = 0;
	/* in a running shell, as the paper timed it: a script of the line */
	long times = c->quick ? 10 : 25;
	char script[] = "/tmp/karui-bench-script-XXXXXX";
	int fd = mkstemp(script);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	for (long i = 0; f && i < times; i++)
		fprintf(f, "%s\n", a.line);
	if (!f || fclose(f)) {
		kb_row_none(PIPELINE, "all-script", "failed", "cannot write a script in /tmp");
		base = 0;
	} else
		base = line_shells(c, &a, ksh, script, times);
	if (kb_want(c, PIPELINE, "floor")) {
		double ser[16], par[16];
		if ((why = line_floor(c, &a, ser, par))) {
			kb_row_none(PIPELINE, "floor", "failed", why);
		} else {
			kb_row(c, PIPELINE, "floor-serial", "cat|grep, own work", "ms", ser, c->reps,
			       base, -1);
			kb_row(c, PIPELINE, "floor-parallel", "cat|grep, own work", "ms", par,
			       c->reps, base, -1);
		}
	}
	if (fd >= 0)
		unlink(script);
	if (tmp)
		unlink(a.words);
}

/* ---------------- uproc.syscall ---------------- */

#define SYSCALL "uproc.syscall"

struct sc_arg {
	const char *prog, *mode;
	char n[24];
};

static int syscall_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct sc_arg *a = arg;
	char *argv[] = {"karui-bench-uprog", (char *)a->mode, (char *)a->n, NULL};
	for (int r = -1; r < c->reps; r++) {
		kr_upipe *out;
		int e = kr_upipe_create(&out);
		if (e)
			return e;
		kr_uproc_attr at;
		kr_uproc_attr_init(&at);
		kr_uproc_attr_fd_pipe(&at, 1, out, KR_UPIPE_WRITE);
		kr_uproc *up;
		e = kr_uproc_spawn(&up, a->prog, argv, &at);
		kr_upipe_close(out, KR_UPIPE_WRITE);
		char buf[64];
		long lines;
		int de = e ? 0 : drain_upipe(out, buf, sizeof buf, &lines);
		kr_upipe_close(out, KR_UPIPE_READ);
		int st = -1;
		if (e || (e = kr_uproc_wait(up, &st)) || (e = de))
			return e;
		if (st)
			return bad_status(k, "karui-bench-uprog", st, 0);
		if (r >= 0)
			k->v[k->nv++] = atof(buf);
	}
	return 0;
}

/* karui-bench-uprog MODE N, which prints ns per round, as a μprocess (each
 * call rewritten where karui does so, or every call trapping) and as a
 * process: rows MODE of experiment exp. */
static void uprog_rounds(const kb_ctx *c, const char *exp, const char *mode, long n)
{
	struct sc_arg a = {.mode = mode};
	char path[PATH_MAX];
	if (!(a.prog = prog_path(c, exp, "uprog", path, sizeof path)))
		return;
	snprintf(a.n, sizeof a.n, "%ld", n);
	double karui = 0;
	static const struct {
		const char *sys, *rewrite;
	} K[] = {{"karui", ""}, {"karui-trap", "0"}};
	for (size_t i = 0; i < sizeof K / sizeof *K; i++) {
		if (!kb_want(c, exp, K[i].sys))
			continue;
		struct kid k;
		kid_run(c, 1, K[i].rewrite, syscall_kid, &a, &k);
		if (kid_failed(exp, K[i].sys, &k))
			continue;
		double m = kb_row(c, exp, K[i].sys, mode, "ns", k.v, k.nv, karui, -1);
		if (!i)
			karui = m;
	}
	if (!kb_want(c, exp, "native"))
		return;
	char *argv[] = {"karui-bench-uprog", (char *)mode, a.n, NULL};
	double v[16];
	for (int r = -1; r < c->reps; r++) {
		char buf[64];
		long lines;
		int st = run_proc(a.prog, argv, buf, sizeof buf, &lines);
		if (st) {
			char why[96];
			snprintf(why, sizeof why, "karui-bench-uprog ended with status %d", st);
			kb_row_none(exp, "native", "failed", why);
			return;
		}
		if (r >= 0)
			v[r] = atof(buf);
	}
	kb_row(c, exp, "native", mode, "ns", v, c->reps, karui, -1);
}

void kb_uproc_syscall(const kb_ctx *c)
{
	uprog_rounds(c, SYSCALL, "getppid", c->n ? c->n : c->quick ? 20000L : 200000L);
}

/* ---------------- uproc.signalfd ---------------- */

void kb_uproc_signalfd(const kb_ctx *c)
{
	uprog_rounds(c, "uproc.signalfd", "signalfd", c->n ? c->n : c->quick ? 5000L : 50000L);
}

/* ---------------- uproc.count ---------------- */

#define COUNT "uproc.count"

/* What a set of mappings holds, in KiB (smaps), and its page tables. */
struct mem {
	double size, rss, pss, dirty, pte;
	double lib_size, lib_rss; /* mappings of shared objects (*.so, *.so.N) */
};

static int is_lib(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	const char *so = strstr(b, ".so");
	return so && (so[3] == 0 || so[3] == '.' || so[3] == '\n');
}

/* /proc/PID/FILE, /proc/self/FILE for pid 0 */
static const char *proc_file(char *buf, size_t n, pid_t pid, const char *file)
{
	if (pid)
		snprintf(buf, n, "/proc/%d/%s", (int)pid, file);
	else
		snprintf(buf, n, "/proc/self/%s", file);
	return buf;
}

/* /proc/PID/smaps and VmPTE of /proc/PID/status ("self" for pid 0) */
static int mem_of(pid_t pid, struct mem *m)
{
	char path[64], line[512];
	memset(m, 0, sizeof *m);
	FILE *f = fopen(proc_file(path, sizeof path, pid, "smaps"), "r");
	if (!f)
		return errno;
	int lib = 0;
	double v;
	while (fgets(line, sizeof line, f)) {
		char name[32];
		unsigned long lo, hi;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) == 2 && at > 0) {
			lib = is_lib(line + at);
			continue;
		}
		if (sscanf(line, "%31[^:]: %lf kB", name, &v) != 2)
			continue;
		if (!strcmp(name, "Size")) {
			m->size += v;
			if (lib)
				m->lib_size += v;
		} else if (!strcmp(name, "Rss")) {
			m->rss += v;
			if (lib)
				m->lib_rss += v;
		} else if (!strcmp(name, "Pss")) {
			m->pss += v;
		} else if (!strcmp(name, "Private_Dirty")) {
			m->dirty += v;
		}
	}
	fclose(f);
	if (!(f = fopen(proc_file(path, sizeof path, pid, "status"), "r")))
		return errno;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmPTE: %lf", &v) == 1)
			m->pte = v;
	fclose(f);
	return 0;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static long mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int ch;
	if (!f)
		return -1;
	while ((ch = getc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* The metrics, in the order of struct kid's values: count, then the
 * per-program figures. */
static const struct {
	const char *metric, *unit;
} CM[] = {
	{"count", "uprocs"},       {"rss", "KiB"},           {"pss", "KiB"},
	{"private dirty", "KiB"},  {"address space", "KiB"}, {"libraries", "KiB"},
	{"libraries rss", "KiB"},  {"page tables", "KiB"},
};
enum { NCM = sizeof CM / sizeof CM[0] };

static void per(const struct mem *a, const struct mem *b, double n, double *v)
{
	v[1] = (b->rss - a->rss) / n;
	v[2] = (b->pss - a->pss) / n;
	v[3] = (b->dirty - a->dirty) / n;
	v[4] = (b->size - a->size) / n;
	v[5] = (b->lib_size - a->lib_size) / n;
	v[6] = (b->lib_rss - a->lib_rss) / n;
	v[7] = (b->pte - a->pte) / n;
}

struct count_arg {
	char cat[PATH_MAX];
	long max;
};

/* A pipe that has carried a byte, so that its ring's pages are resident. */
static int warm_upipe(kr_upipe **p)
{
	char b = 'x';
	size_t n;
	int e = kr_upipe_create(p);
	if (!e && !(e = kr_upipe_write(*p, &b, 1, &n)))
		e = kr_upipe_read(*p, &b, 1, &n);
	return e;
}

/* Start cat number i on in[i] and out[i] and see it echo a line: 0, -1
 * (it ended as it started: k->why) or spawn's error. */
static int count_one(const struct count_arg *a, kr_upipe **in, kr_upipe **out, kr_uproc **up,
		     long i, struct kid *k)
{
	kr_uproc_attr at;
	kr_uproc_attr_init(&at);
	kr_uproc_attr_fd_pipe(&at, 0, in[i], KR_UPIPE_READ);
	kr_uproc_attr_fd_pipe(&at, 1, out[i], KR_UPIPE_WRITE);
	kr_uproc_attr_fd_close(&at, 2);
	int e = kr_uproc_spawn(&up[i], a->cat, (char *[]){"cat", NULL}, &at);
	if (e)
		return e;
	kr_upipe_close(in[i], KR_UPIPE_READ);
	kr_upipe_close(out[i], KR_UPIPE_WRITE);
	char b[2];
	size_t n = 0, got = 1;
	if (!kr_upipe_write(in[i], "x\n", 2, &got))
		while (n < 2 && !kr_upipe_read(out[i], b + n, 2 - n, &got) && got)
			n += got;
	if (n == 2)
		return 0;
	int st = -1;
	kr_upipe_close(in[i], KR_UPIPE_WRITE);
	kr_uproc_wait(up[i], &st);
	kr_upipe_close(out[i], KR_UPIPE_READ);
	in[i] = out[i] = NULL;
	snprintf(k->why, sizeof k->why, "cat %ld ended with status %d as it started", i + 1, st);
	return -1;
}

/* cats started one by one up to a->max or the first failure; the memory
 * figures are those of the first COUNT_PROCS (or a->max if fewer), whose
 * pipes are made before the first measurement: they are the experiment's,
 * not the μprocesses'. */
static int count_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct count_arg *a = arg;
	long first = a->max < COUNT_PROCS ? a->max : COUNT_PROCS, n = 0, i;
	kr_upipe **in = calloc((size_t)a->max, sizeof *in);
	kr_upipe **out = calloc((size_t)a->max, sizeof *out);
	kr_uproc **up = calloc((size_t)a->max, sizeof *up);
	int e = in && out && up ? 0 : ENOMEM;
	/* one cat run first: what the first μprocess sets up once is not a
	 * μprocess's own */
	kr_uproc *w;
	int st;
	if (!e && !(e = kr_uproc_spawn(&w, a->cat, (char *[]){"cat", "/dev/null", NULL}, NULL)))
		e = kr_uproc_wait(w, &st);
	for (i = 0; !e && i < first; i++)
		if (!(e = warm_upipe(&in[i])))
			e = warm_upipe(&out[i]);
	struct mem m0, m1;
	if (!e)
		e = mem_of(0, &m0);
	int why = 0; /* what stopped the count */
	for (; !e && !why && n < a->max; n++) {
		if (n >= first && ((why = kr_upipe_create(&in[n])) ||
				   (why = kr_upipe_create(&out[n]))))
			break;
		if ((why = count_one(a, in, out, up, n, k)))
			break;
		if (n + 1 == first)
			e = mem_of(0, &m1);
	}
	if (why && n < first)
		e = why; /* too few for the memory figures */
	else if (why > 0)
		snprintf(k->why, sizeof k->why, "spawn %ld failed: %s", n + 1, strerror(why));
	if (why && !e) {
		size_t l = strlen(k->why);
		snprintf(k->why + l, sizeof k->why - l, " (mappings %ld of vm.max_map_count %ld)",
			 mappings(), read_long("/proc/sys/vm/max_map_count"));
	}
	if (!e) {
		k->v[0] = (double)n;
		per(&m0, &m1, (double)first, k->v);
		k->nv = NCM;
	}
	for (i = 0; i < a->max; i++) {
		if (i >= n && in[i])
			kr_upipe_close(in[i], KR_UPIPE_READ);
		if (in[i])
			kr_upipe_close(in[i], KR_UPIPE_WRITE);
		if (i < n && !e) {
			int s = -1, we = kr_uproc_wait(up[i], &s);
			if (we || s)
				e = we ? we : bad_status(k, "cat", s, 0);
		} else if (i < n) {
			kr_uproc_wait(up[i], NULL);
		}
		if (i >= n && out[i])
			kr_upipe_close(out[i], KR_UPIPE_WRITE);
		if (out[i])
			kr_upipe_close(out[i], KR_UPIPE_READ);
	}
	free(in);
	free(out);
	free(up);
	return e;
}

/* n cat processes on pipes, each having echoed a line: their summed
 * figures per process in v[1..]; an error message or NULL. */
static const char *count_procs(const char *cat, long n, double *v)
{
	static char why[128];
	int *in = calloc((size_t)n, sizeof *in);
	pid_t *pid = calloc((size_t)n, sizeof *pid);
	int out[2] = {-1, -1};
	const char *err = NULL;
	long started = 0;
	if (!in || !pid || pipe2(out, O_CLOEXEC)) {
		err = "no memory or no pipe";
		goto done;
	}
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (; started < n; started++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC)) {
			snprintf(why, sizeof why, "pipe: %s after %ld", strerror(errno), started);
			err = why;
			break;
		}
		pid_t child = fork();
		if (child == 0) {
			if (dup2(p[0], 0) < 0 || dup2(out[1], 1) < 0 ||
			    (devnull >= 0 && dup2(devnull, 2) < 0))
				_exit(127);
			execv(cat, (char *[]){"cat", NULL});
			_exit(127);
		}
		close(p[0]);
		if (child < 0) {
			close(p[1]);
			snprintf(why, sizeof why, "fork: %s after %ld", strerror(errno), started);
			err = why;
			break;
		}
		in[started] = p[1];
		pid[started] = child;
	}
	if (devnull >= 0)
		close(devnull);
	close(out[1]);
	for (long i = 0; i < started && !err; i++)
		if (write(in[i], "x\n", 2) != 2)
			err = "a cat does not read";
	char buf[4096];
	for (long left = 2 * started; left > 0 && !err;) {
		ssize_t got = read(out[0], buf, sizeof buf);
		if (got <= 0)
			err = "a cat does not echo";
		left -= got;
	}
	struct mem sum = {0}, zero = {0};
	for (long i = 0; i < started && !err; i++) {
		struct mem m;
		if (mem_of(pid[i], &m)) {
			err = "cannot read a cat's smaps";
			break;
		}
		sum.size += m.size;
		sum.rss += m.rss;
		sum.pss += m.pss;
		sum.dirty += m.dirty;
		sum.pte += m.pte;
		sum.lib_size += m.lib_size;
		sum.lib_rss += m.lib_rss;
	}
	if (!err)
		per(&zero, &sum, (double)started, v);
	for (long i = 0; i < started; i++) {
		close(in[i]);
		int s = kb_wait(pid[i], NULL);
		if (!err && s) {
			snprintf(why, sizeof why, "cat ended with status %d", s);
			err = why;
		}
	}
done:
	if (out[0] >= 0)
		close(out[0]);
	free(in);
	free(pid);
	return err;
}

void kb_uproc_count(const kb_ctx *c)
{
	struct count_arg a;
	if (kb_find_prog("cat", a.cat, sizeof a.cat)) {
		kb_row_none(COUNT, "all", "skipped", "no cat in PATH");
		return;
	}
	a.max = c->n ? c->n : c->quick ? 1000 : 100000;
	double karui[NCM] = {0};
	if (kb_want(c, COUNT, "karui")) {
		struct kid k;
		kid_run(c, 2, NULL, count_kid, &a, &k);
		if (!kid_failed(COUNT, "karui", &k)) {
			for (int i = 0; i < NCM; i++)
				karui[i] = kb_row_note(c, COUNT, "karui", CM[i].metric, CM[i].unit,
						       &k.v[i], 1, 0, -1,
						       i == 0 && k.why[0] ? k.why : NULL);
		}
	}
	if (!kb_want(c, COUNT, "process"))
		return;
	long n = a.max < COUNT_PROCS ? a.max : COUNT_PROCS;
	double v[NCM];
	const char *why = count_procs(a.cat, n, v);
	if (why) {
		kb_row_none(COUNT, "process", "failed", why);
		return;
	}
	for (int i = 1; i < NCM; i++)
		kb_row(c, COUNT, "process", CM[i].metric, CM[i].unit, &v[i], 1, karui[i], -1);
}

/* ---------------- seed003.table6 ---------------- */

#define TABLE6 "seed003.table6"
#define HELLO "Hello, World\n"

/* The rows of Table 6: where a program's memory is. */
enum { R_TEXT, R_DATA, R_BSS, R_HEAP, R_STACK, R_LIBC, R_LDSO, R_OTHER, R_KARUI, R_KERNEL,
       R_TOTAL, NREG };
static const char *const REGION[NREG] = {"text", "data", "bss", "heap", "stack", "libc",
					 "ld.so", "other files", "karui", "kernel", "total"};
/* and what is measured of each, in KiB */
enum { M_SPACE, M_RSS, M_PRIVATE, M_SHARED, NMEAS };
static const char *const MEASURE[NMEAS] = {"address space", "rss", "private", "shared"};
enum { T6_MAPS = NREG * NMEAS, T6_FIT, T6_NV }; /* struct kid's values */

/* karui gives a μprocess's stack 8 MiB and 2 MiB of argument room
 * (docs/uproc.md); nothing else a hello program maps comes near */
#define STACK_MIN ((uintptr_t)8 << 20)

/* A mapping of /proc/PID/maps, or the part of one that is new. */
struct piece {
	uintptr_t lo, hi;
	int exec;
	char path[PATH_MAX];
};

/* A host's maps, read into room set aside before anything is measured:
 * the reading adds nothing to what it reads. */
enum { MAXMAPS = 256 };
struct maps {
	size_t n;
	struct piece p[MAXMAPS];
};

/* /proc/PID/maps ("self" for 0), sorted by address; 0 or an errno code */
static int read_maps(pid_t pid, struct maps *m)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f = fopen(proc_file(path, sizeof path, pid, "maps"), "r");
	if (!f)
		return errno;
	int e = 0;
	m->n = 0;
	while (!e && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perm[5];
		int at = 0;
		if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &lo, &hi, perm, &at) < 3 || !at)
			continue;
		if (m->n == MAXMAPS) {
			e = E2BIG;
			break;
		}
		struct piece *p = &m->p[m->n++];
		p->lo = lo;
		p->hi = hi;
		p->exec = perm[2] == 'x';
		snprintf(p->path, sizeof p->path, "%s", line + at);
		p->path[strcspn(p->path, "\n")] = 0;
	}
	fclose(f);
	return e;
}

/* The parts of `now`'s mappings that no mapping of `old` covered, in
 * place: the kernel merges a new anonymous mapping with an old neighbour
 * of the same kind, so a line of maps may be partly old. */
static void only_new(struct maps *now, const struct maps *old)
{
	size_t out = 0, j = 0;
	for (size_t i = 0; i < now->n; i++) {
		struct piece p = now->p[i];
		while (j < old->n && old->p[j].hi <= p.lo)
			j++;
		for (size_t o = j; o < old->n && old->p[o].lo < p.hi && p.lo < p.hi; o++) {
			if (old->p[o].lo > p.lo) { /* a new part below the old mapping */
				now->p[out] = p;
				now->p[out++].hi = old->p[o].lo;
			}
			p.lo = old->p[o].hi < p.hi ? old->p[o].hi : p.hi;
		}
		if (p.lo < p.hi)
			now->p[out++] = p;
	}
	now->n = out;
}

static int starts(const char *path, const char *name)
{
	const char *b = strrchr(path, '/');
	return !strncmp(b ? b + 1 : path, name, strlen(name));
}

/* Each piece's region, by the file it maps: the program's executable
 * pages are its text, its other pages its data; anonymous memory right
 * above a file's last mapping is that file's bss; an anonymous executable
 * page is karui's (its trampolines); the rest of the anonymous memory is
 * the stack (the kernel's [stack], or a μprocess's, by its size) or the
 * heap (malloc's, ld.so's, the TLS). */
static int region_of(const struct piece *p, const struct piece *below, int below_region,
		     const char *prog)
{
	if (p->path[0] == '/') {
		if (!strcmp(p->path, prog))
			return p->exec ? R_TEXT : R_DATA;
		if (starts(p->path, "libc.so"))
			return R_LIBC;
		return starts(p->path, "ld-linux") ? R_LDSO : R_OTHER;
	}
	if (!strcmp(p->path, "[stack]"))
		return R_STACK;
	if (p->path[0] == '[' && strcmp(p->path, "[heap]"))
		return R_KERNEL; /* [vdso], [vvar], [vsyscall] */
	if (!p->path[0] && below && below->path[0] == '/' && below->hi == p->lo)
		return below_region == R_TEXT || below_region == R_DATA ? R_BSS : below_region;
	if (p->exec)
		return R_KARUI;
	return p->hi - p->lo >= STACK_MIN ? R_STACK : R_HEAP;
}

/* Add [lo, hi) of the process whose pagemap is fd to m[NMEAS] (KiB): a page
 * is resident when present; private when mapped there alone (the
 * kernel's "exclusively mapped", which smaps counts as Private_*), shared
 * otherwise. */
static int count_pages(int fd, uintptr_t lo, uintptr_t hi, double *m)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t e[512];
	m[M_SPACE] += (double)(hi - lo) / 1024;
	for (uintptr_t a = lo; a < hi;) {
		size_t want = (hi - a) / (uintptr_t)pg;
		want = want < 512 ? want : 512;
		ssize_t got = pread(fd, e, want * sizeof *e, (off_t)(a / (uintptr_t)pg * sizeof *e));
		if (got < 0)
			return errno;
		if (!got) /* above the user's address space: [vsyscall] */
			break;
		for (size_t i = 0; i < (size_t)got / sizeof *e; i++) {
			if (!(e[i] >> 63))
				continue;
			m[M_RSS] += (double)pg / 1024;
			m[(e[i] >> 56 & 1) ? M_PRIVATE : M_SHARED] += (double)pg / 1024;
		}
		a += (uintptr_t)got / sizeof *e * (uintptr_t)pg;
	}
	return 0;
}

/* The figures of m's pieces by region into v[NREG * NMEAS] (added to),
 * the total of all included; pid 0: this process. */
static int count_regions(pid_t pid, const struct maps *m, const char *prog, double *v)
{
	char path[64];
	int fd = open(proc_file(path, sizeof path, pid, "pagemap"), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int e = 0, reg = -1;
	for (size_t i = 0; i < m->n && !e; i++) {
		reg = region_of(&m->p[i], i ? &m->p[i - 1] : NULL, reg, prog);
		e = count_pages(fd, m->p[i].lo, m->p[i].hi, &v[reg * NMEAS]);
	}
	close(fd);
	for (int r = 0; r < R_TOTAL; r++)
		for (int j = 0; j < NMEAS; j++)
			v[R_TOTAL * NMEAS + j] += v[r * NMEAS + j];
	return e;
}

/* All of this process's memory (its maps read into *m), by pagemap:
 * karui's own is what the host gained besides the μprocess's mappings. */
static int host_total(struct maps *m, double *t)
{
	double v[NREG * NMEAS] = {0};
	int e = read_maps(0, m);
	if (!e)
		e = count_regions(0, m, "", v);
	memcpy(t, &v[R_TOTAL * NMEAS], NMEAS * sizeof *t);
	return e;
}

/* Is b[0..n) what karui-bench-hello prints? */
static int said_hello(const char *b, size_t n)
{
	return n == sizeof HELLO - 1 && !memcmp(b, HELLO, n);
}

/* The μprocess's side: karui-bench-hello run once first (what the first
 * μprocess of a process sets up is not a μprocess's own) and its image
 * dropped; then, with no image kept, started afresh on two karui pipes made
 * beforehand and measured once it has said hello and waits on its stdin:
 * what it added to the host's mappings, by region, karui's own figures
 * being what the host gained besides them; the mappings it added, and how
 * many such μprocesses the mappings left under vm.max_map_count allow. */
static int table6_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	(void)c;
	const char *prog = arg;
	char *argv[] = {"karui-bench-hello", NULL};
	kr_uproc_attr at;
	kr_uproc_attr_init(&at);
	kr_uproc_attr_fd_close(&at, 0);
	kr_uproc_attr_fd_close(&at, 1);
	kr_uproc *up;
	int st = -1, e = kr_uproc_spawn(&up, prog, argv, &at);
	if (e || (e = kr_uproc_wait(up, &st)))
		return e;
	if (st)
		return bad_status(k, "karui-bench-hello", st, 0);
	kr_uproc_keep(0);
	struct maps *old = malloc(sizeof *old), *now = malloc(sizeof *now);
	kr_upipe *in = NULL, *out = NULL;
	if (!old || !now || (e = warm_upipe(&in)) || (e = warm_upipe(&out)))
		goto done;
	memset(old, 0, sizeof *old);
	memset(now, 0, sizeof *now);
	double t0[NMEAS], t1[NMEAS];
	if ((e = host_total(old, t0)))
		goto done;
	kr_uproc_attr_fd_pipe(&at, 0, in, KR_UPIPE_READ);
	kr_uproc_attr_fd_pipe(&at, 1, out, KR_UPIPE_WRITE);
	if ((e = kr_uproc_spawn(&up, prog, argv, &at)))
		goto done;
	kr_upipe_close(in, KR_UPIPE_READ);
	kr_upipe_close(out, KR_UPIPE_WRITE);
	char b[sizeof HELLO];
	size_t n = 0, got = 1;
	while (n < sizeof HELLO - 1 && got && !kr_upipe_read(out, b + n, sizeof HELLO - 1 - n, &got))
		n += got;
	if (!said_hello(b, n)) {
		snprintf(k->why, sizeof k->why, "karui-bench-hello did not say hello");
		e = -1;
	}
	if (!e && !(e = host_total(now, t1))) {
		long max = read_long("/proc/sys/vm/max_map_count");
		k->v[T6_MAPS] = (double)now->n - (double)old->n;
		k->v[T6_FIT] = now->n > old->n ? (double)((max - (long)old->n) /
							  (long)(now->n - old->n)) : 0;
		only_new(now, old);
		memset(k->v, 0, T6_MAPS * sizeof *k->v);
		e = count_regions(0, now, prog, k->v);
		for (int m = 0; m < NMEAS; m++) {
			double own = t1[m] - t0[m] - k->v[R_TOTAL * NMEAS + m];
			k->v[R_KARUI * NMEAS + m] += own;
			k->v[R_TOTAL * NMEAS + m] += own;
		}
		k->nv = T6_NV;
	}
	kr_upipe_close(in, KR_UPIPE_WRITE);
	kr_upipe_close(out, KR_UPIPE_READ);
	in = out = NULL;
	int we = kr_uproc_wait(up, &st);
	if (!e && (e = we) == 0 && st)
		e = bad_status(k, "karui-bench-hello", st, 0);
done:
	for (int end = KR_UPIPE_READ; end <= KR_UPIPE_WRITE; end++) {
		if (in)
			kr_upipe_close(in, end);
		if (out)
			kr_upipe_close(out, end);
	}
	free(old);
	free(now);
	return e ? e : old && now ? 0 : ENOMEM;
}

/* The process's side: karui-bench-hello on two pipes, measured by its own
 * maps and pagemap once it has said hello; v[] as the kid's.  An error
 * message or NULL. */
static const char *table6_proc(const char *prog, double *v)
{
	static char why[96];
	int in[2], out[2], e = kb_two_pipes(in, out);
	if (e)
		return strerror(e);
	pid_t pid = kb_start(prog, (char *[]){"karui-bench-hello", NULL}, in[0], out[1], -1);
	close(in[0]);
	close(out[1]);
	const char *err = pid < 0 ? "fork failed" : NULL;
	char b[sizeof HELLO];
	size_t n = 0;
	ssize_t got = 1;
	while (!err && n < sizeof HELLO - 1 && (got = read(out[0], b + n, sizeof HELLO - 1 - n)) > 0)
		n += (size_t)got;
	if (!err && !said_hello(b, n))
		err = "karui-bench-hello did not say hello";
	struct maps *m = err ? NULL : malloc(sizeof *m);
	e = err ? 0 : !m ? ENOMEM : read_maps(pid, m);
	if (!err && !e)
		e = count_regions(pid, m, prog, v);
	if (!err && e) {
		snprintf(why, sizeof why, "its maps or pagemap: %s", strerror(e));
		err = why;
	}
	v[T6_MAPS] = m ? (double)m->n : 0;
	free(m);
	close(in[1]);
	close(out[0]);
	int st = pid < 0 ? -1 : kb_wait(pid, NULL);
	if (!err && st) {
		snprintf(why, sizeof why, "karui-bench-hello ended with status %d", st);
		err = why;
	}
	return err;
}

void kb_seed003_table6(const kb_ctx *c)
{
	char path[PATH_MAX];
	const char *prog = prog_path(c, TABLE6, "hello", path, sizeof path);
	if (!prog)
		return;
	double karui[T6_NV] = {0};
	char metric[64];
	if (kb_want(c, TABLE6, "karui")) {
		struct kid k;
		kid_run(c, 1, NULL, table6_kid, (void *)prog, &k);
		if (!kid_failed(TABLE6, "karui", &k)) {
			memcpy(karui, k.v, sizeof karui);
			for (int i = 0; i < T6_MAPS; i++) {
				snprintf(metric, sizeof metric, "%s %s", REGION[i / NMEAS],
					 MEASURE[i % NMEAS]);
				kb_row(c, TABLE6, "karui", metric, "KiB", &k.v[i], 1, 0, -1);
			}
			kb_row(c, TABLE6, "karui", "mappings", "maps", &k.v[T6_MAPS], 1, 0, -1);
			snprintf(metric, sizeof metric, "vm.max_map_count %ld",
				 read_long("/proc/sys/vm/max_map_count"));
			kb_row_note(c, TABLE6, "karui", "fit", "uprocs", &k.v[T6_FIT], 1, 0, -1,
				    metric);
		}
	}
	if (!kb_want(c, TABLE6, "process"))
		return;
	double v[T6_NV] = {0};
	const char *why = table6_proc(prog, v);
	if (why) {
		kb_row_none(TABLE6, "process", "failed", why);
		return;
	}
	for (int i = 0; i <= T6_MAPS; i++) {
		if (i < T6_MAPS)
			snprintf(metric, sizeof metric, "%s %s", REGION[i / NMEAS], MEASURE[i % NMEAS]);
		kb_row(c, TABLE6, "process", i < T6_MAPS ? metric : "mappings",
		       i < T6_MAPS ? "KiB" : "maps", &v[i], 1, karui[i], -1);
	}
}

/* ---------------- seed003.table5 ---------------- */

#define TABLE5 "seed003.table5"

/* seed 003 Table 5's dummy procedure, for the plain call and the peers */
static __attribute__((noinline)) int foo(void)
{
	__asm__ volatile("");
	return 1;
}
static int (*volatile foo_ptr)(void) = foo;

struct t5_arg {
	const char *prog;
	long n;
};

/* karui: foo in karui-bench-uprog serve, a μprocess, called n times */
static int table5_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct t5_arg *a = arg;
	char *argv[] = {"karui-bench-uprog", "serve", "1", NULL};
	kr_uproc *up;
	int e = kr_uproc_spawn(&up, a->prog, argv, NULL);
	if (e)
		return e;
	for (int r = -1; r < c->reps && !e; r++) {
		long res, sum = 0;
		double t0 = kb_now_ns();
		for (long i = 0; i < a->n && !e; i++) {
			e = kr_uproc_call(up, 0, NULL, 0, &res);
			sum += (int)res;
		}
		double t1 = kb_now_ns();
		if (!e && sum != a->n) {
			snprintf(k->why, sizeof k->why, "foo returned %ld in all, not %ld", sum, a->n);
			e = -1;
		}
		if (r >= 0)
			k->v[k->nv++] = (t1 - t0) / (double)a->n;
	}
	int st = -1;
	kr_uproc_kill(up, SIGTERM);
	kr_uproc_wait(up, &st);
	return e ? e : st != 128 + SIGTERM ? bad_status(k, "karui-bench-uprog", st, 128 + SIGTERM) : 0;
}

/* The peers: a plain call, and a round trip to a child process that calls
 * foo and answers, by SysV message queue or UNIX socket. */
enum { T5_MSGQ, T5_SOCKET };
struct t5_msg {
	long type; /* 1: call, 2: its result */
	int v;
};

static int t5_serve(int kind, int q, int fd, long n)
{
	struct t5_msg m;
	for (long i = 0; i < n; i++) {
		if (kind == T5_MSGQ) {
			if (msgrcv(q, &m, sizeof m.v, 1, 0) < 0)
				return 1;
			m.type = 2;
			m.v = foo_ptr();
			if (msgsnd(q, &m, sizeof m.v, 0))
				return 1;
		} else {
			int v;
			if (read(fd, &v, sizeof v) != sizeof v)
				return 1;
			v = foo_ptr();
			if (write(fd, &v, sizeof v) != sizeof v)
				return 1;
		}
	}
	return 0;
}

/* ns per round trip, c->reps times into v; 0 or an errno code */
static int t5_ipc(const kb_ctx *c, int kind, long n, double *v)
{
	int q = -1, sv[2] = {-1, -1}, e = 0;
	if (kind == T5_MSGQ && (q = msgget(IPC_PRIVATE, IPC_CREAT | 0600)) < 0)
		return errno;
	if (kind == T5_SOCKET && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return errno;
	long total = n * (c->reps + 1);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(t5_serve(kind, q, sv[1], total));
	if (pid < 0)
		e = errno;
	for (int r = -1; r < c->reps && !e; r++) {
		struct t5_msg m = {1, 0};
		long sum = 0;
		double t0 = kb_now_ns();
		for (long i = 0; i < n && !e; i++) {
			if (kind == T5_MSGQ) {
				if (msgsnd(q, &m, sizeof m.v, 0) || msgrcv(q, &m, sizeof m.v, 2, 0) < 0)
					e = errno;
				m.type = 1;
			} else if (write(sv[0], &m.v, sizeof m.v) != sizeof m.v ||
				   read(sv[0], &m.v, sizeof m.v) != sizeof m.v) {
				e = EIO;
			}
			sum += m.v;
		}
		double t1 = kb_now_ns();
		if (!e && sum != n)
			e = EIO;
		if (r >= 0)
			v[r] = (t1 - t0) / (double)n;
	}
	if (pid > 0) {
		if (e)
			kill(pid, SIGKILL);
		int st = kb_wait(pid, NULL);
		if (!e && st)
			e = EIO;
	}
	if (q >= 0)
		msgctl(q, IPC_RMID, NULL);
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	return e;
}

void kb_seed003_table5(const kb_ctx *c)
{
	char path[PATH_MAX];
	struct t5_arg a;
	if (!(a.prog = prog_path(c, TABLE5, "uprog", path, sizeof path)))
		return;
	a.n = c->n ? c->n : c->quick ? 100000 : 1000000;
	long nipc = a.n / 50 > 1000 ? a.n / 50 : 1000;
	double karui = 0, v[16];
	if (kb_want(c, TABLE5, "karui")) {
		struct kid k;
		kid_run(c, 1, NULL, table5_kid, &a, &k);
		if (!kid_failed(TABLE5, "karui", &k))
			karui = kb_row(c, TABLE5, "karui", "call", "ns", k.v, k.nv, 0, -1);
	}
	if (kb_want(c, TABLE5, "function")) {
		for (int r = -1; r < c->reps; r++) {
			long sum = 0;
			double t0 = kb_now_ns();
			for (long i = 0; i < a.n; i++)
				sum += foo_ptr();
			double t1 = kb_now_ns();
			if (r >= 0)
				v[r] = sum == a.n ? (t1 - t0) / (double)a.n : -1;
		}
		kb_row(c, TABLE5, "function", "call", "ns", v, c->reps, karui, -1);
	}
	static const struct {
		const char *sys;
		int kind;
	} P[] = {{"msgq", T5_MSGQ}, {"unix-socket", T5_SOCKET}};
	for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
		if (!kb_want(c, TABLE5, P[i].sys))
			continue;
		int e = t5_ipc(c, P[i].kind, nipc, v);
		if (e)
			kb_row_none(TABLE5, P[i].sys, "failed", strerror(e));
		else
			kb_row(c, TABLE5, P[i].sys, "call", "ns", v, c->reps, karui, -1);
	}
}

/* ---------------- seed003.table3 ---------------- */

#define TABLE3 "seed003.table3"

static long table3_n(const kb_ctx *c)
{
	return c->n ? c->n : c->quick ? 5000 : 50000;
}

struct t3_arg {
	const char *prog;
	long n;      /* round trips per run */
	char ns[24]; /* n, for argv */
};

/* "HOP OVERHEAD" as karui-bench-uprog ping and threads print it, into
 * v[r] (the hop) and v[reps + r] (the switch: the hop less the overhead,
 * lat_ctx's figure), if r >= 0; 0 or -1 (why says what it was). */
static int t3_take(const kb_ctx *c, const char *b, int r, double *v, char *why, size_t n)
{
	double hop, ovh;
	if (sscanf(b, "%lf %lf", &hop, &ovh) != 2 || !(hop > 0) || !(ovh > 0)) {
		snprintf(why, n, "karui-bench-uprog printed '%.60s', not HOP OVERHEAD", b);
		return -1;
	}
	if (r >= 0) {
		v[r] = hop;
		v[c->reps + r] = hop - ovh;
	}
	return 0;
}

/* ping and pong as two μprocesses around two karui pipes, ping's stderr a
 * third, drained into buf; their statuses in *ps and *qs (-1: not run).
 * 0 or an errno code. */
static int t3_ring(const struct t3_arg *a, char *buf, size_t cap, int *ps, int *qs)
{
	char *pargv[] = {"karui-bench-uprog", "ping", (char *)a->ns, NULL};
	char *qargv[] = {"karui-bench-uprog", "pong", (char *)a->ns, NULL};
	kr_upipe *p[3] = {NULL, NULL, NULL}; /* to pong, to ping, ping's stderr */
	kr_uproc *pu = NULL, *qu = NULL;
	kr_uproc_attr pa, qa;
	int e = 0;
	*ps = *qs = -1;
	for (int i = 0; i < 3 && !e; i++)
		e = kr_upipe_create(&p[i]);
	if (!e) {
		kr_uproc_attr_init(&pa);
		kr_uproc_attr_init(&qa);
		kr_uproc_attr_fd_pipe(&pa, 0, p[1], KR_UPIPE_READ);
		kr_uproc_attr_fd_pipe(&pa, 1, p[0], KR_UPIPE_WRITE);
		kr_uproc_attr_fd_pipe(&pa, 2, p[2], KR_UPIPE_WRITE);
		kr_uproc_attr_fd_pipe(&qa, 0, p[0], KR_UPIPE_READ);
		kr_uproc_attr_fd_pipe(&qa, 1, p[1], KR_UPIPE_WRITE);
		e = kr_uproc_spawn(&pu, a->prog, pargv, &pa);
		if (!e)
			e = kr_uproc_spawn(&qu, a->prog, qargv, &qa);
	}
	/* the μprocesses hold their ends: one that is left alone sees end of
	 * file or EPIPE, not a wait for ever */
	for (int i = 0; i < 3; i++)
		if (p[i]) {
			kr_upipe_close(p[i], KR_UPIPE_WRITE);
			if (i < 2 || !pu)
				kr_upipe_close(p[i], KR_UPIPE_READ);
		}
	long lines;
	int de = pu ? drain_upipe(p[2], buf, cap, &lines) : 0;
	if (pu)
		kr_upipe_close(p[2], KR_UPIPE_READ);
	int we = pu ? kr_uproc_wait(pu, ps) : 0;
	int wq = qu ? kr_uproc_wait(qu, qs) : 0;
	return e ? e : we ? we : wq ? wq : de;
}

/* karui: two μprocesses pass a byte around */
static int t3_uprocs_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	for (int r = -1; r < c->reps; r++) {
		char buf[128];
		int ps, qs, e = t3_ring(arg, buf, sizeof buf, &ps, &qs);
		if (e)
			return e;
		if (ps)
			return bad_status(k, "ping", ps, 0);
		if (qs)
			return bad_status(k, "pong", qs, 0);
		if (t3_take(c, buf, r, k->v, k->why, sizeof k->why))
			return -1;
	}
	k->nv = 2 * c->reps;
	return 0;
}

/* karui-threads: karui-bench-uprog threads, one μprocess */
static int t3_threads_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct t3_arg *a = arg;
	char *argv[] = {"karui-bench-uprog", "threads", (char *)a->ns, NULL};
	for (int r = -1; r < c->reps; r++) {
		kr_upipe *out;
		kr_uproc *up;
		kr_uproc_attr at;
		char buf[128];
		long lines;
		int st = -1, e = kr_upipe_create(&out);
		if (e)
			return e;
		kr_uproc_attr_init(&at);
		kr_uproc_attr_fd_pipe(&at, 1, out, KR_UPIPE_WRITE);
		e = kr_uproc_spawn(&up, a->prog, argv, &at);
		kr_upipe_close(out, KR_UPIPE_WRITE);
		int de = e ? 0 : drain_upipe(out, buf, sizeof buf, &lines);
		kr_upipe_close(out, KR_UPIPE_READ);
		if (e || (e = kr_uproc_wait(up, &st)) || (e = de))
			return e;
		if (st)
			return bad_status(k, "karui-bench-uprog threads", st, 0);
		if (t3_take(c, buf, r, k->v, k->why, sizeof k->why))
			return -1;
	}
	k->nv = 2 * c->reps;
	return 0;
}

/* karui-mp: the same ring between two microprocesses of the host, on
 * karui pipes by kr_upipe_read and _write: a μprocess's write and read
 * less the system calls' way into karui */
static int up_put(kr_upipe *p, unsigned char c)
{
	size_t done;
	int e = kr_upipe_write(p, &c, 1, &done);
	return e ? e : done == 1 ? 0 : EIO;
}

static int up_get(kr_upipe *p, unsigned char *c)
{
	size_t got;
	int e = kr_upipe_read(p, c, 1, &got);
	return e ? e : got == 1 ? 0 : EIO;
}

struct t3_mp {
	kr_upipe *in, *out;
	long n;
};

static void *t3_pong_mp(void *arg)
{
	const struct t3_mp *m = arg;
	unsigned char c;
	long e = 0;
	for (long i = 0; i <= m->n && !e; i++)
		if (!(e = up_get(m->in, &c)))
			e = up_put(m->out, c);
	return (void *)e;
}

/* One run of karui-mp: ns per hop and per write and read; 0 or an errno
 * code (EIO: a byte lost or changed). */
static int t3_mp_once(long n, double *hop, double *ovh)
{
	kr_upipe *p[3] = {NULL, NULL, NULL}; /* to pong, to ping, ping's own */
	int e = 0;
	unsigned char c;
	for (int i = 0; i < 3 && !e; i++)
		e = kr_upipe_create(&p[i]);
	double t0 = kb_now_ns();
	for (long i = 0; i < n && !e; i++)
		if (!(e = up_put(p[2], (unsigned char)i)) && !(e = up_get(p[2], &c)))
			e = c == (unsigned char)i ? 0 : EIO;
	*ovh = (kb_now_ns() - t0) / (double)n;
	struct t3_mp m = {p[0], p[1], n};
	kr_mp *mp = NULL;
	if (!e)
		e = kr_mp_create(&mp, NULL, t3_pong_mp, &m);
	for (long i = 0; i <= n && !e; i++) {
		if (i == 1)
			t0 = kb_now_ns();
		if (!(e = up_put(p[0], (unsigned char)i)) && !(e = up_get(p[1], &c)))
			e = c == (unsigned char)i ? 0 : EIO;
	}
	*hop = (kb_now_ns() - t0) / (2.0 * (double)n);
	int shut = 0; /* p[0]'s write end and p[1]'s read end closed */
	if (mp) {
		if (e) { /* pong's read sees end of file, or its write EPIPE */
			kr_upipe_close(p[0], KR_UPIPE_WRITE);
			kr_upipe_close(p[1], KR_UPIPE_READ);
			shut = 1;
		}
		void *res = NULL;
		int je = kr_mp_join(mp, &res);
		if (!e)
			e = je ? je : (int)(long)res;
	}
	for (int i = 0; i < 3; i++) {
		if (!p[i])
			continue;
		if (!shut || i != 1)
			kr_upipe_close(p[i], KR_UPIPE_READ);
		if (!shut || i != 0)
			kr_upipe_close(p[i], KR_UPIPE_WRITE);
	}
	return e;
}

static int t3_mp_kid(const kb_ctx *c, void *arg, struct kid *k)
{
	const struct t3_arg *a = arg;
	for (int r = -1; r < c->reps; r++) {
		double hop, ovh;
		int e = t3_mp_once(a->n, &hop, &ovh);
		if (e)
			return e;
		if (r >= 0) {
			k->v[r] = hop;
			k->v[c->reps + r] = hop - ovh;
		}
	}
	k->nv = 2 * c->reps;
	return 0;
}

/* process: ping and pong as two processes around two pipe(2)s, as
 * lmbench's lat_ctx; its output in buf.  An error message or NULL. */
static const char *t3_procs(const struct t3_arg *a, char *buf, size_t cap)
{
	static char why[96];
	char *pargv[] = {"karui-bench-uprog", "ping", (char *)a->ns, NULL};
	char *qargv[] = {"karui-bench-uprog", "pong", (char *)a->ns, NULL};
	int to[2], back[2], err[2], e = kb_two_pipes(to, back);
	if (e)
		return strerror(e);
	if (pipe2(err, O_CLOEXEC)) {
		e = errno;
		for (int i = 0; i < 2; i++) {
			close(to[i]);
			close(back[i]);
		}
		return strerror(e);
	}
	pid_t p = kb_start(a->prog, pargv, back[0], to[1], err[1]);
	pid_t q = kb_start(a->prog, qargv, to[0], back[1], -1);
	for (int i = 0; i < 2; i++) {
		close(to[i]);
		close(back[i]);
	}
	close(err[1]);
	long lines;
	buf[0] = 0;
	drain_fd(err[0], buf, cap, &lines);
	close(err[0]);
	int ps = p < 0 ? -1 : kb_wait(p, NULL), qs = q < 0 ? -1 : kb_wait(q, NULL);
	if (ps || qs) {
		snprintf(why, sizeof why, "%s ended with status %d", ps ? "ping" : "pong",
			 ps ? ps : qs);
		return why;
	}
	return NULL;
}

/* pthread: karui-bench-uprog threads as a process.  The same. */
static const char *t3_pthreads(const struct t3_arg *a, char *buf, size_t cap)
{
	static char why[96];
	char *argv[] = {"karui-bench-uprog", "threads", (char *)a->ns, NULL};
	long lines;
	int st = run_proc(a->prog, argv, buf, cap, &lines);
	if (!st)
		return NULL;
	snprintf(why, sizeof why, "karui-bench-uprog threads ended with status %d", st);
	return why;
}

/* The seed's figures (Table 3, µs), on the rows that stand for its systems */
static const char *t3_seed(const char *sys)
{
	return !strcmp(sys, "karui") ? "seed 003: ProcThread 1.95 us"
	       : !strcmp(sys, "pthread") ? "seed 003: POSIX thread (PTL) 1.95 us"
	       : !strcmp(sys, "process") ? "seed 003: UNIX process 82 us (lmbench)"
					 : NULL;
}

void kb_seed003_table3(const kb_ctx *c)
{
	struct t3_arg a;
	char path[PATH_MAX];
	if (!(a.prog = prog_path(c, TABLE3, "uprog", path, sizeof path)))
		return;
	a.n = table3_n(c);
	snprintf(a.ns, sizeof a.ns, "%ld", a.n);
	/* one CPU, as lat_ctx measures it (and the seed's uniprocessor), for
	 * every system but the -2vp and -2cpu ones, which run where the
	 * kernel puts their threads */
	static const struct {
		const char *sys;
		unsigned vps;   /* karui's side: VPs; 0: a peer */
		int one_cpu;
		kid_fn kid;
		const char *(*peer)(const struct t3_arg *a, char *buf, size_t cap);
	} S[] = {
		{"karui", 1, 1, t3_uprocs_kid, NULL},
		{"karui-threads", 1, 1, t3_threads_kid, NULL},
		{"karui-mp", 1, 1, t3_mp_kid, NULL},
		{"karui-2vp", 2, 0, t3_uprocs_kid, NULL},
		{"pthread", 0, 1, NULL, t3_pthreads},
		{"process", 0, 1, NULL, t3_procs},
		{"pthread-2cpu", 0, 0, NULL, t3_pthreads},
		{"process-2cpu", 0, 0, NULL, t3_procs},
	};
	double karui[2] = {0, 0};
	for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
		if (!kb_want(c, TABLE3, S[i].sys))
			continue;
		if (S[i].one_cpu)
			kb_pin(1);
		struct kid k;
		if (S[i].kid) {
			kid_run(c, S[i].vps, NULL, S[i].kid, &a, &k);
		} else {
			memset(&k, 0, sizeof k);
			for (int r = -1; r < c->reps && !k.err; r++) {
				char buf[128];
				const char *why = S[i].peer(&a, buf, sizeof buf);
				if (why) {
					snprintf(k.why, sizeof k.why, "%s", why);
					k.err = -1;
				} else if (t3_take(c, buf, r, k.v, k.why, sizeof k.why)) {
					k.err = -1;
				}
			}
			k.nv = 2 * c->reps;
		}
		kb_pin(0);
		if (kid_failed(TABLE3, S[i].sys, &k))
			continue;
		double h = kb_row(c, TABLE3, S[i].sys, "hop", "ns", k.v, c->reps, karui[0], -1);
		double s = kb_row_note(c, TABLE3, S[i].sys, "switch", "ns", k.v + c->reps, c->reps,
				       karui[1], -1, t3_seed(S[i].sys));
		if (!strcmp(S[i].sys, "karui")) {
			karui[0] = h;
			karui[1] = s;
		}
	}
}
