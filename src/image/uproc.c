/*
 * karui image layer — μprocesses: their life, and the way every system
 * call they make reaches karui.
 *
 * A μprocess is a microprocess whose code is a program's private image
 * (elf.c): kr_uproc_spawn maps the program, its ld.so and a stack the
 * size of a process's main stack (one of the μprocess's regions, like
 * everything it maps), and creates a microprocess with a small stack of
 * its own, which lays out the initial stack of execve (argc, argv, envp,
 * auxv) on the μprocess's and jumps to ld.so's entry (gate.S:
 * kr__img_start).  From then on the μprocess's code runs as if it were
 * alone in a process: its ld.so loads its libraries and its own C
 * library, whose thread pointer (%fs) karui keeps per μprocess.  Or the
 * spawn finds a kept image of the program (reuse.c) and starts it at the
 * program's entry instead.
 *
 * Interception.  Each VP that runs a μprocess is armed once (kr__img_arm): its
 * %gs base points at its struct kr__img_vp, whose first byte is the
 * selector of Syscall User Dispatch, switched on for the thread with the
 * gate (gate.S) as the only region whose system calls always pass.  The
 * selector says BLOCK exactly while a μprocess's code runs, so karui's and
 * the host's own calls go straight to the kernel and every call of a
 * μprocess, whatever code makes it (its libc's wrappers, its ld.so, inline
 * assembly), raises SIGSYS.  The handler (gate.S, then kr__img_trap) runs
 * on the μprocess's stack as ordinary microprocess code: a call that waits
 * (a pipe read) parks only this microprocess, and it may resume on
 * another VP, which is armed then if it was not.  SA_NODEFER keeps SIGSYS
 * unblocked while a handler is parked, so the next μprocess on the VP can
 * trap too.  sys.c's table decides what each call does.
 *
 * Signals (signal.c).  A signal for a μprocess, or for one of its
 * threads, is queued in its struct, and every way back into a thread's
 * code (gate.S: kr__img_back, the fastcalls' look at attn) delivers what
 * the thread does not block: its handler, entered through the kernel's
 * frame of the trap, fault or kick, or the default action.
 * kr_uproc_kill, kill from another μprocess and its timer also cut short
 * the wait the thread it goes to is in (kr_mp_cancel, its killfd) and,
 * when the VP it last ran on runs a μprocess's code, interrupt that VP
 * with KR__SIGKICK, whose handler (on the VP's alternate stack) delivers
 * into the code it interrupted: a thread that makes no system call gets
 * its signals too (kr__uthr_poke).
 *
 * Threads (thread.c).  A μprocess's threads are microprocesses of their
 * own, each with a struct kr__uthr (the first is part of the kr_uproc):
 * every trap and fault is served for the thread whose microprocess it is
 * (kr__uthr_self), and each VP's record names the thread whose code it
 * runs (gate.S reads its attn there, fast.c finds it there).
 *
 * The end.  exit_group, a return from main (which calls it), a signal
 * whose default action ends a process (abort(), raise(), a kill), and a
 * fault in its code (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) that no handler of
 * its own takes (the fault's handler runs on the VP's alternate stack and
 * redirects the thread to `die` on its microprocess's stack) end the
 * μprocess alone; exit ends its calling thread.  kr__uthr_end moves to
 * the thread's microprocess's stack; the μprocess's end tells every other
 * thread to end, and its first thread, once they have, keeps the image or
 * not (reuse.c), unmaps everything else it mapped, closes its fds and ends
 * its microprocess; kr_uproc_wait collects the status a shell shows.  A
 * fault in karui's or the host's code is passed to the handler that was
 * there before (the core's overflow report, or the default action).
 *
 * The time slice.  The core does not preempt microprocesses, and a
 * μprocess's threads may outnumber the VPs: the ticker (below) interrupts
 * a VP that has run a μprocess's code for a whole tick, and its thread
 * yields (signal.c: kr__img_signal, gate.S: kr__img_yield).
 *
 * exec and vfork (sys_exec.c reads their arguments).  exec loads the new
 * image (a kept one, or afresh) while the old one is still mapped, then,
 * on the microprocess's own stack, releases the old one (kept as at an
 * exit, if it can be) and starts the new one as a spawn does: same
 * struct, pid, fds and microprocess.  A vfork child is a kr_uproc of its
 * own (pid, fds, cwd, signal state) that runs on its parent's
 * microprocess and memory: kr__uproc_self finds it through the parent's
 * `vchild`, and its memory calls act on the parent (kr__mm).  The
 * parent's registers, vector state included, are copied from the trap's
 * frame (which the child, on the same stack, overwrites) into a signal
 * frame of karui's; when the child execs (its new image gets a
 * microprocess of its own) or ends (a zombie), the parent resumes from
 * that frame through the gate's rt_sigreturn, its call returning the
 * child's pid.  A child of a μprocess is collected by its wait4 (a
 * zombie until then), or frees itself at its end when its parent ended
 * first or ignores SIGCHLD.
 *
 * Rejected: switching %fs and the selector in the core's context switch
 * (every switch of every microprocess would pay for μprocesses); a
 * μprocess's code reaches karui only through a trap, so the handler's
 * entry and exit are the only places that need them.  glibc's dlmopen
 * namespaces (at most 15 μprocesses).
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../arch/pkeys.h"
#include "uproc.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Instrumented karui code (the trap's) runs on the μprocess's stack and
 * leaves frames there that it never returns from: their shadow is
 * cleared when the stack is taken up and when it is left. */
#define STACK_CLEAN(up) __asan_unpoison_memory_region((void *)(up)->stk_lo, (up)->stk_hi - (up)->stk_lo)
/* The same for frames left on the microprocess's own stack below die_sp,
 * where an isolated μprocess's calls run (iso.c), when its end or exec
 * starts again at die_sp. */
#define DIE_STACK_CLEAN(t)                                                                     \
	do {                                                                                   \
		uintptr_t f_ = (uintptr_t)__builtin_frame_address(0);                          \
		if (f_ < (t)->die_sp && (t)->die_sp - f_ < KR__ISO_MP_STACK)                   \
			__asan_unpoison_memory_region((void *)f_, (t)->die_sp - f_);           \
	} while (0)
#else
#define STACK_CLEAN(up) ((void)0)
#define DIE_STACK_CLEAN(t) ((void)0)
#endif

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif
#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif
#define KSA_RESTORER 0x04000000
/* gate.S's UC_RIP */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]) == 168, "ucontext_t's RIP");
#define STACK_SIZE ((size_t)8 << 20)     /* a process's main stack, */
#define ARG_ROOM ((size_t)2 << 20)       /* and above it its arguments */
#define PG 4096ul
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

static struct {
	pthread_mutex_t lock;
	int state;                    /* 0 not tried, 1 ready, else the error */
	struct sigaction old[32];     /* fault handlers before ours */
	pid_t next_pid;
	pthread_key_t vpkey;          /* disarms a thread that ends */
	struct kr__img_vp *vps;       /* every record made (never freed) */
	struct kr_uproc *live;        /* spawned and not yet waited for */
	int rewrite;                  /* KARUI_UPROC_REWRITE=0 turns it off */
	pthread_cond_t live_cv;       /* the ticker waits there for a μprocess */
	int ticking;                  /* the ticker runs */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .live_cv = PTHREAD_COND_INITIALIZER};

static __thread struct kr__img_vp *tvp;
int kr__img_trace;
uint8_t kr__img_avx; /* vzeroupper may be run (gate.S) */
uint8_t kr__img_xsavec; /* XSAVEC may be run (gate.S; else XSAVE) */

static inline uint64_t rdgsbase(void)
{
	uint64_t v;
	__asm__ volatile("rdgsbase %0" : "=r"(v));
	return v;
}

static inline void wrgsbase(uint64_t v)
{
	__asm__ volatile("wrgsbase %0" ::"r"(v) : "memory");
}

static inline uint64_t rdfsbase(void)
{
	uint64_t v;
	__asm__ volatile("rdfsbase %0" : "=r"(v));
	return v;
}

struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* A thread that ran μprocesses ends: dispatch off, its record free. */
static void disarm(void *p)
{
	struct kr__img_vp *v = p;
	prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
	wrgsbase(0);
	tvp = NULL;
	kr__iso_show(v, NULL);
	pthread_mutex_lock(&G.lock);
	v->tid = 0;
	pthread_mutex_unlock(&G.lock);
}

/* Arm the calling VP: %gs, the selector, dispatch on.  Its record stays
 * its own until the thread ends, and is then reused by another.
 *
 * A thread inherits the %gs base of the thread that created it, so one
 * created by an armed thread (a VP started later, a spare VP, a host
 * thread) starts pointing at its creator's record.  Records are never
 * freed, and each names the thread it arms: kr__img_arm takes a %gs base that is
 * one of them for inherited, and the fault handler (gate.S) acts for a
 * μprocess only on the thread its record names.  Any other non-zero base
 * is someone else's use of %gs. */
int kr__img_arm(void)
{
	if (tvp)
		return 0;
	uint64_t gs = rdgsbase();
	pid_t self = gettid();
	struct kr__img_vp *v, *spare = NULL;
	int inherited = 0;
	pthread_mutex_lock(&G.lock);
	for (v = G.vps; v; v = v->next) {
		inherited |= (uint64_t)v == gs;
		if (!v->tid && !spare)
			spare = v;
	}
	if (gs && !inherited) {
		pthread_mutex_unlock(&G.lock);
		return ENOTSUP;
	}
	if (!spare) {
		spare = aligned_alloc(64, 64);
		if (!spare) {
			pthread_mutex_unlock(&G.lock);
			return ENOMEM;
		}
		memset(spare, 0, 64);
		spare->next = G.vps;
		G.vps = spare;
	}
	v = spare;
	v->tid = self;
	v->selector = 0;
	v->host_fs = rdfsbase();
	pthread_mutex_unlock(&G.lock);
	int e = pthread_setspecific(G.vpkey, v) ? ENOMEM : 0;
	if (!e && prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
			(unsigned long)kr__img_gate,
			(unsigned long)(kr__img_gate_end - kr__img_gate), &v->selector)) {
		e = errno == EINVAL ? ENOTSUP : errno;
		pthread_setspecific(G.vpkey, NULL);
	}
	if (e) {
		pthread_mutex_lock(&G.lock);
		v->tid = 0;
		pthread_mutex_unlock(&G.lock);
		return e;
	}
	wrgsbase((uint64_t)v);
	tvp = v;
	sigset_t kick;
	sigemptyset(&kick);
	sigaddset(&kick, KR__SIGKICK);
	pthread_sigmask(SIG_UNBLOCK, &kick, NULL);
	return 0;
}

