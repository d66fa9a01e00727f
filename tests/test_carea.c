/*
 * The C-area (karui/carea.h, src/carea): the segment, the allocation
 * between processes, stops and recoveries, the time-slice notifier, and
 * participants that die, stop or scribble on the segment.
 *
 * Each test uses a segment of its own (/karui-carea-test-PID-N), removed at
 * its end, so that tests never see each other or a user's programs.
 * Participants are children that run karui with kr_carea: "spinners",
 * microprocesses that compute without a scheduling point until the parent
 * says stop (a word in shared memory), and "yielders", which count to a
 * fixed number with a yield between steps, then yield until it says stop.
 * The parent watches the segment.  Nothing here bounds a time: each wait
 * is for something to be seen (kt.h, KT_WAIT).  What needs kr__preempt (a microprocess taken in
 * the middle of its code) is outside the sanitizer builds only; the tests
 * of it say "skipped" there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>

#include "kt_karui.h"
#include "../src/carea/layout.h"

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(__SANITIZE_ADDRESS__) && \
	!defined(__SANITIZE_THREAD__)
#define PREEMPT 1
#else
#define PREEMPT 0
#endif

static char seg_name[96];
static pid_t main_pid; /* the names of this run's segments start with it */

static void seg_pick(void)
{
	static int n;
	snprintf(seg_name, sizeof seg_name, "/karui-carea-test-%d-%d-%d", (int)main_pid,
		 (int)getpid(), n++);
	shm_unlink(seg_name);
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = seg_name}), 0);
}

static struct kr_carea_seg *seg_map(void)
{
	int fd = shm_open(seg_name, O_RDWR, 0);
	KT_CHECK(fd >= 0);
	struct kr_carea_seg *s =
		mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	KT_CHECK(s != MAP_FAILED);
	return s;
}

static struct kr_carea_proc *slot_of(struct kr_carea_seg *s, pid_t pid)
{
	for (unsigned i = 0; i < KR_CAREA_PROCS; i++)
		if (__atomic_load_n(&s->proc[i].state, __ATOMIC_ACQUIRE) == KR_CA_SLOT_LIVE &&
		    __atomic_load_n(&s->proc[i].pid, __ATOMIC_RELAXED) == pid)
			return &s->proc[i];
	return NULL;
}

static unsigned grant_of(struct kr_carea_seg *s, pid_t pid)
{
	struct kr_carea_proc *p = slot_of(s, pid);
	return p ? __atomic_load_n(&p->grant, __ATOMIC_RELAXED) : 0;
}

static unsigned running_of(struct kr_carea_seg *s, pid_t pid)
{
	struct kr_carea_proc *p = slot_of(s, pid);
	return p ? __atomic_load_n(&p->running, __ATOMIC_RELAXED) : 99;
}

static uint64_t suspensions_of(struct kr_carea_seg *s, pid_t pid)
{
	struct kr_carea_proc *p = slot_of(s, pid);
	uint64_t n = 0;
	for (unsigned i = 0; p && i < KR_CAREA_VPS; i++)
		n += __atomic_load_n(&p->vp[i].suspensions, __ATOMIC_RELAXED);
	return n;
}

static unsigned ncpu(void)
{
	cpu_set_t set;
	KT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
	return (unsigned)CPU_COUNT(&set);
}

/* ---------------- participants ---------------- */

/* What a child shares with the parent. */
struct shared {
	uint32_t stop;          /* the parent: end the spinners */
	uint32_t ready;         /* the child: karui runs */
	uint64_t sums[16];      /* each microprocess's result */
	kr_carea_stats st;      /* the child's figures, at its end */
	int attached, failed;
};

static struct shared *shared_new(void)
{
	struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	KT_CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof *sh);
	return sh;
}

static struct shared *me_sh;

static void *spinner(void *a)
{
	uint64_t x = 0, i = (uintptr_t)a;
	while (!__atomic_load_n(&me_sh->stop, __ATOMIC_ACQUIRE))
		for (int k = 0; k < 10000; k++)
			x += k ^ i;
	me_sh->sums[i] = 1 + (x & 0);
	return NULL;
}

