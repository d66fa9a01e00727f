/*
 * karui image layer — a μprocess's signals delivered to its own handlers,
 * as the kernel delivers a process's.
 *
 * A signal for a μprocess is karui's, never the kernel's: kill, tgkill and
 * raise to itself, SIGPIPE on a write without readers (sys_*.c), SIGALRM
 * from its timer, kr_uproc_kill from outside and kill from another
 * μprocess (uproc.c) queue it (kr__sig_queue: a pending bit and what its
 * siginfo says; standard signals, one of each kind pending at a time), and
 * one it does not block sets its attn (and what its signalfds show
 * follows: sys_sigfd.c, kr__sigfd_sync).  With threads (thread.c), what is
 * sent to the μprocess is pending for it, and set in the attn of the
 * first thread that does not block it (target, as the kernel's
 * complete_signal); what is sent to a thread (tgkill, raise, SIGPIPE, a
 * fault) is that thread's; each thread has its own mask, and what it takes
 * is its own first, then the μprocess's.  Every way back into its code reads
 * attn (gate.S): after a call served in a trap, after a call at a
 * rewritten site (through kr__img_deliver, which traps to get a frame),
 * after a fault; and a μprocess that makes no call is interrupted by a
 * kick, KR__SIGKICK sent to the VP running its code (uproc.c).  There
 * kr__img_signal takes the kernel's frame of that moment (the ucontext its
 * rt_sigreturn is about to restore) and delivers each pending signal it
 * does not block, lowest first, as the kernel does: the default action
 * (its end with 128 + the signal, or nothing), or its handler:
 *
 *  - an rt signal frame below its red zone, on its stack or its alternate
 *    stack (SA_ONSTACK), laid out as the kernel's (struct kframe): the
 *    restorer (SA_RESTORER, glibc's __restore_rt) as the return address, a
 *    ucontext with the interrupted registers, its alternate stack, the
 *    signal mask to restore, a siginfo, and the FP/vector state (the
 *    kernel's XSAVE image, copied) behind uc_mcontext.fpregs;
 *  - the kernel's frame edited to enter the handler: %rdi the signal, %rsi
 *    the siginfo, %rdx the ucontext, the flags' DF and TF cleared;
 *  - its mask gains sa_mask and the signal (not with SA_NODEFER);
 *    SA_RESETHAND resets the disposition; SS_AUTODISARM disarms the
 *    alternate stack.
 * The frame must lie in its own mappings; one that cannot be written ends
 * it with SIGSEGV, as the kernel forces.  A call that a signal cut short
 * (it returned -EINTR, kr__sys) restarts when no handler runs, or when
 * the handler has SA_RESTART and the call is one the kernel restarts
 * (KR__RESTART_SA), or after any handler (KR__RESTART_ALWAYS, the
 * kernel's -ERESTARTNOINTR): its instruction again, %rax its number.  A call's
 * own mask (sigsuspend, ppoll, pselect6, epoll_pwait) stays for the
 * handler that ends it, whose frame holds the mask from before the call.
 *
 * rt_sigreturn, a call the μprocess makes from the restorer, is served
 * here too (kr__sys only asks for it): the ucontext at its stack pointer
 * becomes the kernel's frame's.  It is the μprocess's word, so it is
 * checked as any pointer it passes: read through uaccess.S, %rip and %rsp
 * within its own mappings (or %rip in the vDSO), the mask without SIGKILL
 * and SIGSTOP, the flags it may set (not TF or AC, which would reach
 * karui's code), the segments the kernel's; of the FP/vector state only
 * x87, SSE, AVX and AVX-512 with a valid MXCSR.  Anything else ends it with
 * SIGSEGV.
 *
 * A kick may land where karui's code, already past its look at attn, is
 * about to return to the μprocess (gate.S's labels): then the frame it
 * returns through is the one delivered into, and the return of a rewritten
 * site is done as the trampoline would.  Anywhere else in karui's code
 * the kick does nothing: the way back looks at attn.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uproc.h"

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif
#define KSA_RESTORER 0x04000000
#define BIT(s) ((uint64_t)1 << ((s)-1))

/* The kernel's struct rt_sigframe (x86-64), at the handler's %rsp. */
struct kuc {
	uint64_t flags, link;
	stack_t stack;
	uint64_t gregs[NGREG];
	uint64_t fpregs;
	uint64_t reserved1[8];
	uint64_t sigmask;
};
struct kframe {
	uint64_t pretcode;
	struct kuc uc;
	siginfo_t info;
};
_Static_assert(sizeof(struct kuc) == 304, "the kernel's ucontext");
_Static_assert(offsetof(ucontext_t, uc_mcontext) == offsetof(struct kuc, gregs), "mcontext");
_Static_assert(offsetof(ucontext_t, uc_sigmask) == offsetof(struct kuc, sigmask), "sigmask");

