/*
 * karui L1 — the spin lock, inline, for karui's own code.
 *
 * The public kr_spin_lock / _trylock / _unlock (karui/ctx.h) are calls
 * into ctx.c; inside the library the same lock is taken inline here, with
 * only the contended path out of line.  Test-and-test-and-set: the fast
 * path is one exchange, the slow path (ctx.c) waits by reading.
 */
#ifndef KARUI_ARCH_SPIN_H
#define KARUI_ARCH_SPIN_H

#include "karui/ctx.h"

void kr__spin_lock_slow(kr_spin *l);
/* kr_spin locks the thread holds through the public calls (ctx.c) */
extern __thread unsigned kr__spins_held __attribute__((tls_model("initial-exec")));

static inline int kr__spin_trylock(kr_spin *l)
{
	return __atomic_load_n(&l->v, __ATOMIC_RELAXED) == 0 &&
	       __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}

static inline void kr__spin_lock(kr_spin *l)
{
	if (__builtin_expect(__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) != 0, 0))
		kr__spin_lock_slow(l);
}

static inline void kr__spin_unlock(kr_spin *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}

#endif
