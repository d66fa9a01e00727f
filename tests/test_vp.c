/* L0: virtual processors. */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "karui/core.h"
#include "karui/vp.h"
#include "kt.h"

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void noop_vp(kr_vp *vp, void *arg) { (void)vp; (void)arg; }

static void allocate_rejects_bad_counts(void)
{
	kr_vp *v[2];
	KT_EQ(kr_vp_allocate(v, 0, noop_vp, NULL), EINVAL);
	KT_EQ(kr_vp_allocate(v, 1, NULL, NULL), EINVAL);
	KT_EQ(kr_vp_allocate(NULL, KR_VP_MAX + 1, noop_vp, NULL), EAGAIN);
	KT_EQ(kr_vp_allocate(NULL, (unsigned)-1, noop_vp, NULL), EAGAIN);
	KT_EQ(kr_vp_wakeup(0), EINVAL);
}

static int ran[8];
static void mark_vp(kr_vp *vp, void *arg)
{
	KT_CHECK(kr_vp_self() == vp);
	KT_EQ(kr_vp_status(vp), KR_VP_RUNNING);
	unsigned char *area = kr_vp_area(vp);
	for (int i = 0; i < KR_VP_AREA_SIZE; i++)
		KT_EQ(area[i], 0);
	__atomic_fetch_add(&ran[kr_vp_id(vp) % 8], 1, __ATOMIC_RELAXED);
	(void)arg;
}

static void vps_run_their_function_and_are_joined(void)
{
	kr_vp *v[4];
	KT_EQ(kr_vp_allocate(v, 4, mark_vp, NULL), 0);
	KT_EQ(kr_vp_count(), 4);
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_vp_join(v[i]), 0);
	KT_EQ(kr_vp_count(), 0);
	int total = 0;
	for (int i = 0; i < 8; i++)
		total += ran[i];
	KT_EQ(total, 4);
	KT_EQ(kr_vp_join(NULL), EINVAL);
}

static void adopt_and_release_the_calling_thread(void)
{
	kr_vp *me;
	KT_CHECK(kr_vp_self() == NULL);
	KT_EQ(kr_vp_sleep_until(0), EPERM);
	KT_EQ(kr_vp_switch(), EPERM);
	KT_EQ(kr_vp_release(), EPERM);
	KT_EQ(kr_vp_adopt(&me), 0);
	KT_CHECK(kr_vp_self() == me);
	KT_EQ(kr_vp_adopt(&me), EEXIST);
	KT_EQ(kr_vp_join(me), EINVAL); /* adopted: release, not join */
	KT_EQ(kr_vp_switch(), 0);
	KT_EQ(kr_vp_release(), 0);
	KT_CHECK(kr_vp_self() == NULL);
}

/* The calling thread's alternate signal stack: its size, 0 if it has none. */
static size_t altstack_now(void)
{
	stack_t ss;
	KT_EQ(sigaltstack(NULL, &ss), 0);
	return (ss.ss_flags & SS_DISABLE) ? 0 : ss.ss_size;
}

static size_t vp_altstack[2];
static void note_altstack(kr_vp *vp, void *arg)
{
	(void)arg;
	vp_altstack[kr_vp_id(vp)] = altstack_now();
}

/* Every VP has an alternate signal stack: its own if it had one (a
 * sanitizer's, say), else karui's, 64 KiB or more, which an adopted thread
 * loses again when it is released. */
static void every_vp_has_an_alternate_signal_stack(void)
{
	size_t before = altstack_now();
	kr_vp *me, *v[2];
	KT_EQ(kr_vp_adopt(&me), 0);
	size_t as_vp = altstack_now();
	KT_CHECK(before ? as_vp == before : as_vp >= 65536);
	KT_EQ(kr_vp_release(), 0);
	KT_EQ(altstack_now(), before);
	KT_EQ(kr_vp_allocate(v, 2, note_altstack, NULL), 0);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_vp_join(v[i]), 0);
	for (int i = 0; i < 2; i++)
		KT_CHECK(vp_altstack[i] >= 65536 || (before && vp_altstack[i] > 0));
}

