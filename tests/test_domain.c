/*
 * Domains (seed 001): EPC in each protection mode, faults that end a call
 * and fail a domain, restarts, nested and blocking calls, calls from
 * several VPs at once, cancellation, ITC ports, and the errors of the API.
 * Every protection test that can fail runs once more with protection off
 * (KR_EPC_N), where the escape must succeed: a test of the test.
 *
 * Built twice: test_domain protects with KR_EPC_S; test_domain_h (-static,
 * TEST_EPC_H) with protection keys, KR_EPC_H, where the CPU has them (in
 * the VM of scripts/pku-vm on these hosts) and skips where it has none.
 * The cases that need keys themselves run in both, skipped without them.
 */
#include "kt.h"

#include <karui/domain.h>
#include <karui/sync.h>

#define MS 1000000ull

#include <pthread.h>
#include <sys/mman.h>

/* An address no procedure may touch: a page that is never accessible (a
 * null pointer would do, but the UBSan build reports the store). */
static void *bad_address(void)
{
	static void *page;
	if (!page)
		page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return page;
}

#ifdef TEST_EPC_H
#define PROT KR_EPC_H
#else
#define PROT KR_EPC_S
#endif

/* Does this CPU give protection keys? */
static int keys_here(void)
{
	int k = pkey_alloc(0, 0);
	if (k >= 0)
		pkey_free(k);
	return k >= 0;
}

static void init(unsigned vps, int mode)
{
	if (mode == KR_EPC_H && !keys_here())
		KT_SKIP("no protection keys here");
	KT_EQ(kr_epc_mode_set(mode), 0);
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

/* ---------------- procedures ---------------- */

static int null_proc(void *arg, void *result)
{
	(void)arg;
	(void)result;
	return 0;
}

/* out[i] = map[in[i]]: the seed's colour-map lookup; arg: struct copy */
struct copy {
	unsigned char map[256];
	size_t n;
	unsigned char in[8192];
};

static int lookup(void *arg, void *result)
{
	const struct copy *c = arg;
	unsigned char *out = result;
	for (size_t i = 0; i < c->n; i++)
		out[i] = c->map[c->in[i]];
	return 7;
}

/* writes one byte at the address it is given */
static int poke(void *arg, void *result)
{
	(void)result;
	*(volatile unsigned char *)arg = 1;
	return 0;
}

/* reads one byte at the address it is given, into *result */
static int peek(void *arg, void *result)
{
	*(unsigned char *)result = *(volatile unsigned char *)arg;
	return 0;
}

/* the address of one of its own locals, in *result */
static int where(void *arg, void *result)
{
	(void)arg;
	volatile int local = 0;
	*(uintptr_t *)result = (uintptr_t)&local + (uintptr_t)local;
	return 0;
}

/* A domain that exports poke and peek, and a section of the host's that
 * it may write (peek's result). */
static void poke_peek(kr_domain **d, const char *name, unsigned *n_poke, unsigned *n_peek,
		      kr_section **res)
{
	KT_EQ(kr_domain_create(d, name), 0);
	KT_EQ(kr_domain_export(*d, poke, n_poke), 0);
	KT_EQ(kr_domain_export(*d, peek, n_peek), 0);
	KT_EQ(kr_section_create(res, NULL, 4096), 0);
	KT_EQ(kr_section_allow(*res, *d, KR_SECTION_WRITE), 0);
}

static kr_domain *dom_a, *dom_b, *dom_c;
static unsigned a_proc, b_proc, c_proc;

/* ---------------- EPC ---------------- */

static void a_call_runs_the_procedure_on_a_stack_of_its_domain(void)
{
	init(1, KR_EPC_N);
	kr_domain *d;
	unsigned n0, n1;
	kr_section *s;
	KT_EQ(kr_domain_create(&d, "d"), 0);
	KT_EQ(kr_domain_export(d, null_proc, &n0), 0);
	KT_EQ(kr_domain_export(d, where, &n1), 0);
	KT_EQ(n0, 0);
	KT_EQ(n1, 1);
	KT_EQ(kr_section_create(&s, NULL, 64), 0);
	KT_EQ(kr_section_size(s), (size_t)sysconf(_SC_PAGESIZE));
	KT_EQ(kr_section_allow(s, d, KR_SECTION_WRITE), 0);
	int st = -1;
	KT_EQ(kr_epc_call(d, n0, NULL, NULL, &st), 0);
	KT_EQ(st, 0);
	uintptr_t *at = kr_section_addr(s);
	KT_EQ(kr_epc_call(d, n1, NULL, at, &st), 0);
	volatile int mine = 0;
	uintptr_t here = (uintptr_t)&mine;
	/* not on the caller's stack (a 64 KiB stack at most here) */
	KT_CHECK(*at > here + (1u << 20) || *at + (1u << 20) < here);
	KT_CHECK(kr_domain_current() == NULL);
	KT_EQ(kr_section_destroy(s), 0);
	KT_EQ(kr_domain_destroy(d), 0);
	KT_EQ(kr_fini(), 0);
}

static void arguments_and_results_go_by_pointer_through_sections(void)
{
	init(1, PROT);
	kr_domain *d;
	unsigned n;
	kr_section *arg, *res;
	KT_EQ(kr_domain_create(&d, "colour"), 0);
	KT_EQ(kr_domain_export(d, lookup, &n), 0);
	KT_EQ(kr_section_create(&arg, NULL, sizeof(struct copy)), 0);
	KT_EQ(kr_section_create(&res, NULL, 8192), 0);
	KT_EQ(kr_section_allow(arg, d, KR_SECTION_READ), 0);
	KT_EQ(kr_section_allow(res, d, KR_SECTION_WRITE), 0);
	struct copy *c = kr_section_addr(arg);
	unsigned char *out = kr_section_addr(res);
	for (int i = 0; i < 256; i++)
		c->map[i] = (unsigned char)(255 - i);
	c->n = 8192;
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < c->n; i++)
			c->in[i] = (unsigned char)(i * 7 + round);
		int st = 0;
		KT_EQ(kr_epc_call(d, n, c, out, &st), 0);
		KT_EQ(st, 7);
		for (size_t i = 0; i < c->n; i++)
			KT_EQ(out[i], 255 - c->in[i]);
	}
	KT_EQ(kr_fini(), 0);
}

