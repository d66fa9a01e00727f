/*
 * karui L3 — synchronisation and communication between microprocesses
 * (seed 000 §2.2 level 3): semaphores, monitors (mutex + condition
 * variables), barriers, channels, byte streams and Ada-style rendezvous.
 *
 * Everything here is built on the level-2 calls of core.h (kr_mp_park,
 * kr_mp_unpark, kr_mp_park_and_switch, kr_mp_park_until, kr_mp_park_cancellable_until),
 * as the seed intends: the sources are a prototype for an application's
 * own primitives.  Channels are the exception: their waits are served
 * waits, a protocol inside karui's L2 (src/core/served.c) that spares a
 * hand-over between VPs the permit's two read-modify-writes.
 *
 * Common rules.
 *  - Objects may sit anywhere in memory.  A zero-filled sem (count 0),
 *    mutex, cond or entry is valid, so a static one needs no init call;
 *    barrier, chan and stream need their init.  After
 *    *_destroy, every call on the object returns EINVAL until it is
 *    initialised again.  Destroying an object that someone waits on (or a
 *    locked mutex) returns EBUSY and changes nothing.
 *  - Every call returns 0 or a positive errno code (include/karui.h): a
 *    NULL or destroyed object is EINVAL; results go to out-parameters.
 *  - Blocking calls are for microprocesses: on a thread that is no VP they
 *    return EPERM.  Non-blocking ones (init, destroy, sem trywait, post and
 *    getvalue, mutex trylock and unlock, signal, broadcast, the try*
 *    channel calls, the closes, entry reply) work from any thread, so a
 *    plain kernel thread can hand work to microprocesses.
 *  - A blocked microprocess is off every VP: it costs no CPU.
 *  - Waiters are served in FIFO order, and handed what they wait for
 *    directly: a posted semaphore unit, the mutex (owner to waiter, no
 *    barging), a channel element, stream bytes (one copy, writer's buffer
 *    to reader's).  A signalled condition waiter moves straight onto the
 *    mutex's queue (wait morphing) and wakes up owning it.
 *  - Each call that waits has a form ..._until that takes an absolute
 *    kr_now() deadline last (KR_FOREVER: none) and returns ETIMEDOUT when
 *    it passes first, leaving no trace in the object.
 *  - Cancellation (kr_mp_cancel, core.h): every blocking call here but
 *    mutex locking and barrier waits returns ECANCELED when the caller is
 *    cancelled while it waits (or was before it had to), with no more
 *    trace than a timeout.  Mutex locking and barriers are not cancellable:
 *    leaving them half way would break the program's invariants (the lock
 *    a caller assumes it holds, a round's count).
 *  - kr_mp_park may return early in a microprocess that also uses these
 *    objects (a late wakeup can leave its permit set): level-2 code loops
 *    on its own condition, as every primitive here does.  A kr_mp_unpark
 *    that comes while the microprocess waits in a channel call does not
 *    end that wait: it stays pending for the next kr_mp_park.
 */
#ifndef KARUI_SYNC_H
#define KARUI_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "karui/core.h"
#include "karui/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The queue of blocked microprocesses inside every object. */
struct kr_waiter;
typedef struct kr_waitq {
	struct kr_waiter *head, *tail;
} kr_waitq;

/* ---------------- semaphores ---------------- */

#define KR_SEM_MAX 0x7fffffffL

typedef struct kr_sem {
	kr_spin lock;
	uint32_t dead;
	long count;
	kr_waitq q;
} kr_sem;

/* EINVAL: value < 0 or > KR_SEM_MAX */
int kr_sem_init(kr_sem *s, long value);
int kr_sem_destroy(kr_sem *s);
int kr_sem_wait(kr_sem *s);
int kr_sem_wait_until(kr_sem *s, uint64_t deadline);
int kr_sem_trywait(kr_sem *s);              /* EAGAIN: count is 0 */
/* Add n units, 1 <= n <= KR_SEM_MAX (EINVAL otherwise); EOVERFLOW when
 * the count would pass KR_SEM_MAX (nothing changes). */
int kr_sem_post(kr_sem *s);
int kr_sem_post_n(kr_sem *s, long n);
int kr_sem_getvalue(kr_sem *s, long *value);

/* ---------------- monitors: mutex + condition variables ---------------- */

/* state: 0 free, else the owner's token | 1 when someone waits in q;
 * moved: condition waiters signalled by the owner, the owner's alone */
typedef struct kr_mutex {
	uintptr_t state;
	kr_spin lock;
	kr_waitq q;
	kr_waitq moved;
} kr_mutex;

int kr_mutex_init(kr_mutex *m);
int kr_mutex_destroy(kr_mutex *m);          /* EBUSY: locked */
int kr_mutex_lock(kr_mutex *m);             /* EDEADLK: the caller holds it */
int kr_mutex_lock_until(kr_mutex *m, uint64_t deadline);
int kr_mutex_trylock(kr_mutex *m);          /* EBUSY: held */
int kr_mutex_unlock(kr_mutex *m);           /* EPERM: the caller does not hold it */

typedef struct kr_cond {
	kr_spin lock;
	uint32_t dead;
	kr_waitq q;
	uint32_t nwait;             /* waiters in q, readable without the lock */
} kr_cond;

int kr_cond_init(kr_cond *c);
int kr_cond_destroy(kr_cond *c);
/* m must be held by the caller (EPERM); it is held again on return, also
 * on ETIMEDOUT and ECANCELED. */
int kr_cond_wait(kr_cond *c, kr_mutex *m);
int kr_cond_wait_until(kr_cond *c, kr_mutex *m, uint64_t deadline);
int kr_cond_signal(kr_cond *c);
int kr_cond_broadcast(kr_cond *c);