#define FX_MXCSR 24
#define FX_MXCSR_MASK 28
#define FX_SW 464                /* struct _fpx_sw_bytes */
#define XSTATE_MAGIC1 0x46505853u
#define XSAVE_HDR 512
#define XFEAT_OK 0xe7ull         /* x87 SSE AVX opmask ZMM_Hi256 Hi16_ZMM */

static inline void lock(struct kr_uproc *up)
{
	kr__spin_lock(&up->siglock);
}

static inline void unlock(struct kr_uproc *up)
{
	kr__spin_unlock(&up->siglock);
}

static int ignored(const struct kr_uproc *up, int sig)
{
	uint64_t h = __atomic_load_n(&up->sig[sig].handler, __ATOMIC_RELAXED);
	return sig != SIGKILL && (h == (uint64_t)SIG_IGN || (h == (uint64_t)SIG_DFL && !kr__sig_ends(sig)));
}

/* The thread a signal for the μprocess goes to, as the kernel's
 * complete_signal chooses: the first that does not block it, else the
 * first (where it waits, pending, until one unblocks it); NULL when every
 * thread has ended.  Under the layer's lock. */
static struct kr__uthr *target(struct kr_uproc *up, uint64_t bit)
{
	struct kr__uthr *first = NULL;
	KR__FOR_THREADS(up, o) {
		if (__atomic_load_n(&o->gone, __ATOMIC_RELAXED))
			continue;
		if (!(__atomic_load_n(&o->sigmask, __ATOMIC_SEQ_CST) & bit))
			return o;
		if (!first)
			first = o;
	}
	return first;
}

struct kr__uthr *kr__sig_queue(struct kr_uproc *up, struct kr__uthr *t, int sig, int code,
			       pid_t pid, uint64_t addr)
{
	uint64_t bit = BIT(sig);
	struct kr__uthr *to, *w = NULL;
	lock(up);
	to = t ? t : target(up, bit);
	if (!to) {
		unlock(up);
		return NULL;
	}
	int blocked = !!(__atomic_load_n(&to->sigmask, __ATOMIC_SEQ_CST) & bit);
	/* an ignored signal is dropped, unless blocked: its disposition may
	 * change by the time it is unblocked */
	if (!blocked && ignored(up, sig)) {
		unlock(up);
		return NULL;
	}
	uint64_t *pend = t ? &t->sigpending : &up->sigpending;
	struct kr__sigi *si = t ? t->sigi : up->sigi;
	if (!(__atomic_load_n(pend, __ATOMIC_RELAXED) & bit))
		si[sig] = (struct kr__sigi){code, pid, (int)getuid(), addr};
	__atomic_fetch_or(pend, bit, __ATOMIC_SEQ_CST);
	kr__sigfd_sync(up, bit);
	if (!(__atomic_load_n(&to->sigmask, __ATOMIC_SEQ_CST) & bit)) {
		__atomic_store_n(&to->attn, 1, __ATOMIC_SEQ_CST);
		w = to;
	} else if (t) {
		if (__atomic_load_n(&t->waitset, __ATOMIC_SEQ_CST) & bit)
			w = t;
	} else {
		KR__FOR_THREADS(up, o)
			if (!w && !__atomic_load_n(&o->gone, __ATOMIC_RELAXED) &&
			    (__atomic_load_n(&o->waitset, __ATOMIC_SEQ_CST) & bit))
				w = o;
	}
	unlock(up);
	return w;
}

