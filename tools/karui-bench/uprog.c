/*
 * karui-bench-uprog — the ordinary program that karui-bench's μprocess
 * experiments (exp_uproc.c) run both as μprocesses and as processes.  It
 * is built as a plain PIE with no sanitizer, like any distribution binary,
 * so that the two runs execute the same code.
 *
 *   karui-bench-uprog write N    writes N blocks of 4096 bytes to stdout
 *   karui-bench-uprog read N     reads stdin to end of file in reads of up
 *                                to 4096 bytes, checks that it got N blocks
 *                                (else exit 1), and prints the ns from its
 *                                first byte to end of file
 *   karui-bench-uprog getppid N  makes N getppid() calls through libc and
 *                                prints ns per call
 *   karui-bench-uprog signalfd N with SIGUSR1 blocked, N times raise(SIGUSR1)
 *                                and a read of it from a signalfd (each
 *                                signal checked, else exit 1); prints ns per
 *                                raise and read
 *   karui-bench-uprog serve 1    exports seed 003 Table 5's int foo(void)
 *                                as procedure 0 (karui/uproc_export.h) and
 *                                waits for ever; outside a μprocess: exit 2
 *   karui-bench-uprog ping N     seed 003 Table 3, lmbench lat_ctx's ring of
 *   karui-bench-uprog pong N     two: ping writes a byte to stdout and reads
 *                                it back from stdin, N + 1 times; pong,
 *                                across the two pipes, reads a byte from
 *                                stdin and writes it to stdout, N + 1 times.
 *                                Every hop is a write, a switch to the other
 *                                program and its read.  ping first times N
 *                                writes and reads of a byte through a pipe
 *                                of its own (lat_ctx's overhead: the same
 *                                work with no switch), then the last N round
 *                                trips (the first waits for pong to start),
 *                                and prints "HOP OVERHEAD", ns per hop and
 *                                per write and read, on stderr (its stdout
 *                                is the ring).  A byte that comes back
 *                                changed: exit 1
 *   karui-bench-uprog threads N  the same with two threads of one program
 *                                over two pipe(2)s: the main thread pings,
 *                                a pthread pongs; "HOP OVERHEAD" on stdout
 *
 * Times come from clock_gettime(CLOCK_MONOTONIC), which the vDSO answers
 * without a system call, so they are comparable across the processes and
 * μprocesses of one machine and add no call of their own to what is timed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <karui/uproc_export.h>

enum { BLOCK = 4096 };

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int writer(long n)
{
	static char buf[BLOCK];
	memset(buf, 'k', sizeof buf);
	for (long i = 0; i < n; i++)
		for (size_t off = 0; off < BLOCK;) {
			ssize_t w = write(1, buf + off, BLOCK - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				perror("karui-bench-uprog: write");
				return 1;
			}
			off += (size_t)w;
		}
	return 0;
}

static int reader(long n)
{
	static char buf[BLOCK];
	long long total = 0;
	double t0 = 0;
	for (;;) {
		ssize_t r = read(0, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			perror("karui-bench-uprog: read");
			return 1;
		}
		if (r == 0)
			break;
		if (total == 0)
			t0 = now_ns();
		total += r;
	}
	double t1 = now_ns();
	if (total != (long long)n * BLOCK) {
		fprintf(stderr, "karui-bench-uprog: read %lld bytes, not %lld\n", total,
			(long long)n * BLOCK);
		return 1;
	}
	printf("%.0f\n", t1 - t0);
	return 0;
}

static int calls(long n)
{
	pid_t sum = 0;
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		sum += getppid();
	double t1 = now_ns();
	if (sum == 0) /* the loop's result is used: no call is left out */
		return 1;
	printf("%.2f\n", (t1 - t0) / (double)n);
	return 0;
}

static int sigfd_rounds(long n)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	int fd = sigprocmask(SIG_BLOCK, &m, NULL) ? -1 : signalfd(-1, &m, 0);
	if (fd < 0)
		return 1;
	struct signalfd_siginfo si;
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (raise(SIGUSR1) || read(fd, &si, sizeof si) != (ssize_t)sizeof si ||
		    si.ssi_signo != SIGUSR1)
			return 1;
	double t1 = now_ns();
	printf("%.2f\n", (t1 - t0) / (double)n);
	return 0;
}

