/* Helpers shared by the core's tests (tests/test_life.c, test_park.c,
 * test_sched.c, ...): each includes this after kt.h. */
#ifndef KARUI_KT_CORE_H
#define KARUI_KT_CORE_H

#include "kt_karui.h"

static inline void *ret_arg(void *a) { return a; }

static inline void *sleeper(void *a)
{
	kr_mp_park();
	return a;
}

static char trace[64];
static int tlen;
static inline void *mark(void *a)
{
	trace[tlen++] = *(char *)a;
	return NULL;
}

#endif
