/*
 * The doubly linked list of microprocesses that the built-in ready queues
 * are made of (through kr_mp.link).  O(1) push and pop at either end and
 * removal of any member.  Not synchronised: callers hold the
 * queue's lock.  The head is stored atomically (relaxed), for a reader
 * that only asks whether the list is empty without the lock (the default
 * scheduler's slot).
 */
#ifndef KARUI_CORE_LIST_H
#define KARUI_CORE_LIST_H

#include "internal.h"

struct mplist {
	kr_mp *head, *tail;
};

static inline __attribute__((always_inline)) void mpl_push_tail(struct mplist *l, kr_mp *mp)
{
	mp->link.next = NULL;
	mp->link.prev = l->tail;
	if (l->tail)
		l->tail->link.next = mp;
	else
		__atomic_store_n(&l->head, mp, __ATOMIC_RELAXED);
	l->tail = mp;
}

static inline __attribute__((always_inline)) void mpl_push_head(struct mplist *l, kr_mp *mp)
{
	mp->link.prev = NULL;
	mp->link.next = l->head;
	if (l->head)
		l->head->link.prev = mp;
	else
		l->tail = mp;
	__atomic_store_n(&l->head, mp, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void mpl_remove(struct mplist *l, kr_mp *mp)
{
	if (mp->link.prev)
		mp->link.prev->link.next = mp->link.next;
	else
		__atomic_store_n(&l->head, mp->link.next, __ATOMIC_RELAXED);
	if (mp->link.next)
		mp->link.next->link.prev = mp->link.prev;
	else
		l->tail = mp->link.prev;
}

static inline __attribute__((always_inline)) kr_mp *mpl_pop_head(struct mplist *l)
{
	kr_mp *mp = l->head;
	if (mp)
		mpl_remove(l, mp);
	return mp;
}

static inline __attribute__((always_inline)) kr_mp *mpl_pop_tail(struct mplist *l)
{
	kr_mp *mp = l->tail;
	if (mp)
		mpl_remove(l, mp);
	return mp;
}

#endif
