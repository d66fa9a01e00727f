/*
 * SSF's karui back end: every agent a microprocess, all on one VP.
 *
 * run() starts karui on the calling thread with one VP, creates the
 * agents' microprocesses and waits until each has parked at its start;
 * then it unparks agent 0 and joins them all, the main microprocess
 * sleeping in the join meanwhile.  An agent ends its cycle with
 * kr_mp_park_and_switch(next): it parks, and the next agent in the ring,
 * parked in the same call a cycle ago, runs at once on this VP — the
 * seed's sleep_and_wakeup.  Exactly one agent is runnable at any time, so
 * the ready queue is never consulted and the order is the ring's whatever
 * queue karui uses.  A body that returns unparks the next agent still
 * running and ends; the queue then holds only that one.
 *
 * Rejected: kr_mp_yield over the shared FIFO queue, which gives the ring
 * order by the queue's own order with no bookkeeping, but takes the queue's
 * lock and list on every switch and costs more per switch;
 * kr_mp_switch_to(next), which leaves the caller runnable, so every agent
 * sits in the queue and each switch both removes one and queues one:
 * slower still.
 *
 * karui must not be running already on this thread (kr_init's EBUSY).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "karui.h"
#include "ssf_impl.h"

struct kbe {
	ssf_sched *s;
	kr_mp **mp;
	unsigned cur, parked, finished;
	int abort; /* not every agent could be made: end without simulating */
};

struct agent {
	struct kbe *b;
	unsigned i;
};

static void pass(ssf_sched *s)
{
	struct kbe *b = s->be;
	b->cur = b->cur + 1 == s->n ? 0 : b->cur + 1;
	kr_mp_park_and_switch(b->mp[b->cur]);
}

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct kbe *b = a->b;
	b->parked++;
	kr_mp_park(); /* until run() or the previous agent unparks us */
	if (b->abort)
		return NULL;
	b->s->body(b->s, a->i);
	b->cur = a->i + 1 == b->s->n ? 0 : a->i + 1;
	if (++b->finished < b->s->n)
		kr_mp_unpark(b->mp[b->cur]);
	return NULL;
}

static int karui_run(ssf_sched *s, char *why, size_t len)
{
	kr_config cfg = {.vps = 1};
	kr_attr attr = {.stack_size = 16 * 1024};
	struct kbe b = {.s = s, .mp = calloc(s->n, sizeof *b.mp)};
	struct agent *a = calloc(s->n, sizeof *a);
	unsigned made = 0;
	int e = a && b.mp ? kr_init(&cfg) : ENOMEM;
	if (e) {
		snprintf(why, len, "karui: kr_init: %s", strerror(e));
		free(a);
		free(b.mp);
		return e;
	}
	s->pass = pass;
	s->be = &b;
	for (; made < s->n; made++) {
		a[made] = (struct agent){&b, made};
		if ((e = kr_mp_create(&b.mp[made], &attr, agent_main, &a[made])) != 0)
			break;
	}
	if (e) {
		snprintf(why, len, "karui: kr_mp_create: %s", strerror(e));
		b.abort = 1;
		for (unsigned i = 0; i < made; i++)
			kr_mp_unpark(b.mp[i]);
	} else {
		while (b.parked < s->n) /* one VP: they run when we yield */
			kr_mp_yield();
		kr_mp_unpark(b.mp[0]);
	}
	for (unsigned i = 0; i < made; i++)
		kr_mp_join(b.mp[i], NULL);
	kr_fini();
	free(a);
	free(b.mp);
	return e;
}

const ssf_backend ssf_backend_karui = {"karui", karui_run};