/* ---------------- barriers ---------------- */

typedef struct kr_barrier {
	kr_spin lock;
	uint32_t dead;
	unsigned count, arrived;
	kr_waitq q;
} kr_barrier;

int kr_barrier_init(kr_barrier *b, unsigned count); /* EINVAL: count 0 */
int kr_barrier_destroy(kr_barrier *b);
/* Wait until `count` have arrived.  *serial (may be NULL) is 1 for one
 * of each round, the last to arrive, and 0 for the others. */
int kr_barrier_wait(kr_barrier *b, int *serial);

/* ---------------- channels ---------------- */

typedef struct kr_chan {
	kr_spin lock;
	uint32_t dead, closed;
	size_t esize, cap;          /* element bytes; capacity (0: unbuffered) */
	size_t head, count;         /* the ring */
	unsigned char *buf;
	kr_waitq senders, receivers;
} kr_chan;

#define KR_CHAN_ESIZE_MAX 65536u

/* EINVAL: esize 0 or > KR_CHAN_ESIZE_MAX, or capacity absurd; ENOMEM */
int kr_chan_init(kr_chan *ch, size_t esize, size_t capacity);
int kr_chan_destroy(kr_chan *ch);
/* Copy esize bytes in / out.  Unbuffered: send waits for a receiver.
 * EPIPE: closed (recv: closed and drained). */
int kr_chan_send(kr_chan *ch, const void *elem);
int kr_chan_send_until(kr_chan *ch, const void *elem, uint64_t deadline);
int kr_chan_trysend(kr_chan *ch, const void *elem);  /* EAGAIN: would block */
int kr_chan_recv(kr_chan *ch, void *elem);
int kr_chan_recv_until(kr_chan *ch, void *elem, uint64_t deadline);
int kr_chan_tryrecv(kr_chan *ch, void *elem);        /* EAGAIN */
/* No more sends: blocked senders get EPIPE, receivers drain what is
 * buffered and then get EPIPE.  EPIPE if closed already. */
int kr_chan_close(kr_chan *ch);

/* ---------------- byte streams (pipes between microprocesses) ---------------- */

typedef struct kr_stream {
	kr_spin lock;
	uint32_t dead, rclosed, wclosed;
	size_t cap, head, count;    /* the ring */
	unsigned char *buf;
	kr_waitq readers, writers;
} kr_stream;

/* EINVAL: capacity 0 or above 1 GiB; ENOMEM */
int kr_stream_init(kr_stream *s, size_t capacity);
int kr_stream_destroy(kr_stream *s);
/* Write all len bytes; *done (may be NULL) receives how many went in.
 * EPIPE: the read side is closed; ETIMEDOUT, ECANCELED: the deadline
 * passed, or the caller was cancelled, while it waited for room.  On each
 * error *done tells how far it got, and those bytes stay in. */
int kr_stream_write(kr_stream *s, const void *buf, size_t len, size_t *done);
int kr_stream_write_until(kr_stream *s, const void *buf, size_t len, size_t *done,
			  uint64_t deadline);
/* Read at least one byte and at most len: *got (not NULL) receives the
 * count; 0 with *got == 0 is end of stream (write side closed, drained). */
int kr_stream_read(kr_stream *s, void *buf, size_t len, size_t *got);
int kr_stream_read_until(kr_stream *s, void *buf, size_t len, size_t *got,
			 uint64_t deadline);
int kr_stream_close_write(kr_stream *s); /* readers see EOF once drained */
/* No more reads: what is buffered is dropped, and writers, readers that
 * wait and later reads and writes get EPIPE (a reader's *got is 0). */
int kr_stream_close_read(kr_stream *s);
/* The stream as a poll sees it, without waiting: *buffered, the bytes a
 * read would find; *room, what a write could put in without waiting;
 * *closed, KR_STREAM_RCLOSED and KR_STREAM_WCLOSED for the sides closed.
 * Any out-parameter may be NULL.  EINVAL: s NULL. */
enum { KR_STREAM_RCLOSED = 1u << 0, KR_STREAM_WCLOSED = 1u << 1 };
int kr_stream_poll(kr_stream *s, size_t *buffered, size_t *room, unsigned *closed);

/* ---------------- rendezvous (Ada entries) ---------------- */

typedef struct kr_entry {
	kr_spin lock;
	uint32_t dead;
	kr_waitq callers, acceptors;
} kr_entry;

typedef struct kr_call kr_call; /* an accepted call, until its reply (opaque) */

int kr_entry_init(kr_entry *e);
int kr_entry_destroy(kr_entry *e);
/* Call the entry with `msg` (the acceptor reads and writes it in place)
 * and wait for the acceptor to accept and reply; returns the reply's
 * status.  A call gives up (ETIMEDOUT, ECANCELED) only before it is
 * accepted; once accepted it waits for the reply. */
int kr_entry_call(kr_entry *e, void *msg);
int kr_entry_call_until(kr_entry *e, void *msg, uint64_t deadline);
/* Wait for a call; *call is then the caller's, to be answered once, by
 * the microprocess that accepted it. */
int kr_entry_accept(kr_entry *e, kr_call **call);
int kr_entry_accept_until(kr_entry *e, kr_call **call, uint64_t deadline);
/* The call's message; NULL unless the caller accepted the call and has
 * not answered it. */
void *kr_call_msg(kr_call *call);
/* End the rendezvous: the caller resumes, its kr_entry_call returning
 * `status`.  EINVAL: NULL, a call answered already, or one the caller did
 * not accept (nothing is touched then: the caller of an answered call may
 * have moved on); EPERM: off a VP. */
int kr_entry_reply(kr_call *call, int status);

#ifdef __cplusplus
}
#endif
#endif
