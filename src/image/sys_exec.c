/*
 * karui image layer — a μprocess's calls that make processes: execve and
 * execveat, vfork and clone (CLONE_VM | CLONE_VFORK), fork, wait4 and
 * waitid.
 *
 * exec replaces the μprocess's image with the new program's (uproc.c,
 * kr__uproc_exec): same pid, fds (less the close-on-exec ones), working
 * directory, umask, signal mask and ignored signals (the caught ones go
 * back to their default).  This file reads what the kernel would read:
 * the path (against its working directory, or execveat's dirfd, or that
 * fd itself with AT_EMPTY_PATH), argv and envp from the μprocess's memory
 * through uaccess.S (a bad pointer: EFAULT; more than the 2 MiB of a
 * μprocess's argument room: E2BIG), and a script's "#!" line, whose
 * interpreter (and its one argument) becomes the program, as in the
 * kernel, up to 4 levels deep.  Whatever fails leaves the old image
 * running with the error: the new one is loaded before the old one goes.
 *
 * vfork and clone with CLONE_VM | CLONE_VFORK (glibc's posix_spawn,
 * system and popen, which run the child on a stack of their own) make a
 * child μprocess that runs on its parent's microprocess and memory, the
 * parent suspended, as the kernel does: a new pid, a copy of the fd table
 * (each open file shared), the working directory, umask and signal state.
 * Its calls act on its own identity.  When it execs, the new program
 * becomes a μprocess of its own (a microprocess, its image, the child's
 * fds and pid) and the parent goes on from its call, which returns the
 * child's pid with every register as it was (uproc.c keeps the trap's
 * frame); when it ends before, it is a zombie and the parent goes on the
 * same way.  A vfork needs the trap's frame: its call site is never
 * rewritten, and one that is (a syscall() wrapper made hot by other
 * calls) answers ENOSYS.
 *
 * fork (clone without CLONE_VM) is fork.c's: its child runs in place as
 * a vfork child until it execs, a μprocess of the same process then, or
 * ends, its parent's memory put back from a copy (a deferred fork); or it
 * becomes a real process at a call a fork's child does not make before
 * exec, or at once (threads, shared memory, KARUI_UPROC_FORK=real).  A
 * fork in a vfork child answers ENOSYS, with a line on its stderr.
 *
 * wait4 and waitid collect its children (uproc.c: kr__uproc_reap), their
 * status encoded as the kernel's; the rusage they report is zeroed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys.h"

#define ARG_ROOM ((size_t)2 << 20) /* uproc.c's: the strings of argv and envp */
#define SCRIPT_DEPTH 4             /* the kernel's BINPRM_MAX_RECURSION */
#define BINPRM_BUF 256

/* ---------------- exec ---------------- */

struct vec {
	char **v;
	int n, cap;
};

static int vec_add(struct vec *x, const char *s, size_t len)
{
	if (x->n + 2 > x->cap) {
		int cap = x->cap ? x->cap * 2 : 16;
		char **n = realloc(x->v, (size_t)cap * sizeof *n);
		if (!n)
			return -ENOMEM;
		x->v = n;
		x->cap = cap;
	}
	if (!(x->v[x->n] = strndup(s, len)))
		return -ENOMEM;
	x->v[++x->n] = NULL;
	return 0;
}

static void vec_free(struct vec *x)
{
	for (int i = 0; i < x->n; i++)
		free(x->v[i]);
	free(x->v);
	*x = (struct vec){0};
}

/* The μprocess's NULL-terminated vector at u (NULL: none), each string
 * and pointer counted against *room; buf: ARG_ROOM bytes of scratch. */
static long read_vec(uintptr_t u, struct vec *x, size_t *room, char *buf)
{
	for (size_t i = 0; u; i++) {
		uintptr_t p;
		if (GET(p, u + i * sizeof p))
			return -EFAULT;
		if (!p)
			break;
		if (*room < sizeof p + 1)
			return -E2BIG;
		*room -= sizeof p;
		long len = kr__ustr(buf, (const char *)p, *room);
		if (len == -ENAMETOOLONG)
			return -E2BIG;
		if (len < 0)
			return len;
		*room -= (size_t)len + 1;
		long e = vec_add(x, buf, (size_t)len);
		if (e)
			return e;
	}
	if (!x->v) { /* an empty vector */
		if (!(x->v = calloc(1, sizeof *x->v)))
			return -ENOMEM;
		x->cap = 1;
	}
	return 0;
}

/* A script's "#!" line, as the kernel's binfmt_script reads it: the
 * interpreter, and the rest of the line as one argument.  1: a script;
 * 0: not one; -errno. */
