/* L3: semaphores, monitors, barriers, channels, streams, rendezvous —
 * behaviour, stress across VPs, timeouts and bad input. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"

#define MS 1000000ull

static void init(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

static const kr_attr small = {.stack_size = 16384};

/* Create n microprocesses running fn(arg_i), then join them all. */
static void run_all(unsigned n, void *(*fn)(void *), void *(*argf)(unsigned))
{
	kr_mp **m = calloc(n, sizeof *m);
	KT_CHECK(m);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_create(&m[i], &small, fn, argf ? argf(i) : NULL), 0);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	free(m);
}

static void *index_arg(unsigned i) { return (void *)(uintptr_t)i; }

/* ---------------- semaphores ---------------- */

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
	KT_EQ(kr_sem_timedwait(&sem, t0 + 3 * MS), ETIMEDOUT);
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
		int e = kr_sem_timedwait(&items, kr_now() + ((uintptr_t)a % 7) * 100000);
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

/* ---------------- mutexes ---------------- */

static kr_mutex mu;
static long counter;

static void *locker(void *a)
{
	for (int i = 0; i < 50; i++) {
		KT_EQ(kr_mutex_lock(&mu), 0);
		long c = counter;
		if (i % 5 == 0)
			kr_mp_yield(); /* others run and block on mu */
		counter = c + 1;
		KT_EQ(kr_mutex_unlock(&mu), 0);
	}
	return a;
}

