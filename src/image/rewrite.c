/*
 * karui image layer — call sites that enter karui by a jump instead of a
 * trap.
 *
 * A system call that traps (Syscall User Dispatch, uproc.c) costs a
 * signal: the kernel's frame with the whole vector state, the handler,
 * rt_sigreturn.  Once a call site of a μprocess has trapped twice in a
 * page that the μprocess has its own copy of already, three times in
 * another (once if an earlier μprocess made it hot in another image of
 * its file and the page is this μprocess's own: "sites known per file"
 * below),
 * karui rewrites it, in the μprocess's private copy of the page, so that
 * the next call from there reaches karui with two jumps and no kernel
 * entry:
 *
 *   site:   syscall  (0f 05)     ->  jmp rel8 (eb xx) to a slot
 *   slot:   padding between two functions  ->  jmp rel32 to a trampoline
 *   trampoline: (a page karui maps within 2 GiB of the image)
 *           lea -128(%rsp),%rsp        step over the red zone
 *           nopl 0(%rax)               (7 bytes)
 *           call *fastcall(%rip)       gate.S: kr__img_fastcall
 *           lea 128(%rsp),%rsp
 *           jmp site+2
 *
 * Only the two bytes of the syscall instruction change where code runs,
 * so no other instruction is cut and a branch to any instruction boundary
 * still lands on one.  Where no slot is in reach and the syscall follows
 * `mov $nr, %eax` (decoded from the function's start), the mov's five
 * bytes become the jump to the trampoline, which sets %eax itself: the
 * syscall stays as it was, so a branch to it, a restart (its rip - 2)
 * and a thread stopped between the two still run the call, by its trap.
 * The slot must be bytes that never run: karui takes
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
 * pages stay shared, and ld.so's written pages are the file's again once
 * it has handed over to the program ("ld.so's code, given back" below).
 * The trampoline pages are the μprocess's regions and go with it.  The
 * table of sites is under the μprocess's mm lock.  With one thread, the
 * code is changed by that thread itself, in its handler, while nothing
 * else runs it.  With threads, other threads may be running it: the change
 * is made as a kernel patches its live code (poke_live: int3 first, then
 * the other bytes, then the first, every processor made to serialise
 * between two writes), and a thread that meets the int3 goes back to it
 * until the change is done (kr__rw_patched).  KARUI_UPROC_REWRITE=0 turns
 * rewriting off.
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
#include <pthread.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uproc.h"

#define PG 4096ul
#define TRAMP 32
/* traps at a site before it is rewritten: in a page the μprocess has its
 * own copy of already; in one that the rewrite would copy (4 KiB), one
 * more, so that a site called twice at start-up (malloc's brk, stdio's
 * fstat) costs no page */
#define HOT 2
#define HOT_PAGE 3

struct site {
	uintptr_t at;
	uint32_t traps; /* UINT32_MAX: given up on */
};

/* The sites a μprocess trapped at, by open addressing on `at`: small at
 * first (a hello program traps at a dozen), twice as big when three
 * quarters full, up to SITES_MAX.  A table that was replaced is kept
 * until the μprocess ends: kr__rw_patched reads without the lock. */
#define SITES_MAX 512
struct sitetab {
	struct sitetab *old;
	unsigned mask;
	struct site e[];
};

#define SLOTS_MAX 512
struct kr__rw {
	struct sitetab *tab;        /* __atomic; NULL: none yet */
	unsigned nsite;
	struct tramppage {
		uintptr_t page;
		unsigned used;
	} pages[16];
	unsigned npages;
	uintptr_t *slots;           /* slots taken, 5 bytes each (a mov made
				     * the jump is its own slot) */
	unsigned nslots, cap;
	uintptr_t trap[64];         /* cpuid sites made hlt (no slot in reach) */
	unsigned ntrap;
};

void kr__rw_del(struct kr__rw *rw)
{
	if (!rw)
		return;
	for (struct sitetab *t = rw->tab, *o; t; t = o) {
		o = t->old;
		free(t);
	}
	free(rw->slots);
	free(rw);
}

/* Room for one more slot: 0 if there is none. */
static int slot_room(struct kr__rw *rw)
{
	if (rw->nslots < rw->cap)
		return 1;
	unsigned cap = rw->cap ? 2 * rw->cap : 16;
	uintptr_t *n = cap <= SLOTS_MAX ? realloc(rw->slots, cap * sizeof *n) : NULL;
	if (!n)
		return 0;
	rw->slots = n;
	rw->cap = cap;
	return 1;
}

void kr__rw_free(struct kr_uproc *up)
{
	kr__rw_del(up->rw);
	up->rw = NULL;
	free(up->xmap);
	up->xmap = NULL;
	up->nxmap = 0;
}

/* ---- which image a site lies in ---- */

void kr__xmap_add(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, uintptr_t base,
		  const struct kr__file_id *file)
{
	if (up->nxmap % 16 == 0) {
		struct kr__xmap *n = realloc(up->xmap, (up->nxmap + 16) * sizeof *n);
		if (!n)
			return; /* the site will keep trapping */
		up->xmap = n;
	}
	up->xmap[up->nxmap++] = (struct kr__xmap){lo, hi, base, *file};
}

void kr__xmap_del(struct kr_uproc *up, uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < up->nxmap;)
		if (up->xmap[i].lo < hi && lo < up->xmap[i].hi)
			up->xmap[i] = up->xmap[--up->nxmap];
		else
			i++;
}

static struct kr__xmap *xmap_of(struct kr_uproc *up, uintptr_t at)
{
	for (unsigned i = 0; i < up->nxmap; i++)
		if (up->xmap[i].lo <= at && at < up->xmap[i].hi)
			return &up->xmap[i];
	return NULL;
}

