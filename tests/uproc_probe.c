/*
 * A small ordinary program that test_uproc runs as a μprocess to make it
 * do what Debian's programs do not do on demand: crash in each way, leak,
 * print what it sees of its process state.  Built as a plain PIE, with no
 * sanitizer: it must look to karui like any distribution binary.
 *   uproc_probe segv|abort|fpe|ill|exit N|return N
 *   uproc_probe pid          its pid, twice: getpid and the raw call
 *   uproc_probe cwd          getcwd
 *   uproc_probe umask        the umask it got
 *   uproc_probe leak N       opens N files and maps N MiB, touches them,
 *                            and ends without releasing any
 *   uproc_probe setuid       setuid(0)'s errno
 *   uproc_probe fork         fork()'s errno
 *   uproc_probe thread       pthread_create's error
 *   uproc_probe write-after-close   writes to stdout after its reader went
 *   uproc_probe env NAME     getenv
 *   uproc_probe sig ign|catch|block N   ignores, catches or blocks signal
 *                            N, says "ready", then answers each line of its
 *                            stdin with "got LINE" ("unblock": unblocks N
 *                            first) until end of file
 *   uproc_probe spin         getppid() for ever
 *   uproc_probe cpu          what its C library learnt from cpuid: cache
 *                            sizes and a few features
 *   uproc_probe regs NR      NR (getpid: the short path of a rewritten
 *                            site, umask: the general one) 6 times from one
 *                            site; prints "kept" if every register the
 *                            syscall instruction keeps was kept each time,
 *                            and whether the site was rewritten
 *   uproc_probe regs-nf NR   the same from a site whose flags are dead after
 *                            it (a cmp follows), the flags not checked
 *   uproc_probe site         one getpid from that site; whether the site
 *                            was rewritten by then
 *   uproc_probe state ARG    what a kept image must start afresh: its runs
 *                            counted in .bss and .data, ARG copied to the
 *                            heap, its name, $PROBE, whether its pid is the
 *                            tid glibc cached for its thread (a mutex's
 *                            owner), and "bye" from an atexit handler
 *   uproc_probe state-mprotect   state, after an mprotect of its own .data
 *   uproc_probe map FILE     maps FILE read-only: the address and the text
 *   uproc_probe efault       each system call below with an unmapped, a
 *                            non-canonical and (where it writes) a
 *                            read-only pointer: prints each one that did
 *                            not fail with EFAULT, then "N calls"
 *   uproc_probe timed        sem_timedwait, pthread_cond_timedwait and
 *                            pthread_mutex_timedlock, each for 20 ms:
 *                            their errors
 *   uproc_probe wait         sem_wait with nobody to post: for ever
 *   uproc_probe alarm        alarm(1), then pause()
 *   uproc_probe altstack     sigaltstack set, read back: "kept" or not
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <semaphore.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *nothing(void *a) { return a; }

#if defined(__x86_64__) /* μprocesses are x86-64 only; regs is its code */
/* One system call from a site of its own (probe_site) with known values
 * in the registers the syscall instruction keeps: returns 1 if they are
 * all unchanged (the flags, %rdi %rsi %rdx %r8 %r9 %r10 %r12, %xmm15,
 * all of %ymm3, and with AVX-512 %zmm17). */
extern const unsigned char probe_site[], probe_site_nf[];
void probe_call(void *b);
void probe_call_nf(void *b);
/* probe_call(b): a function of its own, so that the padding after it is
 * near its system call, as in a C library's wrappers.  probe_call_nf: the
 * same with a cmp of the result right after the call, as the wrappers
 * have, so that its flags are dead there (and its `cf` meaningless). */
