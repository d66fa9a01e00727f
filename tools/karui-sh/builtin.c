/*
 * karui-sh's built-ins: the commands that change the shell itself and so
 * cannot be programs (cd, export, exit, set, shift, unset, read, eval, .,
 * exec, trap, wait, break, continue, return), and `:`, true and false,
 * which every POSIX shell has built in.  Programs stay programs where a
 * shell has no need of a built-in: echo, printf, test and [, pwd run from
 * PATH (as μprocesses).  Messages follow bash's wording, statuses dash's.
 *
 * A built-in works on the struct shell it is given: the shell itself when
 * it runs alone, a subshell's copy in a pipeline (`cd /tmp | cat` changes
 * nothing).  It writes to the shell's fds 1 and 2 (sh->fd), which its
 * redirections have set for as long as it runs.
 *
 * POSIX's special built-ins (: . break continue eval exec exit export
 * return set shift trap unset) end a non-interactive shell when they fail
 * (status 2), and the assignments before them stay, as in dash.
 *
 * cd is physical (cd -P): the new directory is what getcwd says (what
 * realpath says, in a subshell, which has no kernel directory of its
 * own), so `cd ..` from a symbolic link leads to the link target's
 * parent, not the link's; PWD and OLDPWD follow each change.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "karui.h"
#include "shell.h"

#define OUT(sh) ((sh)->fd[1])
#define ERR(sh) KSH_ERR(sh)

static int argc_of(char **argv)
{
	int n = 0;
	while (argv[n])
		n++;
	return n;
}

int ksh_special_error(struct shell *sh)
{
	if (sh->source)
		sh->exiting = true;
	return 2;
}

/* A decimal number, whole: 0 and *v, else -1. */
static int number(const char *s, long *v)
{
	char *end;
	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	*v = strtol(s, &end, 10);
	return errno ? -1 : 0;
}

/* ---- cd ---- */

static int builtin_cd(struct shell *sh, char **argv)
{
	int argc = argc_of(argv);
	if (argc > 2) {
		ksh_say(sh, ERR(sh), "cd: too many arguments");
		return 1;
	}
	const char *dir = argv[1];
	bool dash = dir && strcmp(dir, "-") == 0;
	if (!dir || dash) {
		const char *var = dash ? "OLDPWD" : "HOME";
		dir = ksh_var_get(sh, var);
		if (!dir) {
			ksh_say(sh, ERR(sh), "cd: %s not set", var);
			return 1;
		}
		if (!*dir)
			return 0;
	}
	char *target = ksh_path(sh, dir), *cwd = NULL;
	struct stat st;
	int e = 0;
	if (!sh->subshell) {
		if (chdir(target) < 0)
			e = errno;
		else if (!(cwd = getcwd(NULL, 0)))
			e = errno;
	} else if (stat(target, &st) < 0) {
		e = errno;
	} else if (!S_ISDIR(st.st_mode)) {
		e = ENOTDIR;
	} else if (access(target, X_OK) < 0 || !(cwd = realpath(target, NULL))) {
		e = errno;
	}
	free(target);
	if (e) {
		ksh_say(sh, ERR(sh), "cd: %s: %s", dir, strerror(e));
		return 1;
	}
	const char *pwd = ksh_var_get(sh, "PWD");
	ksh_var_set(sh, "OLDPWD", pwd ? pwd : sh->cwd, false);
	ksh_var_set(sh, "PWD", cwd, false);
	free(sh->cwd);
	sh->cwd = cwd;
	if (dash) {
		ksh_write_all(OUT(sh), cwd, strlen(cwd));
		ksh_write_all(OUT(sh), "\n", 1);
	}
	return 0;
}

/* ---- variables ---- */

static int builtin_export(struct shell *sh, char **argv)
{
	int i = 1, status = 0;
	bool print = argv[1] == NULL;
	for (; argv[i] && argv[i][0] == '-' && argv[i][1]; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "-p") != 0) {
			static const char use[] = "export: usage: export [name[=value] ...] or export -p\n";
			ksh_say(sh, ERR(sh), "export: %s: invalid option", argv[i]);
			ksh_write_all(ERR(sh), use, sizeof use - 1);
			return 2;
		}
		print = true;
	}
	if (print && !argv[i]) {
		ksh_vars_print_exported(sh, OUT(sh));
		return 0;
	}
	for (; argv[i]; i++) {
		const char *eq = strchr(argv[i], '=');
		size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
		if (!ksh_valid_name(argv[i], len)) {
			ksh_say(sh, ERR(sh), "export: `%s': not a valid identifier", argv[i]);
			status = 1;
			continue;
		}
		char *name = ksh_xmalloc(len + 1);
		memcpy(name, argv[i], len);
		name[len] = 0;
		ksh_var_set(sh, name, eq ? eq + 1 : NULL, true);
		free(name);
	}
	return status;
}

