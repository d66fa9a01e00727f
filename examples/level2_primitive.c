/*
 * Scheduling level 2: a new primitive on sleep/wakeup.  A countdown latch:
 * waiters sleep until the count reaches zero.  The waiter list is guarded
 * by an L1 spin lock; a waiter re-checks the count after every wakeup, and
 * a wakeup that arrives before its sleep is kept by the permit, so none is
 * lost.  Works across VPs; here 2 VPs, 100 workers, 10 waiters.
 */
#include <stdint.h>
#include <stdio.h>

#include "karui.h"

#define MAXW 64

struct latch {
	kr_spin lock;
	long count;
	kr_mp *waiters[MAXW];
	int nwait;
};

static void latch_wait(struct latch *l)
{
	kr_spin_lock(&l->lock);
	if (l->count == 0) {
		kr_spin_unlock(&l->lock);
		return;
	}
	l->waiters[l->nwait++] = kr_mp_self();
	kr_spin_unlock(&l->lock);
	for (;;) {
		kr_mp_park();
		if (__atomic_load_n(&l->count, __ATOMIC_ACQUIRE) == 0)
			return;
	}
}

static void latch_count_down(struct latch *l)
{
	kr_spin_lock(&l->lock);
	if (--l->count == 0)
		for (int i = 0; i < l->nwait; i++)
			kr_mp_unpark(l->waiters[i]);
	kr_spin_unlock(&l->lock);
}

static struct latch done = {.lock = KR_SPIN_INIT, .count = 100};
static long work;

static void *worker(void *a)
{
	__atomic_fetch_add(&work, (long)(intptr_t)a, __ATOMIC_RELAXED);
	kr_mp_yield();
	latch_count_down(&done);
	return NULL;
}

static void *waiter(void *a)
{
	latch_wait(&done);
	return (void *)(intptr_t)(__atomic_load_n(&work, __ATOMIC_RELAXED) == 5050);
}

int main(void)
{
	kr_config cfg = {.vps = 2};
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	kr_mp *w[10], *m[100];
	for (int i = 0; i < 10; i++)
		kr_mp_create(&w[i], NULL, waiter, NULL);
	for (int i = 0; i < 100; i++)
		kr_mp_create(&m[i], NULL, worker, (void *)(intptr_t)(i + 1));
	int ok = 0;
	for (int i = 0; i < 10; i++) {
		void *r;
		kr_mp_join(w[i], &r);
		ok += (int)(intptr_t)r;
	}
	for (int i = 0; i < 100; i++)
		kr_mp_join(m[i], NULL);
	printf("waiters that saw all 100 workers done: %d of 10\n", ok);
	return kr_fini();
}
