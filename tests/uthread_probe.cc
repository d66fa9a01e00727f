/*
 * A small ordinary C++ program with threads, which test_uproc runs as a
 * μprocess and natively and compares: std::thread, std::mutex,
 * std::condition_variable, std::async, thread_local, pthread barriers,
 * per-thread signal masks and signals to one thread or to the process.
 * Built as a plain PIE with no sanitizer, as a distribution binary.
 *   uthread_probe run              a line per check (natively the same),
 *                                  timer_create's SIGEV_THREAD too
 *   uthread_probe exit-in-thread N a thread calls exit(N) while the main
 *                                  thread waits in a join for ever: "bye"
 *                                  from its atexit handler, status N
 *   uthread_probe crash-in-thread  a thread writes through NULL while the
 *                                  others wait
 *   uthread_probe main-exits-first the main thread ends by pthread_exit;
 *                                  a thread says "worker done" 50 ms later
 *   uthread_probe live-rewrite     4 threads and the main one make the same
 *                                  system calls, from two sites, 20000
 *                                  times each while they are rewritten:
 *                                  "ok" if each result and the registers
 *                                  around it were right, then for each site
 *                                  "rewritten" or "trapping": one with a
 *                                  slot in reach, one with none (whose mov
 *                                  before it becomes the jump)
 *   uthread_probe close-race       a thread reads, polls and fstats fd 9
 *                                  while the main thread closes it and
 *                                  makes it again (a pipe's end, /dev/zero)
 *                                  20000 times: "survived"
 *   uthread_probe spin N           N threads and the main one compute for
 *                                  ever without system calls ("spinning")
 *   uthread_probe exec PATH ARG    a thread waits in a read of its stdin,
 *                                  another sleeps; the main thread execs
 *                                  PATH ARG
 *   uthread_probe exec-in-thread PATH   a thread other than the first
 *                                  execs PATH x (its errno if it fails)
 *   uthread_probe abuse            futex and clone with bad arguments: each
 *                                  one's errno (natively the same)
 *   uthread_probe bad-stack        a thread started on a stack that is not
 *                                  mapped: the process ends by SIGSEGV
 */
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pid_t tid() { return (pid_t)syscall(SYS_gettid); }

/* getppid through the syscall instruction at live_site, with registers
 * that the call must keep set around it: 0 if all were kept. */
extern "C" unsigned char live_site[];
__attribute__((noinline)) static long live_call(long *ppid)
{
	long rax = SYS_getppid, r12 = 0x1212, rbx = 0x3434, rdi = 0x5656, rsi = 0x7878;
	__asm__ volatile(".globl live_site\n"
			 "live_site: syscall"
			 : "+a"(rax), "+r"(r12), "+b"(rbx), "+D"(rdi), "+S"(rsi)
			 :
			 : "rcx", "r11", "memory");
	*ppid = rax;
	return (r12 != 0x1212) + (rbx != 0x3434) + (rdi != 0x5656) + (rsi != 0x7878);
}

/* getppid through `mov $110, %eax; syscall` with no padding within a
 * rel8 of it (functions of rets around it): rewritten, if at all, by
 * making the mov the jump. */
extern "C" long mov_call(void);
extern "C" unsigned char mov_site[];
__asm__(".text\n"
	".p2align 4\n"
	"mov_before: .cfi_startproc\n .fill 160, 1, 0xc3\n .cfi_endproc\n"
	".globl mov_call\n"
	".type mov_call, @function\n"
	"mov_call: .cfi_startproc\n"
	"        mov $110, %eax\n"
	".globl mov_site\n"
	"mov_site: syscall\n"
	"        ret\n"
	"        .cfi_endproc\n"
	".size mov_call, .-mov_call\n"
	"mov_after: .cfi_startproc\n .fill 160, 1, 0xc3\n .cfi_endproc\n");

