/*
 * karui domains — protected procedure calls in one address space (seed
 * 001): domains, sections and their access lists, EPC and its protection
 * modes, faults that end a call.  ITC ports are in port.c.
 *
 * Domains.  A domain holds up to 64 exported procedures and a region of
 * callee stacks: KR__EPC_SLOTS slots of STACK_SIZE, each with a guard page
 * below it (MADV_GUARD_INSTALL: the guard survives the region's mprotect;
 * where the kernel lacks it the slots have none).  A call takes a free slot
 * and gives it back on return: each VP keeps one for each domain (no lock),
 * the others are a bitmap under the domain's spin lock; so calls from
 * several VPs into one domain run at once, KR__EPC_SLOTS at most (ENOMEM
 * past that).
 *
 * The call.  kr_epc_call pushes a frame, in the calling microprocess's own
 * memory (its C stack), onto its VP's chain of calls (VPS[id].top: the
 * innermost call of the microprocess that runs there, NULL when it is in
 * none), and enters the gate (x86_64/epc_gate.S, aarch64/epc_gate.S),
 * which saves the caller's registers on its stack, switches to the slot's
 * stack and calls the procedure.  On the way back the gate trusts no
 * register the procedure could have changed: the caller's stack pointer
 * comes from the frame, found again through the chain
 * (kr__epc_resume_sp).  A microprocess leaves its VP in a call only out in
 * kr_epc_host, which takes its chain along (the C-area does not stop a
 * microprocess whose stack pointer is off its own stack, as a procedure's
 * is); so a VP's chain, its slot caches and its counts are touched by that
 * VP only, with plain loads and stores.
 *
 * Faults.  A SIGSEGV, SIGBUS, SIGILL or SIGFPE on a VP whose microprocess
 * is inside a procedure (its innermost frame is `in`, not out in
 * kr_epc_host) ends that call: the handler marks the frame faulted and the
 * domain failed, and resumes the thread at kr__epc_unwind on the caller's
 * saved stack pointer, as if the gate had returned.  Other faults go to
 * the handler that was there before (karui's stack-overflow report, or the
 * default action).  A failed domain refuses calls (ENOTRECOVERABLE) until
 * kr_domain_restart, which zeroes its sections and its stacks.
 *
 * Protection.  KR_EPC_N changes nothing.  KR_EPC_S sets the page
 * protection of every section, when a domain starts to run, to what the
 * host and the domains running now may do: each domain counts the
 * microprocesses that run in it (`active`: inside one of its procedures,
 * not out in kr_epc_host nor in a nested call); a section is open for
 * writing if the host or an active domain may write it, for reading if one
 * may read it, else closed; a domain's stack region is open while a call
 * is in it (`live`, which a procedure out in kr_epc_host, running on that
 * stack, keeps).  The host is trusted (it sets the access lists) and not
 * confined: nothing closes when a call returns to it, so repeated calls
 * into one domain change no protection after the first (view_move).  So
 * with one VP a procedure touches only what its domain may of the
 * sections; with several, what any domain running at that moment may; the
 * rest of the address space (the host's heap, its stacks) is open to it
 * (docs/domains.md).  KR_EPC_H is not built yet: kr_epc_mode_set refuses
 * it (ENOTSUP), as it must where the CPU has no protection keys.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "karui/domain.h"
#include "karui/sync.h"
#include "../core/internal.h"
#include "epc.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

enum {
	STACK_SIZE = 64 * 1024,
	MAX_DEPTH = 32,
	MAX_SECTION = 1 << 30,
};

int kr__epc_gate(void *arg, void *result, kr_epc_proc fn, void *stack_top, void **saved_sp);
void kr__epc_unwind(void);

struct kr_domain {
	char name[32];
	uint32_t failed;              /* atomic */
	unsigned nproc;
	kr_epc_proc proc[KR__EPC_PROCS];
	kr_spin lock;                 /* slots */
	uint64_t free;                /* bitmap of free slots */
	unsigned char *stacks;        /* KR__EPC_SLOTS x (guard + STACK_SIZE) */
	unsigned active;              /* KR_EPC_S: microprocesses running in it */
	unsigned live;                /* KR_EPC_S: ... or with a call in it (its
	                                 stacks hold their frames) (D.view) */
	int region_prot;              /* its stacks' protection now (D.view) */
	kr_domain *next;              /* D.domains */
	/* per VP, written by that VP only: the slot it keeps (-1: none) and
	 * the calls begun less the calls ended there (the sum is the calls in
	 * the domain) */
	struct {
		int slot;
		int inside;
	} vp[KR_VP_MAX];
};

