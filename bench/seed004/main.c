/*
 * karui-bench-seed004 — seed 004's workloads as a real program, the
 * program `karui-bench run seed004.real` runs K copies of at once.
 *
 *   karui-bench-seed004 mult|force|wave pthread|karui|carea [OPTIONS]
 *     --vps N          karui: VPs (default: the processors this process
 *                      may use)
 *     --segment /NAME  carea: the C-area's segment (default: the
 *                      environment's KARUI_CAREA_SEGMENT, else the user's)
 *     --size N         mult: the matrices' order; force: bodies
 *     --steps N        force: time steps; wave: sweeps
 *     --grain N        wave: iterations of work between two receives
 *
 * It prints one line on stdout, words of the form key=value after the
 * workload and the mode:
 *
 *   mult karui vps=2 workers=16 size=768 steps=0 grain=0 checksum=... wall_ns=...
 *
 * checksum (16 hex digits) is the result's, the same in every mode for the
 * same sizes; wall_ns is the workload's time, from before its data is made
 * to after its last worker has been joined (the runtime's start and stop
 * are outside).  In carea mode the line goes on with the process's
 * kr_carea_stats_get figures at the end of the workload:
 *
 *   ... attached=1 nvp=2 grant=1 suspensions=12 recoveries=12 preemptions=0
 *       deferred=3 allocations=40
 *
 * attached=0 means karui ran without the C-area (carea.h says when).
 * Exit status 0, or 1 with a message on stderr.
 *
 * This file is the layer of seed004.h: each call switches on the mode.
 * pthread workers are joinable threads with default attributes; karui's
 * are microprocesses with default attributes, created by the main
 * microprocess and joined by it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seed004.h"

enum s4_mode s4_mode;

void s4_check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "karui-bench-seed004: %s: %s\n", what, strerror(err));
		exit(1);
	}
}

uint64_t s4_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* ---------------- workers ---------------- */

struct worker {
	void (*fn)(void *arg, unsigned id);
	void *arg;
	unsigned id;
};

static void *worker_main(void *p)
{
	struct worker *w = p;
	w->fn(w->arg, w->id);
	return NULL;
}

void s4_workers(unsigned n, void (*fn)(void *arg, unsigned id), void *arg)
{
	struct worker *w = calloc(n, sizeof *w);
	pthread_t *t = calloc(n, sizeof *t);
	kr_mp **m = calloc(n, sizeof *m);
	if (!w || !t || !m)
		s4_check(ENOMEM, "workers");
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker){fn, arg, i};
		if (s4_mode == S4_PTHREAD)
			s4_check(pthread_create(&t[i], NULL, worker_main, &w[i]), "pthread_create");
		else
			s4_check(kr_mp_create(&m[i], NULL, worker_main, &w[i]), "kr_mp_create");
	}
	for (unsigned i = 0; i < n; i++) {
		if (s4_mode == S4_PTHREAD)
			s4_check(pthread_join(t[i], NULL), "pthread_join");
		else
			s4_check(kr_mp_join(m[i], NULL), "kr_mp_join");
	}
	free(w);
	free(t);
	free(m);
}

/* ---------------- barriers ---------------- */

void s4_barrier_init(struct s4_barrier *b, unsigned count)
{
	if (s4_mode == S4_PTHREAD)
		s4_check(pthread_barrier_init(&b->p, NULL, count), "pthread_barrier_init");
	else
		s4_check(kr_barrier_init(&b->k, count), "kr_barrier_init");
}

void s4_barrier_wait(struct s4_barrier *b)
{
	if (s4_mode == S4_PTHREAD) {
		int err = pthread_barrier_wait(&b->p);
		s4_check(err == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : err, "pthread_barrier_wait");
	} else {
		s4_check(kr_barrier_wait(&b->k, NULL), "kr_barrier_wait");
	}
}

void s4_barrier_destroy(struct s4_barrier *b)
{
	if (s4_mode == S4_PTHREAD)
		s4_check(pthread_barrier_destroy(&b->p), "pthread_barrier_destroy");
	else
		s4_check(kr_barrier_destroy(&b->k), "kr_barrier_destroy");
}

/* ---------------- mailboxes ---------------- */

void s4_mailbox_init(struct s4_mailbox *m)
{
	if (s4_mode == S4_PTHREAD) {
		s4_check(pthread_mutex_init(&m->lock, NULL), "pthread_mutex_init");
		s4_check(pthread_cond_init(&m->filled, NULL), "pthread_cond_init");
		s4_check(pthread_cond_init(&m->emptied, NULL), "pthread_cond_init");
		m->full = 0;
	} else {
		s4_check(kr_chan_init(&m->k, sizeof m->word, 1), "kr_chan_init");
	}
}

