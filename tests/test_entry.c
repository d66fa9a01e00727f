/* L3: rendezvous (src/sync/entry.c): calls, replies and timeouts. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

static kr_entry ent;

static void *server(void *a)
{
	for (long i = 0; i < (long)(uintptr_t)a; i++) {
		kr_call *c;
		KT_EQ(kr_entry_accept(&ent, &c), 0);
		long *msg = kr_call_msg(c);
		*msg += 1;
		if (i % 7 == 0)
			kr_mp_yield(); /* the caller stays blocked meanwhile */
		KT_EQ(kr_entry_reply(c, 0), 0);
	}
	return NULL;
}

static void *caller(void *a)
{
	for (long i = 0; i < 50; i++) {
		long v = i * 10;
		KT_EQ(kr_entry_call(&ent, &v), 0);
		KT_EQ(v, i * 10 + 1);
	}
	return a;
}

/* 200 callers and 2 acceptors on 2 VPs: every call is accepted once and
 * answered in place. */
static void rendezvous_answers_every_call_once(void)
{
	init(2);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_mp *s[2];
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&s[i], NULL, server, (void *)(uintptr_t)(200 * 50 / 2)), 0);
	run_all(200, caller, NULL);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(s[i], NULL), 0);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_fini(), 0);
}

/* A second reply to an answered call is refused and reaches nobody: the
 * caller has moved on, here to a second call whose waiter sits at the
 * same address, which only its own kr_call answers.  So are replies from
 * another microprocess and from a thread that is no VP. */
static int call_status[2];

static void *call_twice(void *a)
{
	long v = 1;
	call_status[0] = kr_entry_call(&ent, &v);
	v = 2;
	call_status[1] = kr_entry_call(&ent, &v);
	return a;
}

static void *reply_to(void *c) { return (void *)(intptr_t)kr_entry_reply(c, 13); }

static void *foreign_reply(void *c)
{
	return (void *)(intptr_t)(kr_entry_reply(c, 13) * 1000 + (kr_call_msg(c) != NULL));
}

static void second_reply_is_refused_and_reaches_nobody(void)
{
	init(1);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_mp *caller, *other;
	KT_EQ(kr_mp_create(&caller, NULL, call_twice, NULL), 0);
	KT_EQ(kr_mp_yield(), 0); /* the first call waits */
	kr_call *c1, *c2;
	KT_EQ(kr_entry_accept(&ent, &c1), 0);
	KT_EQ(*(long *)kr_call_msg(c1), 1);
	KT_EQ(kr_entry_reply(c1, 7), 0);
	KT_EQ(kr_mp_yield(), 0); /* the caller returns, and its second call waits */
	KT_EQ(call_status[0], 7);
	KT_EQ(kr_entry_reply(c1, 9), EINVAL);
	KT_CHECK(kr_call_msg(c1) == NULL);
	KT_EQ(kr_entry_accept(&ent, &c2), 0);
	KT_EQ(*(long *)kr_call_msg(c2), 2);
	KT_EQ(kr_entry_reply(c1, 9), EINVAL); /* whatever address c2 has */
	void *r;
	KT_EQ(kr_mp_create(&other, NULL, reply_to, c2), 0);
	KT_EQ(kr_mp_join(other, &r), 0);
	KT_EQ((intptr_t)r, EINVAL); /* c2 is not other's */
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, foreign_reply, c2), 0);
	KT_EQ(pthread_join(t, &r), 0);
	KT_EQ((intptr_t)r, EPERM * 1000);
	KT_EQ(kr_entry_reply(c2, 11), 0);
	KT_EQ(kr_mp_join(caller, NULL), 0);
	KT_EQ(call_status[1], 11);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_fini(), 0);
}

static uint64_t call_deadline;
static void *late_acceptor(void *a)
{
	kr_call *c;
	/* one VP: the caller waits already, not yet accepted (unless its
	 * deadline passed before this ran: then there is no call to take) */
	int e = kr_entry_accept_until(&ent, &c, call_deadline);
	if (e)
		return (void *)(intptr_t)e;
	/* past the caller's deadline: it must wait */
	KT_EQ(kr_mp_sleep_until(call_deadline + MS), 0);
	return (void *)(intptr_t)kr_entry_reply(c, 42);
}

static void rendezvous_timeouts_apply_before_acceptance_only(void)
{
	init(1);
	KT_EQ(kr_entry_init(&ent), 0);
	kr_call *c;
	long v = 0;
	uint64_t t0 = kr_now();
	KT_EQ(kr_entry_accept_until(&ent, &c, t0 + 2 * MS), ETIMEDOUT);
	KT_EQ(kr_entry_call_until(&ent, &v, kr_now() + 2 * MS), ETIMEDOUT);
	KT_CHECK(kr_now() >= t0 + 4 * MS);
	/* accepted as soon as it waits (the acceptor runs next), replied after
	 * its deadline.  If the acceptor runs only after the deadline (a busy
	 * machine can hold the VP's thread that long), the call rightly gives
	 * up unaccepted: the round proves nothing and is made again with twice
	 * the span. */
	for (uint64_t span = 200 * MS;; span *= 2) {
		KT_CHECK(span < 60000 * MS);
		kr_mp *a;
		KT_EQ(kr_mp_create(&a, NULL, late_acceptor, NULL), 0);
		call_deadline = kr_now() + span;
		int e = kr_entry_call_until(&ent, &v, call_deadline);
		void *r;
		KT_EQ(kr_mp_join(a, &r), 0);
		if ((intptr_t)r == ETIMEDOUT) {
			KT_EQ(e, ETIMEDOUT);
			continue;
		}
		KT_EQ(e, 42);
		KT_CHECK(kr_now() > call_deadline);
		KT_EQ((intptr_t)r, 0);
		break;
	}
	KT_EQ(kr_entry_accept(&ent, NULL), EINVAL);
	KT_EQ(kr_entry_reply(NULL, 0), EINVAL);
	KT_EQ(kr_entry_destroy(&ent), 0);
	KT_EQ(kr_entry_call(&ent, &v), EINVAL);
	KT_EQ(kr_fini(), 0);
	KT_EQ(kr_entry_call(&ent, &v), EPERM);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(rendezvous_answers_every_call_once);
	KT_RUN(rendezvous_timeouts_apply_before_acceptance_only);
	KT_RUN(second_reply_is_refused_and_reaches_nobody);
	return kt_finish();
}
