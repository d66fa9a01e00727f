/*
 * The page-fault notifier (karui/carea.h, src/carea/faults.c): pages of a
 * region come from fill when first touched, start and end are told of each
 * fault with the faulting thread's id, the other microprocesses run while
 * a page is on its way (on one VP too: the faulting one alone waits, its
 * permit untouched; under the C-area's time slices too), many on the same
 * pages, the fallback where it may not be taken (a blocking section, a
 * thread that is no VP, a system call's own access), the program's own
 * SIGRTMAX, a destroy while
 * microprocesses wait, a fill that fails gives zeros, the kernel's own
 * accesses, and the API's errors.  Where the kernel gives this process no
 * userfaultfd, every case says "skipped".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include "kt_karui.h"
#include <karui/carea.h>


/* A region, or the case skips where userfaultfd cannot be had. */
static kr_faults *region(size_t len, const kr_fault_ops *ops, void *arg)
{
	kr_faults *r = NULL;
	int e = kr_faults_create(&r, len, ops, arg);
	if (e == ENOSYS || e == EPERM)
		KT_SKIP("no userfaultfd for this process");
	KT_EQ(e, 0);
	return r;
}

/* ---------------- pages from fill ---------------- */

struct seen {
	uint32_t fills, starts, ends;
	int start_tid, end_tid;
	uintptr_t base;
};

/* page i holds i + 1 in every byte */
static int fill_index(void *arg, void *page, void *buf)
{
	struct seen *s = arg;
	size_t i = ((uintptr_t)page - s->base) / 4096;
	memset(buf, (int)(i + 1), 4096);
	__atomic_add_fetch(&s->fills, 1, __ATOMIC_RELAXED);
	return 0;
}

static void note_start(void *arg, void *page, int tid)
{
	(void)page;
	struct seen *s = arg;
	s->start_tid = tid;
	__atomic_add_fetch(&s->starts, 1, __ATOMIC_RELAXED);
}

static void note_end(void *arg, void *page, int tid)
{
	(void)page;
	struct seen *s = arg;
	s->end_tid = tid;
	__atomic_add_fetch(&s->ends, 1, __ATOMIC_RELAXED);
}

static struct seen seen;
static kr_faults *R;

static void *toucher(void *a)
{
	(void)a;
	volatile unsigned char *p = kr_faults_addr(R);
	uintptr_t sum = 0;
	for (int i = 0; i < 8; i++)
		sum += p[i * 4096 + 7];
	for (int i = 0; i < 8; i++) /* there now: no fault */
		sum += p[i * 4096 + 100];
	return (void *)sum;
}

static void pages_come_from_fill_when_first_touched(void)
{
	init(1);
	kr_fault_ops ops = {.fill = fill_index, .start = note_start, .end = note_end};
	R = region(8 * 4096 - 100, &ops, &seen);
	seen.base = (uintptr_t)kr_faults_addr(R);
	KT_EQ(kr_faults_size(R), 8 * 4096);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, toucher, NULL), 0);
	void *sum;
	KT_EQ(kr_mp_join(m, &sum), 0);
	KT_EQ((uintptr_t)sum, 2 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8));
	KT_EQ(seen.fills, 8);
	KT_EQ(seen.starts, 8);
	KT_EQ(seen.ends, 8);
	KT_EQ(seen.start_tid, (int)syscall(SYS_gettid)); /* this VP's thread */
	KT_EQ(seen.end_tid, seen.start_tid);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.faults, 8);
	KT_EQ(st.filled, 8);
	KT_EQ(st.failed, 0);
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- the others run meanwhile ---------------- */

/* The counter counts while the toucher's page is on its way: fill waits
 * (at most 10 s) for it to count 1000 more than it had when the fault
 * started. */
static uint64_t counted, at_start;
static uint32_t stop;

static void start_slow(void *arg, void *page, int tid)
{
	(void)arg, (void)page, (void)tid;
	__atomic_store_n(&at_start, __atomic_load_n(&counted, __ATOMIC_ACQUIRE) + 1,
			 __ATOMIC_RELEASE);
}

static int fill_slow(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	for (int i = 0; i < 10000; i++) {
		if (__atomic_load_n(&counted, __ATOMIC_ACQUIRE) >= at_start + 1000)
			break;
		usleep(1000);
	}
	memset(buf, 0x5a, 4096);
	return 0;
}

