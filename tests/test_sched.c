/* L2: scheduling (src/core/sched_default.c, rq_builtin.c): the slot,
 * spawn trees, idle VPs, ready-queue modules and priorities, and mixed
 * operations on every built-in ready queue. */
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

static int none_to_wait_for(void) { return 1; }

/* Every microprocess asleep, on 2 VPs: both VPs sleep in the kernel and
 * stay asleep (they spin for at most KR_VP_SPIN_NS, then park). */
static void idle_process_uses_no_cpu(void)
{
	init(2);
	KT_CHECK(kt_vps_idle(2, none_to_wait_for, 300));
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
	int p = KR_PRIO_MIN;
	KT_EQ(kr_mp_getprio(mp, &p), 0); /* a module's handles are live ones */
	return p >= KR_PRIO_DEFAULT ? &h->run : &h->held;
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
	(void)prio; /* kr_mp_getprio says so already */
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

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(idle_process_uses_no_cpu);
	KT_RUN(wakeups_run_in_their_order_on_one_vp);
	KT_RUN(a_bouncing_pair_does_not_starve_the_queue);
	KT_RUN(idle_vps_take_from_a_busy_vps_slot);
	KT_RUN(switch_to_takes_from_the_slot_too);
	KT_RUN(new_microprocesses_run_next_newest_first);
	KT_RUN(a_spawn_tree_runs_depth_first_on_one_vp);
	KT_RUN(a_spawn_tree_stays_shallow_on_two_and_four_vps);
	KT_RUN(udata_reaches_the_microprocess_and_its_ready_queue);
	KT_RUN(priority_queue_runs_highest_first_and_changes_live);
	KT_RUN(a_modules_reprio_sees_and_keeps_the_new_priority);
	KT_RUN_T(raising_a_held_microprocess_wakes_an_idle_vp, 20);
	KT_RUN(work_spreads_to_idle_vps);
	KT_RUN(mixed_operations_on_four_vps_add_up);
	KT_RUN(mixed_operations_with_shared_fifo);
	KT_RUN(mixed_operations_with_shared_lifo);
	KT_RUN(mixed_operations_with_priorities);
	return kt_finish();
}
