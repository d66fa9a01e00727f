/*
 * Boost.Context peers, using the raw fcontext layer
 * (boost::context::detail::make_fcontext / jump_fcontext, Boost 1.74):
 * hand-written assembly that saves the callee-saved registers and the FP
 * control words, no system call.
 *   switch       main and one fcontext ping-pong with jump_fcontext; one
 *                operation = one jump
 *   create_join  make_fcontext on a reused 64 KiB stack, jump in, the entry
 *                jumps straight back and is abandoned; one operation =
 *                make + two jumps
 *   nest         seed002.fig3/fig4: main and one fcontext run the nesting
 *                loop (nest.c), jumping to each other
 */
#include <cerrno>
#include <cstdlib>

#include <boost/context/detail/fcontext.hpp>

#include "peers.h"

namespace bcd = boost::context::detail;

namespace {

constexpr std::size_t fc_stack = 64 * 1024;
volatile long fc_sink;

void fc_pong(bcd::transfer_t t)
{
	for (;;) {
		fc_sink = fc_sink + 1;
		t = bcd::jump_fcontext(t.fctx, nullptr);
	}
}

void fc_back(bcd::transfer_t t)
{
	fc_sink = fc_sink + 1;
	bcd::jump_fcontext(t.fctx, nullptr); /* never resumed */
}

} // namespace

extern "C" int kb_fcontext_switch(const kb_args *a, kb_res *r)
{
	long rounds = a->iters / 2 > 0 ? a->iters / 2 : 1;
	char *stk = static_cast<char *>(std::malloc(fc_stack));

	if (!stk)
		return ENOMEM;
	bcd::fcontext_t c = bcd::make_fcontext(stk + fc_stack, fc_stack, fc_pong);
	c = bcd::jump_fcontext(c, nullptr).fctx; /* start fc_pong */
	double t0 = kb_now_ns();
	for (long i = 0; i < rounds; i++)
		c = bcd::jump_fcontext(c, nullptr).fctx;
	r->ns_per_op = (kb_now_ns() - t0) / double(2 * rounds);
	std::free(stk); /* fc_pong stays suspended for good */
	return 0;
}

extern "C" int kb_fcontext_create_join(const kb_args *a, kb_res *r)
{
	if (a->iters < 1)
		return EINVAL;
	char *stk = static_cast<char *>(std::malloc(fc_stack));

	if (!stk)
		return ENOMEM;
	double t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		bcd::fcontext_t c = bcd::make_fcontext(stk + fc_stack, fc_stack, fc_back);
		bcd::jump_fcontext(c, nullptr);
	}
	r->ns_per_op = (kb_now_ns() - t0) / double(a->iters);
	std::free(stk);
	return 0;
}

namespace {

bcd::fcontext_t fc_peer; /* the flow that is not running */
long fc_l, fc_c, fc_rounds;

void fc_nest_sw(void *)
{
	/* the jump returns with the flow that jumped here: the other one */
	fc_peer = bcd::jump_fcontext(fc_peer, nullptr).fctx;
}

void fc_nest_other(bcd::transfer_t t)
{
	fc_peer = t.fctx;
	kb_nest_run(fc_l, fc_c, fc_rounds, fc_nest_sw, nullptr);
	std::abort(); /* main finishes first and never resumes this one */
}

} // namespace

extern "C" int kb_fcontext_nest(const kb_args *a, kb_res *r)
{
	if (a->l < 1 || a->c < a->l || a->iters < 2)
		return EINVAL;
	char *stk = static_cast<char *>(std::malloc(fc_stack));
	if (!stk)
		return ENOMEM;
	fc_l = a->l;
	fc_c = a->c;
	fc_rounds = a->iters / 2;
	fc_peer = bcd::make_fcontext(stk + fc_stack, fc_stack, fc_nest_other);
	double t0 = kb_now_ns();
	kb_nest_run(fc_l, fc_c, fc_rounds, fc_nest_sw, nullptr);
	r->ns_per_op = (kb_now_ns() - t0) / double(2 * fc_rounds);
	std::free(stk); /* the other flow stays suspended for good */
	return 0;
}
