/*
 * karui-epc-count: the instructions of one EPC call, counted exactly, in
 * each protection mode this CPU gives (karui-bench's seed001.count).
 *
 * A CPU without protection keys cannot time KR_EPC_H, and an emulator's
 * time says nothing of a CPU's; an instruction count says the same on
 * both.  So for each mode a child process sets the mode, makes a domain
 * with seed001.ipc's NullProc and ArgRtn_Copy (8 KiB, the colour-map
 * lookup), calls each a few times, and then stops itself (SIGSTOP) before
 * and after one call of each; the parent single-steps it (ptrace) from
 * stop to stop and counts the steps.  The steps of two stops with nothing
 * between are taken off, so a count is the call's alone: from the caller's
 * call of kr_epc_call to its return, the procedure included.  Built
 * static, so that scripts/pku-vm can run it in a VM whose CPU has
 * protection keys.
 *
 * Output, a line per mode and pattern:
 *     karui-epc-h NullProc 123
 * or, for a mode this CPU does not give:
 *     karui-epc-h skipped
 * Exit status: 0, or 1 when a count failed (what failed on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <karui/domain.h>

enum { COPY = 8192, SKIPPED = 3 };

struct copy {
	unsigned char map[256];
	size_t n;
	unsigned char in[COPY];
};

static int null_proc(void *arg, void *result)
{
	(void)arg;
	(void)result;
	return 0;
}

static int lookup(void *arg, void *result)
{
	const struct copy *c = arg;
	unsigned char *out = result;
	for (size_t i = 0; i < c->n; i++)
		out[i] = c->map[c->in[i]];
	return 0;
}

/* The traced child: its calls between SIGSTOPs.  Exits SKIPPED where the
 * mode is not given, 2 on any other error. */
static void child(int mode)
{
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(2);
	int err = kr_epc_mode_set(mode);
	if (err)
		_exit(err == ENOTSUP ? SKIPPED : 2);
	kr_config cfg = {.vps = 1};
	kr_domain *d;
	kr_section *arg, *res;
	unsigned n_null, n_copy;
	if (kr_init(&cfg) || kr_domain_create(&d, "count") ||
	    kr_domain_export(d, null_proc, &n_null) || kr_domain_export(d, lookup, &n_copy) ||
	    kr_section_create(&arg, NULL, sizeof(struct copy)) ||
	    kr_section_create(&res, NULL, COPY) ||
	    kr_section_allow(arg, d, KR_SECTION_READ) || kr_section_allow(res, d, KR_SECTION_WRITE))
		_exit(2);
	struct copy *c = kr_section_addr(arg);
	for (int i = 0; i < 256; i++)
		c->map[i] = (unsigned char)(255 - i);
	c->n = COPY;
	for (size_t i = 0; i < COPY; i++)
		c->in[i] = (unsigned char)i;
	int st;
	for (int i = 0; i < 3; i++)
		if (kr_epc_call(d, n_null, NULL, NULL, &st) ||
		    kr_epc_call(d, n_copy, c, kr_section_addr(res), &st))
			_exit(2);
	raise(SIGSTOP);
	raise(SIGSTOP); /* nothing between: the stops' own steps */
	err = kr_epc_call(d, n_null, NULL, NULL, &st);
	raise(SIGSTOP);
	err |= kr_epc_call(d, n_copy, c, kr_section_addr(res), &st);
	raise(SIGSTOP);
	_exit(err || ((unsigned char *)kr_section_addr(res))[7] != 255 - 7 ? 2 : 0);
}

/* Steps from the child's stop to its next SIGSTOP; -1 on error.  Other
 * signals (a first touch of a protection key's page under KR_EPC_H faults
 * once) are delivered, their handlers' steps counted. */
static long steps(pid_t pid)
{
	long n = 0;
	int sig = 0;
	for (;;) {
		int st;
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) ||
		    waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
			return -1;
		sig = WSTOPSIG(st);
		if (sig == SIGSTOP)
			return n;
		if (sig == SIGTRAP) {
			sig = 0;
			n++;
		}
	}
}

/* Run the child to its next SIGSTOP, delivering other signals: 0, or -1
 * when it ended or failed. */
static int run_to_stop(pid_t pid, int st)
{
	while (WIFSTOPPED(st) && WSTOPSIG(st) != SIGSTOP)
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)WSTOPSIG(st)) ||
		    waitpid(pid, &st, 0) != pid)
			return -1;
	return WIFSTOPPED(st) ? 0 : -1;
}

static int count(const char *name, int mode)
{
	pid_t pid = fork();
	if (pid < 0)
		return perror("fork"), 1;
	if (pid == 0)
		child(mode);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return perror("waitpid"), 1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == SKIPPED) {
		printf("%s skipped\n", name);
		return 0;
	}
	long n[3] = {-1, -1, -1};
	if (run_to_stop(pid, st) == 0)
		for (int i = 0; i < 3 && (i == 0 || n[i - 1] >= 0); i++)
			n[i] = steps(pid);
	if (n[2] >= 0)
		ptrace(PTRACE_CONT, pid, NULL, NULL);
	else
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (n[2] < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "karui-epc-count: %s: the traced child failed\n", name);
		return 1;
	}
	printf("%s NullProc %ld\n%s ArgRtn_Copy %ld\n", name, n[1] - n[0], name, n[2] - n[0]);
	return 0;
}

int main(void)
{
	int err = count("karui-epc-n", KR_EPC_N);
	err |= count("karui-epc-s", KR_EPC_S);
	err |= count("karui-epc-h", KR_EPC_H);
	return err;
}