struct acl {
	kr_domain *d;
	unsigned rights;
};

struct kr_section {
	unsigned char *base;
	size_t size;
	kr_domain *owner;             /* NULL: the host */
	unsigned host;                /* the host's rights */
	struct acl acl[KR__EPC_ACL];
	int prot;                     /* its pages' protection now (KR_EPC_S) */
	kr_section *next;             /* D.sections */
};

/* A call in progress: on the caller's stack, chained per microprocess. */
struct frame {
	void *sp;                     /* the gate's saved stack pointer */
	struct frame *prev;
	kr_domain *callee, *caller;   /* caller NULL: the host */
	unsigned slot;
	uint32_t in;                  /* running the procedure (not out) */
	uint32_t faulted;
};

/* A VP's chain: the innermost call of the microprocess running there. */
static struct vpchain {
	struct frame *top;
	unsigned depth;
	uintptr_t tp;    /* the VP's thread pointer, at its last call */
} __attribute__((aligned(64))) VPS[KR_VP_MAX];

static struct {
	pthread_mutex_t lock;         /* domains, sections, the mode */
	int mode;                     /* 0 until settled */
	int ready, handlers;
	int fsgsbase;                 /* rdfsbase is allowed (HWCAP2_FSGSBASE) */
	kr_spin view;                 /* KR_EPC_S: counts and protections */
	kr_domain *last;              /* KR_EPC_S: the domain the protections were
	                                 last set for; NULL: set them again */
	kr_domain *domains;
	kr_section *sections;
	unsigned ndomains;
	struct sigaction old[4];
	size_t page;
} D = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const int fault_sigs[4] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

/* ---------------- mode ---------------- */

static int env_mode(void)
{
	const char *e = getenv("KARUI_EPC");
	if (!e)
		return KR_EPC_AUTO;
	if (!strcmp(e, "n"))
		return KR_EPC_N;
	if (!strcmp(e, "s"))
		return KR_EPC_S;
	if (!strcmp(e, "h"))
		return KR_EPC_H;
	return KR_EPC_AUTO;
}

/* Under D.lock. */
static int settle(int want)
{
	if (want == KR_EPC_AUTO)
		want = env_mode();
	if (want == KR_EPC_AUTO || want == KR_EPC_H)
		want = want == KR_EPC_H ? 0 : KR_EPC_S; /* no protection keys here yet */
	return want;
}

int kr_epc_mode_set(int mode)
{
	if (mode < KR_EPC_AUTO || mode > KR_EPC_H)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int err = 0;
	if (D.ndomains)
		err = EBUSY;
	else if (!(D.mode = settle(mode)))
		err = ENOTSUP;
	pthread_mutex_unlock(&D.lock);
	return err;
}

int kr_epc_mode(void)
{
	pthread_mutex_lock(&D.lock);
	if (!D.mode)
		D.mode = settle(KR_EPC_AUTO);
	int m = D.mode;
	pthread_mutex_unlock(&D.lock);
	return m;
}

/* ---------------- the chain ---------------- */

/* The calling VP's chain, NULL off a VP. */
static inline struct vpchain *chain(void)
{
	struct kr_worker *w = KR_TLS_GET(kr__w);
	return w ? &VPS[w->vp->id] : NULL;
}

