/*
 * karui-sh — a shell whose commands run as μprocesses of karui (seed 003
 * §7.2-7.3): a pipeline's programs are private images inside this one
 * process, each on a microprocess of its own, connected by karui pipes.
 * What cannot run as a μprocess (a #! script, a setuid program, anything
 * where the image layer is missing) runs as an ordinary child process,
 * silently; -v tells which way each stage took.
 *
 *   karui-sh [-v] -c LINE [NAME [ARG...]]   run LINE ($0 = NAME, $1... = ARGs)
 *   karui-sh [-v] FILE [ARG...]             run the script FILE
 *   karui-sh [-v]                           read commands from standard input
 *                                           (with a prompt and line editing
 *                                           on a terminal)
 *
 * KARUI_SH_STAGES=auto|uproc|child chooses the way of external commands:
 * auto (the default) as above; uproc fails a stage that cannot be a
 * μprocess (status 126) instead of falling back, so tests can prove the
 * μprocess path; child runs every stage as a child process.
 *
 * This file: the options, start-up (the shell runs on karui's main
 * microprocess, kr_init first), the loop that reads, parses and runs
 * each command, and the shell's messages.  The language is in lex.c and
 * parse.c, the semantics in expand.c, exec.c and builtin.c, the ways of
 * running a program in run_child.c and uproc.c; docs/karui-sh.md is the
 * user's guide.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "karui.h"
#include "shell.h"

#define NAME "karui-sh"

extern char **environ;

/* ---- messages ---- */

void ksh_write_all(int fd, const char *buf, size_t len)
{
	if (fd < 0)
		return;
	bool section = kr_mp_self() && kr_blocking_begin() == 0;
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf += n;
		len -= (size_t)n;
	}
	if (section)
		kr_blocking_end();
}

/* What starts the shell's messages: bash's forms, for -c, a script,
 * standard input and a terminal. */
static void prefix(const struct shell *sh, int line, char *buf, size_t size)
{
	if (!sh->source || strcmp(sh->source, "-c") == 0)
		snprintf(buf, size, "%s: ", NAME);
	else if (!*sh->source)
		snprintf(buf, size, "%s: line %d: ", NAME, line);
	else
		snprintf(buf, size, "%s: line %d: ", sh->source, line);
}

void ksh_say(const struct shell *sh, int fd, const char *fmt, ...)
{
	char pre[PATH_MAX + 64], *msg, *all;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	prefix(sh, sh->line, pre, sizeof pre);
	n = asprintf(&all, "%s%s\n", pre, msg);
	if (n >= 0) {
		ksh_write_all(fd, all, (size_t)n);
		free(all);
	}
	free(msg);
}

/* bash's two lines: where and what, then the line itself. */
static void syntax_error(const struct shell *sh, const struct ksh_syntax *e, const char *text,
			 size_t len, int first_line, const char *what)
{
	char pre[PATH_MAX + 64];
	if (what && strcmp(what, "eval") == 0)
		snprintf(pre, sizeof pre, "%s: eval: line %d: ", NAME, e->line);
	else if (what)
		snprintf(pre, sizeof pre, "%s: line %d: ", what, e->line);
	else if (sh->source && strcmp(sh->source, "-c") == 0)
		snprintf(pre, sizeof pre, "%s: -c: line %d: ", NAME, e->line);
	else
		prefix(sh, e->line, pre, sizeof pre);
	char *msg;
	int n = asprintf(&msg, "%s%s\n", pre, e->msg);
	if (n >= 0) {
		ksh_write_all(2, msg, (size_t)n);
		free(msg);
	}
	if (!e->show_line || !sh->source)
		return;
	const char *p = text, *end = text + len;
	for (int l = first_line; l < e->line && p < end; l++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
	}
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	n = asprintf(&msg, "%s`%.*s'\n", pre, (int)((nl ? nl : end) - p), p);
	if (n >= 0) {
		ksh_write_all(2, msg, (size_t)n);
		free(msg);
	}
}

/* ---- the loop ---- */

