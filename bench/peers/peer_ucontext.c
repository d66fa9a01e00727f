/*
 * ucontext peers (glibc getcontext/makecontext/swapcontext).
 *   switch       two contexts swapcontext to each other alternately; one
 *                operation = one swapcontext, which saves and restores the
 *                signal mask and so makes an rt_sigprocmask system call
 *   create_join  getcontext + makecontext on a reused 64 KiB stack, then
 *                swapcontext into it; the empty function returns through
 *                uc_link (setcontext, another system call)
 * makecontext passes only int arguments, so the contexts live in statics.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <ucontext.h>

#include "peers.h"

#define UC_STACK (64 * 1024)

static ucontext_t uc_main, uc_other;
static volatile long uc_sink;

static void uc_pong(void)
{
	for (;;) {
		uc_sink++;
		swapcontext(&uc_other, &uc_main);
	}
}

static void uc_empty(void)
{
	uc_sink++;
}

/* getcontext + makecontext of fn on stk; returns 0 or errno */
static int uc_make(ucontext_t *uc, void *stk, ucontext_t *link, void (*fn)(void))
{
	if (getcontext(uc) != 0)
		return errno;
	uc->uc_stack.ss_sp = stk;
	uc->uc_stack.ss_size = UC_STACK;
	uc->uc_link = link;
	makecontext(uc, fn, 0);
	return 0;
}

int kb_ucontext_switch(const kb_args *a, kb_res *r)
{
	long rounds = a->iters / 2 > 0 ? a->iters / 2 : 1;
	void *stk = malloc(UC_STACK);
	double t0;
	int e;

	if (!stk)
		return ENOMEM;
	e = uc_make(&uc_other, stk, NULL, uc_pong);
	if (!e && swapcontext(&uc_main, &uc_other) != 0) /* start uc_pong */
		e = errno;
	if (e) {
		free(stk);
		return e;
	}
	t0 = kb_now_ns();
	for (long i = 0; i < rounds; i++)
		swapcontext(&uc_main, &uc_other);
	r->ns_per_op = (kb_now_ns() - t0) / (double)(2 * rounds);
	free(stk); /* uc_pong stays suspended for good: abandoning it is fine */
	return 0;
}

int kb_ucontext_create_join(const kb_args *a, kb_res *r)
{
	void *stk = malloc(UC_STACK);
	double t0;
	int e = 0;

	if (!stk)
		return ENOMEM;
	if (a->iters < 1) {
		free(stk);
		return EINVAL;
	}
	t0 = kb_now_ns();
	for (long i = 0; i < a->iters && !e; i++) {
		e = uc_make(&uc_other, stk, &uc_main, uc_empty);
		if (!e && swapcontext(&uc_main, &uc_other) != 0)
			e = errno;
	}
	if (!e)
		r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	free(stk);
	return e;
}
