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
 *   uproc_probe setuid       setuid(getuid() + 1)'s errno: a change
 *   uproc_probe fork         fork()'s errno
 *   uproc_probe fork-memory  children of fork that write the memory they
 *                            share in place (karui's deferred fork), then
 *                            crash, exit, exec, or write to stdout: what
 *                            the parent sees of them and of its memory
 *   uproc_probe thread       pthread_create's error
 *   uproc_probe write-after-close   writes to stdout after its reader went
 *   uproc_probe env NAME     getenv
 *   uproc_probe sig ign|catch|block N   ignores, catches ("caught N" from
 *                            the handler; SA_RESTART) or blocks signal
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
 *                            read-only pointer (mapped so, or made so by
 *                            mprotect, a mapping over it, a mremap):
 *                            prints each one that did not fail with
 *                            EFAULT, then "N calls"
 *   uproc_probe readbuf      one read of its stdin into a fresh buffer of
 *                            128 KiB (a mapping of its own): the KiB of
 *                            it made private (smaps' Private_Dirty), then
 *                            the bytes read
 *   uproc_probe timed        sem_timedwait, pthread_cond_timedwait and
 *                            pthread_mutex_timedlock, each for 20 ms:
 *                            their errors
 *   uproc_probe wait         sem_wait with nobody to post: for ever
 *   uproc_probe alarm        alarm(1), then pause()
 *   uproc_probe altstack     sigaltstack set, read back: "kept" or not
 *   uproc_probe kfds         eventfd, timerfd, memfd, epoll, a socketpair
 *                            and SCM_RIGHTS, select and pselect in one
 *                            process, and the errors of bad fds: a line
 *                            for each
 *   uproc_probe inotify DIR  in DIR, a watch of its new directory "w"
 *                            (a relative path): the events of a file made
 *                            and removed there
 *   uproc_probe xattr DIR    in DIR, extended attributes of a file and a
 *                            symbolic link, named by relative paths
 *   uproc_probe epoll-pipe   epoll_ctl's error for the read end of a pipe
 *   uproc_probe hostfd N     what calls on fd N (the host's own, not one
 *                            it has) answer
 *   uproc_probe tcp-server   listens on 127.0.0.1, says "port N", serves
 *                            one client ("hello LINE" for its line), then
 *                            says "served"
 *   uproc_probe tcp-client PORT   sends "karui\n" to PORT a little later
 *                            than it connects, prints the answer
 *   uproc_probe give NAME    listens on the abstract socket NAME, says
 *                            "ready", sends its client an eventfd
 *                            (SCM_RIGHTS), writes 5 to it 50 ms later,
 *                            says "gave" when the client has gone
 *   uproc_probe take NAME    receives the eventfd from NAME and reads it:
 *                            the value, and whether the read waited
 *   uproc_probe block accept|recv|eventfd|epoll|select   says "waiting",
 *                            then waits for ever in that call
 *   uproc_probe setuid-same  setuid(getuid())'s errno, or 0
 *   uproc_probe exec PATH ARG0 ARGS...   says "pid N", then execv
 *   uproc_probe exec-errors DIR   execs that fail (a missing file, one
 *                            without the x bit, one neither ELF nor
 *                            script, bad pointers, too many arguments):
 *                            each one's errno, then "still here"
 *   uproc_probe exec-vdso PATH    execs PATH (an echo) with an argument
 *                            that points at the host's vDSO
 *   uproc_probe cloexec PROBE     opens fd 5 close-on-exec and fd 6 not,
 *                            then execs PROBE fds
 *   uproc_probe fds          which of its fds 0..9 are open
 *   uproc_probe system CMD   system(CMD) (stdout flushed first): its status
 *   uproc_probe popen CMD    what popen(CMD, "r") reads, and pclose's status
 *   uproc_probe spawn PATH... posix_spawn of each PATH, then a waitpid of
 *                            each: how it ended; then wait4's ECHILD
 *   uproc_probe spawn-many N posix_spawn of /bin/true N times, each waited for
 *   uproc_probe vfork-exit N a vfork child that _exits N: its status, and
 *                            whether the parent's locals and pid held
 *   uproc_probe vfork-return a vfork child that returns from the function
 *                            that called vfork (undefined behaviour)
 *   uproc_probe sigchld      a SIGCHLD handler: a child's exit and a child
 *                            killed, each's siginfo and wait status
 *   uproc_probe waits        wait4 and waitid: WNOHANG with a child still
 *                            running, WNOWAIT, a pid not its child
 * Signals, each a line per check (natively the same):
 *   uproc_probe handlers     handlers for SIGUSR1, SIGUSR2, SIGWINCH, run by
 *                            raise, kill and tgkill many times: their counts,
 *                            siginfo, the mask inside and after, SA_NODEFER,
 *                            SA_RESETHAND, the FP state kept across them
 *   uproc_probe sigaltstack  a handler on its alternate stack (SA_ONSTACK,
 *                            SS_ONSTACK inside, EPERM on a change there),
 *                            and one off it without SA_ONSTACK
 *   uproc_probe sigpipe      a SIGPIPE handler, and write's EPIPE after it
 *   uproc_probe sigwait      sigpending, sigsuspend (EINTR after the
 *                            handler, the mask back), sigtimedwait (a
 *                            pending signal taken; EAGAIN at its timeout)
 *   uproc_probe alarm-handler   SIGALRM's handler from alarm, setitimer
 *                            (three periods) and a timer_create timer
 *   uproc_probe signalfd SELF   signalfd: its errors; reads of raise, kill,
 *                            sigqueue, a timer, a child's kill and exit; poll and
 *                            select; its mask changed; dup; a read ended by
 *                            a handler (EINTR) or restarted (SA_RESTART); a
 *                            fork child reading its copy; an epoll loop
 *                            over it and a FIFO; then an exec of SELF
 *                            (this program) in signalfd-exec FD mode, which
 *                            reads the signal left pending on fd FD
 *   uproc_probe segv-longjmp a SIGSEGV handler that siglongjmps out of a
 *                            NULL access ("recovered", si_code, si_addr),
 *                            SIGFPE's likewise, a stack overflow caught on
 *                            the alternate stack
 *   uproc_probe segv-in-handler   a fault in the SIGSEGV handler itself
 *   uproc_probe loop-forever [handle]   says "looping" and computes for
 *                            ever without system calls ("handle": until a
 *                            SIGTERM handler says stop, then "stopped")
 *   uproc_probe kill PID SIG kill(PID, SIG): its error, or "sent"
 *   uproc_probe forge WHAT   a handler edits the context it returns to
 *                            (rip, rip-noncanon, rsp, fpregs: to what is not
 *                            its own; mask-kill, mxcsr: what it may not set),
 *                            or rt_sigreturn with a garbage frame (garbage)
 *   uproc_probe bad-handler  a handler at an unmapped address
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <poll.h>
#include <semaphore.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <spawn.h>
#include <ucontext.h>
#include <unistd.h>

static void *nothing(void *a) { return a; }

static volatile sig_atomic_t chld_n, chld_code, chld_status, chld_pid;
static void on_chld(int sig, siginfo_t *si, void *uc)
{
	chld_n++;
	chld_code = si->si_code;
	chld_status = si->si_status;
	chld_pid = si->si_pid;
}

/* SIGCHLD from a child that exits 7 and one that kills itself */
static int sigchld(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	char *cmds[] = {"exit 7", "kill -TERM $$"};
	for (int i = 0; i < 2; i++) {
		char *a[] = {"sh", "-c", cmds[i], NULL};
		pid_t p;
		int w, before = chld_n;
		if (posix_spawn(&p, "/bin/sh", NULL, NULL, a, environ))
			return 1;
		waitpid(p, &w, 0);
		for (int k = 0; k < 5000 && chld_n == before; k++)
			usleep(1000);
		printf("sigchld %d: code %s status %d pid %s; wait: %s %d\n", chld_n - before,
		       chld_code == CLD_EXITED ? "exited" : chld_code == CLD_KILLED ? "killed" : "?",
		       chld_status, chld_pid == p ? "the child's" : "another",
		       WIFEXITED(w) ? "exited" : "signaled", WIFEXITED(w) ? WEXITSTATUS(w) : WTERMSIG(w));
	}
	return 0;
}

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
__asm__(".text\n.p2align 12\n"); /* both in one page */
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
	char m[32];
	int n = snprintf(m, sizeof m, "caught %d\n", s);
	if (write(1, m, (size_t)n) != n)
		_exit(9);
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

/* the fds that the socket and event calls below are made on */
struct kfd_set {
	int udp, dgram[2], ep, efd, tfd, ifd, lis;
	struct sockaddr_in to, lis_at;
};

static int kfd_open(struct kfd_set *k)
{
	struct epoll_event ev = {.events = EPOLLIN};
	socklen_t l = sizeof k->lis_at;
	k->to = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(9),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	k->lis_at = (struct sockaddr_in){.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	k->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	k->ep = epoll_create1(EPOLL_CLOEXEC);
	k->efd = eventfd(1, EFD_CLOEXEC); /* readable: ready in ep for ever */
	k->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	k->ifd = inotify_init1(IN_CLOEXEC);
	k->lis = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, k->dgram) || k->udp < 0 ||
	       k->ep < 0 || k->efd < 0 || k->tfd < 0 || k->ifd < 0 || k->lis < 0 ||
	       epoll_ctl(k->ep, EPOLL_CTL_ADD, k->efd, &ev) ||
	       bind(k->lis, (void *)&k->lis_at, sizeof k->lis_at) || listen(k->lis, 4) ||
	       getsockname(k->lis, (void *)&k->lis_at, &l);
}

/* the calls on sockets and the kernel's other fds, with the bad pointer b
 * (w: one to read from too) */
static void bad_kfd_pointers(struct kfd_set *k, char *b, int w)
{
	struct iovec iov = {b, 4}, one = {"x", 1};
	socklen_t len = sizeof k->to;
	if (w) {
		struct epoll_event ev;
		struct timeval tv0 = {0, 0};
		struct msghdr mb = {.msg_name = &k->to, .msg_namelen = sizeof k->to,
				    .msg_iov = &iov, .msg_iovlen = 1};
		struct msghdr mi = {.msg_name = &k->to, .msg_namelen = sizeof k->to,
				    .msg_iov = (struct iovec *)b, .msg_iovlen = 1};
		struct msghdr mc = {.msg_name = &k->to, .msg_namelen = sizeof k->to,
				    .msg_iov = &one, .msg_iovlen = 1, .msg_control = b,
				    .msg_controllen = 16};
		EF("connect", SYS_connect, k->udp, b, sizeof k->to);
		EF("bind", SYS_bind, k->udp, b, sizeof k->to);
		EF("sendto(buf)", SYS_sendto, k->udp, b, 4, 0, &k->to, sizeof k->to);
		EF("sendto(addr)", SYS_sendto, k->udp, "x", 1, 0, b, sizeof k->to);
		EF("sendmsg(msghdr)", SYS_sendmsg, k->udp, b, 0);
		EF("sendmsg(iov_base)", SYS_sendmsg, k->udp, &mb, 0);
		EF("sendmsg(iov)", SYS_sendmsg, k->udp, &mi, 0);
		EF("sendmsg(control)", SYS_sendmsg, k->udp, &mc, 0);
		EF("recvmsg(msghdr)", SYS_recvmsg, k->dgram[0], b, MSG_DONTWAIT);
		EF("epoll_ctl(event)", SYS_epoll_ctl, k->ep, EPOLL_CTL_ADD, k->tfd, b);
		EF("epoll_pwait(sigmask)", SYS_epoll_pwait, k->ep, &ev, 1, 0, b, 8);
		EF("timerfd_settime(new)", SYS_timerfd_settime, k->tfd, 0, b, NULL);
		EF("memfd_create(name)", SYS_memfd_create, b, 0);
		EF("inotify_add_watch(path)", SYS_inotify_add_watch, k->ifd, b, IN_CREATE);
		EF("getxattr(path)", SYS_getxattr, b, "user.x", NULL, 0);
		EF("select(set)", SYS_select, 1, b, NULL, NULL, &tv0);
		EF("pselect6(timeout)", SYS_pselect6, 0, NULL, NULL, NULL, b, NULL);
	}
	EF("socketpair", SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, b);
	EF("getsockname", SYS_getsockname, k->udp, b, &len);
	EF("epoll_wait(events)", SYS_epoll_wait, k->ep, b, 1, 0);
	EF("timerfd_gettime", SYS_timerfd_gettime, k->tfd, b);
	if (send(k->dgram[1], "data", 4, 0) != 4)
		puts("send: lost");
	EF("recvfrom(buf)", SYS_recvfrom, k->dgram[0], b, 4, MSG_DONTWAIT, NULL, NULL);
	if (send(k->dgram[1], "data", 4, 0) != 4)
		puts("send: lost");
	struct msghdr mr = {.msg_iov = &iov, .msg_iovlen = 1};
	EF("recvmsg(iov_base)", SYS_recvmsg, k->dgram[0], &mr, MSG_DONTWAIT);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* a client to accept */
	if (c < 0 || connect(c, (void *)&k->lis_at, sizeof k->lis_at))
		puts("connect: failed");
	EF("accept4(addr)", SYS_accept4, k->lis, b, &len, 0);
	close(c);
}

static int bad_pointers(void)
{
	struct kfd_set k;
	if (kfd_open(&k))
		return 5;
	char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* read-only pages that were writable: by mprotect, by a mapping over
	 * one, and after a mremap */
	char *was = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *moved = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (gone == MAP_FAILED || ro == MAP_FAILED || munmap(gone, 4096) || was == MAP_FAILED ||
	    moved == MAP_FAILED || mprotect(was, 4096, PROT_READ) ||
	    mmap(was + 2 * 4096, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
		    MAP_FAILED ||
	    mprotect(moved, 4096, PROT_READ) ||
	    (moved = mremap(moved, 4096, 2 * 4096, MREMAP_MAYMOVE)) == MAP_FAILED)
		return 3;
	int p[2], v = 0;
	if (pipe(p) || write(p[1], "data", 4) != 4)
		return 4;
	struct timespec ts = {0, 1000};
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	struct stat st;
	char *bads[] = {gone, (char *)0x8000000000000000ul, ro, was, was + 2 * 4096, moved};
	for (int i = 0; i < 6; i++) {
		char *b = bads[i];
		int w = i < 2; /* a bad pointer to read from */
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
		bad_kfd_pointers(&k, b, w);
	}
	char c[4]; /* the pipe kept its data through it all */
	if (read(p[0], c, 4) != 4 || memcmp(c, "data", 4))
		puts("pipe: data lost");
	printf("%d calls\n", calls);
	return wrong ? 1 : 0;
}
#endif

/* readbuf: what a read makes private of its buffer (a process's: the
 * pages the kernel wrote into) */
static int read_buffer(void)
{
	size_t len = 128 << 10;
	/* inaccessible pages either side: a mapping of its own in smaps */
	char *m = mmap(NULL, len + 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m + 4096, len, PROT_READ | PROT_WRITE))
		return 3;
	char *buf = m + 4096, line[256];
	ssize_t n = read(0, buf, len);
	FILE *f = fopen("/proc/self/smaps", "r");
	long dirty = -1;
	int in = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's line */
			in = lo == (unsigned long)buf && hi == (unsigned long)(buf + len);
		else if (in)
			sscanf(line, "Private_Dirty: %ld kB", &dirty);
	}
	if (f)
		fclose(f);
	printf("%ld KiB private, %zd bytes\n", dirty, n);
	return 0;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* "OK" or the name of errno, for a call's result r */
static const char *res(long r)
{
	return r < 0 ? strerrorname_np(errno) : "OK";
}

static int send_fd(int s, int fd)
{
	char c = 'f', buf[CMSG_SPACE(sizeof fd)];
	struct iovec iov = {&c, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			   .msg_controllen = sizeof buf};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof fd);
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	return (int)sendmsg(s, &m, 0);
}

/* the fd that came with one byte from s (its cloexec bit in *cloexec), or -1 */
static int recv_fd(int s, int *cloexec)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&c, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			   .msg_controllen = sizeof buf};
	if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (!h || h->cmsg_type != SCM_RIGHTS || h->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(h), sizeof fd);
	*cloexec = fcntl(fd, F_GETFD) == FD_CLOEXEC;
	return fd;
}

