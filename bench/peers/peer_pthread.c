/*
 * pthread peers: kernel threads, where every hand-over goes through the
 * kernel scheduler.
 *   yield        two threads pinned to the caller's CPU alternate through a
 *                shared turn counter; a thread whose turn it is not calls
 *                sched_yield; one operation = one flip of the turn
 *   create_join  pthread_create + pthread_join of an empty function
 *   create_batch a->n pthread_create, then a->n pthread_join
 *   many         a->n threads with 64 KiB stacks blocked on one condvar;
 *                create time per thread and RSS growth while all are alive
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "peers.h"

#define MANY_STACK ((size_t)64 * 1024)

static void *empty_fn(void *p)
{
	return p;
}

/* ---- yield ---- */

struct yshare {
	int cpu;
	long iters;
	atomic_long turn;
	atomic_int ready;
	atomic_int err;
	double t0, t1;
};

struct yarg {
	struct yshare *s;
	long me; /* 0 or 1: this thread flips the turn when turn % 2 == me */
};

static void *yield_body(void *p)
{
	struct yarg *y = p;
	struct yshare *s = y->s;
	cpu_set_t set;
	int e;

	CPU_ZERO(&set);
	CPU_SET((size_t)s->cpu, &set);
	e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	if (e)
		atomic_store(&s->err, e);
	atomic_fetch_add(&s->ready, 1);
	while (atomic_load(&s->ready) < 2)
		sched_yield();
	if (atomic_load(&s->err))
		return NULL;
	for (;;) {
		long t = atomic_load_explicit(&s->turn, memory_order_acquire);

		if (t >= s->iters)
			break;
		if ((t & 1) != y->me) {
			sched_yield();
			continue;
		}
		if (t == 0)
			s->t0 = kb_now_ns();
		if (t + 1 == s->iters)
			s->t1 = kb_now_ns();
		atomic_store_explicit(&s->turn, t + 1, memory_order_release);
	}
	return NULL;
}

int kb_pthread_yield(const kb_args *a, kb_res *r)
{
	struct yshare s = { .iters = a->iters };
	struct yarg y[2] = { { &s, 0 }, { &s, 1 } };
	pthread_t th[2];
	int e;

	if (a->iters < 1)
		return EINVAL;
	s.cpu = sched_getcpu();
	if (s.cpu < 0)
		return errno;
	atomic_init(&s.turn, 0);
	atomic_init(&s.ready, 0);
	atomic_init(&s.err, 0);
	e = pthread_create(&th[0], NULL, yield_body, &y[0]);
	if (e)
		return e;
	e = pthread_create(&th[1], NULL, yield_body, &y[1]);
	if (e) {
		/* th[0] waits for a partner that never comes: let it go */
		atomic_store(&s.err, e);
		atomic_fetch_add(&s.ready, 1);
		pthread_join(th[0], NULL);
		return e;
	}
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	e = atomic_load(&s.err);
	if (e)
		return e;
	r->ns_per_op = (s.t1 - s.t0) / (double)a->iters;
	return 0;
}

/* ---- create_join, create_batch ---- */

int kb_pthread_create_join(const kb_args *a, kb_res *r)
{
	double t0 = kb_now_ns();
	pthread_t th;
	int e;

	if (a->iters < 1)
		return EINVAL;
	for (long i = 0; i < a->iters; i++) {
		e = pthread_create(&th, NULL, empty_fn, NULL);
		if (e)
			return e;
		pthread_join(th, NULL);
	}
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	return 0;
}

int kb_pthread_create_batch(const kb_args *a, kb_res *r)
{
	pthread_t *th;
	double t0;
	long made = 0;
	int e = 0;

	if (a->n < 1)
		return EINVAL;
	th = malloc((size_t)a->n * sizeof *th);
	if (!th)
		return ENOMEM;
	t0 = kb_now_ns();
	for (; made < a->n; made++) {
		e = pthread_create(&th[made], NULL, empty_fn, NULL);
		if (e)
			break;
	}
	for (long i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	if (!e)
		r->ns_per_op = (kb_now_ns() - t0) / (double)a->n;
	free(th);
	return e;
}

/* ---- many ---- */

struct mshare {
	pthread_mutex_t mu;
	pthread_cond_t go;      /* main -> threads: released */
	pthread_cond_t started; /* threads -> main: one more is waiting */
	long nstarted;
	int released;
};

static void *many_body(void *p)
{
	struct mshare *m = p;

	pthread_mutex_lock(&m->mu);
	m->nstarted++;
	pthread_cond_signal(&m->started);
	while (!m->released)
		pthread_cond_wait(&m->go, &m->mu);
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

static void many_release(struct mshare *m, pthread_t *th, long made)
{
	pthread_mutex_lock(&m->mu);
	m->released = 1;
	pthread_cond_broadcast(&m->go);
	pthread_mutex_unlock(&m->mu);
	for (long i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	pthread_cond_destroy(&m->started);
	pthread_cond_destroy(&m->go);
	pthread_mutex_destroy(&m->mu);
}

/* create a->n threads with attr, wait until all are blocked, measure */
static int many_run(const kb_args *a, kb_res *r, pthread_attr_t *attr, pthread_t *th)
{
	struct mshare m = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			    PTHREAD_COND_INITIALIZER, 0, 0 };
	double rss0 = kb_rss_kib(), t0 = kb_now_ns(), t1;
	long made = 0;
	int e = 0;

	for (; made < a->n; made++) {
		e = pthread_create(&th[made], attr, many_body, &m);
		if (e)
			break;
	}
	t1 = kb_now_ns();
	if (!e) {
		pthread_mutex_lock(&m.mu);
		while (m.nstarted < a->n)
			pthread_cond_wait(&m.started, &m.mu);
		pthread_mutex_unlock(&m.mu);
		r->rss_kib = kb_rss_kib() - rss0;
		r->ns_per_op = (t1 - t0) / (double)a->n;
	}
	many_release(&m, th, made);
	return e;
}

int kb_pthread_many(const kb_args *a, kb_res *r)
{
	size_t stack = MANY_STACK;
	pthread_attr_t attr;
	pthread_t *th;
	int e;

	if (a->n < 1)
		return EINVAL;
	if (stack < (size_t)PTHREAD_STACK_MIN)
		stack = (size_t)PTHREAD_STACK_MIN;
	th = malloc((size_t)a->n * sizeof *th);
	if (!th)
		return ENOMEM;
	e = pthread_attr_init(&attr);
	if (!e) {
		e = pthread_attr_setstacksize(&attr, stack);
		if (!e)
			e = many_run(a, r, &attr, th);
		pthread_attr_destroy(&attr);
	}
	free(th);
	return e;
}
