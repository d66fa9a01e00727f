/*
 * karui L2 — a microprocess taken from its VP in the middle of its code
 * (alloc.h: kr__preempt), and the calls a processor allocator makes.
 *
 * The interrupted context.  A signal handler is given the interrupted
 * thread's whole state: the general registers in its ucontext, the FP and
 * vector state (XSAVE layout) behind uc_mcontext.fpregs.  kr__preempt
 * copies both onto the microprocess's own stack, below the 128-byte red
 * zone its code may be using, and lays under them a saved-context frame of
 * the core's switch (src/arch/frame.h) whose return address is
 * kr__preempt_resume.  The microprocess is then an ordinary switched-out
 * context: any VP resumes it with kr__ctx_switch, which returns into
 * kr__preempt_resume with r12 pointing at the copy (r13 and r14: the
 * caller's hook and its word, called first); it gives the copy the
 * resuming thread's signal mask and alternate stack (rt_sigreturn would
 * otherwise install the first thread's) and hands it to rt_sigreturn,
 * which restores every register, the flags and the FP/vector state
 * exactly, and the microprocess goes on at the instruction it was stopped
 * at.  The FS base is the thread's own and is not touched (the caller
 * refuses code that runs on another one: μprocesses).  So a stop costs one
 * signal and the resumption one system call, and only stopped
 * microprocesses pay: nothing is added to a switch.
 *
 * Leaving the handler.  The handler does not return: it restores the
 * interrupted mask and jumps to the VP's idle context (kr__ctx_jump), which
 * releases the microprocess's on_cpu once off the alternate signal stack;
 * the kernel's signal frame there is simply abandoned, as siglongjmp does.
 * The idle loop then gives w->held to the allocator's idle hook, or, for
 * kr__preempt_hold, to the caller's held() with its handle (w->hold): a
 * wait that a thread that is no VP ends (the page-fault notifier,
 * carea/faults.c), which needs no allocator.  The held microprocess's
 * permit is not touched: to the core it is still running (a wakeup sets
 * the permit; a direct switch to it is refused, EBUSY), and
 * kr__mp_ready_any hands it to the scheduler, from a thread that is no
 * VP as a post to the one VP (permit.h, POST_READY) while that state
 * lasts.  Its cost is the idle loop's one look at w->hold when it has
 * nothing handed over.
 *
 * The VP a handler interrupted.  A handler that may have interrupted a
 * μprocess's code runs on that μprocess's thread pointer, where karui's
 * thread-local data are not: kr__signal_worker finds the VP by its
 * thread id (a table of each VP's, filled as its worker is made) and
 * compares the thread pointer its worker recorded with the one now
 * (kr__thread_pointer: rdfsbase where the kernel allows it, else
 * arch_prctl; tpidr_el0 on aarch64) before anything thread-local is read.
 * kr__in_runtime adds the C library's and the dynamic linker's code to
 * karui's, where a handler refuses to take a microprocess (a lock, a
 * thread's data); the C-area's SIGURG handler and the notifier's both use
 * them.  Without an allocator kr__preempt_init runs once something wants
 * it (kr__preempt_want), at once on a VP and at each kr_init after.
 *
 * Karui running for the microprocess.  Between the moment karui makes a
 * microprocess findable (queued by its own yield, woken before it has
 * left, ending) and its switch, karui calls other code for it: the C
 * library, the vDSO's clock, liburing.  Taken there, it would be held and
 * queued at once.  So kr__preempt refuses while any of karui's code is on
 * the microprocess's stack (or, on aarch64, in its link register): it reads
 * the stack from the interrupted sp to where its function was entered,
 * found once by a probe microprocess at kr_init (kr__preempt_init: the
 * return address into the core's entry, and the distance from a record to
 * its function's frame).  A stop costs that scan, a few hundred words for
 * most microprocesses; nothing on a switch.
 *
 * Where it refuses (EAGAIN) is listed in alloc.h.  A system call about to
 * restart (the interrupted instruction is `syscall`) is refused because
 * the restart may depend on the thread it was made on (restart_syscall).
 * The sanitizer builds always refuse: their fiber bookkeeping does not
 * know of a switch made here.  On aarch64 the FP and SIMD state is inside
 * the ucontext, and rt_sigreturn wants 128 bytes of siginfo below it; a
 * context with state beyond the ucontext (SVE's extra_context) is
 * refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "alloc.h"
#include "rt.h"

void kr__mp_ready(kr_mp *mp)
{
	seam_ready(W(), mp);
}

static struct {
	uintptr_t lo, hi;    /* karui's code */
	uintptr_t entry_ret; /* where a microprocess's function returns to */
	uintptr_t entry_off; /* a record's address less its function's CFA */
	struct { uintptr_t lo, hi; } text[8]; /* the C library's, ld.so's */
	unsigned ntext;
	int wanted;          /* kr__preempt_want was called */
	int fsgsbase;        /* x86-64: rdfsbase may be used (atomic; set
			      * by every VP at its start, to the same) */
	int tid[KR_VP_MAX];  /* each VP's thread (atomic; 0: none) */
} PR;