#define PROBE_CALL(fn, site, after) \
__asm__(".text\n" \
	".p2align 4\n" \
	".type " #fn ", @function\n" \
	#fn ":\n" \
	".cfi_startproc\n" \
	"push %r12\n" \
	".cfi_adjust_cfa_offset 8\n" \
	"mov (%rdi), %rax\n" \
	"vmovdqu (%rax), %ymm3\n" \
	"movdqu 16(%rax), %xmm15\n" \
	"cmpq $0, 16(%rdi)\n" \
	"jz 1f\n" \
	"vmovdqu64 (%rax), %zmm17\n" \
	"1:\n" \
	"mov %rdi, %r11\n" \
	"mov (%rax), %rdi\n" \
	"mov 8(%rax), %rsi\n" \
	"mov 16(%rax), %rdx\n" \
	"mov 24(%rax), %r8\n" \
	"mov 32(%rax), %r9\n" \
	"mov 40(%rax), %r10\n" \
	"mov 48(%rax), %r12\n" \
	"push %r11\n" \
	".cfi_adjust_cfa_offset 8\n" \
	"mov 8(%r11), %rax\n" \
	"stc\n" \
	".globl " #site "\n" \
	#site ": syscall\n" \
	after \
	"pop %rax\n" \
	".cfi_adjust_cfa_offset -8\n" \
	"setc 192(%rax)\n" \
	"vmovdqu %ymm3, 24(%rax)\n" \
	"movdqu %xmm15, 56(%rax)\n" \
	"mov %rdi, 136(%rax)\n" \
	"mov %rsi, 144(%rax)\n" \
	"mov %rdx, 152(%rax)\n" \
	"mov %r8, 160(%rax)\n" \
	"mov %r9, 168(%rax)\n" \
	"mov %r10, 176(%rax)\n" \
	"mov %r12, 184(%rax)\n" \
	"cmpq $0, 16(%rax)\n" \
	"jz 2f\n" \
	"vmovdqu64 %zmm17, 72(%rax)\n" \
	"2: vzeroupper\n" \
	"pop %r12\n" \
	".cfi_adjust_cfa_offset -8\n" \
	"ret\n" \
	".cfi_endproc\n" \
	".size " #fn ", .-" #fn "\n" \
	".p2align 4\n");
PROBE_CALL(probe_call, probe_site, "")
PROBE_CALL(probe_call_nf, probe_site_nf, "cmp $-4096, %rax\n")
__attribute__((noinline)) static int regs_kept(long nr, int avx512, int nf)
{
	static const uint64_t pat[8] = {0x0123456789abcdef, 0xfedcba9876543210, 0x1111222233334444,
					0x5555666677778888, 0x99990000aaaabbbb, 0xccccddddeeeeffff,
					0x1357924680acebdf, 0x2468ace013579bdf};
	struct {
		const uint64_t *pat;   /* 0 */
		long nr, avx512;       /* 8, 16 */
		uint64_t y[4], x[2], z[8], g[7]; /* 24, 56, 72, 136 */
		unsigned char cf;      /* 192 */
	} __attribute__((aligned(64))) b = {pat, nr, avx512};
	(nf ? probe_call_nf : probe_call)(&b);
	int ok = (nf || b.cf == 1) && !memcmp(b.y, pat, 32) && !memcmp(b.x, pat + 2, 16) &&
		 !memcmp(b.g, pat, 56);
	if (avx512)
		ok = ok && !memcmp(b.z, pat, 64);
	return ok;
}
#endif

static void on_signal(int s)
{
	(void)s;
}

static int runs_bss;
static int runs_data = 10;

static void bye(void)
{
	puts("bye");
}

static int state(const char *arg)
{
	runs_bss++;
	runs_data++;
	char *heap = malloc(strlen(arg) + 1);
	if (!heap)
		return 3;
	strcpy(heap, arg);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&mu); /* its owner: the tid glibc cached */
	int tid_ok = mu.__data.__owner == syscall(SYS_gettid);
	const char *v = getenv("PROBE");
	atexit(bye);
	printf("%d %d %s %s %s %s\n", runs_bss, runs_data, heap, program_invocation_short_name,
	       v ? v : "-", tid_ok ? "tid-ok" : "tid-wrong");
	return 0;
}

#if defined(__x86_64__) /* μprocesses are x86-64 only; the legacy calls too */
/* efault: each call, with each bad pointer, fails with EFAULT */
static int calls, wrong;
static void want_efault(const char *what, long r)
{
	calls++;
	if (r != -1 || errno != EFAULT) {
		wrong++;
		printf("%s: %ld %s\n", what, r, strerror(errno));
	}
}
#define EF(what, ...) want_efault(what, syscall(__VA_ARGS__))

