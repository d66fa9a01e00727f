/* L2 on one VP: the state in which that VP alone changes slots, join words
 * and permits, and threads that are no VP post their wakeups to it
 * (src/core/park.c, "One VP"); its end when a blocking call starts a
 * spare. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "karui.h"
#include "kt.h"

static void init1(void)
{
	kr_config c = {.vps = 1};
	KT_EQ(kr_init(&c), 0);
}

/* ---------------- a storm of wakeups from a thread that is no VP ----------------
 *
 * While pairs of microprocesses ping-pong on VP 0 (park/unpark and
 * channels), a thread that is no VP sends each target one event at a time,
 * the next once the target has acknowledged the last (so that no two of
 * them merge into one permit), round robin over all targets:
 *   parkers       kr_mp_park, woken by kr_mp_unpark: every return is one
 *                 event, exactly;
 *   cancellables  kr_mp_park_cancellable_until, woken by unparks and cancels in
 *                 turn: every cancel ends exactly one wait with ECANCELED,
 *                 every unpark one with 0 (a cancel that comes while the
 *                 target runs leaves its wakeup as a permit: one 0 more);
 *   receivers     kr_chan_recv on unbuffered channels, served by
 *                 kr_chan_trysend and cancelled now and then: every value
 *                 arrives once and in order.
 * A lost wakeup hangs the sender's wait for an acknowledgement: the storm
 * fails once nothing has moved for KT_WAIT_S (the whole of it may take
 * long on a busy machine); a wakeup delivered twice is a return with
 * nothing outstanding.  `blocking`: the main microprocess enters a
 * blocking call half way, so that a spare starts and everything goes on
 * under the protocol of several VPs (the pairs stop there). */

enum { NT = 4, NPAIR = 3 };
#define EVENTS (KT_TSAN ? 300u : 5000u) /* even: a cancellable's last event is an unpark */
#define VALUES (KT_TSAN ? 300 : 5000)

static struct {
	kr_vp *vp0;
	kr_mp *park[NT], *canc[NT], *recv[NT];
	uint32_t ev_park[NT], ack_park[NT];     /* sent / acknowledged */
	uint32_t ev_canc[NT], ack_canc[NT];
	long canc_got[NT], canc_zero[NT], canc_extra[NT];
	kr_chan ch[NT];
	long sent[NT], cancels[NT];             /* sender's */
	long got[NT], got_cancel[NT];           /* receivers' */
	uint32_t progress;                      /* events and values sent */
	uint32_t stop;                          /* the pairs end */
	uint32_t off_vp0;                       /* runs seen on another VP */
} S;

static void note_vp(void)
{
	if (kr_vp_self() != S.vp0)
		__atomic_fetch_add(&S.off_vp0, 1, __ATOMIC_RELAXED);
}

static void *parker(void *a)
{
	int i = (int)(intptr_t)a;
	for (;;) {
		KT_EQ(kr_mp_park(), 0);
		note_vp();
		uint32_t e = __atomic_load_n(&S.ev_park[i], __ATOMIC_ACQUIRE);
		KT_EQ(e, S.ack_park[i] + 1); /* one event outstanding, and delivered */
		__atomic_store_n(&S.ack_park[i], e, __ATOMIC_RELEASE);
		if (e == EVENTS + 1)
			return NULL;
	}
}

/* Events of cancellables: odd ones unparks, even ones cancels. */
static void *cancellable(void *a)
{
	int i = (int)(intptr_t)a;
	for (;;) {
		int r = kr_mp_park_cancellable_until(KR_FOREVER);
		KT_CHECK(r == 0 || r == ECANCELED);
		note_vp();
		uint32_t e = __atomic_load_n(&S.ev_canc[i], __ATOMIC_ACQUIRE);
		uint32_t k = S.ack_canc[i];
		if (e == k || (r == 0 && !(e & 1))) {
			/* nothing outstanding that a 0 answers: the permit of
			 * a cancel that came while this one ran */
			KT_EQ(r, 0);
			S.canc_extra[i]++;
			continue;
		}
		KT_EQ(e, k + 1);
		KT_EQ(r, e & 1 ? 0 : ECANCELED);
		if (r)
			S.canc_got[i]++;
		else
			S.canc_zero[i]++;
		__atomic_store_n(&S.ack_canc[i], e, __ATOMIC_RELEASE);
		if (e == EVENTS + 1)
			return NULL;
	}
}

