/*
 * karui C-area — a thread's kernel switches, read from a perf ring
 * (seed 004's BLOCKED vs SUSPENDED, the kernel's half, on an unmodified
 * Linux).  See switches.h for the calls.
 *
 * The event.  A per-thread software "dummy" perf event (it counts and
 * samples nothing) with context_switch = 1: each time the thread leaves a
 * processor the kernel appends a PERF_RECORD_SWITCH with
 * PERF_RECORD_MISC_SWITCH_OUT in its misc, and with
 * PERF_RECORD_MISC_SWITCH_OUT_PREEMPT too if the thread was still
 * runnable (preempted, or yielding); each time it comes back, one without
 * SWITCH_OUT.  sample_id_all with PERF_SAMPLE_TIME gives each record a
 * time, from CLOCK_MONOTONIC (use_clockid): kr_now()'s clock.  So a
 * record is a header and that time, 16 bytes; PERF_RECORD_LOST adds its
 * id and count, 32.  exclude_kernel (and _hv) is what lets an
 * unprivileged process open the event at perf_event_paranoid 2, the usual
 * setting; it restricts what the event counts and samples, not these
 * records, which come all the same (tests/test_switches.c watches them
 * come).  Nobody polls the event or takes a signal from it: the kernel's
 * wakeup (an irq_work that finds nobody waiting) is put off to once per
 * ring's worth of records (watermark).
 *
 * The ring.  After the control page (struct perf_event_mmap_page) come
 * `size` bytes of records, a power of two.  data_head and data_tail are
 * byte counts that only grow; a record starts at count & (size - 1),
 * 8-byte aligned, so its header never wraps, but the rest of a record may
 * run past the end of the area and go on at its start: it is copied out
 * in two pieces.  The kernel writes records from data_head on and then
 * advances data_head; it writes no further than data_tail + size.
 *   reader:  head = load-acquire(data_head)   pairs with the kernel's
 *            read records [tail, head)        barrier before it advances
 *            store-release(data_tail, head)   data_head; and with its
 *                                             barrier between reading
 *                                             data_tail and writing there
 * so the reader sees whole records, and the kernel overwrites none it has
 * not finished with.
 *
 * A full ring.  The kernel drops what does not fit and counts it; once
 * there is room it first writes a PERF_RECORD_LOST with that count.  What
 * the thread did meanwhile is unknown: the state says so (KR__SW_UNKNOWN)
 * until the next switch record, and the first interval after a loss is
 * charged to nothing, since its switch out may be among the lost.  Record
 * types other than these two are skipped by their size.
 *
 * One reader at a time.  Reading advances the one data_tail: two readers
 * would fold the same records twice, or each half of a pair.  A reader
 * takes `reading` with an exchange, and a thread that finds it taken gets
 * EBUSY at once rather than wait: the ring's news is the other reader's,
 * and the caller (a VP at a scheduling point, the allocator) looks again
 * soon.  Before the lock, a read compares data_head with data_tail: equal,
 * nothing is new and it returns 0 without the lock and without a write.
 * Those two words share the control page's cache line, which the kernel
 * writes only when the watched thread switches: the common read is two
 * loads that hit.
 *
 * What is exact and what is not.  The records are the scheduler's own, in
 * order, and their times are taken in the switch path; the kind of a
 * switch out is exact (the task was runnable or not).  An interval from a
 * switch out to the next switch in is charged to the kind of the switch
 * out, all of it: a thread that blocked and was woken waits for a
 * processor as "blocked", since the kernel writes nothing at the wakeup.
 * "Preempted" includes sched_yield, and "blocked" every sleep: I/O,
 * futexes, a fault that waits for a disk, a stop signal.
 *
 * Cost to the system.  A ring is locked memory: 1 + RING_PAGES pages of
 * the user's perf_event_mlock_kb (per online processor), then of
 * RLIMIT_MEMLOCK; past that mmap fails with EPERM.  The ring is not
 * inherited by fork (the kernel maps it VM_DONTCOPY).
 *
 * Rejected: /proc/self/task/T/stat or schedstat (a system call and text
 * to parse per look, a sampled state letter and no preempted/blocked
 * split of the time off a processor); a BPF program on sched_switch
 * (needs CAP_BPF and CAP_PERFMON, which a user's process has not); a
 * signal per record (O_ASYNC on the event: a signal per switch, in the
 * watched thread's process, to learn what a load tells); poll() on the
 * event (a system call per look).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "switches.h"

#define RING_PAGES 8 /* a power of two: 2048 switch records */

