/*
 * karui-bench: Debian's programs natively and as μprocesses, in the same
 * run, through karui's two tools: karui-run (one program as a μprocess,
 * a VP per processor, which its threads share) and karui-sh (a shell
 * whose commands are μprocesses of its one process).
 *
 *   uproc.threads  threaded programs over a text the experiment writes
 *                  once (--n MB, default 2): xz -T2 --block-size=1MiB,
 *                  zstd -13 -T2 -B1048576, pigz -p 2, sort --parallel=2
 *                  -S 100M, and karui-bench-threads (threads.cc: a loop
 *                  split over two std::threads); `PROG ARGS` (native)
 *                  against `karui-run PROG ARGS` (karui), output to
 *                  /dev/null; a program that is not installed is skipped
 *   uproc.make     make -j2 of a C project the experiment writes (--n
 *                  files of about 330 lines, default 8, a header, a main
 *                  and a Makefile that links them), natively and under
 *                  karui-run: make's recipes run cc, which runs cc1, as
 *                  and collect2/ld, all μprocesses then (posix_spawn,
 *                  vfork); the objects are removed before every run, and
 *                  the program built must print the same under both
 *   pthread.compat the same programs with four threads of work (-T4,
 *                  -p 4, --parallel=4), and sysbench's threads and mutex
 *                  tests (a fixed number of events: sysbench prints
 *                  figures of its own; what is compared is its lines of
 *                  the threads and events counts), natively (native)
 *                  and with LD_PRELOAD=libkarui-pthread.so (karui: the
 *                  pthread layer, src/pthread)
 *   uproc.script   a POSIX shell script of --n commands (1000) of external
 *                  programs (/bin/true, /bin/echo, /bin/echo to /dev/null,
 *                  cat of a small file, expr), run by karui-sh, dash and
 *                  bash (`SHELL script`), and by dash and bash under
 *                  karui-run (`karui-run SHELL script`: the shell a
 *                  μprocess, its forks deferred, its commands μprocesses);
 *                  the output must be what the experiment knows the
 *                  script prints
 *
 * Each system is a process that karui-bench starts (kb_start: fork +
 * execv, stdin /dev/null) and waits for (kb_wait: wait4); a run's wall
 * time runs from before the fork to wait4's return, its CPU time is the
 * user + system time of wait4's rusage, which counts all the process's
 * threads (karui's VPs and ticker among them) and the children it reaped
 * (make's compilers, the shells' commands).  Metrics, in ms: METRIC (wall)
 * and METRIC cpu, METRIC the program ("xz", "make -j2", "script").
 *
 * Before the timed runs, every system runs once untimed with its output
 * kept in a file: it warms the page cache and karui's cache of what it
 * learnt of each program (docs/uproc.md), and its output must be the
 * reference, byte for byte (the native run's; for uproc.script, what the
 * script prints), or its row fails: "output DIFFERS", said on stderr too.
 * A run with a status other than 0 fails its row with the first lines of
 * its stderr.  Then the systems take turns run by run, so that a slow
 * phase of the shared machine falls on all of them: 5 timed runs (--quick
 * 3), the median with min and max; each peer's row has its ratio to
 * karui's (peer / karui: below 1, the peer is faster).  Everything written
 * lives in a temporary directory, removed at the end.
 *
 * Rejected: the usual 11 repeats (xz and zstd take most of a second each,
 * the shells 1000 process starts: a run would take minutes); timing
 * inside karui-bench's own karui (karui-run and karui-sh are how programs
 * run as μprocesses, and their start is part of the cost).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exp.h"

#define THREADS "uproc.threads"
#define MAKE "uproc.make"
#define SCRIPT "uproc.script"
#define COMPAT "pthread.compat"

enum { MAXSYS = 5, MAXARG = 12, MAXREPS = 16, THREAD_STEPS = 100000000 };

/* ---------------- one program on several systems ---------------- */

struct sys {
	const char *name;       /* the row's system */
	char path[PATH_MAX];    /* what runs: the program, karui-run, a shell */
	char *argv[MAXARG];
	char arg[PATH_MAX];     /* karui-run's argv[1]: the program's path */
	const char *preload;    /* LD_PRELOAD for it, or NULL */
	int shown;              /* timed and in the rows (--only); else only checked */
	char why[400];          /* why its row fails, or "" */
	int nv;
	double wall[MAXREPS], cpu[MAXREPS];
};

