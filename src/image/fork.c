/*
 * karui image layer — fork in a μprocess: a child that runs in place
 * until it execs (the deferred fork, below), or a real child process.
 *
 * A μprocess's memory lies in the host's address space, at addresses its
 * image was loaded at, so the copy a fork child that goes its own way
 * needs can only be a process's: the kernel's fork of the whole host, in
 * which the forking thread alone goes on.  That child is made a plain
 * process running the μprocess, and nothing of karui runs in it again:
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
 * The deferred fork.  Most forks are followed by an exec (a shell's
 * pipelines, subshells, $(...) and background jobs, Python's, Perl's and
 * awk's fork paths): the host's fork and the process the exec makes cost
 * far more than the child's few calls in between.  So a fork of a
 * single-threaded μprocess first makes a child μprocess that runs in
 * place, as a vfork child does (uproc.c: a new pid, a copy of the fd
 * table, working directory, umask and signal state; on its parent's
 * microprocess and memory, the parent suspended), after karui has copied
 * the parent's writable memory (reuse.c: kr__mem_take, over the ranges
 * every μprocess's `wr` lists and the part of its stack in use, pages the
 * kernel's pagemap shows untouched left out).  The child's calls are then
 * served in place while they are among those a fork's child makes before
 * its exec (kr__dfork_in_place: fds, dup2, fcntl's own commands, signal
 * dispositions and mask, chdir, umask, identity, stat and access for the
 * command's search, open of what is not a FIFO for redirections, a
 * terminal's ioctl queries), none of which waits or changes what another
 * process could see differently; and:
 *  - its exec makes the new program a μprocess of its own as a vfork
 *    child's does; its parent's memory is put back from the copy (every
 *    page that differs; untouched ones given back to the kernel) and the
 *    parent goes on from fork() with the child's pid;
 *  - its exit before any exec: the same, the child a zombie (SIGCHLD);
 *  - any other call (a write, a read, a wait, mmap, a fork of its own, a
 *    kill) makes it a real process there: the host forks (kr__uproc_dfork_real),
 *    the real child is this file's plain process with the child
 *    μprocess's fds and state, and goes on with the call itself, made by
 *    the kernel through kr__dfork_call (a kill or tgkill naming the pid
 *    it had in place names its own; signals sent to it in place are the
 *    kernel's); in the host the child μprocess goes, the parent's memory
 *    is put back and its fork returns the real child's pid, whose wait4,
 *    waitid, SIGCHLD and kill are a real child's (uproc.c).  So a
 *    subshell that writes into a pipe its parent reads is a real child
 *    from its first write, and the parent runs to read it.
 * A fork is real at once when the μprocess has other threads, shared
 * writable memory (MAP_SHARED: the copy would undo the child's writes a
 * real fork shares), is isolated (iso.c), serves calls into its exports
 * (call.c), forks on a stack other than its own (a signal's alternate
 * one), holds more than DFORK_MAX of writable memory or has written more
 * than DFORK_COPY_MAX of it; or when KARUI_UPROC_FORK=real.  What the child saw in place stays what it saw
 * once it is real: getpid gave it a μprocess's pid, which only its own
 * kill is told of.
 *
 * Rejected: running every fork's child on the parent's memory until it
 * execs or ends (the first form of the deferred fork): a child that does
 * not exec (a subshell writing into a pipe its parent reads) would wait
 * for a parent that waits for it; hence the real process at its first
 * other call.  Copying a page on its first write (the writable ranges
 * read-only, a fault per page): dash's copy is 17 of its 800 pages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys.h"

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#endif
#define PG 4096ul
/* the most writable memory a deferred fork looks through, and the most
 * it copies (what it copies it compares again at the restore): more, a
 * real fork, whose copy is the kernel's, on write */
#define DFORK_MAX ((size_t)256 << 20)
#define DFORK_COPY_MAX ((size_t)8 << 20)
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

/* Where a deferred fork's child that became a process goes on: the call
 * it was making, the kernel's now, then back to its code. */
uint64_t kr__dfork_rip;
void kr__dfork_call(void);
__asm__(".text\n"
	".globl kr__dfork_call\n"
	".type kr__dfork_call, @function\n"
	"kr__dfork_call:\n"
	"\tsyscall\n"
	"\tjmp *kr__dfork_rip(%rip)\n"
	".size kr__dfork_call, .-kr__dfork_call\n");

