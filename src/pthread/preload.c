/*
 * karui pthread layer — libkarui-pthread.so (SPEC B1): with
 * LD_PRELOAD=libkarui-pthread.so, an unmodified program's threads run as
 * microprocesses on karui's VPs.
 *
 * How.  The layer does not interpose pthread_create and its hundred
 * companions one by one.  Its constructor, which the dynamic loader runs
 * before the program's own constructors and main, starts karui and runs
 * the program again, from its file, as a μprocess of this process
 * (src/image, docs/uproc.md), and ends the process with its status;
 * the image the kernel loaded is never entered.  Inside the μprocess the
 * program's own C library does what it always does, and karui serves the
 * system calls underneath: clone(CLONE_THREAD) gives a microprocess with
 * the TLS, signal mask and tid that the C library prepared, futex waits
 * park only the waiting microprocess, sched_yield and the sleeps are
 * karui's, reads and writes on pipes and sockets go through karui's I/O,
 * and fork gives a child process running the forking thread alone.  So
 * every pthread call (mutexes of each kind, condition variables on both
 * clocks, rwlocks, barriers, spin locks, semaphores, keys, once, cancel),
 * C11 threads, C++'s std::thread and thread_local, and the C library's
 * own locks behave as they do natively, each thread with its own TLS and
 * errno: the C library believes they are threads, and to it they are.
 * What the μprocess layer does not serve fails there, with the error the
 * kernel would give for a call it lacks (docs/pthread.md lists it).
 *
 * Rejected: interposing the pthread functions over the C library's.  A
 * microprocess would share its VP's TLS (errno, __thread, the C
 * library's per-thread malloc cache and the owner word of its recursive
 * stdio locks), or karui would have to make and switch the C library's
 * private thread descriptors; and the C library's internal locks, which
 * use futexes directly, would still block whole VPs.
 *
 * What the constructor does:
 *   - the program: /proc/self/exe, with the argv and environment the
 *     process got, less this library's entry in LD_PRELOAD (the μprocess
 *     loads its libraries afresh and must not start karui inside itself);
 *   - the VPs: KARUI_VPS, or one per processor the process may use;
 *   - the fds: each of 0..KR_UPROC_ATTR_FDS-1 that is open here, as is
 *     (a shell's redirections, a jobserver's pipe);
 *   - SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH and
 *     SIGCONT sent to the process reach the program (kr_uproc_kill) from a
 *     signalfd: its handlers run, or their default action ends it;
 *   - the status: the program's exit code, or, if a signal ended it, the
 *     same signal ends this process (its default action, core dump
 *     aside), so a shell sees what it would natively.
 * A program that cannot run as a μprocess (not position-independent
 * with its address taken, as here where the kernel loaded it; static;
 * setuid) is refused with a message and status 126, and KARUI_PTHREAD=off
 * runs it natively instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <karui.h>
#include <karui/image.h>

#define NAME "karui-pthread"

static const int forwarded[] = {SIGHUP,	 SIGINT,  SIGQUIT,  SIGUSR1,
				SIGUSR2, SIGTERM, SIGWINCH, SIGCONT};

struct run {
	char path[PATH_MAX];
	char **argv;
	char **envp;
	int sfd; /* the forwarded signals; -1: none */
	kr_uproc *up;
	int wstatus; /* as waitpid's */
};

static int is_self(const char *entry, size_t n)
{
	static const char me[] = "libkarui-pthread.so";
	const char *base = entry;
	for (size_t i = 0; i < n; i++)
		if (entry[i] == '/')
			base = entry + i + 1;
	size_t bn = (size_t)(entry + n - base);
	return bn >= sizeof me - 1 && memcmp(base, me, sizeof me - 1) == 0;
}

/* envp less this library in LD_PRELOAD (whose entries are separated by
 * spaces or colons); NULL if out of memory. */
static char **env_without_self(char **envp)
{
	size_t n = 0;
	while (envp[n])
		n++;
	char **out = calloc(n + 1, sizeof *out);
	if (!out)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(envp[i], "LD_PRELOAD=", 11) != 0) {
			out[k++] = envp[i];
			continue;
		}
		const char *v = envp[i] + 11;
		char *nv = malloc(strlen(envp[i]) + 1);
		if (!nv)
			return free(out), NULL;
		char *w = stpcpy(nv, "LD_PRELOAD=");
		int any = 0;
		while (*v) {
			size_t len = strcspn(v, " :");
			if (len && !is_self(v, len)) {
				if (any)
					*w++ = ' ';
				memcpy(w, v, len);
				w += len;
				any = 1;
			}
			v += len;
			v += strspn(v, " :");
		}
		*w = 0;
		if (any)
			out[k++] = nv;
		else
			free(nv);
	}
	out[k] = NULL;
	return out;
}

