/* L2: the runtime (src/core/runtime.c): kr_init and kr_fini, calls made
 * off a VP, concurrent inits, fini from another VP, fork, and several
 * event sources. */
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "kt.h"
#include "kt_core.h"

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
	e[0] = kr_mp_create(&m, NULL, ret_arg, NULL);
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

/* A detached microprocess whose last act wakes main, then takes 20 ms to
 * end (a pipe's writer that puts its end and returns is such a one). */
static kr_mp *fini_waiter;
static void *wake_main_then_end(void *a)
{
	(void)a;
	KT_EQ(kr_mp_unpark(fini_waiter), 0);
	kr_mp_sleep_for(20000000);
	return NULL;
}

/* kr_fini waits a while for a microprocess on its way out. */
static void fini_waits_for_one_on_its_way_out(void)
{
	init(2);
	fini_waiter = kr_mp_self();
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, wake_main_then_end, NULL), 0);
	KT_EQ(kr_mp_detach(m), 0);
	KT_EQ(kr_mp_park(), 0);
	KT_EQ(kr_fini(), 0);
}

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
	KT_EQ(kr_blocking_begin(), EPERM);
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
	KT_EQ(kr_blocking_begin(), 0);
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_EQ(kr_blocking_end(), 0);
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

/* ---------------- several event sources ---------------- */

/* Two toy sources of requests that a thread that is no VP completes:
 * `io`, whose completions, as the kernel's, come with an event on an
 * eventfd that its wait sleeps on (poll(2)) and its kick writes; and
 * `mpi`, whose completions, as an MPI library's, only its poll sees: it
 * says when it must be polled (`due`), and its first request wakes a VP
 * with kr_sched_unpark(0).  Each request is a microprocess parked until
 * its source's poll has seen it completed. */
enum { TOY_REQS = 8 };

struct toy_req {
	struct toy *of;
	kr_mp *mp;
	uint32_t state; /* 0 waiting, 1 completed, 2 seen by the poll */
	int value;
};

struct toy {
	int efd;                 /* io only */
	struct toy_req req[TOY_REQS];
	uint32_t pending;        /* requests not yet seen completed */
	uint32_t polls, waits, dues;
};

static struct toy toy_io, toy_mpi;

