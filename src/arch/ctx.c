/*
 * karui L1 — making a fresh context and the slow path of the spin lock.
 *
 * kr_ctx_make writes, at the 16-byte-aligned top of a stack, the frame that
 * kr_ctx_switch would have saved (src/arch/frame.h), with the resume address
 * pointing at the architecture's trampoline and the entry function in the
 * register the trampoline calls through.  The FP control state of a fresh
 * context is the ABI's default, not the creator's: a microprocess must not
 * inherit a rounding mode that its creator happened to set.
 *
 * The spin lock is test-and-test-and-set: waiters read (shared cache line,
 * no bus traffic) and only try the exchange once the lock looks free, with
 * an exponential pause back-off capped at KR_SPIN_PAUSE_MAX, and after
 * KR_SPIN_YIELD_AFTER rounds give their processor away (sched_yield), since
 * the holder may be a preempted kernel thread (seed 000's vp_switch case).
 * The public calls count the locks the thread holds (kr__spins_held), so
 * that a microprocess holding one is never stopped in the middle by a
 * processor allocator (core/alloc.h) while others spin on it.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "karui/ctx.h"
#include "blocking.h"
#include "ctx_init.h"
#include "spin.h"

__thread unsigned long kr__resumes __attribute__((tls_model("initial-exec")));

int kr_ctx_make(kr_ctx *ctx, void *stack_lo, size_t size, kr_ctx_entry entry)
{
	if (!ctx || !stack_lo || !entry || size < KR_CTX_STACK_MIN)
		return EINVAL;
	uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
	memset((void *)(top - KR_FRAME_SIZE), 0, KR_FRAME_SIZE);
	kr__ctx_init(ctx, stack_lo, size, entry, kr__ctx_trampoline);
	return 0;
}

enum { KR_SPIN_PAUSE_MAX = 64, KR_SPIN_YIELD_AFTER = 16 };

void kr__spin_lock_slow(kr_spin *l)
{
	unsigned pause = 1, rounds = 0;
	for (;;) {
		while (__atomic_load_n(&l->v, __ATOMIC_RELAXED) != 0) {
			if (rounds >= KR_SPIN_YIELD_AFTER) {
				sched_yield();
				continue;
			}
			for (unsigned i = 0; i < pause; i++)
				kr_cpu_relax();
			if (pause < KR_SPIN_PAUSE_MAX)
				pause <<= 1;
			else
				rounds++;
		}
		if (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0)
			return;
	}
}

__thread unsigned kr__spins_held __attribute__((tls_model("initial-exec")));

void kr_spin_lock(kr_spin *l)
{
	kr__spin_lock(l);
	kr__spins_held++;
}

int kr_spin_trylock(kr_spin *l)
{
	if (!l)
		return EINVAL;
	if (!kr__spin_trylock(l))
		return EBUSY;
	kr__spins_held++;
	return 0;
}

void kr_spin_unlock(kr_spin *l)
{
	kr__spins_held--;
	kr__spin_unlock(l);
}
