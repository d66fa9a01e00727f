/*
 * futex_probe — a plain threaded program that says what the futex
 * operations a C library or a program's own locks use give: FUTEX_WAKE_OP
 * (every op and comparison), the PI operations through glibc's
 * PTHREAD_PRIO_INHERIT mutexes (every kind, robust too, with condition
 * variables) and raw, and their errors.  test_uproc runs it natively and
 * as a μprocess and compares what it prints, which names no tid, no
 * address and no time.  Built as a PIE, and as a program that is not
 * position-independent (futex_probe-nopie) for an exec from a thread
 * other than the first.
 *
 *   futex_probe wakeop      FUTEX_WAKE_OP's ops, comparisons and errors
 *   futex_probe pi          PI mutexes of every kind under contention,
 *                           their results, the raw PI operations
 *   futex_probe requeue-pi  FUTEX_WAIT_REQUEUE_PI, FUTEX_CMP_REQUEUE_PI
 *   futex_probe exec-thread PATH   a second thread execs PATH hello
 *   futex_probe hello ...   what an exec'd one says
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef FUTEX_LOCK_PI2
#define FUTEX_LOCK_PI2 13
#endif

static long fx(void *uaddr, int op, long val, long val2, void *uaddr2, long val3)
{
	long r = syscall(SYS_futex, uaddr, op, val, val2, uaddr2, val3);
	return r < 0 ? -errno : r;
}

static const char *err(long r)
{
	static char b[32];
	switch (r) {
	case -EINVAL:
		return "EINVAL";
	case -ENOSYS:
		return "ENOSYS";
	case -EFAULT:
		return "EFAULT";
	case -EAGAIN:
		return "EAGAIN";
	case -EPERM:
		return "EPERM";
	case -EDEADLK:
		return "EDEADLK";
	case -ESRCH:
		return "ESRCH";
	case -ETIMEDOUT:
		return "ETIMEDOUT";
	case -EINTR:
		return "EINTR";
	default:
		snprintf(b, sizeof b, "%ld", r);
		return b;
	}
}

/* A call's result, said after it is made. */
#define SAY(what, call)                                                                        \
	do {                                                                                   \
		long r_ = (call);                                                              \
		printf("%s %s", what, err(r_));                                                \
	} while (0)

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Until n threads wait on the plain futex at w: a requeue of its waiters
 * onto itself counts them and moves none. */
static void until_waiting(uint32_t *w, long n)
{
	while (fx(w, FUTEX_REQUEUE_PRIVATE, 0, INT_MAX, w, 0) < n)
		sched_yield();
}

/* Until a thread waits at w in a PI operation: a plain requeue meets it
 * (EINVAL).  `shared`: a shared futex (glibc's robust mutexes), which the
 * kernel keys apart from a private one. */
static void until_pi_waiting(uint32_t *w, int shared)
{
	int op = shared ? FUTEX_REQUEUE : FUTEX_REQUEUE_PRIVATE;
	while (fx(w, op, 0, INT_MAX, w, 0) != -EINVAL)
		sched_yield();
}

/* ---------------- FUTEX_WAKE_OP ---------------- */

static uint32_t w1, w2;

static void *wait_w1(void *a)
{
	long r = fx(&w1, FUTEX_WAIT_PRIVATE, 0, 0, NULL, 0);
	return (void *)r;
}

static void *wait_w2(void *a)
{
	long r = fx(&w2, FUTEX_WAIT_PRIVATE, (long)(intptr_t)a, 0, NULL, 0);
	return (void *)r;
}

/* One FUTEX_WAKE_OP with a waiter on each word, w2 starting at v. */
static void wake_op_once(const char *what, int op, int oparg, int cmp, int cmparg, uint32_t v)
{
	pthread_t a, b;
	w1 = 0;
	w2 = v;
	pthread_create(&a, NULL, wait_w1, NULL);
	pthread_create(&b, NULL, wait_w2, (void *)(intptr_t)v);
	until_waiting(&w1, 1);
	until_waiting(&w2, 1);
	long r = fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, FUTEX_OP(op, oparg, cmp, cmparg));
	long left1 = fx(&w1, FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0);
	long left2 = fx(&w2, FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("%s %d cmp %d %d: %#x -> %#x, woke %s, left %ld %ld\n", what, oparg, cmp, cmparg, v,
	       w2, err(r), left1, left2);
}