struct job {
	const char *exp, *metric;
	const char *dir;        /* the temporary directory */
	int nsys;               /* sys[0] is karui's, the base of the ratios */
	struct sys sys[MAXSYS];
	/* the output that every system must print, or NULL: the last
	 * system's (native), which is then run even if --only leaves it out */
	const char *want;
	/* before every run (uproc.make: the objects removed), if not NULL */
	void (*before)(const struct job *j);
	/* replaces the output file's contents by what is compared
	 * (uproc.make: what the program built prints); "" or why not */
	const char *(*result)(const struct job *j, const char *out);
	const char *note;       /* on karui's wall row */
};

/* A system of j: path with argv (NULL-terminated, argv[0] included);
 * shown if kb_want says so */
static struct sys *add_sys(const kb_ctx *c, struct job *j, const char *name, const char *path,
			   char *const *argv)
{
	char label[64];
	snprintf(label, sizeof label, "%s %s", j->exp, j->metric);
	struct sys *s = &j->sys[j->nsys++];
	memset(s, 0, sizeof *s);
	s->name = name;
	s->shown = kb_want(c, label, name);
	snprintf(s->path, sizeof s->path, "%s", path);
	for (int i = 0; argv[i] && i < MAXARG - 1; i++)
		s->argv[i] = argv[i];
	return s;
}

/* `karui-run PROG ARGS` as karui and PROG ARGS as native, PROG found in
 * PATH (or a path), both given the path found here; 0, or ENOENT when
 * PROG is not there */
/* The program argv0 names (a path, or found in PATH) into prog: 0, or
 * ENOENT */
static int prog_of(const char *argv0, char *prog, size_t n)
{
	if (strchr(argv0, '/'))
		snprintf(prog, n, "%s", argv0);
	else if (kb_find_prog(argv0, prog, n))
		return ENOENT;
	return access(prog, X_OK) ? ENOENT : 0;
}

static int add_karui_native(const kb_ctx *c, struct job *j, const char *karui_run,
			    char *const *argv)
{
	char prog[PATH_MAX];
	if (prog_of(argv[0], prog, sizeof prog))
		return ENOENT;
	char *kargv[MAXARG] = {"karui-run"};
	for (int i = 0; argv[i] && i < MAXARG - 2; i++)
		kargv[i + 1] = argv[i];
	struct sys *k = add_sys(c, j, "karui", karui_run, kargv);
	snprintf(k->arg, sizeof k->arg, "%s", prog);
	k->argv[1] = k->arg;
	add_sys(c, j, "native", prog, argv);
	return 0;
}

/* The first lines of the file at path, on one line, fit for a row's
 * reason (no quotes, backslashes or control characters) */
