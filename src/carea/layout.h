/*
 * karui C-area — the shared segment's layout (seed 004, Fig. 2), for the
 * library (src/carea/) and for the tools that read it (karui-top).
 *
 * One segment per user, a POSIX shared-memory object named
 * "/karui-carea-<uid>" (KARUI_CAREA_SEGMENT overrides the name), mode
 * 0600, created by the first participant.  It holds the allocator's state
 * and a slot per participating process; each slot holds the process's
 * VPs (the paper's unstable kernel threads: c_kthread[], with their status
 * and c_registers) and its count of runnable microprocesses
 * (c_max_parallelism).  All words that change are read and written with
 * atomic operations; nothing in it is trusted: a reader validates every
 * number it takes (ranges, a live pid of the right start time) and never
 * follows a pointer found here (`held` and the registers are for display:
 * the context a process resumes is in its own memory).
 *
 * The layout is versioned by `magic` and `version`: a process that finds
 * another version runs without the C-area and says so once on stderr.
 */
#ifndef KARUI_CAREA_LAYOUT_H
#define KARUI_CAREA_LAYOUT_H

#include <stdint.h>

#define KR_CAREA_MAGIC 0x6165726143697572ull /* "ruiCArea" */
#define KR_CAREA_VERSION 2u
#define KR_CAREA_PROCS 64 /* participating processes at once */
#define KR_CAREA_VPS 32   /* VPs of a process the C-area shows and allocates */
#define KR_CAREA_NREGS 23 /* general registers of a suspended context */

/* A VP's status (seed 004, Fig. 3; FREE is the paper's too).  IDLE is
 * karui's: a VP with nothing to run, which gives its processor back. */
enum kr_carea_status {
	KR_CA_FREE = 0,   /* no VP in this slot */
	KR_CA_RUNNING,    /* has a processor and runs microprocesses */
	KR_CA_IDLE,       /* nothing to run: asleep until there is */
	KR_CA_BLOCKED,    /* blocked in the kernel */
	KR_CA_SUSPENDED,  /* stopped by the allocator holding a microprocess */
	KR_CA_RECOVERING, /* another VP of its process is taking that microprocess */
	KR_CA_RECOVERED,  /* stopped, and holds nothing (taken, or never had one) */
	KR_CA_NSTATUS
};

/* seed 004's c_kthread[i] */
struct kr_carea_vp {
	uint32_t status;        /* enum kr_carea_status */
	int32_t tid;            /* its kernel thread */
	uint64_t held;          /* SUSPENDED: the microprocess's id (kr_mp_id) */
	uint64_t since;         /* CLOCK_MONOTONIC ns of the last status change */
	uint64_t regs[KR_CAREA_NREGS]; /* c_registers: the suspended context's
	                           general registers (x86-64: ucontext's gregs
	                           order; aarch64: x0..x20, sp, pc) */
	uint64_t suspensions;   /* times stopped holding a microprocess */
	uint64_t recoveries;    /* microprocesses of others this VP recovered */
	uint64_t preemptions;   /* time slices it ended (notifier's timer) */
	uint64_t switches;      /* scheduling points it passed (approximate) */
};

/* Process slot states. */
enum { KR_CA_SLOT_FREE = 0, KR_CA_SLOT_CLAIMED, KR_CA_SLOT_LIVE };

struct kr_carea_proc {
	uint32_t state;         /* KR_CA_SLOT_*: claimed by CAS from FREE */
	int32_t pid;
	uint64_t start;         /* the process's start time (/proc/PID/stat
	                           field 22): its identity across pid reuse */
	uint32_t nvp;           /* VPs it has (at most KR_CAREA_VPS shown) */
	uint32_t parallelism;   /* c_max_parallelism: runnable microprocesses
	                           (running ones included), published by it */
	uint32_t want;          /* the processors it asks for: parallelism
	                           capped at nvp, less what it gives back when
	                           its VPs are preempted by others */
	uint32_t grant;         /* processors allocated to it (allocator) */
	uint32_t running;       /* its VPs RUNNING now */
	uint64_t beat;          /* CLOCK_MONOTONIC ns of its last publication */
	char comm[16];          /* its name, for karui-top */
	struct kr_carea_vp vp[KR_CAREA_VPS];
};

struct kr_carea_seg {
	uint64_t magic;         /* KR_CAREA_MAGIC, written last by the creator */
	uint32_t version;       /* KR_CAREA_VERSION */
	uint32_t size;          /* sizeof (struct kr_carea_seg) */
	uint64_t lock;          /* the allocator's: 0, or its holder's tid << 32
	                           | the CLOCK_MONOTONIC ms it took it at */
	uint32_t ncpu;          /* processors the allocation shares */
	uint32_t dirty;         /* a demand changed since the last allocation */
	uint64_t epoch;         /* allocations made */
	uint64_t allocated;     /* CLOCK_MONOTONIC ns of the last one */
	struct kr_carea_proc proc[KR_CAREA_PROCS];
};

#endif