static int builtin_unset(struct shell *sh, char **argv)
{
	int i = 1;
	bool funcs = false;
	for (; argv[i] && argv[i][0] == '-' && argv[i][1]; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "-f") == 0) {
			funcs = true;
		} else if (strcmp(argv[i], "-v") != 0) {
			ksh_say(sh, ERR(sh), "unset: %s: invalid option", argv[i]);
			return ksh_special_error(sh);
		}
	}
	for (; argv[i]; i++) {
		if (funcs)
			ksh_func_unset(sh, argv[i]);
		else
			ksh_var_unset(sh, argv[i]);
	}
	return 0;
}

/* set's variables as dash lists them: NAME='value' */
static void print_vars(struct shell *sh)
{
	for (size_t i = 0; i < sh->nvars; i++) {
		const struct ksh_var *v = &sh->vars[i];
		if (!v->value)
			continue;
		size_t len = strlen(v->name) + 4 * strlen(v->value) + 8;
		char *line = ksh_xmalloc(len), *p = line;
		p += sprintf(p, "%s='", v->name);
		for (const char *c = v->value; *c; c++) {
			if (*c == '\'')
				p += sprintf(p, "'\\''");
			else
				*p++ = *c;
		}
		p += sprintf(p, "'\n");
		ksh_write_all(OUT(sh), line, (size_t)(p - line));
		free(line);
	}
}

static void set_params(struct shell *sh, char **argv)
{
	for (int i = 0; i < sh->nargs; i++)
		free(sh->args[i]);
	int n = argc_of(argv);
	sh->args = ksh_xrealloc(sh->args, (size_t)(n + 1) * sizeof *sh->args);
	for (int i = 0; i < n; i++)
		sh->args[i] = ksh_xstrdup(argv[i]);
	sh->nargs = n;
}

static int builtin_set(struct shell *sh, char **argv)
{
	if (!argv[1]) {
		print_vars(sh);
		return 0;
	}
	int i = 1;
	for (; argv[i] && (argv[i][0] == '-' || argv[i][0] == '+'); i++) {
		if (strcmp(argv[i], "--") == 0) {
			set_params(sh, argv + i + 1);
			return 0;
		}
		if (strcmp(argv[i], "-") == 0) {
			i++;
			break;
		}
		bool on = argv[i][0] == '-';
		for (const char *o = argv[i] + 1; *o; o++) {
			switch (*o) {
			case 'e': sh->opt_e = on; break;
			case 'u': sh->opt_u = on; break;
			case 'x': sh->opt_x = on; break;
			default:
				ksh_say(sh, ERR(sh), "set: %c%c: invalid option", argv[i][0], *o);
				return ksh_special_error(sh);
			}
		}
	}
	if (argv[i])
		set_params(sh, argv + i);
	return 0;
}

static int builtin_shift(struct shell *sh, char **argv)
{
	long n = 1;
	if (argv[1] && number(argv[1], &n) < 0) {
		ksh_say(sh, ERR(sh), "shift: %s: numeric argument required", argv[1]);
		return ksh_special_error(sh);
	}
	if (n > sh->nargs) {
		ksh_say(sh, ERR(sh), "shift: %s: shift count out of range", argv[1]);
		return ksh_special_error(sh);
	}
	for (long i = 0; i < n; i++)
		free(sh->args[i]);
	memmove(sh->args, sh->args + n, (size_t)(sh->nargs - n + 1) * sizeof *sh->args);
	sh->nargs -= (int)n;
	return 0;
}

/* read [-r] NAME...: one line of fd 0, a byte at a time (the rest of the
 * input is the next command's), split at $IFS as fields are, the last
 * NAME taking the rest of the line. */
