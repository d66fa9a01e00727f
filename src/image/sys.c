/*
 * karui image layer — what each system call of a μprocess does (seed
 * 003's Table 1).  kr__sys gets the call's number and six arguments as
 * the kernel would, and returns what the kernel would: a value or -errno.
 *
 * One table says it all: each entry names a call, the handler that serves
 * it and what karui does with it, in words (the note), and docs/uproc.md's
 * table of every intercepted call is printed from it (kr__sys_table_md,
 * `karui-run --syscall-table`; a test compares the two).  Calls that behave
 * alike share one note, and their entries follow each other, so that they
 * make one row.  kr__sys finds a call's entry by its number in an index
 * made from the table once, when the layer starts (kr__sys_init); a number
 * the table does not name is ENOSYS.
 *
 * The handlers are in the files of their concern (sys.h): sys_fd.c (fds,
 * paths, the working directory, poll, pipes), sys_kfd.c (eventfd,
 * timerfd, memfd, inotify, epoll), sys_sigfd.c (signalfd), sys_net.c (sockets), sys_mem.c (what
 * it maps), sys_sig.c (signals, its timer, kill), sys_task.c (its
 * identity, its sleeps, its end), sys_exec.c (exec, vfork, wait4),
 * thread.c (its threads, futexes).  Four kinds of calls:
 *  - the μprocess's own state, emulated: its fds, working directory,
 *    umask, pid, thread pointer, signal dispositions and mask, brk;
 *  - its end: exit, exit_group, a signal whose default action ends it;
 *  - its signals, delivered to its handlers on the way back (signal.c);
 *  - calls that would wait: on a pipe, a terminal, a kernel pipe or
 *    socket, an eventfd, epoll, a sleep; they park only the μprocess's
 *    microprocess;
 *  - the rest of what a process may do that touches only itself (time,
 *    memory it maps, which is recorded so that it goes with the μprocess,
 *    uname, getrandom, ...), passed to the kernel;
 * and what a μprocess may not do: calls on the whole process's
 * identity (setuid and the like: EPERM) and those not done yet (any call
 * not listed: ENOSYS, with one line on the μprocess's stderr for the ones
 * a program means to use).
 *
 * Every pointer a μprocess passes is its own word: what karui reads or
 * writes there goes through uaccess.S (GET, PUT, kr__ustr, kr__uprobe),
 * so that a bad one is -EFAULT for that call as in the kernel; what only
 * the kernel reads is passed on for the kernel to check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

long kr__pass(long nr, long a[6])
{
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	return r == -1 ? -errno : r;
}

void kr__say(struct kr_uproc *up, const char *what)
{
	char msg[160];
	int n = snprintf(msg, sizeof msg, "karui: %s is not supported in a μprocess yet\n", what);
	struct kr__ufile *f = kr__fd_get(&up->fds, 2);
	if (!f || n <= 0)
		return;
	if (f->kind == UF_PIPE)
		kr__upipe_rw(f->pipe, 1, msg, (size_t)n);
	else
		(void)!write(f->hostfd, msg, (size_t)n);
}

/* The handlers of calls that the kernel does as asked, or that have one
 * answer. */
long kr__sys_pass(struct kr_uproc *up, long nr, long a[6])
{
	return kr__pass(nr, a);
}

long kr__sys_zero(struct kr_uproc *up, long nr, long a[6])
{
	return 0;
}

long kr__sys_einval(struct kr_uproc *up, long nr, long a[6])
{
	return -EINVAL;
}

long kr__sys_eperm(struct kr_uproc *up, long nr, long a[6])
{
	return -EPERM;
}

long kr__sys_enosys(struct kr_uproc *up, long nr, long a[6])
{
	return -ENOSYS;
}

/* ---------------- the notes: what karui does, in docs/uproc.md's words ---------------- */

