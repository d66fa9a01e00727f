/*
 * karui image layer — call sites that enter karui by a jump instead of a
 * trap.
 *
 * A system call that traps (Syscall User Dispatch, uproc.c) costs a
 * signal: the kernel's frame with the whole vector state, the handler,
 * rt_sigreturn.  Once a call site of a μprocess has trapped twice, karui
 * rewrites it, in the μprocess's private copy of the page, so that the
 * next call from there reaches karui with two jumps and no kernel entry:
 *
 *   site:   syscall  (0f 05)     ->  jmp rel8 (eb xx) to a slot
 *   slot:   padding between two functions  ->  jmp rel32 to a stub
 *   stub:   (a page karui maps within 2 GiB of the image)
 *           lea -128(%rsp),%rsp        step over the red zone
 *           mov uproc(%rip),%r11       the μprocess (a clobber of syscall)
 *           call *fastcall(%rip)       gate.S: kr__img_fastcall
 *           lea 128(%rsp),%rsp
 *           jmp site+2
 *
 * Only the two bytes of the syscall instruction change where code runs,
 * so no other instruction is cut and a branch to any instruction boundary
 * still lands on one.  The slot must be bytes that never run: karui takes
 * them from the gaps between the functions that the image's unwind table
 * (PT_GNU_EH_FRAME) describes, within the 128 bytes a rel8 jump reaches,
 * and only if they look like alignment padding (nops, int3).  A site
 * without such a gap, outside any image with an unwind table (the vDSO,
 * code the μprocess generates), or in an image whose table karui does not
 * read, keeps trapping: Syscall User Dispatch stays the safe path.
 *
 * kr__img_fastcall (gate.S) keeps what the syscall instruction keeps
 * (every register but %rax, %rcx and %r11, the flags, the vector state)
 * and does what the SIGSYS path does: ALLOW, kr__sys, BLOCK.  The calls
 * that fast.c can finish with general registers alone (getpid, a read of
 * a regular file, ...) it finishes there; the others save the vector
 * state (XSAVEC/XRSTOR), install the VP's thread pointer and run kr__sys.
 *
 * The written pages become the μprocess's own (copy on write, written
 * through /proc/self/mem so that no mapping is split); the image's other
 * pages stay shared.  The stub pages are the μprocess's
 * regions and go with it.  Single-threaded μprocesses make this safe:
 * the code is changed only by the μprocess itself, in its handler, while
 * no other thread runs it.  KARUI_UPROC_REWRITE=0 turns rewriting off.
 *
 * Rejected: replacing `syscall` with `call *%rax` and a trampoline at
 * address 0 (needs vm.mmap_min_addr = 0); rewriting `mov $nr,%eax;
 * syscall` as one 5-byte call (a branch to the syscall instruction would
 * land inside it); patching at the first trap (most sites of a program's
 * start-up run once: the patch would cost more than it saves).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uproc.h"

#define PG 4096ul
#define STUB 32
#define HOT 2 /* traps at a site before it is rewritten */

struct site {
	uintptr_t at;
	uint32_t traps; /* UINT32_MAX: given up on */
};

struct kr__rw {
	struct site site[512];      /* open addressing on `at` */
	struct stubpage {
		uintptr_t page;
		unsigned used;
	} pages[16];
	unsigned npages;
	uintptr_t slots[512];       /* slots taken, 5 bytes each */
	unsigned nslots;
};

void kr__rw_free(struct kr_uproc *up)
{
	free(up->rw);
	up->rw = NULL;
	free(up->xmap);
	up->xmap = NULL;
	up->nxmap = 0;
}

/* ---- which image a site lies in ---- */

void kr__xmap_add(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, uintptr_t base)
{
	if (up->nxmap % 16 == 0) {
		struct kr__xmap *n = realloc(up->xmap, (up->nxmap + 16) * sizeof *n);
		if (!n)
			return; /* the site will keep trapping */
		up->xmap = n;
	}
	up->xmap[up->nxmap++] = (struct kr__xmap){lo, hi, base};
}

void kr__xmap_del(struct kr_uproc *up, uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < up->nxmap;)
		if (up->xmap[i].lo < hi && lo < up->xmap[i].hi)
			up->xmap[i] = up->xmap[--up->nxmap];
		else
			i++;
}

static uintptr_t image_of(struct kr_uproc *up, uintptr_t at)
{
	for (unsigned i = 0; i < up->nxmap; i++)
		if (up->xmap[i].lo <= at && at < up->xmap[i].hi)
			return up->xmap[i].base;
	return 0;
}

/* ---- the unwind table: which bytes are no function's ---- */

static uint64_t uleb(const uint8_t **p)
{
	uint64_t v = 0;
	for (int s = 0; s < 64; s += 7) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			break;
	}
	return v;
}

