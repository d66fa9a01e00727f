/*
 * karui-bench's seed003.cgi: CGI programs served over HTTP (seed 003 §7.2),
 * karui's μprocesses against fork + exec, in the same run:
 *
 *   karui      examples/cgi_httpd --vps 2: each request runs the program
 *              as a μprocess, from the image an earlier identical request
 *              left (kr_uproc_keep)
 *   lighttpd   Debian's lighttpd with mod_cgi (single-threaded; it forks
 *              and execs the program for every request), the same
 *              programs through a cgi-bin that links to karui's
 *
 * The programs are examples/cgi's hello (C) and hello.pl (Perl), built
 * into cgi-bin beside karui-bench.  Before anything is timed, one GET and
 * one POST per program go to both servers, and their status lines,
 * content types and bodies must be the same (else the rows fail).  Each
 * server gets a 1 s warm-up per program; then rounds of
 * `wrk -t1 -cN -dD` (N = --n, default 16 connections; D = 2 s with
 * --quick, else 5 s; 3 rounds or 5) go to each server and program in
 * turn, so that drift of this shared machine touches all alike.  Figures
 * per (server, program): wrk's requests per second, its mean latency,
 * and the CPU the server used per request, its reaped children's
 * included (lighttpd's CGI processes; /proc/PID/stat fields 14 to 17).
 * lighttpd is skipped when it is not installed (scripts/deps.sh --demo
 * installs it), karui where μprocesses cannot run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exp.h"

#define EXP "seed003.cgi"

struct srv {
	const char *name;
	pid_t pid;
	unsigned port;
	int up;
};

static const char *const PROGS[] = {"hello", "hello.pl"};
static const char *const PROG_NAMES[] = {"hello.c", "hello.pl"};
enum { NP = 2, REPS_MAX = 8 };

static const char *lighttpd_path(void)
{
	static const char *const where[] = {"/usr/sbin/lighttpd", "/usr/bin/lighttpd",
					    "/usr/local/sbin/lighttpd"};
	for (size_t i = 0; i < sizeof where / sizeof *where; i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static unsigned free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof a;
	unsigned port = 0;
	if (s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof a) &&
	    !getsockname(s, (struct sockaddr *)&a, &l))
		port = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

/* One HTTP/1.0 request; the whole answer into buf (NUL-terminated), its
 * length, or -1. */
static long fetch(unsigned port, const char *raw, char *buf, size_t cap)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {10, 0};
	long len = -1;
	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (!connect(s, (struct sockaddr *)&a, sizeof a) &&
	    write(s, raw, strlen(raw)) == (ssize_t)strlen(raw)) {
		len = 0;
		ssize_t n;
		while ((size_t)len < cap - 1 && (n = read(s, buf + len, cap - 1 - (size_t)len)) > 0)
			len += n;
		buf[len] = 0;
	}
	close(s);
	return len;
}

static int connectable(unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
	if (s >= 0)
		close(s);
	return ok;
}

/* What must be the same in two answers: the status line's code, the
 * Content-Type line and the body. */
static int same_answer(const char *a, const char *b)
{
	const char *ab = strstr(a, "\r\n\r\n"), *bb = strstr(b, "\r\n\r\n");
	if (!ab || !bb || strncmp(a + 8, b + 8, 4) || strcmp(ab, bb))
		return 0;
	const char *at = strcasestr(a, "\r\nContent-Type:"), *bt = strcasestr(b, "\r\nContent-Type:");
	if (!at || !bt || at > ab || bt > bb)
		return 0;
	size_t al = strcspn(at + 2, "\r"), bl = strcspn(bt + 2, "\r");
	return al == bl && !strncasecmp(at, bt, al + 2);
}

/* Start karui's server; its first line says where it listens, its second
 * whether programs run as μprocesses.  0, ENOENT, ENOTSUP or EIO. */
