/*
 * karui's test harness: each test is a function named after the behaviour
 * it proves; KT_RUN runs one in a fresh child process (so a crash or a
 * hang fails that test alone) and the file ends with the line
 * "N passed, N failed, N skipped".  A test skips with KT_SKIP("why"), which
 * is reported as skipped, never as passed.
 */
#ifndef KARUI_KT_H
#define KARUI_KT_H

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KT_SKIP_CODE 77

#define KT_CHECK(c)                                                            \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__,    \
				__LINE__, #c);                                 \
			_exit(1);                                              \
		}                                                              \
	} while (0)

#define KT_EQ(a, b)                                                            \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_) {                                                \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", \
				__FILE__, __LINE__, #a, a_, #b, b_);           \
			_exit(1);                                              \
		}                                                              \
	} while (0)

#define KT_SKIP(why)                                                           \
	do {                                                                   \
		fprintf(stderr, "  skipped: %s\n", why);                       \
		_exit(KT_SKIP_CODE);                                           \
	} while (0)

static int kt_pass, kt_fail, kt_skip;
static char **kt_only; /* the tests named on the command line; NULL: all */

static void kt_run(const char *name, void (*fn)(void), unsigned timeout_s)
{
	char **o = kt_only;
	while (o && *o && strcmp(*o, name) != 0)
		o++;
	if (o && !*o)
		return;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(timeout_s);
		fn();
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		kt_pass++;
		printf("ok      %s\n", name);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == KT_SKIP_CODE) {
		kt_skip++;
		printf("skipped %s\n", name);
	} else {
		kt_fail++;
		if (WIFSIGNALED(st))
			printf("FAIL    %s (signal %d%s)\n", name, WTERMSIG(st),
			       WTERMSIG(st) == SIGALRM ? ": timed out" : "");
		else
			printf("FAIL    %s (exit %d)\n", name, WEXITSTATUS(st));
	}
}

#define KT_RUN(fn) kt_run(#fn, fn, 120)
#define KT_RUN_T(fn, secs) kt_run(#fn, fn, secs)

static int kt_finish(void)
{
	printf("%d passed, %d failed, %d skipped\n", kt_pass, kt_fail, kt_skip);
	/* all skipped: ctest reports the executable as skipped, not passed */
	return kt_fail ? 1 : kt_pass == 0 && kt_skip ? KT_SKIP_CODE : 0;
}

/* `test_x [name...]`: run only the named tests */
static void kt_args(int argc, char **argv)
{
	if (argc > 1)
		kt_only = argv + 1;
}

#endif
