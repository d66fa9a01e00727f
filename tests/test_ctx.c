/* L1: the context switch and the spin lock. */
#include <fenv.h>
#include <pthread.h>
#include <stdint.h>

#include "karui/ctx.h"
#include "../src/arch/blocking.h"
#include "../src/arch/ctx_init.h"
#include "kt.h"

static kr_ctx main_ctx, co_ctx;
static _Alignas(16) unsigned char stack[64 * 1024];

static kr_ctx_transfer never(void *arg) { return (kr_ctx_transfer){NULL, arg}; }

static void frame_offsets_match_header(void)
{
	kr_ctx c;
	KT_EQ(kr_ctx_make(&c, stack, sizeof stack, never), 0);
	uintptr_t top = ((uintptr_t)stack + sizeof stack) & ~(uintptr_t)15;
	KT_EQ((uintptr_t)c.sp, top - KR_FRAME_SIZE);
	void *entry, *resume;
	memcpy(&entry, (char *)c.sp + KR_FRAME_ENTRY, sizeof entry);
	memcpy(&resume, (char *)c.sp + KR_FRAME_RESUME, sizeof resume);
	KT_CHECK(entry == (void *)never);
	KT_CHECK(resume == (void *)kr__ctx_trampoline);
	/* the entry starts on the ABI's alignment */
	KT_EQ(((uintptr_t)c.sp + KR_FRAME_SIZE) % 16, 0);
}

/* What the switch saves must land at the header's offsets: a context
 * suspended in kr_ctx_switch has its resume address at KR_FRAME_RESUME,
 * pointing into the function that called the switch. */
static void *seen_resume;
/* Read while the frame is there: once call_switch has returned, the calls
 * its caller makes (a sanitizer's memcpy, say) may write over it. */
static kr_ctx_transfer peek(void *arg)
{
	memcpy(&seen_resume, (char *)main_ctx.sp + KR_FRAME_RESUME, sizeof seen_resume);
	return (kr_ctx_transfer){&main_ctx, arg};
}

static __attribute__((noinline)) void call_switch(void)
{
	kr_ctx_switch(&main_ctx, &co_ctx, NULL);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

static void saved_frame_has_resume_address_at_header_offset(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, peek), 0);
	call_switch();
	void *resume = seen_resume;
	/* the resume address lies inside call_switch */
	KT_CHECK((uintptr_t)resume > (uintptr_t)call_switch);
	KT_CHECK((uintptr_t)resume < (uintptr_t)call_switch + 64);
}

static kr_ctx_transfer echo(void *arg)
{
	for (;;)
		arg = kr_ctx_switch(&co_ctx, &main_ctx, (void *)((uintptr_t)arg + 1));
	__builtin_unreachable();
}

static void switch_passes_values_both_ways(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, echo), 0);
	uintptr_t v = 10;
	for (int i = 0; i < 1000; i++) {
		uintptr_t r = (uintptr_t)kr_ctx_switch(&main_ctx, &co_ctx, (void *)v);
		KT_EQ(r, v + 1);
		v = r * 3;
	}
}

/* Many values live across switches: the compiler keeps them in
 * callee-saved registers, which only the switch preserves. */
static volatile uint64_t sink;
static kr_ctx_transfer churn(void *arg)
{
	uint64_t a = 3, b = 5, c = 7, d = 11, e = 13, f = 17, g = 19;
	for (;;) {
		a *= 31; b ^= a; c += b; d -= c; e *= d | 1; f += e; g ^= f;
		kr_ctx_switch(&co_ctx, &main_ctx, (void *)(uintptr_t)(a + b + c + d + e + f + g));
	}
	__builtin_unreachable();
}

static void switch_preserves_callee_saved_registers(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, churn), 0);
	uint64_t a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7;
	uint64_t a0 = a, b0 = b, c0 = c, d0 = d, e0 = e, f0 = f, g0 = g;
	for (int i = 0; i < 10000; i++) {
		a += 1; b += 2; c += 3; d += 4; e += 5; f += 6; g += 7;
		sink = (uint64_t)kr_ctx_switch(&main_ctx, &co_ctx, NULL);
	}
	KT_EQ(a, a0 + 10000); KT_EQ(b, b0 + 20000); KT_EQ(c, c0 + 30000);
	KT_EQ(d, d0 + 40000); KT_EQ(e, e0 + 50000); KT_EQ(f, f0 + 60000);
	KT_EQ(g, g0 + 70000);
}

/* The core's switch stores 0 into the word it is given once it has left
 * the caller's context, and returns 0 to a caller that the core's switch
 * resumes. */
static uint32_t main_left, co_left;
static kr_ctx_transfer core_echo(void *arg)
{
	for (;;)
		kr__ctx_switch(&co_ctx, &main_ctx, &co_left);
	__builtin_unreachable();
}

static void core_switch_releases_the_word_of_the_context_it_leaves(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, core_echo), 0);
	for (int i = 0; i < 100; i++) {
		main_left = co_left = 1;
		KT_EQ(kr__ctx_switch(&main_ctx, &co_ctx, &main_left), 0);
		KT_EQ(main_left, 0);
		KT_EQ(co_left, 0);
	}
}

/* kr__blocking_call (KR_BLOCKING): the five arguments reach fn, fn's
 * result reaches the caller, and the return by jump lands where the call
 * was made, also after fn switched away and back, with the caller's
 * callee-saved values intact. */
static int blocked(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t e)
{
	/* echo gets 0 from the core's switch and answers 1 */
	uintptr_t r = (uintptr_t)kr__ctx_switch(&main_ctx, &co_ctx, &main_left);
	return (int)(b + c + d + e + r);
}

