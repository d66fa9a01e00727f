/* L3: barriers (src/sync/barrier.c). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

static kr_barrier bar;
static uint32_t serial[100], arrived[100];

static void *barrier_runner(void *a)
{
	for (int r = 0; r < 100; r++) {
		__atomic_fetch_add(&arrived[r], 1, __ATOMIC_RELAXED);
		int last = 9;
		KT_EQ(kr_barrier_wait(&bar, &last), 0);
		KT_CHECK(last == 0 || last == 1);
		/* nobody passes round r before all have arrived at it */
		KT_EQ(__atomic_load_n(&arrived[r], __ATOMIC_RELAXED), 16);
		if (last)
			__atomic_fetch_add(&serial[r], 1, __ATOMIC_RELAXED);
	}
	return a;
}

static void barrier_rounds_hold_everyone_with_one_serial_each(void)
{
	init(2);
	KT_EQ(kr_barrier_init(&bar, 0), EINVAL);
	KT_EQ(kr_barrier_init(&bar, 16), 0);
	run_all(16, barrier_runner, NULL);
	for (int r = 0; r < 100; r++)
		KT_EQ(serial[r], 1);
	KT_EQ(kr_barrier_destroy(&bar), 0);
	KT_EQ(kr_barrier_wait(&bar, NULL), EINVAL);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(barrier_rounds_hold_everyone_with_one_serial_each);
	return kt_finish();
}
