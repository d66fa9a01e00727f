/*
 * karui's side of the synchronisation experiments of karui-bench (seed 000
 * Tables 3 and 4; definitions in bench/peers/peers.h).  Each runs on one
 * VP, like the peers run on one core, so what is measured is the
 * primitive and the switch, not the machine's cross-core traffic.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "karui.h"
#include "exp.h"

static int start_on(unsigned vps)
{
	kr_config c = {.vps = vps};
	return kr_init(&c);
}

static int start(void) { return start_on(1); }

/* Run fa(xa) and fb(xb) as two microprocesses; time until both end. */
static int pair(void *(*fa)(void *), void *xa, void *(*fb)(void *), void *xb, double *ns)
{
	kr_mp *a, *b;
	int err = kr_mp_create(&a, NULL, fa, xa);
	if (!err && (err = kr_mp_create(&b, NULL, fb, xb)) != 0)
		kr_mp_join(a, NULL);
	if (err)
		return err;
	double t0 = kb_now_ns();
	kr_mp_join(a, NULL);
	kr_mp_join(b, NULL);
	*ns = kb_now_ns() - t0;
	return 0;
}

static int finish(int err, double ns, long ops, kb_res *r)
{
	int e = kr_fini();
	if (err)
		return err;
	r->ns_per_op = ns / ops;
	return e;
}

int kb_karui_mutex(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	kr_mutex m = {0};
	double t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		kr_mutex_lock(&m);
		kr_mutex_unlock(&m);
	}
	return finish(0, kb_now_ns() - t0, a->iters, r);
}

int kb_karui_monitor(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	kr_mutex m = {0};
	kr_cond c = {0};
	double t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		kr_mutex_lock(&m);
		kr_cond_signal(&c);
		kr_mutex_unlock(&m);
	}
	return finish(0, kb_now_ns() - t0, a->iters, r);
}

/* ---- two microprocesses taking turns ---- */

static long rounds;

static struct {
	kr_mutex m;
	kr_cond c[2];
	int turn;
} mon;

static void *cv_side(void *arg)
{
	int me = (int)(intptr_t)arg;
	kr_mutex_lock(&mon.m);
	for (long i = 0; i < rounds; i++) {
		while (mon.turn != me)
			kr_cond_wait(&mon.c[me], &mon.m);
		mon.turn = !me;
		kr_cond_signal(&mon.c[!me]);
	}
	kr_mutex_unlock(&mon.m);
	return NULL;
}


int kb_karui_condvar_pingpong(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	memset(&mon, 0, sizeof mon);
	rounds = a->iters;
	double ns = 0;
	err = pair(cv_side, (void *)0, cv_side, (void *)1, &ns);
	return finish(err, ns, a->iters, r);
}

static kr_sem sems[2];

static void *sem_a(void *x)
{
	for (long i = 0; i < rounds; i++) {
		kr_sem_post(&sems[0]);
		kr_sem_wait(&sems[1]);
	}
	return x;
}

static void *sem_b(void *x)
{
	for (long i = 0; i < rounds; i++) {
		kr_sem_wait(&sems[0]);
		kr_sem_post(&sems[1]);
	}
	return x;
}

int kb_karui_sem_pingpong(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	memset(sems, 0, sizeof sems);
	rounds = a->iters;
	double ns = 0;
	err = pair(sem_a, NULL, sem_b, NULL, &ns);
	return finish(err, ns, a->iters, r);
}

static kr_chan chans[2];

static void *chan_a(void *x)
{
	for (long i = 0; i < rounds; i++) {
		int v = (int)i;
		kr_chan_send(&chans[0], &v);
		kr_chan_recv(&chans[1], &v);
	}
	return x;
}

static void *chan_b(void *x)
{
	for (long i = 0; i < rounds; i++) {
		int v;
		kr_chan_recv(&chans[0], &v);
		kr_chan_send(&chans[1], &v);
	}
	return x;
}

/* a->iters rounds of fa(0) and fb(1) on two unbuffered channels of
 * `esize`-byte elements, on `vps` VPs; the time until both end */
