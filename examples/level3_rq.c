/*
 * Scheduling level 3: a ready-queue module of one's own, with the same
 * interface as the built-ins (kr_rq_ops), plugged into the default
 * scheduler.  This one is earliest-deadline-first: each microprocess's
 * priority field holds its deadline (smaller runs first), kept in a sorted
 * list.  The default scheduler calls it under its lock, so it is plain
 * sequential code.  Prints the order in which the jobs ran.
 */
#include <stdio.h>

#include "karui.h"

struct edf {
	kr_mp *head;
};

static void edf_init(void *q) { ((struct edf *)q)->head = NULL; }

static void edf_push(void *q, kr_mp *mp)
{
	kr_mp **p = &((struct edf *)q)->head;
	while (*p && kr_mp_prio(*p) <= kr_mp_prio(mp))
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

static void *job(void *name)
{
	order[n++] = *(const char *)name;
	return NULL;
}

int main(void)
{
	kr_config cfg = {.rq = &edf_rq};
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	kr_mp_setprio(kr_mp_self(), KR_PRIO_MAX); /* main's deadline: last */
	const char *names[5] = {"v", "w", "x", "y", "z"};
	int deadline[5] = {30, 10, 20, 5, 25};
	kr_mp *m[5];
	for (int i = 0; i < 5; i++) {
		kr_attr at = {.flags = KR_MP_PRIO, .prio = deadline[i]};
		kr_mp_create(&m[i], &at, job, (void *)names[i]);
	}
	kr_mp_yield();
	for (int i = 0; i < 5; i++)
		kr_mp_join(m[i], NULL);
	printf("order: %s\n", order);
	return kr_fini();
}