static const char *first_lines(const char *path, char *buf, size_t cap)
{
	buf[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return buf;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = 0;
	int lines = 0;
	for (char *p = buf; *p; p++) {
		if (*p == '\n' && (++lines == 3 || !p[1])) {
			*p = 0;
			break;
		}
		if (*p == '\n' && p - buf + 3 < (long)cap) {
			memmove(p + 3, p + 1, strlen(p + 1) + 1);
			memcpy(p, " / ", 3);
			p += 2;
		} else if (*p == '"')
			*p = '\'';
		else if (*p == '\\')
			*p = '/';
		else if ((unsigned char)*p < ' ')
			*p = ' ';
	}
	buf[cap - 1] = 0;
	return buf;
}

/* One run of s, stdout to out and stderr to err: its status; wall and CPU
 * time in ms */
static int run_once(const struct job *j, const struct sys *s, int out, int err, double *wall,
		    double *cpu)
{
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (j->before)
		j->before(j);
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	if (s->preload)
		setenv("LD_PRELOAD", s->preload, 1); /* for the child (karui-bench has one thread) */
	double t0 = kb_now_ns();
	pid_t pid = kb_start(s->path, s->argv, in, out, err);
	if (s->preload)
		unsetenv("LD_PRELOAD");
	int st = pid < 0 ? -1 : kb_wait(pid, &ru);
	*wall = (kb_now_ns() - t0) / 1e6;
	*cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	if (in >= 0)
		close(in);
	return st;
}

/* s failed with status st: its reason, with its stderr's first lines */
static void failed(const struct job *j, struct sys *s, int st, const char *errpath)
{
	char lines[300];
	snprintf(s->why, sizeof s->why, "%s: %s ended with status %d: %s", j->metric, s->argv[0],
		 st, first_lines(errpath, lines, sizeof lines));
}

/* The whole of the file at path (NUL-terminated, *n bytes), or NULL */
static char *slurp(const char *path, size_t *n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len), *f = fopen(path, "r");
	char buf[65536];
	size_t got;
	while (m && f && (got = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, got, m);
	int bad = !f || ferror(f);
	if (f)
		fclose(f);
	if (!m || fclose(m) || bad) {
		free(text);
		return NULL;
	}
	*n = len;
	return text;
}

/* The untimed run of every system, its output checked against the
 * reference; a system that fails has its why. */
static void check(struct job *j)
{
	char out[MAXSYS][PATH_MAX], err[PATH_MAX];
	for (int i = 0; i < j->nsys; i++) {
		struct sys *s = &j->sys[i];
		snprintf(out[i], sizeof out[i], "%s/out-%d", j->dir, i);
		if (!s->shown && (j->want || i != j->nsys - 1))
			continue;
		snprintf(err, sizeof err, "%s/err-%d", j->dir, i);
		int o = open(out[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		double wall, cpu;
		int st = o < 0 || e < 0 ? -2 : run_once(j, s, o, e, &wall, &cpu);
		if (o >= 0)
			close(o);
		if (e >= 0)
			close(e);
		const char *why;
		if (st == -2)
			snprintf(s->why, sizeof s->why, "%s: cannot write in %s", j->metric, j->dir);
		else if (st)
			failed(j, s, st, err);
		else if (j->result && *(why = j->result(j, out[i])))
			snprintf(s->why, sizeof s->why, "%s: %s", j->metric, why);
	}
	size_t rn = 0;
	char *ref = NULL;
	const struct sys *rs = &j->sys[j->nsys - 1];
	if (j->want) {
		rn = strlen(j->want);
		ref = strdup(j->want);
	} else if (!rs->why[0]) {
		ref = slurp(out[j->nsys - 1], &rn);
	}
	for (int i = 0; i < j->nsys; i++) {
		struct sys *s = &j->sys[i];
		if (!s->shown || s->why[0] || (!j->want && s == rs))
			continue;
		size_t n = 0;
		char *got = ref ? slurp(out[i], &n) : NULL;
		if (!ref)
			snprintf(s->why, sizeof s->why, "%s: no output of %s to compare with",
				 j->metric, rs->name);
		else if (!got || n != rn || memcmp(got, ref, n)) {
			snprintf(s->why, sizeof s->why,
				 "%s: output DIFFERS from %s (%zu bytes against %zu)", j->metric,
				 j->want ? "what the script prints" : "the native run's", n, rn);
			fprintf(stderr, "karui-bench: %s: %s: %s's output DIFFERS from %s\n", j->exp,
				j->metric, s->name, j->want ? "what it should print" : "native's");
		}
		free(got);
	}
	free(ref);
}

/* reps timed runs of every system that passed the check, in turn, output
 * to /dev/null */
static void timed(struct job *j, int reps)
{
	char err[PATH_MAX];
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < j->nsys; i++) {
			struct sys *s = &j->sys[i];
			if (s->why[0] || !s->shown)
				continue;
			snprintf(err, sizeof err, "%s/err-%d", j->dir, i);
			int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			int st = run_once(j, s, null, e, &s->wall[s->nv], &s->cpu[s->nv]);
			if (e >= 0)
				close(e);
			if (st)
				failed(j, s, st, err);
			else
				s->nv++;
		}
	if (null >= 0)
		close(null);
}

/* The rows: every system's wall time, then its CPU time; a failed
 * system's reason once */
static void rows(const kb_ctx *c, const struct job *j)
{
	char metric[64];
	for (int m = 0; m < 2; m++) {
		snprintf(metric, sizeof metric, "%s%s", j->metric, m ? " cpu" : "");
		double base = 0;
		for (int i = 0; i < j->nsys; i++) {
			const struct sys *s = &j->sys[i];
			if (!s->shown)
				continue;
			if (s->why[0]) {
				if (!m)
					kb_row_none(j->exp, s->name, "failed", s->why);
				continue;
			}
			double *v = m ? (double *)s->cpu : (double *)s->wall;
			double med = kb_row_note(c, j->exp, s->name, metric, "ms", v, s->nv, base, -1,
						 i == 0 && !m ? j->note : NULL);
			if (i == 0)
				base = med;
		}
	}
}

/* Check, time, print */
static void run_job(const kb_ctx *c, struct job *j)
{
	check(j);
	timed(j, c->quick ? 3 : 5);
	rows(c, j);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A temporary directory for exp into dir, or kb_row_none says why not */
static int make_dir(const char *exp, char *dir, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, n, "%s/karui-bench-uprun-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir))
		return 0;
	kb_row_none(exp, "all", "failed", "cannot make a temporary directory");
	return -1;
}

static void remove_dir(const char *exp, const char *dir)
{
	if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "karui-bench: %s: could not remove %s\n", exp, dir);
}

/* karui-run, next to karui-bench; or kb_row_none says it is not built */
static const char *karui_tool(const kb_ctx *c, const char *exp, const char *tool, char *buf,
			      size_t n)
{
	snprintf(buf, n, "%s/%s", c->dir, tool);
	if (!access(buf, X_OK))
		return buf;
	char why[64];
	snprintf(why, sizeof why, "%s not built", tool);
	kb_row_none(exp, "karui", "skipped", why);
	return NULL;
}

/* ---------------- uproc.threads ---------------- */

/* the generated files' one source of variety: a hash of a counter */
static uint64_t next(uint64_t *s)
{
	return kb_mix64((*s)++);
}

/* Lines of 1 to 3 words taken from 4096 made-up ones of 2 to 9 letters,
 * up to `bytes`, the same on every run: text that compresses and sorts as
 * text does, in short lines (about 77,000 a MB): GNU sort splits its work
 * among threads only from 131,072 lines */
static int write_text(const char *path, long bytes)
{
	enum { WORDS = 4096 };
	static char voc[WORDS][12];
	uint64_t s = 3;
	for (int i = 0; i < WORDS; i++) {
		int len = 2 + (int)(next(&s) % 8);
		for (int k = 0; k < len; k++)
			voc[i][k] = (char)('a' + next(&s) % 26);
		voc[i][len] = 0;
	}
	FILE *f = fopen(path, "w");
	if (!f)
		return errno;
	for (long n = 0; n < bytes;) {
		int words = 1 + (int)(next(&s) % 3);
		for (int w = 0; w < words; w++)
			n += fprintf(f, "%s%s", w ? " " : "", voc[next(&s) % WORDS]);
		n += fputc('\n', f) != EOF;
	}
	return fclose(f) ? errno : 0;
}

/* exp's temporary directory with its text (--n MB, default 2) in it, and
 * the std::thread loop's path and argument: 0, or kb_row_none said why not */
static int text_and_loop(const kb_ctx *c, const char *exp, char *dir, size_t dn, char *text,
			 size_t tn, char *self, size_t sn, char steps[24])
{
	if (make_dir(exp, dir, dn))
		return -1;
	long mb = c->n ? c->n : 2;
	snprintf(text, tn, "%s/in.txt", dir);
	int e = write_text(text, mb * 1000000);
	if (e) {
		kb_row_none(exp, "all", "failed", strerror(e));
		remove_dir(exp, dir);
		return -1;
	}
	fprintf(stderr, "karui-bench: %s: %ld MB of text in %s\n", exp, mb, text);
	snprintf(self, sn, "%s/karui-bench-threads", c->dir);
	snprintf(steps, 24, "%d", THREAD_STEPS);
	return 0;
}

void kb_uproc_threads(const kb_ctx *c)
{
	char krun[PATH_MAX], dir[PATH_MAX], text[PATH_MAX + 16], self[PATH_MAX], steps[24];
	if (!karui_tool(c, THREADS, "karui-run", krun, sizeof krun) ||
	    text_and_loop(c, THREADS, dir, sizeof dir, text, sizeof text, self, sizeof self, steps))
		return;
	const struct {
		const char *metric;
		char *argv[MAXARG];
	} P[] = {
		{"xz", {"xz", "-T2", "--block-size=1MiB", "-c", text}},
		{"zstd", {"zstd", "-13", "-T2", "-B1048576", "-c", text}},
		{"pigz", {"pigz", "-p", "2", "-c", text}},
		{"sort", {"sort", "--parallel=2", "-S", "100M", text}},
		{"std::thread", {self, steps}},
	};
	for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
		struct job j = {.exp = THREADS, .metric = P[i].metric, .dir = dir,
				.note = "same output as native"};
		if (add_karui_native(c, &j, krun, P[i].argv))
			kb_row_none(THREADS, P[i].metric, "skipped",
				    i == 4 ? "karui-bench-threads not built" : "not installed");
		else
			run_job(c, &j);
	}
	remove_dir(THREADS, dir);
}

/* ---------------- pthread.compat ---------------- */

/* sysbench's output, less its figures: its lines of the number of threads
 * and of events */
static const char *sysbench_counts(const struct job *j, const char *out)
{
	(void)j;
	size_t n;
	char *text = slurp(out, &n);
	if (!text)
		return "its output cannot be read";
	FILE *f = fopen(out, "w");
	int found = 0;
	for (char *line = strtok(text, "\n"); f && line; line = strtok(NULL, "\n"))
		if (strstr(line, "Number of threads:") || strstr(line, "total number of events:")) {
			fprintf(f, "%s\n", line + strspn(line, " "));
			found++;
		}
	free(text);
	if (!f || fclose(f))
		return "its output cannot be written";
	return found == 2 ? "" : "no count of threads and events in its output";
}

void kb_pthread_compat(const kb_ctx *c)
{
	char lib[PATH_MAX + 32], dir[PATH_MAX], text[PATH_MAX + 16], self[PATH_MAX], steps[24];
	snprintf(lib, sizeof lib, "%s/../lib/libkarui-pthread.so", c->dir);
	if (access(lib, R_OK)) {
		kb_row_none(COMPAT, "karui", "skipped", "libkarui-pthread.so not built");
		return;
	}
	if (text_and_loop(c, COMPAT, dir, sizeof dir, text, sizeof text, self, sizeof self, steps))
		return;
	const struct {
		const char *metric;
		char *argv[MAXARG];
	} P[] = {
		{"xz -T4", {"xz", "-T4", "--block-size=512KiB", "-c", text}},
		{"zstd -T4", {"zstd", "-13", "-T4", "-B524288", "-c", text}},
		{"pigz -p 4", {"pigz", "-p", "4", "-c", text}},
		{"sort --parallel=4", {"sort", "--parallel=4", "-S", "100M", text}},
		{"std::thread", {self, steps}},
		{"sysbench threads",
		 {"sysbench", "threads", "--threads=4", c->quick ? "--events=1000" : "--events=4000",
		  "--time=0", "run"}},
		{"sysbench mutex",
		 {"sysbench", "mutex", "--threads=4", c->quick ? "--mutex-locks=20000" : "--mutex-locks=50000",
		  "run"}},
	};
	for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
		struct job j = {.exp = COMPAT, .metric = P[i].metric, .dir = dir,
				.note = "same output as native"};
		if (!strncmp(P[i].metric, "sysbench", 8))
			j.result = sysbench_counts;
		char prog[PATH_MAX];
		char *const *argv = P[i].argv;
		if (prog_of(argv[0], prog, sizeof prog)) {
			kb_row_none(COMPAT, P[i].metric, "skipped",
				    i == 4 ? "karui-bench-threads not built" : "not installed");
			continue;
		}
		struct sys *k = add_sys(c, &j, "karui", prog, argv);
		k->preload = lib;
		add_sys(c, &j, "native", prog, argv);
		run_job(c, &j);
	}
	remove_dir(COMPAT, dir);
}

