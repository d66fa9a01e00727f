/*
 * karui-sh memory: the arena a parse allocates from, and malloc that ends
 * the shell instead of returning NULL.
 *
 * An arena is a list of chunks, each at least 4 KiB (larger for a larger
 * request); allocations are bumped from the newest chunk and 16-byte
 * aligned, and nothing is freed but the whole arena.  Arrays grow by
 * doubling into new space (ksh_push), leaving the old copy behind: at
 * most as much again as the array itself, for the life of one command.
 * Rejected: a node-by-node free of the tree, which would need a walker
 * that knows every node type and gains nothing for data that lives as
 * long as one command line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang.h"

struct ksh_chunk {
	struct ksh_chunk *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

enum { CHUNK = 4096 - sizeof(struct ksh_chunk) };

static void out_of_memory(void)
{
	fputs("karui-sh: out of memory\n", stderr);
	exit(2);
}

void *ksh_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		out_of_memory();
	return p;
}

void *ksh_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		out_of_memory();
	return p;
}

char *ksh_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(ksh_xmalloc(n), s, n);
}

char *ksh_strndup_x(const char *s, size_t n)
{
	char *p = ksh_xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void *ksh_alloc(struct ksh_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct ksh_chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		size_t size = n > CHUNK ? n : CHUNK;
		if (size > SIZE_MAX - sizeof *c)
			out_of_memory();
		c = ksh_xmalloc(sizeof *c + size);
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	return memset(p, 0, n);
}

char *ksh_strndup(struct ksh_arena *a, const char *s, size_t n)
{
	char *p = ksh_alloc(a, n + 1);
	memcpy(p, s, n);
	return p;
}

void *ksh_push(struct ksh_arena *a, void *arr, size_t *n, size_t *cap, size_t elsize)
{
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 4;
		if (ncap > SIZE_MAX / elsize)
			out_of_memory();
		void *bigger = ksh_alloc(a, ncap * elsize);
		if (*n)
			memcpy(bigger, arr, *n * elsize);
		arr = bigger;
		*cap = ncap;
	} else {
		memset((char *)arr + *n * elsize, 0, elsize);
	}
	(*n)++;
	return arr;
}

void ksh_arena_free(struct ksh_arena *a)
{
	for (struct ksh_chunk *c = a->head, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
}

struct ksh_arena *ksh_arena_new(void)
{
	struct ksh_arena *a = ksh_xmalloc(sizeof *a);
	*a = (struct ksh_arena){.refs = 1};
	return a;
}

void ksh_arena_ref(struct ksh_arena *a)
{
	__atomic_fetch_add(&a->refs, 1, __ATOMIC_RELAXED);
}

void ksh_arena_unref(struct ksh_arena *a)
{
	if (a && __atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		ksh_arena_free(a);
		free(a);
	}
}
