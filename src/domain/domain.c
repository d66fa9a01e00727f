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
 * The call.  kr_epc_call takes the slot's frame (in the domain's record,
 * host memory) onto its VP's chain of calls (VPS[id].top: the innermost
 * call of the microprocess that runs there, NULL when it is in none), and
 * enters the gate (x86_64/epc_gate.S, aarch64/epc_gate.S), which saves the
 * caller's registers on its stack, switches to the slot's stack and calls
 * the procedure.  On the way back the gate trusts no register the
 * procedure could have changed: the caller's stack pointer comes from the
 * frame, found again through the chain (kr__epc_resume).  A microprocess
 * leaves its VP in a call only out in kr_epc_host, which takes its chain
 * along and runs the host's function on the microprocess's own stack,
 * below its outermost call (kr__epc_out); the C-area does not stop a
 * microprocess whose stack pointer is off its own stack, as a procedure's
 * is.  So a VP's chain, its slot caches and its counts are touched by
 * that VP only, with plain loads and stores.
 *
 * Faults.  A SIGSEGV, SIGBUS, SIGILL or SIGFPE on a VP whose microprocess
 * is inside a procedure (its innermost frame is `in`, not out in
 * kr_epc_host) ends that call: the handler marks the frame faulted and the
 * domain failed, and resumes the thread at kr__epc_unwind on the caller's
 * saved stack pointer, as if the gate had returned.  Other faults go to
 * the handler that was there before (karui's stack-overflow report, or the
 * default action).  A failed domain refuses calls (ENOTRECOVERABLE) until
 * kr_domain_restart, which zeroes its sections and its stacks.  The
 * handler reads nothing but the host's ordinary memory (protection key 0:
 * the kernel runs it with the other keys closed).
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
 * (docs/domains.md).
 *
 * KR_EPC_H (x86 protection keys).  Pages with the same access list share
 * a key (struct kclass, D.K[key]): a domain's stacks and the sections only
 * it may use have its own key (d->key, at most 15 keys in all); the host
 * is not confined and keeps key 0, the rest of the address space, open to
 * every domain.  D.pk, a read-only page, holds each domain's PKRU
 * (D.pk[d->key]) and the host's (D.pk[0]), computed from the lists when
 * they change (pk_publish).  The gate writes the callee's PKRU on entry and
 * the caller's on return, each checked after the write (epc_gate.S); a
 * fault's handler puts the caller's in the signal frame, which the
 * kernel's sigreturn restores.  A thread that runs host code with a PKRU
 * behind the host's rights (a VP that made no call yet, a key allocated
 * since) faults with SEGV_PKUERR once: the handler brings its PKRU up to
 * date and the access is tried again; narrower host rights reach a VP at
 * its next return from a call.  A procedure is exported only if the code
 * around it (its object's executable segment, or the mapping it lies in)
 * holds no WRPKRU or XRSTOR but the gates' (code_check).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
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

#if defined(__x86_64__)
#include "../arch/pkeys.h"
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

enum {
	STACK_SIZE = 64 * 1024,
	MAX_DEPTH = 32,
	MAX_SECTION = 1 << 30,
};

struct frame;
int kr__epc_gate(void *arg, void *result, kr_epc_proc fn, void *stack_top, void **saved_sp);
int kr__epc_out(int (*fn)(void *), void *arg, void *sp, struct frame *f, uint32_t pkru);
void kr__epc_unwind(void);
#if defined(__x86_64__)
int kr__epc_gate_h(void *arg, void *result, kr_epc_proc fn, void *stack_top, void **saved_sp,
		   uint32_t pkru);
extern const unsigned char kr__epc_wrpkru_lo[], kr__epc_wrpkru_hi[];
extern const unsigned char kr__img_wrpkru_lo[], kr__img_wrpkru_hi[]; /* src/image/x86_64/gate.S */
#endif

/* A call in progress: in the callee's record, one per slot (a line each:
 * calls from several VPs share none), chained per VP. */
struct frame {
	void *sp;                     /* the gate's saved stack pointer */
	struct frame *prev;
	kr_domain *callee, *caller;   /* caller NULL: the host */
	void *stack;                  /* its slot's stack top */
	unsigned depth;               /* the chain's, while out in kr_epc_host */
	uint32_t in;                  /* running the procedure (not out) */
	uint32_t faulted;
} __attribute__((aligned(64)));

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
	int key;                      /* KR_EPC_H: its stacks' protection key */
	kr_domain *next;              /* D.domains */
	struct frame frame[KR__EPC_SLOTS]; /* a call's in each slot */
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
	int key;                      /* its pages' protection key (KR_EPC_H) */
	kr_section *next;             /* D.sections */
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
	/* KR_EPC_H */
	uint32_t *pk;                 /* [0] the host's PKRU, [d->key] d's: a
	                                 read-only page */
	struct kclass {
		unsigned refs;        /* sections and domains with this key */
		unsigned host;        /* the host's rights */
		struct acl acl[KR__EPC_ACL];
	} K[16];                      /* by key; key 0 is never ours */
	kr_domain *keyed[16];         /* the domain whose key it is */
	struct scanned {
		uintptr_t lo, hi;
		int ok;
	} scan[16];                   /* code_check's verdicts on objects */
	unsigned nscan;
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

/* Does the CPU (and the kernel) give protection keys?  x86-64's only:
 * the gates that write PKRU are x86-64's. */
static int pku_have(void)
{
#if defined(__x86_64__)
	int k = pkey_alloc(0, 0);
	if (k < 0)
		return 0;
	pkey_free(k);
	return 1;
#else
	return 0;
#endif
}

/* Under D.lock; 0 for H without protection keys. */
static int settle(int want)
{
	if (want == KR_EPC_AUTO)
		want = env_mode();
	if (want == KR_EPC_AUTO)
		want = pku_have() ? KR_EPC_H : KR_EPC_S;
	else if (want == KR_EPC_H && !pku_have())
		want = 0;
	return want;
}

int kr_epc_mode_set(int mode)
{
	if (mode < KR_EPC_AUTO || mode > KR_EPC_H)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int err = 0;
	if (D.domains || D.sections)
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

/* The gates' questions (epc_gate.S), answered from the VP's chain.  The
 * way back from a call: the caller's saved stack pointer; under KR_EPC_H
 * also the caller's PKRU. */
void *kr__epc_resume_sp(void) __attribute__((visibility("hidden")));
void *kr__epc_resume_sp(void) { return chain()->top->sp; }

struct resume {
	void *sp;
	uintptr_t pkru;
};
struct resume kr__epc_resume(void) __attribute__((visibility("hidden")));
struct resume kr__epc_resume(void)
{
	struct frame *f = chain()->top;
	return (struct resume){f->sp, D.pk[f->caller ? f->caller->key : 0]};
}

/* The PKRU the chain says this VP runs with now (KR_EPC_H). */
uint32_t kr__epc_expect(void) __attribute__((visibility("hidden")));
uint32_t kr__epc_expect(void)
{
	struct frame *f = chain()->top;
	return D.pk[f && f->in ? f->callee->key : 0];
}

/* kr_epc_host's way back into f's domain, on whichever VP fn returned:
 * the call on the chain again; the domain's PKRU (KR_EPC_H). */
uint32_t kr__epc_back_in(struct frame *f) __attribute__((visibility("hidden")));

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

/* ---------------- protection keys (KR_EPC_H) ---------------- */

static unsigned acl_rights(const struct acl *acl, const kr_domain *d)
{
	for (unsigned i = 0; i < KR__EPC_ACL; i++)
		if (acl[i].d == d)
			return acl[i].rights;
	return 0;
}

/* The same rights for the same domains, in any order. */
static int acl_same(const struct acl *a, const struct acl *b)
{
	for (unsigned i = 0; i < KR__EPC_ACL; i++)
		if ((a[i].d && acl_rights(b, a[i].d) != a[i].rights) ||
		    (b[i].d && acl_rights(a, b[i].d) != b[i].rights))
			return 0;
	return 1;
}

/* The key of pages with these rights: the one other pages with the same
 * rights have, or a new one; -1 when none is left.  Under D.lock. */
static int class_get(unsigned host, const struct acl *acl)
{
	for (int k = 1; k < 16; k++)
		if (D.K[k].refs && D.K[k].host == host && acl_same(D.K[k].acl, acl)) {
			D.K[k].refs++;
			return k;
		}
	int k = pkey_alloc(0, PKEY_DISABLE_ACCESS); /* open to no thread yet */
	if (k < 1 || k > 15) {
		if (k > 0)
			pkey_free(k);
		return -1;
	}
	D.K[k].refs = 1;
	D.K[k].host = host;
	memcpy(D.K[k].acl, acl, sizeof D.K[k].acl);
	return k;
}

static void class_put(int k)
{
	if (k > 0 && !--D.K[k].refs)
		pkey_free(k);
}

/* Each domain's PKRU and the host's into the read-only page D.pk: for
 * every key of ours, the rights its access list gives (write: both bits
 * clear; read: write-disable; none: access-disable), every other key but
 * 0 closed.  Under D.lock. */
static void pk_publish(void)
{
	uint32_t v[16] = {0};
	for (unsigned i = 0; i < 16; i++) {
		kr_domain *who = D.keyed[i];
		if (i && !who)
			continue;
		for (unsigned k = 1; k < 16; k++) {
			unsigned r = !D.K[k].refs ? 0
				     : who      ? acl_rights(D.K[k].acl, who)
						: D.K[k].host;
			v[i] |= (r & KR_SECTION_WRITE  ? 0u
				 : r & KR_SECTION_READ ? 2u
						       : 3u)
				<< (2 * k);
		}
	}
	mprotect(D.pk, D.page, PROT_READ | PROT_WRITE);
	memcpy(D.pk, v, sizeof v);
	mprotect(D.pk, D.page, PROT_READ);
}

/* s's pages to the key of these rights.  ENOSPC: no key left (s keeps
 * its own).  Under D.lock. */
static int section_key(kr_section *s, unsigned host, const struct acl *acl)
{
	int old = s->key;
	class_put(old);
	int k = class_get(host, acl);
	int err = 0;
	if (k < 0) {
		k = class_get(s->host, s->acl); /* its old key, or the one freed */
		err = ENOSPC;
	}
	if (k != old)
		pkey_mprotect(s->base, s->size, PROT_READ | PROT_WRITE, k);
	s->key = k;
	return err;
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

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif


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
	    (sig != SIGSEGV && sig != SIGBUS && si->si_code <= 0)) {
#if defined(__x86_64__)
		/* host code on a PKRU behind the host's rights: brought up to
		 * date, the access tried again (once: a PKRU that is the host's
		 * faults on) */
		uint32_t *pkru;
		if (D.mode == KR_EPC_H && sig == SIGSEGV && si->si_code == SEGV_PKUERR &&
		    (pkru = kr__frame_pkru(uc)) && *pkru != D.pk[0]) {
			*pkru = D.pk[0];
			return (struct fwd){NULL, NULL};
		}
#endif
		return forward(sig); /* not the procedure's (or sent by kill) */
	}
	__atomic_store_n(&f->faulted, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&f->callee->failed, 1, __ATOMIC_RELEASE);
#if defined(__x86_64__)
	if (D.mode == KR_EPC_H) {
		uint32_t *pkru = kr__frame_pkru(uc);
		if (pkru)
			*pkru = D.pk[f->caller ? f->caller->key : 0];
	}
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
		kr__pkru_off();
#endif
		D.ready = 1;
	}
	if (D.mode == KR_EPC_H && !D.pk) {
		void *p = mmap(NULL, D.page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return ENOMEM;
		D.pk = p;
		pk_publish();
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
	for (unsigned i = 0; i < KR__EPC_SLOTS; i++) {
		madvise(d->stacks + i * one, D.page, MADV_GUARD_INSTALL);
		d->frame[i].stack = d->stacks + (i + 1) * one;
	}
	if (D.mode == KR_EPC_H) {
		/* its own key: its stacks and the sections it alone may use */
		struct acl own[KR__EPC_ACL] = {{d, KR_SECTION_READ | KR_SECTION_WRITE}};
		d->key = class_get(0, own);
		if (d->key < 0 ||
		    pkey_mprotect(d->stacks, region_size(), PROT_READ | PROT_WRITE, d->key)) {
			class_put(d->key);
			munmap(d->stacks, region_size());
			d->stacks = NULL;
			return d->key < 0 ? ENOTSUP : ENOMEM;
		}
		D.keyed[d->key] = d;
		pk_publish();
	}
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
	/* the ACLs that name it forget it; under KR_EPC_H the keys of every
	 * list that names it go first (only pages that name it have them),
	 * so the fewer lists without it always find keys */
	int h = D.mode == KR_EPC_H;
	if (h) {
		D.keyed[d->key] = NULL;
		class_put(d->key);
	}
	for (int pass = 0; pass < 2; pass++)
		for (kr_section *s = D.sections; s; s = s->next) {
			if (!acl_rights(s->acl, d) || (pass == 0 && !h))
				continue;
			if (pass == 0) {
				class_put(s->key);
				continue;
			}
			kr_spin_lock(&D.view);
			for (unsigned i = 0; i < KR__EPC_ACL; i++)
				if (s->acl[i].d == d)
					s->acl[i] = (struct acl){0};
			kr_spin_unlock(&D.view);
			if (h) {
				int k = class_get(s->host, s->acl);
				if (k != s->key)
					pkey_mprotect(s->base, s->size, PROT_READ | PROT_WRITE, k);
				s->key = k;
			}
		}
	if (h)
		pk_publish();
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

#if defined(__x86_64__)
/* The executable segment of the object that holds `at`, or, for code in
 * no object, the mapping it lies in (when readable). */
struct span {
	uintptr_t lo, hi;
};

static int object_of(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct span *sp = data;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && sp->lo >= lo &&
		    sp->lo < lo + p->p_memsz) {
			*sp = (struct span){lo, lo + p->p_memsz};
			return 1;
		}
	}
	return 0;
}

static int mapping_of(struct span *sp)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	char line[512], perm[5];
	uintptr_t lo, hi;
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 && sp->lo >= lo &&
		    sp->lo < hi) {
			found = perm[0] == 'r' && perm[2] == 'x';
			if (found)
				*sp = (struct span){lo, hi};
			break;
		}
	fclose(f);
	return found;
}

