/*
 * Calls between μprocesses (include/karui/image.h: kr_uproc_call;
 * karui/uproc_export.h): tests/ucall_probe exports procedures, which host
 * microprocesses and another μprocess call.  What a procedure returns, its
 * thread pointer and fds the callee's, the errors for a bad number or
 * handle and for a callee that has ended, a procedure that faults (the
 * callee ends, the call says EFAULT, the host goes on), a callee that ends
 * while a call waits or computes in it, and calls from many microprocesses
 * on 2 VPs at once, each callee taking one at a time.  Without Syscall
 * User Dispatch (qemu-user, old kernels) or FSGSBASE every test says
 * "skipped".
 */
#define _GNU_SOURCE
#include <signal.h>

#include "karui.h"
#include "kt.h"

static const char *probe; /* tests/ucall_probe, next to this program */

enum { ADD, SUM6, COUNT, PID, PUT, FAULT, SAME_TLS, NAP, SPIN, BYE, OTHER, BOOM, NONE, NPROCS };

static void start(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

static kr_uproc *spawn_probe(const kr_uproc_attr *a)
{
	kr_uproc *up;
	char *argv[] = {"ucall_probe", NULL};
	int e = kr_uproc_spawn(&up, probe, argv, a);
	if (e == ENOTSUP)
		KT_SKIP("no Syscall User Dispatch or FSGSBASE here (qemu-user?)");
	KT_EQ(e, 0);
	return up;
}

static long call2(kr_uproc *up, unsigned proc, long a, long b)
{
	long args[2] = {a, b}, r = -1;
	KT_EQ(kr_uproc_call(up, proc, args, 2, &r), 0);
	return r;
}

static int status_of(kr_uproc *up)
{
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	return st;
}

static void calls_run_the_callees_code_with_its_tls_and_fds(void)
{
	start(1);
	kr_upipe *p;
	KT_EQ(kr_upipe_create(&p), 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, p, KR_UPIPE_WRITE), 0);
	kr_uproc *up = spawn_probe(&a); /* the first call waits for its export */
	KT_EQ(kr_upipe_close(p, KR_UPIPE_WRITE), 0);
	KT_EQ(call2(up, ADD, 40, 2), 42);
	long six[6] = {1, 2, 3, 4, 5, 6}, r = 0;
	KT_EQ(kr_uproc_call(up, SUM6, six, 6, &r), 0);
	KT_EQ(r, 1 + 4 + 9 + 16 + 25 + 36);
	KT_EQ(kr_uproc_call(up, PID, NULL, 0, &r), 0);
	KT_EQ(r, kr_uproc_pid(up)); /* its getpid, served as its own */
	errno = 5;
	KT_EQ(call2(up, SAME_TLS, 77, 0), 1); /* its errno is its exporter's */
	KT_EQ(errno, 5);                      /* not the host's */
	static const char hello[] = "hello from a call\n";
	KT_EQ(call2(up, PUT, 1, (long)hello), 0); /* 0 bytes */
	long w[3] = {1, (long)hello, (long)strlen(hello)};
	KT_EQ(kr_uproc_call(up, PUT, w, 3, &r), 0);
	KT_EQ(r, (long)strlen(hello));
	char buf[64] = {0};
	size_t got;
	KT_EQ(kr_upipe_read(p, buf, sizeof buf - 1, &got), 0); /* its fd 1 */
	KT_EQ(got, strlen(hello));
	KT_CHECK(strcmp(buf, hello) == 0);
	w[0] = 9; /* an fd it does not have */
	KT_EQ(kr_uproc_call(up, PUT, w, 3, &r), 0);
	KT_EQ(r, -EBADF);
	KT_EQ(kr_uproc_kill(up, SIGTERM), 0);
	KT_EQ(status_of(up), 128 + SIGTERM);
	KT_EQ(kr_upipe_close(p, KR_UPIPE_READ), 0);
	KT_EQ(kr_fini(), 0);
}

static void bad_numbers_handles_and_ended_callees_are_errors(void)
{
	start(1);
	kr_uproc *up = spawn_probe(NULL);
	long r = 0, args[7] = {0};
	KT_EQ(call2(up, ADD, 1, 1), 2);
	KT_EQ(kr_uproc_call(up, NONE, NULL, 0, &r), EINVAL);   /* an empty entry */
	KT_EQ(kr_uproc_call(up, NPROCS, NULL, 0, &r), EINVAL); /* past the table */
	KT_EQ(kr_uproc_call(up, ~0u, NULL, 0, &r), EINVAL);
	KT_EQ(kr_uproc_call(up, ADD, args, 7, &r), EINVAL);
	KT_EQ(kr_uproc_call(up, ADD, NULL, 2, &r), EINVAL);
	KT_EQ(kr_uproc_call(up, ADD, args, 2, NULL), EINVAL);
	KT_EQ(kr_uproc_call(NULL, ADD, args, 2, &r), EINVAL);
	KT_EQ(kr_uproc_call((kr_uproc *)args, ADD, args, 2, &r), EINVAL);
	/* the procedure's exit ends it: this call and every later one ESRCH */
	args[0] = 3;
	KT_EQ(kr_uproc_call(up, BYE, args, 1, &r), ESRCH);
	KT_EQ(kr_uproc_call(up, ADD, args, 2, &r), ESRCH);
	KT_EQ(status_of(up), 3);
	/* abort() in a procedure */
	up = spawn_probe(NULL);
	KT_EQ(kr_uproc_call(up, BOOM, NULL, 0, &r), ESRCH);
	KT_EQ(status_of(up), 128 + SIGABRT);
	KT_EQ(kr_fini(), 0);
}

