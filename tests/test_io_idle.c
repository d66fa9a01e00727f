/* L3 io: how VPs wait for I/O (src/io/uring.c, epoll.c) and hand it over
 * around blocking calls: idle waiters use no CPU, I/O in flight while its VP
 * blocks, spares, epoll's waiter, completions kept on their VP.  Run on
 * both back ends (kt_io.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_io.h"

/* init(vps) for a test of one back end: skipped, with why, on the other. */
static void init_on(unsigned vps, const char *backend, const char *why)
{
	init(vps);
	if (strcmp(kr_io_backend(), backend) != 0) {
		kr_fini();
		KT_SKIP(why);
	}
}

/* ---------------- idle and blocking ---------------- */

static uint32_t on_pipe; /* readers that have started */

static void *park_on_pipe(void *a)
{
	int fd = (int)(intptr_t)a;
	char c;
	size_t n;
	__atomic_fetch_add(&on_pipe, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(fd, &c, 1, &n), 0);
	KT_EQ(n, 1);
	return NULL;
}

static int all_on_pipe(void) { return __atomic_load_n(&on_pipe, __ATOMIC_ACQUIRE) == 100; }

/* 100 microprocesses waiting on a pipe, on 2 VPs: both VPs sleep in the
 * kernel (in their rings, or in epoll and on L0) and stay asleep. */
static void microprocesses_waiting_on_io_use_no_cpu(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	kr_mp *m[100];
	for (int i = 0; i < 100; i++)
		KT_EQ(kr_mp_create(&m[i], &small, park_on_pipe, (void *)(intptr_t)p[0]), 0);
	KT_CHECK(kt_vps_idle(2, all_on_pipe, 300));
	char ones[100];
	memset(ones, 1, sizeof ones);
	KT_EQ(write(p[1], ones, 100), 100);
	for (int i = 0; i < 100; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

static int finished[3], nfinished;

static void *plain_blocking_read(void *a)
{
	int fd = (int)(intptr_t)a;
	char c = 0;
	KT_EQ(kr_blocking_begin(), 0);
	KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
	ssize_t n = read(fd, &c, 1); /* the writer waits for the others */
	KT_EQ(kr_blocking_end(), 0);
	KT_EQ(n, 1);
	finished[__atomic_fetch_add(&nfinished, 1, __ATOMIC_RELAXED)] = 0;
	return NULL;
}

static void *short_worker(void *a)
{
	for (int i = 0; i < 200; i++)
		kr_mp_yield();
	KT_EQ(kr_mp_sleep_for(10 * MS), 0);
	finished[__atomic_fetch_add(&nfinished, 1, __ATOMIC_RELAXED)] = (int)(intptr_t)a;
	return NULL;
}

/* Writes once both short workers have finished: they can only if the
 * blocked VP's work went to another VP meanwhile. */
static void *late_writer(void *a)
{
	KT_WAIT(__atomic_load_n(&nfinished, __ATOMIC_ACQUIRE) == 2, kt_nap_us(1000));
	KT_EQ(write((int)(intptr_t)a, "w", 1), 1);
	return NULL;
}

static void blocking_call_hands_the_vp_to_the_others(void)
{
	init(1);
	KT_EQ(kr_vp_count(), 1);
	int p[2];
	mkpipe(p);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, late_writer, (void *)(intptr_t)p[1]), 0);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, plain_blocking_read, (void *)(intptr_t)p[0]), 0);
	KT_EQ(kr_mp_create(&m[1], &small, short_worker, (void *)1), 0);
	KT_EQ(kr_mp_create(&m[2], &small, short_worker, (void *)2), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  order %d %d %d after %.0f ms, %u VPs\n", finished[0], finished[1],
		finished[2], (kr_now() - t0) / 1e6, kr_vp_count());
	KT_EQ(nfinished, 3);
	KT_CHECK(finished[0] != 0 && finished[1] != 0); /* the others first */
	KT_EQ(finished[2], 0);
	KT_EQ(kr_vp_count(), 2); /* the spare VP that took over */
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

/* A read in flight when its VP enters a blocking call must still complete
 * while the call blocks: here the blocking call waits for what the read's
 * microprocess does next.  B's poll gives up after KT_WAIT_S: a read stuck
 * with the blocked VP would show as B timing out. */
static int moved_pipe[2], unblock_pipe[2];
static uint32_t in_read, b_blocks;

static void *reader_then_unblock(void *a)
{
	(void)a;
	char c = 0;
	size_t n;
	__atomic_store_n(&in_read, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read_until(moved_pipe[0], &c, 1, &n, in_ms(100000)), 0); /* past B's poll */
	KT_EQ(n, 1);
	KT_EQ(c, 'm');
	KT_EQ(write(unblock_pipe[1], "u", 1), 1);
	return NULL;
}

