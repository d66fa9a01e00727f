/*
 * karui L2 — stacks.
 *
 * A microprocess lives in one region: its stack, with its record (struct
 * kr_mp) at the top, and, unless turned off, a guard of KR_STACK_GUARD
 * bytes below it that turns an overflow into a SIGSEGV instead of silent
 * corruption (seed 000's red zone).  Regions of one size class are carved
 * one after another from large reservations (mmap'ed MAP_NORESERVE, so
 * untouched pages cost nothing, each one twice as long as the class's
 * last, up to CHUNK_MAX), never one mmap per stack.
 *
 * Guards.  Where the kernel has MADV_GUARD_INSTALL (Linux >= 6.13, probed
 * by kr__stacks_init), a guard is a run of page-table markers inside the
 * reservation's one mapping: guarded stacks cost no mapping, and adjacent
 * reservations merge, so a process keeps a handful of mappings however
 * many stacks it has.  Elsewhere a guard is mprotect(PROT_NONE), which
 * splits the mapping in three; Linux caps the mappings of a process
 * (vm.max_map_count), so guarded stacks stop near max_map_count / 2 and
 * kr_mp_create returns ENOMEM (docs/limits.md).  The probe checks that the
 * kernel refuses to read a guarded page, as an emulator (qemu-user) may
 * accept the advice and ignore it.  Fresh regions come in batches, and
 * where process_madvise takes the advice for the calling process (Linux
 * >= 6.15, probed too) one call guards the whole batch instead of one
 * madvise per stack.  A guard is 64 KiB rather than a page
 * because GCC does not probe a large frame unless the program is built
 * with -fstack-clash-protection: a frame larger than the guard can step
 * over it onto the record of the stack below.
 *
 * Size classes.  A requested size is rounded up to its class
 * (kr__stack_class_size): whole pages up to 32 KiB, then quarter steps of
 * each power of two, so KR_STACK_MIN..KR_STACK_MAX make NCLS classes, with
 * and without a guard.  A class is created on first use and kept until
 * kr_fini: a program may use any number of sizes.
 *
 * Three tiers, fastest first:
 *   per-VP cache   a free list per class in KR_STACK_SLOTS slots, touched
 *                  only by its VP: the create/join fast path, no lock, no
 *                  system call.  Bounded (kr_config.stack_cache); it trades
 *                  with the pool in batches of up to BATCH under one lock.
 *   pool           per class, under its mutex: a region's number (in
 *                  carving order, kept in its record) indexes a block of 64
 *                  neighbours with two bitmaps, `dirty` (free, memory kept)
 *                  and `clean` (free, memory returned, address range
 *                  kept), and a bit per block says which blocks have a bit
 *                  set.  Gets take the lowest-numbered dirty regions, then
 *                  clean ones: reuse stays in the lowest addresses, in
 *                  order, so the page walks of a large working set stay
 *                  cheap and the regions left unused form runs at the top.
 *   reservation    fresh regions, a guard installed on each.
 * The bitmaps grow when carving, where ENOMEM can be reported, so freeing
 * a stack never allocates and never fails, even when the process is out
 * of mappings or memory.
 * Rejected: LIFO arrays of free regions (reuse order drifted with each
 * generation of microprocesses, and with it the cost of the TLB misses,
 * run after run; and their growth when freeing could fail).
 *
 * Returning memory.  Only idle VPs return memory (kr_sched_park_until calls
 * kr__stacks_trim), at most once per TRIM_NS, and only as much as stayed
 * unused for a whole period: `low` is the fewest dirty regions a class had
 * since its last trim, and that many of its highest-numbered dirty
 * regions are madvise(MADV_DONTNEED)'d, one call per run of neighbours
 * (guards inside a run are kept: the kernel keeps guard markers and
 * PROT_NONE mappings across MADV_DONTNEED).  While some memory is kept,
 * an idle VP sleeps no longer than the next trim, so an idle process
 * returns it all within two periods.  A free record keeps its
 * generation, or is zeroed, so a stale handle is still recognised (life.c's
 * generations).
 * Rejected: returning memory whenever a VP went idle, or past a count of
 * kept stacks (a system call and a TLB shoot-down per few stacks, and page
 * faults to touch them again, in a create/join storm whose VPs go idle for
 * moments); returning it from busy VPs (a busy process reuses it).
 *
 * Overflow report.  If SIGSEGV has its default action at kr__stacks_init,
 * karui installs a handler (SA_ONSTACK: it runs on the VP's alternate
 * signal stack) that names the microprocess whose guard was hit, and then
 * lets the fault kill the process as it would have (SA_RESETHAND: the
 * faulting instruction runs again with the default action).  An
 * application's own handler, installed before kr_init or after, is left
 * alone and not chained to: karui cannot know what it expects.
 *
 * Locking: S.lock (class creation, the cache registry) is never taken
 * with a class's lock held, nor the other way round.  Reservations are
 * unmapped only by kr_fini.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define KR_HAVE_VALGRIND 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
/* the calling thread, for process_madvise (Linux >= 6.15) */
#define KR_PIDFD_SELF (-10000)

