/* L2: microprocess life cycle, sleep/wakeup, switching, keys, bad input. */
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

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* The guard-page test wants the kernel's SIGSEGV, not ASan's report of it. */
const char *__asan_default_options(void) { return "handle_segv=0"; }
#endif
#if defined(__SANITIZE_THREAD__)
/* The same for TSan, whose handler also leaves SIGSEGV's action other than
 * the default, so that karui installs no overflow report of its own. */
const char *__tsan_default_options(void) { return "handle_segv=0"; }
#endif

static void init(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

static void *ret_arg(void *a) { return a; }

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

static void *sleeper(void *a)
{
	kr_mp_park();
	return a;
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

static void *nop(void *a) { return a; }

/* A detached microprocess's record goes back to its VP's stack cache once
 * the VP is off its stack: a thousand ended one after another reuse a
 * stack or two, and none is carved for each. */
static void detached_ends_reuse_their_stacks(void)
{
	init(1);
	kr_attr at = {.flags = KR_MP_DETACHED};
	kr_stats st0, st;
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &at, nop, NULL), 0);
	kr_mp_yield(); /* it runs and ends */
	KT_EQ(kr_stats_get(&st0), 0);
	for (int i = 0; i < 1000; i++) {
		KT_EQ(kr_mp_create(&m, &at, nop, NULL), 0);
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
	KT_EQ(kr_mp_create(NULL, NULL, nop, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &small, nop, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &huge, nop, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &prio_lo, nop, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &prio_hi, nop, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &flags, nop, NULL), EINVAL);
	kr_attr min = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	KT_EQ(kr_mp_create(&m, &min, nop, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mp_setprio(NULL, 1), EINVAL);
	KT_EQ(kr_mp_setprio(kr_mp_self(), KR_PRIO_MAX + 1), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static void init_rejects_bad_input(void)
{
	kr_config c = {.vps = KR_VP_MAX + 1};
	KT_EQ(kr_init(&c), EINVAL);
	c.vps = (unsigned)-1; /* a negative count, as an unsigned */
	KT_EQ(kr_init(&c), EINVAL);
	kr_rq_ops bad = {.name = "bad"}; /* no push/pop */
	kr_config c2 = {.rq = &bad};
	KT_EQ(kr_init(&c2), EINVAL);
	KT_EQ(kr_init(NULL), 0);
	KT_EQ(kr_init(NULL), EBUSY);
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_fini(), EPERM);
	KT_EQ(kr_init(NULL), 0); /* and again after a clean stop */
	KT_EQ(kr_fini(), 0);
}

static void *off_vp(void *a)
{
	kr_mp *m;
	int *e = a;
	e[0] = kr_mp_create(&m, NULL, nop, NULL);
	e[1] = kr_mp_yield();
	e[2] = kr_mp_park();
	e[3] = kr_mp_join(kr_mp_self(), NULL);
	e[4] = kr_mp_self() == NULL ? 0 : 1;
	e[5] = kr_fini();
	e[6] = kr_key_set(0, NULL);
	return NULL;
}

static void calls_off_a_vp_return_eperm(void)
{
	init(1);
	int e[7];
	pthread_t t;
	pthread_create(&t, NULL, off_vp, e);
	pthread_join(t, NULL);
	KT_EQ(e[0], EPERM); KT_EQ(e[1], EPERM); KT_EQ(e[2], EPERM);
	KT_EQ(e[3], EPERM); KT_EQ(e[4], 0); KT_EQ(e[5], EPERM);
	KT_EQ(e[6], EPERM);
	KT_EQ(kr_fini(), 0);
}

static void *child_fini(void *a) { return (void *)(intptr_t)kr_fini(); }

static void fini_refuses_while_others_live_and_off_main(void)
{
	init(1);
	kr_mp *m, *f;
	void *r;
	KT_EQ(kr_mp_create(&m, NULL, sleeper, NULL), 0);
	kr_mp_yield();
	KT_EQ(kr_fini(), EBUSY);
	KT_EQ(kr_mp_create(&f, NULL, child_fini, NULL), 0);
	KT_EQ(kr_mp_join(f, &r), 0);
	KT_EQ((intptr_t)r, EPERM);
	KT_EQ(kr_mp_unpark(m), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

static void wakeup_of_ended_returns_esrch(void)
{
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, nop, NULL), 0);
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

static int none_to_wait_for(void) { return 1; }

/* Every microprocess asleep, on 2 VPs: both VPs sleep in the kernel and
 * stay asleep (they spin for at most KR_VP_SPIN_NS, then park). */
static void idle_process_uses_no_cpu(void)
{
	init(2);
	KT_CHECK(kt_vps_idle(2, none_to_wait_for, 300));
	KT_EQ(kr_fini(), 0);
}

static char trace[64];
static int tlen;
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
static void *mark(void *a)
{
	trace[tlen++] = *(char *)a;
	return NULL;
}

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

/* The default queue (ws) keeps one runnable microprocess per VP in a slot
 * outside its lock.  Woken ones must still run in the order they were
 * woken: a woken one goes into the slot only when nothing is queued. */
static void *sleep_then_mark(void *a)
{
	kr_mp_park();
	trace[tlen++] = *(char *)a;
	return NULL;
}

static void wakeups_run_in_their_order_on_one_vp(void)
{
	init(1);
	kr_mp *m[3];
	static const char *name[3] = {"a", "b", "c"};
	tlen = 0;
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, sleep_then_mark, (void *)name[i]), 0);
	kr_mp_yield(); /* each runs and sleeps */
	KT_EQ(tlen, 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_unpark(m[i]), 0);
	kr_mp_yield(); /* behind all three */
	trace[tlen++] = 'm';
	trace[tlen] = 0;
	KT_CHECK(strcmp(trace, "abcm") == 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* Two microprocesses that wake each other and sleep at once: one that
 * becomes runnable meanwhile must get its turn, not wait behind the pair
 * for as long as it goes on (as it would if a wakeup always took the
 * slot). */
enum { BOUNCES = 1000, LATE_AT = 10 };
static kr_mp *bn[2], *bn_late;
static int bn_turn, bn_progress, bn_round;
static void *note_round(void *a)
{
	bn_round = bn_progress;
	return a;
}

static void *bouncer(void *a)
{
	int me = (int)(intptr_t)a;
	for (int i = 0; i < BOUNCES; i++) {
		while (bn_turn != me)
			kr_mp_park();
		if (me == 0 && i == LATE_AT)
			KT_EQ(kr_mp_create(&bn_late, NULL, note_round, NULL), 0);
		bn_progress++;
		bn_turn = !me;
		kr_mp_unpark(bn[!me]);
	}
	return NULL;
}

static void a_bouncing_pair_does_not_starve_the_queue(void)
{
	init(1);
	bn_round = -1;
	KT_EQ(kr_mp_create(&bn[0], NULL, bouncer, (void *)0), 0);
	KT_EQ(kr_mp_create(&bn[1], NULL, bouncer, (void *)1), 0);
	KT_EQ(kr_mp_join(bn[0], NULL), 0);
	KT_EQ(kr_mp_join(bn[1], NULL), 0);
	KT_EQ(kr_mp_join(bn_late, NULL), 0);
	KT_EQ(bn_progress, 2 * BOUNCES);
	KT_CHECK(bn_round >= 2 * LATE_AT && bn_round <= 2 * LATE_AT + 2);
	KT_EQ(kr_fini(), 0);
}

/* A microprocess that wakes another and then waits for it without a
 * scheduling point leaves it in its VP's slot: an idle VP must take it
 * from there.  Lost, the waker spins forever (bounded here). */
static int slot_flag;
static kr_vp *slot_vp; /* where set_flag ran */
static void *set_flag(void *a)
{
	__atomic_store_n(&slot_vp, kr_vp_self(), __ATOMIC_RELEASE);
	kr_mp_park();
	__atomic_store_n(&slot_flag, 1, __ATOMIC_RELEASE);
	return a;
}

/* set_flag has parked: it ran on the VP the caller runs on now, or its VP
 * went to sleep after it (with nothing left to run). */
static int set_flag_parked(void)
{
	kr_vp *v = __atomic_load_n(&slot_vp, __ATOMIC_ACQUIRE);
	return v && (v == kr_vp_self() || kr_vp_status(v) == KR_VP_SLEEPING);
}

static void idle_vps_take_from_a_busy_vps_slot(void)
{
	init(2);
	for (int i = 0; i < 300; i++) {
		kr_mp *m;
		__atomic_store_n(&slot_flag, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&slot_vp, NULL, __ATOMIC_RELAXED);
		KT_EQ(kr_mp_create(&m, NULL, set_flag, NULL), 0);
		KT_WAIT(set_flag_parked(), kr_mp_yield());
		KT_EQ(kr_mp_unpark(m), 0);
		KT_WAIT(__atomic_load_n(&slot_flag, __ATOMIC_ACQUIRE),
			kr_cpu_relax()); /* no scheduling point */
		KT_EQ(kr_mp_join(m, NULL), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* kr_mp_switch_to reaches a microprocess in the slot as well as one in the
 * list, and the caller stays runnable behind the others. */
static void switch_to_takes_from_the_slot_too(void)
{
	init(1);
	kr_mp *a, *b;
	tlen = 0;
	KT_EQ(kr_mp_create(&a, NULL, mark, "a"), 0); /* into the slot */
	KT_EQ(kr_mp_switch_to(a), 0);                  /* the slot alone */
	trace[tlen++] = 'm';
	KT_EQ(kr_mp_create(&a, NULL, mark, "c"), 0); /* the slot */
	KT_EQ(kr_mp_create(&b, NULL, mark, "d"), 0); /* the slot; c to the list */
	KT_EQ(kr_mp_switch_to(b), 0);                  /* the slot, with a list */
	trace[tlen++] = 'n';
	trace[tlen] = 0;
	KT_CHECK(strcmp(trace, "amdcn") == 0);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* A new microprocess runs at its creator's next scheduling point, ahead of
 * what was queued, the newest first. */
static void new_microprocesses_run_next_newest_first(void)
{
	init(1);
	kr_mp *m[3];
	static const char *name[3] = {"a", "b", "c"};
	tlen = 0;
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, mark, (void *)name[i]), 0);
	kr_mp_yield(); /* behind all three */
	trace[tlen++] = 'm';
	trace[tlen] = 0;
	KT_CHECK(strcmp(trace, "cbam") == 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* A spawn tree (skynet: every microprocess makes 10 children, down to
 * 100,000 leaves; a leaf returns its number, a parent the sum of its
 * children's) runs depth first.  On one VP no more than the root and the
 * 10 children of each node on the current path are alive: 1 + 5 x 10 =
 * 51, where FIFO queues make all 111,111 before the first leaf runs.  With
 * more VPs each runs such a path, and a thief takes a pending child whose
 * subtree hangs off a path already counted; the bound allows each VP twice
 * that, for parents that wait for children taken elsewhere.  The tree
 * counts its own live microprocesses (made, not yet returning), exactly. */
/* 10^TREE_LEVELS leaves: 100,000, or 10,000 under ThreadSanitizer, whose
 * 4-VP run of the larger tree outlasts the test's alarm on a busy host */
enum { TREE_DIV = 10, TREE_LEVELS = KT_TSAN ? 4 : 5, TREE_PATH = 1 + TREE_LEVELS * TREE_DIV };
#define TREE_LEAVES (KT_TSAN ? 10000ull : 100000ull)
static long tree_live, tree_peak;

static void tree_made(void)
{
	long n = __atomic_add_fetch(&tree_live, 1, __ATOMIC_RELAXED);
	long p = __atomic_load_n(&tree_peak, __ATOMIC_RELAXED);
	while (n > p && !__atomic_compare_exchange_n(&tree_peak, &p, n, 1, __ATOMIC_RELAXED,
						     __ATOMIC_RELAXED))
		;
}

static void *tree(void *arg)
{
	uintptr_t num = (uintptr_t)arg >> 4, lvl = (uintptr_t)arg & 15, sum = 0;
	uintptr_t size = 1;
	for (uintptr_t l = 1; l < lvl; l++)
		size *= TREE_DIV;
	kr_mp *c[TREE_DIV];
	for (int i = 0; lvl && i < TREE_DIV; i++) {
		tree_made();
		KT_EQ(kr_mp_create(&c[i], NULL, tree, (void *)(((num + i * size) << 4) | (lvl - 1))),
		      0);
	}
	for (int i = 0; lvl && i < TREE_DIV; i++) {
		void *r;
		KT_EQ(kr_mp_join(c[i], &r), 0);
		sum += (uintptr_t)r;
	}
	__atomic_sub_fetch(&tree_live, 1, __ATOMIC_RELAXED);
	return (void *)(lvl ? sum : num);
}

/* The tree on `vps` VPs; the most microprocesses alive at once. */
static long tree_run(unsigned vps)
{
	init(vps);
	tree_live = tree_peak = 0;
	kr_mp *root;
	void *r;
	tree_made();
	KT_EQ(kr_mp_create(&root, NULL, tree, (void *)(uintptr_t)TREE_LEVELS), 0);
	KT_EQ(kr_mp_join(root, &r), 0);
	KT_EQ((uintptr_t)r, TREE_LEAVES * (TREE_LEAVES - 1) / 2); /* 0 + 1 + ... */
	KT_EQ(tree_live, 0);
	KT_EQ(kr_fini(), 0);
	fprintf(stderr, "  %u VPs: at most %ld alive\n", vps, tree_peak);
	return tree_peak;
}

static void a_spawn_tree_runs_depth_first_on_one_vp(void)
{
	KT_CHECK(tree_run(1) <= TREE_PATH);
}

static void a_spawn_tree_stays_shallow_on_two_and_four_vps(void)
{
	KT_CHECK(tree_run(2) <= 2 * 2 * TREE_PATH);
	KT_CHECK(tree_run(4) <= 2 * 4 * TREE_PATH);
}

/* kr_attr.udata is the microprocess's own (kr_mp_udata), and a ready-queue
 * module reads it in its push: here a FIFO that notes what it sees. */
struct udq {
	kr_mp *head, *tail;
};
static void *ud_seen[16];
static int ud_n;

static void udq_init(void *q) { *(struct udq *)q = (struct udq){0}; }

static void udq_push(void *q, kr_mp *mp)
{
	struct udq *u = q;
	if (ud_n < 16)
		ud_seen[ud_n++] = kr_mp_udata(mp);
	kr_mp_rqlink(mp)->next = NULL;
	if (u->tail)
		kr_mp_rqlink(u->tail)->next = mp;
	else
		u->head = mp;
	u->tail = mp;
}

static kr_mp *udq_pop(void *q)
{
	struct udq *u = q;
	kr_mp *mp = u->head;
	if (mp && !(u->head = kr_mp_rqlink(mp)->next))
		u->tail = NULL;
	return mp;
}

static const kr_rq_ops ud_rq = {
	.name = "udata-fifo", .size = sizeof(struct udq), .flags = KR_RQ_SHARED,
	.init = udq_init, .push = udq_push, .pop = udq_pop,
};

static void *own_udata(void *a) { return kr_mp_udata(kr_mp_self()); }

static void udata_reaches_the_microprocess_and_its_ready_queue(void)
{
	kr_config c = {.rq = &ud_rq};
	KT_EQ(kr_init(&c), 0);
	static int tag;
	kr_attr at = {.udata = &tag};
	kr_mp *a, *b;
	void *ra, *rb;
	ud_n = 0;
	KT_EQ(kr_mp_create(&a, &at, own_udata, NULL), 0);
	KT_EQ(kr_mp_create(&b, NULL, own_udata, NULL), 0);
	KT_EQ(ud_n, 2); /* both pushed as they were made */
	KT_CHECK(ud_seen[0] == &tag);
	KT_CHECK(ud_seen[1] == NULL);
	KT_CHECK(kr_mp_udata(a) == &tag);
	KT_EQ(kr_mp_join(b, &rb), 0);
	KT_EQ(kr_mp_join(a, &ra), 0); /* its record is the next one reused */
	KT_CHECK(ra == &tag);
	KT_CHECK(rb == NULL);
	KT_CHECK(kr_mp_udata(kr_mp_self()) == NULL); /* main */
	KT_CHECK(kr_mp_udata(NULL) == NULL);
	/* a record reused by a create without attributes has no udata */
	KT_EQ(kr_mp_create(&b, NULL, own_udata, NULL), 0);
	KT_EQ(kr_mp_join(b, &rb), 0);
	KT_CHECK(rb == NULL);
	KT_EQ(kr_fini(), 0);
}

static kr_key key;
static int dtor_calls;
static void dtor(void *v)
{
	KT_EQ((uintptr_t)v, 99);
	dtor_calls++;
}

static void *keyed(void *a)
{
	if (kr_key_get(key) != NULL)
		return (void *)1;
	kr_key_set(key, a);
	kr_mp_yield();
	return kr_key_get(key) == a ? NULL : (void *)2;
}

static void keys_are_per_microprocess_with_destructors(void)
{
	init(1);
	KT_EQ(kr_key_create(&key, dtor), 0);
	kr_mp *a, *b;
	void *ra, *rb;
	KT_EQ(kr_mp_create(&a, NULL, keyed, (void *)99), 0);
	KT_EQ(kr_mp_create(&b, NULL, keyed, (void *)99), 0);
	KT_EQ(kr_mp_join(a, &ra), 0);
	KT_EQ(kr_mp_join(b, &rb), 0);
	KT_CHECK(ra == NULL && rb == NULL);
	KT_EQ(dtor_calls, 2);
	KT_EQ(kr_key_set(key, (void *)3), 0);
	KT_EQ((uintptr_t)kr_key_get(key), 3);
	KT_EQ(kr_key_delete(key), 0);
	KT_CHECK(kr_key_get(key) == NULL);
	KT_EQ(kr_key_delete(key), EINVAL);
	KT_EQ(kr_key_set(key, NULL), EINVAL);
	kr_key k2;
	KT_EQ(kr_key_create(&k2, NULL), 0); /* reuses the slot, not the value */
	KT_CHECK(kr_key_get(k2) == NULL);
	KT_EQ(kr_key_create(NULL, NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static void keys_run_out_with_eagain(void)
{
	init(1);
	kr_key k;
	int n = 0;
	while (kr_key_create(&k, NULL) == 0)
		n++;
	KT_EQ(n, KR_KEYS_MAX);
	KT_EQ(kr_key_create(&k, NULL), EAGAIN);
	KT_EQ(kr_fini(), 0);
}

static int deep(int n)
{
	volatile char buf[1024];
	buf[0] = (char)n;
	return n ? deep(n - 1) + buf[0] : 0;
}

static void *overflow(void *a) { return (void *)(intptr_t)deep(1 << 20); }

static void guard_page_turns_overflow_into_sigsegv(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		init(1);
		kr_mp *m;
		kr_mp_create(&m, NULL, overflow, NULL);
		kr_mp_join(m, NULL);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

static int order[8], nord;
static void *record_prio(void *a)
{
	order[nord++] = (int)(intptr_t)a;
	return NULL;
}

static void priority_queue_runs_highest_first_and_changes_live(void)
{
	kr_config c = {.rq = &kr_rq_prio};
	KT_EQ(kr_init(&c), 0);
	KT_EQ(kr_mp_setprio(kr_mp_self(), KR_PRIO_MIN), 0);
	kr_mp *m[4];
	int prios[4] = {3, 9, 5, 9};
	for (int i = 0; i < 4; i++) {
		kr_attr at = {.flags = KR_MP_PRIO, .prio = prios[i]};
		KT_EQ(kr_mp_create(&m[i], &at, record_prio, (void *)(intptr_t)i), 0);
	}
	KT_EQ(kr_mp_setprio(m[0], 20), 0); /* queued: moves to the front */
	int p;
	KT_EQ(kr_mp_getprio(m[0], &p), 0);
	KT_EQ(p, 20);
	kr_mp_yield();
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(nord, 4);
	KT_EQ(order[0], 0); KT_EQ(order[1], 1); KT_EQ(order[2], 3); KT_EQ(order[3], 2);
	KT_EQ(kr_fini(), 0);
}

/* A ready-queue module that holds back microprocesses below the default
 * priority (pop returns NULL while only such are queued) until a reprio
 * raises them: seed 000 §4.3's scheduler (c).  LIFO lists suffice here. */
struct holdq {
	kr_mp *run, *held;
};
static unsigned hold_empty_pops; /* pops that found only held ones */

static kr_mp **hold_list(struct holdq *h, const kr_mp *mp)
{
	return kr_mp_prio(mp) >= KR_PRIO_DEFAULT ? &h->run : &h->held;
}

static void holdq_init(void *q) { *(struct holdq *)q = (struct holdq){0}; }

static void holdq_push(void *q, kr_mp *mp)
{
	kr_mp **l = hold_list(q, mp);
	kr_mp_rqlink(mp)->key = l == &((struct holdq *)q)->held;
	kr_mp_rqlink(mp)->next = *l;
	*l = mp;
}

static kr_mp *holdq_pop(void *q)
{
	struct holdq *h = q;
	kr_mp *mp = h->run;
	if (mp)
		h->run = kr_mp_rqlink(mp)->next;
	else if (h->held)
		__atomic_fetch_add(&hold_empty_pops, 1, __ATOMIC_RELAXED);
	return mp;
}

static int holdq_remove(void *q, kr_mp *mp)
{
	struct holdq *h = q;
	kr_mp **p = kr_mp_rqlink(mp)->key ? &h->held : &h->run;
	while (*p != mp)
		p = &kr_mp_rqlink(*p)->next;
	*p = kr_mp_rqlink(mp)->next;
	return 0;
}

static void holdq_reprio(void *q, kr_mp *mp, int prio)
{
	(void)prio; /* kr_mp_prio(mp) says so already */
	holdq_remove(q, mp);
	holdq_push(q, mp);
}

static const kr_rq_ops hold_rq = {
	.name = "hold", .size = sizeof(struct holdq), .flags = KR_RQ_SHARED,
	.init = holdq_init, .push = holdq_push, .pop = holdq_pop,
	.remove = holdq_remove, .reprio = holdq_reprio,
};

static void *yield_then_prio(void *a)
{
	kr_mp_yield(); /* pushed again: by the priority it has now */
	int p = -1;
	kr_mp_getprio(kr_mp_self(), &p);
	return (void *)(intptr_t)p;
}

/* kr_mp_setprio of a queued microprocess: the module's reprio sees the
 * new priority, and it stays for the pushes that follow. */
static void a_modules_reprio_sees_and_keeps_the_new_priority(void)
{
	kr_config c = {.rq = &hold_rq};
	KT_EQ(kr_init(&c), 0);
	kr_mp *m;
	kr_attr at = {.flags = KR_MP_PRIO, .prio = 3};
	KT_EQ(kr_mp_create(&m, &at, yield_then_prio, NULL), 0); /* held */
	KT_EQ(kr_mp_setprio(m, 20), 0);
	int p;
	KT_EQ(kr_mp_getprio(m, &p), 0);
	KT_EQ(p, 20);
	void *r;
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, 20);
	KT_EQ(kr_fini(), 0);
}

static void *raise_when_idle(void *a)
{
	/* the VP found only the held one in its next and in its idle
	 * path's last look, after which it parks */
	while (__atomic_load_n(&hold_empty_pops, __ATOMIC_RELAXED) < 2)
		usleep(1000);
	return (void *)(intptr_t)kr_mp_setprio(a, KR_PRIO_DEFAULT);
}

/* The only runnable microprocess is held back and the VP parks; a thread
 * that is no VP raises it: the VP wakes and runs it. */
static void raising_a_held_microprocess_wakes_an_idle_vp(void)
{
	kr_config c = {.rq = &hold_rq};
	KT_EQ(kr_init(&c), 0);
	kr_mp *m;
	kr_attr at = {.flags = KR_MP_PRIO, .prio = 3};
	KT_EQ(kr_mp_create(&m, &at, ret_arg, (void *)7), 0);
	pthread_t t;
	pthread_create(&t, NULL, raise_when_idle, m);
	void *r, *e;
	KT_EQ(kr_mp_join(m, &r), 0); /* VP 0 parks until the raise */
	KT_EQ((intptr_t)r, 7);
	pthread_join(t, &e);
	KT_EQ((intptr_t)e, 0);
	KT_EQ(kr_fini(), 0);
}

static int vps_seen(long *seen)
{
	int used = 0;
	for (int i = 0; i < KR_VP_MAX; i++)
		used += __atomic_load_n(&seen[i], __ATOMIC_RELAXED) > 0;
	return used;
}

/* Steps of work with a yield after each: 50, and more until both VPs
 * have run some, for as long as KT_WAIT_S (a VP's thread may wait long for
 * a processor on a busy machine; one that never runs fails the test). */
static void *spin_vp(void *a)
{
	long *seen = a;
	volatile unsigned long burn = 0; /* this microprocess's own */
	uint64_t end = kt_mono_ns() + KT_WAIT_S * 1000000000ull;
	for (int i = 0; i < 50 || (vps_seen(seen) < 2 && kt_mono_ns() < end); i++) {
		for (int j = 0; j < 20000; j++) /* ~10 us of work per step */
			burn += (unsigned long)j * j;
		__atomic_fetch_add(&seen[kr_vp_id(kr_vp_self())], 1, __ATOMIC_RELAXED);
		kr_mp_yield();
	}
	return NULL;
}

static void work_spreads_to_idle_vps(void)
{
	init(2);
	static long seen[KR_VP_MAX];
	kr_mp *m[16];
	for (int i = 0; i < 16; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, spin_vp, seen), 0);
	for (int i = 0; i < 16; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(vps_seen(seen), 2);
	KT_EQ(kr_fini(), 0);
}

/* Mixed operations across 4 VPs on this 2-CPU machine, so VPs are
 * preempted while holding locks: yields, nested create/join, detached
 * children, sleep/wakeup hand-offs in pairs, direct switches that may be
 * refused, priority changes.  Everything must finish, and every count must
 * add up. */
enum { SM = 400, SROUNDS = KT_TSAN ? 75 : 300 };
static kr_mp *sm[SM];
static int sm_turn[SM / 2];
static long sm_detached_done, sm_child_sum;

static void *sm_child(void *a)
{
	kr_mp_yield();
	return (void *)((intptr_t)a * 2);
}

static void *sm_detached(void *a)
{
	kr_mp_yield();
	__atomic_fetch_add(&sm_detached_done, 1, __ATOMIC_RELAXED);
	return a;
}

static void *sm_worker(void *a)
{
	int me = (int)(intptr_t)a, pair = me / 2, side = me % 2;
	kr_mp *partner = NULL;
	while (!(partner = __atomic_load_n(&sm[me ^ 1], __ATOMIC_ACQUIRE)))
		kr_mp_yield();
	unsigned r = (unsigned)me * 2654435761u;
	for (int i = 0; i < SROUNDS; i++) {
		r = r * 1103515245u + 12345u;
		switch ((r >> 16) % 5) {
		case 0:
			kr_mp_yield();
			break;
		case 1: {
			kr_mp *c;
			void *res;
			KT_EQ(kr_mp_create(&c, NULL, sm_child, (void *)(intptr_t)i), 0);
			KT_EQ(kr_mp_join(c, &res), 0);
			KT_EQ((intptr_t)res, 2 * i);
			__atomic_fetch_add(&sm_child_sum, 1, __ATOMIC_RELAXED);
			break;
		}
		case 2: {
			kr_mp *c;
			kr_attr at = {.flags = KR_MP_DETACHED | KR_MP_NOGUARD, .stack_size = 16384};
			KT_EQ(kr_mp_create(&c, &at, sm_detached, NULL), 0);
			break;
		}
		case 3: {
			kr_mp *t = __atomic_load_n(&sm[(r >> 8) % SM], __ATOMIC_ACQUIRE);
			int e = (r >> 12) & 1 ? kr_mp_switch_to(t) : kr_mp_park_and_switch(t);
			KT_CHECK(e == 0 || e == EBUSY || e == ESRCH || e == EINVAL);
			break;
		}
		default:
			KT_EQ(kr_mp_setprio(kr_mp_self(), (int)((r >> 4) % (KR_PRIO_MAX + 1))), 0);
		}
		/* a strict hand-off with the partner every round */
		while (__atomic_load_n(&sm_turn[pair], __ATOMIC_ACQUIRE) != side)
			kr_mp_park();
		__atomic_store_n(&sm_turn[pair], !side, __ATOMIC_RELEASE);
		kr_mp_unpark(partner);
	}
	return NULL;
}

/* a thread that is no VP pokes random workers with spurious wakeups */
static int sm_stop;
static void *sm_poker(void *a)
{
	unsigned r = 7;
	while (!__atomic_load_n(&sm_stop, __ATOMIC_ACQUIRE)) {
		r = r * 1103515245u + 12345u;
		kr_mp *t = __atomic_load_n(&sm[(r >> 8) % SM], __ATOMIC_ACQUIRE);
		if (t) {
			int e = kr_mp_unpark(t);
			KT_CHECK(e == 0 || e == ESRCH);
		}
		usleep(50);
	}
	return a;
}

static void mixed_run(const kr_rq_ops *rq)
{
	kr_config c = {.vps = 4, .rq = rq};
	KT_EQ(kr_init(&c), 0);
	pthread_t poker;
	pthread_create(&poker, NULL, sm_poker, NULL);
	kr_mp *m[SM];
	for (int i = 0; i < SM; i++) {
		KT_EQ(kr_mp_create(&m[i], NULL, sm_worker, (void *)(intptr_t)i), 0);
		__atomic_store_n(&sm[i], m[i], __ATOMIC_RELEASE);
	}
	for (int i = 0; i < SM; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	long detached = 0;
	kr_stats st;
	do { /* detached children may still be finishing on other VPs */
		kr_mp_yield();
		KT_EQ(kr_stats_get(&st), 0);
	} while (st.mps_live != 0);
	detached = __atomic_load_n(&sm_detached_done, __ATOMIC_RELAXED);
	KT_CHECK(detached > 0 && sm_child_sum > 0);
	/* every round did one of five things; children and detached ones were
	 * created and ended in full */
	KT_CHECK(detached + sm_child_sum <= (long)SM * SROUNDS);
	__atomic_store_n(&sm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(poker, NULL);
	KT_EQ(kr_fini(), 0);
}

/* A wakeup that finds the worker gone must see ESRCH, not a reused record:
 * the poker only runs while every worker is alive or joined-and-cached. */
static void mixed_operations_on_four_vps_add_up(void) { mixed_run(&kr_rq_ws); }
static void mixed_operations_with_shared_fifo(void) { mixed_run(&kr_rq_fifo); }
static void mixed_operations_with_shared_lifo(void) { mixed_run(&kr_rq_lifo); }
static void mixed_operations_with_priorities(void) { mixed_run(&kr_rq_prio); }

static int busy_stop;
static uint64_t busy_until;
static void *busy(void *a)
{
	/* holds its VP with no scheduling point until told to stop, or for a
	 * while at most */
	while (!__atomic_load_n(&busy_stop, __ATOMIC_ACQUIRE) && kt_mono_ns() < busy_until)
		;
	return a;
}

/* kr_fini called by the main microprocess while it runs on another VP
 * goes back to the thread that called kr_init. */
static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static void fini_from_another_vp_returns_to_the_first_thread(void)
{
	/* (not pthread_self: glibc declares it const, so a compiler may reuse
	 * its value across the migration) */
	pid_t me = tid();
	init(2);
	/* The main microprocess yields to b, which holds VP 0: VP 1 takes the
	 * main one.  If b went to VP 1 instead, or VP 1 did not look while b
	 * held VP 0, b lets go and it is tried again, b holding longer (up to
	 * half a second: a round lost to VP 1 taking b itself, which waking
	 * early does whatever the hold, is retried many times before the
	 * bound); and again if b's end took the main microprocess back to VP 0
	 * (a joiner resumes where the joined one ends). */
	uint64_t end = kt_mono_ns() + KT_WAIT_S * 1000000000ull, hold = 10000000;
	for (; kr_vp_id(kr_vp_self()) == 0; hold = hold < 500000000 ? hold * 2 : hold) {
		KT_CHECK(kt_mono_ns() < end); /* VP 1 never took the main microprocess */
		kr_mp *b;
		__atomic_store_n(&busy_stop, 0, __ATOMIC_RELAXED);
		busy_until = kt_mono_ns() + hold;
		KT_EQ(kr_mp_create(&b, NULL, busy, NULL), 0);
		KT_EQ(kr_mp_yield(), 0);
		__atomic_store_n(&busy_stop, 1, __ATOMIC_RELEASE);
		KT_EQ(kr_mp_join(b, NULL), 0);
	}
	KT_CHECK(tid() != me);
	KT_EQ(kr_fini(), 0);
	KT_EQ(tid(), me);
	KT_CHECK(kr_vp_self() == NULL);
}


/* ---------------- time ---------------- */

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
	KT_EQ(kr_mp_park_cancellable(t0 + 2000000), ETIMEDOUT);
	KT_EQ(kr_mp_unpark(kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable(KR_FOREVER), 0);
	KT_EQ(kr_mp_cancel(kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable(KR_FOREVER), ECANCELED); /* pending: at once */
	KT_EQ(kr_mp_park(), 0); /* its wakeup was left as a permit: at once too */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, cancel_parked, kr_mp_self()), 0);
	KT_EQ(kr_mp_park_cancellable(KR_FOREVER), ECANCELED);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_mp_park_cancellable(0), EPERM);
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

/* Freed stacks past the VP's cache keep their memory while the process is
 * busy (the next creates reuse them with no page fault) and give it back
 * once they stayed unused while the VPs were idle. */
static long rss_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *touch_stack(void *a)
{
	volatile char buf[32768];
	memset((char *)buf, 1, sizeof buf);
	return (void *)(uintptr_t)(buf[(uintptr_t)a % sizeof buf] + (uintptr_t)a);
}

static void stacks_left_unused_while_idle_give_their_memory_back(void)
{
	init(1);
	enum { N = 2000 };
	static kr_mp *m[N];
	kr_attr at = {.stack_size = 65536};
	long base = rss_kib();
	for (int round = 0; round < 2; round++) {
		kr_stats s0, s1, s2;
		kr_stats_get(&s0);
		for (uintptr_t i = 0; i < N; i++)
			KT_EQ(kr_mp_create(&m[i], &at, touch_stack, (void *)i), 0);
		for (int i = 0; i < N; i++)
			KT_EQ(kr_mp_join(m[i], NULL), 0);
		kr_stats_get(&s1);
		long busy = rss_kib();
		/* the VP sleeps, and wakes to trim: two periods (after a
		 * second of idleness, and the next) */
		KT_WAIT((kr_stats_get(&s2), s2.stacks_trimmed - s1.stacks_trimmed >= N - 2 * 64),
			KT_EQ(kr_mp_sleep_for(100 * 1000 * 1000), 0));
		long idle = rss_kib();
		fprintf(stderr, "  round %d: %ld KiB kept after the joins, %ld KiB once idle"
				" (%lu stacks carved, %lu trimmed in %lu calls)\n",
			round, busy - base, idle - base, s1.stacks_mapped - s0.stacks_mapped,
			s2.stacks_trimmed - s1.stacks_trimmed,
			s2.stack_trim_calls - s1.stack_trim_calls);
		KT_CHECK(busy - base >= N * 32 / 2);   /* at least half of what was touched */
		KT_CHECK(busy - idle >= N * 32 / 2);
		/* all but the VP's cache, in few calls: the regions are neighbours */
		KT_CHECK(s2.stacks_trimmed - s1.stacks_trimmed >= N - 2 * 64);
		KT_CHECK(s2.stack_trim_calls - s1.stack_trim_calls <= 100);
		if (round) /* reused, none carved */
			KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	}
	KT_EQ(kr_fini(), 0);
}

/* A storm of creates and joins on two VPs, whose VPs go idle for moments
 * between the rounds, returns no memory while it lasts: the stacks are
 * reused at once.  (Returning it whenever a VP went idle cost a madvise
 * call per few stacks.) */
static void *nothing(void *a) { return a; }

static void create_join_storm_makes_few_madvise_calls(void)
{
	init(2);
	/* (TSan keeps a fiber per live microprocess, and stops past 8128) */
	enum { ROUND = KT_TSAN ? 2000 : 10000, ROUNDS = KT_TSAN ? 5 : 10 };
	static kr_mp *m[ROUND];
	kr_stats s0, s1;
	kr_stats_get(&s0);
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < ROUND; i++)
			KT_EQ(kr_mp_create(&m[i], NULL, nothing, NULL), 0);
		for (int i = 0; i < ROUND; i++)
			KT_EQ(kr_mp_join(m[i], NULL), 0);
	}
	kr_stats_get(&s1);
	fprintf(stderr, "  %d creates and joins: %lu stacks carved, %lu madvise calls"
			" returned %lu stacks\n",
		ROUND * ROUNDS, s1.stacks_mapped - s0.stacks_mapped,
		s1.stack_trim_calls - s0.stack_trim_calls, s1.stacks_trimmed - s0.stacks_trimmed);
	/* at most a trim per period, and each finds little unused */
	KT_CHECK(s1.stack_trim_calls - s0.stack_trim_calls < 100);
	KT_EQ(kr_fini(), 0);
}

/* Size classes are created on first use and bounded in number: any number
 * of distinct sizes works, with nothing alive in between, and the second
 * time round every size reuses a stack of its class. */
static void many_stack_sizes_never_run_out_of_classes(void)
{
	init(1);
	for (int pass = 0; pass < 2; pass++) {
		kr_stats s0, s1;
		kr_stats_get(&s0);
		for (size_t size = KR_STACK_MIN; size <= 8u << 20; size += 4096 * 7) {
			for (int g = 0; g < 2; g++) {
				kr_attr at = {.stack_size = size, .flags = g ? KR_MP_NOGUARD : 0};
				kr_mp *m;
				KT_EQ(kr_mp_create(&m, &at, nothing, NULL), 0);
				KT_EQ(kr_mp_join(m, NULL), 0);
			}
		}
		kr_stats_get(&s1);
		if (pass)
			KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	}
	KT_EQ(kr_fini(), 0);
}

/* A handler installed with SA_ONSTACK runs on the VP's alternate signal
 * stack, not on the one page of the microprocess it interrupts. */
static volatile sig_atomic_t handled, handled_on_altstack;

static void note_onstack(int sig)
{
	stack_t ss;
	(void)sig;
	handled = 1;
	handled_on_altstack = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

static void *raise_usr1(void *a)
{
	KT_EQ(raise(SIGUSR1), 0);
	return a;
}

static void sa_onstack_handlers_run_on_the_vps_signal_stack(void)
{
	init(1);
	struct sigaction sa = {.sa_handler = note_onstack, .sa_flags = SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	KT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	kr_attr one_page = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &one_page, raise_usr1, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_CHECK(handled);
	KT_CHECK(handled_on_altstack);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- overflows and SIGSEGV ---------------- */

/* Run fn in a child with its stderr into buf; the child's wait status. */
static int run_child(void (*fn)(void), char *buf, size_t len)
{
	int p[2];
	KT_EQ(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		fn();
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(p[0], buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(p[0]);
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	return st;
}

static void *say_id_then_overflow(void *a)
{
	fprintf(stderr, "id %lu\n", kr_mp_id(kr_mp_self()));
	return overflow(a);
}

static void overflow_in_a_microprocess(void)
{
	init(2);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, say_id_then_overflow, NULL), 0);
	kr_mp_join(m, NULL);
}

static void overflow_message_names_the_microprocess_and_sigsegv_kills(void)
{
	char out[4096], want[128];
	int st = run_child(overflow_in_a_microprocess, out, sizeof out);
	unsigned long id;
	const char *p = strstr(out, "id ");
	KT_CHECK(p && sscanf(p, "id %lu", &id) == 1);
	snprintf(want, sizeof want, "karui: microprocess %lu overflowed its stack (64 KiB) at 0x",
		 id);
	fprintf(stderr, "  %s", strstr(out, "karui:") ? strstr(out, "karui:") : out);
	KT_CHECK(strstr(out, want));
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* A frame larger than a page, written at its low end, from a stack near
 * its end: it lands in the guard (and faults), not on the record of the
 * stack carved just below. */
static kr_mp *jumper;

static __attribute__((noinline)) int big_frame(void)
{
	volatile char buf[16384];
	buf[0] = 1;
	return buf[0];
}

static void *park_then_maybe_jump(void *a)
{
	kr_mp_park();
	if (kr_mp_self() == jumper)
		big_frame();
	return a;
}

static void large_frame_faults_in_the_guard(void)
{
	init(1);
	enum { K = 40 };
	kr_mp *m[K];
	kr_attr at = {.stack_size = 8192};
	uintptr_t stride = 8192 + KR_STACK_GUARD;
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_create(&m[i], &at, park_then_maybe_jump, NULL), 0);
	kr_mp_yield(); /* all park */
	/* one whose neighbour below is alive and parked */
	for (int i = 0; i < K && !jumper; i++)
		for (int j = 0; j < K; j++)
			if ((uintptr_t)m[j] + stride == (uintptr_t)m[i])
				jumper = m[i];
	KT_CHECK(jumper);
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_unpark(m[i]), 0);
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	_exit(3); /* not reached: the big frame faults */
}

static void large_frame_cannot_jump_the_guard_onto_the_next_stack(void)
{
	char out[4096];
	int st = run_child(large_frame_faults_in_the_guard, out, sizeof out);
	fprintf(stderr, "%s", out);
	KT_CHECK(strstr(out, "overflowed its stack (8 KiB)"));
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* karui's handler is there while karui runs, and gone after kr_fini. */
static void fini_puts_back_the_default_sigsegv_action(void)
{
	struct sigaction sa;
	init(1);
	KT_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	KT_CHECK((sa.sa_flags & SA_SIGINFO) && (sa.sa_flags & SA_ONSTACK));
	KT_EQ(kr_fini(), 0);
	KT_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	KT_CHECK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
}

/* The application's SIGSEGV handler, installed with SA_ONSTACK, runs for
 * the overflow of a microprocess on any VP, on that VP's alternate stack
 * (karui installs no handler of its own then). */
static void exit_with_vp(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	stack_t ss;
	int on = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
	_exit(on ? 50 + (int)kr_vp_id(kr_vp_self()) : 40);
}

static void overflow_with_own_handler(unsigned vp)
{
	struct sigaction sa = {.sa_sigaction = exit_with_vp, .sa_flags = SA_SIGINFO | SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	KT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	pid_t pid = fork();
	if (pid == 0) {
		init(vp + 1);
		kr_mp *m;
		KT_EQ(kr_mp_create(&m, NULL, overflow, NULL), 0);
		if (vp == 0)
			kr_mp_join(m, NULL);
		/* hold VP 0 without a scheduling point: VP 1 takes m */
		for (uint64_t end = kr_now() + KT_WAIT_S * 1000000000ull; kr_now() < end;)
			;
		_exit(3);
	}
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 50 + (int)vp);
}

static void own_sigsegv_handler_runs_for_an_overflow_on_vp_0(void) { overflow_with_own_handler(0); }
static void own_sigsegv_handler_runs_for_an_overflow_on_vp_1(void) { overflow_with_own_handler(1); }
/* ---------------- life cycle against misuse and races ---------------- */

/* Two plain threads call kr_init at once: one starts karui, the other is
 * told EBUSY, however far the first one has got. */
static pthread_barrier_t init_bar;

static void *racing_init(void *a)
{
	pthread_barrier_wait(&init_bar);
	int err = kr_init(NULL);
	pthread_barrier_wait(&init_bar); /* both have tried */
	if (err == 0)
		KT_EQ(kr_fini(), 0);
	return (void *)(intptr_t)err;
}

static void concurrent_inits_let_exactly_one_start(void)
{
	KT_EQ(pthread_barrier_init(&init_bar, NULL, 2), 0);
	for (int round = 0; round < 300; round++) {
		pthread_t t[2];
		void *r[2];
		for (int i = 0; i < 2; i++)
			KT_EQ(pthread_create(&t[i], NULL, racing_init, NULL), 0);
		for (int i = 0; i < 2; i++)
			KT_EQ(pthread_join(t[i], &r[i]), 0);
		KT_EQ((r[0] == 0) + (r[1] == 0), 1);
		KT_EQ((intptr_t)r[0] + (intptr_t)r[1], EBUSY);
	}
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
	KT_EQ(kr_mp_create(&old, NULL, nop, NULL), 0);
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
		KT_EQ(kr_mp_create(&race_target, NULL, nop, NULL), 0);
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

/* One key slot created and deleted 2^23 times, past the point where its
 * generation used to overflow the bits a key has for it: every key the
 * slot gives out can be set and read. */
static void keys_stay_valid_through_any_number_of_reuses(void)
{
	init(1);
	for (long i = 0; i < (1L << 23) + 8; i++) {
		kr_key k;
		KT_EQ(kr_key_create(&k, NULL), 0);
		if (kr_key_set(k, (void *)i) != 0 || kr_key_get(k) != (void *)i) {
			fprintf(stderr, "  key %#x of cycle %ld refused\n", k, i);
			_exit(1);
		}
		KT_EQ(kr_key_delete(k), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* The main microprocess's keys: their destructors run at kr_fini, and its
 * table goes with them, so cycles of kr_init / kr_key_set / kr_fini do
 * not grow the heap (the AddressSanitizer build checks with its leak
 * checker, whose allocator mallinfo2 does not see). */
static int main_dtor_calls;
static void main_dtor(void *v)
{
	free(v);
	main_dtor_calls++;
}

static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 0;
#else
	return mallinfo2().uordblks;
#endif
}

static void main_keys_are_destroyed_at_fini(void)
{
	enum { ROUNDS = 300 };
	size_t before = 0;
	for (int round = 0; round < ROUNDS; round++) {
		if (round == 20) /* once the allocator has settled */
			before = heap_in_use();
		init(1);
		kr_key k;
		KT_EQ(kr_key_create(&k, main_dtor), 0);
		KT_EQ(kr_key_set(k, malloc(16)), 0);
		KT_EQ(kr_fini(), 0);
		KT_EQ(main_dtor_calls, round + 1);
		KT_EQ(kr_key_delete(k), 0);
	}
	/* a leaked table per round would be 2 KiB */
	KT_CHECK(heap_in_use() < before + (ROUNDS - 20) * 2048 / 4);
#if defined(__SANITIZE_ADDRESS__)
	KT_EQ(__lsan_do_recoverable_leak_check(), 0);
#endif
}

/* Karui calls inside a blocking section: a sleep there lets its VP run
 * others, and the section goes on wherever the microprocess resumes, so
 * kr_blocking_leave finds it; one that ends inside a section ends it. */
static void *enter_and_end(void *a)
{
	KT_EQ(kr_blocking_enter(), 0);
	return a;
}

static void karui_calls_inside_a_blocking_section_keep_it_with_the_microprocess(void)
{
	init(2);
	for (int round = 0; round < 200; round++) {
		KT_EQ(kr_blocking_enter(), 0);
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
		KT_EQ(kr_mp_sleep_for(20000), 0); /* resumed by whichever VP saw the timer */
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
		KT_EQ(kr_mp_yield(), 0);
		KT_EQ(kr_blocking_leave(), 0);
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_RUNNING);
	}
	KT_EQ(kr_fini(), 0);
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, enter_and_end, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0); /* it ended on this VP, inside a section */
	KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_RUNNING);
	KT_EQ(kr_blocking_enter(), 0);
	KT_EQ(kr_blocking_leave(), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- fork ---------------- */

static kr_key fork_key;
static void exit_nine(void) { _exit(9); }

/* In the child of a fork made by a microprocess karui is stopped for good:
 * the calls for microprocesses and those that work while karui runs
 * return EPERM, kr_init EBUSY, keys and statistics EPERM; L0 has no VPs
 * and can adopt the thread afresh.  Then the microprocess's function
 * returns, which ends the child with exit (its atexit handler: status 9). */
static void *fork_and_check_the_child(void *parked)
{
	pid_t pid = fork();
	if (pid != 0)
		return (void *)(intptr_t)pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a child left by a failure dies with the test */
	kr_mp *m;
	kr_key k;
	kr_stats st;
	kr_vp *vp;
	KT_CHECK(kr_mp_self() == NULL && kr_vp_self() == NULL);
	KT_EQ(kr_mp_yield(), EPERM);
	KT_EQ(kr_mp_park(), EPERM);
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), EPERM);
	KT_EQ(kr_blocking_enter(), EPERM);
	KT_EQ(kr_mp_unpark(parked), EPERM);
	KT_EQ(kr_mp_cancel(parked), EPERM);
	KT_EQ(kr_mp_setprio(parked, 3), EPERM);
	KT_EQ(kr_fini(), EPERM);
	KT_EQ(kr_init(NULL), EBUSY);
	KT_EQ(kr_key_create(&k, NULL), EPERM);
	KT_EQ(kr_key_delete(fork_key), EPERM);
	KT_EQ(kr_stats_get(&st), EPERM);
	KT_EQ(kr_vp_count(), 0);
	KT_EQ(kr_vp_adopt(&vp), 0);
	KT_EQ(kr_vp_id(vp), 0);
	KT_EQ(kr_vp_release(), 0);
	KT_EQ(atexit(exit_nine), 0);
	return NULL;
}

static void *park_once(void *a)
{
	KT_EQ(kr_mp_park(), 0);
	return a;
}

/* ... and the parent goes on: the parked microprocess is woken, others
 * run, the key is deleted, karui stops. */
static void child_of_fork_finds_karui_stopped_and_the_parent_goes_on(void)
{
	init(2);
	KT_EQ(kr_key_create(&fork_key, NULL), 0);
	kr_mp *parked, *forker;
	void *r;
	KT_EQ(kr_mp_create(&parked, NULL, park_once, NULL), 0);
	KT_EQ(kr_mp_create(&forker, NULL, fork_and_check_the_child, parked), 0);
	KT_EQ(kr_mp_join(forker, &r), 0);
	pid_t pid = (pid_t)(intptr_t)r;
	KT_CHECK(pid > 0);
	int st = 0;
	KT_EQ(kr_blocking_enter(), 0);
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_EQ(kr_blocking_leave(), 0);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 9);
	KT_EQ(kr_mp_unpark(parked), 0);
	KT_EQ(kr_mp_join(parked, NULL), 0);
	KT_EQ(kr_mp_create(&forker, NULL, ret_arg, &st), 0);
	KT_EQ(kr_mp_join(forker, &r), 0);
	KT_CHECK(r == &st);
	KT_EQ(kr_key_delete(fork_key), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(create_join_returns_result);
	KT_RUN(stacks_left_unused_while_idle_give_their_memory_back);
	KT_RUN(create_join_storm_makes_few_madvise_calls);
	KT_RUN(many_stack_sizes_never_run_out_of_classes);
	KT_RUN(exit_ends_the_microprocess_with_its_result);
	KT_RUN(many_create_join_on_two_vps);
	KT_RUN(join_of_detached_returns_einval);
	KT_RUN(join_of_joined_returns_esrch);
	KT_RUN(join_of_self_returns_edeadlk);
	KT_RUN(second_joiner_returns_einval);
	KT_RUN(detach_of_ended_frees_it);
	KT_RUN(detached_ends_reuse_their_stacks);
	KT_RUN(create_rejects_bad_input);
	KT_RUN(init_rejects_bad_input);
	KT_RUN(calls_off_a_vp_return_eperm);
	KT_RUN(fini_refuses_while_others_live_and_off_main);
	KT_RUN(wakeup_of_ended_returns_esrch);
	KT_RUN(wakeup_before_sleep_is_kept);
	KT_RUN(sleep_wakeup_across_vps_loses_nothing);
	KT_RUN(wakeup_from_a_thread_that_is_no_vp);
	KT_RUN(idle_process_uses_no_cpu);
	KT_RUN(sa_onstack_handlers_run_on_the_vps_signal_stack);
	KT_RUN(yield_runs_others_in_fifo_order);
	KT_RUN(switch_to_runs_the_target_first);
	KT_RUN(sleep_and_wakeup_hands_over_and_sleeps);
	KT_RUN(wakeups_run_in_their_order_on_one_vp);
	KT_RUN(a_bouncing_pair_does_not_starve_the_queue);
	KT_RUN(idle_vps_take_from_a_busy_vps_slot);
	KT_RUN(switch_to_takes_from_the_slot_too);
	KT_RUN(new_microprocesses_run_next_newest_first);
	KT_RUN(a_spawn_tree_runs_depth_first_on_one_vp);
	KT_RUN(a_spawn_tree_stays_shallow_on_two_and_four_vps);
	KT_RUN(udata_reaches_the_microprocess_and_its_ready_queue);
	KT_RUN(keys_are_per_microprocess_with_destructors);
	KT_RUN(keys_run_out_with_eagain);
	KT_RUN(guard_page_turns_overflow_into_sigsegv);
	KT_RUN(overflow_message_names_the_microprocess_and_sigsegv_kills);
	KT_RUN(large_frame_cannot_jump_the_guard_onto_the_next_stack);
	KT_RUN(fini_puts_back_the_default_sigsegv_action);
	KT_RUN(own_sigsegv_handler_runs_for_an_overflow_on_vp_0);
	KT_RUN(own_sigsegv_handler_runs_for_an_overflow_on_vp_1);
	KT_RUN(priority_queue_runs_highest_first_and_changes_live);
	KT_RUN(a_modules_reprio_sees_and_keeps_the_new_priority);
	KT_RUN_T(raising_a_held_microprocess_wakes_an_idle_vp, 20);
	KT_RUN(work_spreads_to_idle_vps);
	KT_RUN(mixed_operations_on_four_vps_add_up);
	KT_RUN(mixed_operations_with_shared_fifo);
	KT_RUN(mixed_operations_with_shared_lifo);
	KT_RUN(mixed_operations_with_priorities);
	KT_RUN(fini_from_another_vp_returns_to_the_first_thread);
	KT_RUN(sleep_timed_ends_at_the_deadline_or_at_a_wakeup);
	KT_RUN(cancel_ends_a_cancellable_sleep);
	KT_RUN(woken_timed_sleep_leaves_no_late_timer);
	KT_RUN(sleep_for_passes_its_time_and_keeps_wakeups);
	KT_RUN(many_deadlines_fire_on_busy_and_idle_vps);
	KT_RUN(concurrent_inits_let_exactly_one_start);
	KT_RUN(stale_handle_does_not_name_the_next_microprocess_in_its_record);
	KT_RUN(racing_joins_of_an_ended_microprocess_let_one_win);
	KT_RUN_T(joins_that_close_a_cycle_return_edeadlk, 60);
	KT_RUN(nested_joins_are_no_cycle_and_a_join_back_up_is);
	KT_RUN(keys_stay_valid_through_any_number_of_reuses);
	KT_RUN(main_keys_are_destroyed_at_fini);
	KT_RUN(karui_calls_inside_a_blocking_section_keep_it_with_the_microprocess);
	KT_RUN(child_of_fork_finds_karui_stopped_and_the_parent_goes_on);
	return kt_finish();
}
