/*
 * The ways karui-sh runs a program, behind one interface, and the pipes
 * between a pipeline's stages.
 *
 * A runner starts a program with a given fd table, environment and
 * working directory, and waits for it, giving the status a shell shows
 * ($?: the exit code, or 128 + the signal that ended it):
 *
 *   ksh_runner_uproc  a μprocess of karui's image layer (karui/image.h):
 *                     a private image of the program in this process, on
 *                     a microprocess of its own (uproc.c).  It refuses
 *                     with ENOEXEC what it cannot load (a #! script,
 *                     another architecture), with EPERM a setuid or setgid
 *                     program, with ENOTSUP everything where the layer
 *                     cannot run (no Syscall User Dispatch or FSGSBASE,
 *                     not x86-64, qemu-user).
 *   ksh_runner_child  a child process (posix_spawn), which can run
 *                     anything execve can (run_child.c).
 *
 * The executor (exec.c) tries the first and falls back on the second;
 * both are called from microprocesses and block only the caller.
 *
 * A link is the pipe between stage i and stage i+1.  It is a karui pipe
 * (kr_upipe: one copy, no kernel) when both stages are μprocesses, and
 * a kernel pipe when either is not.  Stages start in order, so a link is
 * made before its reader's way is known: it is a karui pipe if its
 * writer is to be tried as a μprocess, turned into a kernel pipe if the
 * writer runs otherwise (nobody holds it yet then), and given a pump if
 * its reader turns out to be a child process: a microprocess of the
 * shell that copies the karui pipe into a kernel pipe, passing on end of
 * file one way and a broken pipe the other.  The shell holds each end of
 * a link until the stage that takes it has started, then closes it, so
 * that end of file and EPIPE come as with pipe(2).
 */
#ifndef KSH_RUN_H
#define KSH_RUN_H

#include <stdbool.h>
#include <sys/types.h>

#include "karui.h"
#include "karui/image.h"

#include "shell.h"

enum ksh_fdkind { KSH_FD_HOST, KSH_FD_UPIPE, KSH_FD_CLOSED };

/* What fd n of the program is: a duplicate of the shell's fd `host`, an
 * end of a karui pipe, or nothing. */
struct ksh_fdspec {
	enum ksh_fdkind kind;
	int host;
	kr_upipe *pipe;
	enum kr_upipe_end end;
};

struct ksh_spawn {
	const char *path;          /* no PATH search */
	char *const *argv;
	char *const *envp;
	const char *cwd;           /* absolute: the shell's (a subshell's own) */
	struct ksh_fdspec fd[KSH_FDS];
};

/* A started program, until waited for. */
struct ksh_proc {
	kr_uproc *up;  /* μprocess */
	pid_t pid;     /* child process */
	int pidfd;     /* -1: none (waited for with waitpid in a blocking section) */
};

struct ksh_runner {
	const char *way; /* how -v names it */
	/* 0, or why not: as execve (ENOENT, EACCES, ENOEXEC, ...), ENOTSUP,
	 * EPERM, ENOMEM; nothing was started then. */
	int (*spawn)(const struct ksh_spawn *s, struct ksh_proc *p);
	/* 0 and the $? value; each started program is waited for once. */
	int (*wait)(struct ksh_proc *p, int *status);
};

extern const struct ksh_runner ksh_runner_uproc;
extern const struct ksh_runner ksh_runner_child;

struct ksh_link {
	kr_upipe *up;     /* the karui pipe, or NULL */
	bool up_r, up_w;  /* the shell holds that end of up */
	int rfd, wfd;     /* the kernel pipe's ends the shell holds, or -1 */
	kr_mp *pump;      /* copying up into the kernel pipe, or NULL */
};

/* A new link: a karui pipe if `karui` and one can be made, else a kernel
 * pipe.  0, or pipe2's error. */
int ksh_link_open(struct ksh_link *l, bool karui);
/* Before either end is given out: make l a kernel pipe. */
int ksh_link_make_kernel(struct ksh_link *l);
/* Its reader will be a child process: make sure l has a kernel read end,
 * starting a pump from the karui pipe when it has one. */
int ksh_link_for_child_reader(struct ksh_link *l);
/* What a stage that takes this end of l gets as its fd. */
struct ksh_fdspec ksh_link_end(const struct ksh_link *l, enum kr_upipe_end end);
/* The shell lets go of its end (the stage that takes it has started,
 * or will not start). */
void ksh_link_release(struct ksh_link *l, enum kr_upipe_end end);
/* Wait for l's pump, if it has one, once the stages have ended. */
void ksh_link_join(struct ksh_link *l);

#endif
