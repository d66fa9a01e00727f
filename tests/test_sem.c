/* L3: semaphores (src/sync/sem.c): FIFO hand-over, bad input, timed
 * waits, and units that add up under timeouts across VPs. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

static kr_sem sem;
static int order[16], norder;

static void *sem_taker(void *a)
{
	KT_EQ(kr_sem_wait(&sem), 0);
	order[norder++] = (int)(uintptr_t)a;
	return NULL;
}

static void sem_hands_units_to_waiters_in_fifo_order(void)
{
	init(1);
	KT_EQ(kr_sem_init(&sem, 0), 0);
	kr_mp *m[4];
	for (int i = 0; i < 4; i++) {
		KT_EQ(kr_mp_create(&m[i], NULL, sem_taker, (void *)(uintptr_t)i), 0);
		kr_mp_yield(); /* it blocks: waiters queue 0, 1, 2, 3 */
	}
	KT_EQ(norder, 0);
	KT_EQ(kr_sem_post_n(&sem, 3), 0);
	/* a newcomer cannot take a unit handed to a waiter */
	KT_EQ(kr_sem_trywait(&sem), EAGAIN);
	KT_EQ(kr_sem_post(&sem), 0);
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	for (int i = 0; i < 4; i++)
		KT_EQ(order[i], i);
	long v = -1;
	KT_EQ(kr_sem_getvalue(&sem, &v), 0);
	KT_EQ(v, 0);
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_fini(), 0);
}

static void *sem_blocker(void *a)
{
	return (void *)(intptr_t)kr_sem_wait(a);
}

static void sem_rejects_bad_input(void)
{
	kr_sem s;
	KT_EQ(kr_sem_init(&s, -1), EINVAL);
	KT_EQ(kr_sem_init(&s, KR_SEM_MAX + 1), EINVAL);
	KT_EQ(kr_sem_init(NULL, 0), EINVAL);
	KT_EQ(kr_sem_init(&s, KR_SEM_MAX), 0);
	KT_EQ(kr_sem_post(&s), EOVERFLOW);
	KT_EQ(kr_sem_post_n(&s, 0), EINVAL);
	KT_EQ(kr_sem_post_n(&s, -5), EINVAL);
	KT_EQ(kr_sem_wait(&s), EPERM); /* not a microprocess */
	KT_EQ(kr_sem_trywait(&s), 0);  /* non-blocking: any thread */
	init(1);
	KT_EQ(kr_sem_init(&s, 0), 0);
	KT_EQ(kr_sem_trywait(&s), EAGAIN);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, sem_blocker, &s), 0);
	kr_mp_yield();
	KT_EQ(kr_sem_destroy(&s), EBUSY); /* waited on */
	KT_EQ(kr_sem_post(&s), 0);
	void *r;
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_sem_destroy(&s), 0);
	KT_EQ(kr_sem_wait(&s), EINVAL);
	KT_EQ(kr_sem_post(&s), EINVAL);
	KT_EQ(kr_sem_destroy(&s), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static void sem_timedwait_times_out_and_leaves_no_trace(void)
{
	init(1);
	KT_EQ(kr_sem_init(&sem, 0), 0);
	uint64_t t0 = kr_now();
	KT_EQ(kr_sem_wait_until(&sem, t0 + 3 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 3 * MS);
	KT_EQ(kr_sem_post(&sem), 0); /* nobody waits any more: it is counted */
	long v;
	KT_EQ(kr_sem_getvalue(&sem, &v), 0);
	KT_EQ(v, 1);
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_fini(), 0);
}

static kr_sem items;
static uint32_t got_units, timed_out;

static void *consumer_timed(void *a)
{
	for (int i = 0; i < 20; i++) {
		int e = kr_sem_wait_until(&items, kr_now() + ((uintptr_t)a % 7) * 100000);
		if (e == 0)
			__atomic_fetch_add(&got_units, 1, __ATOMIC_RELAXED);
		else if (e == ETIMEDOUT)
			__atomic_fetch_add(&timed_out, 1, __ATOMIC_RELAXED);
		else
			KT_EQ(e, 0);
	}
	return NULL;
}

static void *producer(void *a)
{
	for (int i = 0; i < 10; i++) {
		KT_EQ(kr_sem_post(&items), 0);
		if (i % 3 == 0)
			kr_mp_yield();
	}
	return a;
}

static void *foreign_poster(void *a)
{
	for (int i = 0; i < 5000; i++) {
		kr_sem_post(&items);
		if (i % 100 == 0)
			usleep(100);
	}
	return a;
}

/* 2,000 consumers with short deadlines, 1,000 producers and a thread that
 * is no VP, on 2 VPs: every unit is taken exactly once or still counted. */
static void sem_units_add_up_under_timeouts_on_two_vps(void)
{
	init(2);
	KT_EQ(kr_sem_init(&items, 0), 0);
	got_units = timed_out = 0;
	pthread_t t;
	pthread_create(&t, NULL, foreign_poster, NULL);
	kr_mp **m = calloc(3000, sizeof *m);
	for (unsigned i = 0; i < 3000; i++)
		KT_EQ(kr_mp_create(&m[i], &small, i % 3 == 2 ? producer : consumer_timed,
				   (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < 3000; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	free(m);
	long left;
	KT_EQ(kr_sem_getvalue(&items, &left), 0);
	KT_EQ(got_units + left, 1000 * 10 + 5000);
	KT_EQ(got_units + timed_out, 2000 * 20);
	fprintf(stderr, "  %u taken, %u timed out, %ld left\n", got_units, timed_out, left);
	KT_EQ(kr_sem_destroy(&items), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(sem_hands_units_to_waiters_in_fifo_order);
	KT_RUN(sem_rejects_bad_input);
	KT_RUN(sem_timedwait_times_out_and_leaves_no_trace);
	KT_RUN(sem_units_add_up_under_timeouts_on_two_vps);
	return kt_finish();
}
