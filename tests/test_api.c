/*
 * karui's error rule (include/karui.h), call by call: every public call
 * that can fail returns 0 or a positive errno code, and results go through
 * out-parameters.  Each test below gives the calls of one family bad input
 * (a NULL object or out-parameter, a destroyed object, a bad fd, a value
 * out of range, a misuse) and asserts the exact code, and makes each call
 * from a thread that is no VP, asserting EPERM or that it works there, as
 * karui.h's list of calls that work on any thread says.
 *
 * The table names every public function of every header with its kind and
 * the test that covers it.  The first test reads the headers (their
 * directory is compiled in: KARUI_HEADERS) and fails when one declares a
 * function the table lacks, when a fallible call does not return int, or
 * when the table names a function no header declares: a call added without
 * a check, or with another convention, fails here.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "karui.h"
#include "karui/uproc_export.h"
#ifdef KARUI_HAVE_MPI
#include "karui/mpi.h"
#endif
#include "kt_karui.h"

static void *thread_main(void *fn)
{
	((void (*)(void))fn)();
	return NULL;
}

/* Run fn on a new thread that is no VP, and wait for it. */
static void off_vp(void (*fn)(void))
{
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, thread_main, (void *)fn), 0);
	KT_EQ(pthread_join(t, NULL), 0);
}

static void *ret_arg(void *a) { return a; }

/* A handle whose microprocess has ended and been joined: stale. */
static kr_mp *ended_mp(void)
{
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	return m;
}

/* ---------------- vp.h ---------------- */

static int on_vp[8];

static void vp_misuse(kr_vp *vp, void *arg)
{
	(void)arg;
	uint32_t *word;
	on_vp[0] = kr_vp_release();             /* started by kr_vp_allocate */
	on_vp[1] = kr_vp_join(vp);              /* itself */
	on_vp[2] = kr_vp_adopt(NULL);           /* a VP already */
	on_vp[3] = kr_vp_publish(0);
	on_vp[4] = kr_vp_publish(KR_VP_EXITED);
	on_vp[5] = kr_vp_sleep_begin(NULL, 0);
	on_vp[6] = kr_vp_sleep_until(0);              /* no wakeup pending */
	on_vp[7] = kr_vp_sleep_begin(&word, 0) == EAGAIN ? kr_vp_sleep_end(0) : -1;
}

static void vp_calls_refuse_bad_input_and_need_a_vp(void)
{
	uint32_t *word;
	/* this thread is no VP */
	KT_EQ(kr_vp_allocate(NULL, 0, vp_misuse, NULL), EINVAL);
	KT_EQ(kr_vp_allocate(NULL, 1, NULL, NULL), EINVAL);
	KT_EQ(kr_vp_join(NULL), EINVAL);
	KT_EQ(kr_vp_wakeup(0), EINVAL);
	KT_EQ(kr_vp_release(), EPERM);
	KT_EQ(kr_vp_sleep_until(KR_FOREVER), EPERM);
	KT_EQ(kr_vp_sleep_begin(&word, 0), EPERM);
	KT_EQ(kr_vp_sleep_begin(NULL, 0), EINVAL);
	KT_EQ(kr_vp_sleep_end(0), EPERM);
	KT_EQ(kr_vp_publish(KR_VP_RUNNING), EPERM);
	KT_EQ(kr_vp_switch(), EPERM);
	KT_EQ(kr_vp_status(NULL), 0);
	/* and what works here */
	KT_EQ(kr_vp_wakeup(1), 0);
	kr_vp *v;
	KT_EQ(kr_vp_allocate(&v, 1, vp_misuse, NULL), 0);
	KT_EQ(kr_vp_join(v), 0);
	KT_EQ(on_vp[0], EINVAL);
	KT_EQ(on_vp[1], EDEADLK);
	KT_EQ(on_vp[2], EEXIST);
	KT_EQ(on_vp[3], EINVAL);
	KT_EQ(on_vp[4], EINVAL);
	KT_EQ(on_vp[5], EINVAL);
	KT_EQ(on_vp[6], ETIMEDOUT);
	KT_EQ(on_vp[7], ETIMEDOUT);
	kr_vp *me;
	KT_EQ(kr_vp_adopt(&me), 0);
	KT_EQ(kr_vp_status(me), KR_VP_RUNNING);
	KT_EQ(kr_vp_join(me), EINVAL); /* adopted */
	KT_EQ(kr_vp_publish(KR_VP_RUNNING), 0);
	KT_EQ(kr_vp_switch(), 0);
	KT_EQ(kr_vp_release(), 0);
	KT_EQ(kr_vp_release(), EPERM);
}

/* ---------------- ctx.h ---------------- */

static kr_ctx_transfer never_entered(void *a) { return (kr_ctx_transfer){NULL, a}; }

static void ctx_calls_refuse_bad_input_on_any_thread(void)
{
	static char stack[4096];
	kr_ctx c;
	KT_EQ(kr_ctx_make(NULL, stack, sizeof stack, never_entered), EINVAL);
	KT_EQ(kr_ctx_make(&c, NULL, sizeof stack, never_entered), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, KR_CTX_STACK_MIN - 1, never_entered), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, sizeof stack, NULL), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, sizeof stack, never_entered), 0);
	kr_spin l = KR_SPIN_INIT;
	KT_EQ(kr_spin_trylock(NULL), EINVAL);
	KT_EQ(kr_spin_trylock(&l), 0);
	KT_EQ(kr_spin_trylock(&l), EBUSY);
	kr_spin_unlock(&l);
	KT_EQ(kr_spin_trylock(&l), 0);
}

/* ---------------- core.h: start, life cycle ---------------- */

static void rq_nothing(void *q) { (void)q; }
static void rq_push_nothing(void *q, kr_mp *mp) { (void)q, (void)mp; }
static const kr_rq_ops rq_without_pop = {.name = "no pop", .size = 8, .init = rq_nothing,
					 .push = rq_push_nothing};
static int fini_result;

static void init_and_fini_off_vp(void)
{
	KT_EQ(kr_init(NULL), EBUSY); /* running */
	KT_EQ(kr_fini(), EPERM);
}

static void *fini_from_another(void *a)
{
	fini_result = kr_fini();
	return a;
}

static void *park_once(void *a)
{
	*(int *)a = kr_mp_park_cancellable_until(KR_FOREVER);
	return NULL;
}

static void init_and_fini_refuse_misuse(void)
{
	KT_EQ(kr_fini(), EPERM); /* not running */
	KT_EQ(kr_init(&(kr_config){.vps = KR_VP_MAX + 1}), EINVAL);
	KT_EQ(kr_init(&(kr_config){.rq = &rq_without_pop}), EINVAL);
	init(1);
	KT_EQ(kr_init(NULL), EBUSY); /* on a VP */
	off_vp(init_and_fini_off_vp);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, fini_from_another, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(fini_result, EPERM); /* not the main microprocess */
	int parked = -1;
	KT_EQ(kr_mp_create(&m, NULL, park_once, &parked), 0);
	KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_fini(), EBUSY); /* m lives */
	KT_EQ(kr_mp_unpark(m), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(parked, 0);
	KT_EQ(kr_fini(), 0);
}

static kr_mp *main_mp;

static void mp_calls_off_vp(void)
{
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, ret_arg, NULL), EPERM);
	KT_EQ(kr_mp_exit(NULL), EPERM);
	KT_EQ(kr_mp_join(main_mp, NULL), EPERM);
	KT_EQ(kr_mp_detach(main_mp), EPERM);
	KT_CHECK(kr_mp_self() == NULL);
	KT_EQ(kr_mp_id(NULL), 0);
}

