/* L3: channels (src/sync/chan.c): order, element sizes, timed operations,
 * close, a server's wakeup of a waiter that has moved on (a semaphore's)
 * or cannot (a channel's served wait), and served waits between VPs under
 * timeouts, cancels and unparks. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

static kr_chan ch;
static uint64_t sum_recv;

static void *sender(void *a)
{
	for (uint64_t i = 1; i <= 1000; i++) {
		uint64_t v = i * 1000 + (uintptr_t)a;
		KT_EQ(kr_chan_send(&ch, &v), 0);
	}
	return NULL;
}

static void *receiver(void *a)
{
	uint64_t last[8] = {0};
	for (int i = 0; i < 1000; i++) {
		uint64_t v;
		KT_EQ(kr_chan_recv(&ch, &v), 0);
		/* each sender's values arrive in the order it sent them */
		KT_CHECK(v / 1000 > last[v % 1000]);
		last[v % 1000] = v / 1000;
		__atomic_fetch_add(&sum_recv, v, __ATOMIC_RELAXED);
	}
	return a;
}

static void chan_run(size_t cap)
{
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), cap), 0);
	sum_recv = 0;
	kr_mp *m[16];
	for (uintptr_t i = 0; i < 8; i++) {
		KT_EQ(kr_mp_create(&m[i], &small, sender, (void *)i), 0);
		KT_EQ(kr_mp_create(&m[8 + i], &small, receiver, NULL), 0);
	}
	for (int i = 0; i < 16; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(sum_recv, 8 * 1000ull * 1001 / 2 * 1000 + 1000ull * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7));
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static void unbuffered_chan_delivers_everything_in_order(void) { chan_run(0); }
static void bounded_chan_delivers_everything_in_order(void) { chan_run(16); }

/* Elements of every size arrive whole: sizes copied inline (4, 8, 16) and
 * others up to the largest, handed to a waiting partner or passed through
 * the ring, on 2 VPs.
 * Byte j of element i is (i * 31 + j) & 0xff, plus the element size. */
static size_t esize_now;
/* The receiver's element lies 16 bytes past the sender's modulo 4 KiB: a
 * direct hand-off of a large element then takes copy.h's pieces. */
static _Alignas(4096) unsigned char send_e[KR_CHAN_ESIZE_MAX + 1],
	recv_e[KR_CHAN_ESIZE_MAX + 17], want_e[KR_CHAN_ESIZE_MAX];

static void fill(unsigned char *e, int i)
{
	for (size_t j = 0; j < esize_now; j++)
		e[j] = (unsigned char)(i * 31 + j + esize_now);
}

static void *send_sized(void *a)
{
	unsigned char *e = send_e;
	for (int i = 0; i < 300; i++) {
		fill(e, i);
		KT_EQ(kr_chan_send(&ch, e), 0);
		if (i % 7 == 0)
			kr_mp_yield(); /* let the receiver wait now and then */
	}
	return a;
}

static void *recv_sized(void *a)
{
	unsigned char *e = recv_e + 16;
	for (int i = 0; i < 300; i++) {
		memset(e, 0xee, esize_now + 1);
		KT_EQ(kr_chan_recv(&ch, e), 0);
		fill(want_e, i);
		KT_EQ(memcmp(e, want_e, esize_now), 0);
		KT_EQ(e[esize_now], 0xee); /* nothing past the element */
		if (i % 5 == 0)
			kr_mp_yield(); /* let the sender wait now and then */
	}
	return a;
}

static void chan_elements_of_every_size_arrive_whole(void)
{
	static const size_t sizes[] = {1, 3, 4, 8, 12, 16, 24, 100, 5000, KR_CHAN_ESIZE_MAX};
	init(2);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		for (size_t cap = 0; cap <= 3; cap += 3) {
			esize_now = sizes[k];
			KT_EQ(kr_chan_init(&ch, esize_now, cap), 0);
			kr_mp *m[2];
			KT_EQ(kr_mp_create(&m[0], &small, send_sized, NULL), 0);
			KT_EQ(kr_mp_create(&m[1], &small, recv_sized, NULL), 0);
			for (int i = 0; i < 2; i++)
				KT_EQ(kr_mp_join(m[i], NULL), 0);
			KT_EQ(kr_chan_destroy(&ch), 0);
		}
	KT_EQ(kr_fini(), 0);
}

