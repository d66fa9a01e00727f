/*
 * karui — protected procedure calls in one address space (seed 001):
 * domains, sections, EPC and ITC.
 *
 * A domain owns procedures (functions exported to it) and memory sections.
 * Each section has an access list: which domains may read it, which may
 * write it; the program outside every domain (the host) is a domain too,
 * named by NULL.  A microprocess runs in one domain at a time.
 *
 *   kr_domain *srv;  kr_section *buf;  unsigned lookup;
 *   kr_domain_create(&srv, "colour");
 *   kr_domain_export(srv, colour_lookup, &lookup);
 *   kr_section_create(&buf, NULL, 8192);            the host's
 *   kr_section_allow(buf, srv, KR_SECTION_READ | KR_SECTION_WRITE);
 *   kr_epc_call(srv, lookup, kr_section_addr(buf), kr_section_addr(buf), &st);
 *
 * EPC (kr_epc_call) runs the procedure on the calling microprocess, in the
 * callee's domain, on a stack of the callee's own: nothing is queued and no
 * other microprocess is involved.  Arguments and results go by pointer into
 * sections both may access.  A procedure that faults (touches what its
 * domain may not, or any other fault) ends the call with EFAULT; its
 * domain is marked failed, later calls into it fail at once
 * (ENOTRECOVERABLE) until kr_domain_restart gives it fresh sections.
 * Calls nest (a procedure may call into another domain); a procedure that
 * needs karui (to sleep, to do I/O, to call a synchronisation object)
 * leaves its domain for it through kr_epc_host.
 *
 * Protection is chosen once, at run time (kr_epc_mode_set, or the
 * environment's KARUI_EPC=n|s|h):
 *   KR_EPC_N  none: the call and the stack switch alone, for trusted code;
 *   KR_EPC_S  page protection changed on entry and exit (mprotect): a
 *             section is open while a microprocess runs in a domain that
 *             may use it, and the caller's stack frames are closed for the
 *             length of the call; the rest of the address space is not
 *             protected (see docs/domains.md for what that means on
 *             several VPs);
 *   KR_EPC_H  protection keys (x86 PKU): a key per access list, PKRU
 *             written by the gate on entry and exit and checked after each
 *             write, exact per VP; the host's memory outside sections (key
 *             0) stays open; ENOTSUP where the CPU has none.
 *
 * ITC (kr_port): a server microprocess serves a domain's procedures to
 * client microprocesses through a port; the data goes through shared
 * sections, the request and its answer through karui's rendezvous.
 *
 * Every call follows the API rule: 0 or a positive errno code, results
 * through out-parameters.
 */
#ifndef KARUI_DOMAIN_H
#define KARUI_DOMAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_domain kr_domain;
typedef struct kr_section kr_section;
typedef struct kr_port kr_port;

/* A procedure: its return value is the call's status (0 or an errno
 * code), given to the caller. */
typedef int (*kr_epc_proc)(void *arg, void *result);

/* ---------------- protection modes ---------------- */

enum { KR_EPC_AUTO = 0, KR_EPC_N, KR_EPC_S, KR_EPC_H };

/* Before the first domain or section: KR_EPC_AUTO takes H where the CPU
 * has protection keys, else S.  EINVAL: another value; ENOTSUP: H without
 * protection keys; EBUSY: domains or sections exist. */
int kr_epc_mode_set(int mode);
/* The mode in force (KR_EPC_N, _S or _H), settling AUTO if no domain has
 * yet. */
int kr_epc_mode(void);

/* ---------------- domains ---------------- */

/* name: for messages (copied; at most 31 bytes kept).  EINVAL: out or
 * name NULL; ENOMEM; ENOTSUP: H chosen and no protection key left (15 in
 * all: one per domain, one per other access list). */
int kr_domain_create(kr_domain **out, const char *name);
/* EBUSY: a call is in it, or sections it owns remain; EINVAL: NULL. */
int kr_domain_destroy(kr_domain *d);
/* Export fn to d; *number is its procedure number (0, 1, ...).  EINVAL:
 * NULL arguments; ENOSPC: 64 procedures exported already.  Under KR_EPC_H
 * fn's code is checked first: EPERM if the code around it (its object's
 * executable segment, or its mapping) holds an instruction that could
 * write PKRU (WRPKRU, XRSTOR) outside karui's gates. */
