/*
 * karui image layer — images kept after their μprocess ends (P5).
 *
 * Most of a μprocess's start is its ld.so's work: mapping the program's
 * libraries, relocating them, answering cpuid, running the libraries'
 * constructors; and karui's own, rewriting the hot call sites.  All of it
 * is done when ld.so jumps to the program's entry, and it depends only on
 * the program file, its environment, argv[0] and argc (what ld.so and the
 * C library's start-up read).  So karui takes the image at that moment,
 * the handover, and keeps it when the μprocess has ended by exit: a later
 * start of the same file with the same environment, argv[0] and argc gets
 * that image back, its writable memory as it was at the handover, and
 * begins at the program's entry.  No ld.so, no mapping, no relocation,
 * no trap of a site made hot before.
 *
 * The handover.  A μprocess whose image may be kept starts with AT_ENTRY
 * naming kr__img_handover (gate.S), so ld.so jumps there and not to the
 * program; that trampoline's system call (KR__NR_HANDOVER) traps like any other,
 * kr__img_snapshot takes the image and returns the program's entry, and
 * the trampoline jumps to it with %rsp and %rdx (the finaliser ld.so passes) as
 * ld.so left them.  The image is: every region the μprocess has mapped,
 * its stack among them; the content of the writable ones (up->wr, which
 * follows every mapping and mprotect of every μprocess from its spawn on:
 * uproc.c; an all-zero page is a mark, not a copy); its thread pointer,
 * signal dispositions and mask; the address
 * set_tid_address was given; %rsp and %rdx; and the rewriting state
 * (rewrite.c), whose trampoline pages join the image as they are made.
 *
 * Why that key.  karui lays the initial stack (argc, argv, envp, auxv and
 * the strings) out the same way at the same place for every start of an
 * image (uproc.c), and ld.so and the C library keep pointers into it: the
 * argv and envp arrays, the auxv, argv[0] as the program's name, the
 * environment strings they read.  With the same argc, environment and
 * argv[0], each of them points at what it pointed at before; only
 * argv[1..], which nothing reads before main, differ.  The stack
 * protector's canary and the pointer guard, drawn from AT_RANDOM by ld.so,
 * stay those of the first start.
 *
 * Unfit images: an end other than exit (a crash, a signal), a change of a
 * region of the image by the program (munmap, mremap, mprotect, an mmap
 * over it), a program without ld.so (static-PIE: no handover).  Those are
 * unmapped as before.  At the end of a μprocess whose image is fit, what
 * it mapped after the handover is unmapped, and the image joins the cache,
 * which keeps `keep` images at most (kr_uproc_keep, KARUI_UPROC_KEEP, 8 by
 * default) and drops the oldest.
 *
 * A restore reads every writable page once: one that differs from its
 * copy is copied back, one that should be zero and is not is cleared, one
 * the run left alone is not written (so no page becomes private that was
 * not).  The same copy and restore serve a deferred fork (fork.c), whose
 * child runs on its parent's memory until it execs or ends.  Rejected:
 * mapping the writable ranges afresh from a memfd copy (each start would fault every page it touches in again); the kernel's
 * soft-dirty bits (process-wide: clearing them for one μprocess clears
 * them for all and for the host).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uproc.h"

#define PG 4096ul
#define KEEP_DEFAULT 8

struct kr__fmap {        /* a read-only file mapping */
	uintptr_t lo;
	size_t len;
	struct kr__file_id id;
	int64_t off;
	int flags;              /* MAP_PRIVATE or MAP_SHARED */
};
#define SPARES_MAX 64           /* per image */


struct kr__image {
	struct kr__image *next; /* in the cache, newest first */
	struct kr__file_id file;
	int argc;
	char *argv0;
	char **envp;
	struct kr__elf_load ld;
	struct kr__rlist reg;   /* every region of the image */
	struct kr__rlist wr;    /* what of it is writable, its stack too */
	struct kr__xmap *xmap;  /* while kept; up's while it runs */
	unsigned nxmap;
	struct kr__rw *rw;      /* the same */
	unsigned long cpuid_sites;
	struct sigaction_k sig[65];
	uint64_t sigmask, fs, entry, rdx, sp;
	stack_t altstack;
	uintptr_t tidaddr, stk_lo, stk_hi;
	struct kr__memcopy mem; /* its writable memory */
	int dirty;              /* a region of it changed: not to be kept */
	struct kr__fmap *spare; /* read-only file mappings its runs left */
	unsigned nspare;
};

