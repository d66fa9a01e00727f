/*
 * karui L3 — counting semaphores.
 *
 * One spin lock guards the count and the queue.  A post with waiters hands
 * its unit straight to the first one (the count stays 0), so a woken
 * microprocess never finds its unit taken by a newcomer.  kr_sem_post, like
 * the channel's send and receive, has a path with no call but the wakeup;
 * kr_sem_wait takes a unit at hand with no call, and blocks through
 * KR_BLOCKING (arch/blocking.h).
 */
#include "wait.h"

int kr_sem_init(kr_sem *s, long value)
{
	if (!s || value < 0 || value > KR_SEM_MAX)
		return EINVAL;
	*s = (kr_sem){.count = value};
	return 0;
}

int kr_sem_destroy(kr_sem *s)
{
	if (!s)
		return EINVAL;
	kr__spin_lock(&s->lock);
	int err = s->dead ? EINVAL : s->q.head ? EBUSY : 0;
	if (!err)
		s->dead = 1;
	kr__spin_unlock(&s->lock);
	return err;
}

/* The rest of a wait with no unit at hand, s locked and live: block. */
static __attribute__((noinline)) int wait_locked(kr_sem *s, kr_mp *self, uint64_t deadline)
{
	struct kr_waiter w = {.mp = self};
	return wq_block(&s->q, &s->lock, &w, deadline, KR_WHY_SEM);
}

static __attribute__((noinline)) int sem_wait(kr_sem *s, uint64_t deadline, int try)
{
	kr_mp *self = kr__self();
	if (!s)
		return EINVAL;
	if (!self && !try)
		return EPERM;
	kr__spin_lock(&s->lock);
	if (s->dead || s->count > 0 || try) {
		int err = s->dead ? EINVAL : s->count > 0 ? 0 : EAGAIN;
		if (!err)
			s->count--;
		kr__spin_unlock(&s->lock);
		return err;
	}
	return KR_BLOCKING(wait_locked, s, self, deadline, 0, 0);
}

/* Like kr_sem_post: the lock taken with a trylock, and a unit at hand
 * taken with no call; a wait that blocks goes through KR_BLOCKING. */
int kr_sem_wait(kr_sem *s)
{
	kr_mp *self = kr__self();
	if (!s || !self || !kr__spin_trylock(&s->lock))
		return sem_wait(s, KR_FOREVER, 0);
	if (s->dead) {
		kr__spin_unlock(&s->lock);
		return EINVAL;
	}
	if (!s->count)
		return KR_BLOCKING(wait_locked, s, self, KR_FOREVER, 0, 0);
	s->count--;
	kr__spin_unlock(&s->lock);
	return 0;
}

int kr_sem_wait_until(kr_sem *s, uint64_t deadline) { return sem_wait(s, deadline, 0); }
int kr_sem_trywait(kr_sem *s) { return sem_wait(s, 0, 1); }

__attribute__((noinline)) int kr_sem_post_n(kr_sem *s, long n)
{
	if (!s || n < 1 || n > KR_SEM_MAX)
		return EINVAL;
	kr_waitq wake = {0};
	kr__spin_lock(&s->lock);
	int err = s->dead ? EINVAL : 0;
	/* While anyone waits the count is 0, so only a post with no waiters
	 * can overflow it. */
	if (!err && !s->q.head && n > KR_SEM_MAX - s->count)
		err = EOVERFLOW;
	if (!err) {
		long left = n;
		for (struct kr_waiter *w; left > 0 && (w = wq_pop(&s->q)); left--)
			wq_push(&wake, w); /* a unit each, handed over */
		s->count += left;
	}
	kr__spin_unlock(&s->lock);
	wq_wake_all(&wake, 0);
	return err;
}

/* kr_sem_post_n(s, 1) with no call but the wakeup, a tail call, when the
 * lock is free at once. */
int kr_sem_post(kr_sem *s)
{
	if (!s || !kr__spin_trylock(&s->lock))
		return kr_sem_post_n(s, 1);
	if (s->dead) {
		kr__spin_unlock(&s->lock);
		return EINVAL;
	}
	struct kr_waiter *w = wq_pop(&s->q);
	if (!w) {
		int err = s->count < KR_SEM_MAX ? 0 : EOVERFLOW;
		if (!err)
			s->count++;
		kr__spin_unlock(&s->lock);
		return err;
	}
	kr__spin_unlock(&s->lock);
	return wq_wake(w, 0);
}

int kr_sem_getvalue(kr_sem *s, long *value)
{
	if (!s || !value)
		return EINVAL;
	kr__spin_lock(&s->lock);
	int err = s->dead ? EINVAL : 0;
	*value = s->count;
	kr__spin_unlock(&s->lock);
	return err;
}
