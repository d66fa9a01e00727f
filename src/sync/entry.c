/*
 * karui L3 — Ada-style rendezvous: entries, calls, accept and reply.
 *
 * A caller queues its waiter (with its message) on the entry, or, if an
 * acceptor waits, hands the waiter to it directly.  The accepted waiter is
 * MOVED: out of every queue, owned by the acceptor, which works on the
 * message in place and ends the rendezvous with kr_entry_reply (the
 * waiter's DONE and wakeup).  A timed call can give up only while it is
 * still queued; once accepted it waits for the reply.
 */
#include "wait.h"

int kr_entry_init(kr_entry *e)
{
	if (!e)
		return EINVAL;
	*e = (kr_entry){0};
	return 0;
}

static int enter(kr_entry *e)
{
	if (!e)
		return EINVAL;
	kr__spin_lock(&e->lock);
	if (e->dead) {
		kr__spin_unlock(&e->lock);
		return EINVAL;
	}
	return 0;
}

int kr_entry_destroy(kr_entry *e)
{
	int err = enter(e);
	if (err)
		return err;
	err = e->callers.head || e->acceptors.head ? EBUSY : 0;
	if (!err)
		e->dead = 1;
	kr__spin_unlock(&e->lock);
	return err;
}

/* Leave the queue after a deadline (e->lock held by wq_wait). */
static int give_up(kr_entry *e, kr_waitq *q, struct kr_waiter *w, int err)
{
	wq_remove(q, w);
	kr__spin_unlock(&e->lock);
	return err;
}

static __attribute__((noinline)) int entry_call(kr_entry *e, void *msg, uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (!self)
		return e ? EPERM : EINVAL;
	int err = enter(e);
	if (err)
		return err;
	struct kr_waiter w = {.mp = self, .buf = msg};
	struct kr_waiter *a = wq_pop(&e->acceptors);
	if (a) {
		w.state = W_MOVED;
		a->aux = &w;
		kr__spin_unlock(&e->lock);
		wq_wake(a, 0);
	} else {
		wq_push(&e->callers, &w);
		kr__spin_unlock(&e->lock);
	}
	err = wq_wait(&w, &e->lock, deadline, 1);
	if (err && w.state == W_WAITING)
		return give_up(e, &e->callers, &w, err);
	return err;
}

/* A call always blocks: through KR_BLOCKING (arch/blocking.h). */
int kr_entry_timedcall(kr_entry *e, void *msg, uint64_t deadline)
{
	return KR_BLOCKING(entry_call, e, msg, deadline, 0, 0);
}

int kr_entry_call(kr_entry *e, void *msg) { return kr_entry_timedcall(e, msg, KR_FOREVER); }

static __attribute__((noinline)) int entry_accept(kr_entry *e, kr_call **call, uint64_t deadline)
{
	kr_mp *self = kr__self();
	if (!call)
		return EINVAL;
	if (!self)
		return e ? EPERM : EINVAL;
	int err = enter(e);
	if (err)
		return err;
	struct kr_waiter *c = wq_pop(&e->callers);
	if (c) {
		kr__spin_unlock(&e->lock);
		*call = (kr_call *)c;
		return 0;
	}
	struct kr_waiter w = {.mp = self};
	wq_push(&e->acceptors, &w);
	kr__spin_unlock(&e->lock);
	err = wq_wait(&w, &e->lock, deadline, 1);
	if (err && w.state == W_WAITING)
		return give_up(e, &e->acceptors, &w, err);
	if (!err)
		*call = (kr_call *)w.aux;
	return err;
}

/* An accept blocks unless a call waits: through KR_BLOCKING. */
int kr_entry_timedaccept(kr_entry *e, kr_call **call, uint64_t deadline)
{
	return KR_BLOCKING(entry_accept, e, call, deadline, 0, 0);
}

int kr_entry_accept(kr_entry *e, kr_call **call)
{
	return kr_entry_timedaccept(e, call, KR_FOREVER);
}

/* A kr_call is the caller's waiter record, under an opaque name. */
static struct kr_waiter *waiter(kr_call *call) { return (struct kr_waiter *)call; }

void *kr_call_msg(kr_call *call) { return call ? waiter(call)->buf : NULL; }

int kr_entry_reply(kr_call *call, int status)
{
	if (!call)
		return EINVAL;
	wq_wake(waiter(call), status);
	return 0;
}