static int start_karui(struct srv *s, const char *dir)
{
	char exe[PATH_MAX], cgi[PATH_MAX];
	snprintf(exe, sizeof exe, "%s/cgi_httpd", dir);
	snprintf(cgi, sizeof cgi, "%s/cgi-bin", dir);
	if (access(exe, X_OK) != 0 || access(cgi, X_OK) != 0)
		return ENOENT;
	char *argv[] = {exe, "--cgi-dir", cgi, "--vps", "2", "--quiet", NULL};
	pid_t pid;
	FILE *f = kb_server_start(exe, argv, NULL, &pid);
	char l1[256] = "", l2[512] = "";
	int ok = pid > 0 && f && fgets(l1, sizeof l1, f) && fgets(l2, sizeof l2, f);
	if (f)
		fclose(f);
	char *colon = strrchr(l1, ':');
	s->pid = pid;
	s->port = colon ? (unsigned)atoi(colon + 1) : 0;
	if (!ok || !s->port)
		return EIO;
	return strstr(l2, "no μprocesses here") ? ENOTSUP : 0;
}

static int start_lighttpd(struct srv *s, const char *lt, const char *tmp, const char *dir)
{
	char root[PATH_MAX], link[PATH_MAX + 16], cgi[PATH_MAX + 16], conf[PATH_MAX + 16];
	snprintf(root, sizeof root, "%s/root", tmp);
	snprintf(link, sizeof link, "%s/cgi-bin", root);
	snprintf(cgi, sizeof cgi, "%s/cgi-bin", dir);
	snprintf(conf, sizeof conf, "%s/lighttpd.conf", tmp);
	s->port = free_port();
	FILE *f = mkdir(root, 0755) == 0 && symlink(cgi, link) == 0 ? fopen(conf, "w") : NULL;
	if (!f || !s->port) {
		if (f)
			fclose(f);
		return EIO;
	}
	fprintf(f, "server.document-root = \"%s\"\nserver.port = %u\nserver.bind = \"127.0.0.1\"\n"
		   "server.modules = (\"mod_cgi\")\nserver.errorlog = \"%s/error.log\"\n"
		   "server.max-connections = 4096\n"
		   "$HTTP[\"url\"] =~ \"^/cgi-bin/\" { cgi.assign = (\"\" => \"\") }\n",
		root, s->port, tmp);
	fclose(f);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		dup2(null, 2);
		execl(lt, lt, "-D", "-f", conf, (char *)NULL);
		_exit(127);
	}
	s->pid = pid;
	for (int i = 0; pid > 0 && i < 200; i++) {
		if (connectable(s->port))
			return 0;
		struct timespec ts = {0, 25000000};
		nanosleep(&ts, NULL);
	}
	return EIO;
}

