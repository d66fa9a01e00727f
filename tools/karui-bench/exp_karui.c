/*
 * karui's side of the karui-bench experiments (definitions in
 * bench/peers/peers.h, which the peers implement too).  Each function
 * starts karui on the calling thread, times only the operations, and stops
 * karui again, so runs are independent.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "karui.h"
#include "exp.h"

static int start(void)
{
	kr_config c = {.vps = 1};
	return kr_init(&c);
}

/* Start karui keeping `cache` stacks per VP (0: the default) and allocate
 * room for a->n handles. */
static int start_n(const kb_args *a, size_t cache, kr_mp ***m)
{
	kr_config c = {.vps = 1, .stack_cache = cache};
	int err = kr_init(&c);
	if (err)
		return err;
	if (!(*m = malloc(a->n * sizeof **m))) {
		kr_fini();
		return ENOMEM;
	}
	return 0;
}

static long per_mp;
static void *yielder(void *a)
{
	for (long i = 0; i < per_mp; i++)
		kr_mp_yield();
	return a;
}

int kb_karui_yield(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	kr_mp *m[2];
	per_mp = a->iters / 2;
	kr_mp_create(&m[0], NULL, yielder, NULL);
	kr_mp_create(&m[1], NULL, yielder, NULL);
	double t0 = kb_now_ns();
	kr_mp_join(m[0], NULL); /* main sleeps; the two alternate */
	kr_mp_join(m[1], NULL);
	r->ns_per_op = (kb_now_ns() - t0) / (per_mp * 2);
	return kr_fini();
}

static kr_mp *peer[2];
static void *switcher(void *a)
{
	int me = (int)(intptr_t)a;
	while (!__atomic_load_n(&peer[!me], __ATOMIC_ACQUIRE))
		kr_mp_yield();
	for (long i = 0; i < per_mp; i++)
		kr_mp_switch_to(peer[!me]);
	return NULL;
}

/* Two microprocesses running fn(0) and fn(1), each told the other's
 * handle (peer[]), a->iters / 2 switches each; one operation = one switch. */
static int switch_pair(const kb_args *a, kb_res *r, kr_mp_fn fn)
{
	int err = start();
	if (err)
		return err;
	per_mp = a->iters / 2;
	peer[0] = peer[1] = NULL;
	kr_mp *m0, *m1;
	kr_mp_create(&m0, NULL, fn, (void *)0);
	kr_mp_create(&m1, NULL, fn, (void *)1);
	__atomic_store_n(&peer[0], m0, __ATOMIC_RELEASE);
	__atomic_store_n(&peer[1], m1, __ATOMIC_RELEASE);
	double t0 = kb_now_ns();
	kr_mp_join(m0, NULL);
	kr_mp_join(m1, NULL);
	r->ns_per_op = (kb_now_ns() - t0) / (per_mp * 2);
	return kr_fini();
}

int kb_karui_switch(const kb_args *a, kb_res *r)
{
	return switch_pair(a, r, switcher);
}

static void *nop(void *a) { return a; }

int kb_karui_create_join(const kb_args *a, kb_res *r)
{
	int err = start();
	if (err)
		return err;
	kr_mp *m;
	for (int i = 0; i < 64; i++) { /* warm the stack cache */
		kr_mp_create(&m, NULL, nop, NULL);
		kr_mp_join(m, NULL);
	}
	double t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		if ((err = kr_mp_create(&m, NULL, nop, NULL)) != 0)
			break;
		kr_mp_join(m, NULL);
	}
	r->ns_per_op = (kb_now_ns() - t0) / a->iters;
	kr_fini();
	return err;
}

int kb_karui_create_batch(const kb_args *a, kb_res *r)
{
	kr_mp **m;
	int err = start_n(a, (size_t)a->n, &m);
	if (err)
		return err;
	for (int warm = 0; warm < 2; warm++) { /* second round: cached stacks */
		double t0 = kb_now_ns();
		long made = 0;
		for (; made < a->n; made++)
			if ((err = kr_mp_create(&m[made], NULL, nop, NULL)) != 0)
				break;
		for (long i = 0; i < made; i++)
			kr_mp_join(m[i], NULL);
		r->ns_per_op = (kb_now_ns() - t0) / a->n;
		if (err)
			break;
	}
	free(m);
	kr_fini();
	return err;
}

static void *sleeper(void *a)
{
	kr_mp_park();
	return a;
}

int kb_karui_many(const kb_args *a, kb_res *r)
{
	kr_mp **m;
	int err = start_n(a, 0, &m);
	if (err)
		return err;
	kr_attr at = {.stack_size = KR_STACK_MIN, .flags = KR_MP_NOGUARD};
	double rss0 = kb_rss_kib(), t0 = kb_now_ns();
	long made = 0;
	for (; made < a->n; made++)
		if ((err = kr_mp_create(&m[made], &at, sleeper, NULL)) != 0)
			break;
	kr_mp_yield(); /* every one runs and goes to sleep */
	r->ns_per_op = (kb_now_ns() - t0) / (made ? made : 1);
	r->rss_kib = kb_rss_kib() - rss0;
	for (long i = 0; i < made; i++)
		kr_mp_unpark(m[i]);
	for (long i = 0; i < made; i++)
		kr_mp_join(m[i], NULL);
	free(m);
	kr_fini();
	return err;
}

