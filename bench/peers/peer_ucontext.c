/*
 * ucontext peers (glibc getcontext/makecontext/swapcontext).
 *   switch       two contexts swapcontext to each other alternately; one
 *                operation = one swapcontext, which saves and restores the
 *                signal mask and so makes an rt_sigprocmask system call
 *   create_join  getcontext + makecontext on a reused 64 KiB stack, then
 *                swapcontext into it; the empty function returns through
 *                uc_link (setcontext, another system call)
 *   nest         seed002.fig3/fig4: main and one context run the nesting
 *                loop (nest.c), switching to each other with swapcontext
 *   chain        seed000.table2: a chain of contexts, each making the next
 *                on a new 64 KiB stack and switching into it, the parent
 *                resuming when the child returns (uc_link); "ucontext"
 *                takes stacks from malloc, "ucontext-mprot" maps them with
 *                a guard page (mprotect) and keeps freed ones for reuse,
 *                as the seed's SunLWP did with and without its red zone
 * makecontext passes only int arguments, so the contexts live in statics.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

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

/* ---- seed002.fig3/fig4 ---- */

static long nest_l, nest_c, nest_rounds;

static void uc_nest_sw(void *arg)
{
	(void)arg;
	/* the flow that is running saves itself and resumes the other */
	static int on_main = 1;
	if (on_main) {
		on_main = 0;
		swapcontext(&uc_main, &uc_other);
	} else {
		on_main = 1;
		swapcontext(&uc_other, &uc_main);
	}
}

static void uc_nest_other(void)
{
	kb_nest_run(nest_l, nest_c, nest_rounds, uc_nest_sw, NULL);
	abort(); /* main finishes first and never resumes this one */
}

int kb_ucontext_nest(const kb_args *a, kb_res *r)
{
	if (a->l < 1 || a->c < a->l || a->iters < 2)
		return EINVAL;
	void *stk = malloc(UC_STACK);
	if (!stk)
		return ENOMEM;
	nest_l = a->l;
	nest_c = a->c;
	nest_rounds = a->iters / 2;
	int e = uc_make(&uc_other, stk, NULL, uc_nest_other);
	if (e) {
		free(stk);
		return e;
	}
	double t0 = kb_now_ns();
	kb_nest_run(nest_l, nest_c, nest_rounds, uc_nest_sw, NULL);
	r->ns_per_op = (kb_now_ns() - t0) / (double)(2 * nest_rounds);
	free(stk); /* the other context stays suspended for good */
	return 0;
}

/* ---- seed000.table2 ---- */

struct uc_chain {
	ucontext_t *uc;  /* uc[0]: main; uc[d]: the d-th flow of the chain */
	long n, depth;   /* depth: the flow being started */
	int mprot;
	void *cache;     /* mprot: freed stacks, linked through their first word */
	size_t page;
};
static struct uc_chain uch;

static void *uc_stack_get(void)
{
	if (!uch.mprot)
		return malloc(UC_STACK);
	if (uch.cache) {
		void *s = uch.cache;
		uch.cache = *(void **)s;
		return s;
	}
	char *m = mmap(NULL, UC_STACK + uch.page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (mprotect(m, uch.page, PROT_NONE) != 0) { /* the red zone */
		munmap(m, UC_STACK + uch.page);
		return NULL;
	}
	return m + uch.page;
}

static void uc_stack_put(void *s)
{
	if (!uch.mprot) {
		free(s);
		return;
	}
	*(void **)s = uch.cache;
	uch.cache = s;
}

static int uc_spawn(long d);

static void uc_chain_fn(void)
{
	long d = uch.depth;
	if (d < uch.n && uc_spawn(d + 1) != 0)
		abort();
}

/* start flow d (its parent is d - 1, running) and return when it ended */
static int uc_spawn(long d)
{
	void *stk = uc_stack_get();
	if (!stk)
		return ENOMEM;
	int e = uc_make(&uch.uc[d], stk, &uch.uc[d - 1], uc_chain_fn);
	uch.depth = d;
	if (!e && swapcontext(&uch.uc[d - 1], &uch.uc[d]) != 0)
		e = errno;
	uc_stack_put(stk);
	return e;
}

static int uc_chain(const kb_args *a, kb_res *r, int mprot)
{
	if (a->n < 1 || a->iters < 1)
		return EINVAL;
	uch = (struct uc_chain){.n = a->n, .mprot = mprot, .page = (size_t)sysconf(_SC_PAGESIZE)};
	if (!(uch.uc = calloc((size_t)a->n + 1, sizeof *uch.uc)))
		return ENOMEM;
	double t0 = kb_now_ns();
	int e = uc_spawn(1);
	double t1 = kb_now_ns();
	for (long i = 0; i < a->iters && !e; i++)
		e = uc_spawn(1);
	double t2 = kb_now_ns();
	r->ns_per_op = (t1 - t0) / (double)a->n;
	r->ns_cached = (t2 - t1) / (double)(a->n * a->iters);
	free(uch.uc);
	while (uch.cache) { /* the process ends soon; tidy for sanitizers */
		void *s = uch.cache;
		uch.cache = *(void **)s;
		munmap((char *)s - uch.page, UC_STACK + uch.page);
	}
	return e;
}

int kb_ucontext_chain(const kb_args *a, kb_res *r)
{
	return uc_chain(a, r, 0);
}

int kb_ucontext_mprot_chain(const kb_args *a, kb_res *r)
{
	return uc_chain(a, r, 1);
}
