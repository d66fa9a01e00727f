/*
 * The C-area's switch watcher (src/carea/switches.c): a thread's kernel
 * switches, read from a perf ring.  The ring's protocol first, on rings
 * the test writes itself (records that wrap, unknown ones, losses, a
 * second reader); then the kernel's: a thread blocked in a read is off a
 * processor and not preempted, one that spins with three others on one
 * processor is preempted, a full ring reports its losses.  The kernel's
 * cases skip where perf events are not allowed (perf_event_paranoid,
 * seccomp, a container, qemu-user).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>

#include "kt.h"
#include "switches.h"

/* ---------------- rings written by the test ---------------- */

enum { FAKE_SIZE = 256 };

struct fake {
	struct perf_event_mmap_page pg;
	unsigned char data[FAKE_SIZE];
	struct kr__swatch w;
	uint64_t head; /* written up to here; published by fake_publish */
};

/* A ring whose next record starts at byte count `at`. */
static void fake_init(struct fake *f, uint64_t at)
{
	memset(f, 0, sizeof *f);
	f->pg.data_head = f->pg.data_tail = f->head = at;
	f->w = (struct kr__swatch){.page = &f->pg, .data = f->data, .size = FAKE_SIZE, .fd = -1};
}

static void fake_put(struct fake *f, const void *rec, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f->data[(f->head + i) % FAKE_SIZE] = ((const unsigned char *)rec)[i];
	f->head += n;
}

static void fake_publish(struct fake *f)
{
	__atomic_store_n(&f->pg.data_head, f->head, __ATOMIC_RELEASE);
}

static void put_switch(struct fake *f, uint16_t misc, uint64_t time)
{
	struct {
		struct perf_event_header h;
		uint64_t time;
	} r = {{PERF_RECORD_SWITCH, misc, sizeof r}, time};
	fake_put(f, &r, sizeof r);
}

#define OUT_BLOCKED PERF_RECORD_MISC_SWITCH_OUT
#define OUT_PREEMPTED (PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)

static void put_lost(struct fake *f, uint64_t n, uint64_t time)
{
	struct {
		struct perf_event_header h;
		uint64_t id, lost, time;
	} r = {{PERF_RECORD_LOST, 0, sizeof r}, 1, n, time};
	fake_put(f, &r, sizeof r);
}

/* A record of a type the watcher does not know, of n bytes (a multiple
 * of 8), full of bytes that would read as a switch out if it looked. */
static void put_unknown(struct fake *f, uint16_t n)
{
	unsigned char r[FAKE_SIZE];
	KT_CHECK(n <= sizeof r);
	memset(r, 0xff, n);
	struct perf_event_header h = {PERF_RECORD_MAX + 7, OUT_BLOCKED, n};
	memcpy(r, &h, sizeof h);
	fake_put(f, r, n);
}

/* all read: data_tail caught up with data_head */
static void check_consumed(struct fake *f)
{
	KT_EQ(f->pg.data_tail, f->pg.data_head);
}

/* A switch out and, a ring later, a switch in: each with its header in
 * the area's last 8 bytes and its time at the start; both read whole. */
static void a_record_that_wraps_the_ring_end_is_read_whole(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, 3 * FAKE_SIZE - 8);
	put_switch(&f, OUT_BLOCKED, 1000);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_OFF);
	KT_EQ(st.at, 1000);
	put_unknown(&f, FAKE_SIZE - 16);
	put_switch(&f, 0, 1700);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_ON);
	KT_EQ(st.at, 1700);
	KT_EQ(st.blocked_ns, 700);
	KT_EQ(st.preempted_ns, 0);
	KT_EQ(st.nswitch_block, 1);
	KT_EQ(st.nswitch_preempt, 0);
}

/* Records of other types, wrapping or not, move the tail by their size
 * and change nothing. */
static void unknown_records_are_skipped_by_their_size(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, FAKE_SIZE - 16);
	put_unknown(&f, 40);
	put_unknown(&f, 8);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_UNKNOWN);
	KT_EQ(st.at, 0);
	KT_EQ(st.nswitch_block, 0);
}