static void create_join_and_detach_refuse_bad_input(void)
{
	init(1);
	main_mp = kr_mp_self();
	kr_mp *m;
	KT_EQ(kr_mp_create(NULL, NULL, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &(kr_attr){.stack_size = KR_STACK_MIN - 1}, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &(kr_attr){.stack_size = KR_STACK_MAX + 1}, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &(kr_attr){.flags = 1u << 7}, ret_arg, NULL), EINVAL);
	KT_EQ(kr_mp_create(&m, &(kr_attr){.flags = KR_MP_PRIO, .prio = KR_PRIO_MAX + 1}, ret_arg,
			   NULL), EINVAL);
	KT_EQ(kr_mp_exit(NULL), EPERM); /* the main microprocess */
	KT_EQ(kr_mp_join(NULL, NULL), EINVAL);
	KT_EQ(kr_mp_join(main_mp, NULL), EDEADLK);
	KT_EQ(kr_mp_detach(NULL), EINVAL);
	kr_mp *d;
	KT_EQ(kr_mp_create(&d, NULL, ret_arg, NULL), 0); /* runs at the next yield */
	KT_EQ(kr_mp_detach(d), 0);
	KT_EQ(kr_mp_detach(d), EINVAL);
	KT_EQ(kr_mp_join(d, NULL), EINVAL);
	KT_EQ(kr_mp_yield(), 0);
	kr_mp *e = ended_mp();
	KT_EQ(kr_mp_join(e, NULL), ESRCH);
	KT_EQ(kr_mp_detach(e), ESRCH);
	off_vp(mp_calls_off_vp);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- core.h: waits ---------------- */

static void waits_off_vp(void)
{
	KT_EQ(kr_mp_yield(), EPERM);
	KT_EQ(kr_mp_park(), EPERM);
	KT_EQ(kr_mp_park_until(0), EPERM);
	KT_EQ(kr_mp_park_cancellable_until(0), EPERM);
	KT_EQ(kr_mp_sleep_until(0), EPERM);
	KT_EQ(kr_mp_sleep_for(0), EPERM);
	KT_EQ(kr_blocking_begin(), EPERM);
	KT_EQ(kr_blocking_end(), EPERM);
	KT_EQ(kr_mp_switch_to(main_mp), EPERM);
	KT_EQ(kr_mp_park_and_switch(main_mp), EPERM);
}

static void waits_and_switches_need_a_microprocess(void)
{
	init(1);
	main_mp = kr_mp_self();
	KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_mp_park_until(0), ETIMEDOUT);
	KT_EQ(kr_mp_park_cancellable_until(0), ETIMEDOUT);
	KT_EQ(kr_mp_sleep_until(0), 0);
	KT_EQ(kr_mp_sleep_for(0), 0);
	KT_EQ(kr_mp_unpark(main_mp), 0);
	KT_EQ(kr_mp_park(), 0); /* the permit was set */
	KT_EQ(kr_mp_cancel(main_mp), 0);
	KT_EQ(kr_mp_sleep_for(KR_FOREVER), ECANCELED);
	KT_EQ(kr_blocking_end(), EINVAL);
	KT_EQ(kr_blocking_begin(), 0);
	KT_EQ(kr_blocking_begin(), EBUSY);
	KT_EQ(kr_blocking_end(), 0);
	KT_EQ(kr_mp_switch_to(NULL), EINVAL);
	KT_EQ(kr_mp_switch_to(main_mp), EINVAL);
	KT_EQ(kr_mp_park_and_switch(NULL), EINVAL);
	KT_EQ(kr_mp_park_and_switch(main_mp), EINVAL);
	kr_mp *e = ended_mp();
	KT_EQ(kr_mp_switch_to(e), ESRCH);
	KT_EQ(kr_mp_park_and_switch(e), ESRCH);
	off_vp(waits_off_vp);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- core.h: from any thread ---------------- */

static kr_mp *parked;

static void wake_and_prio_off_vp(void)
{
	int prio = -1;
	KT_EQ(kr_mp_setprio(parked, 3), 0);
	KT_EQ(kr_mp_getprio(parked, &prio), 0);
	KT_EQ(prio, 3);
	KT_EQ(kr_mp_cancel(parked), 0);
	KT_EQ(kr_mp_unpark(parked), 0);
}

static void unpark_cancel_and_priorities_work_on_any_thread(void)
{
	init(1);
	kr_mp *stale = ended_mp();
	KT_EQ(kr_fini(), 0);
	/* karui is not running */
	KT_EQ(kr_mp_unpark(stale), EPERM);
	KT_EQ(kr_mp_cancel(stale), EPERM);
	KT_EQ(kr_mp_setprio(stale, 1), EPERM);
	init(1);
	kr_mp *self = kr_mp_self(), *e = ended_mp();
	int prio;
	KT_EQ(kr_mp_unpark(NULL), EINVAL);
	KT_EQ(kr_mp_unpark(e), ESRCH);
	KT_EQ(kr_mp_cancel(NULL), EINVAL);
	KT_EQ(kr_mp_cancel(e), ESRCH);
	KT_EQ(kr_mp_setprio(NULL, 1), EINVAL);
	KT_EQ(kr_mp_setprio(self, KR_PRIO_MAX + 1), EINVAL);
	KT_EQ(kr_mp_setprio(self, KR_PRIO_MIN - 1), EINVAL);
	KT_EQ(kr_mp_setprio(e, 1), ESRCH);
	KT_EQ(kr_mp_getprio(NULL, &prio), EINVAL);
	KT_EQ(kr_mp_getprio(self, NULL), EINVAL);
	int res = -1;
	KT_EQ(kr_mp_create(&parked, NULL, park_once, &res), 0);
	KT_EQ(kr_mp_yield(), 0); /* it parks */
	off_vp(wake_and_prio_off_vp);
	KT_EQ(kr_mp_join(parked, NULL), 0);
	KT_EQ(res, ECANCELED);
	KT_EQ(kr_fini(), 0);
}

static kr_key other_key;

static void keys_off_vp(void)
{
	KT_EQ(kr_key_set(other_key, &other_key), EPERM);
	KT_CHECK(kr_key_get(other_key) == NULL);
	kr_key k;
	KT_EQ(kr_key_create(&k, NULL), 0);
	KT_EQ(kr_key_delete(k), 0);
	KT_EQ(kr_key_delete(k), EINVAL);
}

static void keys_refuse_bad_input(void)
{
	KT_EQ(kr_key_create(NULL, NULL), EINVAL);
	KT_EQ(kr_key_create(&other_key, NULL), 0); /* before kr_init */
	init(1);
	KT_EQ(kr_key_set(other_key, &other_key), 0);
	KT_CHECK(kr_key_get(other_key) == &other_key);
	off_vp(keys_off_vp);
	KT_EQ(kr_key_set(other_key, NULL), 0);
	KT_EQ(kr_key_delete(other_key), 0);
	KT_EQ(kr_key_delete(other_key), EINVAL);
	KT_EQ(kr_key_set(other_key, &other_key), EINVAL);
	KT_CHECK(kr_key_get(other_key) == NULL);
	static kr_key all[KR_KEYS_MAX];
	unsigned n = 0;
	while (n < KR_KEYS_MAX && kr_key_create(&all[n], NULL) == 0)
		n++;
	KT_EQ(n, KR_KEYS_MAX);
	kr_key k;
	KT_EQ(kr_key_create(&k, NULL), EAGAIN);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_key_delete(all[i]), 0);
	KT_EQ(kr_fini(), 0);
}

static void stats_off_vp(void)
{
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, 0);
}