/* The gate's way back (epc_gate.S): the caller's saved stack pointer. */
void *kr__epc_resume_sp(void) __attribute__((visibility("hidden")));
void *kr__epc_resume_sp(void) { return chain()->top->sp; }

kr_domain *kr_domain_current(void)
{
	struct vpchain *c = chain();
	return c && c->top && c->top->in ? c->top->callee : NULL;
}

static int inside(const kr_domain *d)
{
	int n = 0;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		n += __atomic_load_n(&d->vp[i].inside, __ATOMIC_RELAXED);
	return n != 0;
}

/* ---------------- protection (KR_EPC_S) ---------------- */

static int prot_of(unsigned rights)
{
	return rights & KR_SECTION_WRITE ? PROT_READ | PROT_WRITE
	       : rights & KR_SECTION_READ ? PROT_READ
					  : PROT_NONE;
}

/* s's pages to what the host and the domains running now may do: so a
 * domain's private section closes only when another domain runs.  Under
 * D.view. */
static void section_apply(kr_section *s)
{
	unsigned r = s->host;
	for (unsigned i = 0; i < KR__EPC_ACL; i++)
		if (s->acl[i].d && s->acl[i].d->active)
			r |= s->acl[i].rights;
	int prot = D.mode == KR_EPC_S ? prot_of(r) : PROT_READ | PROT_WRITE;
	if (prot != s->prot && mprotect(s->base, s->size, prot) == 0)
		s->prot = prot;
}

static size_t region_size(void) { return (size_t)KR__EPC_SLOTS * (D.page + STACK_SIZE); }

/* d's stacks: open while a call is in it. */
static void region_apply(kr_domain *d)
{
	int prot = d->live ? PROT_READ | PROT_WRITE : PROT_NONE;
	if (prot != d->region_prot && mprotect(d->stacks, region_size(), prot) == 0)
		d->region_prot = prot;
}

/* d's counts move: `run` (microprocesses running in it: its sections),
 * `live` (those with a call in it, running or not: its stacks).  The
 * protections are lazy: a domain that starts to run (run > 0) gets them
 * set for what runs now, unless they were set for it last and no access
 * list changed since (D.last): the host, trusted, is not confined, so
 * calls back and forth between the host and one domain change nothing
 * after the first; a domain's private sections and stacks close when
 * another domain runs.  Not under D.lock: the lists only grow at their
 * heads, and a section goes only while no domain that may use it runs. */
static void view_move(kr_domain *d, int run, int live)
{
	if (D.mode != KR_EPC_S || !d)
		return;
	kr_spin_lock(&D.view);
	d->active += run;
	d->live += live;
	if (run > 0 && D.last != d) {
		for (kr_section *s = __atomic_load_n(&D.sections, __ATOMIC_ACQUIRE); s; s = s->next)
			section_apply(s);
		for (kr_domain *x = __atomic_load_n(&D.domains, __ATOMIC_ACQUIRE); x; x = x->next)
			region_apply(x);
		D.last = d;
	}
	kr_spin_unlock(&D.view);
}

/* ---------------- faults ---------------- */

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* the kernel's; glibc sets it and hides the name */
#endif

/* The thread pointer, read without memory where the CPU can (a fault may
 * come from code that runs on a thread pointer of its own: a μprocess's). */
static inline __attribute__((always_inline)) uintptr_t thread_ptr(void)
{
	uintptr_t v;
#if defined(__x86_64__)
	/* both in asm: the compiler would load %fs:0 before the test */
	if (D.fsgsbase)
		__asm__ volatile("rdfsbase %0" : "=r"(v));
	else
		__asm__ volatile("mov %%fs:0, %0" : "=r"(v));
#else
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(v));
#endif
	return v;
}

/* The chain of the VP this thread is, found by its thread pointer: NULL
 * for a thread that is no VP in a call, or one that runs on another
 * thread pointer (a μprocess), whose TLS must not be read. */
