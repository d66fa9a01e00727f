/* karui — lightweight processes for Linux.  One include for every layer:
 *   L0 karui/vp.h     virtual processors
 *   L1 karui/ctx.h    context switch, spin locks
 *   L2 karui/core.h   microprocesses;  karui/sched.h  scheduling modules
 *   L3 karui/sync.h   semaphores, monitors, barriers, channels, streams,
 *                     rendezvous;  karui/io.h  I/O that parks only the
 *                     calling microprocess
 *   image karui/image.h  μprocesses: programs loaded as private images
 *   carea karui/carea.h  the C-area: processors shared with the user's
 *                        other karui programs (opt-in, kr_config.alloc)
 *      karui/version.h  KARUI_VERSION_* and kr_version()
 *
 * Errors, the one rule of every header.  A call that can fail returns int:
 * 0 on success or a positive errno code (pthread style; errno is not
 * touched), never a count, a flag or a negative code.  What it finds out
 * goes to out-parameters (a byte count, a new fd, a handle, "last at the
 * barrier"); one that is mandatory gives EINVAL when NULL, and the header
 * says which may be NULL.  Bad input never aborts.  A few codes are
 * outcomes rather than faults: ETIMEDOUT (a deadline passed), ECANCELED
 * (kr_mp_cancel), EAGAIN / EBUSY from the try calls, EPIPE (closed), and
 * kr_vp_sleep_begin's EAGAIN ("now wait").
 * Names, the other rules.  A call that can wait until a deadline ends in
 * _until and takes the deadline, an absolute kr_now() time (KR_FOREVER:
 * none), as its last argument; where the call is common without one, the
 * name without the suffix waits as long as it takes (kr_read and
 * kr_read_until, kr_sem_wait and kr_sem_wait_until).  A call that makes
 * something hands it back through its first parameter (kr_mp_create,
 * kr_vp_allocate, kr_uproc_spawn); one that reports what it did, through
 * its last ones before the deadline (kr_read's *got, kr_mp_getprio's
 * *prio).  Calls that bracket a section are _begin and _end
 * (kr_blocking_begin, kr_vp_sleep_begin).  Enumerations are named for
 * what their values are (enum kr_vp_state), not for a call.
 * Accessors, which cannot fail, return their value: kr_now, kr_vp_self,
 * kr_vp_id, kr_vp_count, kr_vp_status, kr_vp_area, kr_mp_self, kr_mp_id,
 * kr_mp_udata, kr_mp_rqlink, kr_key_get, kr_call_msg, kr_io_backend,
 * kr_io_features, kr_sched_idle_deadline, kr_sched_data, kr_sched_vp_data,
 * kr_version; kr_ctx_switch returns what the context that resumes the
 * caller passes.  void:
 * kr_ctx_jump, kr_spin_lock / _unlock, kr_cpu_relax, kr_vp_wait_ended,
 * kr_sched_park_until, kr_sched_unpark.
 *
 * Who may call.  Most calls of core.h, and every call that waits, are for
 * microprocesses: on a thread that is no VP of a running karui they return
 * EPERM.  These work on any thread (the ones marked * while karui runs,
 * EPERM otherwise), as do the accessors:
 *   vp.h     kr_vp_allocate, kr_vp_adopt (off a VP only: EEXIST),
 *            kr_vp_join, kr_vp_wakeup
 *   ctx.h    every call
 *   core.h   kr_init (off a VP only: EBUSY), kr_mp_unpark*, kr_mp_cancel*,
 *            kr_mp_setprio*, kr_mp_getprio, kr_key_create, kr_key_delete,
 *            kr_stats_get
 *   sched.h  kr_poller_add*, kr_poller_remove*
 *   sync.h   every init and destroy, kr_sem_trywait / _post / _post_n /
 *            _getvalue, kr_mutex_trylock / _unlock, kr_cond_signal /
 *            _broadcast, kr_chan_trysend / _tryrecv / _close,
 *            kr_stream_close_write / _close_read
 *   io.h     kr_io_cancel, kr_close
 *   image.h  kr_upipe_create, kr_upipe_close, the kr_uproc_attr_* calls
 *   carea.h  kr_carea_configure, kr_carea_stats_get
 * tests/test_api.c holds every fallible call of every header to this
 * rule, and fails when a header gains one it does not check.
 *
 * Fork.  The child of a fork() made while karui runs (from a microprocess
 * or any other thread) is a process where karui does not run and cannot
 * start: its one thread is no VP, so every call above that needs a VP or
 * a running karui returns EPERM at once, and so do kr_key_create,
 * kr_key_delete and kr_stats_get (karui's state there is the parent's,
 * frozen); kr_init returns EBUSY, kr_io_cancel EPERM, kr_io_backend NULL,
 * and kr_close is close(2).  L0 has no VPs there (kr_vp_count 0) and
 * works afresh.  The thread has the application's signal mask (for a VP
 * that kr_vp_allocate started, the mask of the application thread that
 * started it), with no SIGPIPE blocked by karui.  The parent's rings and
 * epoll set are left alone.  The child may use libc, exec, exit or _exit;
 * a microprocess's function that returns there ends it with exit(0).
 * Handles and sync.h objects from the parent are copies, to be left alone
 * (as pthread objects after a fork).  vfork, posix_spawn and system run
 * no fork handlers: the program they start inherits the caller's mask
 * (docs/limits.md).
 */
#ifndef KARUI_H
#define KARUI_H
#include "karui/version.h"
#include "karui/vp.h"
#include "karui/ctx.h"
#include "karui/core.h"
#include "karui/sched.h"
#include "karui/sync.h"
#include "karui/io.h"
#include "karui/image.h"
#include "karui/carea.h"
#include "karui/domain.h"
#endif