static void *blocks_until_unblocked(void *a)
{
	(void)a;
	/* one VP: the reader has run, so its read is in flight */
	KT_WAIT(__atomic_load_n(&in_read, __ATOMIC_ACQUIRE), kr_mp_yield());
	KT_EQ(kr_blocking_begin(), 0);
	__atomic_store_n(&b_blocks, 1, __ATOMIC_RELEASE);
	struct pollfd pf = {.fd = unblock_pipe[0], .events = POLLIN};
	int n = poll(&pf, 1, KT_WAIT_S * 1000);
	KT_EQ(kr_blocking_end(), 0);
	KT_EQ(n, 1);
	return NULL;
}

static void *late_kr_writer(void *a)
{
	(void)a;
	KT_WAIT(__atomic_load_n(&b_blocks, __ATOMIC_ACQUIRE), kr_mp_sleep_for(MS));
	size_t n;
	KT_EQ(kr_write(moved_pipe[1], "m", 1, &n), 0);
	KT_EQ(n, 1);
	return NULL;
}

static void io_in_flight_completes_while_its_vp_blocks(void)
{
	init(1);
	mkpipe(moved_pipe);
	mkpipe(unblock_pipe);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, reader_then_unblock, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, blocks_until_unblocked, NULL), 0);
	KT_EQ(kr_mp_create(&m[2], &small, late_kr_writer, NULL), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	fprintf(stderr, "  unblocked after %.0f ms\n", (kr_now() - t0) / 1e6);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(moved_pipe[i]), 0);
		KT_EQ(kr_close(unblock_pipe[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* A spare VP that retires may have been the one waiting in a shared event
 * source (epoll) while the other VPs went to sleep: someone must take its
 * place.  One VP.  B's blocking call starts a spare, which P runs on; the
 * spare, idle, waits in the source, and VP 0, idle after B, sleeps.  An
 * edge on a pipe nobody waits on ends the spare's wait with nothing to do,
 * so it retires.  Then R's data comes: R must get it long before its 30 s
 * deadline.  (With io_uring each VP waits on its own ring: the edge and
 * the data come once B has left its blocking call.) */
static int spare_q[2], spare_a[2];
static kr_vp *vp_zero, *spare_vp;
static uint32_t b_in, b_left;
static int shared_source;

static void *read_a(void *a)
{
	(void)a;
	char c = 0;
	uint64_t deadline = in_ms(30000);
	size_t n;
	KT_EQ(kr_read_until(spare_a[0], &c, 1, &n, deadline), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'a');
	/* unwatched, the data is found only when the deadline wakes VP 0 */
	KT_CHECK(kr_now() < deadline);
	return NULL;
}

static void *note_spare(void *a)
{
	__atomic_store_n(&spare_vp, kr_vp_self(), __ATOMIC_RELEASE);
	return a;
}

/* blocks until P has run on the spare VP its blocking call started and
 * the spare, the only VP not blocked, waits in the event source: were VP 0
 * back before that, either of the two might be the one to wait there */
static void *block_a_while(void *a)
{
	(void)a;
	KT_EQ(kr_blocking_begin(), 0);
	__atomic_store_n(&b_in, 1, __ATOMIC_RELEASE);
	KT_WAIT(__atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE) &&
			kr_vp_status(__atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE)) ==
				KR_VP_SLEEPING,
		kt_nap_us(1000));
	KT_EQ(kr_blocking_end(), 0);
	__atomic_store_n(&b_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *edge_then_data(void *a)
{
	(void)a;
	KT_WAIT(__atomic_load_n(&b_left, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	kr_vp *spare = __atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE);
	KT_CHECK(spare != vp_zero);
	/* the spare waits in epoll and VP 0 sleeps on L0 (or a wakeup ended
	 * the spare's wait already, and it retired) */
	if (shared_source)
		KT_WAIT((kr_vp_status(vp_zero) == KR_VP_SLEEPING &&
			 kr_vp_status(spare) == KR_VP_SLEEPING) ||
				kr_vp_status(spare) == KR_VP_SUSPENDED,
			kt_nap_us(1000));
	KT_EQ(write(spare_q[1], "q", 1), 1); /* the spare's wait ends, idle */
	if (shared_source)
		KT_WAIT(kr_vp_status(spare) == KR_VP_SUSPENDED, kt_nap_us(1000));
	KT_EQ(write(spare_a[1], "a", 1), 1);
	return NULL;
}

static void io_is_watched_after_a_spare_retires(void)
{
	init(1);
	mkpipe(spare_q);
	mkpipe(spare_a);
	char c;
	size_t n;
	KT_EQ(write(spare_q[1], "0", 1), 1);
	KT_EQ(kr_read(spare_q[0], &c, 1, &n), 0); /* karui knows the fd */
	KT_EQ(n, 1);
	vp_zero = kr_vp_self();
	shared_source = strcmp(kr_io_backend(), "epoll") == 0;
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, edge_then_data, NULL), 0);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, read_a, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, block_a_while, NULL), 0);
	while (!__atomic_load_n(&b_in, __ATOMIC_ACQUIRE)) /* then main is on the spare */
		KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_mp_create(&m[2], &small, note_spare, NULL), 0); /* VP 0 is blocked */
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  data read after %.0f ms, %u VPs\n", (kr_now() - t0) / 1e6, kr_vp_count());
	KT_EQ(kr_vp_count(), 2); /* the spare was there */
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(spare_q[i]), 0);
		KT_EQ(kr_close(spare_a[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* With epoll, the VP that waited hands the wait on when it finds work.
 * Two VPs, one waiting in epoll, the other asleep.  S's data comes first:
 * S then keeps its VP with no scheduling point until R is served (or for
 * KT_WAIT_S).  R's data comes once S runs, and the other VP must see it
 * while S still does.  (With io_uring, R's request may sit in the ring of
 * S's VP, whose completions wait for that VP's next scheduling point:
 * docs/limits.md.) */
static int handoff_s[2], handoff_r[2];
static uint64_t s_ended, r_served;
static uint32_t s_in, r_in, s_runs;
static struct kt_vpth handoff_vps;

static void *read_then_spin(void *a)
{
	(void)a;
	char c;
	size_t n;
	__atomic_store_n(&s_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read_until(handoff_s[0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	__atomic_store_n(&s_runs, 1, __ATOMIC_RELEASE);
	uint64_t end = kt_mono_ns() + KT_WAIT_S * 1000000000ull;
	while (!__atomic_load_n(&r_served, __ATOMIC_ACQUIRE) && kt_mono_ns() < end)
		;
	s_ended = kr_now();
	return NULL;
}

static void *read_r(void *a)
{
	(void)a;
	char c;
	size_t n;
	__atomic_store_n(&r_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read_until(handoff_r[0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	__atomic_store_n(&r_served, kr_now(), __ATOMIC_RELEASE);
	return NULL;
}

static void *s_then_r(void *a)
{
	(void)a;
	/* both wait on their pipes: one VP in epoll, the other asleep */
	KT_WAIT(__atomic_load_n(&s_in, __ATOMIC_ACQUIRE) && __atomic_load_n(&r_in, __ATOMIC_ACQUIRE) &&
		kt_vps_sleep(&handoff_vps), kt_nap_us(1000));
	KT_EQ(write(handoff_s[1], "s", 1), 1);
	KT_WAIT(__atomic_load_n(&s_runs, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_EQ(write(handoff_r[1], "r", 1), 1);
	return NULL;
}

static void epoll_wait_passes_on_when_its_waiter_runs_work(void)
{
	init_on(2, "epoll", "the back end is io_uring: completions go to the requesting VP's ring");
	kt_vp_threads(&handoff_vps, 2);
	mkpipe(handoff_s);
	mkpipe(handoff_r);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, s_then_r, NULL), 0);
	kr_mp *m[2];
	KT_EQ(kr_mp_create(&m[0], &small, read_then_spin, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, read_r, NULL), 0);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  R served %.0f ms before S ended\n", ((double)s_ended - (double)r_served) / 1e6);
	KT_CHECK(r_served && r_served < s_ended);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(handoff_s[i]), 0);
		KT_EQ(kr_close(handoff_r[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* ---------------- completions kept on their VP ---------------- */

/* Three readers wait in VP 0's ring while a holder keeps VP 1 busy; then
 * VP 1 goes to sleep, the three reads complete in one poll of VP 0, and
 * VP 0 keeps them (sched_default.c, "Completions stay").  Each reader that
 * runs on VP 0 computes for 200 ms without a scheduling point.  At VP 0's
 * first scheduling point after that (this microprocess joins the next
 * reader), two are still queued well past a watch: VP 0 wakes VP 1, which
 * takes the third (or, if VP 0 is slow to go on, the second as well).
 * Kept for good, all three would run on VP 0, one after the other;
 * shared at once, VP 1 would take some while the first runs. */
enum { KEPT_READERS = 3, KEPT_RUN_MS = 200 };
static int kept_pipe[KEPT_READERS][2];
static unsigned kept_vp0, kept_in, kept_ran_elsewhere;
static uint64_t kept_first_end = UINT64_MAX, kept_elsewhere_at = UINT64_MAX;
static int kept_hold = 1, kept_holder_done;
static kr_vp *kept_holder_vp;
static int kept_poll; /* the first reader calls kr_sched_poll before it computes */

static void kept_min(uint64_t *p, uint64_t v)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (v < o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static void *kept_holder(void *a)
{
	(void)a;
	__atomic_store_n(&kept_holder_vp, kr_vp_self(), __ATOMIC_RELEASE);
	while (__atomic_load_n(&kept_hold, __ATOMIC_ACQUIRE))
		;
	/* park, not end: an ended one's stack in VP 1's cache would give
	 * VP 1 a deadline to wake at (its trim) */
	while (!__atomic_load_n(&kept_holder_done, __ATOMIC_ACQUIRE))
		kr_mp_park();
	return NULL;
}

static void *kept_reader(void *a)
{
	int i = (int)(intptr_t)a;
	char c;
	size_t n;
	__atomic_fetch_add(&kept_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read_until(kept_pipe[i][0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	uint64_t now = kt_mono_ns();
	if (kr_vp_id(kr_vp_self()) != kept_vp0) {
		__atomic_fetch_add(&kept_ran_elsewhere, 1, __ATOMIC_RELEASE);
		kept_min(&kept_elsewhere_at, now);
		return NULL;
	}
	if (kept_poll)
		kr_sched_poll();
	uint64_t end = now + KEPT_RUN_MS * 1000000ull;
	while ((now = kt_mono_ns()) < end)
		;
	kept_min(&kept_first_end, now);
	return NULL;
}

static void kept_run(int poll)
{
	init_on(2, "io_uring", "the back end is epoll: readiness is shared at once");
	kept_poll = poll;
	kept_in = kept_ran_elsewhere = 0;
	kept_first_end = kept_elsewhere_at = UINT64_MAX;
	kept_hold = 1;
	kept_holder_done = 0;
	kept_holder_vp = NULL;
	kept_vp0 = kr_vp_id(kr_vp_self());
	kr_mp *h, *r[KEPT_READERS];
	/* the holder lands on VP 1: VP 0 runs this microprocess meanwhile */
	KT_EQ(kr_mp_create(&h, &small, kept_holder, NULL), 0);
	KT_WAIT(__atomic_load_n(&kept_holder_vp, __ATOMIC_ACQUIRE), (void)0);
	KT_CHECK(kr_vp_id(kept_holder_vp) != kept_vp0);
	for (int i = 0; i < KEPT_READERS; i++) {
		mkpipe(kept_pipe[i]);
		KT_EQ(kr_mp_create(&r[i], &small, kept_reader, (void *)(intptr_t)i), 0);
	}
	KT_WAIT(__atomic_load_n(&kept_in, __ATOMIC_ACQUIRE) == KEPT_READERS, kr_mp_yield());
	for (int i = 0; i < 16; i++) /* two timers' turns: the reads are in VP 0's ring */
		kr_mp_yield();
	__atomic_store_n(&kept_hold, 0, __ATOMIC_RELEASE);
	KT_WAIT(kr_vp_status(kept_holder_vp) == KR_VP_SLEEPING, (void)0);
	for (int i = 0; i < KEPT_READERS; i++)
		KT_EQ(write(kept_pipe[i][1], "k", 1), 1);
	for (int i = 0; i < KEPT_READERS; i++)
		KT_EQ(kr_mp_join(r[i], NULL), 0);
	KT_CHECK(__atomic_load_n(&kept_ran_elsewhere, __ATOMIC_ACQUIRE) >= 1);
	if (poll) /* shared at once: taken while the first computes */
		KT_CHECK(kept_elsewhere_at < kept_first_end);
	else
		KT_CHECK(kept_elsewhere_at > kept_first_end);
	__atomic_store_n(&kept_holder_done, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_unpark(h), 0);
	KT_EQ(kr_mp_join(h, NULL), 0);
	for (int i = 0; i < KEPT_READERS; i++) {
		KT_EQ(kr_close(kept_pipe[i][0]), 0);
		KT_EQ(kr_close(kept_pipe[i][1]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static void kept_completions_are_shared_once_one_has_run_long(void)
{
	kept_run(0);
}

/* The same, but the first reader calls kr_sched_poll before it computes,
 * as code that makes no scheduling point for a while does (a μprocess's):
 * the two still kept go to VP 1 at once. */
static void sched_poll_shares_what_its_vp_keeps(void)
{
	kept_run(1);
}

int main(int argc, char **argv)
{
	io_args(argc, argv);
	KT_RUN(microprocesses_waiting_on_io_use_no_cpu);
	KT_RUN(blocking_call_hands_the_vp_to_the_others);
	KT_RUN(io_in_flight_completes_while_its_vp_blocks);
	KT_RUN(io_is_watched_after_a_spare_retires);
	KT_RUN(epoll_wait_passes_on_when_its_waiter_runs_work);
	KT_RUN(kept_completions_are_shared_once_one_has_run_long);
	KT_RUN(sched_poll_shares_what_its_vp_keeps);
	return kt_finish();
}