static void a_fault_in_a_procedure_ends_the_callee_not_the_host(void)
{
	start(2);
	for (int i = 0; i < 20; i++) {
		kr_uproc *up = spawn_probe(NULL);
		long r = 7;
		KT_EQ(call2(up, ADD, i, 1), i + 1);
		KT_EQ(kr_uproc_call(up, FAULT, NULL, 0, &r), EFAULT);
		KT_EQ(r, 7);
		KT_EQ(kr_uproc_call(up, ADD, NULL, 0, &r), ESRCH);
		KT_EQ(status_of(up), 128 + SIGSEGV);
	}
	KT_EQ(kr_fini(), 0);
}

struct killer {
	kr_uproc *up;
	int sig;
};

static void *kill_soon(void *arg)
{
	struct killer *k = arg;
	kr_mp_sleep_for(20 * 1000000);
	KT_EQ(kr_uproc_kill(k->up, k->sig), 0);
	return NULL;
}

/* A callee that ends while a call waits (a sleep) or computes (no system
 * call: its VP is kicked) in it: the call says ESRCH. */
static void a_callee_that_ends_during_a_call_ends_the_call(void)
{
	start(2);
	static const unsigned procs[] = {NAP, SPIN};
	for (unsigned i = 0; i < 2; i++) {
		kr_uproc *up = spawn_probe(NULL);
		KT_EQ(call2(up, ADD, 1, 1), 2);
		struct killer k = {up, SIGKILL};
		kr_mp *m;
		KT_EQ(kr_mp_create(&m, NULL, kill_soon, &k), 0);
		long r, ms = 60000;
		KT_EQ(kr_uproc_call(up, procs[i], &ms, 1, &r), ESRCH);
		KT_EQ(kr_mp_join(m, NULL), 0);
		KT_EQ(status_of(up), 128 + SIGKILL);
		/* this microprocess's next wait is its own: no cancel left over */
		KT_EQ(kr_mp_sleep_for(1000000), 0);
	}
	KT_EQ(kr_fini(), 0);
}

enum { CALLERS = 8, CALLS = 400 };
static kr_uproc *inst[2];

static void *caller(void *arg)
{
	long i = (long)arg, r;
	kr_uproc *up = inst[i % 2];
	for (long n = 0; n < CALLS; n++) {
		long six[6] = {i, n, 1, 2, 3, 4};
		KT_EQ(kr_uproc_call(up, SUM6, six, 6, &r), 0);
		KT_EQ(r, i + 2 * n + 3 + 8 + 15 + 24);
		KT_EQ(kr_uproc_call(up, COUNT, NULL, 0, &r), 0);
		if (n % 50 == 0)
			kr_mp_yield();
	}
	return NULL;
}

static void many_callers_on_two_vps_each_callee_one_call_at_a_time(void)
{
	start(2);
	inst[0] = spawn_probe(NULL);
	inst[1] = spawn_probe(NULL);
	kr_mp *m[CALLERS];
	for (long i = 0; i < CALLERS; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, caller, (void *)i), 0);
	for (int i = 0; i < CALLERS; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	for (int i = 0; i < 2; i++) {
		long r;
		/* no count lost: its calls never overlapped */
		KT_EQ(kr_uproc_call(inst[i], COUNT, NULL, 0, &r), 0);
		KT_EQ(r, CALLERS / 2 * CALLS + 1);
		KT_EQ(kr_uproc_kill(inst[i], SIGTERM), 0);
		KT_EQ(status_of(inst[i]), 128 + SIGTERM);
	}
	KT_EQ(kr_fini(), 0);
}

static void a_uproc_calls_another_by_pid(void)
{
	start(2);
	kr_uproc *a = spawn_probe(NULL), *b = spawn_probe(NULL);
	long args[4] = {kr_uproc_pid(b), ADD, 40, 2}, r = 0;
	KT_EQ(kr_uproc_call(a, OTHER, args, 4, &r), 0);
	KT_EQ(r, 42); /* a's procedure called b's */
	args[1] = NONE;
	KT_EQ(kr_uproc_call(a, OTHER, args, 4, &r), 0);
	KT_EQ(r, -EINVAL);
	args[0] = kr_uproc_pid(a); /* a into itself, from a call into a */
	args[1] = ADD;
	KT_EQ(kr_uproc_call(a, OTHER, args, 4, &r), 0);
	KT_EQ(r, -EDEADLK);
	args[0] = 1; /* no μprocess's pid */
	KT_EQ(kr_uproc_call(a, OTHER, args, 4, &r), 0);
	KT_EQ(r, -ESRCH);
	/* b ends: a's call into it says so, and a goes on */
	args[0] = kr_uproc_pid(b);
	KT_EQ(kr_uproc_kill(b, SIGTERM), 0);
	KT_EQ(status_of(b), 128 + SIGTERM);
	KT_EQ(kr_uproc_call(a, OTHER, args, 4, &r), 0);
	KT_EQ(r, -ESRCH);
	KT_EQ(call2(a, ADD, 2, 2), 4);
	KT_EQ(kr_uproc_kill(a, SIGTERM), 0);
	KT_EQ(status_of(a), 128 + SIGTERM);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	static char self[4096];
	probe = kt_beside_me(self, sizeof self, "ucall_probe");
	setenv("KARUI_CACHE_DIR", "", 1);
	kt_args(argc, argv);
	KT_RUN(calls_run_the_callees_code_with_its_tls_and_fds);
	KT_RUN(bad_numbers_handles_and_ended_callees_are_errors);
	KT_RUN(a_fault_in_a_procedure_ends_the_callee_not_the_host);
	KT_RUN(a_callee_that_ends_during_a_call_ends_the_call);
	KT_RUN(many_callers_on_two_vps_each_callee_one_call_at_a_time);
	KT_RUN(a_uproc_calls_another_by_pid);
	return kt_finish();
}