static void wakeup_before_sleep_is_kept(void)
{
	kr_vp *me;
	KT_EQ(kr_vp_adopt(&me), 0);
	KT_EQ(kr_vp_sleep_until(0), ETIMEDOUT); /* nothing pending */
	KT_EQ(kr_vp_wakeup(1), 0);
	/* returns at once: without the wakeup, ETIMEDOUT at the deadline */
	KT_EQ(kr_vp_sleep_until(kr_now() + 5000000000ull), 0);
	/* pending wakeups are capped at one per live VP */
	KT_EQ(kr_vp_wakeup(100), 0);
	KT_EQ(kr_vp_sleep_until(0), 0);
	KT_EQ(kr_vp_sleep_until(0), ETIMEDOUT);
	KT_EQ(kr_vp_release(), 0);
}

static void sleep_times_out(void)
{
	kr_vp *me;
	KT_EQ(kr_vp_adopt(&me), 0);
	double t0 = now_ms();
	KT_EQ(kr_vp_sleep_until(kr_now() + 30000000), ETIMEDOUT);
	KT_CHECK(now_ms() - t0 >= 29);
	KT_EQ(kr_vp_release(), 0);
}

static uint32_t woke;
static pid_t sleeper_tid;
static void sleep_long(kr_vp *vp, void *arg)
{
	__atomic_store_n(&sleeper_tid, kt_gettid(), __ATOMIC_RELEASE);
	int r = kr_vp_sleep_until(KR_FOREVER);
	__atomic_store_n(&woke, r == 0 ? 1 : 2, __ATOMIC_RELEASE);
}

/* A sleeping VP shows SLEEPING, sleeps in the kernel using no CPU, and a
 * wakeup from a thread that is no VP resumes it. */
static void sleeping_vp_uses_no_cpu_and_wakes(void)
{
	kr_vp *v;
	KT_EQ(kr_vp_allocate(&v, 1, sleep_long, NULL), 0);
	KT_WAIT(kr_vp_status(v) == KR_VP_SLEEPING, kt_nap_us(1000));
	pid_t t = __atomic_load_n(&sleeper_tid, __ATOMIC_ACQUIRE);
	KT_CHECK(kt_threads_idle(&t, 1, 300)); /* a busy-waiting VP reads 'R' */
	KT_EQ(__atomic_load_n(&woke, __ATOMIC_ACQUIRE), 0);
	KT_EQ(kr_vp_wakeup(1), 0);
	KT_EQ(kr_vp_join(v), 0);
	KT_EQ(woke, 1);
}

/* An event source's wait, left queued on the wakeup word by a VP that woke
 * for another reason (kr_vp_sleep_end with queued), comes first in the
 * futex's queue: a wakeup must still reach the VP that really sleeps.
 * Here a plain thread's FUTEX_WAIT stands for the queued wait. */