static uintptr_t image_of(struct kr_uproc *up, uintptr_t at)
{
	struct kr__xmap *xm = xmap_of(up, at);
	return xm ? xm->base : 0;
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

/* The unwind table of the image at base: its sorted function starts. */
struct eh {
	const uint8_t *hdr;
	const int32_t *tab;
	uint32_t n;
};

static int eh_table(uintptr_t base, struct eh *e)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_machine != EM_X86_64)
		return 0;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	const uint8_t *hdr = NULL;
	uint64_t size = 0;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME) {
			hdr = (const uint8_t *)(base + ph[i].p_vaddr);
			size = ph[i].p_memsz;
		}
	/* version 1, fde_count udata4, table datarel sdata4, within the segment */
	if (!hdr || size < 12 || hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b ||
	    (hdr[1] & 0x0f) != 0x0b)
		return 0;
	e->hdr = hdr;
	e->n = *(const uint32_t *)(hdr + 8);
	e->tab = (const int32_t *)(hdr + 12);
	return e->n >= 2 && e->n <= (size - 12) / 8;
}

/* The function that holds [at, at + len): its index, or -1. */
static long fn_at(const struct eh *e, uintptr_t at, size_t len, struct range *f)
{
	uint32_t lo = 0, hi = e->n;
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if ((uintptr_t)(e->hdr + e->tab[2 * mid]) <= at)
			lo = mid;
		else
			hi = mid;
	}
	if (!fde_range(e->hdr, e->tab, lo, f) || at < f->lo || at + len > f->hi)
		return -1;
	return lo;
}

static int reach8(uintptr_t slot, uintptr_t from)
{
	intptr_t d = (intptr_t)slot - (intptr_t)from;
	return d >= -128 && d <= 127;
}

/* Alignment filler: nop (90, 0f 1f, with 66 / 2e prefixes) or int3. */
static int is_filler(const uint8_t *p, unsigned len)
{
	if (len == 1 && (p[0] == 0x90 || p[0] == 0xcc))
		return 1;
	unsigned i = 0;
	while (i < len && (p[i] == 0x66 || p[i] == 0x2e))
		i++;
	return i < len && (p[i] == 0x90 || (i + 1 < len && p[i] == 0x0f && p[i + 1] == 0x1f));
}

/* Function f's dead filler: runs of filler right after an unconditional
 * jmp, ret or trap, and the targets of its direct branches (a compiler
 * branches to the aligned label after such a run, never into it).  Needs
 * every instruction of f decoded.  The last function scanned is kept per
 * thread: a plan asks for many sites of one function. */
enum { MAXT = 2048, MAXRUN = 128 };
struct fnscan {
	uintptr_t lo, hi;
	int ok;
	unsigned nt, nrun;
	uintptr_t tg[MAXT];
	struct range run[MAXRUN];
};

static void scan_fn(struct fnscan *sc, struct range f)
{
	struct kr__insn in;
	sc->lo = f.lo;
	sc->hi = f.hi;
	sc->ok = 0;
	sc->nt = sc->nrun = 0;
	int dead = 0;
	uintptr_t run = 0, p;
	for (p = f.lo; p < f.hi; p += in.len) {
		if (!kr__x86_decode((const uint8_t *)p, f.hi - p, &in) || !in.len)
			return;
		if (in.kind == KR_INSN_JMP || in.kind == KR_INSN_JCC || in.kind == KR_INSN_CALL) {
			if (sc->nt == MAXT)
				return;
			sc->tg[sc->nt++] = p + (uintptr_t)in.target;
		}
		int filler = is_filler((const uint8_t *)p, in.len);
		if (filler && dead) {
			if (!run)
				run = p;
			continue;
		}
		if (run && p - run >= 5 && sc->nrun < MAXRUN)
			sc->run[sc->nrun++] = (struct range){run, p};
		run = 0;
		if (!filler)
			dead = in.kind == KR_INSN_JMP || in.kind == KR_INSN_RET ||
			       in.kind == KR_INSN_JMP_IND || in.kind == KR_INSN_UD;
	}
	if (run && p - run >= 5 && sc->nrun < MAXRUN)
		sc->run[sc->nrun++] = (struct range){run, p};
	sc->ok = 1;
}

static uintptr_t inner_slot(struct kr__rw *rw, struct range f, uintptr_t from)
{
	static __thread struct fnscan sc;
	if (sc.lo != f.lo || sc.hi != f.hi)
		scan_fn(&sc, f);
	if (!sc.ok)
		return 0;
	for (unsigned r = 0; r < sc.nrun; r++)
		for (uintptr_t s = sc.run[r].lo; s + 5 <= sc.run[r].hi; s++) {
			if (!reach8(s, from))
				continue;
			int hit = 0;
			for (unsigned t = 0; t < sc.nt && !hit; t++)
				hit = sc.tg[t] >= s && sc.tg[t] < s + 5;
			if (!hit && slot_free(rw, s))
				return s;
		}
	return 0;
}

/* A 5-byte slot for the 2-byte instruction at site, in reach of a rel8
 * from its end: in the padding between functions next to it, else in
 * dead filler inside its own function; 0 if none. */
static uintptr_t find_slot(struct kr__rw *rw, uintptr_t base, uintptr_t site)
{
	struct eh e;
	struct range f, g;
	long i;
	if (!eh_table(base, &e) || (i = fn_at(&e, site, 2, &f)) < 0)
		return 0;
	uintptr_t from = site + 2;
	/* the gap after it, then the gap before it */
	struct range gaps[2] = {{f.hi, 0}, {0, f.lo}};
	if ((uint32_t)i + 1 < e.n)
		gaps[0].hi = (uintptr_t)(e.hdr + e.tab[2 * (i + 1)]);
	if (i > 0 && fde_range(e.hdr, e.tab, (uint32_t)i - 1, &g))
		gaps[1].lo = g.hi;
	for (int k = 0; k < 2; k++) {
		if (gaps[k].lo == 0 || gaps[k].hi <= gaps[k].lo)
			continue;
		for (uintptr_t s = gaps[k].lo; s + 5 <= gaps[k].hi; s++)
			if (reach8(s, from) && slot_free(rw, s) && is_padding((const uint8_t *)s, 5))
				return s;
	}
	return inner_slot(rw, f, from);
}

