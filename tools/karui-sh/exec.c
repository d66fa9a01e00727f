/*
 * karui-sh's executor: runs a parsed command line — and-or lists,
 * pipelines, simple commands with their redirections and assignments —
 * with bash's semantics, each external command through a runner (run.h).
 *
 * A pipeline's stages start one after the other, left to right, and then
 * all run at once; the shell waits for them in order, and the pipeline's
 * status is the last stage's (negated by `!`).  Starting stage i:
 *
 *   1. expand its words and assignments (expand.c);
 *   2. open the link to stage i+1: a karui pipe if stage i is to be tried
 *      as a μprocess, else a kernel pipe (run.h explains links);
 *   3. give it fds: 0 from link i-1, 1 to link i, 2 and the shell's
 *      other inheritable fds as they are, then its redirections, left to
 *      right, each opening a file (close-on-exec) or copying an fd entry;
 *   4. run it: a built-in on a microprocess of the shell (as in a
 *      subshell: it changes nothing); a program as a μprocess, or, when
 *      the image layer refuses it (ENOEXEC, EPERM) or is not there
 *      (ENOTSUP: from then on every stage is a child), as a child process;
 *      a file the kernel refuses too (ENOEXEC) as a script of this shell,
 *      unless it looks binary (bash's test): then bash's "cannot execute
 *      binary file" and status 126;
 *   5. let go of the link ends and files the stage now holds.
 *
 * Stage fds name links, not their ends' fds: a link may still change
 * (karui pipe to kernel pipe, or a pump put in) until the stages on both
 * of its sides have started, and `2>&1` must follow it.  A stage that
 * fails before it runs (a redirection, command not found) says why on
 * its own fd 2, as the subshell of bash does — so `nosuch 2>/dev/null`
 * is silent; the shell writes that through a kernel pipe, never into a
 * karui pipe, whose writer waits for a reader that may not start yet.
 *
 * A simple command alone in its pipeline runs in the shell when it is a
 * built-in (cd, export, exit change the shell) or has no command name
 * (NAME=value sets shell variables).  NAME=value before a built-in holds
 * while it runs; before a program, in its environment only.
 *
 * An error of expansion (bad substitution) ends a command alone, the
 * command line and a non-interactive shell with status 1; in a pipeline,
 * its stage alone (bash's subshell).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

enum way { WAY_NONE, WAY_DONE, WAY_BUILTIN, WAY_UPROC, WAY_CHILD };

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
	ksh_builtin_fn *builtin;
	bool expanded; /* argv and assign are done */
	kr_mp *mp;   /* a built-in's microprocess */
	int out, err; /* a built-in's fds 1 and 2, its own */
};

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

/* ---- expansion of a stage ---- */

