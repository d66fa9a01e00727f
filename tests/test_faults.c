/*
 * The page-fault notifier (karui/carea.h, src/carea/faults.c): pages of a
 * region come from fill when first touched, start and end are told of each
 * fault with the faulting thread's id, the other microprocesses run while
 * a page is on its way, a fill that fails gives zeros, the kernel's own
 * accesses, and the API's errors.  Where the kernel gives this process no userfaultfd, every case
 * says "skipped".
 */
#define _GNU_SOURCE
#include <sys/syscall.h>

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
	KT_RUN(a_fill_that_fails_gives_zeros);
	KT_RUN(the_kernels_own_accesses_are_served_unless_user_only);
	KT_RUN(bad_arguments_are_refused);
	return kt_finish();
}
