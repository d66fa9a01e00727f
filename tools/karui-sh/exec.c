/*
 * karui-sh's executor: runs a parsed command — lists, and-or lists,
 * pipelines, simple and compound commands with their redirections and
 * assignments, functions — with POSIX sh's semantics (dash's), each
 * external command through a runner (run.h).
 *
 * Commands run on the shell's own microprocess, against its state
 * (struct shell): compound commands walk the tree, a function call runs
 * its body with new positional parameters, a built-in runs in place.
 * Redirections of a command run in the shell (a compound command, a
 * built-in, a function) make the shell's fd table (sh->fd) point at the
 * files they open while it runs, and put it back after; `exec` with
 * redirections alone keeps them.
 *
 * A pipeline of several commands starts its stages one after the other,
 * left to right, and then all run at once; the shell waits for them in
 * order, and the pipeline's status is the last stage's (negated by `!`).
 * Starting stage i:
 *
 *   1. expand its words and assignments (expand.c), when it is simple;
 *   2. open the link to stage i+1: a karui pipe if stage i is to be tried
 *      as a μprocess, else a kernel pipe (run.h explains links);
 *   3. give it fds: 0 from link i-1, 1 to link i, the shell's fds as they
 *      are, then its redirections, left to right, each opening a file
 *      (close-on-exec), a here-document (a memfd holding its text) or
 *      copying an fd entry;
 *   4. run it: a program as a μprocess, or, when the image layer refuses
 *      it (ENOEXEC, EPERM, EADDRINUSE: a program that is not PIE whose
 *      link address another holds) or is not there (ENOTSUP: from then on every
 *      stage is a child), as a child process; a file the kernel refuses
 *      too (ENOEXEC) as a script of this shell, unless it looks binary
 *      (bash's test): then bash's "cannot execute binary file", 126.
 *      Anything else — a built-in, a function, a compound command — runs
 *      in a subshell (a copy of the shell, sub.c) on a microprocess of
 *      its own, its links made kernel pipes so that its fds are the
 *      shell's kind: `cd /tmp | cat` changes nothing, as in every shell;
 *   5. let go of the link ends and files the stage now holds.
 *
 * A lone command that is a program is a pipeline of one stage.
 *
 * Stage fds name links, not their ends' fds: a link may still change
 * (karui pipe to kernel pipe, or a pump put in) until the stages on both
 * of its sides have started, and `2>&1` must follow it.  A stage that
 * fails before it runs (a redirection, command not found) says why on
 * its own fd 2, as the subshell of bash does — so `nosuch 2>/dev/null`
 * is silent; the shell writes that through a kernel pipe, never into a
 * karui pipe, whose writer waits for a reader that may not start yet.
 *
 * Control: `break N`, `continue N` and `return` set sh->breaks /
 * sh->returning, which every list checks (ksh_stopped) and the loop or
 * function they belong to clears.  `set -e` ends the shell when a simple
 * command, a pipeline or a subshell fails outside a condition: if's,
 * while's and until's, the left of && and ||, under `!` (sh->tested).
 *
 * An error of expansion ends the command, the command line, and a
 * non-interactive shell: with status 1 for a bad substitution (bash's),
 * 2 for the others (dash's: arithmetic, ${x?}, set -u); in a pipeline,
 * its stage alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

enum way { WAY_NONE, WAY_DONE, WAY_SUB, WAY_UPROC, WAY_CHILD };

enum sfd_kind { SFD_CLOSED, SFD_HOST, SFD_LINK };

struct sfd {
	enum sfd_kind kind;
	int host;
	struct ksh_link *link;
	enum kr_upipe_end end;
};

struct stage {
	struct shell *sh;
	const struct ksh_cmd *cmd;
	struct ksh_strv argv, assign;
	struct sfd fd[KSH_FDS];
	int *opened; /* fds the redirections opened, closed once the stage holds them */
	size_t nopened;
	enum way way;
	int status;
	const struct ksh_runner *runner;
	struct ksh_proc proc;
	bool expanded;   /* argv and assign are done */
	bool redirected; /* the shell's fds are the stage's already (a subshell's command) */
	kr_mp *mp;       /* a subshell's microprocess */
	struct shell *sub;
};

static int run_cmd(struct shell *sh, const struct ksh_cmd *c);
static int run_compound(struct shell *sh, const struct ksh_cmd *c);
static int exec_simple(struct shell *sh, struct stage *s);

static struct ksh_fdspec spec_of(const struct sfd *f)
{
	if (f->kind == SFD_LINK)
		return ksh_link_end(f->link, f->end);
	return (struct ksh_fdspec){.kind = f->kind == SFD_HOST ? KSH_FD_HOST : KSH_FD_CLOSED,
				   .host = f->host};
}

/* The shell's fd that stands for the stage's fd n, or -1 (closed, or a
 * karui pipe). */
static int host_fd(const struct stage *s, int n)
{
	struct ksh_fdspec sp = spec_of(&s->fd[n]);
	return sp.kind == KSH_FD_HOST ? sp.host : -1;
}

/* A message on the stage's fd 2, which may be its link to the next stage:
 * that link becomes a kernel pipe first (this stage is no μprocess). */
