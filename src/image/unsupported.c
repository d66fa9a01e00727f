/*
 * karui image layer on an architecture without its interception (the
 * gate, the thread-pointer switch): pipes work, μprocesses are refused
 * with ENOTSUP, which callers (karui-sh) answer by running child
 * processes.
 */
#include <errno.h>

#include "uproc.h"

int kr_uproc_spawn(kr_uproc **out, const char *path, char *const argv[],
		   const kr_uproc_attr *attr)
{
	int err = kr__uproc_spawn_check(out, path, argv, attr);
	return err ? err : ENOTSUP;
}

int kr_uproc_wait(kr_uproc *up, int *status)
{
	(void)up;
	(void)status;
	return EINVAL; /* no μprocess can exist */
}

int kr_uproc_wait_wstatus(kr_uproc *up, int *wstatus)
{
	(void)up;
	(void)wstatus;
	return EINVAL; /* no μprocess can exist */
}

int kr_uproc_kill(kr_uproc *up, int sig)
{
	return !up || sig < 0 || sig > 64 ? EINVAL : ESRCH; /* no μprocess can exist */
}

void kr__sigfd_free(struct kr__sigfd *s)
{
	(void)s; /* no signalfd can exist: a μprocess makes them */
}

pid_t kr_uproc_pid(const kr_uproc *up)
{
	(void)up;
	return 0;
}

int kr_uproc_call(kr_uproc *up, unsigned proc, const long *args, unsigned nargs, long *result)
{
	(void)proc;
	if (!up || !result || nargs > KR_UPROC_CALL_ARGS || (nargs && !args))
		return EINVAL;
	return ENOTSUP; /* no μprocess can exist */
}

int kr_uproc_keep(unsigned images)
{
	return images > KR_UPROC_KEEP_MAX ? EINVAL : 0; /* no image to keep */
}

int kr_uproc_reused(const kr_uproc *up)
{
	(void)up;
	return 0;
}

int kr__sys_table_md(FILE *out)
{
	(void)out;
	return ENOTSUP; /* no system call is intercepted here */
}

struct kr__uthr *kr__uthr_self(void)
{
	return NULL; /* no μprocess, no thread of one */
}

int kr_uproc_isolation(const kr_uproc *up, int *mode)
{
	(void)up;
	(void)mode;
	return EINVAL; /* no μprocess can exist */
}
