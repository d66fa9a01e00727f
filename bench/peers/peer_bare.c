/*
 * bare peer: the floor.  A hand-written switch that saves only the
 * callee-saved registers (x86-64: rbp rbx r12-r15; aarch64: x19-x30 and
 * d8-d15), stores the stack pointer, loads the other one and resumes on the
 * other stack.  No FP control state, no signal mask, no system call.
 * bare-fpctl is the same switch saving and restoring the FP control state
 * as well (x86-64: MXCSR and the x87 control word; aarch64: FPCR), as the ABI
 * asks of a switch between contexts and as karui's does: the floor for a
 * switch that keeps each context's rounding mode and exception masks.
 * It resumes with an indirect jump (pop + jmp / br x30), not `ret`: after a
 * stack swap a `ret` always misses the return-stack predictor, which made
 * this floor ~3x slower than Boost's jump_fcontext (that also jumps).
 *   switch       two contexts ping-pong; one operation = one switch (also
 *                with the FP control state: bare-fpctl)
 *   pingpong / relay
 *                the switches of chan_pingpong and chan_relay alone, in their
 *                shape: each flow loops calling one blocking function, which
 *                switches to the other flow; one operation = a round trip =
 *                two switches.  The flows loop in two functions (pingpong) or
 *                in one (relay).  These resume with `ret`, as karui's switch
 *                does: there the return predictor is right as long as both
 *                flows came down the same calls, and each switch costs one
 *                misprediction where they did not (the flows' own loops in
 *                pingpong).  Resuming with a jump instead misses at every
 *                return after the switch, in both shapes.
 *   create_join  lay out a fresh frame on a reused stack, switch in, the
 *                entry switches straight back; create = writing the frame
 *   mutex        a test-and-test-and-set spin lock on an atomic word: lock =
 *                atomic exchange (spinning on plain loads while it is held),
 *                unlock = release store; one flow, so never contended
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "peers.h"

#define BARE_STACK (64 * 1024)

/* Save the callee-saved registers on the current stack, store the stack
 * pointer to *from, load `to` and restore what it saved there; resume with
 * a jump, or with `ret` (_ret). */
__attribute__((visibility("hidden"))) void kb_bare_swap(void **from, void *to);
__attribute__((visibility("hidden"))) void kb_bare_swap_ret(void **from, void *to);
__attribute__((visibility("hidden"))) void kb_bare_swap_fp(void **from, void *to);

#if defined(__x86_64__)
/* frame, in words from the saved sp: r15 r14 r13 r12 rbx rbp resume address, then one
 * word so that the entry sees rsp % 16 == 8 as after a call */
#define BARE_WORDS 8
#define BARE_RET 6
#define SPIN_PAUSE() __builtin_ia32_pause()
#define BARE_SWAP(name, save, load, resume)                                    \
	__asm__(".pushsection .text\n"                                         \
		".globl " name "\n"                                            \
		".hidden " name "\n"                                           \
		".type " name ", @function\n"                                  \
		".p2align 4\n" name ":\n"                                      \
		"	pushq %rbp\n"                                           \
		"	pushq %rbx\n"                                           \
		"	pushq %r12\n"                                           \
		"	pushq %r13\n"                                           \
		"	pushq %r14\n"                                           \
		"	pushq %r15\n" save                                      \
		"	movq %rsp, (%rdi)\n"                                    \
		"	movq %rsi, %rsp\n" load                                 \
		"	popq %r15\n"                                            \
		"	popq %r14\n"                                            \
		"	popq %r13\n"                                            \
		"	popq %r12\n"                                            \
		"	popq %rbx\n"                                            \
		"	popq %rbp\n" resume                                     \
		".size " name ", .-" name "\n"                                 \
		".popsection\n")
#define BARE_JUMP "	popq %rcx\n	jmp *%rcx\n"
#define BARE_RETURN "	ret\n"
/* one word below the frame: MXCSR, then the x87 control word */
#define BARE_FP_WORDS 1
#define BARE_FP_SAVE "	subq $8, %rsp\n	stmxcsr (%rsp)\n	fnstcw 4(%rsp)\n"
#define BARE_FP_LOAD "	ldmxcsr (%rsp)\n	fldcw 4(%rsp)\n	addq $8, %rsp\n"
static uintptr_t bare_fp_now(void)
{
	uint32_t mxcsr;
	uint16_t cw;
	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(cw));
	return mxcsr | (uintptr_t)cw << 32;
}
#elif defined(__aarch64__)
/* frame, in words from the saved sp: x19..x30 (x30 = resume address),
 * d8..d15; 160 bytes, so sp stays 16-byte aligned */