static uint64_t sum_sent;
static uint32_t n_sent, n_recv;

static void *sender_timed(void *a)
{
	for (uint64_t i = 1; i <= 20; i++) {
		uint64_t v = i * 10000 + (uintptr_t)a;
		int e = kr_chan_send_until(&ch, &v, kr_now() + ((uintptr_t)a % 5) * 50000);
		if (e == ETIMEDOUT)
			continue;
		KT_EQ(e, 0);
		__atomic_fetch_add(&sum_sent, v, __ATOMIC_RELAXED);
		__atomic_fetch_add(&n_sent, 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void *receiver_timed(void *a)
{
	for (int i = 0; i < 20; i++) {
		uint64_t v;
		int e = kr_chan_recv_until(&ch, &v, kr_now() + ((uintptr_t)a % 5) * 50000);
		if (e == ETIMEDOUT)
			continue;
		KT_EQ(e, 0);
		__atomic_fetch_add(&sum_recv, v, __ATOMIC_RELAXED);
		__atomic_fetch_add(&n_recv, 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void *chan_timed_party(void *a)
{
	return ((uintptr_t)a & 1 ? sender_timed : receiver_timed)((void *)((uintptr_t)a >> 1));
}

/* 1,000 senders and 1,000 receivers on an unbuffered channel, all with
 * deadlines, on 2 VPs: what was sent is exactly what was received. */
static void chan_timed_ops_add_up_on_two_vps(void)
{
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	sum_sent = sum_recv = 0;
	n_sent = n_recv = 0;
	run_all(2000, chan_timed_party, index_arg);
	KT_EQ(n_sent, n_recv);
	KT_EQ(sum_sent, sum_recv);
	KT_CHECK(n_sent > 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

/* A served waiter that ends before its server's wakeup.  A semaphore's
 * waiter sees DONE as soon as its server stores it; another wakeup (or a
 * deadline) can let it return, end and be joined before the server's own
 * wakeup comes, and that server's post must still report 0.  The window is
 * a few instructions, so the test stops the server there: a hardware
 * breakpoint on the wakeup's entry (perf_event_open with sigtrap) holds
 * the server, a foreign thread, in its SIGTRAP handler until the waiter
 * has been joined.  Found by chan_timed_ops_add_up_on_two_vps under qemu,
 * where a send reported ESRCH once, when channels waited that way too.
 * A channel's waiter waits a served wait (src/core/served.c): nothing but
 * its server's ready resumes it, so the same held server keeps it blocked
 * through an unpark, and its element arrives once the server goes on. */
#if defined(__x86_64__)
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>

int kr__wake_waiter(kr_mp *mp); /* the servers' wakeup (core/internal.h) */
int kr__serve(kr_mp *mp);       /* a served waiter's ready (core/served.h) */

static uint32_t held, released, recvd;

static void hold_server(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	__atomic_store_n(&held, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
		nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
}

/* A breakpoint on the entry of the wakeup of the object `what` (the
 * semaphore's kr__wake_waiter, the channel's kr__serve) for the calling
 * thread, or -1. */
static kr_sem sem;

static int break_at_wakeup(void *what)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof a,
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = what == &sem ? (uintptr_t)kr__wake_waiter : (uintptr_t)kr__serve,
		.bp_len = sizeof(long),
		.sample_period = 1,
		.sigtrap = 1,
		.remove_on_exec = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static void *serve_held(void *what)
{
	int fd = break_at_wakeup(what);
	if (fd < 0)
		return (void *)(intptr_t)-errno;
	uint64_t v = 7;
	int r = what == &sem ? kr_sem_post(&sem) : kr_chan_trysend(&ch, &v);
	close(fd);
	return (void *)(intptr_t)r;
}

static void *wait_sem(void *a)
{
	KT_EQ(kr_sem_wait(&sem), 0);
	return a;
}

/* The channel's waiter: its served wait completes although a cancel came
 * once the server had taken it, and the cancel then ends the next wait. */
static void *wait_chan(void *a)
{
	uint64_t v = 0;
	KT_EQ(kr_chan_recv(&ch, &v), 0);
	KT_EQ(v, 7);
	__atomic_store_n(&recvd, 1, __ATOMIC_RELEASE);
	v = 0;
	KT_EQ(kr_chan_recv(&ch, &v), ECANCELED);
	KT_EQ(v, 0);
	return a;
}

/* A server that SIGTRAP holds at its wakeup (hold_server), one VP and
 * the semaphore; skipped without hardware breakpoints. */
static void held_server_setup(void)
{
	struct sigaction sa = {.sa_sigaction = hold_server, .sa_flags = SA_SIGINFO};
	KT_EQ(sigaction(SIGTRAP, &sa, NULL), 0);
	int fd = break_at_wakeup(&sem);
	if (fd < 0)
		KT_SKIP("no hardware breakpoints for this thread (perf_event_open)");
	close(fd);
	init(1);
	KT_EQ(kr_sem_init(&sem, 0), 0);
}

static void served_waiter_ending_first_costs_its_server_nothing(void)
{
	held_server_setup();
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	void *(*waiter[2])(void *) = {wait_sem, wait_chan};
	void *what[2] = {&sem, &ch};
	for (int k = 0; k < 2; k++) {
		held = released = recvd = 0;
		kr_mp *w;
		KT_EQ(kr_mp_create(&w, &small, waiter[k], NULL), 0);
		KT_EQ(kr_mp_yield(), 0); /* w runs and blocks (one VP, FIFO) */
		pthread_t t;
		KT_EQ(pthread_create(&t, NULL, serve_held, what[k]), 0);
		/* until the server is held at its wakeup */
		KT_WAIT(__atomic_load_n(&held, __ATOMIC_ACQUIRE), kr_mp_sleep_for(100000));
		KT_EQ(kr_mp_unpark(w), 0);
		if (what[k] == &ch) {
			/* w's served wait goes on: the unpark only set its permit,
			 * and the cancel stays pending (its server has taken it) */
			KT_EQ(kr_mp_cancel(w), 0);
			for (int i = 0; i < 20; i++)
				KT_EQ(kr_mp_sleep_for(100000), 0);
			KT_EQ(__atomic_load_n(&recvd, __ATOMIC_ACQUIRE), 0);
			__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
			KT_EQ(kr_mp_join(w, NULL), 0);
			KT_EQ(recvd, 1);
		} else {
			/* w finds its wait served, and ends first */
			KT_EQ(kr_mp_join(w, NULL), 0);
			KT_EQ(kr_mp_unpark(w), ESRCH); /* w is gone */
			__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
		}
		void *r;
		pthread_join(t, &r);
		KT_EQ((intptr_t)r, 0);
	}
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

/* A cancel that is deciding whether it ends a served wait (it holds
 * WS_THIRD, served.c) when a sender takes that waiter: the sender waits
 * for the decision, the cancel sees the wait taken and backs off, the
 * receive completes and the cancel ends the next wait.  The canceller, a
 * foreign thread on 2 VPs (it runs the third party's path itself), is held
 * at its membarrier() system call by a breakpoint on syscall(). */
static kr_mp *cancel_target;

static void *cancel_held(void *a)
{
	struct perf_event_attr at = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof at,
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = (uintptr_t)syscall,
		.bp_len = sizeof(long),
		.sample_period = 1,
		.sigtrap = 1,
		.remove_on_exec = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	int fd = (int)syscall(SYS_perf_event_open, &at, 0, -1, -1, 0);
	if (fd < 0)
		return (void *)(intptr_t)-errno;
	int r = kr_mp_cancel(cancel_target);
	close(fd);
	return (void *)(intptr_t)r;
}

static void *release_later(void *a)
{
	nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	return a;
}

static void sender_waits_for_a_deciding_cancel_then_serves(void)
{
	struct sigaction sa = {.sa_sigaction = hold_server, .sa_flags = SA_SIGINFO};
	KT_EQ(sigaction(SIGTRAP, &sa, NULL), 0);
	int fd = break_at_wakeup(&sem);
	if (fd < 0)
		KT_SKIP("no hardware breakpoints for this thread (perf_event_open)");
	close(fd);
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	held = released = recvd = 0;
	KT_EQ(kr_mp_create(&cancel_target, &small, wait_chan, NULL), 0);
	KT_WAIT(__atomic_load_n(&ch.receivers.head, __ATOMIC_ACQUIRE) != NULL,
		kr_mp_sleep_for(100000));
	pthread_t t, rel;
	KT_EQ(pthread_create(&t, NULL, cancel_held, NULL), 0);
	KT_WAIT(__atomic_load_n(&held, __ATOMIC_ACQUIRE), kr_mp_sleep_for(100000));
	KT_EQ(pthread_create(&rel, NULL, release_later, NULL), 0);
	uint64_t v = 7;
	KT_EQ(kr_chan_send(&ch, &v), 0); /* waits while the cancel decides */
	KT_EQ(__atomic_load_n(&released, __ATOMIC_ACQUIRE), 1);
	KT_EQ(kr_mp_join(cancel_target, NULL), 0); /* 7, then ECANCELED */
	KT_EQ(recvd, 1);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	pthread_join(rel, NULL);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static int parked_and_back;

static void *park_then_note(void *a)
{
	kr_mp_park();
	parked_and_back = 1;
	return a;
}

/* The same held server, whose waiter ends and is joined, and a new
 * microprocess that parks in the waiter's record (the stack cache is
 * LIFO) before the server's wakeup comes: the wakeup carries the ended
 * waiter's generation, and the new microprocess stays parked. */
static void late_wakeup_spares_the_next_microprocess_in_its_record(void)
{
	held_server_setup();
	held = released = 0;
	kr_mp *w, *next;
	KT_EQ(kr_mp_create(&w, &small, wait_sem, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* w blocks on sem */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, serve_held, &sem), 0);
	/* until the server is held at its wakeup */
	KT_WAIT(__atomic_load_n(&held, __ATOMIC_ACQUIRE), kr_mp_sleep_for(100000));
	KT_EQ(kr_mp_unpark(w), 0); /* w finds its wait served and ends */
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_mp_create(&next, &small, park_then_note, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* next parks, where w was */
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	void *r;
	pthread_join(t, &r);
	KT_EQ((intptr_t)r, 0);
	KT_EQ(kr_mp_yield(), 0);
	KT_EQ(parked_and_back, 0);
	KT_EQ(kr_mp_unpark(next), 0);
	KT_EQ(kr_mp_join(next, NULL), 0);
	KT_EQ(parked_and_back, 1);
	KT_EQ(kr_sem_destroy(&sem), 0);
	KT_EQ(kr_fini(), 0);
}
#else
static void served_waiter_ending_first_costs_its_server_nothing(void)
{
	KT_SKIP("needs x86-64's hardware breakpoints (qemu-user has none)");
}

static void late_wakeup_spares_the_next_microprocess_in_its_record(void)
{
	KT_SKIP("needs x86-64's hardware breakpoints (qemu-user has none)");
}

static void sender_waits_for_a_deciding_cancel_then_serves(void)
{
	KT_SKIP("needs x86-64's hardware breakpoints (qemu-user has none)");
}
#endif

/* ---------------- served waits between VPs ---------------- */

/* Many producers and consumers on 2 VPs, a channel unbuffered or small,
 * with timed sends and receives that expire and a microprocess that keeps
 * cancelling the others: every value is received exactly once (a served
 * wait that a timer or a cancel ended and that a server also served would
 * lose it or double it), and a call that fails leaves no trace (a failed
 * receive has not written its variable; a failed send is tried again with
 * the same value, so any trace would be a double). */
enum { SV_PROD = 12, SV_CONS = 12, SV_EACH = KT_TSAN ? 200 : 3000 };
#define SV_TOTAL ((uint64_t)SV_PROD * SV_EACH)
static uint8_t sv_seen[SV_TOTAL];
static uint64_t sv_sum, sv_count, sv_fail_ops;
static uint32_t sv_stop;
static kr_mp *sv_mps[SV_PROD + SV_CONS];

static unsigned sv_next(unsigned *r)
{
	*r = *r * 1103515245u + 12345u;
	return *r >> 8;
}

/* One send or receive: blocking three times in four, else with a deadline
 * 0-19 us away. */
static int sv_op(int send, uint64_t *v, unsigned *r)
{
	unsigned x = sv_next(r);
	if (x % 4)
		return send ? kr_chan_send(&ch, v) : kr_chan_recv(&ch, v);
	uint64_t d = kr_now() + (x >> 2) % 20 * 1000;
	return send ? kr_chan_send_until(&ch, v, d) : kr_chan_recv_until(&ch, v, d);
}

static void *sv_producer(void *a)
{
	unsigned id = (unsigned)(uintptr_t)a, r = id * 7919u + 1;
	for (unsigned i = 0; i < SV_EACH; i++) {
		uint64_t v = (uint64_t)id * SV_EACH + i;
		int e;
		while ((e = sv_op(1, &v, &r)) != 0) {
			KT_CHECK(e == ETIMEDOUT || e == ECANCELED);
			__atomic_fetch_add(&sv_fail_ops, 1, __ATOMIC_RELAXED);
		}
	}
	return a;
}

static void *sv_consumer(void *a)
{
	unsigned r = (unsigned)(uintptr_t)a * 104729u + 3;
	uint64_t sum = 0, n = 0;
	for (;;) {
		uint64_t v = ~(uint64_t)0;
		int e = sv_op(0, &v, &r);
		if (e == EPIPE)
			break;
		if (e) {
			KT_CHECK(e == ETIMEDOUT || e == ECANCELED);
			KT_EQ(v, ~(uint64_t)0);
			__atomic_fetch_add(&sv_fail_ops, 1, __ATOMIC_RELAXED);
			continue;
		}
		KT_CHECK(v < SV_TOTAL);
		KT_EQ(__atomic_fetch_add(&sv_seen[v], 1, __ATOMIC_RELAXED), 0);
		sum += v;
		n++;
	}
	__atomic_fetch_add(&sv_sum, sum, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sv_count, n, __ATOMIC_RELAXED);
	return a;
}

static void *sv_canceller(void *a)
{
	unsigned r = 17;
	while (!__atomic_load_n(&sv_stop, __ATOMIC_ACQUIRE)) {
		int e = kr_mp_cancel(sv_mps[sv_next(&r) % (SV_PROD + SV_CONS)]);
		KT_CHECK(e == 0 || e == ESRCH);
		if (sv_next(&r) % 4 == 0)
			kr_mp_sleep_for(sv_next(&r) % 30 * 1000);
		else
			kr_mp_yield();
	}
	return a;
}

static void sv_run(size_t cap)
{
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), cap), 0);
	memset(sv_seen, 0, sizeof sv_seen);
	sv_sum = sv_count = sv_fail_ops = 0;
	sv_stop = 0;
	for (unsigned i = 0; i < SV_PROD; i++)
		KT_EQ(kr_mp_create(&sv_mps[i], &small, sv_producer, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < SV_CONS; i++)
		KT_EQ(kr_mp_create(&sv_mps[SV_PROD + i], &small, sv_consumer, (void *)(uintptr_t)i),
		      0);
	kr_mp *c;
	KT_EQ(kr_mp_create(&c, &small, sv_canceller, NULL), 0);
	for (unsigned i = 0; i < SV_PROD; i++)
		KT_EQ(kr_mp_join(sv_mps[i], NULL), 0);
	KT_EQ(kr_chan_close(&ch), 0); /* consumers drain the ring, then EPIPE */
	for (unsigned i = 0; i < SV_CONS; i++)
		KT_EQ(kr_mp_join(sv_mps[SV_PROD + i], NULL), 0);
	__atomic_store_n(&sv_stop, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_join(c, NULL), 0);
	KT_EQ(sv_count, SV_TOTAL);
	KT_EQ(sv_sum, SV_TOTAL * (SV_TOTAL - 1) / 2);
	for (uint64_t v = 0; v < SV_TOTAL; v++)
		KT_EQ(sv_seen[v], 1);
	KT_CHECK(sv_fail_ops > 0); /* timeouts and cancels did end waits */
	KT_EQ(kr_chan_destroy(&ch), 0);
}

static void chan_values_neither_lost_nor_doubled_under_cancels_on_two_vps(void)
{
	init(2);
	sv_run(0);
	sv_run(3);
	KT_EQ(kr_fini(), 0);
}

/* The same with membarrier refused (as by a kernel before 4.14): karui
 * orders the served waits' stores with fences instead. */
#include "kt_seccomp.h"
extern uint32_t kr__served_fenced; /* core/served.h */

static void chan_values_neither_lost_nor_doubled_with_fences(void)
{
	int err = kt_seccomp_deny(SYS_membarrier, -1, 0, EPERM);
	if (err)
		KT_SKIP("no seccomp filter to refuse membarrier");
	init(2);
	KT_EQ(__atomic_load_n(&kr__served_fenced, __ATOMIC_RELAXED), 1);
	sv_run(0);
	sv_run(3);
	KT_EQ(kr_fini(), 0);
}

static void *recv_untouched(void *a)
{
	uint64_t v = 1;
	int e = kr_chan_recv(&ch, &v);
	KT_EQ(v, e ? 1 : 9);
	return (void *)(intptr_t)e;
}

/* A cancel ends the served wait of a receiver that no sender has taken
 * yet, and the next send skips it (LEFT) for the receiver behind it, on
 * one VP where the cancelled one cannot run in between. */
static void cancelled_receiver_is_skipped_by_the_next_send(void)
{
	init(1);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	kr_mp *r1, *r2;
	KT_EQ(kr_mp_create(&r1, &small, recv_untouched, NULL), 0);
	KT_EQ(kr_mp_create(&r2, &small, recv_untouched, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* both wait, r1 first */
	KT_CHECK(__atomic_load_n(&ch.receivers.head, __ATOMIC_ACQUIRE) != NULL);
	KT_EQ(kr_mp_cancel(r1), 0);
	uint64_t v = 9;
	KT_EQ(kr_chan_trysend(&ch, &v), 0); /* to r2 */
	KT_EQ(kr_chan_trysend(&ch, &v), EAGAIN);
	void *res;
	KT_EQ(kr_mp_join(r1, &res), 0);
	KT_EQ((intptr_t)res, ECANCELED);
	KT_EQ(kr_mp_join(r2, &res), 0);
	KT_EQ((intptr_t)res, 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static void *recv_then_park(void *a)
{
	uint64_t v = 0;
	KT_EQ(kr_chan_recv(&ch, &v), 0);
	KT_EQ(v, 5);
	uint64_t t0 = kr_now();
	/* the unpark that came during the receive ends this park at once */
	KT_EQ(kr_mp_park_until(t0 + 60 * 1000 * MS), 0);
	KT_CHECK(kr_now() - t0 < 30 * 1000 * MS);
	return a;
}

/* kr_mp_unpark during a channel's served wait neither ends it nor is
 * lost: the permit stays set for the next kr_mp_park (2 VPs). */
static void unpark_during_a_channel_wait_stays_for_the_next_park(void)
{
	init(2);
	KT_EQ(kr_chan_init(&ch, sizeof(uint64_t), 0), 0);
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, &small, recv_then_park, NULL), 0);
	KT_WAIT(__atomic_load_n(&ch.receivers.head, __ATOMIC_ACQUIRE) != NULL,
		kr_mp_sleep_for(100000));
	KT_EQ(kr_mp_unpark(r), 0);
	for (int i = 0; i < 20; i++) {
		KT_EQ(kr_mp_sleep_for(100000), 0);
		KT_CHECK(__atomic_load_n(&ch.receivers.head, __ATOMIC_ACQUIRE) != NULL);
	}
	uint64_t v = 5;
	KT_EQ(kr_chan_send(&ch, &v), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(kr_chan_destroy(&ch), 0);
	KT_EQ(kr_fini(), 0);
}

static void *recv_one(void *a)
{
	uint64_t v;
	return (void *)(intptr_t)kr_chan_recv(a, &v);
}

static void chan_close_drains_then_reports_epipe(void)
{
	init(1);
	kr_chan c;
	KT_EQ(kr_chan_init(&c, 0, 4), EINVAL);
	KT_EQ(kr_chan_init(&c, KR_CHAN_ESIZE_MAX + 1, 4), EINVAL);
	KT_EQ(kr_chan_init(&c, 8, (size_t)1 << 40), EINVAL);
	KT_EQ(kr_chan_init(&c, 8, 2), 0);
	uint64_t v = 1, out = 0;
	KT_EQ(kr_chan_tryrecv(&c, &out), EAGAIN);
	KT_EQ(kr_chan_trysend(&c, &v), 0);
	v = 2;
	KT_EQ(kr_chan_send(&c, &v), 0);
	KT_EQ(kr_chan_trysend(&c, &v), EAGAIN); /* full */
	uint64_t t0 = kr_now();
	KT_EQ(kr_chan_send_until(&c, &v, t0 + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 2 * MS);
	KT_EQ(kr_chan_close(&c), 0);
	KT_EQ(kr_chan_close(&c), EPIPE);
	KT_EQ(kr_chan_send(&c, &v), EPIPE);
	KT_EQ(kr_chan_recv(&c, &out), 0);
	KT_EQ(out, 1);
	KT_EQ(kr_chan_recv(&c, &out), 0);
	KT_EQ(out, 2);
	KT_EQ(kr_chan_recv(&c, &out), EPIPE); /* closed and drained */
	KT_EQ(kr_chan_destroy(&c), 0);
	KT_EQ(kr_chan_recv(&c, &out), EINVAL);

	/* a blocked receiver: destroy refuses, close wakes it with EPIPE */
	KT_EQ(kr_chan_init(&c, 8, 0), 0);
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, NULL, recv_one, &c), 0);
	kr_mp_yield();
	KT_EQ(kr_chan_destroy(&c), EBUSY);
	t0 = kr_now();
	KT_EQ(kr_chan_recv_until(&c, &out, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(kr_chan_close(&c), 0);
	void *res;
	KT_EQ(kr_mp_join(r, &res), 0);
	KT_EQ((intptr_t)res, EPIPE);
	KT_EQ(kr_chan_destroy(&c), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(unbuffered_chan_delivers_everything_in_order);
	KT_RUN(bounded_chan_delivers_everything_in_order);
	KT_RUN(chan_close_drains_then_reports_epipe);
	KT_RUN(chan_timed_ops_add_up_on_two_vps);
	KT_RUN(served_waiter_ending_first_costs_its_server_nothing);
	KT_RUN(chan_elements_of_every_size_arrive_whole);
	KT_RUN(late_wakeup_spares_the_next_microprocess_in_its_record);
	KT_RUN(cancelled_receiver_is_skipped_by_the_next_send);
	KT_RUN(sender_waits_for_a_deciding_cancel_then_serves);
	KT_RUN(unpark_during_a_channel_wait_stays_for_the_next_park);
	KT_RUN_T(chan_values_neither_lost_nor_doubled_under_cancels_on_two_vps, 300);
	KT_RUN_T(chan_values_neither_lost_nor_doubled_with_fences, 300);
	return kt_finish();
}