static const char
	N_RW[] = "on a karui pipe: the stream (one copy, writer's buffer to reader's; waits "
		 "park the microprocess); on a terminal: the kernel, with the VP handed off "
		 "meanwhile (`kr_blocking_begin`), so that no `O_NONBLOCK` lands on a terminal "
		 "the host shares; on other host fds that can wait (kernel pipes, sockets): "
		 "karui's I/O (`kr_read_until`, `kr_write_until`) on io_uring, and on the epoll "
		 "back end (which would make the fd `O_NONBLOCK`, for every holder of the open "
		 "file) the kernel with the VP handed off (a read, a terminal's too, first waits "
		 "in `poll` beside an eventfd of the μprocess's, which `kr_uproc_kill` writes); "
		 "on a socket, eventfd, timerfd or inotify fd of its own making (whose host fd is "
		 "`O_NONBLOCK`): the kernel's call without waiting, and again after each wait, "
		 "which parks its microprocess (a socket's as `recvfrom` and `sendto`'s, below); "
		 "on files: the kernel. A write with no reader left sends it SIGPIPE (the default "
		 "action ends it, silently, with 141) and fails with `EPIPE`",
	N_SEEK[] = "its host fd; `ESPIPE` on a pipe",
	N_OPEN[] =
		"against its working directory (`AT_FDCWD`), its umask applied; the new host fd "
		"is `O_CLOEXEC` for the host's sake and becomes the μprocess's lowest free fd. "
		"`/proc/self/maps` (and `/proc/thread-self/maps`, `/proc/PID/maps` with its own "
		"pid) opens a read-only copy of the kernel's lines for its own mappings only, its "
		"stack named `[stack]` (asked one by one with `PROCMAP_QUERY` on Linux ≥ 6.11, "
		"else cut from the host's list). `/dev/stdin`, `/dev/stdout`, `/dev/stderr`, "
		"`/dev/fd/N` and `/proc/self/fd/N` (thread-self, its own pid) open its own fd N: "
		"a karui pipe's end again (in that end's direction, else `EACCES`), or its host "
		"file opened anew, as the kernel opens `/proc/self/fd/N`; an fd it does not have: "
		"`ENOENT`. Other calls on those paths (`stat`, `readlink`) see the host's fds",
	N_TABLE[] = "its own table; duplicates share one open file, as in the kernel. Of "
		    "`fcntl`'s commands, `F_DUPFD`, `F_DUPFD_CLOEXEC`, `F_GETFD`, `F_SETFD`, "
		    "`F_GETFL` and `F_SETFL` are its own (the `O_NONBLOCK` of a socket or other "
		    "fd it made is its own, its host fd's always set); the rest are passed on "
		    "host fds",
	N_PIPE[] = "a karui pipe (`O_NONBLOCK` is accepted and not honoured)",
	N_STAT[] = "passed; on a pipe end `fstat` gives a FIFO (`statx` on one: `ENOSYS`, and "
		   "the C library falls back to `fstat`)",
	N_IOCTL[] = "passed on host fds (so `isatty` works); on a pipe `FIONREAD`, else "
		    "`ENOTTY`; `FIONBIO` on a socket or other fd it made sets its own "
		    "`O_NONBLOCK`, as `fcntl`; `FICLONE` and `FICLONERANGE` with their "
		    "source fd translated, `FIDEDUPERANGE` `EOPNOTSUPP`",
	N_FD[] = "passed with its host fd",
	N_COPY[] = "`EINVAL`, so that callers copy with `read` and `write`",
	N_POLL[] = "readiness of its fds (pipe ends from the stream's state); a wait looks "
		   "again every millisecond, parked. `select`'s sets are a poll array, their "
		   "events as the kernel maps them, and what is left of the timeout written "
		   "back (an fd it does not have is `EBADF` below 1,024, where the kernel "
		   "looks within its fd table's size only). The signal mask of `ppoll` and "
		   "`pselect6` is its own for the time of the call, as `epoll_pwait`'s",
	N_KFD[] = "the kernel's, made as natively and installed in its table: the host fd is "
		  "close-on-exec and `O_NONBLOCK`, while the flags it asked (`EFD_CLOEXEC`, "
		  "`EFD_NONBLOCK`, `TFD_`, `IN_`, `EPOLL_CLOEXEC`) are its fd's close-on-exec bit "
		  "and its open file's `O_NONBLOCK`; a read that would wait parks its "
		  "microprocess until the host fd is readable (see `read`)",
	N_MEMFD[] = "the kernel's, a regular file (close-on-exec on the host; `MFD_CLOEXEC`: its "
		    "fd's bit)",
	N_ON_KFD[] = "passed with its host fd (a karui pipe: `EINVAL`, as for any fd of another "
		     "kind)",
	N_INOTIFY[] = "passed with its host fd, a relative path against its working directory "
		      "(as the xattr calls)",
	N_EPOLL_CTL[] = "passed with both its fds made host fds, its data as it gave it. A karui "
			"pipe has no host fd: `EPERM`, as the kernel says of a file it cannot "
			"poll. Two fds of one open file (`dup`) are one host fd, which a set holds "
			"once (`EEXIST` for the second)",
	N_EPOLL_WAIT[] = "the kernel's `epoll_wait` without waiting, and again each time its "
			 "epoll fd is readable (a wait that parks its microprocess) until there "
			 "are events or the timeout passes; a signal ends the wait (`EINTR`). "
			 "`epoll_pwait`'s signal mask is its own for the time of the call, and "
			 "for the handler of a signal it lets through",
	N_SOCK[] = "the kernel's, made as natively and installed in its table: the host fd is "
		   "close-on-exec and `O_NONBLOCK`, while `SOCK_CLOEXEC` and `SOCK_NONBLOCK` are "
		   "its fd's close-on-exec bit and its open file's `O_NONBLOCK`",
	N_SOCK_WAIT[] =
		"the kernel's, without waiting; one that would wait (no `O_NONBLOCK` of its "
		"own) parks its microprocess until the socket is ready, within `SO_RCVTIMEO` "
		"(`accept`) or `SO_SNDTIMEO` (`connect`), and `kr_uproc_kill` ends the wait. A "
		"`connect` in progress ends with the socket's error; one to a local listener "
		"whose backlog is full is tried again every millisecond. A new socket is as "
		"`socket`'s. On a socket it was given at spawn (not of its own making, perhaps "
		"blocking and shared) they wait in the kernel with the VP handed off",
	N_SOCK_IO[] =
		"the kernel's with `MSG_DONTWAIT`, and again after each wait as `accept`'s, until "
		"what the blocking call does is done: a stream's send all sent, a `MSG_WAITALL` "
		"receive full or at its end; `MSG_DONTWAIT` or its own `O_NONBLOCK`: no wait. "
		"`MSG_NOSIGNAL` always, and SIGPIPE to the μprocess itself on a closed stream "
		"unless it asked `MSG_NOSIGNAL`. `SCM_RIGHTS` carries its own fds: those it "
		"sends are made host fds (a karui pipe: `EBADF`), those it receives become its "
		"own. The kernel reads and writes its buffers and addresses. Credentials "
		"(`SCM_CREDENTIALS`, `SO_PEERCRED`) are the host process's",
	N_SOCK_FD[] = "passed with its host fd (a karui pipe: `ENOTSOCK`); the fd that "
		      "`SO_ATTACH_BPF` and `SO_ATTACH_REUSEPORT_EBPF` take is one of its own, made "
		      "a host fd",
	N_XATTR[] = "passed, a relative path against its working directory: there is no `*at` "
		    "form, so karui names it `/proc/self/fd/N/PATH`, N the host fd of its working "
		    "directory, which holds wherever that directory is now",
	N_AT[] = "passed, its dirfds translated (`AT_FDCWD`: its working directory), its umask "
		 "applied to new directories and nodes",
	N_PATH[] = "as their `*at` forms against its working directory",
	N_CWD[] = "its own working directory (a host fd and its path)",
	N_UMASK[] = "its own",
	N_MMAP[] = "passed and recorded: what it maps goes when it ends. It may unmap, move or "
		   "change only what it mapped (else `EINVAL`); a `MAP_FIXED` outside its "
		   "mappings becomes `MAP_FIXED_NOREPLACE` (never over the host's memory); "
		   "`MAP_GROWSDOWN`: `EINVAL`",
	N_OWN[] = "on its own mappings (its stack among them) only",
	N_BRK[] = "never grows (`malloc` maps instead)",
	N_PID[] = "its own pid (above any real pid: 4,194,304 and up)",
	N_TID[] = "the calling thread's own id (the first thread's is the pid); "
		  "`set_tid_address`: the word its end clears and wakes (`pthread_join`)",
	N_PPID[] = "the host's pid",
	N_ARCH[] = "`ARCH_SET_FS` / `ARCH_GET_FS`: the calling thread's own thread pointer; the "
		   "rest `EINVAL`",
	N_PRCTL[] = "`PR_SET_NAME`, `PR_SET_PDEATHSIG`, `PR_SET_DUMPABLE`: accepted and "
		    "ignored; `PR_GET_DUMPABLE`: 1; the rest `EINVAL`",
	N_SCHED_OF[] = "of itself or its threads (by pid or tid): the kernel's for the calling "
		       "thread; of another process: the kernel's",
	N_ROBUST[] = "the thread's; walked when it ends: a robust mutex it holds is marked "
		     "as its owner's that died, and a waiter woken (`EOWNERDEAD`), or a PI "
		     "one's given to its first waiter",
	N_RSEQ[] = "`ENOSYS` (the C library then does without)",
	N_FUTEX[] = "karui's, keyed by address (one address space: private and shared "
		    "futexes alike, between threads and between μprocesses that map the word at "
		    "the same address): `FUTEX_WAIT` and `FUTEX_WAIT_BITSET` park the calling "
		    "thread's microprocess, `EAGAIN` when the word has changed, until a wake, the "
		    "timeout (`ETIMEDOUT`; relative for `FUTEX_WAIT`, absolute on either clock "
		    "for `FUTEX_WAIT_BITSET`) or a signal (`EINTR`); `FUTEX_WAKE`, "
		    "`FUTEX_WAKE_BITSET`, `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`, `FUTEX_WAKE_OP` "
		    "(its ops and comparisons) as the kernel's; the PI operations "
		    "(`FUTEX_LOCK_PI`, `_LOCK_PI2`, `_TRYLOCK_PI`, `_UNLOCK_PI`, "
		    "`_WAIT_REQUEUE_PI`, `_CMP_REQUEUE_PI`) with the kernel's protocol on the "
		    "word (owner's tid, `FUTEX_WAITERS`, `FUTEX_OWNER_DIED`; `EDEADLK`, `EPERM`, "
		    "`ESRCH`, `ETIMEDOUT`), the lock handed to the first waiter, no priority "
		    "boosting (its threads share one priority); the errors in the kernel's order",
	N_SIGS[] = "its own dispositions, mask and alternate stack, which decide what its "
		   "signals do as in the kernel: a handler runs on its stack or alternate stack "
		   "(`SA_ONSTACK`), in an rt signal frame as the kernel's (siginfo, ucontext with "
		   "the registers, the FP/vector state and the mask to restore), returning "
		   "through its `sa_restorer`; `SA_SIGINFO`, `SA_NODEFER`, `SA_RESETHAND`, "
		   "`SA_RESTART`, `SS_AUTODISARM` as the kernel's; the default action ends it "
		   "with 128 + the signal or does nothing; an ignored signal is dropped, a "
		   "blocked one pending (`rt_sigpending`). Standard signals: one of each kind "
		   "pending at a time, realtime ones too (not queued)",
	N_SIGRET[] = "the context of the frame at its stack pointer, checked: `%rip` and "
		     "`%rsp` in its own mappings (or `%rip` in the vDSO), the flags it may set, "
		     "the mask without SIGKILL and SIGSTOP, x87, SSE, AVX and AVX-512 state "
		     "with a valid MXCSR; else its end by SIGSEGV",
	N_ITIMER[] = "`ITIMER_REAL`: its own, kept by a microprocess of its own that sends it "
		     "SIGALRM (`SI_KERNEL`; the default action ends it with 142) when the time "
		     "comes; `ITIMER_VIRTUAL`, `ITIMER_PROF`: `EINVAL`",
	N_TIMER[] = "its own, up to 32, each kept as `ITIMER_REAL` is: on `CLOCK_REALTIME`, "
		    "`CLOCK_MONOTONIC` or `CLOCK_BOOTTIME` (others: `EINVAL`), relative or "
		    "`TIMER_ABSTIME`; its signal (`SI_TIMER`, its `sigev_value`) to the "
		    "μprocess (`SIGEV_SIGNAL`), to one of its threads (`SIGEV_THREAD_ID`: "
		    "glibc's `SIGEV_THREAD`), or none (`SIGEV_NONE`); the overrun count is 0; "
		    "deleted at an exec",
	N_KILL[] = "to itself or to another μprocess of the host by its pid, as "
		   "`kr_uproc_kill` (`SI_USER`; `tkill`, `tgkill`: `SI_TKILL`, and the tgid "
		   "must be the tid); its process group (`kill(0)`) is itself, a group `-N` the "
		   "μprocess N alone; `-1` and any other pid: `ESRCH`",
	N_SIGQUEUE[] = "as `kill` and `tgkill`, with the code, pid and value of the siginfo it "
		       "gives (its uid its own): a handler's siginfo and a signalfd's read carry "
		       "them; a code of `kill`'s or the kernel's to another process: `EPERM`, as in "
		       "the kernel; to a real child (of `fork`) the value is not carried",
	N_PAUSE[] = "wait until a signal is delivered: `EINTR` once its handler ran (the "
		    "default action may end it); `rt_sigsuspend`'s mask is its own for the wait "
		    "and for that handler",
	N_SIGNALFD[] =
		"karui's own signalfd (the kernel's would read the host's signals): a `read` "
		"takes its pending signals of the mask, the calling thread's then its "
		"μprocess's, each a `struct signalfd_siginfo` as the kernel fills it (the "
		"sender's pid and uid, a timer's id and `sigev_value`, a child's pid and "
		"status); with none it waits, parking its microprocess, until one comes, "
		"and a signal it does not block ends the wait (`EINTR`, or the read "
		"restarts after a handler with `SA_RESTART`); `SFD_NONBLOCK`: `EAGAIN`. "
		"`signalfd` on a signalfd fd sets its mask (another fd: `EINVAL`). `poll` "
		"and `select` see it readable while a signal of its mask is pending for "
		"the caller; in an epoll set it is an eventfd of karui's that is readable "
		"while one is pending for the μprocess that made it. `SCM_RIGHTS` cannot "
		"carry it (`EBADF`). In a `fork` child it is a kernel signalfd of the same "
		"mask; an exec keeps it",
	N_SIGWAIT[] = "takes a pending signal of its set (its siginfo written), waiting for "
		      "one within the timeout (`EAGAIN`); a signal it does not block ends the "
		      "wait (`EINTR`)",
	N_EXIT[] = "the end of the calling thread: its `set_tid_address` word cleared and "
		   "woken; the μprocess's end, with that status, when it was the last",
	N_EXITG[] = "its end, with that status: every thread of it ends as it comes back from "
		    "karui (a wait cut short, a thread that computes interrupted)",
	N_SLEEP[] = "a sleep that parks its microprocess",
	N_YIELD[] = "`kr_mp_yield`",
	N_PASS[] = "passed",
	N_PRLIMIT[] = "reading its own limits: passed; setting: `EPERM`",
	N_SETID[] = "`EPERM` for a change (a μprocess has its host's credentials); one that "
		    "sets each id it names to what it is already succeeds (`posix_spawn`'s "
		    "`POSIX_SPAWN_RESETIDS`)",
	N_EPERM[] = "`EPERM` (`setsid` and `setpgid` too: a μprocess is in its host's session "
		    "and process group)",
	N_FORK[] = "`vfork`, and `clone` with `CLONE_VM | CLONE_VFORK` (`posix_spawn`, "
		   "`system`, `popen`): a child μprocess, with a pid of its own and a copy of "
		   "its fd table, working directory, umask and signal state, runs on its "
		   "parent's microprocess and memory while the parent waits, as in the kernel; "
		   "when it execs, the new program is a μprocess of its own and the parent goes "
		   "on from its call with the child's pid and every register as it was; when it "
		   "ends first, it is a zombie and the parent goes on likewise. `fork`, and "
		   "`clone` without `CLONE_VM`: deferred, the child runs in place as a vfork "
		   "child's, its parent's writable memory copied first and put back when the "
		   "child execs (a μprocess then) or ends, while its calls are those a fork's "
		   "child makes before exec; at any other call (or at once: threads, shared "
		   "writable memory, `KARUI_UPROC_FORK=real`) a real child process, the host's "
		   "fork, in which the μprocess runs alone as a plain process (its fds, working "
		   "directory, umask, dispositions and mask; its karui pipes' ends made kernel "
		   "pipes' first); the parent gets its pid, a child for `wait4`, SIGCHLD and "
		   "`kill`. "
		   "`clone` of a thread (`CLONE_VM | CLONE_FS | CLONE_FILES | "
		   "CLONE_SIGHAND | CLONE_THREAD`, as `pthread_create`): another thread of the "
		   "μprocess, a microprocess of its own that starts from the call with the "
		   "stack and thread pointer it gives and every other register as the "
		   "caller's, `%rax` 0; its tid a fresh id, its signal mask the caller's; "
		   "`CLONE_SETTLS`, `CLONE_PARENT_SETTID`, `CLONE_CHILD_SETTID`, "
		   "`CLONE_CHILD_CLEARTID` as the kernel's; a thread without `CLONE_FS` or "
		   "`CLONE_FILES`: `EINVAL`",
	N_CLONE3[] = "`ENOSYS` (the C library tries `clone` next)",
	N_EXEC[] = "its image replaced by the new program's (a kept image of it, or a fresh "
		   "load), the old one released only once the new one is loaded: the same pid, "
		   "its fds less the close-on-exec ones, working directory, umask, signal mask "
		   "and ignored signals (the caught ones back to their default); `argv` and "
		   "`envp` read from its memory (`EFAULT`; `E2BIG` past 2 MiB); the path "
		   "against its working directory or `execveat`'s dirfd (`AT_EMPTY_PATH`: that "
		   "fd's file); a `#!` script runs its interpreter, with the line's one "
		   "argument, as in the kernel. A program not position-independent whose link "
		   "address another image holds (gcc's `cc1`, exec'd by gcc, itself one) runs "
		   "as a process of its own, with the μprocess's fds and state, and the "
		   "μprocess stands for it: its pid, its status, a kill sent to it. `ENOENT`, "
		   "`EACCES`, `EPERM` (setuid, setgid, file capabilities) and `ENOEXEC` (no "
		   "script nor ELF program, or one of another architecture, with a line on its "
		   "stderr) leave the old image running",
	N_WAIT[] = "its children (of `vfork` and `clone`): one by pid or any, `WNOHANG`, "
		   "`WNOWAIT` (`waitid`), the status encoded as the kernel's, the rusage "
		   "zeroed; `ECHILD` when it has none. A child's end sends it SIGCHLD "
		   "(`CLD_EXITED` or `CLD_KILLED`, the child's pid and status), whose default "
		   "action is to ignore it; with SIGCHLD ignored (or `SA_NOCLDWAIT`) its "
		   "children are collected at their end, as in the kernel";

