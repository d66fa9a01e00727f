/* L2: blocking sections (src/core/blocking.c): karui calls made between
 * kr_blocking_begin and kr_blocking_end. */
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

/* Karui calls inside a blocking section: a sleep there lets its VP run
 * others, and the section goes on wherever the microprocess resumes, so
 * kr_blocking_end finds it; one that ends inside a section ends it. */
static void *enter_and_end(void *a)
{
	KT_EQ(kr_blocking_begin(), 0);
	return a;
}

static void karui_calls_inside_a_blocking_section_keep_it_with_the_microprocess(void)
{
	init(2);
	for (int round = 0; round < 200; round++) {
		KT_EQ(kr_blocking_begin(), 0);
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
		KT_EQ(kr_mp_sleep_for(20000), 0); /* resumed by whichever VP saw the timer */
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
		KT_EQ(kr_mp_yield(), 0);
		KT_EQ(kr_blocking_end(), 0);
		KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_RUNNING);
	}
	KT_EQ(kr_fini(), 0);
	init(1);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, enter_and_end, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0); /* it ended on this VP, inside a section */
	KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_RUNNING);
	KT_EQ(kr_blocking_begin(), 0);
	KT_EQ(kr_blocking_end(), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(karui_calls_inside_a_blocking_section_keep_it_with_the_microprocess);
	return kt_finish();
}
