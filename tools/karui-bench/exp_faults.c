/*
 * karui-bench — carea.faults: microprocesses that fault on slow pages
 * beside others that compute, on one processor.
 *
 * 2N flows (--n: N, 8 unless given) on one processor: N each touch a page
 * of their own in a page-fault notifier's region (kr_faults_create) whose
 * fill takes 2 ms (nanosleep: a page read from a slow device), and N
 * compute 100 steps of about 20 us each, yielding between steps.  The
 * fills are served one after the other (one notifier), so the faulting
 * half needs 2N ms, and so does the computing half: the makespan is 2N ms
 * when the two overlap, 4N ms when a fault holds the processor.
 *
 *   karui    one VP: the faulting microprocess alone waits for its page
 *            while the VP runs the others (carea/faults.c); where it could
 *            not be taken off its VP (the sanitizer builds) the VP waits.
 *   pthread  2N threads pinned to one CPU (sched_yield between steps):
 *            a fault blocks its thread only.
 *
 * The figure: the makespan, from the first creation to the last join, in
 * ms (the region made before and destroyed after).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "exp.h"

#define XS "carea.faults"
#define STEPS 100
#define STEP_NS 20000ull
#define FILL_NS 2000000L
#define PAGE 4096
#define MAXN 64

static volatile uint64_t sink;
static uint64_t spins_per_step;
static kr_faults *region;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void spin(uint64_t n)
{
	uint64_t x = sink;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

static uint64_t cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* How many spins make a step of about STEP_NS of this thread's own time
 * here (its processor time: a busy host does not stretch it). */
static void calibrate(void)
{
	uint64_t n = 1000;
	for (;;) {
		uint64_t t0 = cpu_ns();
		spin(n);
		uint64_t dt = cpu_ns() - t0;
		if (dt > 2000000) {
			spins_per_step = n * STEP_NS / dt;
			return;
		}
		n *= 2;
	}
}

static int fill(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	struct timespec t = {0, FILL_NS};
	while (nanosleep(&t, &t) && errno == EINTR)
		;
	memset(buf, 7, PAGE);
	return 0;
}

static void *toucher(void *a)
{
	volatile unsigned char *p = kr_faults_addr(region);
	return (void *)(uintptr_t)p[(uintptr_t)a * PAGE];
}

static void *computer_mp(void *a)
{
	(void)a;
	for (int i = 0; i < STEPS; i++) {
		spin(spins_per_step);
		kr_mp_yield();
	}
	return NULL;
}

static void *computer_thread(void *a)
{
	(void)a;
	for (int i = 0; i < STEPS; i++) {
		spin(spins_per_step);
		sched_yield();
	}
	return NULL;
}

/* One run of system s (0: karui, 1: pthread): the makespan in ms, or < 0. */
static double run(int s, long n)
{
	kr_fault_ops ops = {.fill = fill};
	if (kr_faults_create(&region, (size_t)n * PAGE, &ops, NULL))
		return -1;
	double ms = -1;
	if (s == 0) {
		kr_config cfg = {.vps = 1};
		if (kr_init(&cfg) == 0) {
			kr_mp *m[2 * MAXN];
			uint64_t t0 = now_ns();
			for (long i = 0; i < n; i++) {
				kr_mp_create(&m[2 * i], NULL, toucher, (void *)(uintptr_t)i);
				kr_mp_create(&m[2 * i + 1], NULL, computer_mp, NULL);
			}
			for (long i = 0; i < 2 * n; i++)
				kr_mp_join(m[i], NULL);
			ms = (double)(now_ns() - t0) / 1e6;
			kr_fini();
		}
	} else if (kb_pin(1)) {
		pthread_t t[2 * MAXN];
		uint64_t t0 = now_ns();
		for (long i = 0; i < n; i++) {
			pthread_create(&t[2 * i], NULL, toucher, (void *)(uintptr_t)i);
			pthread_create(&t[2 * i + 1], NULL, computer_thread, NULL);
		}
		for (long i = 0; i < 2 * n; i++)
			pthread_join(t[i], NULL);
		ms = (double)(now_ns() - t0) / 1e6;
		kb_pin(0);
	}
	kr_faults_stats st;
	kr_faults_stats_get(region, &st);
	kr_faults_destroy(region);
	return ms;
}

void kb_carea_faults(const kb_ctx *c)
{
	long n = c->n > 0 ? (c->n < MAXN ? c->n : MAXN) : 8;
	kr_faults *probe;
	kr_fault_ops ops = {.fill = fill};
	int e = kr_faults_create(&probe, PAGE, &ops, NULL);
	if (e) {
		kb_row_none(XS, "karui", "skipped", "no userfaultfd for this process");
		return;
	}
	kr_faults_destroy(probe);
	calibrate();
	static const char *const sys[2] = {"karui", "pthread"};
	double karui = 0;
	for (int s = 0; s < 2; s++) {
		if (!kb_want(c, XS, sys[s]))
			continue;
		double v[16];
		int nv = 0;
		run(s, n); /* warm-up */
		for (int k = 0; k < c->reps && k < 16; k++) {
			double ms = run(s, n);
			if (ms < 0)
				break;
			v[nv++] = ms;
		}
		if (!nv) {
			kb_row_none(XS, sys[s], "failed", "no run ended well");
			continue;
		}
		double m = kb_row(c, XS, sys[s], "makespan", "ms", v, nv, s ? karui : 0, -1);
		if (s == 0)
			karui = m;
	}
}
