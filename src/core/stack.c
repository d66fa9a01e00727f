/*
 * karui L2 — stacks.
 *
 * A microprocess lives in one region: its stack, with its record (struct
 * kr_mp) at the top, and, unless turned off, a guard page below it that
 * turns an overflow into a SIGSEGV instead of silent corruption (seed 000's
 * red zone).  Regions of one size class are carved one after another from
 * large reservations (mmap'ed MAP_NORESERVE, so untouched pages cost
 * nothing), never one mmap per stack.
 *
 * Three tiers, fastest first:
 *   per-VP cache   a free list per size class, touched only by its VP: the
 *                  create/join fast path, no lock, no system call.  Bounded
 *                  (kr_config.stack_cache); the surplus goes down a tier.
 *   global pool    per class, under a mutex, in two lists.  A stack that
 *                  enters it keeps its memory at first (`dirty`: reused
 *                  first, with no page fault); when a VP is about to sleep
 *                  (kr__stacks_trim), or past DIRTY_MAX, it is
 *                  madvise(MADV_DONTNEED)'d whole: its memory goes back to
 *                  the kernel and the address range stays for reuse
 *                  (`pool`).  Either way its record reads as ended, or
 *                  zeroed, so a stale handle is still recognised (mp.c's
 *                  generations).  Returning each stack
 *                  at once cost a system call per microprocess past the
 *                  caches (50,835 madvise calls in one create_batch run
 *                  of the benchmark; 835 now).
 *   reservation    fresh regions; a guard page costs one mprotect here.
 *
 * Limits: every guard page splits a mapping, and Linux caps the mappings of
 * a process (vm.max_map_count, 65530 by default), so guarded stacks stop at
 * about max_map_count / 2 (~32,000); unguarded ones are limited by address
 * space and memory only (docs/limits.md).  Reservations are unmapped only
 * by kr_fini.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

enum { CLASSES_MAX = 16, CHUNK_MIN = 4u << 20, DIRTY_MAX = 65536, BATCH = 32 };
_Static_assert(KR_STACK_SLOTS <= CLASSES_MAX, "a slot per class at most");
_Static_assert(sizeof(kr_mp) + 63 < 4096, "a record lies in its region's last 4 KiB");


struct chunk {
	struct chunk *next;
	void *base;
	size_t len;
};

static struct {
	pthread_mutex_t lock;   /* classes[] growth and chunk list */
	struct kr_stack_class cls[CLASSES_MAX];
	unsigned ncls;
	struct chunk *chunks;
	struct kr_stack_cache *caches;  /* every VP's, for statistics */
	size_t page, cache_max;
	unsigned long mapped;           /* __atomic */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static kr_mp *record_of(const struct kr_stack_class *c, unsigned char *base)
{
	uintptr_t top = (uintptr_t)base + c->size - sizeof(kr_mp);
	return (kr_mp *)(top & ~(uintptr_t)63);
}

int kr__stacks_init(size_t per_vp_cache)
{
	S.page = (size_t)sysconf(_SC_PAGESIZE);
	S.cache_max = per_vp_cache;
	return 0;
}

void kr__stacks_fini(void)
{
	pthread_mutex_lock(&S.lock);
	for (struct chunk *c = S.chunks, *n; c; c = n) {
		n = c->next;
		munmap(c->base, c->len);
		free(c);
	}
	S.chunks = NULL;
	for (unsigned i = 0; i < S.ncls; i++) {
		free(S.cls[i].pool);
		free(S.cls[i].dirty);
		pthread_mutex_destroy(&S.cls[i].lock);
	}
	memset(S.cls, 0, sizeof S.cls);
	S.ncls = 0;
	S.mapped = 0;
	pthread_mutex_unlock(&S.lock);
}