/* Fork.  The kernel does not keep Syscall User Dispatch in the child,
 * whose one thread inherits the forking thread's %gs base and `tvp`: it
 * is no armed VP, and the records name the parent's threads.  Without
 * this, a μprocess started in the child would make its system calls to
 * the kernel itself (its exit would end the child). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&G.lock);
	kr__iso_lock();
}
static void fork_parent(void)
{
	kr__iso_unlock();
	pthread_mutex_unlock(&G.lock);
}
static void fork_child(void)
{
	kr__iso_unlock();
	G.ticking = 0; /* no thread but this one in the child */
	pthread_cond_init(&G.live_cv, NULL);
	uint64_t gs = rdgsbase();
	for (struct kr__img_vp *v = G.vps; v; v = v->next) {
		v->tid = 0;
		v->shown = NULL; /* what the parent's VPs showed: nothing of the child's */
		if ((uint64_t)v == gs)
			wrgsbase(0);
	}
	tvp = NULL;
	kr__rw_forked();
	pthread_mutex_unlock(&G.lock);
}

static int install_handlers(void)
{
	if (!(getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE))
		return ENOTSUP;
	/* Syscall User Dispatch present?  Try it on a thread of our own,
	 * the calling VP: switched on and at once off again. */
	static char probe_sel;
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, (unsigned long)kr__img_gate,
		  (unsigned long)(kr__img_gate_end - kr__img_gate), &probe_sel))
		return ENOTSUP;
	prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);

	if (pthread_key_create(&G.vpkey, disarm) ||
	    pthread_atfork(fork_prepare, fork_parent, fork_child))
		return EAGAIN;
	struct ksigaction ks = {.handler = kr__img_sigsys,
				.flags = SA_SIGINFO | SA_NODEFER | KSA_RESTORER,
				.restorer = kr__img_restorer};
	if (syscall(SYS_rt_sigaction, SIGSYS, &ks, NULL, 8))
		return errno;
	static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};
	for (unsigned i = 0; i < sizeof faults / sizeof *faults; i++) {
		int s = faults[i];
		sigaction(s, NULL, &G.old[s]);
		struct ksigaction kf = {.handler = kr__img_sigfault,
					.flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER |
						 KSA_RESTORER,
					.restorer = kr__img_restorer};
		if (syscall(SYS_rt_sigaction, s, &kf, NULL, 8))
			return errno;
	}
	struct ksigaction kk = {.handler = kr__img_sigkick,
				.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | KSA_RESTORER,
				.restorer = kr__img_restorer};
	if (syscall(SYS_rt_sigaction, KR__SIGKICK, &kk, NULL, 8))
		return errno;
	kr__img_trace = getenv("KARUI_UPROC_TRACE") != NULL;
	kr__sys_init();
	kr__cache_init();
	kr__cache_cpuid_load();
	kr__img_avx = (uint8_t)__builtin_cpu_supports("avx");
	unsigned xa, xb, xc, xd; /* CPUID.(0xd, 1).EAX bit 1: XSAVEC */
	kr__img_xsavec = __get_cpuid_count(0xd, 1, &xa, &xb, &xc, &xd) && (xa & 2);
	const char *rw = getenv("KARUI_UPROC_REWRITE");
	G.rewrite = !(rw && !strcmp(rw, "0"));
	/* pids no real process has (above PID_MAX_LIMIT), apart per host */
	G.next_pid = (pid_t)(4194304 + ((unsigned)getpid() % 65536) * 16384);
	return 0;
}

/* The time slice.  μprocesses are not preempted by the core, and their
 * threads may outnumber the VPs: a thread that computes, or spins on a
 * lock of its own, would keep its VP from the others (and from the host's
 * microprocesses) for ever.  A ticker thread looks at every VP's record
 * each SLICE: one that ran a μprocess's code at this tick and at the last
 * is kicked (KR__SIGKICK, as a signal for it is) with `preempt` set, and
 * the kick, where it finds the μprocess's code, makes the thread yield its
 * VP (signal.c: kr__img_signal).  While no VP runs a μprocess's code the
 * ticks grow apart, up to SLICE_IDLE; while no μprocess lives the ticker
 * sleeps. */
#define SLICE_NS 10000000L
#define SLICE_IDLE_NS 640000000L

static void *ticker(void *arg)
{
	long ns = SLICE_NS;
	for (;;) {
		int running = 0;
		pthread_mutex_lock(&G.lock);
		while (!G.live)
			pthread_cond_wait(&G.live_cv, &G.lock);
		for (struct kr__img_vp *v = G.vps; v; v = v->next) {
			int in = v->tid && __atomic_load_n(&v->selector, __ATOMIC_SEQ_CST) == 1;
			if (in && v->seen) {
				__atomic_store_n(&v->preempt, 1, __ATOMIC_SEQ_CST);
				syscall(SYS_tgkill, getpid(), v->tid, KR__SIGKICK);
			}
			v->seen = (uint8_t)in;
			running |= in;
		}
		pthread_mutex_unlock(&G.lock);
		ns = running ? SLICE_NS : ns * 2 < SLICE_IDLE_NS ? ns * 2 : SLICE_IDLE_NS;
		struct timespec t = {0, ns};
		nanosleep(&t, NULL);
	}
	return arg;
}

int kr__img_preempted(void)
{
	return tvp && __atomic_exchange_n(&tvp->preempt, 0, __ATOMIC_SEQ_CST);
}

