/*
 * A program for tests/test_trace.py: a known schedule to trace.  Two
 * microprocesses ping-pong N times on two semaphores, two more M times on
 * two unbuffered channels, one sleeps 2 ms, one is joined after it has
 * yielded; main joins them all.  With KARUI_TRACE set, kr_fini writes the
 * trace; the program prints the ids as one JSON object for the test.
 *
 * Usage: trace_target VPS N M
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "karui.h"

static kr_sem sem[2]; /* side i of the semaphore pair waits on sem[i] */
static kr_chan chan[2]; /* side i of the channel pair receives on chan[i] */
static long n_rounds, m_rounds;

/* Side 0 starts each round, side 1 answers it. */
static void *sem_side(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (long i = 0; i < n_rounds; i++) {
		if (me == 0)
			kr_sem_post(&sem[1]);
		kr_sem_wait(&sem[me]);
		if (me == 1)
			kr_sem_post(&sem[0]);
	}
	return NULL;
}

static void *chan_side(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (long i = 0, v = 0; i < m_rounds; i++) {
		if (me == 0)
			kr_chan_send(&chan[1], &i);
		kr_chan_recv(&chan[me], &v);
		if (me == 1)
			kr_chan_send(&chan[0], &v);
	}
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	kr_mp_sleep_for(2000000);
	return NULL;
}

static void *yielder(void *arg)
{
	(void)arg;
	kr_mp_yield();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	kr_config cfg = {.vps = (unsigned)atoi(argv[1])};
	n_rounds = atol(argv[2]);
	m_rounds = atol(argv[3]);
	int err = kr_init(&cfg);
	if (err)
		return fprintf(stderr, "kr_init: %d\n", err), 1;
	for (int i = 0; i < 2; i++) {
		kr_sem_init(&sem[i], 0);
		kr_chan_init(&chan[i], sizeof(long), 0);
	}
	kr_mp *mp[6];
	void *(*fn[6])(void *) = {sem_side, sem_side, chan_side, chan_side, sleeper, yielder};
	static const char *const name[6] = {"ping", "pong", "chan_a", "chan_b", "sleeper", "yielder"};
	for (int i = 0; i < 6; i++)
		if ((err = kr_mp_create(&mp[i], NULL, fn[i], (void *)(intptr_t)(i & 1))))
			return fprintf(stderr, "create: %d\n", err), 1;
	printf("{\"main\":%lu", kr_mp_id(kr_mp_self()));
	for (int i = 0; i < 6; i++)
		printf(",\"%s\":%lu", name[i], kr_mp_id(mp[i]));
	printf("}\n");
	fflush(stdout);
	for (int i = 5; i >= 0; i--)
		if ((err = kr_mp_join(mp[i], NULL)))
			return fprintf(stderr, "join: %d\n", err), 1;
	if ((err = kr_fini()))
		return fprintf(stderr, "kr_fini: %d\n", err), 1;
	return 0;
}