static struct {
	pthread_mutex_t lock;
	struct kr__image *head;
	unsigned n;
	unsigned live;          /* images of running μprocesses */
	int keep;               /* -1: not read from the environment yet */
} C = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, -1};

static int keep_locked(void)
{
	if (C.keep < 0) {
		const char *e = getenv("KARUI_UPROC_KEEP");
		char *end;
		long v = e && *e ? strtol(e, &end, 10) : KEEP_DEFAULT;
		C.keep = e && *e && (*end || v < 0 || v > KR_UPROC_KEEP_MAX) ? KEEP_DEFAULT : (int)v;
	}
	return C.keep;
}

/* An image leaves its μprocess (kept or dropped). */
static void live_done(void)
{
	pthread_mutex_lock(&C.lock);
	C.live--;
	pthread_mutex_unlock(&C.lock);
}

static void free_key_and_copy(struct kr__image *im)
{
	kr__mem_free(&im->mem);
	free(im->argv0);
	for (int i = 0; im->envp && im->envp[i]; i++)
		free(im->envp[i]);
	free(im->envp);
	kr__rl_free(&im->reg);
	kr__rl_free(&im->wr);
}

/* A kept image goes: everything of it. */
static void image_free(struct kr__image *im)
{
	kr__rl_unmap(&im->reg);
	for (unsigned i = 0; i < im->nspare; i++)
		munmap((void *)im->spare[i].lo, im->spare[i].len);
	free(im->spare);
	kr__rw_del(im->rw);
	free(im->xmap);
	free_key_and_copy(im);
	free(im);
}

int kr_uproc_keep(unsigned images)
{
	if (images > KR_UPROC_KEEP_MAX)
		return EINVAL;
	struct kr__image *gone = NULL;
	pthread_mutex_lock(&C.lock);
	C.keep = (int)images;
	struct kr__image **pp = &C.head;
	for (unsigned k = 0; *pp && k < (unsigned)C.keep; k++)
		pp = &(*pp)->next;
	gone = *pp;
	*pp = NULL;
	C.n = 0;
	for (struct kr__image *i = C.head; i; i = i->next)
		C.n++;
	pthread_mutex_unlock(&C.lock);
	while (gone) {
		struct kr__image *n = gone->next;
		image_free(gone);
		gone = n;
	}
	return 0;
}

int kr_uproc_reused(const kr_uproc *up)
{
	return up && up->magic == KR_UPROC_MAGIC && up->reused;
}

static int rl_copy(struct kr__rlist *to, const struct kr__rlist *from)
{
	size_t cap = from->n ? from->n : 1;
	if (!(to->r = malloc(cap * sizeof *to->r)))
		return ENOMEM;
	memcpy(to->r, from->r, from->n * sizeof *to->r);
	to->n = from->n;
	to->cap = cap;
	return 0;
}

/* The rewriting state (rewrite.c) is the running μprocess's, and the
 * image's while it is kept. */
static void swap_rw(struct kr_uproc *up, struct kr__image *im)
{
	struct kr__xmap *x = up->xmap;
	unsigned n = up->nxmap;
	struct kr__rw *rw = up->rw;
	unsigned long c = up->cpuid_sites;
	up->xmap = im->xmap;
	up->nxmap = im->nxmap;
	up->rw = im->rw;
	up->cpuid_sites = im->cpuid_sites;
	im->xmap = x;
	im->nxmap = n;
	im->rw = rw;
	im->cpuid_sites = c;
}

/* ---- while loading: what is writable ---- */

/* A cold start: take the image at the handover if images are kept and
 * there is an ld.so to hand over.  The writable segments of the program
 * and of its ld.so, as karui mapped them; ld.so's mappings and mprotects
 * follow (kr__uproc_mapped, _protected). */
