/*
 * Scheduling level 0: a scheduler written on the VP calls (L0) and the
 * context switch and spin lock (L1) alone, without karui's core.
 *
 * 2 VPs share a bag of 8 tasks.  Each task is a coroutine that adds its
 * part of a sum in steps, switching back to its VP's scheduler loop after
 * every step; a VP takes any task that is not running (a spin-locked
 * flag), so tasks move between VPs.  When the bag is empty a VP ends.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "karui/ctx.h"
#include "karui/vp.h"

#define NTASK 8
#define STEPS 1000

struct task {
	kr_ctx ctx;
	kr_ctx *sched;  /* the scheduler loop that runs it now */
	int running, done;
	long sum;
	unsigned char stack[32768] __attribute__((aligned(16)));
};

static struct task tasks[NTASK];
static kr_spin bag = KR_SPIN_INIT;

static kr_ctx_transfer task_main(void *arg)
{
	struct task *t = arg;
	for (int i = 1; i <= STEPS; i++) {
		t->sum += i;
		kr_ctx_switch(&t->ctx, t->sched, NULL); /* one step, then yield */
	}
	t->done = 1;
	return (kr_ctx_transfer){t->sched, NULL}; /* the task ends */
}

static struct task *take(void)
{
	struct task *got = NULL;
	int left = 0;
	kr_spin_lock(&bag);
	for (int i = 0; i < NTASK; i++) {
		left += !tasks[i].done;
		if (!got && !tasks[i].done && !tasks[i].running) {
			got = &tasks[i];
			got->running = 1;
		}
	}
	kr_spin_unlock(&bag);
	return got ? got : left ? (struct task *)1 : NULL;
}

static void vp_loop(kr_vp *vp, void *arg)
{
	kr_ctx here;
	struct task *t;
	while ((t = take()) != NULL) {
		if (t == (struct task *)1) { /* all busy elsewhere */
			kr_vp_switch();
			continue;
		}
		t->sched = &here;
		kr_ctx_switch(&here, &t->ctx, t);
		kr_spin_lock(&bag);
		t->running = 0;
		kr_spin_unlock(&bag);
	}
}

int main(void)
{
	for (int i = 0; i < NTASK; i++)
		kr_ctx_make(&tasks[i].ctx, tasks[i].stack, sizeof tasks[i].stack, task_main);
	/* the first switch into a fresh context passes the task as its arg */
	kr_vp *v[2];
	int err = kr_vp_allocate(v, 2, vp_loop, NULL);
	if (err)
		return fprintf(stderr, "kr_vp_allocate: %d\n", err), 1;
	kr_vp_join(v[0]);
	kr_vp_join(v[1]);
	long total = 0;
	for (int i = 0; i < NTASK; i++)
		total += tasks[i].sum;
	printf("sum = %ld (expected %ld)\n", total, (long)NTASK * STEPS * (STEPS + 1) / 2);
	return 0;
}
