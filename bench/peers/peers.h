/*
 * The peers that karui-bench runs beside karui in the same run.
 *
 * Each peer function runs one experiment once, `a->iters` operations (or
 * `a->n` live flows for "many"), and fills *r with the mean cost per
 * operation in nanoseconds; karui-bench repeats calls and takes the median.
 * A function returns 0, or an errno code when the experiment cannot run
 * (r is then untouched); it prints nothing.
 *
 * Experiments (the same definitions as karui's own, in tools/karui-bench):
 *   yield        two flows on one core yielding to each other alternately;
 *                one operation = one yield (so a round trip is 2 operations)
 *   switch       two flows handing the processor directly to each other;
 *                one operation = one switch
 *   create_join  create a flow that does nothing, join it, one at a time;
 *                one operation = create + run + join
 *   create_batch create a->n flows that do nothing, then join all;
 *                one operation = one create + its join (total / n)
 *   many         create a->n flows that each block until released, then
 *                release and join all; ns_per_op = create time per flow,
 *                rss_kib = growth of the process's resident set while all
 *                a->n are alive
 *   mutex        one flow locking and unlocking an uncontended mutex;
 *                one operation = lock + unlock
 *   monitor      one flow: lock, signal a condition variable that has no
 *                waiter, unlock; one operation = the three
 *   condvar_pingpong  two flows on one core, one mutex, a condition
 *                variable each and a turn variable: each waits for its turn,
 *                gives the turn to the other and signals the other's
 *                condition variable; one operation = one round trip
 *   sem_pingpong two flows on one core, two semaphores: A posts s1 and
 *                waits on s2, B waits on s1 and posts s2; one operation =
 *                one round trip
 *   chan_pingpong  two flows on one core, two unbuffered channels of int:
 *                A sends on c1 and receives on c2, B receives on c1 and
 *                sends on c2; one operation = one round trip
 *   rendezvous   an entry call: a caller hands an int v to a server flow on
 *                the same core and blocks until the server has accepted it
 *                and replied v + 1; one operation = one call
 *   stream       a writer moves a->iters blocks of 4096 bytes to a reader
 *                that reads into a 4096-byte buffer and checks the total
 *                (EIO on a mismatch); one operation = one block
 *   skynet       a spawn tree on two cores: each flow creates 10 children
 *                down to a->n leaves (1,000,000: six levels); a leaf's
 *                result is its number, a parent's the sum of its
 *                children's, which the root checks (EIO on a mismatch:
 *                499999500000 for a million); one operation = the tree;
 *                r->peak = the most flows alive at once, sampled at every
 *                1024th leaf (created and not yet ended, or the runtime's
 *                own count of live flows)
 *   prodcons     64 producers and 64 consumers share a 64-slot buffer under
 *                one mutex with two condition variables (not full, not
 *                empty); a->iters items in all; each producer pauses 2 ms
 *                (a timed sleep) after every 1000th item it puts; consumers
 *                sum what they take and the total is checked (EIO);
 *                one operation = the whole run
 *   t1_*         seed004.table1 (tools/karui-bench/exp_table1.c): one VP or
 *                thread, one operation counted by callgrind between
 *                kb_mark_on() and kb_mark_off() in each repetition:
 *     t1_create  create a flow that does nothing, not run yet (it is joined
 *                outside the marks)
 *     t1_switch  two flows yielding to each other: from the yield call in
 *                one to the return from its yield in the other
 *     t1_stop    two flows, each waking the other and then parking: the
 *                park call, from its start in one flow to its return in the
 *                other (the register switch is left out by the runner)
 *     t1_resume  the same two flows: the call that makes the parked other
 *                runnable
 *     t1_exit    create and join a flow whose function marks on just before
 *                it returns; the joiner marks off when its join returns
 *     t1_marks   kb_mark_on(); kb_mark_off(); alone: the marks' own count
 */
#ifndef KARUI_BENCH_PEERS_H
#define KARUI_BENCH_PEERS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_args {
	long iters; /* operations to time */
	long n;     /* flows for create_batch and many */
	long l, c;  /* seed002.fig3/4: the call-nesting depths L and C */
} kb_args;

typedef struct kb_res {
	double ns_per_op;
	double rss_kib; /* "many" only; otherwise left as the caller set it */
	double peak;    /* "skynet" only; otherwise left as the caller set it */
	double ns_cached; /* seed000.table2 only */
} kb_res;

/* skynet's shape, and prodcons's */
enum { KB_SKYNET_DIV = 10, KB_SKYNET_SAMPLE = 1024 };
enum { KB_PC_FLOWS = 64, KB_PC_SLOTS = 64, KB_PC_PAUSE_EVERY = 1000 };
#define KB_PC_PAUSE_NS 2000000L

typedef int (*kb_fn)(const kb_args *a, kb_res *r);

/* seed002.fig3/fig4 (bench/peers/nest.c): from depth l, `rounds` times
 * call down to depth c and call sw(arg) there.  kb_call_nest is the loop
 * with a switch that does nothing: the calls' own cost per round. */
typedef void (*kb_sw)(void *arg);
void kb_nest_run(long l, long c, long rounds, kb_sw sw, void *arg);
int kb_call_nest(const kb_args *a, kb_res *r);
/* The switch loops: two flows, each running kb_nest_run with a->iters / 2
 * rounds, switching to the other; one operation = one switch. */
int kb_ucontext_nest(const kb_args *a, kb_res *r);
int kb_fcontext_nest(const kb_args *a, kb_res *r);