static void stats_refuse_null_and_work_on_any_thread(void)
{
	stats_off_vp(); /* before kr_init */
	init(1);
	KT_EQ(kr_stats_get(NULL), EINVAL);
	off_vp(stats_off_vp);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- sched.h ---------------- */

static void poll_nothing(void *arg) { (void)arg; }
static void wait_on_l0(void *arg, uint64_t deadline) { (void)arg, kr_vp_sleep_until(deadline); }
static void kick_l0(void *arg) { (void)arg, kr_vp_wakeup(1); }
static const kr_poller l0_poller = {.poll = poll_nothing, .wait = wait_on_l0, .kick = kick_l0};

static void poller_off_vp(void)
{
	KT_EQ(kr_poller_add(&l0_poller), 0);
	KT_EQ(kr_poller_add(&l0_poller), EBUSY); /* the same one */
	KT_EQ(kr_poller_remove(&l0_poller), 0);
	KT_EQ(kr_poller_remove(&l0_poller), ESRCH);
}

static uint64_t due_never(void *arg) { return (void)arg, KR_FOREVER; }
static void poll_other(void *arg) { (void)arg; }

static void poller_add_refuses_bad_input_and_works_on_any_thread(void)
{
	KT_EQ(kr_poller_add(&l0_poller), EPERM); /* karui is not running */
	init(1);
	KT_EQ(kr_poller_add(NULL), EINVAL);
	KT_EQ(kr_poller_add(&(kr_poller){.wait = wait_on_l0, .kick = kick_l0}), EINVAL);
	KT_EQ(kr_poller_add(&(kr_poller){.poll = poll_nothing, .kick = kick_l0}), EINVAL);
	KT_EQ(kr_poller_add(&(kr_poller){.poll = poll_nothing, .wait = wait_on_l0}), EINVAL);
	KT_EQ(kr_poller_add(&(kr_poller){.poll = poll_nothing, .wait = wait_on_l0,
					 .due = due_never, .flags = KR_POLLER_PER_VP}),
	      EINVAL);
	off_vp(poller_off_vp);
	/* two sources that an idle VP would each have to sleep in */
	KT_EQ(kr_poller_add(&l0_poller), 0);
	kr_poller other = l0_poller;
	other.arg = &other;
	KT_EQ(kr_poller_add(&other), EBUSY);
	/* beside it, sources that say when they must be polled, up to
	 * KR_POLLER_MAX in all */
	kr_poller due[KR_POLLER_MAX];
	for (int i = 0; i < KR_POLLER_MAX; i++) {
		due[i] = (kr_poller){.poll = poll_other, .wait = wait_on_l0, .kick = kick_l0,
				     .due = due_never, .arg = &due[i]};
		KT_EQ(kr_poller_add(&due[i]), i < KR_POLLER_MAX - 1 ? 0 : ENOSPC);
	}
	KT_EQ(kr_poller_remove(&due[0]), 0);
	KT_EQ(kr_poller_add(&due[KR_POLLER_MAX - 1]), 0);
	KT_EQ(kr_poller_remove(&other), ESRCH);
	KT_EQ(kr_poller_remove(NULL), EINVAL);
	KT_EQ(kr_fini(), 0); /* removes them */
	KT_EQ(kr_poller_remove(&l0_poller), EPERM);
}

/* ---------------- sync.h ---------------- */

static kr_sem sem;

static void sem_off_vp(void)
{
	long v = -1;
	KT_EQ(kr_sem_wait(&sem), EPERM);
	KT_EQ(kr_sem_wait_until(&sem, 0), EPERM);
	KT_EQ(kr_sem_post(&sem), 0);
	KT_EQ(kr_sem_post_n(&sem, 2), 0);
	KT_EQ(kr_sem_trywait(&sem), 0);
	KT_EQ(kr_sem_getvalue(&sem, &v), 0);
	KT_EQ(v, 2);
	kr_sem other;
	KT_EQ(kr_sem_init(&other, 0), 0);
	KT_EQ(kr_sem_destroy(&other), 0);
}

static void semaphore_calls_refuse_bad_input(void)
{
	init(1);
	long v;
	KT_EQ(kr_sem_init(NULL, 0), EINVAL);
	KT_EQ(kr_sem_init(&sem, -1), EINVAL);
	KT_EQ(kr_sem_init(&sem, KR_SEM_MAX + 1), EINVAL);
	KT_EQ(kr_sem_init(&sem, KR_SEM_MAX), 0);
	KT_EQ(kr_sem_post(&sem), EOVERFLOW);
	KT_EQ(kr_sem_post_n(&sem, 1), EOVERFLOW);
	KT_EQ(kr_sem_init(&sem, 0), 0);
	KT_EQ(kr_sem_post_n(&sem, 0), EINVAL);
	KT_EQ(kr_sem_post_n(&sem, KR_SEM_MAX + 1), EINVAL);
	KT_EQ(kr_sem_trywait(&sem), EAGAIN);
	KT_EQ(kr_sem_wait_until(&sem, 0), ETIMEDOUT);
	KT_EQ(kr_sem_getvalue(&sem, NULL), EINVAL);
	KT_EQ(kr_sem_destroy(NULL), EINVAL);
	KT_EQ(kr_sem_wait(NULL), EINVAL);
	KT_EQ(kr_sem_wait_until(NULL, 0), EINVAL);
	KT_EQ(kr_sem_trywait(NULL), EINVAL);
	KT_EQ(kr_sem_post(NULL), EINVAL);
	KT_EQ(kr_sem_post_n(NULL, 1), EINVAL);
	KT_EQ(kr_sem_getvalue(NULL, &v), EINVAL);
	off_vp(sem_off_vp);
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_sem_destroy(&sem), EINVAL);
	KT_EQ(kr_sem_wait(&sem), EINVAL);
	KT_EQ(kr_sem_wait_until(&sem, 0), EINVAL);
	KT_EQ(kr_sem_trywait(&sem), EINVAL);
	KT_EQ(kr_sem_post(&sem), EINVAL);
	KT_EQ(kr_sem_post_n(&sem, 1), EINVAL);
	KT_EQ(kr_sem_getvalue(&sem, &v), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_mutex mutex;
static kr_cond cond;

static void monitor_off_vp(void)
{
	KT_EQ(kr_mutex_lock(&mutex), EPERM);
	KT_EQ(kr_mutex_lock_until(&mutex, 0), EPERM);
	KT_EQ(kr_mutex_trylock(&mutex), 0);
	KT_EQ(kr_mutex_trylock(&mutex), EBUSY);
	KT_EQ(kr_cond_wait(&cond, &mutex), EPERM);
	KT_EQ(kr_cond_wait_until(&cond, &mutex, 0), EPERM);
	KT_EQ(kr_cond_signal(&cond), 0);
	KT_EQ(kr_cond_broadcast(&cond), 0);
	KT_EQ(kr_mutex_unlock(&mutex), 0);
	kr_mutex m;
	kr_cond c;
	KT_EQ(kr_mutex_init(&m), 0);
	KT_EQ(kr_mutex_destroy(&m), 0);
	KT_EQ(kr_cond_init(&c), 0);
	KT_EQ(kr_cond_destroy(&c), 0);
}

static void monitor_calls_refuse_bad_input(void)
{
	init(1);
	KT_EQ(kr_mutex_init(NULL), EINVAL);
	KT_EQ(kr_mutex_destroy(NULL), EINVAL);
	KT_EQ(kr_mutex_lock(NULL), EINVAL);
	KT_EQ(kr_mutex_lock_until(NULL, 0), EINVAL);
	KT_EQ(kr_mutex_trylock(NULL), EINVAL);
	KT_EQ(kr_mutex_unlock(NULL), EINVAL);
	KT_EQ(kr_cond_init(NULL), EINVAL);
	KT_EQ(kr_cond_destroy(NULL), EINVAL);
	KT_EQ(kr_cond_wait(NULL, &mutex), EINVAL);
	KT_EQ(kr_cond_wait_until(NULL, &mutex, 0), EINVAL);
	KT_EQ(kr_cond_signal(NULL), EINVAL);
	KT_EQ(kr_cond_broadcast(NULL), EINVAL);
	KT_EQ(kr_mutex_init(&mutex), 0);
	KT_EQ(kr_cond_init(&cond), 0);
	KT_EQ(kr_cond_wait(&cond, NULL), EINVAL);
	KT_EQ(kr_mutex_unlock(&mutex), EPERM); /* not held */
	KT_EQ(kr_cond_wait(&cond, &mutex), EPERM);
	KT_EQ(kr_mutex_lock(&mutex), 0);
	KT_EQ(kr_mutex_lock(&mutex), EDEADLK);
	KT_EQ(kr_mutex_lock_until(&mutex, 0), EDEADLK);
	KT_EQ(kr_mutex_trylock(&mutex), EBUSY);
	KT_EQ(kr_mutex_destroy(&mutex), EBUSY);
	KT_EQ(kr_cond_wait_until(&cond, &mutex, 0), ETIMEDOUT); /* and holds it again */
	KT_EQ(kr_mutex_unlock(&mutex), 0);
	off_vp(monitor_off_vp);
	KT_EQ(kr_cond_destroy(&cond), 0);
	KT_EQ(kr_cond_destroy(&cond), EINVAL);
	KT_EQ(kr_cond_signal(&cond), EINVAL);
	KT_EQ(kr_cond_broadcast(&cond), EINVAL);
	KT_EQ(kr_mutex_lock(&mutex), 0);
	KT_EQ(kr_cond_wait(&cond, &mutex), EINVAL);
	KT_EQ(kr_cond_wait_until(&cond, &mutex, 0), EINVAL);
	KT_EQ(kr_mutex_unlock(&mutex), 0);
	KT_EQ(kr_mutex_destroy(&mutex), 0);
	KT_EQ(kr_mutex_destroy(&mutex), EINVAL);
	KT_EQ(kr_mutex_lock(&mutex), EINVAL);
	KT_EQ(kr_mutex_lock_until(&mutex, 0), EINVAL);
	KT_EQ(kr_mutex_trylock(&mutex), EINVAL);
	KT_EQ(kr_mutex_unlock(&mutex), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_barrier barrier;

static void barrier_off_vp(void)
{
	int serial = 9;
	KT_EQ(kr_barrier_wait(&barrier, &serial), EPERM);
	KT_EQ(serial, 0);
	kr_barrier b;
	KT_EQ(kr_barrier_init(&b, 2), 0);
	KT_EQ(kr_barrier_destroy(&b), 0);
}

static void barrier_calls_refuse_bad_input(void)
{
	init(1);
	int serial = 9;
	KT_EQ(kr_barrier_init(NULL, 1), EINVAL);
	KT_EQ(kr_barrier_init(&barrier, 0), EINVAL);
	KT_EQ(kr_barrier_destroy(NULL), EINVAL);
	KT_EQ(kr_barrier_wait(NULL, &serial), EINVAL);
	KT_EQ(serial, 0);
	KT_EQ(kr_barrier_init(&barrier, 1), 0);
	KT_EQ(kr_barrier_wait(&barrier, &serial), 0);
	KT_EQ(serial, 1); /* the last, as the only one */
	KT_EQ(kr_barrier_wait(&barrier, NULL), 0);
	off_vp(barrier_off_vp);
	KT_EQ(kr_barrier_destroy(&barrier), 0);
	KT_EQ(kr_barrier_destroy(&barrier), EINVAL);
	KT_EQ(kr_barrier_wait(&barrier, &serial), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_chan chan;

static void chan_off_vp(void)
{
	uint64_t v = 0;
	KT_EQ(kr_chan_send(&chan, &v), EPERM);
	KT_EQ(kr_chan_send_until(&chan, &v, 0), EPERM);
	KT_EQ(kr_chan_recv(&chan, &v), EPERM);
	KT_EQ(kr_chan_recv_until(&chan, &v, 0), EPERM);
	KT_EQ(kr_chan_tryrecv(&chan, &v), 0);
	KT_EQ(v, 7);
	v = 8;
	KT_EQ(kr_chan_trysend(&chan, &v), 0);
	KT_EQ(kr_chan_close(&chan), 0);
	kr_chan c;
	KT_EQ(kr_chan_init(&c, 8, 4), 0);
	KT_EQ(kr_chan_destroy(&c), 0);
}

static void channel_calls_refuse_bad_input(void)
{
	init(1);
	uint64_t v = 7;
	KT_EQ(kr_chan_init(NULL, 8, 1), EINVAL);
	KT_EQ(kr_chan_init(&chan, 0, 1), EINVAL);
	KT_EQ(kr_chan_init(&chan, KR_CHAN_ESIZE_MAX + 1, 1), EINVAL);
	KT_EQ(kr_chan_init(&chan, 8, SIZE_MAX / 8), EINVAL);
	KT_EQ(kr_chan_destroy(NULL), EINVAL);
	KT_EQ(kr_chan_send(NULL, &v), EINVAL);
	KT_EQ(kr_chan_send_until(NULL, &v, 0), EINVAL);
	KT_EQ(kr_chan_trysend(NULL, &v), EINVAL);
	KT_EQ(kr_chan_recv(NULL, &v), EINVAL);
	KT_EQ(kr_chan_recv_until(NULL, &v, 0), EINVAL);
	KT_EQ(kr_chan_tryrecv(NULL, &v), EINVAL);
	KT_EQ(kr_chan_close(NULL), EINVAL);
	KT_EQ(kr_chan_init(&chan, 8, 1), 0);
	KT_EQ(kr_chan_send(&chan, NULL), EINVAL);
	KT_EQ(kr_chan_send_until(&chan, NULL, 0), EINVAL);
	KT_EQ(kr_chan_trysend(&chan, NULL), EINVAL);
	KT_EQ(kr_chan_recv(&chan, NULL), EINVAL);
	KT_EQ(kr_chan_recv_until(&chan, NULL, 0), EINVAL);
	KT_EQ(kr_chan_tryrecv(&chan, NULL), EINVAL);
	KT_EQ(kr_chan_tryrecv(&chan, &v), EAGAIN);
	KT_EQ(kr_chan_recv_until(&chan, &v, 0), ETIMEDOUT);
	KT_EQ(kr_chan_trysend(&chan, &v), 0);
	KT_EQ(kr_chan_trysend(&chan, &v), EAGAIN); /* full */
	KT_EQ(kr_chan_send_until(&chan, &v, 0), ETIMEDOUT);
	off_vp(chan_off_vp); /* takes 7, puts 8, closes */
	KT_EQ(kr_chan_send(&chan, &v), EPIPE);
	KT_EQ(kr_chan_trysend(&chan, &v), EPIPE);
	KT_EQ(kr_chan_close(&chan), EPIPE);
	KT_EQ(kr_chan_recv(&chan, &v), 0);
	KT_EQ(v, 8);
	KT_EQ(kr_chan_recv(&chan, &v), EPIPE); /* closed and drained */
	KT_EQ(kr_chan_destroy(&chan), 0);
	KT_EQ(kr_chan_destroy(&chan), EINVAL);
	KT_EQ(kr_chan_send(&chan, &v), EINVAL);
	KT_EQ(kr_chan_send_until(&chan, &v, 0), EINVAL);
	KT_EQ(kr_chan_trysend(&chan, &v), EINVAL);
	KT_EQ(kr_chan_recv(&chan, &v), EINVAL);
	KT_EQ(kr_chan_recv_until(&chan, &v, 0), EINVAL);
	KT_EQ(kr_chan_tryrecv(&chan, &v), EINVAL);
	KT_EQ(kr_chan_close(&chan), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_stream stream;

static void stream_off_vp(void)
{
	char b[4];
	size_t n = 9;
	KT_EQ(kr_stream_write(&stream, "ab", 2, &n), EPERM);
	KT_EQ(n, 0);
	KT_EQ(kr_stream_write_until(&stream, "ab", 2, NULL, 0), EPERM);
	KT_EQ(kr_stream_read(&stream, b, sizeof b, &n), EPERM);
	KT_EQ(kr_stream_read_until(&stream, b, sizeof b, &n, 0), EPERM);
	KT_EQ(kr_stream_close_write(&stream), 0);
	KT_EQ(kr_stream_close_read(&stream), 0);
	kr_stream s;
	KT_EQ(kr_stream_init(&s, 16), 0);
	KT_EQ(kr_stream_destroy(&s), 0);
}

static void stream_calls_refuse_bad_input(void)
{
	init(1);
	char b[16];
	size_t n = 9;
	KT_EQ(kr_stream_init(NULL, 16), EINVAL);
	KT_EQ(kr_stream_init(&stream, 0), EINVAL);
	KT_EQ(kr_stream_init(&stream, (1ul << 30) + 1), EINVAL);
	KT_EQ(kr_stream_destroy(NULL), EINVAL);
	KT_EQ(kr_stream_write(NULL, "a", 1, &n), EINVAL);
	KT_EQ(kr_stream_write_until(NULL, "a", 1, &n, 0), EINVAL);
	KT_EQ(kr_stream_read(NULL, b, 1, &n), EINVAL);
	KT_EQ(kr_stream_read_until(NULL, b, 1, &n, 0), EINVAL);
	KT_EQ(kr_stream_close_write(NULL), EINVAL);
	KT_EQ(kr_stream_close_read(NULL), EINVAL);
	KT_EQ(kr_stream_poll(NULL, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_stream_init(&stream, 16), 0);
	size_t buffered = 9, room = 9;
	unsigned closed = 9;
	KT_EQ(kr_stream_poll(&stream, &buffered, &room, &closed), 0);
	KT_CHECK(buffered == 0 && room == 16 && closed == 0);
	KT_EQ(kr_stream_write(&stream, NULL, 1, &n), EINVAL);
	KT_EQ(kr_stream_read(&stream, b, 1, NULL), EINVAL);
	KT_EQ(kr_stream_read_until(&stream, b, 1, NULL, 0), EINVAL);
	KT_EQ(kr_stream_read(&stream, NULL, 1, &n), EINVAL);
	n = 9;
	KT_EQ(kr_stream_read_until(&stream, b, 1, &n, 0), ETIMEDOUT);
	KT_EQ(n, 0);
	KT_EQ(kr_stream_write(&stream, b, 16, &n), 0);
	KT_EQ(n, 16);
	KT_EQ(kr_stream_write_until(&stream, b, 1, &n, 0), ETIMEDOUT); /* full */
	KT_EQ(n, 0);
	KT_EQ(kr_stream_poll(&stream, &buffered, &room, NULL), 0);
	KT_CHECK(buffered == 16 && room == 0);
	off_vp(stream_off_vp);
	KT_EQ(kr_stream_poll(&stream, &buffered, NULL, &closed), 0);
	KT_CHECK(buffered == 0 && closed == (KR_STREAM_RCLOSED | KR_STREAM_WCLOSED));
	KT_EQ(kr_stream_write(&stream, "a", 1, &n), EPIPE);
	KT_EQ(kr_stream_read(&stream, b, 1, &n), EPIPE);
	KT_EQ(kr_stream_close_write(&stream), EPIPE);
	KT_EQ(kr_stream_close_read(&stream), EPIPE);
	KT_EQ(kr_stream_destroy(&stream), 0);
	KT_EQ(kr_stream_destroy(&stream), EINVAL);
	KT_EQ(kr_stream_write(&stream, "a", 1, &n), EINVAL);
	KT_EQ(kr_stream_write_until(&stream, "a", 1, &n, 0), EINVAL);
	KT_EQ(kr_stream_read(&stream, b, 1, &n), EINVAL);
	KT_EQ(kr_stream_read_until(&stream, b, 1, &n, 0), EINVAL);
	KT_EQ(kr_stream_close_write(&stream), EINVAL);
	KT_EQ(kr_stream_close_read(&stream), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static kr_entry entry;
static kr_call *accepted;

static void entry_off_vp(void)
{
	kr_call *c;
	int msg = 0;
	KT_EQ(kr_entry_call(&entry, &msg), EPERM);
	KT_EQ(kr_entry_call_until(&entry, &msg, 0), EPERM);
	KT_EQ(kr_entry_accept(&entry, &c), EPERM);
	KT_EQ(kr_entry_accept_until(&entry, &c, 0), EPERM);
	/* only the microprocess that accepted a call answers it */
	KT_CHECK(kr_call_msg(accepted) == NULL);
	KT_EQ(kr_entry_reply(accepted, ENOENT), EPERM);
	kr_entry e;
	KT_EQ(kr_entry_init(&e), 0);
	KT_EQ(kr_entry_destroy(&e), 0);
}

static void *caller(void *a)
{
	int msg = 1;
	*(int *)a = kr_entry_call(&entry, &msg);
	return NULL;
}

static void entry_calls_refuse_bad_input(void)
{
	init(1);
	kr_call *c;
	int msg = 0;
	KT_EQ(kr_entry_init(NULL), EINVAL);
	KT_EQ(kr_entry_destroy(NULL), EINVAL);
	KT_EQ(kr_entry_call(NULL, &msg), EINVAL);
	KT_EQ(kr_entry_call_until(NULL, &msg, 0), EINVAL);
	KT_EQ(kr_entry_accept(NULL, &c), EINVAL);
	KT_EQ(kr_entry_accept_until(NULL, &c, 0), EINVAL);
	KT_EQ(kr_entry_reply(NULL, 0), EINVAL);
	KT_CHECK(kr_call_msg(NULL) == NULL);
	KT_EQ(kr_entry_init(&entry), 0);
	KT_EQ(kr_entry_accept(&entry, NULL), EINVAL);
	KT_EQ(kr_entry_accept_until(&entry, &c, 0), ETIMEDOUT);
	KT_EQ(kr_entry_call_until(&entry, &msg, 0), ETIMEDOUT);
	int status = -1;
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, caller, &status), 0);
	KT_EQ(kr_entry_accept(&entry, &accepted), 0);
	KT_EQ(*(int *)kr_call_msg(accepted), 1);
	off_vp(entry_off_vp);
	KT_EQ(kr_entry_reply(accepted, ENOENT), 0); /* the caller's status */
	KT_EQ(kr_entry_reply(accepted, 0), EINVAL); /* answered already */
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(status, ENOENT);
	KT_EQ(kr_entry_destroy(&entry), 0);
	KT_EQ(kr_entry_destroy(&entry), EINVAL);
	KT_EQ(kr_entry_call(&entry, &msg), EINVAL);
	KT_EQ(kr_entry_call_until(&entry, &msg, 0), EINVAL);
	KT_EQ(kr_entry_accept(&entry, &c), EINVAL);
	KT_EQ(kr_entry_accept_until(&entry, &c, 0), EINVAL);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- io.h ---------------- */

static int io_pipe[2], io_sock;

static void io_off_vp(void)
{
	char c = 0;
	size_t n = 9;
	int fd = 9;
	short ev = 9;
	struct iovec v = {&c, 1};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	KT_EQ(kr_read_until(io_pipe[0], &c, 1, &n, 0), EPERM);
	KT_EQ(n, 0);
	KT_EQ(kr_write_until(io_pipe[1], &c, 1, &n, 0), EPERM);
	KT_EQ(kr_readv_until(io_pipe[0], &v, 1, &n, 0), EPERM);
	KT_EQ(kr_writev_until(io_pipe[1], &v, 1, &n, 0), EPERM);
	KT_EQ(kr_recv_until(io_sock, &c, 1, 0, &n, 0), EPERM);
	KT_EQ(kr_send_until(io_sock, &c, 1, 0, &n, 0), EPERM);
	KT_EQ(kr_accept_until(io_sock, NULL, NULL, 0, &fd, 0), EPERM);
	KT_EQ(fd, -1);
	KT_EQ(kr_connect_until(io_sock, (struct sockaddr *)&sa, sizeof sa, 0), EPERM);
	KT_EQ(kr_poll_until(io_pipe[0], POLLIN, &ev, 0), EPERM);
	KT_EQ(ev, 0);
	KT_EQ(kr_write_all_until(io_pipe[1], &c, 1, &n, 0), EPERM);
	KT_EQ(n, 0);
	KT_EQ(kr_io_cancel(io_pipe[0]), 0);
	int p[2];
	KT_EQ(pipe2(p, O_CLOEXEC), 0);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(p[1]), 0);
	KT_CHECK(kr_io_backend() != NULL);
	/* io_uring waits without O_NONBLOCK; epoll sets it */
	KT_EQ(!!(kr_io_features() & KR_IO_KEEPS_FD_FLAGS), !strcmp(kr_io_backend(), "io_uring"));
}

static void io_calls_refuse_bad_input(void)
{
	init(1);
	char c = 0;
	size_t n = 9;
	int fd = 9;
	short ev = 9;
	struct iovec v = {&c, 1};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof sa;
	KT_EQ(pipe2(io_pipe, O_CLOEXEC), 0);
	io_sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(io_sock >= 0);
	/* mandatory out-parameters */
	KT_EQ(kr_read_until(io_pipe[0], &c, 1, NULL, 0), EINVAL);
	KT_EQ(kr_write_until(io_pipe[1], &c, 1, NULL, 0), EINVAL);
	KT_EQ(kr_readv_until(io_pipe[0], &v, 1, NULL, 0), EINVAL);
	KT_EQ(kr_writev_until(io_pipe[1], &v, 1, NULL, 0), EINVAL);
	KT_EQ(kr_recv_until(io_sock, &c, 1, 0, NULL, 0), EINVAL);
	KT_EQ(kr_send_until(io_sock, &c, 1, 0, NULL, 0), EINVAL);
	KT_EQ(kr_accept_until(io_sock, NULL, NULL, 0, NULL, 0), EINVAL);
	KT_EQ(kr_poll_until(io_pipe[0], POLLIN, NULL, 0), EINVAL);
	/* bad values */
	KT_EQ(kr_readv_until(io_pipe[0], &v, -1, &n, 0), EINVAL);
	KT_EQ(n, 0);
	KT_EQ(kr_writev_until(io_pipe[1], &v, -1, &n, 0), EINVAL);
	KT_EQ(kr_accept_until(io_sock, (struct sockaddr *)&sa, NULL, 0, &fd, 0), EINVAL);
	KT_EQ(fd, -1);
	KT_EQ(kr_accept_until(io_sock, NULL, &len, 0, &fd, 0), EINVAL);
	KT_EQ(kr_accept_until(io_sock, NULL, NULL, 1 << 30, &fd, 0), EINVAL);
	KT_EQ(kr_connect_until(io_sock, NULL, 0, 0), EINVAL);
	KT_EQ(kr_poll_until(io_pipe[0], 0, &ev, 0), EINVAL);
	KT_EQ(ev, 0);
	/* bad fds */
	KT_EQ(kr_read_until(-1, &c, 1, &n, 0), EBADF);
	KT_EQ(kr_write_until(-1, &c, 1, &n, 0), EBADF);
	KT_EQ(kr_readv_until(-1, &v, 1, &n, 0), EBADF);
	KT_EQ(kr_writev_until(-1, &v, 1, &n, 0), EBADF);
	KT_EQ(kr_recv_until(-1, &c, 1, 0, &n, 0), EBADF);
	KT_EQ(kr_send_until(-1, &c, 1, 0, &n, 0), EBADF);
	KT_EQ(kr_accept_until(-1, NULL, NULL, 0, &fd, 0), EBADF);
	KT_EQ(kr_connect_until(-1, (struct sockaddr *)&sa, sizeof sa, 0), EBADF);
	KT_EQ(kr_poll_until(-1, POLLIN, &ev, 0), EBADF);
	n = 9;
	KT_EQ(kr_write_all_until(-1, &c, 1, &n, 0), EBADF);
	KT_EQ(n, 0);
	KT_EQ(kr_write_all_until(-1, &c, 1, NULL, 0), EBADF);
	KT_EQ(kr_io_cancel(-1), EBADF);
	KT_EQ(kr_close(-1), EBADF);
	/* the forms that wait as long as it takes check the same */
	KT_EQ(kr_read(io_pipe[0], &c, 1, NULL), EINVAL);
	KT_EQ(kr_write(-1, &c, 1, &n), EBADF);
	KT_EQ(kr_readv(-1, &v, 1, &n), EBADF);
	KT_EQ(kr_writev(io_pipe[1], &v, -1, &n), EINVAL);
	KT_EQ(kr_recv(io_sock, &c, 1, 0, NULL), EINVAL);
	KT_EQ(kr_send(-1, &c, 1, 0, &n), EBADF);
	KT_EQ(kr_accept(io_sock, NULL, NULL, 1 << 30, &fd), EINVAL);
	KT_EQ(kr_connect(io_sock, NULL, 0), EINVAL);
	KT_EQ(kr_poll(io_pipe[0], 0, &ev), EINVAL);
	KT_EQ(kr_write_all(-1, &c, 1, NULL), EBADF);
	/* the kernel's own codes come through as they are */
	KT_EQ(kr_recv_until(io_pipe[0], &c, 1, 0, &n, 0), ENOTSOCK);
	KT_EQ(kr_read_until(io_pipe[0], &c, 1, &n, kr_now()), ETIMEDOUT);
	off_vp(io_off_vp);
	KT_EQ(kr_close(io_pipe[0]), 0);
	KT_EQ(kr_close(io_pipe[0]), EBADF);
	KT_EQ(kr_close(io_pipe[1]), 0);
	KT_EQ(kr_close(io_sock), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- the table ---------------- */

enum kind {
	CALL,     /* can fail: returns int, 0 or a positive errno code */
	ACCESSOR, /* cannot fail: returns its value */
	VOID,     /* returns nothing */
};

struct api {
	const char *name;
	void (*fn)(void);       /* the function itself: the name is no typo */
	enum kind kind;
	void (*test)(void);     /* CALL: the test that holds it to the rule */
	const char *test_name;
	int declared;
};

#define API(f, t) {#f, (void (*)(void))f, CALL, t, #t, 0}
#define ACC(f) {#f, (void (*)(void))f, ACCESSOR, NULL, NULL, 0}
#define VOID_(f) {#f, (void (*)(void))f, VOID, NULL, NULL, 0}

static void image_off_vp(void)
{
	kr_upipe *p;
	kr_uproc *up;
	char *argv[] = {"true", NULL};
	size_t n;
	KT_EQ(kr_upipe_create(&p), 0); /* any thread */
	KT_EQ(kr_upipe_write(p, "a", 1, &n), EPERM);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", argv, NULL), EPERM);
}

/* ---------------- carea.h ---------------- */

static int zero_fill(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	memset(buf, 0, 4096);
	return 0;
}

static void carea_off_vp(void)
{
	kr_carea_stats st;
	KT_EQ(kr_carea_stats_get(&st), EPERM); /* karui runs without kr_carea */
	/* a fault region works on any thread (where the kernel gives one) */
	kr_faults *r;
	int e = kr_faults_create(&r, 4096, &(kr_fault_ops){.fill = zero_fill}, NULL);
	KT_CHECK(e == 0 || e == ENOSYS || e == EPERM);
	if (!e) {
		KT_EQ(*(volatile char *)kr_faults_addr(r), 0);
		KT_EQ(kr_faults_destroy(r), 0);
	}
	kr_carea_config c = {.segment = "/karui-carea-test-api", .slice = 0};
	KT_EQ(kr_carea_configure(&c), 0);
	KT_EQ(kr_carea_configure(&(kr_carea_config){0}), 0);
}

static void carea_calls_refuse_bad_input(void)
{
	KT_EQ(kr_carea_configure(NULL), EINVAL);
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = "no-slash"}), EINVAL);
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = "/a/b"}), EINVAL);
	char longname[256];
	memset(longname, 'x', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = 0;
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = longname}), EINVAL);
	KT_EQ(kr_carea_configure(&(kr_carea_config){.slice = 999999}), EINVAL);
	KT_EQ(kr_carea_stats_get(NULL), EINVAL);
	KT_EQ(kr_carea_stats_get(&(kr_carea_stats){0}), EPERM);
	kr_fault_ops fo = {.fill = zero_fill};
	kr_faults *r;
	KT_EQ(kr_faults_create(NULL, 4096, &fo, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 0, &fo, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, SIZE_MAX, &fo, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 4096, NULL, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 4096, &(kr_fault_ops){0}, NULL), EINVAL);
	KT_EQ(kr_faults_stats_get(NULL, &(kr_faults_stats){0}), EINVAL);
	KT_EQ(kr_faults_destroy(NULL), EINVAL);
	KT_EQ(kr_init(NULL), 0);
	KT_EQ(kr_carea_stats_get(&(kr_carea_stats){0}), EPERM);
	off_vp(carea_off_vp);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- mpi.h (libkarui-mpi, where the build has MPI) ----------------
 * Without MPI started: its own tests (test_mpi, under mpirun) cover the
 * errors MPI reports. */

#ifdef KARUI_HAVE_MPI
static void mpi_off_vp(void)
{
	int x = 0;
	MPI_Request r = MPI_REQUEST_NULL;
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_wait(&r, NULL), EPERM);
	KT_EQ(kr_mpi_lock(), EPERM);
}

static void mpi_calls_refuse_bad_input(void)
{
	int x = 0;
	MPI_Request r = MPI_REQUEST_NULL;
	KT_EQ(kr_mpi_init(NULL, NULL), EPERM); /* karui is not running */
	KT_EQ(kr_init(NULL), 0);
	/* bad input first, whatever the state */
	KT_EQ(kr_mpi_send(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EINVAL);
	KT_EQ(kr_mpi_ssend(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), EINVAL);
	KT_EQ(kr_mpi_recv(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), EINVAL);
	KT_EQ(kr_mpi_sendrecv(&x, 1, MPI_INT, 0, 0, NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL),
	      EINVAL);
	KT_EQ(kr_mpi_bcast(NULL, 2, MPI_INT, 0, MPI_COMM_WORLD), EINVAL);
	KT_EQ(kr_mpi_allreduce(&x, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), EINVAL);
	KT_EQ(kr_mpi_wait(NULL, NULL), EINVAL);
	KT_EQ(kr_mpi_waitall(-1, &r, NULL), EINVAL);
	KT_EQ(kr_mpi_waitall(1, NULL, NULL), EINVAL);
	/* before kr_mpi_init */
	KT_EQ(kr_mpi_send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_ssend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), EPERM);
	KT_EQ(kr_mpi_sendrecv(&x, 1, MPI_INT, 0, 0, &x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL),
	      EPERM);
	KT_EQ(kr_mpi_barrier(MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_allreduce(&x, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), EPERM);
	KT_EQ(kr_mpi_wait(&r, NULL), EPERM);
	KT_EQ(kr_mpi_waitall(1, &r, NULL), EPERM);
	KT_EQ(kr_mpi_lock(), EPERM);
	KT_EQ(kr_mpi_unlock(), EPERM);
	KT_EQ(kr_mpi_fini(), EPERM);
	off_vp(mpi_off_vp);
	KT_EQ(kr_fini(), 0);
}
#endif

/* ---------------- domain.h ---------------- */

static int proc0(void *arg, void *result)
{
	(void)arg;
	(void)result;
	return 0;
}

static kr_domain *api_domain;

static void domain_off_vp(void)
{
	int st;
	kr_port *p;
	KT_EQ(kr_epc_call(api_domain, 0, NULL, NULL, &st), EPERM);
	KT_EQ(kr_port_create(&p, api_domain), 0);
	KT_EQ(kr_port_call(p, 0, NULL, NULL, &st), EPERM);
	KT_EQ(kr_port_serve(p), EPERM);
	KT_EQ(kr_port_destroy(p), 0);
}

static void domain_calls_refuse_bad_input(void)
{
	KT_EQ(kr_epc_mode_set(-1), EINVAL);
	KT_EQ(kr_epc_mode_set(KR_EPC_H + 1), EINVAL);
	KT_EQ(kr_init(NULL), 0);
	kr_domain *d;
	kr_section *s;
	kr_port *p;
	unsigned n;
	int st;
	KT_EQ(kr_domain_create(NULL, "d"), EINVAL);
	KT_EQ(kr_domain_create(&d, NULL), EINVAL);
	KT_EQ(kr_domain_create(&d, "d"), 0);
	KT_EQ(kr_epc_mode_set(KR_EPC_N), EBUSY);
	KT_EQ(kr_domain_export(NULL, proc0, &n), EINVAL);
	KT_EQ(kr_domain_export(d, NULL, &n), EINVAL);
	KT_EQ(kr_domain_export(d, proc0, NULL), EINVAL);
	KT_EQ(kr_domain_export(d, proc0, &n), 0);
	KT_EQ(kr_domain_restart(NULL), EINVAL);
	KT_EQ(kr_domain_restart(d), EINVAL); /* not failed */
	KT_EQ(kr_section_create(NULL, d, 1), EINVAL);
	KT_EQ(kr_section_create(&s, d, 0), EINVAL);
	KT_EQ(kr_section_create(&s, d, 1), 0);
	KT_EQ(kr_section_allow(NULL, d, KR_SECTION_READ), EINVAL);
	KT_EQ(kr_section_allow(s, d, 8), EINVAL);
	KT_EQ(kr_domain_destroy(NULL), EINVAL);
	KT_EQ(kr_domain_destroy(d), EBUSY); /* it owns s */
	KT_EQ(kr_section_destroy(NULL), EINVAL);
	KT_EQ(kr_section_destroy(s), 0);
	KT_EQ(kr_epc_call(NULL, 0, NULL, NULL, &st), EINVAL);
	KT_EQ(kr_epc_call(d, 1, NULL, NULL, &st), EINVAL);
	KT_EQ(kr_epc_call(d, 0, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_port_create(NULL, d), EINVAL);
	KT_EQ(kr_port_create(&p, NULL), EINVAL);
	KT_EQ(kr_port_create(&p, d), 0);
	KT_EQ(kr_port_call(NULL, 0, NULL, NULL, &st), EINVAL);
	KT_EQ(kr_port_call(p, 0, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_port_call(p, ~0u, NULL, NULL, &st), EINVAL); /* the shut's own number */
	KT_EQ(kr_section_create(&s, d, (size_t)1 << 63), EINVAL);
	KT_EQ(kr_section_create(&s, d, SIZE_MAX), EINVAL);
	KT_EQ(kr_port_serve(NULL), EINVAL);
	KT_EQ(kr_port_shut(NULL), EINVAL);
	KT_EQ(kr_port_shut(p), 0); /* no server: later calls refused */
	KT_EQ(kr_port_call(p, 0, NULL, NULL, &st), EPIPE);
	KT_EQ(kr_port_serve(p), 0); /* shut already */
	KT_EQ(kr_port_destroy(NULL), EINVAL);
	KT_EQ(kr_port_destroy(p), 0);
	api_domain = d;
	off_vp(domain_off_vp);
	KT_EQ(kr_domain_destroy(d), 0);
	KT_EQ(kr_fini(), 0);
}

static void image_calls_refuse_bad_input(void)
{
	init(1);
	kr_upipe *p;
	kr_uproc *up = (kr_uproc *)&p;
	kr_uproc_attr a;
	char b[4];
	size_t n;
	char *argv[] = {"true", NULL}, *noargs[] = {NULL};
	KT_EQ(kr_upipe_create(NULL), EINVAL);
	KT_EQ(kr_upipe_close(NULL, KR_UPIPE_READ), EINVAL);
	KT_EQ(kr_upipe_read(NULL, b, 1, &n), EINVAL);
	KT_EQ(kr_upipe_write(NULL, b, 1, &n), EINVAL);
	KT_EQ(kr_upipe_create(&p), 0);
	KT_EQ(kr_upipe_close(p, 7), EINVAL);
	KT_EQ(kr_upipe_read(p, b, 1, NULL), EINVAL);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_WRITE), EINVAL); /* closed already */
	KT_EQ(kr_upipe_write(p, b, 1, &n), EINVAL);
	n = 9;
	KT_EQ(kr_upipe_read(p, b, 1, &n), 0); /* end of file */
	KT_EQ(n, 0);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_READ), 0);

	KT_EQ(kr_uproc_attr_init(NULL), EINVAL);
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(a.umask, -1);
	KT_EQ(kr_uproc_attr_fd_host(NULL, 0, 0), EINVAL);
	KT_EQ(kr_uproc_attr_fd_host(&a, -1, 0), EINVAL);
	KT_EQ(kr_uproc_attr_fd_host(&a, KR_UPROC_ATTR_FDS, 0), EINVAL);
	KT_EQ(kr_uproc_attr_fd_host(&a, 0, -1), EINVAL);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, NULL, KR_UPIPE_READ), EINVAL);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, (kr_upipe *)&a, 5), EINVAL);
	KT_EQ(kr_uproc_attr_fd_close(NULL, 0), EINVAL);
	KT_EQ(kr_uproc_attr_fd_close(&a, 99), EINVAL);

	KT_EQ(kr_uproc_spawn(NULL, "/bin/true", argv, NULL), EINVAL);
	KT_EQ(kr_uproc_spawn(&up, NULL, argv, NULL), EINVAL);
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", NULL, NULL), EINVAL);
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", noargs, NULL), EINVAL);
	a.umask = 01000;
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", argv, &a), EINVAL);
	KT_EQ(kr_uproc_wait(NULL, NULL), EINVAL);
	KT_EQ(kr_uproc_wait_wstatus(NULL, NULL), EINVAL);
	KT_EQ(kr_uproc_kill(NULL, SIGTERM), EINVAL);
	KT_EQ(kr_uproc_kill((kr_uproc *)&a, 65), EINVAL);
	KT_EQ(kr_uproc_kill((kr_uproc *)&a, -1), EINVAL);
	KT_EQ(kr_uproc_kill((kr_uproc *)&a, SIGTERM), ESRCH); /* no μprocess's handle */
	KT_EQ(kr_uproc_pid(NULL), 0);
	KT_EQ(kr_uproc_reused(NULL), 0);
	int iso = -1;
	KT_EQ(kr_uproc_isolation(NULL, &iso), EINVAL);
	KT_EQ(kr_uproc_isolation((kr_uproc *)&a, NULL), EINVAL);
	KT_EQ(kr_uproc_isolation((kr_uproc *)&a, &iso), EINVAL); /* no μprocess's handle */
	KT_EQ(iso, -1);
	KT_EQ(kr_uproc_keep(KR_UPROC_KEEP_MAX + 1), EINVAL);
	KT_EQ(kr_uproc_keep(KR_UPROC_KEEP_MAX), 0);
	KT_EQ(kr_uproc_keep(8), 0);
	long args[7] = {0}, r;
	KT_EQ(kr_uproc_call(NULL, 0, args, 1, &r), EINVAL);