int kr_domain_export(kr_domain *d, kr_epc_proc fn, unsigned *number);
/* 1 if d has failed (a call faulted in it), else 0. */
int kr_domain_failed(const kr_domain *d);
/* A failed domain back in service: its sections zeroed (fresh), its
 * stacks new.  EBUSY: a call is still in it; EINVAL: NULL or not failed. */
int kr_domain_restart(kr_domain *d);

/* ---------------- sections ---------------- */

enum { KR_SECTION_READ = 1u << 0, KR_SECTION_WRITE = 1u << 1 };

/* size bytes (rounded up to pages), zeroed, owned by `owner` (NULL: the
 * host), which may read and write it; no other domain may until allowed.
 * EINVAL: out NULL, size 0 or above 1 GiB; ENOMEM; ENOSPC: KR_EPC_H and no
 * protection key left for its access list. */
int kr_section_create(kr_section **out, kr_domain *owner, size_t size);
void *kr_section_addr(const kr_section *s);   /* NULL for NULL */
size_t kr_section_size(const kr_section *s);  /* 0 for NULL */
/* Set what domain d (NULL: the host) may do with s: KR_SECTION_READ,
 * KR_SECTION_WRITE (which implies read), or 0 to take it away; it holds
 * from the next entry into d (and at once for calls in progress under
 * KR_EPC_S).  EINVAL: s NULL or rights other than those; ENOSPC: 16
 * domains named on s already, or (KR_EPC_H) no protection key left for
 * the new list. */
int kr_section_allow(kr_section *s, kr_domain *d, unsigned rights);
/* EBUSY: a call is in a domain that may use it; EINVAL: NULL. */
int kr_section_destroy(kr_section *s);

/* ---------------- EPC ---------------- */

/* Run procedure `number` of d on the calling microprocess, in d, on a
 * stack of d's; *status is its return value.  Returns 0 when it ran and
 * returned (whatever its status), EFAULT when it faulted (d is failed
 * now), ENOTRECOVERABLE when d had failed, EINVAL for NULL d or status or
 * a number not exported, ELOOP past 32 nested calls, EPERM off a VP,
 * ENOMEM without a stack for it. */
int kr_epc_call(kr_domain *d, unsigned number, void *arg, void *result, int *status);
/* Inside a procedure: run fn(arg) outside the domain, with the host's
 * rights, on the microprocess's own stack, and come back; returns fn's
 * value.  karui's own calls (to sleep,
 * to do I/O, to wait) are made this way.  Outside a procedure it is a
 * plain call. */
int kr_epc_host(int (*fn)(void *arg), void *arg);
/* The domain the calling microprocess runs in: NULL for the host. */
kr_domain *kr_domain_current(void);

/* ---------------- ITC ---------------- */

/* A port for d's procedures.  EINVAL; ENOMEM. */
int kr_port_create(kr_port **out, kr_domain *d);
/* EBUSY: served or called right now; EINVAL. */
int kr_port_destroy(kr_port *p);
/* Ask the port's server to run procedure `number` with arg and result
 * (pointers into sections the server's domain may use) and wait for it:
 * *status is its return value.  Returns 0, EFAULT when the procedure
 * faulted, ENOTRECOVERABLE, EINVAL, ECANCELED or EPIPE (the port is
 * shut). */
int kr_port_call(kr_port *p, unsigned number, void *arg, void *result, int *status);
/* The server's loop, on the calling microprocess: serve calls one at a
 * time until kr_port_shut; returns 0 then (at once if shut already),
 * ECANCELED if cancelled while waiting for a call (a kr_port_shut under
 * way is answered first), EBUSY if another microprocess serves the
 * port. */
int kr_port_serve(kr_port *p);
/* Stop the server (its kr_port_serve returns) and refuse later calls
 * (EPIPE). */
int kr_port_shut(kr_port *p);

#ifdef __cplusplus
}
#endif
#endif
