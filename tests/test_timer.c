/* L2: time (src/core/timer.c, the timed parks of park.c): deadlines,
 * cancellable sleeps, and timers on busy and idle VPs. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "kt.h"
#include "kt_core.h"

static void sleep_timed_ends_at_the_deadline_or_at_a_wakeup(void)
{
	init(1);
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_park_until(t0 + 3000000), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 3000000);
	KT_EQ(kr_mp_park_until(t0), ETIMEDOUT);         /* passed already */
	KT_EQ(kr_mp_unpark(kr_mp_self()), 0);
	KT_EQ(kr_mp_park_until(kr_now() + 1000000000), 0); /* a pending permit */
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_mp_park_until(0), EPERM);
}

static kr_vp *vp0; /* where the main microprocess parks */
static void *cancel_parked(void *a)
{
	KT_WAIT(kr_vp_status(vp0) == KR_VP_SLEEPING, kt_nap_us(1000)); /* a parked */
	return (void *)(intptr_t)kr_mp_cancel(a);
}

/* A cancel ends a cancellable sleep, also from a thread that is no VP;
 * a plain wakeup does not cancel. */
static void cancel_ends_a_cancellable_sleep(void)
{
	init(1);
	vp0 = kr_vp_self();
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_park_cancellable_until(t0 + 2000000), ETIMEDOUT);
	KT_EQ(kr_mp_unpark(kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable_until(KR_FOREVER), 0);
	KT_EQ(kr_mp_cancel(kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable_until(KR_FOREVER), ECANCELED); /* pending: at once */
	KT_EQ(kr_mp_park(), 0); /* its wakeup was left as a permit: at once too */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, cancel_parked, kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable_until(KR_FOREVER), ECANCELED);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_mp_park_cancellable_until(0), EPERM);
}

static kr_vp *sleeper_vp; /* where the main microprocess parks */
static void *wake_parked(void *a)
{
	/* it has parked: this runs on its VP, or its VP went to sleep */
	KT_WAIT(kr_vp_self() == sleeper_vp || kr_vp_status(sleeper_vp) == KR_VP_SLEEPING,
		kr_mp_yield());
	kr_mp_unpark(a);
	return NULL;
}

/* A timed sleep ended by a wakeup leaves nothing behind: its timer cannot
 * end the next sleep, which lasts past the first one's deadline.  The
 * wakeup comes once the first sleep has parked, `span` before its
 * deadline at most; if it comes after it (a busy machine can hold a VP's
 * thread that long), the round proves nothing and is made again with
 * twice the span. */
static void woken_timed_sleep_leaves_no_late_timer(void)
{
	init(2);
	for (uint64_t span = 200000000;; span *= 2) {
		KT_CHECK(span < 60000000000ull);
		kr_mp *m;
		sleeper_vp = kr_vp_self();
		KT_EQ(kr_mp_create(&m, NULL, wake_parked, kr_mp_self()), 0);
		uint64_t t0 = kr_now();
		int err = kr_mp_park_until(t0 + span);
		KT_EQ(kr_mp_join(m, NULL), 0);
		if (err == ETIMEDOUT) {
			KT_EQ(kr_mp_park(), 0); /* the late wakeup, kept: at once */
			continue;
		}
		KT_EQ(err, 0);
		uint64_t until = t0 + span + span / 2;
		KT_EQ(kr_mp_park_until(until), ETIMEDOUT);
		KT_CHECK(kr_now() >= until);
		break;
	}
	KT_EQ(kr_fini(), 0);
}

static void *poke(void *a)
{
	kr_mp_unpark(a);
	return NULL;
}

/* kr_mp_sleep_for lets its time pass whatever wakes it, and keeps the wakeup. */
static void sleep_for_passes_its_time_and_keeps_wakeups(void)
{
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, poke, kr_mp_self()), 0);
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_sleep_for(5000000), 0);
	KT_CHECK(kr_now() >= t0 + 5000000);
	KT_EQ(kr_mp_park(), 0); /* the poke's permit: returns at once */
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

static uint32_t late;
static void *timed_sleeper(void *a)
{
	uint64_t d = kr_now() + (uintptr_t)a * 1000;
	if (kr_mp_park_until(d) != ETIMEDOUT || kr_now() < d)
		__atomic_fetch_add(&late, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *busy_yielder(void *a)
{
	uint64_t end = kr_now() + 50000000;
	while (kr_now() < end)
		kr_mp_yield();
	return a;
}

/* Thousands of deadlines on 2 VPs, some while every VP is idle, some while
 * microprocesses keep yielding: each sleep ends by its deadline, after it. */
static void many_deadlines_fire_on_busy_and_idle_vps(void)
{
	init(2);
	enum { N = 3000 };
	static kr_mp *m[N + 2];
	late = 0;
	kr_attr a = {.stack_size = 16384};
	for (unsigned i = 0; i < N; i++)
		KT_EQ(kr_mp_create(&m[i], &a, timed_sleeper, (void *)(uintptr_t)(i * 37 % 20000)), 0);
	KT_EQ(kr_mp_create(&m[N], &a, busy_yielder, NULL), 0);
	KT_EQ(kr_mp_create(&m[N + 1], &a, busy_yielder, NULL), 0);
	for (unsigned i = 0; i < N + 2; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(late, 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(sleep_timed_ends_at_the_deadline_or_at_a_wakeup);
	KT_RUN(cancel_ends_a_cancellable_sleep);
	KT_RUN(woken_timed_sleep_leaves_no_late_timer);
	KT_RUN(sleep_for_passes_its_time_and_keeps_wakeups);
	KT_RUN(many_deadlines_fire_on_busy_and_idle_vps);
	return kt_finish();
}
