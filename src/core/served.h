/*
 * karui L2 — served waits: the inline steps of the protocol of served.c
 * (see there), for the primitives of L3 that wait this way (src/sync/
 * wait.h: channels).  A served wait is one whose sleeper is made ready by
 * the server that took its waiter out of the object's queue, and by
 * nobody else unless a timer or a cancel ends it first; neither the
 * sleeper nor the server touches the permit.
 *
 * The sleeper S, its object's lock held:
 *   g = served_begin(self)    0: a cancel is pending; else queue the
 *                             waiter with g, unlock, kr__served_block /
 *                             _until.  Resumed: the waiter DONE -> served,
 *                             nothing more to do; else lock, leave the
 *                             queue (if still in it), unlock,
 *                             kr__served_end(g, why).
 * The server V, the object's lock held, taking S's waiter of wait g:
 *   served_claim(h, g, f)     1: it is V's; 0: a timer or cancel ended
 *                             the wait (skip the waiter, leave it to S).
 *   then, lock released, the hand-over done: kr__serve(h).
 */
#ifndef KARUI_CORE_SERVED_H
#define KARUI_CORE_SERVED_H

#include "permit.h"

/* How the sleepers' and servers' stores are ordered before their loads
 * (settled by kr_init): 0, a compiler barrier, the third parties making
 * up for it with membarrier(); 1, a fence (no membarrier to be had). */
extern uint32_t kr__served_fenced __attribute__((visibility("hidden")));

static inline void served_order(void)
{
	if (__builtin_expect(__atomic_load_n(&kr__served_fenced, __ATOMIC_RELAXED), 0))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* S begins a served wait: its generation g, the next odd number, or 0 if
 * a cancel is pending (then kr__served_abort, after unlocking).  Wakeups
 * posted to the one VP go first, as before any call that reads the
 * permit. */
static inline uint32_t served_begin(kr_mp *self)
{
	if (permit_posted(permit_mode()))
		kr__permits_apply();
	uint32_t g = (__atomic_load_n(&self->wgen, __ATOMIC_RELAXED) + 2) | 1;
	__atomic_store_n(&self->wgen, g, __ATOMIC_RELEASE);
	served_order();
	return permit_served_look(self) & WS_CANCEL ? 0 : g;
}

int kr__served_claim_slow(kr_mp *mp);

/* V takes the waiter of wait g of h: 1, it is V's to serve; 0, a timer or
 * a cancel ended that wait first.  `foreign`: V runs on a thread that is
 * no VP, and fences (on the one VP, T does not call membarrier). */
static inline int served_claim(kr_mp *h, uint32_t g, int foreign)
{
	kr_mp *mp = kr__rec(h);
	__atomic_store_n(&mp->served, g, __ATOMIC_RELAXED);
	if (foreign)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		served_order();
	return __builtin_expect(!(permit_served_look(mp) & (WS_THIRD | WS_INTR)), 1) ||
	       kr__served_claim_slow(mp);
}

/* S, its waiter queued and the lock released: block until made ready.
 * 0; with a deadline, ENOMEM or ETIMEDOUT when S ended the wait itself
 * without blocking (no room for the timer), else 0. */
int kr__served_block(void);
int kr__served_block_until(uint32_t g, uint64_t deadline);
/* S, a third party having ended wait g and S out of the queue: the wait
 * is over; ECANCELED if a cancel is pending (taken), else `why`. */
int kr__served_end(uint32_t g, int why);
/* S, served_begin having found a cancel, the lock released: ECANCELED. */
int kr__served_abort(void);
/* V, the hand-over done and the lock released: S is made ready.  0, or
 * EPERM off a VP when karui does not run. */
int kr__serve(kr_mp *h);

#endif
