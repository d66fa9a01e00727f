/* karui image layer — what the files that serve a μprocess's system calls
 * share (not installed): the handlers that sys.c's table names, each in
 * the file of its concern, and the few helpers more than one of them uses.
 * A handler gets the call's number and its six arguments as the kernel
 * would, and returns what the kernel would: a value or -errno. */
#ifndef KARUI_IMAGE_SYS_H
#define KARUI_IMAGE_SYS_H

#include <limits.h>
#include <sys/uio.h>

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
kr__sys_fn kr__sys_pass, kr__sys_zero, kr__sys_einval, kr__sys_eperm, kr__sys_enosys;

/* ---- sys_fd.c: fds, paths, the working directory, poll, pipes ---- */
/* The call with argument i (an fd) made a host fd; pipes: `onpipe`. */
long kr__with_fd(struct kr_uproc *up, long nr, long a[6], int i, long onpipe);
/* A new host fd r (O_CLOEXEC; r < 0: -errno, returned) becomes the
 * μprocess's lowest free fd.  Its open file keeps the access mode and what
 * F_SETFL can change of `flags`, as the kernel keeps them from an open's
 * flags; own: 0, KR__OWN or KR__OWN_SOCK (uproc.h), r then O_NONBLOCK. */
long kr__adopt(struct kr_uproc *up, long r, long flags, int cloexec, int own);
/* An open file karui made for the μprocess goes where others share it
 * (SCM_RIGHTS): its host fd takes the μprocess's O_NONBLOCK, and it is
 * served as any host file from now on. */
void kr__disown(struct kr__ufile *f);
/* Wait until the host fd of f has one of `events` or the deadline (kr_now;
 * KR_FOREVER) passes: 0, -ETIMEDOUT, or -EINTR when kr_uproc_kill ends
 * the wait.  Only its microprocess waits (kr_poll), but on a host file it
 * may share with others on the epoll back end, which kr_poll would make
 * O_NONBLOCK: that waits in poll beside its killfd, the VP handed off. */
long kr__fd_wait(struct kr_uproc *up, struct kr__ufile *f, short events, uint64_t deadline);
/* SO_RCVTIMEO or SO_SNDTIMEO (send) of fd as a deadline from now;
 * KR_FOREVER when there is none, or fd is no socket. */
uint64_t kr__sock_deadline(int fd, int send);
/* A call on f found nothing to do now (EAGAIN): -EAGAIN if it is not to
 * wait (`dontwait`, the μprocess's O_NONBLOCK) or its socket's timeout
 * (SO_RCVTIMEO, SO_SNDTIMEO by `events`: *deadline, 0 until the first
 * wait) passed; else 0 once f may have something, to try again; -EINTR. */
long kr__fd_again(struct kr_uproc *up, struct kr__ufile *f, short events, int dontwait,
		  uint64_t *deadline);
/* For the path calls with no *at form (the xattr calls,
 * inotify_add_watch): the μprocess's path at upath, a relative one made
 * absolute through the working directory's host fd (/proc/self/fd/N/PATH,
 * which the kernel resolves from that directory itself, wherever it is
 * now; a path built from up->cwd would not follow a rename).  0 or
 * -errno (ENAMETOOLONG from the kernel, too, for a relative path within
 * the prefix's length of PATH_MAX). */
#define KR__CWD_PATH_MAX (PATH_MAX + 32)
long kr__cwd_path(struct kr_uproc *up, const char *upath, char out[KR__CWD_PATH_MAX]);
kr__sys_fn kr__sys_rw, kr__sys_rwv, kr__sys_seekable, kr__sys_close, kr__sys_close_range,
	kr__sys_open, kr__sys_creat, kr__sys_openat, kr__sys_dup, kr__sys_dup2, kr__sys_dup3,
	kr__sys_fcntl, kr__sys_pipe, kr__sys_pipe2, kr__sys_fstat, kr__sys_newfstatat,
	kr__sys_statx, kr__sys_ioctl, kr__sys_on_fd, kr__sys_poll, kr__sys_ppoll, kr__sys_at,
	kr__sys_at2, kr__sys_symlinkat, kr__sys_stat, kr__sys_access, kr__sys_readlink,
	kr__sys_unlink, kr__sys_mkdir, kr__sys_rename, kr__sys_link, kr__sys_symlink,
	kr__sys_chmod, kr__sys_chown, kr__sys_by_path, kr__sys_chdir, kr__sys_fchdir,
	kr__sys_getcwd, kr__sys_umask, kr__sys_xattr, kr__sys_select, kr__sys_pselect6;

