/* L3: the waits of every primitive (src/sync/wait.h): cancellation,
 * timeouts and cancels under stress, and blocked microprocesses that use
 * no CPU. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_sync.h"

/* ---------------- blocked costs nothing ---------------- */

static kr_sem sem;
static uint32_t on_sem; /* started: about to wait */
static void *block_on_sem(void *a)
{
	__atomic_fetch_add(&on_sem, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_sem_wait(&sem), 0);
	return a;
}

/* ---------------- cancellation ---------------- */

static kr_sem csem;
static kr_mutex cmu;
static kr_cond ccv;
static kr_chan cin, cout;
static kr_stream sin_, sfull;
static kr_entry ecall, eacc;
static size_t wrote;

static void *w_sem(void *a) { (void)a; return (void *)(intptr_t)kr_sem_wait(&csem); }
static void *w_cond(void *a)
{
	(void)a;
	KT_EQ(kr_mutex_lock(&cmu), 0);
	int e = kr_cond_wait(&ccv, &cmu);
	KT_EQ(kr_mutex_unlock(&cmu), 0); /* held again, also when cancelled */
	return (void *)(intptr_t)e;
}
static void *w_recv(void *a)
{
	uint64_t v;
	(void)a;
	return (void *)(intptr_t)kr_chan_recv(&cin, &v);
}
static void *w_send(void *a)
{
	uint64_t v = 7;
	(void)a;
	return (void *)(intptr_t)kr_chan_send(&cout, &v);
}
static void *w_read(void *a)
{
	char b[8];
	size_t got;
	(void)a;
	return (void *)(intptr_t)kr_stream_read(&sin_, b, sizeof b, &got);
}
static void *w_write(void *a)
{
	(void)a;
	return (void *)(intptr_t)kr_stream_write(&sfull, "0123456789", 10, &wrote);
}
static void *w_call(void *a)
{
	long v = 0;
	(void)a;
	return (void *)(intptr_t)kr_entry_call(&ecall, &v);
}
static void *w_accept(void *a)
{
	kr_call *c;
	(void)a;
	return (void *)(intptr_t)kr_entry_accept(&eacc, &c);
}
static void *w_sleep(void *a)
{
	(void)a;
	return (void *)(intptr_t)kr_mp_sleep_for(60000 * MS);
}

static void *(*const w_fn[])(void *) = {w_sem, w_cond, w_recv, w_send, w_read,
					w_write, w_call, w_accept, w_sleep};
static uint32_t w_started;
static void *w_start(void *a)
{
	__atomic_fetch_add(&w_started, 1, __ATOMIC_RELAXED);
	return w_fn[(intptr_t)a](NULL);
}

/* One microprocess blocked in each cancellable wait: each returns
 * ECANCELED, and every object is left as if it had never waited. */
static void cancel_ends_every_cancellable_wait(void)
{
	init(1);
	KT_EQ(kr_chan_init(&cin, sizeof(uint64_t), 0), 0);
	KT_EQ(kr_chan_init(&cout, sizeof(uint64_t), 0), 0);
	KT_EQ(kr_stream_init(&sin_, 16), 0);
	KT_EQ(kr_stream_init(&sfull, 4), 0);
	enum { N = sizeof w_fn / sizeof w_fn[0] };
	kr_mp *m[N];
	for (int i = 0; i < N; i++)
		KT_EQ(kr_mp_create(&m[i], NULL, w_start, (void *)(intptr_t)i), 0);
	/* one VP: each has started, and left it to the caller by blocking */
	KT_WAIT(__atomic_load_n(&w_started, __ATOMIC_RELAXED) == N, kr_mp_yield());
	KT_EQ(kr_cond_destroy(&ccv), EBUSY); /* really waited on */
	for (int i = 0; i < N; i++)
		KT_EQ(kr_mp_cancel(m[i]), 0);
	for (int i = 0; i < N; i++) {
		void *r;
		KT_EQ(kr_mp_join(m[i], &r), 0);
		KT_EQ((intptr_t)r, ECANCELED);
	}
	KT_EQ(wrote, 4); /* what went in before the wait stays in */
	char b[8];
	size_t got;
	KT_EQ(kr_stream_read(&sfull, b, sizeof b, &got), 0);
	KT_EQ(got, 4);
	KT_EQ(memcmp(b, "0123", 4), 0);
	long v;
	KT_EQ(kr_sem_getvalue(&csem, &v), 0);
	KT_EQ(v, 0);
	uint64_t x;
	KT_EQ(kr_chan_tryrecv(&cout, &x), EAGAIN); /* the cancelled send left nothing */
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_cond_destroy(&ccv), 0);
	KT_EQ(kr_mutex_destroy(&cmu), 0);
	KT_EQ(kr_chan_destroy(&cin), 0);
	KT_EQ(kr_chan_destroy(&cout), 0);
	KT_EQ(kr_stream_destroy(&sin_), 0);
	KT_EQ(kr_stream_destroy(&sfull), 0);
	KT_EQ(kr_entry_destroy(&ecall), 0);
	KT_EQ(kr_entry_destroy(&eacc), 0);
	KT_EQ(kr_fini(), 0);
}