/* The FDE pointer encoding of the CIE an FDE refers to; -1: unknown. */
static int fde_enc(const uint8_t *fde)
{
	const uint8_t *cie = fde + 4 - *(const int32_t *)(fde + 4);
	if (*(const uint32_t *)cie == 0xffffffff || *(const uint32_t *)(cie + 4) != 0)
		return -1;
	const uint8_t *p = cie + 8;
	uint8_t version = *p++;
	const char *aug = (const char *)p;
	p += strlen(aug) + 1;
	if (aug[0] != 'z')
		return 0; /* absolute pointers: not produced for x86-64 PIC */
	uleb(&p);                     /* code alignment */
	uleb(&p);                     /* data alignment (sleb: skipped the same) */
	if (version == 1)
		p++;
	else
		uleb(&p);             /* return register */
	uleb(&p);                     /* augmentation length */
	for (const char *a = aug + 1; *a; a++) {
		if (*a == 'R')
			return *p;
		if (*a == 'L')
			p++;
		else if (*a == 'P') {
			uint8_t e = *p++;
			if ((e & 0x0f) != 0x0b && (e & 0x0f) != 0x03)
				return -1;
			p += 4;
		} else if (*a != 'S' && *a != 'B')
			return -1;
	}
	return -1;
}

struct range {
	uintptr_t lo, hi;
};

/* Function i of the table: [lo, hi); 0 if unreadable. */
static int fde_range(const uint8_t *hdr, const int32_t *tab, uint32_t i, struct range *r)
{
	const uint8_t *fde = hdr + tab[2 * i + 1];
	int enc = fde_enc(fde);
	if (enc < 0 || (enc & 0x0f) != 0x0b) /* sdata4, pcrel or not */
		return 0;
	r->lo = (uintptr_t)(hdr + tab[2 * i]);
	r->hi = r->lo + (uint32_t) * (const int32_t *)(fde + 12);
	return 1;
}

static int is_padding(const uint8_t *p, size_t n)
{
	static const uint8_t ok[] = {0x90, 0xcc, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00,
				     0x40, 0x44, 0x80, 0x2e};
	for (size_t i = 0; i < n; i++)
		if (!memchr(ok, p[i], sizeof ok))
			return 0;
	return 1;
}

static int slot_free(struct kr__rw *rw, uintptr_t s)
{
	for (unsigned i = 0; i < rw->nslots; i++)
		if (s < rw->slots[i] + 5 && rw->slots[i] < s + 5)
			return 0;
	return 1;
}

/* A 5-byte slot in a gap between functions, reachable from `from` (the
 * end of the jmp rel8 at the site) with a rel8; 0 if none. */
static uintptr_t find_slot(struct kr__rw *rw, uintptr_t base, uintptr_t site)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_machine != EM_X86_64)
		return 0;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	const uint8_t *hdr = NULL;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = (const uint8_t *)(base + ph[i].p_vaddr);
	/* version 1, fde_count udata4, table datarel sdata4 */
	if (!hdr || hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b || (hdr[1] & 0x0f) != 0x0b)
		return 0;
	uint32_t n = *(const uint32_t *)(hdr + 8);
	const int32_t *tab = (const int32_t *)(hdr + 12);
	/* the last function starting at or before the site */
	uint32_t lo = 0, hi = n;
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if ((uintptr_t)(hdr + tab[2 * mid]) <= site)
			lo = mid;
		else
			hi = mid;
	}
	struct range f, g;
	if (n < 2 || !fde_range(hdr, tab, lo, &f) || site < f.lo || site + 2 > f.hi)
		return 0;
	uintptr_t from = site + 2;
	/* the gap after it, then the gap before it */
	struct range gaps[2] = {{f.hi, 0}, {0, f.lo}};
	if (lo + 1 < n)
		gaps[0].hi = (uintptr_t)(hdr + tab[2 * (lo + 1)]);
	if (lo > 0 && fde_range(hdr, tab, lo - 1, &g))
		gaps[1].lo = g.hi;
	for (int k = 0; k < 2; k++) {
		if (gaps[k].lo == 0 || gaps[k].hi <= gaps[k].lo)
			continue;
		for (uintptr_t s = gaps[k].lo; s + 5 <= gaps[k].hi; s++) {
			intptr_t d = (intptr_t)s - (intptr_t)from;
			if (d < -128 || d > 127 || !slot_free(rw, s) ||
			    !is_padding((const uint8_t *)s, 5))
				continue;
			return s;
		}
	}
	return 0;
}

/* ---- stubs ---- */

static int near(uintptr_t a, uintptr_t b)
{
	intptr_t d = (intptr_t)(a - b);
	return d > -(1l << 31) + (1l << 20) && d < (1l << 31) - (1l << 20);
}

/* A stub page within reach of the site (one serves every image near it:
 * ld.so puts a program's libraries next to each other, and karui the
 * program and its ld.so too). */