static int kfds(void)
{
	/* eventfd: a semaphore, its own flags */
	uint64_t v = 0;
	int e = eventfd(2, EFD_NONBLOCK | EFD_SEMAPHORE | EFD_CLOEXEC);
	long r1 = read(e, &v, 8), r2 = read(e, &v, 8), r3 = read(e, &v, 8);
	printf("eventfd %ld %ld %s %lu cloexec %d nonblock %d", r1, r2, res(r3), (unsigned long)v,
	       fcntl(e, F_GETFD), !!(fcntl(e, F_GETFL) & O_NONBLOCK));
	fcntl(e, F_SETFL, O_RDWR);
	int on = 1, fl = fcntl(e, F_GETFL) & O_NONBLOCK;
	ioctl(e, FIONBIO, &on);
	printf(" then %d %d\n", !!fl, !!(fcntl(e, F_GETFL) & O_NONBLOCK));

	/* timerfd: a blocking read waits for it */
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec its = {.it_value = {0, 30000000}}, cur;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	timerfd_settime(t, 0, &its, NULL);
	v = 0;
	long r = read(t, &v, 8);
	timerfd_gettime(t, &cur);
	printf("timerfd %ld %lu waited %d disarmed %d\n", r, (unsigned long)v, ms_since(&t0) >= 25,
	       !cur.it_value.tv_sec && !cur.it_value.tv_nsec);

	/* memfd */
	int m = memfd_create("probe", MFD_CLOEXEC);
	char b[64] = {0};
	struct stat st;
	r = write(m, "hello memfd", 11);
	long rb = pread(m, b, sizeof b - 1, 0);
	fstat(m, &st);
	const char *map = mmap(NULL, 11, PROT_READ, MAP_SHARED, m, 0);
	printf("memfd %ld %ld %s size %ld cloexec %d mapped %.5s\n", r, rb, b, (long)st.st_size,
	       fcntl(m, F_GETFD), map == MAP_FAILED ? "no" : map);

	/* epoll over a socket, an eventfd and a timerfd */
	int sv[2], ep = epoll_create1(EPOLL_CLOEXEC), e2 = eventfd(0, 0);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 100}, got[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
	printf("epoll %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev)));
	ev.data.u64 = 200;
	epoll_ctl(ep, EPOLL_CTL_ADD, e2, &ev);
	printf(" %d", epoll_wait(ep, got, 4, 0));
	v = 1;
	r = write(e2, &v, 8);
	r = epoll_wait(ep, got, 4, 0);
	printf(" %ld:%lu", r, (unsigned long)got[0].data.u64);
	r = read(e2, &v, 8);
	r = write(sv[1], "x", 1);
	r = epoll_wait(ep, got, 4, -1);
	printf(" %ld:%lu", r, (unsigned long)got[0].data.u64);
	r = read(sv[0], b, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = epoll_wait(ep, got, 4, 50);
	printf(" %ld waited %d", r, ms_since(&t0) >= 45);
	int t2 = timerfd_create(CLOCK_MONOTONIC, 0);
	ev.data.u64 = 300;
	epoll_ctl(ep, EPOLL_CTL_ADD, t2, &ev);
	its.it_value.tv_nsec = 30000000;
	timerfd_settime(t2, 0, &its, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sigset_t none;
	sigemptyset(&none);
	r = epoll_pwait(ep, got, 4, -1, &none);
	printf(" %ld:%lu waited %d", r, (unsigned long)got[0].data.u64, ms_since(&t0) >= 25);
	int reg = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
	printf(" file %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, reg, &ev)));
	printf(" del %s", res(epoll_ctl(ep, EPOLL_CTL_DEL, t2, NULL)));
	printf(" mod %s\n", res(epoll_ctl(ep, EPOLL_CTL_MOD, t2, &ev)));

	/* a stream socketpair: data, SCM_RIGHTS (the memfd), shutdown */
	r = send(sv[1], "ping", 4, 0);
	rb = recv(sv[0], b, sizeof b, 0);
	printf("socketpair %ld %ld %.4s", r, rb, b);
	int cl = 0, fd = send_fd(sv[1], m) == 1 ? recv_fd(sv[0], &cl) : -1;
	memset(b, 0, sizeof b);
	r = pread(fd, b, 11, 0);
	printf(" rights %s %ld %s cloexec %d", fd >= 0 && fd != m ? "new" : "none", r, b, cl);
	struct iovec rv[2] = {{b, 4}, {b + 4, 32}}, wv[2] = {{"ab", 2}, {"cd", 2}};
	r = send(sv[1], "12345678", 8, 0);
	long rr = readv(sv[0], rv, 2), wr = writev(sv[1], wv, 2); /* what there is: no wait */
	rb = recv(sv[0], b, sizeof b, 0);
	printf(" readv %ld writev %ld %ld", rr, wr, rb);
	shutdown(sv[1], SHUT_WR);
	r = recv(sv[0], b, sizeof b, 0);
	signal(SIGPIPE, SIG_IGN);
	shutdown(sv[0], SHUT_RD);
	close(sv[0]);
	printf(" eof %ld send %s\n", r, res(send(sv[1], "x", 1, 0)));

	/* select and pselect6: a readable socket, a writable one, a timeout */
	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp);
	r = write(sp[1], "s", 1);
	fd_set rd, ws;
	FD_ZERO(&rd);
	FD_ZERO(&ws);
	FD_SET(sp[0], &rd);
	FD_SET(sp[1], &rd);
	FD_SET(sp[1], &ws);
	struct timeval tv = {5, 0};
	r = select(sp[1] + 1, &rd, &ws, NULL, &tv);
	printf("select %ld %d %d %d left %d", r, FD_ISSET(sp[0], &rd), FD_ISSET(sp[1], &rd),
	       FD_ISSET(sp[1], &ws), tv.tv_sec >= 4);
	FD_ZERO(&rd);
	FD_SET(sp[1], &rd);
	struct timespec ts = {0, 30000000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = pselect(sp[1] + 1, &rd, NULL, NULL, &ts, &none);
	printf(" pselect %ld waited %d", r, ms_since(&t0) >= 25);
	FD_ZERO(&rd);
	FD_SET(50, &rd); /* closed, within the kernel's fd table */
	tv = (struct timeval){0, 0};
	printf(" bad %s\n", res(select(51, &rd, NULL, NULL, &tv)));

	/* errors: fds it does not have, fds of another kind */
	int bad = 500, u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ibad;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof sin;
	struct msghdr mh = {0};
	/* one call a statement: each errno read right after its call */
	const char *x[16];
	int k = 0;
	x[k++] = res(connect(bad, (void *)&sin, sizeof sin));
	x[k++] = res(accept(bad, NULL, NULL));
	x[k++] = res(epoll_ctl(ep, EPOLL_CTL_ADD, bad, &ev));
	x[k++] = res(epoll_ctl(bad, EPOLL_CTL_ADD, e2, &ev));
	x[k++] = res(epoll_wait(bad, got, 1, 0));
	x[k++] = res(timerfd_settime(bad, 0, &its, NULL));
	x[k++] = res(inotify_add_watch(bad, ".", IN_CREATE));
	x[k++] = res(sendto(bad, "x", 1, 0, NULL, 0));
	x[k++] = res(recvmsg(bad, &mh, 0));
	x[k++] = res(getsockopt(bad, SOL_SOCKET, SO_TYPE, &ibad, &sl));
	x[k++] = res(send_fd(sv[1], bad));
	x[k++] = res(connect(m, (void *)&sin, sizeof sin));
	x[k++] = res(shutdown(m, SHUT_RD));
	x[k++] = res(epoll_ctl(e2, EPOLL_CTL_ADD, t2, &ev));
	x[k++] = res(timerfd_settime(e2, 0, &its, NULL));
	x[k++] = res(accept4(u, NULL, NULL, 0x7));
	printf("ebadf");
	for (int i = 0; i < k; i++)
		printf(" %s%s", i == 11 ? "enotsock " : i == 13 ? "einval " : "", x[i]);
	printf("\n");
	return 0;
}

static int inotify(const char *dir)
{
	char b[4096];
	if (chdir(dir) || mkdir("w", 0700))
		return 3;
	int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	int wd = inotify_add_watch(fd, "w", IN_CREATE | IN_DELETE);
	const char *w = res(wd), *empty = res(inotify_add_watch(fd, "", IN_CREATE));
	printf("watch %s empty %s", w, empty);
	printf(" nonblock %s\n", res(read(fd, b, sizeof b)));
	close(creat("w/f", 0600));
	unlink("w/f");
	inotify_rm_watch(fd, wd);
	long n = read(fd, b, sizeof b);
	for (char *p = b; p < b + n;) {
		struct inotify_event *e = (struct inotify_event *)p;
		printf("event %s %s\n",
		       e->mask & IN_CREATE   ? "create"
		       : e->mask & IN_DELETE ? "delete"
		       : e->mask & IN_IGNORED ? "ignored"
					      : "other",
		       e->len ? e->name : "-");
		p += sizeof *e + e->len;
	}
	rmdir("w");
	return 0;
}

static int xattrs(const char *dir)
{
	char b[256];
	if (chdir(dir))
		return 3;
	close(creat("f", 0600));
	if (symlink("f", "l"))
		return 4;
	printf("set %s", res(setxattr("f", "user.karui", "yes", 3, 0)));
	long r = getxattr("f", "user.karui", b, sizeof b);
	printf(" get %s %.*s", res(r), (int)(r > 0 ? r : 0), b);
	r = listxattr("f", b, sizeof b);
	printf(" list %s %s", res(r), r > 0 ? b : "-");
	r = getxattr("l", "user.karui", b, sizeof b);
	printf(" through-link %s", res(r));
	printf(" link %s", res(lgetxattr("l", "user.karui", b, sizeof b)));
	printf(" llist %s", res(llistxattr("l", b, sizeof b)));
	printf(" lset %s", res(lsetxattr("l", "user.karui", "no", 2, 0)));
	printf(" remove %s", res(removexattr("f", "user.karui")));
	printf(" gone %s", res(getxattr("f", "user.karui", b, sizeof b)));
	printf(" lremove %s", res(lremovexattr("l", "user.karui")));
	printf(" missing %s\n", res(getxattr("nothing", "user.karui", b, sizeof b)));
	unlink("l");
	unlink("f");
	return 0;
}

static int tcp_server(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (void *)&a, sizeof a) || listen(l, 4) ||
	    getsockname(l, (void *)&a, &al))
		return 3;
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	int c = accept4(l, (void *)&a, &al, SOCK_CLOEXEC);
	if (c < 0)
		return 4;
	char line[128];
	size_t n = 0;
	while (n < sizeof line - 1 && read(c, line + n, 1) == 1 && line[n] != '\n')
		n++;
	char out[160];
	int k = snprintf(out, sizeof out, "hello %.*s from %s\n", (int)n, line,
			 inet_ntoa(a.sin_addr));
	if (write(c, out, (size_t)k) != k)
		return 5;
	close(c);
	puts("served");
	return 0;
}

static int tcp_client(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || connect(s, (void *)&a, sizeof a))
		return 3;
	struct timespec pause = {0, 50000000}; /* the server waits in its read meanwhile */
	nanosleep(&pause, NULL);
	if (send(s, "karui\n", 6, 0) != 6)
		return 4;
	char b[256];
	long n = recv(s, b, sizeof b - 1, MSG_WAITALL); /* till the server closes */
	if (n < 0)
		return 5;
	b[n] = 0;
	fputs(b, stdout);
	return 0;
}

/* an abstract AF_UNIX address of NAME */
static socklen_t abstract(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	size_t n = strlen(name) < sizeof a->sun_path - 1 ? strlen(name) : sizeof a->sun_path - 2;
	memcpy(a->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int give(const char *name)
{
	struct sockaddr_un a;
	socklen_t al = abstract(&a, name);
	int l = socket(AF_UNIX, SOCK_STREAM, 0), e = eventfd(0, EFD_CLOEXEC);
	if (l < 0 || e < 0 || bind(l, (void *)&a, al) || listen(l, 1))
		return 3;
	puts("ready");
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0 || send_fd(c, e) != 1)
		return 4;
	struct timespec pause = {0, 50000000};
	nanosleep(&pause, NULL);
	uint64_t v = 5;
	if (write(e, &v, 8) != 8)
		return 5;
	char x;
	if (read(c, &x, 1) != 0) /* its client's end */
		return 6;
	puts("gave");
	return 0;
}

static int take(const char *name)
{
	struct sockaddr_un a;
	socklen_t al = abstract(&a, name);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), cl = 0;
	if (s < 0 || connect(s, (void *)&a, al))
		return 3;
	int e = recv_fd(s, &cl);
	if (e < 0)
		return 4;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t v = 0;
	if (read(e, &v, 8) != 8)
		return 5;
	printf("took %lu %s cloexec %d\n", (unsigned long)v, ms_since(&t0) >= 25 ? "waited" : "at once",
	       cl);
	return 0;
}

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

/* ---- processes: exec, vfork, posix_spawn, system, popen, waits ---- */

/* fork-memory: each child writes the parent's .bss and stack copy (the
 * same pages, in karui's deferred fork, until it execs, ends or makes
 * another call), then ends its own way; the parent's stay its own. */
static int fork_memory(uintptr_t bad)
{
	static char bss[3 * 4096 + 100];
	char stack[5000];
	memset(bss, 'p', sizeof bss);
	memset(stack, 'p', sizeof stack);
	const char *how[] = {"crash", "exit", "exec", "write"};
	fflush(stdout);
	for (int i = 0; i < 4; i++) {
		pid_t p = fork();
		if (p == 0) {
			memset(bss, 'c', sizeof bss);
			memset(stack, 'c', sizeof stack);
			if (i == 0)
				*(volatile int *)bad = 1;
			if (i == 2)
				execl("/bin/echo", "echo", "exec'd", (char *)0);
			if (i == 3)
				printf("child writes %c%c\n", bss[0], stack[4999]);
			fflush(stdout);
			_exit(i);
		}
		int st = 0;
		if (p < 0 || waitpid(p, &st, 0) != p)
			return 1;
		printf("%s: %s %d, memory %c%c%c\n", how[i], WIFSIGNALED(st) ? "signal" : "exit",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), bss[0], bss[sizeof bss - 1],
		       stack[4999]);
		fflush(stdout);
	}
	return 0;
}