int kr__swatch_open(struct kr__swatch *w, pid_t tid)
{
	if (tid < 0)
		return EINVAL;
	if (tid && syscall(SYS_tgkill, getpid(), tid, 0) != 0)
		return ESRCH;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof a,
		.config = PERF_COUNT_SW_DUMMY,
		.sample_type = PERF_SAMPLE_TIME,
		.sample_id_all = 1,
		.context_switch = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
		.use_clockid = 1,
		.clockid = CLOCK_MONOTONIC,
		.watermark = 1,
		.wakeup_watermark = RING_PAGES * page,
	};
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		/* EINVAL: a kernel that knows none of context_switch or use_clockid */
		return errno == EINVAL ? ENOSYS : errno;
	size_t len = (1 + RING_PAGES) * page;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		close(fd);
		return e;
	}
	w->page = p;
	w->data = (unsigned char *)p + w->page->data_offset;
	w->size = w->page->data_size;
	w->len = len;
	w->fd = fd;
	w->reading = 0;
	return 0;
}

void kr__swatch_close(struct kr__swatch *w)
{
	munmap(w->page, w->len);
	close(w->fd);
}

/* Copy n bytes of the ring from byte count `at` on: in two pieces if they
 * run past the end of the area. */
static void ring_copy(const struct kr__swatch *w, uint64_t at, void *to, size_t n)
{
	size_t off = at & (w->size - 1);
	size_t first = n < w->size - off ? n : w->size - off;
	memcpy(to, w->data + off, first);
	memcpy((unsigned char *)to + first, w->data, n - first);
}

struct switch_rec {
	struct perf_event_header h;
	uint64_t time;
};

struct lost_rec {
	struct perf_event_header h;
	uint64_t id, lost;
	uint64_t time;
};

static void fold_switch(struct kr__swatch_state *st, const struct switch_rec *r)
{
	if (r->h.misc & PERF_RECORD_MISC_SWITCH_OUT) {
		st->preempted = (r->h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
		if (st->preempted)
			st->nswitch_preempt++;
		else
			st->nswitch_block++;
		st->on = KR__SW_OFF;
	} else {
		if (st->on == KR__SW_OFF) {
			uint64_t off = r->time - st->at;
			if (st->preempted)
				st->preempted_ns += off;
			else
				st->blocked_ns += off;
		}
		st->preempted = 0;
		st->on = KR__SW_ON;
	}
	st->at = r->time;
}

/* Fold the record at byte count `tail`, of h.size bytes. */
static void fold(const struct kr__swatch *w, uint64_t tail, struct perf_event_header h,
		 struct kr__swatch_state *st)
{
	union {
		struct switch_rec sw;
		struct lost_rec lost;
	} r;
	if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof r.sw) {
		ring_copy(w, tail, &r.sw, sizeof r.sw);
		fold_switch(st, &r.sw);
	} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof r.lost) {
		ring_copy(w, tail, &r.lost, sizeof r.lost);
		st->lost += r.lost.lost;
		st->on = KR__SW_UNKNOWN;
	}
}

int kr__swatch_read(struct kr__swatch *w, struct kr__swatch_state *st)
{
	struct perf_event_mmap_page *pg = w->page;
	if (__atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE) ==
	    __atomic_load_n(&pg->data_tail, __ATOMIC_RELAXED))
		return 0;
	if (__atomic_exchange_n(&w->reading, 1, __ATOMIC_ACQUIRE))
		return EBUSY;
	/* another reader may have moved data_tail since the look above */
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&pg->data_tail, __ATOMIC_RELAXED);
	while (tail < head) {
		struct perf_event_header h;
		ring_copy(w, tail, &h, sizeof h);
		if (h.size < sizeof h || h.size > head - tail) {
			/* not a record the kernel wrote: drop the rest */
			st->on = KR__SW_UNKNOWN;
			tail = head;
			break;
		}
		fold(w, tail, h, st);
		tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	__atomic_store_n(&w->reading, 0, __ATOMIC_RELEASE);
	return 0;
}
