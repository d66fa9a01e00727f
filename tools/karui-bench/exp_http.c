/*
 * karui-bench's `http` experiment: real HTTP servers on loopback, driven
 * by a real client (wrk, Debian's package), in the same run:
 *
 *   karui         examples/httpd: a microprocess per connection, 2 VPs,
 *                 karui's I/O on io_uring (where the kernel allows)
 *   karui-carea   the same with --carea: karui with the C-area's allocator
 *                 (karui/carea.h), which finds its VP count itself (one per
 *                 processor it may use: x) and runs as many as it is
 *                 granted; alone in a segment of its own,
 *                 KARUI_CAREA_SEGMENT=/karui-carea-bench-<pid>-http,
 *                 removed when the server stops
 *   karui-epoll   the same binary with KARUI_IO=epoll
 *   go            bench/peers/go/httpd.go: a goroutine per connection,
 *                 GOMAXPROCS=2
 *   pthread       bench/peers/peer_httpd.c: a thread per connection
 *   epoll         bench/peers/peer_httpd.c: the hand-written event loop,
 *                 2 threads, each with its own epoll set and listening
 *                 socket
 *
 * and karui (1 VP), go (GOMAXPROCS=1) and the event loop on one thread.
 * Each row's x is the number of threads the server runs its connections on
 * (VPs, GOMAXPROCS, loop threads; pthread's may use every core: 2), and a
 * peer's ratio is to karui's row of the same x.  The one-thread rows are
 * there because wrk runs on the same cores: on a host of 2 cores, a server
 * on one thread leaves wrk the other, and may serve more than on two.
 *
 * All answer "GET /" with "hello" through the same request handling
 * (examples/http_min.h; the Go peer mirrors it).  Each server is started
 * once and warmed up with a 1 s run; then rounds of `wrk -t1 -cN -dD`
 * (N = --n, default 100 connections; D = 2 s with --quick, else 5 s) go
 * to each server in turn, so that drift on this shared machine touches all
 * of them alike.  The figures: wrk's requests per second (higher is
 * better: a peer/karui ratio below 1 means karui served more), and the
 * server's CPU time per request over the same rounds, from
 * /proc/PID/stat (user and system, all its threads; lower is better).
 * Where wrk's own core is the limit, the second tells the servers apart
 * when the first cannot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exp.h"

struct server {
	const char *name;
	const char *exe;        /* in karui-bench's directory */
	const char *arg1, *arg2, *arg3;
	const char *env;        /* NAME=VALUE for the child, or NULL */
	int x;                  /* threads it serves on */
	pid_t pid;
	unsigned port;
};

FILE *kb_server_start(const char *path, char *const argv[], const char *env, pid_t *pid)
{
	int p[2];
	if (pipe(p) != 0)
		return NULL;
	*pid = fork();
	if (*pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (env)
			putenv((char *)env);
		execv(path, argv);
		_exit(127);
	}
	close(p[1]);
	FILE *f = *pid > 0 ? fdopen(p[0], "r") : NULL;
	if (!f)
		close(p[0]);
	return f;
}

/* Start a server; its first line says where it listens. */
static int start(struct server *s, const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, s->exe);
	if (access(path, X_OK) != 0)
		return ENOENT;
	char *argv[] = {path, (char *)s->arg1, (char *)s->arg2, (char *)s->arg3, NULL};
	pid_t pid;
	FILE *f = kb_server_start(path, argv, s->env, &pid);
	char line[256] = "";
	if (pid < 0 || !f || !fgets(line, sizeof line, f)) {
		if (f)
			fclose(f);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return EIO;
	}
	fclose(f); /* the server's later lines go nowhere */
	char *colon = strrchr(line, ':');
	s->port = colon ? (unsigned)atoi(colon + 1) : 0;
	s->pid = pid;
	return s->port ? 0 : EIO;
}

static void stop(struct server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

long long kb_cpu_ticks(pid_t pid, int children)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after the command's ")": state is field 3, utime and stime 14 and
	 * 15, the reaped children's cutime and cstime 16 and 17 */
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	long long cut = 0, cst = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
			 &ut, &st, &cut, &cst) != 4)
		return -1;
	return (long long)(ut + st) + (children ? cut + cst : 0);
}

double kb_wrk(unsigned port, const char *path, long conns, int secs, double *lat, long *n)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "wrk -t1 -c%ld -d%ds http://127.0.0.1:%u/%s 2>&1", conns, secs,
		 port, path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[256], unit[16];
	double rps = -1, v;
	int errors = 0;
	*lat = -1;
	*n = 0;
	while (fgets(line, sizeof line, p)) {
		long k;
		if (!strncmp(line, "Requests/sec:", 13))
			rps = strtod(line + 13, NULL);
		else if (sscanf(line, " %ld requests in", &k) == 1)
			*n = k;
		else if (sscanf(line, " Latency %lf%15s", &v, unit) == 2)
			*lat = !strcmp(unit, "us") ? v / 1000 : !strcmp(unit, "s") ? v * 1000
				: !strcmp(unit, "m") ? v * 60000 : v;
		if (strstr(line, "Non-2xx") || strstr(line, "Socket errors"))
			errors = 1;
	}
	pclose(p);
	return errors ? -1 : rps;
}