static int chan_pair_on(unsigned vps, const kb_args *a, void *(*fa)(void *),
			void *(*fb)(void *), size_t esize, double *ns)
{
	int err = start_on(vps);
	if (err)
		return err;
	kr_chan_init(&chans[0], esize, 0);
	kr_chan_init(&chans[1], esize, 0);
	rounds = a->iters;
	err = pair(fa, (void *)0, fb, (void *)1, ns);
	kr_chan_destroy(&chans[0]);
	kr_chan_destroy(&chans[1]);
	return err;
}

static int chan_pair(const kb_args *a, void *(*fa)(void *), void *(*fb)(void *), size_t esize,
		     double *ns)
{
	return chan_pair_on(1, a, fa, fb, esize, ns);
}

int kb_karui_chan_pingpong(const kb_args *a, kb_res *r)
{
	double ns = 0;
	int err = chan_pair(a, chan_a, chan_b, sizeof(int), &ns);
	return finish(err, ns, a->iters, r);
}

/* The same on 2 VPs, the flows where the scheduler puts them: a woken flow
 * goes into its waker's VP's slot, and the other VP, idle, takes from it
 * (sched_default.c), so the round trips mix hand-overs within a VP and
 * between the two, and every one takes the locked instructions of
 * several VPs (no one-VP state). */
int kb_karui_chan_pingpong_2vp(const kb_args *a, kb_res *r)
{
	double ns = 0;
	int err = chan_pair_on(2, a, chan_a, chan_b, sizeof(int), &ns);
	return finish(err, ns, a->iters, r);
}

/* chan_relay: both flows run relay(), so each blocks under the same return
 * addresses: receive on its own channel, send on the other's.  Flow 0
 * starts the token and keeps the last one; the token must come back to it
 * as the number of rounds. */
static long relay_end;

static __attribute__((noinline)) void *relay(void *x)
{
	int me = (int)(intptr_t)x;
	long v = 0;
	if (me == 0)
		kr_chan_send(&chans[1], &v);
	for (long i = 0; i < rounds; i++) {
		kr_chan_recv(&chans[me], &v);
		v += me;
		if (me || i + 1 < rounds)
			kr_chan_send(&chans[!me], &v);
	}
	if (me == 0)
		relay_end = v;
	return x;
}

int kb_karui_chan_relay(const kb_args *a, kb_res *r)
{
	double ns = 0;
	relay_end = -1;
	int err = chan_pair(a, relay, relay, sizeof(long), &ns);
	if (!err && relay_end != a->iters)
		err = EIO;
	return finish(err, ns, a->iters, r);
}

static kr_entry entry;

static void *rv_caller(void *x)
{
	for (long i = 0; i < rounds; i++) {
		int v = (int)i;
		kr_entry_call(&entry, &v);
	}
	return x;
}

static void *rv_server(void *x)
{
	for (long i = 0; i < rounds; i++) {
		kr_call *c;
		kr_entry_accept(&entry, &c);
		*(int *)kr_call_msg(c) += 1;
		kr_entry_reply(c, 0);
	}
	return x;
}

int kb_karui_rendezvous(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	kr_entry_init(&entry);
	rounds = a->iters;
	double ns = 0;
	err = pair(rv_caller, NULL, rv_server, NULL, &ns);
	return finish(err, ns, a->iters, r);
}

/* ---- stream: a->iters blocks of 4 KiB through a karui pipe ---- */

enum { BLOCK = 4096 };
static kr_stream pipe_s;
static long stream_bad;

static void *st_writer(void *x)
{
	static unsigned char buf[BLOCK];
	for (long i = 0; i < rounds; i++) {
		buf[0] = (unsigned char)i;
		kr_stream_write(&pipe_s, buf, BLOCK, NULL);
	}
	kr_stream_close_write(&pipe_s);
	return x;
}

static void *st_reader(void *x)
{
	static unsigned char buf[BLOCK];
	long total = 0;
	size_t got;
	while (kr_stream_read(&pipe_s, buf, BLOCK, &got) == 0 && got)
		total += (long)got;
	stream_bad = total != rounds * BLOCK;
	return x;
}

