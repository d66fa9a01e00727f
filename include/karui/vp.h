/*
 * karui L0 — virtual processors (seed 000 §2.3, Table 1).
 *
 * A virtual processor (VP) is a kernel thread of this process that runs
 * user-level code: normally karui's scheduler, or, at scheduling level 0, a
 * scheduler the application writes itself on these calls and L1.
 *
 *   kr_vp_allocate(&vps, n, fn, arg)  start n VPs, each running fn(vp, arg)
 *   kr_vp_adopt(&vp)                  make the calling thread a VP (e.g. main)
 *   kr_vp_sleep_until(deadline)       park the calling VP until a wakeup or
 *                                     the deadline
 *   kr_vp_wakeup(n)                   resume up to n parked VPs
 *   kr_vp_switch()                    give this VP's processor to another
 *                                     thread of the system (see below)
 *   kr_vp_area(vp)                    the VP's private area
 *
 * Sleep and wakeup have counting-semaphore semantics over the process: a
 * wakeup posted while no VP sleeps is kept (up to one per live VP) and the
 * next kr_vp_sleep_until returns at once.  So a VP that announces itself idle,
 * looks for work once more and then sleeps can never miss the wakeup of a
 * producer that saw it idle — the protocol L2 builds on.  A sleeping VP
 * costs no CPU: it spins for at most KR_VP_SPIN_NS and then waits on a
 * futex, or on an event source that also waits on that futex
 * (kr_vp_sleep_begin).
 *
 * Each VP has a status word that any thread may read: RUNNING, SLEEPING,
 * BLOCKED (in a kernel call that may block), SUSPENDED (taken off its
 * processor), EXITED.  VPs come and go at run time: one ends when its
 * function returns and is reaped by kr_vp_join.
 *
 * Signals.  Every VP thread has an alternate signal stack (64 KiB or more),
 * unless it had one of its own when it became a VP: a handler installed
 * with SA_ONSTACK runs there instead of on the stack of the interrupted
 * microprocess, which may be one page, or full (its guard page's SIGSEGV).
 * Threads that kr_vp_allocate starts block every signal but those of
 * their own faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS).
 *
 * Fork.  The child of a fork() has no VPs: its thread is no VP (the calls
 * that need one return EPERM), kr_vp_count is 0, and it may allocate or
 * adopt VPs of its own.  A child forked on a thread that kr_vp_allocate
 * started gets, instead of that thread's mask, the application's: the
 * mask of the thread that called kr_vp_allocate, or if that was a VP, the
 * application's mask of that VP (an adopted one's is its mask when it was
 * adopted).
 *
 * kr_vp_switch: Linux offers no unprivileged directed yield to a chosen
 * thread, so this is sched_yield(): the caller's processor goes to another
 * runnable thread, which on a crowded CPU is often the preempted lock holder
 * the seed had in mind.  Nothing more is promised.
 *
 * Calls return 0 or a positive errno code, accessors their value (the
 * rule of include/karui.h).  kr_vp_allocate, kr_vp_adopt, kr_vp_join,
 * kr_vp_wakeup and the accessors work on any thread; the others need a VP
 * (EPERM).
 */
#ifndef KARUI_VP_H
#define KARUI_VP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_vp kr_vp;
typedef void (*kr_vp_main)(kr_vp *vp, void *arg);

enum kr_vp_state {
	KR_VP_RUNNING = 1,
	KR_VP_SLEEPING,
	KR_VP_BLOCKED,
	KR_VP_SUSPENDED,
	KR_VP_EXITED,
};

#define KR_VP_MAX 256           /* live VPs per process */
#define KR_VP_AREA_SIZE 256     /* bytes of private area per VP */
#define KR_VP_SPIN_NS 20000     /* bounded spin before a sleep parks */

/* Time, for every layer: kr_now() is CLOCK_MONOTONIC in nanoseconds, and
 * every call of karui that waits takes an absolute deadline on that clock,
 * KR_FOREVER meaning none. */