/* Out (preempted) at 100, in at 250, out (blocked) at 400, in at 1000: each
 * interval charged to the kind of its switch out; between reads the
 * state is the last record's. */
static void intervals_are_charged_to_the_kind_of_their_switch_out(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, 0);
	put_switch(&f, 0, 50);
	put_switch(&f, OUT_PREEMPTED, 100);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	KT_EQ(st.on, KR__SW_OFF);
	KT_EQ(st.preempted, 1);
	KT_EQ(st.at, 100);
	put_switch(&f, 0, 250);
	put_switch(&f, OUT_BLOCKED, 400);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	KT_EQ(st.on, KR__SW_OFF);
	KT_EQ(st.preempted, 0);
	put_switch(&f, 0, 1000);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_ON);
	KT_EQ(st.preempted, 0);
	KT_EQ(st.preempted_ns, 150);
	KT_EQ(st.blocked_ns, 600);
	KT_EQ(st.nswitch_preempt, 1);
	KT_EQ(st.nswitch_block, 1);
	KT_EQ(st.lost, 0);
}

/* The first switch in after a loss follows an unknown switch out: no
 * interval is charged, and the state is unknown in between. */
static void a_loss_leaves_the_state_unknown_until_the_next_switch(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, 0);
	put_switch(&f, OUT_BLOCKED, 100);
	put_lost(&f, 3, 500);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	KT_EQ(st.on, KR__SW_UNKNOWN);
	KT_EQ(st.lost, 3);
	put_switch(&f, 0, 900);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_ON);
	KT_EQ(st.at, 900);
	KT_EQ(st.blocked_ns, 0);
	KT_EQ(st.nswitch_block, 1);
}

/* A record whose size is 0 or runs past data_head was not written by the
 * kernel: the rest is dropped (a read never loops on it) and the state
 * is unknown. */
static void a_malformed_record_drops_the_rest(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, 0);
	put_switch(&f, 0, 50);
	struct perf_event_header h = {PERF_RECORD_SWITCH, 0, 0};
	fake_put(&f, &h, sizeof h);
	put_switch(&f, OUT_BLOCKED, 60);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_UNKNOWN);
	KT_EQ(st.nswitch_block, 0);

	h.size = 64; /* past data_head */
	fake_put(&f, &h, sizeof h);
	fake_publish(&f);
	st = (struct kr__swatch_state)KR__SWATCH_STATE_INIT;
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_UNKNOWN);
}

/* While a reader holds the ring, another gets EBUSY and the records stay
 * for the holder; with nothing new it gets 0 without the lock. */
static void a_second_reader_gets_ebusy_and_folds_nothing(void)
{
	struct fake f;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	fake_init(&f, 0);
	f.w.reading = 1; /* another reader */
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	put_switch(&f, OUT_PREEMPTED, 100);
	fake_publish(&f);
	KT_EQ(kr__swatch_read(&f.w, &st), EBUSY);
	KT_EQ(st.on, KR__SW_UNKNOWN);
	KT_EQ(f.pg.data_tail, 0);
	f.w.reading = 0;
	KT_EQ(kr__swatch_read(&f.w, &st), 0);
	check_consumed(&f);
	KT_EQ(st.on, KR__SW_OFF);
	KT_EQ(f.w.reading, 0);
}

/* ---------------- the kernel's records ---------------- */

static void open_or_skip(struct kr__swatch *w, pid_t tid)
{
	int e = kr__swatch_open(w, tid);
	if (e == EACCES || e == EPERM || e == ENOSYS || e == ENOENT) {
		char why[160];
		snprintf(why, sizeof why, "no perf switch events here (%s; perf_event_paranoid, "
			 "seccomp, container or emulator)", strerror(e));
		KT_SKIP(why);
	}
	KT_EQ(e, 0);
}

static void read_ok(struct kr__swatch *w, struct kr__swatch_state *st)
{
	KT_EQ(kr__swatch_read(w, st), 0);
}

