/* Helpers shared by the L3 primitives' tests (tests/test_sem.c,
 * test_monitor.c, test_chan.c, ...): each includes this after kt.h. */
#ifndef KARUI_KT_SYNC_H
#define KARUI_KT_SYNC_H

#include <stdint.h>
#include <stdlib.h>

#include "kt_karui.h"

static const kr_attr small = {.stack_size = 16384};

/* Create n microprocesses running fn(arg_i), then join them all. */
static inline void run_all(unsigned n, void *(*fn)(void *), void *(*argf)(unsigned))
{
	kr_mp **m = calloc(n, sizeof *m);
	KT_CHECK(m);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_create(&m[i], &small, fn, argf ? argf(i) : NULL), 0);
	for (unsigned i = 0; i < n; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	free(m);
}

static inline void *index_arg(unsigned i) { return (void *)(uintptr_t)i; }

#endif
