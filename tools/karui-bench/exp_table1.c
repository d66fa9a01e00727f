/*
 * karui-bench — seed004.table1: the machine instructions of a
 * microprocess's basic operations, karui against Boost.Fiber, as seed 004's
 * Table 1 gives them for a user thread on a 68030 (create 92, stop 13,
 * resume 46, context switch 40, exit 46, counted with the processor's
 * trace mode).  Here callgrind counts them.
 *
 * Each operation is a region of a `karui-bench count SYS t1_OP N` run,
 * opened and closed by callgrind client requests (kb_mark_on/off,
 * peers.h) around the operation in the workload, the same for both
 * systems (one VP / one thread):
 *
 *   create  kr_mp_create of a microprocess that does nothing, with a
 *           cached stack, up to its return: the new one is queued, not run
 *           (Boost: constructing a fiber with launch::post from a warm
 *           pooled_fixedsize_stack).
 *   stop    kr_mp_park of a microprocess that another one has woken
 *           before: from the call to the register switch, and after it the
 *           resumed one's return from its own kr_mp_park: what blocking
 *           costs up to the switch (announcing the sleep, the scheduler's
 *           pick) and after it.  The register switch, the assembly that
 *           saves and loads the registers (kr__ctx_switch; Boost.Context's
 *           ontop_fcontext and jump_fcontext), is left out: callgrind
 *           attributes each instruction to the function it lies in, and
 *           theirs are subtracted.  Boost: context::suspend() of the active
 *           fiber.
 *   resume  kr_mp_unpark of a parked microprocess on the same VP: it is
 *           made runnable (into the VP's slot or queue), nothing runs yet
 *           (Boost: context::schedule(ctx) of a suspended fiber).
 *   switch  kr_mp_yield with two microprocesses yielding to each other:
 *           from the call in one to the return in the other, through the
 *           scheduler and the register switch (Boost: this_fiber::yield).
 *   exit    from the `return` of the microprocess's function until its
 *           joiner's kr_mp_join returns: the end, the handing over of the
 *           result, the switch to the joiner, the release of the stack
 *           (Boost: the same with fiber::join).
 *
 * The stop and resume workload is one: two microprocesses, each waking
 * the other and then parking; a run marks either the parks or the wakeups.
 * Per operation = (count(2N) - count(N)) / N, as for `instructions`, so the
 * runs' set-up and first regions cancel; the marks' own instructions
 * (t1_marks, measured the same way for each system) are subtracted.
 *
 * karui's five counts are kept for seed004.sim (kb_t1_karui), which uses
 * them as its second set of costs: within `run all` it runs after this
 * experiment; run alone, it has them counted here first.
 *
 * Rejected: --toggle-collect on the API functions: exit spans two
 * contexts and no one function, and callgrind's call stack, which decides
 * when a toggled function is left, loses its way in a switch between
 * stacks (Boost's suspend lost hundreds of instructions that way);
 * differences of whole loops: each operation would come with the loop's
 * and the other operations' shares.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "karui.h"
#include "exp.h"

static int t1_start(void)
{
	kr_config c = {.vps = 1};
	return kr_init(&c);
}

static void *t1_nop(void *a) { return a; }

static void *t1_exiting(void *a)
{
	kb_mark_on();
	return a;
}

/* create: kr_mp_create alone; exit: from the function's return to the
 * return of the join */
static int t1_life(const kb_args *a, int exit)
{
	int err = t1_start();
	if (err)
		return err;
	kr_mp *m;
	for (int i = 0; i < 64 && !err; i++) /* warm the stack cache */
		if (!(err = kr_mp_create(&m, NULL, t1_nop, NULL)))
			kr_mp_join(m, NULL);
	for (long i = 0; i < a->iters && !err; i++) {
		if (exit) {
			if (!(err = kr_mp_create(&m, NULL, t1_exiting, NULL)))
				kr_mp_join(m, NULL);
			kb_mark_off();
		} else {
			kb_mark_on();
			err = kr_mp_create(&m, NULL, t1_nop, NULL);
			kb_mark_off();
			if (!err)
				kr_mp_join(m, NULL);
		}
	}
	kr_fini();
	return err;
}