#define YIELD_STEPS 200000

static void *yielder(void *a)
{
	uint64_t sum = 0;
	for (uint64_t k = 1; k <= YIELD_STEPS; k++) {
		sum += k;
		if (!(k & 15))
			kr_mp_yield();
	}
	me_sh->sums[(uintptr_t)a] = sum;
	/* then on, yielding, until the parent has seen what it waits for */
	while (!__atomic_load_n(&me_sh->stop, __ATOMIC_ACQUIRE))
		kr_mp_yield();
	return NULL;
}

/* A child with `vps` VPs (0: one per processor) running n microprocesses
 * of fn; returns its pid. */
static pid_t participant(struct shared *sh, unsigned vps, unsigned n, void *(*fn)(void *))
{
	fflush(stdout);
	pid_t pid = fork();
	KT_CHECK(pid >= 0);
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no spinner */
	me_sh = sh;
	kr_config c = {.vps = vps, .alloc = &kr_carea};
	if (kr_init(&c) != 0)
		_exit(3);
	kr_carea_stats st;
	kr_carea_stats_get(&st);
	sh->attached = st.attached;
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	kr_mp *m[16];
	for (unsigned i = 0; i < n; i++)
		if (kr_mp_create(&m[i], NULL, fn, (void *)(uintptr_t)i) != 0)
			_exit(4);
	for (unsigned i = 0; i < n; i++)
		kr_mp_join(m[i], NULL);
	kr_carea_stats_get(&sh->st);
	_exit(kr_fini() == 0 ? 0 : 5);
}

static void reap(pid_t pid, int want_status)
{
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), want_status);
}

/* ---------------- the tests ---------------- */

/* A test of processors shared between participants, with stops in the
 * middle of microprocesses: skipped where those cannot be. */
static void sharing_test(void)
{
	if (!PREEMPT)
		KT_SKIP("stops in the middle of a microprocess need a build without sanitizers");
	if (ncpu() < 2)
		KT_SKIP("one processor: nothing to share");
	seg_pick();
}

static void a_process_alone_gets_every_processor(void)
{
	seg_pick();
	kr_config c = {.alloc = &kr_carea};
	KT_EQ(kr_init(&c), 0);
	kr_carea_stats st;
	KT_EQ(kr_carea_stats_get(&st), 0);
	KT_EQ(st.attached, 1);
	KT_EQ(st.nvp, ncpu() < KR_VP_MAX ? ncpu() : KR_VP_MAX);
	KT_EQ(st.grant, st.nvp);
	struct kr_carea_seg *s = seg_map();
	KT_EQ(s->magic, KR_CAREA_MAGIC);
	KT_EQ(s->version, KR_CAREA_VERSION);
	struct kr_carea_proc *p = slot_of(s, getpid());
	KT_CHECK(p != NULL);
	KT_EQ(p->nvp, st.nvp);
	KT_EQ(p->grant, st.nvp);
	KT_EQ(p->start != 0, 1);
	KT_EQ(p->vp[0].tid, (int32_t)gettid());
	KT_EQ(p->vp[0].status, KR_CA_RUNNING);
	struct stat fs;
	int fd = shm_open(seg_name, O_RDONLY, 0);
	KT_CHECK(fd >= 0 && fstat(fd, &fs) == 0);
	KT_EQ(fs.st_mode & 0777, 0600);
	close(fd);
	KT_EQ(kr_fini(), 0);
	/* its slot is free again */
	KT_CHECK(slot_of(s, getpid()) == NULL);
	shm_unlink(seg_name);
}

