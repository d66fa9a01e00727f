/* karui — what a program running as a μprocess includes to export
 * procedures to other parties, and to call another μprocess's (seed 003
 * §4.4.2, docs/uproc.md "Calls between μprocesses").  Header only: two
 * system calls of karui's own, made inline, so the program has no link
 * dependency on karui and runs anywhere; outside a μprocess (a plain
 * process) the kernel answers them with ENOSYS.
 *
 *     static long add(long a, long b) { return a + b; }
 *     static const kr_uproc_proc table[] = {(kr_uproc_proc)add};
 *     int main(void)
 *     {
 *             if (kr_uproc_export(table, 1))
 *                     return 1;           (not a μprocess)
 *             for (;;)
 *                     pause();            (its calls run on their callers)
 *     }
 *
 * A procedure takes up to KR_UPROC_CALL_ARGS word arguments (ints, longs,
 * pointers: one address space) and returns a long.  It runs on the
 * caller's microprocess, one call at a time per μprocess, with this
 * program's thread pointer (its TLS, errno) and its system calls served
 * as this program's (its fds, its pid). */
#ifndef KARUI_UPROC_EXPORT_H
#define KARUI_UPROC_EXPORT_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef long (*kr_uproc_proc)(long, long, long, long, long, long);
#define KR_UPROC_CALL_ARGS 6       /* word arguments of a call, at most */
#define KR_UPROC_EXPORT_MAX 1024   /* procedures in a table, at most */
#define KR_UPROC_NR_EXPORT 0x4b55  /* the system calls' numbers */
#define KR_UPROC_NR_CALL 0x4b56

/* the system call, as the kernel returns it (-errno); μprocesses are
 * x86-64's: elsewhere -ENOSYS */
static inline long karui_usys5_(long nr, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return r;
#else
	(void)nr, (void)a, (void)b, (void)c, (void)d, (void)e;
	return -38; /* ENOSYS */
#endif
}

/* Export table[0..n): procedure number i is table[i] (NULL: none), in
 * place of any earlier table; n 0 withdraws them.  Calls that came before
 * the first export wait for it.  0; EINVAL: n above KR_UPROC_EXPORT_MAX;
 * EFAULT: the table, or a procedure, is not this program's memory; EBUSY:
 * from inside a call; ENOSYS: not a μprocess. */
static inline __attribute__((unused))
int kr_uproc_export(const kr_uproc_proc *table, unsigned n)
{
	return (int)-karui_usys5_(KR_UPROC_NR_EXPORT, (long)table, (long)n, 0, 0, 0);
}

/* Call procedure `proc` of the μprocess whose pid is `pid` (another μprocess of
 * the same host), with args[0..nargs): *result gets what it returns.  As
 * kr_uproc_call (karui/image.h): ESRCH, EINVAL, EFAULT, EDEADLK; ENOSYS:
 * not a μprocess. */
static inline __attribute__((unused))
int kr_uproc_call_pid(pid_t pid, unsigned proc, const long *args, unsigned nargs, long *result)
{
	return (int)-karui_usys5_(KR_UPROC_NR_CALL, (long)pid, (long)proc, (long)args,
					(long)nargs, (long)result);
}

#ifdef __cplusplus
}
#endif
#endif
