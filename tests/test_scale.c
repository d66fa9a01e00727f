/*
 * Scale: 1,000,000 live microprocesses with minimum stacks and no guard;
 * 1,000,000 with default stacks and guards where guards cost no mapping
 * (MADV_GUARD_INSTALL), and a handful of mappings for 200,000 of them;
 * where each guard splits a mapping (forced here with a seccomp filter),
 * as many as the kernel's mapping limit allows (vm.max_map_count / 2), at
 * least 30,000, and then a clean ENOMEM; and stacks reused, not carved,
 * when the process is out of mappings.
 * KARUI_SCALE_N lowers the first figure.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_seccomp.h"

static void *sleeper(void *a)
{
	kr_mp_park();
	return a;
}

static long fill(kr_mp **m, long n, const kr_attr *at, int *err)
{
	long made = 0;
	for (; made < n; made++)
		if ((*err = kr_mp_create(&m[made], at, sleeper, (void *)made)) != 0)
			break;
	kr_mp_yield(); /* all run and go to sleep */
	return made;
}

static void drain(kr_mp **m, long made)
{
	for (long i = 0; i < made; i++)
		KT_EQ(kr_mp_unpark(m[i]), 0);
	for (long i = 0; i < made; i++) {
		void *r;
		KT_EQ(kr_mp_join(m[i], &r), 0);
		KT_EQ((uintptr_t)r, i);
	}
}

static void a_million_live_microprocesses(void)
{
	long n = 1000000;
	const char *e = getenv("KARUI_SCALE_N");
	if (e && atol(e) > 0)
		n = atol(e);
	KT_EQ(kr_init(NULL), 0);
	kr_mp **m = malloc(n * sizeof *m);
	KT_CHECK(m);
	kr_attr at = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	int err = 0;
	long made = fill(m, n, &at, &err);
	KT_EQ(err, 0);
	KT_EQ(made, n);
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, n);
	drain(m, made);
	KT_EQ(kr_fini(), 0);
	free(m);
}

static long max_map_count(void)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
	long v = 65530;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = 65530;
		fclose(f);
	}
	return v;
}

static long maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int ch;
	if (!f)
		return -1;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static int guards_inline(void)
{
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	return st.stack_guards_inline;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void a_million_guarded_microprocesses_with_default_stacks(void)
{
#if defined(__SANITIZE_ADDRESS__)
	KT_SKIP("AddressSanitizer: the shadow of 1,000,000 64 KiB stacks is 8 GiB"
		" (the native suite runs it)");
#endif
	KT_EQ(kr_init(NULL), 0);
	if (!guards_inline())
		KT_SKIP("no MADV_GUARD_INSTALL (Linux < 6.13 or an emulator): each guard splits "
			"a mapping, so guarded stacks stop at the mapping limit (tested below)");
	long n = 1000000;
	kr_mp **m = malloc(n * sizeof *m);
	KT_CHECK(m);
	double t0 = now_s();
	int err = 0;
	long made = fill(m, n, NULL, &err);
	double t1 = now_s();
	KT_EQ(err, 0);
	KT_EQ(made, n);
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	KT_EQ(st.mps_live, n);
	long maps = maps_count();
	drain(m, made);
	double t2 = now_s();
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "  %ld guarded 64 KiB stacks: created and parked in %.2f s, unparked and"
			" joined in %.2f s; %ld mappings; peak RSS %ld MiB\n",
		n, t1 - t0, t2 - t1, maps, ru.ru_maxrss >> 10);
	KT_CHECK(maps < 1000);
	KT_EQ(kr_fini(), 0);
	free(m);
}

static void guarded_stacks_keep_the_mapping_count_small(void)
{
	KT_EQ(kr_init(NULL), 0);
	if (!guards_inline())
		KT_SKIP("no MADV_GUARD_INSTALL (Linux < 6.13 or an emulator): each guard splits "
			"a mapping");
	long n = 200000, before = maps_count();
#if defined(__SANITIZE_ADDRESS__)
	n = 50000; /* the shadow of 64 KiB stacks; still more than split guards allow */
#endif
	kr_mp **m = malloc(n * sizeof *m);
	KT_CHECK(m);
	int err = 0;
	long made = fill(m, n, NULL, &err);
	KT_EQ(err, 0);
	long maps = maps_count();
	fprintf(stderr, "  %ld mappings before, %ld with %ld guarded stacks\n", before, maps, made);
	KT_CHECK(maps < 1000);
	drain(m, made);
	KT_EQ(kr_fini(), 0);
	free(m);
}