/* Does the code in sp write PKRU (pkeys.c), but in the gates: ours, and
 * the image layer's, which shows isolated μprocesses (src/image/iso.c)? */
static int writes_pkru(struct span sp)
{
	const unsigned char *p = (const unsigned char *)sp.lo;
	uintptr_t ilo = (uintptr_t)kr__img_wrpkru_lo, ihi = (uintptr_t)kr__img_wrpkru_hi;
	long i = -1;
	while ((i = kr__writes_pkru(p, (size_t)i + 1, sp.hi - sp.lo, sp.lo,
				    (uintptr_t)kr__epc_wrpkru_lo, (uintptr_t)kr__epc_wrpkru_hi)) >= 0)
		if (sp.lo + (uintptr_t)i < ilo || sp.lo + (uintptr_t)i >= ihi)
			return 1;
	return 0;
}

/* May fn run under KR_EPC_H?  Objects are judged once (D.scan); code
 * outside every object each time.  Under D.lock. */
static int code_check(kr_epc_proc fn)
{
	struct span sp = {(uintptr_t)fn, 0};
	if (dl_iterate_phdr(object_of, &sp)) {
		for (unsigned i = 0; i < D.nscan; i++)
			if (D.scan[i].lo == sp.lo && D.scan[i].hi == sp.hi)
				return D.scan[i].ok ? 0 : EPERM;
		int ok = !writes_pkru(sp);
		if (D.nscan < sizeof D.scan / sizeof D.scan[0])
			D.scan[D.nscan++] = (struct scanned){sp.lo, sp.hi, ok};
		return ok ? 0 : EPERM;
	}
	return mapping_of(&sp) && !writes_pkru(sp) ? 0 : EPERM;
}
#endif

