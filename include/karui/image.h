/* karui image layer — μprocesses (seed 003): unmodified programs loaded as
 * private images into the calling process, each running its main() on a
 * microprocess of its own, with its own fds, cwd, umask, environment and
 * pid, ending alone when it exits or crashes.  Pipes between μprocesses
 * are karui byte streams.  x86-64 Linux with Syscall User Dispatch
 * (Linux >= 5.11) and FSGSBASE; elsewhere every spawn returns ENOTSUP.
 * docs/uproc.md describes how a program is loaded, what is private and
 * what is shared, and every system call karui intercepts.
 *
 * Errors follow the rule of include/karui.h.  Every call needs a running
 * karui and, but kr_upipe_create / _close, kr_uproc_keep and the
 * accessors, a microprocess (EPERM otherwise). */
#ifndef KARUI_IMAGE_H
#define KARUI_IMAGE_H

#include <stddef.h>
#include <sys/types.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_uproc kr_uproc;
typedef struct kr_upipe kr_upipe;

/* A pipe whose ends μprocesses can hold as fds: one copy from writer to
 * reader, no kernel.  Like pipe(2), the creator holds one read and one
 * write end; it closes its own ends with kr_upipe_close once it has given
 * them to μprocesses.  Readers see end of file when every write end is
 * closed; writers get EPIPE (and a μprocess SIGPIPE) when every read end
 * is.  The pipe is freed with its last end.  ENOMEM. */
enum kr_upipe_end { KR_UPIPE_READ = 0, KR_UPIPE_WRITE = 1 };
int kr_upipe_create(kr_upipe **out);
/* Close the creator's end; EINVAL: NULL, bad end, or closed already. */
int kr_upipe_close(kr_upipe *p, enum kr_upipe_end end);
/* The creator's ends, from a microprocess: as kr_stream_read / _write
 * (*got 0: end of file).  EINVAL: that end is closed. */
int kr_upipe_read(kr_upipe *p, void *buf, size_t len, size_t *got);
int kr_upipe_write(kr_upipe *p, const void *buf, size_t len, size_t *done);

/* What a new μprocess gets.  kr_uproc_attr_init gives the defaults, as
 * does a NULL attr: the host's cwd, umask and environ, and fds 0, 1 and 2
 * duplicated from the host's 0, 1 and 2; no other host fd is inherited;
 * not isolated.
 * The kr_uproc_attr_fd_* calls change one fd (0 <= fd < KR_UPROC_ATTR_FDS):
 * EINVAL for a NULL attr, a bad fd or a bad end.  An attr holds no
 * references: the host fds and pipe ends it names are taken at spawn. */
#define KR_UPROC_ATTR_FDS 16
enum kr_ufd_kind { KR_UFD_DEFAULT = 0, KR_UFD_HOST, KR_UFD_PIPE, KR_UFD_CLOSED };
struct kr_uproc_fdspec {
	enum kr_ufd_kind kind;
	int hostfd;             /* KR_UFD_HOST */
	kr_upipe *pipe;         /* KR_UFD_PIPE */
	enum kr_upipe_end end;  /* KR_UFD_PIPE */
};
typedef struct kr_uproc_attr {
	const char *cwd;    /* NULL: the host's */
	char *const *envp;  /* NULL: the host's environ */
	int umask;          /* -1: the host's; else 0..0777 */
	struct kr_uproc_fdspec fd[KR_UPROC_ATTR_FDS];
	/* 1: in a domain of its own (docs/domains.md, "μprocesses in
	 * domains"): while no VP runs it, its writable memory is closed, so
	 * that another μprocess's stray write into it faults and ends that
	 * μprocess alone; its children of vfork and posix_spawn are too. */
	int isolate;
} kr_uproc_attr;

int kr_uproc_attr_init(kr_uproc_attr *a); /* EINVAL: NULL */
/* fd of the μprocess is a duplicate of the host's hostfd (taken at spawn). */
int kr_uproc_attr_fd_host(kr_uproc_attr *a, int fd, int hostfd);
/* fd of the μprocess is an end of p (a reference of its own). */
int kr_uproc_attr_fd_pipe(kr_uproc_attr *a, int fd, kr_upipe *p, enum kr_upipe_end end);
/* fd is closed in the μprocess. */
int kr_uproc_attr_fd_close(kr_uproc_attr *a, int fd);

/* Start the program at `path` (no PATH search) as a μprocess with argv
 * (argv[0] is what the program sees as its name).  ENOENT, EACCES,
 * ENOTDIR: as execve; ENOEXEC: no program karui can load as a μprocess (a
 * script, another architecture): run it as a child process instead;
 * EADDRINUSE: a program that is not position-independent (ET_EXEC), whose
 * link address something holds already (the host, another μprocess of
 * such a program): the same; ENOEXEC too for a malformed file, or one cut
 * short, and for one whose interpreter is so (the kernel may refuse it
 * as well); EIO: the file could not be read; EPERM: setuid, setgid or file
 * capabilities, which a μprocess cannot honour; ENOTSUP: no Syscall User
 * Dispatch or FSGSBASE here; E2BIG: argv and the environment take more
 * than 2 MiB; ENOMEM. */