static void fill_info(siginfo_t *si, int sig, const struct kr__sigi *i)
{
	memset(si, 0, sizeof *si);
	si->si_signo = sig;
	si->si_code = i->code;
	if (i->code == SI_TIMER) { /* a timer_create timer's (sys_sig.c): pid its id */
		si->si_timerid = i->pid;
		si->si_value.sival_ptr = (void *)i->addr;
	} else if (i->code == SI_USER || i->code < 0) { /* kill, tkill, sigqueue (its value) */
		si->si_pid = i->pid;
		si->si_uid = (uid_t)i->uid;
		si->si_value.sival_ptr = (void *)i->addr;
	} else if (sig == SIGCHLD && (i->code == CLD_EXITED || i->code == CLD_KILLED)) {
		si->si_pid = i->pid; /* a child's end (uproc.c): addr its status */
		si->si_uid = (uid_t)i->uid;
		si->si_status = (int)i->addr;
	} else if (i->addr) {
		si->si_addr = (void *)i->addr;
	}
}

/* What is pending for t: its own and its μprocess's. */
static inline uint64_t pending(const struct kr__uthr *t)
{
	return __atomic_load_n(&t->sigpending, __ATOMIC_SEQ_CST) |
	       __atomic_load_n(&t->up->sigpending, __ATOMIC_SEQ_CST);
}

/* Take sig off the pending set, its own first (as the kernel dequeues):
 * its siginfo.  Under the lock. */
static void take(struct kr__uthr *t, int sig, siginfo_t *si)
{
	struct kr_uproc *up = t->up;
	if (__atomic_load_n(&t->sigpending, __ATOMIC_SEQ_CST) & BIT(sig)) {
		fill_info(si, sig, &t->sigi[sig]);
		__atomic_fetch_and(&t->sigpending, ~BIT(sig), __ATOMIC_SEQ_CST);
	} else {
		fill_info(si, sig, &up->sigi[sig]);
		__atomic_fetch_and(&up->sigpending, ~BIT(sig), __ATOMIC_SEQ_CST);
	}
	kr__sigfd_sync(up, 0);
}

int kr__sig_take(struct kr__uthr *t, uint64_t set, siginfo_t *si)
{
	lock(t->up);
	uint64_t p = pending(t) & set;
	int sig = p ? __builtin_ctzll(p) + 1 : 0;
	if (sig)
		take(t, sig, si);
	unlock(t->up);
	kr__sig_rearm(t);
	return sig;
}

/* Its μprocess ends, or an exec in another thread ends it. */
static inline int told_to_end(const struct kr__uthr *t)
{
	return __atomic_load_n(&t->up->dying, __ATOMIC_SEQ_CST) ||
	       __atomic_load_n(&t->stop, __ATOMIC_SEQ_CST);
}

void kr__sig_rearm(struct kr__uthr *t)
{
	__atomic_store_n(&t->attn, 0, __ATOMIC_SEQ_CST);
	if ((pending(t) & ~__atomic_load_n(&t->sigmask, __ATOMIC_SEQ_CST)) || t->restart ||
	    t->sigreturn || t->has_saved_mask || t->redo || told_to_end(t))
		__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
}

/* The lowest pending signal it does not block: its action, taken off the
 * pending set unless it ends the μprocess.  0: none. */
enum { ACT_NONE, ACT_END, ACT_IGNORE, ACT_HANDLER };
static int next(struct kr__uthr *t, int *sig, siginfo_t *si, struct sigaction_k *ka)
{
	struct kr_uproc *up = t->up;
	lock(up);
	uint64_t p = pending(t) & ~t->sigmask;
	if (!p) {
		unlock(up);
		return ACT_NONE;
	}
	int s = __builtin_ctzll(p) + 1;
	*sig = s;
	uint64_t h = up->sig[s].handler;
	if (s == SIGKILL || (h == (uint64_t)SIG_DFL && kr__sig_ends(s))) {
		unlock(up);
		return ACT_END;
	}
	take(t, s, si);
	if (h == (uint64_t)SIG_DFL || h == (uint64_t)SIG_IGN) {
		unlock(up);
		return ACT_IGNORE;
	}
	*ka = up->sig[s];
	if (ka->flags & SA_RESETHAND) {
		up->sig[s].handler = (uint64_t)SIG_DFL;
		up->sig[s].flags &= ~(uint64_t)SA_SIGINFO;
	}
	unlock(up);
	return ACT_HANDLER;
}

