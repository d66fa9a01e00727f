/*
 * The layer of seed004.h: each call switches on the mode.  pthread
 * workers are joinable threads with default attributes; karui's are
 * microprocesses with default attributes, created by the calling
 * microprocess and joined by it.  Shared by karui-bench-seed004 (main.c)
 * and karui-bench-mpi-wave (mpi_wave.c).
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
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(err));
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

/* ---------------- the programs' arguments and clock ---------------- */

/* A positive number, or 0 for anything else. */
static long positive(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || end == s || *end || v <= 0 ? 0 : v;
}

int s4_options(int argc, char **argv, int i, unsigned allowed, struct s4_args *a, long *vps,
	       const char **segment)
{
	for (; i < argc; i += 2) {
		if (i + 1 >= argc)
			return -1;
		if (!strcmp(argv[i], "--segment") && (allowed & S4_OPT_SEGMENT)) {
			*segment = argv[i + 1];
			continue;
		}
		long *to = !strcmp(argv[i], "--vps") && (allowed & S4_OPT_VPS)       ? vps
			   : !strcmp(argv[i], "--size") && (allowed & S4_OPT_SIZE)   ? &a->size
			   : !strcmp(argv[i], "--steps") && (allowed & S4_OPT_STEPS) ? &a->steps
			   : !strcmp(argv[i], "--grain") && (allowed & S4_OPT_GRAIN) ? &a->grain
										       : NULL;
		if (!to || !(*to = positive(argv[i + 1])))
			return -1;
	}
	return 0;
}

unsigned s4_processors(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}

uint64_t s4_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