/* A deferred fork's child's call that names it by the pid it had in place
 * (raise: getpid, gettid, then tgkill) names the process it is now. */
static void own_ids(struct kr__uthr *t, long nr, long b[6], pid_t self)
{
	int tg = nr == SYS_tgkill || nr == SYS_rt_tgsigqueueinfo;
	if (tg && (pid_t)b[1] == t->tid)
		b[1] = self;
	if ((tg || nr == SYS_kill || nr == SYS_tkill || nr == SYS_rt_sigqueueinfo) &&
	    (pid_t)b[0] == t->up->pid)
		b[0] = self;
}

/* The child of the kernel's fork: a plain process running the thread t of
 * the μprocess up from its call, which returns 0 (see the top); or (nr >=
 * 0: a deferred fork's child) that makes its call nr with arguments a. */
static __attribute__((noreturn)) void child(struct kr__uthr *t, unsigned long flags,
					     uintptr_t ctid, uint64_t gs, long nr, const long *a)
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
	greg_t *g = uc->uc_mcontext.gregs;
	g[REG_RAX] = 0;
	if (nr >= 0) { /* the frame's registers, but those of the call */
		long b[6];
		memcpy(b, a, sizeof b);
		own_ids(t, nr, b, self);
		kr__dfork_rip = (uint64_t)g[REG_RIP];
		g[REG_RIP] = (greg_t)(uintptr_t)kr__dfork_call;
		g[REG_RAX] = nr;
		g[REG_RDI] = b[0];
		g[REG_RSI] = b[1];
		g[REG_RDX] = b[2];
		g[REG_R10] = b[3];
		g[REG_R8] = b[4];
		g[REG_R9] = b[5];
		/* what was sent to it in place: the kernel's, for its mask to
		 * let in as the frame's installs it */
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
		uint64_t pend = t->sigpending | t->up->sigpending;
		for (int sig = 1; sig < 65; sig++)
			if (pend & ((uint64_t)1 << (sig - 1)))
				syscall(SYS_tgkill, self, self, sig);
	}
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

/* ---------------- the deferred fork ---------------- */

/* An open of a FIFO waits for the other end, which its parent may be
 * about to open: not in place. */
static int opens_fifo(struct kr_uproc *c, long dirfd, uintptr_t upath)
{
	char path[PATH_MAX];
	struct stat st;
	if (kr__ustr(path, (const char *)upath, sizeof path) < 0)
		return 0; /* the call fails, in place */
	int host = c->cwdfd;
	if (path[0] != '/' && (int)dirfd != AT_FDCWD) {
		const struct kr__ufile *f = kr__fd_peek(&c->fds, dirfd);
		if (!f || f->kind != UF_HOST)
			return 0;
		host = f->hostfd;
	}
	return !fstatat(host, path, &st, 0) && S_ISFIFO(st.st_mode);
}

int kr__dfork_in_place(struct kr_uproc *c, long nr, const long *a)
{
	switch (nr) {
	/* its fds, its signal state, where it is, who it is */
	case SYS_close:
	case SYS_close_range:
	case SYS_dup:
	case SYS_dup2:
	case SYS_dup3:
	case SYS_rt_sigaction:
	case SYS_rt_sigprocmask:
	case SYS_rt_sigreturn:
	case SYS_sigaltstack:
	case SYS_chdir:
	case SYS_fchdir:
	case SYS_getcwd:
	case SYS_umask:
	case SYS_getpid:
	case SYS_getppid:
	case SYS_gettid:
	case SYS_getuid:
	case SYS_geteuid:
	case SYS_getgid:
	case SYS_getegid:
	case SYS_getresuid:
	case SYS_getresgid:
	case SYS_getpgid:
	case SYS_getpgrp:
	case SYS_getsid:
	case SYS_setpgid:
	case SYS_set_robust_list:
	case SYS_brk: /* never grows (sys_mem.c) */
	/* a command's search and its redirections */
	case SYS_stat:
	case SYS_lstat:
	case SYS_fstat:
	case SYS_newfstatat:
	case SYS_statx:
	case SYS_access:
	case SYS_faccessat:
	case SYS_faccessat2:
	/* its end */
	case SYS_execve:
	case SYS_execveat:
	case SYS_exit:
	case SYS_exit_group:
		return 1;
	case SYS_fcntl: /* not its locks, which may wait */
		return a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC || a[1] == F_GETFD ||
		       a[1] == F_SETFD || a[1] == F_GETFL || a[1] == F_SETFL;
	case SYS_ioctl: /* what it asks of a terminal */
		return a[1] == TCGETS || a[1] == TIOCGWINSZ || a[1] == TIOCGPGRP;
	case SYS_open:
		return !opens_fifo(c, AT_FDCWD, (uintptr_t)a[0]);
	case SYS_openat:
		return !opens_fifo(c, a[0], (uintptr_t)a[1]);
	}
	return 0;
}