static void *receiver(void *a)
{
	int i = (int)(intptr_t)a;
	for (;;) {
		long v;
		int r = kr_chan_recv(&S.ch[i], &v);
		note_vp();
		if (r == ECANCELED) {
			S.got_cancel[i]++;
			continue;
		}
		KT_EQ(r, 0);
		if (v < 0)
			return NULL;
		KT_EQ(v, S.got[i]); /* in order, none twice, none lost */
		S.got[i]++;
	}
}

/* The pairs, until the storm is over: strict alternation by park and
 * unpark, and round trips through two unbuffered channels. */
static kr_mp *pp[NPAIR][2];
static uint32_t pp_turn[NPAIR];
static kr_chan pp_ch[NPAIR][2];
static void *ponger(void *a)
{
	int me = (int)(intptr_t)a & 1, p = (int)(intptr_t)a >> 1;
	while (!__atomic_load_n(&pp[p][!me], __ATOMIC_ACQUIRE))
		kr_mp_yield();
	for (;;) {
		while (__atomic_load_n(&pp_turn[p], __ATOMIC_ACQUIRE) != (uint32_t)me)
			KT_EQ(kr_mp_park(), 0);
		note_vp();
		int stop = __atomic_load_n(&S.stop, __ATOMIC_ACQUIRE) != 0;
		__atomic_store_n(&pp_turn[p], !me, __ATOMIC_RELEASE);
		int r = kr_mp_unpark(pp[p][!me]);
		if (stop) /* the partner may have stopped first */
			return NULL;
		KT_EQ(r, 0);
	}
}

static void *chan_ponger(void *a)
{
	int me = (int)(intptr_t)a & 1, p = (int)(intptr_t)a >> 1;
	for (long n = 0;; n++) {
		note_vp();
		long v = __atomic_load_n(&S.stop, __ATOMIC_ACQUIRE) ? -1 : n;
		if (me) {
			KT_EQ(kr_chan_recv(&pp_ch[p][0], &v), 0);
			if (v < 0)
				return NULL;
			KT_EQ(kr_chan_send(&pp_ch[p][1], &v), 0);
		} else {
			KT_EQ(kr_chan_send(&pp_ch[p][0], &v), 0);
			if (v < 0)
				return NULL;
			long back;
			KT_EQ(kr_chan_recv(&pp_ch[p][1], &back), 0);
			KT_EQ(back, v);
		}
	}
}

static int all_sent(void)
{
	for (int i = 0; i < NT; i++)
		if (S.ev_park[i] < EVENTS + 1 || S.ev_canc[i] < EVENTS + 1 || S.sent[i] <= VALUES)
			return 0;
	return 1;
}

/* Sends the next event to target i's words (ev, ack) if the last one was
 * acknowledged: 1 if it did. */
static int next_event(uint32_t *ev, const uint32_t *ack, kr_mp *t, int cancels)
{
	uint32_t e = __atomic_load_n(ev, __ATOMIC_RELAXED);
	if (e > EVENTS || __atomic_load_n(ack, __ATOMIC_ACQUIRE) != e)
		return 0;
	__atomic_store_n(ev, e + 1, __ATOMIC_RELEASE);
	int r = cancels && !((e + 1) & 1) ? kr_mp_cancel(t) : kr_mp_unpark(t);
	/* a cancellable that took a cancel's permit for the last event has
	 * ended already */
	KT_CHECK(r == 0 || (cancels && e == EVENTS && r == ESRCH));
	__atomic_fetch_add(&S.progress, 1, __ATOMIC_RELAXED);
	return 1;
}

