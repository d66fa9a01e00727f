/*
 * karui image layer — μprocesses in domains of their own (EPC-S): a stray
 * write from one μprocess into another's memory faults and ends only the
 * writer (docs/domains.md, "μprocesses in domains").
 *
 * What is closed.  An isolated μprocess's writable memory: the writable
 * segments of its program and ld.so, its stack, and whatever it maps or
 * makes writable afterwards (heap, threads' stacks and TLS, private and
 * shared writable mmaps).  up->wr lists those ranges and up->wrx the
 * ones that are executable too, kept by its mmap, munmap, mremap and
 * mprotect (uproc.c: kr__uproc_mapped and the others).  Closing is
 * mprotect(PROT_NONE) on each range, adjacent ones in one call; opening
 * gives each its recorded protection back.  Read-only mappings (its text,
 * read-only data, read-only files) stay readable: kept images share them,
 * and closing them would cost a system call each for no integrity gained.
 *
 * When it is open.  Page protection is the process's, not a thread's.
 * Each VP (its record, struct kr__img_vp) *shows* at most one isolated
 * μprocess, the one whose code it entered last: kr__uthr_here, which
 * every way back into a μprocess's code passes, makes the VP show that
 * thread's μprocess (its memory's owner, kr__mm), or none when that
 * μprocess is not isolated.  A μprocess is open while one VP or more shows
 * it: opened when the first starts to, closed when the last stops (iso_n,
 * under L.lock).  A VP goes on showing it while it runs the host's code
 * (karui, the host's microprocesses), so calls back and forth between
 * karui and one μprocess change nothing; only the code of another
 * μprocess closes it.  On one VP the protection is exact: while another
 * μprocess's code runs, an isolated one's writable memory is closed.  On
 * several VPs it is open while its code runs on one of them, as EPC-S
 * domains are.
 *
 * Where karui waits for it.  karui serves a μprocess's system calls in a
 * signal handler on the μprocess's own stack, and a call that waits
 * leaves there what others write while it waits: its place in a wait
 * queue, an I/O request's result, its saved context.  An isolated
 * μprocess's calls (and its time slice's yield) run instead on its
 * microprocess's own stack, below die_sp (kr__iso_sys, gate.S's
 * kr__img_on; KR__ISO_MP_STACK bytes), which is karui's memory.
 *
 * karui's own code on the μprocess's behalf.  A system call of it may
 * wait, and go on on a VP that shows another μprocess meanwhile.  Where
 * karui then hands its buffer to the kernel (a read or write after a wait
 * for readiness, sys_fd.c), kr__iso_here shows it first.  A plain access
 * of karui's (a copy out of a pipe, a result written back) that finds the
 * memory closed faults: the fault handler (gate.S) asks kr__iso_fault,
 * which, when the address is in the writable memory of the μprocess whose
 * call it is, shows that μprocess on this VP and lets the access go on.
 * An address of another μprocess is not opened: karui's uaccess copies
 * return EFAULT for it, as the kernel does for a bad pointer.  So a
 * μprocess cannot make karui write into another's memory either.
 *
 * Nothing writes into a closed μprocess's memory from elsewhere: karui
 * pipes hand bytes straight into a waiting reader's buffer or out of a
 * waiting writer's, on the other side's microprocess, and io_uring fills
 * a read's buffer from the kernel's own context; an isolated μprocess's
 * pipe reads and writes, and its reads and writes that may wait, go
 * through a buffer of karui's (kr__iso_bounce) and are copied on its own
 * microprocess.
 *
 * Rejected: a hook in the core's switch, as the scheduling trace has
 * (trace.c), to show a μprocess whenever one of its microprocesses is
 * switched in: it would have to turn the core's fast paths off for the
 * whole process while any isolated μprocess lives, and it buys nothing
 * over kr__uthr_here, since no μprocess code runs but through it.
 * Closing a μprocess whenever its VP goes back to the host's code: a
 * system call would then cost two more mprotect each, and the host is
 * not confined anyway.  Showing it again after each wait in each handler
 * alone: waits are many and deep (pipes, futexes, wait4, poll, sleeps),
 * and one forgotten would take the host down; the fault handler covers
 * every plain access, and the waits before a kernel call are few.
 *
 * EPC-H: protection keys.  Where the CPU and the kernel have them (the
 * first isolated μprocess tries pkey_alloc; KARUI_EPC=s keeps page
 * protection), each isolated μprocess gets a key of its own (iso_key, at
 * kr__iso_begin; at most 15 in a process, fewer if domains hold some):
 * its writable ranges are pkey_mprotect'ed with that key once, at its
 * start and as its mmap, mprotect and mremap make them (kr__iso_keyed),
 * and given key 0 back at its end.  Showing a μprocess on a VP is then
 * writing that VP's PKRU: every key but 0 closed (karui's memory, and
 * every μprocess's read-only mappings, stay open), the shown μprocess's
 * key open (kr__iso_pkru).  PKRU is the thread's: the view is exact on
 * every VP, so a stray write faults even while its victim runs on
 * another VP.  The counts and the mprotect calls are page protection's
 * alone; with keys, showing is a WRPKRU where RDPKRU differs.  A μprocess
 * for which no key is left falls back to page protection, beside the
 * keyed ones (kr_uproc_isolation says which each has).
 *
 * The kernel enters a signal handler with only key 0 open and restores
 * the frame's PKRU at rt_sigreturn.  So gate.S's handlers (the system
 * call's, on the μprocess's own stack; the faults' and the kick's) first
 * write the PKRU their VP's record holds (kr__img_vp.pkru, what the VP
 * showed when the signal came); and every way back into a μprocess's
 * code through a frame writes that frame's PKRU (kr__iso_frame): a frame
 * made on another VP, or a μprocess's own rt_sigreturn frame, would
 * restore another.  karui's code that meets a closed μprocess under a
 * key (SEGV_PKUERR) is let through as with page protection, the frame's
 * PKRU opened (kr__iso_fault).  The kernel's copies honour the calling
 * thread's PKRU as the CPU does, so a read(2) into a closed μprocess's
 * buffer from karui's code gives EFAULT, and io_uring's workers, which
 * run with no key closed, would fill it: the bounce buffers stay.  A key
 * is never freed while karui runs: a VP may hold it open until it next
 * shows a μprocess; a later isolated μprocess takes it again.
 *
 * What keys protect against.  Against stray writes (a bug in one
 * μprocess), exactly.  A μprocess that means harm could open every key
 * with WRPKRU, or XRSTOR from a buffer of its own: as ERIM does, its code
 * is scanned (pkeys.c) when it starts (its program, ld.so and, from a
 * kept image, every code mapping) and whenever it maps or makes memory
 * executable (kr__iso_exec_check), which is refused when writable too
 * (EACCES).  A WRPKRU that a linear sweep of a file's code finds as an
 * instruction (the C library's pkey_set) becomes a UD2 in the μprocess's
 * copy; any other finding refuses the code (EPERM; at the start, the
 * μprocess ends with 126).  What stays open: karui's own memory is key
 * 0, open to every μprocess as the host's is to a domain, so a μprocess
 * that writes karui's records (its VP's `pkru` among them) or jumps into
 * gate.S's WRPKRUs, which no check of the value follows as ERIM's gates
 * have, can reach past its key; code written through a second, writable
 * mapping of the same file or memfd after the scan (a JIT's double
 * mapping) is not seen.  EPC-H makes isolation exact, not a sandbox
 * against hostile code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../arch/pkeys.h"
#include "uproc.h"

static struct {
	kr_spin lock; /* the counts, the VPs' `shown`, opening and closing, the keys */
	int decided;  /* keys or page protection */
	unsigned spare; /* keys of ours that no μprocess holds (bit k: key k) */
	/* code mappings of files found clean by the scan: (file, offset,
	 * length), and where it made their WRPKRUs UD2s */
	struct clean {
		struct kr__file_id f;
		uintptr_t off, len;
		uintptr_t patch[2];
		unsigned npatch;
	} clean[32];
	unsigned nclean;
	pthread_mutex_t scan; /* the scans and `clean`, which take long: not under `lock` */
} L = {.scan = PTHREAD_MUTEX_INITIALIZER};