/* classes: 8 of whole pages, then 4 per power of two up to KR_STACK_MAX */
#define NCLS 68
#define CHUNK_MIN ((size_t)4 << 20)
#define CHUNK_MAX ((size_t)1 << 30)
#define TRIM_NS 1000000000ull
enum { BATCH = 32 };
_Static_assert(sizeof(kr_mp) + 63 < 4096, "a record lies in its region's last 4 KiB");
_Static_assert(KR_STACK_MAX == (size_t)4096 << 18, "NCLS covers KR_STACK_MAX");

struct kr_stack_chunk {
	struct kr_stack_chunk *next;
	void *base;
	size_t len;
};

static struct {
	pthread_mutex_t lock;   /* class creation, the cache registry */
	struct kr_stack_class *cls[2][NCLS];    /* [guard][index], __atomic */
	struct kr_stack_class *used[2 * NCLS];  /* in creation order */
	unsigned nused;                         /* __atomic */
	struct kr_stack_cache *caches;  /* every VP's, for statistics */
	size_t page, guard, cache_max;
	int inline_guards;              /* MADV_GUARD_INSTALL works */
	int batch_guards;               /* and process_madvise takes it for us */
	int handler;                    /* our SIGSEGV handler was installed */
	unsigned long mapped, trimmed, trim_calls;      /* __atomic */
	uint64_t trim_at;               /* next trim, kr_now() time: __atomic */
	uint32_t trimmer;               /* a VP is trimming: __atomic */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static kr_mp *record_of(const struct kr_stack_class *c, unsigned char *base)
{
	uintptr_t top = (uintptr_t)base + c->size - sizeof(kr_mp);
	return (kr_mp *)(top & ~(uintptr_t)63);
}

/* The index of a class size (kr__stack_class_size's result). */
static unsigned class_index(size_t size)
{
	size_t p = size >> 12;
	if (p <= 8)
		return (unsigned)p - 1;
	unsigned e = 63 - (unsigned)__builtin_clzl(p - 1); /* 2^e < p <= 2^(e+1) */
	return 8 + 4 * (e - 3) + (unsigned)(p >> (e - 2)) - 5;
}

/* ---------------- the overflow report ---------------- */

static char *put_num(char *p, unsigned long v, unsigned base)
{
	char t[24];
	int n = 0;
	do
		t[n++] = "0123456789abcdef"[v % base];
	while ((v /= base) != 0);
	while (n)
		*p++ = t[--n];
	return p;
}

static char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

/* Async-signal-safe: a TLS read, the record's fields, write(2).  Returns
 * with the default action in place (SA_RESETHAND), so the faulting
 * instruction kills the process as if karui had no handler. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	kr_mp *mp = kr__cur();
	uintptr_t a = (uintptr_t)si->si_addr;
	if (si->si_code > 0 && mp && mp->cls && mp->cls->guard &&
	    a < (uintptr_t)mp->stack_lo && (uintptr_t)mp->stack_lo - a <= S.guard) {
		char m[160], *p = put_str(m, "karui: microprocess ");
		p = put_num(p, mp->id, 10);
		p = put_str(p, " overflowed its stack (");
		p = put_num(p, mp->cls->size >> 10, 10);
		p = put_str(p, " KiB) at 0x");
		p = put_num(p, a, 16);
		*p++ = '\n';
		ssize_t r = write(STDERR_FILENO, m, (size_t)(p - m));
		(void)r;
	}
	if (si->si_code <= 0) /* sent, not a fault: it would not come again */
		raise(sig);
}