static void a_fault_ends_the_call_and_fails_the_domain_until_restarted(void)
{
	init(1, PROT);
	kr_domain *d;
	unsigned n_poke, n_peek;
	kr_section *own, *res;
	poke_peek(&d, "bad", &n_poke, &n_peek, &res);
	KT_EQ(kr_section_create(&own, d, 4096), 0);
	unsigned char *mine = kr_section_addr(own);
	int st = -1;
	/* its own section: fine, and the write stays */
	KT_EQ(kr_epc_call(d, n_poke, mine, NULL, &st), 0);
	KT_EQ(st, 0);
	KT_EQ(kr_epc_call(d, n_peek, mine, kr_section_addr(res), &st), 0);
	KT_EQ(*(unsigned char *)kr_section_addr(res), 1);
	/* a bad pointer: the call ends, not the process */
	KT_EQ(kr_epc_call(d, n_poke, bad_address(), NULL, &st), EFAULT);
	KT_EQ(kr_domain_failed(d), 1);
	KT_EQ(kr_epc_call(d, n_peek, mine, kr_section_addr(res), &st), ENOTRECOVERABLE);
	KT_EQ(kr_domain_restart(d), 0);
	KT_EQ(kr_domain_failed(d), 0);
	KT_EQ(kr_domain_restart(d), EINVAL); /* not failed */
	/* fresh sections: the byte it wrote is gone */
	KT_EQ(kr_epc_call(d, n_peek, mine, kr_section_addr(res), &st), 0);
	KT_EQ(*(unsigned char *)kr_section_addr(res), 0);
	KT_EQ(kr_fini(), 0);
}

/* Another domain's section: closed under protection, open under KR_EPC_N
 * (the test of the test). */
static int escape_mode;

