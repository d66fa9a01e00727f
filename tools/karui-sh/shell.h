/*
 * karui-sh's state and its modules' calls: variables (vars.c), word
 * expansion (expand.c), built-ins (builtin.c), the executor (exec.c) and
 * the input (input.c).  The language is lang.h's, the ways a stage runs
 * (μprocess, child process) are run.h's.
 *
 * One struct shell holds everything a command line can change: the
 * variables and which are exported, the working directory, $?, the
 * positional parameters.  Only the main microprocess changes it; the
 * microprocesses a pipeline starts for its built-ins read it while the
 * pipeline runs, and change nothing (a built-in in a pipeline runs as in
 * a subshell, as in bash).
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
	bool inherited[KSH_FDS]; /* fds above 2 the shell was given (open, inheritable) */
	struct ksh_var *vars;  /* sorted by name */
	size_t nvars, capvars;
	char *arg0;            /* $0 */
	char **args;           /* $1 ... */
	int nargs;
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

void ksh_strv_push(struct ksh_strv *v, char *s); /* takes s */
void ksh_strv_free(struct ksh_strv *v);

/* ---- expansion (expand.c) ---- */

/* Expand one word as written: tilde, parameters, then (fields) field
 * splitting and pathname expansion, and quote removal; the fields are
 * appended to out.  Without `fields` the result is exactly one field (an
 * assignment's value, a redirection's target before its own check).
 * -1 after telling why ("bad substitution"). */
int ksh_expand(struct shell *sh, const char *word, bool fields, struct ksh_strv *out);

/* ---- built-ins (builtin.c) ---- */

/* A built-in writes to out and err (-1: closed) and returns its status.
 * sub: it runs in a pipeline, as in a subshell: it changes nothing of sh. */
typedef int ksh_builtin_fn(struct shell *sh, char **argv, int out, int err, bool sub);
ksh_builtin_fn *ksh_builtin(const char *name);

/* ---- the executor (exec.c) ---- */

/* Run one parsed command line; $? and the exit request land in sh. */
void ksh_run(struct shell *sh, const struct ksh_list *l);
/* Before the first ksh_run: 0, or kr_mutex_init's error. */
int ksh_fg_init(void);
/* Send sig to the μprocesses of the pipeline running now (kr_uproc_kill;
 * its child processes had it from the terminal). */
void ksh_interrupt(int sig);

/* ---- input (input.c) ---- */

struct ksh_input;
struct ksh_input *ksh_input_string(const char *s);
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
 * status the shell ends with. */
int ksh_main_loop(struct shell *sh, struct ksh_input *in);

#endif
