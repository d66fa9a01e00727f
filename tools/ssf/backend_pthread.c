/*
 * SSF's pthread back end: every agent a kernel thread (the seed's
 * kernel-scheduled peer), with a hand-off so that exactly one runs at a
 * time: each thread waits on a semaphore of its own, and pass posts the
 * next agent's semaphore, then waits on its own.  The semaphores order
 * the agents' plain memory accesses (a post happens before the wait it
 * ends), which is all the machine asks of a back end.
 *
 * run() creates every thread first, each waiting on its semaphore; only
 * then is agent 0 posted, so a failed create can still end the ones made
 * without simulating (a ring with agents missing would never end).  A body
 * that returns posts the next agent still running, the last one posts
 * run(), which joins them all.
 *
 * The threads are left where the kernel puts them.  Rejected: pinning them
 * all to one CPU, which gained nothing measurable (a hand-off is a futex
 * wake and a futex wait either way) and fails where affinity is
 * restricted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssf_impl.h"

#define STACK (256 * 1024)

struct pbe {
	ssf_sched *s;
	sem_t *sem;     /* one per agent */
	sem_t done;     /* posted by the last agent to end */
	unsigned cur, finished;
	int abort;      /* not every thread could be made */
};

struct arg {
	struct pbe *b;
	unsigned i;
};

static void wait_sem(sem_t *s)
{
	while (sem_wait(s) != 0) /* EINTR */
		;
}

static void pass(ssf_sched *s)
{
	struct pbe *b = s->be;
	unsigned i = b->cur;
	b->cur = i + 1 == s->n ? 0 : i + 1;
	sem_post(&b->sem[b->cur]);
	wait_sem(&b->sem[i]);
}

static void *agent_main(void *p)
{
	struct arg *a = p;
	struct pbe *b = a->b;
	wait_sem(&b->sem[a->i]);
	if (b->abort)
		return NULL;
	b->s->body(b->s, a->i);
	b->cur = a->i + 1 == b->s->n ? 0 : a->i + 1;
	sem_post(++b->finished == b->s->n ? &b->done : &b->sem[b->cur]);
	return NULL;
}

static int pthread_run(ssf_sched *s, char *why, size_t len)
{
	struct pbe b = {.s = s};
	pthread_t *t = calloc(s->n, sizeof *t);
	struct arg *args = calloc(s->n, sizeof *args);
	pthread_attr_t attr;
	unsigned made = 0;
	int e = 0;
	b.sem = calloc(s->n, sizeof *b.sem);
	if (!t || !args || !b.sem) {
		snprintf(why, len, "pthread: no memory for %u threads", s->n);
		free(t);
		free(args);
		free(b.sem);
		return ENOMEM;
	}
	sem_init(&b.done, 0, 0);
	for (unsigned i = 0; i < s->n; i++)
		sem_init(&b.sem[i], 0, 0);
	s->pass = pass;
	s->be = &b;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK);
	for (; made < s->n; made++) {
		args[made] = (struct arg){&b, made};
		if ((e = pthread_create(&t[made], &attr, agent_main, &args[made])) != 0)
			break;
	}
	pthread_attr_destroy(&attr);
	if (e) {
		snprintf(why, len, "pthread: pthread_create: %s", strerror(e));
		b.abort = 1;
		for (unsigned i = 0; i < made; i++)
			sem_post(&b.sem[i]);
	} else {
		sem_post(&b.sem[0]);
		wait_sem(&b.done);
	}
	for (unsigned i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < s->n; i++)
		sem_destroy(&b.sem[i]);
	sem_destroy(&b.done);
	free(t);
	free(args);
	free(b.sem);
	return e;
}

const ssf_backend ssf_backend_pthread = {"pthread", pthread_run};