int kr__img_wr_elf(struct kr_uproc *up)
{
	const struct kr__elf_img *imgs[2] = {&up->ld.prog, &up->ld.interp};
	for (int k = 0; k < 2; k++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)imgs[k]->phdr;
		for (unsigned i = 0; i < imgs[k]->phnum; i++) {
			if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_W))
				continue;
			uintptr_t lo = (imgs[k]->base + ph[i].p_vaddr) & ~(PG - 1);
			uintptr_t hi = (imgs[k]->base + ph[i].p_vaddr + ph[i].p_memsz + PG - 1) &
				       ~(PG - 1);
			if (up->isolate)
				kr__iso_lock();
			int e = kr__rl_add(&up->wr, lo, hi);
			if (up->isolate)
				kr__iso_unlock();
			if (e)
				return e;
		}
	}
	return 0;
}

int kr__img_plan(struct kr_uproc *up)
{
	pthread_mutex_lock(&C.lock);
	int keep = keep_locked();
	pthread_mutex_unlock(&C.lock);
	if (!keep || !up->ld.interp.entry || kr__img_wr_elf(up))
		return 0;
	up->snap = 1;
	return 1;
}

/* ---- the handover ---- */

/* ---- copies of writable memory: a kept image's, a deferred fork's ----
 *
 * Under the sanitizers, the copy and its checks read and write the
 * μprocess's memory with uaccess.S's copy and uninstrumented loops: a
 * fork's copy includes the μprocess's stack, where karui's instrumented
 * frames leave the sanitizers' marks.  Elsewhere, the C library's. */

#define NO_SAN __attribute__((no_sanitize("address", "thread")))

