/* L2: stacks (src/core/stack.c): guards and overflows, memory given back,
 * size classes, SIGSEGV handlers and the VPs' signal stacks. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "kt.h"
#include "kt_core.h"

#if defined(__SANITIZE_ADDRESS__)
/* The guard-page test wants the kernel's SIGSEGV, not ASan's report of it. */
const char *__asan_default_options(void) { return "handle_segv=0"; }
#endif
#if defined(__SANITIZE_THREAD__)
/* The same for TSan, whose handler also leaves SIGSEGV's action other than
 * the default, so that karui installs no overflow report of its own. */
const char *__tsan_default_options(void) { return "handle_segv=0"; }
#endif

static int deep(int n)
{
	volatile char buf[1024];
	buf[0] = (char)n;
	return n ? deep(n - 1) + buf[0] : 0;
}

static void *overflow(void *a) { return (void *)(intptr_t)deep(1 << 20); }

static void guard_page_turns_overflow_into_sigsegv(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		init(1);
		kr_mp *m;
		kr_mp_create(&m, NULL, overflow, NULL);
		kr_mp_join(m, NULL);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* Freed stacks past the VP's cache keep their memory while the process is
 * busy (the next creates reuse them with no page fault) and give it back
 * once they stayed unused while the VPs were idle. */
static long rss_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *touch_stack(void *a)
{
	volatile char buf[32768];
	memset((char *)buf, 1, sizeof buf);
	return (void *)(uintptr_t)(buf[(uintptr_t)a % sizeof buf] + (uintptr_t)a);
}

static void stacks_left_unused_while_idle_give_their_memory_back(void)
{
	init(1);
	enum { N = 2000 };
	static kr_mp *m[N];
	kr_attr at = {.stack_size = 65536};
	long base = rss_kib();
	for (int round = 0; round < 2; round++) {
		kr_stats s0, s1, s2;
		kr_stats_get(&s0);
		for (uintptr_t i = 0; i < N; i++)
			KT_EQ(kr_mp_create(&m[i], &at, touch_stack, (void *)i), 0);
		for (int i = 0; i < N; i++)
			KT_EQ(kr_mp_join(m[i], NULL), 0);
		kr_stats_get(&s1);
		long busy = rss_kib();
		/* the VP sleeps, and wakes to trim: two periods (after a
		 * second of idleness, and the next) */
		KT_WAIT((kr_stats_get(&s2), s2.stacks_trimmed - s1.stacks_trimmed >= N - 2 * 64),
			KT_EQ(kr_mp_sleep_for(100 * 1000 * 1000), 0));
		long idle = rss_kib();
		fprintf(stderr, "  round %d: %ld KiB kept after the joins, %ld KiB once idle"
				" (%lu stacks carved, %lu trimmed in %lu calls)\n",
			round, busy - base, idle - base, s1.stacks_mapped - s0.stacks_mapped,
			s2.stacks_trimmed - s1.stacks_trimmed,
			s2.stack_trim_calls - s1.stack_trim_calls);
		KT_CHECK(busy - base >= N * 32 / 2);   /* at least half of what was touched */
		KT_CHECK(busy - idle >= N * 32 / 2);
		/* all but the VP's cache, in few calls: the regions are neighbours */
		KT_CHECK(s2.stacks_trimmed - s1.stacks_trimmed >= N - 2 * 64);
		KT_CHECK(s2.stack_trim_calls - s1.stack_trim_calls <= 100);
		if (round) /* reused, none carved */
			KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	}
	KT_EQ(kr_fini(), 0);
}

/* A storm of creates and joins on two VPs, whose VPs go idle for moments
 * between the rounds, returns no memory while it lasts: the stacks are
 * reused at once.  (Returning it whenever a VP went idle cost a madvise
 * call per few stacks.) */
static void *nothing(void *a) { return a; }

static void create_join_storm_makes_few_madvise_calls(void)
{
	init(2);
	/* (TSan keeps a fiber per live microprocess, and stops past 8128) */
	enum { ROUND = KT_TSAN ? 2000 : 10000, ROUNDS = KT_TSAN ? 5 : 10 };
	static kr_mp *m[ROUND];
	kr_stats s0, s1;
	kr_stats_get(&s0);
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < ROUND; i++)
			KT_EQ(kr_mp_create(&m[i], NULL, nothing, NULL), 0);
		for (int i = 0; i < ROUND; i++)
			KT_EQ(kr_mp_join(m[i], NULL), 0);
	}
	kr_stats_get(&s1);
	fprintf(stderr, "  %d creates and joins: %lu stacks carved, %lu madvise calls"
			" returned %lu stacks\n",
		ROUND * ROUNDS, s1.stacks_mapped - s0.stacks_mapped,
		s1.stack_trim_calls - s0.stack_trim_calls, s1.stacks_trimmed - s0.stacks_trimmed);
	/* at most a trim per period, and each finds little unused */
	KT_CHECK(s1.stack_trim_calls - s0.stack_trim_calls < 100);
	KT_EQ(kr_fini(), 0);
}

