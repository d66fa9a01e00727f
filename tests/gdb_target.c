/*
 * A program for tests/test_gdb.sh: microprocesses parked in functions of
 * known names and one that has not run yet, then a stop at gdb_target_stop,
 * where the test's gdb looks at them with tools/gdb/karui.py.
 */
#include <stdio.h>
#include <stdlib.h>

#include "karui.h"

static volatile int parked;

__attribute__((noinline)) static void *parked_in_alpha(void *arg)
{
	(void)arg;
	parked++;
#if defined(__aarch64__)
	/* a value the park keeps in a callee-saved FP register (d8): gdb
	 * reads it from the saved frame in this function's frame */
	__asm__ volatile("fmov d8, #2.5" ::: "d8");
#endif
	kr_mp_park();
	return NULL;
}

__attribute__((noinline)) static int beta_inner(void)
{
	parked++;
	return kr_mp_park();
}

__attribute__((noinline)) static void *parked_in_beta(void *arg)
{
	(void)arg;
	beta_inner();
	__asm__ volatile("" ::: "memory"); /* no tail call: the frame stays */
	return NULL;
}

__attribute__((noinline)) static void *sleeping_in_gamma(void *arg)
{
	(void)arg;
	parked++;
	kr_mp_park_until(kr_now() + 3600ull * 1000000000ull);
	__asm__ volatile("" ::: "memory");
	return NULL;
}

/* created just before the stop: it has never run there */
__attribute__((noinline)) static void *not_run_yet(void *arg)
{
	(void)arg;
	return NULL;
}

/* gdb breaks here */
__attribute__((noinline)) void gdb_target_stop(void)
{
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	kr_config cfg = {.vps = 1};
	if (kr_init(&cfg) != 0) {
		fprintf(stderr, "kr_init failed\n");
		return 1;
	}
	kr_mp *a, *b, *c, *d;
	if (kr_mp_create(&a, NULL, parked_in_alpha, NULL) ||
	    kr_mp_create(&b, NULL, parked_in_beta, NULL) ||
	    kr_mp_create(&c, NULL, sleeping_in_gamma, NULL))
		return 1;
	while (parked < 3)
		kr_mp_yield();
	if (kr_mp_create(&d, NULL, not_run_yet, NULL))
		return 1;
	gdb_target_stop();
	kr_mp_unpark(a);
	kr_mp_unpark(b);
	kr_mp_unpark(c);
	kr_mp_join(a, NULL);
	kr_mp_join(b, NULL);
	kr_mp_join(c, NULL);
	kr_mp_join(d, NULL);
	kr_fini();
	puts("gdb_target: done");
	return 0;
}