static void handler_install(void)
{
	struct sigaction old, sa = {.sa_sigaction = on_fault,
				    .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND};
	sigemptyset(&sa.sa_mask);
	S.handler = sigaction(SIGSEGV, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL && sigaction(SIGSEGV, &sa, NULL) == 0;
}

static void handler_remove(void)
{
	struct sigaction cur, dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	if (S.handler && sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == on_fault)
		sigaction(SIGSEGV, &dfl, NULL);
	S.handler = 0;
}

/* ---------------- set-up ---------------- */

/* Does MADV_GUARD_INSTALL work (inline_guards), and does process_madvise
 * install guards in our own address space, so that one call guards a
 * whole batch of fresh regions (batch_guards)?  A guard must then refuse
 * to be read: MADV_POPULATE_READ of it fails with EFAULT, where an
 * emulator (qemu-user) that accepts the advice and ignores it would read a
 * zero page. */
static int refuses_reads(void *p)
{
	return madvise(p, S.page, MADV_POPULATE_READ) < 0 && errno == EFAULT;
}

static void guards_probe(void)
{
	unsigned char *p = mmap(NULL, 2 * S.page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return;
	struct iovec v[2] = {{p, S.page}, {p + S.page, S.page}};
	long n = syscall(SYS_process_madvise, KR_PIDFD_SELF, v, 2, MADV_GUARD_INSTALL, 0);
	int batch = n == (long)(2 * S.page) && refuses_reads(p + S.page);
	/* batches need single guards too (a batch's last region, a failed
	 * batch call); on p, guarded already when batch, it changes nothing */
	S.inline_guards = madvise(p, S.page, MADV_GUARD_INSTALL) == 0 && (batch || refuses_reads(p));
	S.batch_guards = S.inline_guards && batch;
	munmap(p, 2 * S.page);
}

int kr__stacks_init(size_t per_vp_cache)
{
	S.page = (size_t)sysconf(_SC_PAGESIZE);
	S.guard = S.page > KR_STACK_GUARD ? S.page : KR_STACK_GUARD;
	S.cache_max = per_vp_cache;
	S.inline_guards = S.batch_guards = 0;
	guards_probe();
	__atomic_store_n(&S.trim_at, kr_now() + TRIM_NS, __ATOMIC_RELAXED);
	handler_install();
	return 0;
}

void kr__stacks_fini(void)
{
	handler_remove();
	pthread_mutex_lock(&S.lock);
	for (unsigned i = 0; i < S.nused; i++) {
		struct kr_stack_class *c = S.used[i];
		for (struct kr_stack_chunk *h = c->chunks, *n; h; h = n) {
			n = h->next;
			munmap(h->base, h->len);
			free(h);
		}
		free(c->blk);
		free(c->any_dirty);
		free(c->any_clean);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
	memset(S.cls, 0, sizeof S.cls);
	S.nused = 0;
	S.mapped = S.trimmed = S.trim_calls = 0;
	pthread_mutex_unlock(&S.lock);
}

static struct kr_stack_class *class_get(size_t size, int guard)
{
	struct kr_stack_class **slot = &S.cls[guard][class_index(size)];
	struct kr_stack_class *c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (c)
		return c;
	pthread_mutex_lock(&S.lock);
	if (!(c = *slot) && (c = calloc(1, sizeof *c))) {
		c->size = size;
		c->stride = size + (guard ? S.guard : 0);
		c->guard = guard;
		c->chunk = CHUNK_MIN;
		pthread_mutex_init(&c->lock, NULL);
		S.used[S.nused] = c;
		__atomic_store_n(&S.nused, S.nused + 1, __ATOMIC_RELEASE);
		__atomic_store_n(slot, c, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&S.lock);
	return c;
}

/* ---------------- the bitmaps (c->lock held) ---------------- */

static unsigned char *base_of(const struct kr_stack_class *c, uint32_t r)
{
	return c->blk[r >> 6].base + (r & 63) * c->stride;
}

/* Up to `want` of the lowest-numbered free regions of one kind. */
static size_t take(struct kr_stack_class *c, int clean, uint32_t *r, size_t want)
{
	uint64_t *any = clean ? c->any_clean : c->any_dirty;
	size_t *low = clean ? &c->low_clean : &c->low_dirty, n = 0;
	size_t words = (c->nblk + 63) >> 6;
	for (size_t w = *low; w < words && n < want; *low = w) {
		if (!any[w]) {
			w++;
			continue;
		}
		size_t b = w << 6 | (size_t)__builtin_ctzll(any[w]);
		uint64_t *m = clean ? &c->blk[b].clean : &c->blk[b].dirty;
		for (; *m && n < want; *m &= *m - 1)
			r[n++] = (uint32_t)(b << 6 | (size_t)__builtin_ctzll(*m));
		if (!*m)
			any[w] &= ~(1ull << (b & 63));
	}
	return n;
}

static void mark(struct kr_stack_class *c, int clean, uint32_t r)
{
	size_t b = r >> 6, w = b >> 6;
	*(clean ? &c->blk[b].clean : &c->blk[b].dirty) |= 1ull << (r & 63);
	(clean ? c->any_clean : c->any_dirty)[w] |= 1ull << (b & 63);
	size_t *low = clean ? &c->low_clean : &c->low_dirty;
	if (w < *low)
		*low = w;
}

/* ---------------- carving (c->lock held) ---------------- */

/* Room for block b. */
static int blocks_grow(struct kr_stack_class *c, size_t b)
{
	if (b < c->capblk)
		return 1;
	size_t cap = c->capblk ? c->capblk * 2 : 64, words = cap >> 6, old = c->capblk >> 6;
	struct kr_stack_block *k = realloc(c->blk, cap * sizeof *k);
	if (!k)
		return 0;
	c->blk = k;
	uint64_t *d = realloc(c->any_dirty, words * sizeof *d);
	if (!d)
		return 0;
	c->any_dirty = d;
	uint64_t *l = realloc(c->any_clean, words * sizeof *l);
	if (!l)
		return 0;
	c->any_clean = l;
	memset(d + old, 0, (words - old) * sizeof *d);
	memset(l + old, 0, (words - old) * sizeof *l);
	c->capblk = cap;
	return 1;
}

static int reserve(struct kr_stack_class *c)
{
	size_t len = c->chunk >= c->stride ? c->chunk / c->stride * c->stride : c->stride;
	struct kr_stack_chunk *h = malloc(sizeof *h);
	if (!h)
		return 0;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(h);
		return 0;
	}
	/* 4 KiB stacks in a 2 MiB huge page would each cost 2 MiB. */
	madvise(p, len, MADV_NOHUGEPAGE);
	h->base = p;
	h->len = len;
	h->next = c->chunks;
	c->chunks = h;
	c->cur = p;
	c->end = (unsigned char *)p + len;
	if (c->chunk < CHUNK_MAX)
		c->chunk *= 2;
	/* a block holds neighbours only: the next one starts here */
	c->next = (c->next + 63) & ~(uint32_t)63;
	return 1;
}

/* Install the guards of up to n regions from c->cur on, within the
 * reservation: with one process_madvise where it can, else one region's
 * guard.  How many regions are guarded now (0: ENOMEM).  A guard that a
 * failed batch call left installed is installed again, which is no
 * change. */
static size_t guard_run(const struct kr_stack_class *c, size_t g, size_t n)
{
	size_t left = (size_t)(c->end - c->cur) / c->stride;
	if (n > left)
		n = left;
	if (n > 1 && S.batch_guards) {
		struct iovec v[1 + BATCH];
		if (n > 1 + BATCH)
			n = 1 + BATCH;
		for (size_t i = 0; i < n; i++)
			v[i] = (struct iovec){c->cur + i * c->stride, g};
		if (syscall(SYS_process_madvise, KR_PIDFD_SELF, v, n, MADV_GUARD_INSTALL, 0) ==
		    (long)(n * g))
			return n;
	}
	return (S.inline_guards ? madvise(c->cur, g, MADV_GUARD_INSTALL)
				: mprotect(c->cur, g, PROT_NONE)) == 0;
}

/* Up to n fresh regions; how many (0: ENOMEM, out of memory or mappings). */
static size_t carve(struct kr_stack_class *c, uint32_t *r, size_t n)
{
	size_t g = c->stride - c->size, made = 0, guarded = 0;
	for (; made < n; made++) {
		if (!c->cur || (size_t)(c->end - c->cur) < c->stride) {
			if (made || !reserve(c))
				break; /* a batch's extras take no new reservation */
		}
		uint32_t x = c->next;
		if (x == UINT32_MAX || !blocks_grow(c, x >> 6))
			break;
		unsigned char *base = c->cur + g;
		if (g && !guarded && !(guarded = guard_run(c, g, n - made)))
			break;
		if (g)
			guarded--;
		if (!(x & 63)) {
			c->blk[x >> 6] = (struct kr_stack_block){.base = base};
			c->nblk = (x >> 6) + 1;
		}
		c->cur += c->stride;
		c->next = x + 1;
		r[made] = x;
#ifdef KR_HAVE_VALGRIND
		VALGRIND_STACK_REGISTER(base, base + c->size);
#endif
	}
	c->carved += made;
	__atomic_fetch_add(&S.mapped, made, __ATOMIC_RELAXED);
	return made;
}

/* ---------------- get and put ---------------- */

static kr_mp *fresh(const struct kr_stack_class *c, unsigned char *base, uint32_t r)
{
	kr_mp *mp = record_of(c, base);
	memset(mp, 0, sizeof *mp);
	mp->stack_lo = base;
	mp->stack_size = (size_t)((unsigned char *)mp - base);
	mp->cls = c;
	mp->region = r;
	return mp;
}

/* The cache slot of class c: its own, a free one, or an empty one other
 * than slot 0 (the fast paths' class); -1 when none is. */
static int slot_of(struct kr_stack_cache *k, const struct kr_stack_class *c)
{
	int empty = -1;
	for (unsigned i = 0; i < KR_STACK_SLOTS; i++) {
		if (!k->slot[i].cls)
			k->slot[i].cls = c;
		if (k->slot[i].cls == c)
			return (int)i;
		if (i && empty < 0 && !k->slot[i].head)
			empty = (int)i;
	}
	if (empty >= 0)
		k->slot[empty].cls = c;
	return empty;
}

kr_mp *kr__stack_get(struct kr_stack_cache *k, size_t size, int guard)
{
	size = kr__stack_class_size(size);
	for (unsigned i = 0; i < KR_STACK_SLOTS && k->slot[i].cls; i++) {
		const struct kr_stack_class *c = k->slot[i].cls;
		if (c->size != size || c->guard != guard)
			continue;
		kr_mp *mp = k->slot[i].head;
		if (!mp)
			break;
		k->slot[i].head = mp->free_next;
		kr__stack_count(k, (int)i, -1);
#if defined(__SANITIZE_ADDRESS__)
		ASAN_UNPOISON_MEMORY_REGION(mp->stack_lo, mp->stack_size);
#endif
		mp->free_next = NULL;
		return mp;
	}
	struct kr_stack_class *c = class_get(size, guard);
	if (!c)
		return NULL;
	/* Stacks come up in a batch, to the cache, under one lock: dirty
	 * ones, else clean ones, else fresh ones. */
	int si = slot_of(k, c);
	size_t want = 1;
	if (si >= 0 && k->slot[si].n < k->max)
		want += k->max - k->slot[si].n < BATCH ? k->max - k->slot[si].n : BATCH;
	uint32_t r[1 + BATCH];
	unsigned char *b[1 + BATCH];
	pthread_mutex_lock(&c->lock);
	size_t n = take(c, 0, r, want);
	if (n) {
		__atomic_store_n(&c->ndirty, c->ndirty - n, __ATOMIC_RELAXED);
		if (c->ndirty < c->low)
			c->low = c->ndirty;
	} else if ((n = take(c, 1, r, want)) != 0) {
		c->nclean -= n;
	} else {
		/* A class's first fresh batches are small and double up to
		 * BATCH: a program that makes a few microprocesses does not
		 * write the records of 32 stacks it never uses. */
		n = carve(c, r, want < 1 + c->carved ? want : 1 + c->carved);
	}
	for (size_t i = 0; i < n; i++)
		b[i] = base_of(c, r[i]);
	pthread_mutex_unlock(&c->lock);
	if (!n)
		return NULL;
	for (size_t i = 1; i < n; i++) {
		kr_mp *mp = fresh(c, b[i], r[i]);
		mp->free_next = k->slot[si].head;
		k->slot[si].head = mp;
		kr__stack_count(k, si, 1);
	}
#if defined(__SANITIZE_ADDRESS__)
	ASAN_UNPOISON_MEMORY_REGION(b[0], c->size);
#endif
	return fresh(c, b[0], r[0]);
}

/* n regions back, dirty.  Their bits have room since they were carved. */
static void pool_put(struct kr_stack_class *c, const uint32_t *r, size_t n)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++)
		mark(c, 0, r[i]);
	__atomic_store_n(&c->ndirty, c->ndirty + n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
}

/* A full cache sends a batch down with the newcomer, under one lock. */
void kr__stack_put_slow(struct kr_stack_cache *k, kr_mp *mp)
{
	struct kr_stack_class *c = (struct kr_stack_class *)mp->cls;
	uint32_t r[1 + BATCH];
	size_t n = 0;
	int si = slot_of(k, c);
	if (si >= 0 && k->slot[si].n < k->max) {
		mp->free_next = k->slot[si].head;
		k->slot[si].head = mp;
		kr__stack_count(k, si, 1);
		return;
	}
	r[n++] = mp->region;
	for (; si >= 0 && n <= BATCH && k->slot[si].head; n++) {
		kr_mp *x = k->slot[si].head;
		k->slot[si].head = x->free_next;
		kr__stack_count(k, si, -1);
		r[n] = x->region;
	}
	pool_put(c, r, n);
}

/* ---------------- returning memory ---------------- */

/* The highest run of neighbouring dirty regions, at most k long, taken
 * out of the bitmap: its first (lowest) region and its length, 0 if none. */
static size_t top_run(struct kr_stack_class *c, size_t k, uint32_t *first)
{
	size_t w = (c->nblk + 63) >> 6, n = 0;
	while (w && !c->any_dirty[w - 1])
		w--;
	if (!w)
		return 0;
	size_t b = (w - 1) << 6 | (size_t)(63 - __builtin_clzll(c->any_dirty[w - 1]));
	unsigned bit = 63 - (unsigned)__builtin_clzll(c->blk[b].dirty);
	for (;;) {
		uint64_t *m = &c->blk[b].dirty;
		while (n < k && (*m >> bit & 1)) {
			*m &= ~(1ull << bit);
			*first = (uint32_t)(b << 6 | bit);
			n++;
			if (!bit--)
				break;
		}
		if (!*m)
			c->any_dirty[b >> 6] &= ~(1ull << (b & 63));
		/* on into the block below if the run reached its region 0 and
		 * that block's last region is its neighbour */
		if (n == k || (*first & 63) || !b ||
		    c->blk[b - 1].base + 64 * c->stride != c->blk[b].base ||
		    !(c->blk[b - 1].dirty >> 63))
			return n;
		b--;
		bit = 63;
	}
}

/* Return the memory of `low` dirty regions of c, the highest-numbered.
 * The madvise calls run with no lock held: a run is out of both bitmaps
 * meanwhile (`trimming`). */
static void trim_class(struct kr_stack_class *c)
{
	pthread_mutex_lock(&c->lock);
	size_t k = c->low, done = 0;
	unsigned long calls = 0;
	uint32_t first = 0;
	size_t n;
	while (done < k && (n = top_run(c, k - done, &first)) != 0) {
		__atomic_store_n(&c->ndirty, c->ndirty - n, __ATOMIC_RELAXED);
		c->trimming += n;
		unsigned char *lo = base_of(c, first);
		pthread_mutex_unlock(&c->lock);
		madvise(lo, (n - 1) * c->stride + c->size, MADV_DONTNEED);
		pthread_mutex_lock(&c->lock);
		for (size_t i = 0; i < n; i++)
			mark(c, 1, first + (uint32_t)i);
		c->trimming -= n;
		c->nclean += n;
		done += n;
		calls++;
	}
	c->low = c->ndirty;
	pthread_mutex_unlock(&c->lock);
	__atomic_fetch_add(&S.trimmed, done, __ATOMIC_RELAXED);
	__atomic_fetch_add(&S.trim_calls, calls, __ATOMIC_RELAXED);
}

uint64_t kr__stacks_trim(uint64_t now)
{
	uint64_t at = __atomic_load_n(&S.trim_at, __ATOMIC_RELAXED);
	unsigned n = __atomic_load_n(&S.nused, __ATOMIC_ACQUIRE);
	if (now >= at) {
		at = now + TRIM_NS;
		if (!__atomic_exchange_n(&S.trimmer, 1, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&S.trim_at, at, __ATOMIC_RELAXED);
			for (unsigned i = 0; i < n; i++)
				trim_class(S.used[i]);
			__atomic_store_n(&S.trimmer, 0, __ATOMIC_RELEASE);
		}
	}
	for (unsigned i = 0; i < n; i++)
		if (__atomic_load_n(&S.used[i]->ndirty, __ATOMIC_RELAXED))
			return at;
	return KR_FOREVER;
}

/* ---------------- caches and statistics ---------------- */

struct kr_stack_cache *kr__stack_cache_new(void)
{
	struct kr_stack_cache *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->max = S.cache_max;
	pthread_mutex_lock(&S.lock);
	k->next = S.caches;
	S.caches = k;
	pthread_mutex_unlock(&S.lock);
	return k;
}

void kr__stack_cache_free(struct kr_stack_cache *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&S.lock);
	for (struct kr_stack_cache **p = &S.caches; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	pthread_mutex_unlock(&S.lock);
	for (unsigned i = 0; i < KR_STACK_SLOTS && k->slot[i].cls; i++)
		for (kr_mp *mp = k->slot[i].head, *n; mp; mp = n) {
			n = mp->free_next;
			pool_put((struct kr_stack_class *)k->slot[i].cls, &mp->region, 1);
		}
	free(k);
}

/* Statistics read the per-VP counts without their owners' cooperation: a
 * snapshot that may be a moment old, never a torn number. */
void kr__stack_stats(kr_stats *st)
{
	unsigned long n = 0;
	pthread_mutex_lock(&S.lock);
	for (struct kr_stack_cache *k = S.caches; k; k = k->next)
		for (unsigned i = 0; i < KR_STACK_SLOTS; i++)
			n += __atomic_load_n(&k->slot[i].n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&S.lock);
	unsigned ncls = __atomic_load_n(&S.nused, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < ncls; i++) {
		struct kr_stack_class *c = S.used[i];
		pthread_mutex_lock(&c->lock);
		n += c->ndirty + c->nclean + c->trimming;
		pthread_mutex_unlock(&c->lock);
	}
	st->stacks_mapped = __atomic_load_n(&S.mapped, __ATOMIC_RELAXED);
	st->stacks_cached = n;
	st->stacks_trimmed = __atomic_load_n(&S.trimmed, __ATOMIC_RELAXED);
	st->stack_trim_calls = __atomic_load_n(&S.trim_calls, __ATOMIC_RELAXED);
	st->stack_guards_inline = S.inline_guards;
}