static void *counter(void *a)
{
	(void)a;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&counted, 1, __ATOMIC_RELEASE);
		kr_mp_yield();
	}
	return NULL;
}

static void *slow_toucher(void *a)
{
	(void)a;
	uint64_t before = __atomic_load_n(&counted, __ATOMIC_ACQUIRE);
	unsigned char v = *(volatile unsigned char *)kr_faults_addr(R);
	uint64_t during = __atomic_load_n(&counted, __ATOMIC_ACQUIRE) - before;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	return (void *)(uintptr_t)(v == 0x5a ? during : 0);
}

static void the_others_run_while_a_page_is_on_its_way(void)
{
	init(2);
	kr_fault_ops ops = {.fill = fill_slow, .start = start_slow};
	R = region(4096, &ops, NULL);
	kr_mp *c, *t;
	KT_EQ(kr_mp_create(&c, NULL, counter, NULL), 0);
	while (__atomic_load_n(&counted, __ATOMIC_ACQUIRE) < 10)
		kr_mp_yield();
	KT_EQ(kr_mp_create(&t, NULL, slow_toucher, NULL), 0);
	void *during;
	KT_EQ(kr_mp_join(t, &during), 0);
	KT_EQ(kr_mp_join(c, NULL), 0);
	KT_CHECK((uintptr_t)during >= 1000); /* and the page's bytes were fill's */
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- on one VP: the faulting microprocess alone waits ---------------- */

/* Where a microprocess cannot be taken off its VP at any instruction (the
 * sanitizer builds: core/preempt.c), a fault waits in the kernel: on one
 * VP nothing else runs meanwhile, and these cases say "skipped". */
static void need_parking(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	KT_SKIP("the sanitizer builds take no microprocess off its VP");
#endif
}

static uint64_t at_fill_start, at_fill_end;

/* A slow page of 0x5a: once its microprocess is off its VP, 50 ms and
 * then until the counter has moved (at most 10 s: the counter cannot
 * move while its VP waits in the kernel), the counter read as the wait
 * starts and as it ends. */
static int fill_50ms(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	kr_faults_stats st = {0};
	KT_WAIT((kr_faults_stats_get(R, &st), st.parked == 1), usleep(1000));
	uint64_t start = __atomic_load_n(&counted, __ATOMIC_ACQUIRE);
	__atomic_store_n(&at_fill_start, start, __ATOMIC_RELEASE);
	struct timespec t = {0, 50 * 1000000L};
	while (nanosleep(&t, &t))
		;
	for (int i = 0; i < 10000 && __atomic_load_n(&counted, __ATOMIC_ACQUIRE) == start; i++)
		usleep(1000);
	memset(buf, 0x5a, 4096);
	__atomic_store_n(&at_fill_end, __atomic_load_n(&counted, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	return 0;
}

static void *plain_toucher(void *a)
{
	(void)a;
	unsigned char v = *(volatile unsigned char *)kr_faults_addr(R);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	return (void *)(uintptr_t)v;
}

/* On one VP: a counter and a toucher whose page takes 50 ms to fill; the
 * counter, on the toucher's VP, counts while the page is being filled.
 * Ends karui. */
static void counter_beside_a_fault(void)
{
	kr_fault_ops ops = {.fill = fill_50ms};
	R = region(4096, &ops, NULL);
	kr_mp *c, *t;
	KT_EQ(kr_mp_create(&c, NULL, counter, NULL), 0);
	KT_EQ(kr_mp_create(&t, NULL, plain_toucher, NULL), 0);
	void *v;
	KT_EQ(kr_mp_join(t, &v), 0);
	KT_EQ(kr_mp_join(c, NULL), 0);
	KT_EQ((uintptr_t)v, 0x5a);
	KT_CHECK(at_fill_end > at_fill_start);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.faults, 1);
	KT_EQ(st.parked, 1);
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

static void on_one_vp_the_others_run_while_a_page_is_on_its_way(void)
{
	need_parking();
	init(1);
	counter_beside_a_fault();
}

/* The same under the C-area with 1 ms time slices: its signal and the
 * notifier's on the same VP. */
static void under_the_carea_with_time_slices_too(void)
{
	need_parking();
	char seg[96];
	snprintf(seg, sizeof seg, "/karui-faults-test-%d", (int)getpid());
	shm_unlink(seg);
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = seg, .slice = 1 * MS}), 0);
	kr_config cfg = {.vps = 1, .alloc = &kr_carea};
	KT_EQ(kr_init(&cfg), 0);
	counter_beside_a_fault();
	shm_unlink(seg);
}

