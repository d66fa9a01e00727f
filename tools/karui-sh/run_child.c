/*
 * karui-sh's child-process runner: posix_spawn, and a wait that parks
 * only the calling microprocess.
 *
 * The child's fds 0..KSH_FDS-1 are set with dup2 file actions.  Their
 * sources are first duplicated to numbers at or above KSH_FDS, so that no
 * dup2 overwrites the source of a later one (stage fd 0 from shell fd 4
 * and stage fd 4 from shell fd 0 would otherwise collide).  Every fd the
 * shell opens itself is close-on-exec, so the child gets the named fds
 * and the shell's inheritable ones (0, 1, 2, and those the shell was
 * given), nothing else; one the stage wants closed is closed by a file
 * action.
 *
 * The child starts in the stage's working directory (a file action):
 * the shell's, which a subshell's cd changes without changing the
 * process's.
 *
 * Signals: karui's threads block signals (VPs block all but faults; the
 * thread that started karui blocks SIGPIPE once I/O has started), and an
 * interactive shell ignores SIGINT and SIGQUIT.  A child would inherit
 * both across exec, so it starts with an empty mask and every signal at
 * its default action: `cat words | head -1` must end cat by SIGPIPE.
 *
 * Waiting: a pidfd (pidfd_open) becomes readable when the child ends;
 * kr_poll_until parks the microprocess until then and waitid(P_PIDFD) collects
 * it.  Where there is no pidfd (a kernel before 5.3, a filter), waitpid
 * runs in a blocking section (kr_blocking_begin), which hands the VP's
 * other microprocesses to another VP meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

static int child_spawn(const struct ksh_spawn *s, struct ksh_proc *p)
{
	int high[KSH_FDS], err = 0;
	for (int i = 0; i < KSH_FDS; i++) {
		high[i] = -1;
		if (s->fd[i].kind == KSH_FD_UPIPE)
			err = EINVAL; /* the executor gives children kernel pipes */
		else if (s->fd[i].kind == KSH_FD_HOST && !err &&
			 (high[i] = fcntl(s->fd[i].host, F_DUPFD_CLOEXEC, KSH_FDS)) < 0)
			err = errno;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	if (!err && (err = posix_spawn_file_actions_init(&fa)) == 0) {
		/* a subshell's directory is its own, not the process's */
		if (s->cwd)
			err = posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
		for (int i = 0; i < KSH_FDS && !err; i++) {
			int fl;
			if (high[i] >= 0)
				err = posix_spawn_file_actions_adddup2(&fa, high[i], i);
			else if ((fl = fcntl(i, F_GETFD)) >= 0 && !(fl & FD_CLOEXEC))
				err = posix_spawn_file_actions_addclose(&fa, i);
		}
		if (!err && (err = posix_spawnattr_init(&at)) == 0) {
			posix_spawnattr_setsigmask(&at, &none);
			posix_spawnattr_setsigdefault(&at, &all);
			posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
			err = posix_spawn(&p->pid, s->path, &fa, &at, s->argv, s->envp);
			posix_spawnattr_destroy(&at);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
	for (int i = 0; i < KSH_FDS; i++)
		if (high[i] >= 0)
			close(high[i]);
	if (err)
		return err;
	p->up = NULL;
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0); /* close-on-exec */
	return 0;
}

static int shell_status(const siginfo_t *si)
{
	return si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
}

static int child_wait(struct ksh_proc *p, int *status)
{
	siginfo_t si = {0};
	if (p->pidfd >= 0) {
		short rev;
		int r = kr_poll(p->pidfd, POLLIN, &rev), w = -1;
		if (r == 0)
			while ((w = waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED)) < 0 &&
			       errno == EINTR)
				;
		kr_close(p->pidfd);
		p->pidfd = -1;
		if (w == 0) {
			*status = shell_status(&si);
			return 0;
		}
	}
	kr_blocking_begin();
	int w;
	while ((w = waitid(P_PID, (id_t)p->pid, &si, WEXITED)) < 0 && errno == EINTR)
		;
	int err = w < 0 ? errno : 0;
	kr_blocking_end();
	if (!err)
		*status = shell_status(&si);
	return err;
}

const struct ksh_runner ksh_runner_child = {
	.way = "child process",
	.spawn = child_spawn,
	.wait = child_wait,
};