/* ---------------- uproc.make ---------------- */

enum { MAKE_FUNCS = 20 };

static long make_files; /* the project's units */

/* Unit i of the project: MAKE_FUNCS static functions of a loop and a
 * branch each, and unit<i>, which calls them all in turn */
static int write_unit(const char *dir, long i, uint64_t *s)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/u%ld.c", dir, i);
	FILE *f = fopen(path, "w");
	if (!f)
		return errno;
	fprintf(f, "/* uproc.make's project: unit %ld */\n#include \"proj.h\"\n", i);
	for (int k = 0; k < MAKE_FUNCS; k++)
		fprintf(f, "\nstatic unsigned step%d(unsigned x)\n{\n"
			   "\tunsigned y = x * 2654435761u + %uu;\n"
			   "\tfor (int k = 0; k < %u; k++) {\n"
			   "\t\ty ^= y << 13;\n\t\ty ^= y >> 17;\n\t\ty ^= y << 5;\n"
			   "\t\ty += (unsigned)k * %uu;\n\t}\n"
			   "\tif (y %% %uu == 0)\n\t\ty = ~y;\n\telse\n\t\ty -= %uu;\n"
			   "\treturn y;\n}\n",
			k, (unsigned)(next(s) % 100000), 4 + (unsigned)(next(s) % 12),
			(unsigned)(next(s) % 1000), 3 + (unsigned)(next(s) % 7),
			(unsigned)(next(s) % 1000));
	fprintf(f, "\nunsigned unit%ld(unsigned x)\n{\n", i);
	for (int k = 0; k < MAKE_FUNCS; k++)
		fprintf(f, "\tx = step%d(x);\n", k);
	fprintf(f, "\treturn x;\n}\n");
	return fclose(f) ? errno : 0;
}

