/*
 * karui L2 — what threads that are no VP post to the one VP (permit.h,
 * "One VP"): their wakeups, in two arrays, one posted to (`cur`, under
 * the lock) while the VP applies the other.  Each starts in static room,
 * so that a post can always wait for room if memory runs out.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "permit.h"

uint32_t kr__solo;

enum { POSTS_STATIC = 32 };
static struct kr__post posts_room[2][POSTS_STATIC];
static struct {
	kr_spin lock;
	unsigned cur, n;        /* the array posted to, and its count */
	unsigned cap[2];
	struct kr__post *v[2];
} P = {.lock = KR_SPIN_INIT,
       .cap = {POSTS_STATIC, POSTS_STATIC},
       .v = {posts_room[0], posts_room[1]}};

void kr__permits_start(int on)
{
	kr__spin_lock(&P.lock);
	P.n = 0;
	__atomic_store_n(&kr__solo, on ? SOLO_ON : 0, __ATOMIC_RELEASE);
	kr__spin_unlock(&P.lock);
}

struct kr__post *kr__permits_take(uint32_t solo, unsigned *n)
{
	kr__spin_lock(&P.lock);
	struct kr__post *v = P.v[P.cur];
	*n = P.n;
	P.cur = !P.cur;
	P.n = 0;
	__atomic_store_n(&kr__solo, solo, __ATOMIC_RELEASE);
	kr__spin_unlock(&P.lock);
	return v;
}

/* A thread that is no VP posts the wakeup of h to the one VP, and wakes
 * the VP if this is the first post since it last looked: the VP applies
 * posts at its next scheduling point that looks at the timers, at every
 * change of a permit it makes, and before it goes idle; a VP that has
 * parked takes the wakeup from L0.  A handle that is stale now is
 * PERMIT_STALE; one whose life ends before the VP applies it is owed
 * nothing (as in end_rest). */
int kr__permit_post(kr_mp *h, int how)
{
	for (;;) {
		kr__spin_lock(&P.lock);
		uint32_t solo = __atomic_load_n(&kr__solo, __ATOMIC_RELAXED);
		unsigned c = P.cur;
		if (!solo || permit_stale(h, __atomic_load_n(&kr__rec(h)->wstate, __ATOMIC_RELAXED))) {
			kr__spin_unlock(&P.lock);
			return solo ? PERMIT_STALE : PERMIT_SEVERAL;
		}
		if (P.n < P.cap[c]) {
			P.v[c][P.n++] = (struct kr__post){h, how};
			__atomic_store_n(&kr__solo, SOLO_ON | SOLO_POSTED, __ATOMIC_RELAXED);
			kr__spin_unlock(&P.lock);
			if (!(solo & SOLO_POSTED))
				kr_sched_unpark(1);
			return PERMIT_SET;
		}
		/* full: twice the room, allocated with the lock free */
		unsigned cap = 2 * P.cap[c];
		kr__spin_unlock(&P.lock);
		struct kr__post *v = malloc(cap * sizeof *v), *old = v;
		if (!v) { /* the VP empties it soon */
			kr_sched_unpark(1);
			sched_yield();
			continue;
		}
		kr__spin_lock(&P.lock);
		if (P.cur == c && P.cap[c] < cap) {
			memcpy(v, P.v[c], P.n * sizeof *v);
			old = P.v[c];
			P.v[c] = v;
			P.cap[c] = cap;
		}
		kr__spin_unlock(&P.lock);
		if (old != posts_room[0] && old != posts_room[1])
			free(old);
	}
}
