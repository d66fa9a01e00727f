/* L2: a microprocess's life (src/core/life.c): create, exit, join and
 * detach, their bad input, stale handles and racing or cyclic joins. */
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

static void create_join_returns_result(void)
{
	init(1);
	kr_mp *m;
	void *r = NULL;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, (void *)42), 0);
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((uintptr_t)r, 42);
	KT_EQ(kr_fini(), 0);
}

static void *exit_early(void *a)
{
	kr_mp_exit((void *)7);
	return a; /* not reached */
}

static void exit_ends_the_microprocess_with_its_result(void)
{
	init(1);
	kr_mp *m;
	void *r = NULL;
	KT_EQ(kr_mp_create(&m, NULL, exit_early, (void *)1), 0);
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((uintptr_t)r, 7);
	KT_EQ(kr_mp_exit(NULL), EPERM); /* the main microprocess cannot */
	KT_EQ(kr_fini(), 0);
}

static void *add_one(void *a)
{
	kr_mp_yield();
	return (void *)((uintptr_t)a + 1);
}

static void many_create_join_on_two_vps(void)
{
	init(2);
	enum { N = 2000 };
	static kr_mp *m[N];
	for (int round = 0; round < (KT_TSAN ? 5 : 20); round++) {
		for (uintptr_t i = 0; i < N; i++)
			KT_EQ(kr_mp_create(&m[i], NULL, add_one, (void *)i), 0);
		for (uintptr_t i = 0; i < N; i++) {
			void *r;
			KT_EQ(kr_mp_join(m[i], &r), 0);
			KT_EQ((uintptr_t)r, i + 1);
		}
	}
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, 0);
	KT_EQ(kr_fini(), 0);
}

static void join_of_detached_returns_einval(void)
{
	init(1);
	kr_mp *m;
	kr_attr at = {.flags = KR_MP_DETACHED};
	KT_EQ(kr_mp_create(&m, &at, sleeper, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), EINVAL);
	KT_EQ(kr_mp_detach(m), EINVAL);
	KT_EQ(kr_mp_unpark(m), 0);
	kr_mp_yield(); /* it runs to its end and is freed */
	KT_EQ(kr_mp_join(m, NULL), ESRCH);
	KT_EQ(kr_fini(), 0);
}

static void join_of_joined_returns_esrch(void)
{
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), ESRCH);
	KT_EQ(kr_mp_detach(m), ESRCH);
	KT_EQ(kr_mp_unpark(m), ESRCH);
	KT_EQ(kr_fini(), 0);
}

static void join_of_self_returns_edeadlk(void)
{
	init(1);
	KT_EQ(kr_mp_join(kr_mp_self(), NULL), EDEADLK);
	KT_EQ(kr_mp_join(NULL, NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_mp *target;
static void *second_joiner(void *a)
{
	return (void *)(intptr_t)kr_mp_join(target, NULL);
}

static void second_joiner_returns_einval(void)
{
	init(1);
	kr_mp *j;
	void *r;
	KT_EQ(kr_mp_create(&target, NULL, sleeper, NULL), 0);
	kr_mp_yield(); /* target sleeps */
	KT_EQ(kr_mp_create(&j, NULL, second_joiner, NULL), 0);
	/* main joins first: j's join must be refused */
	KT_EQ(kr_mp_unpark(target), 0);
	KT_EQ(kr_mp_join(target, NULL), 0);
	KT_EQ(kr_mp_join(j, &r), 0);
	KT_CHECK((intptr_t)r == EINVAL || (intptr_t)r == ESRCH);
	KT_EQ(kr_fini(), 0);
}

static void detach_of_ended_frees_it(void)
{
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), 0);
	kr_mp_yield();
	kr_stats st;
	kr_stats_get(&st);
	KT_EQ(st.mps_live, 0);
	KT_EQ(kr_mp_detach(m), 0);
	KT_EQ(kr_mp_join(m, NULL), ESRCH);
	KT_EQ(kr_fini(), 0);
}

/* A detached microprocess's record goes back to its VP's stack cache once
 * the VP is off its stack: a thousand ended one after another reuse a
 * stack or two, and none is carved for each. */
static void detached_ends_reuse_their_stacks(void)
{
	init(1);
	kr_attr at = {.flags = KR_MP_DETACHED};
	kr_stats st0, st;
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &at, ret_arg, NULL), 0);
	kr_mp_yield(); /* it runs and ends */
	KT_EQ(kr_stats_get(&st0), 0);
	for (int i = 0; i < 1000; i++) {
		KT_EQ(kr_mp_create(&m, &at, ret_arg, NULL), 0);
		kr_mp_yield();
	}
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, 0);
	KT_CHECK(st.stacks_mapped - st0.stacks_mapped <= 1);
	KT_EQ(kr_fini(), 0);
}