/* ---- skynet: a spawn tree on 2 VPs, karui's defaults otherwise ---- */

/* A flow's argument: its number and its level (0: a leaf), in one word. */
#define SKY_ARG(num, lvl) ((void *)(((uintptr_t)(num) << 4) | (uintptr_t)(lvl)))
static unsigned long sky_peak;
static int sky_err;

/* kr_stats counts what is created while it reads: a reading stretched by
 * a preemption of this VP is dropped. */
static void sky_sample(void)
{
	kr_stats st;
	uint64_t t0 = kr_now();
	if (kr_stats_get(&st) != 0 || kr_now() - t0 > 20000)
		return;
	unsigned long p = __atomic_load_n(&sky_peak, __ATOMIC_RELAXED);
	while (st.mps_live > p && !__atomic_compare_exchange_n(&sky_peak, &p, st.mps_live, 1,
								__ATOMIC_RELAXED,
								__ATOMIC_RELAXED))
		;
}

static void *sky(void *arg)
{
	uintptr_t num = (uintptr_t)arg >> 4, lvl = (uintptr_t)arg & 15;
	if (lvl == 0) {
		if (num % KB_SKYNET_SAMPLE == 0)
			sky_sample();
		return (void *)num;
	}
	uintptr_t size = 1;
	for (uintptr_t l = 1; l < lvl; l++)
		size *= KB_SKYNET_DIV;
	kr_mp *c[KB_SKYNET_DIV];
	int made = 0, err = 0;
	for (; made < KB_SKYNET_DIV; made++)
		if ((err = kr_mp_create(&c[made], NULL, sky, SKY_ARG(num + made * size, lvl - 1))))
			break;
	uintptr_t sum = 0;
	for (int i = 0; i < made; i++) {
		void *r;
		kr_mp_join(c[i], &r);
		sum += (uintptr_t)r;
	}
	if (err)
		__atomic_store_n(&sky_err, err, __ATOMIC_RELAXED);
	return (void *)sum;
}

int kb_karui_skynet(const kb_args *a, kb_res *r)
{
	unsigned lvl = 0;
	uintptr_t leaves = 1;
	while (leaves < (uintptr_t)a->n) {
		leaves *= KB_SKYNET_DIV;
		lvl++;
	}
	if (leaves != (uintptr_t)a->n || lvl > 15)
		return EINVAL; /* a power of 10 */
	kr_config c = {.vps = 2};
	int err = kr_init(&c);
	if (err)
		return err;
	sky_peak = 0;
	sky_err = 0;
	double t0 = kb_now_ns();
	uintptr_t sum = (uintptr_t)sky(SKY_ARG(0, lvl));
	double t1 = kb_now_ns();
	err = kr_fini();
	if (!err)
		err = sky_err;
	if (!err && sum != leaves * (leaves - 1) / 2)
		err = EIO;
	r->ns_per_op = t1 - t0;
	r->peak = (double)sky_peak;
	return err;
}

/* ---- seed002.fig3/fig4: the nesting loop (nest.c) on two microprocesses
 * handing the VP to each other with kr_mp_switch_to ---- */

static long nest_l, nest_c;

static void nest_sw(void *other)
{
	kr_mp_switch_to(*(kr_mp **)other);
}

static void *nester(void *a)
{
	int me = (int)(intptr_t)a;
	while (!__atomic_load_n(&peer[!me], __ATOMIC_ACQUIRE))
		kr_mp_yield();
	kb_nest_run(nest_l, nest_c, per_mp, nest_sw, &peer[!me]);
	return NULL;
}

int kb_karui_nest(const kb_args *a, kb_res *r)
{
	if (a->l < 1 || a->c < a->l || a->iters < 2)
		return EINVAL;
	nest_l = a->l;
	nest_c = a->c;
	return switch_pair(a, r, nester);
}

/* ---- seed000.table2: a chain of microprocesses, each creating the next
 * and joining it, on one VP with the default settings ---- */

static long chain_n;

static void *chain_fn(void *arg)
{
	long d = (long)(intptr_t)arg;
	void *ret = NULL;
	if (d < chain_n) {
		kr_mp *c;
		int e = kr_mp_create(&c, NULL, chain_fn, (void *)(intptr_t)(d + 1));
		if (e)
			return (void *)(intptr_t)e;
		kr_mp_join(c, &ret);
	}
	return ret;
}

int kb_karui_chain(const kb_args *a, kb_res *r)
{
	if (a->n < 1 || a->iters < 1)
		return EINVAL;
	int err = start();
	if (err)
		return err;
	chain_n = a->n;
	void *ret = NULL;
	double t0 = kb_now_ns();
	ret = chain_fn((void *)0);
	double t1 = kb_now_ns();
	for (long i = 0; i < a->iters && !ret; i++)
		ret = chain_fn((void *)0);
	double t2 = kb_now_ns();
	r->ns_per_op = (t1 - t0) / (double)a->n;
	r->ns_cached = (t2 - t1) / (double)(a->n * a->iters);
	err = (int)(intptr_t)ret;
	int e2 = kr_fini();
	return err ? err : e2;
}