/* libkarui.a's code, in a program linked with it (cmake/karui-text.sh) */
extern const char __start_karui_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_karui_text[] __attribute__((weak, visibility("hidden")));

/* libkarui.so's: its executable segments, lowest to highest */
static int text_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0, at = (uintptr_t)&kr__mp_ready;
	int mine = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		mine |= at >= a && at < b;
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
	}
	if (mine) {
		PR.lo = lo;
		PR.hi = hi;
	}
	return mine;
}

int kr__in_karui(uintptr_t ip) { return ip - PR.lo < PR.hi - PR.lo; }

int kr__in_runtime(uintptr_t ip)
{
	if (kr__in_karui(ip))
		return 1;
	for (unsigned i = 0; i < PR.ntext; i++)
		if (ip >= PR.text[i].lo && ip < PR.text[i].hi)
			return 1;
	return 0;
}

struct text_want {
	uintptr_t at;   /* the object that holds this address */
	uintptr_t base; /* or, if not 0, the one loaded there */
};

static int lib_text_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const struct text_want *t = arg;
	int mine = t->base && info->dlpi_addr == t->base;
	for (int i = 0; !mine && !t->base && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		mine = ph->p_type == PT_LOAD && t->at >= lo && t->at < lo + ph->p_memsz;
	}
	if (!mine)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && PR.ntext < sizeof PR.text / sizeof PR.text[0];
	     i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		PR.text[PR.ntext].lo = info->dlpi_addr + ph->p_vaddr;
		PR.text[PR.ntext].hi = PR.text[PR.ntext].lo + ph->p_memsz;
		PR.ntext++;
	}
	return 1;
}

static void probe_run(void);

void kr__preempt_init(void)
{
	PR.entry_ret = 0;
	if (__start_karui_text && __stop_karui_text) {
		PR.lo = (uintptr_t)__start_karui_text;
		PR.hi = (uintptr_t)__stop_karui_text;
	} else {
		dl_iterate_phdr(text_of, NULL);
	}
	/* the C library's code and the dynamic linker's */
	struct text_want t[2] = {{(uintptr_t)&malloc, 0}, {0, (uintptr_t)getauxval(AT_BASE)}};
	PR.ntext = 0;
	for (int i = 0; i < 2; i++)
		if (t[i].at || t[i].base)
			dl_iterate_phdr(lib_text_of, &t[i]);
	probe_run();
}

void kr__preempt_want(void)
{
	__atomic_store_n(&PR.wanted, 1, __ATOMIC_RELAXED);
	if (W() && !PR.entry_ret)
		kr__preempt_init();
}

int kr__preempt_wanted(void) { return __atomic_load_n(&PR.wanted, __ATOMIC_RELAXED); }

/* ---------------- the VP a handler interrupted ---------------- */

uintptr_t kr__thread_pointer(void)
{
#if defined(__x86_64__)
	if (__atomic_load_n(&PR.fsgsbase, __ATOMIC_RELAXED)) {
		uintptr_t v;
		__asm__ volatile("rdfsbase %0" : "=r"(v));
		return v;
	}
	uintptr_t v = 0;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_arch_prctl), "D"(0x1003L /* ARCH_GET_FS */), "S"(&v)
			 : "rcx", "r11", "memory");
	return r == 0 ? v : 0;
#elif defined(__aarch64__)
	uintptr_t v;
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