static void *stormer(void *a)
{
	uint64_t still_since = 0; /* the first of the rounds that moved nothing */
	for (unsigned round = 0; !all_sent(); round++) {
		int moved = 0;
		for (int i = 0; i < NT; i++) {
			moved |= next_event(&S.ev_park[i], &S.ack_park[i], S.park[i], 0);
			moved |= next_event(&S.ev_canc[i], &S.ack_canc[i], S.canc[i], 1);
			if (S.sent[i] <= VALUES) {
				long v = S.sent[i] < VALUES ? S.sent[i] : -1;
				int r = kr_chan_trysend(&S.ch[i], &v);
				KT_CHECK(r == 0 || r == EAGAIN);
				if (!r) {
					S.sent[i]++;
					__atomic_fetch_add(&S.progress, 1, __ATOMIC_RELAXED);
					moved = 1;
				} else if (S.sent[i] < VALUES && round % 7 == (unsigned)i) {
					KT_EQ(kr_mp_cancel(S.recv[i]), 0);
					S.cancels[i]++;
				}
			}
		}
		if (moved) {
			still_since = 0;
		} else {
			uint64_t now = kt_mono_ns();
			if (!still_since)
				still_since = now;
			else if (now - still_since > KT_WAIT_S * 1000000000ull) {
				fprintf(stderr, "  the storm stalled: a wakeup was lost\n");
				_exit(1);
			}
			sched_yield();
		}
	}
	return a;
}

static void storm(int blocking)
{
	init1();
	S.vp0 = kr_vp_self();
	for (int i = 0; i < NT; i++) {
		KT_EQ(kr_chan_init(&S.ch[i], sizeof(long), 0), 0);
		KT_EQ(kr_mp_create(&S.park[i], NULL, parker, (void *)(intptr_t)i), 0);
		KT_EQ(kr_mp_create(&S.canc[i], NULL, cancellable, (void *)(intptr_t)i), 0);
		KT_EQ(kr_mp_create(&S.recv[i], NULL, receiver, (void *)(intptr_t)i), 0);
	}
	kr_mp *cp[NPAIR][2];
	for (int p = 0; p < NPAIR; p++) {
		KT_EQ(kr_chan_init(&pp_ch[p][0], sizeof(long), 0), 0);
		KT_EQ(kr_chan_init(&pp_ch[p][1], sizeof(long), 0), 0);
		for (int me = 0; me < 2; me++) {
			kr_mp *m;
			void *arg = (void *)(intptr_t)(p << 1 | me);
			KT_EQ(kr_mp_create(&m, NULL, ponger, arg), 0);
			__atomic_store_n(&pp[p][me], m, __ATOMIC_RELEASE);
			KT_EQ(kr_mp_create(&cp[p][me], NULL, chan_ponger, arg), 0);
		}
	}
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, stormer, NULL), 0);
	uint32_t total = NT * (2 * (EVENTS + 1) + VALUES + 1);
	if (blocking) {
		/* half way: VP 0 blocks until the storm is over, which the
		 * spare runs to its end although the ping-ponging pairs keep
		 * it busy for good: it takes over what waits in VP 0's queue
		 * (src/core/blocking.c, "The work of a VP that is away") */
		while (__atomic_load_n(&S.progress, __ATOMIC_RELAXED) < total / 2)
			kr_mp_yield(); /* (the storm fails if it stalls) */
		KT_EQ(kr_blocking_begin(), 0);
		while (__atomic_load_n(&S.progress, __ATOMIC_RELAXED) < total)
			kt_nap_us(100);
		KT_CHECK(__atomic_load_n(&S.off_vp0, __ATOMIC_RELAXED) > 0);
		KT_EQ(kr_blocking_end(), 0);
		/* the pairs stop: two VPs that never idle and the storm's
		 * thread would share this machine's two CPUs, in time slices */
		__atomic_store_n(&S.stop, 1, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < NT; i++) {
		KT_EQ(kr_mp_join(S.park[i], NULL), 0);
		KT_EQ(kr_mp_join(S.canc[i], NULL), 0);
		KT_EQ(kr_mp_join(S.recv[i], NULL), 0);
	}
	KT_EQ(pthread_join(t, NULL), 0);
	__atomic_store_n(&S.stop, 1, __ATOMIC_RELEASE);
	for (int p = 0; p < NPAIR; p++)
		for (int me = 0; me < 2; me++) {
			KT_EQ(kr_mp_join(pp[p][me], NULL), 0);
			KT_EQ(kr_mp_join(cp[p][me], NULL), 0);
		}
	for (int i = 0; i < NT; i++) {
		KT_EQ(S.ack_park[i], EVENTS + 1);
		KT_EQ(S.canc_got[i], EVENTS / 2);     /* every cancel, once */
		KT_EQ(S.canc_zero[i], EVENTS / 2 + 1); /* every unpark, once */
		KT_CHECK(S.canc_extra[i] <= (long)EVENTS / 2);
		KT_EQ(S.got[i], VALUES);
		KT_CHECK(S.got_cancel[i] <= S.cancels[i]);
	}
	KT_CHECK(blocking || S.off_vp0 == 0); /* no spare without a blocking call */
	KT_EQ(kr_fini(), 0);
}

