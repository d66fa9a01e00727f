/*
 * karui-sh's subshells, background jobs, command substitution, traps and
 * functions: what makes a copy of the shell, or keeps a tree alive past
 * its command line.
 *
 * A subshell is a copy of struct shell — variables, functions,
 * positional parameters, options, working directory — with fds of its
 * own (duplicates, closed at its end) and traps reset (those that ignore
 * a signal stay).  Nothing it changes reaches the shell it was copied
 * from, which is what POSIX asks of ( ), $( ), a pipeline's stages and
 * `&`; it runs in this process, on a microprocess, so its programs are
 * μprocesses still.  Its `cd` changes its own working directory only:
 * the shell names the directory to whatever it starts (a μprocess's
 * attributes, a child's chdir) and resolves relative paths against it
 * (ksh_path), so the kernel's one working directory per process, which
 * the main shell keeps, is never the subshell's to change.
 *   ( list )      runs on the caller's microprocess: it waits anyway;
 *   a stage       on a microprocess of its own (exec.c);
 *   $( list )     on a microprocess of its own whose fd 1 is a pipe, which
 *                 the caller reads to its end while it runs;
 *   list &        on a microprocess of its own, fd 0 /dev/null (POSIX,
 *                 without job control), found again by `wait` through
 *                 the number $! gives it.
 * $! is no pid: a job may be μprocesses, child processes and built-ins at
 * once.  Its numbers start above the largest pid Linux can give
 * (PID_MAX_LIMIT, 2^22), so a `kill $!` meant for a process finds none
 * rather than another one.
 *
 * A subshell's microprocess gets an 8 MiB stack (reserved, touched only as
 * deep as it runs), as deep as the main thread's: KSH_MAX_CALLS and
 * KSH_MAX_DEPTH bound how deep the executor and the parser go.
 *
 * Trees: a function's body and a job's and-or list live in the arena of
 * the command line that defined or started them; each holds a reference
 * to it (mem.c), so the line's arena outlives the line as long as needed.
 *
 * Traps: the EXIT trap runs when the shell (or subshell) ends, with $?
 * as it was, which stays the shell's status unless the action exits.  A
 * trapped signal gets a handler (the main shell's only: the disposition
 * is the process's) that marks it pending; the executor runs the action
 * after the command that was running, as dash does.  The handler runs on
 * the one thread that does not block signals (karui's VP 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define KSH_JOB_ID_BASE (1L << 22)

struct ksh_job {
	long id;
	int killed; /* the signal `kill` sent it, which ended it */
	kr_mp *mp;
	struct shell *sub;
	const struct ksh_andor *ao;
	struct ksh_job *next;
};

static long next_job_id = KSH_JOB_ID_BASE;

/* ---- functions ---- */

void ksh_func_define(struct shell *sh, const char *name, const struct ksh_cmd *body)
{
	ksh_arena_ref(sh->arena);
	for (size_t i = 0; i < sh->nfuncs; i++)
		if (strcmp(sh->funcs[i].name, name) == 0) {
			ksh_arena_unref(sh->funcs[i].arena);
			sh->funcs[i].body = body;
			sh->funcs[i].arena = sh->arena;
			return;
		}
	if (sh->nfuncs == sh->capfuncs) {
		sh->capfuncs = sh->capfuncs ? 2 * sh->capfuncs : 8;
		sh->funcs = ksh_xrealloc(sh->funcs, sh->capfuncs * sizeof *sh->funcs);
	}
	sh->funcs[sh->nfuncs++] =
		(struct ksh_func){.name = ksh_xstrdup(name), .body = body, .arena = sh->arena};
}

void ksh_func_unset(struct shell *sh, const char *name)
{
	for (size_t i = 0; i < sh->nfuncs; i++)
		if (strcmp(sh->funcs[i].name, name) == 0) {
			free(sh->funcs[i].name);
			ksh_arena_unref(sh->funcs[i].arena);
			sh->funcs[i] = sh->funcs[--sh->nfuncs];
			return;
		}
}

/* ---- subshells ---- */

