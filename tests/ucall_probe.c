/*
 * ucall_probe — a program that exports procedures (karui/uproc_export.h)
 * for tests/test_ucall.c, which calls them from host microprocesses and
 * from another μprocess.  A plain PIE, like any distribution binary.
 * Outside a μprocess it says so and exits 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <karui/uproc_export.h>

static int *main_errno; /* the exporting thread's errno, through its TLS */
static long counter;

static long add(long a, long b) { return a + b; }
static long sum6(long a, long b, long c, long d, long e, long f) { return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f; }
/* a read, a wait and a write: calls that overlapped would lose counts */
static long count(void)
{
	long v = counter;
	for (volatile int i = 0; i < 200; i++)
		;
	counter = v + 1;
	return counter;
}
static long pid(void) { return getpid(); }
static long put(long fd, long buf, long len)
{
	ssize_t n = write((int)fd, (const void *)buf, (size_t)len);
	return n < 0 ? -errno : n;
}
static long *volatile nowhere;
static long fault(void) { return *nowhere; }
static long same_tls(long v)
{
	errno = (int)v;
	return &errno == main_errno;
}
static long nap(long ms)
{
	struct timespec t = {ms / 1000, ms % 1000 * 1000000};
	return nanosleep(&t, NULL) ? -errno : 0;
}
static long spin(void)
{
	for (volatile long i = 0;; i++)
		;
	return 0;
}
static long bye(long status) { exit((int)status); }
static long other(long pid_, long proc, long a, long b)
{
	long args[2] = {a, b}, r;
	int e = kr_uproc_call_pid((pid_t)pid_, (unsigned)proc, args, 2, &r);
	return e ? -e : r;
}
static long boom(void) { abort(); }

/* each procedure as a table's entry (its arguments: the first of six) */
#define P(f) ((kr_uproc_proc)(void (*)(void))(f))
static const kr_uproc_proc table[] = {
	P(add), P(sum6), P(count), P(pid), P(put),   P(fault), P(same_tls),
	P(nap), P(spin), P(bye),   P(other), P(boom), NULL,
};

int main(void)
{
	main_errno = &errno;
	int e = kr_uproc_export(table, sizeof table / sizeof *table);
	if (e) {
		write(2, "ucall_probe: not a μprocess\n", 29);
		return 2;
	}
	for (;;)
		pause();
}