/* site - 5 holds `mov $imm32, %eax` (b8 imm32), an instruction of the
 * function that holds the site (decoded from its start), right before the
 * syscall: its five bytes can become the jump to the trampoline, which
 * sets %eax itself, and the syscall stays as it is. */
static int mov_before(uintptr_t base, uintptr_t site)
{
	struct eh e;
	struct range f;
	if (!eh_table(base, &e) || fn_at(&e, site, 2, &f) < 0 || site < f.lo + 5)
		return 0;
	struct kr__insn in;
	uintptr_t p = f.lo;
	for (; p < site - 5; p += in.len)
		if (!kr__x86_decode((const uint8_t *)p, f.hi - p, &in) || !in.len)
			return 0;
	return p == site - 5 && kr__x86_decode((const uint8_t *)p, 5, &in) == 5 &&
	       ((const uint8_t *)p)[0] == 0xb8;
}

/* ---- sites that need no vector state kept ----
 *
 * Every vector register is caller-saved in the x86-64 ABI, so at a call
 * of a C library's system-call wrapper none is live, and one the wrapper
 * itself does not use is not live at its syscall either: there karui may
 * use them freely and save nothing.  A site gets that treatment when it
 * lies in one of the wrappers named below (their prototypes take and
 * return no floating point), found by name in the image's dynamic symbol
 * table, and the wrapper's own code uses no x87, SSE, AVX or AVX-512
 * instruction.  Everything else keeps the full save. */

static const char *const wrappers[] = {
	"read",	     "write",	   "readv",	      "writev",	     "pread64",
	"pwrite64",  "sched_yield", "__nanosleep",    "clock_nanosleep", "poll",
	"ppoll",     "epoll_wait", "recv",	      "send",	     "recvfrom",
	"sendto",    "recvmsg",	   "sendmsg",	      "accept",	     "accept4",
	"connect",   "close"};

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (uint8_t)*s;
	return h;
}

/* The symbol `name` of the image at base, through DT_GNU_HASH; NULL if none. */
static const Elf64_Sym *dynsym(uintptr_t base, const char *name)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	const Elf64_Dyn *dyn = NULL;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base + ph[i].p_vaddr);
	const uint32_t *gh = NULL;
	const Elf64_Sym *sym = NULL;
	const char *str = NULL;
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		/* ld.so relocated these in place: absolute, or still offsets */
		uintptr_t v = dyn->d_un.d_ptr < base ? base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
		if (dyn->d_tag == DT_GNU_HASH)
			gh = (const uint32_t *)v;
		else if (dyn->d_tag == DT_SYMTAB)
			sym = (const Elf64_Sym *)v;
		else if (dyn->d_tag == DT_STRTAB)
			str = (const char *)v;
	}
	if (!gh || !sym || !str)
		return NULL;
	uint32_t nbuckets = gh[0], symoffset = gh[1], bloom = gh[2];
	const uint32_t *buckets = gh + 4 + bloom * 2, *chain = buckets + nbuckets;
	uint32_t h = gnu_hash(name);
	if (!nbuckets)
		return NULL;
	for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; i++) {
		uint32_t ch = chain[i - symoffset];
		if ((ch | 1) == (h | 1) && !strcmp(str + sym[i].st_name, name) && sym[i].st_value)
			return &sym[i];
		if (ch & 1)
			break;
	}
	return NULL;
}

/* An instruction that touches x87, SSE, AVX or AVX-512 state (or might). */
static int vector_insn(const uint8_t *p, unsigned len)
{
	unsigned i = 0;
	while (i < len && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf2 || p[i] == 0xf3 ||
			   p[i] == 0xf0 || p[i] == 0x2e || p[i] == 0x3e || p[i] == 0x26 ||
			   p[i] == 0x36 || p[i] == 0x64 || p[i] == 0x65))
		i++;
	if (i < len && (p[i] & 0xf0) == 0x40)
		i++;
	if (i >= len)
		return 0;
	uint8_t op = p[i];
	if (op == 0xc4 || op == 0xc5 || op == 0x62 || (op >= 0xd8 && op <= 0xdf))
		return 1;
	if (op != 0x0f || i + 1 >= len)
		return 0;
	op = p[i + 1];
	if (op == 0x0f || op == 0x38 || op == 0x3a || op == 0x77 || op == 0xae)
		return 1;
	return (op >= 0x10 && op <= 0x17) || (op >= 0x28 && op <= 0x2f) ||
	       (op >= 0x50 && op <= 0x7f) || (op >= 0xc2 && op <= 0xc6) || op >= 0xd0;
}

int kr__rw_novec_site(uintptr_t base, uintptr_t site)
{
	for (unsigned w = 0; w < sizeof wrappers / sizeof *wrappers; w++) {
		const Elf64_Sym *s = dynsym(base, wrappers[w]);
		if (!s || ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_size ||
		    site < base + s->st_value || site + 2 > base + s->st_value + s->st_size)
			continue;
		uintptr_t lo = base + s->st_value, hi = lo + s->st_size;
		struct kr__insn in;
		for (uintptr_t p = lo; p < hi; p += in.len)
			if (!kr__x86_decode((const uint8_t *)p, hi - p, &in) || !in.len ||
			    vector_insn((const uint8_t *)p, in.len))
				return 0;
		return 1;
	}
	return 0;
}

/* ---- trampolines ---- */

static int near(uintptr_t a, uintptr_t b)
{
	intptr_t d = (intptr_t)(a - b);
	return d > -(1l << 31) + (1l << 20) && d < (1l << 31) - (1l << 20);
}

