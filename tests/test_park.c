/* L2: park and unpark (src/core/park.c): sleep and wakeup across VPs and
 * from threads that are no VP, yield and switch_to. */
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

static void wakeup_of_ended_returns_esrch(void)
{
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_mp_unpark(m), ESRCH);
	KT_EQ(kr_mp_unpark(NULL), EINVAL);
	KT_EQ(kr_mp_cancel(m), ESRCH);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

static void wakeup_before_sleep_is_kept(void)
{
	init(1);
	KT_EQ(kr_mp_unpark(kr_mp_self()), 0);
	KT_EQ(kr_mp_unpark(kr_mp_self()), 0); /* one permit, not two */
	KT_EQ(kr_mp_park(), 0);           /* returns at once */
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, sleeper, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_mp_unpark(m), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* Strict alternation through sleep/wakeup across two VPs: a lost wakeup
 * leaves both asleep and the test times out. */
static kr_mp *pp[2];
static int turn;
static long pp_count[2];
enum { ROUNDS = 100000 };
static void *ponger(void *a)
{
	int me = (int)(intptr_t)a;
	while (!__atomic_load_n(&pp[!me], __ATOMIC_ACQUIRE))
		kr_mp_yield();
	for (int i = 0; i < ROUNDS; i++) {
		while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != me)
			kr_mp_park();
		pp_count[me]++;
		__atomic_store_n(&turn, !me, __ATOMIC_RELEASE);
		kr_mp_unpark(pp[!me]);
	}
	return NULL;
}

static void sleep_wakeup_across_vps_loses_nothing(void)
{
	init(2);
	kr_mp *a, *b;
	KT_EQ(kr_mp_create(&a, NULL, ponger, (void *)0), 0);
	__atomic_store_n(&pp[0], a, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_create(&b, NULL, ponger, (void *)1), 0);
	__atomic_store_n(&pp[1], b, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	KT_EQ(pp_count[0], ROUNDS);
	KT_EQ(pp_count[1], ROUNDS);
	KT_EQ(kr_fini(), 0);
}

static int flag;
static void *flag_sleeper(void *a)
{
	while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE))
		kr_mp_park();
	return a;
}

static kr_vp *vp0;
static void *foreign_waker(void *a)
{
	/* once the VP sleeps in the kernel: both microprocesses are parked */
	KT_WAIT(kr_vp_status(vp0) == KR_VP_SLEEPING, kt_nap_us(1000));
	__atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
	return (void *)(intptr_t)kr_mp_unpark(a);
}

static void wakeup_from_a_thread_that_is_no_vp(void)
{
	init(1);
	vp0 = kr_vp_self();
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, flag_sleeper, (void *)5), 0);
	pthread_t t;
	pthread_create(&t, NULL, foreign_waker, m);
	void *r, *e;
	KT_EQ(kr_mp_join(m, &r), 0); /* VP 0 parks until the wakeup */
	KT_EQ((uintptr_t)r, 5);
	pthread_join(t, &e);
	KT_EQ((intptr_t)e, 0);
	KT_EQ(kr_fini(), 0);
}
static void *tracer(void *a)
{
	for (int i = 0; i < 3; i++) {
		trace[tlen++] = *(char *)a;
		kr_mp_yield();
	}
	return NULL;
}

static void yield_runs_others_in_fifo_order(void)
{
	kr_config c = {.rq = &kr_rq_fifo};
	KT_EQ(kr_init(&c), 0);
	kr_mp *a, *b;
	KT_EQ(kr_mp_create(&a, NULL, tracer, "a"), 0);
	KT_EQ(kr_mp_create(&b, NULL, tracer, "b"), 0);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	trace[tlen] = 0;
	KT_CHECK(strcmp(trace, "ababab") == 0);
	KT_EQ(kr_fini(), 0);
}

static kr_mp *main_mp;

static void switch_to_runs_the_target_first(void)
{
	init(1);
	kr_mp *a, *b;
	tlen = 0;
	KT_EQ(kr_mp_create(&a, NULL, mark, "a"), 0);
	KT_EQ(kr_mp_create(&b, NULL, mark, "b"), 0);
	KT_EQ(kr_mp_switch_to(b), 0); /* b was queued behind a */
	trace[tlen++] = 'm';
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	trace[tlen] = 0;
	KT_CHECK(trace[0] == 'b');
	KT_EQ(kr_mp_switch_to(kr_mp_self()), EINVAL);
	KT_EQ(kr_mp_switch_to(NULL), EINVAL);
	KT_EQ(kr_mp_switch_to(a), ESRCH);
	KT_EQ(kr_fini(), 0);
}

static void *wake_main_then_mark(void *a)
{
	trace[tlen++] = *(char *)a;
	kr_mp_unpark(main_mp);
	return NULL;
}

static void sleep_and_wakeup_hands_over_and_sleeps(void)
{
	init(1);
	main_mp = kr_mp_self();
	kr_mp *a, *b;
	tlen = 0;
	KT_EQ(kr_mp_create(&a, NULL, sleeper, NULL), 0);
	KT_EQ(kr_mp_create(&b, NULL, wake_main_then_mark, "b"), 0);
	kr_mp_switch_to(a); /* a now sleeps, b is queued */
	/* main sleeps, a runs at once and ends, then b wakes main */
	KT_EQ(kr_mp_park_and_switch(a), 0);
	trace[tlen++] = 'm';
	trace[tlen] = 0;
	KT_CHECK(strcmp(trace, "bm") == 0);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	KT_EQ(kr_mp_park_and_switch(a), ESRCH);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(wakeup_of_ended_returns_esrch);
	KT_RUN(wakeup_before_sleep_is_kept);
	KT_RUN(sleep_wakeup_across_vps_loses_nothing);
	KT_RUN(wakeup_from_a_thread_that_is_no_vp);
	KT_RUN(yield_runs_others_in_fifo_order);
	KT_RUN(switch_to_runs_the_target_first);
	KT_RUN(sleep_and_wakeup_hands_over_and_sleeps);
	return kt_finish();
}