static void close_race()
{
	std::atomic<bool> stop{false};
	std::thread r([&] {
		char b[64];
		struct stat st;
		while (!stop) {
			struct pollfd p = {9, POLLIN, 0};
			(void)!poll(&p, 1, 0);
			(void)!read(9, b, sizeof b);
			(void)!fstat(9, &st);
		}
	});
	for (int i = 0; i < 20000; i++) {
		int p[2];
		if (i % 2 == 0 && pipe(p) == 0) {
			(void)!write(p[1], "data", 4);
			dup2(p[0], 9);
			close(p[0]);
			close(p[1]);
		} else {
			int z = open("/dev/zero", O_RDONLY);
			dup2(z, 9);
			close(z);
		}
		close(9);
	}
	stop = true;
	r.join();
	puts("survived");
}

static void live_rewrite()
{
	long want;
	if (live_call(&want) || mov_call() != want) {
		puts("registers changed");
		return;
	}
	std::atomic<long> bad{0};
	auto work = [&] {
		for (int i = 0; i < 20000; i++) {
			long got;
			if (live_call(&got) || got != want || mov_call() != want)
				bad++;
		}
	};
	std::vector<std::thread> ts;
	for (int i = 0; i < 4; i++)
		ts.emplace_back(work);
	work();
	for (auto &t : ts)
		t.join();
	printf("%s\n%s\n%s\n", bad ? "bad" : "ok", live_site[0] == 0xeb ? "rewritten" : "trapping",
	       *(volatile unsigned char *)((uintptr_t)mov_site - 5) == 0xe9 ? "rewritten"
									   : "trapping");
}

static thread_local int tl = -1;

static void counters()
{
	std::mutex mu;
	long sum = 0;
	std::vector<std::thread> ts;
	for (int i = 0; i < 4; i++)
		ts.emplace_back([&] {
			for (int k = 0; k < 20000; k++) {
				std::lock_guard<std::mutex> g(mu);
				sum++;
			}
		});
	for (auto &t : ts)
		t.join();
	printf("sum %ld\n", sum);
}

static void tls_and_ids()
{
	std::mutex mu;
	std::set<pid_t> tids;
	std::atomic<int> bad{0};
	pid_t pid = getpid(), me = tid();
	std::vector<std::thread> ts;
	for (int i = 0; i < 4; i++)
		ts.emplace_back([&, i] {
			tl = i * 10;
			std::this_thread::sleep_for(std::chrono::milliseconds(2));
			if (tl != i * 10 || getpid() != pid)
				bad++;
			std::lock_guard<std::mutex> g(mu);
			tids.insert(tid());
		});
	for (auto &t : ts)
		t.join();
	printf("tls %s, main's %d\n", bad ? "mixed" : "own", tl);
	printf("tids %zu distinct, main's not among them %d, main's is the pid %d\n", tids.size(),
	       !tids.count(me), me == pid);
}

static void pingpong()
{
	std::mutex mu;
	std::condition_variable cv;
	int turn = 0, rounds = 1000;
	std::thread a([&] {
		for (int i = 0; i < rounds; i++) {
			std::unique_lock<std::mutex> l(mu);
			cv.wait(l, [&] { return turn == 0; });
			turn = 1;
			cv.notify_all();
		}
	});
	int n = 0;
	for (int i = 0; i < rounds; i++) {
		std::unique_lock<std::mutex> l(mu);
		cv.wait(l, [&] { return turn == 1; });
		turn = 0;
		n++;
		cv.notify_all();
	}
	a.join();
	printf("pingpong %d\n", n);
	std::unique_lock<std::mutex> l(mu);
	auto r = cv.wait_for(l, std::chrono::milliseconds(20));
	printf("wait_for %s\n", r == std::cv_status::timeout ? "timeout" : "woken");
}

