/*
 * UNIX peer: a pipe between two processes, the kernel's own stream.
 *   stream       fork; the parent writes a->iters blocks of 4096 bytes into
 *                the pipe and closes it, the child reads into a 4096-byte
 *                buffer until end of file and exits with status 0 only when
 *                it got exactly a->iters * 4096 bytes (otherwise EIO).  The
 *                clock runs from before the first write until waitpid
 *                returns; one operation = one block.  Not pinned: the two
 *                processes run wherever the scheduler puts them.
 * The parent writes with SIGPIPE blocked, so a reader that died early shows
 * as EPIPE instead of killing the benchmark.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peers.h"

#define BLOCK 4096

/* the child: read fd to end of file, exit 0 iff that was `want` bytes */
static _Noreturn void stream_reader(int fd, long long want)
{
	char buf[BLOCK];
	long long got = 0;
	ssize_t n;

	for (;;) {
		n = read(fd, buf, sizeof buf);
		if (n > 0)
			got += n;
		else if (n == 0 || errno != EINTR)
			break;
	}
	_exit(n == 0 && got == want ? 0 : 1);
}

/* returns 0 or errno */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno != EINTR)
			return errno;
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

/* write `blocks` blocks to fd and close it; returns 0 or errno */
static int stream_writer(int fd, long blocks)
{
	char buf[BLOCK];
	int e = 0;

	memset(buf, 'k', sizeof buf);
	for (long i = 0; i < blocks && !e; i++)
		e = write_all(fd, buf, sizeof buf);
	close(fd);
	return e;
}

/* wait for the child; returns 0, EIO unless it exited with 0, or errno */
static int reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EIO;
}

int kb_unix_pipe_stream(const kb_args *a, kb_res *r)
{
	sigset_t pipe_set, old;
	int fd[2], ew, er;
	double t0, t1;
	pid_t pid;

	if (a->iters < 1)
		return EINVAL;
	if (pipe(fd) != 0)
		return errno;
	pid = fork();
	if (pid < 0) {
		ew = errno;
		close(fd[0]);
		close(fd[1]);
		return ew;
	}
	if (pid == 0) {
		close(fd[1]);
		stream_reader(fd[0], (long long)a->iters * BLOCK);
	}
	close(fd[0]);
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	t0 = kb_now_ns();
	ew = stream_writer(fd[1], a->iters);
	er = reap(pid);
	t1 = kb_now_ns();
	if (ew == EPIPE) /* take the SIGPIPE that came with it */
		sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ew || er)
		return ew ? ew : er;
	r->ns_per_op = (t1 - t0) / (double)a->iters;
	return 0;
}