static void *take_twice(void *a)
{
	(void)a;
	intptr_t r = kr_sem_wait(&csem);          /* served, then cancelled */
	r |= (intptr_t)kr_sem_wait(&csem) << 8;   /* the cancel ends this one */
	return (void *)r;
}

/* A cancel ends one wait: the next one if none is going on, and it
 * outlives waits that cannot be cancelled and waits already served. */
static void cancel_ends_exactly_one_wait(void)
{
	init(1);
	KT_EQ(kr_sem_init(&csem, 0), 0);
	KT_EQ(kr_mp_cancel(NULL), EINVAL);
	kr_mp *self = kr_mp_self();
	KT_EQ(kr_mp_cancel(self), 0);
	KT_EQ(kr_sem_post(&csem), 0);
	KT_EQ(kr_sem_wait(&csem), 0); /* no wait needed: not cancelled */
	KT_EQ(kr_mp_park_until(kr_now() + 1 * MS), 0); /* the cancel's wakeup; kept */
	KT_EQ(kr_sem_wait_until(&csem, kr_now() + 1000 * MS), ECANCELED);
	KT_EQ(kr_sem_wait_until(&csem, kr_now() + 1 * MS), ETIMEDOUT); /* used up */
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, NULL, take_twice, NULL), 0);
	kr_mp_yield(); /* m blocks */
	KT_EQ(kr_sem_post(&csem), 0); /* m is served ... */
	KT_EQ(kr_mp_cancel(m), 0);    /* ... before the cancel comes */
	void *r;
	KT_EQ(kr_mp_join(m, &r), 0);
	KT_EQ((intptr_t)r, ECANCELED << 8);
	KT_EQ(kr_mp_cancel(m), ESRCH);
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_fini(), 0);
}

/* The stress below: thousands of microprocesses on 2 VPs with short
 * deadlines, while a canceller cancels them at random; what each object
 * hands out adds up. */
enum { SN = 1000 };
static kr_mp *sm[SN];
static uint32_t s_finished, s_cancels;

static uint64_t soon(void *a) { return kr_now() + ((uintptr_t)a % 5 + 1) * 200000; }

static void *random_canceller(void *a)
{
	uint32_t x = 777;
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		x = x * 1103515245 + 12345;
		int e = kr_mp_cancel(sm[(x >> 8) % SN]);
		KT_CHECK(e == 0 || e == ESRCH);
		if (e == 0)
			__atomic_fetch_add(&s_cancels, 1, __ATOMIC_RELEASE);
		kr_mp_sleep_for(10000); /* about one cancel in ten waits */
	}
	return a;
}

/* Create SN microprocesses of fn, `helpers` of helper and the canceller;
 * join the helpers, the canceller, then the rest. */
static void stress(void *(*fn)(void *), void *(*helper)(void *), int helpers)
{
	s_finished = s_cancels = 0;
	kr_mp *h[16], *c;
	for (uintptr_t i = 0; i < SN; i++)
		KT_EQ(kr_mp_create(&sm[i], &small, fn, (void *)i), 0);
	for (int i = 0; i < helpers; i++)
		KT_EQ(kr_mp_create(&h[i], &small, helper, (void *)(uintptr_t)i), 0);
	KT_EQ(kr_mp_create(&c, &small, random_canceller, NULL), 0);
	for (int i = 0; i < helpers; i++)
		KT_EQ(kr_mp_join(h[i], NULL), 0);
	KT_EQ(kr_mp_join(c, NULL), 0);
	for (unsigned i = 0; i < SN; i++)
		KT_EQ(kr_mp_join(sm[i], NULL), 0);
}

static void finished(void) { __atomic_fetch_add(&s_finished, 1, __ATOMIC_RELEASE); }

static uint32_t c_got, c_cancelled;

static void *cancelled_consumer(void *a)
{
	for (int i = 0; i < 10; i++) {
		int e = kr_sem_wait(&csem);
		KT_CHECK(e == 0 || e == ECANCELED);
		__atomic_fetch_add(e ? &c_cancelled : &c_got, 1, __ATOMIC_RELAXED);
	}
	finished();
	return a;
}