static int kb_karui_t1_create(const kb_args *a, kb_res *r)
{
	(void)r;
	return t1_life(a, 0);
}

static int kb_karui_t1_exit(const kb_args *a, kb_res *r)
{
	(void)r;
	return t1_life(a, 1);
}

static long t1_each;
static void *t1_yielder(void *a)
{
	for (long i = 0; i < t1_each; i++) {
		kb_mark_on();
		kr_mp_yield();
		kb_mark_off();
	}
	return a;
}

static int kb_karui_t1_switch(const kb_args *a, kb_res *r)
{
	(void)r;
	if (a->iters < 2)
		return EINVAL;
	int err = t1_start();
	if (err)
		return err;
	t1_each = a->iters / 2;
	kr_mp *m[2];
	if (!(err = kr_mp_create(&m[0], NULL, t1_yielder, NULL))) {
		if (!(err = kr_mp_create(&m[1], NULL, t1_yielder, NULL)))
			kr_mp_join(m[1], NULL);
		kr_mp_join(m[0], NULL);
	}
	kr_fini();
	return err;
}

/* ---- stop and resume: two microprocesses waking each other ---- */

static struct {
	kr_mp *main, *other;
	long rounds;
	int resume; /* mark the wakeups, else the parks */
} pp;

/* The marked and the unmarked wakeup and park, apart: the marks hold the
 * call and nothing else. */
static void pp_wake(kr_mp *to)
{
	if (!pp.resume) {
		kr_mp_unpark(to);
		return;
	}
	kb_mark_on();
	kr_mp_unpark(to);
	kb_mark_off();
}

static void pp_park(void)
{
	if (pp.resume) {
		kr_mp_park();
		return;
	}
	kb_mark_on();
	kr_mp_park();
	kb_mark_off();
}

static void *pp_other(void *a)
{
	kr_mp_park(); /* until the main microprocess's first wakeup */
	for (long i = 0; i < pp.rounds; i++) {
		pp_wake(pp.main);
		if (i + 1 == pp.rounds)
			break;
		pp_park();
	}
	return a;
}

static int t1_pingpong(const kb_args *a, int resume)
{
	if (a->iters < 2)
		return EINVAL;
	int err = t1_start();
	if (err)
		return err;
	pp.main = kr_mp_self();
	pp.rounds = a->iters / 2;
	pp.resume = resume;
	if (!(err = kr_mp_create(&pp.other, NULL, pp_other, NULL))) {
		kr_mp_yield(); /* the other one runs and parks */
		for (long i = 0; i < pp.rounds; i++) {
			pp_wake(pp.other);
			pp_park();
		}
		kr_mp_join(pp.other, NULL);
	}
	kr_fini();
	return err;
}

static int kb_karui_t1_stop(const kb_args *a, kb_res *r)
{
	(void)r;
	return t1_pingpong(a, 0);
}

static int kb_karui_t1_resume(const kb_args *a, kb_res *r)
{
	(void)r;
	return t1_pingpong(a, 1);
}

static int kb_karui_t1_marks(const kb_args *a, kb_res *r)
{
	(void)r;
	for (long i = 0; i < a->iters; i++) {
		kb_mark_on();
		kb_mark_off();
	}
	return 0;
}

/* ---- the table ---- */

static const char *const T1_OPS[] = {"create", "stop", "resume", "switch", "exit"};
#define T1_NOPS (sizeof T1_OPS / sizeof T1_OPS[0])

static const struct t1_sys {
	const char *name;
	kb_fn fn[T1_NOPS + 1]; /* by T1_OPS, then t1_marks */
	const char *regswitch; /* the register switch's functions, left out of stop */
} T1_SYS[] = {
	{"karui",
	 {kb_karui_t1_create, kb_karui_t1_stop, kb_karui_t1_resume, kb_karui_t1_switch,
	  kb_karui_t1_exit, kb_karui_t1_marks},
	 "kr__ctx_switch"},
	{"boost-fiber",
	 {kb_fiber_t1_create, kb_fiber_t1_stop, kb_fiber_t1_resume, kb_fiber_t1_switch,
	  kb_fiber_t1_exit, kb_fiber_t1_marks},
	 "ontop_fcontext,jump_fcontext"},
};
#define T1_NSYS (sizeof T1_SYS / sizeof T1_SYS[0])