static int bad_pointers(void)
{
	char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (gone == MAP_FAILED || ro == MAP_FAILED || munmap(gone, 4096))
		return 3;
	int p[2], v = 0;
	if (pipe(p) || write(p[1], "data", 4) != 4)
		return 4;
	struct timespec ts = {0, 1000};
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	struct stat st;
	char *bads[] = {gone, (char *)0x8000000000000000ul, ro};
	for (int i = 0; i < 3; i++) {
		char *b = bads[i];
		int w = b != ro; /* a bad pointer to read from */
		if (w) {
			EF("open", SYS_open, b, O_RDONLY);
			EF("openat", SYS_openat, AT_FDCWD, b, O_RDONLY);
			EF("creat", SYS_creat, b, 0600);
			EF("stat", SYS_stat, b, &st);
			EF("chdir", SYS_chdir, b);
			EF("mkdir", SYS_mkdir, b, 0700);
			EF("access", SYS_access, b, F_OK);
			EF("statfs", SYS_statfs, b, &st);
			EF("truncate", SYS_truncate, b, 0);
			EF("write(pipe)", SYS_write, p[1], b, 4);
			EF("writev(pipe)", SYS_writev, p[1], b, 1);
			EF("poll", SYS_poll, b, 1, 0);
			EF("ppoll(fds)", SYS_ppoll, b, 1, &ts, NULL, 8);
			EF("ppoll(timeout)", SYS_ppoll, &pf, 1, b, NULL, 8);
			EF("nanosleep", SYS_nanosleep, b, NULL);
			EF("clock_nanosleep", SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, b, NULL);
			EF("futex(word)", SYS_futex, b, FUTEX_WAIT, 0, NULL);
			EF("futex(timeout)", SYS_futex, &v, FUTEX_WAIT, 0, b);
			EF("rt_sigaction(act)", SYS_rt_sigaction, SIGUSR1, b, NULL, 8);
			EF("rt_sigprocmask(set)", SYS_rt_sigprocmask, SIG_BLOCK, b, NULL, 8);
			EF("sigaltstack(ss)", SYS_sigaltstack, b, NULL);
			EF("newfstatat(path)", SYS_newfstatat, p[0], b, &st, AT_EMPTY_PATH);
		}
		struct iovec iov = {b, 4};
		if (w)
			EF("writev(iov_base)", SYS_writev, p[1], &iov, 1);
		EF("readv(iov_base)", SYS_readv, p[0], &iov, 1);
		EF("read(pipe)", SYS_read, p[0], b, 4);
		EF("pipe", SYS_pipe, b);
		EF("pipe2", SYS_pipe2, b, 0);
		EF("getcwd", SYS_getcwd, b, 4096);
		EF("fstat(pipe)", SYS_fstat, p[0], b);
		EF("newfstatat(pipe)", SYS_newfstatat, p[0], "", b, AT_EMPTY_PATH);
		EF("ioctl(FIONREAD)", SYS_ioctl, p[0], FIONREAD, b);
		EF("rt_sigaction(old)", SYS_rt_sigaction, SIGUSR1, NULL, b, 8);
		EF("rt_sigprocmask(old)", SYS_rt_sigprocmask, SIG_BLOCK, NULL, b, 8);
		EF("rt_sigpending", SYS_rt_sigpending, b, 8);
		EF("sigaltstack(old)", SYS_sigaltstack, NULL, b);
		EF("arch_prctl(GET_FS)", SYS_arch_prctl, 0x1003, b);
		EF("uname", SYS_uname, b);
		EF("clock_gettime", SYS_clock_gettime, CLOCK_MONOTONIC, b);
		EF("getrandom", SYS_getrandom, b, 8, 0);
		EF("prlimit64", SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, b);
	}
	char c[4]; /* the pipe kept its data through it all */
	if (read(p[0], c, 4) != 4 || memcmp(c, "data", 4))
		puts("pipe: data lost");
	printf("%d calls\n", calls);
	return wrong ? 1 : 0;
}
#endif