static int ready(void)
{
	pthread_mutex_lock(&G.lock);
	if (G.state == 0) {
		int e = install_handlers();
		G.state = e ? e : 1;
	}
	int st = G.state;
	if (st == 1 && !G.ticking) {
		/* its signals blocked: it takes none of the process's */
		pthread_t th;
		pthread_attr_t a;
		sigset_t all, old;
		sigfillset(&all);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 << 10);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		G.ticking = !pthread_create(&th, &a, ticker, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	pthread_mutex_unlock(&G.lock);
	return st == 1 ? 0 : st;
}

struct kr__uthr *kr__uthr_self(void)
{
	struct kr__uthr *t = kr__call_self(); /* a call in flight here (call.c) */
	if (t)
		return t;
	kr_mp *mp = kr_mp_self();
	t = mp ? kr_mp_udata(mp) : NULL;
	if (!t || t->magic != KR_UTHR_MAGIC)
		return NULL;
	while (t->vchild) /* a vfork child runs on its parent's microprocess */
		t = &t->vchild->main;
	return t;
}

struct kr_uproc *kr__uproc_self(void)
{
	struct kr__uthr *t = kr__uthr_self();
	return t ? t->up : NULL;
}

void kr__uproc_lock(void)
{
	pthread_mutex_lock(&G.lock);
}

void kr__uproc_unlock(void)
{
	pthread_mutex_unlock(&G.lock);
}

pid_t kr__uproc_new_pid(void)
{
	pthread_mutex_lock(&G.lock);
	pid_t pid = G.next_pid++;
	pthread_mutex_unlock(&G.lock);
	return pid;
}

/* A zeroed μprocess record. */
static struct kr_uproc *uproc_alloc(void)
{
	struct kr_uproc *up = calloc(1, sizeof *up);
	if (up)
		pthread_mutex_init(&up->mlock, NULL);
	return up;
}

/* ---------------- regions: what a μprocess has mapped ---------------- */

static int meets(const struct kr__region *r, size_t n, uintptr_t lo, uintptr_t hi)
{
	for (size_t i = 0; i < n; i++)
		if (__atomic_load_n(&r[i].lo, __ATOMIC_RELAXED) < hi &&
		    lo < __atomic_load_n(&r[i].hi, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

int kr__rl_meets(const struct kr__rlist *l, uintptr_t lo, uintptr_t hi)
{
	return kr__rl_read(l, lo, hi, meets);
}

static void rl_begin(struct kr__rlist *l)
{
	__atomic_store_n(&l->seq, l->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void rl_end(struct kr__rlist *l)
{
	__atomic_store_n(&l->seq, l->seq + 1, __ATOMIC_RELEASE);
}

/* Room for more: a new array twice the size, the old one kept (a reader
 * may be in it).  0 or ENOMEM. */
static int rl_grow(struct kr__rlist *l)
{
	size_t cap = l->cap ? l->cap * 2 : 64;
	struct kr__region *n =
		l->nold < sizeof l->old / sizeof *l->old ? malloc(cap * sizeof *n) : NULL;
	if (!n)
		return ENOMEM;
	if (l->n)
		memcpy(n, l->r, l->n * sizeof *n);
	if (l->r)
		l->old[l->nold++] = l->r;
	__atomic_store_n(&l->r, n, __ATOMIC_RELEASE);
	__atomic_store_n(&l->cap, cap, __ATOMIC_RELEASE);
	return 0;
}

static void rl_del(struct kr__rlist *l, uintptr_t lo, uintptr_t hi)
{
	for (size_t i = 0; i < l->n;) {
		struct kr__region *r = &l->r[i];
		if (r->hi <= lo || r->lo >= hi) {
			i++;
			continue;
		}
		if (r->lo < lo && r->hi > hi) { /* split in two */
			if (l->n == l->cap) {
				if (rl_grow(l)) { /* kept whole: unmapped at the end anyway */
					__atomic_store_n(&l->lost, 1, __ATOMIC_RELAXED);
					return;
				}
				r = &l->r[i];
			}
			memmove(r + 2, r + 1, (l->n - i - 1) * sizeof *r);
			r[1] = (struct kr__region){hi, r->hi};
			r->hi = lo;
			l->n++;
			return;
		}
		if (r->lo < lo) {
			r->hi = lo;
			i++;
		} else if (r->hi > hi) {
			r->lo = hi;
			i++;
		} else {
			memmove(r, r + 1, (l->n - i - 1) * sizeof *r);
			l->n--;
		}
	}
}

void kr__rl_del(struct kr__rlist *l, uintptr_t lo, uintptr_t hi)
{
	rl_begin(l);
	rl_del(l, lo, hi);
	rl_end(l);
}

int kr__rl_add(struct kr__rlist *l, uintptr_t lo, uintptr_t hi)
{
	if (l->n + 2 > l->cap && rl_grow(l))
		return ENOMEM;
	rl_begin(l);
	rl_del(l, lo, hi);
	size_t i = 0;
	while (i < l->n && l->r[i].lo < lo)
		i++;
	memmove(&l->r[i + 1], &l->r[i], (l->n - i) * sizeof *l->r);
	l->r[i] = (struct kr__region){lo, hi};
	l->n++;
	rl_end(l);
	return 0;
}

void kr__rl_free(struct kr__rlist *l)
{
	for (unsigned i = 0; i < l->nold; i++)
		free(l->old[i]);
	free(l->r);
	memset(l, 0, sizeof *l);
}

/* Unmap every range of l: adjacent ones in one call, one TLB shoot-down
 * rather than one each. */
void kr__rl_unmap(const struct kr__rlist *l)
{
	for (size_t i = 0; i < l->n;) {
		uintptr_t lo = l->r[i].lo, hi = l->r[i].hi;
		for (i++; i < l->n && l->r[i].lo == hi; i++)
			hi = l->r[i].hi;
		munmap((void *)lo, hi - lo);
	}
}

/* wr (and wrx) follow a change of [lo, hi) to prot, for the whole life
 * of every μprocess: the image is taken from wr at the handover (reuse.c),
 * a deferred fork copies the parent's writable memory (fork.c), a pipe's
 * read checks its buffer against it (kr__upipe_probe), an isolated
 * μprocess's closing and opening read them (iso.c, under its lock), and
 * wrx is kept for it alone.  ENOMEM for an isolated one; for the others
 * the image is then not taken and a fork is a real one (`wr_lost`).  A
 * range missing from wr only costs a read the probe's writes; one left
 * there that is no longer writable (lost) stops its use. */
static int track(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot)
{
	if (up->isolate)
		kr__iso_lock();
	int e = 0;
	int was = up->isolate && kr__rl_meets(&up->wr, lo, hi);
	if (!(prot & PROT_WRITE))
		kr__rl_del(&up->wr, lo, hi);
	else
		e = kr__rl_add(&up->wr, lo, hi);
	if (up->isolate)
		kr__iso_keyed(up, lo, hi, prot, was); /* under its key (iso.c) */
	if (up->isolate && (prot & (PROT_WRITE | PROT_EXEC)) == (PROT_WRITE | PROT_EXEC))
		e |= kr__rl_add(&up->wrx, lo, hi);
	else if (up->isolate)
		kr__rl_del(&up->wrx, lo, hi);
	if (up->isolate)
		kr__iso_unlock();
	if (e) {
		up->snap = 0; /* no image taken */
		up->wr_lost = 1;
	}
	return up->isolate ? e : 0;
}

/* A mapping of the μprocess's own, made or changed.  A change after the
 * handover to a region of the image makes the image unfit to keep. */
int kr__uproc_mapped(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot)
{
	kr__img_dirty(up, lo, hi);
	if (kr__rl_add(&up->reg, lo, hi))
		return ENOMEM;
	return track(up, lo, hi, prot);
}

void kr__uproc_unmapped(struct kr_uproc *up, uintptr_t lo, uintptr_t hi)
{
	kr__img_dirty(up, lo, hi);
	kr__rl_del(&up->reg, lo, hi);
	track(up, lo, hi, 0);
}

void kr__uproc_protected(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot)
{
	kr__img_dirty(up, lo, hi);
	track(up, lo, hi, prot);
}

/* ---------------- the end ---------------- */

/* What its image holds: exec replaces it, the end releases it. */
static void mem_release(struct kr_uproc *up)
{
	kr__iso_end(up); /* open, before it is unmapped */
	kr__img_drop(up); /* its regions are among up's */
	kr__rl_unmap(&up->reg);
	kr__rl_free(&up->reg);
	kr__rl_free(&up->wr);
	kr__rl_free(&up->wrx);
	free(up->fmaps);
	up->fmaps = NULL;
	up->nfmaps = up->capfmaps = 0;
	kr__rw_free(up);
}

static void free_vectors(struct kr_uproc *up)
{
	for (int i = 0; up->argv && up->argv[i]; i++)
		free(up->argv[i]);
	for (int i = 0; up->envp && up->envp[i]; i++)
		free(up->envp[i]);
	free(up->argv);
	free(up->envp);
	up->argv = up->envp = NULL;
}

static void release(struct kr_uproc *up)
{
	kr__alarm_stop(up);
	mem_release(up);
	kr__fd_close_all(&up->fds);
	kr__sigfd_unbind_all(up); /* those its children still hold */
	pthread_mutex_lock(&G.lock); /* against kr_uproc_kill's write */
	if (up->main.killfd >= 0)
		close(up->main.killfd);
	up->main.killfd = -1;
	pthread_mutex_unlock(&G.lock);
	if (up->cwdfd >= 0)
		close(up->cwdfd);
	up->cwdfd = -1;
	free(up->cwd);
	up->cwd = NULL;
	free_vectors(up);
	free(up->main.vframe);
	up->main.vframe = NULL;
}

/* A new μprocess's first thread, and its threads' bookkeeping. */
static void thr_init(struct kr_uproc *up)
{
	up->main.magic = KR_UTHR_MAGIC;
	up->main.up = up;
	up->main.killfd = -1;
	up->main.altstack.ss_flags = SS_DISABLE;
	up->nthreads = 1;
	kr_sem_init(&up->kids_sem, 0);
	kr_sem_init(&up->thr_sem, 0);
}

static void live_link(struct kr_uproc *up);
static void live_unlink(struct kr_uproc *up);

static void uproc_free(struct kr_uproc *up)
{
	pthread_mutex_lock(&G.lock);
	if (up->live)
		live_unlink(up);
	pthread_mutex_unlock(&G.lock);
	kr_sem_destroy(&up->kids_sem);
	kr_sem_destroy(&up->thr_sem);
	kr__call_free(up);
	free(up->main.bounce);
	up->main.magic = 0;
	up->magic = 0;
	free(up);
}

/* ---------------- its family: children, their ends, wait4 ---------------- */

/* Its children go with it: those that ended are collected, the others
 * become orphans, which free themselves at their end. */
static void orphan_kids(struct kr_uproc *up)
{
	struct kr_uproc *dead = NULL, *k;
	pthread_mutex_lock(&G.lock);
	while ((k = up->kids)) {
		up->kids = k->sib;
		if (k->zombie || k->vparent) { /* ended, or never ran (a kill came first) */
			k->sib = dead;
			dead = k;
			continue;
		}
		k->parent = NULL;
		k->orphan = 1;
		kr_mp_detach(k->main.mp);
	}
	pthread_mutex_unlock(&G.lock);
	while ((k = dead)) {
		dead = k->sib;
		if (k->vparent)
			release(k);
		else if (k->own_mp)
			kr_mp_join(k->main.mp, NULL);
		uproc_free(k);
	}
}

/* up has ended (its status set): a child of a μprocess becomes a zombie
 * for its parent's wait4 (or is collected at once when its parent ignores
 * SIGCHLD, as the kernel does); 1: up is to be freed by its own end (an
 * orphan, or collected at once), whose microprocess is detached. */

static int family_end(struct kr_uproc *up)
{
	int self = 0;
	pthread_mutex_lock(&G.lock);
	struct kr_uproc *p = up->parent;
	if (p) {
		/* SIGCHLD, with how it ended (its siginfo's si_status) */
		int killed = !up->exited && up->status > 128;
		struct kr__uthr *w = kr__sig_queue(p, NULL, SIGCHLD, killed ? CLD_KILLED : CLD_EXITED,
						   up->pid, killed ? up->status - 128 : up->status);
		if (w)
			kr__uthr_poke(w);
		if (__atomic_load_n(&p->sig[SIGCHLD].handler, __ATOMIC_RELAXED) == (uint64_t)SIG_IGN ||
		    (__atomic_load_n(&p->sig[SIGCHLD].flags, __ATOMIC_RELAXED) & SA_NOCLDWAIT)) {
			struct kr_uproc **pp = &p->kids;
			while (*pp != up)
				pp = &(*pp)->sib;
			*pp = up->sib;
			up->parent = NULL;
			self = 1;
		} else {
			up->zombie = 1;
		}
		kr_sem_post(&p->kids_sem);
	} else if (up->orphan) {
		self = 1;
	}
	if (self && up->own_mp && !up->orphan)
		kr_mp_detach(up->main.mp); /* set under the lock by its creator */
	pthread_mutex_unlock(&G.lock);
	return self;
}

/* The end of the process c stands for (its pidfd): its status c's. */
static void real_end(struct kr_uproc *c)
{
	short rev;
	siginfo_t si;
	int e;
	while ((e = kr_poll(c->pidfd, POLLIN, &rev)) == ECANCELED || e == EINTR)
		;
	memset(&si, 0, sizeof si);
	while (waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED) && errno == EINTR)
		;
	c->exited = si.si_code == CLD_EXITED;
	c->status = c->exited ? si.si_status & 0xff : 128 + si.si_status;
	pthread_mutex_lock(&G.lock); /* against kill's use of it */
	kr_close(c->pidfd); /* kr_poll waited on it: the I/O back end forgets it */
	c->pidfd = -1;
	pthread_mutex_unlock(&G.lock);
}

/* The microprocess of a real child's record: its end, as family_end
 * tells the parent of a μprocess's. */
static void *real_wait(void *arg)
{
	struct kr_uproc *c = arg;
	real_end(c);
	if (family_end(c))
		uproc_free(c);
	return NULL;
}

/* A μprocess that stands for the process its exec became (exec_process):
 * what it held goes, it waits for the process, and ends with its status. */
static void *stand_in(void *arg)
{
	struct kr_uproc *up = arg;
	STACK_CLEAN(up);
	kr__call_close(up, 1);
	release(up); /* its fds: the process has its own, and pipes see their ends */
	real_end(up);
	orphan_kids(up);
	if (family_end(up))
		uproc_free(up);
	return NULL;
}

static __attribute__((noreturn, used)) void stand_in_here(struct kr_uproc *up)
{
	stand_in(up);
	kr_mp_exit(NULL);
	__builtin_unreachable();
}

/* up stands for the process its exec became, whose pidfd is pidfd: a
 * kill sent to up reaches it. */
static void stands_for(struct kr_uproc *up, int pidfd)
{
	pthread_mutex_lock(&G.lock);
	up->real = 1;
	up->pidfd = pidfd;
	pthread_mutex_unlock(&G.lock);
}

int kr__uproc_real_child(struct kr_uproc *up, pid_t pid, int pidfd)
{
	struct kr_uproc *c = uproc_alloc();
	if (!c) {
		close(pidfd);
		return ENOMEM;
	}
	c->magic = KR_UPROC_MAGIC;
	thr_init(c);
	c->main.gone = 1; /* no thread of its own: signals go to its pidfd */
	c->nthreads = 0;
	c->real = 1;
	c->pidfd = pidfd;
	c->pid = pid;
	c->ppid = up->pid;
	c->cwdfd = -1;
	c->own_mp = 1;
	pthread_mutex_lock(&G.lock);
	int e = kr_mp_create(&c->main.mp, NULL, real_wait, c);
	if (!e) {
		c->parent = up;
		c->sib = up->kids;
		up->kids = c;
		live_link(c);
	}
	pthread_mutex_unlock(&G.lock);
	if (e) {
		close(pidfd);
		uproc_free(c);
	}
	return e;
}

long kr__uproc_reap(struct kr_uproc *up, pid_t pid, int nohang, int nowait,
		    struct kr__reaped *r)
{
	for (;;) {
		struct kr_uproc **pp, *k, *found = NULL;
		int any = 0;
		pthread_mutex_lock(&G.lock);
		for (pp = &up->kids; (k = *pp); pp = &k->sib) {
			if (pid > 0 && k->pid != pid)
				continue;
			any = 1;
			if (k->zombie) {
				found = k;
				break;
			}
		}
		if (found) {
			r->pid = found->pid;
			r->signaled = !found->exited && found->status > 128;
			r->code = r->signaled ? found->status - 128 : found->status;
			if (!nowait)
				*pp = found->sib;
		}
		pthread_mutex_unlock(&G.lock);
		if (found) {
			if (!nowait) {
				if (found->own_mp)
					kr_mp_join(found->main.mp, NULL);
				uproc_free(found);
			}
			return r->pid;
		}
		if (!any)
			return -ECHILD;
		if (nohang)
			return 0;
		if (kr_sem_wait(&up->kids_sem) == ECANCELED)
			return -EINTR;
	}
}

static void vfork_end(struct kr_uproc *c);

/* The μprocess ends, its threads all ended: on its first thread's
 * microprocess's stack. */
static __attribute__((noreturn)) void end_here(struct kr_uproc *up, int status)
{
	up->status = status & 0xff;
	if (up->vparent) {
		vfork_end(up); /* its parent goes on */
		__builtin_unreachable();
	}
	kr__call_close(up, 1); /* after the call in flight, which runs on its memory */
	kr__iso_end(up); /* open, before its image is kept or unmapped */
	STACK_CLEAN(up);
	kr__img_keep(up); /* or not: then release unmaps the image too */
	release(up);
	orphan_kids(up);
	/* what it taught the process, for the processes after it (cache.c) */
	kr__rw_save();
	kr__cache_cpuid_save();
	if (family_end(up))
		uproc_free(up);
	kr_mp_exit(NULL);
	__builtin_unreachable();
}

/* Tell thread o to end now: its wait cut short, its VP kicked.  Under
 * G.lock, which keeps o (and its killfd) from going meanwhile. */
void kr__uthr_poke(struct kr__uthr *o)
{
	kr_mp_cancel(o->mp); /* ESRCH if it has ended: nothing to do */
	int kfd = __atomic_load_n(&o->killfd, __ATOMIC_SEQ_CST);
	if (kfd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(kfd, &one, sizeof one);
		(void)w; /* an eventfd's count cannot overflow here */
	}
	struct kr__img_vp *v = __atomic_load_n(&o->vp, __ATOMIC_ACQUIRE);
	if (v && v->tid && __atomic_load_n(&v->selector, __ATOMIC_SEQ_CST) == 1)
		syscall(SYS_tgkill, getpid(), v->tid, KR__SIGKICK);
}

static void tell_to_end(struct kr__uthr *o, int stop)
{
	if (stop)
		__atomic_store_n(&o->stop, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&o->attn, 1, __ATOMIC_SEQ_CST);
	kr__uthr_poke(o);
}

void kr__thr_stop_others(struct kr_uproc *up, struct kr__uthr *keep, int stop)
{
	KR__FOR_THREADS(up, o) {
		if (o != keep && !__atomic_load_n(&o->gone, __ATOMIC_RELAXED))
			tell_to_end(o, stop);
	}
	struct kr__uthr *c = kr__call_poke(up, keep); /* a call in flight */
	if (c)
		tell_to_end(c, stop);
}

/* On t's microprocess's stack (kr__uthr_end). */
static void exec_keep(struct kr_uproc *up, struct kr__uthr *t);
static __attribute__((noreturn, used)) void exec_here(struct kr_uproc *up, struct kr_uproc *old);

static __attribute__((noreturn, used)) void thr_end(struct kr__uthr *t, int status, int how)
{
	struct kr_uproc *up = t->up;
	kr__fd_drop(t); /* the files of the call it ends in */
	if (t->xcall && how == KR__END_THREAD && !__atomic_load_n(&up->dying, __ATOMIC_SEQ_CST))
		how = KR__END_EXIT; /* exit in a procedure: its μprocess's end (call.c) */
	pthread_mutex_lock(&G.lock);
	if (how != KR__END_THREAD && !up->dying) {
		/* the μprocess ends: every thread, as each comes back from karui */
		up->status = status & 0xff;
		up->exited = how == KR__END_EXIT;
		__atomic_store_n(&up->dying, 1, __ATOMIC_SEQ_CST);
		kr__thr_stop_others(up, t, 0);
	} else if (how == KR__END_THREAD && t == &up->main && !up->dying) {
		up->status = status & 0xff; /* the μprocess's, as the kernel's leader's */
		up->exited = 1;
	}
	__atomic_store_n(&t->gone, 1, __ATOMIC_SEQ_CST);
	if (t->xcall) { /* a call's: back to its caller */
		pthread_mutex_unlock(&G.lock);
		kr__call_gone(t, status, how);
	}
	if (t != &up->main) {
		pthread_mutex_unlock(&G.lock);
		kr__thr_gone(t); /* off the count, with what it holds */
	}
	__atomic_sub_fetch(&up->nthreads, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&G.lock);
	kr__thr_robust(t);
	/* the first thread: the μprocess's end, once the others have ended;
	 * or the exec another thread made, which it takes over */
	for (;;) {
		pthread_mutex_lock(&G.lock);
		int n = up->nthreads;
		pthread_mutex_unlock(&G.lock);
		if (!n)
			break;
		kr_sem_wait(&up->thr_sem);
	}
	kr__thr_reap(up);
	if (__atomic_load_n(&t->stop, __ATOMIC_SEQ_CST) == 2 && !up->dying) {
		struct kr_uproc *old = up->exec_old;
		pid_t real = up->exec_real;
		up->exec_old = NULL;
		up->exec_real = 0;
		t->stop = t->gone = 0;
		up->nthreads = 1;
		t->sigmask = up->exec_mask;
		if (real) { /* the program runs as a process: up stands for it */
			kr__timers_delete(up);
			kr__call_close(up, 0); /* its exports were the old image's */
			stands_for(up, up->exec_pidfd);
			stand_in_here(up); /* here, on the stack's top already */
		}
		exec_keep(up, t);
		exec_here(up, old);
	}
	if (up->exec_real) { /* it ended first: the process runs on, unwaited for */
		close(up->exec_pidfd);
		up->exec_real = 0;
	}
	end_here(up, up->status);
}

void kr__uthr_end(struct kr__uthr *t, int status, int how)
{
	/* the thread's stack is the μprocess's, which the end unmaps */
	DIE_STACK_CLEAN(t);
	__asm__ volatile("mov %0, %%rsp\n\tcall *%1"
			 :
			 : "r"(t->die_sp), "r"(thr_end), "D"(t), "S"(status), "d"(how)
			 : "memory");
	__builtin_unreachable();
}

/* Where a thread whose code faulted goes, on its microprocess's stack. */
static __attribute__((noreturn, used)) void die(int status)
{
	kr__uproc_end(kr__uthr_self(), status);
	__builtin_unreachable();
}

int kr__sig_ends(int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGURG:
	case SIGWINCH:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		return 0;
	default:
		return 1;
	}
}

long kr__uproc_signal(int sig)
{
	if (sig == 0)
		return 0;
	if (sig < 1 || sig > 64)
		return -EINVAL;
	struct kr__uthr *t = kr__uthr_self();
	kr__sig_queue(t->up, t, sig, SI_TKILL, t->up->pid, 0);
	return 0;
}

/* A fault.  In a μprocess's code: a cpuid that karui made hlt
 * (rewrite.c) is answered and the μprocess resumed (returns 1 and its
 * thread pointer, which gate.S installs with BLOCK); any other runs its
 * handler (signal.c), or ends it.
 * Else the handler that was there before ours, or the default action. */
__attribute__((used)) struct kr__fast kr__img_fault(int sig, siginfo_t *si, void *ucv,
						     int in_uproc)
{
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	struct kr__uthr *t = in_uproc ? kr__uthr_self() : NULL;
	struct kr_uproc *up = t ? t->up : NULL;
	if (up && sig == SIGSEGV && kr__rw_cpuid_trap(up, (uintptr_t)g[REG_RIP])) {
		uint32_t r[4];
		kr__cpuid_lookup((uint32_t)g[REG_RAX], (uint32_t)g[REG_RCX], r);
		g[REG_RAX] = r[0];
		g[REG_RBX] = r[1];
		g[REG_RCX] = r[2];
		g[REG_RDX] = r[3];
		g[REG_RIP] += 2;
		return (struct kr__fast){1, t->fs};
	}
	if (up && sig == SIGTRAP && kr__rw_patched(up, (uintptr_t)g[REG_RIP] - 1)) {
		g[REG_RIP] -= 1; /* a site karui patches while it runs: again */
		return (struct kr__fast){1, t->fs};
	}
	if (up && kr__sig_fault(t, uc, si))
		return (struct kr__fast){1, t->fs}; /* into its handler */
	if (up) {
		g[REG_RIP] = (greg_t)(uintptr_t)die;
		g[REG_RSP] = (greg_t)(t->die_sp - 8);
		g[REG_RDI] = 128 + sig;
		return (struct kr__fast){0, 0};
	}
	struct sigaction *o = &G.old[sig];
	if ((o->sa_flags & SA_SIGINFO) && o->sa_sigaction) {
		if (o->sa_flags & SA_RESETHAND)
			signal(sig, SIG_DFL);
		o->sa_sigaction(sig, si, ucv);
		return (struct kr__fast){0, 0};
	}
	if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN) {
		o->sa_handler(sig);
		return (struct kr__fast){0, 0};
	}
	signal(sig, SIG_DFL); /* the fault comes again and ends the process */
	if (sig == SIGTRAP)
		raise(sig); /* a trap does not come again */
	return (struct kr__fast){0, 0};
}

/* The way back to thread t's code, on this VP: armed (else t's μprocess
 * cannot go on here), its record naming t (gate.S, fast.c). */
void kr__uthr_here(struct kr__uthr *t)
{
	if (!tvp && kr__img_arm()) {
		kr__uproc_end(t, 128 + SIGSYS);
		__builtin_unreachable();
	}
	if (tvp->thr != t) {
		tvp->thr = t;
		/* t's code makes no scheduling point before its next call:
		 * what the VP's event source holds goes now, and what it made
		 * ready to other VPs that are idle */
		kr_sched_poll();
	}
	__atomic_store_n(&t->vp, tvp, __ATOMIC_RELEASE);
	/* what it shows: t's μprocess's memory if isolated, else none (iso.c) */
	struct kr_uproc *m = kr__mm(t->up);
	struct kr_uproc *want = __atomic_load_n(&m->iso_on, __ATOMIC_RELAXED) ? m : NULL;
	if (__atomic_load_n(&tvp->shown, __ATOMIC_RELAXED) != want ||
	    (__atomic_load_n(&kr__iso_keys, __ATOMIC_RELAXED) && kr__rdpkru() != kr__iso_pkru(want)))
		kr__iso_show(tvp, m);
}

struct kr__img_vp *kr__img_vp_self(void)
{
	return tvp;
}

/* Under the layer's lock. */
struct kr__img_vp *kr__img_vps(void)
{
	return G.vps;
}

/* The frame an rt_sigreturn on this VP goes back through: this VP's own
 * alternate stack and signal mask in it, which rt_sigreturn installs (a
 * frame made on another VP, or by karui, would install others; the
 * kernel's frame holds 8 bytes of mask). */
static void vp_frame(ucontext_t *uc)
{
	stack_t ss;
	sigset_t m;
	if (sigaltstack(NULL, &ss) == 0)
		uc->uc_stack = ss;
	if (pthread_sigmask(SIG_SETMASK, NULL, &m) == 0)
		memcpy(&uc->uc_sigmask, &m, 8);
}

/* At the handover: the pages of the μprocess's stack below every frame
 * in use (ld.so's and karui's, from the loading: karui's calls run on
 * that stack, with a signal frame each) are dropped, as a process's
 * stack keeps only what its own calls touched; they are zero pages again
 * when a later call reaches them.  In use: the program's stack at sp and
 * its red zone, and this handler's frames down to this function's (on
 * the μprocess's stack, or on its microprocess's own: iso.c), with a
 * page of room below for the madvise. */
static __attribute__((noinline)) void dead_stack_drop(struct kr_uproc *up, uintptr_t sp)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0), low = sp - 128;
	if (here >= up->stk_lo && here < low)
		low = here;
	low = (low & ~(PG - 1)) - PG;
	if (low > up->stk_lo && low <= up->stk_hi)
		madvise((void *)up->stk_lo, low - up->stk_lo, MADV_DONTNEED);
}

/* A system call of a μprocess (gate.S).  Returns its thread pointer. */
__attribute__((used)) uint64_t kr__img_trap(ucontext_t *uc)
{
	struct kr__uthr *t = kr__uthr_self();
	struct kr_uproc *up = t->up;
	greg_t *g = uc->uc_mcontext.gregs;
	long a[6] = {g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]};
	struct kr__img_vp *vp = tvp;
	long nr = g[REG_RAX];
	if (nr == KR__NR_DELIVER && g[REG_RIP] == (greg_t)(uintptr_t)kr__img_deliver_ret) {
		/* a rewritten site's way back, to deliver signals (gate.S) */
		g[REG_RAX] = (greg_t)vp->stash;
		if (kr__sig_uret(g)) {
			kr__uproc_end(t, 128 + SIGSEGV);
			__builtin_unreachable();
		}
		if (!t->redo) {
			kr__iso_frame(uc);
			return t->fs;
		}
		/* the call of a rewritten site that wants this frame: as a trap's,
		 * the site's return in it */
		t->redo = 0;
		nr = t->redo_nr;
		memcpy(a, t->redo_a, sizeof a);
		t->uc = uc;
		t->callsp = (uintptr_t)uc;
		t->usp = (uintptr_t)g[REG_RSP];
		goto call;
	}
	if (nr == KR__NR_YIELD && g[REG_RIP] == (greg_t)(uintptr_t)kr__img_yield_ret) {
		kr__iso_yield(t); /* its time slice ended (kr__img_signal) */
		g[REG_RAX] = 0;
		goto back;
	}
	if (nr == KR__NR_HANDOVER && g[REG_RIP] == (greg_t)(uintptr_t)kr__img_handover_ret) {
		kr__rw_handover(up);
		dead_stack_drop(up, (uintptr_t)g[REG_RSP]);
		g[REG_RAX] = (greg_t)kr__img_snapshot(up, uc);
		free_vectors(up); /* what its image's key did not take */
		kr__iso_frame(uc);
		return t->fs;
	}
	uintptr_t site = (uintptr_t)g[REG_RIP] - 2;
	/* a vfork child has no image of its own; a vfork or a thread's clone
	 * needs the trap's frame (kr__uproc_vfork, kr__thr_clone), so its site
	 * is never made hot; nor is rt_sigreturn's, which needs the frame too */
	/* while it has other threads, which may run the code it rewrites,
	 * the rewrite is made live (rewrite.c); not while calls into its
	 * exports (call.c) run its code */
	if (G.rewrite && !up->vparent && nr != SYS_vfork && nr != SYS_clone && nr != SYS_fork &&
	    !up->xc && nr != SYS_rt_sigreturn && ((const uint8_t *)site)[0] == 0x0f &&
	    ((const uint8_t *)site)[1] == 0x05)
		kr__rw_trapped(up, site, __atomic_load_n(&up->nthreads, __ATOMIC_RELAXED) > 1);
	t->uc = uc;
	t->callsp = (uintptr_t)uc;
	t->usp = (uintptr_t)g[REG_RSP];
call:
	if (__builtin_expect(up->dfork != NULL, 0) && !kr__dfork_in_place(up, nr, a))
		kr__uproc_dfork_real(t, nr, a); /* a deferred fork's child: a process now */
	g[REG_RAX] = kr__iso_sys(t, nr, a);
	t->uc = NULL;
	t = kr__uthr_self(); /* after a vfork: the child's */
	if (kr__img_trace)
		fprintf(stderr, "[%d] %ld(%lx, %lx, %lx, %lx) = %ld\n", t->tid, nr, a[0], a[1],
			a[2], a[3], (long)g[REG_RAX]);
back:
	kr__uthr_here(t);
	if (tvp != vp) /* it waited and goes on on another VP */
		vp_frame(uc);
	kr__iso_frame(uc); /* and its PKRU, whatever the frame held (iso.c) */
	return t->fs;
}