/* ---- sys_kfd.c: the kernel's other kinds of fd (eventfd, timerfd,
 * memfd, inotify, epoll) ---- */
kr__sys_fn kr__sys_eventfd, kr__sys_timerfd_create, kr__sys_memfd_create, kr__sys_inotify_init,
	kr__sys_inotify_add_watch, kr__sys_on_kfd, kr__sys_epoll_create, kr__sys_epoll_ctl,
	kr__sys_epoll_wait;

/* ---- sys_sigfd.c: signalfd ---- */
/* read of a signalfd (rw, sys_fd.c): its pending signals of the mask */
long kr__sigfd_read(struct kr_uproc *up, struct kr__ufile *f, void *buf, size_t len);
kr__sys_fn kr__sys_signalfd;

/* ---- sys_net.c: sockets ---- */
/* read and write of a socket karui made (rw, sys_fd.c); -EPIPE without
 * SIGPIPE, which the caller sends */
long kr__sock_rw(struct kr_uproc *up, struct kr__ufile *f, void *buf, size_t len, int write);
long kr__sock_rwv(struct kr_uproc *up, struct kr__ufile *f, const struct iovec *iov, long cnt,
		  int write);
kr__sys_fn kr__sys_socket, kr__sys_socketpair, kr__sys_on_sock, kr__sys_setsockopt,
	kr__sys_connect, kr__sys_accept, kr__sys_sendrecv, kr__sys_msg, kr__sys_sendmmsg;

/* ---- sys_mem.c: what it maps ---- */
kr__sys_fn kr__sys_mmap, kr__sys_munmap, kr__sys_mremap, kr__sys_on_own, kr__sys_brk;

/* ---- sys_sig.c: signals, its timer, kill (delivery: signal.c) ---- */
kr__sys_fn kr__sys_sigaction, kr__sys_sigprocmask, kr__sys_sigpending, kr__sys_sigaltstack,
	kr__sys_alarm, kr__sys_setitimer, kr__sys_getitimer, kr__sys_kill, kr__sys_tkill,
	kr__sys_tgkill, kr__sys_sigqueueinfo, kr__sys_pause, kr__sys_sigsuspend, kr__sys_sigtimedwait,
	kr__sys_sigreturn, kr__sys_timer_create, kr__sys_timer_settime, kr__sys_timer_gettime,
	kr__sys_timer_getoverrun, kr__sys_timer_delete;
/* A call's own signal mask for its wait (epoll_pwait's, ppoll's,
 * pselect6's: a sigset_t of `size` bytes at umask, or none): the calling
 * thread's is kept in *saved, to put back with kr__sigmask_pop.  0, -EINVAL, -EFAULT. */
long kr__sigmask_push(struct kr_uproc *up, long umask, long size, uint64_t *saved);
void kr__sigmask_pop(struct kr_uproc *up, uint64_t saved);

/* ---- sys_task.c: its identity, its waits and its end ---- */
kr__sys_fn kr__sys_getpid, kr__sys_gettid, kr__sys_getppid, kr__sys_set_tid_address,
	kr__sys_arch_prctl, kr__sys_prctl, kr__sys_prlimit64, kr__sys_exit, kr__sys_nanosleep,
	kr__sys_clock_nanosleep, kr__sys_sched_yield, kr__sys_setid, kr__sys_sched_of;

/* ---- thread.c: its threads' futexes and robust lists ---- */
kr__sys_fn kr__sys_futex, kr__sys_set_robust_list;

/* ---- sys_exec.c: exec, vfork, fork, and waits for children ---- */
kr__sys_fn kr__sys_fork, kr__sys_execve, kr__sys_wait4, kr__sys_waitid;

#endif