#if defined(__x86_64__)
	KT_EQ(kr_uproc_call((kr_uproc *)&a, 0, args, 1, &r), EINVAL); /* no μprocess's handle */
#else
	KT_EQ(kr_uproc_call((kr_uproc *)&a, 0, args, 1, &r), ENOTSUP); /* no μprocesses here */
#endif
	KT_EQ(kr_uproc_call((kr_uproc *)&a, 0, args, 1, NULL), EINVAL);
	KT_EQ(kr_uproc_call((kr_uproc *)&a, 0, NULL, 1, &r), EINVAL);
	KT_EQ(kr_uproc_call((kr_uproc *)&a, 0, args, KR_UPROC_CALL_ARGS + 1, &r), EINVAL);
	/* the exporter's calls (karui/uproc_export.h), outside a μprocess */
	KT_EQ(kr_uproc_export(NULL, 1), ENOSYS);
	KT_EQ(kr_uproc_call_pid(getpid(), 0, args, 1, &r), ENOSYS);
	off_vp(image_off_vp);
	KT_EQ(kr_fini(), 0);
}

static struct api table[] = {
	/* vp.h */
	API(kr_vp_allocate, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_adopt, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_release, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_join, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_sleep_until, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_wakeup, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_sleep_begin, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_sleep_end, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_publish, vp_calls_refuse_bad_input_and_need_a_vp),
	API(kr_vp_switch, vp_calls_refuse_bad_input_and_need_a_vp),
	ACC(kr_now), ACC(kr_vp_self), ACC(kr_vp_id), ACC(kr_vp_count), ACC(kr_vp_status),
	ACC(kr_vp_area), VOID_(kr_vp_wait_ended),
	/* ctx.h */
	API(kr_ctx_make, ctx_calls_refuse_bad_input_on_any_thread),
	API(kr_spin_trylock, ctx_calls_refuse_bad_input_on_any_thread),
	ACC(kr_ctx_switch), VOID_(kr_ctx_jump), VOID_(kr_spin_lock), VOID_(kr_spin_unlock),
	VOID_(kr_cpu_relax),
	/* core.h */
	API(kr_init, init_and_fini_refuse_misuse),
	API(kr_fini, init_and_fini_refuse_misuse),
	API(kr_mp_create, create_join_and_detach_refuse_bad_input),
	API(kr_mp_exit, create_join_and_detach_refuse_bad_input),
	API(kr_mp_join, create_join_and_detach_refuse_bad_input),
	API(kr_mp_detach, create_join_and_detach_refuse_bad_input),
	API(kr_mp_yield, waits_and_switches_need_a_microprocess),
	API(kr_mp_park, waits_and_switches_need_a_microprocess),
	API(kr_mp_park_until, waits_and_switches_need_a_microprocess),
	API(kr_mp_park_cancellable_until, waits_and_switches_need_a_microprocess),
	API(kr_mp_sleep_until, waits_and_switches_need_a_microprocess),
	API(kr_mp_sleep_for, waits_and_switches_need_a_microprocess),
	API(kr_blocking_begin, waits_and_switches_need_a_microprocess),
	API(kr_blocking_end, waits_and_switches_need_a_microprocess),
	API(kr_mp_switch_to, waits_and_switches_need_a_microprocess),
	API(kr_mp_park_and_switch, waits_and_switches_need_a_microprocess),
	API(kr_mp_unpark, unpark_cancel_and_priorities_work_on_any_thread),
	API(kr_mp_cancel, unpark_cancel_and_priorities_work_on_any_thread),
	API(kr_mp_setprio, unpark_cancel_and_priorities_work_on_any_thread),
	API(kr_mp_getprio, unpark_cancel_and_priorities_work_on_any_thread),
	API(kr_key_create, keys_refuse_bad_input),
	API(kr_key_delete, keys_refuse_bad_input),
	API(kr_key_set, keys_refuse_bad_input),
	API(kr_stats_get, stats_refuse_null_and_work_on_any_thread),
	ACC(kr_mp_self), ACC(kr_mp_id), ACC(kr_mp_udata), ACC(kr_key_get),
	/* sched.h */
	API(kr_poller_add, poller_add_refuses_bad_input_and_works_on_any_thread),
	API(kr_poller_remove, poller_add_refuses_bad_input_and_works_on_any_thread),
	ACC(kr_mp_rqlink), ACC(kr_sched_idle_deadline), ACC(kr_sched_data),
	ACC(kr_sched_vp_data), VOID_(kr_sched_park_until), VOID_(kr_sched_unpark),
	VOID_(kr_sched_poll),
	/* sync.h */
	API(kr_sem_init, semaphore_calls_refuse_bad_input),
	API(kr_sem_destroy, semaphore_calls_refuse_bad_input),
	API(kr_sem_wait, semaphore_calls_refuse_bad_input),
	API(kr_sem_wait_until, semaphore_calls_refuse_bad_input),
	API(kr_sem_trywait, semaphore_calls_refuse_bad_input),
	API(kr_sem_post, semaphore_calls_refuse_bad_input),
	API(kr_sem_post_n, semaphore_calls_refuse_bad_input),
	API(kr_sem_getvalue, semaphore_calls_refuse_bad_input),
	API(kr_mutex_init, monitor_calls_refuse_bad_input),
	API(kr_mutex_destroy, monitor_calls_refuse_bad_input),
	API(kr_mutex_lock, monitor_calls_refuse_bad_input),
	API(kr_mutex_lock_until, monitor_calls_refuse_bad_input),
	API(kr_mutex_trylock, monitor_calls_refuse_bad_input),
	API(kr_mutex_unlock, monitor_calls_refuse_bad_input),
	API(kr_cond_init, monitor_calls_refuse_bad_input),
	API(kr_cond_destroy, monitor_calls_refuse_bad_input),
	API(kr_cond_wait, monitor_calls_refuse_bad_input),
	API(kr_cond_wait_until, monitor_calls_refuse_bad_input),
	API(kr_cond_signal, monitor_calls_refuse_bad_input),
	API(kr_cond_broadcast, monitor_calls_refuse_bad_input),
	API(kr_barrier_init, barrier_calls_refuse_bad_input),
	API(kr_barrier_destroy, barrier_calls_refuse_bad_input),
	API(kr_barrier_wait, barrier_calls_refuse_bad_input),
	API(kr_chan_init, channel_calls_refuse_bad_input),
	API(kr_chan_destroy, channel_calls_refuse_bad_input),
	API(kr_chan_send, channel_calls_refuse_bad_input),
	API(kr_chan_send_until, channel_calls_refuse_bad_input),
	API(kr_chan_trysend, channel_calls_refuse_bad_input),
	API(kr_chan_recv, channel_calls_refuse_bad_input),
	API(kr_chan_recv_until, channel_calls_refuse_bad_input),
	API(kr_chan_tryrecv, channel_calls_refuse_bad_input),
	API(kr_chan_close, channel_calls_refuse_bad_input),
	API(kr_stream_init, stream_calls_refuse_bad_input),
	API(kr_stream_destroy, stream_calls_refuse_bad_input),
	API(kr_stream_write, stream_calls_refuse_bad_input),
	API(kr_stream_write_until, stream_calls_refuse_bad_input),
	API(kr_stream_read, stream_calls_refuse_bad_input),
	API(kr_stream_read_until, stream_calls_refuse_bad_input),
	API(kr_stream_close_write, stream_calls_refuse_bad_input),
	API(kr_stream_close_read, stream_calls_refuse_bad_input),
	API(kr_stream_poll, stream_calls_refuse_bad_input),
	API(kr_entry_init, entry_calls_refuse_bad_input),
	API(kr_entry_destroy, entry_calls_refuse_bad_input),
	API(kr_entry_call, entry_calls_refuse_bad_input),
	API(kr_entry_call_until, entry_calls_refuse_bad_input),
	API(kr_entry_accept, entry_calls_refuse_bad_input),
	API(kr_entry_accept_until, entry_calls_refuse_bad_input),
	API(kr_entry_reply, entry_calls_refuse_bad_input),
	ACC(kr_call_msg),
	/* io.h */
	API(kr_read, io_calls_refuse_bad_input), API(kr_read_until, io_calls_refuse_bad_input),
	API(kr_write, io_calls_refuse_bad_input), API(kr_write_until, io_calls_refuse_bad_input),
	API(kr_readv, io_calls_refuse_bad_input), API(kr_readv_until, io_calls_refuse_bad_input),
	API(kr_writev, io_calls_refuse_bad_input), API(kr_writev_until, io_calls_refuse_bad_input),
	API(kr_recv, io_calls_refuse_bad_input), API(kr_recv_until, io_calls_refuse_bad_input),
	API(kr_send, io_calls_refuse_bad_input), API(kr_send_until, io_calls_refuse_bad_input),
	API(kr_accept, io_calls_refuse_bad_input), API(kr_accept_until, io_calls_refuse_bad_input),
	API(kr_connect, io_calls_refuse_bad_input), API(kr_connect_until, io_calls_refuse_bad_input),
	API(kr_poll, io_calls_refuse_bad_input), API(kr_poll_until, io_calls_refuse_bad_input),
	API(kr_write_all, io_calls_refuse_bad_input), API(kr_write_all_until, io_calls_refuse_bad_input),
	API(kr_io_cancel, io_calls_refuse_bad_input),
	API(kr_close, io_calls_refuse_bad_input),
	ACC(kr_io_backend),
	ACC(kr_io_features),
	API(kr_upipe_create, image_calls_refuse_bad_input),
	API(kr_upipe_close, image_calls_refuse_bad_input),
	API(kr_upipe_read, image_calls_refuse_bad_input),
	API(kr_upipe_write, image_calls_refuse_bad_input),
	API(kr_uproc_attr_init, image_calls_refuse_bad_input),
	API(kr_uproc_attr_fd_host, image_calls_refuse_bad_input),
	API(kr_uproc_attr_fd_pipe, image_calls_refuse_bad_input),
	API(kr_uproc_attr_fd_close, image_calls_refuse_bad_input),
	API(kr_uproc_spawn, image_calls_refuse_bad_input),
	API(kr_uproc_wait, image_calls_refuse_bad_input),
	API(kr_uproc_wait_wstatus, image_calls_refuse_bad_input),
	API(kr_uproc_kill, image_calls_refuse_bad_input),
	ACC(kr_uproc_pid),
	API(kr_uproc_keep, image_calls_refuse_bad_input),
	ACC(kr_uproc_reused),
	API(kr_uproc_isolation, image_calls_refuse_bad_input),
	API(kr_uproc_call, image_calls_refuse_bad_input),
	/* uproc_export.h */
	API(kr_uproc_export, image_calls_refuse_bad_input),
	API(kr_uproc_call_pid, image_calls_refuse_bad_input),
	API(kr_carea_configure, carea_calls_refuse_bad_input),
	API(kr_carea_stats_get, carea_calls_refuse_bad_input),
	API(kr_faults_create, carea_calls_refuse_bad_input),
	ACC(kr_faults_addr),
	ACC(kr_faults_size),
	API(kr_faults_stats_get, carea_calls_refuse_bad_input),
	API(kr_faults_destroy, carea_calls_refuse_bad_input),
	/* domain.h */
	API(kr_epc_mode_set, domain_calls_refuse_bad_input),
	ACC(kr_epc_mode),
	API(kr_domain_create, domain_calls_refuse_bad_input),
	API(kr_domain_destroy, domain_calls_refuse_bad_input),
	API(kr_domain_export, domain_calls_refuse_bad_input),
	ACC(kr_domain_failed),
	API(kr_domain_restart, domain_calls_refuse_bad_input),
	API(kr_section_create, domain_calls_refuse_bad_input),
	ACC(kr_section_addr),
	ACC(kr_section_size),
	API(kr_section_allow, domain_calls_refuse_bad_input),
	API(kr_section_destroy, domain_calls_refuse_bad_input),
	API(kr_epc_call, domain_calls_refuse_bad_input),
	ACC(kr_epc_host),
	ACC(kr_domain_current),
	API(kr_port_create, domain_calls_refuse_bad_input),
	API(kr_port_destroy, domain_calls_refuse_bad_input),
	API(kr_port_call, domain_calls_refuse_bad_input),
	API(kr_port_serve, domain_calls_refuse_bad_input),
	API(kr_port_shut, domain_calls_refuse_bad_input),
#ifdef KARUI_HAVE_MPI
	/* mpi.h */
	API(kr_mpi_init, mpi_calls_refuse_bad_input),
	API(kr_mpi_fini, mpi_calls_refuse_bad_input),
	API(kr_mpi_wait, mpi_calls_refuse_bad_input),
	API(kr_mpi_waitall, mpi_calls_refuse_bad_input),
	API(kr_mpi_send, mpi_calls_refuse_bad_input),
	API(kr_mpi_ssend, mpi_calls_refuse_bad_input),
	API(kr_mpi_recv, mpi_calls_refuse_bad_input),
	API(kr_mpi_sendrecv, mpi_calls_refuse_bad_input),
	API(kr_mpi_barrier, mpi_calls_refuse_bad_input),
	API(kr_mpi_bcast, mpi_calls_refuse_bad_input),
	API(kr_mpi_allreduce, mpi_calls_refuse_bad_input),
	API(kr_mpi_lock, mpi_calls_refuse_bad_input),
	API(kr_mpi_unlock, mpi_calls_refuse_bad_input),
#endif
};
#define NAPI (sizeof table / sizeof table[0])