static void *escapes_body(void *unused)
{
	(void)unused;
	kr_domain *d, *other;
	unsigned n_poke, n_peek;
	kr_section *theirs, *res;
	poke_peek(&d, "d", &n_poke, &n_peek, &res);
	KT_EQ(kr_domain_create(&other, "other"), 0);
	KT_EQ(kr_section_create(&theirs, other, 4096), 0);
	int want = escape_mode == KR_EPC_N ? 0 : EFAULT, st;
	KT_EQ(kr_epc_call(d, n_poke, kr_section_addr(theirs), NULL, &st), want);
	if (want)
		KT_EQ(kr_domain_restart(d), 0);
	/* a host section d may read: read, not written */
	kr_section *ro;
	KT_EQ(kr_section_create(&ro, NULL, 4096), 0);
	KT_EQ(kr_section_allow(ro, d, KR_SECTION_READ), 0);
	KT_EQ(kr_epc_call(d, n_peek, kr_section_addr(ro), kr_section_addr(res), &st), 0);
	return NULL;
}

static void escapes(int mode)
{
	init(1, mode);
	escape_mode = mode;
	kr_mp *m;
	kr_attr big = {.stack_size = 256 * 1024};
	KT_EQ(kr_mp_create(&m, &big, escapes_body, NULL), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(kr_fini(), 0);
}

static void a_procedure_cannot_touch_another_domains_section(void)
{
	escapes(PROT);
}

static void without_protection_the_same_escapes_succeed(void)
{
	escapes(KR_EPC_N);
}

/* a calls b, which calls c; c's fault is b's EFAULT, which b returns */
static int in_c(void *arg, void *result)
{
	(void)result;
	if (arg)
		*(volatile int *)arg = 1;
	return 3;
}

static int in_b(void *arg, void *result)
{
	KT_CHECK(kr_domain_current() == dom_b);
	int st = -1, r = kr_epc_call(dom_c, c_proc, arg, result, &st);
	KT_CHECK(kr_domain_current() == dom_b);
	return r ? r : st + 10;
}

static int in_a(void *arg, void *result)
{
	int st = -1, r = kr_epc_call(dom_b, b_proc, arg, result, &st);
	return r ? -r : st + 100;
}

static void calls_nest_and_a_fault_ends_only_the_innermost(void)
{
	init(1, PROT);
	KT_EQ(kr_domain_create(&dom_a, "a"), 0);
	KT_EQ(kr_domain_create(&dom_b, "b"), 0);
	KT_EQ(kr_domain_create(&dom_c, "c"), 0);
	KT_EQ(kr_domain_export(dom_a, in_a, &a_proc), 0);
	KT_EQ(kr_domain_export(dom_b, in_b, &b_proc), 0);
	KT_EQ(kr_domain_export(dom_c, in_c, &c_proc), 0);
	int st = 0;
	KT_EQ(kr_epc_call(dom_a, a_proc, NULL, NULL, &st), 0);
	KT_EQ(st, 113);
	KT_EQ(kr_epc_call(dom_a, a_proc, bad_address(), NULL, &st), 0);
	KT_EQ(st, 100 + EFAULT); /* b saw EFAULT and returned it */
	KT_EQ(kr_domain_failed(dom_c), 1);
	KT_EQ(kr_domain_failed(dom_b), 0);
	KT_EQ(kr_domain_failed(dom_a), 0);
	KT_EQ(kr_epc_call(dom_a, a_proc, NULL, NULL, &st), 0);
	KT_EQ(st, 100 + ENOTRECOVERABLE);
	KT_EQ(kr_fini(), 0);
}

/* unbounded recursion through domains ends in ELOOP */
static int recurse(void *arg, void *result)
{
	int st = 0, r = kr_epc_call(dom_a, a_proc, arg, result, &st);
	return r ? r : st;
}

static void nesting_past_the_limit_is_refused(void)
{
	init(1, KR_EPC_N);
	KT_EQ(kr_domain_create(&dom_a, "a"), 0);
	KT_EQ(kr_domain_export(dom_a, recurse, &a_proc), 0);
	int st = 0;
	KT_EQ(kr_epc_call(dom_a, a_proc, NULL, NULL, &st), 0);
	KT_EQ(st, ELOOP);
	KT_EQ(kr_fini(), 0);
}

/* A procedure that sleeps (out of its domain, through kr_epc_host) while
 * another domain runs: on one VP under protection the sleeper's private
 * section is closed to that domain meanwhile, and open to the sleeper
 * before and after. */
static int sleep_5ms(void *a)
{
	(void)a;
	return kr_mp_sleep_for(5 * MS);
}

static uint32_t in_sleep;
static kr_section *private_sec, *peek_res;
static kr_domain *peeker;
static unsigned peeker_n;
static int peek_err = -1;

static int sleeper(void *arg, void *result)
{
	(void)arg;
	unsigned char *p = kr_section_addr(private_sec);
	p[0] = 5;
	__atomic_store_n(&in_sleep, 1, __ATOMIC_RELEASE);
	int r = kr_epc_host(sleep_5ms, NULL);
	__atomic_store_n(&in_sleep, 0, __ATOMIC_RELEASE);
	*(int *)result = r;
	return p[0] + 1;
}

static void *other_domain_peeks(void *a)
{
	(void)a;
	while (!__atomic_load_n(&in_sleep, __ATOMIC_ACQUIRE))
		kr_mp_yield();
	int st;
	peek_err = kr_epc_call(peeker, peeker_n, kr_section_addr(private_sec),
			       kr_section_addr(peek_res), &st);
	return NULL;
}

static void blocking(int mode)
{
	init(1, mode);
	kr_domain *d;
	unsigned n;
	KT_EQ(kr_domain_create(&d, "sleepy"), 0);
	KT_EQ(kr_domain_create(&peeker, "peeker"), 0);
	KT_EQ(kr_domain_export(d, sleeper, &n), 0);
	KT_EQ(kr_domain_export(peeker, peek, &peeker_n), 0);
	KT_EQ(kr_section_create(&private_sec, d, 4096), 0);
	kr_section *res;
	KT_EQ(kr_section_create(&res, NULL, 4096), 0);
	KT_EQ(kr_section_allow(res, d, KR_SECTION_WRITE), 0);
	KT_EQ(kr_section_create(&peek_res, NULL, 4096), 0);
	KT_EQ(kr_section_allow(peek_res, peeker, KR_SECTION_WRITE), 0);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, other_domain_peeks, NULL), 0);
	int st = 0;
	KT_EQ(kr_epc_call(d, n, NULL, kr_section_addr(res), &st), 0);
	KT_EQ(st, 6); /* its section open to it again after the sleep */
	KT_EQ(*(int *)kr_section_addr(res), 0);
	KT_EQ(kr_mp_join(m, NULL), 0);
	KT_EQ(peek_err, mode == KR_EPC_N ? 0 : EFAULT);
	if (mode == KR_EPC_N)
		KT_EQ(*(unsigned char *)kr_section_addr(peek_res), 5);
	KT_EQ(kr_fini(), 0);
}

