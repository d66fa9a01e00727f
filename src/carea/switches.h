/*
 * karui C-area — the kernel's switches of one thread, as the kernel
 * reports them (switches.c): whether the thread is on a processor, and if
 * it is not, whether it was preempted (still runnable) or blocked.  The
 * kernel's half of seed 004's SUSPENDED vs BLOCKED, on an unmodified Linux.
 *
 *   struct kr__swatch w;
 *   struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
 *   kr__swatch_open(&w, tid);      0, or perf events are not allowed here
 *   kr__swatch_read(&w, &st);      as often as wanted: a few loads when
 *   ...                            nothing is new
 *   kr__swatch_close(&w);
 *
 * Internal to the library: no public header names it.
 */
#ifndef KARUI_CAREA_SWITCHES_H
#define KARUI_CAREA_SWITCHES_H

#include <stdint.h>
#include <sys/types.h>

struct perf_event_mmap_page;

/* A watch: the perf event and its ring.  Readers share it; only
 * kr__swatch_open and kr__swatch_close write the first five fields. */
struct kr__swatch {
	struct perf_event_mmap_page *page; /* the ring's control page:
	                                      data_head, data_tail */
	unsigned char *data;               /* the ring's records */
	uint64_t size;                     /* bytes at data, a power of two */
	size_t len;                        /* bytes mapped at page */
	int fd;                            /* the perf event */
	uint32_t reading;                  /* 1 while a reader holds the ring */
};

/* What a thread's switches say, folded record by record. */
enum { KR__SW_UNKNOWN = -1, KR__SW_OFF = 0, KR__SW_ON = 1 };

struct kr__swatch_state {
	int on;              /* KR__SW_ON: its last switch put it on a
	                        processor; KR__SW_OFF: took it off;
	                        KR__SW_UNKNOWN: no record yet, or records were
	                        lost since the last one */
	int preempted;       /* KR__SW_OFF: 1 if it was still runnable
	                        (preempted, or yielded), 0 if it blocked */
	uint64_t at;         /* CLOCK_MONOTONIC ns (kr_now) of its last switch */
	uint64_t preempted_ns; /* off a processor while runnable, and */
	uint64_t blocked_ns;   /* while blocked: sums of out->in intervals,
	                          charged to the kind of their switch out */
	uint64_t nswitch_preempt, nswitch_block; /* switches out of each kind */
	uint64_t lost;       /* records the kernel could not write (ring full) */
};

#define KR__SWATCH_STATE_INIT {.on = KR__SW_UNKNOWN}

/* Watch kernel thread `tid` of this process (0: the calling thread).
 * 0, or EINVAL (tid < 0), ESRCH (no such thread in this process), or why
 * the kernel refused: EACCES or EPERM (perf_event_paranoid, seccomp, a
 * container, the locked-memory budget of perf rings), ENOSYS or ENOENT
 * (no perf events, or no switch records: before Linux 4.3), EMFILE,
 * ENOMEM.  The watch lives until kr__swatch_close, also after the thread
 * has gone; a child of fork has no ring: it must not use its parent's. */
int kr__swatch_open(struct kr__swatch *w, pid_t tid)
	__attribute__((visibility("hidden")));
void kr__swatch_close(struct kr__swatch *w) __attribute__((visibility("hidden")));

/* Fold into *st (which starts as KR__SWATCH_STATE_INIT) the records the
 * kernel added since the last read of w.  0 (also when nothing was new),
 * or EBUSY: another thread is reading w, and this one folded nothing.
 * No system call. */
int kr__swatch_read(struct kr__swatch *w, struct kr__swatch_state *st)
	__attribute__((visibility("hidden")));

#endif