static struct api *find(const char *name, size_t len)
{
	for (size_t i = 0; i < NAPI; i++)
		if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
			return &table[i];
	return NULL;
}

static int ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* One line of a header: a declaration of a function kr_... starts at its
 * first column (a member, a call in an inline body or a comment does not)
 * and names the function with the first kr_ identifier that a '(' follows.
 * Returns the problems it finds. */
static int check_line(const char *file, const char *line)
{
	if (!*line || strchr("#/ \t*}{\n", *line) || strncmp(line, "typedef", 7) == 0)
		return 0;
	const char *start = NULL, *end = NULL;
	for (const char *p = line; (p = strstr(p, "kr_")); p++) {
		if (p > line && ident(p[-1]))
			continue;
		const char *q = p;
		while (ident(*q))
			q++;
		if (*q == '(') {
			start = p, end = q;
			break;
		}
	}
	if (!start)
		return 0;
	struct api *a = find(start, (size_t)(end - start));
	if (!a) {
		fprintf(stderr, "  %s: %.*s is not in test_api.c's table\n", file,
			(int)(end - start), start);
		return 1;
	}
	a->declared = 1;
	/* a fallible call's declaration is "int kr_...(" */
	if (a->kind == CALL && !(start - line == 4 && strncmp(line, "int ", 4) == 0)) {
		fprintf(stderr, "  %s: %s can fail but does not return int\n", file, a->name);
		return 1;
	}
	return 0;
}