void s4_mailbox_send(struct s4_mailbox *m, uint64_t word)
{
	if (s4_mode != S4_PTHREAD) {
		s4_check(kr_chan_send(&m->k, &word), "kr_chan_send");
		return;
	}
	pthread_mutex_lock(&m->lock);
	while (m->full)
		pthread_cond_wait(&m->emptied, &m->lock);
	m->word = word;
	m->full = 1;
	pthread_cond_signal(&m->filled);
	pthread_mutex_unlock(&m->lock);
}

uint64_t s4_mailbox_recv(struct s4_mailbox *m)
{
	uint64_t word;
	if (s4_mode != S4_PTHREAD) {
		s4_check(kr_chan_recv(&m->k, &word), "kr_chan_recv");
		return word;
	}
	pthread_mutex_lock(&m->lock);
	while (!m->full)
		pthread_cond_wait(&m->filled, &m->lock);
	word = m->word;
	m->full = 0;
	pthread_cond_signal(&m->emptied);
	pthread_mutex_unlock(&m->lock);
	return word;
}

void s4_mailbox_destroy(struct s4_mailbox *m)
{
	if (s4_mode != S4_PTHREAD) {
		s4_check(kr_chan_destroy(&m->k), "kr_chan_destroy");
		return;
	}
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->filled);
	pthread_cond_destroy(&m->emptied);
}

/* ---------------- the program ---------------- */

static const struct {
	const char *name;
	uint64_t (*run)(struct s4_args *a, unsigned *workers);
} WORKLOADS[] = {{"mult", s4_mult}, {"force", s4_force}, {"wave", s4_wave}};
#define NWORKLOADS (sizeof WORKLOADS / sizeof WORKLOADS[0])

static const char *const MODES[] = {"pthread", "karui", "carea"};
#define NMODES (sizeof MODES / sizeof MODES[0])

static int usage(void)
{
	fprintf(stderr, "usage: karui-bench-seed004 mult|force|wave pthread|karui|carea "
			"[--vps N] [--segment /NAME] [--size N] [--steps N] [--grain N]\n");
	return 2;
}

/* A positive number, or 0 for anything else. */
static long positive(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || end == s || *end || v <= 0 ? 0 : v;
}

static unsigned processors(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	size_t w = 0, m = 0;
	while (w < NWORKLOADS && strcmp(argv[1], WORKLOADS[w].name))
		w++;
	while (m < NMODES && strcmp(argv[2], MODES[m]))
		m++;
	if (w == NWORKLOADS || m == NMODES)
		return usage();
	s4_mode = (enum s4_mode)m;
	struct s4_args a = {0};
	long vps = 0;
	kr_carea_config ca = {0};
	for (int i = 3; i < argc; i += 2) {
		if (!strcmp(argv[i], "--segment") && i + 1 < argc && s4_mode == S4_CAREA) {
			ca.segment = argv[i + 1];
			continue;
		}
		long *to = !strcmp(argv[i], "--vps")     ? &vps
			   : !strcmp(argv[i], "--size")  ? &a.size
			   : !strcmp(argv[i], "--steps") ? &a.steps
			   : !strcmp(argv[i], "--grain") ? &a.grain
							 : NULL;
		if (!to || i + 1 >= argc || !(*to = positive(argv[i + 1])))
			return usage();
	}
	if (vps > KR_VP_MAX || (vps && s4_mode != S4_KARUI))
		return usage();
	if (s4_mode == S4_KARUI) {
		kr_config cfg = {.vps = vps ? (unsigned)vps : processors()};
		vps = cfg.vps;
		s4_check(kr_init(&cfg), "kr_init");
	} else if (s4_mode == S4_CAREA) {
		kr_config cfg = {.alloc = &kr_carea};
		s4_check(kr_carea_configure(&ca), "kr_carea_configure");
		s4_check(kr_init(&cfg), "kr_init");
	}
	unsigned workers;
	uint64_t t0 = now_ns();
	uint64_t sum = WORKLOADS[w].run(&a, &workers);
	uint64_t wall = now_ns() - t0;
	kr_carea_stats st;
	if (s4_mode == S4_CAREA) {
		s4_check(kr_carea_stats_get(&st), "kr_carea_stats_get");
		vps = st.nvp;
	}
	if (s4_mode != S4_PTHREAD)
		s4_check(kr_fini(), "kr_fini");
	printf("%s %s vps=%ld workers=%u size=%ld steps=%ld grain=%ld checksum=%016llx "
	       "wall_ns=%llu", WORKLOADS[w].name, MODES[m], vps, workers, a.size, a.steps,
	       a.grain, (unsigned long long)sum, (unsigned long long)wall);
	if (s4_mode == S4_CAREA)
		printf(" attached=%d nvp=%u grant=%u suspensions=%llu recoveries=%llu "
		       "preemptions=%llu deferred=%llu allocations=%llu", st.attached, st.nvp,
		       st.grant, (unsigned long long)st.suspensions,
		       (unsigned long long)st.recoveries, (unsigned long long)st.preemptions,
		       (unsigned long long)st.deferred, (unsigned long long)st.allocations);
	printf("\n");
	return 0;
}
