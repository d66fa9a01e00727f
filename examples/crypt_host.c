/*
 * crypt_host — seed 003 §7.1: a library that is not thread-safe (libcrypt's
 * crypt(), whose result is a static buffer) used by many microprocesses at
 * once, through N instances (one per VP, a VP per processor) of
 * examples/crypt_server as μprocesses, each taking one call at a time
 * (kr_uproc_call); against the usual way, one copy of the library in this
 * process behind a mutex.  Microprocesses on every VP hash distinct keys
 * both ways, timed, and then every hash is checked against the reentrant
 * crypt_r.
 *
 *   crypt_host [CALLS]     CALLS hashes per way (default 400)
 *
 * Exits 77 where μprocesses cannot run (qemu-user, old kernels).
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "karui.h"

enum { CALLERS = 8, MAXINST = 16 };
#define SALT "$5$rounds=1000$karui$" /* SHA-256, its fewest rounds */

static kr_uproc *inst[MAXINST];
static unsigned ninst;
static long calls;
static kr_mutex lib_lock; /* the in-process way's */
static char (*hash)[CRYPT_OUTPUT_SIZE]; /* each way's hashes, by key */

static void key_of(long i, char *key, size_t n) { snprintf(key, n, "password-%ld", i); }

/* hashes unlike crypt_r's */
static long check(void)
{
	static struct crypt_data d;
	long bad = 0;
	for (long k = 0; k < calls; k++) {
		char key[32];
		key_of(k, key, sizeof key);
		const char *want = crypt_r(key, SALT, &d);
		bad += !want || strcmp(want, hash[k]);
	}
	return bad;
}

/* key k's hash into hash[k], by caller i: one way or the other */
static int via_uproc(long i, long k, const char *key)
{
	long args[4] = {(long)key, (long)SALT, (long)hash[k], sizeof hash[k]}, n;
	int e = kr_uproc_call(inst[i % ninst], 0, args, 4, &n);
	return e ? e : n < 0 ? (int)-n : 0;
}

static int in_process(long i, long k, const char *key)
{
	(void)i;
	kr_mutex_lock(&lib_lock);
	const char *h = crypt(key, SALT);
	snprintf(hash[k], sizeof hash[k], "%s", h ? h : "*");
	kr_mutex_unlock(&lib_lock);
	return 0;
}

static int (*way)(long i, long k, const char *key);

/* caller i hashes keys i, i + CALLERS, ... (by instance i % ninst) */
static void *caller(void *arg)
{
	long i = (long)arg;
	for (long k = i; k < calls; k += CALLERS) {
		char key[32];
		key_of(k, key, sizeof key);
		int e = way(i, k, key);
		if (e) {
			fprintf(stderr, "crypt_host: %s\n", strerror(e));
			exit(1);
		}
	}
	return NULL;
}

static double run(int (*fn)(long i, long k, const char *key))
{
	way = fn;
	kr_mp *m[CALLERS];
	uint64_t t0 = kr_now();
	for (long i = 0; i < CALLERS; i++)
		if (kr_mp_create(&m[i], NULL, caller, (void *)i))
			exit(1);
	for (int i = 0; i < CALLERS; i++)
		kr_mp_join(m[i], NULL);
	return (double)(kr_now() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	calls = argc > 1 ? atol(argv[1]) : 400;
	char server[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", server, sizeof server - 32);
	if (l <= 0)
		return 1;
	server[l] = 0;
	strcpy(strrchr(server, '/') + 1, "crypt_server");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	kr_config kc = {.vps = ncpu > 0 && ncpu < MAXINST ? (unsigned)ncpu : 2};
	if (kr_init(&kc))
		return 1;
	unsigned vps = kr_vp_count();
	ninst = vps < MAXINST ? vps : MAXINST;
	kr_mutex_init(&lib_lock);
	for (unsigned i = 0; i < ninst; i++) {
		char *av[] = {"crypt_server", NULL};
		int e = kr_uproc_spawn(&inst[i], server, av, NULL);
		if (e == ENOTSUP) {
			printf("crypt_host: μprocesses do not run here: skipped\n");
			return 77;
		}
		if (e) {
			fprintf(stderr, "crypt_host: %s: %s\n", server, strerror(e));
			return 1;
		}
	}
	if (!(hash = calloc((size_t)calls, sizeof *hash)))
		return 1;
	double tu = run(via_uproc);
	long bad = check();
	memset(hash, 0, (size_t)calls * sizeof *hash);
	double tp = run(in_process);
	bad += check();
	for (unsigned i = 0; i < ninst; i++) {
		int st;
		kr_uproc_kill(inst[i], SIGTERM);
		kr_uproc_wait(inst[i], &st);
	}
	printf("%ld hashes by %d microprocesses on %u VPs: %u crypt_server μprocesses %.1f ms, "
	       "one crypt() behind a mutex %.1f ms\n",
	       calls, CALLERS, vps, ninst, tu, tp);
	printf("%s: %ld of %ld hashes unlike crypt_r's\n", bad ? "FAILED" : "ok", bad, 2 * calls);
	kr_fini();
	return bad ? 1 : 0;
}