static int timed(void)
{
	struct timespec t;
	sem_t sem;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	if (sem_init(&sem, 0, 0))
		return 3;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 20000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	int s = sem_timedwait(&sem, &t) ? errno : 0;
	pthread_mutex_lock(&mu);
	int c = pthread_cond_timedwait(&cv, &mu, &t);
	int m = pthread_mutex_timedlock(&mu, &t); /* held: by itself */
	printf("sem %s, cond %s, mutex %s\n", strerror(s), strerror(c), strerror(m));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *m = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(m, "segv"))
		return *(volatile int *)(uintptr_t)argc * 0 + *(volatile int *)(uintptr_t)(argc * 8);
	if (!strcmp(m, "abort"))
		abort();
	if (!strcmp(m, "fpe")) {
		volatile int z = 0;
		return 100 / z;
	}
	if (!strcmp(m, "ill"))
		__builtin_trap();
	if (!strcmp(m, "exit")) {
		printf("before exit\n");
		exit(n);
	}
	if (!strcmp(m, "return"))
		return n;
	if (!strcmp(m, "pid")) {
		printf("%d %ld\n", getpid(), syscall(SYS_getpid));
		return 0;
	}
	if (!strcmp(m, "cwd")) {
		char b[4096];
		puts(getcwd(b, sizeof b) ? b : strerror(errno));
		return 0;
	}
	if (!strcmp(m, "umask")) {
		printf("%03o\n", umask(0));
		return 0;
	}
	if (!strcmp(m, "leak")) {
		for (int i = 0; i < n; i++) {
			if (open("/dev/null", O_RDONLY) < 0)
				return 3;
			char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				return 4;
			memset(p, 1, 1 << 20);
			if (!malloc(4096))
				return 5;
		}
		return 0;
	}
	if (!strcmp(m, "setuid")) {
		printf("%s\n", setuid(0) ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(m, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		printf("%s\n", p < 0 ? strerrorname_np(errno) : "forked");
		return 0;
	}
	if (!strcmp(m, "thread")) {
		pthread_t t;
		int e = pthread_create(&t, NULL, nothing, NULL);
		printf("%s\n", e ? strerrorname_np(e) : "0");
		return 0;
	}
	if (!strcmp(m, "write-after-close")) {
		for (;;)
			if (write(1, "y\n", 2) < 0) {
				fprintf(stderr, "write: %s\n", strerrorname_np(errno));
				return 7;
			}
	}
#if defined(__x86_64__)
	if (!strcmp(m, "regs") || !strcmp(m, "regs-nf")) {
		long nr = !strcmp(argv[2], "umask") ? SYS_umask : SYS_getpid;
		int avx512 = __builtin_cpu_supports("avx512f"), kept = 1, nf = m[4] != 0;
		if (nr == SYS_umask)
			umask(022);
		for (int i = 0; i < 6; i++)
			kept &= regs_kept(nr, avx512, nf);
		printf("%s %s\n", kept ? "kept" : "changed",
		       (nf ? probe_site_nf : probe_site)[0] == 0xeb ? "rewritten" : "trapping");
		return 0;
	}
	if (!strcmp(m, "site")) {
		regs_kept(SYS_getpid, __builtin_cpu_supports("avx512f"), 0);
		puts(probe_site[0] == 0xeb ? "rewritten" : "trapping");
		return 0;
	}
#endif
	if (!strcmp(m, "cpu")) {
		printf("L1d %ld/%ld L2 %ld L3 %ld", sysconf(_SC_LEVEL1_DCACHE_SIZE),
		       sysconf(_SC_LEVEL1_DCACHE_LINESIZE), sysconf(_SC_LEVEL2_CACHE_SIZE),
		       sysconf(_SC_LEVEL3_CACHE_SIZE));
#if defined(__x86_64__)
		printf(" avx2 %d avx512f %d", !!__builtin_cpu_supports("avx2"),
		       !!__builtin_cpu_supports("avx512f"));
#endif
		printf("\n");
		return 0;
	}
	if (!strcmp(m, "sig") && argc > 3) {
		int s = atoi(argv[3]);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, s);
		if (!strcmp(argv[2], "ign"))
			signal(s, SIG_IGN);
		else if (!strcmp(argv[2], "catch"))
			signal(s, on_signal);
		else
			sigprocmask(SIG_BLOCK, &set, NULL);
		printf("ready\n");
		fflush(stdout);
		char line[256];
		while (fgets(line, sizeof line, stdin)) {
			if (!strcmp(line, "unblock\n"))
				sigprocmask(SIG_UNBLOCK, &set, NULL);
			printf("got %s", line);
			fflush(stdout);
		}
		return 0;
	}
	if (!strcmp(m, "spin"))
		for (;;)
			getppid();
	if (!strcmp(m, "state") && argc > 2)
		return state(argv[2]);
	if (!strcmp(m, "state-mprotect")) {
		uintptr_t pg = (uintptr_t)&runs_data & ~(uintptr_t)4095;
		if (mprotect((void *)pg, 4096, PROT_READ | PROT_WRITE))
			return 4;
		return state("m");
	}
	if (!strcmp(m, "map") && argc > 2) {
		int fd = open(argv[2], O_RDONLY);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) || !st.st_size)
			return 3;
		const char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			return 4;
		printf("%p %.*s\n", (const void *)p, (int)st.st_size, p);
		return 0;
	}
#if defined(__x86_64__)
	if (!strcmp(m, "efault"))
		return bad_pointers();
#endif
	if (!strcmp(m, "timed"))
		return timed();
	if (!strcmp(m, "wait")) {
		sem_t sem;
		sem_init(&sem, 0, 0);
		puts("waiting");
		fflush(stdout);
		return sem_wait(&sem) ? 5 : 6;
	}
	if (!strcmp(m, "alarm")) {
		alarm(1);
		pause();
		return 7;
	}
	if (!strcmp(m, "altstack")) {
		static char stk[65536];
		stack_t ss = {.ss_sp = stk, .ss_size = sizeof stk}, old;
		if (sigaltstack(&ss, NULL) || sigaltstack(NULL, &old))
			return 3;
		puts(old.ss_sp == stk && old.ss_size == sizeof stk && old.ss_flags == 0 ? "kept"
											: "lost");
		return 0;
	}
	if (!strcmp(m, "env")) {
		const char *v = getenv(argv[2]);
		puts(v ? v : "(unset)");
		return 0;
	}
	return 2;
}
