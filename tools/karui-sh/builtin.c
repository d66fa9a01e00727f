/*
 * karui-sh's built-ins: cd, export, exit — the commands that change the
 * shell itself and so cannot be programs.  Their messages and statuses
 * are bash's.
 *
 * Run alone, a built-in changes the shell (its directory, variables, or
 * ends it).  Run as a stage of a pipeline it runs, as in bash, in what
 * stands for a subshell: it checks and reports as usual and changes
 * nothing (`sub`), so `cd /tmp | cat` leaves the directory alone and
 * `exit 3 | cat` ends only its stage.
 *
 * cd is physical (cd -P): the new directory is what getcwd says, so
 * `cd ..` from a symbolic link leads to the link target's parent, not
 * the link's; PWD and OLDPWD follow each change.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shell.h"

static int argc_of(char **argv)
{
	int n = 0;
	while (argv[n])
		n++;
	return n;
}

/* Whether a subshell could cd to dir: 0 or why not. */
static int could_chdir(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	return access(dir, X_OK) < 0 ? errno : 0;
}

static int builtin_cd(struct shell *sh, char **argv, int out, int err, bool sub)
{
	int argc = argc_of(argv);
	if (argc > 2) {
		ksh_say(sh, err, "cd: too many arguments");
		return 1;
	}
	const char *dir = argv[1];
	bool dash = dir && strcmp(dir, "-") == 0;
	if (!dir || dash) {
		const char *var = dash ? "OLDPWD" : "HOME";
		dir = ksh_var_get(sh, var);
		if (!dir) {
			ksh_say(sh, err, "cd: %s not set", var);
			return 1;
		}
		if (!*dir)
			return 0;
	}
	int e = sub ? could_chdir(dir) : chdir(dir) < 0 ? errno : 0;
	if (e) {
		ksh_say(sh, err, "cd: %s: %s", dir, strerror(e));
		return 1;
	}
	if (sub) {
		if (dash)
			ksh_write_all(out, dir, strlen(dir)), ksh_write_all(out, "\n", 1);
		return 0;
	}
	char *cwd = getcwd(NULL, 0);
	if (!cwd) {
		ksh_say(sh, err, "cd: %s: %s", dir, strerror(errno));
		return 1;
	}
	const char *pwd = ksh_var_get(sh, "PWD");
	ksh_var_set(sh, "OLDPWD", pwd ? pwd : sh->cwd, false);
	ksh_var_set(sh, "PWD", cwd, false);
	free(sh->cwd);
	sh->cwd = cwd;
	if (dash) {
		ksh_write_all(out, cwd, strlen(cwd));
		ksh_write_all(out, "\n", 1);
	}
	return 0;
}

static int builtin_export(struct shell *sh, char **argv, int out, int err, bool sub)
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
			ksh_say(sh, err, "export: %s: invalid option", argv[i]);
			ksh_write_all(err, use, sizeof use - 1);
			return 2;
		}
		print = true;
	}
	if (print && !argv[i]) {
		ksh_vars_print_exported(sh, out);
		return 0;
	}
	for (; argv[i]; i++) {
		const char *eq = strchr(argv[i], '=');
		size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
		if (!ksh_valid_name(argv[i], len)) {
			ksh_say(sh, err, "export: `%s': not a valid identifier", argv[i]);
			status = 1;
			continue;
		}
		if (sub)
			continue;
		char *name = ksh_xmalloc(len + 1);
		memcpy(name, argv[i], len);
		name[len] = 0;
		ksh_var_set(sh, name, eq ? eq + 1 : NULL, true);
		free(name);
	}
	return status;
}

/* exit's argument as bash reads it: an optional sign and decimal digits. */
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

static int builtin_exit(struct shell *sh, char **argv, int out, int err, bool sub)
{
	int code = sh->status;
	if (!sub && !sh->source)
		ksh_write_all(err, "exit\n", 5);
	if (argv[1] && !exit_code(argv[1], &code)) {
		ksh_say(sh, err, "exit: %s: numeric argument required", argv[1]);
		code = 2;
	} else if (argv[1] && argv[2]) {
		ksh_say(sh, err, "exit: too many arguments");
		code = 1;
		if (sub || !sh->source)
			return code; /* bash goes on only when interactive */
	}
	if (!sub)
		sh->exiting = true;
	return code;
}

ksh_builtin_fn *ksh_builtin(const char *name)
{
	if (strcmp(name, "cd") == 0)
		return builtin_cd;
	if (strcmp(name, "export") == 0)
		return builtin_export;
	if (strcmp(name, "exit") == 0)
		return builtin_exit;
	return NULL;
}