/* The project: make_files units, proj.h, main.c (prints the units'
 * checksum) and a Makefile */
static int write_project(const char *dir)
{
	uint64_t s = 7;
	int e = 0;
	for (long i = 0; i < make_files && !e; i++)
		e = write_unit(dir, i, &s);
	char path[PATH_MAX + 32];
	FILE *h, *m, *mk;
	snprintf(path, sizeof path, "%s/proj.h", dir);
	h = e ? NULL : fopen(path, "w");
	snprintf(path, sizeof path, "%s/main.c", dir);
	m = h ? fopen(path, "w") : NULL;
	snprintf(path, sizeof path, "%s/Makefile", dir);
	mk = m ? fopen(path, "w") : NULL;
	if (mk) {
		fprintf(m, "#include <stdio.h>\n#include \"proj.h\"\n\nint main(void)\n{\n"
			   "\tunsigned x = 1;\n");
		fprintf(mk, "CC = cc\nCFLAGS = -O2 -Wall\nOBJS = main.o");
		for (long i = 0; i < make_files; i++) {
			fprintf(h, "unsigned unit%ld(unsigned x);\n", i);
			fprintf(m, "\tx = unit%ld(x);\n", i);
			fprintf(mk, " u%ld.o", i);
		}
		fprintf(m, "\tprintf(\"%%08x\\n\", x);\n\treturn 0;\n}\n");
		fprintf(mk, "\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n"
			    "%%.o: %%.c proj.h\n\t$(CC) $(CFLAGS) -c $<\n");
	}
	if (!e && !mk)
		e = errno;
	if (h && fclose(h) && !e)
		e = errno;
	if (m && fclose(m) && !e)
		e = errno;
	if (mk && fclose(mk) && !e)
		e = errno;
	return e;
}

