/*
 * karui-sh's state and its modules' calls: variables (vars.c), word
 * expansion (expand.c), built-ins (builtin.c), the executor (exec.c) and
 * the input (input.c).  The language is lang.h's, the ways a stage runs
 * (μprocess, child process) are run.h's.
 *
 * One struct shell holds everything a command line can change: the
 * variables and which are exported, the functions, the working
 * directory, the fds, $?, the positional parameters, the options and
 * traps.  A subshell is a copy of it (ksh_sub_new): `( )`, a command
 * substitution, a stage of a pipeline that is no program, a background
 * job; what the copy changes is gone with it.  Each struct shell is used
 * by one microprocess at a time.
 */
#ifndef KSH_SHELL_H
#define KSH_SHELL_H

#include <stdbool.h>
#include <stddef.h>

#include "lang.h"

/* The fds 0..KSH_FDS-1 a stage can be given: those a μprocess can have
 * set by its spawn attributes (karui/image.h), for children as well. */
#define KSH_FDS 16

/* How external commands run (KARUI_SH_STAGES). */
enum ksh_stages {
	KSH_STAGES_AUTO,  /* a μprocess where karui can, else a child process */
	KSH_STAGES_UPROC, /* a μprocess, or the command fails (status 126) */
	KSH_STAGES_CHILD, /* a child process */
};

struct ksh_var {
	char *name;
	char *value;  /* NULL: declared (export NAME) but unset */
	bool exported;
};

/* A NULL-terminated vector of malloc'd strings. */
struct ksh_strv {
	char **v;
	size_t n, cap;
};

/* A function: its body lives in the arena of the command that defined
 * it, which it holds a reference to. */
struct ksh_func {
	char *name;
	const struct ksh_cmd *body;
	struct ksh_arena *arena;
};

struct ksh_job; /* a background job (exec.c) */

/* The signals `trap` knows: 0 is EXIT. */
#define KSH_NSIG 65

/* How deep function calls, eval and . may nest: each takes stack, and the
 * shell says so instead of running out of it. */
#define KSH_MAX_CALLS 1000

struct shell {
	const char *source;    /* "-c", a script's path, "" for standard input, NULL: a terminal */
	int line;              /* line of the command running (for messages) */
	bool verbose;          /* -v: say how each stage runs */
	enum ksh_stages stages;
	bool uproc_off;        /* the image layer said ENOTSUP: children from now on */
	int status;            /* $? */
	bool exiting;          /* `exit`, or an error that ends a non-interactive shell */
	bool abandon;          /* skip the rest of the command line */
	char *cwd;             /* the shell's working directory, absolute */
	char *self;            /* this program, to run scripts that have no #! line */
	int fd[KSH_FDS];       /* the host fd that is the shell's fd n, or -1: closed */
	bool own_fds;          /* a subshell: fd[] are its own duplicates, closed at its end */
	bool subshell;         /* a copy of the shell, running ( ), $( ), a stage or a job */
	bool background;       /* running a background job: Ctrl-C is not for it */
	struct ksh_var *vars;  /* sorted by name */
	size_t nvars, capvars;
	char *arg0;            /* $0 */
	char **args;           /* $1 ... (malloc'd, as each of them) */
	int nargs;
	struct ksh_func *funcs;
	size_t nfuncs, capfuncs;
	struct ksh_arena *arena; /* the tree running now: a function or a job keeps it */
	int loops;             /* loops the running code is in (within its function) */
	int breaks;            /* loops that `break N` / `continue N` still leaves */
	bool continuing;       /* ... and then the innermost of them goes on */
	bool returning;        /* `return`: leave the function or . script */
	int calls;             /* function calls, eval and . in progress */
	int functions;         /* function calls in progress */
	int dots;              /* . scripts in progress */
	bool opt_e, opt_u, opt_x; /* set -e, -u, -x */
	int tested;            /* > 0: in a condition, where set -e does not apply */
	int subst_status;      /* the status of the last command substitution, or -1 */
	int xerr;              /* the status an expansion error gives (1 or 2) */
	char *trap[KSH_NSIG];  /* the action of each trapped signal ("": ignored) */
	struct ksh_job *jobs;  /* background jobs not yet waited for */
	long last_job;         /* $!: 0 before any */
	long job;              /* the background job this shell runs in, or 0 */
	int *job_killed;       /* that job's: `kill` ended it */
};