/* One byte to fd, or from it; 0 or -1. */
static int put(int fd, unsigned char c)
{
	ssize_t w;
	while ((w = write(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return w == 1 ? 0 : -1;
}

static int get(int fd, unsigned char *c)
{
	ssize_t r;
	while ((r = read(fd, c, 1)) < 0 && errno == EINTR)
		;
	return r == 1 ? 0 : -1;
}

/* ns per write and read of a byte through a pipe of its own, n times; < 0
 * on an error */
static double overhead(long n)
{
	int p[2];
	unsigned char c;
	if (pipe(p))
		return -1;
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (put(p[1], (unsigned char)i) || get(p[0], &c) || c != (unsigned char)i) {
			t0 = -1;
			break;
		}
	double t1 = now_ns();
	close(p[0]);
	close(p[1]);
	return t0 < 0 ? -1 : (t1 - t0) / (double)n;
}

/* n + 1 round trips out, then in; ns per hop of the last n, < 0 on an
 * error or a byte that came back changed */
static double ping(int in, int out, long n)
{
	double t0 = 0;
	for (long i = 0; i <= n; i++) {
		unsigned char c;
		if (i == 1)
			t0 = now_ns();
		if (put(out, (unsigned char)i) || get(in, &c) || c != (unsigned char)i)
			return -1;
	}
	return (now_ns() - t0) / (2.0 * (double)n);
}

static int pong(int in, int out, long n)
{
	for (long i = 0; i <= n; i++) {
		unsigned char c;
		if (get(in, &c) || put(out, c))
			return 1;
	}
	return 0;
}

static int ring(long n)
{
	double ovh = overhead(n), hop = ovh < 0 ? -1 : ping(0, 1, n);
	if (hop < 0) {
		fprintf(stderr, "karui-bench-uprog: ping: a byte was lost or changed\n");
		return 1;
	}
	fprintf(stderr, "%.1f %.1f\n", hop, ovh);
	return 0;
}

struct pong_arg {
	int in, out;
	long n;
};

static void *pong_thread(void *arg)
{
	struct pong_arg *a = arg;
	return (void *)(long)pong(a->in, a->out, a->n);
}

static int threads(long n)
{
	int a[2], b[2];
	if (pipe(a) || pipe(b)) {
		perror("karui-bench-uprog: pipe");
		return 1;
	}
	double ovh = overhead(n), hop = -1;
	struct pong_arg pa = {a[0], b[1], n};
	pthread_t t;
	void *res = (void *)1L;
	int e = ovh < 0 ? EIO : pthread_create(&t, NULL, pong_thread, &pa);
	if (!e) {
		hop = ping(b[0], a[1], n);
		if (hop < 0)
			close(a[1]); /* pong's read sees end of file */
		pthread_join(t, &res);
	}
	if (hop < 0 || res) {
		fprintf(stderr, "karui-bench-uprog: threads: %s\n",
			e ? strerror(e) : "a byte was lost or changed");
		return 1;
	}
	printf("%.1f %.1f\n", hop, ovh);
	return 0;
}

/* seed003.table5's dummy procedure */
static int foo(void) { return 1; }
static const kr_uproc_proc table[] = {(kr_uproc_proc)(void (*)(void))foo};

static int serve(void)
{
	if (kr_uproc_export(table, 1))
		return 2;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	long n = argc == 3 ? atol(argv[2]) : 0;
	if (n <= 0) {
		fprintf(stderr, "usage: karui-bench-uprog write|read|getppid|signalfd|serve|ping|pong|threads N\n");
		return 2;
	}
	if (!strcmp(argv[1], "write"))
		return writer(n);
	if (!strcmp(argv[1], "read"))
		return reader(n);
	if (!strcmp(argv[1], "getppid"))
		return calls(n);
	if (!strcmp(argv[1], "signalfd"))
		return sigfd_rounds(n);
	if (!strcmp(argv[1], "serve"))
		return serve();
	if (!strcmp(argv[1], "ping"))
		return ring(n);
	if (!strcmp(argv[1], "pong"))
		return pong(0, 1, n);
	if (!strcmp(argv[1], "threads"))
		return threads(n);
	fprintf(stderr, "karui-bench-uprog: no mode '%s'\n", argv[1]);
	return 2;
}
