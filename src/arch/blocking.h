/*
 * karui L1 — the return from a call that blocked.
 *
 * A microprocess that blocks is resumed by `ret` (switch.S), and the
 * returns after that follow the return-stack predictor, which still holds
 * the calls of the microprocess that blocked last.  Down to the primitive
 * both came the same way, but the last return, into the caller's own code,
 * goes where that other microprocess called from: a misprediction on every
 * switch between two microprocesses that block in different functions
 * (a producer and a consumer, a ping-pong).
 *
 * So the part of a call that may block runs through kr__blocking_call:
 * the public function tail-calls it, it calls that part (every
 * microprocess's return from that part lands on the same address, so that
 * return is predicted), and it returns to the public function's caller
 * with an indirect jump, which the branch predictor gets right from the
 * path that led to it.  The prediction the jump leaves unused is a stale
 * entry deep in the predictor's ring; once the call really switched, the
 * entries below the primitive's were the other microprocess's anyway.  If
 * it did not (a channel with room in its ring, a stream with bytes, a wait
 * that a wakeup beat), the predictor holds this microprocess's own calls,
 * and a jump would leave them one out of step for every return after: so
 * the core's switch (kr__ctx_switch, not the public kr_ctx_switch) counts,
 * per thread, the contexts it resumes (kr__resumes),
 * and kr__blocking_call returns with `ret` when the count did not move.
 * (After a move to another VP it reads that thread's count; an equal count
 * there only costs a misprediction.)
 *
 * One jump for all blocked calls has as many targets as there are call
 * sites that block, and two microprocesses that hand a VP back and forth
 * from different sites make it alternate between two.  The indirect-branch
 * predictor follows that from the path history, but it was seen to lose it
 * for long stretches (a channel ping-pong, whose microprocesses block in
 * kr_chan_send from two functions, slowed while the same round trip from
 * one function did not).  So on x86-64 the jump is made from one of
 * four sites chosen by two bits of the target (switch.S): two call sites
 * fall on different jumps three times in four, and each jump then has one
 * target, which needs no history to be predicted (the measurements are
 * in docs/notes/2026-11-25-measurements.md).  aarch64 keeps one jump
 * (there is no aarch64 machine to measure on).
 *
 * KR_BLOCKING(fn, a0, ... a4) is fn(a0, ..., a4) through kr__blocking_call:
 * fn takes up to five integer or pointer arguments and returns int.  Use it
 * as `return KR_BLOCKING(...)`, so that it is a tail call.
 */
#ifndef KARUI_ARCH_BLOCKING_H
#define KARUI_ARCH_BLOCKING_H

#include <stdint.h>

extern __thread unsigned long kr__resumes __attribute__((tls_model("initial-exec")));

int kr__blocking_call(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4,
		      const void *fn);

#define KR_BLOCKING(fn, a0, a1, a2, a3, a4)                                              \
	kr__blocking_call((uintptr_t)(a0), (uintptr_t)(a1), (uintptr_t)(a2), (uintptr_t)(a3), \
			  (uintptr_t)(a4), (const void *)(fn))

#endif