void kr__uproc_dfork_real(struct kr__uthr *t, long nr, const long *a)
{
	struct kr_uproc *c = t->up;
	struct kr__dfork *df = c->dfork;
	struct bridge *pumps[KR_UFD_MAX];
	int npumps = 0, pidfd = -1;
	long err = -bridge_pipes(c, pumps, &npumps);
	uint64_t gs;
	__asm__ volatile("rdgsbase %0" : "=r"(gs));
	pid_t pid = err ? -1 : fork();
	if (pid == 0)
		child(t, df->flags, df->ctid, gs, nr, a);
	if (pid < 0 && !err)
		err = -errno;
	if (pid > 0 && (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		err = -errno; /* the child runs on, not ours to wait for */
	start_pumps(pumps, npumps);
	kr__uproc_dfork_end(c, err ? err : pid, pidfd);
}

/* Whether a fork of t's μprocess may be deferred (see the top): 0, or
 * -errno; 1 for a real fork. */
static long dfork(struct kr__uthr *t, unsigned long flags, uintptr_t ptid, uintptr_t ctid)
{
	struct kr_uproc *up = t->up;
	uintptr_t slo = (t->usp - 128) & ~(PG - 1);
	const char *how = getenv("KARUI_UPROC_FORK"); /* "real": every fork a real one */
	if ((how && !strcmp(how, "real")) || up->isolate || up->wr_lost || up->shmap || up->xc ||
	    __atomic_load_n(&up->nthreads, __ATOMIC_RELAXED) > 1 || (flags & CSIGNAL) != SIGCHLD ||
	    t->usp < up->stk_lo + 128 || t->usp >= up->stk_hi)
		return 1;
	size_t bytes = up->stk_hi - slo; /* the ranges less the stack, and its part in use */
	for (size_t i = 0; i < up->wr.n; i++) {
		uintptr_t lo = up->wr.r[i].lo, hi = up->wr.r[i].hi;
		bytes += (lo < up->stk_lo ? (hi < up->stk_lo ? hi : up->stk_lo) - lo : 0) +
			 (hi > up->stk_hi ? hi - (lo > up->stk_hi ? lo : up->stk_hi) : 0);
	}
	if (bytes > DFORK_MAX)
		return 1;
	struct kr__dfork *df = calloc(1, sizeof *df);
	if (!df)
		return 1;
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int e = kr__mem_take(&df->mem, &up->wr, up->stk_lo, up->stk_hi, slo, up->stk_hi, pm);
	if (pm >= 0)
		close(pm);
	if (e || df->mem.ncopy * PG > DFORK_COPY_MAX) {
		kr__mem_free(&df->mem);
		free(df);
		return 1;
	}
	df->flags = flags;
	df->ptid = ptid;
	df->ctid = ctid;
	long r = kr__uproc_vfork(t, flags, 0, ptid, ctid, 0);
	if (r) {
		kr__mem_free(&df->mem);
		free(df);
		return r;
	}
	t->vchild->dfork = df; /* its calls from here on */
	return 0;
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
	long d = dfork(t, flags, ptid, ctid);
	if (d <= 0)
		return d;
	struct bridge *pumps[KR_UFD_MAX];
	int npumps = 0;
	long err = -bridge_pipes(up, pumps, &npumps);
	int pidfd = -1;
	uint64_t gs;
	__asm__ volatile("rdgsbase %0" : "=r"(gs));
	pid_t pid = err ? -1 : fork();
	if (pid == 0)
		child(t, flags, ctid, gs, -1, NULL);
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