/* A trampoline page within reach of the site (one serves every image near it:
 * ld.so puts a program's libraries next to each other, and karui the
 * program and its ld.so too). */
static struct tramppage *tramp_page(struct kr_uproc *up, struct kr__rw *rw, uintptr_t base,
				  uintptr_t site)
{
	for (unsigned i = 0; i < rw->npages; i++)
		if (rw->pages[i].used + TRAMP <= PG && near(rw->pages[i].page, site))
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
		if (kr__rl_add(&up->reg, (uintptr_t)p, (uintptr_t)p + PG)) {
			munmap(p, PG);
			return NULL;
		}
		kr__img_adopt(up, (uintptr_t)p, (uintptr_t)p + PG);
		((uint64_t *)p)[0] = (uint64_t)kr__img_fastcall;
		((uint64_t *)p)[2] = (uint64_t)kr__img_cpuid;
		((uint64_t *)p)[3] = (uint64_t)kr__img_fastcall_novec;
		((uint64_t *)p)[4] = (uint64_t)kr__img_fastcall_nf;
		((uint64_t *)p)[5] = (uint64_t)kr__img_fastcall_novec_nf;
		mprotect(p, PG, PROT_READ | PROT_EXEC);
		struct tramppage *sp = &rw->pages[rw->npages++];
		*sp = (struct tramppage){(uintptr_t)p, 64};
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
static int mem = -2; /* /proc/self/mem, once opened; -1: not to be had */

int kr__rw_poke(uintptr_t at, const void *src, size_t n, int prot)
{
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

/* In the child of a fork (one thread): the /proc/self/mem opened before
 * is the parent's memory, where the child's rewrites would land. */
void kr__rw_forked(void)
{
	if (mem >= 0)
		close(mem);
	mem = -2;
}

/* A trampoline for the site: the red zone stepped over, a call through the
 * page's table (`fn`: 0 kr__img_fastcall, 3 kr__img_fastcall_novec, 4 and
 * 5 their _nf forms; 2 kr__img_cpuid), and back to the instruction after
 * the site.  The 7 bytes of nop, or of the site's own `mov $nr, %eax`
 * (when the trampoline is entered in its place), keep the layout that
 * the offsets here and kept images' trampolines have. */
static void tramp_code(uint8_t code[TRAMP], uintptr_t page, uintptr_t tramp, uintptr_t site, int fn,
		       const uint8_t *mov)
{
	uint8_t *c = code;
	memcpy(c, "\x48\x8d\x64\x24\x80", 5);                /* lea -128(%rsp),%rsp */
	c += 5;
	if (mov) {                                           /* the site's mov, */
		memcpy(c, mov, 5);
		memcpy(c + 5, "\x66\x90", 2);                    /* nop */
	} else {
		memcpy(c, "\x0f\x1f\x80\x00\x00\x00\x00", 7);  /* or a nop */
	}
	c += 7;
	memcpy(c, "\xff\x15", 2);                            /* call *page+8*fn(%rip) */
	put32(c + 2, (int32_t)(page + 8 * fn - (tramp + 18)));
	c += 6;
	memcpy(c, "\x48\x8d\xa4\x24\x80\x00\x00\x00", 8);    /* lea 128(%rsp),%rsp */
	c += 8;
	*c = 0xe9;                                           /* jmp site+2 */
	put32(c + 1, (int32_t)((site + 2) - (tramp + 31)));
	c[5] = 0xcc;
}

static void jumps(uint8_t jmp5[5], uint8_t jmp2[2], uintptr_t site, uintptr_t slot,
		  uintptr_t tramp)
{
	jmp5[0] = 0xe9;
	put32(jmp5 + 1, (int32_t)(tramp - (slot + 5)));
	jmp2[0] = 0xeb;
	jmp2[1] = (uint8_t)(int8_t)((intptr_t)slot - (intptr_t)(site + 2));
}

/* Every thread of the process runs a serialising instruction before it
 * runs code again (membarrier's SYNC_CORE): what it fetched before a
 * write to code is not what it runs after.  0 where the kernel has no
 * such command, or refuses it.
 *
 * The registration costs the kernel a grace period (synchronize_rcu, 10 ms
 * and more) once the process has threads, and nothing while it has one:
 * it is made when the library is loaded, if the process then has one
 * thread (its /proc/self/task has 3 links); else at the first live
 * patch.  Made at the first live patch, it held a threaded μprocess (and
 * pigz's run under libkarui-pthread.so) for 13.7 ms. */
static int sync_ok = -1; /* -1: not registered yet */

static int sync_register(void)
{
	int v = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
	__atomic_store_n(&sync_ok, v, __ATOMIC_RELEASE);
	return v;
}

__attribute__((constructor)) static void sync_register_early(void)
{
	struct stat st;
	if (stat("/proc/self/task", &st) == 0 && st.st_nlink == 3)
		sync_register();
}

static int sync_cores(void)
{
	int v = __atomic_load_n(&sync_ok, __ATOMIC_ACQUIRE);
	if (v < 0)
		v = sync_register();
	return v && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
}

/* The n bytes of an instruction at `at` become `code`, an instruction of
 * n bytes too, while other threads may run them, as a kernel patches its
 * live code.  First int3 over the first byte, so that a thread that comes
 * there traps (and is sent back until the patch is done: kr__rw_patched);
 * then the other bytes, which no thread runs as the start of an
 * instruction now; then the first byte over the int3.  Each write is seen
 * by every processor before the next (sync_cores).  Where one fails, the
 * first byte is put back: the site keeps trapping. */
static int poke_live(uintptr_t at, const uint8_t *code, size_t n)
{
	static const uint8_t int3 = 0xcc;
	uint8_t first = *(const uint8_t *)at;
	if (!sync_cores() || !kr__rw_poke(at, &int3, 1, PROT_READ | PROT_EXEC))
		return 0;
	if (!sync_cores() || !kr__rw_poke(at + 1, code + 1, n - 1, PROT_READ | PROT_EXEC) ||
	    !sync_cores()) {
		kr__rw_poke(at, &first, 1, PROT_READ | PROT_EXEC);
		return 0;
	}
	if (!kr__rw_poke(at, code, 1, PROT_READ | PROT_EXEC))
		return 0; /* the int3 stays: kr__rw_patched retries for ever */
	sync_cores();
	return 1;
}

static int patched_site(struct kr__rw *rw, uintptr_t at);

/* at is a site, or the mov before a site (rewrite). */
int kr__rw_patched(struct kr_uproc *up, uintptr_t at)
{
	struct kr__rw *rw = __atomic_load_n(&up->rw, __ATOMIC_ACQUIRE);
	return rw && (patched_site(rw, at) || patched_site(rw, at + 5));
}

static unsigned site_hash(uintptr_t at, unsigned mask)
{
	return (unsigned)((at * 0x9e3779b97f4a7c15ull) >> 40) & mask;
}

static int patched_site(struct kr__rw *rw, uintptr_t at)
{
	struct sitetab *t = __atomic_load_n(&rw->tab, __ATOMIC_ACQUIRE);
	if (!t)
		return 0;
	const unsigned mask = t->mask;
	unsigned h = site_hash(at, mask);
	for (unsigned k = 0; k <= mask; k++, h = (h + 1) & mask) {
		uintptr_t s = __atomic_load_n(&t->e[h].at, __ATOMIC_ACQUIRE);
		if (!s)
			return 0;
		if (s == at)
			return 1;
	}
	return 0;
}

/* The flags are dead after the syscall at site: the next instruction is
 * a cmp of %rax or %eax with an immediate (how a C library's wrappers test
 * the result) or a ret (the ABI keeps no flag across a call). */
static int flags_dead(uintptr_t site)
{
	const uint8_t *p = (const uint8_t *)site + 2;
	return p[0] == 0xc3 || p[0] == 0x3d || (p[0] == 0x48 && p[1] == 0x3d);
}

static int rewrite(struct kr_uproc *up, struct kr__rw *rw, uintptr_t site, int threaded)
{
	uintptr_t base = image_of(up, site);
	if (!base || !slot_room(rw))
		return 0;
	/* a slot the site's rel8 reaches; else the mov before it */
	uintptr_t slot = find_slot(rw, base, site), mov = 0;
	if (!slot && mov_before(base, site))
		mov = site - 5;
	if (!slot && !mov)
		return 0;
	struct tramppage *sp = tramp_page(up, rw, base, site);
	if (!sp || !near(sp->page, slot ? slot : mov))
		return 0;
	uint8_t code[TRAMP], jmp5[5], jmp2[2];
	uintptr_t tramp = sp->page + sp->used;
	int novec = kr__rw_novec_site(base, site);
	tramp_code(code, sp->page, tramp, site,
		   flags_dead(site) ? (novec ? 5 : 4) : (novec ? 3 : 0),
		   mov ? (const uint8_t *)mov : NULL);
	if (!kr__rw_poke(tramp, code, TRAMP, PROT_READ | PROT_EXEC))
		return 0;
	sp->used += TRAMP;
	if (mov) {
		/* the mov becomes the jump (its slot is itself) */
		jumps(jmp5, jmp2, site, mov, tramp);
		if (!(threaded ? poke_live(mov, jmp5, 5) : kr__rw_poke(mov, jmp5, 5, PROT_READ | PROT_EXEC)))
			return 0;
		rw->slots[rw->nslots++] = mov;
		up->rewritten++;
		return 1;
	}
	jumps(jmp5, jmp2, site, slot, tramp);
	if (threaded) {
		/* the slot runs nowhere yet; the site may, on another VP */
		if (!kr__rw_poke(slot, jmp5, 5, PROT_READ | PROT_EXEC) || !poke_live(site, jmp2, 2))
			return 0;
	} else {
		/* slot and site in one write, with the bytes between them as
		 * they are (a rel8 apart: at most 134 bytes); the μprocess runs
		 * none of them meanwhile, as it is here */
		uintptr_t lo = slot < site ? slot : site,
			  hi = slot + 5 > site + 2 ? slot + 5 : site + 2;
		uint8_t both[160];
		memcpy(both, (const void *)lo, hi - lo);
		memcpy(both + (slot - lo), jmp5, 5);
		memcpy(both + (site - lo), jmp2, 2);
		if (!kr__rw_poke(lo, both, hi - lo, PROT_READ | PROT_EXEC))
			return 0;
	}
	rw->slots[rw->nslots++] = slot;
	up->rewritten++;
	return 1;
}

/* ---- cpuid ----
 *
 * A cpuid instruction exits to the hypervisor in a virtual machine (some
 * microseconds), and a C library's start-up runs dozens (ld.so learns the
 * processor's features and caches).  They cannot trap, so karui finds
 * them ahead of time: once per file, it decodes every function of the
 * μprocess's ld.so (or of a static program) and plans a slot for each
 * cpuid; each new μprocess's copy gets the plan before it runs.  The trampoline
 * calls kr__img_cpuid (gate.S, fast.c), which answers from the process's
 * table of results, asking the processor only the first time.  A cpuid
 * with no slot in reach becomes hlt and a nop (the same two bytes): in
 * user mode hlt raises #GP, whose SIGSEGV is answered from the same table
 * (uproc.c), a signal being cheaper than the hypervisor's exit.  Not ud2:
 * hypervisors intercept #UD, and it costs as much as cpuid. */

static int same_file(const struct kr__file_id *a, const struct kr__file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->mtime_ns == b->mtime_ns;
}

struct plan {
	struct plan *next;
	struct kr__file_id file;
	struct plan_rec {
		uint32_t n;
		uint32_t site[64], slot[64]; /* offsets from the image's base */
	} r;
};
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan *plans;

static struct plan *make_plan(const struct kr__elf_img *img)
{
	struct plan *pl = calloc(1, sizeof *pl);
	struct kr__rw *tmp = calloc(1, sizeof *tmp);
	struct eh e;
	if (!pl || !tmp || !eh_table(img->base, &e)) {
		free(tmp);
		return pl;
	}
	/* cpuid's bytes (0f a2), found in one pass over the text by the
	 * rarer second one; each function that holds some is decoded once,
	 * whole */
	long last = -1;
	for (const uint8_t *a = (const uint8_t *)img->xlo + 1, *end = (const uint8_t *)img->xhi;
	     pl->r.n < 64 && a < end && (a = memchr(a, 0xa2, (size_t)(end - a))); a++) {
		const uint8_t *b = a - 1;
		struct range f;
		long i;
		if (*b != 0x0f || (i = fn_at(&e, (uintptr_t)b, 2, &f)) < 0 || i == last ||
		    f.lo < img->xlo || f.hi > img->xhi)
			continue;
		last = i;
		struct kr__insn in;
		for (uintptr_t p = f.lo; p < f.hi && pl->r.n < 64; p += in.len) {
			if (!kr__x86_decode((const uint8_t *)p, f.hi - p, &in) || !in.len)
				break; /* leave the rest of this function alone */
			if (in.kind != KR_INSN_CPUID)
				continue;
			uintptr_t slot = find_slot(tmp, img->base, p);
			if (!slot || slot < img->xlo || slot + 5 > img->xhi || !slot_room(tmp))
				slot = 0; /* no room for a jump: a fault instead */
			else
				tmp->slots[tmp->nslots++] = slot;
			pl->r.site[pl->r.n] = (uint32_t)(p - img->base);
			pl->r.slot[pl->r.n++] = slot ? (uint32_t)(slot - img->base) : 0;
		}
	}
	kr__rw_del(tmp);
	return pl;
}

/* An earlier process's plan for img's file (cache.c), if every entry
 * still stands: a cpuid at each site, padding in each slot. */
static struct plan *cached_plan(const struct kr__elf_img *img)
{
	char name[64];
	uint64_t key[3];
	struct plan *pl = calloc(1, sizeof *pl);
	kr__cache_file(name, key, "plan", &img->file);
	if (!pl || kr__cache_read(name, key, &pl->r, sizeof pl->r) != (long)sizeof pl->r ||
	    pl->r.n > 64)
		goto stranger;
	for (unsigned i = 0; i < pl->r.n; i++) {
		uintptr_t site = img->base + pl->r.site[i], slot = img->base + pl->r.slot[i];
		if (site < img->xlo || site + 2 > img->xhi ||
		    memcmp((const void *)site, "\x0f\xa2", 2) ||
		    (pl->r.slot[i] && (slot < img->xlo || slot + 5 > img->xhi ||
				       !is_padding((const uint8_t *)slot, 5))))
			goto stranger;
	}
	return pl;
stranger:
	free(pl);
	return NULL;
}

/* Give a new μprocess's image its cpuid trampolines, before it runs: the
 * file's plan, made once per process, or by an earlier one. */
static void prepare_image(struct kr_uproc *up, const struct kr__elf_img *img)
{
	if (!img->xlo)
		return;
	pthread_mutex_lock(&plans_lock);
	struct plan *pl = plans;
	while (pl && !same_file(&pl->file, &img->file))
		pl = pl->next;
	if (!pl) {
		int made = 0;
		if (!img->file.ino || !(pl = cached_plan(img)))
			made = (pl = make_plan(img)) != NULL;
		if (pl) {
			pl->file = img->file;
			pl->next = plans;
			plans = pl;
		}
		if (made && img->file.ino) {
			char name[64];
			uint64_t key[3];
			kr__cache_file(name, key, "plan", &img->file);
			kr__cache_write(name, key, &pl->r, sizeof pl->r);
		}
	}
	pthread_mutex_unlock(&plans_lock);
	if (!pl || !pl->r.n)
		return;
	if (!up->rw && !(up->rw = calloc(1, sizeof *up->rw)))
		return;
	struct kr__rw *rw = up->rw;
	struct tramppage *sp = tramp_page(up, rw, img->base, img->base + pl->r.site[0]);
	if (!sp || sp->used + pl->r.n * TRAMP > PG)
		return;
	/* the μprocess has not run: plain writes, its text writable meanwhile
	 * (the whole mapping, so that it is not split) */
	if (mprotect((void *)sp->page, PG, PROT_READ | PROT_WRITE))
		return;
	if (mprotect((void *)img->xlo, img->xhi - img->xlo, PROT_READ | PROT_WRITE)) {
		mprotect((void *)sp->page, PG, PROT_READ | PROT_EXEC);
		return;
	}
	for (unsigned i = 0; i < pl->r.n; i++) {
		uintptr_t site = img->base + pl->r.site[i], slot = img->base + pl->r.slot[i];
		uintptr_t tramp = sp->page + sp->used;
		if (!pl->r.slot[i] || !near(sp->page, slot) || !slot_room(rw)) {
			if (rw->ntrap < sizeof rw->trap / sizeof *rw->trap) {
				memcpy((void *)site, "\xf4\x90", 2); /* hlt: #GP */
				rw->trap[rw->ntrap++] = site;
				up->cpuid_sites++;
			}
			continue;
		}
		uint8_t jmp5[5], jmp2[2];
		tramp_code((uint8_t *)tramp, sp->page, tramp, site, 2, NULL);
		sp->used += TRAMP;
		jumps(jmp5, jmp2, site, slot, tramp);
		memcpy((void *)slot, jmp5, 5);
		memcpy((void *)site, jmp2, 2);
		rw->slots[rw->nslots++] = slot;
		up->cpuid_sites++;
	}
	mprotect((void *)img->xlo, img->xhi - img->xlo, PROT_READ | PROT_EXEC);
	mprotect((void *)sp->page, PG, PROT_READ | PROT_EXEC);
}

int kr__rw_cpuid_trap(struct kr_uproc *up, uintptr_t at)
{
	for (unsigned i = 0; up->rw && i < up->rw->ntrap; i++)
		if (up->rw->trap[i] == at)
			return 1;
	return 0;
}

void kr__rw_prepare(struct kr_uproc *up, const struct kr__elf_load *ld)
{
	prepare_image(up, ld->interp.entry ? &ld->interp : &ld->prog);
}

/* ---- ld.so's code, given back at the handover ----
 *
 * ld.so's cpuid sites and its hot call sites run while it loads the
 * program and its libraries; once it has handed over to the program
 * (the handover, uproc.c), its code runs little (lazy binding, a dlopen)
 * and makes few system calls.  The pages of it that karui patched are
 * the μprocess's own copies all the same (20 KiB for a hello program:
 * its cpuid sites, its mmap, openat, read and close).  At the handover
 * they are dropped (MADV_DONTNEED on the private file mapping): the
 * pages are the file's again, shared with every process, and what karui
 * patched there is forgotten: a site there traps from then on, and a
 * cpuid there asks the processor.  If no site or slot is left that jumps
 * to a trampoline (a hello program's case), the trampoline pages go too.
 * Only while the μprocess has one thread (a constructor may have started
 * others, which might be in a trampoline's way between a site and its
 * slot); not for a program without ld.so, whose own code held its cpuid
 * sites. */
static int in(uintptr_t a, uintptr_t lo, uintptr_t hi) { return a >= lo && a < hi; }

void kr__rw_handover(struct kr_uproc *up)
{
	const struct kr__elf_img *ld = &up->ld.interp;
	struct kr__rw *rw = up->rw;
	if (!rw || !ld->entry || !ld->xlo || __atomic_load_n(&up->nthreads, __ATOMIC_RELAXED) > 1)
		return;
	pthread_mutex_lock(&up->mlock);
	uintptr_t lo = UINTPTR_MAX, hi = 0;
#define SPAN(a, n)                                                                     \
	do {                                                                           \
		if (in(a, ld->xlo, ld->xhi)) {                                         \
			lo = (a) < lo ? (a) : lo;                                      \
			hi = (a) + (n) > hi ? (a) + (n) : hi;                          \
		}                                                                      \
	} while (0)
	for (unsigned i = 0; rw->tab && i <= rw->tab->mask; i++)
		if (rw->tab->e[i].at && rw->tab->e[i].traps == UINT32_MAX)
			SPAN(rw->tab->e[i].at - 5, 7); /* the mov before it too */
	for (unsigned i = 0; i < rw->nslots; i++)
		SPAN(rw->slots[i], 5);
	for (unsigned i = 0; i < rw->ntrap; i++)
		SPAN(rw->trap[i], 2);
#undef SPAN
	lo = lo < ld->xlo ? ld->xlo : lo & ~(PG - 1);
	hi = hi > ld->xhi ? ld->xhi : (hi + PG - 1) & ~(PG - 1);
	if (lo < hi && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0) {
		for (unsigned i = 0; i < rw->nslots;)
			if (in(rw->slots[i], lo, hi))
				rw->slots[i] = rw->slots[--rw->nslots];
			else
				i++;
		for (unsigned i = 0; i < rw->ntrap;)
			if (in(rw->trap[i], lo, hi))
				rw->trap[i] = rw->trap[--rw->ntrap];
			else
				i++;
	}
	/* no jump left to a trampoline: the pages go too (a later rewrite
	 * maps one again) */
	for (unsigned i = 0; !rw->nslots && i < rw->npages; i++) {
		munmap((void *)rw->pages[i].page, PG);
		kr__uproc_unmapped(up, rw->pages[i].page, rw->pages[i].page + PG);
	}
	if (!rw->nslots)
		rw->npages = 0;
	pthread_mutex_unlock(&up->mlock);
}


/* ---- sites known per file ----
 *
 * Most of a program's hot sites are its C library's and its ld.so's, the
 * same in every μprocess.  A site rewritten in one image of a file is
 * recorded (its offset from the image's base) and rewritten in every later
 * image of that file at its first trap there, not its second, if that
 * costs no page: when the μprocess already has its own copy of the page
 * (another site or slot of it there).  Elsewhere a known site waits for
 * its second trap like any other: the known sites are every program's
 * that ran with this C library (the cache below), most of them called
 * once by a given program, and each page holding one would be copied into
 * every μprocess (a hello program's image held five such pages of libc's
 * code, 20 KiB, where its own hot calls need one; with every known site
 * rewritten at once, 24 pages), for one trap saved per site.  Not at the
 * mapping either: ld.so has not mapped the rest
 * of the image (its unwind table) by then; at a trap from its code it has.  A file is known
 * by device, inode and modification time.  What a process learnt is
 * written at the end of the μprocess that learnt it, and a later process
 * starts from it (cache.c), as it does from ld.so's cpuid plan. */

#define KNOWN_MAX 512
struct known {
	struct known *next;
	struct kr__file_id id;
	unsigned n, cap;
	int dirty;          /* learnt here since it was last written */
	uint32_t *off;
};
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static struct known *knowns;
static int knowns_dirty;

/* The record of a file (known_lock held): found, or made with what an
 * earlier process wrote of it (cache.c; seed checks each site); NULL: out
 * of memory. */
static struct known *known_of(const struct kr__file_id *file)
{
	struct known *k = knowns;
	while (k && !same_file(&k->id, file))
		k = k->next;
	if (k || !(k = calloc(1, sizeof *k)))
		return k;
	k->id = *file;
	k->next = knowns;
	knowns = k;
	char name[64];
	uint64_t key[3];
	uint32_t *off = malloc(KNOWN_MAX * sizeof *off);
	kr__cache_file(name, key, "sites", file);
	long n = off ? kr__cache_read(name, key, off, KNOWN_MAX * sizeof *off) : -1;
	if (n > 0 && n % (long)sizeof *off == 0) {
		k->off = off;
		k->n = k->cap = (unsigned)(n / (long)sizeof *off);
	} else {
		free(off);
	}
	return k;
}

static void known_add(const struct kr__xmap *xm, uintptr_t site)
{
	if (!xm->file.ino)
		return;
	uint32_t off = (uint32_t)(site - xm->base);
	pthread_mutex_lock(&known_lock);
	struct known *k = known_of(&xm->file);
	unsigned i = 0;
	while (k && i < k->n && k->off[i] != off)
		i++;
	if (k && i == k->n && k->n < KNOWN_MAX) {
		if (k->n == k->cap) {
			unsigned cap = k->cap < 16 ? 32 : 2 * k->cap;
			uint32_t *n = realloc(k->off, cap * sizeof *n);
			if (n) {
				k->off = n;
				k->cap = cap;
			}
		}
		if (k->n < k->cap) {
			k->off[k->n++] = off;
			k->dirty = 1;
			__atomic_store_n(&knowns_dirty, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&known_lock);
}

void kr__rw_save(void)
{
	if (!__atomic_load_n(&knowns_dirty, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&known_lock);
	__atomic_store_n(&knowns_dirty, 0, __ATOMIC_RELAXED);
	for (struct known *k = knowns; k; k = k->next) {
		if (!k->dirty)
			continue;
		k->dirty = 0;
		char name[64];
		uint64_t key[3];
		kr__cache_file(name, key, "sites", &k->id);
		kr__cache_write(name, key, k->off, k->n * sizeof *k->off);
	}
	pthread_mutex_unlock(&known_lock);
}

/* The record of site in t, or where it would go; NULL: t is full. */
static struct site *site_slot(struct sitetab *t, uintptr_t site)
{
	unsigned h = site_hash(site, t->mask);
	for (unsigned k = 0; k <= t->mask; k++, h = (h + 1) & t->mask)
		if (!t->e[h].at || t->e[h].at == site)
			return &t->e[h];
	return NULL;
}

/* rw's table, twice as big (or made): 0 if it cannot grow. */
static int sites_grow(struct kr__rw *rw)
{
	struct sitetab *t = rw->tab;
	unsigned n = t ? 2 * (t->mask + 1) : 32;
	struct sitetab *nt = n <= SITES_MAX ? calloc(1, sizeof *nt + n * sizeof *nt->e) : NULL;
	if (!nt)
		return 0;
	nt->mask = n - 1;
	for (unsigned i = 0; t && i <= t->mask; i++)
		if (t->e[i].at)
			*site_slot(nt, t->e[i].at) = t->e[i];
	nt->old = t;
	__atomic_store_n(&rw->tab, nt, __ATOMIC_RELEASE); /* kr__rw_patched */
	return 1;
}

/* The record of site in rw's table, made if need be; NULL: the table is full. */
static struct site *site_entry(struct kr__rw *rw, uintptr_t site)
{
	struct sitetab *t = rw->tab;
	struct site *s = t ? site_slot(t, site) : NULL;
	if (s && s->at == site)
		return s;
	if ((!t || 4 * (rw->nsite + 1) > 3 * (t->mask + 1)) && sites_grow(rw))
		s = site_slot(t = rw->tab, site);
	if (!s)
		return NULL;
	rw->nsite++;
	__atomic_store_n(&s->at, site, __ATOMIC_RELEASE); /* kr__rw_patched */
	return s;
}

/* Is site one of the known sites of xm's file? */
static int known_has(const struct kr__xmap *xm, uintptr_t site)
{
	if (!xm->file.ino)
		return 0;
	uint32_t off = (uint32_t)(site - xm->base);
	pthread_mutex_lock(&known_lock);
	struct known *k = known_of(&xm->file);
	unsigned i = 0;
	while (k && i < k->n && k->off[i] != off)
		i++;
	int has = k && i < k->n;
	pthread_mutex_unlock(&known_lock);
	return has;
}

/* Has the μprocess its own copy of the page of site already: a slot or a
 * cpuid site of it there? */
static int own_page(const struct kr__rw *rw, uintptr_t site)
{
	uintptr_t pg = site & ~(PG - 1);
	for (unsigned i = 0; i < rw->nslots; i++)
		if ((rw->slots[i] & ~(PG - 1)) == pg || ((rw->slots[i] + 4) & ~(PG - 1)) == pg)
			return 1;
	for (unsigned i = 0; i < rw->ntrap; i++)
		if ((rw->trap[i] & ~(PG - 1)) == pg)
			return 1;
	return 0;
}

void kr__rw_trapped(struct kr_uproc *up, uintptr_t site, int threaded)
{
	pthread_mutex_lock(&up->mlock); /* against its other threads */
	struct kr__rw *rw = up->rw;
	if (!rw && (rw = calloc(1, sizeof *rw)))
		__atomic_store_n(&up->rw, rw, __ATOMIC_RELEASE);
	struct site *s = rw ? site_entry(rw, site) : NULL;
	if (s && s->traps != UINT32_MAX) {
		struct kr__xmap *xm = xmap_of(up, site);
		int own = own_page(rw, site), known = xm && own && known_has(xm, site);
		if (known || ++s->traps >= (own ? HOT : HOT_PAGE)) {
			s->traps = UINT32_MAX; /* rewritten, or given up on */
			if (rewrite(up, rw, site, threaded) && !known && (xm = xmap_of(up, site)))
				known_add(xm, site);
		}
	}
	pthread_mutex_unlock(&up->mlock);
}