extern char **environ;

static const char *ended(int st)
{
	static char b[64];
	if (WIFEXITED(st))
		snprintf(b, sizeof b, "exited %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(b, sizeof b, "signaled %d", WTERMSIG(st));
	else
		snprintf(b, sizeof b, "status %#x", st);
	return b;
}

static void write_mode(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		exit(3);
	close(fd);
	chmod(path, mode);
}

static void try_exec(const char *what, const char *path, char *const *av, char *const *ev)
{
	syscall(SYS_execve, path, av, ev);
	printf("%s %s\n", what, strerrorname_np(errno));
}

static int exec_errors(const char *dir)
{
	char p[4096];
	char *av[] = {"x", NULL};
	try_exec("missing", "/nonexistent/x", av, environ);
	snprintf(p, sizeof p, "%s/noexec", dir);
	write_mode(p, "#!/bin/sh\necho no\n", 0644);
	try_exec("no-x", p, av, environ);
	snprintf(p, sizeof p, "%s/garbage", dir);
	write_mode(p, "hello, world\n", 0755);
	try_exec("garbage", p, av, environ);
	try_exec("directory", dir, av, environ);
	char *unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(unmapped, 4096);
	try_exec("path-efault", unmapped, av, environ);
	try_exec("argv-efault", "/bin/true", (char **)unmapped, environ);
	char *bad[] = {"true", unmapped, NULL};
	try_exec("arg-efault", "/bin/true", bad, environ);
	try_exec("envp-efault", "/bin/true", av, bad);
	static char big[3][1 << 20];
	char *many[] = {"true", big[0], big[1], big[2], NULL};
	for (int i = 0; i < 3; i++)
		memset(big[i], 'a', sizeof big[i] - 1);
	try_exec("e2big", "/bin/true", many, environ);
	snprintf(p, sizeof p, "%s/noexec", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/garbage", dir);
	unlink(p);
	printf("still here\n");
	return 0;
}

static int fds(void)
{
	printf("fds:");
	for (int fd = 0; fd < 10; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			printf(" %d", fd);
	printf("\n");
	return 0;
}

static int spawn(int argc, char **argv)
{
	pid_t pids[16];
	const char *names[16];
	int n = 0;
	for (int i = 2; i < argc && n < 16; i++) {
		char *av[] = {argv[i], NULL};
		int e = posix_spawn(&pids[n], argv[i], NULL, NULL, av, environ);
		if (e)
			printf("%s: %s\n", argv[i], strerrorname_np(e));
		else
			names[n++] = argv[i];
	}
	for (int i = 0; i < n; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) != pids[i])
			printf("waitpid %s\n", strerrorname_np(errno));
		else
			printf("%s: %s\n", names[i], ended(st));
	}
	printf("then %s\n", wait4(-1, NULL, 0, NULL) < 0 ? strerrorname_np(errno) : "a child");
	return 0;
}

static int spawn_many(int n)
{
	for (int i = 0; i < n; i++) {
		pid_t p;
		char *av[] = {"true", NULL};
		int st;
		if (posix_spawn(&p, "/bin/true", NULL, NULL, av, environ) || waitpid(p, &st, 0) != p ||
		    st)
			return 1;
	}
	printf("ok\n");
	return 0;
}

static int vfork_exit(int code)
{
	volatile int local = 12345;
	pid_t me = getpid();
	pid_t p = vfork();
	if (p == 0) {
		local = 1; /* the parent's memory: the parent sees it */
		if (getpid() == me)
			_exit(99);
		_exit(code);
	}
	int st;
	pid_t w = waitpid(p, &st, 0);
	printf("%s, pid %s, child's %s, local %d, waited %s\n", ended(st),
	       getpid() == me ? "kept" : "changed", p != me ? "apart" : "the same", local,
	       w == p ? "it" : strerrorname_np(errno));
	return 0;
}

static pid_t __attribute__((noinline)) vfork_here(void)
{
	return vfork();
}

static int waits(void)
{
	/* the child waits on its stdin, a pipe of ours, until the no-hang wait
	 * has looked */
	pid_t p;
	int in[2];
	if (pipe2(in, O_CLOEXEC))
		return 3;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	char *av[] = {"sh", "-c", "read x; exit 4", NULL};
	posix_spawn(&p, "/bin/sh", &fa, NULL, av, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	int st = 0;
	printf("nohang %d\n", (int)waitpid(p, &st, WNOHANG));
	printf("not mine %s\n", waitpid(1, &st, 0) < 0 ? strerrorname_np(errno) : "?");
	printf("bad options %s\n", waitpid(p, &st, 0x40000) < 0 ? strerrorname_np(errno) : "?");
	fflush(stdout);
	if (write(in[1], "x\n", 2) != 2)
		return 3;
	close(in[1]);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	int r = waitid(P_PID, (id_t)p, &si, WEXITED | WNOWAIT);
	printf("waitid %d code %s status %d pid %s\n", r,
	       si.si_code == CLD_EXITED ? "exited" : "other", si.si_status,
	       si.si_pid == p ? "it" : "other");
	printf("then %s\n", ended(waitpid(p, &st, 0) == p ? st : -1));
	printf("then %s\n", waitpid(-1, &st, WNOHANG) < 0 ? strerrorname_np(errno) : "a child");
	return 0;
}

static int procs(int argc, char **argv, const char *m)
{
	if (!strcmp(m, "setuid-same")) {
		printf("%s\n", setuid(getuid()) ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(m, "exec") && argc > 3) {
		printf("pid %d\n", getpid());
		fflush(stdout);
		execv(argv[2], argv + 3);
		printf("exec %s\n", strerrorname_np(errno));
		return 1;
	}
	if (!strcmp(m, "exec-errors") && argc > 2)
		return exec_errors(argv[2]);
	if (!strcmp(m, "exec-vdso") && argc > 2) {
		char *av[] = {"echo", (char *)getauxval(AT_SYSINFO_EHDR), NULL};
		execv(argv[2], av);
		return 1;
	}
	if (!strcmp(m, "cloexec") && argc > 2) {
		int a = open("/dev/null", O_RDONLY), b = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (dup3(a, 5, O_CLOEXEC) != 5 || dup2(b, 6) != 6) /* 6: not close-on-exec */
			return 3;
		close(a);
		close(b);
		char *av[] = {"uproc_probe", "fds", NULL};
		execv(argv[2], av);
		return 1;
	}
	if (!strcmp(m, "fds"))
		return fds();
	if (!strcmp(m, "system") && argc > 2) {
		fflush(stdout);
		int st = system(argv[2]);
		printf("status %s\n", ended(st));
		return 0;
	}
	if (!strcmp(m, "popen") && argc > 2) {
		FILE *f = popen(argv[2], "r");
		char b[256] = {0};
		size_t got = f ? fread(b, 1, sizeof b - 1, f) : 0;
		int st = f ? pclose(f) : -1;
		printf("read '%.*s' status %s\n", (int)got, b, ended(st));
		return 0;
	}
	if (!strcmp(m, "spawn"))
		return spawn(argc, argv);
	if (!strcmp(m, "spawn-many") && argc > 2)
		return spawn_many(atoi(argv[2]));
	if (!strcmp(m, "vfork-exit") && argc > 2)
		return vfork_exit(atoi(argv[2]));
	if (!strcmp(m, "vfork-return")) {
		pid_t p = vfork_here();
		if (p == 0)
			return 21; /* the child returns from main: exit runs in it */
		int st;
		waitpid(p, &st, 0);
		printf("parent: child %s\n", ended(st));
		return 0;
	}
	if (!strcmp(m, "waits"))
		return waits();
	return -1;
}

/* ---- signals ---- */

static volatile sig_atomic_t hits[65], nested, depth;
static volatile int last_code, last_pid_ok, inside_blocked, inside_usr2_blocked;

static void counting(int sig, siginfo_t *si, void *ucv)
{
	(void)ucv;
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	hits[sig]++;
	last_code = si->si_code;
	last_pid_ok = si->si_pid == getpid();
	inside_blocked = sigismember(&cur, sig);
	inside_usr2_blocked = sigismember(&cur, SIGUSR2);
	if (sig == SIGUSR2 && depth++ == 0)
		raise(SIGUSR2); /* SA_NODEFER: runs inside this one */
	if (sig == SIGUSR2 && depth > 1)
		nested = 1;
	if (sig == SIGUSR2)
		depth--;
	/* a handler that uses the vector registers */
	volatile double x = 1.5;
	for (int i = 0; i < 8; i++)
		x = x * 3.25 + 0.5;
	(void)x;
}

static void on(int sig, void (*h)(int, siginfo_t *, void *), int flags, int masked)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = h;
	sa.sa_flags = SA_SIGINFO | flags;
	sigemptyset(&sa.sa_mask);
	if (masked)
		sigaddset(&sa.sa_mask, masked);
	if (sigaction(sig, &sa, NULL))
		exit(3);
}

static int handlers(void)
{
	on(SIGUSR1, counting, 0, SIGUSR2);
	on(SIGUSR2, counting, SA_NODEFER, 0);
	on(SIGWINCH, counting, SA_RESETHAND, 0);
	volatile double f = 2.0;
	for (int i = 0; i < 100; i++) { /* enough for the call sites to be rewritten */
		raise(SIGUSR1);
		kill(getpid(), SIGUSR1);
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
		f = f * 1.0001;
	}
	printf("usr1 %d code %d pid %d blocked inside %d usr2 blocked inside %d\n",
	       (int)hits[SIGUSR1], last_code, last_pid_ok, inside_blocked, inside_usr2_blocked);
	kill(getpid(), SIGUSR2);
	printf("usr2 %d nested %d code %d\n", (int)hits[SIGUSR2], (int)nested, last_code);
	raise(SIGWINCH);
	raise(SIGWINCH); /* reset to the default: ignored */
	struct sigaction sa;
	sigaction(SIGWINCH, NULL, &sa);
	printf("winch %d reset %d\n", (int)hits[SIGWINCH], sa.sa_handler == SIG_DFL);
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("after: usr1 blocked %d usr2 blocked %d\n", sigismember(&cur, SIGUSR1),
	       sigismember(&cur, SIGUSR2));
	/* blocked: pending until unblocked, then delivered once */
	sigset_t b;
	sigemptyset(&b);
	sigaddset(&b, SIGUSR1);
	sigprocmask(SIG_BLOCK, &b, NULL);
	int before = hits[SIGUSR1];
	raise(SIGUSR1);
	raise(SIGUSR1);
	sigset_t pend;
	sigpending(&pend);
	printf("blocked: ran %d pending %d\n", hits[SIGUSR1] - before, sigismember(&pend, SIGUSR1));
	sigprocmask(SIG_UNBLOCK, &b, NULL);
	printf("unblocked: ran %d\n", hits[SIGUSR1] - before);
	/* ignored while pending: dropped */
	sigprocmask(SIG_BLOCK, &b, NULL);
	raise(SIGUSR1);
	signal(SIGUSR1, SIG_IGN);
	sigpending(&pend);
	printf("ignored: pending %d\n", sigismember(&pend, SIGUSR1));
	sigprocmask(SIG_UNBLOCK, &b, NULL);
	printf("fp %s\n", f > 2.0200 && f < 2.0202 ? "kept" : "lost");
	return 0;
}

static char altstk[1 << 16];
static volatile int alt_on, alt_flags, alt_eperm;

static void on_alt(int sig, siginfo_t *si, void *ucv)
{
	(void)si;
	(void)ucv;
	char here;
	stack_t cur, ss = {.ss_sp = altstk, .ss_size = sizeof altstk};
	alt_on = &here >= altstk && &here < altstk + sizeof altstk;
	sigaltstack(NULL, &cur);
	alt_flags = cur.ss_flags;
	alt_eperm = sigaltstack(&ss, NULL) == -1 && errno == EPERM;
	(void)sig;
}

static int altstack_handlers(void)
{
	stack_t ss = {.ss_sp = altstk, .ss_size = sizeof altstk};
	if (sigaltstack(&ss, NULL))
		return 3;
	on(SIGUSR1, on_alt, SA_ONSTACK, 0);
	on(SIGUSR2, on_alt, 0, 0);
	raise(SIGUSR1);
	printf("onstack: on %d flags %s eperm %d\n", alt_on,
	       alt_flags == SS_ONSTACK ? "SS_ONSTACK" : "other", alt_eperm);
	raise(SIGUSR2);
	printf("not onstack: on %d flags %d\n", alt_on, alt_flags);
	return 0;
}

static volatile int piped;
static void on_pipe(int sig, siginfo_t *si, void *ucv)
{
	(void)si;
	(void)ucv;
	piped = sig;
}

static int sigpipe_handler(void)
{
	int p[2];
	on(SIGPIPE, on_pipe, 0, 0);
	if (pipe(p))
		return 3;
	close(p[0]);
	ssize_t r = write(p[1], "x", 1);
	printf("handler saw %d, write %zd %s\n", piped, r, r < 0 ? strerrorname_np(errno) : "");
	return 0;
}

static int sigwaits(void)
{
	sigset_t b, none, pend, cur;
	sigemptyset(&b);
	sigemptyset(&none);
	sigaddset(&b, SIGUSR1);
	on(SIGUSR1, counting, 0, 0);
	sigprocmask(SIG_BLOCK, &b, NULL);
	raise(SIGUSR1);
	sigpending(&pend);
	printf("pending %d ran %d\n", sigismember(&pend, SIGUSR1), (int)hits[SIGUSR1]);
	int r = sigsuspend(&none);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("sigsuspend %d %s ran %d blocked after %d\n", r, strerrorname_np(errno),
	       (int)hits[SIGUSR1], sigismember(&cur, SIGUSR1));
	raise(SIGUSR1);
	siginfo_t si;
	struct timespec t = {0, 20000000};
	int s = sigtimedwait(&b, &si, &t);
	printf("sigtimedwait %d code %d ran %d\n", s, si.si_code, (int)hits[SIGUSR1]);
	s = sigtimedwait(&b, &si, &t);
	printf("sigtimedwait %d %s\n", s, strerrorname_np(errno));
	return 0;
}

/* ---- signalfd ---- */

static timer_t sfd_tm; /* the timer whose signals it reads */

/* One signal read from fd (all of struct signalfd_siginfo that the case
 * fills, said against what it should be): its number, or -1. */
static int sfd_show(int fd, const char *what, pid_t from)
{
	struct signalfd_siginfo s;
	ssize_t n = read(fd, &s, sizeof s);
	if (n != (ssize_t)sizeof s) {
		printf("%s: read %zd %s\n", what, n, strerrorname_np(errno));
		return -1;
	}
	printf("%s: %s code %d", what, sigabbrev_np((int)s.ssi_signo), s.ssi_code);
	if (s.ssi_code == SI_TIMER)
		printf(" timer %s int %d ptr %llu\n",
		       s.ssi_tid == (uint32_t)(intptr_t)sfd_tm ? "ok" : "other", s.ssi_int,
		       (unsigned long long)s.ssi_ptr);
	else
		printf(" pid %s uid %s status %d int %d\n", s.ssi_pid == (uint32_t)from ? "ok" : "other",
		       s.ssi_uid == getuid() ? "ok" : "other", s.ssi_status, s.ssi_int);
	return (int)s.ssi_signo;
}

/* A timer of its own that sends sig with sigev_value 42. */
static timer_t sfd_timer(int sig)
{
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = sig;
	ev.sigev_value.sival_int = 42;
	timer_t t;
	if (timer_create(CLOCK_MONOTONIC, &ev, &t))
		exit(3);
	return t;
}

static void sfd_arm(timer_t t, long ms)
{
	struct itimerspec v = {{0, 0}, {0, ms * 1000000}};
	timer_settime(t, 0, &v, NULL);
}

static int sfd_ready(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n = poll(&p, 1, 0);
	return n > 0 ? p.revents : n;
}

/* The signalfd server loop: one epoll set holding a signalfd and a FIFO
 * (a kernel pipe), served until SIGTERM. */
static void sfd_epoll(int sfd, timer_t tm)
{
	char dir[] = "/tmp/karui-sfd-XXXXXX", path[64];
	if (!mkdtemp(dir))
		exit(3);
	snprintf(path, sizeof path, "%s/fifo", dir);
	if (mkfifo(path, 0600))
		exit(3);
	int pf = open(path, O_RDWR | O_NONBLOCK), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = sfd};
	printf("epoll: add signalfd %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev)));
	ev = (struct epoll_event){.events = EPOLLIN, .data.fd = pf};
	printf(" fifo %s; idle %d\n", res(epoll_ctl(ep, EPOLL_CTL_ADD, pf, &ev)),
	       epoll_wait(ep, &ev, 1, 0));
	/* the fifo, then a timer's signal that comes while it waits, then one
	 * sent now, which ends the loop */
	(void)!write(pf, "ping\n", 5);
	for (int step = 0, done = 0; !done; step++) {
		if (step == 1)
			sfd_arm(tm, 20);
		if (step == 2)
			kill(getpid(), SIGTERM);
		int n = epoll_wait(ep, &ev, 1, -1);
		if (n != 1) {
			printf("epoll_wait %d %s\n", n, strerrorname_np(errno));
			break;
		}
		if (ev.data.fd == pf) {
			char b[16] = {0};
			printf("epoll: fifo %s", read(pf, b, sizeof b - 1) > 0 ? b : "?\n");
		} else {
			printf("epoll: events %s; ", ev.events == EPOLLIN ? "EPOLLIN" : "other");
			done = sfd_show(sfd, "signal", getpid()) == SIGTERM;
		}
	}
	printf("epoll: idle %d\n", epoll_wait(ep, &ev, 1, 0));
	close(ep);
	close(pf);
	unlink(path);
	rmdir(dir);
}

/* signalfd as natively: its errors, reads of raise, kill, a timer, a
 * child's kill and exit; poll, select; a mask changed; dup; EINTR and
 * SA_RESTART; a fork's child reading its own; epoll; then an exec of
 * `self` (this program) that reads what is pending from the same fd. */
static int signalfds(const char *self)
{
	sigset_t m, one;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	sigaddset(&m, SIGUSR2);
	sigaddset(&m, SIGTERM);
	sigaddset(&m, SIGCHLD);
	sigprocmask(SIG_BLOCK, &m, NULL);
	int e = eventfd(0, EFD_CLOEXEC);
	char small[16];
	struct signalfd_siginfo two[3];
	printf("errors: mask %s", res(signalfd(-1, (sigset_t *)8, 0)));
	printf(" size %s", res(syscall(SYS_signalfd4, -1, &m, 4, 0)));
	printf(" flags %s", res(signalfd(-1, &m, 1)));
	printf(" eventfd %s", res(signalfd(e, &m, 0)));
	printf(" badfd %s\n", res(signalfd(1000, &m, 0)));
	int sfd = signalfd(-1, &m, SFD_NONBLOCK | SFD_CLOEXEC), bfd = signalfd(-1, &m, 0);
	if (sfd < 0 || bfd < 0)
		return 3;
	printf("made: cloexec %d nonblock %d; blocking: cloexec %d nonblock %d\n",
	       !!(fcntl(sfd, F_GETFD) & FD_CLOEXEC), !!(fcntl(sfd, F_GETFL) & O_NONBLOCK),
	       !!(fcntl(bfd, F_GETFD) & FD_CLOEXEC), !!(fcntl(bfd, F_GETFL) & O_NONBLOCK));
	printf("empty: read %s", res(read(sfd, two, sizeof two)));
	printf(" write %s poll %d\n", res(write(sfd, small, 8)), sfd_ready(sfd, POLLIN | POLLOUT));
	raise(SIGUSR1);
	fd_set rd, wr;
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(sfd, &rd);
	FD_SET(sfd, &wr);
	struct timeval tv = {0, 0};
	int sel = select(sfd + 1, &rd, &wr, NULL, &tv);
	printf("raised: poll %s select %d read %d write %d; small read %s\n",
	       sfd_ready(sfd, POLLIN | POLLOUT) == POLLIN ? "POLLIN" : "other", sel,
	       FD_ISSET(sfd, &rd), FD_ISSET(sfd, &wr), res(read(sfd, small, sizeof small)));
	sfd_show(sfd, "raise", getpid());
	printf("read: poll %d", sfd_ready(sfd, POLLIN));
	raise(SIGUSR1); /* taken, then lost to the bad buffer, as the kernel does */
	printf("; bad buffer %s", res(syscall(SYS_read, sfd, 8, sizeof two[0])));
	printf(" poll %d\n", sfd_ready(sfd, POLLIN));
	/* two at once, lowest first */
	kill(getpid(), SIGTERM);
	kill(getpid(), SIGUSR2);
	ssize_t n = read(sfd, two, sizeof two);
	printf("kill: read %zd: %s %d, %s %d\n", n, sigabbrev_np((int)two[0].ssi_signo),
	       two[0].ssi_code, sigabbrev_np((int)two[1].ssi_signo), two[1].ssi_code);
	/* a mask changed: USR2 alone is pending, and not in it */
	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	kill(getpid(), SIGUSR2);
	printf("mask: same fd %d", signalfd(sfd, &one, 0) == sfd);
	printf(" read %s poll %d", res(read(sfd, two, sizeof two[0] + 1)), sfd_ready(sfd, POLLIN));
	signalfd(sfd, &m, 0);
	printf(" back: poll %d\n", sfd_ready(sfd, POLLIN));
	sfd_show(sfd, "mask", getpid());
	int d = dup(sfd);
	raise(SIGUSR1);
	sfd_show(d, "dup", getpid());
	close(d);
	/* sigqueue's value; a code of kill's to another process: EPERM */
	sigqueue(getpid(), SIGUSR2, (union sigval){.sival_int = 7});
	sfd_show(sfd, "sigqueue", getpid());
	siginfo_t qi;
	memset(&qi, 0, sizeof qi);
	qi.si_code = SI_USER;
	printf("sigqueueinfo: to another %s\n",
	       res(syscall(SYS_rt_sigqueueinfo, getppid(), SIGUSR1, &qi)));
	/* a read that waits: for a timer, a child's kill, its exit */
	timer_t tm = sfd_tm = sfd_timer(SIGUSR2);
	sfd_arm(tm, 20);
	sfd_show(bfd, "timer", 0);
	char cmd[64];
	snprintf(cmd, sizeof cmd, "kill -USR1 %d; exit 3", (int)getpid());
	char *a[] = {"sh", "-c", cmd, NULL};
	pid_t p;
	int w;
	if (posix_spawn(&p, "/bin/sh", NULL, NULL, a, environ))
		return 3;
	sfd_show(bfd, "child's kill", p);
	sfd_show(bfd, "child's exit", p);
	w = waitpid(p, &w, 0) == p ? WEXITSTATUS(w) : -1;
	printf("waitpid: status %d\n", w);
	/* a signal with a handler ends the read that waits; SA_RESTART makes
	 * it again */
	on(SIGALRM, counting, 0, 0);
	struct itimerval it = {{0, 0}, {0, 20000}};
	setitimer(ITIMER_REAL, &it, NULL);
	printf("interrupted: read %s", res(read(bfd, two, sizeof two[0])));
	printf(" handler ran %d\n", (int)hits[SIGALRM]);
	on(SIGALRM, counting, SA_RESTART, 0);
	setitimer(ITIMER_REAL, &it, NULL);
	sfd_arm(tm, 80);
	int s = sfd_show(bfd, "restarted", 0);
	while (hits[SIGALRM] < 2)
		usleep(1000);
	printf("restarted: %s after the handler\n", s == SIGUSR2 ? "USR2" : "other");
	/* a child of fork reads its own signals from its copy */
	fflush(stdout);
	p = fork();
	if (p == 0) {
		struct signalfd_siginfo c;
		raise(SIGUSR2);
		int bad = read(bfd, &c, sizeof c) != sizeof c || c.ssi_signo != SIGUSR2 ||
			  c.ssi_code != SI_TKILL;
		bad |= (read(sfd, &c, sizeof c) >= 0 || errno != EAGAIN) << 1;
		_exit(bad);
	}
	sfd_show(bfd, "fork", p);
	w = waitpid(p, &w, 0) == p ? WEXITSTATUS(w) : -1;
	printf("fork: child says %d\n", w);
	sfd_epoll(sfd, tm);
	timer_delete(tm);
	/* the exec: a signalfd without close-on-exec, USR1 pending */
	int keep = signalfd(-1, &m, 0);
	raise(SIGUSR1);
	char fdarg[16];
	snprintf(fdarg, sizeof fdarg, "%d", keep);
	fflush(stdout);
	execl(self, "uproc_probe", "signalfd-exec", fdarg, (char *)NULL);
	printf("exec %s\n", strerrorname_np(errno));
	return 1;
}

/* after signalfds' exec: what fd says, and whether it is open */
static int signalfd_exec(int fd)
{
	printf("after exec: cloexec %d; ", fcntl(fd, F_GETFD));
	sfd_show(fd, "pending", getpid());
	return 0;
}

static int alarm_handlers(void)
{
	on(SIGALRM, counting, 0, 0);
	alarm(1);
	int r = pause();
	printf("alarm: pause %d %s ran %d code %s\n", r, strerrorname_np(errno), (int)hits[SIGALRM],
	       last_code == SI_KERNEL ? "SI_KERNEL" : "other");
	struct itimerval it = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &it, NULL);
	sigset_t none;
	sigemptyset(&none);
	while (hits[SIGALRM] < 4)
		sigsuspend(&none);
	setitimer(ITIMER_REAL, &off, NULL);
	printf("setitimer: ran %d\n", (int)hits[SIGALRM]);
	timer_t tm;
	struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
	if (timer_create(CLOCK_MONOTONIC, &ev, &tm)) {
		printf("timer_create %s\n", strerrorname_np(errno));
		return 0;
	}
	struct itimerspec ts = {{0, 0}, {0, 20000000}};
	timer_settime(tm, 0, &ts, NULL);
	while (hits[SIGALRM] < 5)
		sigsuspend(&none);
	printf("timer_create: ran %d\n", (int)hits[SIGALRM]);
	return 0;
}

static sigjmp_buf jb;
static volatile int fault_code;
static volatile void *fault_addr;

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	(void)ucv;
	fault_code = si->si_code;
	fault_addr = si->si_addr;
	siglongjmp(jb, sig);
}