static inline __attribute__((always_inline)) struct vpchain *fault_chain(void)
{
	uintptr_t tp = thread_ptr();
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		if (__atomic_load_n(&VPS[i].tp, __ATOMIC_RELAXED) == tp && VPS[i].top)
			return &VPS[i]; /* (a VP's old thread pointer has no call) */
	return NULL;
}

/* What a fault that is not a procedure's goes to: the handler that was
 * there before, and its restorer (0: ours will do); {0, 0} when nothing
 * is to be called (the default action or SIG_IGN: the default comes when
 * the fault repeats). */
struct fwd {
	void *handler, *restorer;
};

/* No stack protector in these: its canary is read through the thread
 * pointer, which in a μprocess's code is the μprocess's. */
__attribute__((no_stack_protector)) static struct fwd forward(int sig)
{
	unsigned i = 0;
	while (i < 4 && fault_sigs[i] != sig)
		i++;
	struct sigaction *o = &D.old[i];
	void *h = o->sa_flags & SA_SIGINFO ? (void *)o->sa_sigaction : (void *)o->sa_handler;
	if (h == (void *)SIG_DFL || h == (void *)SIG_IGN || (o->sa_flags & SA_RESETHAND))
		signal(sig, SIG_DFL); /* (no μprocess's handler is among these) */
	if (h == (void *)SIG_DFL || h == (void *)SIG_IGN)
		return (struct fwd){NULL, NULL};
#if defined(__x86_64__)
	return (struct fwd){h, o->sa_flags & SA_RESTORER ? (void *)o->sa_restorer : NULL};
#else
	return (struct fwd){h, NULL};
#endif
}

/* Nothing here reads thread-local data (errno included) or makes a
 * system call before it knows the thread is a VP in a call: in a
 * μprocess's code the thread pointer is the μprocess's, and its system
 * calls are caught (its own handler, forwarded to, sees to it). */
__attribute__((no_stack_protector)) struct fwd kr__epc_fault(int sig, siginfo_t *si, void *ucv)
	__attribute__((visibility("hidden")));
__attribute__((no_stack_protector)) struct fwd kr__epc_fault(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct vpchain *c = fault_chain();
	struct frame *f = c ? c->top : NULL;
	if (!f || !__atomic_load_n(&f->in, __ATOMIC_RELAXED) ||
	    (sig != SIGSEGV && sig != SIGBUS && si->si_code <= 0))
		return forward(sig); /* not the procedure's (or sent by kill) */
	__atomic_store_n(&f->faulted, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&f->callee->failed, 1, __ATOMIC_RELEASE);
#if defined(__x86_64__)
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)f->sp;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)kr__epc_unwind;
	uc->uc_mcontext.gregs[REG_RAX] = EFAULT;
#elif defined(__aarch64__)
	uc->uc_mcontext.sp = (uintptr_t)f->sp;
	uc->uc_mcontext.pc = (uintptr_t)kr__epc_unwind;
	uc->uc_mcontext.regs[0] = EFAULT;
#endif
	return (struct fwd){NULL, NULL};
}

#if defined(__x86_64__)
void kr__epc_fault_entry(int sig, siginfo_t *si, void *uc); /* epc_gate.S */
#define FAULT_HANDLER kr__epc_fault_entry
#else
/* aarch64 has no μprocesses: the handler before is called from here */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	struct fwd w = kr__epc_fault(sig, si, uc);
	if (w.handler)
		((void (*)(int, siginfo_t *, void *))w.handler)(sig, si, uc);
}
#define FAULT_HANDLER on_fault
#endif

/* ---------------- setup ---------------- */