void kr__preempt_vp(struct kr_worker *w, unsigned id)
{
#if defined(__x86_64__)
	__atomic_store_n(&PR.fsgsbase, (getauxval(AT_HWCAP2) & 2 /* HWCAP2_FSGSBASE */) != 0,
			 __ATOMIC_RELAXED);
#endif
	if (w)
		w->tp = kr__thread_pointer();
	__atomic_store_n(&PR.tid[id], w ? (int)syscall(SYS_gettid) : 0, __ATOMIC_RELEASE);
}

static int vp_index(int tid)
{
	uint32_t hi = __atomic_load_n(&kr__workers_hi, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; tid && i < hi && i < KR_VP_MAX; i++)
		if (__atomic_load_n(&PR.tid[i], __ATOMIC_ACQUIRE) == tid)
			return (int)i;
	return -1;
}

int kr__vp_tid(int tid) { return vp_index(tid) >= 0; }

struct kr_worker *kr__signal_worker(void)
{
	int i = vp_index((int)syscall(SYS_gettid));
	/* a VP's own worker lives while its thread runs */
	struct kr_worker *w = i < 0 ? NULL : __atomic_load_n(&kr__workers[i], __ATOMIC_ACQUIRE);
	return w && w->tp == kr__thread_pointer() ? w : NULL;
}

/* What the idle loop gives a taken microprocess to: fn NULL, the
 * allocator (kr__preempt); else fn(mp, arg) (kr__preempt_hold). */
struct hold {
	void (*fn)(kr_mp *mp, uintptr_t arg);
	uintptr_t arg;
};

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(__SANITIZE_ADDRESS__) && \
	!defined(__SANITIZE_THREAD__)

void kr__preempt_resume(void);
void kr__preempt_fixup(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg)
	__attribute__((visibility("hidden")));

/* Called by kr__preempt_resume on the resuming thread, before the copy
 * goes to rt_sigreturn, which installs what the frame holds: so this
 * thread's own alternate stack and mask go into it (three system calls in
 * all, a few microseconds, for the stopped microprocesses only). */
void kr__preempt_fixup(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg)
{
	if (hook)
		hook(arg);
	sigaltstack(NULL, &uc->uc_stack);
	uc->uc_stack.ss_flags &= ~SS_ONSTACK;
	pthread_sigmask(SIG_SETMASK, NULL, &uc->uc_sigmask);
}

/* The microprocess kr__preempt may take from w, or NULL (see alloc.h). */
static kr_mp *takeable(struct kr_worker *w)
{
	kr_mp *mp = w ? w->cur : NULL;
	return !mp || w->blocked || w->held || kr__spins_held ? NULL : mp;
}

__attribute__((noinline)) static void *probe(void *arg)
{
	PR.entry_ret = (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0));
	PR.entry_off = (uintptr_t)W()->cur - (uintptr_t)__builtin_dwarf_cfa();
	return arg;
}

static void probe_run(void)
{
	kr_mp *m;
	if (kr_mp_create(&m, NULL, probe, NULL) == 0)
		kr_mp_join(m, NULL);
}

/* Is karui's code running for mp, under the interrupted sp (lr: the link
 * register, 0 where return addresses are on the stack)?  Without the
 * probe's figures, or with a stack that does not match them, it says so. */
static int karui_below(const kr_mp *mp, uintptr_t sp, uintptr_t lr)
{
	uintptr_t lo = (uintptr_t)mp->stack_lo;
	uintptr_t top = mp->is_main ? lo + mp->stack_size : (uintptr_t)mp - PR.entry_off;
	if (!PR.entry_ret || sp < lo || top < sp || top > lo + mp->stack_size + 4096)
		return 1;
	if (kr__in_karui(lr) && lr != PR.entry_ret)
		return 1;
	for (const uintptr_t *p = (const uintptr_t *)(sp & ~(uintptr_t)7); (uintptr_t)p < top; p++)
		if (kr__in_karui(*p) && *p != PR.entry_ret)
			return 1;
	return 0;
}

/* mp's context is the frame at f now: leave the handler for w's idle
 * context, which releases mp once off the signal stack. */
__attribute__((noreturn)) static void taken(struct kr_worker *w, kr_mp *mp, void *f,
					    const ucontext_t *uc, const struct hold *h)
{
	mp->ctx.sp = f;
	w->held = mp;
	w->hold = h->fn;
	w->hold_arg = h->arg;
	w->cur = NULL; /* a signal from here on finds no microprocess */
	pthread_sigmask(SIG_SETMASK, &uc->uc_sigmask, NULL);
	kr__ctx_jump(&w->idle.ctx, &mp->on_cpu);
}