static void wakeups_from_a_thread_that_is_no_vp_arrive_once_each_on_one_vp(void)
{
	storm(0);
}

static void a_blocking_call_in_the_storm_hands_over_to_a_spare_and_loses_nothing(void)
{
	storm(1);
}

/* ---------------- ordering ---------------- */

/* A wakeup posted before a park (here: before the flag the parker waits
 * for, spinning without a scheduling point) ends the park at once: the VP
 * applies what was posted before it reads its permit, and the other
 * microprocess, ready all along, has not run.  The same for a cancel and
 * kr_mp_park_cancellable_until. */
static uint32_t posted_flag, other_ran;
static void *note_ran(void *a)
{
	__atomic_store_n(&other_ran, 1, __ATOMIC_RELAXED);
	return a;
}

struct poster {
	kr_mp *target;
	int cancel;
};

static void *post_then_flag(void *a)
{
	struct poster *p = a;
	KT_EQ(p->cancel ? kr_mp_cancel(p->target) : kr_mp_unpark(p->target), 0);
	__atomic_store_n(&posted_flag, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void a_wakeup_posted_before_a_park_ends_it_at_once(void)
{
	init1();
	for (int cancel = 0; cancel < 2; cancel++) {
		for (int round = 0; round < 200; round++) {
			kr_mp *other;
			__atomic_store_n(&posted_flag, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&other_ran, 0, __ATOMIC_RELAXED);
			KT_EQ(kr_mp_create(&other, NULL, note_ran, NULL), 0); /* ready */
			struct poster p = {kr_mp_self(), cancel};
			pthread_t t;
			KT_EQ(pthread_create(&t, NULL, post_then_flag, &p), 0);
			KT_WAIT(__atomic_load_n(&posted_flag, __ATOMIC_ACQUIRE), kr_cpu_relax());
			if (cancel)
				KT_EQ(kr_mp_park_cancellable_until(KR_FOREVER), ECANCELED);
			else
				KT_EQ(kr_mp_park(), 0);
			KT_EQ(__atomic_load_n(&other_ran, __ATOMIC_RELAXED), 0);
			KT_EQ(pthread_join(t, NULL), 0);
			KT_EQ(kr_mp_join(other, NULL), 0);
			if (cancel) /* the cancel's wakeup, left as a permit */
				KT_EQ(kr_mp_park(), 0);
		}
	}
	KT_EQ(kr_fini(), 0);
}

/* A handle that has ended gets ESRCH from a thread that is no VP, as from
 * a VP; and a wakeup posted for a life that ends before the VP applies it
 * (it ends with no change of a permit in between) is dropped there: the
 * next life of the record, which the next create takes (the stack cache
 * is LIFO), parks until woken itself. */
static uint32_t woke;
static void *wake_stale(void *a)
{
	intptr_t r = kr_mp_unpark(a) == ESRCH && kr_mp_cancel(a) == ESRCH;
	return (void *)r;
}

static void *just_end(void *a) { return a; }

static void *end_once_posted(void *a)
{
	KT_WAIT(__atomic_load_n(&posted_flag, __ATOMIC_ACQUIRE), kr_cpu_relax());
	return a;
}

static void *park_then_note(void *a)
{
	KT_EQ(kr_mp_park(), 0);
	__atomic_store_n(&woke, 1, __ATOMIC_RELAXED);
	return a;
}

static void *post_unpark(void *a)
{
	KT_EQ(kr_mp_unpark(a), 0);
	__atomic_store_n(&posted_flag, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void a_stale_handle_is_refused_and_a_late_post_reaches_no_one(void)
{
	init1();
	kr_mp *m, *n;
	KT_EQ(kr_mp_create(&m, NULL, just_end, NULL), 0);
	kr_mp_yield(); /* it has ended */
	pthread_t t;
	void *r;
	KT_EQ(pthread_create(&t, NULL, wake_stale, m), 0);
	KT_EQ(pthread_join(t, &r), 0); /* the VP need not run for the answer */
	KT_EQ((intptr_t)r, 1);
	KT_EQ(kr_mp_join(m, NULL), 0);
	for (int round = 0; round < 200; round++) {
		__atomic_store_n(&posted_flag, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&woke, 0, __ATOMIC_RELAXED);
		KT_EQ(kr_mp_create(&m, NULL, end_once_posted, NULL), 0);
		KT_EQ(pthread_create(&t, NULL, post_unpark, m), 0);
		KT_EQ(kr_mp_join(m, NULL), 0); /* m ended with its wakeup posted */
		KT_EQ(pthread_join(t, NULL), 0);
		KT_EQ(kr_mp_create(&n, NULL, park_then_note, NULL), 0);
		KT_EQ(kr_mp_id(m), 0);
		kr_mp_yield();
		kr_mp_yield(); /* n parked, and stays parked */
		KT_EQ(__atomic_load_n(&woke, __ATOMIC_RELAXED), 0);
		KT_EQ(kr_mp_unpark(n), 0);
		KT_EQ(kr_mp_join(n, NULL), 0);
		KT_EQ(woke, 1);
	}
	KT_EQ(kr_fini(), 0);
}

/* ---------------- the end of the state ---------------- */

/* A microprocess left in VP 0's slot (a create puts it there, with a plain
 * store on one VP) while VP 0 blocks: the spare that the blocking call
 * starts takes it from the slot. */
static uint32_t ran_on_spare;
static void *note_spare(void *a)
{
	__atomic_store_n(&ran_on_spare, kr_vp_self() != a ? 1 : 2, __ATOMIC_RELEASE);
	return NULL;
}

static void a_spare_takes_what_vp_0_left_in_its_slot_while_it_blocks(void)
{
	init1();
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, note_spare, kr_vp_self()), 0);
	KT_EQ(kr_blocking_begin(), 0);
	KT_WAIT(__atomic_load_n(&ran_on_spare, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_EQ(kr_blocking_end(), 0);
	KT_EQ(ran_on_spare, 1);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- the work of a VP that is away ----------------
 *
 * src/core/blocking.c, "The work of a VP that is away".  In each test a
 * pair of microprocesses ping-pongs on the one VP that runs, which is
 * then never idle, and so never steals: what waits elsewhere must be
 * brought to it. */
static kr_chan pair_ch[2];
static kr_mp *pair[2];

static void *pair_ping(void *a)
{
	long v = 0;
	while (kr_chan_send(&pair_ch[0], &v) == 0 && kr_chan_recv(&pair_ch[1], &v) == 0)
		;
	return a;
}

static void *pair_pong(void *a)
{
	long v;
	while (kr_chan_recv(&pair_ch[0], &v) == 0 && kr_chan_send(&pair_ch[1], &v) == 0)
		;
	return a;
}

static void pair_start(void)
{
	KT_EQ(kr_chan_init(&pair_ch[0], sizeof(long), 0), 0);
	KT_EQ(kr_chan_init(&pair_ch[1], sizeof(long), 0), 0);
	KT_EQ(kr_mp_create(&pair[0], NULL, pair_ping, NULL), 0);
	KT_EQ(kr_mp_create(&pair[1], NULL, pair_pong, NULL), 0);
}

static void pair_stop(void)
{
	KT_EQ(kr_chan_close(&pair_ch[0]), 0);
	KT_EQ(kr_chan_close(&pair_ch[1]), 0);
	KT_EQ(kr_mp_join(pair[0], NULL), 0);
	KT_EQ(kr_mp_join(pair[1], NULL), 0);
}

/* A microprocess that notes its VP, sleeps `ns` and notes that it woke. */
struct sleep_note {
	uint64_t ns;
	kr_vp *vp;
	uint32_t asleep, woke;
};

static void *sleep_noted(void *a)
{
	struct sleep_note *n = a;
	__atomic_store_n(&n->vp, kr_vp_self(), __ATOMIC_RELEASE);
	__atomic_store_n(&n->asleep, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_sleep_for(n->ns), 0);
	__atomic_store_n(&n->woke, 1, __ATOMIC_RELEASE);
	return NULL;
}

static uint32_t fresh_ran;
static void *note_run(void *a)
{
	__atomic_store_n(&fresh_ran, 1, __ATOMIC_RELEASE);
	return a;
}

/* While VP 0 blocks, the pair runs on the spare: what VP 0 had queued (a
 * new microprocess in its slot) and a sleep whose timer is in VP 0's heap
 * still come to their turn before VP 0 is back. */
static void a_blocked_vps_queue_and_timers_go_on_while_the_spare_is_busy(void)
{
	init1();
	pair_start();
	struct sleep_note n = {.ns = 2000000};
	kr_mp *sleeper, *fresh;
	KT_EQ(kr_mp_create(&sleeper, NULL, sleep_noted, &n), 0);
	KT_WAIT(__atomic_load_n(&n.asleep, __ATOMIC_ACQUIRE), kr_mp_yield());
	KT_EQ(kr_mp_create(&fresh, NULL, note_run, NULL), 0); /* into VP 0's slot */
	KT_EQ(kr_blocking_begin(), 0);
	KT_WAIT(__atomic_load_n(&fresh_ran, __ATOMIC_ACQUIRE) &&
			__atomic_load_n(&n.woke, __ATOMIC_ACQUIRE),
		kt_nap_us(100));
	KT_EQ(kr_blocking_end(), 0);
	pair_stop();
	KT_EQ(kr_mp_join(sleeper, NULL), 0);
	KT_EQ(kr_mp_join(fresh, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* After a blocking call, its spare parks again.  Threads that are no VP
 * make microprocesses ready on every VP's queue in turn, the parked
 * spare's too; VP 0, busy with the pair, still runs them all. */
static uint32_t parking, parked_ran, poke_stop;
static kr_mp *parked[8];

static void *park_once(void *a)
{
	__atomic_fetch_add(&parking, 1, __ATOMIC_RELAXED); /* VP 0 runs main next
							      * when this parks */
	KT_EQ(kr_mp_park(), 0);
	__atomic_fetch_add(&parked_ran, 1, __ATOMIC_RELEASE);
	return a;
}

static void *unpark_all(void *a)
{
	for (int i = 0; i < 8; i++)
		KT_EQ(kr_mp_unpark(parked[i]), 0);
	return a;
}

static void *poked(void *a)
{
	while (!__atomic_load_n(&poke_stop, __ATOMIC_ACQUIRE))
		kr_mp_park();
	return a;
}

static void wakeups_from_a_thread_reach_a_busy_vp_past_a_parked_spare(void)
{
	init1();
	kr_vp *vp0 = kr_vp_self();
	struct sleep_note n = {.ns = 0};
	kr_mp *m, *z;
	KT_EQ(kr_mp_create(&z, NULL, poked, NULL), 0);
	KT_EQ(kr_mp_create(&m, NULL, sleep_noted, &n), 0);
	KT_EQ(kr_blocking_begin(), 0);
	KT_WAIT(__atomic_load_n(&n.woke, __ATOMIC_ACQUIRE), kt_nap_us(100));
	KT_EQ(kr_blocking_end(), 0);
	KT_CHECK(n.vp != vp0);
	/* One VP too many runs now: the spare parks when it next wakes from
	 * its idle wait, which z's wakeups end.  This microprocess makes no
	 * scheduling point meanwhile, so that it stays on VP 0. */
	KT_WAIT(kr_vp_status(n.vp) == KR_VP_SUSPENDED, {
		KT_EQ(kr_mp_unpark(z), 0);
		kt_nap_us(100);
	});
	KT_EQ(kr_vp_self(), vp0);
	for (int i = 0; i < 8; i++)
		KT_EQ(kr_mp_create(&parked[i], NULL, park_once, NULL), 0);
	pair_start();
	KT_WAIT(__atomic_load_n(&parking, __ATOMIC_RELAXED) == 8, kr_mp_yield());
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, unpark_all, NULL), 0);
	KT_WAIT(__atomic_load_n(&parked_ran, __ATOMIC_ACQUIRE) == 8, kr_mp_yield());
	KT_EQ(pthread_join(t, NULL), 0);
	pair_stop();
	for (int i = 0; i < 8; i++)
		KT_EQ(kr_mp_join(parked[i], NULL), 0);
	__atomic_store_n(&poke_stop, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_unpark(z), 0);
	KT_EQ(kr_mp_join(z, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

/* A microprocess sleeps on the spare of a blocking call, which parks once
 * VP 0 is back, its timer still armed; VP 0, busy with the pair, never
 * goes idle to look at the spare's timers: the sleep still ends (the
 * running VPs fire a parked spare's timers). */
static void a_sleep_on_a_spare_ends_while_vp_0_is_busy(void)
{
	init1();
	kr_vp *vp0 = kr_vp_self();
	struct sleep_note n = {.ns = 20000000};
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, sleep_noted, &n), 0);
	KT_EQ(kr_blocking_begin(), 0);
	KT_WAIT(__atomic_load_n(&n.asleep, __ATOMIC_ACQUIRE), kt_nap_us(100));
	KT_EQ(kr_blocking_end(), 0);
	KT_CHECK(n.vp != vp0);
	pair_start();
	KT_WAIT(__atomic_load_n(&n.woke, __ATOMIC_ACQUIRE), kr_mp_yield());
	pair_stop();
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	/* a storm is a long train of hand-offs between two threads, which a
	 * busy machine stretches many times over: a stall fails it sooner */
	KT_RUN_T(wakeups_from_a_thread_that_is_no_vp_arrive_once_each_on_one_vp, 600);
	KT_RUN_T(a_blocking_call_in_the_storm_hands_over_to_a_spare_and_loses_nothing, 600);
	KT_RUN(a_wakeup_posted_before_a_park_ends_it_at_once);
	KT_RUN(a_stale_handle_is_refused_and_a_late_post_reaches_no_one);
	KT_RUN(a_spare_takes_what_vp_0_left_in_its_slot_while_it_blocks);
	KT_RUN(a_blocked_vps_queue_and_timers_go_on_while_the_spare_is_busy);
	KT_RUN(wakeups_from_a_thread_reach_a_busy_vp_past_a_parked_spare);
	KT_RUN(a_sleep_on_a_spare_ends_while_vp_0_is_busy);
	return kt_finish();
}