static unsigned vps_wanted(void)
{
	const char *v = getenv("KARUI_VPS");
	if (v && *v) {
		char *end;
		unsigned long n = strtoul(v, &end, 10);
		if (*end || n < 1 || n > KR_VP_MAX) {
			fprintf(stderr, "%s: KARUI_VPS=%s: not a number of VPs from 1 to %d\n",
				NAME, v, KR_VP_MAX);
			_exit(126);
		}
		return (unsigned)n;
	}
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n < 1 ? 1 : n > KR_VP_MAX ? KR_VP_MAX : (unsigned)n;
}

/* The forwarded signals, to the program, until cancelled. */
static void *forward(void *arg)
{
	struct run *r = arg;
	struct signalfd_siginfo si;
	size_t got;
	while (kr_read(r->sfd, &si, sizeof si, &got) == 0 && got == sizeof si)
		kr_uproc_kill(r->up, (int)si.ssi_signo);
	return NULL;
}

static void *run(void *arg)
{
	struct run *r = arg;
	kr_uproc_attr attr;
	kr_uproc_attr_init(&attr);
	attr.envp = r->envp;
	for (int fd = 0; fd < KR_UPROC_ATTR_FDS; fd++)
		if (fcntl(fd, F_GETFD) >= 0 && fd != r->sfd)
			kr_uproc_attr_fd_host(&attr, fd, fd);
		else
			kr_uproc_attr_fd_close(&attr, fd);
	int err = kr_uproc_spawn(&r->up, r->path, r->argv, &attr);
	if (err) {
		fprintf(stderr, "%s: %s: %s%s\n", NAME, r->path, strerror(err),
			err == EADDRINUSE ? " (not position-independent: it cannot be loaded "
					    "twice; KARUI_PTHREAD=off runs it natively)"
			: err == ENOEXEC ? " (not a program karui can load as a μprocess)"
					 : "");
		r->wstatus = 126 << 8;
		return NULL;
	}
	kr_mp *fwd = NULL;
	if (r->sfd >= 0 && kr_mp_create(&fwd, NULL, forward, r))
		fwd = NULL;
	err = kr_uproc_wait_wstatus(r->up, &r->wstatus);
	if (fwd) {
		kr_mp_cancel(fwd);
		kr_mp_join(fwd, NULL);
	}
	if (err) {
		fprintf(stderr, "%s: %s\n", NAME, strerror(err));
		r->wstatus = 126 << 8;
	}
	return NULL;
}

__attribute__((constructor)) static void karui_pthread(int argc, char **argv, char **envp)
{
	const char *mode = getenv("KARUI_PTHREAD");
	if (mode && strcmp(mode, "off") == 0)
		return;
	(void)argc;
	static struct run r;
	ssize_t n = readlink("/proc/self/exe", r.path, sizeof r.path - 1);
	if (n <= 0 || !argv || !envp) {
		fprintf(stderr, "%s: cannot find the program: %s\n", NAME, strerror(errno));
		_exit(126);
	}
	r.path[n] = 0;
	r.argv = argv;
	if (!(r.envp = env_without_self(envp))) {
		fprintf(stderr, "%s: %s\n", NAME, strerror(ENOMEM));
		_exit(126);
	}
	sigset_t fwd;
	sigemptyset(&fwd);
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
		sigaddset(&fwd, forwarded[i]);
	/* blocked before the VPs start, so that they inherit it */
	sigset_t old;
	pthread_sigmask(SIG_BLOCK, &fwd, &old);
	r.sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
	r.wstatus = 126 << 8;
	kr_config cfg = {.vps = vps_wanted()};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "%s: cannot start karui: %s\n", NAME, strerror(err));
		_exit(126);
	}
	kr_mp *mp;
	if ((err = kr_mp_create(&mp, NULL, run, &r)) == 0)
		err = kr_mp_join(mp, NULL);
	if (err) {
		fprintf(stderr, "%s: %s\n", NAME, strerror(err));
		_exit(126);
	}
	if (r.sfd >= 0)
		kr_close(r.sfd);
	kr_fini();
	/* A signal ended the program: the same one ends this process. */
	if (WIFSIGNALED(r.wstatus)) {
		int sig = WTERMSIG(r.wstatus);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigaction(sig, &dfl, NULL);
		sigdelset(&old, sig);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		raise(sig);
		_exit(128 + sig); /* a signal whose default action is not to end */
	}
	_exit(WEXITSTATUS(r.wstatus));
}
