/*
 * karui image layer — fork in a μprocess: a real child process.
 *
 * A μprocess's memory lies in the host's address space, at addresses its
 * image was loaded at, so the copy a fork child needs can only be a
 * process's: the kernel's fork of the whole host, in which the forking
 * thread alone goes on.  That child is made a plain process running the
 * μprocess, and nothing of karui runs in it again:
 *
 *  - Syscall User Dispatch off: its calls go to the kernel, and a call
 *    site karui rewrote calls the kernel too (fast.c: kr__img_forked);
 *  - its fds are the μprocess's, at their numbers, with their
 *    close-on-exec bits and its own O_NONBLOCK; every other fd of the host
 *    is closed.  A host fd is the same open file (the kernel's fork
 *    duplicates it); a signalfd (sys_sigfd.c) a kernel signalfd of the
 *    same mask, since the child's signals are the kernel's.  A karui pipe's end cannot be shared with another
 *    process, so before the fork each one the μprocess holds becomes a
 *    kernel pipe's end, for every fd that names it (kr__ufile_to_kernel):
 *    a pump microprocess of the parent's is then the karui pipe's one
 *    reader (or writer) at that end, and copies between it and the
 *    kernel pipe's other end until either side ends; the parent's
 *    μprocesses and the child read (or write) the kernel pipe as they
 *    need, as processes sharing a pipe do;
 *  - its working directory and umask, its dispositions (the kernel's now),
 *    the calling thread's mask and alternate stack;
 *  - CLONE_CHILD_SETTID and CLONE_CHILD_CLEARTID as the kernel's;
 *  - it resumes from the call's trap frame, %rax 0, through the gate's
 *    rt_sigreturn.
 *
 * In the parent the call returns the child's pid, a real one: the child
 * is one of its children for wait4 and waitid (a microprocess waits on
 * its pidfd, uproc.c), SIGCHLD included, and kill reaches it.
 *
 * Rejected: running the child on the parent's memory as a vfork child,
 * with the writable pages copied at the fork and put back when it execs
 * or ends: a child that does not exec (a subshell writing into a pipe its
 * parent reads) would wait for a parent that waits for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys.h"

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#endif
#define FORK_MAY (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | CLONE_PARENT_SETTID | CSIGNAL)

int kr__img_forked;

/* A karui pipe's end, now a kernel pipe's: the pump holds the karui
 * pipe's end and the kernel pipe's other end, `kfd`. */
struct bridge {
	kr_upipe *p;
	int end;
	int kfd;
	char buf[16384];
};

/* The pump: the karui pipe and the kernel pipe, until one of them ends. */
static void *pump(void *arg)
{
	struct bridge *b = arg;
	for (;;) {
		size_t got = 0, done = 0;
		if (b->end == KR_UPIPE_READ) { /* karui pipe -> its readers */
			long n = kr__upipe_rw(b->p, 0, b->buf, sizeof b->buf);
			if (n <= 0 || kr_write_all(b->kfd, b->buf, (size_t)n, &done))
				break;
		} else { /* its writers -> karui pipe */
			if (kr_read(b->kfd, b->buf, sizeof b->buf, &got) || !got ||
			    kr__upipe_rw(b->p, 1, b->buf, got) < (long)got)
				break;
		}
	}
	kr_close(b->kfd);
	kr__upipe_end_put(b->p, b->end);
	free(b);
	return NULL;
}

/* Each karui pipe's end that up holds becomes a kernel pipe's, with its
 * pump (started by the parent after the fork: pumps[]). */
static int bridge_pipes(struct kr_uproc *up, struct bridge **pumps, int *n)
{
	int e = 0;
	kr__fd_lock(&up->fds); /* against its other threads */
	for (int fd = 0; fd < up->fds.n && !e; fd++) {
		struct kr__ufile *f = up->fds.fd[fd].f;
		int k[2];
		if (!f || f->kind != UF_PIPE)
			continue;
		struct bridge *b = calloc(1, sizeof *b);
		if (!b || pipe2(k, O_CLOEXEC)) {
			free(b);
			e = EAGAIN;
			break;
		}
		int read = f->end == KR_UPIPE_READ;
		kr__ufile_to_kernel(f, k[!read], &b->p, &b->end);
		b->kfd = k[read];
		pumps[(*n)++] = b;
	}
	kr__fd_unlock(&up->fds);
	return e;
}