static void mutex_excludes_across_two_vps(void)
{
	init(2);
	counter = 0;
	kr_mutex_init(&mu);
	run_all(2000, locker, NULL);
	KT_EQ(counter, 2000 * 50);
	KT_EQ(kr_mutex_destroy(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

/* A microprocess that ends holding a mutex leaves it held, by no one
 * alive: the next microprocess created in its record (the stack cache is
 * LIFO) does not own it. */
static void *lock_and_end(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	return a;
}

static void *try_the_held_mutex(void *a)
{
	int timed = kr_mutex_timedlock(&mu, kr_now() + 2 * MS);
	int unlock = kr_mutex_unlock(&mu);
	return (void *)(intptr_t)(timed == ETIMEDOUT && unlock == EPERM ? 0 : timed * 1000 + unlock);
}

static void mutex_of_an_ended_owner_is_not_the_next_microprocess_in_its_record(void)
{
	init(1);
	KT_EQ(kr_mutex_init(&mu), 0);
	kr_mp *m;
	void *r;
	KT_EQ(kr_mp_create(&m, NULL, lock_and_end, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mp_create(&m, NULL, try_the_held_mutex, NULL), 0);
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_mutex_trylock(&mu), EBUSY);
	KT_EQ(kr_fini(), 0);
}

/* The same for threads that are no VP: one that took the mutex with
 * trylock and ended leaves it held, and a later thread (which may get the
 * same thread-local storage) does not own it. */
static void *trylock_and_end(void *a)
{
	return (void *)(intptr_t)kr_mutex_trylock(a);
}

static void *unlock_foreign(void *a)
{
	return (void *)(intptr_t)kr_mutex_unlock(a);
}

static void mutex_of_an_ended_thread_is_not_a_later_threads(void)
{
	KT_EQ(kr_mutex_init(&mu), 0);
	for (int i = 0; i < 20; i++) {
		pthread_t t;
		void *r;
		KT_EQ(pthread_create(&t, NULL, i ? unlock_foreign : trylock_and_end, &mu), 0);
		KT_EQ(pthread_join(t, &r), 0);
		KT_EQ((intptr_t)r, i ? EPERM : 0);
	}
	KT_EQ(kr_mutex_trylock(&mu), EBUSY);
}

static void *unlock_other(void *a)
{
	return (void *)(intptr_t)kr_mutex_unlock(a);
}

static void *foreign_trylock(void *a)
{
	intptr_t r = kr_mutex_trylock(a) == EBUSY;
	r |= (kr_mutex_lock(a) == EPERM) << 1;
	return (void *)r;
}

static void mutex_rejects_bad_input(void)
{
	init(1);
	kr_mutex m = {0}; /* zero-filled is a valid, free mutex */
	KT_EQ(kr_mutex_unlock(&m), EPERM); /* not held */
	KT_EQ(kr_mutex_lock(&m), 0);
	KT_EQ(kr_mutex_lock(&m), EDEADLK);
	KT_EQ(kr_mutex_trylock(&m), EBUSY);
	KT_EQ(kr_mutex_destroy(&m), EBUSY);
	kr_mp *o;
	void *r;
	KT_EQ(kr_mp_create(&o, NULL, unlock_other, &m), 0);
	KT_EQ(kr_mp_join(o, &r), 0);
	KT_EQ((intptr_t)r, EPERM); /* not the owner */
	pthread_t t;
	pthread_create(&t, NULL, foreign_trylock, &m);
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 3); /* busy for it; it may not block */
	KT_EQ(kr_mutex_unlock(&m), 0);
	KT_EQ(kr_mutex_destroy(&m), 0);
	KT_EQ(kr_mutex_lock(&m), EINVAL);
	KT_EQ(kr_mutex_trylock(&m), EINVAL);
	KT_EQ(kr_mutex_unlock(&m), EINVAL);
	KT_EQ(kr_mutex_destroy(&m), EINVAL);
	KT_EQ(kr_mutex_lock(NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static uint32_t gave_up;
static void *hold_until_given_up(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	KT_WAIT(__atomic_load_n(&gave_up, __ATOMIC_ACQUIRE), kr_mp_sleep_for(MS));
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return a;
}

static void mutex_timedlock_times_out_and_leaves_no_trace(void)
{
	init(2);
	kr_mutex_init(&mu);
	kr_mp *h;
	KT_EQ(kr_mp_create(&h, NULL, hold_until_given_up, NULL), 0);
	while (kr_mutex_trylock(&mu) == 0) { /* until h holds it */
		kr_mutex_unlock(&mu);
		kr_mp_yield();
	}
	uint64_t t0 = kr_now();
	KT_EQ(kr_mutex_timedlock(&mu, t0 + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 2 * MS);
	__atomic_store_n(&gave_up, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_join(h, NULL), 0);
	KT_EQ(mu.state, 0); /* free, with no waiter bit left over */
	KT_EQ(kr_mutex_trylock(&mu), 0);
	KT_EQ(kr_mutex_unlock(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

static uint32_t locked_times;

static void *locker_timed(void *a)
{
	for (int i = 0; i < 20; i++) {
		int e = kr_mutex_timedlock(&mu, kr_now() + ((uintptr_t)a % 7) * 50000);
		if (e == ETIMEDOUT)
			continue;
		KT_EQ(e, 0);
		long c = counter;
		if (i % 4 == 0)
			kr_mp_yield();
		counter = c + 1;
		__atomic_fetch_add(&locked_times, 1, __ATOMIC_RELAXED);
		KT_EQ(kr_mutex_unlock(&mu), 0);
	}
	return a;
}

/* 2,000 lockers with deadlines that pass while unlocks hand the mutex
 * over, on 2 VPs: a timed-out locker never owns it, a served one always
 * does, and the mutex ends free. */
static void mutex_timedlock_under_contention_on_two_vps(void)
{
	init(2);
	kr_mutex_init(&mu);
	counter = 0;
	locked_times = 0;
	run_all(2000, locker_timed, index_arg);
	KT_EQ(counter, (long)locked_times);
	KT_CHECK(locked_times > 0);
	KT_EQ(mu.state, 0);
	KT_EQ(kr_mutex_destroy(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

/* An unlock whose fast path saw a waiter, racing with that waiter's
 * deadline: the waiter may give up between the two, and the unlock then
 * finds nobody to hand the mutex to.  It must leave it free.  A holder and
 * a locker with deadlines of a few hundred ns, on two VPs, many rounds:
 * the mutex ends free and every round of the holder completes. */
static uint32_t holder_rounds, waiter_wins;

static void *busy_holder(void *a)
{
	for (int i = 0; i < 200000; i++) {
		KT_EQ(kr_mutex_lock(&mu), 0);
		for (int j = 0; j < 20; j++)
			kr_cpu_relax();
		KT_EQ(kr_mutex_unlock(&mu), 0);
		__atomic_fetch_add(&holder_rounds, 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void *hasty_locker(void *a)
{
	while (__atomic_load_n(&holder_rounds, __ATOMIC_RELAXED) < 200000) {
		int e = kr_mutex_timedlock(&mu, kr_now() + 100 * (kr_now() % 8));
		KT_CHECK(e == 0 || e == ETIMEDOUT);
		if (e == 0) {
			waiter_wins++;
			KT_EQ(kr_mutex_unlock(&mu), 0);
		}
	}
	return a;
}

static void unlock_after_the_last_waiter_timed_out_frees_the_mutex(void)
{
	init(2);
	kr_mutex_init(&mu);
	holder_rounds = waiter_wins = 0;
	kr_mp *h, *l;
	KT_EQ(kr_mp_create(&h, NULL, busy_holder, NULL), 0);
	KT_EQ(kr_mp_create(&l, NULL, hasty_locker, NULL), 0);
	KT_EQ(kr_mp_join(h, NULL), 0);
	KT_EQ(kr_mp_join(l, NULL), 0);
	KT_EQ(holder_rounds, 200000);
	KT_EQ(mu.state, 0);
	KT_EQ(kr_mutex_destroy(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- condition variables ---------------- */

static kr_cond cv[2];
static int turn;
static char seq[4001];
static int nseq;

static void *ponger(void *a)
{
	int me = (int)(uintptr_t)a;
	KT_EQ(kr_mutex_lock(&mu), 0);
	for (int i = 0; i < 2000; i++) {
		while (turn != me)
			KT_EQ(kr_cond_wait(&cv[me], &mu), 0);
		seq[nseq++] = (char)('a' + me);
		turn = !me;
		KT_EQ(kr_cond_signal(&cv[!me]), 0);
	}
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return NULL;
}

/* Seed 000 Table 4's program: two microprocesses, one monitor, two
 * condition variables, on 2 VPs; the turns strictly alternate. */
static void condvar_pingpong_alternates_on_two_vps(void)
{
	init(2);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	kr_cond_init(&cv[1]);
	turn = 0;
	nseq = 0;
	run_all(2, ponger, index_arg);
	KT_EQ(nseq, 4000);
	for (int i = 0; i < 4000; i++)
		KT_EQ(seq[i], 'a' + i % 2);
	KT_EQ(kr_fini(), 0);
}

static int flag, seen;

static void *cond_waiter(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	while (!flag)
		KT_EQ(kr_cond_wait(&cv[0], &mu), 0);
	/* we own the monitor again, and see what the signaller did after
	 * signalling but before it left */
	seen = flag;
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return a;
}

static void signalled_waiter_wakes_owning_the_mutex(void)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	flag = 0;
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, cond_waiter, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_mutex_lock(&mu), 0);
	flag = 1;
	KT_EQ(kr_cond_signal(&cv[0]), 0);
	KT_EQ(kr_cond_destroy(&cv[0]), 0); /* nobody waits on it now */
	kr_mp_yield(); /* the waiter is on the mutex: it cannot run yet */
	KT_EQ(seen, 0);
	flag = 2;
	KT_CHECK(mu.moved.head); /* it waits on the mutex, on its owner's list */
	KT_EQ(mu.state & 1, 0);
	KT_EQ(kr_mutex_unlock(&mu), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(seen, 2);
	KT_EQ(kr_fini(), 0);
}

static uint32_t woke, bcast_waiting;
static void *bcast_waiter(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	__atomic_fetch_add(&bcast_waiting, 1, __ATOMIC_RELAXED); /* under mu */
	while (!flag)
		KT_EQ(kr_cond_wait(&cv[0], &mu), 0);
	woke++;
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return a;
}

static void *foreign_broadcaster(void *a)
{
	/* all 500 have counted themselves holding mu, so with mu all wait */
	KT_WAIT(__atomic_load_n(&bcast_waiting, __ATOMIC_RELAXED) == 500, kt_nap_us(1000));
	KT_WAIT(kr_mutex_trylock(&mu) == 0, kt_nap_us(100));
	flag = 1;
	int e = kr_cond_broadcast(&cv[0]);
	e |= kr_mutex_unlock(&mu);
	return (void *)(intptr_t)e;
}

/* A thread that is no VP takes the monitor with trylock and broadcasts:
 * all 500 waiters on 2 VPs wake, each holding the mutex in turn. */
static void broadcast_from_a_foreign_thread_wakes_all(void)
{
	init(2);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	flag = 0;
	woke = 0;
	pthread_t t;
	pthread_create(&t, NULL, foreign_broadcaster, NULL);
	run_all(500, bcast_waiter, NULL);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(woke, 500);
	KT_EQ(kr_fini(), 0);
}

static void cond_timedwait_times_out_holding_the_mutex(void)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	KT_EQ(kr_cond_wait(&cv[0], &mu), EPERM); /* mutex not held */
	KT_EQ(kr_mutex_lock(&mu), 0);
	uint64_t t0 = kr_now();
	KT_EQ(kr_cond_timedwait(&cv[0], &mu, t0 + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 2 * MS);
	KT_EQ(kr_mutex_trylock(&mu), EBUSY);
	KT_EQ(kr_mutex_unlock(&mu), 0); /* held again by us */
	KT_EQ(kr_cond_destroy(&cv[0]), 0); /* the timed-out waiter left */
	KT_EQ(kr_cond_signal(&cv[0]), EINVAL);
	KT_EQ(kr_mutex_lock(&mu), 0);
	KT_EQ(kr_cond_wait(&cv[0], &mu), EINVAL);
	KT_EQ(kr_mutex_unlock(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

static void cond_destroy_while_waited_on_is_ebusy(void)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	flag = 0;
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, cond_waiter, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_cond_destroy(&cv[0]), EBUSY);
	KT_EQ(kr_mutex_lock(&mu), 0);
	flag = 1;
	KT_EQ(kr_cond_signal(&cv[0]), 0);
	KT_EQ(kr_mutex_unlock(&mu), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* The order in which microprocesses got mu: waiters 'a'.., lockers 'A'.. */
static char got[8];
static int ngot;

static void *ordered_cond_waiter(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	while (!flag)
		KT_EQ(kr_cond_wait(&cv[0], &mu), 0);
	got[ngot++] = (char)(uintptr_t)a;
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return NULL;
}

static void *ordered_locker(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	got[ngot++] = (char)(uintptr_t)a;
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return NULL;
}

/* On one VP: three condition waiters 'a', 'b', 'c'; the owner of mu
 * signals one of them, a locker 'A' queues on mu, the owner broadcasts
 * (`signal_first`), or broadcasts before 'A' queues.  Each gets mu in the
 * order it began to wait for mu. */
static void mutex_order_of(int signal_first, const char *want)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	flag = 0;
	ngot = 0;
	memset(got, 0, sizeof got);
	kr_mp *m[4];
	for (int i = 0; i < 3; i++) {
		KT_EQ(kr_mp_create(&m[i], NULL, ordered_cond_waiter, (void *)(uintptr_t)('a' + i)), 0);
		kr_mp_yield(); /* it waits on cv[0] */
	}
	KT_EQ(kr_mutex_lock(&mu), 0);
	flag = 1;
	if (signal_first)
		KT_EQ(kr_cond_signal(&cv[0]), 0);
	else
		KT_EQ(kr_cond_broadcast(&cv[0]), 0);
	KT_EQ(kr_mp_create(&m[3], NULL, ordered_locker, (void *)(uintptr_t)'A'), 0);
	kr_mp_yield(); /* 'A' waits on mu */
	KT_CHECK(mu.state & 1);
	KT_EQ(kr_cond_broadcast(&cv[0]), 0);
	KT_EQ(kr_mutex_destroy(&mu), EBUSY);
	KT_EQ(ngot, 0);
	KT_EQ(kr_mutex_unlock(&mu), 0);
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(strcmp(got, want), 0);
	KT_EQ(mu.state, 0);
	KT_CHECK(!mu.moved.head && !mu.q.head);
	KT_EQ(kr_mutex_destroy(&mu), 0);
	KT_EQ(kr_fini(), 0);
}

/* A waiter signalled by the owner of its mutex waits on the owner's own
 * list (monitor.c), not in the mutex's queue: the order in which waiters
 * and lockers get the mutex is still the order they began to wait for it. */
static void signalled_waiters_and_lockers_get_the_mutex_in_fifo_order(void)
{
	mutex_order_of(1, "aAbc"); /* 'b', 'c' are signalled after 'A' queued */
	mutex_order_of(0, "abcA"); /* all three before 'A' */
}

static void *timed_cond_waiter(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	int err = kr_cond_timedwait(&cv[0], &mu, kr_now() + 2 * MS);
	seen = flag; /* mu held again */
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return (void *)(intptr_t)err;
}

/* A waiter signalled before its deadline, whose deadline passes while
 * the signaller still holds the mutex, returns 0, owning the mutex. */
static void signalled_timed_waiter_waits_for_the_mutex_past_its_deadline(void)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	flag = seen = 0;
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, timed_cond_waiter, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_mutex_lock(&mu), 0);
	KT_EQ(kr_cond_signal(&cv[0]), 0);
	KT_EQ(kr_mp_sleep_for(5 * MS), 0); /* the waiter's deadline passes */
	flag = 1;
	KT_EQ(kr_mutex_unlock(&mu), 0);
	void *r;
	KT_EQ(kr_mp_join(w, &r), 0);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(seen, 1);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- barriers ---------------- */

static kr_barrier bar;
static uint32_t serial[100], arrived[100];

static void *barrier_runner(void *a)
{
	for (int r = 0; r < 100; r++) {
		__atomic_fetch_add(&arrived[r], 1, __ATOMIC_RELAXED);
		int last = 9;
		KT_EQ(kr_barrier_wait(&bar, &last), 0);
		KT_CHECK(last == 0 || last == 1);
		/* nobody passes round r before all have arrived at it */
		KT_EQ(__atomic_load_n(&arrived[r], __ATOMIC_RELAXED), 16);
		if (last)
			__atomic_fetch_add(&serial[r], 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void barrier_rounds_hold_everyone_with_one_serial_each(void)
{
	init(2);
	KT_EQ(kr_barrier_init(&bar, 0), EINVAL);
	KT_EQ(kr_barrier_init(&bar, 16), 0);
	run_all(16, barrier_runner, NULL);
	for (int r = 0; r < 100; r++)
		KT_EQ(serial[r], 1);
	KT_EQ(kr_barrier_destroy(&bar), 0);
	KT_EQ(kr_barrier_wait(&bar, NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- channels ---------------- */

static kr_chan ch;
static uint64_t sum_recv;

static void *sender(void *a)
{
	for (uint64_t i = 1; i <= 1000; i++) {
		uint64_t v = i * 1000 + (uintptr_t)a;
		KT_EQ(kr_chan_send(&ch, &v), 0);
	}
	return NULL;
}

static void *receiver(void *a)
{
	uint64_t last[8] = {0};
	for (int i = 0; i < 1000; i++) {
		uint64_t v;
		KT_EQ(kr_chan_recv(&ch, &v), 0);
		/* each sender's values arrive in the order it sent them */
		KT_CHECK(v / 1000 > last[v % 1000]);
		last[v % 1000] = v / 1000;
		__atomic_fetch_add(&sum_recv, v, __ATOMIC_RELAXED);
	}
	return a;
}

static void chan_run(size_t cap)
{
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), cap), 0);
	sum_recv = 0;
	kr_mp *m[16];
	for (uintptr_t i = 0; i < 8; i++) {
		KT_EQ(kr_mp_create(&m[i], &small, sender, (void *)i), 0);
		KT_EQ(kr_mp_create(&m[8 + i], &small, receiver, NULL), 0);
	}
	for (int i = 0; i < 16; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(sum_recv, 8 * 1000ull * 1001 / 2 * 1000 + 1000ull * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7));
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static void unbuffered_chan_delivers_everything_in_order(void) { chan_run(0); }
static void bounded_chan_delivers_everything_in_order(void) { chan_run(16); }

/* Elements of every size arrive whole: sizes copied inline (4, 8, 16) and
 * others up to the largest, handed to a waiting partner or passed through
 * the ring, on 2 VPs.
 * Byte j of element i is (i * 31 + j) & 0xff, plus the element size. */
static size_t esize_now;
/* The receiver's element lies 16 bytes past the sender's modulo 4 KiB: a
 * direct hand-off of a large element then takes copy.h's pieces. */
static _Alignas(4096) unsigned char send_e[KR_CHAN_ESIZE_MAX + 1],
	recv_e[KR_CHAN_ESIZE_MAX + 17], want_e[KR_CHAN_ESIZE_MAX];

static void fill(unsigned char *e, int i)
{
	for (size_t j = 0; j < esize_now; j++)
		e[j] = (unsigned char)(i * 31 + j + esize_now);
}

static void *send_sized(void *a)
{
	unsigned char *e = send_e;
	for (int i = 0; i < 300; i++) {
		fill(e, i);
		KT_EQ(kr_chan_send(&ch, e), 0);
		if (i % 7 == 0)
			kr_mp_yield(); /* let the receiver wait now and then */
	}
	return a;
}

static void *recv_sized(void *a)
{
	unsigned char *e = recv_e + 16;
	for (int i = 0; i < 300; i++) {
		memset(e, 0xee, esize_now + 1);
		KT_EQ(kr_chan_recv(&ch, e), 0);
		fill(want_e, i);
		KT_EQ(memcmp(e, want_e, esize_now), 0);
		KT_EQ(e[esize_now], 0xee); /* nothing past the element */
		if (i % 5 == 0)
			kr_mp_yield(); /* let the sender wait now and then */
	}
	return a;
}

static void chan_elements_of_every_size_arrive_whole(void)
{
	static const size_t sizes[] = {1, 3, 4, 8, 12, 16, 24, 100, 5000, KR_CHAN_ESIZE_MAX};
	init(2);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		for (size_t cap = 0; cap <= 3; cap += 3) {
			esize_now = sizes[k];
			KT_EQ(kr_chan_init(&ch, esize_now, cap), 0);
			kr_mp *m[2];
			KT_EQ(kr_mp_create(&m[0], &small, send_sized, NULL), 0);
			KT_EQ(kr_mp_create(&m[1], &small, recv_sized, NULL), 0);
			for (int i = 0; i < 2; i++)
				KT_EQ(kr_mp_join(m[i], NULL), 0);
			KT_EQ(kr_chan_destroy(&ch), 0);
		}
	KT_EQ(kr_fini(), 0);
}

static uint64_t sum_sent;
static uint32_t n_sent, n_recv;

static void *sender_timed(void *a)
{
	for (uint64_t i = 1; i <= 20; i++) {
		uint64_t v = i * 10000 + (uintptr_t)a;
		int e = kr_chan_timedsend(&ch, &v, kr_now() + ((uintptr_t)a % 5) * 50000);
		if (e == ETIMEDOUT)
			continue;
		KT_EQ(e, 0);
		__atomic_fetch_add(&sum_sent, v, __ATOMIC_RELAXED);
		__atomic_fetch_add(&n_sent, 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void *receiver_timed(void *a)
{
	for (int i = 0; i < 20; i++) {
		uint64_t v;
		int e = kr_chan_timedrecv(&ch, &v, kr_now() + ((uintptr_t)a % 5) * 50000);
		if (e == ETIMEDOUT)
			continue;
		KT_EQ(e, 0);
		__atomic_fetch_add(&sum_recv, v, __ATOMIC_RELAXED);
		__atomic_fetch_add(&n_recv, 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void *chan_timed_party(void *a)
{
	return ((uintptr_t)a & 1 ? sender_timed : receiver_timed)((void *)((uintptr_t)a >> 1));
}

/* 1,000 senders and 1,000 receivers on an unbuffered channel, all with
 * deadlines, on 2 VPs: what was sent is exactly what was received. */
static void chan_timed_ops_add_up_on_two_vps(void)
{
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	sum_sent = sum_recv = 0;
	n_sent = n_recv = 0;
	run_all(2000, chan_timed_party, index_arg);
	KT_EQ(n_sent, n_recv);
	KT_EQ(sum_sent, sum_recv);
	KT_CHECK(n_sent > 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

/* A served waiter that ends before its server's wakeup.  The waiter sees
 * DONE as soon as its server stores it; another wakeup (or a deadline) can
 * let it return, end and be joined before the server's own wakeup comes,
 * and that server's post or send must still report 0.  The window is a few
 * instructions, so the test stops the server there: a hardware breakpoint
 * on the wakeup's entry (perf_event_open with sigtrap) holds the server, a
 * foreign thread, in its SIGTRAP handler until the waiter has been joined.
 * Found by chan_timed_ops_add_up_on_two_vps under qemu, where a send
 * reported ESRCH once. */
#if defined(__x86_64__)
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>

int kr__wake_waiter(kr_mp *mp); /* the servers' wakeup (core/internal.h) */

static uint32_t held, released;

static void hold_server(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	__atomic_store_n(&held, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
		nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
}

/* A breakpoint on kr__wake_waiter's entry for the calling thread, or -1. */
static int break_at_wakeup(void)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof a,
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = (uintptr_t)kr__wake_waiter,
		.bp_len = sizeof(long),
		.sample_period = 1,
		.sigtrap = 1,
		.remove_on_exec = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static void *serve_held(void *what)
{
	int fd = break_at_wakeup();
	if (fd < 0)
		return (void *)(intptr_t)-errno;
	uint64_t v = 7;
	int r = what == &sem ? kr_sem_post(&sem) : kr_chan_trysend(&ch, &v);
	close(fd);
	return (void *)(intptr_t)r;
}

static void *wait_sem(void *a)
{
	KT_EQ(kr_sem_wait(&sem), 0);
	return a;
}

static void *wait_chan(void *a)
{
	uint64_t v = 0;
	KT_EQ(kr_chan_recv(&ch, &v), 0);
	KT_EQ(v, 7);
	return a;
}

/* A server that SIGTRAP holds at its wakeup (hold_server), one VP and
 * the semaphore; skipped without hardware breakpoints. */
static void held_server_setup(void)
{
	struct sigaction sa = {.sa_sigaction = hold_server, .sa_flags = SA_SIGINFO};
	KT_EQ(sigaction(SIGTRAP, &sa, NULL), 0);
	int fd = break_at_wakeup();
	if (fd < 0)
		KT_SKIP("no hardware breakpoints for this thread (perf_event_open)");
	close(fd);
	init(1);
	KT_EQ(kr_sem_init(&sem, 0), 0);
}

static void served_waiter_ending_first_costs_its_server_nothing(void)
{
	held_server_setup();
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	void *(*waiter[2])(void *) = {wait_sem, wait_chan};
	void *what[2] = {&sem, &ch};
	for (int k = 0; k < 2; k++) {
		held = released = 0;
		kr_mp *w;
		KT_EQ(kr_mp_create(&w, &small, waiter[k], NULL), 0);
		KT_EQ(kr_mp_yield(), 0); /* w runs and blocks (one VP, FIFO) */
		pthread_t t;
		KT_EQ(pthread_create(&t, NULL, serve_held, what[k]), 0);
		/* until the server is held at its wakeup */
		KT_WAIT(__atomic_load_n(&held, __ATOMIC_ACQUIRE), kr_mp_sleep_for(100000));
		KT_EQ(kr_mp_unpark(w), 0); /* w finds its wait served */
		KT_EQ(kr_mp_join(w, NULL), 0);
		KT_EQ(kr_mp_unpark(w), ESRCH); /* w is gone */
		__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
		void *r;
		pthread_join(t, &r);
		KT_EQ((intptr_t)r, 0);
	}
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static int parked_and_back;

static void *park_then_note(void *a)
{
	kr_mp_park();
	parked_and_back = 1;
	return a;
}

/* The same held server, whose waiter ends and is joined, and a new
 * microprocess that parks in the waiter's record (the stack cache is
 * LIFO) before the server's wakeup comes: the wakeup carries the ended
 * waiter's generation, and the new microprocess stays parked. */
static void late_wakeup_spares_the_next_microprocess_in_its_record(void)
{
	held_server_setup();
	held = released = 0;
	kr_mp *w, *next;
	KT_EQ(kr_mp_create(&w, &small, wait_sem, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* w blocks on sem */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, serve_held, &sem), 0);
	/* until the server is held at its wakeup */
	KT_WAIT(__atomic_load_n(&held, __ATOMIC_ACQUIRE), kr_mp_sleep_for(100000));
	KT_EQ(kr_mp_unpark(w), 0); /* w finds its wait served and ends */
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_mp_create(&next, &small, park_then_note, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* next parks, where w was */
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_mp_yield(), 0);
	KT_EQ(parked_and_back, 0);
	KT_EQ(kr_mp_unpark(next), 0);
	KT_EQ(kr_mp_join(next, NULL), 0);
	KT_EQ(parked_and_back, 1);
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_fini(), 0);
}
#else
static void served_waiter_ending_first_costs_its_server_nothing(void)
{
	KT_SKIP("needs x86-64's hardware breakpoints (qemu-user has none)");
}

static void late_wakeup_spares_the_next_microprocess_in_its_record(void)
{
	KT_SKIP("needs x86-64's hardware breakpoints (qemu-user has none)");
}
#endif

static void *recv_one(void *a)
{
	uint64_t v;
	return (void *)(intptr_t)kr_chan_recv(a, &v);
}

static void chan_close_drains_then_reports_epipe(void)
{
	init(1);
	kr_chan c;
	KT_EQ(kr_chan_init(&c, 0, 4), EINVAL);
	KT_EQ(kr_chan_init(&c, KR_CHAN_ESIZE_MAX + 1, 4), EINVAL);
	KT_EQ(kr_chan_init(&c, 8, (size_t)1 << 40), EINVAL);
	KT_EQ(kr_chan_init(&c, 8, 2), 0);
	uint64_t v = 1, out = 0;
	KT_EQ(kr_chan_tryrecv(&c, &out), EAGAIN);
	KT_EQ(kr_chan_trysend(&c, &v), 0);
	v = 2;
	KT_EQ(kr_chan_send(&c, &v), 0);
	KT_EQ(kr_chan_trysend(&c, &v), EAGAIN); /* full */
	uint64_t t0 = kr_now();
	KT_EQ(kr_chan_timedsend(&c, &v, t0 + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 2 * MS);
	KT_EQ(kr_chan_close(&c), 0);
	KT_EQ(kr_chan_close(&c), EPIPE);
	KT_EQ(kr_chan_send(&c, &v), EPIPE);
	KT_EQ(kr_chan_recv(&c, &out), 0);
	KT_EQ(out, 1);
	KT_EQ(kr_chan_recv(&c, &out), 0);
	KT_EQ(out, 2);
	KT_EQ(kr_chan_recv(&c, &out), EPIPE); /* closed and drained */
	KT_EQ(kr_chan_destroy(&c), 0);
	KT_EQ(kr_chan_recv(&c, &out), EINVAL);

	/* a blocked receiver: destroy refuses, close wakes it with EPIPE */
	KT_EQ(kr_chan_init(&c, 8, 0), 0);
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, NULL, recv_one, &c), 0);
	kr_mp_yield();
	KT_EQ(kr_chan_destroy(&c), EBUSY);
	t0 = kr_now();
	KT_EQ(kr_chan_timedrecv(&c, &out, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(kr_chan_close(&c), 0);
	void *res;
	KT_EQ(kr_mp_join(r, &res), 0);
	KT_EQ((intptr_t)res, EPIPE);
	KT_EQ(kr_chan_destroy(&c), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- streams ---------------- */

static kr_stream st;
enum { STREAM_BYTES = 1 << 20 };

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 9)); }

static void *stream_writer(void *a)
{
	static unsigned char buf[7000];
	size_t off = 0, k = 1;
	while (off < STREAM_BYTES) {
		size_t n = (k = k * 1103515245 + 12345) % sizeof buf + 1;
		if (n > STREAM_BYTES - off)
			n = STREAM_BYTES - off;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		size_t done;
		KT_EQ(kr_stream_write(&st, buf, n, &done), 0);
		KT_EQ(done, n);
		off += n;
	}
	KT_EQ(kr_stream_close_write(&st), 0);
	return a;
}

static void *stream_reader(void *a)
{
	static unsigned char buf[5000];
	size_t off = 0, k = 7, got;
	for (;;) {
		size_t n = (k = k * 1103515245 + 12345) % sizeof buf + 1;
		KT_EQ(kr_stream_read(&st, buf, n, &got), 0);
		if (!got)
			break; /* end of stream */
		KT_CHECK(got <= n);
		for (size_t i = 0; i < got; i++)
			KT_EQ(buf[i], pattern(off + i));
		off += got;
	}
	KT_EQ(off, STREAM_BYTES);
	return a;
}

static void stream_run(unsigned vps, size_t cap)
{
	init(vps);
	KT_EQ(kr_stream_init(&st, cap), 0);
	kr_mp *w, *r;
	KT_EQ(kr_mp_create(&r, NULL, stream_reader, NULL), 0);
	KT_EQ(kr_mp_create(&w, NULL, stream_writer, NULL), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(kr_stream_destroy(&st), 0);
	KT_EQ(kr_fini(), 0);
}

/* 1 MiB in random-sized writes and reads arrives whole and in order, with
 * a ring smaller than most writes (the one-copy paths) and a large one. */
static void stream_moves_bytes_in_order_through_a_small_ring(void) { stream_run(2, 100); }
static void stream_moves_bytes_in_order_through_a_large_ring(void) { stream_run(1, 65536); }

static void *stream_write_big(void *a)
{
	static unsigned char buf[10000];
	size_t done = 0;
	int e = kr_stream_write(a, buf, sizeof buf, &done);
	return (void *)(intptr_t)(e == EPIPE && done == 64 ? 1 : 0);
}

static void stream_close_gives_eof_and_epipe(void)
{
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 0), EINVAL);
	KT_EQ(kr_stream_init(&s, 64), 0);
	size_t got = 9;
	char b[16];
	uint64_t t0 = kr_now();
	KT_EQ(kr_stream_timedread(&s, b, sizeof b, &got, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(got, 0);
	char big[100] = {0};
	size_t put = 0;
	KT_EQ(kr_stream_timedwrite(&s, big, sizeof big, &put, kr_now() + 2 * MS), ETIMEDOUT);
	KT_EQ(put, 64); /* what fitted stays in */
	KT_EQ(kr_stream_timedread(&s, big, sizeof big, &got, 0), 0);
	KT_EQ(got, 64);
	KT_EQ(kr_stream_write(&s, "hello", 5, NULL), 0);
	KT_EQ(kr_stream_close_write(&s), 0);
	KT_EQ(kr_stream_write(&s, "x", 1, NULL), EPIPE);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), 0);
	KT_EQ(got, 5);
	KT_CHECK(memcmp(b, "hello", 5) == 0);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), 0);
	KT_EQ(got, 0); /* end of stream */
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), EINVAL);

	/* a writer blocked on a full ring gets EPIPE when the reader leaves,
	 * and knows how much went in */
	KT_EQ(kr_stream_init(&s, 64), 0);
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, stream_write_big, &s), 0);
	kr_mp_yield();
	KT_EQ(kr_stream_destroy(&s), EBUSY);
	KT_EQ(kr_stream_close_read(&s), 0);
	void *r;
	KT_EQ(kr_mp_join(w, &r), 0);
	KT_EQ((intptr_t)r, 1);
	KT_EQ(kr_stream_write(&s, "x", 1, NULL), EPIPE);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

/* A reader blocked on an empty stream whose read side someone else closes
 * gets EPIPE at once, with nothing read, as a read that starts then does
 * (not ETIMEDOUT at its deadline, KT_WAIT_S away). */
static void *read_a_while(void *a)
{
	char b[16];
	size_t got = 7;
	int err = kr_stream_timedread(a, b, sizeof b, &got, kr_now() + KT_WAIT_S * 1000 * MS);
	return (void *)(intptr_t)(err == EPIPE && got == 0 ? 0 : err ? err : -1);
}

static void close_read_wakes_blocked_readers_with_epipe(void)
{
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 64), 0);
	kr_mp *r[2];
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&r[i], NULL, read_a_while, &s), 0);
	KT_EQ(kr_mp_yield(), 0); /* both block on the empty ring */
	KT_EQ(kr_stream_destroy(&s), EBUSY);
	KT_EQ(kr_stream_close_read(&s), 0);
	for (int i = 0; i < 2; i++) {
		void *res;
		KT_EQ(kr_mp_join(r[i], &res), 0);
		KT_EQ((intptr_t)res, 0);
	}
	size_t got;
	char b[4];
	KT_EQ(kr_stream_read(&s, b, sizeof b, &got), EPIPE);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

/* Copies into and out of the ring at every distance, modulo 4 KiB, near
 * the one where memcpy meets 4 KiB aliasing (stream.c copies those in
 * pieces) move every byte. */
static void stream_copies_at_every_distance_arrive_whole(void)
{
	enum { N = 5000, PAGE = 4096 };
	static unsigned char src[PAGE + N], dst[PAGE + N];
	init(1);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 65536), 0);
	size_t total = 0, covered = 0;
	for (size_t d = PAGE - 70; d != 140; d = (d + 1) % PAGE) {
		uintptr_t tail = (uintptr_t)s.buf + (s.head + s.count) % s.cap;
		unsigned char *from = src + (tail - (uintptr_t)src - d) % PAGE;
		for (size_t i = 0; i < N; i++)
			from[i] = pattern(total + i);
		size_t n = 0;
		KT_EQ(kr_stream_write(&s, from, N, &n), 0);
		KT_EQ(n, N);
		uintptr_t head = (uintptr_t)s.buf + s.head;
		unsigned char *to = dst + (head + d - (uintptr_t)dst) % PAGE;
		memset(dst, 0, sizeof dst);
		KT_EQ(kr_stream_read(&s, to, N, &n), 0);
		KT_EQ(n, N);
		for (size_t i = 0; i < N; i++)
			KT_EQ(to[i], pattern(total + i));
		total += N;
		covered++;
	}
	KT_EQ(covered, 210);
	KT_EQ(kr_stream_destroy(&s), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- rendezvous ---------------- */

static kr_entry ent;

static void *server(void *a)
{
	for (long i = 0; i < (long)(uintptr_t)a; i++) {
		kr_call *c;
		KT_EQ(kr_entry_accept(&ent, &c), 0);
		long *msg = kr_call_msg(c);
		*msg += 1;
		if (i % 7 == 0)
			kr_mp_yield(); /* the caller stays blocked meanwhile */
		KT_EQ(kr_entry_reply(c, 0), 0);
	}
	return NULL;
}

static void *caller(void *a)
{
	for (long i = 0; i < 50; i++) {
		long v = i * 10;
		KT_EQ(kr_entry_call(&ent, &v), 0);
		KT_EQ(v, i * 10 + 1);
	}
	return a;
}

/* 200 callers and 2 acceptors on 2 VPs: every call is accepted once and
 * answered in place. */
static void rendezvous_answers_every_call_once(void)
{
	init(2);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_mp *s[2];
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&s[i], NULL, server, (void *)(uintptr_t)(200 * 50 / 2)), 0);
	run_all(200, caller, NULL);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(s[i], NULL), 0);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_fini(), 0);
}

/* A second reply to an answered call is refused and reaches nobody: the
 * caller has moved on, here to a second call whose waiter sits at the
 * same address, which only its own kr_call answers.  So are replies from
 * another microprocess and from a thread that is no VP. */
static int call_status[2];

static void *call_twice(void *a)
{
	long v = 1;
	call_status[0] = kr_entry_call(&ent, &v);
	v = 2;
	call_status[1] = kr_entry_call(&ent, &v);
	return a;
}

static void *reply_to(void *c) { return (void *)(intptr_t)kr_entry_reply(c, 13); }

static void *foreign_reply(void *c)
{
	return (void *)(intptr_t)(kr_entry_reply(c, 13) * 1000 + (kr_call_msg(c) != NULL));
}

static void second_reply_is_refused_and_reaches_nobody(void)
{
	init(1);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_mp *caller, *other;
	KT_EQ(kr_mp_create(&caller, NULL, call_twice, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* the first call waits */
	kr_call *c1, *c2;
	KT_EQ(kr_entry_accept(&ent, &c1), 0);
	KT_EQ(*(long *)kr_call_msg(c1), 1);
	KT_EQ(kr_entry_reply(c1, 7), 0);
	KT_EQ(kr_mp_yield(), 0); /* the caller returns, and its second call waits */
	KT_EQ(call_status[0], 7);
	KT_EQ(kr_entry_reply(c1, 9), EINVAL);
	KT_CHECK(kr_call_msg(c1) == NULL);
	KT_EQ(kr_entry_accept(&ent, &c2), 0);
	KT_EQ(*(long *)kr_call_msg(c2), 2);
	KT_EQ(kr_entry_reply(c1, 9), EINVAL); /* whatever address c2 has */
	void *r;
	KT_EQ(kr_mp_create(&other, NULL, reply_to, c2), 0);
	KT_EQ(kr_mp_join(other, &r), 0);
	KT_EQ((intptr_t)r, EINVAL); /* c2 is not other's */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, foreign_reply, c2), 0);
	KT_EQ(pthread_join(t, &r), 0);
	KT_EQ((intptr_t)r, EPERM * 1000);
	KT_EQ(kr_entry_reply(c2, 11), 0);
	KT_EQ(kr_mp_join(caller, NULL), 0);
	KT_EQ(call_status[1], 11);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_fini(), 0);
}

static uint64_t call_deadline;
static void *late_acceptor(void *a)
{
	kr_call *c;
	/* one VP: the caller waits already, not yet accepted */
	if (kr_entry_accept(&ent, &c))
		return (void *)1;
	/* past the caller's deadline: it must wait */
	KT_EQ(kr_mp_sleep_until(call_deadline + MS), 0);
	return (void *)(intptr_t)kr_entry_reply(c, 42);
}

static void rendezvous_timeouts_apply_before_acceptance_only(void)
{
	init(1);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_call *c;
	long v = 0;
	uint64_t t0 = kr_now();
	KT_EQ(kr_entry_timedaccept(&ent, &c, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(kr_entry_timedcall(&ent, &v, kr_now() + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 4 * MS);
	kr_mp *a;
	KT_EQ(kr_mp_create(&a, NULL, late_acceptor, NULL), 0);
	/* accepted as soon as it waits (the acceptor runs next), replied after
	 * its deadline */
	call_deadline = kr_now() + 200 * MS;
	KT_EQ(kr_entry_timedcall(&ent, &v, call_deadline), 42);
	KT_CHECK(kr_now() > call_deadline);
	void *r;
	KT_EQ(kr_mp_join(a, &r), 0);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_entry_accept(&ent, NULL), EINVAL);
	KT_EQ(kr_entry_reply(NULL, 0), EINVAL);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_entry_call(&ent, &v), EINVAL);
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_entry_call(&ent, &v), EPERM);
}

/* ---------------- blocked costs nothing ---------------- */

static uint32_t on_sem; /* started: about to wait */
static void *block_on_sem(void *a)
{
	__atomic_fetch_add(&on_sem, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_sem_wait(&sem), 0);
	return a;
}

/* ---------------- cancellation ---------------- */

static kr_sem csem;
static kr_mutex cmu;
static kr_cond ccv;
static kr_chan cin, cout;
static kr_stream sin_, sfull;
static kr_entry ecall, eacc;
static size_t wrote;

static void *w_sem(void *a) { (void)a; return (void *)(intptr_t)kr_sem_wait(&csem); }
static void *w_cond(void *a)
{
	(void)a;
	KT_EQ(kr_mutex_lock(&cmu), 0);
	int e = kr_cond_wait(&ccv, &cmu);
	KT_EQ(kr_mutex_unlock(&cmu), 0); /* held again, also when cancelled */
	return (void *)(intptr_t)e;
}
static void *w_recv(void *a)
{
	uint64_t v;
	(void)a;
	return (void *)(intptr_t)kr_chan_recv(&cin, &v);
}
static void *w_send(void *a)
{
	uint64_t v = 7;
	(void)a;
	return (void *)(intptr_t)kr_chan_send(&cout, &v);
}
static void *w_read(void *a)
{
	char b[8];
	size_t got;
	(void)a;
	return (void *)(intptr_t)kr_stream_read(&sin_, b, sizeof b, &got);
}
static void *w_write(void *a)
{
	(void)a;
	return (void *)(intptr_t)kr_stream_write(&sfull, "0123456789", 10, &wrote);
}
static void *w_call(void *a)
{
	long v = 0;
	(void)a;
	return (void *)(intptr_t)kr_entry_call(&ecall, &v);
}
static void *w_accept(void *a)
{
	kr_call *c;
	(void)a;
	return (void *)(intptr_t)kr_entry_accept(&eacc, &c);
}
static void *w_sleep(void *a)
{
	(void)a;
	return (void *)(intptr_t)kr_mp_sleep_for(60000 * MS);
}

static void *(*const w_fn[])(void *) = {w_sem, w_cond, w_recv, w_send, w_read,
					w_write, w_call, w_accept, w_sleep};
static uint32_t w_started;
static void *w_start(void *a)
{
	__atomic_fetch_add(&w_started, 1, __ATOMIC_RELAXED);
	return w_fn[(intptr_t)a](NULL);
}

/* One microprocess blocked in each cancellable wait: each returns
 * ECANCELED, and every object is left as if it had never waited. */
static void cancel_ends_every_cancellable_wait(void)
{
	init(1);
	KT_EQ(kr_chan_init(&cin, sizeof(uint64_t), 0), 0);
	KT_EQ(kr_chan_init(&cout, sizeof(uint64_t), 0), 0);
	KT_EQ(kr_stream_init(&sin_, 16), 0);
	KT_EQ(kr_stream_init(&sfull, 4), 0);
	enum { N = sizeof w_fn / sizeof w_fn[0] };
	kr_mp *m[N];
	for (int i = 0; i < N; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, w_start, (void *)(intptr_t)i), 0);
	/* one VP: each has started, and left it to the caller by blocking */
	KT_WAIT(__atomic_load_n(&w_started, __ATOMIC_RELAXED) == N, kr_mp_yield());
	KT_EQ(kr_cond_destroy(&ccv), EBUSY); /* really waited on */
	for (int i = 0; i < N; i++)
		KT_EQ(kr_mp_cancel(m[i]), 0);
	for (int i = 0; i < N; i++) {
		void *r;
		KT_EQ(kr_mp_join(m[i], &r), 0);
		KT_EQ((intptr_t)r, ECANCELED);
	}
	KT_EQ(wrote, 4); /* what went in before the wait stays in */
	char b[8];
	size_t got;
	KT_EQ(kr_stream_read(&sfull, b, sizeof b, &got), 0);
	KT_EQ(got, 4);
	KT_EQ(memcmp(b, "0123", 4), 0);
	long v;
	KT_EQ(kr_sem_getvalue(&csem, &v), 0);
	KT_EQ(v, 0);
	uint64_t x;
	KT_EQ(kr_chan_tryrecv(&cout, &x), EAGAIN); /* the cancelled send left nothing */
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_cond_destroy(&ccv), 0);
	KT_EQ(kr_mutex_destroy(&cmu), 0);
	KT_EQ(kr_chan_destroy(&cin), 0);
	KT_EQ(kr_chan_destroy(&cout), 0);
	KT_EQ(kr_stream_destroy(&sin_), 0);
	KT_EQ(kr_stream_destroy(&sfull), 0);
	KT_EQ(kr_entry_destroy(&ecall), 0);
	KT_EQ(kr_entry_destroy(&eacc), 0);
	KT_EQ(kr_fini(), 0);
}

static void *take_twice(void *a)
{
	(void)a;
	intptr_t r = kr_sem_wait(&csem);          /* served, then cancelled */
	r |= (intptr_t)kr_sem_wait(&csem) << 8;   /* the cancel ends this one */
	return (void *)r;
}

/* A cancel ends one wait: the next one if none is going on, and it
 * outlives waits that cannot be cancelled and waits already served. */
static void cancel_ends_exactly_one_wait(void)
{
	init(1);
	KT_EQ(kr_sem_init(&csem, 0), 0);
	KT_EQ(kr_mp_cancel(NULL), EINVAL);
	kr_mp *self = kr_mp_self();
	KT_EQ(kr_mp_cancel(self), 0);
	KT_EQ(kr_sem_post(&csem), 0);
	KT_EQ(kr_sem_wait(&csem), 0); /* no wait needed: not cancelled */
	KT_EQ(kr_mp_park_until(kr_now() + 1 * MS), 0); /* the cancel's wakeup; kept */
	KT_EQ(kr_sem_timedwait(&csem, kr_now() + 1000 * MS), ECANCELED);
	KT_EQ(kr_sem_timedwait(&csem, kr_now() + 1 * MS), ETIMEDOUT); /* used up */
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, take_twice, NULL), 0);
	kr_mp_yield(); /* m blocks */
	KT_EQ(kr_sem_post(&csem), 0); /* m is served ... */
	KT_EQ(kr_mp_cancel(m), 0);    /* ... before the cancel comes */
	void *r;
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, ECANCELED << 8);
	KT_EQ(kr_mp_cancel(m), ESRCH);
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_fini(), 0);
}

/* The stress below: thousands of microprocesses on 2 VPs with short
 * deadlines, while a canceller cancels them at random; what each object
 * hands out adds up. */
enum { SN = 1000 };
static kr_mp *sm[SN];
static uint32_t s_finished, s_cancels;

static uint64_t soon(void *a) { return kr_now() + ((uintptr_t)a % 5 + 1) * 200000; }

static void *random_canceller(void *a)
{
	uint32_t x = 777;
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		x = x * 1103515245 + 12345;
		int e = kr_mp_cancel(sm[(x >> 8) % SN]);
		KT_CHECK(e == 0 || e == ESRCH);
		if (e == 0)
			__atomic_fetch_add(&s_cancels, 1, __ATOMIC_RELEASE);
		kr_mp_sleep_for(10000); /* about one cancel in ten waits */
	}
	return a;
}

/* Create SN microprocesses of fn, `helpers` of helper and the canceller;
 * join the helpers, the canceller, then the rest. */
static void stress(void *(*fn)(void *), void *(*helper)(void *), int helpers)
{
	s_finished = s_cancels = 0;
	kr_mp *h[16], *c;
	for (uintptr_t i = 0; i < SN; i++)
		KT_EQ(kr_mp_create(&sm[i], &small, fn, (void *)i), 0);
	for (int i = 0; i < helpers; i++)
		KT_EQ(kr_mp_create(&h[i], &small, helper, (void *)(uintptr_t)i), 0);
	KT_EQ(kr_mp_create(&c, &small, random_canceller, NULL), 0);
	for (int i = 0; i < helpers; i++)
		KT_EQ(kr_mp_join(h[i], NULL), 0);
	KT_EQ(kr_mp_join(c, NULL), 0);
	for (unsigned i = 0; i < SN; i++)
		KT_EQ(kr_mp_join(sm[i], NULL), 0);
}

static void finished(void) { __atomic_fetch_add(&s_finished, 1, __ATOMIC_RELEASE); }

static uint32_t c_got, c_cancelled;

static void *cancelled_consumer(void *a)
{
	for (int i = 0; i < 10; i++) {
		int e = kr_sem_wait(&csem);
		KT_CHECK(e == 0 || e == ECANCELED);
		__atomic_fetch_add(e ? &c_cancelled : &c_got, 1, __ATOMIC_RELAXED);
	}
	finished();
	return a;
}

/* The posters start once a cancel has landed: until then the semaphore
 * is empty, so that consumer's wait (under way or to come) must block
 * and ends cancelled.  Otherwise the posters could run far enough ahead
 * that no consumer ever waits while cancels come, and the test would
 * prove nothing about cancellation. */
static void *unit_poster(void *a)
{
	while (!__atomic_load_n(&s_cancels, __ATOMIC_ACQUIRE))
		kr_mp_sleep_for(10000);
	for (int i = 0; i < SN * 10 / 8; i++) {
		KT_EQ(kr_sem_post(&csem), 0);
		if (i % 4 == 0)
			kr_mp_yield();
	}
	return a;
}

/* 1,000 consumers, a canceller picking them at random and 8 posters on
 * 2 VPs: every unit is taken once or still counted, every wait ends
 * served or cancelled. */
static void sem_units_add_up_under_cancellation_on_two_vps(void)
{
	init(2);
	KT_EQ(kr_sem_init(&csem, 0), 0);
	c_got = c_cancelled = 0;
	stress(cancelled_consumer, unit_poster, 8);
	long left;
	KT_EQ(kr_sem_getvalue(&csem, &left), 0);
	KT_EQ(c_got + c_cancelled, SN * 10);
	KT_EQ(c_got + left, SN * 10);
	KT_CHECK(c_cancelled > 0);
	fprintf(stderr, "  %u taken, %u cancelled, %ld left\n", c_got, c_cancelled, left);
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_fini(), 0);
}

/* condition variables: tokens under a monitor */
static long tokens;
static uint32_t t_got, t_gaveup;

static void *token_taker(void *a)
{
	for (int i = 0; i < 10; i++) {
		KT_EQ(kr_mutex_lock(&cmu), 0);
		int e = 0;
		while (!tokens && !e)
			e = kr_cond_timedwait(&ccv, &cmu, soon(a) + 1 * MS);
		KT_CHECK(e == 0 || e == ETIMEDOUT || e == ECANCELED);
		if (tokens) { /* a token is a token, whatever ended the wait */
			tokens--;
			t_got++;
		} else {
			t_gaveup++;
		}
		KT_EQ(kr_mutex_unlock(&cmu), 0); /* held on every return */
	}
	finished();
	return a;
}

static void *token_maker(void *a)
{
	for (int i = 0; i < SN * 10 / 8; i++) {
		KT_EQ(kr_mutex_lock(&cmu), 0);
		tokens++;
		KT_EQ(kr_cond_signal(&ccv), 0);
		KT_EQ(kr_mutex_unlock(&cmu), 0);
		if (i % 20 == 0)
			kr_mp_yield();
	}
	return a;
}

static void cond_tokens_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	tokens = 0;
	t_got = t_gaveup = 0;
	stress(token_taker, token_maker, 4);
	KT_EQ(t_got + t_gaveup, SN * 10);
	KT_EQ(t_got + tokens, 4 * (SN * 10 / 8));
	KT_CHECK(t_gaveup > 0);
	fprintf(stderr, "  %u taken, %u given up, %ld left\n", t_got, t_gaveup, tokens);
	KT_EQ(kr_cond_destroy(&ccv), 0);
	KT_EQ(kr_mutex_destroy(&cmu), 0);
	KT_EQ(kr_fini(), 0);
}

/* rendezvous: a call is answered once if accepted, never touched if not */
static uint32_t r_answered, r_gaveup, r_accepted;

static void *timed_caller(void *a)
{
	for (long i = 0; i < 10; i++) {
		long v = i;
		int e = kr_entry_timedcall(&ecall, &v, soon(a));
		if (e == 0) {
			KT_EQ(v, i + 100);
			__atomic_fetch_add(&r_answered, 1, __ATOMIC_RELAXED);
		} else {
			KT_CHECK(e == ETIMEDOUT || e == ECANCELED);
			KT_EQ(v, i);
			__atomic_fetch_add(&r_gaveup, 1, __ATOMIC_RELAXED);
		}
	}
	finished();
	return a;
}

static void *timed_acceptor(void *a)
{
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		kr_call *c;
		int e = kr_entry_timedaccept(&ecall, &c, kr_now() + 1 * MS);
		if (e)
			continue;
		*(long *)kr_call_msg(c) += 100;
		if (__atomic_add_fetch(&r_accepted, 1, __ATOMIC_RELAXED) % 5 == 0)
			kr_mp_yield(); /* the caller waits past its deadline */
		KT_EQ(kr_entry_reply(c, 0), 0);
	}
	return a;
}

static void rendezvous_calls_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	r_answered = r_gaveup = r_accepted = 0;
	stress(timed_caller, timed_acceptor, 3);
	KT_EQ(r_answered + r_gaveup, SN * 10);
	KT_EQ(r_answered, r_accepted);
	KT_CHECK(r_gaveup > 0 && r_answered > 0);
	fprintf(stderr, "  %u answered, %u given up\n", r_answered, r_gaveup);
	KT_EQ(kr_entry_destroy(&ecall), 0);
	KT_EQ(kr_fini(), 0);
}

/* streams: every byte written is read once or still in the ring */
static uint64_t b_in, b_out, v_in, v_out;

static void *timed_writer(void *a)
{
	unsigned char blk[48];
	memset(blk, (int)((uintptr_t)a % 251 + 1), sizeof blk);
	for (int i = 0; i < 10; i++) {
		size_t done = 0;
		int e = kr_stream_timedwrite(&sfull, blk, sizeof blk, &done, soon(a));
		KT_CHECK(e == 0 || e == ETIMEDOUT || e == ECANCELED);
		KT_CHECK(e ? done < sizeof blk : done == sizeof blk);
		__atomic_fetch_add(&b_in, done, __ATOMIC_RELAXED);
		__atomic_fetch_add(&v_in, done * blk[0], __ATOMIC_RELAXED);
	}
	finished();
	return a;
}

static void *timed_reader(void *a)
{
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		unsigned char b[40];
		size_t got = 0;
		int e = kr_stream_timedread(&sfull, b, sizeof b, &got, kr_now() + 1 * MS);
		KT_CHECK(e == 0 || e == ETIMEDOUT);
		KT_CHECK(!e || !got);
		__atomic_fetch_add(&b_out, got, __ATOMIC_RELAXED);
		for (size_t i = 0; i < got; i++)
			__atomic_fetch_add(&v_out, b[i], __ATOMIC_RELAXED);
	}
	return a;
}

static void stream_bytes_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	KT_EQ(kr_stream_init(&sfull, 100), 0);
	b_in = b_out = v_in = v_out = 0;
	stress(timed_writer, timed_reader, 2);
	KT_EQ(kr_stream_close_write(&sfull), 0);
	unsigned char b[256];
	size_t got;
	do { /* what is left in the ring */
		KT_EQ(kr_stream_read(&sfull, b, sizeof b, &got), 0);
		b_out += got;
		for (size_t i = 0; i < got; i++)
			v_out += b[i];
	} while (got);
	KT_EQ(b_in, b_out);
	KT_EQ(v_in, v_out);
	KT_CHECK(b_in < SN * 10 * 48); /* some writes gave up half way */
	fprintf(stderr, "  %llu of %u bytes went in\n", (unsigned long long)b_in, SN * 10 * 48);
	KT_EQ(kr_stream_destroy(&sfull), 0);
	KT_EQ(kr_fini(), 0);
}

/* 1,000 microprocesses blocked on a semaphore and the main one in a timed
 * sleep, on 2 VPs: both VPs sleep in the kernel and stay asleep. */
static int all_on_sem(void) { return __atomic_load_n(&on_sem, __ATOMIC_ACQUIRE) == 1000; }

static void blocked_microprocesses_use_no_cpu(void)
{
	init(2);
	KT_EQ(kr_sem_init(&sem, 0), 0);
	kr_mp **m = calloc(1000, sizeof *m);
	for (unsigned i = 0; i < 1000; i++)
		KT_EQ(kr_mp_create(&m[i], &small, block_on_sem, NULL), 0);
	KT_CHECK(kt_vps_idle(2, all_on_sem, 300));
	KT_EQ(kr_sem_post_n(&sem, 1000), 0);
	for (unsigned i = 0; i < 1000; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	free(m);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(sem_hands_units_to_waiters_in_fifo_order);
	KT_RUN(sem_rejects_bad_input);
	KT_RUN(sem_timedwait_times_out_and_leaves_no_trace);
	KT_RUN(sem_units_add_up_under_timeouts_on_two_vps);
	KT_RUN(mutex_excludes_across_two_vps);
	KT_RUN(unlock_after_the_last_waiter_timed_out_frees_the_mutex);
	KT_RUN(mutex_rejects_bad_input);
	KT_RUN(mutex_timedlock_times_out_and_leaves_no_trace);
	KT_RUN(mutex_timedlock_under_contention_on_two_vps);
	KT_RUN(condvar_pingpong_alternates_on_two_vps);
	KT_RUN(signalled_waiter_wakes_owning_the_mutex);
	KT_RUN(broadcast_from_a_foreign_thread_wakes_all);
	KT_RUN(cond_timedwait_times_out_holding_the_mutex);
	KT_RUN(cond_destroy_while_waited_on_is_ebusy);
	KT_RUN(signalled_waiters_and_lockers_get_the_mutex_in_fifo_order);
	KT_RUN(signalled_timed_waiter_waits_for_the_mutex_past_its_deadline);
	KT_RUN(barrier_rounds_hold_everyone_with_one_serial_each);
	KT_RUN(unbuffered_chan_delivers_everything_in_order);
	KT_RUN(bounded_chan_delivers_everything_in_order);
	KT_RUN(chan_close_drains_then_reports_epipe);
	KT_RUN(chan_timed_ops_add_up_on_two_vps);
	KT_RUN(served_waiter_ending_first_costs_its_server_nothing);
	KT_RUN(chan_elements_of_every_size_arrive_whole);
	KT_RUN(stream_moves_bytes_in_order_through_a_small_ring);
	KT_RUN(stream_moves_bytes_in_order_through_a_large_ring);
	KT_RUN(stream_close_gives_eof_and_epipe);
	KT_RUN(stream_copies_at_every_distance_arrive_whole);
	KT_RUN(rendezvous_answers_every_call_once);
	KT_RUN(rendezvous_timeouts_apply_before_acceptance_only);
	KT_RUN(cancel_ends_every_cancellable_wait);
	KT_RUN(cancel_ends_exactly_one_wait);
	KT_RUN(sem_units_add_up_under_cancellation_on_two_vps);
	KT_RUN(cond_tokens_add_up_under_timeouts_and_cancellation);
	KT_RUN(rendezvous_calls_add_up_under_timeouts_and_cancellation);
	KT_RUN(stream_bytes_add_up_under_timeouts_and_cancellation);
	KT_RUN(blocked_microprocesses_use_no_cpu);
	KT_RUN(late_wakeup_spares_the_next_microprocess_in_its_record);
	KT_RUN(second_reply_is_refused_and_reaches_nobody);
	KT_RUN(mutex_of_an_ended_owner_is_not_the_next_microprocess_in_its_record);
	KT_RUN(mutex_of_an_ended_thread_is_not_a_later_threads);
	KT_RUN(close_read_wakes_blocked_readers_with_epipe);
	return kt_finish();
}