static int wakeop(void)
{
	static const char *names[] = {"SET", "ADD", "OR", "ANDN", "XOR"};
	static const int args[] = {5, -3, 0x600, 0xf0, 0x7ff};
	for (int op = FUTEX_OP_SET; op <= FUTEX_OP_XOR; op++) {
		for (int cmp = FUTEX_OP_CMP_EQ; cmp <= FUTEX_OP_CMP_GE; cmp++) {
			wake_op_once(names[op], op, args[op], cmp, 7, 7);
			wake_op_once(names[op], op, args[op], cmp, -2, 0xfffffffeu);
			wake_op_once(names[op], op, args[op], cmp, 100, 3);
		}
		char shift[16];
		snprintf(shift, sizeof shift, "%s<<", names[op]);
		wake_op_once(shift, op | FUTEX_OP_OPARG_SHIFT, 4, FUTEX_OP_CMP_NE, 0, 0xff);
		wake_op_once(shift, op | FUTEX_OP_OPARG_SHIFT, 31, FUTEX_OP_CMP_GE, 0, 1);
	}
	/* no waiters: the op is done all the same; nwake 0 wakes one */
	w2 = 1;
	long r = fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, FUTEX_OP(FUTEX_OP_ADD, 2, 0, 0));
	printf("alone: %s, %#x\n", err(r), w2);
	pthread_t a;
	w1 = 0;
	pthread_create(&a, NULL, wait_w1, NULL);
	until_waiting(&w1, 1);
	printf("nwake 0: woke %s\n",
	       err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 0, 0, &w2, FUTEX_OP(FUTEX_OP_SET, 0, 0, 1))));
	pthread_join(a, NULL);
	/* hostile: what the kernel says */
	uint32_t *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *al = (char *)&w2;
	int good = FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0);
	printf("bad op 5: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, 5 << 28)));
	printf("bad op 7: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, 7 << 28)));
	w2 = 3;
	r = fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, FUTEX_OP(FUTEX_OP_SET, 9, 6, 0));
	printf("bad cmp 6: %s, %#x\n", err(r), w2);
	printf("bad cmp, uaddr2 NULL: %s\n",
	       err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, NULL, FUTEX_OP(FUTEX_OP_SET, 9, 7, 0))));
	printf("bad cmp 15: %s\n",
	       err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, FUTEX_OP(FUTEX_OP_ADD, 1, 15, 0))));
	printf("uaddr2 NULL: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, NULL, good)));
	printf("uaddr2 read-only: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, ro, good)));
	printf("uaddr2 misaligned: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, al + 1, good)));
	printf("uaddr misaligned: %s\n",
	       err(fx((char *)&w1 + 2, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, good)));
	printf("uaddr NULL: %s\n", err(fx(NULL, FUTEX_WAKE_OP_PRIVATE, 1, 1, &w2, good)));
	printf("bad op, uaddr2 NULL: %s\n", err(fx(&w1, FUTEX_WAKE_OP_PRIVATE, 1, 1, NULL, 6 << 28)));
	printf("clock realtime: %s\n",
	       err(fx(&w1, FUTEX_WAKE_OP_PRIVATE | FUTEX_CLOCK_REALTIME, 1, 1, &w2, good)));
	printf("op 2: %s, ", err(fx(&w1, FUTEX_FD, 1, 0, NULL, 0)));
	printf("op 14: %s, misaligned op 14: %s\n", err(fx(&w1, 14, 1, 0, NULL, 0)),
	       err(fx(al + 1, 14, 1, 0, NULL, 0)));
	return 0;
}

/* ---------------- PI mutexes ---------------- */

/* A PI word as it can be compared between runs: who owns it (me, the
 * thread `other`, none or another) and its bits. */
static const char *word(uint32_t v, pid_t other)
{
	static char b[64];
	uint32_t t = v & FUTEX_TID_MASK;
	snprintf(b, sizeof b, "%s%s%s",
		 !t ? "free" : t == (uint32_t)tid() ? "mine" : t == (uint32_t)other ? "other's" : "?",
		 v & FUTEX_WAITERS ? "+waiters" : "", v & FUTEX_OWNER_DIED ? "+died" : "");
	return b;
}

static const char *kinds[] = {"normal", "recursive", "errorcheck", "robust"};
static pthread_mutex_t m;
static long counter;
enum { ROUNDS = 3000, NTHR = 4 };

static void *contend(void *a)
{
	int kind = (int)(intptr_t)a;
	for (int i = 0; i < ROUNDS; i++) {
		int e = pthread_mutex_lock(&m);
		if (e) {
			printf("lock: %d\n", e);
			exit(1);
		}
		if (kind == 1) /* recursive: once more, inside */
			pthread_mutex_lock(&m);
		long c = counter;
		if (i % 16 == 0)
			sched_yield(); /* another thread meets the lock held */
		counter = c + 1;
		if (kind == 1)
			pthread_mutex_unlock(&m);
		pthread_mutex_unlock(&m);
	}
	return NULL;
}

static void pi_init(int kind)
{
	pthread_mutexattr_t at;
	pthread_mutexattr_init(&at);
	pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT);
	if (kind == 1)
		pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
	if (kind == 2)
		pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
	if (kind == 3)
		pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
	int e = pthread_mutex_init(&m, &at);
	if (e)
		printf("init %s: %d\n", kinds[kind], e);
	pthread_mutexattr_destroy(&at);
}

static pid_t holder_tid;
static volatile int holder_go;

/* Holds m until told, then ends holding it or not. */
static void *holder(void *a)
{
	pthread_mutex_lock(&m);
	__atomic_store_n(&holder_tid, tid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&holder_go, __ATOMIC_ACQUIRE))
		sched_yield();
	if (!a)
		pthread_mutex_unlock(&m);
	return NULL;
}