static int recurse(volatile char *p)
{
	volatile char b[4096];
	b[0] = *p;
	return p ? recurse(b) + b[0] : 0;
}

static int segv_longjmp(void)
{
	static char alt[1 << 16];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
	sigaltstack(&ss, NULL);
	on(SIGSEGV, on_fault, SA_ONSTACK, 0);
	on(SIGFPE, on_fault, 0, 0);
	if (!sigsetjmp(jb, 1))
		*(volatile int *)0 = 1;
	else
		printf("recovered: code %s addr %p\n", fault_code == SEGV_MAPERR ? "SEGV_MAPERR" : "?",
		       (void *)fault_addr);
	volatile int z = 0;
	if (!sigsetjmp(jb, 1))
		z = 100 / z;
	else
		printf("recovered: code %s\n", fault_code == FPE_INTDIV ? "FPE_INTDIV" : "?");
	if (!sigsetjmp(jb, 1))
		recurse("");
	else
		printf("recovered from an overflow\n");
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("segv blocked after %d\n", sigismember(&cur, SIGSEGV));
	return 0;
}

static void fault_again(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	(void)ucv;
	volatile int *volatile bad = NULL;
	*bad = 1; /* SIGSEGV is blocked here: the default action */
}

static volatile int stop;
static void on_term(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	(void)ucv;
	stop = 1;
}

