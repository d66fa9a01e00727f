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

/* ---------------- the page-fault notifier (seed 004 §3.3) ----------------
 *
 * A region whose pages are not there until first touched: a fault on one
 * is handed (userfaultfd) to notifier threads of the region's, which
 * tell the scheduler's callbacks synchronously that a fault started, ask
 * `fill` for the page's bytes, put the page in, and say the fault ended.
 * Meanwhile a microprocess that faulted in its own code waits alone: it is
 * taken off its VP (a signal, SIGRTMAX, ends the kernel's wait), which runs
 * the others, and made ready after the end; its wakeup permit is left
 * alone.  Where it cannot be (a thread that is no VP, a blocking section,
 * the C library's code, a system call's own access, the sanitizer builds)
 * the faulting VP waits in the kernel: the microprocesses queued on it go
 * to the other VPs, and under kr_carea a stopped VP of the process takes
 * its processor (BLOCKED).  A page is filled and told once, whoever
 * faults on it meanwhile.  Usable with or without kr_carea,
 * before or after kr_init.  Where the kernel lets a process have
 * userfaultfd for its user-mode faults only (vm.unprivileged_userfaultfd
 * 0, no /dev/userfaultfd), the kernel's own accesses to a missing page (a
 * read(2) into the region) fail with EFAULT: kr_faults_stats_get says so. */
typedef struct kr_faults kr_faults;
typedef struct kr_fault_ops {
	/* The bytes of the page at `page` (page-aligned, in the region) into
	 * buf (one page), on the notifier's thread: it may block.  Not 0: the
	 * page is given zeros, and the failure counted. */
	int (*fill)(void *arg, void *page, void *buf);
	/* Optional: thread `tid` faulted on `page`; the page is in. */
	void (*start)(void *arg, void *page, int tid);
	void (*end)(void *arg, void *page, int tid);
} kr_fault_ops;

/* len bytes (rounded up to pages, at most 1 TiB) of such pages.  EINVAL:
 * out, ops or ops->fill NULL, len 0 or too big; ENOSYS: no userfaultfd in
 * this kernel; EPERM: the process may not have it; ENOMEM; EAGAIN: no
 * thread for the notifier. */
int kr_faults_create(kr_faults **out, size_t len, const kr_fault_ops *ops, void *arg);
void *kr_faults_addr(const kr_faults *r);   /* NULL for NULL */
size_t kr_faults_size(const kr_faults *r);  /* 0 for NULL */
typedef struct kr_faults_stats {
	uint64_t faults;    /* faults served (a page's once) */
	uint64_t filled;    /* pages put in */
	uint64_t failed;    /* fills that failed (zeros put in) */
	uint64_t parked;    /* faults whose microprocess alone waited, taken
	                       off its VP while its VP ran others */
	int user_only;      /* 1: the kernel's own accesses are not served */
} kr_faults_stats;
/* EINVAL: r or out NULL. */
int kr_faults_stats_get(const kr_faults *r, kr_faults_stats *out);
/* The notifier ends (after the page it is filling) and the region goes,
 * once every microprocess still waiting on it has run on with its page or
 * zeros; no thread may touch it any more.  EINVAL: NULL. */
int kr_faults_destroy(kr_faults *r);

#ifdef __cplusplus
}
#endif

#endif
