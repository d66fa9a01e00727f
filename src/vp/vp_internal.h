/* L0 internals shared with the layers above (they read; kr_vp_publish writes
 * the status). */
#ifndef KARUI_VP_INTERNAL_H
#define KARUI_VP_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "karui/vp.h"

struct kr_vp {
	_Alignas(64) unsigned char area[KR_VP_AREA_SIZE];
	uint32_t status;        /* enum kr_vp_state; __atomic access */
	unsigned id;
	int adopted;
	pthread_t thread;
	kr_vp_main fn;
	void *arg;
	void *upper;            /* owned by the layer above (L2: its per-VP state) */
	void *altstack;         /* our alternate signal stack (vp.c), or NULL */
	int altstack_on;        /* installed on the thread (it had none) */
	sigset_t appmask;       /* the application's signal mask for this
	                           thread (vp.c: fork) */
};

/* The calling thread's VP (initial-exec TLS). */
extern __thread kr_vp *kr__vp_self __attribute__((tls_model("initial-exec")));

/* Told of every status change, on the VP's own thread, when set: the
 * C-area publishes the statuses to other processes (src/carea). */
extern void (*kr__vp_status_hook)(kr_vp *vp, int status);

static inline void kr__vp_set_status(kr_vp *vp, int s)
{
	__atomic_store_n(&vp->status, (uint32_t)s, __ATOMIC_RELEASE);
	void (*h)(kr_vp *, int) = __atomic_load_n(&kr__vp_status_hook, __ATOMIC_ACQUIRE);
	if (h)
		h(vp, s);
}

#endif
