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
 *   karui-bench-uprog serve 1    exports seed 003 Table 5's int foo(void)
 *                                as procedure 0 (karui/uproc_export.h) and
 *                                waits for ever; outside a μprocess: exit 2
 *
 * Times come from clock_gettime(CLOCK_MONOTONIC), which the vDSO answers
 * without a system call, so they are comparable across the processes and
 * μprocesses of one machine and add no call of their own to what is timed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
		fprintf(stderr, "usage: karui-bench-uprog write|read|getppid|serve N\n");
		return 2;
	}
	if (!strcmp(argv[1], "write"))
		return writer(n);
	if (!strcmp(argv[1], "read"))
		return reader(n);
	if (!strcmp(argv[1], "getppid"))
		return calls(n);
	if (!strcmp(argv[1], "serve"))
		return serve();
	fprintf(stderr, "karui-bench-uprog: no mode '%s'\n", argv[1]);
	return 2;
}