/* A system call from a rewritten site that kr__sys_fast declined (gate.S):
 * the arguments as the registers held them; the result and the thread
 * pointer to run the μprocess with. */
__attribute__((used)) struct kr__fast kr__img_fast(long nr, const long *regs)
{
	struct kr__uthr *t = kr__uthr_self();
	long a[6] = {regs[0], regs[1], regs[2], regs[3], regs[4], regs[5]};
	if (nr == SYS_clone || nr == SYS_fork || nr == SYS_vfork ||
	    (t->up->dfork && !kr__dfork_in_place(t->up, nr, a))) {
		/* it needs the registers of a trap's frame: made on the way
		 * back's trap (kr__img_deliver), with the frame it gets (a
		 * deferred fork's child that becomes a process there too) */
		t->redo = 1;
		t->redo_nr = nr;
		memcpy(t->redo_a, a, sizeof a);
		__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
		kr__uthr_here(t);
		return (struct kr__fast){0, t->fs};
	}
	t->uc = NULL;
	t->callsp = (uintptr_t)regs;
	t->usp = (uintptr_t)regs + 200; /* above the fastcall's frame and the red zone */
	long rv = kr__iso_sys(t, nr, a);
	if (kr__img_trace)
		fprintf(stderr, "[%d] %ld(%lx, %lx, %lx, %lx) = %ld (rewritten)\n", t->tid, nr,
			a[0], a[1], a[2], a[3], rv);
	kr__uthr_here(t);
	return (struct kr__fast){rv, t->fs};
}