static void stage_say(struct stage *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void stage_say(struct stage *s, const char *fmt, ...)
{
	struct sfd *f = &s->fd[2];
	if (f->kind == SFD_LINK && f->end == KR_UPIPE_WRITE)
		ksh_link_make_kernel(f->link);
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	int fd = host_fd(s, 2);
	if (fd >= 0)
		ksh_say(s->sh, fd, "%s", msg);
}

static void fail(struct stage *s, int status)
{
	s->way = WAY_DONE;
	s->status = status;
}

/* ---- control ---- */

static int interrupted; /* Ctrl-C: the foreground command line ends */

bool ksh_stopped(const struct shell *sh)
{
	return sh->exiting || sh->abandon || sh->breaks || sh->returning ||
	       (!sh->background && __atomic_load_n(&interrupted, __ATOMIC_RELAXED)) ||
	       (sh->job_killed && __atomic_load_n(sh->job_killed, __ATOMIC_RELAXED));
}

/* set -e: a failure outside a condition ends the shell. */
static void check_errexit(struct shell *sh, int status)
{
	if (sh->opt_e && status && !sh->tested && !ksh_stopped(sh))
		sh->exiting = true;
}

/* An expansion failed (told already): the command ends, and the command
 * line, and a non-interactive shell. */
static int expansion_failed(struct shell *sh)
{
	sh->abandon = true;
	if (sh->source)
		sh->exiting = true;
	return sh->xerr ? sh->xerr : 1;
}

/* ---- expansion of a stage ---- */

/* NAME=value with value expanded as one field. */
static int expand_assignment(struct shell *sh, const char *word, struct ksh_strv *out)
{
	size_t n = ksh_assignment_name(word);
	struct ksh_strv v = {0};
	if (ksh_expand(sh, word + n + 1, KSH_X_ASSIGN, &v) < 0)
		return -1;
	char *a = ksh_xmalloc(n + 2 + strlen(v.v[0]));
	sprintf(a, "%.*s=%s", (int)n, word, v.v[0]);
	ksh_strv_push(out, a);
	ksh_strv_free(&v);
	return 0;
}

/* The words become argv (export's NAME=value arguments expanded as
 * assignments, as bash does), the assignments NAME=value strings. */
static int expand_stage(struct stage *s)
{
	const struct ksh_cmd *c = s->cmd;
	s->sh->subst_status = -1;
	s->sh->xerr = 1;
	s->expanded = true;
	for (size_t i = 0; i < c->nassign; i++)
		if (expand_assignment(s->sh, c->assign[i], &s->assign) < 0)
			return -1;
	bool export = c->nword && strcmp(c->word[0], "export") == 0;
	for (size_t i = 0; i < c->nword; i++) {
		int r = export && i > 0 && ksh_assignment_name(c->word[i]) ?
			expand_assignment(s->sh, c->word[i], &s->argv) :
			ksh_expand(s->sh, c->word[i], KSH_X_FIELDS, &s->argv);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* ---- fds and redirections ---- */

static void init_fds(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	for (int i = 0; i < KSH_FDS; i++)
		s->fd[i] = s->sh->fd[i] >= 0 ? (struct sfd){.kind = SFD_HOST, .host = s->sh->fd[i]}
					     : (struct sfd){.kind = SFD_CLOSED};
	if (in)
		s->fd[0] = (struct sfd){.kind = SFD_LINK, .link = in, .end = KR_UPIPE_READ};
	if (out)
		s->fd[1] = (struct sfd){.kind = SFD_LINK, .link = out, .end = KR_UPIPE_WRITE};
}

static void add_opened(struct stage *s, int fd)
{
	s->opened = ksh_xrealloc(s->opened, (s->nopened + 1) * sizeof *s->opened);
	s->opened[s->nopened++] = fd;
}

static void close_opened(struct stage *s)
{
	for (size_t i = 0; i < s->nopened; i++)
		close(s->opened[i]);
	free(s->opened);
	s->opened = NULL;
	s->nopened = 0;
}

static int open_flags(enum ksh_redir_op op)
{
	switch (op) {
	case KSH_R_IN: return O_RDONLY;
	case KSH_R_APPEND: return O_WRONLY | O_CREAT | O_APPEND;
	case KSH_R_RDWR: return O_RDWR | O_CREAT;
	default: return O_WRONLY | O_CREAT | O_TRUNC;
	}
}

static int open_target(struct stage *s, const char *path, enum ksh_redir_op op)
{
	char *abs = ksh_path(s->sh, path);
	int fd = open(abs, open_flags(op) | O_CLOEXEC | O_NOCTTY, 0666);
	free(abs);
	if (fd < 0) {
		stage_say(s, "%s: %s", path, strerror(errno));
		return -1;
	}
	add_opened(s, fd);
	return fd;
}

/* A here-document's text, in a memfd to read from its start. */
static int heredoc_fd(struct stage *s, const struct ksh_redir *r)
{
	char *text = r->doc->quoted ? ksh_xstrdup(r->doc->body) :
				      ksh_expand_heredoc(s->sh, r->doc->body);
	if (!text)
		return -1;
	int fd = memfd_create("karui-sh here-document", MFD_CLOEXEC);
	if (fd < 0) {
		stage_say(s, "cannot make a here-document: %s", strerror(errno));
		free(text);
		return -1;
	}
	ksh_write_all(fd, text, strlen(text));
	free(text);
	lseek(fd, 0, SEEK_SET);
	add_opened(s, fd);
	return fd;
}

/* <&N, >&N, <&-, >&-; >&FILE is bash's >FILE 2>&1. */
static int duplicate(struct stage *s, const struct ksh_redir *r, const char *target)
{
	if (strcmp(target, "-") == 0) {
		s->fd[r->fd] = (struct sfd){.kind = SFD_CLOSED};
		return 0;
	}
	size_t len = strlen(target);
	if (len && strspn(target, "0123456789") == len) {
		int n = len > 2 ? KSH_FDS : atoi(target);
		if (n >= KSH_FDS || s->fd[n].kind == SFD_CLOSED) {
			stage_say(s, "%s: Bad file descriptor", target);
			return -1;
		}
		s->fd[r->fd] = s->fd[n];
		return 0;
	}
	if (r->op == KSH_R_DUPOUT && r->fd == 1) {
		int fd = open_target(s, target, KSH_R_OUT);
		if (fd < 0)
			return -1;
		s->fd[1] = s->fd[2] = (struct sfd){.kind = SFD_HOST, .host = fd};
		return 0;
	}
	stage_say(s, "%s: ambiguous redirect", r->word);
	return -1;
}

static int redirect(struct stage *s, const struct ksh_redir *r)
{
	if (r->fd >= KSH_FDS) {
		stage_say(s, "%d: file descriptor out of range (karui-sh stages have %d)", r->fd,
			  KSH_FDS);
		return -1;
	}
	if (r->op == KSH_R_HEREDOC) {
		int fd = heredoc_fd(s, r);
		if (fd < 0)
			return -1;
		s->fd[r->fd] = (struct sfd){.kind = SFD_HOST, .host = fd};
		return 0;
	}
	struct ksh_strv w = {0};
	if (ksh_expand(s->sh, r->word, KSH_X_FIELDS, &w) < 0)
		return -1;
	int ret = -1;
	if (w.n != 1) {
		stage_say(s, "%s: ambiguous redirect", r->word);
	} else if (r->op == KSH_R_DUPIN || r->op == KSH_R_DUPOUT) {
		ret = duplicate(s, r, w.v[0]);
	} else {
		int fd = open_target(s, w.v[0], r->op);
		if (fd >= 0) {
			s->fd[r->fd] = (struct sfd){.kind = SFD_HOST, .host = fd};
			ret = 0;
		}
	}
	ksh_strv_free(&w);
	return ret;
}

static int redirect_all(struct stage *s)
{
	for (size_t i = 0; i < s->cmd->nredir; i++)
		if (redirect(s, &s->cmd->redir[i]) < 0)
			return -1;
	return 0;
}

/* The stage's fds (no links) become the shell's; saved: what they were. */
static void install_fds(struct stage *s, int *saved)
{
	memcpy(saved, s->sh->fd, sizeof s->sh->fd);
	for (int i = 0; i < KSH_FDS; i++)
		s->sh->fd[i] = host_fd(s, i);
}

/* ---- finding programs ---- */

/* A command name's program: the name itself if it has a /, else the
 * first executable regular file in pathvar (NULL: the system's default
 * path).  0 and a malloc'd *path; else the status bash gives (127: not
 * found, 126: found but not executable, *path then naming what was
 * found) and *why, what to say after the name. */
static int find_program(const struct shell *sh, const char *name, const char *pathvar,
			char **path, const char **why)
{
	struct stat st;
	if (strchr(name, '/')) {
		char *abs = ksh_path(sh, name);
		int r = 0;
		if (stat(abs, &st) < 0) {
			*why = strerror(errno);
			r = errno == ENOENT || errno == ENOTDIR ? 127 : 126;
		} else if (S_ISDIR(st.st_mode)) {
			*why = "Is a directory";
			r = 126;
		} else if (access(abs, X_OK) < 0) {
			*why = strerror(errno);
			r = 126;
		}
		free(abs);
		if (!r)
			*path = ksh_xstrdup(name);
		return r;
	}
	char dflt[256];
	if (!pathvar) {
		size_t n = confstr(_CS_PATH, dflt, sizeof dflt);
		pathvar = n > 0 && n <= sizeof dflt ? dflt : "/usr/bin:/bin";
	}
	char *denied = NULL;
	size_t nl = strlen(name);
	for (const char *p = pathvar;; p++) {
		const char *end = strchr(p, ':');
		size_t dl = end ? (size_t)(end - p) : strlen(p);
		char *cand = ksh_xmalloc(dl + nl + 3);
		sprintf(cand, "%.*s/%s", (int)(dl ? dl : 1), dl ? p : ".", name);
		char *abs = ksh_path(sh, cand);
		if (stat(abs, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(abs, X_OK) == 0) {
				free(abs);
				free(denied);
				*path = cand;
				return 0;
			}
			if (!denied) {
				denied = cand;
				cand = NULL;
			}
		}
		free(abs);
		free(cand);
		if (!end)
			break;
		p = end;
	}
	if (denied) {
		*why = "Permission denied";
		*path = denied; /* bash names the file it found */
		return 126;
	}
	*why = "command not found";
	return 127;
}

/* ---- running a stage ---- */

/* -v: how the stage runs, on the shell's own stderr. */
static void verbose(const struct stage *s, const char *way, const char *why)
{
	if (s->sh->verbose && s->argv.n)
		ksh_say(s->sh, KSH_ERR(s->sh), "%s: %s%s%s%s", s->argv.v[0], way, why ? " (" : "",
			why ? why : "", why ? ")" : "");
}

/* Whether any fd of the stage is an end of l. */
static bool uses(const struct stage *s, const struct ksh_link *l)
{
	for (int i = 0; i < KSH_FDS; i++)
		if (s->fd[i].kind == SFD_LINK && s->fd[i].link == l)
			return true;
	return false;
}

static void fill_spawn(const struct stage *s, struct ksh_spawn *sp, const char *path,
		       char **argv, char **envp)
{
	*sp = (struct ksh_spawn){.path = path, .argv = argv, .envp = envp, .cwd = s->sh->cwd};
	for (int i = 0; i < KSH_FDS; i++)
		sp->fd[i] = spec_of(&s->fd[i]);
}

/* The file at path looks binary (ksh_binary_file). */
static bool binary(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool b = fd >= 0 && ksh_binary_file(fd);
	if (fd >= 0)
		close(fd);
	return b;
}

/* The stage as a child process: its link out is a kernel pipe, its link
 * in gets one (a pump from a karui pipe).  A file the kernel refuses
 * (ENOEXEC) runs as a script of this shell unless it looks binary: then
 * ENOEXEC, as bash refuses it. */
static int spawn_child(struct stage *s, struct ksh_link *in, struct ksh_link *out,
		       const char *path, const char *abs, char **envp)
{
	int e = out ? ksh_link_make_kernel(out) : 0;
	if (!e && in && uses(s, in))
		e = ksh_link_for_child_reader(in);
	if (e)
		return e;
	struct ksh_spawn sp;
	s->runner = &ksh_runner_child;
	fill_spawn(s, &sp, abs, s->argv.v, envp);
	e = ksh_runner_child.spawn(&sp, &s->proc);
	if (e != ENOEXEC || !s->sh->self || binary(abs))
		return e;
	/* no #! line: a script for this shell, as POSIX sh runs it */
	struct ksh_strv av = {0};
	ksh_strv_push(&av, ksh_xstrdup(s->sh->self));
	ksh_strv_push(&av, ksh_xstrdup(path));
	for (size_t i = 1; i < s->argv.n; i++)
		ksh_strv_push(&av, ksh_xstrdup(s->argv.v[i]));
	fill_spawn(s, &sp, s->sh->self, av.v, envp);
	e = ksh_runner_child.spawn(&sp, &s->proc);
	ksh_strv_free(&av);
	return e;
}

static const char *child_reason(const struct shell *sh, int uproc_err)
{
	if (sh->stages == KSH_STAGES_CHILD)
		return "KARUI_SH_STAGES=child";
	switch (uproc_err) {
	case ENOEXEC: return "no μprocess image";
	case EPERM: return "setuid or setgid";
	case EADDRINUSE: return "its fixed address is taken";
	default: return "no μprocesses here";
	}
}

static void start_program(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	struct shell *sh = s->sh;
	const char *name = s->argv.v[0], *why = NULL, *pathvar = ksh_var_get(sh, "PATH");
	for (size_t i = 0; i < s->assign.n; i++)
		if (strncmp(s->assign.v[i], "PATH=", 5) == 0)
			pathvar = s->assign.v[i] + 5;
	char *path = NULL;
	int st = find_program(sh, name, pathvar, &path, &why);
	if (st) {
		stage_say(s, "%s: %s", st == 126 && path ? path : name, why);
		free(path);
		fail(s, st);
		return;
	}
	char *abs = ksh_path(sh, path);
	struct ksh_strv env;
	ksh_environ(sh, &s->assign, &env);
	int e = ENOTSUP;
	if (sh->stages != KSH_STAGES_CHILD && !sh->uproc_off) {
		struct ksh_spawn sp;
		s->runner = &ksh_runner_uproc;
		fill_spawn(s, &sp, abs, s->argv.v, env.v);
		e = ksh_runner_uproc.spawn(&sp, &s->proc);
		if (e == ENOTSUP && sh->stages == KSH_STAGES_AUTO)
			sh->uproc_off = true;
	}
	bool refused = e == ENOTSUP || e == ENOEXEC || e == EPERM || e == EADDRINUSE;
	if (e == 0) {
		s->way = WAY_UPROC;
		verbose(s, ksh_runner_uproc.way, kr_uproc_reused(s->proc.up) ? "kept image" : NULL);
	} else if (refused && sh->stages == KSH_STAGES_UPROC) {
		stage_say(s, "%s: cannot run as a μprocess: %s", name, strerror(e));
		fail(s, 126);
	} else if (refused) {
		int ue = e;
		e = spawn_child(s, in, out, path, abs, env.v);
		if (e == 0) {
			s->way = WAY_CHILD;
			verbose(s, ksh_runner_child.way, child_reason(sh, ue));
		}
	}
	if (e == ENOEXEC && s->way == WAY_NONE) {
		stage_say(s, "%s: cannot execute binary file: %s", path, strerror(e));
		fail(s, 126);
	} else if (e && s->way == WAY_NONE) {
		stage_say(s, "%s: %s", name, strerror(e));
		fail(s, e == ENOENT ? 127 : 126);
	}
	ksh_strv_free(&env);
	free(abs);
	free(path);
}

static const struct ksh_func *find_func(const struct shell *sh, const char *name)
{
	for (size_t i = 0; i < sh->nfuncs; i++)
		if (strcmp(sh->funcs[i].name, name) == 0)
			return &sh->funcs[i];
	return NULL;
}

/* Runs on a stage's microprocess: the command in the subshell, whose fds
 * are the stage's. */
static void *sub_stage_main(void *arg)
{
	struct stage *s = arg;
	struct shell *sub = s->sub;
	if (s->cmd->kind == KSH_C_SIMPLE) {
		struct stage in = {.sh = sub, .cmd = s->cmd, .argv = s->argv, .assign = s->assign,
				   .expanded = true, .redirected = true};
		s->argv = (struct ksh_strv){0};
		s->assign = (struct ksh_strv){0};
		sub->status = exec_simple(sub, &in);
	} else {
		sub->status = run_compound(sub, s->cmd);
	}
	ksh_sub_finish(sub);
	return NULL;
}

/* Not a program: a subshell on a microprocess, with kernel pipes. */
static void start_sub(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	int e = out ? ksh_link_make_kernel(out) : 0;
	if (!e && in && uses(s, in))
		e = ksh_link_for_child_reader(in);
	if (!e) {
		int fds[KSH_FDS];
		for (int i = 0; i < KSH_FDS; i++)
			fds[i] = host_fd(s, i);
		s->sub = ksh_sub_new(s->sh, fds);
		/* said before it starts: its microprocess takes s->argv */
		if (s->argv.n && !find_func(s->sh, s->argv.v[0]))
			verbose(s, "built-in", NULL);
		s->way = WAY_SUB;
		kr_attr a = {.stack_size = 8u << 20};
		e = kr_mp_create(&s->mp, &a, sub_stage_main, s);
		if (e) {
			s->way = WAY_NONE;
			ksh_sub_finish(s->sub);
			ksh_sub_free(s->sub);
			s->sub = NULL;
		}
	}
	if (e) {
		stage_say(s, "%s: %s", s->argv.n ? s->argv.v[0] : "(", strerror(e));
		fail(s, 1);
	}
}

static void start_stage(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	struct shell *sh = s->sh;
	bool simple = s->cmd->kind == KSH_C_SIMPLE;
	bool expanded = !simple || s->expanded || expand_stage(s) == 0;
	bool special = false;
	bool program = simple && expanded && s->argv.n && !ksh_builtin(s->argv.v[0], &special) &&
		       !find_func(sh, s->argv.v[0]);
	bool karui = program && sh->stages != KSH_STAGES_CHILD && !sh->uproc_off;
	int e = out ? ksh_link_open(out, karui) : 0;
	init_fds(s, in, out);
	if (e) {
		ksh_say(sh, KSH_ERR(sh), "cannot make a pipe: %s", strerror(e));
		fail(s, 1);
	} else if (!expanded) {
		fail(s, sh->xerr ? sh->xerr : 1); /* a subshell's error: the pipeline goes on */
	} else if (!s->redirected && redirect_all(s) < 0) {
		fail(s, 1);
	} else if (program) {
		start_program(s, in, out);
	} else {
		start_sub(s, in, out);
	}
	if (in)
		ksh_link_release(in, KR_UPIPE_READ);
	if (out)
		ksh_link_release(out, KR_UPIPE_WRITE);
	close_opened(s);
}

static void wait_stage(struct stage *s)
{
	if (s->way == WAY_SUB) {
		kr_mp_join(s->mp, NULL);
		s->status = s->sub->status;
		ksh_sub_free(s->sub);
	} else if (s->way == WAY_UPROC || s->way == WAY_CHILD) {
		int e = s->runner->wait(&s->proc, &s->status);
		if (e) {
			ksh_say(s->sh, KSH_ERR(s->sh), "%s: %s", s->argv.v[0], strerror(e));
			s->status = 1;
		}
	}
	ksh_strv_free(&s->argv);
	ksh_strv_free(&s->assign);
}

/* Ctrl-C.  The terminal signals the shell's process group: the child
 * processes a pipeline has, and the shell, whose own thread blocks SIGINT
 * and SIGQUIT and whose interrupter (main.c) passes them on to the
 * μprocesses of the pipelines running in the foreground, which are no
 * processes the terminal knows, and ends the command line. */
struct fg_entry {
	struct stage *st;
	size_t n;
	long job; /* a background job's pipeline: not the terminal's */
	struct fg_entry *next;
};

static struct {
	kr_mutex lock;
	struct fg_entry *list;
} fg;

int ksh_fg_init(void)
{
	return kr_mutex_init(&fg.lock);
}

void ksh_interrupt_reset(void)
{
	__atomic_store_n(&interrupted, 0, __ATOMIC_RELAXED);
}

/* The last stage first: a stage that the signal ends closes its end of
 * the pipe, and the next stage, not yet signalled, could see the end of
 * its input and exit 0 before its own signal came, where a terminal
 * signals every process of a pipeline at once. */
void ksh_interrupt(int sig)
{
	__atomic_store_n(&interrupted, 1, __ATOMIC_RELAXED);
	ksh_trap_pending(sig);
	ksh_stages_kill(0, sig);
}

void ksh_stages_kill(long job, int sig)
{
	kr_mutex_lock(&fg.lock);
	for (struct fg_entry *e = fg.list; e; e = e->next)
		for (size_t i = e->n; e->job == job && i-- > 0;)
			if (e->st[i].way == WAY_UPROC) /* ESRCH once waited for */
				kr_uproc_kill(e->st[i].proc.up, sig);
			else if (e->st[i].way == WAY_CHILD && job)
				kill(e->st[i].proc.pid, sig);
	kr_mutex_unlock(&fg.lock);
}

static void fg_add(struct fg_entry *e)
{
	kr_mutex_lock(&fg.lock);
	e->next = fg.list;
	fg.list = e;
	kr_mutex_unlock(&fg.lock);
}

static void fg_remove(struct fg_entry *e)
{
	kr_mutex_lock(&fg.lock);
	for (struct fg_entry **p = &fg.list; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	kr_mutex_unlock(&fg.lock);
}

/* first: the first stage, expanded already, or NULL */
static int run_stages(struct shell *sh, const struct ksh_cmd *cmds, size_t n,
		      const struct stage *first)
{
	struct stage *st = ksh_xmalloc(n * sizeof *st);
	struct ksh_link *links = ksh_xmalloc(n * sizeof *links);
	struct fg_entry fe = {.st = st, .n = 0, .job = sh->job};
	fg_add(&fe);
	for (size_t i = 0; i < n; i++) {
		st[i] = i == 0 && first ? *first : (struct stage){.sh = sh, .cmd = &cmds[i]};
		links[i] = (struct ksh_link){.rfd = -1, .wfd = -1};
		start_stage(&st[i], i ? &links[i - 1] : NULL, i + 1 < n ? &links[i] : NULL);
		kr_mutex_lock(&fg.lock);
		fe.n = i + 1;
		kr_mutex_unlock(&fg.lock);
	}
	for (size_t i = 0; i < n; i++)
		wait_stage(&st[i]);
	fg_remove(&fe);
	for (size_t i = 0; i + 1 < n; i++)
		ksh_link_join(&links[i]);
	int status = st[n - 1].status;
	free(st);
	free(links);
	return status;
}

/* ---- commands the shell runs itself ---- */

/* set -x: the command, as dash shows it, on the shell's fd 2. */
static void trace(struct shell *sh, const struct ksh_strv *assign, const struct ksh_strv *argv)
{
	if (!sh->opt_x)
		return;
	size_t len = 2;
	for (size_t i = 0; i < assign->n; i++)
		len += strlen(assign->v[i]) + 1;
	for (size_t i = 0; i < argv->n; i++)
		len += strlen(argv->v[i]) + 1;
	char *line = ksh_xmalloc(len + 1), *p = line;
	*p++ = '+';
	for (size_t i = 0; i < assign->n; i++)
		p += sprintf(p, " %s", assign->v[i]);
	for (size_t i = 0; i < argv->n; i++)
		p += sprintf(p, " %s", argv->v[i]);
	*p++ = '\n';
	const char *ps4 = ksh_var_get(sh, "PS4");
	if (ps4 && strcmp(ps4, "+ ") != 0) {
		ksh_write_all(KSH_ERR(sh), ps4, strlen(ps4));
		ksh_write_all(KSH_ERR(sh), line + 2, (size_t)(p - line - 2));
	} else {
		ksh_write_all(KSH_ERR(sh), line, (size_t)(p - line));
	}
	free(line);
}

static void set_assignments(struct shell *sh, const struct ksh_strv *assign)
{
	for (size_t i = 0; i < assign->n; i++) {
		char *eq = strchr(assign->v[i], '=');
		*eq = 0;
		ksh_var_set(sh, assign->v[i], eq + 1, false);
		*eq = '=';
	}
}

static int call_function(struct shell *sh, const struct ksh_func *f, const struct ksh_strv *argv)
{
	if (sh->calls >= KSH_MAX_CALLS) {
		ksh_say(sh, KSH_ERR(sh), "%s: maximum function nesting level exceeded (%d)",
			argv->v[0], KSH_MAX_CALLS);
		sh->abandon = true;
		if (sh->source)
			sh->exiting = true;
		return 2;
	}
	const struct ksh_cmd *body = f->body;
	struct ksh_arena *arena = f->arena, *outer = sh->arena;
	ksh_arena_ref(arena); /* the body may redefine its own function */
	char **args = sh->args;
	int nargs = sh->nargs, loops = sh->loops;
	sh->args = ksh_xmalloc((argv->n + 1) * sizeof *sh->args);
	for (size_t i = 1; i < argv->n; i++)
		sh->args[i - 1] = ksh_xstrdup(argv->v[i]);
	sh->nargs = (int)argv->n - 1;
	sh->loops = 0;
	sh->arena = arena;
	sh->calls++;
	sh->functions++;
	int status = run_cmd(sh, body);
	sh->functions--;
	sh->calls--;
	if (sh->returning) {
		sh->returning = false;
		status = sh->status;
	}
	for (int i = 0; i < sh->nargs; i++)
		free(sh->args[i]);
	free(sh->args);
	sh->args = args;
	sh->nargs = nargs;
	sh->loops = loops;
	sh->arena = outer;
	ksh_arena_unref(arena);
	return status;
}

/* A built-in or a function, in the shell: its redirections for as long
 * as it runs; the assignments of a special built-in stay, others are
 * put back after. */
static int run_here(struct shell *sh, struct stage *s, ksh_builtin_fn *fn, bool special,
		    const struct ksh_func *func)
{
	if (!s->redirected) {
		init_fds(s, NULL, NULL);
		if (redirect_all(s) < 0) {
			close_opened(s);
			return special ? ksh_special_error(sh) : 1;
		}
	}
	if (!s->redirected)
		verbose(s, "built-in", NULL); /* else its stage has said so */
	bool exec_fds = fn && strcmp(s->argv.v[0], "exec") == 0 && s->argv.n == 1;
	int saved[KSH_FDS];
	if (!s->redirected)
		install_fds(s, saved);
	struct ksh_var_saved *vs = NULL;
	if (special) {
		set_assignments(sh, &s->assign);
	} else {
		vs = ksh_xmalloc((s->assign.n + 1) * sizeof *vs);
		for (size_t i = 0; i < s->assign.n; i++) {
			char *eq = strchr(s->assign.v[i], '=');
			*eq = 0;
			ksh_var_save(sh, s->assign.v[i], &vs[i]);
			ksh_var_set(sh, s->assign.v[i], eq + 1, false);
			*eq = '=';
		}
	}
	int status = fn ? fn(sh, s->argv.v) : call_function(sh, func, &s->argv);
	if (vs) {
		for (size_t i = s->assign.n; i-- > 0;)
			ksh_var_restore(sh, &vs[i]);
		free(vs);
	}
	if (exec_fds) {
		/* exec's redirections stay: the fds they opened are the shell's */
		free(s->opened);
		s->opened = NULL;
		s->nopened = 0;
	} else if (!s->redirected) {
		memcpy(sh->fd, saved, sizeof saved);
	}
	close_opened(s);
	return status;
}

/* NAME=value alone: shell variables, after the redirections (which only
 * create or truncate their files); $? is the last command
 * substitution's. */
static int run_assignments(struct shell *sh, struct stage *s)
{
	int status = 0;
	if (!s->redirected) {
		init_fds(s, NULL, NULL);
		status = redirect_all(s) < 0 ? 1 : 0;
		close_opened(s);
	}
	if (status == 0) {
		set_assignments(sh, &s->assign);
		if (sh->subst_status >= 0)
			status = sh->subst_status;
	}
	return status;
}

/* A simple command, expanded: assignments, a built-in, a function or a
 * program (a pipeline of one stage). */
static int exec_simple(struct shell *sh, struct stage *s)
{
	trace(sh, &s->assign, &s->argv);
	int status;
	bool special = false;
	ksh_builtin_fn *fn = s->argv.n ? ksh_builtin(s->argv.v[0], &special) : NULL;
	const struct ksh_func *func = s->argv.n && !special ? find_func(sh, s->argv.v[0]) : NULL;
	if (func)
		fn = NULL; /* a function goes before a regular built-in */
	if (fn && strcmp(s->argv.v[0], "exec") == 0 && s->argv.n > 1) {
		/* exec CMD: the shell ends with CMD's status */
		free(s->argv.v[0]);
		memmove(s->argv.v, s->argv.v + 1, s->argv.n * sizeof *s->argv.v);
		s->argv.n--;
		fn = NULL;
		func = NULL;
		sh->exiting = true;
	}
	if (!s->argv.n) {
		status = run_assignments(sh, s);
	} else if (fn || func) {
		status = run_here(sh, s, fn, special, func);
	} else {
		struct stage first = *s;
		*s = (struct stage){0};
		return run_stages(sh, first.cmd, 1, &first); /* which frees argv and assign */
	}
	ksh_strv_free(&s->argv);
	ksh_strv_free(&s->assign);
	return status;
}

static int run_simple(struct shell *sh, const struct ksh_cmd *c)
{
	struct stage s = {.sh = sh, .cmd = c};
	if (expand_stage(&s) < 0) {
		ksh_strv_free(&s.argv);
		ksh_strv_free(&s.assign);
		return expansion_failed(sh);
	}
	return exec_simple(sh, &s);
}

/* ---- compound commands ---- */

static void run_list(struct shell *sh, const struct ksh_list *l);

/* A list as a condition: $? of it, with set -e off. */
static int condition(struct shell *sh, const struct ksh_list *l)
{
	sh->tested++;
	run_list(sh, l);
	sh->tested--;
	return sh->status;
}

/* After a loop's body or condition: whether the loop goes on, taking
 * the break or continue that is its own. */
static bool loop_goes_on(struct shell *sh)
{
	if (sh->breaks == 0)
		return !ksh_stopped(sh);
	if (sh->breaks == 1 && sh->continuing) {
		sh->breaks = 0;
		sh->continuing = false;
		return !ksh_stopped(sh);
	}
	if (--sh->breaks == 0)
		sh->continuing = false;
	return false;
}

static int run_while(struct shell *sh, const struct ksh_cmd *c)
{
	int status = 0;
	sh->loops++;
	for (;;) {
		int cond = condition(sh, c->cond);
		if (!loop_goes_on(sh))
			break;
		if ((cond == 0) != (c->kind == KSH_C_WHILE))
			break;
		run_list(sh, c->body);
		status = sh->status;
		if (!loop_goes_on(sh))
			break;
	}
	sh->loops--;
	return status;
}

static int run_for(struct shell *sh, const struct ksh_cmd *c)
{
	struct ksh_strv items = {0};
	if (c->has_in) {
		sh->xerr = 1;
		for (size_t i = 0; i < c->nword; i++)
			if (ksh_expand(sh, c->word[i], KSH_X_FIELDS, &items) < 0) {
				ksh_strv_free(&items);
				return expansion_failed(sh);
			}
	} else {
		for (int i = 0; i < sh->nargs; i++)
			ksh_strv_push(&items, ksh_xstrdup(sh->args[i]));
	}
	int status = 0;
	sh->loops++;
	for (size_t i = 0; i < items.n; i++) {
		ksh_var_set(sh, c->name, items.v[i], false);
		run_list(sh, c->body);
		status = sh->status;
		if (!loop_goes_on(sh))
			break;
	}
	sh->loops--;
	ksh_strv_free(&items);
	return status;
}

static int run_case(struct shell *sh, const struct ksh_cmd *c)
{
	struct ksh_strv w = {0};
	sh->xerr = 1;
	if (ksh_expand(sh, c->word[0], KSH_X_WORD, &w) < 0) {
		ksh_strv_free(&w);
		return expansion_failed(sh);
	}
	int status = 0;
	bool matched = false;
	for (size_t i = 0; i < c->nitem && !matched; i++) {
		const struct ksh_case_item *it = &c->item[i];
		for (size_t j = 0; j < it->npat && !matched; j++) {
			struct ksh_strv pat = {0};
			if (ksh_expand(sh, it->pat[j], KSH_X_PATTERN, &pat) < 0) {
				ksh_strv_free(&pat);
				ksh_strv_free(&w);
				return expansion_failed(sh);
			}
			matched = fnmatch(pat.v[0], w.v[0], 0) == 0;
			ksh_strv_free(&pat);
		}
		if (matched) {
			sh->status = 0;
			run_list(sh, it->body);
			status = sh->status;
		}
	}
	ksh_strv_free(&w);
	return status;
}

static int run_if(struct shell *sh, const struct ksh_cmd *c)
{
	for (size_t i = 0; i < c->nclause; i++) {
		int cond = condition(sh, c->clause[i].cond);
		if (ksh_stopped(sh))
			return cond;
		if (cond == 0) {
			run_list(sh, c->clause[i].body);
			return sh->status;
		}
	}
	if (c->else_part) {
		run_list(sh, c->else_part);
		return sh->status;
	}
	return 0;
}

/* A compound command without its redirections. */
static int run_compound(struct shell *sh, const struct ksh_cmd *c)
{
	switch (c->kind) {
	case KSH_C_GROUP:
		sh->status = 0;
		run_list(sh, c->body);
		return sh->status;
	case KSH_C_SUBSHELL: {
		struct shell *sub = ksh_sub_new(sh, NULL);
		run_list(sub, c->body);
		ksh_sub_finish(sub);
		int status = sub->status;
		ksh_sub_free(sub);
		return status;
	}
	case KSH_C_IF: return run_if(sh, c);
	case KSH_C_WHILE:
	case KSH_C_UNTIL: return run_while(sh, c);
	case KSH_C_FOR: return run_for(sh, c);
	case KSH_C_CASE: return run_case(sh, c);
	case KSH_C_FUNCDEF:
		ksh_func_define(sh, c->name, c->func);
		return 0;
	default:
		return run_simple(sh, c);
	}
}

/* A command in the shell itself, with its redirections. */
static int run_cmd(struct shell *sh, const struct ksh_cmd *c)
{
	sh->line = c->line;
	if (c->kind == KSH_C_SIMPLE) {
		int status = run_simple(sh, c);
		check_errexit(sh, status);
		return status;
	}
	if (c->kind == KSH_C_FUNCDEF || c->nredir == 0) {
		int status = run_compound(sh, c);
		if (c->kind == KSH_C_SUBSHELL)
			check_errexit(sh, status);
		return status;
	}
	struct stage s = {.sh = sh, .cmd = c};
	init_fds(&s, NULL, NULL);
	if (redirect_all(&s) < 0) {
		close_opened(&s);
		return 1;
	}
	int saved[KSH_FDS];
	install_fds(&s, saved);
	int status = run_compound(sh, c);
	memcpy(sh->fd, saved, sizeof saved);
	close_opened(&s);
	if (c->kind == KSH_C_SUBSHELL)
		check_errexit(sh, status);
	return status;
}

static int run_pipeline(struct shell *sh, const struct ksh_pipeline *pl)
{
	sh->line = pl->cmd[0].line; /* not changed while the stages run */
	if (pl->ncmd == 1)
		return run_cmd(sh, &pl->cmd[0]);
	int status = run_stages(sh, pl->cmd, pl->ncmd, NULL);
	check_errexit(sh, pl->bang ? 0 : status);
	return status;
}

void ksh_run_andor(struct shell *sh, const struct ksh_andor *ao)
{
	for (size_t j = 0; j < ao->n && !ksh_stopped(sh); j++) {
		const struct ksh_andor_item *it = &ao->item[j];
		if ((it->op == KSH_AO_AND && sh->status != 0) ||
		    (it->op == KSH_AO_OR && sh->status == 0))
			continue;
		int tested = (j + 1 < ao->n) + it->pl.bang;
		sh->tested += tested;
		int status = run_pipeline(sh, &it->pl);
		sh->tested -= tested;
		sh->status = it->pl.bang ? !status : status;
	}
}

static void run_list(struct shell *sh, const struct ksh_list *l)
{
	for (size_t i = 0; l && i < l->nao && !ksh_stopped(sh); i++) {
		if (l->ao[i].background) {
			ksh_job_start(sh, &l->ao[i]);
			sh->status = 0;
		} else {
			ksh_run_andor(sh, &l->ao[i]);
		}
		ksh_run_traps(sh);
	}
}

void ksh_run(struct shell *sh, const struct ksh_list *l)
{
	run_list(sh, l);
}

/* ---- paths ---- */

char *ksh_path(const struct shell *sh, const char *path)
{
	if (path[0] == '/' || !path[0] || !sh->cwd)
		return ksh_xstrdup(path);
	size_t cl = strlen(sh->cwd);
	char *p = ksh_xmalloc(cl + strlen(path) + 2);
	sprintf(p, "%s%s%s", sh->cwd, cl && sh->cwd[cl - 1] == '/' ? "" : "/", path);
	return p;
}
