/*
 * karui L3 — barriers.
 *
 * The last of `count` arrivals takes the whole queue out under the lock,
 * resets the round and wakes them all after unlocking; its *serial is 1,
 * the others' 0.  A new round can start while the last
 * one's waiters are still waking: each waiter waits on its own node.
 */
#include "wait.h"

int kr_barrier_init(kr_barrier *b, unsigned count)
{
	if (!b || count == 0)
		return EINVAL;
	*b = (kr_barrier){.count = count};
	return 0;
}

int kr_barrier_destroy(kr_barrier *b)
{
	if (!b)
		return EINVAL;
	kr__spin_lock(&b->lock);
	int err = b->dead || !b->count ? EINVAL : b->arrived ? EBUSY : 0;
	if (!err)
		b->dead = 1;
	kr__spin_unlock(&b->lock);
	return err;
}

int kr_barrier_wait(kr_barrier *b, int *serial)
{
	kr_mp *self = kr__self();
	if (serial)
		*serial = 0;
	if (!b)
		return EINVAL;
	if (!self)
		return EPERM;
	kr__spin_lock(&b->lock);
	if (b->dead || !b->count) {
		kr__spin_unlock(&b->lock);
		return EINVAL;
	}
	if (++b->arrived == b->count) {
		kr_waitq all = wq_take_all(&b->q);
		b->arrived = 0;
		kr__spin_unlock(&b->lock);
		wq_wake_all(&all, 0);
		if (serial)
			*serial = 1;
		return 0;
	}
	struct kr_waiter w = {.mp = self};
	wq_push(&b->q, &w);
	kr__spin_unlock(&b->lock);
	return wq_wait(&w, &b->lock, KR_FOREVER, 0, KR_WHY_BARRIER);
}