static void a_procedure_that_sleeps_keeps_its_section_from_others_meanwhile(void)
{
	blocking(PROT);
}

static void without_protection_the_other_domain_reads_it_meanwhile(void)
{
	blocking(KR_EPC_N);
}

/* Several VPs call into one domain at once. */
enum { CALLERS = 8, CALLS = 2000 };
static kr_domain *shared_d;
static unsigned shared_n;
static kr_section *shared_arg[CALLERS], *shared_res[CALLERS];

static void *caller(void *a)
{
	uintptr_t i = (uintptr_t)a;
	struct copy *c = kr_section_addr(shared_arg[i]);
	unsigned char *out = kr_section_addr(shared_res[i]);
	for (int k = 0; k < 256; k++)
		c->map[k] = (unsigned char)(k ^ (int)i);
	c->n = 512;
	for (int round = 0; round < CALLS; round++) {
		for (size_t k = 0; k < c->n; k++)
			c->in[k] = (unsigned char)(k + (size_t)round);
		int st = 0;
		KT_EQ(kr_epc_call(shared_d, shared_n, c, out, &st), 0);
		KT_EQ(st, 7);
		for (size_t k = 0; k < c->n; k++)
			if (out[k] != (c->in[k] ^ i))
				KT_EQ(out[k], c->in[k] ^ i);
		if (round % 64 == 0)
			kr_mp_yield();
	}
	return NULL;
}