struct shell *ksh_sub_new(const struct shell *sh, const int *fds)
{
	struct shell *c = ksh_xmalloc(sizeof *c);
	*c = *sh;
	c->subshell = true;
	c->exiting = c->abandon = c->returning = c->continuing = false;
	c->breaks = 0;
	c->vars = ksh_xmalloc((sh->nvars ? sh->nvars : 1) * sizeof *c->vars);
	c->capvars = sh->nvars ? sh->nvars : 1;
	for (size_t i = 0; i < sh->nvars; i++)
		c->vars[i] = (struct ksh_var){
			.name = ksh_xstrdup(sh->vars[i].name),
			.value = sh->vars[i].value ? ksh_xstrdup(sh->vars[i].value) : NULL,
			.exported = sh->vars[i].exported};
	c->arg0 = ksh_xstrdup(sh->arg0);
	c->args = ksh_xmalloc((size_t)(sh->nargs + 1) * sizeof *c->args);
	for (int i = 0; i < sh->nargs; i++)
		c->args[i] = ksh_xstrdup(sh->args[i]);
	c->cwd = ksh_xstrdup(sh->cwd);
	c->self = sh->self ? ksh_xstrdup(sh->self) : NULL;
	c->funcs = ksh_xmalloc((sh->nfuncs ? sh->nfuncs : 1) * sizeof *c->funcs);
	c->capfuncs = sh->nfuncs ? sh->nfuncs : 1;
	for (size_t i = 0; i < sh->nfuncs; i++) {
		c->funcs[i] = sh->funcs[i];
		c->funcs[i].name = ksh_xstrdup(sh->funcs[i].name);
		ksh_arena_ref(c->funcs[i].arena);
	}
	if (c->arena)
		ksh_arena_ref(c->arena);
	for (int i = 0; i < KSH_NSIG; i++)
		c->trap[i] = sh->trap[i] && !*sh->trap[i] ? ksh_xstrdup("") : NULL;
	c->jobs = NULL;
	for (int i = 0; i < KSH_FDS; i++) {
		int f = fds ? fds[i] : sh->fd[i];
		c->fd[i] = f >= 0 ? fcntl(f, F_DUPFD_CLOEXEC, 10) : -1;
	}
	c->own_fds = true;
	return c;
}

static void run_exit_trap(struct shell *sh)
{
	char *t = sh->trap[0];
	if (!t || !*t)
		return;
	sh->trap[0] = NULL;
	int status = sh->status;
	sh->exiting = sh->abandon = sh->returning = sh->continuing = false;
	sh->breaks = 0;
	ksh_run_string(sh, t, strlen(t), sh->line, NULL);
	if (!sh->exiting)
		sh->status = status;
	sh->exiting = true;
	free(t);
}

void ksh_shell_exit(struct shell *sh)
{
	run_exit_trap(sh);
	ksh_job_wait(sh, 0);
}

void ksh_sub_finish(struct shell *sub)
{
	ksh_shell_exit(sub);
	if (sub->own_fds)
		for (int i = 0; i < KSH_FDS; i++)
			if (sub->fd[i] >= 0) {
				close(sub->fd[i]);
				sub->fd[i] = -1;
			}
	sub->own_fds = false;
}

void ksh_shell_free(struct shell *sh)
{
	ksh_vars_free(sh);
	for (int i = 0; i < sh->nargs; i++)
		free(sh->args[i]);
	free(sh->args);
	free(sh->arg0);
	free(sh->cwd);
	free(sh->self);
	for (size_t i = 0; i < sh->nfuncs; i++) {
		free(sh->funcs[i].name);
		ksh_arena_unref(sh->funcs[i].arena);
	}
	free(sh->funcs);
	for (int i = 0; i < KSH_NSIG; i++)
		free(sh->trap[i]);
}

void ksh_sub_free(struct shell *sub)
{
	if (sub->own_fds)
		ksh_sub_finish(sub);
	ksh_arena_unref(sub->arena);
	ksh_shell_free(sub);
	free(sub);
}

/* ---- background jobs ---- */

static void *job_main(void *arg)
{
	struct ksh_job *j = arg;
	ksh_run_andor(j->sub, j->ao);
	ksh_sub_finish(j->sub);
	return NULL;
}

void ksh_job_start(struct shell *sh, const struct ksh_andor *ao)
{
	int fds[KSH_FDS];
	memcpy(fds, sh->fd, sizeof fds);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fds[0] = null;
	struct ksh_job *j = ksh_xmalloc(sizeof *j);
	*j = (struct ksh_job){.ao = ao, .sub = ksh_sub_new(sh, fds)};
	if (null >= 0)
		close(null);
	j->sub->background = true;
	j->sub->tested = 0;
	j->id = __atomic_add_fetch(&next_job_id, 1, __ATOMIC_RELAXED);
	j->sub->job = j->id;
	j->sub->job_killed = &j->killed;
	kr_attr a = {.stack_size = 8u << 20};
	int e = kr_mp_create(&j->mp, &a, job_main, j);
	if (e) {
		ksh_say(sh, KSH_ERR(sh), "cannot start a background job: %s", strerror(e));
		ksh_sub_free(j->sub);
		free(j);
		return;
	}
	j->next = sh->jobs;
	sh->jobs = j;
	sh->last_job = j->id;
}

