/*
 * karui, beside L2 — the scheduling trace's hooks (trace.c has the design):
 * what the core and L3 tell it, and the reasons a microprocess stops.
 */
#ifndef KARUI_CORE_TRACE_H
#define KARUI_CORE_TRACE_H

#include "internal.h"

/* Why a microprocess stops running.  KR_WHY_RUNNABLE: it stays runnable
 * (a yield, a direct switch to another); KR_WHY_EXIT: it ended; the others
 * are the parks, each named after the call that parks (park.c: the
 * kr__park_* entry points give L3's their reason). */
enum kr_why {
	KR_WHY_RUNNABLE,
	KR_WHY_PARK,    /* kr_mp_park*, kr_fini's wait for VP 0 */
	KR_WHY_SLEEP,   /* kr_mp_sleep_for / _until */
	KR_WHY_JOIN,
	KR_WHY_SWITCH,  /* kr_mp_park_and_switch */
	KR_WHY_CHAN,
	KR_WHY_MUTEX,
	KR_WHY_COND,
	KR_WHY_SEM,
	KR_WHY_BARRIER,
	KR_WHY_STREAM,
	KR_WHY_ENTRY,
	KR_WHY_IO,
	KR_WHY_EXIT,
	KR_WHY_N
};

/* 1 while a trace is being recorded: set by kr_init, cleared by kr_fini. */
extern uint32_t kr__tracing __attribute__((visibility("hidden")));

/* VP w stops running self (NULL: its idle loop) for `why`, and runs next
 * (NULL: its idle loop). */
void kr__trace_switch(struct kr_worker *w, kr_mp *self, kr_mp *next, int why);

/* The hook of the core's general paths; the fast paths never run while
 * tracing (trace.c) and have none. */
static inline void trace_switch(struct kr_worker *w, kr_mp *self, kr_mp *next, int why)
{
	if (__builtin_expect(__atomic_load_n(&kr__tracing, __ATOMIC_RELAXED), 0))
		kr__trace_switch(w, self, next, why);
}

/* The parks of L3, with their reasons (park.c): copies of kr_mp_park_until
 * and kr_mp_park_cancellable_until, so that a reason costs nothing when no
 * trace runs. */
int kr__park_sem(uint64_t deadline);
int kr__park_cond(uint64_t deadline);
int kr__park_stream(uint64_t deadline);
int kr__park_entry(uint64_t deadline);
int kr__park_mutex(uint64_t deadline);
int kr__park_barrier(uint64_t deadline);
int kr__park_cancellable_why(uint64_t deadline, int why);
int kr__park_until_why(uint64_t deadline, int why);

/* kr_mp_park_cancellable_until (cancellable) or kr_mp_park_until for
 * `why`, a constant: a direct call of the copy that has it. */
static inline __attribute__((always_inline)) int kr__park_for(int why, int cancellable,
							      uint64_t deadline)
{
	if (!cancellable)
		return why == KR_WHY_MUTEX     ? kr__park_mutex(deadline)
		       : why == KR_WHY_BARRIER ? kr__park_barrier(deadline)
					       : kr__park_until_why(deadline, why);
	switch (why) {
	case KR_WHY_SEM:
		return kr__park_sem(deadline);
	case KR_WHY_COND:
		return kr__park_cond(deadline);
	case KR_WHY_STREAM:
		return kr__park_stream(deadline);
	case KR_WHY_ENTRY:
		return kr__park_entry(deadline);
	default:
		return kr__park_cancellable_why(deadline, why);
	}
}

/* kr_init: start a trace if cfg or KARUI_TRACE asks for one, wrapping the
 * seam that G.seam holds (a failure to open the file is reported on
 * stderr, and karui runs untraced); kr_fini: write it out. */
void kr__trace_start(const kr_config *cfg);
void kr__trace_stop(void);

#endif
