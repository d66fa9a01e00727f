/*
 * karui L1 — portable context switch and spin locks (seed 000 level 1, seed 002).
 *
 * A context is one word: the stack pointer of a suspended flow of control.
 * Everything else a switch must keep (the callee-saved registers, the FP
 * control state and the resume address) is pushed onto that flow's own stack
 * by kr_ctx_switch, so a switch touches only the two stacks and two words.
 * Caller-saved registers are dead across any call by the ABI and are never
 * saved: this is seed 002's "save only what must be saved".
 *
 * No instruction used is privileged and no system call is made: a switch is
 * an ordinary function call into a few instructions of assembly
 * (src/arch/<arch>/switch.S, which draws the frame).
 *
 * kr_ctx_switch(from, to, arg) suspends the caller into *from and resumes *to.
 * The resumed side sees kr_ctx_switch return `arg`, or, if *to was made by
 * kr_ctx_make and never ran, its entry function is called with `arg`.  A value
 * travelling with the switch lets the resumed side finish work the suspended
 * side could not do on its own stack (free that stack, publish that it is
 * now off-CPU).  A context ends when its entry function returns
 * {to, arg}: `to` is resumed with `arg`, as by kr_ctx_jump.  Ending that
 * way (rather than calling kr_ctx_jump from deep inside) keeps the CPU's
 * return predictions balanced, which the switch relies on for speed.
 */
#ifndef KARUI_CTX_H
#define KARUI_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "karui/vp.h" /* kr_cpu_relax */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_ctx {
	void *sp; /* saved stack pointer; the frame lies at sp */
} kr_ctx;

/* What an entry function returns: the context to resume and its arg. */
typedef struct kr_ctx_transfer {
	kr_ctx *to;
	void *arg;
} kr_ctx_transfer;

typedef kr_ctx_transfer (*kr_ctx_entry)(void *arg);

/* Lay out a fresh context at the top of [stack_lo, stack_lo + size) that,
 * on its first resumption, calls entry(arg).  Returns 0, or EINVAL for a
 * NULL argument or a stack smaller than KR_CTX_STACK_MIN. */
int kr_ctx_make(kr_ctx *ctx, void *stack_lo, size_t size, kr_ctx_entry entry);

/* Smallest stack kr_ctx_make accepts: the frame and an ABI red zone. */
#define KR_CTX_STACK_MIN 256u

/* Suspend the caller into *from, resume *to; returns the arg of whoever
 * resumes the caller later.  No argument checking: this is the fast path. */
void *kr_ctx_switch(kr_ctx *from, kr_ctx *to, void *arg);

/* Resume *to and abandon the caller (nothing is saved).  For a flow that has
 * finished: it can hand its own stack to the resumed side through arg. */
__attribute__((noreturn)) void kr_ctx_jump(kr_ctx *to, void *arg);

/* ---- spin locks: test-and-test-and-set with pause / yield back-off ----
 * For an application's own scheduler or queues (level 0 and 1).  karui's
 * own code uses an inline copy of the same lock (src/arch/spin.h). */

typedef struct kr_spin {
	uint32_t v; /* 0 free, 1 held; only touched through __atomic builtins */
} kr_spin;

#define KR_SPIN_INIT {0}

/* Take the lock, spinning (then yielding the processor) while it is held. */
void kr_spin_lock(kr_spin *l);
/* 0 if the lock was free and is now the caller's; EBUSY if it is held;
 * EINVAL: NULL. */
int kr_spin_trylock(kr_spin *l);
void kr_spin_unlock(kr_spin *l);

#ifdef __cplusplus
}
#endif
#endif