/* The first domain's: the key, the handlers.  Under D.lock. */
static int setup(void)
{
	if (!D.mode)
		D.mode = settle(KR_EPC_AUTO);
	if (!D.ready) {
		D.page = (size_t)sysconf(_SC_PAGESIZE);
#if defined(__x86_64__)
		D.fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
#endif
		D.ready = 1;
	}
	if (!D.handlers) {
		struct sigaction sa = {.sa_sigaction = FAULT_HANDLER,
				       .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER};
		sigemptyset(&sa.sa_mask);
		for (int i = 0; i < 4; i++)
			sigaction(fault_sigs[i], &sa, &D.old[i]);
		D.handlers = 1;
	}
	return 0;
}

static int stacks_make(kr_domain *d)
{
	size_t one = D.page + STACK_SIZE;
	int prot = D.mode == KR_EPC_S ? PROT_NONE : PROT_READ | PROT_WRITE;
	d->stacks = mmap(NULL, region_size(), prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	d->region_prot = prot;
	if (d->stacks == MAP_FAILED) {
		d->stacks = NULL;
		return ENOMEM;
	}
	for (unsigned i = 0; i < KR__EPC_SLOTS; i++)
		madvise(d->stacks + i * one, D.page, MADV_GUARD_INSTALL);
	d->free = KR__EPC_SLOTS == 64 ? ~0ull : (1ull << KR__EPC_SLOTS) - 1;
	for (unsigned i = 0; i < KR_VP_MAX; i++)
		d->vp[i].slot = -1;
	return 0;
}

int kr_domain_create(kr_domain **out, const char *name)
{
	if (!out || !name)
		return EINVAL;
	kr_domain *d = calloc(1, sizeof *d);
	if (!d)
		return ENOMEM;
	strncpy(d->name, name, sizeof d->name - 1);
	pthread_mutex_lock(&D.lock);
	int err = setup();
	if (!err)
		err = stacks_make(d);
	if (err) {
		pthread_mutex_unlock(&D.lock);
		free(d);
		return err;
	}
	kr_spin_lock(&D.view);
	d->next = D.domains;
	__atomic_store_n(&D.domains, d, __ATOMIC_RELEASE);
	D.last = NULL;
	kr_spin_unlock(&D.view);
	D.ndomains++;
	pthread_mutex_unlock(&D.lock);
	*out = d;
	return 0;
}

int kr_domain_destroy(kr_domain *d)
{
	if (!d)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int busy = inside(d);
	for (kr_section *s = D.sections; s && !busy; s = s->next)
		busy = s->owner == d;
	if (busy) {
		pthread_mutex_unlock(&D.lock);
		return EBUSY;
	}
	/* the ACLs that name it forget it */
	kr_spin_lock(&D.view);
	for (kr_section *s = D.sections; s; s = s->next)
		for (unsigned i = 0; i < KR__EPC_ACL; i++)
			if (s->acl[i].d == d)
				s->acl[i] = (struct acl){0};
	kr_spin_unlock(&D.view);
	kr_spin_lock(&D.view);
	kr_domain **p = &D.domains;
	while (*p != d)
		p = &(*p)->next;
	*p = d->next;
	if (D.last == d)
		D.last = NULL;
	kr_spin_unlock(&D.view);
	D.ndomains--;
	pthread_mutex_unlock(&D.lock);
	munmap(d->stacks, region_size());
	free(d);
	return 0;
}

int kr_domain_export(kr_domain *d, kr_epc_proc fn, unsigned *number)
{
	if (!d || !fn || !number)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int err = 0;
	if (d->nproc == KR__EPC_PROCS) {
		err = ENOSPC;
	} else {
		d->proc[d->nproc] = fn;
		*number = d->nproc;
		__atomic_store_n(&d->nproc, d->nproc + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&D.lock);
	return err;
}

int kr_domain_failed(const kr_domain *d)
{
	return d && __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE);
}

int kr_domain_restart(kr_domain *d)
{
	if (!d || !kr_domain_failed(d))
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	if (inside(d)) {
		pthread_mutex_unlock(&D.lock);
		return EBUSY;
	}
	/* fresh pages: anonymous private memory reads zero after this */
	for (kr_section *s = D.sections; s; s = s->next)
		if (s->owner == d)
			madvise(s->base, s->size, MADV_DONTNEED);
	madvise(d->stacks, region_size(), MADV_DONTNEED);
	__atomic_store_n(&d->failed, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&D.lock);
	return 0;
}

/* ---------------- sections ---------------- */

int kr_section_create(kr_section **out, kr_domain *owner, size_t size)
{
	if (!out || !size || size > MAX_SECTION)
		return EINVAL;
	kr_section *s = calloc(1, sizeof *s);
	if (!s)
		return ENOMEM;
	pthread_mutex_lock(&D.lock);
	int err = setup();
	if (err) {
		pthread_mutex_unlock(&D.lock);
		free(s);
		return err;
	}
	s->size = (size + D.page - 1) & ~(D.page - 1);
	s->owner = owner;
	if (owner)
		s->acl[0] = (struct acl){owner, KR_SECTION_READ | KR_SECTION_WRITE};
	else
		s->host = KR_SECTION_READ | KR_SECTION_WRITE;
	s->prot = D.mode == KR_EPC_S && owner && !owner->active ? PROT_NONE
								: PROT_READ | PROT_WRITE;
	s->base = mmap(NULL, s->size, s->prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->base == MAP_FAILED) {
		pthread_mutex_unlock(&D.lock);
		free(s);
		return ENOMEM;
	}
	kr_spin_lock(&D.view);
	section_apply(s); /* the owner may have become active meanwhile */
	s->next = D.sections;
	__atomic_store_n(&D.sections, s, __ATOMIC_RELEASE);
	D.last = NULL;
	kr_spin_unlock(&D.view);
	pthread_mutex_unlock(&D.lock);
	*out = s;
	return 0;
}

void *kr_section_addr(const kr_section *s) { return s ? s->base : NULL; }
size_t kr_section_size(const kr_section *s) { return s ? s->size : 0; }

int kr_section_allow(kr_section *s, kr_domain *d, unsigned rights)
{
	if (!s || rights & ~(unsigned)(KR_SECTION_READ | KR_SECTION_WRITE))
		return EINVAL;
	if (rights & KR_SECTION_WRITE)
		rights |= KR_SECTION_READ;
	int err = 0;
	pthread_mutex_lock(&D.lock);
	kr_spin_lock(&D.view);
	if (!d) {
		s->host = rights;
	} else {
		struct acl *a = NULL, *hole = NULL;
		for (unsigned i = 0; i < KR__EPC_ACL; i++) {
			if (s->acl[i].d == d)
				a = &s->acl[i];
			else if (!s->acl[i].d && !hole)
				hole = &s->acl[i];
		}
		if (!a && rights) {
			a = hole;
			if (a)
				a->d = d;
			else
				err = ENOSPC;
		}
		if (a) {
			a->rights = rights;
			if (!rights)
				a->d = NULL;
		}
	}
	if (!err) {
		section_apply(s);
		D.last = NULL; /* the next domain to run has them set again */
	}
	kr_spin_unlock(&D.view);
	pthread_mutex_unlock(&D.lock);
	return err;
}

int kr_section_destroy(kr_section *s)
{
	if (!s)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int busy = 0;
	for (unsigned i = 0; i < KR__EPC_ACL; i++)
		if (s->acl[i].d && inside(s->acl[i].d))
			busy = 1;
	if (busy) {
		pthread_mutex_unlock(&D.lock);
		return EBUSY;
	}
	kr_spin_lock(&D.view);
	kr_section **p = &D.sections;
	while (*p != s)
		p = &(*p)->next;
	*p = s->next;
	kr_spin_unlock(&D.view);
	pthread_mutex_unlock(&D.lock);
	munmap(s->base, s->size);
	free(s);
	return 0;
}

/* ---------------- EPC ---------------- */

/* A slot for a call on VP v: the one v keeps, else one from the bitmap. */
static inline int slot_take(kr_domain *d, unsigned v, unsigned *slot)
{
	int k = d->vp[v].slot;
	if (__builtin_expect(k >= 0, 1)) {
		d->vp[v].slot = -1;
		*slot = (unsigned)k;
		return 0;
	}
	kr_spin_lock(&d->lock);
	uint64_t f = d->free;
	if (f)
		d->free = f & (f - 1);
	kr_spin_unlock(&d->lock);
	if (!f)
		return ENOMEM;
	*slot = (unsigned)__builtin_ctzll(f);
	return 0;
}

/* ... and back, on VP v (where the call ended). */
static inline void slot_give(kr_domain *d, unsigned v, unsigned slot)
{
	if (__builtin_expect(d->vp[v].slot < 0, 1)) {
		d->vp[v].slot = (int)slot;
		return;
	}
	kr_spin_lock(&d->lock);
	d->free |= 1ull << slot;
	kr_spin_unlock(&d->lock);
}

static unsigned char *slot_top(const kr_domain *d, unsigned slot)
{
	return d->stacks + (size_t)(slot + 1) * (D.page + STACK_SIZE);
}

int kr_epc_call(kr_domain *d, unsigned number, void *arg, void *result, int *status)
{
	if (!d || !status || number >= __atomic_load_n(&d->nproc, __ATOMIC_ACQUIRE))
		return EINVAL;
	struct kr_worker *w = KR_TLS_GET(kr__w);
	if (!w || !w->cur)
		return EPERM;
	if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE))
		return ENOTRECOVERABLE;
	unsigned v = w->vp->id;
	struct vpchain *c = &VPS[v];
	if (c->depth == MAX_DEPTH)
		return ELOOP;
	c->tp = (uintptr_t)__builtin_thread_pointer(); /* for a fault's handler */
	struct frame f = {.prev = c->top, .callee = d};
	f.caller = f.prev && f.prev->in ? f.prev->callee : NULL;
	int err = slot_take(d, v, &f.slot);
	if (err)
		return err;
	d->vp[v].inside++;
	view_move(f.caller, -1, 0);
	view_move(d, 1, 1);
	if (f.prev)
		f.prev->in = 0;
	c->top = &f;
	c->depth++;
	f.in = 1;
	int st = kr__epc_gate(arg, result, d->proc[number], slot_top(d, f.slot), &f.sp);
	/* this VP, or another one if the procedure left its domain for
	 * karui: the chain came along (kr_epc_host) */
	w = KR_TLS_GET(kr__w);
	v = w->vp->id;
	c = &VPS[v];
	f.in = 0;
	c->top = f.prev;
	c->depth--;
	if (f.prev)
		f.prev->in = 1;
	view_move(d, -1, -1);
	view_move(f.caller, 1, 0);
	slot_give(d, v, f.slot);
	d->vp[v].inside--;
	if (__atomic_load_n(&f.faulted, __ATOMIC_ACQUIRE))
		return EFAULT;
	*status = st;
	return 0;
}

int kr_epc_host(int (*fn)(void *arg), void *arg)
{
	struct vpchain *c = chain();
	struct frame *f = c ? c->top : NULL;
	if (!f || !f->in)
		return fn(arg);
	/* out of the domain, and off this VP's chain: a fault now is the
	 * host's, and other microprocesses may run here */
	unsigned depth = c->depth;
	f->in = 0;
	c->top = NULL;
	c->depth = 0;
	view_move(f->callee, -1, 0); /* its stack, which fn runs on, stays */
	int r = fn(arg);
	view_move(f->callee, 1, 0);
	c = chain(); /* perhaps another VP's now */
	c->tp = (uintptr_t)__builtin_thread_pointer();
	c->top = f;
	c->depth = depth;
	f->in = 1;
	return r;
}
