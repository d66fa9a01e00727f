/* karui image layer — what the files that serve a μprocess's system calls
 * share (not installed): the handlers that sys.c's table names, each in
 * the file of its concern, and the few helpers more than one of them uses.
 * A handler gets the call's number and its six arguments as the kernel
 * would, and returns what the kernel would: a value or -errno. */
#ifndef KARUI_IMAGE_SYS_H
#define KARUI_IMAGE_SYS_H

#include "uproc.h"

/* An object at the μprocess's address u: 0 or -EFAULT. */
#define GET(obj, u) kr__ucopy(&(obj), (const void *)(u), sizeof(obj))
#define PUT(u, obj) kr__ucopy((void *)(u), &(obj), sizeof(obj))

/* A wait longer than this (100 years) is as good as for ever, and its
 * nanoseconds do not overflow. */
#define SLEEP_MAX_S (100l * 365 * 86400)

/* f: the open file that the μprocess's fd names, else return -err. */
#define FILE_OR(up, fd, err)                                                                   \
	struct kr__ufile *f = kr__fd_get(&(up)->fds, (int)(fd));                                  \
	if (!f)                                                                                    \
		return -(err)

typedef long kr__sys_fn(struct kr_uproc *up, long nr, long a[6]);

/* ---- sys.c ---- */
long kr__pass(long nr, long a[6]);  /* the kernel's call, its result as -errno */
/* one line on the μprocess's stderr: "karui: WHAT is not supported ..." */
void kr__say(struct kr_uproc *up, const char *what);
kr__sys_fn kr__sys_pass, kr__sys_zero, kr__sys_einval, kr__sys_eperm, kr__sys_enosys,
	kr__sys_echild;

/* ---- sys_fd.c: fds, paths, the working directory, poll, pipes ---- */
kr__sys_fn kr__sys_rw, kr__sys_rwv, kr__sys_seekable, kr__sys_close, kr__sys_close_range,
	kr__sys_open, kr__sys_creat, kr__sys_openat, kr__sys_dup, kr__sys_dup2, kr__sys_dup3,
	kr__sys_fcntl, kr__sys_pipe, kr__sys_pipe2, kr__sys_fstat, kr__sys_newfstatat,
	kr__sys_statx, kr__sys_ioctl, kr__sys_on_fd, kr__sys_poll, kr__sys_ppoll, kr__sys_at,
	kr__sys_at2, kr__sys_symlinkat, kr__sys_stat, kr__sys_access, kr__sys_readlink,
	kr__sys_unlink, kr__sys_mkdir, kr__sys_rename, kr__sys_link, kr__sys_symlink,
	kr__sys_chmod, kr__sys_chown, kr__sys_by_path, kr__sys_chdir, kr__sys_fchdir,
	kr__sys_getcwd, kr__sys_umask;

/* ---- sys_mem.c: what it maps ---- */
kr__sys_fn kr__sys_mmap, kr__sys_munmap, kr__sys_mremap, kr__sys_on_own, kr__sys_brk;

/* ---- sys_sig.c: signals, its timer, kill ---- */
kr__sys_fn kr__sys_sigaction, kr__sys_sigprocmask, kr__sys_sigpending, kr__sys_sigaltstack,
	kr__sys_alarm, kr__sys_setitimer, kr__sys_getitimer, kr__sys_kill, kr__sys_tkill,
	kr__sys_tgkill, kr__sys_pause;

/* ---- sys_task.c: its identity, its one thread, its waits and its end ---- */
kr__sys_fn kr__sys_getpid, kr__sys_getppid, kr__sys_set_tid_address, kr__sys_arch_prctl,
	kr__sys_prctl, kr__sys_prlimit64, kr__sys_exit, kr__sys_nanosleep,
	kr__sys_clock_nanosleep, kr__sys_sched_yield, kr__sys_futex, kr__sys_fork,
	kr__sys_execve;

#endif