static int builtin_read(struct shell *sh, char **argv)
{
	int i = 1;
	bool raw = false;
	for (; argv[i] && argv[i][0] == '-' && argv[i][1]; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "-r") != 0) {
			ksh_say(sh, ERR(sh), "read: %s: invalid option", argv[i]);
			return 2;
		}
		raw = true;
	}
	if (!argv[i]) {
		ksh_say(sh, ERR(sh), "read: arg count");
		return 2;
	}
	for (int j = i; argv[j]; j++)
		if (!ksh_valid_name(argv[j], strlen(argv[j]))) {
			ksh_say(sh, ERR(sh), "read: `%s': not a valid identifier", argv[j]);
			return 2;
		}
	/* the line: characters, each marked quoted (after a backslash) or not */
	size_t n = 0, cap = 128;
	char *line = ksh_xmalloc(cap);
	bool eof = false, esc = false;
	int fd = sh->fd[0];
	bool section = kr_blocking_begin() == 0;
	for (;;) {
		char c;
		ssize_t r = fd >= 0 ? read(fd, &c, 1) : -1;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			eof = true;
			break;
		}
		if (!c)
			continue;
		if (esc) {
			esc = false;
			if (c == '\n')
				continue;
		} else if (c == '\\' && !raw) {
			esc = true;
			continue;
		} else if (c == '\n') {
			break;
		}
		if (n + 1 >= cap) {
			cap *= 2;
			line = ksh_xrealloc(line, cap);
		}
		line[n++] = c;
	}
	if (section)
		kr_blocking_end();
	line[n] = 0;
	const char *ifs = ksh_var_get(sh, "IFS");
	if (!ifs)
		ifs = " \t\n";
#define WS(c) (((c) == ' ' || (c) == '\t' || (c) == '\n') && strchr(ifs, (c)))
#define DELIM(c) ((c) && strchr(ifs, (c)))
	size_t p = 0;
	while (p < n && WS(line[p]))
		p++;
	for (; argv[i]; i++) {
		if (!argv[i + 1]) {
			size_t end = n;
			while (end > p && WS(line[end - 1]))
				end--;
			char *v = ksh_xmalloc(end - p + 1);
			memcpy(v, line + p, end - p);
			v[end - p] = 0;
			ksh_var_set(sh, argv[i], v, false);
			free(v);
			break;
		}
		size_t start = p;
		while (p < n && !DELIM(line[p]))
			p++;
		char *v = ksh_xmalloc(p - start + 1);
		memcpy(v, line + start, p - start);
		v[p - start] = 0;
		ksh_var_set(sh, argv[i], v, false);
		free(v);
		/* one delimiter, with the IFS white space around it */
		while (p < n && WS(line[p]))
			p++;
		if (p < n && DELIM(line[p]) && !WS(line[p]))
			for (p++; p < n && WS(line[p]);)
				p++;
	}
#undef WS
#undef DELIM
	free(line);
	return eof ? 1 : 0;
}

/* ---- running code ---- */

static int builtin_eval(struct shell *sh, char **argv)
{
	size_t len = 0;
	for (int i = 1; argv[i]; i++)
		len += strlen(argv[i]) + 1;
	if (!len)
		return 0;
	char *text = ksh_xmalloc(len + 1), *p = text;
	for (int i = 1; argv[i]; i++)
		p += sprintf(p, "%s%s", i > 1 ? " " : "", argv[i]);
	sh->status = 0;
	int status = ksh_run_string(sh, text, strlen(text), sh->line, "eval");
	free(text);
	return status;
}

static int builtin_dot(struct shell *sh, char **argv)
{
	if (!argv[1]) {
		ksh_say(sh, ERR(sh), ".: filename argument required");
		return ksh_special_error(sh);
	}
	char *path = NULL;
	if (strchr(argv[1], '/')) {
		path = ksh_path(sh, argv[1]);
	} else {
		const char *pv = ksh_var_get(sh, "PATH");
		for (const char *p = pv ? pv : "/usr/bin:/bin"; !path; p++) {
			const char *end = strchr(p, ':');
			size_t dl = end ? (size_t)(end - p) : strlen(p);
			char *cand = ksh_xmalloc(dl + strlen(argv[1]) + 3);
			sprintf(cand, "%.*s/%s", (int)(dl ? dl : 1), dl ? p : ".", argv[1]);
			char *abs = ksh_path(sh, cand);
			free(cand);
			struct stat st;
			if (stat(abs, &st) == 0 && S_ISREG(st.st_mode))
				path = abs;
			else
				free(abs);
			if (!end)
				break;
			p = end;
		}
	}
	FILE *f = path ? fopen(path, "re") : NULL;
	const char *name = argv[1];
	if (!f) {
		ksh_say(sh, ERR(sh), "%s: %s", argv[1], path ? strerror(errno) : "file not found");
		free(path);
		return ksh_special_error(sh);
	}
	free(path);
	char *text = NULL;
	size_t cap = 0, len = 0, r;
	do {
		if (len + 4096 > cap)
			text = ksh_xrealloc(text, cap = 2 * cap + 4096);
		r = fread(text + len, 1, cap - len, f);
		len += r;
	} while (r > 0);
	fclose(f);
	sh->dots++;
	sh->status = 0;
	int status = ksh_run_string(sh, text, len, 1, name);
	sh->dots--;
	if (sh->returning) {
		sh->returning = false;
		status = sh->status;
	}
	free(text);
	return status;
}