static void create_rejects_bad_input(void)
{
	init(1);
	kr_mp *m;
	kr_attr small = {.stack_size = KR_STACK_MIN - 1};
	kr_attr huge = {.stack_size = KR_STACK_MAX + 1};
	kr_attr prio_lo = {.flags = KR_MP_PRIO, .prio = KR_PRIO_MIN - 1};
	kr_attr prio_hi = {.flags = KR_MP_PRIO, .prio = KR_PRIO_MAX + 1};
	kr_attr flags = {.flags = 1u << 20};
	KT_EQ(kr_mp_create(&m, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_mp_create(NULL, NULL, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &small, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &huge, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &prio_lo, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &prio_hi, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &flags, ret_arg, NULL), EINVAL);
	kr_attr min = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	KT_EQ(kr_mp_create(&m, &min, ret_arg, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mp_setprio(NULL, 1), EINVAL);
	KT_EQ(kr_mp_setprio(kr_mp_self(), KR_PRIO_MAX + 1), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static int parked_and_back;

static void *park_then_note(void *a)
{
	kr_mp_park();
	parked_and_back = 1;
	return a;
}

/* The old handle of the caller's own record is no more the caller's. */
static void *use_old_handle(void *old)
{
	int a = kr_mp_join(old, NULL), b = kr_mp_switch_to(old), c = kr_mp_park_and_switch(old);
	return (void *)(intptr_t)(a == ESRCH && b == ESRCH && c == ESRCH ? 0 : a * 10000 + b * 100 + c);
}

/* A joined microprocess's record goes to the next create at once (the
 * cache is LIFO): its old handle still names nothing. */
static void stale_handle_does_not_name_the_next_microprocess_in_its_record(void)
{
	init(1);
	kr_mp *old, *m;
	int p;
	void *r;
	KT_EQ(kr_mp_create(&old, NULL, ret_arg, NULL), 0);
	KT_EQ(kr_mp_join(old, NULL), 0);
	KT_EQ(kr_mp_create(&m, NULL, use_old_handle, old), 0);
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_mp_create(&m, NULL, park_then_note, (void *)5), 0);
	KT_EQ(kr_mp_yield(), 0); /* m runs and parks */
	KT_EQ(kr_mp_unpark(old), ESRCH);
	KT_EQ(kr_mp_cancel(old), ESRCH);
	KT_EQ(kr_mp_switch_to(old), ESRCH);
	KT_EQ(kr_mp_park_and_switch(old), ESRCH);
	KT_EQ(kr_mp_setprio(old, KR_PRIO_MIN), ESRCH);
	KT_EQ(kr_mp_getprio(old, &p), ESRCH);
	KT_EQ(kr_mp_detach(old), ESRCH);
	KT_EQ(kr_mp_join(old, NULL), ESRCH);
	KT_EQ(kr_mp_id(old), 0);
	KT_CHECK(kr_mp_id(m) != 0);
	KT_EQ(kr_mp_yield(), 0);
	KT_EQ(parked_and_back, 0); /* still parked: nothing reached it */
	KT_EQ(kr_mp_getprio(m, &p), 0);
	KT_EQ(p, KR_PRIO_DEFAULT);
	KT_EQ(kr_mp_unpark(m), 0);
	KT_EQ(kr_mp_join(m, &r), 0); /* still joinable: not detached */
	KT_EQ((uintptr_t)r, 5);
	KT_EQ(parked_and_back, 1);
	KT_EQ(kr_fini(), 0);
}

/* Two microprocesses on two VPs join (or one joins and one detaches) a
 * microprocess that has ended: exactly one succeeds and frees it. */
static kr_mp *race_target;
static uint32_t race_arrived, race_go;

static void *race_reap(void *detach)
{
	__atomic_add_fetch(&race_arrived, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&race_go, __ATOMIC_ACQUIRE))
		kr_mp_yield();
	return (void *)(intptr_t)(detach ? kr_mp_detach(race_target) : kr_mp_join(race_target, NULL));
}

static void racing_joins_of_an_ended_microprocess_let_one_win(void)
{
	init(2);
	for (int round = 0; round < 2000; round++) {
		KT_EQ(kr_mp_create(&race_target, NULL, ret_arg, NULL), 0);
		kr_stats st;
		do { /* until it has ended */
			KT_EQ(kr_mp_yield(), 0);
			KT_EQ(kr_stats_get(&st), 0);
		} while (st.mps_live);
		race_arrived = race_go = 0;
		kr_mp *r[2];
		void *res[2];
		for (int i = 0; i < 2; i++)
			KT_EQ(kr_mp_create(&r[i], NULL, race_reap,
					   (void *)(uintptr_t)(i && (round & 1))), 0);
		while (__atomic_load_n(&race_arrived, __ATOMIC_SEQ_CST) < 2)
			KT_EQ(kr_mp_yield(), 0);
		__atomic_store_n(&race_go, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 2; i++)
			KT_EQ(kr_mp_join(r[i], &res[i]), 0);
		KT_EQ((res[0] == 0) + (res[1] == 0), 1);
		for (int i = 0; i < 2; i++)
			KT_CHECK(res[i] == 0 || (intptr_t)res[i] == ESRCH);
	}
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, 0);
	KT_EQ(kr_fini(), 0);
}

/* Joins that would wait for themselves: A joins B joins C joins A on one
 * VP, in that order (the last gets EDEADLK, and the others' joins then
 * complete); and two microprocesses on two VPs that join each other at
 * once (at least one gets EDEADLK, and neither is left waiting). */
static kr_mp *cyc[3];
static int cyc_err[3], cyc_turn;

static void *join_next(void *a)
{
	int i = (int)(intptr_t)a;
	void *r = NULL;
	while (cyc_turn != i) /* one VP: the joins come in the order 0, 1, 2 */
		kr_mp_yield();
	cyc_turn = i + 1;
	cyc_err[i] = kr_mp_join(cyc[(i + 1) % 3], &r);
	return r;
}

static uint32_t pair_go;
static int pair_err[2];

static void *join_peer(void *a)
{
	int i = (int)(intptr_t)a;
	while (!__atomic_load_n(&pair_go, __ATOMIC_ACQUIRE))
		kr_mp_yield();
	__atomic_store_n(&pair_err[i], kr_mp_join(cyc[!i], NULL), __ATOMIC_RELEASE);
	return NULL;
}

/* A chain of CHAIN_N nested joins, each microprocess creating the next
 * and joining it: no join is taken for a cycle, and every result comes
 * back up.  The deepest one joins the first, which nobody joins yet and
 * which waits, through all the others, for the deepest: EDEADLK; then the
 * chain unwinds and main joins the first. */
enum { CHAIN_N = 3000 };
static kr_mp *chain_mp[CHAIN_N + 1];
static int chain_back_err = -1;

static void *chain_link(void *a)
{
	long d = (long)(intptr_t)a;
	if (d == CHAIN_N) {
		__atomic_store_n(&chain_back_err, kr_mp_join(chain_mp[1], NULL), __ATOMIC_RELEASE);
		return (void *)(intptr_t)d;
	}
	void *r = NULL;
	if (kr_mp_create(&chain_mp[d + 1], NULL, chain_link, (void *)(intptr_t)(d + 1)) != 0 ||
	    kr_mp_join(chain_mp[d + 1], &r) != 0)
		return (void *)(intptr_t)-1;
	return (intptr_t)r < 0 ? r : (void *)((intptr_t)r + d);
}

static void nested_joins_are_no_cycle_and_a_join_back_up_is(void)
{
	init(1);
	void *r = NULL;
	KT_EQ(kr_mp_create(&chain_mp[1], NULL, chain_link, (void *)(intptr_t)1), 0);
	while (__atomic_load_n(&chain_back_err, __ATOMIC_ACQUIRE) < 0)
		KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_mp_join(chain_mp[1], &r), 0);
	KT_EQ((long)(intptr_t)r, (long)CHAIN_N * (CHAIN_N + 1) / 2);
	KT_EQ(chain_back_err, EDEADLK);
	KT_EQ(kr_fini(), 0);
}