static int shebang(int dirfd, const char *path, char interp[BINPRM_BUF], char arg[BINPRM_BUF])
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES ? 0 : -errno; /* the loader says what it is */
	char b[BINPRM_BUF + 1];
	ssize_t n = pread(fd, b, BINPRM_BUF, 0);
	close(fd);
	if (n < 2 || b[0] != '#' || b[1] != '!')
		return 0;
	b[n] = 0;
	char *nl = memchr(b, '\n', (size_t)n);
	if (nl)
		*nl = 0;
	char *s = b + 2;
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s;
	while (*e && *e != ' ' && *e != '\t')
		e++;
	if (e == s || (!nl && !*e && n == BINPRM_BUF))
		return -ENOEXEC; /* no interpreter, or its name cut short */
	memcpy(interp, s, (size_t)(e - s));
	interp[e - s] = 0;
	while (*e == ' ' || *e == '\t')
		e++;
	char *end = e + strlen(e);
	while (end > e && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	memcpy(arg, e, (size_t)(end - e));
	arg[end - e] = 0;
	return 1;
}

/* Whether the file at dirfd/path is an ELF file (whatever kind). */
static int is_elf(int dirfd, const char *path)
{
	char m[4];
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = pread(fd, m, 4, 0);
	close(fd);
	return n == 4 && !memcmp(m, "\177ELF", 4);
}