static pthread_t hold(int ends_holding)
{
	pthread_t t;
	holder_tid = 0;
	holder_go = 0;
	pthread_create(&t, NULL, holder, ends_holding ? (void *)1 : NULL);
	while (!__atomic_load_n(&holder_tid, __ATOMIC_ACQUIRE))
		sched_yield();
	return t;
}

static int lock_result;
static void *locker(void *a)
{
	lock_result = pthread_mutex_lock(&m);
	printf("  the waiter's lock: %d, %s\n", lock_result, word(m.__data.__lock, 0));
	if (lock_result == EOWNERDEAD)
		pthread_mutex_consistent(&m);
	pthread_mutex_unlock(&m);
	return NULL;
}

static struct timespec in_ms(clockid_t c, long ms)
{
	struct timespec t;
	clock_gettime(c, &t);
	t.tv_nsec += ms * 1000000;
	t.tv_sec += t.tv_nsec / 1000000000;
	t.tv_nsec %= 1000000000;
	return t;
}

static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long queue, produced, consumed;

static void *producer(void *a)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&m);
		queue++;
		produced++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&m);
		if (i % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void *consumer(void *a)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&m);
		while (!queue)
			pthread_cond_wait(&cv, &m);
		queue--;
		consumed++;
		pthread_mutex_unlock(&m);
	}
	return NULL;
}