static void async_and_barrier()
{
	auto f = std::async(std::launch::async, [] { return 6 * 7; });
	printf("async %d\n", f.get());
	pthread_barrier_t b;
	pthread_barrier_init(&b, nullptr, 3);
	std::atomic<int> serial{0};
	auto body = [&] {
		for (int i = 0; i < 100; i++)
			if (pthread_barrier_wait(&b) == PTHREAD_BARRIER_SERIAL_THREAD)
				serial++;
	};
	std::thread x(body), y(body);
	body();
	x.join();
	y.join();
	pthread_barrier_destroy(&b);
	printf("barrier %d\n", serial.load());
}

static std::atomic<pid_t> handled_by{0};
static void on_sig(int) { handled_by = tid(); }

static int has_pending(int sig)
{
	sigset_t p;
	sigpending(&p);
	return sigismember(&p, sig);
}

/* A signal to one thread waits for it; one to the process goes to a thread
 * that does not block it. */
static void signals()
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig;
	sigaction(SIGUSR1, &sa, nullptr);
	sigaction(SIGUSR2, &sa, nullptr);
	std::atomic<int> stage{0};
	std::atomic<pid_t> atid{0};
	std::thread a([&] {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &s, nullptr);
		atid = tid();
		stage = 1;
		while (stage != 2)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		printf("pending in the thread %d\n", has_pending(SIGUSR1));
		pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
		printf("handled in the thread %d\n", handled_by.load() == atid);
	});
	while (stage != 1)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	pthread_kill(a.native_handle(), SIGUSR1);
	printf("pending in main %d\n", has_pending(SIGUSR1));
	stage = 2;
	a.join();

	/* to the process, main blocking it: the thread takes it */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, nullptr);
	handled_by = 0;
	std::atomic<pid_t> btid{0};
	std::thread b([&] {
		pthread_sigmask(SIG_UNBLOCK, &s, nullptr); /* it had main's */
		btid = tid();
		for (int i = 0; i < 5000 && !handled_by; i++)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	});
	while (!btid)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	kill(getpid(), SIGUSR2);
	b.join();
	printf("to the process: handled by the thread %d\n", handled_by.load() == btid);
	pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

static void joined()
{
	pthread_t t;
	pthread_create(
		&t, nullptr, [](void *) -> void * { return (void *)7; }, nullptr);
	void *r;
	pthread_join(t, &r);
	printf("joined %ld\n", (long)r);
	pthread_t d;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	std::atomic<int> ran{0};
	pthread_create(
		&d, &at,
		[](void *p) -> void * {
			*(std::atomic<int> *)p = 1;
			return nullptr;
		},
		&ran);
	while (!ran)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	printf("detached ran\n");
}

static std::atomic<int> fired{0};
static void on_timer(union sigval v) { fired += v.sival_int; }

/* timer_create with SIGEV_THREAD: glibc's helper thread runs it */
static void timer_thread()
{
	timer_t t;
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD;
	ev.sigev_notify_function = on_timer;
	ev.sigev_value.sival_int = 1;
	if (timer_create(CLOCK_MONOTONIC, &ev, &t)) {
		printf("timer_create: %s\n", strerror(errno));
		return;
	}
	struct itimerspec ts = {{0, 10000000}, {0, 10000000}}, g;
	timer_settime(t, 0, &ts, nullptr);
	while (fired < 3)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	timer_gettime(t, &g);
	printf("timer: fired, interval %ld ns, overrun %d\n", g.it_interval.tv_nsec,
	       timer_getoverrun(t));
	timer_delete(t);
}

static const char *err(long r) { return r < 0 ? strerrorname_np(errno) : "ok"; }