/* ---- messages ---- */

/* "karui-sh: MSG\n" (a script's: "FILE: line N: MSG\n") on fd, written
 * whole; errors writing it are ignored, as bash does. */
void ksh_say(const struct shell *sh, int fd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* write(2) all of buf, in a blocking section when on a microprocess: the
 * other side of fd may be slow (a pipe), and fd may be shared with other
 * processes, so karui's I/O calls (which make an fd non-blocking with the
 * epoll back end) are not for it. */
void ksh_write_all(int fd, const char *buf, size_t len);
/* The shell's own fd 2, where its messages go. */
#define KSH_ERR(sh) ((sh)->fd[2])

/* ---- variables (vars.c) ---- */

void ksh_vars_import(struct shell *sh, char **environ);
void ksh_vars_free(struct shell *sh);
const char *ksh_var_get(const struct shell *sh, const char *name);
/* value NULL: declare only; export: mark exported too */
void ksh_var_set(struct shell *sh, const char *name, const char *value, bool export);
/* A variable as it was, to put back after a temporary assignment. */
struct ksh_var_saved {
	char *name, *value;
	bool existed, exported;
};
void ksh_var_save(const struct shell *sh, const char *name, struct ksh_var_saved *sv);
void ksh_var_restore(struct shell *sh, struct ksh_var_saved *sv); /* and frees sv's strings */
/* export -p: every exported variable, sorted, as bash prints it */
void ksh_vars_print_exported(const struct shell *sh, int fd);
/* The environment of a command: the exported variables with a value,
 * with the command's own NAME=value assignments on top.  Free with
 * ksh_strv_free. */
void ksh_environ(const struct shell *sh, const struct ksh_strv *assign, struct ksh_strv *out);

void ksh_var_unset(struct shell *sh, const char *name);
void ksh_strv_push(struct ksh_strv *v, char *s); /* takes s */
void ksh_strv_free(struct ksh_strv *v);

/* ---- expansion (expand.c) ---- */

/* Expand one word as written: tilde, parameters, then (fields) field
 * splitting and pathname expansion, and quote removal; the fields are
 * appended to out.  Without `fields` the result is exactly one field (an
 * assignment's value, a redirection's target before its own check).
 * -1 after telling why ("bad substitution"). */
enum ksh_xmode {
	KSH_X_FIELDS,  /* an ordinary word: fields, pathname expansion */
	KSH_X_ASSIGN,  /* an assignment's value: one field, tilde after each `:` */
	KSH_X_WORD,    /* one field (case's word, for's... a here-string) */
	KSH_X_PATTERN, /* one pattern for fnmatch: quoted characters escaped */
};
int ksh_expand(struct shell *sh, const char *word, enum ksh_xmode mode, struct ksh_strv *out);
/* An unquoted here-document's text: parameters, command substitutions
 * and arithmetic expanded, backslash quoting only $ ` \ and newline.
 * NULL after an error, told. */
char *ksh_expand_heredoc(struct shell *sh, const char *text);
/* An expansion error: say it on the shell's fd 2 and record the status
 * it gives (sh->xerr). */