/* Before every run: what a run builds removed */
static void make_clean(const struct job *j)
{
	char path[PATH_MAX + 32];
	for (long i = -2; i < make_files; i++) {
		if (i == -2)
			snprintf(path, sizeof path, "%s/prog", j->dir);
		else if (i == -1)
			snprintf(path, sizeof path, "%s/main.o", j->dir);
		else
			snprintf(path, sizeof path, "%s/u%ld.o", j->dir, i);
		unlink(path);
	}
}

/* What is compared: what the program built prints, a checksum */
static const char *make_result(const struct job *j, const char *out)
{
	static char why[96];
	char prog[PATH_MAX + 8];
	snprintf(prog, sizeof prog, "%s/prog", j->dir);
	int o = open(out, O_WRONLY | O_TRUNC | O_CLOEXEC);
	pid_t pid = o < 0 ? -1 : kb_start(prog, (char *[]){"prog", NULL}, -1, o, -1);
	int st = pid < 0 ? -1 : kb_wait(pid, NULL);
	if (o >= 0)
		close(o);
	struct stat sb;
	if (st)
		snprintf(why, sizeof why, "the program built ended with status %d", st);
	else if (stat(out, &sb) || sb.st_size != 9)
		snprintf(why, sizeof why, "the program built printed no checksum");
	else
		why[0] = 0;
	return why;
}