/* futex and clone as an attacker would call them */
static void abuse()
{
	int w = 0;
	struct timespec *bad = (struct timespec *)16;
	printf("wait on NULL: %s\n", err(syscall(SYS_futex, nullptr, FUTEX_WAIT, 0, nullptr, 0, 0)));
	printf("wait unaligned: %s\n",
	       err(syscall(SYS_futex, (char *)&w + 1, FUTEX_WAIT, 0, nullptr, 0, 0)));
	printf("wait bad timeout: %s\n", err(syscall(SYS_futex, &w, FUTEX_WAIT, 0, bad, 0, 0)));
	printf("wait changed: %s\n", err(syscall(SYS_futex, &w, FUTEX_WAIT, 1, nullptr, 0, 0)));
	printf("wait bitset 0: %s\n",
	       err(syscall(SYS_futex, &w, FUTEX_WAIT_BITSET, 0, nullptr, 0, 0)));
	printf("wake none: %ld\n", syscall(SYS_futex, &w, FUTEX_WAKE, 5, nullptr, 0, 0));
	printf("requeue to NULL: %s\n",
	       err(syscall(SYS_futex, &w, FUTEX_REQUEUE, 1, 1, nullptr, 0)));
	printf("cmp_requeue changed: %s\n",
	       err(syscall(SYS_futex, &w, FUTEX_CMP_REQUEUE, 1, 1, &w + 1, 7)));
	printf("clone thread without vm: %s\n",
	       err(syscall(SYS_clone, CLONE_THREAD | CLONE_SIGHAND, 0, 0, 0, 0)));
	printf("clone thread without sighand: %s\n",
	       err(syscall(SYS_clone, CLONE_THREAD | CLONE_VM, 0, 0, 0, 0)));
}

static void forever()
{
	for (;;)
		pause();
}

static void bye() { printf("bye\n"); }

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	setvbuf(stdout, nullptr, _IOLBF, 0);
	const char *m = argv[1];
	if (!strcmp(m, "run")) {
		counters();
		tls_and_ids();
		pingpong();
		async_and_barrier();
		signals();
		joined();
		timer_thread();
		return 0;
	}
	if (!strcmp(m, "exit-in-thread") && argc > 2) {
		atexit(bye);
		int code = atoi(argv[2]);
		std::thread w(forever);
		std::thread x([code] {
			std::this_thread::sleep_for(std::chrono::milliseconds(10));
			exit(code);
		});
		w.join();
		return 99;
	}
	if (!strcmp(m, "crash-in-thread")) {
		std::thread w(forever);
		std::thread x([] { *(volatile int *)(uintptr_t)(getpid() & 1) = 1; });
		w.join();
		return 99;
	}
	if (!strcmp(m, "main-exits-first")) {
		std::thread x([] {
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
			printf("worker done\n");
		});
		x.detach();
		pthread_exit(nullptr);
	}
	if (!strcmp(m, "close-race")) {
		close_race();
		return 0;
	}
	if (!strcmp(m, "live-rewrite")) {
		live_rewrite();
		return 0;
	}
	if (!strcmp(m, "spin") && argc > 2) {
		static volatile unsigned long sink;
		for (int i = 0; i < atoi(argv[2]); i++)
			std::thread([] {
				for (;;)
					sink++;
			}).detach();
		printf("spinning\n");
		for (;;)
			sink++;
	}
	if (!strcmp(m, "exec") && argc > 3) {
		std::thread r([] {
			char c;
			while (read(0, &c, 1) != 0)
				;
		});
		std::thread s(forever);
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
		execl(argv[2], argv[2], argv[3], (char *)nullptr);
		printf("exec: %s\n", strerror(errno));
		return 1;
	}
	if (!strcmp(m, "abuse")) {
		abuse();
		return 0;
	}
	if (!strcmp(m, "bad-stack")) {
		std::thread w(forever);
		syscall(SYS_clone, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD,
			(void *)4096, 0, 0, 0);
		w.join();
		return 99;
	}
	if (!strcmp(m, "exec-in-thread") && argc > 2) {
		std::thread x([argv] {
			execl(argv[2], argv[2], "x", (char *)nullptr);
			printf("%s\n", strerrorname_np(errno));
		});
		x.join();
		return 0;
	}
	return 2;
}