/* "t1_OP" or "t1_marks": its index in fn[], or -1 */
static int t1_op(const char *exp)
{
	if (strncmp(exp, "t1_", 3))
		return -1;
	for (size_t i = 0; i < T1_NOPS; i++)
		if (!strcmp(exp + 3, T1_OPS[i]))
			return (int)i;
	return strcmp(exp + 3, "marks") ? -1 : (int)T1_NOPS;
}

int kb_t1_count(const char *sys, const char *exp, long n)
{
	int op = t1_op(exp);
	for (size_t s = 0; op >= 0 && s < T1_NSYS; s++)
		if (!strcmp(T1_SYS[s].name, sys)) {
			kb_args a = {.iters = n, .n = n};
			kb_res r;
			return T1_SYS[s].fn[op](&a, &r);
		}
	return ENOENT;
}

/* One count per operation: (count(2n) - count(n)) / n, without the
 * instructions of the functions `apart` names; -1 on failure. */
static double t1_per_op(const char *dir, const char *sys, const char *exp, const char *apart,
			long n)
{
	kb_cg a, b;
	if (kb_cg_run(&a, dir, sys, exp, NULL, 1, apart, n))
		return -1;
	if (kb_cg_run(&b, dir, sys, exp, NULL, 1, apart, 2 * n)) {
		kb_cg_free(&a);
		return -1;
	}
	double per = (b.ir - b.apart - (a.ir - a.apart)) / n;
	kb_cg_free(&a);
	kb_cg_free(&b);
	return per;
}

/* karui's five counts, once per process: seed004.table1's, or those
 * that kb_t1_karui counted for seed004.sim */
static double t1_karui[T1_NOPS];
static int t1_karui_known;

/* One system's five counts into v[]; the number counted (T1_NOPS: all). */
static size_t t1_count(const kb_ctx *c, const struct t1_sys *y, long n, double *v)
{
	size_t got = 0;
	double marks = t1_per_op(c->dir, y->name, "t1_marks", NULL, n);
	for (size_t op = 0; op < T1_NOPS; op++) {
		char name[16];
		snprintf(name, sizeof name, "t1_%s", T1_OPS[op]);
		v[op] = marks < 0 ? -1
		      : t1_per_op(c->dir, y->name, name, op == 1 ? y->regswitch : NULL, n);
		if (v[op] >= 0) {
			v[op] -= marks;
			got++;
		}
	}
	if (y == &T1_SYS[0] && got == T1_NOPS) {
		memcpy(t1_karui, v, sizeof t1_karui);
		t1_karui_known = 1;
	}
	return got;
}

int kb_t1_karui(const kb_ctx *c, double v[5])
{
	if (!t1_karui_known) {
		if (system("valgrind --version >/dev/null 2>&1") != 0)
			return ENOENT;
		fprintf(stderr, "karui-bench: seed004.table1 / karui (its counts for the "
				"simulator) ...\n");
		double got[T1_NOPS];
		if (t1_count(c, &T1_SYS[0], c->quick ? 20000 : 100000, got) != T1_NOPS)
			return EIO;
	}
	memcpy(v, t1_karui, sizeof t1_karui);
	return 0;
}

void kb_seed004_table1(const kb_ctx *c)
{
	static const char exp[] = "seed004.table1";
	if (system("valgrind --version >/dev/null 2>&1") != 0) {
		kb_row_none(exp, "all", "skipped", "valgrind not installed");
		return;
	}
	long n = c->n ? c->n : c->quick ? 20000 : 100000;
	double karui[T1_NOPS] = {0};
	for (size_t s = 0; s < T1_NSYS; s++) {
		const struct t1_sys *y = &T1_SYS[s];
		if (!kb_want(c, exp, y->name))
			continue;
		double v[T1_NOPS];
		t1_count(c, y, n, v);
		for (size_t op = 0; op < T1_NOPS; op++) {
			if (v[op] < 0) {
				kb_row_none(exp, y->name, "failed", "callgrind run failed");
				continue;
			}
			if (s == 0)
				karui[op] = v[op];
			kb_row(c, exp, y->name, T1_OPS[op], "instr", &v[op], 1, s ? karui[op] : 0,
			       -1);
		}
	}
}
