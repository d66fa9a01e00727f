/*
 * karui L2 — served waits: a blocking hand-over that touches no permit,
 * for the primitives of L3 whose waiters only a server, a timer or a
 * cancel end (channels: src/sync/wait.h; the inline steps are in
 * served.h).  Step 1 of docs/notes/2026-11-25-locked-instructions.md, as
 * changed by docs/notes/2026-11-27-channel-served-waits.md.
 *
 * A permit wait (kr_mp_park_cancellable_until) costs a hand-over two RMWs
 * on the permit: the sleeper's announcement and the server's claim, each
 * deciding against a third party (a timer, a cancel, an unpark).  But the
 * server owns the waiter already: it took it out of the object's queue
 * under the object's lock, which nobody else can.  What is left to decide
 * is the server against the rare third parties, and that is made
 * asymmetric: the sleeper's and the server's sides are plain stores and
 * loads, and the third party pays with membarrier().
 *
 * The words, in the record of the sleeper S:
 *   wgen     S's alone: the generation g of its latest served wait, the
 *            next odd number at each begin, which its waiter carries for
 *            the server; made even (g + 1) when a wait ends without being
 *            served.  So S is in wait g while wgen = g is odd and served
 *            is not g: a served wait ends with no store.
 *   served   the servers': g, stored by the server V that takes S's waiter
 *            of wait g, under the object's lock.  S resets it to 0 after a
 *            wait that was not served, so that it only ever holds the g of
 *            the wait before, and no wrap-around of wgen can match it.
 *   WS_THIRD, WS_INTR  two bits of wstate (permit.h): a third party T (a
 *            cancel, the wait's timer) holds WS_THIRD while it decides and
 *            sets WS_INTR when it ends the wait; S drops WS_INTR after it.
 *            T changes them only with CASes that check the life's
 *            generation, so a stale handle writes nothing.
 *
 * S, holding the object's lock: wgen = g; compiler barrier; a pending
 * cancel ends the wait at once (kr__served_abort).  Else S queues its
 * waiter, unlocks and blocks, leaving wstate as it is.  Resumed with its
 * waiter DONE, V served it, and that is all.  Else T ended it: S takes the
 * lock, leaves the queue (or finds its waiter LEFT by a V that saw
 * WS_INTR), unlocks, then wgen = g + 1, served = 0, and, once no T holds
 * WS_THIRD, drops WS_INTR and takes a pending cancel (ECANCELED, else
 * ETIMEDOUT) in one CAS (kr__served_end).
 *
 * V, taking the waiter of wait g under the lock: served = g; compiler
 * barrier; wstate read (acquire), waiting while WS_THIRD is held.
 * WS_INTR: T ended the wait first, the waiter is LEFT and V serves the
 * next one.  Else the waiter is V's: from now on only V makes S ready,
 * however late its hand-over completes; it stores DONE (release) and makes
 * S ready, with no RMW and no further look.
 *
 * T: WS_THIRD taken (a CAS in h's generation, waiting while another T has
 * it); membarrier(); wgen (acquire), wstate and served read.  T ends the
 * wait (WS_INTR set and WS_THIRD dropped with a release CAS, then S made
 * ready) if h's life goes on, wgen is odd, served is not g, WS_INTR is
 * clear, and the wait is T's: a timer's is its own g; a cancel's is any,
 * while the cancel's bit is still pending.  Else T only drops WS_THIRD.
 * A cancel sets its bit with the permit's RMW before (kr_mp_cancel): a
 * wait it does not end (served, or not begun yet) leaves it pending for
 * the next one, and a wait that took it (S's begin saw it, or a permit
 * wait did) was the one that cancel ended.
 *
 * Races, and what closes them:
 *  - S begins while T cancels: S stores wgen, then loads the cancel bit;
 *    T stores the bit, calls membarrier, then loads wgen.  Either S sees
 *    the cancel or T sees the wait (asymmetric Dekker: each thread that
 *    runs passes a full barrier inside membarrier, and one that does not
 *    run has passed a context switch).
 *  - V takes the waiter while T decides: V stores served, then loads
 *    wstate; T takes WS_THIRD, calls membarrier, then loads served.  If V
 *    read no WS_THIRD, T sees served = g and backs off; if it did, V waits
 *    for T's decision.  Exactly one of them makes S ready.
 *  - S ends a wait while a T decides (S left at once on a cancel, or
 *    another T ended the wait): S stores wgen = g + 1 before the CAS that
 *    drops WS_INTR, which waits while WS_THIRD is held, so a T that takes
 *    WS_THIRD after it reads an even wgen.  S at its begin, having seen the
 *    cancel, finds WS_INTR if a T ended the wait meanwhile: it blocks once,
 *    to use up that ready.
 *  - A cancel slow to take WS_THIRD while S, having seen its bit at a
 *    begin and taken it, has begun the next wait: the bit is gone, so the
 *    cancel ends no other wait (the plan of the 2026-11-25 note read only
 *    wgen here, and one cancel ended two waits, the second one with
 *    ETIMEDOUT; the storms of tests/test_onevp.c found it).
 *  - A late T: a timer of a wait that is over reads another wgen (S waits
 *    for its timer to fire or go before it returns); a cancel of a served
 *    wait reads served = g, and its bit stays pending.
 *  - V never touches S's record once S has ended: it writes served and
 *    reads wstate while the waiter is queued or held by it, and S ends
 *    only after V has made it ready or after S has taken the lock.
 *  - S made ready before it has switched away: on_cpu (rt.h), as for a
 *    permit.
 *  - kr_mp_unpark during a served wait sets the permit, which stays for
 *    the next kr_mp_park; kr_mp_switch_to and kr_mp_park_and_switch find S
 *    neither asleep nor queued (EBUSY).
 * tests/model_served_wait.py checks them exhaustively on x86-TSO.
 *
 * One VP (kr__solo, permit.h).  T runs on the VP then (a cancel from
 * another thread is posted to it), as do the sleepers and the servers
 * that are microprocesses, each before or after the others; only a
 * server on a thread that is no VP (a try* call) runs at the same time,
 * and it fences (served_claim's `foreign`).  So T fences too, with no
 * membarrier: a cancel posted to the VP costs it no system call (with
 * one, a thread posting cancels faster than the VP could make the calls
 * starved the VP: tests/test_onevp.c's storm).  T's stores to wstate are
 * the VP's plain stores, as every permit's are then.
 *
 * Without membarrier (Linux < 4.14, or a seccomp filter that refuses its
 * registration at kr_init) the compiler barriers are fences, which cost
 * what the two RMWs did.  A filter installed after kr_init that refuses
 * it leaves nothing safe to do: T aborts the process and says why.
 *
 * Cost: S's common path is a load, a store and a load of its own record,
 * V's a store and a load inside the critical section it holds anyway, so a
 * hand-over's locked instructions are the object's lock and the ready
 * queue's.  T pays a CAS or two and a membarrier (the kernel's interrupt
 * to every CPU that runs a thread of the process) per cancel of a
 * microprocess that is not parked, and per served wait whose timer fires.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt.h"
#include "served.h"

uint32_t kr__served_fenced;

static long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

void kr__served_start(void)
{
	int ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
	__atomic_store_n(&kr__served_fenced, !ok, __ATOMIC_RELAXED);
}

/* T's side of the two Dekker pairs.  On the one VP (`mode`) T runs there,
 * after or before its sleepers and the servers that run there, and the
 * servers that run on other threads fence (served_claim): a fence will
 * do, and a cancel posted to the VP costs it no system call. */