#endif

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

/* The resumption of a preempted context (see the top): entered by the
 * switch's `ret` with r12 = the ucontext copy, rsp 16-byte aligned. */
__asm__(".text\n"
	".globl kr__preempt_resume\n"
	".hidden kr__preempt_resume\n"
	".type kr__preempt_resume, @function\n"
	"kr__preempt_resume:\n"
	"	movq %r12, %rdi\n"
	"	movq %r13, %rsi\n"
	"	movq %r14, %rdx\n"
	"	call kr__preempt_fixup\n"
	"	movq %r12, %rsp\n"
	"	movl $15, %eax\n" /* rt_sigreturn */
	"	syscall\n"
	"	ud2\n"
	".size kr__preempt_resume, .-kr__preempt_resume\n");

_Static_assert(SYS_rt_sigreturn == 15, "kr__preempt_resume calls rt_sigreturn by number");


enum {
	RED_ZONE = 128,
	FP_SW_OFF = 464,          /* struct _fpx_sw_bytes in the FXSAVE area */
	FP_MAGIC1 = 0x46505853,
	FP_LEGACY = 512,
	FP_MAX = 64 * 1024,
	ROOM = 4096,              /* what kr__preempt_fixup may use below */
};

static int take(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg, const struct hold *h)
{
	struct kr_worker *w = W();
	kr_mp *mp = takeable(w);
	if (!mp)
		return EAGAIN;
	greg_t *g = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)g[REG_RIP];
	if (ip[0] == 0x0f && ip[1] == 0x05) /* a syscall to restart */
		return EAGAIN;
	if (karui_below(mp, (uintptr_t)g[REG_RSP], 0))
		return EAGAIN;
	const unsigned char *fp = (const unsigned char *)uc->uc_mcontext.fpregs;
	if (!fp)
		return EAGAIN;
	size_t fsz = FP_LEGACY;
	uint32_t magic, ext;
	memcpy(&magic, fp + FP_SW_OFF, sizeof magic);
	memcpy(&ext, fp + FP_SW_OFF + 4, sizeof ext);
	if (magic == FP_MAGIC1) {
		if (ext < FP_LEGACY || ext > FP_MAX)
			return EAGAIN;
		fsz = ext;
	}
	uintptr_t sp = (uintptr_t)g[REG_RSP] - RED_ZONE;
	uintptr_t need = fsz + 64 + sizeof(ucontext_t) + 16 + KR_FRAME_SIZE + 16 + ROOM;
	uintptr_t lo = (uintptr_t)mp->stack_lo;
	if (sp < lo || sp - lo < need)
		return EAGAIN;
	unsigned char *fcopy = (unsigned char *)((sp - fsz) & ~(uintptr_t)63);
	memcpy(fcopy, fp, fsz);
	ucontext_t *ucopy = (ucontext_t *)(((uintptr_t)fcopy - sizeof *ucopy) & ~(uintptr_t)15);
	memcpy(ucopy, uc, sizeof *ucopy);
	ucopy->uc_mcontext.fpregs = (fpregset_t)fcopy;
	/* the switch's saved frame: r12..rbp, then the return address; the
	 * return leaves rsp 16-byte aligned for kr__preempt_resume's call */
	uintptr_t *f = (uintptr_t *)((uintptr_t)ucopy - 16 - KR_FRAME_SIZE);
	memset(f, 0, KR_FRAME_SIZE);
	f[0] = (uintptr_t)ucopy; /* r12 */
	f[1] = (uintptr_t)hook;  /* r13 */
	f[2] = arg;              /* r14 */
	f[KR_FRAME_RESUME / 8] = (uintptr_t)kr__preempt_resume;
	uint64_t fpctl = KR_FRAME_MXCSR_DEFAULT | (uint64_t)KR_FRAME_X87CW_DEFAULT << 32;
	memcpy((unsigned char *)f + KR_FRAME_FPCTL, &fpctl, sizeof fpctl);
	taken(w, mp, f, uc, h);
}

#elif defined(__aarch64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