int ksh_job_wait(struct shell *sh, long id)
{
	int status = id ? -1 : 0;
	for (struct ksh_job **p = &sh->jobs; *p;) {
		struct ksh_job *j = *p;
		if (id && j->id != id) {
			p = &j->next;
			continue;
		}
		kr_mp_join(j->mp, NULL);
		if (id)
			status = j->killed ? 128 + j->killed : j->sub->status;
		*p = j->next;
		ksh_sub_free(j->sub);
		free(j);
		if (id)
			break;
	}
	return status;
}

int ksh_job_kill(struct shell *sh, long id, int sig)
{
	for (struct ksh_job *j = sh->jobs; j; j = j->next)
		if (j->id == id) {
			__atomic_store_n(&j->killed, sig ? sig : j->killed, __ATOMIC_RELAXED);
			ksh_stages_kill(id, sig);
			return 0;
		}
	return -1;
}

/* ---- command substitution ---- */

struct capture {
	struct shell *sub;
	const char *text;
	size_t len;
};

static void *capture_main(void *arg)
{
	struct capture *c = arg;
	ksh_run_string(c->sub, c->text, c->len, c->sub->line, NULL);
	ksh_sub_finish(c->sub);
	return NULL;
}

int ksh_capture(struct shell *sh, const char *text, size_t len, char **out, size_t *n,
		int *status)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		ksh_say(sh, KSH_ERR(sh), "cannot make a pipe: %s", strerror(errno));
		return -1;
	}
	int fds[KSH_FDS];
	memcpy(fds, sh->fd, sizeof fds);
	fds[1] = p[1];
	struct capture c = {.sub = ksh_sub_new(sh, fds), .text = text, .len = len};
	close(p[1]);
	c.sub->tested = 0;
	kr_mp *mp;
	kr_attr a = {.stack_size = 8u << 20};
	int e = kr_mp_create(&mp, &a, capture_main, &c);
	if (e) {
		ksh_say(sh, KSH_ERR(sh), "cannot start a command substitution: %s", strerror(e));
		close(p[0]);
		ksh_sub_free(c.sub);
		return -1;
	}
	size_t cap = 4096, got = 0;
	char *buf = ksh_xmalloc(cap);
	for (;;) {
		size_t r = 0;
		if (got == cap)
			buf = ksh_xrealloc(buf, cap *= 2);
		if (kr_read(p[0], buf + got, cap - got, &r) != 0 || r == 0)
			break;
		got += r;
	}
	kr_close(p[0]);
	kr_mp_join(mp, NULL);
	*status = c.sub->status;
	ksh_sub_free(c.sub);
	*out = buf;
	*n = got;
	return 0;
}

/* ---- traps ---- */

static volatile sig_atomic_t pending[KSH_NSIG];
static volatile sig_atomic_t any_pending;

static void on_signal(int sig)
{
	pending[sig] = 1;
	any_pending = 1;
}

void ksh_trap_signal(struct shell *sh, int sig)
{
	if (sh->subshell || sig <= 0 || sig >= KSH_NSIG)
		return;
	struct sigaction sa = {0};
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = !sh->trap[sig] ? SIG_DFL : !*sh->trap[sig] ? SIG_IGN : on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(sig, &sa, NULL);
}

void ksh_trap_pending(int sig)
{
	if (sig > 0 && sig < KSH_NSIG) {
		pending[sig] = 1;
		any_pending = 1;
	}
}

void ksh_run_traps(struct shell *sh)
{
	if (!any_pending || sh->subshell)
		return;
	any_pending = 0;
	for (int sig = 1; sig < KSH_NSIG; sig++) {
		if (!pending[sig])
			continue;
		pending[sig] = 0;
		if (!sh->trap[sig] || !*sh->trap[sig])
			continue;
		char *t = ksh_xstrdup(sh->trap[sig]);
		int status = sh->status;
		ksh_run_string(sh, t, strlen(t), sh->line, NULL);
		if (!sh->exiting)
			sh->status = status;
		free(t);
	}
}