void kr__sig_fatal(struct kr__uthr *t)
{
	if (told_to_end(t)) {
		kr__uthr_end(t, 0, KR__END_THREAD);
		__builtin_unreachable();
	}
	uint64_t p = pending(t) & ~t->sigmask;
	for (; p; p &= p - 1) {
		int sig = __builtin_ctzll(p) + 1;
		uint64_t h = __atomic_load_n(&t->up->sig[sig].handler, __ATOMIC_RELAXED);
		if (sig == SIGKILL || (h == (uint64_t)SIG_DFL && kr__sig_ends(sig))) {
			kr__uthr_end(t, 128 + sig, KR__END_KILLED);
			__builtin_unreachable();
		}
	}
}

/* ---------------- what is the μprocess's ---------------- */

static uintptr_t vdso_lo, vdso_hi;

static void vdso_find(void)
{
	const Elf64_Ehdr *e = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	if (!e || __atomic_load_n(&vdso_hi, __ATOMIC_ACQUIRE))
		return;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)e + e->e_phoff);
	uintptr_t hi = (uintptr_t)e + 8192;
	for (unsigned i = 0; i < e->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && (uintptr_t)e + ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = (uintptr_t)e + ph[i].p_vaddr + ph[i].p_memsz;
	vdso_lo = (uintptr_t)e;
	__atomic_store_n(&vdso_hi, hi, __ATOMIC_RELEASE);
}

int kr__sig_ucode(struct kr_uproc *up, uintptr_t ip)
{
	vdso_find();
	return (ip >= vdso_lo && ip < __atomic_load_n(&vdso_hi, __ATOMIC_ACQUIRE)) ||
	       kr__rl_covers(&kr__mm(up)->reg, ip, ip + 1);
}

static int on_altstack(const struct kr__uthr *t, uintptr_t sp)
{
	const stack_t *a = &t->altstack;
	return !(a->ss_flags & SS_DISABLE) && sp > (uintptr_t)a->ss_sp &&
	       sp <= (uintptr_t)a->ss_sp + a->ss_size;
}

int kr__sig_uret(greg_t *g)
{
	uint64_t ra;
	uint8_t t[13];
	if (kr__ucopy(&ra, (const void *)g[REG_RSP], 8))
		return -EFAULT;
	g[REG_RIP] = (greg_t)ra;
	g[REG_RSP] += 8;
	/* the trampoline's tail: lea 128(%rsp),%rsp; jmp site+2 */
	if (!kr__ucopy(t, (const void *)ra, sizeof t) &&
	    !memcmp(t, "\x48\x8d\xa4\x24\x80\x00\x00\x00\xe9", 9)) {
		int32_t rel;
		memcpy(&rel, t + 9, 4);
		g[REG_RSP] += 128;
		g[REG_RIP] = (greg_t)(ra + 13 + (int64_t)rel);
	}
	return 0;
}

/* ---------------- the FP/vector state ---------------- */

/* The size of the kernel's XSAVE image at fp (its magic says it has the
 * extended state), or the FXSAVE area's. */
static size_t fp_size(const uint8_t *fp)
{
	uint32_t magic, ext;
	memcpy(&magic, fp + FX_SW, 4);
	memcpy(&ext, fp + FX_SW + 4, 4);
	return magic == XSTATE_MAGIC1 && ext >= 576 && ext <= (1u << 16) ? ext : 512;
}

/* A component's offset and size in the standard XSAVE layout. */
static void xcomp(unsigned c, uint32_t *off, uint32_t *size)
{
	static uint32_t tab[8][2];
	if (!__atomic_load_n(&tab[c][1], __ATOMIC_ACQUIRE)) {
		unsigned a, b, cx, d;
		__cpuid_count(0xd, c, a, b, cx, d);
		tab[c][0] = b;
		__atomic_store_n(&tab[c][1], a, __ATOMIC_RELEASE);
	}
	*off = tab[c][0];
	*size = tab[c][1];
}