/* The posters start once a cancel has landed: until then the semaphore
 * is empty, so that consumer's wait (under way or to come) must block
 * and ends cancelled.  Otherwise the posters could run far enough ahead
 * that no consumer ever waits while cancels come, and the test would
 * prove nothing about cancellation. */
static void *unit_poster(void *a)
{
	while (!__atomic_load_n(&s_cancels, __ATOMIC_ACQUIRE))
		kr_mp_sleep_for(10000);
	for (int i = 0; i < SN * 10 / 8; i++) {
		KT_EQ(kr_sem_post(&csem), 0);
		if (i % 4 == 0)
			kr_mp_yield();
	}
	return a;
}

/* 1,000 consumers, a canceller picking them at random and 8 posters on
 * 2 VPs: every unit is taken once or still counted, every wait ends
 * served or cancelled. */
static void sem_units_add_up_under_cancellation_on_two_vps(void)
{
	init(2);
	KT_EQ(kr_sem_init(&csem, 0), 0);
	c_got = c_cancelled = 0;
	stress(cancelled_consumer, unit_poster, 8);
	long left;
	KT_EQ(kr_sem_getvalue(&csem, &left), 0);
	KT_EQ(c_got + c_cancelled, SN * 10);
	KT_EQ(c_got + left, SN * 10);
	KT_CHECK(c_cancelled > 0);
	fprintf(stderr, "  %u taken, %u cancelled, %ld left\n", c_got, c_cancelled, left);
	KT_EQ(kr_sem_destroy(&csem), 0);
	KT_EQ(kr_fini(), 0);
}

/* condition variables: tokens under a monitor */
static long tokens;
static uint32_t t_got, t_gaveup;

static void *token_taker(void *a)
{
	for (int i = 0; i < 10; i++) {
		KT_EQ(kr_mutex_lock(&cmu), 0);
		int e = 0;
		while (!tokens && !e)
			e = kr_cond_wait_until(&ccv, &cmu, soon(a) + 1 * MS);
		KT_CHECK(e == 0 || e == ETIMEDOUT || e == ECANCELED);
		if (tokens) { /* a token is a token, whatever ended the wait */
			tokens--;
			t_got++;
		} else {
			t_gaveup++;
		}
		KT_EQ(kr_mutex_unlock(&cmu), 0); /* held on every return */
	}
	finished();
	return a;
}

static void *token_maker(void *a)
{
	for (int i = 0; i < SN * 10 / 8; i++) {
		KT_EQ(kr_mutex_lock(&cmu), 0);
		tokens++;
		KT_EQ(kr_cond_signal(&ccv), 0);
		KT_EQ(kr_mutex_unlock(&cmu), 0);
		if (i % 20 == 0)
			kr_mp_yield();
	}
	return a;
}

static void cond_tokens_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	tokens = 0;
	t_got = t_gaveup = 0;
	stress(token_taker, token_maker, 4);
	KT_EQ(t_got + t_gaveup, SN * 10);
	KT_EQ(t_got + tokens, 4 * (SN * 10 / 8));
	KT_CHECK(t_gaveup > 0);
	fprintf(stderr, "  %u taken, %u given up, %ld left\n", t_got, t_gaveup, tokens);
	KT_EQ(kr_cond_destroy(&ccv), 0);
	KT_EQ(kr_mutex_destroy(&cmu), 0);
	KT_EQ(kr_fini(), 0);
}

/* rendezvous: a call is answered once if accepted, never touched if not */
static uint32_t r_answered, r_gaveup, r_accepted;

static void *timed_caller(void *a)
{
	for (long i = 0; i < 10; i++) {
		long v = i;
		int e = kr_entry_call_until(&ecall, &v, soon(a));
		if (e == 0) {
			KT_EQ(v, i + 100);
			__atomic_fetch_add(&r_answered, 1, __ATOMIC_RELAXED);
		} else {
			KT_CHECK(e == ETIMEDOUT || e == ECANCELED);
			KT_EQ(v, i);
			__atomic_fetch_add(&r_gaveup, 1, __ATOMIC_RELAXED);
		}
	}
	finished();
	return a;
}

static void *timed_acceptor(void *a)
{
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		kr_call *c;
		int e = kr_entry_accept_until(&ecall, &c, kr_now() + 1 * MS);
		if (e)
			continue;
		*(long *)kr_call_msg(c) += 100;
		if (__atomic_add_fetch(&r_accepted, 1, __ATOMIC_RELAXED) % 5 == 0)
			kr_mp_yield(); /* the caller waits past its deadline */
		KT_EQ(kr_entry_reply(c, 0), 0);
	}
	return a;
}