static struct kr_stack_class *class_find(size_t size, int guard)
{
	unsigned n = __atomic_load_n(&S.ncls, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (S.cls[i].size == size && S.cls[i].guard == guard)
			return &S.cls[i];
	pthread_mutex_lock(&S.lock);
	struct kr_stack_class *c = NULL;
	for (unsigned i = 0; i < S.ncls && !c; i++)
		if (S.cls[i].size == size && S.cls[i].guard == guard)
			c = &S.cls[i];
	if (!c && S.ncls < CLASSES_MAX) {
		c = &S.cls[S.ncls];
		memset(c, 0, sizeof *c);
		c->size = size;
		c->guard = guard;
		pthread_mutex_init(&c->lock, NULL);
		__atomic_store_n(&S.ncls, S.ncls + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&S.lock);
	return c;
}

/* The region of a record of class c, record_of backwards, so that the
 * pool's paths need not read the record's cold line.  The record lies
 * within 63 bytes below base + size - sizeof(kr_mp), and every base is a
 * multiple of 4096 (reservations are page-aligned, strides are multiples
 * of 4096): base is the one such multiple in that window. */
static unsigned char *region_of(const struct kr_stack_class *c, const kr_mp *mp)
{
	uintptr_t lo = (uintptr_t)mp + sizeof(kr_mp) - c->size;
	return (unsigned char *)((lo + 4095) & ~(uintptr_t)4095);
}

/* Called with c->lock held. */
static unsigned char *carve(struct kr_stack_class *c)
{
	size_t stride = c->size + (c->guard ? S.page : 0);
	if (c->cur == NULL || (size_t)(c->end - c->cur) < stride) {
		size_t len = stride * 16 > CHUNK_MIN ? stride * 16 : CHUNK_MIN / stride * stride;
		struct chunk *ch = malloc(sizeof *ch);
		if (!ch)
			return NULL;
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			free(ch);
			return NULL;
		}
		/* 4 KiB stacks in a 2 MiB huge page would each cost 2 MiB. */
		madvise(p, len, MADV_NOHUGEPAGE);
		ch->base = p;
		ch->len = len;
		pthread_mutex_lock(&S.lock);
		ch->next = S.chunks;
		S.chunks = ch;
		pthread_mutex_unlock(&S.lock);
		c->cur = p;
		c->end = (unsigned char *)p + len;
	}
	unsigned char *g = c->cur;
	if (c->guard && mprotect(g, S.page, PROT_NONE) != 0)
		return NULL; /* ENOMEM: out of mappings (vm.max_map_count) */
	c->cur += stride;
	unsigned char *base = g + (c->guard ? S.page : 0);
#ifdef KR_HAVE_VALGRIND
	VALGRIND_STACK_REGISTER(base, base + c->size);
#endif
	__atomic_fetch_add(&S.mapped, 1, __ATOMIC_RELAXED);
	return base;
}

static kr_mp *fresh(const struct kr_stack_class *c, unsigned char *base)
{
	kr_mp *mp = record_of(c, base);
	memset(mp, 0, sizeof *mp);
	mp->stack_lo = base;
	mp->stack_size = (size_t)((unsigned char *)mp - base);
	mp->cls = c;
	return mp;
}

/* The cache slot of class c (claimed if free), or -1 when all are taken. */
static int slot_of(struct kr_stack_cache *k, const struct kr_stack_class *c)
{
	for (unsigned i = 0; i < KR_STACK_SLOTS; i++) {
		if (!k->slot[i].cls)
			k->slot[i].cls = c;
		if (k->slot[i].cls == c)
			return (int)i;
	}
	return -1;
}

kr_mp *kr__stack_get(struct kr_stack_cache *k, size_t size, int guard)
{
	for (unsigned i = 0; i < KR_STACK_SLOTS && k->slot[i].cls; i++) {
		const struct kr_stack_class *c = k->slot[i].cls;
		if (c->size != size || c->guard != guard)
			continue;
		kr_mp *mp = k->slot[i].head;
		if (!mp)
			break;
		k->slot[i].head = mp->free_next;
		k->slot[i].n--;
#if defined(__SANITIZE_ADDRESS__)
		ASAN_UNPOISON_MEMORY_REGION(mp->stack_lo, mp->stack_size);
#endif
		mp->free_next = NULL;
		return mp;
	}
	struct kr_stack_class *c = class_find(size, guard);
	if (!c)
		return NULL;
	/* Kept stacks come up in a batch, to the cache, under one lock. */
	int si = slot_of(k, c);
	size_t want = si < 0 ? 1 : 1 + (k->max - k->slot[si].n < BATCH ? k->max - k->slot[si].n
									 : BATCH);
	unsigned char *b[1 + BATCH];
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	for (; n < want && c->ndirty; n++) {
		b[n] = c->dirty[c->ndirty - 1];
		__atomic_store_n(&c->ndirty, c->ndirty - 1, __ATOMIC_RELAXED);
	}
	if (!n && c->npool)
		b[n++] = c->pool[--c->npool];
	if (!n && (b[0] = carve(c)))
		n = 1;
	pthread_mutex_unlock(&c->lock);
	if (!n)
		return NULL;
	for (size_t i = 1; i < n; i++) {
		kr_mp *mp = fresh(c, b[i]);
		mp->free_next = k->slot[si].head;
		k->slot[si].head = mp;
		k->slot[si].n++;
	}
#if defined(__SANITIZE_ADDRESS__)
	ASAN_UNPOISON_MEMORY_REGION(b[0], c->size);
#endif
	return fresh(c, b[0]);
}

/* Append base to a list (c->lock held); 0 if there was no room. */
static int list_add(unsigned char ***list, size_t *n, size_t *cap, unsigned char *base)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		unsigned char **p = realloc(*list, ncap * sizeof *p);
		if (!p)
			return 0;
		*list = p;
		*cap = ncap;
	}
	(*list)[*n] = base;
	__atomic_store_n(n, *n + 1, __ATOMIC_RELAXED); /* trim peeks at ndirty */
	return 1;
}