/* madvise(MADV_GUARD_INSTALL) fails with EINVAL from now on, as on a
 * kernel without it.  0, or why the filter could not be installed. */
static int deny_guard_install(void)
{
	return kt_seccomp_deny(SYS_madvise, 2, 102 /* MADV_GUARD_INSTALL */, EINVAL);
}

static void split_guards_reach_the_mapping_limit_then_enomem(void)
{
	long limit = max_map_count();
	if (limit < 62000)
		KT_SKIP("vm.max_map_count below its default: fewer than 30,000 guards fit");
	int denied = deny_guard_install();
	KT_EQ(kr_init(NULL), 0);
	if (guards_inline())
		KT_SKIP(denied ? "no seccomp filter to turn MADV_GUARD_INSTALL off"
			       : "MADV_GUARD_INSTALL still works under the filter");
	long cap = limit; /* more than can fit: each guard costs two mappings */
#if defined(__SANITIZE_ADDRESS__)
	/* ASan cannot work once the process is out of mappings: stop short */
	cap = 30000;
#endif
	kr_mp **m = malloc(cap * sizeof *m);
	KT_CHECK(m);
	kr_attr at = {.stack_size = KR_STACK_MIN}; /* guarded */
	int err = 0;
	long made = fill(m, cap, &at, &err);
	fprintf(stderr, "  %ld guarded microprocesses, then %s\n", made, strerror(err));
	KT_EQ(err, made < cap ? ENOMEM : 0);
	KT_CHECK(made >= 30000);
	KT_CHECK(made <= limit / 2);
	drain(m, made);
	/* once freed, they are reused: no region is carved again */
	kr_stats s0, s1;
	kr_stats_get(&s0);
	long again = fill(m, made, &at, &err);
	kr_stats_get(&s1);
	KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	KT_EQ(err, 0);
	KT_EQ(again, made);
	drain(m, again);
	KT_EQ(kr_fini(), 0);
	free(m);
}

/* With the process out of mappings, joined stacks stay in the pool and the
 * next creates take them: freeing a stack allocates nothing. */
static void freed_stacks_are_reused_at_the_mapping_limit(void)
{
#if defined(__SANITIZE_ADDRESS__)
	KT_SKIP("AddressSanitizer cannot work once the process is out of mappings");
#endif
	enum { N = 20000 }; /* their pool lists outgrow malloc's heap */
	static kr_mp *m[N];
	KT_EQ(kr_init(NULL), 0);
	int err = 0;
	KT_EQ(fill(m, N, NULL, &err), N);
	long page = sysconf(_SC_PAGESIZE), filled = 0;
	/* one-page mappings that cannot merge, until there is no room */
	while (mmap(NULL, page, filled & 1 ? PROT_READ : PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
		filled++;
	KT_EQ(errno, ENOMEM);
	drain(m, N);
	kr_stats s0, s1;
	kr_stats_get(&s0);
	long again = fill(m, N, NULL, &err);
	kr_stats_get(&s1);
	fprintf(stderr, "  %ld mappings filled; %ld of %d created again, %lu stacks carved\n",
		filled, again, N, s1.stacks_mapped - s0.stacks_mapped);
	KT_EQ(err, 0);
	KT_EQ(again, N);
	KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	drain(m, N);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN_T(a_million_live_microprocesses, 600);
	KT_RUN_T(a_million_guarded_microprocesses_with_default_stacks, 600);
	KT_RUN_T(guarded_stacks_keep_the_mapping_count_small, 600);
	KT_RUN_T(split_guards_reach_the_mapping_limit_then_enomem, 600);
	KT_RUN_T(freed_stacks_are_reused_at_the_mapping_limit, 600);
	return kt_finish();
}