/* The μprocess's FP/vector state at u (its frame's) into the kernel's
 * image at kfp, which rt_sigreturn restores: what it may set of x87, SSE,
 * AVX and AVX-512, the rest as the kernel has it.  NULL: the initial
 * state.  0 or -EFAULT. */
static int fp_restore(uint8_t *kfp, const void *u)
{
	size_t n = fp_size(kfp);
	uint32_t mask;
	memcpy(&mask, kfp + FX_MXCSR_MASK, 4);
	if (!mask)
		mask = 0xffbf;
	uint64_t feat = 0;
	if (n > 512)
		memcpy(&feat, kfp + FX_SW + 8, 8);
	uint8_t b[n];
	if (!u) {
		memset(b, 0, n);
		uint32_t mx = 0x1f80;
		uint16_t fcw = 0x37f;
		memcpy(b + FX_MXCSR, &mx, 4);
		memcpy(b, &fcw, 2);
	} else if (kr__ucopy(b, u, n)) {
		return -EFAULT;
	}
	uint32_t mx;
	memcpy(&mx, b + FX_MXCSR, 4);
	mx &= mask;
	memcpy(b + FX_MXCSR, &mx, 4);
	memcpy(b + FX_MXCSR_MASK, kfp + FX_MXCSR_MASK, 4);
	memcpy(kfp, b, FX_SW); /* the legacy area; the kernel's software bytes */
	if (n > 512) {
		uint64_t ubv, kbv, ok = XFEAT_OK & feat;
		memcpy(&ubv, b + XSAVE_HDR, 8);
		memcpy(&kbv, kfp + XSAVE_HDR, 8);
		kbv = (kbv & ~ok) | (ubv & ok);
		memcpy(kfp + XSAVE_HDR, &kbv, 8);
		for (unsigned c = 2; c < 8; c++) {
			uint32_t off, size;
			if (!(ok & (1ull << c)))
				continue;
			xcomp(c, &off, &size);
			if (off >= 576 && size && off + size <= n)
				memcpy(kfp + off, b + off, size);
		}
	}
	return 0;
}

/* ---------------- the frame ---------------- */

/* The handler of sig enters at uc, from the context uc holds: 0, or -1
 * when its frame cannot be written (then nothing changed). */