/* an isolated μprocess has started: the fault handler asks kr__iso_fault */
int kr__iso_live;
int kr__iso_keys;

/* Keys or page protection, at the first isolated μprocess.  Under L.lock. */
static void decide(void)
{
	if (L.decided)
		return;
	L.decided = 1;
	const char *e = getenv("KARUI_EPC");
	if ((e && !strcmp(e, "s")) || !kr__pkru_off())
		return;
	int k = pkey_alloc(0, PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE);
	if (k < 1 || k > 15) {
		if (k > 0)
			pkey_free(k);
		return;
	}
	L.spare |= 1u << k;
	__atomic_store_n(&kr__iso_keys, 1, __ATOMIC_RELAXED);
}

/* A key for a μprocess, or 0: none left.  Under L.lock. */
static int key_take(void)
{
	if (!L.spare) {
		int k = pkey_alloc(0, PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE);
		if (k < 1 || k > 15) {
			if (k > 0)
				pkey_free(k);
			return 0;
		}
		L.spare |= 1u << k;
	}
	int k = __builtin_ctz(L.spare);
	L.spare &= ~(1u << k);
	return k;
}

/* [lo, hi) of each range of l, adjacent ones together, to prot and key. */
static void key_all(const struct kr__rlist *l, int prot, int key)
{
	for (size_t i = 0; i < l->n;) {
		uintptr_t lo = l->r[i].lo, hi = l->r[i].hi;
		for (i++; i < l->n && l->r[i].lo == hi; i++)
			hi = l->r[i].hi;
		pkey_mprotect((void *)lo, hi - lo, prot, key);
	}
}