/* Size classes are created on first use and bounded in number: any number
 * of distinct sizes works, with nothing alive in between, and the second
 * time round every size reuses a stack of its class. */
static void many_stack_sizes_never_run_out_of_classes(void)
{
	init(1);
	for (int pass = 0; pass < 2; pass++) {
		kr_stats s0, s1;
		kr_stats_get(&s0);
		for (size_t size = KR_STACK_MIN; size <= 8u << 20; size += 4096 * 7) {
			for (int g = 0; g < 2; g++) {
				kr_attr at = {.stack_size = size, .flags = g ? KR_MP_NOGUARD : 0};
				kr_mp *m;
				KT_EQ(kr_mp_create(&m, &at, nothing, NULL), 0);
				KT_EQ(kr_mp_join(m, NULL), 0);
			}
		}
		kr_stats_get(&s1);
		if (pass)
			KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	}
	KT_EQ(kr_fini(), 0);
}

/* A handler installed with SA_ONSTACK runs on the VP's alternate signal
 * stack, not on the one page of the microprocess it interrupts. */
static volatile sig_atomic_t handled, handled_on_altstack;

static void note_onstack(int sig)
{
	stack_t ss;
	(void)sig;
	handled = 1;
	handled_on_altstack = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

static void *raise_usr1(void *a)
{
	KT_EQ(raise(SIGUSR1), 0);
	return a;
}

static void sa_onstack_handlers_run_on_the_vps_signal_stack(void)
{
	init(1);
	struct sigaction sa = {.sa_handler = note_onstack, .sa_flags = SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	KT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	kr_attr one_page = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &one_page, raise_usr1, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_CHECK(handled);
	KT_CHECK(handled_on_altstack);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- overflows and SIGSEGV ---------------- */

/* Run fn in a child with its stderr into buf; the child's wait status. */
static int run_child(void (*fn)(void), char *buf, size_t len)
{
	int p[2];
	KT_EQ(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		fn();
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(p[0], buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(p[0]);
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	return st;
}

static void *say_id_then_overflow(void *a)
{
	fprintf(stderr, "id %lu\n", kr_mp_id(kr_mp_self()));
	return overflow(a);
}

static void overflow_in_a_microprocess(void)
{
	init(2);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, say_id_then_overflow, NULL), 0);
	kr_mp_join(m, NULL);
}

static void overflow_message_names_the_microprocess_and_sigsegv_kills(void)
{
	char out[4096], want[128];
	int st = run_child(overflow_in_a_microprocess, out, sizeof out);
	unsigned long id;
	const char *p = strstr(out, "id ");
	KT_CHECK(p && sscanf(p, "id %lu", &id) == 1);
	snprintf(want, sizeof want, "karui: microprocess %lu overflowed its stack (64 KiB) at 0x",
		 id);
	fprintf(stderr, "  %s", strstr(out, "karui:") ? strstr(out, "karui:") : out);
	KT_CHECK(strstr(out, want));
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* A frame larger than a page, written at its low end, from a stack near
 * its end: it lands in the guard (and faults), not on the record of the
 * stack carved just below. */
static kr_mp *jumper;

static __attribute__((noinline)) int big_frame(void)
{
	volatile char buf[16384];
	buf[0] = 1;
	return buf[0];
}

static void *park_then_maybe_jump(void *a)
{
	kr_mp_park();
	if (kr_mp_self() == jumper)
		big_frame();
	return a;
}

static void large_frame_faults_in_the_guard(void)
{
	init(1);
	enum { K = 40 };
	kr_mp *m[K];
	kr_attr at = {.stack_size = 8192};
	uintptr_t stride = 8192 + KR_STACK_GUARD;
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_create(&m[i], &at, park_then_maybe_jump, NULL), 0);
	kr_mp_yield(); /* all park */
	/* one whose neighbour below is alive and parked */
	for (int i = 0; i < K && !jumper; i++)
		for (int j = 0; j < K; j++)
			if ((uintptr_t)m[j] + stride == (uintptr_t)m[i])
				jumper = m[i];
	KT_CHECK(jumper);
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_unpark(m[i]), 0);
	for (int i = 0; i < K; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	_exit(3); /* not reached: the big frame faults */
}

static void large_frame_cannot_jump_the_guard_onto_the_next_stack(void)
{
	char out[4096];
	int st = run_child(large_frame_faults_in_the_guard, out, sizeof out);
	fprintf(stderr, "%s", out);
	KT_CHECK(strstr(out, "overflowed its stack (8 KiB)"));
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* karui's handler is there while karui runs, and gone after kr_fini. */
static void fini_puts_back_the_default_sigsegv_action(void)
{
	struct sigaction sa;
	init(1);
	KT_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	KT_CHECK((sa.sa_flags & SA_SIGINFO) && (sa.sa_flags & SA_ONSTACK));
	KT_EQ(kr_fini(), 0);
	KT_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	KT_CHECK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
}

/* The application's SIGSEGV handler, installed with SA_ONSTACK, runs for
 * the overflow of a microprocess on any VP, on that VP's alternate stack
 * (karui installs no handler of its own then). */
static void exit_with_vp(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	stack_t ss;
	int on = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
	_exit(on ? 50 + (int)kr_vp_id(kr_vp_self()) : 40);
}

static void overflow_with_own_handler(unsigned vp)
{
	struct sigaction sa = {.sa_sigaction = exit_with_vp, .sa_flags = SA_SIGINFO | SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	KT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	pid_t pid = fork();
	if (pid == 0) {
		init(vp + 1);
		kr_mp *m;
		KT_EQ(kr_mp_create(&m, NULL, overflow, NULL), 0);
		if (vp == 0)
			kr_mp_join(m, NULL);
		/* hold VP 0 without a scheduling point: VP 1 takes m */
		for (uint64_t end = kr_now() + KT_WAIT_S * 1000000000ull; kr_now() < end;)
			;
		_exit(3);
	}
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 50 + (int)vp);
}

static void own_sigsegv_handler_runs_for_an_overflow_on_vp_0(void) { overflow_with_own_handler(0); }
static void own_sigsegv_handler_runs_for_an_overflow_on_vp_1(void) { overflow_with_own_handler(1); }

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(stacks_left_unused_while_idle_give_their_memory_back);
	KT_RUN(create_join_storm_makes_few_madvise_calls);
	KT_RUN(many_stack_sizes_never_run_out_of_classes);
	KT_RUN(sa_onstack_handlers_run_on_the_vps_signal_stack);
	KT_RUN(guard_page_turns_overflow_into_sigsegv);
	KT_RUN(overflow_message_names_the_microprocess_and_sigsegv_kills);
	KT_RUN(large_frame_cannot_jump_the_guard_onto_the_next_stack);
	KT_RUN(fini_puts_back_the_default_sigsegv_action);
	KT_RUN(own_sigsegv_handler_runs_for_an_overflow_on_vp_0);
	KT_RUN(own_sigsegv_handler_runs_for_an_overflow_on_vp_1);
	return kt_finish();
}
