/*
 * karui L3 — monitors: mutexes and condition variables.
 *
 * Mutex.  m->state is 0 when free, else the owner's token with bit 0 set
 * while someone waits.  Uncontended lock and unlock are one CAS each.
 * Both slow paths take m->lock; with bit 0 set the owner's fast unlock
 * fails, so under m->lock a state with bit 0 set cannot change: the
 * unlocker hands the mutex to the first waiter (state = its token) and
 * wakes it owning the mutex — no barging, no thundering herd.  A token is
 * the microprocess's handle (core/internal.h), whose generation keeps a
 * microprocess created in the record of one that ended holding the mutex
 * from passing for its owner; or, on a thread that is no VP (trylock and
 * unlock only), a number the thread takes the first time it needs one,
 * with bit 2 set, which no handle has (records are 64-byte aligned).  A
 * thread-local word's address would be confusable the same way: a thread
 * that starts after one has ended may get the same.
 *
 * Condition variables.  A waiter queues on c (under c->lock), then
 * releases the mutex.  Signal moves the first waiter onto the mutex
 * (wait morphing): it is given the mutex at once if free, else queued on
 * it, so it wakes once, owning the mutex.  A signaller that owns the
 * mutex, while nobody waits in its queue, puts the waiter on m->moved
 * instead: a list that only the owner reads or writes (it passes with the
 * mutex, and the waiter's DONE carries it to the next owner), so neither
 * m->lock nor a CAS to set bit 0 is needed.  An unlock serves m->moved
 * first (what is on it was signalled before anyone queued on m->q, so it
 * is older), with one RMW that swaps the owner's token for the waiter's
 * and keeps bit 0, which a locker may set meanwhile.  A contended release
 * inside a wait switches straight to the new owner (wait.h's direct
 * hand-off): one round trip of seed 000's Table 4 is two such switches,
 * each after a signal and a wait that take c->lock once each and a
 * release that is one RMW.  A signal with
 * no waiter reads c->nwait and takes no lock: a signaller that holds the
 * mutex sees every waiter that released it (the waiter counts itself
 * before it releases the mutex), and one that does not hold it is
 * concurrent with a waiter it misses, so it may be ordered before it.
 *
 * Rejected: spinning before blocking.  Microprocesses are not preempted,
 * so on one VP the owner cannot run while a locker spins; across VPs the
 * hand-off keeps the order fair.
 */
#include "wait.h"

#define M_WAITERS ((uintptr_t)1)
#define M_DEAD ((uintptr_t)2) /* destroyed: no token looks like this */
#define M_FOREIGN ((uintptr_t)4)

static __thread uintptr_t foreign_token;
static uintptr_t foreign_tokens;

static inline uintptr_t foreign(void)
{
	if (!foreign_token)
		foreign_token = __atomic_add_fetch(&foreign_tokens, 8, __ATOMIC_RELAXED) | M_FOREIGN;
	return foreign_token;
}

/* The caller's token: its microprocess's handle, or its thread's number. */
static inline uintptr_t token(void)
{
	kr_mp *self = kr__self();
	return self ? (uintptr_t)self : foreign();
}

int kr_mutex_init(kr_mutex *m)
{
	if (!m)
		return EINVAL;
	*m = (kr_mutex){0};
	return 0;
}