static void every_public_function_of_every_header_is_in_the_table(void)
{
	DIR *d = opendir(KARUI_HEADERS);
	KT_CHECK(d);
	int problems = 0, headers = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l < 3 || strcmp(e->d_name + l - 2, ".h") != 0)
			continue;
#ifndef KARUI_HAVE_MPI
		if (strcmp(e->d_name, "mpi.h") == 0) /* libkarui-mpi is not built */
			continue;
#endif
		char path[4096], line[1024];
		snprintf(path, sizeof path, "%s/%s", KARUI_HEADERS, e->d_name);
		FILE *f = fopen(path, "r");
		KT_CHECK(f);
		headers++;
		while (fgets(line, sizeof line, f))
			problems += check_line(e->d_name, line);
		fclose(f);
	}
	closedir(d);
	unsigned calls = 0;
	for (size_t i = 0; i < NAPI; i++) {
		if (!table[i].declared) {
			fprintf(stderr, "  %s is in the table but in no header\n", table[i].name);
			problems++;
		}
		calls += table[i].kind == CALL;
	}
	fprintf(stderr, "  %d headers, %zu functions, %u of them fallible calls\n", headers, NAPI,
		calls);
	KT_CHECK(headers >= 6);
	KT_EQ(problems, 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(every_public_function_of_every_header_is_in_the_table);
	void (*ran[NAPI])(void);
	size_t nran = 0;
	for (size_t i = 0; i < NAPI; i++) {
		size_t j = 0;
		while (j < nran && ran[j] != table[i].test)
			j++;
		if (!table[i].test || j < nran)
			continue;
		ran[nran++] = table[i].test;
		kt_run(table[i].test_name, table[i].test, 120);
	}
	return kt_finish();
}