/* Another layout, or a segment others may write: karui runs without. */
static void a_segment_it_cannot_trust_is_not_used(void)
{
	for (int kind = 0; kind < 3; kind++) {
		seg_pick();
		int fd = shm_open(seg_name, O_RDWR | O_CREAT | O_EXCL, kind == 2 ? 0666 : 0600);
		KT_CHECK(fd >= 0);
		fchmod(fd, kind == 2 ? 0666 : 0600);
		KT_EQ(ftruncate(fd, kind == 1 ? 64 : (off_t)sizeof(struct kr_carea_seg)), 0);
		struct kr_carea_seg *s = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		KT_CHECK(s != MAP_FAILED);
		s->version = kind == 0 ? KR_CAREA_VERSION + 1 : KR_CAREA_VERSION;
		s->size = sizeof(struct kr_carea_seg);
		s->magic = KR_CAREA_MAGIC;
		close(fd);
		int err = open("/dev/null", O_WRONLY), save = dup(2);
		int pipefd[2];
		KT_EQ(pipe(pipefd), 0);
		dup2(pipefd[1], 2);
		kr_config c = {.vps = 2, .alloc = &kr_carea};
		KT_EQ(kr_init(&c), 0);
		dup2(save, 2);
		close(pipefd[1]);
		char msg[512] = {0};
		KT_CHECK(read(pipefd[0], msg, sizeof msg - 1) > 0);
		KT_CHECK(strstr(msg, "running without it") != NULL);
		KT_CHECK(strstr(msg, kind == 0 ? "another version" : kind == 1 ? "too small"
								 : "not this user's own") != NULL);
		kr_carea_stats st;
		KT_EQ(kr_carea_stats_get(&st), 0);
		KT_EQ(st.attached, 0);
		KT_EQ(st.grant, 2);
		KT_EQ(kr_fini(), 0);
		close(pipefd[0]);
		close(save);
		close(err);
		munmap(s, 64);
		shm_unlink(seg_name);
	}
}

/* Two processes that each want every processor share them; when one
 * ends, the other gets them back. */