/* Set [lo, hi) of each range of l, adjacent ones together, to prot. */
static void protect_all(const struct kr__rlist *l, int prot)
{
	for (size_t i = 0; i < l->n;) {
		uintptr_t lo = l->r[i].lo, hi = l->r[i].hi;
		for (i++; i < l->n && l->r[i].lo == hi; i++)
			hi = l->r[i].hi;
		mprotect((void *)lo, hi - lo, prot);
	}
}

static void open_mem(struct kr_uproc *m)
{
	protect_all(&m->wr, PROT_READ | PROT_WRITE);
	protect_all(&m->wrx, PROT_READ | PROT_WRITE | PROT_EXEC);
	m->iso_open = 1;
}

static void close_mem(struct kr_uproc *m)
{
	protect_all(&m->wr, PROT_NONE);
	m->iso_open = 0;
}

/* Under L.lock: VP v shows `want` (an isolated μprocess, or NULL). */
static void show_locked(struct kr__img_vp *v, struct kr_uproc *want)
{
	struct kr_uproc *old = v->shown;
	if (want && !want->iso_on)
		want = NULL; /* it has ended meanwhile (kr__iso_end) */
	if (old != want) {
		if (old && !old->iso_key && --old->iso_n == 0)
			close_mem(old);
		if (want && !want->iso_key && want->iso_n++ == 0 && !want->iso_open)
			open_mem(want);
		__atomic_store_n(&v->shown, want, __ATOMIC_RELAXED);
	}
	/* keys: this thread's PKRU, when v is its own record */
	uint32_t p = kr__iso_pkru(want);
	if (p && v == kr__img_vp_self()) {
		if (kr__rdpkru() != p)
			kr__img_wrpkru(p);
		__atomic_store_n(&v->pkru, p, __ATOMIC_RELAXED);
	}
}

void kr__iso_lock(void)
{
	kr__spin_lock(&L.lock);
}

void kr__iso_unlock(void)
{
	kr__spin_unlock(&L.lock);
}

void kr__iso_show(struct kr__img_vp *v, struct kr_uproc *want)
{
	kr__spin_lock(&L.lock);
	show_locked(v, want);
	kr__spin_unlock(&L.lock);
}

/* The addresses in [lo, hi) of a μprocess's memory where an instruction
 * that writes PKRU may begin (at most `max`, in *n): 0, or 1 when there
 * are more.  Read through the fault-safe copy (a file's last page may end
 * before the mapping does: nothing runs there), a page at a time with the
 * bytes before it as context. */