/* ---------------- start ---------------- */

static size_t strsz(char *const *v, int *n)
{
	size_t s = 0;
	int i = 0;
	for (; v && v[i]; i++)
		s += strlen(v[i]) + 1;
	*n = i;
	return s;
}

/* execve's initial stack, at the top of the μprocess's stack and laid out
 * alike for every start with the same argc, environment and argv[0]: from
 * the bottom of the argument room upward the AT_RANDOM bytes, the
 * platform, the environment strings, argv[0] and the other arguments;
 * below the room argc, argv[], NULL, envp[], NULL and the auxv, as the
 * kernel lays them.  A kept image's pointers into it stay right when it is
 * reused (reuse.c).  Returns the stack pointer. */
static uintptr_t lay_stack(struct kr_uproc *up, uint64_t at_entry)
{
	int nargs, nenv;
	strsz(up->argv, &nargs);
	strsz(up->envp, &nenv);
	char *s = (char *)(up->stk_hi - ARG_ROOM);
	unsigned char *rnd = (unsigned char *)s;
	if (getrandom(rnd, 16, 0) != 16)
		memset(rnd, 0x5a, 16);
	char *platform = s + 16;
	strcpy(platform, "x86_64");
	s += 32;

	enum { NAUX = 21 };
	size_t words = 1 + (nargs + 1) + (nenv + 1) + 2 * NAUX;
	uintptr_t *sp = (uintptr_t *)((up->stk_hi - ARG_ROOM - words * 8) & ~(uintptr_t)15);
	uintptr_t *w = sp;
	*w++ = nargs;
	for (int i = 0; i < nenv; i++) {
		w[nargs + 1 + i] = (uintptr_t)s;
		s = stpcpy(s, up->envp[i]) + 1;
	}
	for (int i = 0; i < nargs; i++) {
		*w++ = (uintptr_t)s;
		s = stpcpy(s, up->argv[i]) + 1;
	}
	*w++ = 0;
	w += nenv;
	*w++ = 0;
	const struct kr__elf_img *p = &up->ld.prog;
	const uint64_t aux[NAUX][2] = {
		{AT_PHDR, p->phdr},
		{AT_PHENT, sizeof(Elf64_Phdr)},
		{AT_PHNUM, p->phnum},
		{AT_PAGESZ, 4096},
		{AT_BASE, up->ld.interp.entry ? up->ld.interp.base : 0},
		{AT_FLAGS, 0},
		{AT_ENTRY, at_entry},
		{AT_UID, getauxval(AT_UID)},
		{AT_EUID, getauxval(AT_EUID)},
		{AT_GID, getauxval(AT_GID)},
		{AT_EGID, getauxval(AT_EGID)},
		{AT_SECURE, 0},
		{AT_RANDOM, (uint64_t)rnd},
		{AT_HWCAP, getauxval(AT_HWCAP)},
		{AT_HWCAP2, getauxval(AT_HWCAP2)},
		{AT_CLKTCK, getauxval(AT_CLKTCK)},
		{AT_PLATFORM, (uint64_t)platform},
		{AT_EXECFN, sp[1]},
		{AT_SYSINFO_EHDR, getauxval(AT_SYSINFO_EHDR)},
		{AT_MINSIGSTKSZ, getauxval(AT_MINSIGSTKSZ)},
		{AT_NULL, 0},
	};
	memcpy(w, aux, sizeof aux);
	return (uintptr_t)sp;
}

/* Its image starts: the initial stack, then its code (or its kept
 * image's, from the program's entry).  On its microprocess's own stack. */
static __attribute__((noreturn)) void start_image(struct kr_uproc *up)
{
	if (kr__img_arm()) {
		kr__uproc_end(&up->main, 126);
		__builtin_unreachable();
	}
	if (kr__iso_begin(up)) { /* its code could open every key (iso.c) */
		kr__uproc_end(&up->main, 126);
		__builtin_unreachable();
	}
	kr__uthr_here(&up->main);
	const struct kr__elf_img *p = &up->ld.prog;
	STACK_CLEAN(up);
	/* through the handover if its image is to be taken, or if karui
	 * patched its ld.so (kr__rw_handover) */
	int handover = up->snap || (!up->reused && up->ld.interp.entry && G.rewrite);
	uintptr_t sp = lay_stack(up, handover ? (uint64_t)kr__img_handover : p->entry);
	if (!up->snap) /* laid: needed no more (an image taken keys on them) */
		free_vectors(up);
	if (up->reused) {
		kr__img_resume(up, sp);
		__builtin_unreachable();
	}
	uint64_t entry = up->ld.interp.entry ? up->ld.interp.entry : p->entry;
	if (kr__img_trace)
		fprintf(stderr, "[%d] start: %lu cpuid instructions answered by karui\n", up->pid,
			up->cpuid_sites);
	up->main.fs = 0;
	kr__img_start(entry, sp, 0, 0);
}

