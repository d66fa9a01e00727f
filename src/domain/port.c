/*
 * karui domains — ITC ports (seed 001 §3.2): a server microprocess runs a
 * domain's procedures for client microprocesses.
 *
 * A port is a rendezvous (sync.h's kr_entry) whose message names the
 * procedure and carries the pointers; the server accepts a call, runs the
 * procedure by EPC into the port's domain on its own microprocess (so the
 * domain's protection and fault handling are EPC's), and replies with
 * the outcome.  Data goes through sections both may use, by pointer:
 * nothing is copied.  The client and the server may be on one VP (the
 * rendezvous hands the VP over) or on two.  kr_port_shut wakes the
 * server with a call of its own that ends its loop; later calls get EPIPE.
 */
#include <errno.h>
#include <stdlib.h>

#include "karui/domain.h"
#include "karui/sync.h"

enum { SHUT = ~0u };
enum { IDLE, SERVING, CLOSED }; /* kr_port.state */

struct kr_port {
	kr_entry entry;
	kr_domain *d;
	uint32_t state;   /* atomic: a server starts from IDLE only; kr_port_shut
	                     sends the SHUT call only to one that did */
};

struct msg {
	unsigned number;
	void *arg, *result;
	int status;
};

int kr_port_create(kr_port **out, kr_domain *d)
{
	if (!out || !d)
		return EINVAL;
	kr_port *p = calloc(1, sizeof *p);
	if (!p)
		return ENOMEM;
	int err = kr_entry_init(&p->entry);
	if (err) {
		free(p);
		return err;
	}
	p->d = d;
	*out = p;
	return 0;
}

int kr_port_destroy(kr_port *p)
{
	if (!p)
		return EINVAL;
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == SERVING)
		return EBUSY;
	int err = kr_entry_destroy(&p->entry);
	if (err)
		return err;
	free(p);
	return 0;
}

int kr_port_call(kr_port *p, unsigned number, void *arg, void *result, int *status)
{
	if (!p || !status || number == SHUT)
		return EINVAL;
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == CLOSED)
		return EPIPE;
	struct msg m = {number, arg, result, 0};
	int r = kr_entry_call(&p->entry, &m);
	if (r == 0)
		*status = m.status;
	return r;
}

int kr_port_serve(kr_port *p)
{
	if (!p)
		return EINVAL;
	uint32_t idle = IDLE;
	if (!__atomic_compare_exchange_n(&p->state, &idle, SERVING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return idle == CLOSED ? 0 : EBUSY;
	int err = 0;
	for (;;) {
		kr_call *call;
		err = kr_entry_accept(&p->entry, &call);
		if (err)
			break;
		struct msg *m = kr_call_msg(call);
		if (m->number == SHUT) {
			kr_entry_reply(call, 0);
			break;
		}
		int r = kr_epc_call(p->d, m->number, m->arg, m->result, &m->status);
		kr_entry_reply(call, r);
	}
	/* on SHUT the state is CLOSED already, and p may be gone */
	uint32_t serving = SERVING;
	if (err && !__atomic_compare_exchange_n(&p->state, &serving, IDLE, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
		/* cancelled while kr_port_shut was under way: its call still
		 * wants an answer (others, EPIPE), the cancel notwithstanding */
		for (;;) {
			kr_call *call;
			int e = kr_entry_accept(&p->entry, &call);
			if (e == ECANCELED)
				continue;
			if (e)
				break;
			struct msg *m = kr_call_msg(call);
			int shut = m->number == SHUT;
			kr_entry_reply(call, shut ? 0 : EPIPE);
			if (shut)
				break;
		}
	}
	return err;
}

int kr_port_shut(kr_port *p)
{
	if (!p)
		return EINVAL;
	if (__atomic_exchange_n(&p->state, CLOSED, __ATOMIC_ACQ_REL) != SERVING)
		return 0;
	/* a server that started takes calls until this one */
	struct msg m = {SHUT, NULL, NULL, 0};
	return kr_entry_call(&p->entry, &m);
}
