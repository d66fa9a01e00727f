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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KT_SKIP_CODE 77

/* ThreadSanitizer runs karui's paths many times slower, and each
 * microprocess costs it a fiber to make and destroy: the long stress
 * tests make fewer rounds under it (each round runs the same paths; the
 * other builds make them all). */
#if defined(__SANITIZE_THREAD__)
#define KT_TSAN 1
#else
#define KT_TSAN 0
#endif

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

/* ---------------- waiting for what a test needs to have happened ----------------
 *
 * The machine the tests run on is shared and noisy: a thread may wait tens
 * of milliseconds for a processor, and ThreadSanitizer slows everything
 * down.  So a test never sleeps a fixed time for something to happen: it
 * waits until that is observable (a counter, a VP's status, an object's
 * state), and fails loudly if it does not come within KT_WAIT_S seconds,
 * well before the test's own alarm.  Nor does it bound time or CPU time:
 * an idle thread is seen asleep in the kernel instead (kt_threads_idle). */

#define KT_WAIT_S 60

static inline uint64_t kt_mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Look at c until it holds, doing `step` between looks (a yield, a short
 * sleep: whatever lets the awaited thing happen). */
#define KT_WAIT(c, step)                                                       \
	do {                                                                   \
		uint64_t kt_end_ = kt_mono_ns() + KT_WAIT_S * 1000000000ull;   \
		while (!(c)) {                                                 \
			if (kt_mono_ns() > kt_end_) {                          \
				fprintf(stderr, "  %s:%d: not so after %d s: %s\n", \
					__FILE__, __LINE__, KT_WAIT_S, #c);    \
				_exit(1);                                      \
			}                                                      \
			step;                                                  \
		}                                                              \
	} while (0)

static inline void kt_nap_us(unsigned us)
{
	struct timespec t = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
	nanosleep(&t, NULL);
}

/* The program `name` next to this one (build/bin), in a static buffer of
 * the caller's (cap bytes). */
static inline const char *kt_beside_me(char *buf, size_t cap, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
	KT_CHECK(n > 0 && strrchr(buf, '/'));
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	KT_CHECK((size_t)(slash + 1 - buf) + strlen(name) < cap);
	strcpy(slash + 1, name);
	return buf;
}

static inline pid_t kt_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* A thread of this process, by kernel id: its state letter (stat), and
 * the CPU time it has used in ms (schedstat); 0 and -1 if unreadable. */
static inline char kt_thread_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the name may hold anything */
	return p && p[1] == ' ' ? p[2] : 0;
}

static inline double kt_thread_cpu_ms(pid_t tid)
{
	char path[64];
	unsigned long long ns;
	snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int ok = fscanf(f, "%llu", &ns) == 1;
	fclose(f);
	return ok ? ns / 1e6 : -1;
}

/* CPU time of process pid (0: this one) so far, in clock ticks (utime +
 * stime); -1 if it cannot be read. */
static inline long kt_proc_ticks(pid_t pid)
{
	char path[40], buf[1024];
	if (pid)
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof path, "/proc/self/stat");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 14; field++)
		p = strchr(p + 1, ' ');
	long ut, st;
	return p && sscanf(p, " %ld %ld", &ut, &st) == 2 ? ut + st : -1;
}

/* The n threads stay asleep in the kernel for `ms` milliseconds of wall
 * time: each reads 'S' (or 'D') at 3 looks in 4 or more, and uses less
 * CPU than a tenth of the time that passed.  A thread that spins reads
 * 'R' at every look, whether it has a processor or waits for one, so no
 * load can make it pass; a sleeping one uses next to no CPU, so no load
 * can make it fail (the looks that may miss it allow for a brief wakeup,
 * a timer's). */