/* ---------------- the table ---------------- */

#define NR_MAX 512 /* the index's size: above every x86-64 call's number */

static const struct sysent {
	const char *name;
	int nr;
	kr__sys_fn *h;
	const char *note;
} tab[] = {
/* a number the index cannot hold does not compile */
#define E(name, h, note)                                                                       \
	{#name, SYS_##name + 0 * (int)sizeof(char[SYS_##name < NR_MAX ? 1 : -1]), h, note}
	E(read, kr__sys_rw, N_RW),
	E(write, kr__sys_rw, N_RW),
	E(readv, kr__sys_rwv, N_RW),
	E(writev, kr__sys_rwv, N_RW),
	E(pread64, kr__sys_seekable, N_SEEK),
	E(pwrite64, kr__sys_seekable, N_SEEK),
	E(preadv, kr__sys_seekable, N_SEEK),
	E(pwritev, kr__sys_seekable, N_SEEK),
	E(preadv2, kr__sys_seekable, N_SEEK),
	E(pwritev2, kr__sys_seekable, N_SEEK),
	E(lseek, kr__sys_seekable, N_SEEK),
	E(open, kr__sys_open, N_OPEN),
	E(creat, kr__sys_creat, N_OPEN),
	E(openat, kr__sys_openat, N_OPEN),
	E(close, kr__sys_close, N_TABLE),
	E(close_range, kr__sys_close_range, N_TABLE),
	E(dup, kr__sys_dup, N_TABLE),
	E(dup2, kr__sys_dup2, N_TABLE),
	E(dup3, kr__sys_dup3, N_TABLE),
	E(fcntl, kr__sys_fcntl, N_TABLE),
	E(pipe, kr__sys_pipe, N_PIPE),
	E(pipe2, kr__sys_pipe2, N_PIPE),
	E(fstat, kr__sys_fstat, N_STAT),
	E(newfstatat, kr__sys_newfstatat, N_STAT),
	E(statx, kr__sys_statx, N_STAT),
	E(ioctl, kr__sys_ioctl, N_IOCTL),
	E(getdents64, kr__sys_on_fd, N_FD),
	E(fsync, kr__sys_on_fd, N_FD),
	E(fdatasync, kr__sys_on_fd, N_FD),
	E(ftruncate, kr__sys_on_fd, N_FD),
	E(fadvise64, kr__sys_on_fd, N_FD),
	E(fallocate, kr__sys_on_fd, N_FD),
	E(flock, kr__sys_on_fd, N_FD),
	E(fchmod, kr__sys_on_fd, N_FD),
	E(fchown, kr__sys_on_fd, N_FD),
	E(fstatfs, kr__sys_on_fd, N_FD),
	E(readahead, kr__sys_on_fd, N_FD),
	E(syncfs, kr__sys_on_fd, N_FD),
	E(fgetxattr, kr__sys_on_fd, N_FD),
	E(flistxattr, kr__sys_on_fd, N_FD),
	E(fsetxattr, kr__sys_on_fd, N_FD),
	E(fremovexattr, kr__sys_on_fd, N_FD),
	E(sync_file_range, kr__sys_on_fd, N_FD),
	E(copy_file_range, kr__sys_einval, N_COPY),
	E(sendfile, kr__sys_einval, N_COPY),
	E(splice, kr__sys_einval, N_COPY),
	E(tee, kr__sys_einval, N_COPY),
	E(poll, kr__sys_poll, N_POLL),
	E(ppoll, kr__sys_ppoll, N_POLL),
	E(select, kr__sys_select, N_POLL),
	E(pselect6, kr__sys_pselect6, N_POLL),
	E(eventfd, kr__sys_eventfd, N_KFD),
	E(eventfd2, kr__sys_eventfd, N_KFD),
	E(timerfd_create, kr__sys_timerfd_create, N_KFD),
	E(inotify_init, kr__sys_inotify_init, N_KFD),
	E(inotify_init1, kr__sys_inotify_init, N_KFD),
	E(epoll_create, kr__sys_epoll_create, N_KFD),
	E(epoll_create1, kr__sys_epoll_create, N_KFD),
	E(memfd_create, kr__sys_memfd_create, N_MEMFD),
	E(timerfd_settime, kr__sys_on_kfd, N_ON_KFD),
	E(timerfd_gettime, kr__sys_on_kfd, N_ON_KFD),
	E(inotify_rm_watch, kr__sys_on_kfd, N_ON_KFD),
	E(inotify_add_watch, kr__sys_inotify_add_watch, N_INOTIFY),
	E(epoll_ctl, kr__sys_epoll_ctl, N_EPOLL_CTL),
	E(epoll_wait, kr__sys_epoll_wait, N_EPOLL_WAIT),
	E(epoll_pwait, kr__sys_epoll_wait, N_EPOLL_WAIT),
	E(epoll_pwait2, kr__sys_epoll_wait, N_EPOLL_WAIT),
	E(socket, kr__sys_socket, N_SOCK),
	E(socketpair, kr__sys_socketpair, N_SOCK),
	E(connect, kr__sys_connect, N_SOCK_WAIT),
	E(accept, kr__sys_accept, N_SOCK_WAIT),
	E(accept4, kr__sys_accept, N_SOCK_WAIT),
	E(sendto, kr__sys_sendrecv, N_SOCK_IO),
	E(recvfrom, kr__sys_sendrecv, N_SOCK_IO),
	E(sendmsg, kr__sys_msg, N_SOCK_IO),
	E(recvmsg, kr__sys_msg, N_SOCK_IO),
	E(sendmmsg, kr__sys_sendmmsg, N_SOCK_IO),
	E(bind, kr__sys_on_sock, N_SOCK_FD),
	E(listen, kr__sys_on_sock, N_SOCK_FD),
	E(getsockname, kr__sys_on_sock, N_SOCK_FD),
	E(getpeername, kr__sys_on_sock, N_SOCK_FD),
	E(setsockopt, kr__sys_setsockopt, N_SOCK_FD),
	E(getsockopt, kr__sys_on_sock, N_SOCK_FD),
	E(shutdown, kr__sys_on_sock, N_SOCK_FD),
	E(faccessat, kr__sys_at, N_AT),
	E(faccessat2, kr__sys_at, N_AT),
	E(mkdirat, kr__sys_at, N_AT),
	E(mknodat, kr__sys_at, N_AT),
	E(fchownat, kr__sys_at, N_AT),
	E(futimesat, kr__sys_at, N_AT),
	E(unlinkat, kr__sys_at, N_AT),
	E(readlinkat, kr__sys_at, N_AT),
	E(fchmodat, kr__sys_at, N_AT),
	E(utimensat, kr__sys_at, N_AT),
	E(renameat, kr__sys_at2, N_AT),
	E(renameat2, kr__sys_at2, N_AT),
	E(linkat, kr__sys_at2, N_AT),
	E(symlinkat, kr__sys_symlinkat, N_AT),
	E(name_to_handle_at, kr__sys_at, N_AT),
	E(stat, kr__sys_stat, N_PATH),
	E(lstat, kr__sys_stat, N_PATH),
	E(access, kr__sys_access, N_PATH),
	E(readlink, kr__sys_readlink, N_PATH),
	E(unlink, kr__sys_unlink, N_PATH),
	E(rmdir, kr__sys_unlink, N_PATH),
	E(mkdir, kr__sys_mkdir, N_PATH),
	E(rename, kr__sys_rename, N_PATH),
	E(link, kr__sys_link, N_PATH),
	E(symlink, kr__sys_symlink, N_PATH),
	E(chmod, kr__sys_chmod, N_PATH),
	E(chown, kr__sys_chown, N_PATH),
	E(lchown, kr__sys_chown, N_PATH),
	E(truncate, kr__sys_by_path, N_PATH),
	E(statfs, kr__sys_by_path, N_PATH),
	E(getxattr, kr__sys_xattr, N_XATTR),
	E(lgetxattr, kr__sys_xattr, N_XATTR),
	E(listxattr, kr__sys_xattr, N_XATTR),
	E(llistxattr, kr__sys_xattr, N_XATTR),
	E(setxattr, kr__sys_xattr, N_XATTR),
	E(lsetxattr, kr__sys_xattr, N_XATTR),
	E(removexattr, kr__sys_xattr, N_XATTR),
	E(lremovexattr, kr__sys_xattr, N_XATTR),
	E(chdir, kr__sys_chdir, N_CWD),
	E(fchdir, kr__sys_fchdir, N_CWD),
	E(getcwd, kr__sys_getcwd, N_CWD),
	E(umask, kr__sys_umask, N_UMASK),
	E(mmap, kr__sys_mmap, N_MMAP),
	E(munmap, kr__sys_munmap, N_MMAP),
	E(mremap, kr__sys_mremap, N_MMAP),
	E(mprotect, kr__sys_on_own, N_OWN),
	E(madvise, kr__sys_on_own, N_OWN),
	E(msync, kr__sys_on_own, N_OWN),
	E(mincore, kr__sys_on_own, N_OWN),
	E(mlock, kr__sys_on_own, N_OWN),
	E(munlock, kr__sys_on_own, N_OWN),
	E(brk, kr__sys_brk, N_BRK),
	E(getpid, kr__sys_getpid, N_PID),
	E(gettid, kr__sys_gettid, N_TID),
	E(set_tid_address, kr__sys_set_tid_address, N_TID),
	E(getppid, kr__sys_getppid, N_PPID),
	E(arch_prctl, kr__sys_arch_prctl, N_ARCH),
	E(prctl, kr__sys_prctl, N_PRCTL),
	E(set_robust_list, kr__sys_set_robust_list, N_ROBUST),
	E(rseq, kr__sys_enosys, N_RSEQ),
	E(futex, kr__sys_futex, N_FUTEX),
	E(rt_sigaction, kr__sys_sigaction, N_SIGS),
	E(rt_sigprocmask, kr__sys_sigprocmask, N_SIGS),
	E(rt_sigpending, kr__sys_sigpending, N_SIGS),
	E(sigaltstack, kr__sys_sigaltstack, N_SIGS),
	E(rt_sigreturn, kr__sys_sigreturn, N_SIGRET),
	E(alarm, kr__sys_alarm, N_ITIMER),
	E(setitimer, kr__sys_setitimer, N_ITIMER),
	E(getitimer, kr__sys_getitimer, N_ITIMER),
	E(timer_create, kr__sys_timer_create, N_TIMER),
	E(timer_settime, kr__sys_timer_settime, N_TIMER),
	E(timer_gettime, kr__sys_timer_gettime, N_TIMER),
	E(timer_getoverrun, kr__sys_timer_getoverrun, N_TIMER),
	E(timer_delete, kr__sys_timer_delete, N_TIMER),
	E(kill, kr__sys_kill, N_KILL),
	E(tkill, kr__sys_tkill, N_KILL),
	E(tgkill, kr__sys_tgkill, N_KILL),
	E(rt_sigqueueinfo, kr__sys_sigqueueinfo, N_SIGQUEUE),
	E(rt_tgsigqueueinfo, kr__sys_sigqueueinfo, N_SIGQUEUE),
	E(pause, kr__sys_pause, N_PAUSE),
	E(rt_sigsuspend, kr__sys_sigsuspend, N_PAUSE),
	E(rt_sigtimedwait, kr__sys_sigtimedwait, N_SIGWAIT),
	E(signalfd, kr__sys_signalfd, N_SIGNALFD),
	E(signalfd4, kr__sys_signalfd, N_SIGNALFD),
	E(exit, kr__sys_exit, N_EXIT),
	E(exit_group, kr__sys_exit, N_EXITG),
	E(nanosleep, kr__sys_nanosleep, N_SLEEP),
	E(clock_nanosleep, kr__sys_clock_nanosleep, N_SLEEP),
	E(sched_yield, kr__sys_sched_yield, N_YIELD),
	E(clock_gettime, kr__sys_pass, N_PASS),
	E(clock_getres, kr__sys_pass, N_PASS),
	E(gettimeofday, kr__sys_pass, N_PASS),
	E(time, kr__sys_pass, N_PASS),
	E(times, kr__sys_pass, N_PASS),
	E(uname, kr__sys_pass, N_PASS),
	E(sysinfo, kr__sys_pass, N_PASS),
	E(getrandom, kr__sys_pass, N_PASS),
	E(getuid, kr__sys_pass, N_PASS),
	E(geteuid, kr__sys_pass, N_PASS),
	E(getgid, kr__sys_pass, N_PASS),
	E(getegid, kr__sys_pass, N_PASS),
	E(getgroups, kr__sys_pass, N_PASS),
	E(getresuid, kr__sys_pass, N_PASS),
	E(getresgid, kr__sys_pass, N_PASS),
	E(getpgrp, kr__sys_pass, N_PASS),
	E(getpgid, kr__sys_pass, N_PASS),
	E(getsid, kr__sys_pass, N_PASS),
	E(getrlimit, kr__sys_pass, N_PASS),
	E(getrusage, kr__sys_pass, N_PASS),
	E(getpriority, kr__sys_pass, N_PASS),
	E(sched_getaffinity, kr__sys_sched_of, N_SCHED_OF),
	E(sched_getparam, kr__sys_sched_of, N_SCHED_OF),
	E(sched_getscheduler, kr__sys_sched_of, N_SCHED_OF),
	E(getcpu, kr__sys_pass, N_PASS),
	E(membarrier, kr__sys_pass, N_PASS),
	E(prlimit64, kr__sys_prlimit64, N_PRLIMIT),
	E(setuid, kr__sys_setid, N_SETID),
	E(setgid, kr__sys_setid, N_SETID),
	E(setreuid, kr__sys_setid, N_SETID),
	E(setregid, kr__sys_setid, N_SETID),
	E(setresuid, kr__sys_setid, N_SETID),
	E(setresgid, kr__sys_setid, N_SETID),
	E(setfsuid, kr__sys_eperm, N_EPERM),
	E(setfsgid, kr__sys_eperm, N_EPERM),
	E(setgroups, kr__sys_eperm, N_EPERM),
	E(capset, kr__sys_eperm, N_EPERM),
	E(setsid, kr__sys_eperm, N_EPERM),
	E(setpgid, kr__sys_eperm, N_EPERM),
	E(chroot, kr__sys_eperm, N_EPERM),
	E(fork, kr__sys_fork, N_FORK),
	E(vfork, kr__sys_fork, N_FORK),
	E(clone, kr__sys_fork, N_FORK),
	E(clone3, kr__sys_enosys, N_CLONE3),
	E(execve, kr__sys_execve, N_EXEC),
	E(execveat, kr__sys_execve, N_EXEC),
	E(wait4, kr__sys_wait4, N_WAIT),
	E(waitid, kr__sys_waitid, N_WAIT),
#undef E
};

static const struct sysent *bynr[NR_MAX];

void kr__sys_init(void)
{
	for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
		bynr[tab[i].nr] = &tab[i];
}

int kr__sys_table_md(FILE *out)
{
	fputs("| calls | what karui does |\n|---|---|\n", out);
	size_t n = sizeof tab / sizeof *tab;
	for (size_t i = 0; i < n; i++) {
		int first = i == 0 || strcmp(tab[i].note, tab[i - 1].note);
		int last = i + 1 == n || strcmp(tab[i].note, tab[i + 1].note);
		fprintf(out, "%s`%s`", first ? "| " : " ", tab[i].name);
		if (last)
			fprintf(out, " | %s |\n", tab[i].note);
	}
	fputs("| any other | `ENOSYS` |\n", out);
	return ferror(out) ? EIO : 0;
}

/* Whether the kernel restarts call nr, cut short by a signal, after a
 * handler with SA_RESTART (-ERESTARTSYS), or returns EINTR after any
 * handler (-ERESTARTNOHAND, _RESTARTBLOCK: poll, select, epoll_wait,
 * sleeps, pause, sigsuspend, a futex wait with a timeout), or restarts it
 * after any handler (-ERESTARTNOINTR: the PI futex locks); rt_sigtimedwait's
 * EINTR is its answer. */
static int restarts(long nr, const long a[6])
{
	switch (nr) {
	case SYS_read:
	case SYS_write:
	case SYS_readv:
	case SYS_writev:
	case SYS_pread64:
	case SYS_pwrite64:
	case SYS_preadv:
	case SYS_pwritev:
	case SYS_preadv2:
	case SYS_pwritev2:
	case SYS_ioctl:
	case SYS_open:
	case SYS_openat:
	case SYS_creat:
	case SYS_fcntl:
	case SYS_flock:
	case SYS_wait4:
	case SYS_waitid:
	case SYS_accept:
	case SYS_accept4:
	case SYS_connect:
	case SYS_recvfrom:
	case SYS_sendto:
	case SYS_recvmsg:
	case SYS_sendmsg:
	case SYS_sendmmsg:
		return KR__RESTART_SA;
	case SYS_futex:
		switch (a[1] & FUTEX_CMD_MASK) {
		case FUTEX_LOCK_PI:
		case FUTEX_LOCK_PI2:
		case FUTEX_WAIT_REQUEUE_PI:
			return KR__RESTART_ALWAYS;
		default:
			return a[3] ? KR__RESTART_EINTR : KR__RESTART_SA;
		}
	case SYS_rt_sigtimedwait:
		return KR__RESTART_NO;
	default:
		return KR__RESTART_EINTR;
	}
}

/* Every call of a μprocess that karui serves comes here: a signal that
 * ends it, pending before the call (kr_uproc_kill, or one it unblocked),
 * ends it before the call; what comes during it is delivered on the way
 * back (signal.c), where a call that a signal cut short (-EINTR: its
 * wait ended by kr_uproc_kill's cancel or killfd) restarts or fails, as
 * the kernel decides. */
long kr__sys(struct kr__uthr *t, long nr, long a[6])
{
	if (__atomic_load_n(&t->attn, __ATOMIC_SEQ_CST))
		kr__sig_fatal(t);
	t->sys_nr = nr;
	long r = KR__NOT_CALL;
	if (__builtin_expect((unsigned long)nr >= NR_MAX || t->xcall, 0))
		r = kr__call_sys(t, nr, a); /* karui's own (call.c) */
	if (r == KR__NOT_CALL) {
		const struct sysent *e = nr >= 0 && nr < NR_MAX ? bynr[nr] : NULL;
		r = e ? e->h(t->up, nr, a) : -ENOSYS;
	}
	kr__fd_drop(t);
	if (r == -ECANCELED) /* a karui wait's word for it (kr_mp_cancel) */
		r = -EINTR;
	if (r == -EINTR && (t->restart = restarts(nr, a))) {
		int k = __atomic_load_n(&t->killfd, __ATOMIC_ACQUIRE);
		uint64_t v;
		if (k >= 0) /* what woke a wait in the kernel is spent */
			(void)!read(k, &v, sizeof v);
		__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
	}
	return r;
}