static void joins_that_close_a_cycle_return_edeadlk(void)
{
	init(1);
	cyc_turn = 0;
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_create(&cyc[i], NULL, join_next, (void *)(intptr_t)i), 0);
	while (cyc_turn != 3) /* 0 joins 1, 1 joins 2, 2 joins 0: EDEADLK */
		KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_mp_join(cyc[0], NULL), 0);
	KT_EQ(cyc_err[2], EDEADLK);
	KT_EQ(cyc_err[1], 0);
	KT_EQ(cyc_err[0], 0);
	KT_EQ(kr_fini(), 0);

	init(2);
	for (int round = 0; round < 1000; round++) {
		pair_go = 0;
		pair_err[0] = pair_err[1] = -1;
		for (int i = 0; i < 2; i++)
			KT_EQ(kr_mp_create(&cyc[i], NULL, join_peer, (void *)(intptr_t)i), 0);
		__atomic_store_n(&pair_go, 1, __ATOMIC_RELEASE);
		kr_stats st;
		do {
			KT_EQ(kr_mp_yield(), 0);
			KT_EQ(kr_stats_get(&st), 0);
		} while (__atomic_load_n(&pair_err[0], __ATOMIC_ACQUIRE) < 0 ||
			 __atomic_load_n(&pair_err[1], __ATOMIC_ACQUIRE) < 0);
		KT_CHECK(pair_err[0] == EDEADLK || pair_err[1] == EDEADLK);
		/* whichever its peer did not reap is main's to join */
		for (int i = 0; i < 2; i++) {
			int err = kr_mp_join(cyc[i], NULL);
			KT_CHECK(err == 0 || err == ESRCH);
		}
		KT_EQ(kr_stats_get(&st), 0);
		KT_EQ(st.mps_live, 0);
	}
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(create_join_returns_result);
	KT_RUN(exit_ends_the_microprocess_with_its_result);
	KT_RUN(many_create_join_on_two_vps);
	KT_RUN(join_of_detached_returns_einval);
	KT_RUN(join_of_joined_returns_esrch);
	KT_RUN(join_of_self_returns_edeadlk);
	KT_RUN(second_joiner_returns_einval);
	KT_RUN(detach_of_ended_frees_it);
	KT_RUN(detached_ends_reuse_their_stacks);
	KT_RUN(create_rejects_bad_input);
	KT_RUN(stale_handle_does_not_name_the_next_microprocess_in_its_record);
	KT_RUN(racing_joins_of_an_ended_microprocess_let_one_win);
	KT_RUN_T(joins_that_close_a_cycle_return_edeadlk, 60);
	KT_RUN(nested_joins_are_no_cycle_and_a_join_back_up_is);
	return kt_finish();
}
