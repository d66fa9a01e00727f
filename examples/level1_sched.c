/*
 * Scheduling level 1: a scheduler module of one's own (kr_sched_ops).
 * This one keeps a single global LIFO stack under one spin lock (newest
 * work first, as a depth-first fork/join wants).  It does its own locking
 * because the core calls it from every VP, and `ready` also from threads
 * that are no VP.  An idle VP announces itself before its last look, so
 * that no wakeup is lost, and parks with kr_sched_park_until: that is what lets
 * I/O completions and timers wake it (and returns the memory of freed
 * stacks); `ready` wakes it with kr_sched_unpark.  Its I/O-completion
 * notifier (io_done) is told of each of karui's I/O waits that ends, before
 * the microprocess is ready again: it counts them, and notes whose.  Runs a
 * recursive fork/join Fibonacci on 2 VPs, then a microprocess that waits in
 * kr_read on a pipe until a plain thread writes to it, once both VPs sleep.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "karui.h"

enum { NVP = 2 };

struct lifo {
	kr_spin lock;
	kr_mp *top;
	uint32_t idle;
	uint32_t io_done;  /* I/O waits ended: atomic */
	kr_mp *io_last;    /* whose was the last */
};

static kr_vp *vps[NVP]; /* for the writer below to see them sleep */
static struct lifo *the_lifo; /* for main to read the notifier's count */

static struct lifo *L(kr_sched *s) { return *kr_sched_data(s); }

static int l_init(kr_sched *s, const kr_rq_ops *rq, unsigned nvp)
{
	struct lifo *l = calloc(1, sizeof *l);
	if (!l)
		return 12; /* ENOMEM */
	*kr_sched_data(s) = l;
	the_lifo = l;
	return 0;
}

static void l_fini(kr_sched *s) { free(L(s)); }

static int l_vp_init(kr_sched *s, kr_vp *vp)
{
	if (kr_vp_id(vp) < NVP)
		__atomic_store_n(&vps[kr_vp_id(vp)], vp, __ATOMIC_RELEASE);
	return 0;
}

static void push(struct lifo *l, kr_mp *mp)
{
	kr_mp_rqlink(mp)->next = l->top;
	l->top = mp;
}

static kr_mp *pop(struct lifo *l)
{
	kr_mp *mp = l->top;
	if (mp)
		l->top = kr_mp_rqlink(mp)->next;
	return mp;
}

static void l_ready(kr_sched *s, kr_vp *vp, kr_mp *mp)
{
	struct lifo *l = L(s);
	kr_spin_lock(&l->lock);
	push(l, mp);
	uint32_t idle = l->idle;
	kr_spin_unlock(&l->lock);
	if (idle)
		kr_sched_unpark(1);
}

static kr_mp *l_next(kr_sched *s, kr_vp *vp, kr_mp *prev)
{
	struct lifo *l = L(s);
	kr_spin_lock(&l->lock);
	kr_mp *mp;
	if (prev && l->top == NULL)
		mp = prev; /* nothing else: keep running */
	else {
		mp = pop(l);
		if (prev)
			push(l, prev);
	}
	kr_spin_unlock(&l->lock);
	return mp;
}

static kr_mp *l_idle(kr_sched *s, kr_vp *vp)
{
	struct lifo *l = L(s);
	kr_spin_lock(&l->lock);
	l->idle++;
	kr_mp *mp = pop(l);
	kr_spin_unlock(&l->lock);
	if (!mp) {
		kr_sched_park_until(kr_sched_idle_deadline());
		kr_spin_lock(&l->lock);
		mp = pop(l);
		kr_spin_unlock(&l->lock);
	}
	kr_spin_lock(&l->lock);
	l->idle--;
	kr_spin_unlock(&l->lock);
	return mp;
}

static void l_io_done(kr_sched *s, kr_vp *vp, kr_mp *mp)
{
	struct lifo *l = L(s);
	__atomic_store_n(&l->io_last, mp, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->io_done, 1, __ATOMIC_RELEASE);
}

static const kr_sched_ops lifo_sched = {
	.name = "global-lifo",
	.init = l_init, .fini = l_fini, .vp_init = l_vp_init,
	.ready = l_ready, .next = l_next, .idle = l_idle,
	.io_done = l_io_done,
};

static void *fib(void *a)
{
	intptr_t n = (intptr_t)a;
	if (n < 2)
		return a;
	kr_mp *x;
	void *r1, *r2;
	kr_attr at = {.stack_size = 16384};
	kr_mp_create(&x, &at, fib, (void *)(n - 1));
	r2 = fib((void *)(n - 2));
	kr_mp_join(x, &r1);
	return (void *)((intptr_t)r1 + (intptr_t)r2);
}

/* The I/O wait: a microprocess reads the pipe; the writer, a plain thread,
 * writes once both VPs sleep, so the read has blocked and only the event
 * source can wake it. */
static int pipefd[2];
static char got[8];

static void *reader(void *arg)
{
	size_t n = 0;
	return kr_read(pipefd[0], got, sizeof got - 1, &n) ? (void *)-1
									 : (void *)(intptr_t)n;
}

static void *writer(void *arg)
{
	for (unsigned i = 0; i < NVP; i++)
		while (kr_vp_status(__atomic_load_n(&vps[i], __ATOMIC_ACQUIRE)) != KR_VP_SLEEPING)
			sched_yield();
	return (void *)(intptr_t)write(pipefd[1], "hello", 5);
}

int main(void)
{
	kr_config cfg = {.vps = NVP, .sched = &lifo_sched};
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	long f = (long)(intptr_t)fib((void *)20);

	kr_mp *r;
	pthread_t w;
	void *n;
	if (pipe(pipefd) != 0 || kr_mp_create(&r, NULL, reader, NULL) != 0 ||
	    pthread_create(&w, NULL, writer, NULL) != 0)
		return fprintf(stderr, "set-up failed\n"), 1;
	kr_mp_join(r, &n);
	pthread_join(w, NULL);
	printf("fib(20) = %ld, read %ld bytes from a pipe: %s, I/O waits ended: %u, the "
	       "last the reader's: %s\n",
	       f, (long)(intptr_t)n, got, __atomic_load_n(&the_lifo->io_done, __ATOMIC_ACQUIRE),
	       the_lifo->io_last == r ? "yes" : "no");
	kr_close(pipefd[0]);
	close(pipefd[1]);
	return kr_fini();
}
