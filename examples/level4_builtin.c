/*
 * Scheduling level 4: pick a built-in ready queue.  With kr_rq_prio the
 * highest priority runs first, FIFO among equals, and a queued
 * microprocess's priority can be raised while it waits (seed 000's dynamic
 * priority).  Prints the order in which the workers ran.
 */
#include <stdint.h>
#include <stdio.h>

#include "karui.h"

static char order[16];
static int n;

static void *worker(void *name)
{
	order[n++] = *(const char *)name;
	return NULL;
}

int main(void)
{
	kr_config cfg = {.rq = &kr_rq_prio};
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	kr_mp_setprio(kr_mp_self(), KR_PRIO_MIN); /* main runs after the workers */
	kr_mp *m[4];
	const char *names[4] = {"a", "b", "c", "d"};
	int prio[4] = {5, 10, 10, 1};
	for (int i = 0; i < 4; i++) {
		kr_attr at = {.flags = KR_MP_PRIO, .prio = prio[i]};
		kr_mp_create(&m[i], &at, worker, (void *)names[i]);
	}
	kr_mp_setprio(m[3], 20); /* d was last; now it goes first */
	for (int i = 0; i < 4; i++)
		kr_mp_join(m[i], NULL);
	printf("order: %s\n", order);
	return kr_fini();
}