void ksh_xerror(struct shell *sh, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- arithmetic (arith.c) ---- */

/* Evaluate expr (expanded already); -1 after telling why. */
int ksh_arith(struct shell *sh, const char *expr, long *out);

/* ---- built-ins (builtin.c) ---- */

/* A built-in writes to the shell's fds 1 and 2 (sh->fd) and returns its
 * status. */
typedef int ksh_builtin_fn(struct shell *sh, char **argv);
/* *special: one of POSIX's special built-ins (its assignments stay, its
 * errors end a non-interactive shell). */
ksh_builtin_fn *ksh_builtin(const char *name, bool *special);
/* A special built-in's error: a non-interactive shell ends (status 2). */
int ksh_special_error(struct shell *sh);

/* ---- the executor (exec.c) ---- */

/* Run one parsed command line; $? and the exit request land in sh. */
void ksh_run(struct shell *sh, const struct ksh_list *l);
/* Run text (eval, ., a trap's action, a command substitution) command by
 * command.  what: where its syntax errors say they are, as bash says it:
 * "eval" (karui-sh: eval: line N:), a . script's path (PATH: line N:), or
 * NULL (the shell's own input). */
int ksh_run_string(struct shell *sh, const char *text, size_t len, int first_line,
		   const char *what);
/* Whether sh should stop running commands: exit, an error, break,
 * continue, return, Ctrl-C. */
bool ksh_stopped(const struct shell *sh);
/* A subshell: a copy of sh whose fd n is a duplicate of fds[n] (fds NULL:
 * of sh's own). */
struct shell *ksh_sub_new(const struct shell *sh, const int *fds);
/* Its end: its EXIT trap runs, its jobs are waited for, its fds closed. */
void ksh_sub_finish(struct shell *sub);
void ksh_sub_free(struct shell *sub);
/* Free what a shell holds (the main shell at its end). */
void ksh_shell_free(struct shell *sh);
/* The shell's end: the EXIT trap, then its background jobs. */
void ksh_shell_exit(struct shell *sh);
/* Run the command list text in a subshell whose stdout is captured:
 * *out (malloc'd, *n bytes), and its status. -1: could not. */
int ksh_capture(struct shell *sh, const char *text, size_t len, char **out, size_t *n,
		int *status);
/* A path as the shell sees it: absolute, from sh->cwd. malloc'd. */
char *ksh_path(const struct shell *sh, const char *path);
/* The pending traps of caught signals: run their actions. */
void ksh_run_traps(struct shell *sh);
/* sig came (Ctrl-C on a terminal): its trap runs after the command. */
void ksh_trap_pending(int sig);
/* Set or clear the catching of sig for its trap (main shell only). */
void ksh_trap_signal(struct shell *sh, int sig);
/* Define name as a function with body, held from sh->arena. */
void ksh_func_define(struct shell *sh, const char *name, const struct ksh_cmd *body);
void ksh_func_unset(struct shell *sh, const char *name);
/* Before the first ksh_run: 0, or kr_mutex_init's error. */
int ksh_fg_init(void);
/* Send sig to the μprocesses of the pipelines running in the foreground
 * now (kr_uproc_kill; its child processes had it from the terminal), and
 * end the command line. */
void ksh_interrupt(int sig);
/* A new command line: the last one's Ctrl-C is done with. */
void ksh_interrupt_reset(void);
/* Run an and-or list in the foreground. */
void ksh_run_andor(struct shell *sh, const struct ksh_andor *ao);
/* Start an and-or list as a background job (`&`): $! names it. */
void ksh_job_start(struct shell *sh, const struct ksh_andor *ao);
/* Wait for the job id (0: all of them); its status; -1: no such job. */
int ksh_job_wait(struct shell *sh, long id);
/* Send sig to what the job id of sh is running, and end it; -1: no such
 * job. */
int ksh_job_kill(struct shell *sh, long id, int sig);
/* Send sig to the μprocesses and child processes of the job's pipelines. */
void ksh_stages_kill(long job, int sig);

/* ---- input (input.c) ---- */

struct ksh_input;
struct ksh_input *ksh_input_string(const char *s);
struct ksh_input *ksh_input_mem(const char *s, size_t len);
/* A script, or standard input when it is no terminal.  unbuffered: read
 * a byte at a time, so that a command run from the script reads what
 * follows its line (fd shared with the commands: standard input). */
struct ksh_input *ksh_input_fd(int fd, bool unbuffered);
/* A terminal: a prompt ($PS1, $PS2 for continuation lines) and line
 * editing with history where karui-sh was built with libedit. */
struct ksh_input *ksh_input_terminal(struct shell *sh);
/* The next line, its newline included when it had one; NULL at the end.
 * NUL bytes are dropped, as bash drops them. */
const char *ksh_input_line(struct ksh_input *in, bool continuation, size_t *len);
void ksh_input_free(struct ksh_input *in);
/* bash's test of a file that no shell should read as a script: its first
 * 80 bytes start an ELF header or hold a NUL byte in their first line
 * (anywhere, after a #! line). */
bool ksh_binary_file(int fd);

/* Read, parse and run commands from in until its end or `exit`; the
 * status the shell ends with.  top: the shell's own input (each command
 * line starts afresh); else eval, ., a command substitution, a trap. */
int ksh_main_loop(struct shell *sh, struct ksh_input *in, bool top);

#endif