static int loop(struct shell *sh, struct ksh_input *in, bool top, int first_line,
		const char *what)
{
	char *buf = NULL;
	size_t cap = 0;
	int next_line = first_line;
	bool eof = false;
	while (!eof && !(top ? sh->exiting : ksh_stopped(sh))) {
		size_t len = 0;
		int first = next_line;
		struct ksh_arena *a = ksh_arena_new();
		struct ksh_list *l = NULL;
		struct ksh_syntax err = {0};
		enum ksh_status st = KSH_MORE;
		while (st == KSH_MORE) {
			size_t n = 0;
			const char *line = ksh_input_line(in, len > 0, &n);
			if (!line) {
				eof = true;
				if (len == 0)
					break;
			} else {
				if (len + n + 1 > cap) {
					cap = 2 * (len + n + 1);
					buf = ksh_xrealloc(buf, cap);
				}
				memcpy(buf + len, line, n);
				len += n;
				next_line++;
			}
			st = ksh_parse(buf, len, first, eof, a, &l, &err);
		}
		if (top) {
			sh->abandon = false;
			ksh_interrupt_reset();
		}
		if (st == KSH_SYNTAX) {
			syntax_error(sh, &err, buf, len, first, what);
			sh->status = 2;
			sh->exiting = sh->source != NULL;
			sh->abandon = !top;
		} else if (st == KSH_OK) {
			struct ksh_arena *outer = sh->arena;
			sh->arena = a;
			ksh_run(sh, l);
			sh->arena = outer;
		}
		ksh_arena_unref(a);
	}
	free(buf);
	return sh->status;
}

int ksh_main_loop(struct shell *sh, struct ksh_input *in, bool top)
{
	return loop(sh, in, top, 1, NULL);
}

int ksh_run_string(struct shell *sh, const char *text, size_t len, int first_line,
		   const char *what)
{
	if (sh->calls >= KSH_MAX_CALLS) {
		ksh_say(sh, KSH_ERR(sh), "eval: maximum nesting level exceeded (%d)", KSH_MAX_CALLS);
		sh->abandon = true;
		if (sh->source)
			sh->exiting = true;
		return sh->status = 2;
	}
	struct ksh_input *in = ksh_input_mem(text, len);
	int line = sh->line;
	sh->calls++;
	loop(sh, in, false, first_line, what);
	sh->calls--;
	sh->line = line;
	ksh_input_free(in);
	return sh->status;
}

/* ---- start-up ---- */

/* The interactive shell's SIGINT and SIGQUIT, from its signalfd, to the
 * μprocesses running in the foreground; until cancelled. */
static void *interrupter(void *arg)
{
	int fd = *(int *)arg;
	struct signalfd_siginfo si;
	size_t got;
	while (kr_read(fd, &si, sizeof si, &got) == 0 && got == sizeof si)
		ksh_interrupt((int)si.ssi_signo);
	return NULL;
}

static int usage(const char *what)
{
	if (what)
		fprintf(stderr, "%s: %s\n", NAME, what);
	fprintf(stderr, "usage: %s [-v] [-c LINE [NAME [ARG...]] | FILE [ARG...]]\n", NAME);
	return 2;
}

static int stages_from_env(enum ksh_stages *out)
{
	const char *v = getenv("KARUI_SH_STAGES");
	if (!v || !*v || strcmp(v, "auto") == 0)
		*out = KSH_STAGES_AUTO;
	else if (strcmp(v, "uproc") == 0)
		*out = KSH_STAGES_UPROC;
	else if (strcmp(v, "child") == 0)
		*out = KSH_STAGES_CHILD;
	else
		return fprintf(stderr, "%s: KARUI_SH_STAGES=%s: not auto, uproc or child\n", NAME,
			       v), -1;
	return 0;
}