/* A wakeup that comes while a microprocess waits for its page is kept
 * for its next kr_mp_park, and does not end the wait. */
static kr_mp *waiter;

static int fill_after_unpark(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	kr_faults_stats st = {0};
	KT_WAIT((kr_faults_stats_get(R, &st), st.parked == 1), usleep(1000));
	KT_EQ(kr_mp_unpark(waiter), 0); /* from this thread, no VP */
	memset(buf, 0x33, 4096);
	return 0;
}

static void *toucher_then_park(void *a)
{
	(void)a;
	unsigned char v = *(volatile unsigned char *)kr_faults_addr(R);
	KT_EQ(kr_mp_park(), 0); /* the permit the fill left: at once */
	return (void *)(uintptr_t)v;
}

static void a_wakeup_during_the_wait_is_kept(void)
{
	need_parking();
	init(1);
	kr_fault_ops ops = {.fill = fill_after_unpark};
	R = region(4096, &ops, NULL);
	KT_EQ(kr_mp_create(&waiter, NULL, toucher_then_park, NULL), 0);
	void *v;
	KT_EQ(kr_mp_join(waiter, &v), 0);
	KT_EQ((uintptr_t)v, 0x33);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.parked, 1);
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* Many microprocesses of one VP on a few pages: each page filled once,
 * each reads its page's bytes. */
enum { MANY = 24, MANY_PAGES = 4 };

static int fill_index_slowly(void *arg, void *page, void *buf)
{
	struct timespec t = {0, 2 * 1000000L};
	nanosleep(&t, NULL);
	return fill_index(arg, page, buf);
}

static void *page_reader(void *a)
{
	volatile unsigned char *p = kr_faults_addr(R);
	return (void *)(uintptr_t)p[(uintptr_t)a * 4096 + 9];
}

static void many_on_the_same_pages_and_on_different_ones(void)
{
	init(1);
	memset(&seen, 0, sizeof seen);
	kr_fault_ops ops = {.fill = fill_index_slowly, .start = note_start, .end = note_end};
	R = region(MANY_PAGES * 4096, &ops, &seen);
	seen.base = (uintptr_t)kr_faults_addr(R);
	kr_mp *m[MANY];
	for (uintptr_t i = 0; i < MANY; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, page_reader, (void *)(i % MANY_PAGES)), 0);
	for (uintptr_t i = 0; i < MANY; i++) {
		void *v;
		KT_EQ(kr_mp_join(m[i], &v), 0);
		KT_EQ((uintptr_t)v, i % MANY_PAGES + 1);
	}
	KT_EQ(seen.fills, MANY_PAGES);
	KT_EQ(seen.starts, MANY_PAGES);
	KT_EQ(seen.ends, MANY_PAGES);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.faults, MANY_PAGES);
	KT_EQ(st.filled, MANY_PAGES);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	KT_CHECK(st.parked >= MANY_PAGES); /* each page's first, at least */
#endif
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- where it waits in the kernel ---------------- */

static void *blocking_toucher(void *a)
{
	(void)a;
	KT_EQ(kr_blocking_begin(), 0);
	unsigned char v = *(volatile unsigned char *)kr_faults_addr(R);
	KT_EQ(kr_blocking_end(), 0);
	return (void *)(uintptr_t)v;
}

/* A read(2) into the region by a microprocess: the kernel's own access,
 * which a signal does not end: it is left to wait in the kernel (served,
 * unless userfaultfd is the user-mode faults' only). */
static void *kernel_toucher(void *a)
{
	int *fds = a;
	return (void *)read(fds[0], (char *)kr_faults_addr(R) + 2 * 4096 + 10, 5);
}

static void *thread_toucher(void *a)
{
	(void)a;
	return (void *)(uintptr_t)((volatile unsigned char *)kr_faults_addr(R))[4096];
}