void kb_uproc_make(const kb_ctx *c)
{
	char krun[PATH_MAX], dir[PATH_MAX];
	if (!karui_tool(c, MAKE, "karui-run", krun, sizeof krun) || make_dir(MAKE, dir, sizeof dir))
		return;
	make_files = c->n ? c->n : 8;
	int e = write_project(dir);
	if (e) {
		kb_row_none(MAKE, "all", "failed", strerror(e));
		remove_dir(MAKE, dir);
		return;
	}
	fprintf(stderr, "karui-bench: " MAKE ": %ld units of %d functions in %s\n", make_files,
		MAKE_FUNCS, dir);
	/* make's own make, if karui-bench runs under one, is not this one's */
	unsetenv("MAKEFLAGS");
	unsetenv("MFLAGS");
	unsetenv("MAKELEVEL");
	struct job j = {.exp = MAKE, .metric = "make -j2", .dir = dir, .before = make_clean,
			.result = make_result, .note = "same program built as native"};
	if (add_karui_native(c, &j, krun, (char *[]){"make", "-C", dir, "-j2", NULL}))
		kb_row_none(MAKE, "all", "skipped", "make not installed");
	else
		run_job(c, &j);
	remove_dir(MAKE, dir);
}

/* ---------------- uproc.script ---------------- */

#define SMALL "karui\nbench\n"

/* The script of n commands in dir, and what it prints into *want */
static int write_script(const char *dir, long n, char *script, size_t cap, char **want)
{
	char small[PATH_MAX + 16];
	snprintf(small, sizeof small, "%s/small.txt", dir);
	snprintf(script, cap, "%s/script.sh", dir);
	FILE *f = fopen(small, "w");
	if (!f || fputs(SMALL, f) == EOF || fclose(f))
		return errno ? errno : EIO;
	size_t len;
	FILE *w = open_memstream(want, &len);
	if (!w || !(f = fopen(script, "w")))
		return errno;
	fprintf(f, "# uproc.script: %ld commands, each an external program\n", n);
	for (long i = 0; i < n; i++)
		switch (i % 5) {
		case 0:
			fprintf(f, "/bin/true\n");
			break;
		case 1:
			fprintf(f, "/bin/echo line %ld\n", i);
			fprintf(w, "line %ld\n", i);
			break;
		case 2:
			fprintf(f, "/bin/echo x > /dev/null\n");
			break;
		case 3:
			fprintf(f, "cat %s\n", small);
			fputs(SMALL, w);
			break;
		default:
			fprintf(f, "expr %ld + %ld\n", i, i);
			fprintf(w, "%ld\n", 2 * i);
		}
	int e = fclose(f) ? errno : 0;
	if (fclose(w) && !e)
		e = errno;
	return e;
}

void kb_uproc_script(const kb_ctx *c)
{
	char ksh[PATH_MAX], krun[PATH_MAX], dir[PATH_MAX], script[PATH_MAX + 16], sh[2][PATH_MAX];
	if (!karui_tool(c, SCRIPT, "karui-sh", ksh, sizeof ksh) ||
	    !karui_tool(c, SCRIPT, "karui-run", krun, sizeof krun) ||
	    make_dir(SCRIPT, dir, sizeof dir))
		return;
	long n = c->n ? c->n : 1000;
	char *want = NULL, note[48];
	int e = write_script(dir, n, script, sizeof script, &want);
	if (e) {
		kb_row_none(SCRIPT, "all", "failed", strerror(e));
	} else {
		snprintf(note, sizeof note, "%ld commands", n);
		struct job j = {.exp = SCRIPT, .metric = "script", .dir = dir, .want = want,
				.note = note};
		add_sys(c, &j, "karui-sh", ksh, (char *[]){"karui-sh", script, NULL});
		/* each shell natively, and under karui-run: its forks deferred
		 * (bash forks for every command; dash vforks simple ones) */
		static const char *const SH[] = {"dash", "bash"}, *const KSH[] = {"karui-run-dash",
										  "karui-run-bash"};
		for (int i = 0; i < 2; i++)
			if (kb_find_prog(SH[i], sh[i], sizeof sh[i])) {
				kb_row_none(SCRIPT, SH[i], "skipped", "not installed");
				kb_row_none(SCRIPT, KSH[i], "skipped", "not installed");
			} else {
				add_sys(c, &j, KSH[i], krun,
					(char *[]){"karui-run", sh[i], script, NULL});
				add_sys(c, &j, SH[i], sh[i], (char *[]){(char *)SH[i], script, NULL});
			}
		run_job(c, &j);
	}
	free(want);
	remove_dir(SCRIPT, dir);
}
