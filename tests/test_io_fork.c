/* L3 io: fork (src/io/io.c's child handler): the child of a fork gets
 * EPERM and the program's mask, and its close spares the parent's read.
 * Run on both back ends (kt_io.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_io.h"

static sigset_t app_mask;       /* the program's own, set before kr_init */
static int fork_pipe[2], quiet_pipe[2];
static pid_t forked;

/* One byte there and back through fork_pipe, on the calling VP. */
static void fork_pipe_round_trip(void)
{
	char c = 0;
	size_t n;
	KT_EQ(kr_write(fork_pipe[1], "r", 1, &n), 0);
	KT_EQ(n, 1);
	KT_EQ(kr_read(fork_pipe[0], &c, 1, &n), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'r');
}

/* The child: no VP, no microprocess, the program's signal mask (not a
 * VP's, nor with karui's SIGPIPE), I/O refused at once (a read of a pipe
 * nobody writes), karui not to be started again; then an exec.  A failed
 * check exits with 1. */
static void child_checks_then_execs(void)
{
	sigset_t m;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a child left by a failure dies with the test */
	char c;
	size_t n = 9;
	KT_EQ(kr_read(quiet_pipe[0], &c, 1, &n), EPERM);
	KT_EQ(n, 0);
	KT_EQ(pthread_sigmask(SIG_SETMASK, NULL, &m), 0);
	for (int sig = 1; sig < NSIG; sig++)
		KT_EQ(sigismember(&m, sig), sigismember(&app_mask, sig));
	KT_CHECK(kr_vp_self() == NULL && kr_mp_self() == NULL);
	KT_EQ(kr_vp_count(), 0);
	KT_EQ(kr_write(quiet_pipe[1], "c", 1, &n), EPERM);
	KT_EQ(kr_mp_yield(), EPERM);
	KT_EQ(kr_init(NULL), EBUSY);
	KT_CHECK(kr_io_backend() == NULL);
	execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
	_exit(1);
}

/* On the chosen VP: I/O (with io_uring, through this VP's ring), a fork,
 * and more I/O while the child runs. */
static void io_fork_io(void)
{
	fork_pipe_round_trip();
	forked = fork();
	KT_CHECK(forked >= 0);
	if (forked == 0)
		child_checks_then_execs();
	fork_pipe_round_trip();
}

/* Wait for child pid to end, parking only the caller: kr_poll_until on a pidfd
 * (a blocking section would start a spare VP, which on_vp cannot
 * hold).  Its wait status. */
static int wait_child(pid_t pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), st = 0;
	if (pfd < 0)
		KT_SKIP("no pidfd_open here");
	short rev;
	KT_EQ(kr_poll(pfd, POLLIN, &rev), 0);
	KT_CHECK(rev & POLLIN);
	KT_EQ(waitpid(pid, &st, WNOHANG), pid);
	KT_EQ(kr_close(pfd), 0);
	return st;
}

/* The program blocks SIGUSR2, not SIGUSR1 nor SIGPIPE.  The parent waits
 * for the child with karui's I/O; its I/O works on both VPs afterwards,
 * and karui stops. */
static void fork_on_vp(unsigned id)
{
	sigemptyset(&app_mask);
	sigaddset(&app_mask, SIGUSR2);
	KT_EQ(pthread_sigmask(SIG_SETMASK, &app_mask, NULL), 0);
	init(2);
	mkpipe(fork_pipe);
	mkpipe(quiet_pipe);
	on_vp(id, io_fork_io);
	int st = wait_child(forked);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 7);
	on_vp(0, fork_pipe_round_trip);
	on_vp(1, fork_pipe_round_trip);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(fork_pipe[i]), 0);
		KT_EQ(kr_close(quiet_pipe[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static void child_of_fork_on_vp1_gets_eperm_and_the_program_mask_and_execs(void)
{
	fork_on_vp(1);
}

static void child_of_fork_on_vp0_gets_eperm_and_the_program_mask_and_execs(void)
{
	fork_on_vp(0);
}

static int reader_in, reader_err;
static char reader_got;

static void *read_fork_pipe(void *a)
{
	size_t n;
	__atomic_store_n(&reader_in, 1, __ATOMIC_RELEASE);
	/* the deadline only turns a lost read into a failure */
	reader_err = kr_read_until(fork_pipe[0], &reader_got, 1, &n, in_ms(20000));
	KT_EQ(n, reader_err ? 0 : 1);
	return a;
}

/* The child closes (and tries to cancel) the fd that the parent's read
 * waits on: its own copy closes; the parent's registration (epoll) and
 * request (io_uring) stay, and its read takes the byte written later. */
static void close_in_a_forked_child_spares_the_parents_read(void)
{
	init(1);
	mkpipe(fork_pipe);
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, &small, read_fork_pipe, NULL), 0);
	while (!__atomic_load_n(&reader_in, __ATOMIC_ACQUIRE))
		KT_EQ(kr_mp_yield(), 0); /* one VP: the reader now waits in kr_read_until */
	pid_t pid = fork();
	KT_CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int c = kr_io_cancel(fork_pipe[0]);
		int e = kr_close(fork_pipe[0]);
		_exit(c == EPERM && e == 0 && kr_close(fork_pipe[0]) == EBADF ? 0 : 1);
	}
	int st = wait_child(pid);
	size_t n;
	KT_EQ(kr_write(fork_pipe[1], "y", 1, &n), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(reader_err, 0);
	KT_EQ(reader_got, 'y');
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 0); /* kr_io_cancel: EPERM; kr_close: 0, then EBADF */
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_close(fork_pipe[i]), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	io_args(argc, argv);
	KT_RUN(child_of_fork_on_vp1_gets_eperm_and_the_program_mask_and_execs);
	KT_RUN(child_of_fork_on_vp0_gets_eperm_and_the_program_mask_and_execs);
	KT_RUN(close_in_a_forked_child_spares_the_parents_read);
	return kt_finish();
}