static void stop(struct srv *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (int i = 0; i < 100 && waitpid(s->pid, NULL, WNOHANG) == 0; i++) {
			struct timespec ts = {0, 20000000};
			nanosleep(&ts, NULL);
		}
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

void kb_seed003_cgi(const kb_ctx *c)
{
	if (system("command -v wrk >/dev/null 2>&1") != 0) {
		kb_row_none(EXP, "all", "skipped", "wrk not installed");
		return;
	}
	struct srv sv[2] = {{.name = "karui"}, {.name = "lighttpd"}};
	const char *lt = lighttpd_path();
	char tmp[] = "/tmp/karui-bench-cgi-XXXXXX";
	if (!mkdtemp(tmp)) {
		kb_row_none(EXP, "all", "failed", "no temporary directory");
		return;
	}
	int err = start_karui(&sv[0], c->dir);
	if (err == ENOENT)
		kb_row_none(EXP, "karui", "skipped", "cgi_httpd or its cgi-bin not built");
	else if (err == ENOTSUP)
		kb_row_none(EXP, "karui", "skipped",
			    "no μprocesses here: kr_uproc_spawn returns ENOTSUP");
	else if (err)
		kb_row_none(EXP, "karui", "failed", "cgi_httpd did not start");
	sv[0].up = !err;
	if (!lt)
		kb_row_none(EXP, "lighttpd", "skipped",
			    "lighttpd not installed (scripts/deps.sh --demo installs it)");
	else if (c->only && strcmp(c->only, "lighttpd"))
		;
	else if (kb_want(c, EXP, "lighttpd") && start_lighttpd(&sv[1], lt, tmp, c->dir))
		kb_row_none(EXP, "lighttpd", "failed", "lighttpd did not start");
	else
		sv[1].up = 1;
	/* the same answers from both, before anything is timed */
	if (sv[0].up && sv[1].up) {
		static char a[65536], b[65536];
		for (int i = 0; i < NP && sv[0].up; i++)
			for (int post = 0; post < 2; post++) {
				char raw[512];
				snprintf(raw, sizeof raw,
					 post ? "POST /cgi-bin/%s?k=v HTTP/1.0\r\nHost: 127.0.0.1\r\n"
						"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
					      : "GET /cgi-bin/%s?k=v HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
					 PROGS[i]);
				if (fetch(sv[0].port, raw, a, sizeof a) <= 0 ||
				    fetch(sv[1].port, raw, b, sizeof b) <= 0 || !same_answer(a, b)) {
					kb_row_none(EXP, "all", "failed", "karui and lighttpd answer "
						    "differently");
					sv[0].up = sv[1].up = 0;
					break;
				}
			}
	}
	int reps = c->quick ? 3 : 5, secs = c->quick ? 2 : 5;
	long conns = c->n ? c->n : 16;
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < NP && sv[s].up; i++) {
			double lat;
			long n;
			char path[128];
			snprintf(path, sizeof path, "cgi-bin/%s", PROGS[i]);
			fprintf(stderr, "karui-bench: %s / %s %s warm-up ...\n", EXP, sv[s].name,
				PROG_NAMES[i]);
			kb_wrk(sv[s].port, path, conns, 1, &lat, &n);
		}
	double rps[2][NP][REPS_MAX], lat[2][NP][REPS_MAX], cpu[2][NP][REPS_MAX];
	int got[2][NP] = {{0}}, gotc[2][NP] = {{0}};
	double tick_us = 1e6 / (double)sysconf(_SC_CLK_TCK);
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < NP; i++)
			for (int s = 0; s < 2; s++) {
				if (!sv[s].up)
					continue;
				fprintf(stderr, "karui-bench: %s / %s %s round %d of %d ...\n", EXP,
					sv[s].name, PROG_NAMES[i], r + 1, reps);
				long n;
				double l;
				char path[128];
				snprintf(path, sizeof path, "cgi-bin/%s", PROGS[i]);
				long long t0 = kb_cpu_ticks(sv[s].pid, 1);
				double x = kb_wrk(sv[s].port, path, conns, secs, &l, &n);
				long long t1 = kb_cpu_ticks(sv[s].pid, 1);
				if (x <= 0 || l < 0)
					continue;
				rps[s][i][got[s][i]] = x;
				lat[s][i][got[s][i]++] = l;
				if (n > 0 && t0 >= 0 && t1 >= t0)
					cpu[s][i][gotc[s][i]++] = (double)(t1 - t0) * tick_us / (double)n;
			}
	for (int s = 0; s < 2; s++)
		stop(&sv[s]);
	char cmd[sizeof tmp + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "karui-bench: %s: could not remove %s\n", EXP, tmp);
	double k[NP][3] = {{0}};
	char note[64];
	snprintf(note, sizeof note, "wrk -t1 -c%ld", conns);
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < NP; i++) {
			if (!sv[s].up)
				continue;
			if (got[s][i] < reps) {
				kb_row_none(EXP, sv[s].name, "failed", "wrk reported errors");
				continue;
			}
			char m[64];
			snprintf(m, sizeof m, "%s requests", PROG_NAMES[i]);
			double v = kb_row_note(c, EXP, sv[s].name, m, "req/s", rps[s][i], reps,
					       s ? k[i][0] : 0, -1, note);
			if (!s)
				k[i][0] = v;
			snprintf(m, sizeof m, "%s latency", PROG_NAMES[i]);
			v = kb_row(c, EXP, sv[s].name, m, "ms", lat[s][i], reps, s ? k[i][1] : 0, -1);
			if (!s)
				k[i][1] = v;
			if (gotc[s][i] == reps) {
				snprintf(m, sizeof m, "%s CPU per request", PROG_NAMES[i]);
				v = kb_row(c, EXP, sv[s].name, m, "us/req", cpu[s][i], reps,
					   s ? k[i][2] : 0, -1);
				if (!s)
					k[i][2] = v;
			}
		}
}
