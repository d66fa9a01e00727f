/*
 * karui C-area (seed 004): the segment, the processor allocator, unstable
 * VPs and the time-slice notifier, on an unmodified Linux kernel.
 *
 * The paper's kernel keeps, per process, a C-area with the status of each
 * kernel thread and the registers of a preempted one, reads the process's
 * count of runnable user threads, and allocates processors so that no
 * process runs more kernel threads than it has processors.  Linux does
 * none of this, so every participant does its share in user space
 * (layout.h describes the segment they share):
 *
 * Publication.  Each VP's status goes into its process's slot as L0
 * announces it (kr__vp_status_hook): RUNNING, IDLE (asleep for lack of
 * work), BLOCKED (in a blocking section), and the allocator's stops.  The
 * process's demand, `want`, is the paper's c_max_parallelism as karui can
 * know it without counting on its fast paths: 0 while every VP is idle,
 * else the live microprocesses capped at its VPs; less one VP for each
 * time its VPs lost a third of a processor to preemption by others (which
 * the allocator cannot see: programs that are no participants), tried
 * again after 2 s (twice as long after each try that failed, up to 32 s).  A busy VP refreshes it every 512 scheduling points at
 * most once per 500 us (the allocator's turn, core/alloc.h).
 *
 * Allocation.  Whichever VP finds `want` changed (or a process joins or
 * leaves, or a VP parked above its grant wakes, every 100 ms) runs the
 * allocator, under the segment's lock:
 * a word naming its holder's thread and when it took it, taken back from a
 * holder that is gone or held it past a lease (seg_trylock).  One that
 * finds it taken marks the segment dirty and goes
 * on: the holder allocates again before it lets go.  The allocator reads
 * every slot and believes nothing: counts are clamped, a slot whose
 * process is dead (its pid gone, or reused: the start time differs) is
 * freed, one whose process is stopped (SIGSTOP) wants nothing until it
 * runs again.  It shares `ncpu` (the processors this process may use)
 * among the wants: one each to every process that wants any, then the
 * rest one at a time to those that want more, lowest grant first (what
 * nobody wants stays free).  With more participants than processors each
 * still gets one: the kernel then
 * time-slices processes, each running a single VP (an approximation of
 * the paper, whose kernel space-shares).  A process whose grant changed is
 * told with SIGURG sent to one of its VPs (tgkill checks that the thread
 * belongs to the pid; SIGURG is ignored by a process that does not catch
 * it, should the pid have been reused since the check).  VPs asleep for
 * more than 2 ms want nothing, whatever their process said.
 *
 * Unstable VPs.  The handler of SIGURG on a VP reads its process's grant
 * and moves L2's target to it (kr__vp_target, safe in a handler): parked
 * VPs resume up to it at once.  If more VPs run than granted, the VP the
 * signal hit stops at once: kr__preempt takes the microprocess it runs in
 * the middle of its code (core/preempt.c), its registers go into the
 * slot's c_registers and it is held, SUSPENDED; the VP parks.  Another VP
 * of the process recovers it at its next turn or when it goes idle:
 * SUSPENDED -> RECOVERING (compare-and-swap), the held microprocess onto
 * its own queue, -> RECOVERED.  The stopped VP, when it runs again, takes
 * SUSPENDED -> RUNNING and runs the microprocess itself, or finds it
 * RECOVERED and goes idle.  The registers in the segment are a copy for
 * display: the context resumed is the one in the process's own memory,
 * and a microprocess is found through the process's own table, never
 * through the segment.  Where the microprocess cannot be taken at that
 * instruction (karui's code, the C library's or the dynamic linker's,
 * which take locks; a kr_spin held; a μprocess's code, which runs on
 * another thread pointer; the reasons in core/alloc.h) the stop is tried
 * again 200 us later, and an idle VP above the grant parks by itself.  A
 * held microprocess that nobody recovers within 2 ms (its process's other
 * VPs blocked, say on a lock that it holds) is run again by its own VP,
 * above the grant: a process never stalls on its stop.  A VP that blocks
 * lets a parked VP of its process run (blocking.c, the target), and when
 * it comes back, one of them parks: the next to go idle, or the busy VP
 * itself at its turn.  A block karui is not told of (a page fault, a C
 * library's lock) shows in the VP's kernel switch records (switches.c): a
 * VP parked above the grant looks every 10 ms while its process wants
 * more, publishes a running VP blocked for 200 us BLOCKED and runs in its
 * place.
 *
 * The notifier.  With a time slice, each running VP has a POSIX timer
 * that sends it SIGURG each slice; if the VP has passed no switch since
 * the last one (its resumption count, arch/blocking.h), the microprocess
 * it runs has had the whole slice: it is taken the same way and queued
 * behind the others.  The timer is disarmed while the VP sleeps, so an
 * idle process takes no signals.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "karui/carea.h"
#include "../core/alloc.h"
#include "../arch/blocking.h"
#include "layout.h"
#include "switches.h"

#define MS 1000000ull
#define US 1000ull
#define CAP_PROBE_NS (2000 * MS)          /* a capped process tries one VP more after, */
#define CAP_PROBE_MAX_NS (16 * CAP_PROBE_NS) /* ... or up to this, when tries fail */

enum { WHY_NONE, WHY_STOP, WHY_SLICE, WHY_TICK };
enum { LAT_KEPT = 1024 };
enum {
	RETRY_NS = 200 * US,      /* a refused stop is tried again after this */
	RECOVER_NS = 2 * MS,      /* a held microprocess nobody took: look again */
	RECOVER_MAX_NS = 64 * MS, /* ... backing off to this */
	REALLOC_NS = 100 * MS,    /* a VP parked above its grant allocates */
	IDLE_NS = 2 * MS,         /* a VP asleep this long wants no processor */
	BLOCK_LOOK_NS = 10 * MS,  /* a parked VP looks for blocked ones this often */
	CAP_WINDOW_NS = 50 * MS,  /* preempted time is summed over this */
	TICK_NS = 100 * MS,       /* the allocator's tick (on_urg) */
	TURN_NS = 500 * US,       /* a busy VP's publications, at most this often */
	STALE_NS = 100 * MS,      /* a slot not refreshed for this long is checked */
	MIN_SLICE = 1 * MS,
	MAX_SLICE_US = 10000000, /* KARUI_CAREA_SLICE_US above this is this */
	LEASE_MS = 50,            /* the allocator's lock is taken from a holder after */
};