static void print_state(const char *what, const struct kr__swatch_state *st)
{
	fprintf(stderr, "  %s: on %d preempted %d, off %.2f ms preempted (%llu times), "
		"%.2f ms blocked (%llu times), %llu lost\n", what, st->on, st->preempted,
		st->preempted_ns / 1e6, (unsigned long long)st->nswitch_preempt,
		st->blocked_ns / 1e6, (unsigned long long)st->nswitch_block,
		(unsigned long long)st->lost);
}

/* A negative tid, and a thread of another process (the test harness,
 * our parent), are refused before the kernel is asked. */
static void open_refuses_a_negative_tid_and_another_process_thread(void)
{
	struct kr__swatch w;
	KT_EQ(kr__swatch_open(&w, -1), EINVAL);
	KT_EQ(kr__swatch_open(&w, getppid()), ESRCH);
}

/* The calling thread reads its own watch: nothing new is no error, and
 * whatever came, the last record put it on a processor; a sleep is a
 * blocked switch out. */
static void reading_ones_own_watch_finds_it_on_a_processor(void)
{
	struct kr__swatch w;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	open_or_skip(&w, 0);
	read_ok(&w, &st);
	read_ok(&w, &st);
	KT_CHECK(st.on != KR__SW_OFF);
	kt_nap_us(2000);
	read_ok(&w, &st);
	print_state("after a 2 ms sleep", &st);
	KT_EQ(st.on, KR__SW_ON);
	KT_CHECK(st.nswitch_block >= 1);
	KT_CHECK(st.blocked_ns >= 1000000);
	kr__swatch_close(&w);
}

struct reader {
	int pipe[2];
	pid_t tid;
	uint32_t go;
};