/* exec alone: its redirections stay (exec.c); exec CMD never gets here */
static int builtin_exec(struct shell *sh, char **argv)
{
	(void)sh, (void)argv;
	return 0;
}

/* ---- control ---- */

static int builtin_colon(struct shell *sh, char **argv)
{
	(void)sh, (void)argv;
	return 0;
}

static int builtin_false(struct shell *sh, char **argv)
{
	(void)sh, (void)argv;
	return 1;
}

/* break [N], continue [N] */
static int loop_control(struct shell *sh, char **argv, bool cont)
{
	long n = 1;
	if (argv[1] && (number(argv[1], &n) < 0 || n < 1)) {
		ksh_say(sh, ERR(sh), "%s: %s: loop count out of range", argv[0], argv[1]);
		return ksh_special_error(sh);
	}
	if (sh->loops == 0)
		return 0; /* dash's: nothing to leave */
	sh->breaks = n > sh->loops ? sh->loops : (int)n;
	sh->continuing = cont;
	return 0;
}

static int builtin_break(struct shell *sh, char **argv)
{
	return loop_control(sh, argv, false);
}

static int builtin_continue(struct shell *sh, char **argv)
{
	return loop_control(sh, argv, true);
}

/* exit's and return's argument as bash reads it: an optional sign and
 * decimal digits. */
static bool exit_code(const char *s, int *code)
{
	const char *p = s + (*s == '-' || *s == '+');
	if (!*p || strspn(p, "0123456789") != strlen(p))
		return false;
	long long v = 0;
	for (; *p; p++)
		v = (v * 10 + (*p - '0')) & 0xff;
	*code = (int)((*s == '-' ? -v : v) & 0xff);
	return true;
}

static int builtin_return(struct shell *sh, char **argv)
{
	int code = sh->status;
	if (argv[1] && !exit_code(argv[1], &code)) {
		ksh_say(sh, ERR(sh), "return: %s: numeric argument required", argv[1]);
		code = 2;
	}
	sh->status = code;
	if (sh->functions > 0 || sh->dots > 0)
		sh->returning = true;
	else
		sh->exiting = true; /* dash: return outside a function ends the shell */
	return code;
}

static int builtin_exit(struct shell *sh, char **argv)
{
	int code = sh->status;
	if (!sh->subshell && !sh->source)
		ksh_write_all(ERR(sh), "exit\n", 5);
	if (argv[1] && !exit_code(argv[1], &code)) {
		ksh_say(sh, ERR(sh), "exit: %s: numeric argument required", argv[1]);
		code = 2;
	} else if (argv[1] && argv[2]) {
		ksh_say(sh, ERR(sh), "exit: too many arguments");
		code = 1;
		if (sh->subshell || !sh->source)
			return code; /* bash goes on only when interactive */
	}
	sh->exiting = true;
	sh->status = code;
	return code;
}

/* ---- traps ---- */

static const char *const signames[] = {
	"EXIT", "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1",
	"SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP",
	"TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
};

/* A signal by name (HUP, SIGHUP) or number; -1: none. */
static int signal_number(const char *s)
{
	long n;
	if (number(s, &n) == 0)
		return n < KSH_NSIG ? (int)n : -1;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
		if (strcmp(s, signames[i]) == 0)
			return (int)i;
	return -1;
}

static int builtin_trap(struct shell *sh, char **argv)
{
	int i = 1;
	if (argv[1] && strcmp(argv[1], "--") == 0)
		i++;
	if (!argv[i]) {
		for (int sig = 0; sig < KSH_NSIG; sig++) {
			if (!sh->trap[sig])
				continue;
			char name[16];
			if (sig < (int)(sizeof signames / sizeof signames[0]))
				snprintf(name, sizeof name, "%s", signames[sig]);
			else
				snprintf(name, sizeof name, "%d", sig);
			size_t len = 4 * strlen(sh->trap[sig]) + 32;
			char *line = ksh_xmalloc(len), *p = line;
			p += sprintf(p, "trap -- '");
			for (const char *c = sh->trap[sig]; *c; c++)
				p += *c == '\'' ? sprintf(p, "'\\''") : sprintf(p, "%c", *c);
			p += sprintf(p, "' %s\n", name);
			ksh_write_all(OUT(sh), line, (size_t)(p - line));
			free(line);
		}
		return 0;
	}
	/* trap N...: a number first resets them all, as POSIX says */
	long dummy;
	const char *action = argv[i];
	if (number(action, &dummy) == 0)
		action = "-";
	else
		i++;
	int status = 0;
	for (; argv[i]; i++) {
		int sig = signal_number(argv[i]);
		if (sig < 0 || sig == SIGKILL || sig == SIGSTOP) {
			ksh_say(sh, ERR(sh), "trap: %s: invalid signal specification", argv[i]);
			status = 1;
			continue;
		}
		free(sh->trap[sig]);
		sh->trap[sig] = strcmp(action, "-") == 0 ? NULL : ksh_xstrdup(action);
		ksh_trap_signal(sh, sig);
	}
	return status;
}