/* This process's side of each VP, by VP id (private memory: what the
 * segment says is never followed). */
struct cvp {
	struct kr_worker *w;
	pid_t tid;
	uintptr_t tp;           /* the thread pointer its host code runs with */
	timer_t timer;
	int has_timer;
	uint32_t why;           /* WHY_*: what the next stop of w->held is for */
	kr_mp *held;            /* SUSPENDED: the microprocess it holds */
	uint64_t resumes;       /* kr__resumes at the last slice tick */
	uint64_t turns, last_turn;
	uint32_t idle;          /* asleep for lack of work (L0 SLEEPING) */
	struct kr__swatch sw;   /* its kernel switches (switches.c) */
	struct kr__swatch_state sws;
	int has_sw;
};

static struct {
	/* settings (kr_carea_configure) */
	char name[224];
	uint64_t slice;
	/* while karui runs */
	int on;                 /* started (kr_carea is the allocator) */
	struct kr_carea_seg *seg;
	struct kr_carea_proc *me;
	unsigned slot, nvp, ncpu;
	uint32_t running;       /* our VPs RUNNING */
	uint32_t grant;         /* as last applied */
	uint32_t nheld;         /* microprocesses held (SUSPENDED) */
	uint32_t stopping;      /* stops under way (on_urg) */
	uint64_t ticked;        /* kr_now() of the last allocator's tick */
	unsigned cap;           /* the most it asks for (cap_update) */
	uint64_t cap_at, win_at, win_pre, probe;
	uint64_t start;         /* our start time (/proc/self/stat) */
	struct cvp vp[KR_VP_MAX];
	struct sigaction old;
	uint64_t suspensions, recoveries, preemptions, deferred, allocations;
	uint64_t lat[LAT_KEPT]; /* the last stops' durations (resumed()) */
	uint32_t nlat;
} C;

/* ---------------- small helpers ---------------- */

static pid_t raw_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* A process's start time (field 22 of /proc/PID/stat) and state letter;
 * 0 when it is gone.  Read relative to a descriptor of /proc, so that an
 * emulator that makes up a process's view of its own entries (qemu-user)
 * still gives the kernel's figures, the ones other processes read. */
static uint64_t proc_start(pid_t pid, char *state)
{
	char path[32], buf[512];
	snprintf(path, sizeof path, "%d/stat", (int)pid);
	int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = dir < 0 ? -1 : openat(dir, path, O_RDONLY | O_CLOEXEC);
	if (dir >= 0)
		close(dir);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name may hold anything */
	if (!p || p[1] != ' ')
		return 0;
	p += 2;
	if (state)
		*state = *p;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

static unsigned clamp(uint32_t v, unsigned hi) { return v > hi ? hi : v; }

/* ---------------- the allocator ---------------- */

/* Is slot p's process still there?  Dead ones are freed; a stopped one
 * wants nothing.  Only checked when the slot has not been refreshed
 * lately (its live processes publish as they run). */
static int slot_alive(struct kr_carea_proc *p, uint64_t now, int *stopped)
{
	*stopped = 0;
	int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
	if (pid <= 0)
		return 0;
	if (pid == getpid())
		return 1;
	uint64_t beat = __atomic_load_n(&p->beat, __ATOMIC_RELAXED);
	if (beat <= now && now - beat < STALE_NS)
		return 1;
	char st = 0;
	uint64_t start = proc_start(pid, &st);
	if (!start || start != __atomic_load_n(&p->start, __ATOMIC_RELAXED))
		return 0;
	*stopped = st == 'T' || st == 't';
	return 1;
}

/* Tell process p (slot index i) that its grant changed: SIGURG to one of
 * its VPs, a running one if it has one. */
static void notify(struct kr_carea_proc *p)
{
	int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
	int32_t pick = 0;
	unsigned nvp = clamp(__atomic_load_n(&p->nvp, __ATOMIC_RELAXED), KR_CAREA_VPS);
	for (unsigned v = 0; v < nvp; v++) {
		uint32_t st = __atomic_load_n(&p->vp[v].status, __ATOMIC_RELAXED);
		int32_t tid = __atomic_load_n(&p->vp[v].tid, __ATOMIC_RELAXED);
		if (tid <= 0 || st == KR_CA_FREE)
			continue;
		if (!pick || st == KR_CA_RUNNING)
			pick = tid;
		if (st == KR_CA_RUNNING)
			break;
	}
	if (pid > 0 && pick > 0)
		syscall(SYS_tgkill, pid, pick, SIGURG);
}

static void allocate_locked(void)
{
	struct kr_carea_seg *s = C.seg;
	uint64_t now = kr_now();
	unsigned want[KR_CAREA_PROCS], grant[KR_CAREA_PROCS];
	unsigned total = C.ncpu, nwant = 0;
	for (unsigned i = 0; i < KR_CAREA_PROCS; i++) {
		struct kr_carea_proc *p = &s->proc[i];
		want[i] = grant[i] = 0;
		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != KR_CA_SLOT_LIVE)
			continue;
		int stopped;
		if (!slot_alive(p, now, &stopped)) {
			/* the dead one's slot is free again */
			__atomic_store_n(&p->grant, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&p->state, KR_CA_SLOT_FREE, __ATOMIC_RELEASE);
			continue;
		}
		unsigned nvp = clamp(__atomic_load_n(&p->nvp, __ATOMIC_RELAXED), KR_CAREA_VPS);
		want[i] = stopped ? 0 : clamp(__atomic_load_n(&p->want, __ATOMIC_RELAXED), nvp);
		/* VPs asleep for lack of work for a while want nothing: a
		 * process that went idle need not say so (and a barrier's
		 * short wait does not count) */
		unsigned asleep = 0;
		for (unsigned v = 0; v < nvp; v++) {
			uint64_t since = __atomic_load_n(&p->vp[v].since, __ATOMIC_RELAXED);
			if (__atomic_load_n(&p->vp[v].status, __ATOMIC_RELAXED) == KR_CA_IDLE &&
			    since <= now && now - since > IDLE_NS)
				asleep++;
		}
		if (want[i] > nvp - asleep)
			want[i] = nvp - asleep;
		if (want[i]) {
			grant[i] = 1; /* one each first, even beyond ncpu */
			nwant++;
		}
	}
	/* then one at a time to the lowest grant among those that want more;
	 * what nobody wants stays free (for the programs that are no
	 * participants) */
	unsigned used = nwant;
	while (used < total) {
		unsigned best = KR_CAREA_PROCS;
		for (unsigned i = 0; i < KR_CAREA_PROCS; i++)
			if (grant[i] < want[i] && (best == KR_CAREA_PROCS || grant[i] < grant[best]))
				best = i;
		if (best == KR_CAREA_PROCS)
			break;
		grant[best]++;
		used++;
	}
	for (unsigned i = 0; i < KR_CAREA_PROCS; i++) {
		struct kr_carea_proc *p = &s->proc[i];
		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != KR_CA_SLOT_LIVE)
			continue;
		uint32_t old = __atomic_exchange_n(&p->grant, grant[i], __ATOMIC_RELEASE);
		if (old != grant[i] && &s->proc[i] != C.me)
			notify(p);
	}
	__atomic_store_n(&s->ncpu, C.ncpu, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->epoch, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->allocated, now, __ATOMIC_RELAXED);
	C.allocations++;
}