/* In a blocking section, on a thread that is no VP and for a system
 * call's own access, the fault waits in the kernel, and its page is
 * right. */
static void where_it_may_not_be_taken_the_fault_waits_in_the_kernel(void)
{
	init(1);
	memset(&seen, 0, sizeof seen);
	kr_fault_ops ops = {.fill = fill_index};
	R = region(3 * 4096, &ops, &seen);
	seen.base = (uintptr_t)kr_faults_addr(R);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, blocking_toucher, NULL), 0);
	void *v;
	KT_EQ(kr_mp_join(m, &v), 0);
	KT_EQ((uintptr_t)v, 1);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, thread_toucher, NULL), 0);
	KT_EQ(pthread_join(t, &v), 0);
	KT_EQ((uintptr_t)v, 2);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	int fds[2];
	KT_EQ(pipe(fds), 0);
	KT_EQ(write(fds[1], "hello", 5), 5);
	KT_EQ(kr_mp_create(&m, NULL, kernel_toucher, fds), 0);
	KT_EQ(kr_mp_join(m, &v), 0);
	if (st.user_only) {
		KT_EQ((intptr_t)v, -1);
	} else {
		KT_EQ((intptr_t)v, 5);
		KT_CHECK(!memcmp((char *)kr_faults_addr(R) + 2 * 4096 + 10, "hello", 5));
	}
	close(fds[0]);
	close(fds[1]);
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.faults, st.user_only ? 2 : 3);
	KT_EQ(st.parked, 0);
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* The program's own SIGRTMAX: one it queues to itself reaches the handler
 * it had before the first region; once it takes the signal back, faults
 * wait in the kernel and no signal of the notifier's reaches it. */
static int program_got;
static void *first_toucher(void *a);

static void program_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	__atomic_add_fetch(&program_got, si->si_value.sival_int, __ATOMIC_RELAXED);
}