/* The microprocess of a μprocess. */
static void *run(void *arg)
{
	struct kr_uproc *up = arg;
	char here;
	up->main.die_sp = ((uintptr_t)&here - 256) & ~(uintptr_t)15;
	start_image(up);
}

static char **copyv(char *const *v, int *err)
{
	int n = 0;
	while (v && v[n])
		n++;
	char **c = calloc(n + 1, sizeof *c);
	if (!c) {
		*err = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			*err = ENOMEM;
			return c;
		}
	return c;
}

/* The μprocess's fds from the attr. */
static int setup_fds(struct kr_uproc *up, const kr_uproc_attr *a)
{
	for (int fd = 0; fd < KR_UPROC_ATTR_FDS; fd++) {
		struct kr_uproc_fdspec s = a ? a->fd[fd]
					     : (struct kr_uproc_fdspec){.kind = KR_UFD_DEFAULT};
		if (s.kind == KR_UFD_DEFAULT) {
			if (fd > 2)
				continue;
			s.kind = KR_UFD_HOST;
			s.hostfd = fd;
		}
		struct kr__ufile *f = NULL;
		if (s.kind == KR_UFD_HOST) {
			int fl = fcntl(s.hostfd, F_GETFL);
			if (fl < 0)
				continue; /* the host has no such fd: closed here too */
			int h = fcntl(s.hostfd, F_DUPFD_CLOEXEC, 3);
			if (h < 0)
				return errno;
			if (!(f = kr__ufile_host(h, fl)))
				return ENOMEM;
		} else if (s.kind == KR_UFD_PIPE) {
			if (!(f = kr__ufile_pipe(s.pipe, s.end)))
				return EINVAL;
		} else if (s.kind == KR_UFD_CLOSED) {
			continue;
		} else {
			return EINVAL;
		}
		int e = kr__fd_set(&up->fds, fd, f, 0);
		if (e) {
			kr__ufile_put(f);
			return -e;
		}
	}
	return 0;
}

/* File capabilities on the program at path (kr__elf_load refuses it). */
static int has_caps(int dirfd, const char *path)
{
	char p[PATH_MAX + 32];
	if (path[0] != '/') {
		snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, path);
		path = p;
	}
	return getxattr(path, KR__CAPS_XATTR, NULL, 0) > 0;
}

/* The registry of handles kr_uproc_kill accepts; under G.lock. */
static void live_link(struct kr_uproc *up)
{
	if (!G.live)
		pthread_cond_signal(&G.live_cv); /* the ticker's wait ends */
	up->live = 1;
	up->live_prev = NULL;
	up->live_next = G.live;
	if (G.live)
		G.live->live_prev = up;
	G.live = up;
}

static void live_unlink(struct kr_uproc *up)
{
	up->live = 0;
	if (up->live_prev)
		up->live_prev->live_next = up->live_next;
	else
		G.live = up->live_next;
	if (up->live_next)
		up->live_next->live_prev = up->live_prev;
}

int kr__uproc_stack(struct kr_uproc *up, size_t size, uintptr_t *lo, uintptr_t *hi)
{
	size_t len = PG + size;
	char *stk = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (stk == MAP_FAILED)
		return ENOMEM;
	if (kr__uproc_mapped(up, (uintptr_t)stk, (uintptr_t)stk + len, PROT_READ | PROT_WRITE)) {
		munmap(stk, len);
		return ENOMEM;
	}
	/* the guard: inside the mapping where the kernel can (no split) */
	if (madvise(stk, PG, MADV_GUARD_INSTALL) && mprotect(stk, PG, PROT_NONE))
		return ENOMEM;
	kr__uproc_protected(up, (uintptr_t)stk, (uintptr_t)stk + PG, PROT_NONE);
	*lo = (uintptr_t)stk + PG;
	*hi = (uintptr_t)stk + len;
	return 0;
}

/* A cold start: the program and its ld.so mapped, a stack (with a guard
 * page below it) of the μprocess's own, the image to be taken at the
 * handover if images are kept. */
static int load(struct kr_uproc *up, int dirfd, const char *path)
{
	int err = kr__elf_load(dirfd, path, &up->ld);
	if (err)
		return err;
	if ((err = kr__rl_add(&up->reg, (uintptr_t)up->ld.prog.map,
			      (uintptr_t)up->ld.prog.map + up->ld.prog.maplen)))
		return err;
	if (up->ld.interp.map &&
	    (err = kr__rl_add(&up->reg, (uintptr_t)up->ld.interp.map,
			      (uintptr_t)up->ld.interp.map + up->ld.interp.maplen)))
		return err;
	kr__xmap_add(up, (uintptr_t)up->ld.prog.map, (uintptr_t)up->ld.prog.map + up->ld.prog.maplen,
		     up->ld.prog.base, &up->ld.prog.file);
	if (up->ld.interp.map)
		kr__xmap_add(up, (uintptr_t)up->ld.interp.map,
			     (uintptr_t)up->ld.interp.map + up->ld.interp.maplen, up->ld.interp.base,
			     &up->ld.interp.file);
	up->ld.prog.map = up->ld.interp.map = NULL; /* the regions own them now */

	if ((err = kr__uproc_stack(up, STACK_SIZE + ARG_ROOM, &up->stk_lo, &up->stk_hi)))
		return err;
	if (G.rewrite)
		kr__rw_prepare(up, &up->ld);
	if (!up->sigkeep) /* the image's signal state would be up's */
		kr__img_plan(up);
	if (!up->snap && kr__img_wr_elf(up)) { /* else kr__img_plan did */
		if (up->isolate)
			return ENOMEM;
		up->wr_lost = 1;
	}
	return 0;
}

/* Its image: a kept one of the program at dirfd/path, or the program
 * loaded afresh. */
static int image(struct kr_uproc *up, int dirfd, const char *path)
{
	struct stat st;
	if (fstatat(dirfd, path, &st, 0) == 0 && S_ISREG(st.st_mode) &&
	    !(st.st_mode & (S_ISUID | S_ISGID)) && faccessat(dirfd, path, X_OK, AT_EACCESS) == 0 &&
	    !has_caps(dirfd, path) && kr__img_take(up, &st, up->argv, up->envp)) {
		/* a kept image: mapped, relocated, its stack its own */
		int e = kr__img_wr_kept(up);
		if (e && up->isolate)
			return e;
		up->wr_lost |= e != 0;
		return 0;
	}
	return load(up, dirfd, path);
}

int kr_uproc_spawn(kr_uproc **out, const char *path, char *const argv[],
		   const kr_uproc_attr *attr)
{
	int err = kr__uproc_spawn_check(out, path, argv, attr);
	if (!err)
		err = ready();
	if (err)
		return err;
	struct kr_uproc *up = uproc_alloc();
	if (!up)
		return ENOMEM;
	up->magic = KR_UPROC_MAGIC;
	thr_init(up);
	up->cwdfd = -1;
	up->own_mp = 1;
	const char *cwd = attr && attr->cwd ? attr->cwd : ".";
	up->cwdfd = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (up->cwdfd < 0) {
		err = errno;
		goto fail;
	}
	char buf[4096];
	if (attr && attr->cwd && attr->cwd[0] == '/')
		up->cwd = strdup(attr->cwd);
	else if (attr && attr->cwd) {
		if (!getcwd(buf, sizeof buf)) {
			err = errno;
			goto fail;
		}
		size_t n = strlen(buf);
		if (n + 1 + strlen(attr->cwd) + 1 > sizeof buf) {
			err = ENAMETOOLONG;
			goto fail;
		}
		buf[n] = '/';
		strcpy(buf + n + 1, attr->cwd);
		up->cwd = realpath(buf, NULL);
	} else
		up->cwd = getcwd(NULL, 0);
	if (!up->cwd) {
		err = errno ? errno : ENOMEM;
		goto fail;
	}
	if (attr && attr->umask >= 0) {
		up->umask = (mode_t)attr->umask;
	} else {
		up->umask = umask(022);
		umask(up->umask);
	}
	for (int i = 1; i < 65; i++)
		up->sig[i].handler = (uint64_t)SIG_DFL;
	err = 0;
	up->argv = copyv(argv, &err);
	extern char **environ;
	up->envp = copyv(attr && attr->envp ? attr->envp : environ, &err);
	if (err || !up->argv || !up->envp) {
		err = ENOMEM;
		goto fail;
	}
	int nargs, nenv;
	if (strsz(up->argv, &nargs) + strsz(up->envp, &nenv) + 32 > ARG_ROOM) {
		err = E2BIG;
		goto fail;
	}
	up->isolate = attr && attr->isolate;
	up->iso_mode = up->isolate ? KR_UPROC_ISO_PAGES : KR_UPROC_ISO_NONE; /* (iso.c) */
	if ((err = image(up, up->cwdfd, path)))
		goto fail;
	if ((err = setup_fds(up, attr)))
		goto fail;
	pthread_mutex_lock(&G.lock);
	up->pid = up->main.tid = G.next_pid++;
	up->ppid = getpid();
	live_link(up);
	pthread_mutex_unlock(&G.lock);
	kr_attr ma = {.stack_size = KR__MP_STACK_OF(up), .udata = &up->main};
	if ((err = kr_mp_create(&up->main.mp, &ma, run, up))) {
		pthread_mutex_lock(&G.lock);
		live_unlink(up);
		pthread_mutex_unlock(&G.lock);
		goto fail;
	}
	*out = up;
	return 0;
fail:
	kr__elf_unload(&up->ld);
	release(up);
	uproc_free(up);
	return err;
}

int kr_uproc_wait(kr_uproc *up, int *status)
{
	int ws, err = kr_uproc_wait_wstatus(up, &ws);
	if (!err && status)
		*status = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
	return err;
}

int kr_uproc_wait_wstatus(kr_uproc *up, int *wstatus)
{
	if (!up || up->magic != KR_UPROC_MAGIC)
		return EINVAL;
	int err = kr_mp_join(up->main.mp, NULL);
	if (err)
		return err;
	/* ended by a signal: not by exit, and 128 + the signal (a status of
	 * 126 or 127 without exit is karui's: the program could not start) */
	int sig = !up->exited && up->status > 128 ? up->status - 128 : 0;
	if (wstatus)
		*wstatus = sig ? sig : (up->status & 0xff) << 8;
	pthread_mutex_lock(&G.lock);
	live_unlink(up);
	up->magic = 0;
	pthread_mutex_unlock(&G.lock);
	uproc_free(up);
	return 0;
}