static int pkru_writes(uintptr_t lo, uintptr_t hi, uintptr_t *at, unsigned max, unsigned *n)
{
	enum { CTX = 8, PAGE = 4096 };
	unsigned char b[CTX + PAGE + 2];
	*n = 0;
	for (uintptr_t pg = lo; pg < hi; pg += PAGE) {
		uintptr_t from = pg - lo < CTX ? lo : pg - CTX;
		uintptr_t to = hi - pg > PAGE + 2 ? pg + PAGE + 2 : hi;
		if (kr__ucopy(b, (const void *)from, to - from) < 0 &&
		    kr__ucopy(b, (const void *)from, (to = hi - pg > PAGE ? pg + PAGE : hi) - from) < 0)
			break; /* (the next page is past the end: this one alone) */
		long i = (long)(pg - from) - 1;
		while ((i = kr__writes_pkru(b, (size_t)i + 1, to - from, from, 0, 0)) >= 0 &&
		       from + (uintptr_t)i < pg + PAGE) {
			if (*n == max)
				return 1;
			at[(*n)++] = from + (uintptr_t)i;
		}
	}
	return 0;
}

/* Is x a WRPKRU that begins an instruction of [lo, x], decoded from lo on
 * (a compiler's code holds no data: a linear sweep finds its
 * instructions; what does not decode is stepped over a byte at a time)?
 * [lo, x + 3) was read by pkru_writes. */
static int wrpkru_insn(uintptr_t lo, uintptr_t x)
{
	const uint8_t *p = (const uint8_t *)x;
	if (p[0] != 0x0f || p[1] != 0x01 || p[2] != 0xef)
		return 0;
	uintptr_t i = lo;
	while (i < x) {
		struct kr__insn in;
		int len = kr__x86_decode((const uint8_t *)i, x + 3 - i, &in);
		i += len ? (uintptr_t)len : 1;
	}
	return i == x;
}

/* Code of a μprocess about to run under its key, [lo, hi) (from file f at
 * offset off, or f NULL or all 0: anonymous memory): 0, or EPERM when it
 * could write PKRU.  The C library's own WRPKRU (pkey_set: no μprocess
 * gets a key of its own, pkey_alloc is refused) is made a UD2 in the
 * μprocess's copy, where a linear sweep of a file's code finds it as an
 * instruction; any other (an XRSTOR, a WRPKRU inside another instruction,
 * or in anonymous memory) refuses the code.  Clean files are remembered,
 * with what was patched (L.clean).  Under L.scan. */
static int scan(uintptr_t lo, uintptr_t hi, const struct kr__file_id *f, uintptr_t off)
{
	static const uint8_t ud2[3] = {0x0f, 0x0b, 0x90}; /* ud2; nop */
	int named = f && (f->dev || f->ino);
	for (unsigned i = 0; named && i < L.nclean; i++)
		if (!memcmp(&L.clean[i].f, f, sizeof *f) && L.clean[i].off == off &&
		    L.clean[i].len == hi - lo) {
			for (unsigned j = 0; j < L.clean[i].npatch; j++)
				if (!kr__rw_poke(lo + L.clean[i].patch[j], ud2, 3,
						 PROT_READ | PROT_EXEC))
					return EPERM;
			return 0;
		}
	uintptr_t at[2];
	unsigned n;
	if (pkru_writes(lo, hi, at, 2, &n))
		return EPERM;
	for (unsigned j = 0; j < n; j++)
		if (!named || !wrpkru_insn(lo, at[j]))
			return EPERM;
	for (unsigned j = 0; j < n; j++)
		if (!kr__rw_poke(at[j], ud2, 3, PROT_READ | PROT_EXEC))
			return EPERM;
	if (named) {
		unsigned i = L.nclean < 32 ? L.nclean++ : (unsigned)(lo >> 12) % 32;
		L.clean[i] = (struct clean){*f, off, hi - lo, {0, 0}, n};
		for (unsigned j = 0; j < n; j++)
			L.clean[i].patch[j] = at[j] - lo;
	}
	return 0;
}

/* Its code as it starts: the program's and ld.so's first executable
 * segments, and every code mapping of a kept image.  Under L.scan. */