int kr_mutex_destroy(kr_mutex *m)
{
	if (!m)
		return EINVAL;
	uintptr_t s = 0;
	if (__atomic_compare_exchange_n(&m->state, &s, M_DEAD, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return 0;
	return s == M_DEAD ? EINVAL : EBUSY;
}

/* Queue w on m, or give m to w's microprocess at once if it is free.
 * 1: w got it (the caller wakes it or returns). */
static int enqueue_or_take(kr_mutex *m, struct kr_waiter *w)
{
	kr__spin_lock(&m->lock);
	uintptr_t s = __atomic_load_n(&m->state, __ATOMIC_RELAXED);
	for (;;) {
		if (s == 0) {
			if (__atomic_compare_exchange_n(&m->state, &s, (uintptr_t)w->mp, 0,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
				kr__spin_unlock(&m->lock);
				return 1;
			}
		} else if ((s & M_WAITERS) ||
			   __atomic_compare_exchange_n(&m->state, &s, s | M_WAITERS, 0,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			break;
		}
	}
	wq_push(&m->q, w);
	kr__spin_unlock(&m->lock);
	return 0;
}

static __attribute__((noinline)) int lock_slow(kr_mutex *m, kr_mp *self, uintptr_t s,
					       uint64_t deadline)
{
	if (s == M_DEAD)
		return EINVAL;
	if ((s & ~M_WAITERS) == (uintptr_t)self)
		return EDEADLK;
	struct kr_waiter w = {.mp = self};
	if (enqueue_or_take(m, &w))
		return 0;
	int err = wq_wait(&w, &m->lock, deadline, 0, KR_WHY_MUTEX);
	if (err && w.state == W_WAITING) {
		wq_remove(&m->q, &w);
		if (!m->q.head) { /* stable: bit 0 is set and we hold m->lock */
			uintptr_t s = __atomic_load_n(&m->state, __ATOMIC_RELAXED);
			__atomic_store_n(&m->state, s & ~M_WAITERS, __ATOMIC_RELAXED);
		}
		kr__spin_unlock(&m->lock);
	}
	return err;
}

static inline int lock(kr_mutex *m, uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (!m)
		return EINVAL;
	if (!self)
		return EPERM;
	uintptr_t s = 0;
	if (__builtin_expect(__atomic_compare_exchange_n(&m->state, &s, (uintptr_t)self, 0,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 1))
		return 0;
	return KR_BLOCKING(lock_slow, m, self, s, deadline, 0); /* arch/blocking.h */
}

int kr_mutex_lock(kr_mutex *m) { return lock(m, KR_FOREVER); }
int kr_mutex_lock_until(kr_mutex *m, uint64_t deadline) { return lock(m, deadline); }

int kr_mutex_trylock(kr_mutex *m)
{
	if (!m)
		return EINVAL;
	uintptr_t s = 0;
	if (__atomic_compare_exchange_n(&m->state, &s, token(), 0, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return 0;
	return s == M_DEAD ? EINVAL : EBUSY;
}

/* Release m held by `me` with waiters in m->q: the first one owns it now;
 * the caller wakes it.  The waiters whose bit 0 release saw may all have
 * timed out since (lock_slow clears M_WAITERS with the last): then m is
 * free.  Nobody else writes m->state meanwhile: lockers change it only
 * under m->lock. */
static struct kr_waiter *hand_over(kr_mutex *m)
{
	kr__spin_lock(&m->lock);
	struct kr_waiter *w = wq_pop(&m->q);
	__atomic_store_n(&m->state, w ? (uintptr_t)w->mp | (m->q.head ? M_WAITERS : 0) : 0,
			 __ATOMIC_RELEASE);
	kr__spin_unlock(&m->lock);
	return w;
}

/* 0 and *next = the waiter to wake (or NULL), or an error.  With
 * m->moved empty, the common unlock is one CAS, as if m->moved did not
 * exist: only the owner fills m->moved, so an owner that reads its head
 * as NULL reads what it wrote last.  (The head is read atomically, since
 * a caller that turns out not to own m may read it while the owner
 * writes it.) */
static inline int release(kr_mutex *m, struct kr_waiter **next)
{
	uintptr_t me = token();
	uintptr_t s = me;
	*next = NULL;
	if (__builtin_expect(!__atomic_load_n(&m->moved.head, __ATOMIC_RELAXED), 1)) {
		if (__builtin_expect(__atomic_compare_exchange_n(&m->state, &s, 0, 0,
								 __ATOMIC_RELEASE, __ATOMIC_RELAXED),
				     1))
			return 0;
	} else {
		s = __atomic_load_n(&m->state, __ATOMIC_RELAXED);
	}
	if (s == M_DEAD)
		return EINVAL;
	if ((s & ~M_WAITERS) != me)
		return EPERM;
	struct kr_waiter *w = wq_pop(&m->moved);
	if (w) { /* the owner's token becomes w's; bit 0 stays as it is */
		__atomic_fetch_xor(&m->state, me ^ (uintptr_t)w->mp, __ATOMIC_RELEASE);
		*next = w;
		return 0;
	}
	*next = hand_over(m);
	return 0;
}

int kr_mutex_unlock(kr_mutex *m)
{
	if (!m)
		return EINVAL;
	struct kr_waiter *w;
	int err = release(m, &w);
	if (w)
		wq_wake(w, 0);
	return err;
}

/* ---------------- condition variables ---------------- */

int kr_cond_init(kr_cond *c)
{
	if (!c)
		return EINVAL;
	*c = (kr_cond){0};
	return 0;
}

int kr_cond_destroy(kr_cond *c)
{
	if (!c)
		return EINVAL;
	kr__spin_lock(&c->lock);
	int err = c->dead ? EINVAL : c->q.head ? EBUSY : 0;
	if (!err)
		__atomic_store_n(&c->dead, 1, __ATOMIC_RELAXED); /* signal reads it unlocked */
	kr__spin_unlock(&c->lock);
	return err;
}

/* c->nwait follows c->q (c->lock held). */
static inline void count_waiters(kr_cond *c, int d)
{
	__atomic_store_n(&c->nwait, c->nwait + d, __ATOMIC_RELAXED);
}

static __attribute__((noinline)) int cond_wait(kr_cond *c, kr_mutex *m, uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (!c || !m)
		return EINVAL;
	if (!self)
		return EPERM;
	uintptr_t s = __atomic_load_n(&m->state, __ATOMIC_RELAXED);
	if (s == M_DEAD)
		return EINVAL;
	if ((s & ~M_WAITERS) != (uintptr_t)self)
		return EPERM;
	struct kr_waiter w = {.mp = self, .aux = m};
	kr__spin_lock(&c->lock);
	if (c->dead) {
		kr__spin_unlock(&c->lock);
		return EINVAL;
	}
	wq_push(&c->q, &w);
	count_waiters(c, 1);
	kr__spin_unlock(&c->lock);
	struct kr_waiter *next;
	release(m, &next);
	if (next && deadline == KR_FOREVER)
		wq_wake_and_block(next, 0);
	else if (next)
		wq_wake(next, 0);
	int err = wq_wait(&w, &c->lock, deadline, 1, KR_WHY_COND);
	if (err && w.state == W_WAITING) {
		/* not signalled: leave c, then take m back as a plain locker */
		wq_remove(&c->q, &w);
		count_waiters(c, -1);
		kr__spin_unlock(&c->lock);
		lock(m, KR_FOREVER);
	}
	return err;
}

/* A condition wait always blocks: through KR_BLOCKING (arch/blocking.h). */
int kr_cond_wait(kr_cond *c, kr_mutex *m)
{
	return KR_BLOCKING(cond_wait, c, m, KR_FOREVER, 0, 0);
}

int kr_cond_wait_until(kr_cond *c, kr_mutex *m, uint64_t deadline)
{
	return KR_BLOCKING(cond_wait, c, m, deadline, 0, 0);
}

/* A signal or broadcast with nobody to wake: its result; else -1, and the
 * caller takes c->lock (see the top: no lock when no one waits). */
static inline int no_waiter(kr_cond *c)
{
	if (!c)
		return EINVAL;
	if (!__atomic_load_n(&c->nwait, __ATOMIC_RELAXED))
		return __atomic_load_n(&c->dead, __ATOMIC_RELAXED) ? EINVAL : 0;
	return -1;
}

/* A waiter taken out of c (no lock held) moves onto its mutex: onto the
 * owner's m->moved if the caller owns m and nobody waits in m->q (the
 * top), else into m->q, or it takes m at once if m is free. */
static inline void move_to_mutex(struct kr_waiter *w)
{
	kr_mutex *m = w->aux;
	if (__atomic_load_n(&m->state, __ATOMIC_RELAXED) == token())
		wq_push(&m->moved, w);
	else if (enqueue_or_take(m, w))
		wq_wake(w, 0);
}

/* Out of line, so that a signal with no waiter pushes nothing. */
static __attribute__((noinline)) int signal_one(kr_cond *c)
{
	kr__spin_lock(&c->lock);
	int err = c->dead ? EINVAL : 0;
	struct kr_waiter *w = err ? NULL : wq_pop(&c->q);
	if (w)
		count_waiters(c, -1);
	kr__spin_unlock(&c->lock);
	if (w)
		move_to_mutex(w);
	return err;
}

int kr_cond_signal(kr_cond *c)
{
	int err = no_waiter(c);
	return err >= 0 ? err : signal_one(c);
}

int kr_cond_broadcast(kr_cond *c)
{
	int err = no_waiter(c);
	if (err >= 0)
		return err;
	kr__spin_lock(&c->lock);
	err = c->dead ? EINVAL : 0;
	kr_waitq moved = err ? (kr_waitq){0} : wq_take_all(&c->q);
	if (!err)
		__atomic_store_n(&c->nwait, 0, __ATOMIC_RELAXED); /* c->q is empty */
	kr__spin_unlock(&c->lock);
	for (struct kr_waiter *w; (w = wq_pop(&moved));)
		move_to_mutex(w);
	return err;
}