static void rendezvous_calls_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	r_answered = r_gaveup = r_accepted = 0;
	stress(timed_caller, timed_acceptor, 3);
	KT_EQ(r_answered + r_gaveup, SN * 10);
	KT_EQ(r_answered, r_accepted);
	KT_CHECK(r_gaveup > 0 && r_answered > 0);
	fprintf(stderr, "  %u answered, %u given up\n", r_answered, r_gaveup);
	KT_EQ(kr_entry_destroy(&ecall), 0);
	KT_EQ(kr_fini(), 0);
}

/* streams: every byte written is read once or still in the ring */
static uint64_t b_in, b_out, v_in, v_out;

static void *timed_writer(void *a)
{
	unsigned char blk[48];
	memset(blk, (int)((uintptr_t)a % 251 + 1), sizeof blk);
	for (int i = 0; i < 10; i++) {
		size_t done = 0;
		int e = kr_stream_write_until(&sfull, blk, sizeof blk, &done, soon(a));
		KT_CHECK(e == 0 || e == ETIMEDOUT || e == ECANCELED);
		KT_CHECK(e ? done < sizeof blk : done == sizeof blk);
		__atomic_fetch_add(&b_in, done, __ATOMIC_RELAXED);
		__atomic_fetch_add(&v_in, done * blk[0], __ATOMIC_RELAXED);
	}
	finished();
	return a;
}

static void *timed_reader(void *a)
{
	while (__atomic_load_n(&s_finished, __ATOMIC_ACQUIRE) < SN) {
		unsigned char b[40];
		size_t got = 0;
		int e = kr_stream_read_until(&sfull, b, sizeof b, &got, kr_now() + 1 * MS);
		KT_CHECK(e == 0 || e == ETIMEDOUT);
		KT_CHECK(!e || !got);
		__atomic_fetch_add(&b_out, got, __ATOMIC_RELAXED);
		for (size_t i = 0; i < got; i++)
			__atomic_fetch_add(&v_out, b[i], __ATOMIC_RELAXED);
	}
	return a;
}

static void stream_bytes_add_up_under_timeouts_and_cancellation(void)
{
	init(2);
	KT_EQ(kr_stream_init(&sfull, 100), 0);
	b_in = b_out = v_in = v_out = 0;
	stress(timed_writer, timed_reader, 2);
	KT_EQ(kr_stream_close_write(&sfull), 0);
	unsigned char b[256];
	size_t got;
	do { /* what is left in the ring */
		KT_EQ(kr_stream_read(&sfull, b, sizeof b, &got), 0);
		b_out += got;
		for (size_t i = 0; i < got; i++)
			v_out += b[i];
	} while (got);
	KT_EQ(b_in, b_out);
	KT_EQ(v_in, v_out);
	KT_CHECK(b_in < SN * 10 * 48); /* some writes gave up half way */
	fprintf(stderr, "  %llu of %u bytes went in\n", (unsigned long long)b_in, SN * 10 * 48);
	KT_EQ(kr_stream_destroy(&sfull), 0);
	KT_EQ(kr_fini(), 0);
}

/* 1,000 microprocesses blocked on a semaphore and the main one in a timed
 * sleep, on 2 VPs: both VPs sleep in the kernel and stay asleep. */
static int all_on_sem(void) { return __atomic_load_n(&on_sem, __ATOMIC_ACQUIRE) == 1000; }

static void blocked_microprocesses_use_no_cpu(void)
{
	init(2);
	KT_EQ(kr_sem_init(&sem, 0), 0);
	kr_mp **m = calloc(1000, sizeof *m);
	for (unsigned i = 0; i < 1000; i++)
		KT_EQ(kr_mp_create(&m[i], &small, block_on_sem, NULL), 0);
	KT_CHECK(kt_vps_idle(2, all_on_sem, 300));
	KT_EQ(kr_sem_post_n(&sem, 1000), 0);
	for (unsigned i = 0; i < 1000; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	free(m);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(cancel_ends_every_cancellable_wait);
	KT_RUN(cancel_ends_exactly_one_wait);
	KT_RUN(sem_units_add_up_under_cancellation_on_two_vps);
	KT_RUN(cond_tokens_add_up_under_timeouts_and_cancellation);
	KT_RUN(rendezvous_calls_add_up_under_timeouts_and_cancellation);
	KT_RUN(stream_bytes_add_up_under_timeouts_and_cancellation);
	KT_RUN(blocked_microprocesses_use_no_cpu);
	return kt_finish();
}
