/*
 * karui — the C-area (seed 004): programs that share the machine cooperate
 * with it through a shared-memory segment, so that together they run as
 * many VPs as there are processors.
 *
 *   kr_config cfg = {.alloc = &kr_carea};   opt in (vps 0: one VP per
 *   kr_init(&cfg);                          processor the process may use)
 *
 * The segment (one per user, see docs/carea.md) holds a slot per
 * participating process: its VPs and their status (RUNNING, IDLE, BLOCKED,
 * SUSPENDED, RECOVERING, RECOVERED), the registers of a microprocess that
 * was stopped in the middle, and its count of runnable microprocesses.
 * An allocator that runs in whichever participant goes idle or changes its
 * demand (no daemon) shares the processors the user may use among the
 * participants by demand; a process runs no more VPs than it is granted.
 * When its grant falls, one of its VPs stops at once: a signal interrupts
 * it, the microprocess it ran is held in the C-area (SUSPENDED), and
 * another VP of the process recovers it (SUSPENDED -> RECOVERING ->
 * RECOVERED) and runs it on.  A VP that blocks in the kernel hands its
 * processor to a stopped VP of its process.  A process that does not opt
 * in pays nothing for any of this.
 *
 * Notifiers (seed 004 §3.3): with a time slice, a microprocess that runs
 * longer than the slice is stopped the same way and queued behind the
 * others (preemptive time slicing, and priorities that hold against
 * long-running microprocesses).
 *
 * Where the segment cannot be used (another version of it, a segment that
 * is not the user's own, no shared memory), kr_init still succeeds and
 * karui runs without it: kr_carea_stats_get says so (attached 0).
 */
#ifndef KARUI_CAREA_H
#define KARUI_CAREA_H

#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The allocator to put in kr_config.alloc. */
extern const struct kr_alloc kr_carea;

typedef struct kr_carea_config {
	const char *segment; /* the segment's name, "/name"; NULL: the
	                        environment's KARUI_CAREA_SEGMENT, else
	                        "/karui-carea-<uid>" */
	uint64_t slice;      /* preemptive time slice in ns (at least 1 ms);
	                        0: the environment's KARUI_CAREA_SLICE_US,
	                        else none */
} kr_carea_config;

/* Settings for the next kr_init with kr_carea (a copy is taken; the name
 * must stay valid until kr_init).  EINVAL: a name that does not start
 * with '/' or is longer than 200 bytes, a slice below 1 ms; EBUSY: karui
 * runs. */
int kr_carea_configure(const kr_carea_config *cfg);

typedef struct kr_carea_stats {
	int attached;             /* 1: in the segment; 0: running without it */
	unsigned slot;            /* its slot in the segment (when attached) */
	unsigned nvp;             /* VPs the process has */
	unsigned grant;           /* processors allocated to it now */
	unsigned running;         /* its VPs running now */
	uint64_t suspensions;     /* microprocesses stopped in the middle */
	uint64_t recoveries;      /* of those, taken and run by another VP */
	uint64_t preemptions;     /* time slices ended by the notifier */
	uint64_t deferred;        /* stops that waited for a safe point */
	uint64_t allocations;     /* allocations this process made */
	/* how long stopped microprocesses waited to run again, from the
	 * signal that stopped them to their resumption (on any VP): median
	 * and 90th percentile of the last 1024 stops, and how many that is */
	uint64_t stopped_ns_median, stopped_ns_p90;
	unsigned stops_timed;
} kr_carea_stats;

/* This process's figures.  EINVAL: out NULL; EPERM: karui does not run
 * with kr_carea. */
int kr_carea_stats_get(kr_carea_stats *out);

#ifdef __cplusplus
}
#endif

#endif