/* aarch64: the FP and SIMD state is inside the ucontext (the records of
 * uc_mcontext.__reserved), and rt_sigreturn reads a struct rt_sigframe,
 * 128 bytes of siginfo and then the ucontext, at sp.  Entered by the
 * switch's `ret` with x19 = the ucontext copy (x20, x21: the hook and its
 * word), sp 16-byte aligned. */
__asm__(".text\n"
	".globl kr__preempt_resume\n"
	".hidden kr__preempt_resume\n"
	".type kr__preempt_resume, %function\n"
	"kr__preempt_resume:\n"
	"	mov x0, x19\n"
	"	mov x1, x20\n"
	"	mov x2, x21\n"
	"	bl kr__preempt_fixup\n"
	"	sub sp, x19, #128\n"
	"	mov x8, #139\n" /* rt_sigreturn */
	"	svc #0\n"
	"	brk #0\n"
	".size kr__preempt_resume, .-kr__preempt_resume\n");

_Static_assert(SYS_rt_sigreturn == 139, "kr__preempt_resume calls rt_sigreturn by number");


enum { SIGINFO_SIZE = 128, ROOM = 4096 };
#ifndef EXTRA_MAGIC
#define EXTRA_MAGIC 0x45585401 /* state beyond the ucontext: not copied */
#endif

/* Is the whole FP/SIMD state inside uc's records (no extra_context)? */
static int state_inline(const ucontext_t *uc)
{
	const unsigned char *r = (const unsigned char *)uc->uc_mcontext.__reserved;
	size_t off = 0, end = sizeof uc->uc_mcontext.__reserved;
	while (off + 8 <= end) {
		uint32_t magic, size;
		memcpy(&magic, r + off, 4);
		memcpy(&size, r + off + 4, 4);
		if (magic == 0)
			return 1;
		if (magic == EXTRA_MAGIC || size < 8 || size > end - off)
			return 0;
		off += size;
	}
	return 0;
}

static int take(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg, const struct hold *h)
{
	struct kr_worker *w = W();
	kr_mp *mp = takeable(w);
	if (!mp)
		return EAGAIN;
	const uint32_t *ip = (const uint32_t *)uc->uc_mcontext.pc;
	if (*ip == 0xd4000001u) /* svc #0: a system call to restart */
		return EAGAIN;
	if (karui_below(mp, uc->uc_mcontext.sp, uc->uc_mcontext.regs[30]))
		return EAGAIN;
	if (!state_inline(uc))
		return EAGAIN;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.sp - 128;
	uintptr_t need = sizeof(ucontext_t) + 16 + SIGINFO_SIZE + KR_FRAME_SIZE + 16 + ROOM;
	uintptr_t lo = (uintptr_t)mp->stack_lo;
	if (sp < lo || sp - lo < need)
		return EAGAIN;
	ucontext_t *ucopy = (ucontext_t *)((sp - sizeof *ucopy) & ~(uintptr_t)15);
	memcpy(ucopy, uc, sizeof *ucopy);
	/* the switch's saved frame (frame.h) below the siginfo's room */
	unsigned char *f = (unsigned char *)ucopy - SIGINFO_SIZE - KR_FRAME_SIZE;
	memset(f, 0, KR_FRAME_SIZE);
	uintptr_t x19 = (uintptr_t)ucopy, x20 = (uintptr_t)hook, x21 = arg;
	uintptr_t x30 = (uintptr_t)kr__preempt_resume;
	memcpy(f + 64, &x19, 8);
	memcpy(f + 72, &x20, 8);
	memcpy(f + 80, &x21, 8);
	memcpy(f + KR_FRAME_RESUME, &x30, 8);
	taken(w, mp, f, uc, h);
}

#else

static void probe_run(void) {} /* kr__preempt refuses: nothing to find */

static int take(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg, const struct hold *h)
{
	(void)uc;
	(void)hook;
	(void)arg;
	(void)h;
	return EAGAIN;
}

#endif

int kr__preempt(ucontext_t *uc, void (*hook)(uintptr_t), uintptr_t arg)
{
	return take(uc, hook, arg, &(struct hold){NULL, 0});
}

int kr__preempt_hold(ucontext_t *uc, void (*held)(kr_mp *mp, uintptr_t held_arg),
		     uintptr_t held_arg, void (*hook)(uintptr_t), uintptr_t arg)
{
	return held ? take(uc, hook, arg, &(struct hold){held, held_arg}) : EINVAL;
}