static void two_participants_share_the_processors(void)
{
	sharing_test();
	struct shared *a = shared_new(), *b = shared_new();
	pid_t pa = participant(a, 2, 2, spinner);
	KT_WAIT(__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_EQ(a->attached, 1);
	struct kr_carea_seg *s = seg_map();
	/* both its VPs run spinners: the stop below takes one in the middle */
	KT_WAIT(grant_of(s, pa) == 2 && running_of(s, pa) == 2, kt_nap_us(1000));
	pid_t pb = participant(b, 2, 2, spinner);
	KT_WAIT(__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	/* one processor each, and no more VPs running than that */
	KT_WAIT(grant_of(s, pa) == 1 && grant_of(s, pb) == 1, kt_nap_us(1000));
	KT_WAIT(running_of(s, pa) == 1 && running_of(s, pb) == 1, kt_nap_us(1000));
	KT_EQ(grant_of(s, pa) + grant_of(s, pb), 2);
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	reap(pb, 0);
	KT_EQ(b->sums[0] + b->sums[1], 2);
	KT_WAIT(grant_of(s, pa) == 2 && running_of(s, pa) == 2, kt_nap_us(1000));
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	reap(pa, 0);
	KT_EQ(a->sums[0] + a->sums[1], 2);
	KT_CHECK(a->st.suspensions >= 1); /* a VP was stopped holding a spinner */
	shm_unlink(seg_name);
}

/* A stop in the middle of a microprocess, recovered by another VP of the
 * process: every microprocess ends with its exact result. */
static void a_stopped_microprocess_is_recovered_and_ends_right(void)
{
	sharing_test();
	struct shared *a = shared_new(), *b = shared_new();
	pid_t pb = participant(b, 2, 2, spinner); /* wants both processors */
	KT_WAIT(__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	struct kr_carea_seg *s = seg_map();
	/* both its VPs run spinners: the stop below takes one in the middle */
	KT_WAIT(running_of(s, pb) == 2, kt_nap_us(1000));
	pid_t pa = participant(a, 2, 8, yielder);
	/* the spinners' process is stopped in the middle when the yielders' comes */
	KT_WAIT(suspensions_of(s, pb) >= 1, kt_nap_us(1000));
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	reap(pa, 0);
	for (int i = 0; i < 8; i++)
		KT_EQ(a->sums[i], (uint64_t)YIELD_STEPS * (YIELD_STEPS + 1) / 2);
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	reap(pb, 0);
	KT_CHECK(b->st.suspensions >= 1);
	KT_EQ(b->sums[0] + b->sums[1], 2);
	shm_unlink(seg_name);
}

/* kill -9 and SIGSTOP: the others get the processors back; SIGCONT: it
 * takes its share again. */
static void dead_and_stopped_participants_give_their_processors_back(void)
{
#if defined(__aarch64__)
	/* the aarch64 suite runs under qemu-user, which emulates its
	 * processes' own /proc entries and delivers signals late: this one
	 * waits 60 s for an allocation now and then */
	KT_SKIP("run natively only (the aarch64 suite runs under qemu-user)");
#endif
	sharing_test();
	struct shared *a = shared_new(), *b = shared_new(), *c = shared_new();
	pid_t pa = participant(a, 2, 2, spinner);
	KT_WAIT(__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	pid_t pb = participant(b, 2, 2, spinner);
	struct kr_carea_seg *s = seg_map();
	KT_WAIT(grant_of(s, pa) == 1 && grant_of(s, pb) == 1, kt_nap_us(1000));
	kill(pb, SIGKILL);
	int st;
	KT_EQ(waitpid(pb, &st, 0), pb);
	KT_WAIT(grant_of(s, pa) == 2 && running_of(s, pa) == 2, kt_nap_us(1000));
	pid_t pc = participant(c, 2, 2, spinner);
	KT_WAIT(grant_of(s, pa) == 1 && grant_of(s, pc) == 1, kt_nap_us(1000));
	kill(pc, SIGSTOP);
	KT_WAIT(grant_of(s, pa) == 2, kt_nap_us(1000));
	kill(pc, SIGCONT);
	KT_WAIT(grant_of(s, pa) == 1 && grant_of(s, pc) == 1, kt_nap_us(1000));
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	reap(pc, 0);
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	reap(pa, 0);
	shm_unlink(seg_name);
}

/* Nonsense written over the whole segment, the lock included, while two
 * participants run: both still finish their work and exit. */
static void a_scribbled_segment_stalls_nobody(void)
{
	seg_pick();
	struct shared *a = shared_new(), *b = shared_new();
	pid_t pa = participant(a, 2, 8, yielder);
	KT_WAIT(__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	pid_t pb = participant(b, 2, 8, yielder);
	KT_WAIT(__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	struct kr_carea_seg *s = seg_map();
	uint64_t x = 88172645463325252ull;
	unsigned char *bytes = (unsigned char *)s;
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < sizeof *s; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			bytes[i] = (unsigned char)x;
		}
		kt_nap_us(2000);
	}
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	reap(pa, 0);
	reap(pb, 0);
	for (int i = 0; i < 8; i++) {
		KT_EQ(a->sums[i], (uint64_t)YIELD_STEPS * (YIELD_STEPS + 1) / 2);
		KT_EQ(b->sums[i], (uint64_t)YIELD_STEPS * (YIELD_STEPS + 1) / 2);
	}
	shm_unlink(seg_name);
}

/* A VP blocked in the kernel without telling karui (a plain read()): a VP
 * of its process parked above the grant sees it in the VP's switch
 * records and takes its processor, so the process's other microprocess
 * goes on. */
static int block_pipe[2];
static uint32_t *block_go, *block_done;
static uint64_t *block_count;

static void *blocking_reader(void *a)
{
	(void)a;
	while (!__atomic_load_n(block_go, __ATOMIC_ACQUIRE))
		kr_mp_yield();
	char c;
	if (read(block_pipe[0], &c, 1) != 1) /* not kr_read: karui is not told */
		_exit(6);
	__atomic_store_n(block_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *counter(void *a)
{
	(void)a;
	while (!__atomic_load_n(block_done, __ATOMIC_ACQUIRE)) {
		__atomic_fetch_add(block_count, 1, __ATOMIC_RELAXED);
		kr_mp_yield();
	}
	return NULL;
}

static void *block_or_count(void *a) { return (uintptr_t)a ? counter(a) : blocking_reader(a); }

static int perf_switches_allowed(void)
{
	struct perf_event_attr pa = {.type = PERF_TYPE_SOFTWARE, .size = sizeof pa,
				     .config = PERF_COUNT_SW_DUMMY, .context_switch = 1,
				     .exclude_kernel = 1, .exclude_hv = 1};
	int fd = (int)syscall(SYS_perf_event_open, &pa, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void an_unannounced_block_hands_its_processor_to_a_parked_vp(void)
{
	if (!perf_switches_allowed())
		KT_SKIP("no perf switch records here (perf_event_paranoid, seccomp)");
	sharing_test();
	KT_EQ(pipe(block_pipe), 0);
	struct shared *a = shared_new(), *b = shared_new();
	block_go = &a->stop; /* the parent's word to the reader */
	block_done = (uint32_t *)&a->sums[14];
	block_count = &a->sums[15];
	pid_t pb = participant(b, 2, 2, spinner);
	KT_WAIT(__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	struct kr_carea_seg *s = seg_map();
	KT_WAIT(running_of(s, pb) == 2, kt_nap_us(1000));
	pid_t pa = participant(a, 2, 2, block_or_count);
	KT_WAIT(__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_WAIT(grant_of(s, pa) == 1 && running_of(s, pa) == 1, kt_nap_us(1000));
	__atomic_store_n(block_go, 1, __ATOMIC_RELEASE);
	/* the reader is in read(); the counter still counts */
	KT_WAIT(__atomic_load_n(block_count, __ATOMIC_RELAXED) > 0, kt_nap_us(1000));
	kt_nap_us(20000);
	uint64_t c0 = __atomic_load_n(block_count, __ATOMIC_RELAXED);
	KT_WAIT(__atomic_load_n(block_count, __ATOMIC_RELAXED) > c0 + 1000, kt_nap_us(1000));
	KT_EQ(__atomic_load_n(block_done, __ATOMIC_ACQUIRE), 0);
	KT_EQ(write(block_pipe[1], "x", 1), 1);
	reap(pa, 0);
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	reap(pb, 0);
	shm_unlink(seg_name);
}

/* ---------------- the notifier's time slice ---------------- */

static uint32_t forever_stop, others_ran;

static void *never_yields(void *a)
{
	(void)a;
	volatile uint64_t x = 0;
	while (!__atomic_load_n(&forever_stop, __ATOMIC_ACQUIRE))
		x++;
	return NULL;
}

static void *ends_the_spin(void *a)
{
	(void)a;
	__atomic_store_n(&others_ran, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&forever_stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* karui on one VP with the C-area and a 2 ms time slice: skipped where
 * microprocesses cannot be stopped in the middle. */
static void one_vp_with_slices(void)
{
	if (!PREEMPT)
		KT_SKIP("time slices need a build without sanitizers");
	seg_pick();
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = seg_name, .slice = 2 * MS}), 0);
	kr_config c = {.vps = 1, .alloc = &kr_carea};
	KT_EQ(kr_init(&c), 0);
}

/* On one VP, a microprocess that never yields no longer keeps the others
 * from running: the slice ends it, it is queued behind them. */
static void a_time_slice_ends_a_microprocess_that_never_yields(void)
{
	one_vp_with_slices();
	kr_mp *spin, *other;
	KT_EQ(kr_mp_create(&spin, NULL, never_yields, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* the spinner runs, and never gives the VP back */
	KT_EQ(kr_mp_create(&other, NULL, ends_the_spin, NULL), 0);
	KT_EQ(kr_mp_join(other, NULL), 0);
	KT_EQ(kr_mp_join(spin, NULL), 0);
	KT_EQ(others_ran, 1);
	kr_carea_stats st;
	KT_EQ(kr_carea_stats_get(&st), 0);
	KT_CHECK(st.preemptions >= 1);
	KT_EQ(kr_fini(), 0);
	shm_unlink(seg_name);
}

/* karui running for a microprocess (here its end, calling a key's
 * destructor) is never stopped, even where karui calls other code: the
 * destructor spins for 30 ms under 2 ms slices, and the microprocess
 * that yielded to it runs only after. */
static uint32_t in_destructor;

static void spinning_destructor(void *v)
{
	(void)v;
	__atomic_store_n(&in_destructor, 1, __ATOMIC_RELEASE);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) < 30000000);
	__atomic_store_n(&in_destructor, 0, __ATOMIC_RELEASE);
}

static kr_key spin_key;

static void *sets_the_key(void *a)
{
	KT_EQ(kr_key_set(spin_key, a), 0);
	return NULL;
}

static void a_microprocess_is_not_stopped_while_karui_runs_for_it(void)
{
	one_vp_with_slices();
	KT_EQ(kr_key_create(&spin_key, spinning_destructor), 0);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, sets_the_key, (void *)1), 0);
	KT_EQ(kr_mp_yield(), 0); /* m runs, ends, and its destructor spins */
	KT_EQ(__atomic_load_n(&in_destructor, __ATOMIC_ACQUIRE), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	kr_carea_stats st;
	KT_EQ(kr_carea_stats_get(&st), 0);
	KT_EQ(st.preemptions, 0);
	KT_EQ(kr_key_delete(spin_key), 0);
	KT_EQ(kr_fini(), 0);
	shm_unlink(seg_name);
}

static uint32_t high_done;

static void *low_spinner(void *a)
{
	(void)a;
	volatile uint64_t x = 0;
	while (!__atomic_load_n(&high_done, __ATOMIC_ACQUIRE))
		x++;
	return NULL;
}

static void *high_sleeper(void *a)
{
	(void)a;
	KT_EQ(kr_mp_sleep_for(5 * MS), 0);
	__atomic_store_n(&high_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A high-priority microprocess that wakes while low-priority ones compute
 * without end runs within a slice or so, and ends them. */
static void priorities_hold_against_long_running_microprocesses(void)
{
	one_vp_with_slices();
	kr_mp *low[3], *high;
	kr_attr hi = {.flags = KR_MP_PRIO, .prio = KR_PRIO_MAX};
	kr_attr lo = {.flags = KR_MP_PRIO, .prio = KR_PRIO_MIN};
	KT_EQ(kr_mp_create(&high, &hi, high_sleeper, NULL), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_create(&low[i], &lo, low_spinner, NULL), 0);
	KT_EQ(kr_mp_join(high, NULL), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(low[i], NULL), 0);
	KT_EQ(high_done, 1);
	KT_EQ(kr_fini(), 0);
	shm_unlink(seg_name);
}

static uint32_t idle_go;

static void *sleeps_a_while(void *a)
{
	(void)a;
	while (!__atomic_load_n(&idle_go, __ATOMIC_ACQUIRE))
		kr_mp_sleep_for(50 * MS);
	return NULL;
}

static pid_t *idle_tids;
static int idle_ok;

static void *look(void *a)
{
	(void)a;
	idle_ok = kt_threads_idle(idle_tids, 2, 300);
	return NULL;
}

/* kt_threads_idle on a thread of its own, while every microprocess sleeps */
static int idle_seen(pid_t *tid)
{
	idle_tids = tid;
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, look, NULL), 0);
	while (pthread_tryjoin_np(t, NULL) != 0)
		kr_mp_sleep_for(20 * MS);
	return idle_ok;
}

/* With a slice, the timers stop while the VPs sleep: an idle participant
 * takes no signals and no processor. */
static void an_idle_participant_uses_no_processor(void)
{
	seg_pick();
	KT_EQ(kr_carea_configure(&(kr_carea_config){.segment = seg_name, .slice = 1 * MS}), 0);
	kr_config c = {.vps = 2, .alloc = &kr_carea};
	KT_EQ(kr_init(&c), 0);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, sleeps_a_while, NULL), 0);
	struct kr_carea_seg *s = seg_map();
	struct kr_carea_proc *p = slot_of(s, getpid());
	KT_CHECK(p != NULL);
	KT_WAIT(__atomic_load_n(&p->vp[1].tid, __ATOMIC_RELAXED) > 0, kr_mp_sleep_for(MS));
	pid_t tid[2] = {p->vp[0].tid, p->vp[1].tid};
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, sleeps_a_while, NULL), 0);
	/* the main microprocess sleeps too, off the VPs' threads' view: the
	 * check runs on a thread that is no VP */
	KT_EQ(kr_mp_sleep_for(20 * MS), 0);
	KT_CHECK(idle_seen(tid));
	__atomic_store_n(&idle_go, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	KT_EQ(kr_fini(), 0);
	shm_unlink(seg_name);
}

/* A program without kr_carea installs nothing. */
/* KARUI_CAREA_SLICE_US: a value that is no number of microseconds from
 * 1000 gives no slice and one line on stderr; a huge one is 10 s. */
static int slice_env_complains(const char *value)
{
	int p[2];
	KT_EQ(pipe(p), 0);
	fflush(stderr);
	pid_t pid = fork();
	KT_CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 2);
		setenv("KARUI_CAREA_SLICE_US", value, 1);
		kr_config c = {.vps = 1, .alloc = &kr_carea};
		_exit(kr_init(&c) == 0 && kr_fini() == 0 ? 0 : 1);
	}
	close(p[1]);
	char buf[512] = {0};
	size_t n = 0;
	ssize_t r;
	while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	close(p[0]);
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return strstr(buf, "KARUI_CAREA_SLICE_US") != NULL;
}

static void a_time_slice_from_the_environment_is_checked(void)
{
	seg_pick();
	setenv("KARUI_CAREA_SEGMENT", seg_name, 1);
	KT_EQ(slice_env_complains("-5"), 1);
	KT_EQ(slice_env_complains("abc"), 1);
	KT_EQ(slice_env_complains("999"), 1);
	KT_EQ(slice_env_complains("2000x"), 1);
	KT_EQ(slice_env_complains("2000"), 0);
	KT_EQ(slice_env_complains("18446744073709551615"), 0);
	KT_EQ(slice_env_complains("99999999999999999999999"), 0);
	shm_unlink(seg_name);
}

static void without_it_nothing_changes(void)
{
	init(2);
	struct sigaction sa;
	KT_EQ(sigaction(SIGURG, NULL, &sa), 0);
	KT_CHECK(sa.sa_handler == SIG_DFL);
	KT_EQ(kr_carea_stats_get(&(kr_carea_stats){0}), EPERM);
	KT_EQ(kr_fini(), 0);
}

/* The segments of tests that failed or skipped before removing theirs. */
static void seg_sweep(void)
{
	char prefix[64];
	int n = snprintf(prefix, sizeof prefix, "karui-carea-test-%d-", (int)main_pid);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));)
		if (strncmp(e->d_name, prefix, (size_t)n) == 0) {
			char name[300];
			snprintf(name, sizeof name, "/%s", e->d_name);
			shm_unlink(name);
		}
	closedir(d);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	main_pid = getpid();
	KT_RUN(a_process_alone_gets_every_processor);
	KT_RUN(a_segment_it_cannot_trust_is_not_used);
	KT_RUN(two_participants_share_the_processors);
	KT_RUN(a_stopped_microprocess_is_recovered_and_ends_right);
	KT_RUN(dead_and_stopped_participants_give_their_processors_back);
	KT_RUN(a_scribbled_segment_stalls_nobody);
	KT_RUN(an_unannounced_block_hands_its_processor_to_a_parked_vp);
	KT_RUN(a_time_slice_ends_a_microprocess_that_never_yields);
	KT_RUN(a_microprocess_is_not_stopped_while_karui_runs_for_it);
	KT_RUN(priorities_hold_against_long_running_microprocesses);
	KT_RUN(an_idle_participant_uses_no_processor);
	KT_RUN(a_time_slice_from_the_environment_is_checked);
	KT_RUN(without_it_nothing_changes);
	seg_sweep();
	return kt_finish();
}