/* Give n regions' memory back, merging neighbours into one call. */
static void give_back(const struct kr_stack_class *c, unsigned char **b, size_t n)
{
	size_t stride = c->size + (c->guard ? S.page : 0);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		if (!c->guard) /* guarded regions are split by their guard pages */
			while (j < n && b[j] == b[j - 1] + stride)
				j++;
		madvise(b[i], (size_t)(b[j - 1] - b[i]) + c->size, MADV_DONTNEED);
		i = j;
	}
}

/* n regions into the pool: kept while there is room, else returned. */
static void pool_put(struct kr_stack_class *c, unsigned char **b, size_t n)
{
	size_t kept = 0;
	pthread_mutex_lock(&c->lock);
	while (kept < n && c->ndirty < DIRTY_MAX &&
	       list_add(&c->dirty, &c->ndirty, &c->capdirty, b[kept]))
		kept++;
	pthread_mutex_unlock(&c->lock);
	if (kept == n)
		return;
	give_back(c, b + kept, n - kept);
	pthread_mutex_lock(&c->lock);
	/* No room in the list: the range stays mapped but unlisted; its
	 * memory is returned, only address space is lost. */
	for (size_t i = kept; i < n; i++)
		list_add(&c->pool, &c->npool, &c->cappool, b[i]);
	pthread_mutex_unlock(&c->lock);
}

/* Return the memory of every dirty stack.  The madvise calls run with
 * no lock held: the list is taken out first. */
void kr__stacks_trim(void)
{
	unsigned n = __atomic_load_n(&S.ncls, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		struct kr_stack_class *c = &S.cls[i];
		if (!__atomic_load_n(&c->ndirty, __ATOMIC_RELAXED))
			continue;
		pthread_mutex_lock(&c->lock);
		unsigned char **d = c->dirty;
		size_t nd = c->ndirty;
		c->dirty = NULL;
		c->capdirty = 0;
		__atomic_store_n(&c->ndirty, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&c->lock);
		give_back(c, d, nd);
		pthread_mutex_lock(&c->lock);
		for (size_t j = 0; j < nd; j++)
			list_add(&c->pool, &c->npool, &c->cappool, d[j]);
		pthread_mutex_unlock(&c->lock);
		free(d);
	}
}

/* A full cache sends a batch down with the newcomer, under one lock. */
void kr__stack_put_slow(struct kr_stack_cache *k, kr_mp *mp)
{
	struct kr_stack_class *c = (struct kr_stack_class *)mp->cls;
	if (KR_SANITIZED && region_of(c, mp) != mp->stack_lo)
		abort(); /* the sanitizer builds check region_of on every return */
	unsigned char *b[1 + BATCH];
	size_t n = 0;
	int si = slot_of(k, c);
	if (si >= 0 && k->slot[si].n < k->max) {
		mp->free_next = k->slot[si].head;
		k->slot[si].head = mp;
		k->slot[si].n++;
		return;
	}
	b[n++] = region_of(c, mp);
	for (; si >= 0 && n <= BATCH && k->slot[si].head; n++) {
		kr_mp *x = k->slot[si].head;
		k->slot[si].head = x->free_next;
		k->slot[si].n--;
		b[n] = region_of(c, x);
	}
	pool_put(c, b, n);
}

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
			pool_put((struct kr_stack_class *)k->slot[i].cls, &mp->stack_lo, 1);
		}
	free(k);
}

/* Statistics read the per-VP counts without their owners' cooperation: a
 * snapshot that may be a moment old, never a torn number.  A class's lock
 * is never taken under S.lock: carve() takes them the other way round. */
void kr__stack_stats(unsigned long *mapped, unsigned long *cached)
{
	unsigned long n = 0;
	pthread_mutex_lock(&S.lock);
	for (struct kr_stack_cache *k = S.caches; k; k = k->next)
		for (unsigned i = 0; i < KR_STACK_SLOTS; i++)
			n += __atomic_load_n(&k->slot[i].n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&S.lock);
	unsigned ncls = __atomic_load_n(&S.ncls, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < ncls; i++) {
		pthread_mutex_lock(&S.cls[i].lock);
		n += S.cls[i].npool + S.cls[i].ndirty;
		pthread_mutex_unlock(&S.cls[i].lock);
	}
	*mapped = __atomic_load_n(&S.mapped, __ATOMIC_RELAXED);
	*cached = n;
}