static __attribute__((noinline)) int through(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d,
					     uintptr_t e)
{
	return KR_BLOCKING(blocked, a, b, c, d, e);
}

static void blocking_call_forwards_its_arguments_and_returns_past_a_switch(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, echo), 0);
	uint64_t a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7;
	for (int i = 0; i < 1000; i++) {
		a += 1; b += 2; c += 3; d += 4; e += 5; f += 6; g += 7;
		KT_EQ(through((uintptr_t)i, a, b, c, d), (int)(a + b + c + d + 1));
		KT_EQ(kr__blocking_call((uintptr_t)i, e, f, g, a, (const void *)blocked),
		      (int)(e + f + g + a + 1));
	}
	KT_EQ(a, 1001); KT_EQ(b, 2002); KT_EQ(c, 3003); KT_EQ(d, 4004);
	KT_EQ(e, 5005); KT_EQ(f, 6006); KT_EQ(g, 7007);
}

/* kr__resumes counts the contexts the core's switch resumes on this
 * thread: what tells kr__blocking_call whether the call it made was
 * switched out.  L1's public switch, which a level-0 user calls, does not
 * pay for it. */
static int no_switch(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t e)
{
	return (int)(a + b + c + d + e);
}

static void only_the_core_switch_counts_resumptions(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, echo), 0);
	unsigned long n0 = kr__resumes;
	for (int i = 0; i < 100; i++)
		kr_ctx_switch(&main_ctx, &co_ctx, NULL);
	KT_EQ(kr__resumes - n0, 0); /* the public switch counts nothing */
	for (int i = 0; i < 100; i++)
		kr__ctx_switch(&main_ctx, &co_ctx, &main_left);
	KT_EQ(kr__resumes - n0, 100); /* there; echo comes back by kr_ctx_switch */
	KT_EQ(kr__blocking_call(1, 2, 3, 4, 5, (const void *)no_switch), 15);
	KT_EQ(kr__resumes - n0, 100);
	KT_EQ(kr__blocking_call(7, 1, 2, 3, 4, (const void *)blocked), 11);
	KT_EQ(kr__resumes - n0, 101);
}

static int co_round;
static kr_ctx_transfer rounder(void *arg)
{
	for (;;) {
		co_round = fegetround();
		kr_ctx_switch(&co_ctx, &main_ctx, NULL);
	}
	__builtin_unreachable();
}

static void fp_control_state_belongs_to_each_context(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, rounder), 0);
	KT_EQ(fesetround(FE_UPWARD), 0);
	kr_ctx_switch(&main_ctx, &co_ctx, NULL);
	KT_EQ(co_round, FE_TONEAREST); /* a fresh context has the ABI default */
	KT_EQ(fegetround(), FE_UPWARD);
	fesetround(FE_TONEAREST);
}

/* An entry that returns ends its context and resumes the one it names,
 * with the arg it gives; a context can end on another's stack chain. */
static kr_ctx third_ctx;
static _Alignas(16) unsigned char stack3[16 * 1024];
static kr_ctx_transfer hand_on(void *arg)
{
	return (kr_ctx_transfer){&third_ctx, (void *)((uintptr_t)arg * 2)};
}

static kr_ctx_transfer third(void *arg)
{
	return (kr_ctx_transfer){&main_ctx, (void *)((uintptr_t)arg + 1)};
}

static void entry_return_resumes_the_named_context(void)
{
	KT_EQ(kr_ctx_make(&co_ctx, stack, sizeof stack, hand_on), 0);
	KT_EQ(kr_ctx_make(&third_ctx, stack3, sizeof stack3, third), 0);
	uintptr_t r = (uintptr_t)kr_ctx_switch(&main_ctx, &co_ctx, (void *)20);
	KT_EQ(r, 41); /* 20 * 2 by hand_on, then + 1 by third */
}

static void ctx_make_rejects_bad_input(void)
{
	kr_ctx c;
	KT_EQ(kr_ctx_make(NULL, stack, sizeof stack, never), EINVAL);
	KT_EQ(kr_ctx_make(&c, NULL, sizeof stack, never), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, sizeof stack, NULL), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, KR_CTX_STACK_MIN - 1, never), EINVAL);
	KT_EQ(kr_ctx_make(&c, stack, KR_CTX_STACK_MIN, never), 0);
}

static kr_spin lock = KR_SPIN_INIT;
static long counter;
static void *adder(void *arg)
{
	for (int i = 0; i < 200000; i++) {
		kr_spin_lock(&lock);
		counter++;
		kr_spin_unlock(&lock);
	}
	return arg;
}

static void spin_lock_excludes_across_threads(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, adder, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	KT_EQ(counter, 800000);
	KT_EQ(kr_spin_trylock(&lock), 0);
	KT_EQ(kr_spin_trylock(&lock), EBUSY);
	kr_spin_unlock(&lock);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(frame_offsets_match_header);
	KT_RUN(saved_frame_has_resume_address_at_header_offset);
	KT_RUN(switch_passes_values_both_ways);
	KT_RUN(switch_preserves_callee_saved_registers);
	KT_RUN(core_switch_releases_the_word_of_the_context_it_leaves);
	KT_RUN(blocking_call_forwards_its_arguments_and_returns_past_a_switch);
	KT_RUN(only_the_core_switch_counts_resumptions);
	KT_RUN(fp_control_state_belongs_to_each_context);
	KT_RUN(entry_return_resumes_the_named_context);
	KT_RUN(ctx_make_rejects_bad_input);
	KT_RUN(spin_lock_excludes_across_threads);
	return kt_finish();
}