static void third_order(uint32_t mode)
{
	if (!mode && !__atomic_load_n(&kr__served_fenced, __ATOMIC_RELAXED)) {
		if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
			return;
		static const char msg[] = "karui: membarrier() refused after kr_init registered "
					  "it; served waits cannot be ordered\n";
		if (write(2, msg, sizeof msg - 1) < 0) {
			/* aborting anyway */
		}
		abort();
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Waiting for a third party's decision: a few instructions and a system
 * call, unless its thread lost its CPU. */
static void relax(unsigned *n)
{
	if (++*n > 64)
		sched_yield();
	else
		kr_cpu_relax();
}

static inline uint32_t mode_now(void) { return kr__solo_on() ? SOLO_ON : 0; }

/* ---------------- T ---------------- */

/* T decides on the served wait of h: wait `want` (a timer's, or S's own
 * g), or, for a cancel (want 0), whichever one goes on while the cancel's
 * bit is still pending.  1 if it ended it, and the caller makes S ready
 * unless the caller is S itself. */
static int third(kr_mp *h, uint32_t want)
{
	kr_mp *mp = kr__rec(h);
	uint32_t mode = mode_now();
	unsigned n = 0;
	int r;
	while ((r = permit_third_try(h, mode)) == 0)
		relax(&n);
	if (r < 0)
		return 0;
	third_order(mode);
	uint32_t g = __atomic_load_n(&mp->wgen, __ATOMIC_ACQUIRE);
	uint32_t s = permit_served_look(mp);
	int end = !permit_stale(h, s) && (g & 1) && (want ? g == want : !!(s & WS_CANCEL)) &&
		  !(s & WS_INTR) && __atomic_load_n(&mp->served, __ATOMIC_RELAXED) != g;
	permit_third_give(h, end, mode);
	return end;
}

/* A cancel of h (the permit's RMW made, and h not asleep in a park). */
void kr__served_third(struct kr_worker *w, kr_mp *h)
{
	if (third(h, 0))
		kr__ready_slow(w, kr__rec(h));
}

/* The timer of a served wait fired (timer.c).  The node lives until
 * FIRED: S waits for it (kr__timer_cancel) before its wait ends. */
void kr__served_fire(struct kr_timer *t)
{
	kr_mp *mp = t->mp;
	int won = third(kr__handle(mp), t->served);
	t->won = won;
	__atomic_store_n(&t->state, KR_TIMER_FIRED, __ATOMIC_RELEASE);
	if (won)
		seam_ready(W(), mp);
}

/* ---------------- S ---------------- */

int kr__served_block(void)
{
	struct kr_worker *w = W();
	return block(w, w->cur, KR_WHY_CHAN);
}

/* S ends its own wait as a third party would, without a ready: `why` if
 * it did; else a server has the waiter, or a cancel ended the wait, and
 * S blocks once for the ready that either owes it (0). */
static __attribute__((noinline)) int self_end(struct kr_worker *w, kr_mp *self, uint32_t g,
					       int why)
{
	if (third(kr__handle(self), g))
		return why;
	block(w, self, KR_WHY_CHAN);
	return 0;
}

int kr__served_block_until(uint32_t g, uint64_t deadline)
{
	struct kr_worker *w = W();
	kr_mp *self = w->cur;
	struct kr_timer t = {.when = deadline, .mp = self, .served = g};
	if (kr__timer_arm(&w->timers, &t))
		return self_end(w, self, g, ENOMEM);
	block(w, self, KR_WHY_CHAN);
	kr__timer_cancel(&t);
	return 0;
}

/* WS_INTR dropped, a pending cancel taken: what they were. */
static int served_clear(kr_mp *self)
{
	unsigned n = 0;
	int b;
	while ((b = permit_served_end(self, mode_now())) < 0)
		relax(&n);
	return b;
}

int kr__served_end(uint32_t g, int why)
{
	kr_mp *self = kr__cur();
	__atomic_store_n(&self->wgen, g + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&self->served, 0, __ATOMIC_RELAXED);
	return served_clear(self) & WS_CANCEL ? ECANCELED : why;
}

int kr__served_abort(void)
{
	struct kr_worker *w = W();
	kr_mp *self = w->cur;
	uint32_t g = __atomic_load_n(&self->wgen, __ATOMIC_RELAXED);
	__atomic_store_n(&self->wgen, g + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&self->served, 0, __ATOMIC_RELAXED);
	if (served_clear(self) & WS_INTR)
		block(w, self, KR_WHY_CHAN);
	return ECANCELED;
}

/* ---------------- V ---------------- */

int kr__served_claim_slow(kr_mp *mp)
{
	unsigned n = 0;
	uint32_t s;
	while ((s = permit_served_look(mp)) & WS_THIRD)
		relax(&n);
	return !(s & WS_INTR);
}

static __attribute__((noinline)) int serve_foreign(kr_mp *mp)
{
	if (!__atomic_load_n(&G.running, __ATOMIC_ACQUIRE))
		return EPERM;
	seam_ready(NULL, mp);
	return 0;
}

int kr__serve(kr_mp *h)
{
	struct kr_worker *w = W();
	if (__builtin_expect(!w, 0))
		return serve_foreign(kr__rec(h));
	return kr__ready_tail(w, kr__rec(h));
}
