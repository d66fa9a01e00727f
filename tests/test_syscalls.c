/*
 * After warm-up, create+join, yield, switch_to and sleep/wakeup make no
 * system call.  Proof: a seccomp filter that kills the process on any
 * system call but exit/exit_group is installed after the warm-up; the
 * measured phase then runs under it.  A control case shows that the filter
 * does kill a process that makes one system call.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "karui.h"
#include "kt.h"

static int forbid_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return errno;
	return 0;
}

/* Run fn in a child with system calls forbidden after warm; returns the
 * child's wait status, or -1 if the filter cannot be installed here (the
 * child says so with exit code 3, since it cannot write once filtered). */
static int run_forbidden(void (*warm)(void), void (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		warm();
		if (forbid_syscalls() != 0)
			_exit(3);
		fn();
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 3 ? -1 : st;
}

static void nothing(void) {}
static void one_getpid(void) { syscall(SYS_getpid); }

static void filter_kills_a_process_that_makes_a_system_call(void)
{
	int st = run_forbidden(nothing, one_getpid);
	if (st == -1)
		KT_SKIP("seccomp filters cannot be installed here");
	KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
}

static void *nop(void *a) { return a; }
static long n_yield;
static void *yielder(void *a)
{
	for (long i = 0; i < n_yield; i++)
		kr_mp_yield();
	return a;
}

static kr_mp *peer[2];
static void *switcher(void *a)
{
	int me = (int)(intptr_t)a;
	for (long i = 0; i < n_yield; i++)
		kr_mp_switch_to(peer[!me]);
	return a;
}

static void *sleeper(void *a)
{
	for (long i = 0; i < n_yield; i++)
		kr_mp_park();
	return a;
}

static void workload(long n)
{
	kr_mp *m, *a, *b;
	for (long i = 0; i < n; i++) {
		KT_EQ(kr_mp_create(&m, NULL, nop, NULL), 0);
		KT_EQ(kr_mp_join(m, NULL), 0);
	}
	n_yield = n;
	KT_EQ(kr_mp_create(&a, NULL, yielder, NULL), 0);
	KT_EQ(kr_mp_create(&b, NULL, yielder, NULL), 0);
	KT_EQ(kr_mp_join(a, NULL), 0);
	KT_EQ(kr_mp_join(b, NULL), 0);
	KT_EQ(kr_mp_create(&peer[0], NULL, switcher, (void *)0), 0);
	KT_EQ(kr_mp_create(&peer[1], NULL, switcher, (void *)1), 0);
	KT_EQ(kr_mp_join(peer[0], NULL), 0);
	KT_EQ(kr_mp_join(peer[1], NULL), 0);
	KT_EQ(kr_mp_create(&a, NULL, sleeper, NULL), 0);
	for (long i = 0; i < n; i++) {
		KT_EQ(kr_mp_unpark(a), 0);
		kr_mp_yield();
	}
	KT_EQ(kr_mp_join(a, NULL), 0);
}

static void warm(void)
{
	KT_EQ(kr_init(NULL), 0);
	workload(100);
}

static void measured(void) { workload(100000); }

static void warm_paths_make_no_system_call(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	KT_SKIP("the sanitizer runtime makes system calls of its own");
#endif
	int st = run_forbidden(warm, measured);
	if (st == -1)
		KT_SKIP("seccomp filters cannot be installed here");
	if (WIFSIGNALED(st))
		fprintf(stderr, "  killed by signal %d (SIGSYS: a system call)\n", WTERMSIG(st));
	KT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(filter_kills_a_process_that_makes_a_system_call);
	KT_RUN(warm_paths_make_no_system_call);
	return kt_finish();
}