/* seed000.table2 (each call in a fresh process): a chain of a->n flows,
 * each creating the next and joining it (the inner loop, which nests the
 * flows), run 1 + a->iters times (the outer loop); ns_per_op = the first
 * pass per flow, ns_cached = each later pass per flow. */
int kb_ucontext_chain(const kb_args *a, kb_res *r);
int kb_ucontext_mprot_chain(const kb_args *a, kb_res *r);
int kb_fiber_chain(const kb_args *a, kb_res *r);
int kb_pthread_chain(const kb_args *a, kb_res *r);

/* The marks of the t1_* experiments: callgrind client requests that toggle
 * collection, in a run that starts with it off.  The state is kept here, so
 * that a mark that finds it already set does nothing: a region that opens
 * in one flow and closes in another pairs up however the flows started.
 * Without valgrind's header they do nothing (and nothing counts them). */
#if defined(__has_include) && __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KB_CG_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#else
#define KB_CG_TOGGLE() ((void)0)
#endif
extern int kb_cg_on; /* clock.c */
static inline void kb_mark_on(void)
{
	if (!kb_cg_on) {
		kb_cg_on = 1;
		KB_CG_TOGGLE();
	}
}
static inline void kb_mark_off(void)
{
	if (kb_cg_on) {
		KB_CG_TOGGLE();
		kb_cg_on = 0;
	}
}

/* monotonic nanoseconds and current RSS in KiB (bench/peers/clock.c) */
double kb_now_ns(void);
double kb_rss_kib(void);

/* pthreads: sched_yield ping-pong pinned to one CPU; create+join */
int kb_pthread_yield(const kb_args *a, kb_res *r);
int kb_pthread_create_join(const kb_args *a, kb_res *r);
int kb_pthread_create_batch(const kb_args *a, kb_res *r);
int kb_pthread_many(const kb_args *a, kb_res *r);

/* pthreads: mutex, condvar, sem_t; the two-thread ones pinned to one CPU */
int kb_pthread_mutex(const kb_args *a, kb_res *r);
int kb_pthread_monitor(const kb_args *a, kb_res *r);
int kb_pthread_condvar_pingpong(const kb_args *a, kb_res *r);
int kb_pthread_sem_pingpong(const kb_args *a, kb_res *r);
int kb_pthread_rendezvous(const kb_args *a, kb_res *r);

/* ucontext: swapcontext (makes a sigprocmask system call per switch) */
int kb_ucontext_switch(const kb_args *a, kb_res *r);
int kb_ucontext_create_join(const kb_args *a, kb_res *r);

/* Boost.Context fcontext (boost::context::detail::jump_fcontext) */
int kb_fcontext_switch(const kb_args *a, kb_res *r);
int kb_fcontext_create_join(const kb_args *a, kb_res *r);

/* Boost.Fiber: this_fiber::yield, fiber + join with a pooled stack allocator */
int kb_fiber_yield(const kb_args *a, kb_res *r);
int kb_fiber_create_join(const kb_args *a, kb_res *r);
int kb_fiber_create_batch(const kb_args *a, kb_res *r);
int kb_fiber_many(const kb_args *a, kb_res *r);

/* Boost.Fiber: fibers::mutex, condition_variable and unbuffered_channel<int> */
int kb_fiber_mutex(const kb_args *a, kb_res *r);
int kb_fiber_monitor(const kb_args *a, kb_res *r);
int kb_fiber_condvar_pingpong(const kb_args *a, kb_res *r);
int kb_fiber_chan_pingpong(const kb_args *a, kb_res *r);
int kb_fiber_chan_relay(const kb_args *a, kb_res *r);
int kb_fiber_rendezvous(const kb_args *a, kb_res *r);

/* bare: a hand-written callee-saved-only switch, the floor */
int kb_bare_switch(const kb_args *a, kb_res *r);
/* bare-fpctl: the same switch saving the FP control state as well */
int kb_bare_fpctl_switch(const kb_args *a, kb_res *r);
int kb_bare_create_join(const kb_args *a, kb_res *r);
/* bare: chan_pingpong's and chan_relay's switches alone (round trips) */
int kb_bare_pingpong(const kb_args *a, kb_res *r);
int kb_bare_relay(const kb_args *a, kb_res *r);

/* bare: a test-and-test-and-set spin lock, the floor for mutex */
int kb_spin_mutex(const kb_args *a, kb_res *r);

/* pthreads: prodcons, 128 threads, one mutex, two condvars, nanosleep */
int kb_pthread_prodcons(const kb_args *a, kb_res *r);

/* Boost.Fiber: skynet with the work_stealing scheduler on two threads */
int kb_fiber_skynet(const kb_args *a, kb_res *r);

/* Boost.Fiber: seed004.table1's operations (t1_* above): fiber with
 * launch::post and a pooled stack, this_fiber::yield, context::suspend,
 * context::schedule, a fiber's return and join */
int kb_fiber_t1_create(const kb_args *a, kb_res *r);
int kb_fiber_t1_switch(const kb_args *a, kb_res *r);
int kb_fiber_t1_stop(const kb_args *a, kb_res *r);
int kb_fiber_t1_resume(const kb_args *a, kb_res *r);
int kb_fiber_t1_exit(const kb_args *a, kb_res *r);
int kb_fiber_t1_marks(const kb_args *a, kb_res *r);

/* UNIX: a pipe between two processes (fork), a->iters 4 KiB blocks */
int kb_unix_pipe_stream(const kb_args *a, kb_res *r);

#ifdef __cplusplus
}
#endif
#endif