/* A signal for up (t NULL) or its thread t, queued (signal.c) and seen
 * now by the thread it goes to: the wait it is in ends, its VP is kicked
 * (kr__uthr_poke), so that a thread that makes no system call gets it too.  Under
 * G.lock, which keeps up from being freed (kr_uproc_wait) and its threads
 * from going meanwhile.  `value`: a sigqueue's. */
static void send_locked(struct kr_uproc *up, struct kr__uthr *t, int sig, int code, pid_t from,
			uint64_t value)
{
	struct kr__uthr *w;
	if (sig && (w = kr__sig_queue(up, t, sig, code, from, value)))
		kr__uthr_poke(w);
}

static struct kr__uthr *thread_of(struct kr_uproc *up, pid_t tid);

int kr__uproc_send_timer(struct kr_uproc *up, pid_t tid, int sig, int code, int id,
			 uint64_t sival)
{
	struct kr__uthr *t = NULL, *w;
	pthread_mutex_lock(&G.lock);
	if (tid && !(t = thread_of(up, tid))) {
		pthread_mutex_unlock(&G.lock);
		return -ESRCH;
	}
	if ((w = kr__sig_queue(up, t, sig, code, id, sival)))
		kr__uthr_poke(w);
	pthread_mutex_unlock(&G.lock);
	return 0;
}

void kr__uproc_send(struct kr_uproc *up, struct kr__uthr *t, int sig, int code, pid_t from,
		    uint64_t value)
{
	pthread_mutex_lock(&G.lock);
	send_locked(up, t, sig, code, from, value);
	pthread_mutex_unlock(&G.lock);
}

/* A signal from outside (see image.h). */
int kr_uproc_kill(kr_uproc *up, int sig)
{
	if (!up || sig < 0 || sig > 64)
		return EINVAL;
	pthread_mutex_lock(&G.lock);
	struct kr_uproc *u = G.live;
	while (u && u != up)
		u = u->live_next;
	if (u && u->real && sig && u->pidfd >= 0) /* it stands for a process */
		syscall(SYS_pidfd_send_signal, u->pidfd, sig, NULL, 0);
	else if (u)
		send_locked(up, NULL, sig, SI_USER, getpid(), 0);
	pthread_mutex_unlock(&G.lock);
	return u ? 0 : ESRCH;
}

/* The live thread tid of up, or NULL.  Under G.lock. */
static struct kr__uthr *thread_of(struct kr_uproc *up, pid_t tid)
{
	KR__FOR_THREADS(up, o)
		if (o->tid == tid && !__atomic_load_n(&o->gone, __ATOMIC_RELAXED))
			return o;
	return NULL;
}

int kr__uproc_is_self(struct kr_uproc *up, pid_t id)
{
	if (id == 0 || id == up->pid)
		return 1;
	pthread_mutex_lock(&G.lock);
	int r = thread_of(up, id) != NULL;
	pthread_mutex_unlock(&G.lock);
	return r;
}

struct kr_uproc *kr__uproc_by_pid(pid_t pid)
{
	struct kr_uproc *u = G.live;
	while (u && u->pid != pid)
		u = u->live_next;
	return u;
}

int kr__uproc_kill_pid(pid_t pid, pid_t tid, int sig, int code, pid_t from, uint64_t value)
{
	pthread_mutex_lock(&G.lock);
	struct kr_uproc *u = G.live;
	struct kr__uthr *t = NULL;
	if (pid) { /* kill: the μprocess of that pid, or of a thread of that tid */
		u = kr__uproc_by_pid(pid);
		for (struct kr_uproc *v = G.live; !u && v; v = v->live_next)
			if (thread_of(v, pid))
				u = v;
		if (u && tid && !(t = thread_of(u, tid)))
			u = NULL;
	} else { /* tkill: the thread of that tid, in whichever μprocess */
		for (; u && !(t = thread_of(u, tid)); u = u->live_next)
			;
	}
	if (u && u->real && sig && u->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, u->pidfd, sig, NULL, 0); /* a real child */
	else if (u)
		send_locked(u, t, sig, code, from, value);
	pthread_mutex_unlock(&G.lock);
	return u ? 0 : -ESRCH;
}

pid_t kr_uproc_pid(const kr_uproc *up)
{
	return up && up->magic == KR_UPROC_MAGIC ? up->pid : 0;
}

/* ---------------- exec and vfork ---------------- */

/* What of a μprocess is its image, which exec replaces: its memory, the
 * state karui keeps of it, and the vectors it was started with. */
#define IMAGE_FIELDS(X)                                                                        \
	X(ld) X(brk) X(reg) X(wr) X(stk_lo) X(stk_hi) X(img) X(fmaps) X(nfmaps) X(capfmaps)     \
	X(snap) X(reused) X(xmap) X(nxmap) X(rw) X(cpuid_sites) X(argv) X(envp) X(sigkeep)      \
	X(threaded) X(wrx) X(wr_lost) X(shmap)

static void image_move(struct kr_uproc *to, struct kr_uproc *from)
{
#define MOVE(f)                                                                                \
	to->f = from->f;                                                                       \
	memset(&from->f, 0, sizeof from->f);
	IMAGE_FIELDS(MOVE)
#undef MOVE
}

/* The registers of a vfork's parent as its trap found them, in a signal
 * frame for kr__img_sigreturn: the kernel's ucontext (and a siginfo's
 * room) after the return address's word, then its x87/SSE/AVX state,
 * 64-byte aligned for XRSTOR. */
#define KUC 304         /* the kernel's struct ucontext: flags, link, stack, sigcontext, mask */
#define FRAME_HEAD 448  /* return address, ucontext, siginfo: the fp state after */
_Static_assert(offsetof(ucontext_t, uc_sigmask) + 8 == KUC, "the kernel's ucontext");
_Static_assert(offsetof(struct kr__vframe, frame) % 64 == 0, "XRSTOR's alignment");

struct kr__vframe *kr__frame_save(const ucontext_t *uc)
{
	const unsigned char *fp = (const unsigned char *)uc->uc_mcontext.fpregs;
	uint32_t fpsz = 0, sw[2];
	if (fp) {
		fpsz = 512;
		memcpy(sw, fp + 464, sizeof sw); /* _fpx_sw_bytes: magic1, extended_size */
		if (sw[0] == 0x46505853u && sw[1] > 512 && sw[1] <= (1u << 16))
			fpsz = sw[1];
	}
	size_t len = sizeof(struct kr__vframe) + FRAME_HEAD + ((fpsz + 63) & ~63u);
	struct kr__vframe *vf = aligned_alloc(64, (len + 63) & ~(size_t)63);
	if (!vf)
		return NULL;
	memset(vf, 0, sizeof *vf + FRAME_HEAD);
	memcpy(vf->frame + 8, uc, KUC);
	if (fp) {
		memcpy(vf->frame + FRAME_HEAD, fp, fpsz);
		((ucontext_t *)(vf->frame + 8))->uc_mcontext.fpregs =
			(fpregset_t)(vf->frame + FRAME_HEAD);
	}
	vf->sp = (uintptr_t)vf->frame + 8;
	return vf;
}

void kr__thr_resume(struct kr__uthr *t, long rax, uintptr_t callsp)
{
	struct kr__vframe *vf = t->vframe;
	ucontext_t *uc = (ucontext_t *)(vf->frame + 8);
	uc->uc_mcontext.gregs[REG_RAX] = rax;
	kr__uthr_here(t); /* armed first: its mask lets the kick in */
	vp_frame(uc);
	kr__sig_fatal(t); /* what came meanwhile, that ends it */
	STACK_CLEAN(kr__mm(t->up));
#if defined(__SANITIZE_ADDRESS__)
	if (vf->top && callsp && callsp < vf->top && vf->top - callsp < ((size_t)1 << 30))
		__asan_unpoison_memory_region((void *)(callsp - 65536), vf->top - callsp + 65536);
#else
	(void)callsp;
#endif
	kr__img_sigreturn(vf->sp, t->fs);
}

/* A deferred fork's parent goes on (resume): its memory as at the fork
 * first, then its call returns (CLONE_PARENT_SETTID's word written again:
 * the copy held it before). */
static __attribute__((noreturn, used)) void dfork_back(struct kr__dfork *df)
{
	struct kr__uthr *p = df->p;
	long rv = df->rv;
	uintptr_t callsp = df->callsp;
	kr__mem_put(&df->mem);
	if ((df->flags & CLONE_PARENT_SETTID) && rv > 0) {
		pid_t pid = (pid_t)rv;
		(void)kr__ucopy((void *)df->ptid, &pid, sizeof pid);
	}
	kr__mem_free(&df->mem);
	free(df);
	kr__thr_resume(p, rv, callsp);
}

/* The parent thread p of a vfork goes on from its call, which returns rv
 * (the child's pid), with every register as it was (callsp: where the
 * child's last call was, whose frames the sanitizer forgets).  The
 * parent of a deferred fork (df) gets its memory back first, off its
 * stack, which the restore writes: on its microprocess's own. */
static __attribute__((noreturn)) void resume(struct kr__uthr *p, struct kr__vframe *vf, long rv,
					     uintptr_t callsp, struct kr__dfork *df)
{
	p->vchild = NULL;
	free(p->vframe); /* the last one's rt_sigreturn is long done */
	p->vframe = vf;
	if (!df)
		kr__thr_resume(p, rv, callsp);
	df->p = p;
	df->rv = rv;
	df->callsp = callsp;
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (here < p->die_sp && p->die_sp - here < KR__MP_STACK)
		dfork_back(df); /* there already: a child's end (end_here) */
	DIE_STACK_CLEAN(p);
	__asm__ volatile("mov %0, %%rsp\n\tcall *%1" : : "r"(p->die_sp), "r"(dfork_back), "D"(df)
			 : "memory");
	__builtin_unreachable();
}

/* What the parent of a vfork child c goes on with: its thread, the frame
 * its call returns through, its deferred fork, and where the child's last
 * call was; c is taken off the parent's microprocess. */
struct vback {
	struct kr__uthr *p;
	struct kr__vframe *vf;
	struct kr__dfork *df;
	uintptr_t callsp;
};

static struct vback vchild_off(struct kr_uproc *c)
{
	struct vback b = {c->vparent, c->main.vframe, c->dfork, c->main.callsp};
	c->vparent = NULL;
	c->dfork = NULL;
	c->main.vframe = NULL;
	c->own_mp = 0;
	c->main.mp = NULL;
	return b;
}

/* A vfork child ends before it execs (its status set), on its parent's
 * microprocess: a zombie for its parent, which goes on. */
static void vfork_end(struct kr_uproc *c)
{
	pid_t pid = c->pid;
	struct vback b = vchild_off(c);
	release(c);
	orphan_kids(c);
	if (family_end(c))
		uproc_free(c);
	resume(b.p, b.vf, pid, b.callsp, b.df);
}

