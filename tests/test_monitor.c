/* L3: monitors (src/sync/monitor.c): mutexes and condition variables,
 * their order, timeouts, bad input and owners that end. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

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
	int timed = kr_mutex_lock_until(&mu, kr_now() + 2 * MS);
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
	KT_EQ(kr_mutex_lock_until(&mu, t0 + 2 * MS), ETIMEDOUT);
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
		int e = kr_mutex_lock_until(&mu, kr_now() + ((uintptr_t)a % 7) * 50000);
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
		int e = kr_mutex_lock_until(&mu, kr_now() + 100 * (kr_now() % 8));
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
	KT_EQ(kr_cond_wait_until(&cv[0], &mu, t0 + 2 * MS), ETIMEDOUT);
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

static uint64_t waiter_deadline;
static void *timed_cond_waiter(void *a)
{
	KT_EQ(kr_mutex_lock(&mu), 0);
	waiter_deadline = kr_now() + (uint64_t)(uintptr_t)a;
	int err = kr_cond_wait_until(&cv[0], &mu, waiter_deadline);
	seen = flag; /* mu held again */
	KT_EQ(kr_mutex_unlock(&mu), 0);
	return (void *)(intptr_t)err;
}

/* A waiter signalled before its deadline, whose deadline passes while
 * the signaller still holds the mutex, returns 0, owning the mutex.  The
 * signal comes once the waiter has parked, `span` before its deadline at
 * most; if it comes after it (a busy machine can hold the VP's thread
 * that long), the waiter may rightly have timed out: the round proves
 * nothing and is made again with twice the span. */
static void signalled_timed_waiter_waits_for_the_mutex_past_its_deadline(void)
{
	init(1);
	kr_mutex_init(&mu);
	kr_cond_init(&cv[0]);
	for (uint64_t span = 2 * MS;; span *= 2) {
		KT_CHECK(span < 60000 * MS);
		flag = seen = 0;
		kr_mp *w;
		KT_EQ(kr_mp_create(&w, NULL, timed_cond_waiter, (void *)(uintptr_t)span), 0);
		kr_mp_yield(); /* w waits: one VP */
		KT_EQ(kr_mutex_lock(&mu), 0);
		KT_EQ(kr_cond_signal(&cv[0]), 0);
		uint64_t signalled = kr_now();
		KT_EQ(kr_mp_sleep_until(waiter_deadline), 0); /* the waiter's deadline passes */
		flag = 1;
		KT_EQ(kr_mutex_unlock(&mu), 0);
		void *r;
		KT_EQ(kr_mp_join(w, &r), 0);
		if (signalled < waiter_deadline) { /* signalled in time: the round counts */
			KT_EQ((intptr_t)r, 0);
			KT_EQ(seen, 1);
			break;
		}
	}
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
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
	KT_RUN(mutex_of_an_ended_owner_is_not_the_next_microprocess_in_its_record);
	KT_RUN(mutex_of_an_ended_thread_is_not_a_later_threads);
	return kt_finish();
}