static int pi(void)
{
	for (int kind = 0; kind < 4; kind++) {
		pi_init(kind);
		counter = 0;
		pthread_t t[NTHR];
		for (int i = 0; i < NTHR; i++)
			pthread_create(&t[i], NULL, contend, (void *)(intptr_t)kind);
		for (int i = 0; i < NTHR; i++)
			pthread_join(t[i], NULL);
		printf("%s: %ld of %d\n", kinds[kind], counter, NTHR * ROUNDS);

		/* held by another: trylock, timedlock on both clocks */
		pthread_t h = hold(0);
		struct timespec ts = in_ms(CLOCK_REALTIME, 30);
		printf("  held: trylock %d", pthread_mutex_trylock(&m));
		printf(", timedlock %d", pthread_mutex_timedlock(&m, &ts));
		ts = in_ms(CLOCK_MONOTONIC, 30);
		printf(", clocklock %d, %s\n", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts),
		       word(m.__data.__lock, holder_tid));
		holder_go = 1;
		pthread_join(h, NULL);
		printf("  released: %s\n", word(m.__data.__lock, 0));
		/* by itself: again, and unlocks by another */
		pthread_mutex_lock(&m);
		ts = in_ms(CLOCK_REALTIME, 30);
		printf("  mine: trylock %d", pthread_mutex_trylock(&m));
		printf(", timedlock %d", pthread_mutex_timedlock(&m, &ts));
		if (kind == 1) /* twice more: once for each */
			pthread_mutex_unlock(&m), pthread_mutex_unlock(&m);
		printf(", %s\n", word(m.__data.__lock, 0));
		pthread_mutex_unlock(&m);
		if (kind)
			printf("  not held: unlock %d\n", pthread_mutex_unlock(&m));

		/* its owner ends holding it, with a waiter (robust: a plain one's
		 * waiter would meet FUTEX_OWNER_DIED, which glibc asserts it
		 * never does), then without */
		if (kind == 3 || kind == 0) {
			if (kind == 3) {
				h = hold(1);
				pthread_t w;
				pthread_create(&w, NULL, locker, NULL);
				until_pi_waiting((uint32_t *)&m.__data.__lock, 1);
				holder_go = 1;
				pthread_join(h, NULL);
				pthread_join(w, NULL);
			}
			h = hold(1);
			holder_go = 1;
			pthread_join(h, NULL);
			printf("  its owner ended: %s", word(m.__data.__lock, 0));
			if (kind == 3) {
				int e = pthread_mutex_lock(&m);
				printf(", lock %d, %s", e, word(m.__data.__lock, 0));
				if (e == EOWNERDEAD)
					pthread_mutex_consistent(&m);
				pthread_mutex_unlock(&m);
				printf(", again %d", pthread_mutex_lock(&m));
				pthread_mutex_unlock(&m);
			} else {
				ts = in_ms(CLOCK_REALTIME, 30);
				SAY(", raw lock", fx(&m.__data.__lock, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
				printf(", timedlock %d", pthread_mutex_timedlock(&m, &ts));
			}
			printf("\n");
		}

		/* a condition variable on it: 2 producers, 2 consumers */
		pi_init(kind);
		queue = produced = consumed = 0;
		pthread_t pc[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&pc[i], NULL, i < 2 ? producer : consumer, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(pc[i], NULL);
		printf("  condvar: %ld produced, %ld consumed, %ld left\n", produced, consumed, queue);
		pthread_mutex_destroy(&m);
	}

	/* raw: the kernel's answers */
	uint32_t f = 0, *l = (uint32_t *)&m.__data.__lock;
	SAY("raw trylock:", fx(&f, FUTEX_TRYLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	printf(" %s", word(f, 0));
	SAY(", again", fx(&f, FUTEX_TRYLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", lock", fx(&f, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", unlock", fx(&f, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	printf(" %s\n", word(f, 0));
	SAY("raw unlock of a free word:", fx(&f, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	pi_init(0);
	pthread_t h = hold(0);
	SAY("\nraw, held by another: unlock", fx(l, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", trylock", fx(l, FUTEX_TRYLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	printf(", %s\n", word(*l, holder_tid));
	struct timespec ts = in_ms(CLOCK_REALTIME, 30);
	SAY("  lock_pi (realtime)", fx(l, FUTEX_LOCK_PI_PRIVATE, 0, (long)&ts, NULL, 0));
	ts = in_ms(CLOCK_MONOTONIC, 30);
	SAY(", lock_pi2", fx(l, FUTEX_LOCK_PI2_PRIVATE, 0, (long)&ts, NULL, 0));
	ts = in_ms(CLOCK_REALTIME, 30);
	SAY(", lock_pi2 realtime",
	    fx(l, FUTEX_LOCK_PI2_PRIVATE | FUTEX_CLOCK_REALTIME, 0, (long)&ts, NULL, 0));
	SAY(", lock_pi realtime flag",
	    fx(l, FUTEX_LOCK_PI_PRIVATE | FUTEX_CLOCK_REALTIME, 0, (long)&ts, NULL, 0));
	struct timespec bad = {0, 1000000000}, past = {1, 0};
	SAY("\n  bad timeout", fx(l, FUTEX_LOCK_PI_PRIVATE, 0, (long)&bad, NULL, 0));
	SAY(", bad timeout pointer", fx(l, FUTEX_LOCK_PI_PRIVATE, 0, 8, NULL, 0));
	SAY(", past", fx(l, FUTEX_LOCK_PI2_PRIVATE, 0, (long)&past, NULL, 0));
	holder_go = 1;
	pthread_join(h, NULL);
	printf("\n  ended: %s\n", word(*l, 0));
	char *al = (char *)&f;
	uint32_t *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	SAY("hostile: lock NULL", fx(NULL, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", misaligned", fx(al + 1, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", read-only", fx(ro, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY("; unlock NULL", fx(NULL, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", misaligned", fx(al + 2, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", read-only", fx(ro, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY("; trylock NULL", fx(NULL, FUTEX_TRYLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", op 15", fx(&f, 15, 0, 0, NULL, 0));
	f = 0x3ffffffe; /* a tid that names no thread: above any pid_max */
	SAY("\na dead owner: lock", fx(&f, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	SAY(", trylock", fx(&f, FUTEX_TRYLOCK_PI_PRIVATE, 0, 0, NULL, 0));
	printf(", %s\n", f == (0x3ffffffe | FUTEX_WAITERS) ? "waiters set" : "?");
	f = FUTEX_OWNER_DIED;
	SAY("a word whose owner died: lock", fx(&f, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0));
	printf(", %s\n", word(f, 0));
	return 0;
}

/* ---------------- FUTEX_WAIT_REQUEUE_PI, FUTEX_CMP_REQUEUE_PI ---------------- */

static uint32_t cw, pw;
static char said[4][80];

/* A raw PI word's owner that ends holding it: its waiter gets it, with
 * FUTEX_OWNER_DIED, as the kernel's exit_pi_state_list gives it. */
static volatile int raw_held, raw_go;

static void *raw_holder(void *a)
{
	fx(&pw, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0);
	raw_held = 1;
	while (!raw_go)
		sched_yield();
	return a;
}

static void *raw_locker(void *a)
{
	long r = fx(&pw, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0);
	snprintf(said[3], sizeof said[3], "%s, %s", err(r), word(pw, 0));
	if (!r)
		fx(&pw, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0);
	return a;
}

static void *rq_waiter(void *a)
{
	int i = (int)(intptr_t)a;
	long r = fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 0, 0, &pw, 0);
	snprintf(said[i], sizeof said[i], "%s, %s", err(r), word(pw, 0));
	if (!r)
		fx(&pw, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0);
	return NULL;
}

static int requeue_pi(void)
{
	/* the PI word free: the first waiter gets it at once */
	pthread_t t[3];
	cw = pw = 0;
	pthread_create(&t[0], NULL, rq_waiter, (void *)0);
	until_pi_waiting(&cw, 0);
	printf("plain wake meets it: %s\n", err(fx(&cw, FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0)));
	SAY("nwake 2:", fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 2, 0, &pw, 0));
	SAY(", cmp:", fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 0, &pw, 1));
	SAY(", same word:", fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 0, &cw, 0));
	SAY(", misaligned:", fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 0, (char *)&pw + 1, 0));
	printf("\n");
	printf("to another word: %s\n", err(fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 0, &w1, 0)));
	printf("requeue_pi, free: %s\n", err(fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 0, &pw, 0)));
	pthread_join(t[0], NULL);
	printf("  the waiter: %s\n", said[0]);
	/* held by this thread: both wait for it, then get it in turn */
	fx(&pw, FUTEX_LOCK_PI_PRIVATE, 0, 0, NULL, 0);
	for (int i = 1; i < 3; i++) {
		pthread_create(&t[i], NULL, rq_waiter, (void *)(intptr_t)i);
		until_pi_waiting(&cw, 0);
	}
	/* the second may not wait yet: requeued by a later call then */
	long n = 0;
	while (n >= 0 && n < 2) {
		long k = fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, INT_MAX, &pw, 0);
		n = k < 0 ? k : n + k;
		sched_yield();
	}
	printf("requeue_pi, held: %s, %s\n", err(n), word(pw, 0));
	printf("  unlock %s\n", err(fx(&pw, FUTEX_UNLOCK_PI_PRIVATE, 0, 0, NULL, 0)));
	pthread_join(t[1], NULL);
	pthread_join(t[2], NULL);
	printf("  the waiters: %s; %s; %s\n", said[1], said[2], word(pw, 0));
	/* errors */
	struct timespec ts = in_ms(CLOCK_MONOTONIC, 30);
	printf("timeout: %s", err(fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 0, (long)&ts, &pw, 0)));
	ts = in_ms(CLOCK_REALTIME, 30);
	printf(", realtime %s",
	       err(fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE | FUTEX_CLOCK_REALTIME, 0, (long)&ts, &pw, 0)));
	SAY(", changed", fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 1, 0, &pw, 0));
	SAY(", same word", fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 0, 0, &cw, 0));
	SAY(", misaligned", fx(&cw, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 0, 0, (char *)&pw + 1, 0));
	SAY(", NULL", fx(NULL, FUTEX_WAIT_REQUEUE_PI_PRIVATE, 0, 0, &pw, 0));
	printf("\n");
	/* a plain waiter met by a PI requeue */
	pthread_t a;
	w1 = 0;
	pthread_create(&a, NULL, wait_w1, NULL);
	until_waiting(&w1, 1);
	SAY("a plain waiter:", fx(&w1, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 1, &pw, 0));
	SAY(", woken", fx(&w1, FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0));
	printf("\n");
	pthread_join(a, NULL);
	SAY("nothing waits:", fx(&cw, FUTEX_CMP_REQUEUE_PI_PRIVATE, 1, 5, &pw, 0));
	printf(", %s\n", word(pw, 0));
	pthread_t h, l;
	pthread_create(&h, NULL, raw_holder, NULL);
	while (!raw_held)
		sched_yield();
	pthread_create(&l, NULL, raw_locker, NULL);
	until_pi_waiting(&pw, 0);
	raw_go = 1;
	pthread_join(h, NULL);
	pthread_join(l, NULL);
	printf("its owner ended, its waiter: %s; %s\n", said[3], word(pw, 0));
	return 0;
}

/* ---------------- exec from a thread other than the first ---------------- */

static char *const *exec_argv;

static void *execer(void *a)
{
	execv(exec_argv[0], exec_argv);
	printf("exec: %s\n", strerror(errno));
	exit(1);
}

static void *sleeper(void *a)
{
	for (;;)
		pause();
	return a;
}

static int exec_thread(const char *path)
{
	char *argv[] = {(char *)path, "hello", "from", "a thread", NULL};
	exec_argv = argv;
	printf("before\n");
	fflush(stdout);
	pthread_t s, t;
	pthread_create(&s, NULL, sleeper, NULL);
	pthread_create(&t, NULL, execer, NULL);
	pthread_join(t, NULL); /* never: the exec ends it */
	return 1;
}

static int hello(int argc, char **argv)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	printf("%s:", argv[1]);
	for (int i = 2; i < argc; i++)
		printf(" %s", argv[i]);
	printf(" (%d thread%s)\n", n, n == 1 ? "" : "s");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "wakeop"))
		return wakeop();
	if (!strcmp(argv[1], "pi"))
		return pi();
	if (!strcmp(argv[1], "requeue-pi"))
		return requeue_pi();
	if (!strcmp(argv[1], "exec-thread") && argc > 2)
		return exec_thread(argv[2]);
	if (!strcmp(argv[1], "hello"))
		return hello(argc, argv);
	return 2;
}