static int code_scan(struct kr_uproc *up)
{
	const struct kr__elf_img *im[2] = {&up->ld.prog, &up->ld.interp};
	for (int i = 0; i < 2; i++)
		if (im[i]->map && im[i]->xhi > im[i]->xlo &&
		    scan(im[i]->xlo, im[i]->xhi, &im[i]->file, im[i]->xlo - im[i]->base))
			return EPERM;
	for (unsigned i = 0; i < up->nxmap; i++)
		if (scan(up->xmap[i].lo, up->xmap[i].hi, &up->xmap[i].file,
			 up->xmap[i].lo - up->xmap[i].base))
			return EPERM;
	return 0;
}

int kr__iso_begin(struct kr_uproc *up)
{
	if (!up->isolate)
		return 0;
	kr__spin_lock(&L.lock);
	decide();
	int k = kr__iso_keys ? key_take() : 0;
	kr__spin_unlock(&L.lock);
	if (k) {
		pthread_mutex_lock(&L.scan);
		int e = code_scan(up);
		pthread_mutex_unlock(&L.scan);
		if (e) {
			kr__spin_lock(&L.lock);
			L.spare |= 1u << k;
			kr__spin_unlock(&L.lock);
			return e;
		}
	}
	kr__spin_lock(&L.lock);
	up->iso_key = k;
	up->iso_mode = k ? KR_UPROC_ISO_KEYS : KR_UPROC_ISO_PAGES;
	if (k) {
		key_all(&up->wr, PROT_READ | PROT_WRITE, k);
		key_all(&up->wrx, PROT_READ | PROT_WRITE | PROT_EXEC, k);
	}
	up->iso_on = 1;
	up->iso_open = 1; /* it is open as loaded; closed when no VP shows it */
	up->iso_n = 0;
	kr__spin_unlock(&L.lock);
	__atomic_store_n(&kr__iso_live, 1, __ATOMIC_RELEASE);
	return 0;
}

void kr__iso_keyed(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot, int was)
{
	if (!up->iso_on || !up->iso_key || !prot)
		return;
	if (prot & PROT_WRITE)
		pkey_mprotect((void *)lo, hi - lo, prot | PROT_READ, up->iso_key);
	else if (was) /* read-only again: open to all, as its other such pages */
		pkey_mprotect((void *)lo, hi - lo, prot, 0);
}

int kr__iso_exec_check(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot,
		       const struct kr__file_id *f, uintptr_t off)
{
	if (!(prot & PROT_EXEC) || !__atomic_load_n(&up->iso_key, __ATOMIC_RELAXED))
		return 0;
	if (prot & PROT_WRITE)
		return EACCES;
	pthread_mutex_lock(&L.scan);
	int e = scan(lo, hi, f, off);
	pthread_mutex_unlock(&L.scan);
	return e;
}

void kr__iso_frame(ucontext_t *uc)
{
	struct kr__img_vp *v = kr__img_vp_self();
	uint32_t *fp;
	if (__atomic_load_n(&kr__iso_keys, __ATOMIC_RELAXED) && v && v->pkru &&
	    (fp = kr__frame_pkru(uc)))
		*fp = v->pkru;
}

int kr_uproc_isolation(const kr_uproc *up, int *mode)
{
	if (!up || !mode || up->magic != KR_UPROC_MAGIC)
		return EINVAL;
	*mode = __atomic_load_n(&up->iso_mode, __ATOMIC_RELAXED);
	return 0;
}

