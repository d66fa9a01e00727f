/*
 * Scale: 1,000,000 live microprocesses with minimum stacks and no guard
 * page; with guard pages, as many as the kernel's mapping limit allows
 * (vm.max_map_count / 2), at least 30,000, and then a clean ENOMEM.
 * KARUI_SCALE_N lowers the first figure (the emulated aarch64 run does).
 */
#include <stdint.h>

#include "karui.h"
#include "kt.h"

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

static void guarded_stacks_reach_the_mapping_limit_then_enomem(void)
{
	long limit = max_map_count();
	if (limit < 62000)
		KT_SKIP("vm.max_map_count below its default: fewer than 30,000 guards fit");
	KT_EQ(kr_init(NULL), 0);
	long cap = limit; /* more than can fit: each guard costs two mappings */
#if defined(__SANITIZE_ADDRESS__)
	/* ASan cannot work once the process is out of mappings: stop short */
	cap = 30000;
#endif
	kr_mp **m = malloc(cap * sizeof *m);
	KT_CHECK(m);
	kr_attr at = {.stack_size = KR_STACK_MIN}; /* guard page on */
	int err = 0;
	long made = fill(m, cap, &at, &err);
	fprintf(stderr, "  %ld guarded microprocesses, then %s\n", made, strerror(err));
	KT_EQ(err, made < cap ? ENOMEM : 0);
	KT_CHECK(made >= 30000);
	KT_CHECK(made <= limit / 2);
	drain(m, made);
	/* once freed, they are reused: no region is carved again.  (Under
	 * qemu-user, MADV_DONTNEED splits mappings, so fewer fit again; running
	 * out is still a clean ENOMEM.) */
	kr_stats s0, s1;
	kr_stats_get(&s0);
	long again = fill(m, made, &at, &err);
	kr_stats_get(&s1);
	KT_EQ(s1.stacks_mapped, s0.stacks_mapped);
	KT_CHECK(again == made || err == ENOMEM);
	drain(m, again);
	KT_EQ(kr_fini(), 0);
	free(m);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN_T(a_million_live_microprocesses, 600);
	KT_RUN_T(guarded_stacks_reach_the_mapping_limit_then_enomem, 600);
	return kt_finish();
}