int kb_karui_stream(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	/* the capacity of a Linux pipe, for a like-for-like comparison */
	if ((err = kr_stream_init(&pipe_s, 65536)) != 0) {
		kr_fini();
		return err;
	}
	rounds = a->iters;
	double ns = 0;
	err = pair(st_reader, NULL, st_writer, NULL, &ns);
	kr_stream_destroy(&pipe_s);
	if (!err && stream_bad)
		err = EIO;
	return finish(err, ns, a->iters, r);
}

/* ---- prodcons: 64 producers, 64 consumers, one monitor ---- */

static struct {
	kr_mutex m;
	kr_cond not_full, not_empty;
	long buf[KB_PC_SLOTS];
	unsigned head, count;
	long items;     /* in all */
	long sum;       /* what the consumers took */
	int abort;      /* not every flow could be created */
} pc;

/* Every flow starts here: main holds the mutex until all are created. */
static int pc_start(void)
{
	kr_mutex_lock(&pc.m);
	int go = !pc.abort;
	kr_mutex_unlock(&pc.m);
	return go;
}

/* flow i's share of the items: [lo, hi) */
static void pc_share(long i, long *lo, long *hi)
{
	*lo = pc.items * i / KB_PC_FLOWS;
	*hi = pc.items * (i + 1) / KB_PC_FLOWS;
}

static void *pc_producer(void *arg)
{
	long lo, hi;
	pc_share((long)(intptr_t)arg, &lo, &hi);
	if (!pc_start())
		return arg;
	for (long v = lo; v < hi; v++) {
		kr_mutex_lock(&pc.m);
		while (pc.count == KB_PC_SLOTS)
			kr_cond_wait(&pc.not_full, &pc.m);
		pc.buf[(pc.head + pc.count++) % KB_PC_SLOTS] = v;
		kr_cond_signal(&pc.not_empty);
		kr_mutex_unlock(&pc.m);
		if ((v - lo + 1) % KB_PC_PAUSE_EVERY == 0)
			kr_mp_sleep_for(KB_PC_PAUSE_NS);
	}
	return arg;
}

static void *pc_consumer(void *arg)
{
	long lo, hi, sum = 0;
	pc_share((long)(intptr_t)arg, &lo, &hi);
	if (!pc_start())
		return arg;
	for (long n = lo; n < hi; n++) {
		kr_mutex_lock(&pc.m);
		while (pc.count == 0)
			kr_cond_wait(&pc.not_empty, &pc.m);
		sum += pc.buf[pc.head];
		pc.head = (pc.head + 1) % KB_PC_SLOTS;
		pc.count--;
		kr_cond_signal(&pc.not_full);
		kr_mutex_unlock(&pc.m);
	}
	kr_mutex_lock(&pc.m);
	pc.sum += sum;
	kr_mutex_unlock(&pc.m);
	return arg;
}

static int prodcons(const kb_args *a, kb_res *r, unsigned vps)
{
	kr_config c = {.vps = vps};
	int err = kr_init(&c);
	if (err)
		return err;
	memset(&pc, 0, sizeof pc);
	pc.items = a->iters;
	kr_mp *m[2 * KB_PC_FLOWS];
	int made = 0;
	double t0 = kb_now_ns();
	kr_mutex_lock(&pc.m);
	for (; made < 2 * KB_PC_FLOWS; made++)
		if ((err = kr_mp_create(&m[made], NULL, made % 2 ? pc_consumer : pc_producer,
					(void *)(intptr_t)(made / 2))) != 0)
			break;
	pc.abort = err != 0;
	kr_mutex_unlock(&pc.m);
	for (int i = 0; i < made; i++)
		kr_mp_join(m[i], NULL);
	double t1 = kb_now_ns();
	if (!err && pc.sum != pc.items * (pc.items - 1) / 2)
		err = EIO;
	return finish(err, t1 - t0, 1, r);
}

int kb_karui_prodcons(const kb_args *a, kb_res *r) { return prodcons(a, r, 2); }
int kb_karui_prodcons_1vp(const kb_args *a, kb_res *r) { return prodcons(a, r, 1); }