static void *reader_main(void *a)
{
	struct reader *r = a;
	__atomic_store_n(&r->tid, kt_gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		;
	char c;
	KT_EQ(read(r->pipe[0], &c, 1), 1);
	return NULL;
}

/* A helper blocks in read() of an empty pipe: its watch shows it off a
 * processor and not preempted, from a time kr_now() agrees with, and the
 * ~20 ms it stays there are counted as blocked. */
static void a_thread_blocked_in_read_is_off_and_not_preempted(void)
{
	struct reader r = {0};
	pthread_t t;
	KT_EQ(pipe(r.pipe), 0);
	KT_EQ(pthread_create(&t, NULL, reader_main, &r), 0);
	KT_WAIT(__atomic_load_n(&r.tid, __ATOMIC_ACQUIRE), sched_yield());
	struct kr__swatch w;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	uint64_t t0 = kt_mono_ns();
	open_or_skip(&w, r.tid);
	__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
	KT_WAIT((read_ok(&w, &st), st.on == KR__SW_OFF && !st.preempted), kt_nap_us(200));
	uint64_t out = st.at, blocked0 = st.blocked_ns;
	KT_CHECK(out >= t0 && out <= kt_mono_ns());
	while (kt_mono_ns() < out + 20000000)
		kt_nap_us(5000);
	read_ok(&w, &st);
	KT_EQ(st.on, KR__SW_OFF);
	KT_EQ(st.preempted, 0);
	KT_EQ(st.at, out);
	KT_EQ(write(r.pipe[1], "x", 1), 1);
	KT_EQ(pthread_join(t, NULL), 0);
	read_ok(&w, &st);
	print_state("after ~20 ms in read()", &st);
	KT_CHECK(st.nswitch_block >= 1);
	KT_CHECK(st.blocked_ns - blocked0 >= 10000000);
	kr__swatch_close(&w);
}

struct spinners {
	int cpu;
	uint32_t pinned, stop;
	pid_t tid; /* the first one's */
};

static void *spinner_main(void *a)
{
	struct spinners *s = a;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(s->cpu, &one);
	KT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
	if (__atomic_fetch_add(&s->pinned, 1, __ATOMIC_ACQ_REL) == 0)
		__atomic_store_n(&s->tid, kt_gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
		;
	return NULL;
}

/* Four threads spin on one processor: the watched one is switched out
 * while runnable, and comes back, again and again. */
static void spinning_with_three_others_on_one_processor_is_preempted(void)
{
	enum { N = 4 };
	struct spinners s = {0};
	cpu_set_t mine;
	KT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
	while (!CPU_ISSET(s.cpu, &mine))
		s.cpu++;
	pthread_t t[N];
	for (int i = 0; i < N; i++)
		KT_EQ(pthread_create(&t[i], NULL, spinner_main, &s), 0);
	KT_WAIT(__atomic_load_n(&s.pinned, __ATOMIC_ACQUIRE) == N, kt_nap_us(1000));
	struct kr__swatch w;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	open_or_skip(&w, __atomic_load_n(&s.tid, __ATOMIC_ACQUIRE));
	kt_nap_us(100000);
	KT_WAIT((read_ok(&w, &st), st.nswitch_preempt > 0 && st.preempted_ns > 0),
		kt_nap_us(10000));
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < N; i++)
		KT_EQ(pthread_join(t[i], NULL), 0);
	print_state("spinning, 4 on one processor", &st);
	kr__swatch_close(&w);
}

struct pingpong {
	int to[2], back[2];
	pid_t tid;
};

static void *ponger_main(void *a)
{
	struct pingpong *p = a;
	char c;
	__atomic_store_n(&p->tid, kt_gettid(), __ATOMIC_RELEASE);
	while (read(p->to[0], &c, 1) == 1)
		KT_EQ(write(p->back[1], &c, 1), 1);
	return NULL;
}

static void ping(struct pingpong *p, int rounds)
{
	char c = 'x';
	for (int i = 0; i < rounds; i++) {
		KT_EQ(write(p->to[1], &c, 1), 1);
		KT_EQ(read(p->back[0], &c, 1), 1);
	}
}

/* A helper that switches thousands of times (a pipe's round trips) while
 * nobody reads fills the ring (2048 switch records): the kernel reports
 * the records it dropped once there is room, and the switches after the
 * loss make the state known again. */
static void a_full_ring_reports_its_losses(void)
{
	struct pingpong p;
	pthread_t t;
	KT_EQ(pipe(p.to), 0);
	KT_EQ(pipe(p.back), 0);
	p.tid = 0;
	KT_EQ(pthread_create(&t, NULL, ponger_main, &p), 0);
	KT_WAIT(__atomic_load_n(&p.tid, __ATOMIC_ACQUIRE), sched_yield());
	struct kr__swatch w;
	struct kr__swatch_state st = KR__SWATCH_STATE_INIT;
	open_or_skip(&w, p.tid);
	ping(&p, 5000);
	read_ok(&w, &st);
	KT_EQ(st.lost, 0); /* the kernel says so once there is room */
	ping(&p, 10);
	read_ok(&w, &st);
	print_state("after 5010 round trips", &st);
	KT_CHECK(st.lost > 0);
	KT_CHECK(st.on != KR__SW_UNKNOWN);
	close(p.to[1]);
	KT_EQ(pthread_join(t, NULL), 0);
	kr__swatch_close(&w);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(a_record_that_wraps_the_ring_end_is_read_whole);
	KT_RUN(unknown_records_are_skipped_by_their_size);
	KT_RUN(intervals_are_charged_to_the_kind_of_their_switch_out);
	KT_RUN(a_loss_leaves_the_state_unknown_until_the_next_switch);
	KT_RUN(a_malformed_record_drops_the_rest);
	KT_RUN(a_second_reader_gets_ebusy_and_folds_nothing);
	KT_RUN(open_refuses_a_negative_tid_and_another_process_thread);
	KT_RUN(reading_ones_own_watch_finds_it_on_a_processor);
	KT_RUN(a_thread_blocked_in_read_is_off_and_not_preempted);
	KT_RUN(spinning_with_three_others_on_one_processor_is_preempted);
	KT_RUN(a_full_ring_reports_its_losses);
	return kt_finish();
}