#define KR_FOREVER UINT64_MAX
uint64_t kr_now(void);

/* Start n VPs running fn(vp, arg); *out (n entries, may be NULL) receives
 * their handles.  All start or none does.  EINVAL: n == 0 or fn NULL;
 * EAGAIN: more than KR_VP_MAX live VPs, or the kernel refused a thread;
 * ENOMEM: no memory. */
int kr_vp_allocate(kr_vp **out, unsigned n, kr_vp_main fn, void *arg);

/* Make the calling thread a VP.  EEXIST if it is one already; EAGAIN:
 * KR_VP_MAX live VPs; ENOMEM: no memory. */
int kr_vp_adopt(kr_vp **out);

/* The calling adopted thread stops being a VP.  EPERM: not a VP;
 * EINVAL: the VP was started by kr_vp_allocate (return from fn instead);
 * EBUSY: karui runs on it (kr_init made it a VP; kr_fini releases it). */
int kr_vp_release(void);

/* Wait for a VP started by kr_vp_allocate to return from fn, then free it.
 * EINVAL: NULL or an adopted VP; EDEADLK: the caller itself. */
int kr_vp_join(kr_vp *vp);

kr_vp *kr_vp_self(void);               /* NULL on a thread that is no VP */
unsigned kr_vp_id(const kr_vp *vp);    /* 0 .. KR_VP_MAX-1, reused */
unsigned kr_vp_count(void);            /* live VPs */
int kr_vp_status(const kr_vp *vp);     /* enum kr_vp_state */
void *kr_vp_area(kr_vp *vp);           /* KR_VP_AREA_SIZE bytes, zeroed */

/* Park the calling VP until a wakeup or until the kr_now() deadline
 * (a deadline already past, such as 0: only consume a pending wakeup;
 * KR_FOREVER: no limit).  Returns 0 when woken, ETIMEDOUT, or EPERM on a
 * thread that is no VP. */
int kr_vp_sleep_until(uint64_t deadline);

/* Resume up to n sleeping VPs, keeping the rest as pending wakeups (at most
 * one per live VP).  EINVAL: n == 0. */
int kr_vp_wakeup(unsigned n);

/* Sleeping on an event source.  A source that can also wait on a futex
 * word (io_uring's FUTEX_WAIT) parks a VP on its own events and on
 * kr_vp_wakeup at once.  Such a wait may stay queued in the source after
 * the VP woke for another reason; L0 counts those, so that a wakeup is
 * not spent on them.
 *
 *   kr_vp_sleep_begin(&word, queued)
 *        0: a pending wakeup was taken, do not sleep.  EAGAIN: none was;
 *        the VP now counts as sleeping: wait while *word reads 0 (a
 *        private 32-bit futex).  queued: a wait of this VP's from an
 *        earlier sleep is still queued on the word (it serves this one).
 *   kr_vp_sleep_end(queued)
 *        the VP no longer counts as sleeping; queued: its wait stays
 *        queued.  0 if it took a pending wakeup, ETIMEDOUT if none.
 *   kr_vp_wait_ended()
 *        a wait left queued by kr_vp_sleep_end has ended (it fired, or
 *        was cancelled); the VP may be gone by then.
 *
 * EPERM: the first two off a VP; EINVAL: word NULL. */
int kr_vp_sleep_begin(uint32_t **word, int queued);
int kr_vp_sleep_end(int queued);
void kr_vp_wait_ended(void);

/* The calling VP publishes its status for other VPs to read: RUNNING,
 * BLOCKED (about to enter a kernel call that may block), SLEEPING or
 * SUSPENDED (an upper layer parks it its own way).  EINVAL: another value;
 * EPERM: not a VP. */
int kr_vp_publish(int status);

/* Give the processor away (sched_yield).  EPERM on a thread that is no VP. */
int kr_vp_switch(void);

/* Tell the processor that the caller is spinning (x86 pause, Arm yield):
 * for the wait loops of VPs and of the layers above. */
static inline void kr_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#ifdef __cplusplus
}
#endif
#endif