static struct stubpage *stub_page(struct kr_uproc *up, struct kr__rw *rw, uintptr_t base,
				  uintptr_t site)
{
	for (unsigned i = 0; i < rw->npages; i++)
		if (rw->pages[i].used + STUB <= PG && near(rw->pages[i].page, site))
			return &rw->pages[i];
	if (rw->npages == sizeof rw->pages / sizeof *rw->pages)
		return NULL;
	/* below the image first, then above it */
	for (long k = 1; k < 4096; k++) {
		uintptr_t at = (base & ~(PG - 1)) + (k % 2 ? -1l : 1l) * ((k + 1) / 2) * (1l << 20);
		if (!near(at, site))
			continue;
		void *p = mmap((void *)at, PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		if (kr__region_add(up, (uintptr_t)p, (uintptr_t)p + PG)) {
			munmap(p, PG);
			return NULL;
		}
		((uint64_t *)p)[0] = (uint64_t)kr__img_fastcall;
		((uint64_t *)p)[1] = (uint64_t)up; /* %r11 for kr__img_fastcall */
		mprotect(p, PG, PROT_READ | PROT_EXEC);
		struct stubpage *sp = &rw->pages[rw->npages++];
		*sp = (struct stubpage){(uintptr_t)p, 16};
		return sp;
	}
	return NULL;
}

static void put32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

/* Write code into the μprocess's read-only, executable pages.  Through
 * /proc/self/mem, as a debugger does: the page is copied on write and its
 * mapping keeps its protection, so it is not split (mprotect would split
 * it in three, and mappings are what bounds the number of μprocesses).
 * Where the kernel refuses that, mprotect around a plain copy. */
static int poke(uintptr_t at, const void *src, size_t n, int prot)
{
	static int mem = -2;
	int fd = __atomic_load_n(&mem, __ATOMIC_ACQUIRE);
	if (fd == -2) {
		int f = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
		int want = -2;
		if (!__atomic_compare_exchange_n(&mem, &want, f, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (f >= 0)
				close(f);
			f = want;
		}
		fd = f;
	}
	if (fd >= 0 && pwrite(fd, src, n, (off_t)at) == (ssize_t)n)
		return 1;
	uintptr_t lo = at & ~(PG - 1), hi = (at + n + PG - 1) & ~(PG - 1);
	if (mprotect((void *)lo, hi - lo, prot | PROT_WRITE))
		return 0;
	memcpy((void *)at, src, n);
	mprotect((void *)lo, hi - lo, prot);
	return 1;
}

static int rewrite(struct kr_uproc *up, struct kr__rw *rw, uintptr_t site)
{
	uintptr_t base = image_of(up, site);
	if (!base || rw->nslots == sizeof rw->slots / sizeof *rw->slots)
		return 0;
	uintptr_t slot = find_slot(rw, base, site);
	if (!slot)
		return 0;
	struct stubpage *sp = stub_page(up, rw, base, site);
	if (!sp || !near(sp->page, slot))
		return 0;

	uint8_t code[STUB], *c = code;
	uintptr_t stub = sp->page + sp->used;
	memcpy(c, "\x48\x8d\x64\x24\x80", 5);                /* lea -128(%rsp),%rsp */
	c += 5;
	memcpy(c, "\x4c\x8b\x1d", 3);                        /* mov page+8(%rip),%r11 */
	put32(c + 3, (int32_t)(sp->page + 8 - (stub + 12)));
	c += 7;
	memcpy(c, "\xff\x15", 2);                            /* call *page(%rip) */
	put32(c + 2, (int32_t)(sp->page - (stub + 18)));
	c += 6;
	memcpy(c, "\x48\x8d\xa4\x24\x80\x00\x00\x00", 8);    /* lea 128(%rsp),%rsp */
	c += 8;
	*c = 0xe9;                                           /* jmp site+2 */
	put32(c + 1, (int32_t)((site + 2) - (stub + 31)));
	c[5] = 0xcc;
	if (!poke(stub, code, STUB, PROT_READ | PROT_EXEC))
		return 0;
	sp->used += STUB;

	uint8_t jmp5[5] = {0xe9};
	put32(jmp5 + 1, (int32_t)(stub - (slot + 5)));
	uint8_t jmp2[2] = {0xeb, (uint8_t)(int8_t)((intptr_t)slot - (intptr_t)(site + 2))};
	/* the slot first: nothing jumps there yet */
	if (!poke(slot, jmp5, 5, PROT_READ | PROT_EXEC) ||
	    !poke(site, jmp2, 2, PROT_READ | PROT_EXEC))
		return 0;
	rw->slots[rw->nslots++] = slot;
	up->rewritten++;
	return 1;
}

void kr__rw_trapped(struct kr_uproc *up, uintptr_t site)
{
	if (!up->rw && !(up->rw = calloc(1, sizeof *up->rw)))
		return;
	struct kr__rw *rw = up->rw;
	const unsigned mask = sizeof rw->site / sizeof *rw->site - 1;
	unsigned h = (unsigned)((site * 0x9e3779b97f4a7c15ull) >> 40) & mask;
	for (unsigned k = 0; k <= mask; k++, h = (h + 1) & mask) {
		struct site *s = &rw->site[h];
		if (s->at && s->at != site)
			continue;
		if (!s->at)
			s->at = site;
		if (s->traps == UINT32_MAX || ++s->traps < HOT)
			return;
		if (!rewrite(up, rw, site))
			s->traps = UINT32_MAX;
		return;
	}
}