static void toy_poll(void *arg)
{
	struct toy *t = arg;
	__atomic_fetch_add(&t->polls, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < TOY_REQS; i++) {
		uint32_t one = 1;
		if (__atomic_compare_exchange_n(&t->req[i].state, &one, 2, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_fetch_sub(&t->pending, 1, __ATOMIC_RELAXED);
			kr_mp_unpark(t->req[i].mp);
		}
	}
}

static void toy_io_wait(void *arg, uint64_t deadline)
{
	struct toy *t = arg;
	__atomic_fetch_add(&t->waits, 1, __ATOMIC_RELAXED);
	uint64_t now = kr_now();
	int ms = deadline == KR_FOREVER ? -1
		 : deadline <= now       ? 0
					 : (int)((deadline - now + 999999) / 1000000);
	struct pollfd pf = {.fd = t->efd, .events = POLLIN};
	if (poll(&pf, 1, ms) == 1) {
		uint64_t v;
		KT_EQ(read(t->efd, &v, sizeof v), (ssize_t)sizeof v);
	}
	toy_poll(t);
}

static void toy_io_kick(void *arg)
{
	uint64_t one = 1;
	KT_EQ(write(((struct toy *)arg)->efd, &one, sizeof one), (ssize_t)sizeof one);
}

/* never called beside the io source (sched.h: due) */
static void toy_mpi_wait(void *arg, uint64_t deadline)
{
	__atomic_fetch_add(&((struct toy *)arg)->waits, 1, __ATOMIC_RELAXED);
	kr_vp_sleep_until(deadline);
}

static void toy_mpi_kick(void *arg) { kr_vp_wakeup(1); }

static uint64_t toy_mpi_due(void *arg)
{
	struct toy *t = arg;
	__atomic_fetch_add(&t->dues, 1, __ATOMIC_RELAXED);
	return __atomic_load_n(&t->pending, __ATOMIC_RELAXED) ? kr_now() + 2000000 : KR_FOREVER;
}

static const kr_poller io_source = {.poll = toy_poll, .wait = toy_io_wait, .kick = toy_io_kick,
				    .arg = &toy_io};
static const kr_poller mpi_source = {.poll = toy_poll, .wait = toy_mpi_wait,
				     .kick = toy_mpi_kick, .due = toy_mpi_due, .arg = &toy_mpi};

static void *toy_request(void *arg)
{
	struct toy_req *r = arg;
	struct toy *t = r->of;
	r->mp = kr_mp_self();
	if (__atomic_fetch_add(&t->pending, 1, __ATOMIC_SEQ_CST) == 0 && t == &toy_mpi)
		kr_sched_unpark(0);
	while (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != 2)
		kr_mp_park();
	return (void *)(intptr_t)r->value;
}

static int toy_all_parked(void)
{
	return __atomic_load_n(&toy_io.pending, __ATOMIC_ACQUIRE) == TOY_REQS &&
	       __atomic_load_n(&toy_mpi.pending, __ATOMIC_ACQUIRE) == TOY_REQS;
}

/* The thread that completes the requests, one every 2 ms, taking turns;
 * only io's come with an event. */
static void *toy_completer(void *unused)
{
	KT_WAIT(toy_all_parked(), kt_nap_us(1000));
	for (int i = 0; i < TOY_REQS; i++) {
		for (int k = 0; k < 2; k++) {
			struct toy *t = k ? &toy_mpi : &toy_io;
			t->req[i].value = 100 * k + i;
			kt_nap_us(2000);
			__atomic_store_n(&t->req[i].state, 1, __ATOMIC_RELEASE);
			if (!k)
				toy_io_kick(t);
		}
	}
	return NULL;
}

/* Both toys at once, on 2 VPs that go idle: every request completes,
 * the VPs slept in io's wait, and mpi's wait was never used.  The order
 * in which the sources are added does not matter. */
static void two_sources_each_wake_sleeping_vps(void)
{
	for (int order = 0; order < 2; order++) {
		memset(&toy_io, 0, sizeof toy_io);
		memset(&toy_mpi, 0, sizeof toy_mpi);
		toy_io.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		KT_CHECK(toy_io.efd >= 0);
		kr_config c = {.vps = 2};
		KT_EQ(kr_init(&c), 0);
		KT_EQ(kr_poller_add(order ? &mpi_source : &io_source), 0);
		KT_EQ(kr_poller_add(order ? &io_source : &mpi_source), 0);
		kr_mp *m[2][TOY_REQS];
		for (int i = 0; i < TOY_REQS; i++)
			for (int k = 0; k < 2; k++) {
				struct toy *t = k ? &toy_mpi : &toy_io;
				t->req[i].of = t;
				KT_EQ(kr_mp_create(&m[k][i], NULL, toy_request, &t->req[i]), 0);
			}
		pthread_t th;
		KT_EQ(pthread_create(&th, NULL, toy_completer, NULL), 0);
		for (int i = 0; i < TOY_REQS; i++)
			for (int k = 0; k < 2; k++) {
				void *v;
				KT_EQ(kr_mp_join(m[k][i], &v), 0);
				KT_EQ((intptr_t)v, 100 * k + i);
			}
		KT_EQ(pthread_join(th, NULL), 0);
		KT_CHECK(__atomic_load_n(&toy_io.waits, __ATOMIC_RELAXED) > 0);
		KT_CHECK(__atomic_load_n(&toy_mpi.dues, __ATOMIC_RELAXED) > 0);
		KT_EQ(__atomic_load_n(&toy_mpi.waits, __ATOMIC_RELAXED), 0);
		/* one goes, the other stays and is polled alone */
		KT_EQ(kr_poller_remove(&mpi_source), 0);
		KT_EQ(kr_poller_remove(&mpi_source), ESRCH);
		KT_EQ(kr_fini(), 0);
		close(toy_io.efd);
	}
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(init_rejects_bad_input);
	KT_RUN(calls_off_a_vp_return_eperm);
	KT_RUN(fini_refuses_while_others_live_and_off_main);
	KT_RUN(fini_waits_for_one_on_its_way_out);
	KT_RUN(fini_from_another_vp_returns_to_the_first_thread);
	KT_RUN(concurrent_inits_let_exactly_one_start);
	KT_RUN(child_of_fork_finds_karui_stopped_and_the_parent_goes_on);
	KT_RUN(two_sources_each_wake_sleeping_vps);
	return kt_finish();
}