enum { KT_LOOKS = 30, KT_THREADS_MAX = 16 };
static inline int kt_threads_idle(const pid_t *tid, unsigned n, unsigned ms)
{
	double c0[KT_THREADS_MAX];
	unsigned asleep[KT_THREADS_MAX] = {0};
	KT_CHECK(n <= KT_THREADS_MAX);
	for (unsigned i = 0; i < n; i++)
		if ((c0[i] = kt_thread_cpu_ms(tid[i])) < 0)
			KT_SKIP("no /proc/self/task/TID/schedstat to read a thread's CPU time");
	uint64_t t0 = kt_mono_ns();
	for (unsigned k = 0; k < KT_LOOKS; k++) {
		kt_nap_us(ms * 1000 / KT_LOOKS);
		for (unsigned i = 0; i < n; i++) {
			char st = kt_thread_state(tid[i]);
			asleep[i] += st == 'S' || st == 'D';
		}
	}
	double wall = (kt_mono_ns() - t0) / 1e6;
	int ok = 1;
	for (unsigned i = 0; i < n; i++) {
		double cpu = kt_thread_cpu_ms(tid[i]) - c0[i];
		fprintf(stderr, "  thread %d: asleep at %u of %d looks, %.2f ms of CPU in %.0f ms\n",
			(int)tid[i], asleep[i], KT_LOOKS, cpu, wall);
		ok &= asleep[i] * 4 >= KT_LOOKS * 3 && cpu < wall / 10;
	}
	return ok;
}

#ifdef KARUI_CORE_H
#include <pthread.h>

/* The handles and kernel thread ids of the n VPs of a running karui: n
 * microprocesses hold their VPs with no scheduling point until all n run,
 * so each is on a VP of its own. */
struct kt_vpth {
	unsigned n;
	uint32_t arrived;
	kr_vp *vp[KT_THREADS_MAX];
	pid_t tid[KT_THREADS_MAX];
};

static inline void *kt_vpth_hold(void *a)
{
	struct kt_vpth *v = a;
	unsigned i = __atomic_fetch_add(&v->arrived, 1, __ATOMIC_ACQ_REL);
	v->vp[i] = kr_vp_self();
	v->tid[i] = kt_gettid();
	KT_WAIT(__atomic_load_n(&v->arrived, __ATOMIC_ACQUIRE) == v->n, kr_cpu_relax());
	return NULL;
}

static inline void kt_vp_threads(struct kt_vpth *v, unsigned n)
{
	kr_mp *m[KT_THREADS_MAX];
	KT_CHECK(n <= KT_THREADS_MAX);
	*v = (struct kt_vpth){.n = n};
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, kt_vpth_hold, v), 0);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
}

static inline int kt_vps_sleep(const struct kt_vpth *v)
{
	for (unsigned i = 0; i < v->n; i++)
		if (kr_vp_status(v->vp[i]) != KR_VP_SLEEPING)
			return 0;
	return 1;
}

/* kt_vps_idle: the calling microprocess waits with a far deadline while
 * a thread that is no VP waits until `blocked()` says the test's
 * microprocesses are all blocked and every VP reads SLEEPING, looks at
 * the VPs' threads for `ms` milliseconds (kt_threads_idle), and unparks
 * it.  1: every VP stayed asleep. */
struct kt_idle {
	struct kt_vpth v;
	int (*blocked)(void);
	unsigned ms;
	kr_mp *waiter;
	int ok;
	uint32_t done;
};

static inline void *kt_idle_watch(void *a)
{
	struct kt_idle *w = a;
	KT_WAIT(w->blocked() && kt_vps_sleep(&w->v), kt_nap_us(1000));
	w->ok = kt_threads_idle(w->v.tid, w->v.n, w->ms);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_unpark(w->waiter), 0);
	return NULL;
}

static inline int kt_vps_idle(unsigned nvps, int (*blocked)(void), unsigned ms)
{
	static struct kt_idle w;
	w = (struct kt_idle){.blocked = blocked, .ms = ms, .waiter = kr_mp_self()};
	kt_vp_threads(&w.v, nvps);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, kt_idle_watch, &w), 0);
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
		kr_mp_park_until(kr_now() + 1000ull * 1000000000u); /* a timer, far away */
	KT_EQ(pthread_join(t, NULL), 0);
	return w.ok;
}
#endif

#endif