/* In the child: the μprocess's fds at their numbers, nothing else (but
 * `keep`, whose number then is returned: -1 for none). */
static int child_fds(struct kr_uproc *up, int keep)
{
	int n = up->fds.n, hi[KR_UFD_MAX + 1];
	hi[n] = keep >= 0 ? fcntl(keep, F_DUPFD_CLOEXEC, n) : -1;
	for (int fd = 0; fd < n; fd++) {
		struct kr__ufile *f = up->fds.fd[fd].f;
		int src = -1, sfd = f && f->kind == UF_HOST && f->own == KR__OWN_SIGFD;
		hi[fd] = -1;
		if (f && f->kind == UF_HOST) /* a signalfd: the kernel's now */
			src = sfd ? kr__sigfd_kernel(f) : f->hostfd;
		if (src >= 0)
			hi[fd] = fcntl(src, F_DUPFD_CLOEXEC, n);
		if (sfd && src >= 0)
			close(src);
	}
	/* every fd but the copies: between them, and above the last */
	int lo = 0;
	for (;;) {
		int next = -1;
		for (int fd = 0; fd <= n; fd++)
			if (hi[fd] >= lo && (next < 0 || hi[fd] < next))
				next = hi[fd];
		if (next < 0)
			break;
		if (next > lo)
			syscall(SYS_close_range, lo, next - 1, 0);
		lo = next + 1;
	}
	syscall(SYS_close_range, lo, ~0u, 0);
	for (int fd = 0; fd < n; fd++) {
		if (hi[fd] < 0)
			continue;
		struct kr__ufile *f = up->fds.fd[fd].f;
		dup3(hi[fd], fd, up->fds.fd[fd].cloexec ? O_CLOEXEC : 0);
		close(hi[fd]);
		if (f->kind == UF_HOST && f->own) { /* its O_NONBLOCK is its own */
			int fl = fcntl(fd, F_GETFL);
			if (fl >= 0)
				fcntl(fd, F_SETFL, (fl & ~O_NONBLOCK) | (f->flags & O_NONBLOCK));
		}
	}
	return hi[n];
}

/* In the child: a plain process of the μprocess's (see the top), its
 * calls the kernel's from now on; 0, or -1 when its working directory is
 * gone.  `exec`: its caught signals back to their default action.  Raw
 * calls: the child of exec_process shares its parent's memory, errno
 * included. */
static int plain_process(struct kr_uproc *up, int exec)
{
	syscall(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
	if (syscall(SYS_fchdir, up->cwdfd))
		return -1;
	syscall(SYS_umask, up->umask);
	for (int sig = 1; sig < 65; sig++) {
		struct sigaction_k ka = up->sig[sig];
		if (exec && ka.handler != (uint64_t)SIG_IGN)
			ka = (struct sigaction_k){.handler = (uint64_t)SIG_DFL};
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &ka, NULL, 8);
	}
	return 0;
}

/* The child of the kernel's fork: a plain process running the thread t of
 * the μprocess up from its call, which returns 0 (see the top). */
static __attribute__((noreturn)) void child(struct kr__uthr *t, unsigned long flags,
					     uintptr_t ctid, uint64_t gs)
{
	kr__img_forked = 1;
	/* the VP's record, which the fork's own handler (uproc.c) took off
	 * the thread: the gate's code at a rewritten site writes its selector
	 * and reads the attn of the thread it names */
	__asm__ volatile("wrgsbase %0" ::"r"(gs) : "memory");
	if (plain_process(t->up, 0))
		_exit(127);
	child_fds(t->up, -1);
	pid_t self = (pid_t)syscall(SYS_gettid);
	if (flags & CLONE_CHILD_SETTID)
		(void)kr__ucopy((void *)ctid, &self, sizeof self);
	if (flags & CLONE_CHILD_CLEARTID)
		syscall(SYS_set_tid_address, ctid);
	ucontext_t *uc = t->uc;
	uc->uc_mcontext.gregs[REG_RAX] = 0;
	uc->uc_stack = t->altstack;
	memcpy(&uc->uc_sigmask, &t->sigmask, 8);
	t->attn = 0; /* the way back of a rewritten site looks at it */
	struct kr__vframe *vf = kr__frame_save(uc);
	if (!vf)
		_exit(127);
	kr__img_sigreturn(vf->sp, t->fs);
}