/* ---- jobs ---- */

/* kill [-s SIG | -SIG] PID...: a built-in, as in dash, because $$ and $!
 * are not for a μprocess's kill to reach: $$ is this process, signalled
 * as the shell's trap says (its action runs next, deterministically), and
 * $! names a job of this shell, whose μprocesses and child processes get
 * the signal and which ends. */
static int builtin_kill(struct shell *sh, char **argv)
{
	int sig = SIGTERM, i = 1;
	if (argv[1] && strcmp(argv[1], "-l") == 0) {
		for (size_t s = 1; s < sizeof signames / sizeof signames[0]; s++) {
			ksh_write_all(OUT(sh), signames[s], strlen(signames[s]));
			ksh_write_all(OUT(sh), "\n", 1);
		}
		return 0;
	}
	if (argv[1] && strcmp(argv[1], "-s") == 0) {
		sig = argv[2] ? signal_number(argv[2]) : -1;
		i = 3;
	} else if (argv[1] && strcmp(argv[1], "--") == 0) {
		i = 2;
	} else if (argv[1] && argv[1][0] == '-' && argv[1][1]) {
		sig = signal_number(argv[1] + 1);
		i = 2;
	}
	if (sig < 0) {
		ksh_say(sh, ERR(sh), "kill: %s: invalid signal specification", argv[i - 1] ? argv[i - 1] : "-s");
		return 1;
	}
	if (!argv[i]) {
		ksh_say(sh, ERR(sh), "kill: usage: kill [-s sigspec | -sigspec] pid ...");
		return 2;
	}
	int status = 0;
	for (; argv[i]; i++) {
		long pid;
		if (number(argv[i], &pid) < 0) {
			ksh_say(sh, ERR(sh), "kill: %s: arguments must be process or job IDs", argv[i]);
			status = 1;
			continue;
		}
		int e = 0;
		if (pid == (long)getpid() && !sh->subshell && sig > 0 && sh->trap[sig]) {
			if (*sh->trap[sig])
				ksh_trap_pending(sig);
		} else if (pid > (1L << 22)) {
			e = ksh_job_kill(sh, pid, sig) < 0 ? ESRCH : 0;
		} else if (kill((pid_t)pid, sig) < 0) {
			e = errno;
		}
		if (e) {
			ksh_say(sh, ERR(sh), "kill: (%ld) - %s", pid, strerror(e));
			status = 1;
		}
	}
	return status;
}

static int builtin_wait(struct shell *sh, char **argv)
{
	if (!argv[1])
		return ksh_job_wait(sh, 0);
	int status = 0;
	for (int i = 1; argv[i]; i++) {
		long id;
		if (number(argv[i], &id) < 0) {
			ksh_say(sh, ERR(sh), "wait: `%s': not a pid or valid job spec", argv[i]);
			status = 2;
			continue;
		}
		status = ksh_job_wait(sh, id);
		if (status < 0)
			status = 127;
	}
	return status;
}

struct builtin {
	const char *name;
	ksh_builtin_fn *fn;
	bool special;
};

static const struct builtin builtins[] = {
	{":", builtin_colon, true},       {".", builtin_dot, true},
	{"break", builtin_break, true},   {"continue", builtin_continue, true},
	{"eval", builtin_eval, true},     {"exec", builtin_exec, true},
	{"exit", builtin_exit, true},     {"export", builtin_export, true},
	{"return", builtin_return, true}, {"set", builtin_set, true},
	{"shift", builtin_shift, true},   {"trap", builtin_trap, true},
	{"unset", builtin_unset, true},   {"cd", builtin_cd, false},
	{"true", builtin_colon, false},   {"false", builtin_false, false},
	{"read", builtin_read, false},    {"wait", builtin_wait, false},
	{"kill", builtin_kill, false},
};

ksh_builtin_fn *ksh_builtin(const char *name, bool *special)
{
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
		if (strcmp(name, builtins[i].name) == 0) {
			if (special)
				*special = builtins[i].special;
			return builtins[i].fn;
		}
	return NULL;
}