static uint32_t *src_word;
static pid_t src_tid;
static void *source_wait(void *a)
{
	(void)a;
	__atomic_store_n(&src_tid, kt_gettid(), __ATOMIC_RELEASE);
	syscall(SYS_futex, src_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return NULL;
}

/* The thread is asleep in the kernel (its futex wait, in these tests). */
static int thread_sleeps(const pid_t *tid)
{
	pid_t t = __atomic_load_n(tid, __ATOMIC_ACQUIRE);
	return t && kt_thread_state(t) == 'S';
}

static void a_queued_source_wait_does_not_swallow_a_wakeup(void)
{
	kr_vp *me, *b;
	uint32_t *word;
	KT_EQ(kr_vp_sleep_begin(&word, 0), EPERM);
	KT_EQ(kr_vp_sleep_end(0), EPERM);
	KT_EQ(kr_vp_adopt(&me), 0);
	while (kr_vp_sleep_until(0) == 0) /* nothing pending */
		;
	KT_EQ(kr_vp_sleep_begin(&word, 0), EAGAIN);
	KT_EQ(kr_vp_status(me), KR_VP_SLEEPING);
	src_word = word;
	pthread_t s;
	KT_EQ(pthread_create(&s, NULL, source_wait, NULL), 0);
	KT_WAIT(thread_sleeps(&src_tid), kt_nap_us(1000)); /* s waits on the word:
							      this VP's queued wait */
	KT_EQ(kr_vp_sleep_end(1), ETIMEDOUT);
	KT_EQ(kr_vp_status(me), KR_VP_RUNNING);
	woke = 0;
	sleeper_tid = 0;
	KT_EQ(kr_vp_allocate(&b, 1, sleep_long, NULL), 0);
	/* b waits too, behind s: SLEEPING comes before its futex wait */
	KT_WAIT(kr_vp_status(b) == KR_VP_SLEEPING && thread_sleeps(&sleeper_tid),
		kt_nap_us(1000));
	KT_EQ(kr_vp_wakeup(1), 0);
	KT_WAIT(__atomic_load_n(&woke, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_EQ(__atomic_load_n(&woke, __ATOMIC_ACQUIRE), 1);
	KT_EQ(kr_vp_join(b), 0);
	KT_EQ(pthread_join(s, NULL), 0); /* woken as well, past it */
	kr_vp_wait_ended();
	/* a wakeup taken at begin: no sleep */
	KT_EQ(kr_vp_wakeup(1), 0);
	KT_EQ(kr_vp_sleep_begin(&word, 0), 0);
	KT_EQ(kr_vp_status(me), KR_VP_RUNNING);
	KT_EQ(kr_vp_release(), 0);
}

static kr_vp *selfvp;
static int self_join;
static void join_me(kr_vp *vp, void *arg) { self_join = kr_vp_join(vp); }
static void join_of_self_returns_edeadlk(void)
{
	KT_EQ(kr_vp_allocate(&selfvp, 1, join_me, NULL), 0);
	KT_EQ(kr_vp_join(selfvp), 0);
	KT_EQ(self_join, EDEADLK);
}

static int ran_fn;
static void count_vp(kr_vp *vp, void *arg) { __atomic_fetch_add(&ran_fn, 1, __ATOMIC_RELAXED); }

/* When the kernel refuses a thread part-way, no VP's function has run and
 * no VP is left behind.  The address space is capped so that only a few
 * 8 MiB thread stacks fit. */
static void allocate_is_all_or_none(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	KT_SKIP("the sanitizer runtime needs an uncapped address space");
#endif
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0;
	KT_CHECK(f && fscanf(f, "%ld", &pages) == 1);
	fclose(f);
	struct rlimit rl = {.rlim_cur = (rlim_t)pages * 4096 + (20u << 20),
			    .rlim_max = RLIM_INFINITY};
	KT_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	kr_vp *v[8];
	int err = kr_vp_allocate(v, 8, count_vp, NULL);
	if (err == 0)
		KT_SKIP("the address-space cap did not stop thread creation here");
	KT_EQ(err, EAGAIN);
	KT_EQ(__atomic_load_n(&ran_fn, __ATOMIC_RELAXED), 0);
	KT_EQ(kr_vp_count(), 0);
	for (int i = 0; i < 8; i++)
		KT_CHECK(v[i] == NULL);
}

/* The thread karui runs on stays a VP until kr_fini: releasing it from
 * under karui is refused. */
static void release_of_the_vp_karui_runs_on_returns_ebusy(void)
{
	KT_EQ(kr_init(NULL), 0);
	kr_vp *vp = kr_vp_self();
	KT_CHECK(vp != NULL);
	KT_EQ(kr_vp_release(), EBUSY);
	KT_CHECK(kr_vp_self() == vp);
	KT_EQ(kr_vp_status(vp), KR_VP_RUNNING);
	KT_EQ(kr_fini(), 0);
	KT_CHECK(kr_vp_self() == NULL);
	KT_EQ(kr_vp_release(), EPERM);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(allocate_rejects_bad_counts);
	KT_RUN(vps_run_their_function_and_are_joined);
	KT_RUN(adopt_and_release_the_calling_thread);
	KT_RUN(every_vp_has_an_alternate_signal_stack);
	KT_RUN(wakeup_before_sleep_is_kept);
	KT_RUN(sleep_times_out);
	KT_RUN(sleeping_vp_uses_no_cpu_and_wakes);
	KT_RUN(a_queued_source_wait_does_not_swallow_a_wakeup);
	KT_RUN(join_of_self_returns_edeadlk);
	KT_RUN(allocate_is_all_or_none);
	KT_RUN(release_of_the_vp_karui_runs_on_returns_ebusy);
	return kt_finish();
}