static void the_programs_own_sigrtmax_is_its_own(void)
{
	struct sigaction sa = {.sa_sigaction = program_handler, .sa_flags = SA_SIGINFO};
	KT_EQ(sigaction(SIGRTMAX, &sa, NULL), 0);
	init(1);
	memset(&seen, 0, sizeof seen);
	kr_fault_ops ops = {.fill = fill_index};
	R = region(4096, &ops, &seen);
	seen.base = (uintptr_t)kr_faults_addr(R);
	KT_EQ(sigqueue(getpid(), SIGRTMAX, (union sigval){.sival_int = 3}), 0);
	KT_WAIT(__atomic_load_n(&program_got, __ATOMIC_RELAXED) == 3, usleep(1000));
	KT_EQ(sigaction(SIGRTMAX, &sa, NULL), 0); /* taken back */
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, first_toucher, NULL), 0);
	void *v;
	KT_EQ(kr_mp_join(m, &v), 0);
	KT_EQ((uintptr_t)v, 1);
	KT_EQ(__atomic_load_n(&program_got, __ATOMIC_RELAXED), 3);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.parked, 0);
	KT_EQ(kr_faults_destroy(R), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- destroyed while microprocesses wait ---------------- */

/* Page 0's fill, once started, waits until the region is being
 * destroyed, and ends; page 1's fault comes meanwhile and is never
 * filled: its microprocess is woken by the destroy, and reads zeros. */
static uint32_t destroying, filling;

static int fill_until_destroy(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	__atomic_store_n(&filling, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < KT_WAIT_S * 1000 && !__atomic_load_n(&destroying, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	memset(buf, 0x5a, 4096);
	return 0;
}

static void *first_toucher(void *a)
{
	(void)a;
	return (void *)(uintptr_t)((volatile unsigned char *)kr_faults_addr(R))[0];
}

static void *second_toucher(void *a)
{
	(void)a;
	return (void *)(uintptr_t)((volatile unsigned char *)kr_faults_addr(R))[4096];
}

static void destroyed_while_they_wait_they_get_the_page_or_zeros(void)
{
	need_parking();
	init(1);
	kr_fault_ops ops = {.fill = fill_until_destroy};
	R = region(2 * 4096, &ops, NULL);
	kr_mp *a, *b;
	KT_EQ(kr_mp_create(&a, NULL, first_toucher, NULL), 0);
	kr_faults_stats st = {0};
	KT_WAIT((kr_faults_stats_get(R, &st), st.parked == 1), kr_mp_yield());
	KT_WAIT(__atomic_load_n(&filling, __ATOMIC_ACQUIRE), kr_mp_yield());
	KT_EQ(kr_mp_create(&b, NULL, second_toucher, NULL), 0);
	KT_WAIT((kr_faults_stats_get(R, &st), st.parked == 2), kr_mp_yield());
	__atomic_store_n(&destroying, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_faults_destroy(R), 0);
	void *va, *vb;
	KT_EQ(kr_mp_join(a, &va), 0);
	KT_EQ(kr_mp_join(b, &vb), 0);
	KT_EQ((uintptr_t)va, 0x5a); /* its fill was under way: it ended */
	KT_EQ((uintptr_t)vb, 0);    /* never filled: zeros */
	KT_EQ(kr_fini(), 0);
}

/* ---------------- failures and errors ---------------- */

static int fill_fails(void *arg, void *page, void *buf)
{
	(void)arg, (void)page;
	memset(buf, 0x77, 4096); /* not to be used */
	return EIO;
}

static void a_fill_that_fails_gives_zeros(void)
{
	kr_fault_ops ops = {.fill = fill_fails};
	R = region(2 * 4096, &ops, NULL);
	volatile unsigned char *p = kr_faults_addr(R);
	KT_EQ(p[5], 0);
	KT_EQ(p[4096 + 5], 0);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	KT_EQ(st.failed, 2);
	KT_EQ(st.filled, 2);
	KT_EQ(kr_faults_destroy(R), 0);
}

/* A read(2) into a missing page: the kernel's own access, served unless
 * userfaultfd is the user-mode faults' only (then EFAULT, as the header
 * says). */
static void the_kernels_own_accesses_are_served_unless_user_only(void)
{
	kr_fault_ops ops = {.fill = fill_fails};
	R = region(4096, &ops, NULL);
	int fds[2];
	KT_EQ(pipe(fds), 0);
	KT_EQ(write(fds[1], "hello", 5), 5);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(R, &st), 0);
	char *p = kr_faults_addr(R);
	ssize_t n = read(fds[0], p + 10, 5);
	if (st.user_only) {
		KT_EQ(n, -1);
		KT_EQ(errno, EFAULT);
	} else {
		KT_EQ(n, 5);
		KT_CHECK(!memcmp(p + 10, "hello", 5));
		KT_EQ(p[0], 0); /* the failed fill's zeros around it */
	}
	close(fds[0]);
	close(fds[1]);
	KT_EQ(kr_faults_destroy(R), 0);
}

static void bad_arguments_are_refused(void)
{
	kr_fault_ops ops = {.fill = fill_fails}, none = {0};
	kr_faults *r;
	KT_EQ(kr_faults_create(NULL, 4096, &ops, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 0, &ops, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, (size_t)1 << 41, &ops, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 4096, NULL, NULL), EINVAL);
	KT_EQ(kr_faults_create(&r, 4096, &none, NULL), EINVAL);
	KT_EQ(kr_faults_destroy(NULL), EINVAL);
	kr_faults_stats st;
	KT_EQ(kr_faults_stats_get(NULL, &st), EINVAL);
	KT_CHECK(kr_faults_addr(NULL) == NULL);
	KT_EQ(kr_faults_size(NULL), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(pages_come_from_fill_when_first_touched);
	KT_RUN(the_others_run_while_a_page_is_on_its_way);
	KT_RUN(on_one_vp_the_others_run_while_a_page_is_on_its_way);
	KT_RUN(under_the_carea_with_time_slices_too);
	KT_RUN(a_wakeup_during_the_wait_is_kept);
	KT_RUN(many_on_the_same_pages_and_on_different_ones);
	KT_RUN(where_it_may_not_be_taken_the_fault_waits_in_the_kernel);
	KT_RUN(the_programs_own_sigrtmax_is_its_own);
	KT_RUN(destroyed_while_they_wait_they_get_the_page_or_zeros);
	KT_RUN(a_fill_that_fails_gives_zeros);
	KT_RUN(the_kernels_own_accesses_are_served_unless_user_only);
	KT_RUN(bad_arguments_are_refused);
	return kt_finish();
}