/* The processors this process may use, at most XMAX (karui-carea's x). */
enum { XMAX = 64 };
static int processors(void)
{
	cpu_set_t set;
	int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
	return n < 1 ? 1 : n > XMAX ? XMAX : n;
}

void kb_run_http(const kb_http_opts *o)
{
	static char segment[80];
	snprintf(segment, sizeof segment, "KARUI_CAREA_SEGMENT=/karui-carea-bench-%d-http",
		 (int)getpid());
	/* karui's rows first: each peer's ratio is to karui's row of its x */
	struct server sv[] = {
		{"karui", "httpd", "--vps", "2", NULL, NULL, 2},
		{"karui", "httpd", "--vps", "1", NULL, NULL, 1},
		{"karui-carea", "httpd", "--carea", NULL, NULL, segment, processors()},
		{"karui-epoll", "httpd", "--vps", "2", NULL, "KARUI_IO=epoll", 2},
		{"go", "karui-bench-go", "httpd", NULL, NULL, "GOMAXPROCS=2", 2},
		{"go", "karui-bench-go", "httpd", NULL, NULL, "GOMAXPROCS=1", 1},
		{"pthread", "karui-bench", "serve-pthread", NULL, NULL, NULL, 2},
		{"epoll", "karui-bench", "serve-epoll", "2", NULL, NULL, 2},
		{"epoll", "karui-bench", "serve-epoll", "1", NULL, NULL, 1},
	};
	enum { NS = sizeof sv / sizeof sv[0], REPS_MAX = 8 };
	if (system("command -v wrk >/dev/null 2>&1") != 0) {
		o->none("http", "all", "skipped", "wrk not installed");
		return;
	}
	int reps = o->quick ? 3 : 5, secs = o->quick ? 2 : 5;
	long conns = o->conns;
	int up[NS] = {0};
	for (int i = 0; i < NS; i++) {
		if (o->only && strcmp(o->only, sv[i].name) && strcmp(sv[i].name, "karui"))
			continue;
		int err = start(&sv[i], o->dir);
		if (err) {
			o->none("http", sv[i].name, err == ENOENT ? "skipped" : "failed",
				err == ENOENT ? "server not built" : "server did not start");
			continue;
		}
		fprintf(stderr, "karui-bench: http / %s (x = %d) warm-up ...\n", sv[i].name,
			sv[i].x);
		long n;
		double lat;
		kb_wrk(sv[i].port, "", conns, 1, &lat, &n);
		up[i] = 1;
	}
	double v[NS][REPS_MAX], cpu[NS][REPS_MAX];
	int got[NS] = {0}, gotc[NS] = {0};
	double tick_us = 1e6 / (double)sysconf(_SC_CLK_TCK);
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < NS; i++) {
			if (!up[i])
				continue;
			fprintf(stderr, "karui-bench: http / %s (x = %d) round %d of %d ...\n",
				sv[i].name, sv[i].x, r + 1, reps);
			long n;
			double lat;
			long long t0 = kb_cpu_ticks(sv[i].pid, 0);
			double x = kb_wrk(sv[i].port, "", conns, secs, &lat, &n);
			long long t1 = kb_cpu_ticks(sv[i].pid, 0);
			if (x > 0)
				v[i][got[i]++] = x;
			if (x > 0 && n > 0 && t0 >= 0 && t1 >= t0)
				cpu[i][gotc[i]++] = (double)(t1 - t0) * tick_us / (double)n;
		}
	double karui[XMAX + 1] = {0}, karui_cpu[XMAX + 1] = {0}; /* by x */
	for (int i = 0; i < NS; i++) {
		if (!up[i])
			continue;
		stop(&sv[i]);
		if (got[i] < reps) {
			o->none("http", sv[i].name, "failed", "wrk reported errors");
			continue;
		}
		o->emit("http", sv[i].name, "requests", "req/s", v[i], got[i], sv[i].x,
			&karui[sv[i].x], conns);
		if (gotc[i] == reps)
			o->emit("http", sv[i].name, "CPU per request", "us/req", cpu[i], gotc[i],
				sv[i].x, &karui_cpu[sv[i].x], conns);
	}
	shm_unlink(strchr(segment, '=') + 1); /* karui-carea's, stopped or not started */
}