static NO_SAN int zero_page(const void *p)
{
	const uint64_t *w = p;
	uint64_t o = 0;
	for (size_t i = 0; i < PG / 8; i++)
		o |= w[i];
	return o == 0;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static NO_SAN int same_page(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	uint64_t d = 0;
	for (size_t i = 0; i < PG / 8; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

static NO_SAN void clear_page(void *p)
{
	volatile uint64_t *w = p; /* not a call of memset, which would be checked */
	for (size_t i = 0; i < PG / 8; i++)
		w[i] = 0;
}
#define copy_page(to, from) kr__ucopy(to, from, PG)
#else
#define same_page(a, b) (memcmp(a, b, PG) == 0)
#define clear_page(p) memset(p, 0, PG)
#define copy_page(to, from) memcpy(to, from, PG)
#endif

/* a page the kernel has not yet given (pagemap): untouched since mapped */
#define UNTOUCHED UINT32_MAX
#define PM_BATCH 512

static int mem_add(struct kr__memcopy *m, uintptr_t lo, uintptr_t hi, int pagemap,
		   size_t *nonzero)
{
	struct kr__wrange *w = &m->w[m->nw++];
	w->lo = lo;
	w->hi = hi;
	size_t np = (hi - lo) / PG;
	uint64_t pm[PM_BATCH];
	if (!(w->pg = calloc(np ? np : 1, sizeof *w->pg)))
		return ENOMEM;
	for (size_t p = 0; p < np; p++) {
		size_t k = p % PM_BATCH;
		if (pagemap >= 0 && !k) { /* present or swapped: bits 63, 62 */
			size_t n = np - p < PM_BATCH ? np - p : PM_BATCH;
			if (pread(pagemap, pm, n * 8, (off_t)((lo / PG + p) * 8)) != (ssize_t)(n * 8))
				for (size_t j = 0; j < n; j++)
					pm[j] = ~0ull; /* not known: each page read */
		}
		if (pagemap >= 0 && !(pm[k] >> 62))
			w->pg[p] = UNTOUCHED;
		else if (!zero_page((const void *)(lo + p * PG)))
			w->pg[p] = (uint32_t)++*nonzero;
	}
	return 0;
}

int kr__mem_take(struct kr__memcopy *m, const struct kr__rlist *wr, uintptr_t stk_lo,
		 uintptr_t stk_hi, uintptr_t xlo, uintptr_t xhi, int pagemap)
{
	size_t nonzero = 0;
	memset(m, 0, sizeof *m);
	if (!(m->w = calloc(2 * wr->n + 1, sizeof *m->w)))
		return ENOMEM;
	for (size_t i = 0; i < wr->n; i++) { /* each range less the stack */
		uintptr_t lo = wr->r[i].lo, hi = wr->r[i].hi;
		if ((lo < stk_lo && mem_add(m, lo, hi < stk_lo ? hi : stk_lo, pagemap, &nonzero)) ||
		    (hi > stk_hi && mem_add(m, lo > stk_hi ? lo : stk_hi, hi, pagemap, &nonzero)))
			return ENOMEM;
	}
	if (xlo < xhi && mem_add(m, xlo, xhi, pagemap, &nonzero))
		return ENOMEM;
	m->ncopy = nonzero;
	if (nonzero && !(m->copy = malloc(nonzero * PG)))
		return ENOMEM;
	for (unsigned i = 0; i < m->nw; i++) {
		struct kr__wrange *w = &m->w[i];
		for (size_t p = 0; p < (w->hi - w->lo) / PG; p++)
			if (w->pg[p] && w->pg[p] != UNTOUCHED)
				copy_page(m->copy + (w->pg[p] - 1) * PG, (const void *)(w->lo + p * PG));
	}
	return 0;
}

void kr__mem_put(const struct kr__memcopy *m)
{
	for (unsigned i = 0; i < m->nw; i++) {
		const struct kr__wrange *w = &m->w[i];
		size_t np = (w->hi - w->lo) / PG;
		for (size_t p = 0; p < np; p++) {
			void *at = (void *)(w->lo + p * PG);
			if (w->pg[p] == UNTOUCHED) { /* as it was: the file's, or zero */
				size_t q = p;
				while (q < np && w->pg[q] == UNTOUCHED)
					q++;
				madvise(at, (q - p) * PG, MADV_DONTNEED);
				p = q - 1;
			} else if (!w->pg[p]) {
				if (!zero_page(at))
					clear_page(at);
			} else if (!same_page(at, m->copy + (w->pg[p] - 1) * PG)) {
				copy_page(at, m->copy + (w->pg[p] - 1) * PG);
			}
		}
	}
}

void kr__mem_free(struct kr__memcopy *m)
{
	for (unsigned i = 0; i < m->nw; i++)
		free(m->w[i].pg);
	free(m->w);
	free(m->copy);
	memset(m, 0, sizeof *m);
}

uint64_t kr__img_snapshot(struct kr_uproc *up, const ucontext_t *uc)
{
	const greg_t *g = uc->uc_mcontext.gregs;
	uint64_t entry = up->ld.prog.entry;
	if (!up->snap)
		return entry;
	up->snap = 0;
	/* no more images taken than could be kept: a thousand μprocesses of
	 * one program, alive at once, would each hold a copy for nothing */
	pthread_mutex_lock(&C.lock);
	int room = C.live < (unsigned)keep_locked();
	C.live += room;
	pthread_mutex_unlock(&C.lock);
	struct kr__image *im = room ? calloc(1, sizeof *im) : NULL;
	if (!im)
		goto out;
	im->argv0 = strdup(up->argv && up->argv[0] ? up->argv[0] : "");
	if (rl_copy(&im->reg, &up->reg) || rl_copy(&im->wr, &up->wr) || !im->argv0 ||
	    kr__mem_take(&im->mem, &up->wr, up->stk_lo, up->stk_hi, 0, 0, -1)) {
		free_key_and_copy(im);
		free(im);
		goto out;
	}
	im->file = up->ld.prog.file;
	while (up->argv && up->argv[im->argc])
		im->argc++;
	im->envp = up->envp; /* the key's now */
	up->envp = NULL;
	im->ld = up->ld;
	memcpy(im->sig, up->sig, sizeof im->sig);
	im->sigmask = up->main.sigmask;
	im->altstack = up->main.altstack;
	im->fs = up->main.fs;
	im->entry = entry;
	im->rdx = (uint64_t)g[REG_RDX];
	im->sp = (uint64_t)g[REG_RSP];
	im->tidaddr = up->main.tidaddr;
	im->stk_lo = up->stk_lo;
	im->stk_hi = up->stk_hi;
	up->img = im;
	room = 0;
out:
	if (room)
		live_done();
	return entry;
}

/* ---- a start from a kept image ---- */

static int same_env(char *const *a, char *const *b)
{
	int i = 0;
	for (; a && a[i] && b && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return 0;
	return !(a && a[i]) && !(b && b[i]);
}

int kr__img_take(struct kr_uproc *up, const struct stat *st, char *const *argv, char *const *envp)
{
	struct kr__file_id id = kr__file_id_of(st);
	int argc = 0;
	while (argv[argc])
		argc++;
	pthread_mutex_lock(&C.lock);
	struct kr__image **pp = &C.head, *im;
	for (; (im = *pp); pp = &im->next)
		if (!memcmp(&im->file, &id, sizeof id) && im->argc == argc &&
		    !strcmp(im->argv0, argv[0] ? argv[0] : "") && same_env(im->envp, envp))
			break;
	if (im) {
		*pp = im->next;
		C.n--;
		C.live++;
	}
	pthread_mutex_unlock(&C.lock);
	if (!im)
		return 0;
	if (rl_copy(&up->reg, &im->reg)) {
		image_free(im);
		live_done();
		return 0;
	}
	up->ld = im->ld;
	swap_rw(up, im);
	up->stk_lo = im->stk_lo;
	up->stk_hi = im->stk_hi;
	up->main.tidaddr = im->tidaddr;
	up->img = im;
	up->reused = 1;
	return 1;
}

int kr__img_wr_kept(struct kr_uproc *up)
{
	if (up->isolate)
		kr__iso_lock();
	int e = rl_copy(&up->wr, &up->img->wr);
	if (up->isolate)
		kr__iso_unlock();
	return e;
}

void kr__img_resume(struct kr_uproc *up, uintptr_t sp)
{
	struct kr__image *im = up->img;
	kr__mem_put(&im->mem);
	if (!up->sigkeep) { /* else what exec left it (uproc.c) */
		memcpy(up->sig, im->sig, sizeof up->sig);
		up->main.sigmask = im->sigmask;
		up->main.altstack = im->altstack;
	}
	if (im->tidaddr && kr__rl_covers(&up->reg, im->tidaddr, im->tidaddr + 4))
		*(int *)im->tidaddr = up->pid; /* the thread's tid, as glibc cached it */
	up->main.fs = im->fs;
	if (sp != im->sp) /* the layout of the initial stack is the key's */
		kr__uproc_end(&up->main, 127);
	kr__img_start(im->entry, sp, im->fs, im->rdx);
}

/* ---- the end ---- */

void kr__img_dirty(struct kr_uproc *up, uintptr_t lo, uintptr_t hi)
{
	if (up->img && !up->img->dirty && kr__rl_meets(&up->img->reg, lo, hi))
		up->img->dirty = 1;
	for (unsigned i = 0; i < up->nfmaps;)
		if (up->fmaps[i].lo < hi && lo < up->fmaps[i].lo + up->fmaps[i].len)
			up->fmaps[i] = up->fmaps[--up->nfmaps];
		else
			i++;
}

/* ---- read-only file mappings ----
 *
 * A program maps the same files read-only at every start (the C library
 * its locale's twelve).  Such a mapping, unchanged at the end of a run
 * whose image is kept, stays mapped as a spare of the image, its pages
 * with it; a later run's request for the same pages of the same file
 * (device, inode, modification time, offset, length, private or shared)
 * gets the spare's address: no mmap, no page faults, no munmap and its
 * shoot-downs at the end.  The content is the file's, as a new mapping's
 * would be: pages not written are the page cache's, and a file replaced
 * or changed since has another inode or modification time. */

uintptr_t kr__img_fmap_take(struct kr_uproc *up, const struct kr__file_id *id, int64_t off,
			    size_t len, int flags)
{
	struct kr__image *im = up->img;
	for (unsigned i = 0; im && i < im->nspare; i++) {
		struct kr__fmap *f = &im->spare[i];
		if (f->len != len || f->off != off || f->flags != flags ||
		    memcmp(&f->id, id, sizeof *id))
			continue;
		struct kr__fmap m = *f;
		if (kr__uproc_mapped(up, m.lo, m.lo + m.len, PROT_READ))
			return 0;
		*f = im->spare[--im->nspare];
		kr__img_fmap_made(up, m.lo, id, off, len, flags);
		return m.lo;
	}
	return 0;
}

void kr__img_fmap_made(struct kr_uproc *up, uintptr_t at, const struct kr__file_id *id,
		       int64_t off, size_t len, int flags)
{
	if (!up->img)
		return;
	if (up->nfmaps == up->capfmaps) {
		unsigned cap = up->capfmaps ? up->capfmaps * 2 : 16;
		struct kr__fmap *n = realloc(up->fmaps, cap * sizeof *n);
		if (!n)
			return; /* unmapped at the end, as any other */
		up->fmaps = n;
		up->capfmaps = cap;
	}
	up->fmaps[up->nfmaps++] = (struct kr__fmap){at, len, *id, off, flags};
}

/* At a keep: the run's unchanged read-only file mappings become spares
 * (out of `run`, what is unmapped); beyond SPARES_MAX, the oldest go. */
static void fmaps_to_spares(struct kr_uproc *up, struct kr__image *im, struct kr__rlist *run)
{
	for (unsigned i = 0; i < up->nfmaps; i++) {
		struct kr__fmap *f = &up->fmaps[i];
		if (!kr__rl_covers(run, f->lo, f->lo + f->len))
			continue;
		if (im->nspare == SPARES_MAX) {
			munmap((void *)im->spare[0].lo, im->spare[0].len);
			memmove(im->spare, im->spare + 1, --im->nspare * sizeof *im->spare);
		}
		if (!im->spare && !(im->spare = malloc(SPARES_MAX * sizeof *im->spare)))
			return;
		im->spare[im->nspare++] = *f;
		kr__rl_del(run, f->lo, f->lo + f->len);
	}
}

void kr__img_adopt(struct kr_uproc *up, uintptr_t lo, uintptr_t hi)
{
	if (up->img && kr__rl_add(&up->img->reg, lo, hi))
		up->img->dirty = 1; /* it would be unmapped under its trampolines */
}

void kr__img_drop(struct kr_uproc *up)
{
	struct kr__image *im = up->img;
	if (!im)
		return;
	up->img = NULL;
	live_done();
	kr__rw_del(im->rw);
	free(im->xmap);
	for (unsigned i = 0; i < im->nspare; i++)
		munmap((void *)im->spare[i].lo, im->spare[i].len);
	free(im->spare);
	free_key_and_copy(im);
	free(im);
}

int kr__img_keep(struct kr_uproc *up)
{
	struct kr__image *im = up->img;
	if (!im)
		return 0;
	pthread_mutex_lock(&C.lock);
	int keep = keep_locked();
	pthread_mutex_unlock(&C.lock);
	if (im->dirty || !up->exited || up->threaded || !keep) {
		kr__img_drop(up);
		return 0;
	}
	/* what the run mapped goes: the regions less the image's */
	struct kr__rlist run = {0};
	for (size_t i = 0; i < up->reg.n; i++)
		if (kr__rl_add(&run, up->reg.r[i].lo, up->reg.r[i].hi)) {
			kr__rl_free(&run);
			kr__img_drop(up);
			return 0;
		}
	for (size_t i = 0; i < im->reg.n; i++)
		kr__rl_del(&run, im->reg.r[i].lo, im->reg.r[i].hi);
	fmaps_to_spares(up, im, &run);
	for (size_t i = 0; i < run.n; i++)
		kr__xmap_del(up, run.r[i].lo, run.r[i].hi);
	kr__rl_unmap(&run);
	kr__rl_free(&run);
	kr__rl_free(&up->reg);
	swap_rw(up, im);
	up->img = NULL;

	struct kr__image *gone = NULL;
	pthread_mutex_lock(&C.lock);
	C.live--;
	im->next = C.head;
	C.head = im;
	if (++C.n > (unsigned)C.keep) { /* the oldest goes */
		struct kr__image **pp = &C.head;
		while ((*pp)->next)
			pp = &(*pp)->next;
		gone = *pp;
		*pp = NULL;
		C.n--;
	}
	pthread_mutex_unlock(&C.lock);
	if (gone)
		image_free(gone);
	return 1;
}