static void calls_from_several_vps_run_in_one_domain_at_once(void)
{
	init(2, PROT);
	KT_EQ(kr_domain_create(&shared_d, "shared"), 0);
	KT_EQ(kr_domain_export(shared_d, lookup, &shared_n), 0);
	kr_mp *m[CALLERS];
	for (uintptr_t i = 0; i < CALLERS; i++) {
		KT_EQ(kr_section_create(&shared_arg[i], NULL, sizeof(struct copy)), 0);
		KT_EQ(kr_section_create(&shared_res[i], NULL, 8192), 0);
		KT_EQ(kr_section_allow(shared_arg[i], shared_d, KR_SECTION_READ), 0);
		KT_EQ(kr_section_allow(shared_res[i], shared_d, KR_SECTION_WRITE), 0);
		KT_EQ(kr_mp_create(&m[i], NULL, caller, (void *)i), 0);
	}
	for (int i = 0; i < CALLERS; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(kr_domain_failed(shared_d), 0);
	KT_EQ(kr_fini(), 0);
}

/* A caller cancelled while its procedure sleeps: the sleep ends
 * (ECANCELED), the procedure returns, the call completes. */
static int sleep_long(void *a)
{
	(void)a;
	return kr_mp_sleep_for(10000 * MS);
}

static int long_sleeper(void *arg, void *result)
{
	(void)arg;
	(void)result;
	__atomic_store_n(&in_sleep, 1, __ATOMIC_RELEASE);
	return kr_epc_host(sleep_long, NULL);
}

static kr_domain *cancel_d;
static unsigned cancel_n;

static void *cancelled_caller(void *a)
{
	int st = -1;
	*(int *)a = kr_epc_call(cancel_d, cancel_n, NULL, NULL, &st);
	return (void *)(intptr_t)st;
}

static void a_caller_cancelled_in_a_call_gets_its_procedures_answer(void)
{
	init(1, PROT);
	KT_EQ(kr_domain_create(&cancel_d, "c"), 0);
	KT_EQ(kr_domain_export(cancel_d, long_sleeper, &cancel_n), 0);
	for (int i = 0; i < 100; i++) { /* more than its 64 stacks: all given back */
		__atomic_store_n(&in_sleep, 0, __ATOMIC_RELEASE);
		kr_mp *m;
		int r = -1;
		KT_EQ(kr_mp_create(&m, NULL, cancelled_caller, &r), 0);
		while (!__atomic_load_n(&in_sleep, __ATOMIC_ACQUIRE))
			kr_mp_yield();
		KT_EQ(kr_mp_cancel(m), 0);
		void *st;
		KT_EQ(kr_mp_join(m, &st), 0);
		KT_EQ(r, 0);
		KT_EQ((intptr_t)st, ECANCELED);
	}
	KT_EQ(kr_domain_destroy(cancel_d), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- ITC ---------------- */

static kr_port *port;

static void *server(void *a)
{
	(void)a;
	KT_EQ(kr_port_serve(port), 0);
	return NULL;
}

static void itc(unsigned vps)
{
	init(vps, PROT);
	kr_domain *d;
	unsigned n_lookup, n_poke;
	KT_EQ(kr_domain_create(&d, "itc"), 0);
	KT_EQ(kr_domain_export(d, lookup, &n_lookup), 0);
	KT_EQ(kr_domain_export(d, poke, &n_poke), 0);
	kr_section *arg, *res;
	KT_EQ(kr_section_create(&arg, NULL, sizeof(struct copy)), 0);
	KT_EQ(kr_section_create(&res, NULL, 8192), 0);
	KT_EQ(kr_section_allow(arg, d, KR_SECTION_READ), 0);
	KT_EQ(kr_section_allow(res, d, KR_SECTION_WRITE), 0);
	KT_EQ(kr_port_create(&port, d), 0);
	kr_mp *srv;
	KT_EQ(kr_mp_create(&srv, NULL, server, NULL), 0);
	struct copy *c = kr_section_addr(arg);
	unsigned char *out = kr_section_addr(res);
	for (int i = 0; i < 256; i++)
		c->map[i] = (unsigned char)(i + 1);
	c->n = 8192;
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < c->n; i++)
			c->in[i] = (unsigned char)(i ^ (size_t)round);
		int st = 0;
		KT_EQ(kr_port_call(port, n_lookup, c, out, &st), 0);
		KT_EQ(st, 7);
		KT_EQ(out[100], (unsigned char)(c->in[100] + 1));
		KT_EQ(out[8191], (unsigned char)(c->in[8191] + 1));
	}
	int st;
	KT_EQ(kr_port_call(port, 99, c, out, &st), EINVAL);
	KT_EQ(kr_port_call(port, n_poke, bad_address(), NULL, &st), EFAULT);
	KT_EQ(kr_port_call(port, n_lookup, c, out, &st), ENOTRECOVERABLE);
	KT_EQ(kr_port_shut(port), 0);
	KT_EQ(kr_mp_join(srv, NULL), 0);
	KT_EQ(kr_port_call(port, n_lookup, c, out, &st), EPIPE);
	KT_EQ(kr_port_destroy(port), 0);
	KT_EQ(kr_fini(), 0);
}

/* A server cancelled while kr_port_shut is under way, from another VP
 * at the same moment, many times: the shut always ends (a server that
 * left its loop on the cancel still answers the shut's call), the server
 * says 0 (the shut came first) or ECANCELED, and later calls EPIPE. */
static int serve_err;
static kr_mp *srv_mp;

static void *server_err(void *a)
{
	(void)a;
	serve_err = kr_port_serve(port);
	return NULL;
}

static void *canceller(void *a)
{
	(void)a;
	kr_mp_cancel(srv_mp);
	return NULL;
}

static void a_server_cancelled_while_shut_is_under_way_answers_it(void)
{
	init(2, KR_EPC_N);
	kr_domain *d;
	KT_EQ(kr_domain_create(&d, "d"), 0);
	for (int i = 0; i < 300; i++) {
		KT_EQ(kr_port_create(&port, d), 0);
		serve_err = -1;
		KT_EQ(kr_mp_create(&srv_mp, NULL, server_err, NULL), 0);
		for (int k = 0; k < i % 4; k++)
			kr_mp_yield();
		kr_mp *c;
		KT_EQ(kr_mp_create(&c, NULL, canceller, NULL), 0);
		KT_EQ(kr_port_shut(port), 0);
		KT_EQ(kr_mp_join(c, NULL), 0);
		KT_EQ(kr_mp_join(srv_mp, NULL), 0);
		KT_CHECK(serve_err == 0 || serve_err == ECANCELED);
		int st;
		KT_EQ(kr_port_call(port, 0, NULL, NULL, &st), EPIPE);
		KT_EQ(kr_port_destroy(port), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static void itc_serves_a_domains_procedures_on_one_vp(void) { itc(1); }
static void itc_serves_a_domains_procedures_across_two_vps(void) { itc(2); }

/* ---------------- protection keys ---------------- */

/* A thread started before a section's key was made has a PKRU that closes
 * it; its first touch faults once, gets the host's rights, and goes on. */
static uint32_t go;
static volatile unsigned char *late_page;

static void *late_thread(void *a)
{
	(void)a;
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		usleep(100);
	late_page[0] = 9;
	return (void *)(uintptr_t)late_page[1];
}

static void a_thread_older_than_a_key_gets_the_hosts_rights(void)
{
	init(2, KR_EPC_H);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, late_thread, NULL), 0);
	kr_domain *d;
	kr_section *s;
	KT_EQ(kr_domain_create(&d, "d"), 0);
	KT_EQ(kr_section_create(&s, NULL, 4096), 0);
	late_page = kr_section_addr(s);
	late_page[1] = 4;
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	void *r;
	KT_EQ(pthread_join(t, &r), 0);
	KT_EQ((uintptr_t)r, 4);
	KT_EQ(late_page[0], 9);
	KT_EQ(kr_fini(), 0);
}

#if defined(__x86_64__)
/* Each WRPKRU of the gates, jumped to from inside a procedure with a PKRU
 * that opens everything (0), and registers of its choice: the check after
 * it writes the PKRU the call's record says instead, so the code that
 * runs on never has the forged one.  records() is what the gates call
 * with those registers, in the domain: it sees the domain's PKRU, not 0;
 * and the host has its own (not 0) after every call.  Without the checks
 * records() and the host would see 0. */
extern const unsigned char kr__epc_wrpkru_lo[], kr__epc_wrpkru_hi[];
static const unsigned char *jump_to;
static uint32_t seen;

static inline uint32_t rdpkru(void)
{
	uint32_t eax, edx;
	__asm__ volatile("rdpkru" : "=a"(eax), "=d"(edx) : "c"(0));
	return eax;
}

static int records(void *arg)
{
	(void)arg;
	seen = rdpkru();
	return 7;
}

static int jumps_into_a_gate(void *arg, void *result)
{
	(void)arg;
	(void)result;
	/* the gates' registers: fn (r12 in kr__epc_out, r14 in the call's
	 * gate) records(), status (rbx) 0, no frame (rbx) nor stack (rbp) */
	__asm__ volatile("movq %0, %%r12\n\t"
			 "movq %0, %%r14\n\t"
			 "xorl %%ebx, %%ebx\n\t"
			 "xorl %%ebp, %%ebp\n\t"
			 "xorl %%eax, %%eax\n\t"
			 "xorl %%ecx, %%ecx\n\t"
			 "xorl %%edx, %%edx\n\t"
			 "jmp *%1"
			 :
			 : "S"(records), "D"(jump_to)
			 : "rax", "rcx", "rdx", "r12", "r14", "memory");
	__builtin_unreachable();
}

static void no_gate_can_be_entered_halfway(void)
{
	init(1, KR_EPC_H);
	kr_domain *d;
	unsigned n;
	KT_EQ(kr_domain_create(&d, "d"), 0);
	KT_EQ(kr_domain_export(d, jumps_into_a_gate, &n), 0);
	/* the call's entry, its way back, kr_epc_host's way out and in */
	static const int want_err[4] = {0, 0, EFAULT, EFAULT}, want_st[4] = {7, 0};
	int site = 0;
	for (const unsigned char *p = kr__epc_wrpkru_lo; p + 3 <= kr__epc_wrpkru_hi; p++) {
		if (p[0] != 0x0f || p[1] != 0x01 || p[2] != 0xef)
			continue;
		KT_CHECK(site < 4);
		jump_to = p;
		seen = 0xffffffffu;
		int st = -1;
		KT_EQ(kr_epc_call(d, n, NULL, NULL, &st), want_err[site]);
		if (want_err[site])
			KT_EQ(kr_domain_restart(d), 0);
		else
			KT_EQ(st, want_st[site]);
		if (site == 0 || site == 2)
			KT_CHECK(seen != 0 && seen != 0xffffffffu);
		KT_CHECK(rdpkru() != 0);
		site++;
	}
	KT_EQ(site, 4);
	KT_EQ(kr_fini(), 0);
}
#endif

/* Code that writes PKRU (WRPKRU, XRSTOR) is not exported under KR_EPC_H;
 * without keys it is (the test of the test). */
static kr_epc_proc code_page(const unsigned char *code, size_t n)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	KT_CHECK(p != MAP_FAILED);
	memcpy(p, code, n);
	return (kr_epc_proc)p;
}

static void exports(int mode)
{
	init(1, mode);
	kr_domain *d;
	unsigned n;
	int st = -1;
	KT_EQ(kr_domain_create(&d, "jit"), 0);
	static const unsigned char clean[] = {0xb8, 0x05, 0, 0, 0, 0xc3}; /* mov $5,%eax; ret */
	static const unsigned char wr[] = {0x31, 0xc0, 0x31, 0xc9, 0x31, 0xd2,
					   0x0f, 0x01, 0xef, 0xc3}; /* ...; wrpkru; ret */
	static const unsigned char xr[] = {0x0f, 0xae, 0x2f, 0xc3}; /* xrstor (%rdi); ret */
#if defined(__x86_64__)
	KT_EQ(kr_domain_export(d, code_page(clean, sizeof clean), &n), 0);
	KT_EQ(kr_epc_call(d, n, NULL, NULL, &st), 0);
	KT_EQ(st, 5);
	int want = mode == KR_EPC_H ? EPERM : 0;
	KT_EQ(kr_domain_export(d, code_page(wr, sizeof wr), &n), want);
	KT_EQ(kr_domain_export(d, code_page(xr, sizeof xr), &n), want);
#else
	(void)clean, (void)wr, (void)xr, (void)st, (void)n, (void)code_page;
	KT_SKIP("x86-64 code");
#endif
	KT_EQ(kr_fini(), 0);
}

static void code_that_writes_pkru_is_not_exported(void) { exports(KR_EPC_H); }
static void without_keys_the_same_code_is_exported(void) { exports(KR_EPC_N); }

/* ---------------- the API's errors ---------------- */

static void bad_arguments_are_refused(void)
{
	KT_EQ(kr_epc_mode_set(42), EINVAL);
	KT_EQ(kr_epc_mode_set(KR_EPC_H), keys_here() ? 0 : ENOTSUP);
	init(1, KR_EPC_S);
	KT_EQ(kr_epc_mode(), KR_EPC_S);
	kr_domain *d;
	unsigned n;
	int st;
	kr_section *s;
	KT_EQ(kr_domain_create(NULL, "x"), EINVAL);
	KT_EQ(kr_domain_create(&d, NULL), EINVAL);
	KT_EQ(kr_domain_create(&d, "a name longer than thirty-one bytes, cut"), 0);
	KT_EQ(kr_epc_mode_set(KR_EPC_N), EBUSY);
	KT_EQ(kr_domain_export(d, NULL, &n), EINVAL);
	for (unsigned i = 0; i < 64; i++)
		KT_EQ(kr_domain_export(d, null_proc, &n), 0);
	KT_EQ(kr_domain_export(d, null_proc, &n), ENOSPC);
	KT_EQ(kr_epc_call(d, 64, NULL, NULL, &st), EINVAL);
	KT_EQ(kr_epc_call(NULL, 0, NULL, NULL, &st), EINVAL);
	KT_EQ(kr_epc_call(d, 0, NULL, NULL, NULL), EINVAL);
	KT_EQ(kr_section_create(&s, NULL, 0), EINVAL);
	KT_EQ(kr_section_create(&s, NULL, (size_t)1 << 31), EINVAL);
	KT_EQ(kr_section_create(&s, d, 100), 0);
	KT_EQ(kr_section_allow(s, NULL, 4), EINVAL);
	KT_EQ(kr_section_allow(NULL, NULL, 0), EINVAL);
	KT_EQ(kr_domain_destroy(d), EBUSY); /* it owns s */
	KT_EQ(kr_domain_restart(d), EINVAL);
	KT_CHECK(kr_section_addr(NULL) == NULL);
	KT_EQ(kr_section_size(NULL), 0);
	KT_EQ(kr_section_destroy(s), 0);
	KT_EQ(kr_domain_destroy(d), 0);
	KT_EQ(kr_epc_host(sleep_5ms, NULL), 0); /* outside a call: a plain call */
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(a_call_runs_the_procedure_on_a_stack_of_its_domain);
	KT_RUN(arguments_and_results_go_by_pointer_through_sections);
	KT_RUN(a_fault_ends_the_call_and_fails_the_domain_until_restarted);
	KT_RUN(a_procedure_cannot_touch_another_domains_section);
	KT_RUN(without_protection_the_same_escapes_succeed);
	KT_RUN(calls_nest_and_a_fault_ends_only_the_innermost);
	KT_RUN(nesting_past_the_limit_is_refused);
	KT_RUN(a_procedure_that_sleeps_keeps_its_section_from_others_meanwhile);
	KT_RUN(without_protection_the_other_domain_reads_it_meanwhile);
	KT_RUN(calls_from_several_vps_run_in_one_domain_at_once);
	KT_RUN(a_caller_cancelled_in_a_call_gets_its_procedures_answer);
	KT_RUN(itc_serves_a_domains_procedures_on_one_vp);
	KT_RUN(itc_serves_a_domains_procedures_across_two_vps);
	KT_RUN(a_server_cancelled_while_shut_is_under_way_answers_it);
	KT_RUN(a_thread_older_than_a_key_gets_the_hosts_rights);
#if defined(__x86_64__)
	KT_RUN(no_gate_can_be_entered_halfway);
#endif
	KT_RUN(code_that_writes_pkru_is_not_exported);
	KT_RUN(without_keys_the_same_code_is_exported);
	KT_RUN(bad_arguments_are_refused);
	return kt_finish();
}