/* NAME=value with value expanded as one field. */
static int expand_assignment(struct shell *sh, const char *word, struct ksh_strv *out)
{
	size_t n = ksh_assignment_name(word);
	struct ksh_strv v = {0};
	if (ksh_expand(sh, word + n + 1, false, &v) < 0)
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
	for (size_t i = 0; i < c->nassign; i++)
		if (expand_assignment(s->sh, c->assign[i], &s->assign) < 0)
			return -1;
	bool export = c->nword && strcmp(c->word[0], "export") == 0;
	for (size_t i = 0; i < c->nword; i++) {
		int r = export && i > 0 && ksh_assignment_name(c->word[i]) ?
			expand_assignment(s->sh, c->word[i], &s->argv) :
			ksh_expand(s->sh, c->word[i], true, &s->argv);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* ---- fds and redirections ---- */

static void init_fds(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	for (int i = 0; i < KSH_FDS; i++)
		s->fd[i] = s->sh->inherited[i] ? (struct sfd){.kind = SFD_HOST, .host = i}
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
	int fd = open(path, open_flags(op) | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0) {
		stage_say(s, "%s: %s", path, strerror(errno));
		return -1;
	}
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
	struct ksh_strv w = {0};
	if (ksh_expand(s->sh, r->word, true, &w) < 0)
		return -1;
	int ret = -1;
	if (w.n != 1) {
		stage_say(s, "%s: ambiguous redirect", r->word);
	} else if (r->fd >= KSH_FDS) {
		stage_say(s, "%d: file descriptor out of range (karui-sh stages have %d)", r->fd,
			  KSH_FDS);
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

/* ---- finding programs ---- */

/* A command name's program: the name itself if it has a /, else the
 * first executable regular file in pathvar (NULL: the system's default
 * path).  0 and a malloc'd *path; else the status bash gives (127: not
 * found, 126: found but not executable, *path then naming what was
 * found) and *why, what to say after the name. */
static int find_program(const char *name, const char *pathvar, char **path, const char **why)
{
	struct stat st;
	if (strchr(name, '/')) {
		if (stat(name, &st) < 0) {
			*why = strerror(errno);
			return errno == ENOENT || errno == ENOTDIR ? 127 : 126;
		}
		if (S_ISDIR(st.st_mode)) {
			*why = "Is a directory";
			return 126;
		}
		if (access(name, X_OK) < 0) {
			*why = strerror(errno);
			return 126;
		}
		*path = ksh_xstrdup(name);
		return 0;
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
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(cand, X_OK) == 0) {
				free(denied);
				*path = cand;
				return 0;
			}
			if (!denied) {
				denied = cand;
				cand = NULL;
			}
		}
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
	if (s->sh->verbose)
		ksh_say(s->sh, 2, "%s: %s%s%s%s", s->argv.v[0], way, why ? " (" : "",
			why ? why : "", why ? ")" : "");
}

static void *builtin_main(void *arg)
{
	struct stage *s = arg;
	s->status = s->builtin(s->sh, s->argv.v, s->out, s->err, true);
	if (s->out >= 0)
		close(s->out);
	if (s->err >= 0)
		close(s->err);
	return NULL;
}

/* A built-in in a pipeline: on a microprocess of its own, with its own
 * copies of its fds 1 and 2. */
static void start_builtin(struct stage *s)
{
	int out = host_fd(s, 1), err = host_fd(s, 2);
	s->out = out >= 0 ? fcntl(out, F_DUPFD_CLOEXEC, 0) : -1;
	s->err = err >= 0 ? fcntl(err, F_DUPFD_CLOEXEC, 0) : -1;
	int e = kr_mp_create(&s->mp, NULL, builtin_main, s);
	if (e) {
		stage_say(s, "%s: %s", s->argv.v[0], strerror(e));
		if (s->out >= 0)
			close(s->out);
		if (s->err >= 0)
			close(s->err);
		fail(s, 1);
		return;
	}
	s->way = WAY_BUILTIN;
	verbose(s, "built-in", NULL);
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
		       const char *path, char **envp)
{
	int e = out ? ksh_link_make_kernel(out) : 0;
	if (!e && in && uses(s, in))
		e = ksh_link_for_child_reader(in);
	if (e)
		return e;
	struct ksh_spawn sp;
	s->runner = &ksh_runner_child;
	fill_spawn(s, &sp, path, s->argv.v, envp);
	e = ksh_runner_child.spawn(&sp, &s->proc);
	if (e != ENOEXEC || !s->sh->self || binary(path))
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
	int st = find_program(name, pathvar, &path, &why);
	if (st) {
		stage_say(s, "%s: %s", st == 126 && path ? path : name, why);
		free(path);
		fail(s, st);
		return;
	}
	struct ksh_strv env;
	ksh_environ(sh, &s->assign, &env);
	int e = ENOTSUP;
	if (sh->stages != KSH_STAGES_CHILD && !sh->uproc_off) {
		struct ksh_spawn sp;
		s->runner = &ksh_runner_uproc;
		fill_spawn(s, &sp, path, s->argv.v, env.v);
		e = ksh_runner_uproc.spawn(&sp, &s->proc);
		if (e == ENOTSUP && sh->stages == KSH_STAGES_AUTO)
			sh->uproc_off = true;
	}
	bool refused = e == ENOTSUP || e == ENOEXEC || e == EPERM;
	if (e == 0) {
		s->way = WAY_UPROC;
		verbose(s, ksh_runner_uproc.way, kr_uproc_reused(s->proc.up) ? "kept image" : NULL);
	} else if (refused && sh->stages == KSH_STAGES_UPROC) {
		stage_say(s, "%s: cannot run as a μprocess: %s", name, strerror(e));
		fail(s, 126);
	} else if (refused) {
		int ue = e;
		e = spawn_child(s, in, out, path, env.v);
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
	free(path);
}

/* Expansion of a command alone failed: it ends with 1, and so does the
 * command line (and a non-interactive shell). */
static void expansion_failed(struct stage *s)
{
	fail(s, 1);
	s->sh->abandon = true;
	if (s->sh->source)
		s->sh->exiting = true;
}

static void start_stage(struct stage *s, struct ksh_link *in, struct ksh_link *out)
{
	struct shell *sh = s->sh;
	bool expanded = s->expanded || expand_stage(s) == 0;
	bool program = expanded && s->argv.n && !(s->builtin = ksh_builtin(s->argv.v[0]));
	bool karui = program && sh->stages != KSH_STAGES_CHILD && !sh->uproc_off;
	int e = out ? ksh_link_open(out, karui) : 0;
	init_fds(s, in, out);
	if (e) {
		ksh_say(sh, 2, "cannot make a pipe: %s", strerror(e));
		fail(s, 1);
	} else if (!expanded) {
		fail(s, 1); /* a subshell's error: the pipeline goes on */
	} else if (redirect_all(s) < 0) {
		fail(s, 1);
	} else if (!s->argv.n) {
		fail(s, 0); /* NAME=value in a pipeline: a subshell's, gone with it */
	} else if (s->builtin) {
		start_builtin(s);
	} else {
		start_program(s, in, out);
	}
	if (in)
		ksh_link_release(in, KR_UPIPE_READ);
	if (out)
		ksh_link_release(out, KR_UPIPE_WRITE);
	close_opened(s);
}

static void wait_stage(struct stage *s)
{
	if (s->way == WAY_BUILTIN) {
		kr_mp_join(s->mp, NULL);
	} else if (s->way == WAY_UPROC || s->way == WAY_CHILD) {
		int e = s->runner->wait(&s->proc, &s->status);
		if (e) {
			ksh_say(s->sh, 2, "%s: %s", s->argv.v[0], strerror(e));
			s->status = 1;
		}
	}
	ksh_strv_free(&s->argv);
	ksh_strv_free(&s->assign);
}

/* Ctrl-C.  The terminal signals the shell's process group: the child
 * processes a pipeline has, and the shell, whose own thread blocks SIGINT
 * and SIGQUIT and whose interrupter (main.c) passes them on to the
 * μprocesses of the pipeline running in the foreground, which are no
 * processes the terminal knows. */
static struct {
	kr_mutex lock;
	struct stage *st;
	size_t n;
} fg;

int ksh_fg_init(void)
{
	return kr_mutex_init(&fg.lock);
}

/* The last stage first: a stage that the signal ends closes its end of
 * the pipe, and the next stage, not yet signalled, could see the end of
 * its input and exit 0 before its own signal came, where a terminal
 * signals every process of a pipeline at once. */
void ksh_interrupt(int sig)
{
	kr_mutex_lock(&fg.lock);
	for (size_t i = fg.n; i-- > 0;)
		if (fg.st[i].way == WAY_UPROC) /* ESRCH once waited for */
			kr_uproc_kill(fg.st[i].proc.up, sig);
	kr_mutex_unlock(&fg.lock);
}

static void set_fg(struct stage *st, size_t n)
{
	kr_mutex_lock(&fg.lock);
	fg.st = st;
	fg.n = n;
	kr_mutex_unlock(&fg.lock);
}

/* first: the first stage, expanded already, or NULL */
static int run_stages(struct shell *sh, const struct ksh_pipeline *pl, const struct stage *first)
{
	size_t n = pl->ncmd;
	struct stage *st = ksh_xmalloc(n * sizeof *st);
	struct ksh_link *links = ksh_xmalloc(n * sizeof *links);
	for (size_t i = 0; i < n; i++) {
		st[i] = i == 0 && first ? *first : (struct stage){.sh = sh, .cmd = &pl->cmd[i]};
		links[i] = (struct ksh_link){.rfd = -1, .wfd = -1};
		start_stage(&st[i], i ? &links[i - 1] : NULL, i + 1 < n ? &links[i] : NULL);
	}
	set_fg(st, n);
	for (size_t i = 0; i < n; i++)
		wait_stage(&st[i]);
	set_fg(NULL, 0);
	for (size_t i = 0; i + 1 < n; i++)
		ksh_link_join(&links[i]);
	int status = st[n - 1].status;
	free(st);
	free(links);
	return status;
}

/* ---- commands the shell runs itself ---- */

/* A built-in alone: in the shell, its NAME=value assignments in force
 * while it runs. */
static int run_builtin_here(struct stage *s)
{
	struct shell *sh = s->sh;
	init_fds(s, NULL, NULL);
	verbose(s, "built-in", NULL);
	if (redirect_all(s) < 0) {
		close_opened(s);
		return 1;
	}
	struct ksh_var_saved *saved = ksh_xmalloc((s->assign.n + 1) * sizeof *saved);
	for (size_t i = 0; i < s->assign.n; i++) {
		char *eq = strchr(s->assign.v[i], '=');
		*eq = 0;
		ksh_var_save(sh, s->assign.v[i], &saved[i]);
		ksh_var_set(sh, s->assign.v[i], eq + 1, false);
		*eq = '=';
	}
	int status = s->builtin(sh, s->argv.v, host_fd(s, 1), host_fd(s, 2), false);
	for (size_t i = s->assign.n; i-- > 0;)
		ksh_var_restore(sh, &saved[i]);
	free(saved);
	close_opened(s);
	return status;
}

/* NAME=value alone: shell variables, after the redirections (which only
 * create or truncate their files). */
static int run_assignments(struct stage *s)
{
	init_fds(s, NULL, NULL);
	int status = redirect_all(s) < 0 ? 1 : 0;
	close_opened(s);
	if (status == 0)
		for (size_t i = 0; i < s->assign.n; i++) {
			char *eq = strchr(s->assign.v[i], '=');
			*eq = 0;
			ksh_var_set(s->sh, s->assign.v[i], eq + 1, false);
			*eq = '=';
		}
	return status;
}

static int run_pipeline(struct shell *sh, const struct ksh_pipeline *pl)
{
	sh->line = pl->cmd[0].line; /* not changed while the stages run */
	if (pl->ncmd > 1)
		return run_stages(sh, pl, NULL);
	struct stage s = {.sh = sh, .cmd = &pl->cmd[0]};
	int status;
	if (expand_stage(&s) < 0) {
		expansion_failed(&s);
		status = s.status;
	} else if (!s.argv.n) {
		status = run_assignments(&s);
	} else if ((s.builtin = ksh_builtin(s.argv.v[0]))) {
		status = run_builtin_here(&s);
	} else {
		s.expanded = true;
		return run_stages(sh, pl, &s); /* which frees argv and assign */
	}
	ksh_strv_free(&s.argv);
	ksh_strv_free(&s.assign);
	return status;
}

void ksh_run(struct shell *sh, const struct ksh_list *l)
{
	sh->abandon = false;
	for (size_t i = 0; i < l->nao && !sh->exiting && !sh->abandon; i++) {
		const struct ksh_andor *ao = &l->ao[i];
		for (size_t j = 0; j < ao->n && !sh->exiting && !sh->abandon; j++) {
			const struct ksh_andor_item *it = &ao->item[j];
			if ((it->op == KSH_AO_AND && sh->status != 0) ||
			    (it->op == KSH_AO_OR && sh->status == 0))
				continue;
			int status = run_pipeline(sh, &it->pl);
			sh->status = it->pl.bang ? !status : status;
		}
	}
}