static long exec_(struct kr_uproc *up, long dirfd, uintptr_t upath, uintptr_t uargv,
		  uintptr_t uenvp, long flags)
{
	if (flags & ~(long)(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -EINVAL;
	char path[PATH_MAX], interp[BINPRM_BUF], iarg[BINPRM_BUF];
	long r = kr__ustr(path, (const char *)upath, sizeof path);
	if (r < 0)
		return r;
	int hostdir = up->cwdfd;
	if ((int)dirfd != AT_FDCWD && (path[0] != '/' || !path[0])) {
		struct kr__ufile *f = kr__fd_get(&up->fds, (int)dirfd);
		if (!f)
			return -EBADF;
		if (f->kind != UF_HOST)
			return path[0] ? -ENOTDIR : -EACCES;
		hostdir = f->hostfd;
	}
	/* what a script's interpreter is given as its script: execveat's
	 * name for it, as the kernel's */
	char name[PATH_MAX + 32];
	if (!path[0]) {
		if (!(flags & AT_EMPTY_PATH))
			return -ENOENT;
		snprintf(path, sizeof path, "/proc/self/fd/%d", hostdir);
		snprintf(name, sizeof name, "/dev/fd/%ld", dirfd);
		hostdir = AT_FDCWD;
	} else if ((int)dirfd == AT_FDCWD || path[0] == '/') {
		snprintf(name, sizeof name, "%s", path);
	} else {
		snprintf(name, sizeof name, "/dev/fd/%ld/%s", dirfd, path);
	}
	struct stat st;
	if ((flags & AT_SYMLINK_NOFOLLOW) && !fstatat(hostdir, path, &st, AT_SYMLINK_NOFOLLOW) &&
	    S_ISLNK(st.st_mode))
		return -ELOOP;

	char *buf = malloc(ARG_ROOM);
	struct vec argv = {0}, envp = {0}, nargv = {0};
	size_t room = ARG_ROOM - 32;
	if (!buf)
		return -ENOMEM;
	r = read_vec(uargv, &argv, &room, buf);
	if (!r)
		r = read_vec(uenvp, &envp, &room, buf);
	free(buf);
	if (r)
		goto out;

	/* scripts: their interpreters, as the kernel runs them */
	for (int depth = 0;; depth++) {
		if (faccessat(hostdir, path, X_OK, AT_EACCESS)) {
			r = -errno;
			goto out;
		}
		if (fstatat(hostdir, path, &st, 0) || !S_ISREG(st.st_mode)) {
			r = -EACCES;
			goto out;
		}
		int sc = shebang(hostdir, path, interp, iarg);
		if (sc < 0) {
			r = sc;
			goto out;
		}
		if (!sc)
			break;
		if (depth == SCRIPT_DEPTH) {
			r = -ELOOP;
			goto out;
		}
		/* interp [arg] name argv[1..] */
		size_t need = strlen(interp) + strlen(iarg) + strlen(name) + 3 + 3 * sizeof(char *);
		if (room < need) {
			r = -E2BIG;
			goto out;
		}
		room -= need;
		if ((r = vec_add(&nargv, interp, strlen(interp))) ||
		    (iarg[0] && (r = vec_add(&nargv, iarg, strlen(iarg)))) ||
		    (r = vec_add(&nargv, name, strlen(name))))
			goto out;
		for (int i = 1; i < argv.n; i++)
			if ((r = vec_add(&nargv, argv.v[i], strlen(argv.v[i]))))
				goto out;
		vec_free(&argv);
		argv = nargv;
		nargv = (struct vec){0};
		snprintf(name, sizeof name, "%s", interp);
		snprintf(path, sizeof path, "%s", interp);
		hostdir = up->cwdfd; /* the kernel opens it from the working directory */
	}
	if (!argv.n) { /* the loader wants argv[0]; the kernel gives "" */
		if ((r = vec_add(&argv, "", 0)))
			goto out;
	}
	r = kr__uproc_exec(kr__uthr_self(), hostdir, path, argv.v, envp.v); /* takes the vectors */
	argv = envp = (struct vec){0};
	if (r == -ENOEXEC && is_elf(hostdir, path)) {
		kr__say(up, "exec of an ELF program that karui cannot load");
	}
out:
	vec_free(&argv);
	vec_free(&envp);
	vec_free(&nargv);
	return r;
}

long kr__sys_execve(struct kr_uproc *up, long nr, long a[6])
{
	if (nr == SYS_execveat)
		return exec_(up, a[0], (uintptr_t)a[1], (uintptr_t)a[2], (uintptr_t)a[3], a[4]);
	return exec_(up, AT_FDCWD, (uintptr_t)a[0], (uintptr_t)a[1], (uintptr_t)a[2], 0);
}

/* ---------------- vfork, clone, fork ---------------- */

long kr__sys_fork(struct kr_uproc *up, long nr, long a[6])
{
	unsigned long flags = 0;
	uintptr_t stack = 0, ptid = 0, ctid = 0;
	uint64_t tls = 0;
	if (nr == SYS_vfork) {
		flags = CLONE_VM | CLONE_VFORK;
	} else if (nr == SYS_clone) {
		flags = (unsigned long)a[0];
		stack = (uintptr_t)a[1];
		ptid = (uintptr_t)a[2];
		ctid = (uintptr_t)a[3];
		tls = (uint64_t)a[4];
		if (flags & CLONE_THREAD)
			return kr__thr_clone(kr__uthr_self(), flags, stack, ptid, ctid, tls);
	}
	if (nr == SYS_fork)
		flags = SIGCHLD;
	if (!(flags & CLONE_VM)) { /* a real child (fork.c) */
		long r = kr__uproc_fork(kr__uthr_self(), flags, ptid, ctid);
		if (r == -ENOSYS)
			kr__say(up, "fork from a vfork child");
		return r;
	}
	if ((flags & CLONE_VFORK) != CLONE_VFORK) {
		kr__say(up, "clone with CLONE_VM but neither CLONE_VFORK nor CLONE_THREAD");
		return -EINVAL;
	}
	if (flags & (CLONE_THREAD | CLONE_SIGHAND | CLONE_FILES | CLONE_FS | CLONE_PARENT |
		     CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
		     CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)) {
		kr__say(up, "clone with shared tables or namespaces");
		return -EINVAL;
	}
	return kr__uproc_vfork(kr__uthr_self(), flags, stack, ptid, ctid, tls);
}

/* ---------------- wait4, waitid ---------------- */

long kr__sys_wait4(struct kr_uproc *up, long nr, long a[6])
{
	pid_t pid = (pid_t)a[0];
	int *ustatus = (int *)a[1];
	long options = a[2];
	struct rusage *uru = (struct rusage *)a[3];
	if (options & ~(long)(WNOHANG | WUNTRACED | WCONTINUED | __WNOTHREAD | __WCLONE | __WALL))
		return -EINVAL;
	if (pid == INT_MIN)
		return -ESRCH;
	/* before one is collected: a bad pointer leaves it a zombie */
	if ((ustatus && kr__uprobe(ustatus, sizeof *ustatus, 1)) ||
	    (uru && kr__uprobe(uru, sizeof *uru, 1)))
		return -EFAULT;
	struct kr__reaped r;
	/* one process group: 0 and -pgid are any child */
	long got = kr__uproc_reap(up, pid > 0 ? pid : -1, !!(options & WNOHANG), 0, &r);
	if (got <= 0)
		return got;
	int st = r.signaled ? (r.code & 0x7f) : (r.code & 0xff) << 8;
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	if ((ustatus && PUT(ustatus, st)) || (uru && PUT(uru, ru)))
		return -EFAULT;
	return got;
}

long kr__sys_waitid(struct kr_uproc *up, long nr, long a[6])
{
	long idtype = a[0], options = a[3];
	pid_t id = (pid_t)a[1];
	siginfo_t *uinfo = (siginfo_t *)a[2];
	struct rusage *uru = (struct rusage *)a[4];
	if (options & ~(long)(WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT | __WNOTHREAD |
			      __WCLONE | __WALL))
		return -EINVAL;
	if (!(options & (WEXITED | WSTOPPED | WCONTINUED)))
		return -EINVAL;
	pid_t pid;
	switch (idtype) {
	case P_PID:
		if (id <= 0)
			return -EINVAL;
		pid = id;
		break;
	case P_ALL:
	case P_PGID: /* one process group */
		pid = -1;
		break;
	default: /* P_PIDFD: a μprocess has no pidfds */
		return -EINVAL;
	}
	if ((uinfo && kr__uprobe(uinfo, sizeof *uinfo, 1)) || (uru && kr__uprobe(uru, sizeof *uru, 1)))
		return -EFAULT;
	struct kr__reaped r = {0};
	long got = (options & WEXITED)
			   ? kr__uproc_reap(up, pid, !!(options & WNOHANG), !!(options & WNOWAIT), &r)
			   : -ECHILD; /* no stops nor continues */
	if (got < 0)
		return got;
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (got > 0) {
		si.si_signo = SIGCHLD;
		si.si_code = r.signaled ? CLD_KILLED : CLD_EXITED;
		si.si_pid = r.pid;
		si.si_uid = getuid();
		si.si_status = r.code;
	}
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	if ((uinfo && PUT(uinfo, si)) || (uru && PUT(uru, ru)))
		return -EFAULT;
	return 0;
}
