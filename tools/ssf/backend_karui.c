/*
 * SSF's karui back end: every agent a microprocess, all on one VP.
 *
 * run() starts karui on the calling thread with one VP and the shared
 * FIFO ready queue, creates the agents' microprocesses in ring order and
 * joins them; the calling thread's main microprocess sleeps in the join
 * meanwhile.  An agent ends its cycle with kr_mp_yield: with one VP and a
 * FIFO queue holding exactly the agents, the one that yields goes behind
 * all the others, so the next to run is the next in the ring — round
 * robin by the queue's own order, with no bookkeeping of ours.  At the end
 * each body returns in ring order and its microprocess ends, and the queue
 * again runs the next.
 *
 * Rejected: kr_mp_switch_to(next) and kr_mp_park_and_switch(next), which
 * name the next agent explicitly and so would keep the order with any ready
 * queue; both cost more per switch than a yield here, and the ring order
 * needs nothing of them that the FIFO queue does not give.  (They also need
 * a start gate: the default queue runs the newest microprocess first.)
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

struct agent {
	ssf_sched *s;
	unsigned i;
	const int *abort; /* set when not every agent could be made */
};

static void pass(ssf_sched *s)
{
	kr_mp_yield();
}

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	if (!*a->abort)
		a->s->body(a->s, a->i);
	return NULL;
}

static int karui_run(ssf_sched *s, char *why, size_t len)
{
	kr_config cfg = {.vps = 1, .rq = &kr_rq_fifo};
	kr_attr attr = {.stack_size = 16 * 1024};
	struct agent *a = calloc(s->n, sizeof *a);
	kr_mp **mp = calloc(s->n, sizeof *mp);
	unsigned made = 0;
	int e = a && mp ? kr_init(&cfg) : ENOMEM;
	if (e) {
		snprintf(why, len, "karui: kr_init: %s", strerror(e));
		free(a);
		free(mp);
		return e;
	}
	s->pass = pass;
	s->be = NULL;
	/* No agent runs before the main microprocess waits in its first
	 * join, so after a failed create the ones made can still be told to
	 * end without simulating: a ring with agents missing would never end. */
	for (; made < s->n; made++) {
		a[made] = (struct agent){s, made, &e};
		if ((e = kr_mp_create(&mp[made], &attr, agent_main, &a[made])) != 0)
			break;
	}
	if (e)
		snprintf(why, len, "karui: kr_mp_create: %s", strerror(e));
	for (unsigned i = 0; i < made; i++)
		kr_mp_join(mp[i], NULL);
	kr_fini();
	free(a);
	free(mp);
	return e;
}

const ssf_backend ssf_backend_karui = {"karui", karui_run};