int kr_domain_export(kr_domain *d, kr_epc_proc fn, unsigned *number)
{
	if (!d || !fn || !number)
		return EINVAL;
	pthread_mutex_lock(&D.lock);
	int err = 0;
#if defined(__x86_64__)
	if (D.mode == KR_EPC_H)
		err = code_check(fn);
#endif
	if (err) {
	} else if (d->nproc == KR__EPC_PROCS) {
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
	s->key = -1;
	if (s->base != MAP_FAILED && D.mode == KR_EPC_H) {
		s->key = class_get(s->host, s->acl);
		if (s->key < 0 ||
		    pkey_mprotect(s->base, s->size, PROT_READ | PROT_WRITE, s->key)) {
			err = s->key < 0 ? ENOSPC : ENOMEM;
			class_put(s->key);
			munmap(s->base, s->size);
		} else {
			pk_publish();
		}
	}
	if (s->base == MAP_FAILED || err) {
		pthread_mutex_unlock(&D.lock);
		free(s);
		return err ? err : ENOMEM;
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
	/* the new list, then (KR_EPC_H) its key, then in force */
	unsigned host = s->host;
	struct acl acl[KR__EPC_ACL];
	memcpy(acl, s->acl, sizeof acl);
	if (!d) {
		host = rights;
	} else {
		struct acl *a = NULL, *hole = NULL;
		for (unsigned i = 0; i < KR__EPC_ACL; i++) {
			if (acl[i].d == d)
				a = &acl[i];
			else if (!acl[i].d && !hole)
				hole = &acl[i];
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
	if (!err && D.mode == KR_EPC_H && !(err = section_key(s, host, acl)))
		pk_publish();
	if (!err) {
		kr_spin_lock(&D.view);
		s->host = host;
		memcpy(s->acl, acl, sizeof acl);
		section_apply(s);
		D.last = NULL; /* the next domain to run has them set again */
		kr_spin_unlock(&D.view);
	}
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
	if (D.mode == KR_EPC_H) {
		class_put(s->key);
		pk_publish();
	}
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
	unsigned slot;
	int err = slot_take(d, v, &slot);
	if (err)
		return err;
	struct frame *f = &d->frame[slot], *prev = c->top;
	kr_domain *caller = prev ? prev->callee : NULL;
	f->prev = prev;
	f->callee = d;
	f->caller = caller;
	f->faulted = 0;
	d->vp[v].inside++;
	view_move(caller, -1, 0);
	view_move(d, 1, 1);
	if (prev)
		prev->in = 0;
	c->top = f;
	c->depth++;
	f->in = 1;
	int st;
#if defined(__x86_64__)
	if (D.mode == KR_EPC_H)
		st = kr__epc_gate_h(arg, result, d->proc[number], f->stack, &f->sp, D.pk[d->key]);
	else
#endif
		st = kr__epc_gate(arg, result, d->proc[number], f->stack, &f->sp);
	/* this VP, or another one if the procedure left its domain for
	 * karui: the chain came along (kr_epc_host) */
	w = KR_TLS_GET(kr__w);
	v = w->vp->id;
	c = &VPS[v];
	f->in = 0;
	c->top = prev;
	c->depth--;
	if (prev)
		prev->in = 1;
	view_move(d, -1, -1);
	view_move(caller, 1, 0);
	int faulted = __atomic_load_n(&f->faulted, __ATOMIC_ACQUIRE);
	slot_give(d, v, slot); /* (f is the next call's from here) */
	d->vp[v].inside--;
	if (faulted)
		return EFAULT;
	*status = st;
	return 0;
}

uint32_t kr__epc_back_in(struct frame *f)
{
	view_move(f->callee, 1, 1);
	struct vpchain *c = chain(); /* perhaps another VP's now */
	c->tp = (uintptr_t)__builtin_thread_pointer();
	c->top = f;
	c->depth = f->depth;
	f->in = 1;
	return D.pk ? D.pk[f->callee->key] : 0;
}

int kr_epc_host(int (*fn)(void *arg), void *arg)
{
	struct vpchain *c = chain();
	struct frame *f = c ? c->top : NULL;
	if (!f || !f->in)
		return fn(arg);
	/* out of the domain, and off this VP's chain: a fault now is the
	 * host's, and other microprocesses may run here; fn runs on the
	 * microprocess's own stack, below its outermost call's frame */
	struct frame *out = f;
	while (out->prev)
		out = out->prev;
	f->depth = c->depth;
	f->in = 0;
	c->top = NULL;
	c->depth = 0;
	view_move(f->callee, -1, -1);
	void *sp = (void *)(((uintptr_t)out->sp - 128) & ~(uintptr_t)15);
	return kr__epc_out(fn, arg, sp, f, D.mode == KR_EPC_H ? D.pk[0] : 0);
}
