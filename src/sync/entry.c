/*
 * karui L3 — Ada-style rendezvous: entries, calls, accept and reply.
 *
 * A caller queues its waiter (with its message) on the entry, or, if an
 * acceptor waits, hands the waiter to it directly.  The accepted waiter is
 * MOVED: out of every queue, owned by the acceptor, which works on the
 * message in place and ends the rendezvous with kr_entry_reply (the
 * waiter's DONE and wakeup).  A timed call can give up only while it is
 * still queued; once accepted it waits for the reply.
 *
 * Accepted calls.  The waiter lives on the caller's stack, which the caller
 * reuses as soon as the reply has woken it, so a kr_call must never be
 * followed once answered.  The acceptor therefore keeps the calls it has
 * accepted and not answered in a list of its own: the waiters, linked
 * through `next`, the head in the acceptor's record (L2's `upper` word,
 * whose top 16 bits count its accepts).  A kr_call is the waiter's address
 * with that count in its top bits, which the waiter keeps too (`done`).
 * kr_entry_reply and kr_call_msg find the call in the caller's own list
 * before they touch it, so an answered call, or one the caller did not
 * accept, is refused without a read of anyone's stack; and a later call
 * whose waiter lands at the same address carries another count.  Only the
 * acceptor touches its list.  Rejected: a record of the call off the
 * caller's stack (an allocation per call), or in the entry (the reply is
 * not told the entry).
 */
#include "wait.h"

/* Keep c, which the running microprocess has just accepted; its kr_call.
 * The list word: head | count << KR_GEN_SHIFT. */
static kr_call *keep(struct kr_waiter *c)
{
	uintptr_t *l = &kr__cur()->upper;
	uintptr_t count = (*l & ~KR_ADDR_MASK) + ((uintptr_t)1 << KR_GEN_SHIFT);
	c->next = (struct kr_waiter *)(*l & KR_ADDR_MASK);
	c->done = count;
	*l = count | (uintptr_t)c;
	return (kr_call *)(count | (uintptr_t)c);
}

/* `call`'s waiter if `self` accepted it and has not answered it (taken
 * out of its list if `take`), else NULL.  A waiter's address is in the
 * list once at most, so it is found by address and then checked. */
static struct kr_waiter *accepted(kr_mp *self, kr_call *call, int take)
{
	uintptr_t *l = &self->upper, count = (uintptr_t)call & ~KR_ADDR_MASK;
	struct kr_waiter *c = (struct kr_waiter *)((uintptr_t)call & KR_ADDR_MASK), *prev = NULL;
	struct kr_waiter *x = (struct kr_waiter *)(*l & KR_ADDR_MASK);
	for (; x && x != c; prev = x, x = x->next)
		;
	if (!x || x->done != count)
		return NULL;
	if (take) {
		if (prev)
			prev->next = x->next;
		else
			*l = (*l & ~KR_ADDR_MASK) | (uintptr_t)x->next;
	}
	return x;
}

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
	err = wq_wait(&w, &e->lock, deadline, 1, KR_WHY_ENTRY);
	if (err && w.state == W_WAITING)
		return give_up(e, &e->callers, &w, err);
	return err;
}

/* A call always blocks: through KR_BLOCKING (arch/blocking.h). */
int kr_entry_call_until(kr_entry *e, void *msg, uint64_t deadline)
{
	return KR_BLOCKING(entry_call, e, msg, deadline, 0, 0);
}

int kr_entry_call(kr_entry *e, void *msg) { return kr_entry_call_until(e, msg, KR_FOREVER); }

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
		*call = keep(c);
		return 0;
	}
	struct kr_waiter w = {.mp = self};
	wq_push(&e->acceptors, &w);
	kr__spin_unlock(&e->lock);
	err = wq_wait(&w, &e->lock, deadline, 1, KR_WHY_ENTRY);
	if (err && w.state == W_WAITING)
		return give_up(e, &e->acceptors, &w, err);
	if (!err)
		*call = keep(w.aux);
	return err;
}

/* An accept blocks unless a call waits: through KR_BLOCKING. */
int kr_entry_accept_until(kr_entry *e, kr_call **call, uint64_t deadline)
{
	return KR_BLOCKING(entry_accept, e, call, deadline, 0, 0);
}

int kr_entry_accept(kr_entry *e, kr_call **call)
{
	return kr_entry_accept_until(e, call, KR_FOREVER);
}

void *kr_call_msg(kr_call *call)
{
	kr_mp *self = kr__cur();
	struct kr_waiter *c = self ? accepted(self, call, 0) : NULL;
	return c ? c->buf : NULL;
}

int kr_entry_reply(kr_call *call, int status)
{
	kr_mp *self = kr__cur();
	if (!call)
		return EINVAL;
	if (!self)
		return EPERM;
	struct kr_waiter *c = accepted(self, call, 1);
	return c ? wq_wake(c, status) : EINVAL;
}