#define BARE_WORDS 20
#define BARE_RET 11
#define SPIN_PAUSE() __asm__ volatile("yield")
#define BARE_SWAP(name, save, load, resume)                                    \
	__asm__(".pushsection .text\n"                                         \
		".globl " name "\n"                                            \
		".hidden " name "\n"                                           \
		".type " name ", %function\n"                                  \
		".p2align 4\n" name ":\n"                                      \
		"	sub sp, sp, #160\n"                                     \
		"	stp x19, x20, [sp, #0]\n"                               \
		"	stp x21, x22, [sp, #16]\n"                              \
		"	stp x23, x24, [sp, #32]\n"                              \
		"	stp x25, x26, [sp, #48]\n"                              \
		"	stp x27, x28, [sp, #64]\n"                              \
		"	stp x29, x30, [sp, #80]\n"                              \
		"	stp d8, d9, [sp, #96]\n"                                \
		"	stp d10, d11, [sp, #112]\n"                             \
		"	stp d12, d13, [sp, #128]\n"                             \
		"	stp d14, d15, [sp, #144]\n" save                        \
		"	mov x2, sp\n"                                           \
		"	str x2, [x0]\n"                                         \
		"	mov sp, x1\n" load                                      \
		"	ldp x19, x20, [sp, #0]\n"                               \
		"	ldp x21, x22, [sp, #16]\n"                              \
		"	ldp x23, x24, [sp, #32]\n"                              \
		"	ldp x25, x26, [sp, #48]\n"                              \
		"	ldp x27, x28, [sp, #64]\n"                              \
		"	ldp x29, x30, [sp, #80]\n"                              \
		"	ldp d8, d9, [sp, #96]\n"                                \
		"	ldp d10, d11, [sp, #112]\n"                             \
		"	ldp d12, d13, [sp, #128]\n"                             \
		"	ldp d14, d15, [sp, #144]\n"                             \
		"	add sp, sp, #160\n" resume                              \
		".size " name ", .-" name "\n"                                 \
		".popsection\n")
#define BARE_JUMP "	br x30\n"
#define BARE_RETURN "	ret\n"
/* two words below the frame (sp stays 16-byte aligned): FPCR, pad */
#define BARE_FP_WORDS 2
#define BARE_FP_SAVE "	mrs x9, fpcr\n	str x9, [sp, #-16]!\n"
#define BARE_FP_LOAD "	ldr x9, [sp], #16\n	msr fpcr, x9\n"
static uintptr_t bare_fp_now(void)
{
	uintptr_t fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	return fpcr;
}
#else
#error "peer_bare.c: only x86-64 and aarch64"
#endif
BARE_SWAP("kb_bare_swap", "", "", BARE_JUMP);
BARE_SWAP("kb_bare_swap_ret", "", "", BARE_RETURN);
BARE_SWAP("kb_bare_swap_fp", BARE_FP_SAVE, BARE_FP_LOAD, BARE_JUMP);

static void *bare_main_sp, *bare_other_sp;
static volatile long bare_sink;

/* A fresh frame at the top of the stack whose first resumption calls entry
 * (which must never return); returns the stack pointer to switch to. */
static void *bare_make(void *stk, size_t size, void (*entry)(void))
{
	uintptr_t top = ((uintptr_t)stk + size) & ~(uintptr_t)15;
	uintptr_t *f = (uintptr_t *)top - BARE_WORDS;

	for (int i = 0; i < BARE_WORDS; i++)
		f[i] = 0;
	f[BARE_RET] = (uintptr_t)entry;
	return f;
}

static void bare_pong(void)
{
	for (;;) {
		bare_sink++;
		kb_bare_swap(&bare_other_sp, bare_main_sp);
	}
}

static void bare_pong_fp(void)
{
	for (;;) {
		bare_sink++;
		kb_bare_swap_fp(&bare_other_sp, bare_main_sp);
	}
}

static void bare_back(void)
{
	bare_sink++;
	kb_bare_swap(&bare_other_sp, bare_main_sp);
	abort(); /* never resumed */
}

/* Two contexts switching with `swap`; `pong` runs the other one.  With
 * fp_words, the other context's first frame holds this thread's FP control
 * state below the registers, for its first restore. */