static int setup_frame(struct kr__uthr *t, ucontext_t *uc, int sig, const siginfo_t *si,
		       const struct sigaction_k *ka, uint64_t oldmask)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uintptr_t isp = (uintptr_t)g[REG_RSP], sp = isp;
	int on = on_altstack(t, isp);
	int swit = (ka->flags & SA_ONSTACK) && !(t->altstack.ss_flags & SS_DISABLE) && !on;
	if (!(ka->flags & KSA_RESTORER))
		return -1;
	sp = swit ? (uintptr_t)t->altstack.ss_sp + t->altstack.ss_size : sp - 128;
	/* karui's own frames (the trap's, with the kernel's frame uc is in)
	 * may be on that stack below it: the handler's frame goes below them,
	 * and below what deliver's calls may yet use */
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (here < sp && sp - here < ((uintptr_t)1 << 20) &&
	    (!swit || here >= (uintptr_t)t->altstack.ss_sp))
		sp = here - 16384;
	/* and uc itself may be the context a frame on that stack holds (the
	 * frame resolve() went through: a time slice's end that came while
	 * the thread returned through one), made from the same stack pointer:
	 * the new frame goes below that one (its return address below uc),
	 * not over it */
	uintptr_t held = (uintptr_t)uc - 8;
	if (held < sp && sp - held < ((uintptr_t)1 << 20) &&
	    (!swit || held >= (uintptr_t)t->altstack.ss_sp))
		sp = held;
	const uint8_t *kfp = (const uint8_t *)uc->uc_mcontext.fpregs;
	size_t fsz = kfp ? fp_size(kfp) : 0;
	sp = (sp - fsz) & ~(uintptr_t)63;
	uintptr_t fp = sp;
	sp = ((sp - sizeof(struct kframe)) & ~(uintptr_t)15) - 8;
	if (sp > isp && !swit)
		return -1; /* wrapped */
	if (!kr__rl_covers(&kr__mm(t->up)->reg, sp, fp + fsz))
		return -1; /* not its memory: karui writes nothing there */
	struct kframe f;
	memset(&f, 0, sizeof f);
	f.pretcode = ka->restorer;
	f.uc.flags = 0x7 & (uint64_t)uc->uc_flags; /* UC_FP_XSTATE, UC_SIGCONTEXT_SS, _STRICT_ */
	f.uc.stack = t->altstack;
	f.uc.stack.ss_flags = (t->altstack.ss_flags & SS_DISABLE) ? SS_DISABLE
			      : on ? SS_ONSTACK
				   : (int)(t->altstack.ss_flags & (int)SS_AUTODISARM);
	if (f.uc.stack.ss_flags == SS_DISABLE)
		f.uc.stack.ss_sp = NULL, f.uc.stack.ss_size = 0;
	memcpy(f.uc.gregs, g, sizeof f.uc.gregs);
	f.uc.fpregs = kfp ? fp : 0;
	f.uc.sigmask = oldmask;
	f.info = *si;
	if (kr__ucopy((void *)sp, &f, sizeof f) || (kfp && kr__ucopy((void *)fp, kfp, fsz)))
		return -1;
	if (swit && (t->altstack.ss_flags & (int)SS_AUTODISARM))
		t->altstack = (stack_t){.ss_flags = SS_DISABLE};
	g[REG_RIP] = (greg_t)ka->handler;
	g[REG_RSP] = (greg_t)sp;
	g[REG_RDI] = sig;
	g[REG_RSI] = (greg_t)(sp + offsetof(struct kframe, info));
	g[REG_RDX] = (greg_t)(sp + offsetof(struct kframe, uc));
	g[REG_RAX] = 0;
	g[REG_EFL] &= ~(greg_t)(0x400 | 0x100 | 0x10000); /* DF TF RF */
	return 0;
}

/* rt_sigreturn: the context at the μprocess's %rsp (the restorer popped
 * the frame's return address) into uc.  0, or -1: not a frame it may
 * return to. */
static int sig_return(struct kr__uthr *t, ucontext_t *uc)
{
	struct kr_uproc *up = t->up;
	greg_t *g = uc->uc_mcontext.gregs;
	struct kuc f;
	if (kr__ucopy(&f, (const void *)g[REG_RSP], sizeof f))
		return -1;
	uint64_t ip = f.gregs[REG_RIP], sp = f.gregs[REG_RSP];
	/* a frame made where kr__img_yield's yield returned (resolve) goes
	 * back there, to its rt_sigreturn */
	if ((int64_t)ip != ((int64_t)(ip << 16) >> 16) ||
	    !(kr__sig_ucode(up, ip) || ip == (uintptr_t)kr__img_yield_ret) ||
	    !kr__rl_covers(&kr__mm(up)->reg, sp - 1, sp))
		return -1;
	uint8_t *kfp = (uint8_t *)uc->uc_mcontext.fpregs;
	if (kfp && fp_restore(kfp, (const void *)f.fpregs))
		return -1;
	/* the flags it may set: CF PF AF ZF SF DF OF (not TF, not AC) */
	const greg_t fix = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x400 | 0x800;
	greg_t fl = (g[REG_EFL] & ~fix) | ((greg_t)f.gregs[REG_EFL] & fix);
	greg_t seg = g[REG_CSGSFS], err = g[REG_ERR], trap = g[REG_TRAPNO],
	       old = g[REG_OLDMASK], cr2 = g[REG_CR2];
	memcpy(g, f.gregs, sizeof f.gregs);
	g[REG_EFL] = fl;
	g[REG_CSGSFS] = seg;
	g[REG_ERR] = err;
	g[REG_TRAPNO] = trap;
	g[REG_OLDMASK] = old;
	g[REG_CR2] = cr2;
	/* its alternate stack as the frame says, if it may be set (the
	 * kernel ignores an error there) */
	if (!on_altstack(t, sp)) {
		stack_t ss = f.stack;
		int mode = ss.ss_flags & (int)~SS_AUTODISARM;
		if (mode == SS_DISABLE)
			t->altstack = (stack_t){.ss_flags = SS_DISABLE};
		else if (mode == 0 && ss.ss_size >= (size_t)MINSIGSTKSZ)
			t->altstack = (stack_t){ss.ss_sp, ss.ss_flags & (int)SS_AUTODISARM, ss.ss_size};
	}
	t->has_saved_mask = 0;
	__atomic_store_n(&t->sigmask, f.sigmask & ~KR__UNBLOCKABLE, __ATOMIC_SEQ_CST);
	return 0;
}

