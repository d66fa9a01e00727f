/*
 * SSF's ucontext back end: every agent a ucontext on one kernel thread,
 * switched with swapcontext — the seed's lwp_yield stands here: glibc's
 * swapcontext saves and restores the signal mask, a system call per switch.
 *
 * run() makes a context per agent on a stack of its own and swaps into
 * agent 0; pass swaps from agent i to agent i + 1 (mod n).  A body that
 * returns goes on to the next agent still running with setcontext, the
 * last one back to run().  makecontext passes int arguments only, so the
 * state's address travels as two halves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "ssf_impl.h"

#define STACK (64 * 1024)

struct ube {
	ssf_sched *s;
	ucontext_t main;
	ucontext_t *ctx;
	char *stacks;
	unsigned cur, finished;
};

static void pass(ssf_sched *s)
{
	struct ube *b = s->be;
	unsigned i = b->cur;
	b->cur = i + 1 == s->n ? 0 : i + 1;
	swapcontext(&b->ctx[i], &b->ctx[b->cur]);
}

static void entry(unsigned hi, unsigned lo, unsigned i)
{
	struct ube *b = (struct ube *)(((uintptr_t)hi << 16 << 16) | lo);
	b->s->body(b->s, i);
	b->cur = i + 1 == b->s->n ? 0 : i + 1;
	setcontext(++b->finished == b->s->n ? &b->main : &b->ctx[b->cur]);
}

/* Into agent 0; back when the last agent ends.  Apart, so that no local
 * of ucontext_run lives across the swap that returns twice. */
static int start(struct ube *b, char *why, size_t len)
{
	b->s->pass = pass;
	b->s->be = b;
	if (swapcontext(&b->main, &b->ctx[0]) == 0)
		return 0;
	int e = errno;
	snprintf(why, len, "ucontext: swapcontext: %s", strerror(e));
	return e;
}

static int ucontext_run(ssf_sched *s, char *why, size_t len)
{
	struct ube b = {.s = s};
	uintptr_t p = (uintptr_t)&b;
	int e = 0;
	b.ctx = calloc(s->n, sizeof *b.ctx);
	b.stacks = malloc((size_t)s->n * STACK);
	if (!b.ctx || !b.stacks) {
		e = ENOMEM;
		snprintf(why, len, "ucontext: no memory for %u stacks", s->n);
	}
	for (unsigned i = 0; !e && i < s->n; i++) {
		if (getcontext(&b.ctx[i]) != 0) {
			e = errno;
			snprintf(why, len, "ucontext: getcontext: %s", strerror(e));
			break;
		}
		b.ctx[i].uc_stack.ss_sp = b.stacks + (size_t)i * STACK;
		b.ctx[i].uc_stack.ss_size = STACK;
		b.ctx[i].uc_link = NULL;
		makecontext(&b.ctx[i], (void (*)(void))entry, 3, (unsigned)(p >> 16 >> 16),
			    (unsigned)p, i);
	}
	if (!e)
		e = start(&b, why, len);
	free(b.ctx);
	free(b.stacks);
	return e;
}

const ssf_backend ssf_backend_ucontext = {"ucontext", ucontext_run};
