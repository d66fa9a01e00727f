/*
 * seed002.fig3/fig4's loop, shared by every system (seed 002 §5.1): a flow
 * stands at call-nesting depth L, calls subroutines until the nesting
 * reaches C, switches there, and once resumed returns until it is back at
 * L; again and again.  The switch is whatever the system's `sw` does; with
 * a `sw` that does nothing (the call-only peer) the loop measures the calls
 * alone, which the paper reported separately.
 *
 * Each level is a real call with a frame: kb_nest_down is never inlined or
 * cloned, and the empty asm after the recursive call keeps it out of tail
 * position, so a compiler cannot turn the recursion into a loop or a jump.
 */
#include <errno.h>
#include <stddef.h>

#include "peers.h"

/* the subroutine at depth d */
__attribute__((noinline, noclone)) static void down(long d, long c, kb_sw sw, void *arg)
{
	volatile long frame = d; /* a frame per level, as a subroutine has */
	if (d < c)
		down(d + 1, c, sw, arg);
	else
		sw(arg);
	__asm__ volatile("" : : "r"(frame) : "memory");
}

__attribute__((noinline, noclone)) static void at_depth(long d, long l, long c, long rounds,
							 kb_sw sw, void *arg)
{
	volatile long frame = d;
	if (d < l) {
		at_depth(d + 1, l, c, rounds, sw, arg);
	} else {
		for (long i = 0; i < rounds; i++) /* C - L calls, then the switch */
			if (d < c)
				down(d + 1, c, sw, arg);
			else
				sw(arg);
	}
	__asm__ volatile("" : : "r"(frame) : "memory");
}

void kb_nest_run(long l, long c, long rounds, kb_sw sw, void *arg)
{
	at_depth(1, l, c, rounds, sw, arg);
}

static void nothing(void *arg)
{
	__asm__ volatile("" : : "r"(arg) : "memory");
}

int kb_call_nest(const kb_args *a, kb_res *r)
{
	if (a->l < 1 || a->c < a->l || a->iters < 1)
		return EINVAL;
	double t0 = kb_now_ns();
	kb_nest_run(a->l, a->c, a->iters, nothing, NULL);
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	return 0;
}
