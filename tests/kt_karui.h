/* What every test of karui's layers starts from: kr_init with n VPs,
 * and milliseconds in kr_now()'s nanoseconds.  Included by kt_core.h,
 * kt_sync.h and kt_io.h, and by the tests that use none of them. */
#ifndef KARUI_KT_KARUI_H
#define KARUI_KT_KARUI_H

#include "karui.h"
#include "kt.h"

#define MS 1000000ull

static inline void init(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

#endif