/* The call that returned -EINTR, again: its instruction (the syscall, or
 * a rewritten site's jump), %rax its number. */
static void rewind_call(struct kr__uthr *t, greg_t *g)
{
	g[REG_RIP] -= 2;
	g[REG_RAX] = t->sys_nr;
}

/* Deliver into uc (a context of the thread's code) what is to be
 * delivered: KR__BACK_AGAIN, or KR__BACK_DIE with *status and *how its
 * end (kr__uthr_end's). */
static int deliver(struct kr__uthr *t, ucontext_t *uc, int *status, int *how)
{
	greg_t *g = uc->uc_mcontext.gregs;
	if (told_to_end(t)) {
		*status = 0;
		*how = KR__END_THREAD;
		return KR__BACK_DIE;
	}
	*how = KR__END_KILLED;
	if (t->sigreturn) {
		t->sigreturn = 0;
		if (sig_return(t, uc)) {
			*status = 128 + SIGSEGV;
			return KR__BACK_DIE;
		}
	}
	int restart = t->restart;
	t->restart = 0;
	if (restart && g[REG_RAX] != -EINTR)
		restart = 0;
	for (;;) {
		int sig;
		siginfo_t si;
		struct sigaction_k ka;
		int act = next(t, &sig, &si, &ka);
		if (act == ACT_NONE)
			break;
		if (act == ACT_END) {
			*status = 128 + sig;
			return KR__BACK_DIE;
		}
		if (act == ACT_IGNORE)
			continue;
		if (restart) {
			if ((restart == KR__RESTART_SA && (ka.flags & SA_RESTART)) ||
			    restart == KR__RESTART_ALWAYS)
				rewind_call(t, g);
			restart = 0;
		}
		uint64_t old = t->has_saved_mask ? t->saved_mask : t->sigmask;
		if (setup_frame(t, uc, sig, &si, &ka, old)) {
			*status = 128 + SIGSEGV;
			return KR__BACK_DIE;
		}
		t->has_saved_mask = 0;
		uint64_t m = t->sigmask | ka.mask | ((ka.flags & SA_NODEFER) ? 0 : BIT(sig));
		__atomic_store_n(&t->sigmask, m & ~KR__UNBLOCKABLE, __ATOMIC_SEQ_CST);
	}
	if (restart) /* no handler ran: the call goes on */
		rewind_call(t, g);
	if (t->has_saved_mask) {
		t->has_saved_mask = 0;
		__atomic_store_n(&t->sigmask, t->saved_mask, __ATOMIC_SEQ_CST);
	}
	kr__sig_rearm(t);
	return KR__BACK_AGAIN;
}

/* The context that the way back interrupted at uc returns to: uc itself
 * in the μprocess's code; the frame a return in gate.S goes through; or
 * NULL, where karui's code has yet to look at attn (or cannot deliver). */
static ucontext_t *resolve(struct kr__uthr *t, ucontext_t *uc)
{
	for (int depth = 0; depth < 8; depth++) {
		greg_t *g = uc->uc_mcontext.gregs;
		uintptr_t ip = (uintptr_t)g[REG_RIP], sp = (uintptr_t)g[REG_RSP];
		if ((ip >= (uintptr_t)kr__img_back_chk && ip <= (uintptr_t)kr__img_back_ret) ||
		    ip == (uintptr_t)kr__img_back_ret2)
			uc = (ucontext_t *)(sp + 8);
		else if (ip >= (uintptr_t)kr__img_restorer && ip < (uintptr_t)kr__img_restorer_end)
			uc = (ucontext_t *)sp;
		else {
			for (unsigned i = 0; i < 8; i++)
				if (ip == kr__img_fast_tails[i])
					return kr__sig_uret(g) ? NULL : uc;
			/* kr__img_yield's calls are the thread's, as its code's */
			if (ip == (uintptr_t)kr__img_yield_ret || ip == (uintptr_t)kr__img_yield_end)
				return uc;
			return kr__sig_ucode(t->up, ip) ? uc : NULL;
		}
		/* a frame of the kernel's, on a stack karui's code runs on */
		if (kr__uprobe(uc, sizeof *uc, 1))
			return NULL;
	}
	return NULL;
}

