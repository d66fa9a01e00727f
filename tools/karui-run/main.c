/*
 * karui-run [--isolate] [--] PROGRAM [ARG...] — run one program as a μprocess of this
 * process and exit with its status (the shell's $?: the exit code, or
 * 128 + the signal that ended it).  PROGRAM without a slash is looked up
 * in PATH.  A program that cannot run as a μprocess (a script, a setuid
 * program, another architecture) is an error here: karui-run exists to
 * run μprocesses, and says why not.  It runs a VP per processor, which
 * the program's threads share.  --isolate starts it in a domain of its
 * own (kr_uproc_attr.isolate, docs/domains.md), and so its children: a
 * stray write of one into another's memory ends the writer alone.
 *
 * karui-run --syscall-table — print, in Markdown, the table of every
 * system call a μprocess makes and what karui does with it, from the
 * table that serves them (src/image/sys.c): docs/uproc.md holds it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <karui.h>
#include <karui/image.h>

#include "uproc.h" /* kr__sys_table_md */

static char **args;
static int status = 127;
static int isolate;

/* PATH search as execvp does it; NULL with errno if none. */
static char *find(const char *name, char *buf, size_t cap)
{
	if (strchr(name, '/'))
		return strlen(name) < cap ? strcpy(buf, name) : NULL;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int err = ENOENT;
	for (const char *p = path;; p++) {
		const char *e = strchrnul(p, ':');
		int n = snprintf(buf, cap, "%.*s%s%s", (int)(e - p), p, e == p ? "" : "/", name);
		if (n > 0 && (size_t)n < cap) {
			if (access(buf, X_OK) == 0)
				return buf;
			if (errno == EACCES)
				err = EACCES;
		}
		if (!*e)
			break;
		p = e;
	}
	errno = err;
	return NULL;
}

static void *run(void *arg)
{
	(void)arg;
	char path[4096];
	if (!find(args[0], path, sizeof path)) {
		fprintf(stderr, "karui-run: %s: %s\n", args[0], strerror(errno));
		status = errno == ENOENT ? 127 : 126;
		return NULL;
	}
	kr_uproc *up;
	kr_uproc_attr a;
	kr_uproc_attr_init(&a);
	a.isolate = isolate;
	int err = kr_uproc_spawn(&up, path, args, &a);
	if (err) {
		fprintf(stderr, "karui-run: %s: %s%s\n", path, strerror(err),
			err == ENOEXEC	  ? " (not a program karui can load as a μprocess)"
			: err == EADDRINUSE ? " (not position-independent, and its link address is taken)"
					    : "");
		status = err == ENOENT ? 127 : 126;
		return NULL;
	}
	err = kr_uproc_wait(up, &status);
	if (err) {
		fprintf(stderr, "karui-run: %s\n", strerror(err));
		status = 126;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int i = 1;
	if (argc == 2 && !strcmp(argv[1], "--syscall-table")) {
		int e = kr__sys_table_md(stdout);
		if (e || fflush(stdout)) {
			fprintf(stderr, "karui-run: --syscall-table: %s\n", strerror(e ? e : errno));
			return 1;
		}
		return 0;
	}
	if (i < argc && !strcmp(argv[i], "--isolate")) {
		isolate = 1;
		i++;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		fprintf(stderr, "usage: karui-run [--isolate] [--] PROGRAM [ARG...]\n"
				"       karui-run --syscall-table\n");
		return 2;
	}
	args = argv + i;
	/* a VP per processor, for a program's threads (as karui-sh) */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	kr_config cfg = {.vps = cpus < 1 ? 1 : cpus > 64 ? 64 : (unsigned)cpus};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "karui-run: kr_init: %s\n", strerror(err));
		return 126;
	}
	kr_mp *mp;
	if ((err = kr_mp_create(&mp, NULL, run, NULL)) == 0)
		err = kr_mp_join(mp, NULL);
	kr_fini();
	if (err) {
		fprintf(stderr, "karui-run: %s\n", strerror(err));
		return 126;
	}
	fflush(stdout);
	return status;
}