static inline __attribute__((always_inline)) int
bare_switch(const kb_args *a, kb_res *r, void (*swap)(void **, void *), void (*pong)(void),
	    int fp_words)
{
	long rounds = a->iters / 2 > 0 ? a->iters / 2 : 1;
	void *stk = malloc(BARE_STACK);
	double t0;

	if (!stk)
		return ENOMEM;
	uintptr_t *f = (uintptr_t *)bare_make(stk, BARE_STACK, pong) - fp_words;
	if (fp_words)
		f[0] = bare_fp_now();
	bare_other_sp = f;
	swap(&bare_main_sp, bare_other_sp); /* start pong */
	t0 = kb_now_ns();
	for (long i = 0; i < rounds; i++)
		swap(&bare_main_sp, bare_other_sp);
	r->ns_per_op = (kb_now_ns() - t0) / (double)(2 * rounds);
	free(stk); /* pong stays suspended for good */
	return 0;
}

int kb_bare_switch(const kb_args *a, kb_res *r)
{
	return bare_switch(a, r, kb_bare_swap, bare_pong, 0);
}

int kb_bare_fpctl_switch(const kb_args *a, kb_res *r)
{
	return bare_switch(a, r, kb_bare_swap_fp, bare_pong_fp, BARE_FP_WORDS);
}

int kb_bare_create_join(const kb_args *a, kb_res *r)
{
	void *stk;
	double t0;

	if (a->iters < 1)
		return EINVAL;
	stk = malloc(BARE_STACK);
	if (!stk)
		return ENOMEM;
	t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++)
		kb_bare_swap(&bare_main_sp, bare_make(stk, BARE_STACK, bare_back));
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	free(stk);
	return 0;
}

/* pingpong and relay: flow 0 runs on the caller's stack, flow 1 on its
 * own, and a flow blocks by switching to the other. */
static void *flow_sp[2];
static long flow_rounds;

static __attribute__((noinline)) void flow_block(int me)
{
	kb_bare_swap_ret(&flow_sp[me], flow_sp[!me]);
}

/* pingpong: two loops, so the flows return from flow_block to different
 * places.  Flow 1 outlives the run, suspended. */
static __attribute__((noinline)) void flow_loop0(void)
{
	for (long i = 0; i < flow_rounds; i++)
		flow_block(0);
}

static __attribute__((noinline)) void flow_loop1(void)
{
	for (;;)
		flow_block(1);
}

/* relay: one loop for both flows */
static __attribute__((noinline)) void flow_relay(int me)
{
	for (long i = 0; i < flow_rounds; i++)
		flow_block(me);
}

static void flow_relay0(void) { flow_relay(0); }

static void flow_relay1(void)
{
	flow_relay(1);
	abort(); /* flow 0 stops first and never switches back */
}

/* a->iters round trips of flow 0 (run0) and flow 1 (entry1) */
static int flow_pair(const kb_args *a, kb_res *r, void (*run0)(void), void (*entry1)(void))
{
	void *stk = malloc(BARE_STACK);
	if (!stk)
		return ENOMEM;
	flow_rounds = a->iters > 0 ? a->iters : 1;
	flow_sp[1] = bare_make(stk, BARE_STACK, entry1);
	double t0 = kb_now_ns();
	run0();
	r->ns_per_op = (kb_now_ns() - t0) / (double)flow_rounds;
	free(stk); /* flow 1 stays suspended for good */
	return 0;
}

int kb_bare_pingpong(const kb_args *a, kb_res *r)
{
	return flow_pair(a, r, flow_loop0, flow_loop1);
}

int kb_bare_relay(const kb_args *a, kb_res *r)
{
	return flow_pair(a, r, flow_relay0, flow_relay1);
}

/* volatile as well as atomic: the compiler may not drop or merge the
 * accesses of the timed loop */
static volatile atomic_int spin_word;

static void spin_lock(volatile atomic_int *l)
{
	while (atomic_exchange_explicit(l, 1, memory_order_acquire))
		while (atomic_load_explicit(l, memory_order_relaxed))
			SPIN_PAUSE();
}

static void spin_unlock(volatile atomic_int *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

int kb_spin_mutex(const kb_args *a, kb_res *r)
{
	double t0;

	if (a->iters < 1)
		return EINVAL;
	t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		spin_lock(&spin_word);
		spin_unlock(&spin_word);
	}
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	return 0;
}