/* The way back (gate.S: kr__img_back), with the VP's thread pointer and
 * ALLOW: what attn says is delivered into the context uc returns to.  A
 * signal that ends the μprocess redirects uc to its end. */
/* The thread's time slice ended (uproc.c's ticker): it enters
 * kr__img_yield as a handler, which yields its VP and returns through its
 * rt_sigreturn, its mask and state as they were.  A frame that cannot be
 * written leaves it running. */
static void preempt(struct kr__uthr *t, ucontext_t *uc)
{
	static const struct sigaction_k ka = {.handler = (uint64_t)(uintptr_t)kr__img_yield,
					      .flags = KSA_RESTORER,
					      .restorer = (uint64_t)(uintptr_t)kr__img_yield};
	siginfo_t si;
	memset(&si, 0, sizeof si);
	setup_frame(t, uc, 0, &si, &ka, t->sigmask);
}

__attribute__((used)) int kr__img_signal(ucontext_t *uc)
{
	struct kr__uthr *t = kr__uthr_self();
	int pre = kr__img_preempted();
	if (!t || (!pre && !__atomic_load_n(&t->attn, __ATOMIC_SEQ_CST)))
		return KR__BACK_NOW;
	ucontext_t *to = resolve(t, uc);
	if (!to)
		return KR__BACK_NOW;
	/* a thread on its way back from a yield has just yielded */
	uintptr_t at = (uintptr_t)to->uc_mcontext.gregs[REG_RIP];
	if (pre && (at == (uintptr_t)kr__img_yield_ret || at == (uintptr_t)kr__img_yield_end)) {
		pre = 0;
		if (!__atomic_load_n(&t->attn, __ATOMIC_SEQ_CST))
			return KR__BACK_NOW;
	}
	if (pre && !__atomic_load_n(&t->attn, __ATOMIC_SEQ_CST)) {
		preempt(t, to);
		return KR__BACK_AGAIN;
	}
	int status, how, r = deliver(t, to, &status, &how);
	if (pre && r == KR__BACK_AGAIN)
		preempt(t, to);
	if (r == KR__BACK_DIE) {
		greg_t *g = uc->uc_mcontext.gregs;
		g[REG_RIP] = (greg_t)(uintptr_t)kr__uthr_end;
		g[REG_RSP] = (greg_t)(t->die_sp - 8);
		g[REG_RDI] = (greg_t)(uintptr_t)t;
		g[REG_RSI] = status;
		g[REG_RDX] = how;
	}
	return r;
}

int kr__sig_fault(struct kr__uthr *t, ucontext_t *uc, const siginfo_t *si)
{
	struct kr_uproc *up = t->up;
	int sig = si->si_signo;
	lock(up);
	uint64_t h = up->sig[sig].handler;
	struct sigaction_k ka = up->sig[sig];
	int run = !(t->sigmask & BIT(sig)) && h != (uint64_t)SIG_DFL && h != (uint64_t)SIG_IGN;
	if (run && (ka.flags & SA_RESETHAND)) {
		up->sig[sig].handler = (uint64_t)SIG_DFL;
		up->sig[sig].flags &= ~(uint64_t)SA_SIGINFO;
	}
	unlock(up);
	if (!run)
		return 0;
	uint64_t old = t->sigmask;
	if (setup_frame(t, uc, sig, si, &ka, old))
		return 0;
	uint64_t m = old | ka.mask | ((ka.flags & SA_NODEFER) ? 0 : BIT(sig));
	__atomic_store_n(&t->sigmask, m & ~KR__UNBLOCKABLE, __ATOMIC_SEQ_CST);
	kr__sig_rearm(t);
	return 1;
}
