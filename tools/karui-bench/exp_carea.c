/*
 * karui-bench — carea.stop: how long a microprocess that the C-area stops
 * in the middle of its code waits to run again, against how long a kernel
 * thread that another program preempts waits.
 *
 * P, a program with two workers that compute in steps of about 2 us, and
 * a "competitor" that comes and goes: a program with one thread that
 * computes for 20 ms and ends, again and again (--n: how many times).
 *
 *   karui-carea  P is karui with the C-area and 2 VPs, 4 microprocesses
 *                that yield between steps; the competitor a C-area
 *                participant too.  Each time it comes, P's grant falls
 *                from 2 to 1 and one of P's VPs is stopped at once; the
 *                microprocess it ran is recovered by P's other VP.  The
 *                figure is the library's own (kr_carea_stats_get): from
 *                the signal that stopped the microprocess to the moment it
 *                runs again, median and 90th percentile.
 *   pthread      P is two threads doing the same steps (with sched_yield);
 *                the kernel shares the processors among P's threads and
 *                the competitor's.  The figure is every gap above 20 us
 *                in a thread's own clock (time it was off its processor
 *                while it could run), median and 90th percentile.
 *
 * The seed's claim (§3.1, Fig. 4) is that the C-area makes a preempted
 * thread's work go on at user level without waiting for the kernel to
 * give its kernel thread a processor back; the target is a median under
 * 50 us.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "karui.h"
#include "exp.h"

#define XS "carea.stop"
#define STEP_SPIN 2000
#define GAP_NS 20000ull
#define GAPS_MAX 4096

struct shared {
	uint32_t stop, ready;
	kr_carea_stats st;
	uint32_t ngaps;
	uint64_t gaps[GAPS_MAX];
};

static struct shared *sh;
static volatile uint64_t sink;

static void step(void)
{
	uint64_t x = 0;
	for (int i = 0; i < STEP_SPIN; i++)
		x += (uint64_t)i * i;
	sink = x;
}

static void *karui_worker(void *a)
{
	(void)a;
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		step();
		kr_mp_yield();
	}
	return NULL;
}

static void gap_seen(uint64_t g)
{
	unsigned i = __atomic_fetch_add(&sh->ngaps, 1, __ATOMIC_RELAXED);
	if (i < GAPS_MAX)
		sh->gaps[i] = g;
}

static void *thread_worker(void *a)
{
	(void)a;
	uint64_t last = kr_now();
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		step();
		sched_yield();
		uint64_t t = kr_now();
		if (t - last > GAP_NS)
			gap_seen(t - last);
		last = t;
	}
	return NULL;
}

static void carea_segment(const char *seg)
{
	kr_carea_configure(&(kr_carea_config){.segment = seg});
}

/* P: karui with the C-area, or threads. */
static void program(int carea, const char *seg)
{
	if (carea) {
		carea_segment(seg);
		kr_config cfg = {.vps = 2, .alloc = &kr_carea};
		if (kr_init(&cfg))
			_exit(2);
		kr_mp *m[4];
		for (int i = 0; i < 4; i++)
			kr_mp_create(&m[i], NULL, karui_worker, NULL);
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 4; i++)
			kr_mp_join(m[i], NULL);
		kr_carea_stats_get(&sh->st);
		_exit(kr_fini() ? 3 : 0);
	}
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thread_worker, NULL);
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	_exit(0);
}

static void *spin_20ms(void *a)
{
	(void)a;
	uint64_t end = kr_now() + 20000000ull;
	while (kr_now() < end)
		step();
	return NULL;
}

/* The competitor: one thread (one VP, in the C-area) computing 20 ms. */
static void competitor(int carea, const char *seg)
{
	if (carea) {
		carea_segment(seg);
		kr_config cfg = {.vps = 1, .alloc = &kr_carea};
		if (kr_init(&cfg))
			_exit(2);
		kr_mp *m;
		kr_mp_create(&m, NULL, spin_20ms, NULL);
		kr_mp_join(m, NULL);
		_exit(kr_fini() ? 3 : 0);
	}
	spin_20ms(NULL);
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int run(int carea, int rounds, double *med, double *p90, double *count)
{
	char seg[96];
	snprintf(seg, sizeof seg, "/karui-carea-bench-%d-stop", (int)getpid());
	shm_unlink(seg);
	memset(sh, 0, sizeof *sh);
	fflush(NULL);
	pid_t p = fork();
	if (p == 0)
		program(carea, seg);
	while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(20000);
	for (int r = 0; r < rounds; r++) {
		pid_t q = fork();
		if (q == 0)
			competitor(carea, seg);
		waitpid(q, NULL, 0);
		usleep(5000);
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	int st;
	waitpid(p, &st, 0);
	shm_unlink(seg);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	if (carea) {
		*med = sh->st.stopped_ns_median / 1e3;
		*p90 = sh->st.stopped_ns_p90 / 1e3;
		*count = sh->st.stops_timed;
		return 0;
	}
	unsigned n = sh->ngaps < GAPS_MAX ? sh->ngaps : GAPS_MAX;
	qsort(sh->gaps, n, sizeof sh->gaps[0], cmp_u64);
	*med = n ? sh->gaps[n / 2] / 1e3 : 0;
	*p90 = n ? sh->gaps[n * 9 / 10] / 1e3 : 0;
	*count = n;
	return 0;
}

void kb_carea_stop(const kb_ctx *c)
{
	int rounds = c->n > 0 ? (int)c->n : c->quick ? 25 : 100;
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		kb_row_none(XS, "karui-carea", "failed", "no shared memory");
		return;
	}
	static const char *const sys[2] = {"karui-carea", "pthread"};
	double karui_med = 0;
	for (int s = 0; s < 2; s++) {
		if (!kb_want(c, XS, sys[s]))
			continue;
		double med, p90, n;
		if (run(s == 0, rounds, &med, &p90, &n)) {
			kb_row_none(XS, sys[s], "failed", "the program did not end well");
			continue;
		}
		if (s == 0 && n == 0) {
			kb_row_none(XS, sys[s], "skipped",
				    "no stop in the middle of a microprocess here (a sanitizer build)");
			continue;
		}
		double r = kb_row(c, XS, sys[s], "stopped.median", "us", &med, 1,
				  s ? karui_med : 0, -1);
		if (s == 0)
			karui_med = r;
		kb_row(c, XS, sys[s], "stopped.p90", "us", &p90, 1, 0, -1);
		kb_row(c, XS, sys[s], "stops", "count", &n, 1, 0, -1);
	}
	munmap(sh, sizeof *sh);
}