#if defined(__x86_64__)
static const char *forging;
static void forge_ctx(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	if (!strcmp(forging, "rip"))
		g[REG_RIP] = 0x1000;
	else if (!strcmp(forging, "rip-noncanon"))
		g[REG_RIP] = (greg_t)0x8000000000001000ull;
	else if (!strcmp(forging, "rsp"))
		g[REG_RSP] = 0x10;
	else if (!strcmp(forging, "fpregs"))
		uc->uc_mcontext.fpregs = (fpregset_t)0xdead0000;
	else if (!strcmp(forging, "mask-kill"))
		sigaddset(&uc->uc_sigmask, SIGKILL);
	else if (!strcmp(forging, "mxcsr"))
		uc->uc_mcontext.fpregs->mxcsr = 0xffffffff;
}

static int forge(const char *what)
{
	if (!strcmp(what, "garbage")) {
		static uint64_t junk[512];
		for (int i = 0; i < 512; i++)
			junk[i] = 0xdeadbeefdeadbeefull * (uint64_t)(i + 1);
		__asm__ volatile("mov %0, %%rsp\n\tmov $15, %%eax\n\tsyscall" ::"r"(&junk[8])
				 : "memory");
		return 4;
	}
	forging = what;
	on(SIGUSR1, forge_ctx, 0, 0);
	raise(SIGUSR1);
	sigset_t cur;
	unsigned mx;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	printf("back: kill blocked %d mxcsr %s\n", sigismember(&cur, SIGKILL),
	       mx == 0x1f80 ? "default" : mx == 0xffff ? "all" : "other");
	return 0;
}
#endif

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int pr = procs(argc, argv, argv[1]);
	if (pr >= 0)
		return pr;
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
		printf("%s\n", setuid(getuid() + 1) ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(m, "fork-memory"))
		return fork_memory((uintptr_t)(argc * 8)); /* an address not mapped */
	if (!strcmp(m, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		printf("%s\n", p < 0 ? strerrorname_np(errno) : "forked");
		return 0;
	}
	if (!strcmp(m, "sigchld"))
		return sigchld();
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
	if (!strcmp(m, "site") || !strcmp(m, "site-own")) {
		/* site-own: probe_site_nf made hot first (three calls), so
		 * that the page holding both sites is the μprocess's own copy;
		 * then probe_site called once, or ARG times */
		for (int i = 0; m[4] && i < 3; i++)
			regs_kept(SYS_getpid, 0, 1);
		for (int i = 0, n = argc > 2 ? atoi(argv[2]) : 1; i < n; i++)
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
	if (!strcmp(m, "readbuf"))
		return read_buffer();
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
	if (!strcmp(m, "kfds"))
		return kfds();
	if (!strcmp(m, "inotify") && argc > 2)
		return inotify(argv[2]);
	if (!strcmp(m, "xattr") && argc > 2)
		return xattrs(argv[2]);
	if (!strcmp(m, "epoll-pipe")) {
		int p[2], ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN};
		if (pipe(p) || ep < 0)
			return 3;
		puts(res(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev)));
		return 0;
	}
	if (!strcmp(m, "hostfd") && argc > 2) {
		struct stat st;
		struct sockaddr_in sin = {.sin_family = AF_INET};
		struct epoll_event ev = {.events = EPOLLIN};
		int v, sv[2], ep = epoll_create1(0);
		socklen_t l = sizeof v;
		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		printf("fstat %s", res(fstat(n, &st)));
		printf(" connect %s", res(connect(n, (void *)&sin, sizeof sin)));
		printf(" epoll %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, n, &ev)));
		printf(" getsockopt %s", res(getsockopt(n, SOL_SOCKET, SO_TYPE, &v, &l)));
		printf(" rights %s", res(send_fd(sv[0], n)));
		/* a clone from the host's fd into a file of its own */
		char tmpl[] = "/tmp/karui-probe-XXXXXX";
		int f = mkstemp(tmpl);
		struct file_clone_range cr = {.src_fd = n};
		printf(" ficlone %s", res(ioctl(f, FICLONE, n)));
		printf(" ficlonerange %s\n", res(ioctl(f, FICLONERANGE, &cr)));
		unlink(tmpl);
		return 0;
	}
	if (!strcmp(m, "block") && argc > 2) {
		int sv[2], e = eventfd(0, 0), ep = epoll_create1(0), l = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct epoll_event ev;
		uint64_t v;
		char c;
		fd_set rd;
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || e < 0 || ep < 0 || l < 0 ||
		    bind(l, (void *)&a, sizeof a) || listen(l, 1))
			return 3;
		FD_ZERO(&rd);
		FD_SET(sv[0], &rd);
		puts("waiting");
		fflush(stdout);
		if (!strcmp(argv[2], "accept"))
			accept(l, NULL, NULL);
		else if (!strcmp(argv[2], "recv"))
			recv(sv[0], &c, 1, 0);
		else if (!strcmp(argv[2], "eventfd"))
			v = (uint64_t)read(e, &v, 8);
		else if (!strcmp(argv[2], "epoll"))
			epoll_wait(ep, &ev, 1, -1);
		else
			select(sv[0] + 1, &rd, NULL, NULL, NULL);
		return 4;
	}
	if (!strcmp(m, "tcp-server"))
		return tcp_server();
	if (!strcmp(m, "tcp-client"))
		return tcp_client(n);
	if (!strcmp(m, "give") && argc > 2)
		return give(argv[2]);
	if (!strcmp(m, "take") && argc > 2)
		return take(argv[2]);
	if (!strcmp(m, "handlers"))
		return handlers();
	if (!strcmp(m, "sigaltstack"))
		return altstack_handlers();
	if (!strcmp(m, "sigpipe"))
		return sigpipe_handler();
	if (!strcmp(m, "sigwait"))
		return sigwaits();
	if (!strcmp(m, "alarm-handler"))
		return alarm_handlers();
	if (!strcmp(m, "signalfd") && argc > 2)
		return signalfds(argv[2]);
	if (!strcmp(m, "signalfd-exec"))
		return signalfd_exec(n);
	if (!strcmp(m, "segv-longjmp"))
		return segv_longjmp();
	if (!strcmp(m, "segv-in-handler")) {
		on(SIGSEGV, fault_again, 0, 0);
		*(volatile int *)0 = 1;
		return 5;
	}
	if (!strcmp(m, "loop-forever")) {
		volatile unsigned long spins = 0;
		if (argc > 2)
			on(SIGTERM, on_term, 0, 0);
		puts("looping");
		fflush(stdout);
		while (!stop)
			spins++;
		puts("stopped");
		return 0;
	}
	if (!strcmp(m, "kill") && argc > 3) {
		puts(kill(atoi(argv[2]), atoi(argv[3])) ? strerrorname_np(errno) : "sent");
		return 0;
	}
#if defined(__x86_64__)
	if (!strcmp(m, "forge") && argc > 2)
		return forge(argv[2]);
#endif
	if (!strcmp(m, "bad-handler")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = (void (*)(int))(uintptr_t)0x1000;
		sigaction(SIGUSR1, &sa, NULL);
		raise(SIGUSR1);
		return 6;
	}
	if (!strcmp(m, "env")) {
		const char *v = getenv(argv[2]);
		puts(v ? v : "(unset)");
		return 0;
	}
	return 2;
}