/* The parent: the pumps of the pipes made the kernel's start. */
static void start_pumps(struct bridge **pumps, int n)
{
	for (int i = 0; i < n; i++) {
		kr_mp *mp;
		if (kr_mp_create(&mp, NULL, pump, pumps[i]) || kr_mp_detach(mp)) {
			kr_close(pumps[i]->kfd);
			kr__upipe_end_put(pumps[i]->p, pumps[i]->end);
			free(pumps[i]);
		}
	}
}

/* exec_process's child: it shares its parent's memory until its exec
 * (CLONE_VM | CLONE_VFORK, as posix_spawn's), on a stack of its own, and
 * says why its exec failed in `err`. */
struct spawn {
	struct kr__uthr *t;
	int prog;
	char *const *argv, *const *envp;
	long err;
};

static int spawn_child(void *arg)
{
	struct spawn *s = arg;
	if (plain_process(s->t->up, 1)) {
		s->err = ENOENT;
		return 127;
	}
	int p = child_fds(s->t->up, s->prog);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &s->t->sigmask, NULL, 8);
	if (syscall(SYS_execveat, p, "", s->argv, s->envp, AT_EMPTY_PATH))
		s->err = errno ? errno : ENOEXEC; /* its parent's errno: it waits */
	return 127;
}

long kr__uproc_exec_process(struct kr__uthr *t, int dirfd, const char *path, char *const *argv,
			    char *const *envp, int *pidfd)
{
	struct kr_uproc *up = t->up;
	struct bridge *pumps[KR_UFD_MAX];
	struct spawn s = {t, openat(dirfd, path, O_PATH | O_CLOEXEC), argv, envp, 0};
	if (s.prog < 0)
		return -errno;
	int npumps = 0;
	long err = -bridge_pipes(up, pumps, &npumps);
	size_t len = (size_t)64 << 10;
	char *stk = err ? MAP_FAILED
			: mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (!err && stk == MAP_FAILED)
		err = -ENOMEM;
	pid_t pid = err ? -1 : clone(spawn_child, stk + len, CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
	if (stk != MAP_FAILED)
		munmap(stk, len);
	close(s.prog);
	if (pid < 0 && !err)
		err = -errno;
	if (pid > 0 && s.err) { /* its exec failed: the old image goes on */
		waitpid(pid, NULL, 0);
		err = -s.err;
	} else if (pid > 0 && (*pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
		err = -errno;
	}
	start_pumps(pumps, npumps);
	return err ? err : pid;
}

long kr__uproc_fork(struct kr__uthr *t, unsigned long flags, uintptr_t ptid, uintptr_t ctid)
{
	struct kr_uproc *up = t->up;
	if (flags & ~(unsigned long)FORK_MAY) {
		kr__say(up, "clone with shared tables or namespaces");
		return -EINVAL;
	}
	if (!t->uc || up->vparent) /* (a rewritten site's call has its frame: uproc.c) */
		return -ENOSYS;            /* sys_exec.c says so */
	struct bridge *pumps[KR_UFD_MAX];
	int npumps = 0;
	long err = -bridge_pipes(up, pumps, &npumps);
	int pidfd = -1;
	uint64_t gs;
	__asm__ volatile("rdgsbase %0" : "=r"(gs));
	pid_t pid = err ? -1 : fork();
	if (pid == 0)
		child(t, flags, ctid, gs);
	if (pid < 0 && !err)
		err = -errno;
	if (pid > 0 && (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		err = -errno; /* the child runs on, not ours to wait for */
	start_pumps(pumps, npumps); /* the pipes are the kernel's now, the fork or not */
	if (err)
		return err;
	if ((flags & CLONE_PARENT_SETTID) && kr__ucopy((void *)ptid, &pid, sizeof pid)) {
		/* the child runs all the same */
	}
	return kr__uproc_real_child(up, pid, pidfd) ? -EAGAIN : pid;
}
