/*
 * Scheduling level 3: a ready-queue module of one's own, with the same
 * interface as the built-ins (kr_rq_ops), plugged into the default
 * scheduler.  This one is earliest-deadline-first: each job's deadline is
 * the word it was created with (kr_attr.udata, read back with
 * kr_mp_udata), kept in a list sorted by deadline; a microprocess without
 * one (the main one) runs after every job.  The default scheduler calls it
 * under its lock, so it is plain sequential code.  Prints the order in
 * which the jobs ran.
 */
#include <stdint.h>
#include <stdio.h>

#include "karui.h"

struct job {
	const char *name;
	uint64_t deadline;
};

/* A microprocess's deadline: its job's, or none (last). */
static uint64_t deadline_of(const kr_mp *mp)
{
	const struct job *j = kr_mp_udata(mp);
	return j ? j->deadline : UINT64_MAX;
}

struct edf {
	kr_mp *head;
};

static void edf_init(void *q) { ((struct edf *)q)->head = NULL; }

static void edf_push(void *q, kr_mp *mp)
{
	kr_mp **p = &((struct edf *)q)->head;
	uint64_t d = deadline_of(mp);
	while (*p && deadline_of(*p) <= d)
		p = &kr_mp_rqlink(*p)->next;
	kr_mp_rqlink(mp)->next = *p;
	*p = mp;
}

static kr_mp *edf_pop(void *q)
{
	struct edf *e = q;
	kr_mp *mp = e->head;
	if (mp)
		e->head = kr_mp_rqlink(mp)->next;
	return mp;
}

static int edf_remove(void *q, kr_mp *mp)
{
	for (kr_mp **p = &((struct edf *)q)->head; *p; p = &kr_mp_rqlink(*p)->next)
		if (*p == mp) {
			*p = kr_mp_rqlink(mp)->next;
			return 0;
		}
	return 0;
}

static const kr_rq_ops edf_rq = {
	.name = "edf", .size = sizeof(struct edf), .flags = KR_RQ_SHARED,
	.init = edf_init, .push = edf_push, .pop = edf_pop, .remove = edf_remove,
};

static char order[16];
static int n;

static void *job(void *arg)
{
	const struct job *j = kr_mp_udata(kr_mp_self());
	order[n++] = j->name[0];
	return arg;
}

int main(void)
{
	kr_config cfg = {.rq = &edf_rq};
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	static struct job jobs[5] = {{"v", 30}, {"w", 10}, {"x", 20}, {"y", 5}, {"z", 25}};
	kr_mp *m[5];
	for (int i = 0; i < 5; i++) {
		kr_attr at = {.udata = &jobs[i]};
		kr_mp_create(&m[i], &at, job, NULL);
	}
	kr_mp_yield(); /* main has no deadline: every job runs first */
	for (int i = 0; i < 5; i++)
		kr_mp_join(m[i], NULL);
	printf("order: %s\n", order);
	return kr_fini();
}