int kr_uproc_spawn(kr_uproc **out, const char *path, char *const argv[],
		   const kr_uproc_attr *attr);

/* Wait for the μprocess to end and free it.  *status (may be NULL) is what
 * a shell shows as $?: the exit code, or 128 + the signal that ended it;
 * after an execve in the μprocess, the new program's.  Its children (of
 * vfork and posix_spawn) are its own to wait for: those that outlive it
 * run on and free themselves.
 * EINVAL: NULL; as kr_mp_join otherwise. */
int kr_uproc_wait(kr_uproc *up, int *status);
/* The same, with *wstatus (may be NULL) as waitpid(2) gives it, so that
 * WIFEXITED / WEXITSTATUS and WIFSIGNALED / WTERMSIG tell an exit(130)
 * from an end by SIGINT (no core-dump flag: a μprocess dumps no core). */
int kr_uproc_wait_wstatus(kr_uproc *up, int *wstatus);

/* Send sig to the μprocess, as another process's kill(2) would (SI_USER,
 * the host's pid).  A signal it catches runs its handler; one it ignores,
 * or whose default action is to ignore, stop or continue, does nothing;
 * one it blocks waits until it unblocks it; one whose default action ends
 * it ends it with the status 128 + sig.  It takes effect at the end of
 * the system call it is in (a wait there is cut short: the call fails
 * with EINTR or restarts, as the kernel's would), or at once where it
 * computes without making system calls (its VP is interrupted by a
 * signal of karui's, KR__SIGKICK: SIGSTKFLT).  From any thread, while up is not yet waited for
 * (concurrently with kr_uproc_wait too).  sig 0 checks only.  EINVAL: NULL
 * or sig outside 0..64; ESRCH: up has been waited for (a handle that has
 * been waited for names nothing, or a later μprocess that got its memory). */
int kr_uproc_kill(kr_uproc *up, int sig);

/* The pid the μprocess sees as its own (getpid). */
pid_t kr_uproc_pid(const kr_uproc *up);

/* Calls between μprocesses (seed 003 §4.4.2; docs/uproc.md).  A program
 * exports a table of procedures with kr_uproc_export (karui/uproc_export.h);
 * this calls procedure `proc` of up's table with args[0..nargs) (at most
 * KR_UPROC_CALL_ARGS words: ints, longs, pointers) and puts what it
 * returns in *result.  The procedure runs on the calling microprocess, no
 * switch to another: on a stack of up's, with up's thread pointer (its
 * TLS, errno), its system calls served as up's (its fds, its pid), and
 * returns here.  One call at a time per μprocess: the others wait for it
 * (N μprocesses of one program serve N callers at once).  A call made
 * before up's first export waits for it.  ESRCH: up has ended, before or
 * during the call (its procedure's exit or abort() among the ways);
 * EFAULT: the procedure faulted (SIGSEGV, SIGBUS, SIGFPE, SIGILL), which
 * ended up with 128 + the signal, as a process's fault ends it; EINVAL:
 * NULL up or result, args NULL with nargs, nargs above
 * KR_UPROC_CALL_ARGS, a handle that names no μprocess, or no procedure
 * `proc` in its table; EDEADLK: a call into up from inside a call into
 * up; ENOMEM; ECANCELED: kr_mp_cancel ended the wait for its export;
 * ENOTSUP: no μprocesses here. */
#define KR_UPROC_CALL_ARGS 6
int kr_uproc_call(kr_uproc *up, unsigned proc, const long *args, unsigned nargs, long *result);

/* Kept images (docs/uproc.md).  A μprocess that ends by exit leaves its
 * image — its program and libraries mapped and relocated, as its ld.so
 * handed them to the program — to a later spawn of the same file with the
 * same environment, argv[0] and number of arguments, which starts at the
 * program's entry with the image's writable memory as it was then.  At
 * most `images` are kept (8 by default, or KARUI_UPROC_KEEP), the oldest
 * dropped first; 0 unmaps every kept image and keeps none.  EINVAL: more
 * than KR_UPROC_KEEP_MAX. */
#define KR_UPROC_KEEP_MAX 4096
int kr_uproc_keep(unsigned images);
/* 1: up started from a kept image; 0: it was loaded afresh (or up names
 * no μprocess). */
int kr_uproc_reused(const kr_uproc *up);

/* How an isolated μprocess's memory is closed to the others
 * (docs/domains.md, "μprocesses in domains"): KR_UPROC_ISO_KEYS, a
 * protection key of its own (EPC-H: exact on every VP); KR_UPROC_ISO_PAGES,
 * page protection (EPC-S: exact on one VP), where the CPU has no
 * protection keys, none is left, or KARUI_EPC=s; KR_UPROC_ISO_NONE, not
 * isolated.  An isolated μprocess gets its key, if one is left, as its
 * program starts (and again at each exec): until then it says PAGES.
 * Until kr_uproc_wait has collected it.  EINVAL: NULL. */
enum { KR_UPROC_ISO_NONE = 0, KR_UPROC_ISO_PAGES = 1, KR_UPROC_ISO_KEYS = 2 };
int kr_uproc_isolation(const kr_uproc *up, int *mode);

#ifdef __cplusplus
}
#endif
#endif