void kr__iso_end(struct kr_uproc *up)
{
	if (!__atomic_load_n(&up->iso_on, __ATOMIC_RELAXED))
		return;
	kr__uproc_lock(); /* the VPs' records */
	kr__spin_lock(&L.lock);
	for (struct kr__img_vp *v = kr__img_vps(); v; v = v->next)
		if (v->shown == up) {
			__atomic_store_n(&v->shown, NULL, __ATOMIC_RELAXED);
			up->iso_n--;
		}
	if (up->iso_key) {
		/* key 0 again, for its unmapping or its kept image; the key
		 * stays ours (a VP may have it open yet) */
		key_all(&up->wr, PROT_READ | PROT_WRITE, 0);
		key_all(&up->wrx, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
		L.spare |= 1u << up->iso_key;
		up->iso_key = 0;
	} else if (!up->iso_open) {
		open_mem(up);
	}
	up->iso_on = 0;
	kr__spin_unlock(&L.lock);
	kr__uproc_unlock();
}

void kr__iso_here(void)
{
	struct kr__uthr *t = kr__uthr_self();
	if (!t)
		return;
	struct kr_uproc *m = kr__mm(t->up);
	if (!__atomic_load_n(&m->iso_on, __ATOMIC_RELAXED))
		return;
	struct kr__img_vp *v = kr__img_vp_self();
	if (!v && kr__img_arm() == 0)
		v = kr__img_vp_self();
	if (v && __atomic_load_n(&v->shown, __ATOMIC_RELAXED) != m)
		kr__iso_show(v, m);
	else if (!v && !__atomic_load_n(&m->iso_open, __ATOMIC_RELAXED)) {
		kr__spin_lock(&L.lock); /* no record to show it with: open */
		if (m->iso_on && !m->iso_open)
			open_mem(m);
		kr__spin_unlock(&L.lock);
	}
}

/* A fault of karui's code (gate.S: not a μprocess's) at addr: 1 when it
 * was on the closed memory of the μprocess whose call this is, which this
 * VP now shows (the access is made again); 0 for any other fault.  In a
 * signal handler: no allocation, no lock but L's, which no holder keeps
 * across an access to a μprocess's memory. */
int kr__iso_fault(const siginfo_t *si, ucontext_t *uc)
{
	static __thread uintptr_t retried; /* a thread with no record: once per address */
	struct kr__uthr *t = kr__uthr_self();
	if (!t)
		return 0;
	struct kr_uproc *m = kr__mm(t->up);
	uintptr_t a = (uintptr_t)si->si_addr;
	struct kr__img_vp *v = kr__img_vp_self();
	int again = 0;
	kr__spin_lock(&L.lock);
	if (m->iso_on && m->iso_key && kr__rl_covers(&m->wr, a, a + 1)) {
		/* under its key: this thread's PKRU is the frame's */
		uint32_t want = kr__iso_pkru(m), *fp = kr__frame_pkru(uc);
		if (v)
			show_locked(v, m);
		if (fp && *fp != want) {
			*fp = want;
			again = 1;
		}
	} else if (m->iso_on && kr__rl_covers(&m->wr, a, a + 1)) {
		if (v && v->shown != m) {
			show_locked(v, m);
			again = 1;
		} else if (!v && !m->iso_open) {
			open_mem(m);
			again = 1;
		} else if (!v && retried != a) {
			again = 1; /* opened meanwhile by another VP */
		}
	}
	kr__spin_unlock(&L.lock);
	retried = again && !v && !m->iso_key ? a : 0;
	return again;
}

struct sys_args {
	struct kr__uthr *t;
	long nr, *a;
};

static long sys_own(void *p)
{
	struct sys_args c = *(struct sys_args *)p;
	long a[6];
	memcpy(a, c.a, sizeof a);
	long r = kr__sys(c.t, c.nr, a);
	kr__iso_here(); /* before the way back reads its stack again */
	return r;
}

long kr__iso_sys(struct kr__uthr *t, long nr, long a[6])
{
	if (!__atomic_load_n(&kr__mm(t->up)->iso_on, __ATOMIC_RELAXED))
		return kr__sys(t, nr, a);
	struct sys_args c = {t, nr, a};
	return kr__img_on(t->die_sp, sys_own, &c);
}

static long yield_own(void *p)
{
	(void)p;
	kr_mp_yield();
	kr__iso_here();
	return 0;
}

void kr__iso_yield(struct kr__uthr *t)
{
	if (!__atomic_load_n(&kr__mm(t->up)->iso_on, __ATOMIC_RELAXED))
		kr_mp_yield();
	else
		kr__img_on(t->die_sp, yield_own, NULL);
}

void *kr__iso_bounce(struct kr__uthr *t)
{
	if (!t->bounce)
		t->bounce = malloc(KR__PIPE_CAP);
	return t->bounce;
}
