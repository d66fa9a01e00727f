/* karui — lightweight processes for Linux.  One include for every layer:
 *   L0 karui/vp.h     virtual processors
 *   L1 karui/ctx.h    context switch, spin locks
 *   L2 karui/core.h   microprocesses;  karui/sched.h  scheduling modules
 *   L3 karui/sync.h   semaphores, monitors, barriers, channels, streams,
 *                     rendezvous;  karui/io.h  I/O that parks only the
 *                     calling microprocess
 *      karui/version.h  KARUI_VERSION_* and kr_version()  */
#ifndef KARUI_H
#define KARUI_H
#include "karui/version.h"
#include "karui/vp.h"
#include "karui/ctx.h"
#include "karui/core.h"
#include "karui/sched.h"
#include "karui/sync.h"
#include "karui/io.h"
#endif
