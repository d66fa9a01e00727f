/* L2: microprocess-local keys (src/core/key.c): destructors, running
 * out, reuse of a slot, and the main microprocess's keys at kr_fini. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "karui.h"
#include "kt.h"
#include "kt_core.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

static kr_key key;
static int dtor_calls;
static void dtor(void *v)
{
	KT_EQ((uintptr_t)v, 99);
	dtor_calls++;
}

static void *keyed(void *a)
{
	if (kr_key_get(key) != NULL)
		return (void *)1;
	kr_key_set(key, a);
	kr_mp_yield();
	return kr_key_get(key) == a ? NULL : (void *)2;
}

static void keys_are_per_microprocess_with_destructors(void)
{
	init(1);
	KT_EQ(kr_key_create(&key, dtor), 0);
	kr_mp *a, *b;
	void *ra, *rb;
	KT_EQ(kr_mp_create(&a, NULL, keyed, (void *)99), 0);
	KT_EQ(kr_mp_create(&b, NULL, keyed, (void *)99), 0);
	KT_EQ(kr_mp_join(a, &ra), 0);
	KT_EQ(kr_mp_join(b, &rb), 0);
	KT_CHECK(ra == NULL && rb == NULL);
	KT_EQ(dtor_calls, 2);
	KT_EQ(kr_key_set(key, (void *)3), 0);
	KT_EQ((uintptr_t)kr_key_get(key), 3);
	KT_EQ(kr_key_delete(key), 0);
	KT_CHECK(kr_key_get(key) == NULL);
	KT_EQ(kr_key_delete(key), EINVAL);
	KT_EQ(kr_key_set(key, NULL), EINVAL);
	kr_key k2;
	KT_EQ(kr_key_create(&k2, NULL), 0); /* reuses the slot, not the value */
	KT_CHECK(kr_key_get(k2) == NULL);
	KT_EQ(kr_key_create(NULL, NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

static void keys_run_out_with_eagain(void)
{
	init(1);
	kr_key k;
	int n = 0;
	while (kr_key_create(&k, NULL) == 0)
		n++;
	KT_EQ(n, KR_KEYS_MAX);
	KT_EQ(kr_key_create(&k, NULL), EAGAIN);
	KT_EQ(kr_fini(), 0);
}

/* One key slot created and deleted 2^23 times, past the point where its
 * generation used to overflow the bits a key has for it: every key the
 * slot gives out can be set and read. */
static void keys_stay_valid_through_any_number_of_reuses(void)
{
	init(1);
	for (long i = 0; i < (1L << 23) + 8; i++) {
		kr_key k;
		KT_EQ(kr_key_create(&k, NULL), 0);
		if (kr_key_set(k, (void *)i) != 0 || kr_key_get(k) != (void *)i) {
			fprintf(stderr, "  key %#x of cycle %ld refused\n", k, i);
			_exit(1);
		}
		KT_EQ(kr_key_delete(k), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* The main microprocess's keys: their destructors run at kr_fini, and its
 * table goes with them, so cycles of kr_init / kr_key_set / kr_fini do
 * not grow the heap (the AddressSanitizer build checks with its leak
 * checker, whose allocator mallinfo2 does not see). */
static int main_dtor_calls;
static void main_dtor(void *v)
{
	free(v);
	main_dtor_calls++;
}

static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 0;
#else
	return mallinfo2().uordblks;
#endif
}

static void main_keys_are_destroyed_at_fini(void)
{
	enum { ROUNDS = 300 };
	size_t before = 0;
	for (int round = 0; round < ROUNDS; round++) {
		if (round == 20) /* once the allocator has settled */
			before = heap_in_use();
		init(1);
		kr_key k;
		KT_EQ(kr_key_create(&k, main_dtor), 0);
		KT_EQ(kr_key_set(k, malloc(16)), 0);
		KT_EQ(kr_fini(), 0);
		KT_EQ(main_dtor_calls, round + 1);
		KT_EQ(kr_key_delete(k), 0);
	}
	/* a leaked table per round would be 2 KiB */
	KT_CHECK(heap_in_use() < before + (ROUNDS - 20) * 2048 / 4);
#if defined(__SANITIZE_ADDRESS__)
	KT_EQ(__lsan_do_recoverable_leak_check(), 0);
#endif
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(keys_are_per_microprocess_with_destructors);
	KT_RUN(keys_run_out_with_eagain);
	KT_RUN(keys_stay_valid_through_any_number_of_reuses);
	KT_RUN(main_keys_are_destroyed_at_fini);
	return kt_finish();
}