int main(int argc, char **argv)
{
	setlocale(LC_ALL, "");
	struct shell sh = {.arg0 = NULL};
	const char *line = NULL;
	bool interactive = false;
	sigset_t intr;
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sigaddset(&intr, SIGQUIT);
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		for (const char *o = argv[i] + 1; *o; o++) {
			if (*o == 'v') {
				sh.verbose = true;
			} else if (*o == 'c') {
				if (line || i + 1 >= argc)
					return usage("-c needs one LINE");
				line = argv[++i];
			} else {
				char what[32];
				snprintf(what, sizeof what, "-%c: invalid option", *o);
				return usage(what);
			}
		}
	}
	if (stages_from_env(&sh.stages) < 0)
		return 2;
	struct ksh_input *in;
	if (line) {
		sh.source = "-c";
		in = ksh_input_string(line);
		if (i < argc)
			sh.arg0 = ksh_xstrdup(argv[i++]);
	} else if (i < argc) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "%s: %s: %s\n", NAME, argv[i], strerror(errno));
			return errno == ENOENT ? 127 : 126;
		}
		if (ksh_binary_file(fd)) {
			fprintf(stderr, "%s: %s: cannot execute binary file\n", NAME, argv[i]);
			return 126;
		}
		sh.source = argv[i];
		sh.arg0 = ksh_xstrdup(argv[i++]);
		in = ksh_input_fd(fd, false);
	} else if (isatty(0)) {
		in = ksh_input_terminal(&sh);
		/* Ctrl-C and Ctrl-\ are for the commands it runs, not for the
		 * shell: blocked on every thread (VPs start from this one), read
		 * by the interrupter */
		interactive = true;
		pthread_sigmask(SIG_BLOCK, &intr, NULL);
	} else {
		sh.source = "";
		in = ksh_input_fd(0, true);
	}
	/* The shell's own writes (messages, built-ins) to a pipe nobody reads
	 * fail with EPIPE instead of ending it: SIGPIPE is blocked on its
	 * thread, as karui's VPs block it.  Blocked, not ignored: a disposition
	 * is the whole process's, which its μprocesses run in.  Children start
	 * with an empty mask (run_child.c). */
	sigset_t pipe_sig;
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL);
	if (!sh.arg0)
		sh.arg0 = ksh_xstrdup(NAME);
	sh.nargs = argc - i;
	sh.args = ksh_xmalloc((size_t)(sh.nargs + 1) * sizeof *sh.args);
	for (int a = 0; a < sh.nargs; a++)
		sh.args[a] = ksh_xstrdup(argv[i + a]);
	sh.subst_status = -1;

	/* the fds the shell was given, 0..KSH_FDS-1 (open, inheritable) */
	for (int fd = 0; fd < KSH_FDS; fd++) {
		int fl = fcntl(fd, F_GETFD);
		sh.fd[fd] = fl >= 0 && !(fl & FD_CLOEXEC) ? fd : -1;
	}
	ksh_vars_import(&sh, environ);
	sh.cwd = getcwd(NULL, 0);
	if (!sh.cwd) {
		fprintf(stderr, "%s: cannot tell the working directory: %s\n", NAME, strerror(errno));
		return 2;
	}
	ksh_var_set(&sh, "PWD", sh.cwd, true);
	sh.self = realpath("/proc/self/exe", NULL);

	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	kr_config cfg = {.vps = cpus < 1 ? 1 : cpus > 64 ? 64 : (unsigned)cpus};
	int e = kr_init(&cfg);
	if (!e)
		e = ksh_fg_init();
	if (e) {
		fprintf(stderr, "%s: cannot start karui: %s\n", NAME, strerror(e));
		return 2;
	}
	int sfd = interactive ? signalfd(-1, &intr, SFD_CLOEXEC) : -1;
	kr_mp *intr_mp = NULL;
	if (sfd >= 0 && kr_mp_create(&intr_mp, NULL, interrupter, &sfd))
		intr_mp = NULL;
	ksh_main_loop(&sh, in, true);
	ksh_shell_exit(&sh);
	int status = sh.status;
	if (intr_mp) {
		kr_mp_cancel(intr_mp);
		kr_mp_join(intr_mp, NULL);
	}
	if (sfd >= 0)
		kr_close(sfd);
	kr_fini();

	ksh_input_free(in);
	ksh_shell_free(&sh);
	return status;
}
