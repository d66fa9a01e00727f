/*
 * karui-sh's μprocess runner and the links between a pipeline's stages
 * (run.h says what both are for).
 *
 * A stage's fds become the μprocess's through its spawn attributes: a
 * host fd (a redirection's file, the shell's own 0, 1, 2, a kernel pipe)
 * with kr_uproc_attr_fd_host, an end of a karui pipe with _fd_pipe, and
 * a closed fd with _fd_close; the μprocess gets no other fd of the host.
 * Its working directory and environment are the shell's (attr.cwd,
 * attr.envp): μprocesses share the host's kernel cwd, so the shell names
 * it rather than relying on it.
 *
 * The pump is the one place where the shell touches the data of a
 * pipeline: a karui pipe whose writer is a μprocess and whose reader
 * turned out to be a child process.  It reads the karui pipe's read end
 * (which it owns from then on) into a 64 KiB buffer and writes it to a
 * kernel pipe with kr_write_all_until, which parks it, not its VP, while the
 * child is slow.  End of file on the karui pipe closes the kernel pipe
 * (the child sees end of file); EPIPE from the kernel pipe closes the
 * karui pipe's read end (the μprocess gets EPIPE and SIGPIPE, as a
 * process writing to a pipe nobody reads would).
 *
 * Where the image layer cannot run (no Syscall User Dispatch or
 * FSGSBASE, another architecture, qemu-user), kr_uproc_spawn says ENOTSUP
 * and the executor runs every stage as a child process; kr_upipe_create
 * still works, and the executor stops asking for karui pipes once it
 * has seen ENOTSUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "run.h"

_Static_assert(KSH_FDS <= KR_UPROC_ATTR_FDS, "a stage's fds must fit a μprocess's attributes");

static int uproc_spawn(const struct ksh_spawn *s, struct ksh_proc *p)
{
	kr_uproc_attr a;
	int err = kr_uproc_attr_init(&a);
	a.cwd = s->cwd;
	a.envp = s->envp;
	for (int i = 0; i < KSH_FDS && !err; i++) {
		const struct ksh_fdspec *f = &s->fd[i];
		if (f->kind == KSH_FD_HOST)
			err = kr_uproc_attr_fd_host(&a, i, f->host);
		else if (f->kind == KSH_FD_UPIPE)
			err = kr_uproc_attr_fd_pipe(&a, i, f->pipe, f->end);
		else
			err = kr_uproc_attr_fd_close(&a, i);
	}
	p->pid = 0;
	p->pidfd = -1;
	return err ? err : kr_uproc_spawn(&p->up, s->path, s->argv, &a);
}

static int uproc_wait(struct ksh_proc *p, int *status)
{
	int err = kr_uproc_wait(p->up, status);
	p->up = NULL;
	return err;
}

const struct ksh_runner ksh_runner_uproc = {
	.way = "μprocess",
	.spawn = uproc_spawn,
	.wait = uproc_wait,
};

/* ---- links ---- */

static int kernel_pipe(struct ksh_link *l)
{
	int fd[2];
	if (pipe2(fd, O_CLOEXEC) < 0)
		return errno;
	l->rfd = fd[0];
	l->wfd = fd[1];
	return 0;
}

int ksh_link_open(struct ksh_link *l, bool karui)
{
	*l = (struct ksh_link){.rfd = -1, .wfd = -1};
	if (karui && kr_upipe_create(&l->up) == 0) {
		l->up_r = l->up_w = true;
		return 0;
	}
	l->up = NULL;
	return kernel_pipe(l);
}

int ksh_link_make_kernel(struct ksh_link *l)
{
	if (!l->up)
		return 0;
	kr_upipe_close(l->up, KR_UPIPE_READ);
	kr_upipe_close(l->up, KR_UPIPE_WRITE);
	l->up = NULL;
	l->up_r = l->up_w = false;
	return kernel_pipe(l);
}

enum { PUMP_BUF = 64 * 1024 };

struct pump {
	kr_upipe *up; /* its read end, the pump's own */
	int wfd;
};

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	char *buf = malloc(PUMP_BUF);
	size_t got;
	while (buf && kr_upipe_read(p->up, buf, PUMP_BUF, &got) == 0 && got > 0 &&
	       kr_write_all(p->wfd, buf, got, NULL) == 0)
		;
	kr_upipe_close(p->up, KR_UPIPE_READ);
	kr_close(p->wfd);
	free(buf);
	free(p);
	return NULL;
}

int ksh_link_for_child_reader(struct ksh_link *l)
{
	if (!l->up_r)
		return 0;
	int fd[2];
	if (pipe2(fd, O_CLOEXEC) < 0)
		return errno;
	struct pump *p = malloc(sizeof *p);
	if (p)
		*p = (struct pump){.up = l->up, .wfd = fd[1]};
	int err = p ? kr_mp_create(&l->pump, NULL, pump_main, p) : ENOMEM;
	if (err) {
		free(p);
		close(fd[0]);
		close(fd[1]);
		return err;
	}
	l->up_r = false;
	l->rfd = fd[0];
	return 0;
}

struct ksh_fdspec ksh_link_end(const struct ksh_link *l, enum kr_upipe_end end)
{
	bool karui = end == KR_UPIPE_READ ? l->up_r : l->up_w;
	if (karui)
		return (struct ksh_fdspec){.kind = KSH_FD_UPIPE, .pipe = l->up, .end = end};
	int fd = end == KR_UPIPE_READ ? l->rfd : l->wfd;
	return (struct ksh_fdspec){.kind = fd >= 0 ? KSH_FD_HOST : KSH_FD_CLOSED, .host = fd};
}

void ksh_link_release(struct ksh_link *l, enum kr_upipe_end end)
{
	bool *held = end == KR_UPIPE_READ ? &l->up_r : &l->up_w;
	int *fd = end == KR_UPIPE_READ ? &l->rfd : &l->wfd;
	if (*held)
		kr_upipe_close(l->up, end);
	*held = false;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void ksh_link_join(struct ksh_link *l)
{
	if (l->pump)
		kr_mp_join(l->pump, NULL);
	l->pump = NULL;
}