void kr__uproc_dfork_end(struct kr_uproc *c, long pid, int pidfd)
{
	struct vback b = vchild_off(c);
	struct kr_uproc *up = b.p->up;
	pthread_mutex_lock(&G.lock); /* it is no child of up's: the process is */
	struct kr_uproc **pp = &up->kids;
	while (*pp != c)
		pp = &(*pp)->sib;
	*pp = c->sib;
	c->parent = NULL;
	pthread_mutex_unlock(&G.lock);
	release(c);
	orphan_kids(c);
	uproc_free(c);
	if (pid > 0 && kr__uproc_real_child(up, (pid_t)pid, pidfd))
		pid = -EAGAIN; /* the process runs all the same, as fork.c's */
	resume(b.p, b.vf, pid, b.callsp, b.df);
}

long kr__uproc_vfork(struct kr__uthr *t, unsigned long flags, uintptr_t stack, uintptr_t ptid,
		     uintptr_t ctid, uint64_t tls)
{
	struct kr_uproc *up = t->up;
	if (!t->uc)
		return -ENOSYS;
	struct kr_uproc *c = uproc_alloc();
	if (!c)
		return -ENOMEM;
	c->magic = KR_UPROC_MAGIC;
	thr_init(c);
	long err = -ENOMEM;
	c->cwdfd = fcntl(up->cwdfd, F_DUPFD_CLOEXEC, 3);
	if (c->cwdfd < 0) {
		err = -errno;
		goto fail;
	}
	if (!(c->cwd = strdup(up->cwd)))
		goto fail;
	err = 0;
	kr__fd_lock(&up->fds); /* against its other threads */
	for (int fd = 0; fd < up->fds.n && !err; fd++) {
		struct kr__ufile *f = up->fds.fd[fd].f;
		if (!f)
			continue;
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
		if ((err = kr__fd_set(&c->fds, fd, f, up->fds.fd[fd].cloexec)))
			kr__ufile_put(f);
	}
	kr__fd_unlock(&up->fds);
	if (err)
		goto fail;
	err = -ENOMEM;
	if (!(c->main.vframe = kr__frame_save(t->uc)))
		goto fail;
	c->main.vframe->top = stack;
	c->umask = up->umask;
	c->isolate = up->isolate; /* for the image its exec loads */
	c->iso_mode = up->isolate ? KR_UPROC_ISO_PAGES : KR_UPROC_ISO_NONE;
	memcpy(c->sig, up->sig, sizeof c->sig);
	c->main.sigmask = t->sigmask;
	c->main.altstack = t->altstack;
	c->main.fs = flags & CLONE_SETTLS ? tls : t->fs;
	c->main.die_sp = t->die_sp;
	c->main.mp = t->mp;
	c->ppid = up->pid;
	if (flags & CLONE_CHILD_CLEARTID)
		c->main.tidaddr = ctid;
	c->pid = c->main.tid = kr__uproc_new_pid();
	err = -EFAULT;
	if ((flags & CLONE_PARENT_SETTID) && kr__ucopy((void *)ptid, &c->pid, sizeof c->pid))
		goto fail;
	if ((flags & CLONE_CHILD_SETTID) && kr__ucopy((void *)ctid, &c->pid, sizeof c->pid))
		goto fail;
	pthread_mutex_lock(&G.lock);
	c->parent = up;
	c->sib = up->kids;
	up->kids = c;
	live_link(c);
	pthread_mutex_unlock(&G.lock);
	if (stack)
		t->uc->uc_mcontext.gregs[REG_RSP] = (greg_t)stack;
	c->vparent = t;
	t->vchild = c; /* its calls are the child's from here on */
	return 0;
fail:
	release(c);
	uproc_free(c);
	return err;
}

/* exec's end, on the microprocess's own stack: the old image goes (kept
 * if it can be, as at an exit), the new one starts. */
static __attribute__((noreturn, used)) void exec_here(struct kr_uproc *up, struct kr_uproc *old)
{
	STACK_CLEAN(old);
	old->exited = 1;
	kr__img_keep(old);
	mem_release(old);
	free_vectors(old);
	free(old);
	start_image(up);
}

/* exec's end when the program runs as a process of its own: up stands for
 * it (a kill sent to up reaches it), on its microprocess's own stack (a
 * vfork child on one of its own, its parent going on). */
static long stand_for(struct kr__uthr *t, pid_t pid, int pidfd)
{
	struct kr_uproc *up = t->up;
	stands_for(up, pidfd);
	if (!up->vparent) {
		DIE_STACK_CLEAN(t);
		__asm__ volatile("mov %0, %%rsp\n\tcall *%1"
				 :
				 : "r"(t->die_sp), "r"(stand_in_here), "D"(up)
				 : "memory");
		__builtin_unreachable();
	}
	struct kr__uthr *p = up->vparent;
	struct kr__vframe *vf = t->vframe;
	struct kr__dfork *df = up->dfork;
	uintptr_t callsp = t->callsp;
	kr_attr ma = {.stack_size = KR__MP_STACK_OF(up), .udata = t};
	kr_mp *mp;
	up->vparent = NULL;
	up->dfork = NULL;
	t->vframe = NULL;
	up->own_mp = 1;
	p->vchild = NULL;
	pthread_mutex_lock(&G.lock);
	int err = kr_mp_create(&mp, &ma, stand_in, up);
	if (!err)
		t->mp = mp;
	pthread_mutex_unlock(&G.lock);
	if (err) { /* nobody waits for the process: it runs on alone */
		up->vparent = p;
		up->dfork = df;
		t->vframe = vf;
		p->vchild = up;
		up->status = 128 + SIGKILL;
		vfork_end(up);
	}
	resume(p, vf, up->pid, callsp, df);
	(void)pid;
}

/* What an exec keeps of the process, and what it does not (its other
 * threads have ended): t is the thread the new program starts on. */
static void exec_keep(struct kr_uproc *up, struct kr__uthr *t)
{
	kr__timers_delete(up);
	kr__call_close(up, 0); /* its exports were the old image's */
	for (int fd = 0; fd < up->fds.n; fd++)
		if (up->fds.fd[fd].f && up->fds.fd[fd].cloexec)
			kr__fd_close(&up->fds, fd);
	for (int i = 1; i < 65; i++)
		if (up->sig[i].handler != (uint64_t)SIG_IGN) {
			up->sig[i] = (struct sigaction_k){.handler = (uint64_t)SIG_DFL};
			__atomic_store_n(&up->sig[i].handler, (uint64_t)SIG_DFL, __ATOMIC_RELAXED);
		}
	t->altstack = (stack_t){.ss_flags = SS_DISABLE};
	t->tidaddr = 0;
	up->exited = 0;
	t->fs = 0;
}

long kr__uproc_exec(struct kr__uthr *t, int dirfd, const char *path, char **argv, char **envp)
{
	struct kr_uproc *up = t->up;
	struct kr_uproc *old = uproc_alloc();
	if (!old) {
		struct kr_uproc v = {.argv = argv, .envp = envp};
		free_vectors(&v);
		return -ENOMEM;
	}
	kr__iso_end(up); /* the old image open while it goes (a vfork child's: none) */
	image_move(old, up); /* a vfork child's: nothing */
	up->argv = argv;
	up->envp = envp;
	/* what the new image starts with: the mask, and the signals ignored */
	int keep = t->sigmask != 0;
	for (int i = 1; i < 65; i++)
		keep |= up->sig[i].handler == (uint64_t)SIG_IGN;
	up->sigkeep = keep;
	int err = image(up, dirfd, path);
	long real = 0;
	int pidfd = -1;
	if (err == EADDRINUSE) { /* the program as a process of its own */
		real = kr__uproc_exec_process(t, dirfd, path, up->argv, up->envp, &pidfd);
		err = real < 0 ? (int)-real : 0;
	}
	if (err || real) { /* the old image goes on, or stands for the process */
		kr__elf_unload(&up->ld);
		mem_release(up);
		free_vectors(up);
		image_move(up, old);
		free(old);
		if (err) {
			if (!up->vparent)
				(void)kr__iso_begin(up); /* the old image goes on */
			return -err;
		}
	}
	/* No way back: its other threads end first, as the kernel's de_thread;
	 * its timer_create timers go.  In a thread other than the first, the
	 * first takes the exec over, once the others have ended (thr_end),
	 * and this one ends. */
	pthread_mutex_lock(&G.lock);
	kr__thr_stop_others(up, t, 1);
	if (t != &up->main) {
		up->exec_old = real ? NULL : old;
		up->exec_real = (pid_t)real;
		up->exec_pidfd = pidfd;
		up->exec_mask = t->sigmask;
		__atomic_store_n(&up->main.stop, 2, __ATOMIC_SEQ_CST);
		kr_sem_post(&up->thr_sem); /* a first thread that ended waits there */
	}
	pthread_mutex_unlock(&G.lock);
	if (t != &up->main) {
		kr__uthr_end(t, 0, KR__END_THREAD);
		__builtin_unreachable();
	}
	for (;;) {
		pthread_mutex_lock(&G.lock);
		int n = up->nthreads;
		pthread_mutex_unlock(&G.lock);
		if (n == 1)
			break;
		kr_sem_wait(&up->thr_sem);
	}
	kr__thr_reap(up);
	if (real) {
		kr__timers_delete(up);
		kr__call_close(up, 0); /* its exports were the old image's */
		return stand_for(t, (pid_t)real, pidfd);
	}
	exec_keep(up, t);
	if (!up->vparent) {
		DIE_STACK_CLEAN(t);
		__asm__ volatile("mov %0, %%rsp\n\tcall *%1"
				 :
				 : "r"(t->die_sp), "r"(exec_here), "D"(up), "S"(old)
				 : "memory");
		__builtin_unreachable();
	}
	/* A vfork child: a μprocess of its own now, on a microprocess of its
	 * own, and its parent goes on.  Its microprocess is set under the
	 * lock, which its end takes before it reads it. */
	free(old);
	struct kr__uthr *p = up->vparent;
	struct kr__vframe *vf = t->vframe;
	struct kr__dfork *df = up->dfork;
	pid_t pid = up->pid;
	uintptr_t callsp = t->callsp;
	up->vparent = NULL;
	up->dfork = NULL; /* before it runs: its calls are its own */
	t->vframe = NULL;
	up->own_mp = 1;
	p->vchild = NULL;
	kr_attr ma = {.stack_size = KR__MP_STACK_OF(up), .udata = t};
	kr_mp *mp;
	pthread_mutex_lock(&G.lock);
	err = kr_mp_create(&mp, &ma, run, up);
	if (!err)
		t->mp = mp;
	pthread_mutex_unlock(&G.lock);
	if (err) { /* it cannot run: it ends as the kernel ends an exec gone wrong */
		up->vparent = p;
		up->dfork = df;
		t->vframe = vf;
		p->vchild = up;
		up->status = 128 + SIGKILL;
		vfork_end(up);
	}
	resume(p, vf, pid, callsp, df);
}
