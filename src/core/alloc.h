/*
 * karui L2 — the seam for a processor allocator (kr_config.alloc): the
 * layer above that decides how many of the process's VPs run (the C-area,
 * src/carea), and the few calls of L2 it needs for that.
 *
 * The target.  L2 keeps `active` VPs running, those neither blocked in a
 * blocking section nor parked (blocking.c); without an allocator the
 * target is kr_config.vps, for good.  An allocator moves it
 * (kr__vp_target): parked VPs resume up to it at once, and a VP above it
 * parks when it goes idle (its idle hook calls kr__vp_retire).  A busy VP
 * above it the allocator stops itself: it interrupts the VP with a
 * signal, whose handler calls kr__preempt.
 *
 * kr__preempt.  Called in a signal handler that interrupted a microprocess
 * on this VP, it saves the whole interrupted context on the
 * microprocess's own stack (every register, the FP and vector state, as
 * the kernel gave it to the handler), so that any VP can resume it with a
 * plain switch: the switch returns into kr__preempt_resume, which gives the
 * copy back to the kernel's rt_sigreturn on the resuming thread.  Then it
 * leaves the handler for this VP's idle context, with the microprocess in
 * w->held: the idle hook decides what becomes of it (queued at once: a
 * time slice ended; held for recovery: the VP stops).  It refuses, and
 * returns, where the microprocess cannot be taken away at that
 * instruction: no microprocess (the idle loop), inside a blocking section,
 * holding a kr_spin lock, a system call about to restart, too little
 * stack, karui's code on the microprocess's stack (karui running for it,
 * see preempt.c), and in the sanitizer builds always (its callers then
 * stop the VP at its next idle turn instead); its caller has already
 * refused karui's and the C library's own code.
 *
 * The hooks run on the VP they name.  A program that has no allocator
 * pays nothing on its fast paths: the busy VPs' turn reaches the
 * allocator through the timers' turn, which an allocator keeps on by
 * counting as a worker away (G.naway).
 */
#ifndef KARUI_CORE_ALLOC_H
#define KARUI_CORE_ALLOC_H

#include <signal.h>

#include "internal.h"

struct kr_alloc {
	/* kr_init, on its thread, before any VP runs microprocesses: nvp is
	 * the VP count chosen.  Returns the first target (1..nvp). */
	unsigned (*start)(unsigned nvp);
	void (*stop)(void);                         /* teardown, VPs ended */
	void (*vp_start)(struct kr_worker *w);      /* a VP's thread starts */
	void (*vp_stop)(struct kr_worker *w);       /* ... and ends */
	void (*turn)(struct kr_worker *w);          /* a busy VP's turn */
	/* The idle loop with nothing handed over, and w->held (NULL, or a
	 * microprocess kr__preempt took from w).  Returns what w runs next
	 * (NULL: none; the loop goes on looking for work). */
	kr_mp *(*idle)(struct kr_worker *w, kr_mp *held);
};

/* Run at most n (1..vps) VPs.  Any thread, a signal handler too. */
void kr__vp_target(unsigned n);
/* On VP w, idle: park while more VPs are active than the target, at most
 * until deadline.  0: it did not need to park; 1: it parked, and runs
 * again within the target (or karui stops); 2: it parked until the
 * deadline, and runs again above the target. */
int kr__vp_retire(struct kr_worker *w, uint64_t deadline);
/* Make mp, which w->held gave, ready on the calling VP (the recovery of
 * seed 004's protocol: it runs on where it was stopped). */
void kr__mp_ready(kr_mp *mp);
/* See the top.  hook(arg), if not NULL, is called on the thread that
 * resumes the microprocess, just before it goes on.  Returns only when it
 * refuses: EAGAIN. */
int kr__preempt(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg);
/* kr__preempt for a wait that another thread ends (the page-fault
 * notifier's, carea/faults.c): the interrupted microprocess is taken as
 * kr__preempt takes it, with the same refusals, and the VP's idle loop,
 * off the signal stack, gives its handle to held(mp, held_arg) rather than to an
 * allocator (none is needed).  Its permit is left alone (it is still
 * running, as the core sees it: a wakeup sets the permit).  Whoever
 * ends the wait makes it ready with kr__mp_ready_any, from any thread;
 * hook(arg), if not NULL, is called on the VP that resumes it.  Returns
 * only when it refuses: EAGAIN. */
int kr__preempt_hold(ucontext_t *uc, void (*held)(kr_mp *mp, uintptr_t held_arg),
		     uintptr_t held_arg, void (*hook)(uintptr_t), uintptr_t arg);
/* Make ready the microprocess of handle h that kr__preempt_hold gave to a
 * held(), from any thread (not a signal handler): on a VP, onto its queue;
 * off one, through the scheduler, or posted to the one VP (permit.h). */
void kr__mp_ready_any(kr_mp *h);
/* kr_init's, with an allocator or once kr__preempt_want was called, once
 * the VPs run: finds karui's code and the C library's and runs the probe
 * kr__preempt needs (preempt.c); until then it refuses. */
void kr__preempt_init(void);
/* kr__preempt is wanted without an allocator: kr__preempt_init now, if
 * called on a VP and not done yet, and at each kr_init from now on. */
void kr__preempt_want(void);
int kr__preempt_wanted(void);
/* Is ip in karui's own code?  (Any thread, a signal handler too.) */
int kr__in_karui(uintptr_t ip);
/* ... in karui's, the C library's or the dynamic linker's, where a
 * microprocess may hold a lock or a thread's data: the code a caller of
 * kr__preempt refuses (found by kr__preempt_init). */
int kr__in_runtime(uintptr_t ip);
/* The thread pointer, read without using it (a handler that may have
 * interrupted code running on another one: a μprocess's). */
uintptr_t kr__thread_pointer(void);
/* In a signal handler: the VP it runs on, if the code it interrupted ran
 * with that VP's own thread pointer (else NULL: a thread that is no VP,
 * or a μprocess's code); nothing thread-local is read first. */
struct kr_worker *kr__signal_worker(void);
/* Is thread tid a VP's?  (Any thread.) */
int kr__vp_tid(int tid);
/* worker_new (w) and worker_free (NULL) of VP id, on w's thread. */
void kr__preempt_vp(struct kr_worker *w, unsigned id);

#endif