static void apply_grant(void);

/* The allocator's lock is a word of the segment naming its holder's
 * thread and when it took it, not a pthread mutex: a scribbled mutex sends
 * glibc down pointers found in the segment.  A holder that is gone, or
 * that held it past LEASE_MS, loses it to the next one that tries; two
 * allocators at once do no harm (each writes grants computed from the
 * same wants, and the dirty flag brings a last pass). */
static int seg_trylock(struct kr_carea_seg *s, uint64_t *mine)
{
	uint64_t cur = __atomic_load_n(&s->lock, __ATOMIC_RELAXED);
	uint32_t ms = (uint32_t)(kr_now() / MS);
	*mine = (uint64_t)(uint32_t)raw_gettid() << 32 | ms;
	if (cur) {
		int32_t tid = (int32_t)(cur >> 32);
		int saved = errno;
		int gone = tid <= 0 || ms - (uint32_t)cur >= LEASE_MS ||
			   (kill(tid, 0) != 0 && errno == ESRCH);
		errno = saved;
		if (!gone)
			return 0;
	}
	return __atomic_compare_exchange_n(&s->lock, &cur, *mine, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static void seg_unlock(struct kr_carea_seg *s, uint64_t mine)
{
	/* a lock taken from us stays its new holder's */
	__atomic_compare_exchange_n(&s->lock, &mine, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* Allocate now, or leave it to whoever holds the lock (it sees dirty). */
static void allocate_or_leave(void)
{
	struct kr_carea_seg *s = C.seg;
	__atomic_store_n(&s->dirty, 1, __ATOMIC_SEQ_CST);
	uint64_t mine;
	while (seg_trylock(s, &mine)) {
		while (__atomic_exchange_n(&s->dirty, 0, __ATOMIC_SEQ_CST))
			allocate_locked();
		seg_unlock(s, mine);
		/* a change marked after the last look, while we held the lock */
		if (!__atomic_load_n(&s->dirty, __ATOMIC_SEQ_CST))
			break;
	}
}

static void allocate(void)
{
	allocate_or_leave();
	apply_grant();
}

/* ---------------- publication ---------------- */

static uint32_t to_status(int l0, const struct cvp *v)
{
	switch (l0) {
	case KR_VP_RUNNING:
		return KR_CA_RUNNING;
	case KR_VP_SLEEPING:
		return KR_CA_IDLE;
	case KR_VP_BLOCKED:
		return KR_CA_BLOCKED;
	case KR_VP_SUSPENDED:
		return v->held ? KR_CA_SUSPENDED : KR_CA_RECOVERED;
	default:
		return KR_CA_FREE;
	}
}

static void set_status(unsigned id, uint32_t st)
{
	if (id < KR_CAREA_VPS) {
		struct kr_carea_vp *sv = &C.me->vp[id];
		__atomic_store_n(&sv->status, st, __ATOMIC_RELEASE);
		__atomic_store_n(&sv->since, kr_now(), __ATOMIC_RELAXED);
	}
}

/* A VP's timer: each slice with a time slice, else each TICK_NS (the
 * allocator's tick, see on_urg); it runs only while the VP does. */
static uint64_t tick_period(void) { return C.slice ? C.slice : TICK_NS; }

static void slice_arm(struct cvp *v, int on)
{
	if (!v->has_timer)
		return;
	struct itimerspec it = {0};
	if (on) {
		uint64_t p = tick_period();
		it.it_value.tv_sec = (time_t)(p / 1000000000u);
		it.it_value.tv_nsec = (long)(p % 1000000000u);
		it.it_interval = it.it_value;
	}
	timer_settime(v->timer, 0, &it, NULL);
}

static void publish(void);

/* L0's status changes, on the VP's own thread (vp_internal.h). */
static void status_hook(kr_vp *vp, int l0)
{
	struct cvp *v = &C.vp[vp->id];
	uint32_t st = to_status(l0, v);
	uint32_t was_idle = v->idle;
	v->idle = l0 == KR_VP_SLEEPING;
	if (was_idle != v->idle)
		slice_arm(v, !v->idle);
	if (vp->id >= KR_CAREA_VPS)
		return;
	struct kr_carea_vp *sv = &C.me->vp[vp->id];
	uint32_t old = __atomic_load_n(&sv->status, __ATOMIC_ACQUIRE);
	/* a held microprocess's status belongs to the recovery protocol */
	if (old == KR_CA_SUSPENDED || old == KR_CA_RECOVERING)
		return;
	if ((old == KR_CA_RUNNING) != (st == KR_CA_RUNNING)) {
		if (st == KR_CA_RUNNING)
			__atomic_fetch_add(&C.running, 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_sub(&C.running, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
	}
	set_status(vp->id, st);
}

/* What this process asks for (see the top). */
static unsigned want_now(void)
{
	unsigned busy = 0;
	for (unsigned i = 0; i < C.nvp && i < KR_CAREA_VPS; i++) {
		uint32_t st = __atomic_load_n(&C.me->vp[i].status, __ATOMIC_RELAXED);
		busy += st != KR_CA_IDLE && st != KR_CA_FREE;
	}
	if (!busy)
		return 0;
	kr_stats st;
	unsigned long live = kr_stats_get(&st) == 0 ? st.mps_live + 1 : C.nvp;
	return live < C.nvp ? (unsigned)live : C.nvp;
}

/* Other programs' load, which the allocator does not see (programs that
 * are no participants): the time our VPs spent preempted, runnable but
 * off their processors, per 50 ms, from their kernel switch records.  A
 * process that lost more than a third of a processor so runs one VP less
 * (`cap`); after 2 s with little such loss it tries one more. */
static void cap_update(uint64_t now)
{
	if (now - C.win_at < CAP_WINDOW_NS)
		return;
	uint64_t pre = 0;
	for (unsigned i = 0; i < C.nvp && i < KR_VP_MAX; i++) {
		struct cvp *v = &C.vp[i];
		if (!v->has_sw)
			return; /* no records: no cap */
		kr__swatch_read(&v->sw, &v->sws);
		pre += v->sws.preempted_ns;
	}
	uint64_t lost = pre - C.win_pre, span = now - C.win_at;
	C.win_pre = pre;
	C.win_at = now;
	unsigned run = __atomic_load_n(&C.running, __ATOMIC_RELAXED);
	if (lost * 3 > span && C.cap > 1 && run > 1) {
		/* a try that failed at once waits twice as long for the next */
		C.probe = now - C.cap_at < 2 * CAP_WINDOW_NS && C.probe < CAP_PROBE_MAX_NS
				  ? 2 * C.probe
				  : C.probe;
		C.cap = (run < C.cap ? run : C.cap) - 1;
		C.cap_at = now;
	} else if (lost * 20 < span && C.cap < C.nvp && now - C.cap_at > C.probe) {
		C.cap++;
		C.cap_at = now;
	}
}

static void publish(void)
{
	/* a slot freed by a scribble (a pid or start time not ours): ours again */
	if (__atomic_load_n(&C.me->pid, __ATOMIC_RELAXED) != getpid() ||
	    __atomic_load_n(&C.me->start, __ATOMIC_RELAXED) != C.start ||
	    __atomic_load_n(&C.me->state, __ATOMIC_RELAXED) != KR_CA_SLOT_LIVE) {
		__atomic_store_n(&C.me->pid, getpid(), __ATOMIC_RELAXED);
		__atomic_store_n(&C.me->start, C.start, __ATOMIC_RELAXED);
		__atomic_store_n(&C.me->nvp, C.nvp, __ATOMIC_RELAXED);
		__atomic_store_n(&C.me->state, KR_CA_SLOT_LIVE, __ATOMIC_RELEASE);
	}
	uint64_t now = kr_now();
	__atomic_store_n(&C.me->beat, now, __ATOMIC_RELAXED);
	unsigned w = want_now();
	__atomic_store_n(&C.me->parallelism, w, __ATOMIC_RELAXED);
	cap_update(now);
	if (w > C.cap)
		w = C.cap;
	if (__atomic_exchange_n(&C.me->want, w, __ATOMIC_RELAXED) != w)
		allocate();
}

/* The grant read back (anyone may have changed it) and given to L2. */
static void apply_grant(void)
{
	unsigned g = clamp(__atomic_load_n(&C.me->grant, __ATOMIC_ACQUIRE), C.nvp);
	if (g < 1)
		g = 1; /* a process that runs anything runs one VP at least */
	if (__atomic_exchange_n(&C.grant, g, __ATOMIC_RELAXED) != g)
		kr__vp_target(g);
}

/* ---------------- recovery ---------------- */

/* VP i is off its processor in the kernel, blocked (not preempted), for
 * more than 200 us: as its switch records say (switches.c). */
static int blocked_in_kernel(unsigned i, uint64_t now)
{
	struct cvp *v = &C.vp[i];
	if (!v->has_sw)
		return 0;
	kr__swatch_read(&v->sw, &v->sws);
	return v->sws.on == KR__SW_OFF && !v->sws.preempted && now - v->sws.at > 200 * US;
}

/* A running VP of ours other than `self` blocked in the kernel (a block
 * karui was not told of: a page fault, a lock of the C library) is
 * published BLOCKED; 1 if there was one. */
static int take_blocked(unsigned self)
{
	uint64_t now = kr_now();
	for (unsigned i = 0; i < C.nvp && i < KR_CAREA_VPS; i++) {
		uint32_t exp = KR_CA_RUNNING;
		if (i == self || __atomic_load_n(&C.me->vp[i].status, __ATOMIC_RELAXED) != exp ||
		    !blocked_in_kernel(i, now))
			continue;
		if (__atomic_compare_exchange_n(&C.me->vp[i].status, &exp, KR_CA_BLOCKED, 0,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_sub(&C.running, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
			return 1;
		}
	}
	return 0;
}

/* Can no other VP of ours recover what VP `self` holds?  None runs, or
 * every one that does is blocked in the kernel (a lock the held
 * microprocess holds, say): those are published BLOCKED, and the caller
 * takes their processor. */
static int others_stuck(unsigned self)
{
	uint64_t now = kr_now();
	unsigned running = 0, blocked = 0;
	for (unsigned i = 0; i < C.nvp && i < KR_CAREA_VPS; i++) {
		if (i == self || __atomic_load_n(&C.me->vp[i].status, __ATOMIC_RELAXED) != KR_CA_RUNNING)
			continue;
		running++;
		if (blocked_in_kernel(i, now))
			blocked++;
	}
	if (running && blocked < running)
		return 0;
	for (unsigned i = 0; i < C.nvp && i < KR_CAREA_VPS; i++) {
		uint32_t exp = KR_CA_RUNNING;
		if (i != self && __atomic_compare_exchange_n(&C.me->vp[i].status, &exp, KR_CA_BLOCKED,
							     0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_sub(&C.running, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
		}
	}
	return 1;
}

/* Take the microprocesses that VPs of this process hold and run them
 * here (seed 004 §3.2's protocol). */
static void recover(struct kr_worker *w)
{
	for (unsigned i = 0; i < C.nvp && i < KR_CAREA_VPS; i++) {
		struct kr_carea_vp *sv = &C.me->vp[i];
		uint32_t exp = KR_CA_SUSPENDED;
		if (__atomic_load_n(&sv->status, __ATOMIC_RELAXED) != exp ||
		    !__atomic_compare_exchange_n(&sv->status, &exp, KR_CA_RECOVERING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		kr_mp *mp = __atomic_exchange_n(&C.vp[i].held, NULL, __ATOMIC_ACQUIRE);
		set_status(i, KR_CA_RECOVERED);
		if (!mp)
			continue; /* a scribbled status: nothing held */
		__atomic_fetch_sub(&C.nheld, 1, __ATOMIC_RELAXED);
		kr__mp_ready(mp);
		__atomic_fetch_add(&C.recoveries, 1, __ATOMIC_RELAXED);
		if (w->vp->id < KR_CAREA_VPS)
			__atomic_fetch_add(&C.me->vp[w->vp->id].recoveries, 1, __ATOMIC_RELAXED);
	}
}

/* ---------------- the signal ---------------- */

static struct cvp *vp_of_tid(pid_t tid)
{
	for (unsigned i = 0; i < C.nvp && i < KR_VP_MAX; i++)
		if (__atomic_load_n(&C.vp[i].tid, __ATOMIC_RELAXED) == tid)
			return &C.vp[i];
	return NULL;
}

/* The VP's timer fires in `ns` (then each slice again, if there is one). */
static void retry_in(struct cvp *v, uint64_t ns)
{
	if (!v->has_timer)
		return;
	struct itimerspec it = {.it_value = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};
	uint64_t p = tick_period();
	it.it_interval.tv_sec = (time_t)(p / 1000000000u);
	it.it_interval.tv_nsec = (long)(p % 1000000000u);
	timer_settime(v->timer, 0, &it, NULL);
}

/* A stopped microprocess runs again (kr__preempt's hook, on the VP that
 * resumes it): how long it was stopped, for kr_carea_stats_get. */
static void resumed(uintptr_t at)
{
	uint64_t ns = kr_now() - at;
	unsigned i = __atomic_fetch_add(&C.nlat, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&C.lat[i % LAT_KEPT], ns, __ATOMIC_RELAXED);
}

/* c_registers: x86-64's gregs in their order; aarch64's x0..x20, sp, pc */
static void publish_regs(struct kr_carea_vp *sv, const ucontext_t *uc)
{
	for (unsigned i = 0; i < KR_CAREA_NREGS; i++) {
#if defined(__x86_64__)
		uint64_t r = (uint64_t)uc->uc_mcontext.gregs[i];
#else
		uint64_t r = i < KR_CAREA_NREGS - 2 ? uc->uc_mcontext.regs[i]
			   : i == KR_CAREA_NREGS - 2 ? uc->uc_mcontext.sp
						     : uc->uc_mcontext.pc;
#endif
		__atomic_store_n(&sv->regs[i], r, __ATOMIC_RELAXED);
	}
}

static void chain(int sig, siginfo_t *si, void *uc)
{
	if (C.old.sa_flags & SA_SIGINFO) {
		if (C.old.sa_sigaction)
			C.old.sa_sigaction(sig, si, uc);
	} else if (C.old.sa_handler != SIG_IGN && C.old.sa_handler != SIG_DFL) {
		C.old.sa_handler(sig);
	}
}

static void on_urg(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct cvp *v = C.on ? vp_of_tid(raw_gettid()) : NULL;
	if (!v || !v->w) {
		chain(sig, si, ucv);
		return;
	}
	if (kr__thread_pointer() != v->tp) {
		/* a μprocess's code, on its own thread pointer: nothing of
		 * ours may run (errno is thread-local); try again later */
		retry_in(v, RETRY_NS);
		return;
	}
	int saved = errno;
	if (si->si_code != SI_TIMER && si->si_code != SI_TKILL)
		chain(sig, si, ucv);
	apply_grant();
	uint32_t why = WHY_NONE;
	/* one stop per VP too many: a claim on C.stopping, which the stop
	 * gives back once the VP no longer counts as running */
	uint32_t run = __atomic_load_n(&C.running, __ATOMIC_RELAXED);
	uint32_t stopping = __atomic_load_n(&C.stopping, __ATOMIC_RELAXED);
	while (!v->idle && run > C.grant + stopping)
		if (__atomic_compare_exchange_n(&C.stopping, &stopping, stopping + 1, 1,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			why = WHY_STOP;
			break;
		}
	if (why == WHY_NONE && si->si_code == SI_TIMER && C.slice) {
		uint64_t r = kr__resumes;
		if (r == v->resumes && v->w->cur)
			why = WHY_SLICE;
		v->resumes = r;
	}
	/* The allocator's tick: a process that wants more than its grant,
	 * or runs more, looks at the allocation every TICK_NS even if none of
	 * its VPs reaches a scheduling point (microprocesses that compute
	 * for long): one running VP's microprocess is taken for the moment
	 * the idle hook allocates, and runs on at once. */
	uint64_t now = kr_now();
	if (why == WHY_NONE && si->si_code == SI_TIMER && v->w->cur &&
	    now - __atomic_load_n(&C.ticked, __ATOMIC_RELAXED) >= TICK_NS &&
	    (__atomic_load_n(&C.me->want, __ATOMIC_RELAXED) != C.grant || run > C.grant)) {
		__atomic_store_n(&C.ticked, now, __ATOMIC_RELAXED);
		why = WHY_TICK;
	}
	if (why != WHY_NONE) {
#if defined(__x86_64__)
		uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
		uintptr_t ip = (uintptr_t)uc->uc_mcontext.pc;
#endif
		if (!kr__in_runtime(ip)) {
			v->why = why;
			if (why == WHY_STOP && v->w->vp->id < KR_CAREA_VPS)
				publish_regs(&C.me->vp[v->w->vp->id], uc);
			kr__preempt(uc, why == WHY_STOP ? resumed : NULL, now);
			/* returned: it refused */
			v->why = WHY_NONE;
		}
		if (why == WHY_STOP) {
			__atomic_fetch_add(&C.deferred, 1, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&C.stopping, 1, __ATOMIC_RELAXED);
			retry_in(v, RETRY_NS);
		}
	}
	errno = saved;
}

/* ---------------- the hooks (core/alloc.h) ---------------- */

static kr_mp *idle_hook(struct kr_worker *w, kr_mp *held)
{
	struct cvp *v = &C.vp[w->vp->id];
	unsigned id = w->vp->id;
	if (held && v->why == WHY_TICK) {
		v->why = WHY_NONE;
		allocate();
		return held; /* on at once */
	}
	if (held && v->why == WHY_SLICE) {
		v->why = WHY_NONE;
		kr__mp_ready(held); /* behind the others */
		__atomic_fetch_add(&C.preemptions, 1, __ATOMIC_RELAXED);
		if (id < KR_CAREA_VPS)
			__atomic_fetch_add(&C.me->vp[id].preemptions, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	if (held) {
		v->why = WHY_NONE;
		__atomic_fetch_add(&C.suspensions, 1, __ATOMIC_RELAXED);
		if (id >= KR_CAREA_VPS) { /* not in the segment: queue it */
			__atomic_fetch_sub(&C.stopping, 1, __ATOMIC_RELAXED);
			kr__mp_ready(held);
			kr__vp_retire(w, KR_FOREVER);
			return NULL;
		}
		struct kr_carea_vp *sv = &C.me->vp[id];
		__atomic_fetch_add(&sv->suspensions, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&sv->held, held->id, __ATOMIC_RELAXED);
		__atomic_fetch_add(&C.nheld, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&v->held, held, __ATOMIC_RELEASE);
		/* RUNNING -> SUSPENDED: it no longer counts as running */
		if (__atomic_load_n(&sv->status, __ATOMIC_RELAXED) == KR_CA_RUNNING) {
			__atomic_fetch_sub(&C.running, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
		}
		set_status(id, KR_CA_SUSPENDED);
		__atomic_fetch_sub(&C.stopping, 1, __ATOMIC_RELAXED);
		kr_sched_unpark(1); /* an idle VP of ours may recover it now */
		uint64_t wait = RECOVER_NS;
		for (;;) {
			int r = kr__vp_retire(w, kr_now() + wait);
			uint32_t exp = KR_CA_SUSPENDED;
			if (!__atomic_load_n(&v->held, __ATOMIC_ACQUIRE))
				break; /* recovered */
			/* within the grant again, or the others cannot recover it:
			 * run it on here; else wait on, parked, and see to the
			 * allocation now and then */
			if (r == 2 && !others_stuck(id)) {
				if (wait < RECOVER_MAX_NS)
					wait *= 2;
				else
					allocate();
				continue;
			}
			if (!__atomic_compare_exchange_n(&sv->status, &exp, KR_CA_RUNNING, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
			    exp == KR_CA_RECOVERING)
				continue; /* being taken: the taker has it */
			/* the microprocess is whoever's takes it from v->held:
			 * the segment's word may have been scribbled on */
			kr_mp *mp = __atomic_exchange_n(&v->held, NULL, __ATOMIC_ACQUIRE);
			if (!mp)
				break;
			__atomic_fetch_sub(&C.nheld, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&C.running, 1, __ATOMIC_RELAXED);
			set_status(id, KR_CA_RUNNING);
			__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
			if (r == 2) /* above the grant: stop again later */
				retry_in(v, BLOCK_LOOK_NS);
			return mp;
		}
		uint32_t exp;
		while ((exp = __atomic_load_n(&sv->status, __ATOMIC_ACQUIRE)) == KR_CA_RECOVERING)
			kr_cpu_relax();
		/* RECOVERED: another VP runs it; this one runs again (unless
		 * L0's RUNNING, after the recovery, said so already) */
		if (exp != KR_CA_RUNNING) {
			__atomic_fetch_add(&C.running, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
			set_status(id, KR_CA_RUNNING);
		}
		return NULL;
	}
	if (__atomic_load_n(&C.nheld, __ATOMIC_RELAXED))
		recover(w);
	/* Above the grant, and the process wants more: park, looking every
	 * 10 ms for a running VP of ours blocked in the kernel, whose processor
	 * this one then takes, and at the allocation every 100 ms (a
	 * participant may have died) */
	for (unsigned naps = 1;; naps++) {
		int more = __atomic_load_n(&C.me->want, __ATOMIC_RELAXED) > C.grant;
		if (kr__vp_retire(w, more ? kr_now() + BLOCK_LOOK_NS : KR_FOREVER) != 2)
			break;
		if (take_blocked(id))
			break; /* runs, above the target, until that VP is back */
		if (naps % (REALLOC_NS / BLOCK_LOOK_NS) == 0)
			allocate();
	}
	return NULL;
}

static void turn_hook(struct kr_worker *w)
{
	struct cvp *v = &C.vp[w->vp->id];
	if (w->vp->id < KR_CAREA_VPS)
		__atomic_fetch_add(&C.me->vp[w->vp->id].switches, 8, __ATOMIC_RELAXED);
	if (__atomic_load_n(&C.nheld, __ATOMIC_RELAXED))
		recover(w);
	if (++v->turns & 63)
		return;
	uint32_t exp = KR_CA_BLOCKED;
	if (w->vp->id < KR_CAREA_VPS && !w->blocked &&
	    __atomic_compare_exchange_n(&C.me->vp[w->vp->id].status, &exp, KR_CA_RUNNING, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		/* back from a block another VP saw (others_stuck) */
		__atomic_fetch_add(&C.running, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&C.me->running, C.running, __ATOMIC_RELAXED);
	}
	uint64_t now = kr_now();
	if (now - v->last_turn < TURN_NS)
		return;
	v->last_turn = now;
	publish();
	apply_grant();
	if (__atomic_load_n(&C.running, __ATOMIC_RELAXED) > C.grant)
		syscall(SYS_tgkill, getpid(), v->tid, SIGURG); /* stops at a safe point */
}

static void vp_start(struct kr_worker *w)
{
	struct cvp *v = &C.vp[w->vp->id];
	v->w = w;
	v->tid = raw_gettid();
	v->tp = kr__thread_pointer();
	v->idle = 0;
	v->why = WHY_NONE;
	v->held = NULL;
	if (w->vp->id < KR_CAREA_VPS)
		__atomic_store_n(&C.me->vp[w->vp->id].tid, v->tid, __ATOMIC_RELAXED);
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGURG};
	sev._sigev_un._tid = v->tid;
	v->has_timer = timer_create(CLOCK_MONOTONIC, &sev, &v->timer) == 0;
	v->sws = (struct kr__swatch_state)KR__SWATCH_STATE_INIT;
	v->has_sw = kr__swatch_open(&v->sw, 0) == 0;
	sigset_t urg;
	sigemptyset(&urg);
	sigaddset(&urg, SIGURG);
	pthread_sigmask(SIG_UNBLOCK, &urg, NULL);
	status_hook(w->vp, KR_VP_RUNNING);
	slice_arm(v, 1);
}

static void vp_stop(struct kr_worker *w)
{
	struct cvp *v = &C.vp[w->vp->id];
	if (v->has_timer)
		timer_delete(v->timer);
	v->has_timer = 0;
	if (v->has_sw)
		kr__swatch_close(&v->sw);
	v->has_sw = 0;
	status_hook(w->vp, KR_VP_EXITED);
	sigset_t urg;
	sigemptyset(&urg);
	sigaddset(&urg, SIGURG);
	pthread_sigmask(SIG_BLOCK, &urg, NULL);
	__atomic_store_n(&v->tid, 0, __ATOMIC_RELAXED);
	v->w = NULL;
}

/* ---------------- the segment ---------------- */

static const char *seg_name(char *buf, size_t n)
{
	if (C.name[0])
		return C.name;
	const char *e = getenv("KARUI_CAREA_SEGMENT");
	if (e && e[0] == '/' && strlen(e) < 200 && !strchr(e + 1, '/'))
		return e;
	snprintf(buf, n, "/karui-carea-%u", (unsigned)getuid());
	return buf;
}

static void complain(const char *name, const char *why)
{
	fprintf(stderr, "karui: C-area %s: %s; running without it\n", name, why);
}

static struct kr_carea_seg *seg_open(const char *name)
{
	size_t size = sizeof(struct kr_carea_seg);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int creator = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		complain(name, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (!creator && (st.st_uid != geteuid() || (st.st_mode & 077)))) {
		close(fd);
		complain(name, "not this user's own (owner or mode)");
		return NULL;
	}
	if (creator && ftruncate(fd, (off_t)size) != 0) {
		complain(name, strerror(errno));
		shm_unlink(name);
		close(fd);
		return NULL;
	}
	if (!creator) {
		/* the creator may be between shm_open and ftruncate */
		for (int i = 0; i < 1000 && st.st_size == 0; i++) {
			usleep(1000);
			fstat(fd, &st);
		}
		if ((size_t)st.st_size < offsetof(struct kr_carea_seg, lock)) {
			close(fd);
			complain(name, "too small to be a C-area (cut short)");
			return NULL;
		}
	}
	size_t map = creator ? size : (size_t)st.st_size;
	struct kr_carea_seg *s = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED) {
		complain(name, strerror(errno));
		return NULL;
	}
	if (creator) {
		s->version = KR_CAREA_VERSION;
		s->size = (uint32_t)size;
		__atomic_store_n(&s->magic, KR_CAREA_MAGIC, __ATOMIC_RELEASE);
		return s;
	}
	for (int i = 0; i < 1000 && __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == 0; i++)
		usleep(1000);
	const char *bad = NULL;
	if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != KR_CAREA_MAGIC)
		bad = "not a C-area (no magic)";
	else if (s->version != KR_CAREA_VERSION)
		bad = "another version of the layout";
	else if (s->size != size || map < size)
		bad = "too small for its version (cut short)";
	if (bad) {
		fprintf(stderr, "karui: C-area %s: %s (version %u, this karui %u); running without it\n",
			name, bad, s->version, KR_CAREA_VERSION);
		munmap(s, map);
		return NULL;
	}
	return s;
}

/* Claim a slot: a free one, or one whose process is dead. */
static int slot_claim(struct kr_carea_seg *s)
{
	uint64_t now = kr_now();
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < KR_CAREA_PROCS; i++) {
			struct kr_carea_proc *p = &s->proc[i];
			uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
			int stopped;
			if (pass == 0 ? st != KR_CA_SLOT_FREE
				      : st != KR_CA_SLOT_LIVE || slot_alive(p, now, &stopped))
				continue;
			if (__atomic_compare_exchange_n(&p->state, &st, KR_CA_SLOT_CLAIMED, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				return (int)i;
		}
	return -1;
}

/* KARUI_CAREA_SLICE_US: microseconds, 1000 to 10,000,000 (larger ones
 * are that); anything else gives no slice, and says so. */
static uint64_t slice_from_env(void)
{
	const char *e = getenv("KARUI_CAREA_SLICE_US");
	if (!e || !*e)
		return 0;
	char *end;
	errno = 0;
	unsigned long long us = strtoull(e, &end, 10);
	if (*e < '0' || *e > '9' || *end || (errno && errno != ERANGE) || us < MIN_SLICE / US) {
		fprintf(stderr, "karui: KARUI_CAREA_SLICE_US=%.40s: not a number of microseconds "
				"from 1000; no time slice\n", e);
		return 0;
	}
	return us > MAX_SLICE_US ? MAX_SLICE_US * US : us * US;
}

static unsigned start(unsigned nvp)
{
	memset(C.vp, 0, sizeof C.vp);
	C.nvp = nvp;
	C.running = C.nheld = C.stopping = 0;
	C.ticked = 0;
	C.cap = nvp;
	C.cap_at = C.win_at = C.win_pre = 0;
	C.probe = CAP_PROBE_NS;
	C.on = 1;
	C.suspensions = C.recoveries = C.preemptions = C.deferred = C.allocations = 0;
	C.nlat = 0;
	C.seg = NULL;
	C.me = NULL;
	if (!C.slice)
		C.slice = slice_from_env();
	char buf[64];
	const char *name = seg_name(buf, sizeof buf);
	struct kr_carea_seg *s = seg_open(name);
	if (!s)
		return nvp;
	int i = slot_claim(s);
	if (i < 0) {
		complain(name, "every slot is taken");
		munmap(s, sizeof *s);
		return nvp;
	}
	cpu_set_t set;
	C.ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
	C.seg = s;
	C.slot = (unsigned)i;
	C.me = &s->proc[i];
	struct kr_carea_proc *me = C.me;
	memset(me->vp, 0, sizeof me->vp);
	me->pid = getpid();
	C.start = proc_start(getpid(), NULL);
	me->start = C.start;
	me->nvp = nvp;
	me->want = me->parallelism = me->running = 0;
	me->grant = nvp < C.ncpu ? nvp : C.ncpu;
	me->beat = kr_now();
	memset(me->comm, 0, sizeof me->comm);
	FILE *f = fopen("/proc/self/comm", "re");
	if (f) {
		if (fgets(me->comm, sizeof me->comm, f))
			me->comm[strcspn(me->comm, "\n")] = 0;
		fclose(f);
	}
	__atomic_store_n(&me->state, KR_CA_SLOT_LIVE, __ATOMIC_RELEASE);
	struct sigaction sa = {.sa_sigaction = on_urg, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART};
	sigfillset(&sa.sa_mask);
	sigaction(SIGURG, &sa, &C.old);
	__atomic_store_n(&kr__vp_status_hook, status_hook, __ATOMIC_RELEASE);
	/* until the first allocation, as many as it may hope for */
	me->want = nvp;
	allocate();
	C.grant = clamp(__atomic_load_n(&me->grant, __ATOMIC_ACQUIRE), nvp);
	if (C.grant < 1)
		C.grant = 1;
	return C.grant;
}

static void stop(void)
{
	__atomic_store_n(&kr__vp_status_hook, NULL, __ATOMIC_RELEASE);
	C.on = 0;
	if (!C.seg)
		return;
	sigaction(SIGURG, &C.old, NULL);
	struct kr_carea_seg *s = C.seg;
	__atomic_store_n(&C.me->want, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&C.me->grant, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&C.me->pid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&C.me->state, KR_CA_SLOT_FREE, __ATOMIC_RELEASE);
	C.me = NULL;
	/* our processors go to the others */
	allocate_or_leave();
	munmap(s, sizeof *s);
	C.seg = NULL;
}

/* Without a segment the hooks still run: the process keeps its VPs. */
static void turn_off(struct kr_worker *w) { (void)w; }
static kr_mp *idle_off(struct kr_worker *w, kr_mp *held)
{
	(void)w;
	if (held)
		kr__mp_ready(held);
	return NULL;
}

static void turn_any(struct kr_worker *w) { C.me ? turn_hook(w) : turn_off(w); }
static kr_mp *idle_any(struct kr_worker *w, kr_mp *held)
{
	return C.me ? idle_hook(w, held) : idle_off(w, held);
}
static void vp_start_any(struct kr_worker *w)
{
	if (C.me)
		vp_start(w);
}
static void vp_stop_any(struct kr_worker *w)
{
	if (C.me)
		vp_stop(w);
}

const struct kr_alloc kr_carea = {
	.start = start,
	.stop = stop,
	.vp_start = vp_start_any,
	.vp_stop = vp_stop_any,
	.turn = turn_any,
	.idle = idle_any,
};

/* ---------------- the public calls ---------------- */

int kr_carea_configure(const kr_carea_config *cfg)
{
	if (!cfg)
		return EINVAL;
	if (cfg->segment &&
	    (cfg->segment[0] != '/' || strlen(cfg->segment) >= 200 || strchr(cfg->segment + 1, '/')))
		return EINVAL;
	if (cfg->slice && cfg->slice < MIN_SLICE)
		return EINVAL;
	if (C.on)
		return EBUSY;
	if (cfg->segment)
		snprintf(C.name, sizeof C.name, "%s", cfg->segment);
	else
		C.name[0] = 0;
	C.slice = cfg->slice;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int kr_carea_stats_get(kr_carea_stats *out)
{
	if (!out)
		return EINVAL;
	if (!C.on)
		return EPERM;
	memset(out, 0, sizeof *out);
	out->attached = C.me != NULL;
	out->slot = C.slot;
	out->nvp = C.nvp;
	out->grant = C.me ? C.grant : C.nvp;
	out->running = __atomic_load_n(&C.running, __ATOMIC_RELAXED);
	out->suspensions = __atomic_load_n(&C.suspensions, __ATOMIC_RELAXED);
	out->recoveries = __atomic_load_n(&C.recoveries, __ATOMIC_RELAXED);
	out->preemptions = __atomic_load_n(&C.preemptions, __ATOMIC_RELAXED);
	out->deferred = __atomic_load_n(&C.deferred, __ATOMIC_RELAXED);
	out->allocations = C.allocations;
	unsigned n = __atomic_load_n(&C.nlat, __ATOMIC_RELAXED);
	n = n < LAT_KEPT ? n : LAT_KEPT;
	uint64_t v[LAT_KEPT];
	for (unsigned i = 0; i < n; i++)
		v[i] = __atomic_load_n(&C.lat[i], __ATOMIC_RELAXED);
	qsort(v, n, sizeof v[0], cmp_u64);
	out->stopped_ns_median = n ? v[n / 2] : 0;
	out->stopped_ns_p90 = n ? v[n * 9 / 10] : 0;
	out->stops_timed = n;
	return 0;
}
