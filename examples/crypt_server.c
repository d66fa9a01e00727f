/*
 * crypt_server — seed 003 §7.1's pattern with a library function that is
 * not thread-safe: libcrypt's crypt(), which returns its hash in a static
 * buffer.  This program only exports it (karui/uproc_export.h) and waits;
 * examples/crypt_host.c runs several of it as μprocesses and calls them
 * from microprocesses on every VP at once, each instance taking one call
 * at a time.  A plain PIE with no sanitizer, like any distribution binary.
 *
 *   procedure 0: crypt_into(key, salt, out, cap): crypt(key, salt) copied
 *                into out (cap bytes, NUL included) inside the call, so
 *                that no later call overwrites it first; its length, or
 *                -errno (-ERANGE: out too small)
 */
#include <crypt.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <karui/uproc_export.h>

static long crypt_into(long key, long salt, long out, long cap)
{
	errno = 0;
	const char *h = crypt((const char *)key, (const char *)salt);
	if (!h || h[0] == '*')
		return -(errno ? errno : EINVAL);
	size_t n = strlen(h);
	if (n >= (size_t)cap)
		return -ERANGE;
	memcpy((char *)out, h, n + 1);
	return (long)n;
}

static const kr_uproc_proc table[] = {(kr_uproc_proc)(void (*)(void))crypt_into};

int main(void)
{
	if (kr_uproc_export(table, 1)) {
		static const char msg[] = "crypt_server: run it as a μprocess (crypt_host)\n";
		write(2, msg, sizeof msg - 1);
		return 2;
	}
	for (;;)
		pause(); /* its calls run on their callers' microprocesses */
}
