/*
 * pthread peers: kernel threads, where every hand-over goes through the
 * kernel scheduler.
 *   yield        two threads pinned to the caller's CPU alternate through a
 *                shared turn counter; a thread whose turn it is not calls
 *                sched_yield; one operation = one flip of the turn
 *   create_join  pthread_create + pthread_join of an empty function
 *   create_batch a->n pthread_create, then a->n pthread_join
 *   many         a->n threads with 64 KiB stacks blocked on one condvar;
 *                create time per thread and RSS growth while all are alive
 *   mutex        pthread_mutex_lock + pthread_mutex_unlock, default mutex
 *   monitor      lock, pthread_cond_signal with no waiter, unlock
 *   condvar_pingpong  one mutex, a condvar per thread and a turn counter;
 *                each thread waits for its turn, passes it on and signals
 *                the other's condvar; one operation = one round trip
 *   sem_pingpong two sem_t: A posts s[0] and waits on s[1], B the reverse
 *   rendezvous   a caller and a server thread, one mutex and a condvar each
 *                way; the server takes the request v and replies v + 1
 *   chain        seed000.table2: default threads, each creating the next
 *                and joining it
 *   prodcons     64 producer and 64 consumer threads (64 KiB stacks), not
 *                pinned, signalling under the mutex; pauses by nanosleep
 * The two-thread experiments (yield and the ping-pongs) run two new threads
 * pinned to the caller's CPU; they meet before the clock starts.  A hand-over
 * through a condvar signals after unlocking: on one CPU the woken thread
 * preempts the signaller, and if the mutex were still held it would block
 * on it at once and hand back (about twice the switches and the time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "peers.h"

#define MANY_STACK ((size_t)64 * 1024)

static void *empty_fn(void *p)
{
	return p;
}

/* ---- two threads on the caller's CPU ---- */

struct duo {
	int cpu;
	atomic_int ready;
	atomic_int err;
};

/* Pin the calling thread to d->cpu and wait for the other one; returns 0,
 * or the error of either thread (then neither goes on). */
static int duo_meet(struct duo *d)
{
	cpu_set_t set;
	int e;

	CPU_ZERO(&set);
	CPU_SET((size_t)d->cpu, &set);
	e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	if (e)
		atomic_store(&d->err, e);
	atomic_fetch_add(&d->ready, 1);
	while (atomic_load(&d->ready) < 2)
		sched_yield();
	return atomic_load(&d->err);
}

/* Run fa(pa) and fb(pb), which start with duo_meet(d), on two new threads
 * and join both; returns 0 or an errno code. */
static int duo_run(struct duo *d, void *(*fa)(void *), void *pa, void *(*fb)(void *), void *pb)
{
	pthread_t ta, tb;
	int e;

	d->cpu = sched_getcpu();
	if (d->cpu < 0)
		return errno;
	atomic_init(&d->ready, 0);
	atomic_init(&d->err, 0);
	e = pthread_create(&ta, NULL, fa, pa);
	if (e)
		return e;
	e = pthread_create(&tb, NULL, fb, pb);
	if (e) {
		/* ta waits for a partner that never comes: let it go */
		atomic_store(&d->err, e);
		atomic_fetch_add(&d->ready, 1);
		pthread_join(ta, NULL);
		return e;
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	return atomic_load(&d->err);
}

/* ---- yield ---- */

struct yshare {
	struct duo d;
	long iters;
	atomic_long turn;
	double t0, t1;
};

struct yarg {
	struct yshare *s;
	long me; /* 0 or 1: this thread flips the turn when turn % 2 == me */
};

static void *yield_body(void *p)
{
	struct yarg *y = p;
	struct yshare *s = y->s;

	if (duo_meet(&s->d))
		return NULL;
	for (;;) {
		long t = atomic_load_explicit(&s->turn, memory_order_acquire);

		if (t >= s->iters)
			break;
		if ((t & 1) != y->me) {
			sched_yield();
			continue;
		}
		if (t == 0)
			s->t0 = kb_now_ns();
		if (t + 1 == s->iters)
			s->t1 = kb_now_ns();
		atomic_store_explicit(&s->turn, t + 1, memory_order_release);
	}
	return NULL;
}

int kb_pthread_yield(const kb_args *a, kb_res *r)
{
	struct yshare s = { .iters = a->iters };
	struct yarg y[2] = { { &s, 0 }, { &s, 1 } };
	int e;

	if (a->iters < 1)
		return EINVAL;
	atomic_init(&s.turn, 0);
	e = duo_run(&s.d, yield_body, &y[0], yield_body, &y[1]);
	if (e)
		return e;
	r->ns_per_op = (s.t1 - s.t0) / (double)a->iters;
	return 0;
}

/* ---- create_join, create_batch ---- */

int kb_pthread_create_join(const kb_args *a, kb_res *r)
{
	double t0 = kb_now_ns();
	pthread_t th;
	int e;

	if (a->iters < 1)
		return EINVAL;
	for (long i = 0; i < a->iters; i++) {
		e = pthread_create(&th, NULL, empty_fn, NULL);
		if (e)
			return e;
		pthread_join(th, NULL);
	}
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	return 0;
}

int kb_pthread_create_batch(const kb_args *a, kb_res *r)
{
	pthread_t *th;
	double t0;
	long made = 0;
	int e = 0;

	if (a->n < 1)
		return EINVAL;
	th = malloc((size_t)a->n * sizeof *th);
	if (!th)
		return ENOMEM;
	t0 = kb_now_ns();
	for (; made < a->n; made++) {
		e = pthread_create(&th[made], NULL, empty_fn, NULL);
		if (e)
			break;
	}
	for (long i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	if (!e)
		r->ns_per_op = (kb_now_ns() - t0) / (double)a->n;
	free(th);
	return e;
}

/* ---- many ---- */

struct mshare {
	pthread_mutex_t mu;
	pthread_cond_t go;      /* main -> threads: released */
	pthread_cond_t started; /* threads -> main: one more is waiting */
	long nstarted;
	int released;
};

static void *many_body(void *p)
{
	struct mshare *m = p;

	pthread_mutex_lock(&m->mu);
	m->nstarted++;
	pthread_cond_signal(&m->started);
	while (!m->released)
		pthread_cond_wait(&m->go, &m->mu);
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

static void many_release(struct mshare *m, pthread_t *th, long made)
{
	pthread_mutex_lock(&m->mu);
	m->released = 1;
	pthread_cond_broadcast(&m->go);
	pthread_mutex_unlock(&m->mu);
	for (long i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	pthread_cond_destroy(&m->started);
	pthread_cond_destroy(&m->go);
	pthread_mutex_destroy(&m->mu);
}

/* create a->n threads with attr, wait until all are blocked, measure */
static int many_run(const kb_args *a, kb_res *r, pthread_attr_t *attr, pthread_t *th)
{
	struct mshare m = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			    PTHREAD_COND_INITIALIZER, 0, 0 };
	double rss0 = kb_rss_kib(), t0 = kb_now_ns(), t1;
	long made = 0;
	int e = 0;

	for (; made < a->n; made++) {
		e = pthread_create(&th[made], attr, many_body, &m);
		if (e)
			break;
	}
	t1 = kb_now_ns();
	if (!e) {
		pthread_mutex_lock(&m.mu);
		while (m.nstarted < a->n)
			pthread_cond_wait(&m.started, &m.mu);
		pthread_mutex_unlock(&m.mu);
		r->rss_kib = kb_rss_kib() - rss0;
		r->ns_per_op = (t1 - t0) / (double)a->n;
	}
	many_release(&m, th, made);
	return e;
}

int kb_pthread_many(const kb_args *a, kb_res *r)
{
	size_t stack = MANY_STACK;
	pthread_attr_t attr;
	pthread_t *th;
	int e;

	if (a->n < 1)
		return EINVAL;
	if (stack < (size_t)PTHREAD_STACK_MIN)
		stack = (size_t)PTHREAD_STACK_MIN;
	th = malloc((size_t)a->n * sizeof *th);
	if (!th)
		return ENOMEM;
	e = pthread_attr_init(&attr);
	if (!e) {
		e = pthread_attr_setstacksize(&attr, stack);
		if (!e)
			e = many_run(a, r, &attr, th);
		pthread_attr_destroy(&attr);
	}
	free(th);
	return e;
}

/* ---- mutex, monitor ---- */

/* glibc skips the atomics of its locks while a process has only ever had
 * one thread, and karui's own process always has more (its VPs): so the
 * uncontended rows run with a second thread alive, parked on a pipe. */
struct second_thread {
	pthread_t t;
	int fd[2];
};

static void *second_thread_main(void *arg)
{
	char c;
	return (void *)(intptr_t)read(*(int *)arg, &c, 1);
}

static int second_thread_start(struct second_thread *s)
{
	if (pipe(s->fd))
		return errno;
	int e = pthread_create(&s->t, NULL, second_thread_main, &s->fd[0]);
	if (e) {
		close(s->fd[0]);
		close(s->fd[1]);
	}
	return e;
}

static void second_thread_stop(struct second_thread *s)
{
	close(s->fd[1]); /* the read returns 0 */
	pthread_join(s->t, NULL);
	close(s->fd[0]);
}

int kb_pthread_mutex(const kb_args *a, kb_res *r)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct second_thread two;
	double t0;

	if (a->iters < 1)
		return EINVAL;
	int e = second_thread_start(&two);
	if (e)
		return e;
	t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		pthread_mutex_lock(&mu);
		pthread_mutex_unlock(&mu);
	}
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	second_thread_stop(&two);
	pthread_mutex_destroy(&mu);
	return 0;
}

int kb_pthread_monitor(const kb_args *a, kb_res *r)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	struct second_thread two;
	double t0;

	if (a->iters < 1)
		return EINVAL;
	int e = second_thread_start(&two);
	if (e)
		return e;
	t0 = kb_now_ns();
	for (long i = 0; i < a->iters; i++) {
		pthread_mutex_lock(&mu);
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
	}
	r->ns_per_op = (kb_now_ns() - t0) / (double)a->iters;
	second_thread_stop(&two);
	pthread_cond_destroy(&cv);
	pthread_mutex_destroy(&mu);
	return 0;
}

/* ---- condvar_pingpong ---- */

struct cvshare {
	struct duo d;
	pthread_mutex_t mu;
	pthread_cond_t cv[2]; /* cv[i]: thread i's turn has come */
	long turn, end;       /* thread turn % 2 passes the turn on, up to end */
	double t0, t1;
};

static void cv_flow(struct cvshare *s, long me)
{
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while ((s->turn & 1) != me && s->turn < s->end)
			pthread_cond_wait(&s->cv[me], &s->mu);
		if (s->turn >= s->end)
			break;
		s->turn++;
		pthread_mutex_unlock(&s->mu);
		pthread_cond_signal(&s->cv[!me]);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

static void *cv_a(void *p)
{
	struct cvshare *s = p;

	if (duo_meet(&s->d))
		return NULL;
	s->t0 = kb_now_ns();
	cv_flow(s, 0); /* end is even: A returns when the last round is back */
	s->t1 = kb_now_ns();
	return NULL;
}

static void *cv_b(void *p)
{
	struct cvshare *s = p;

	if (!duo_meet(&s->d))
		cv_flow(s, 1);
	return NULL;
}

int kb_pthread_condvar_pingpong(const kb_args *a, kb_res *r)
{
	struct cvshare s = { .mu = PTHREAD_MUTEX_INITIALIZER,
			     .cv = { PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER },
			     .end = 2 * a->iters };
	int e;

	if (a->iters < 1)
		return EINVAL;
	e = duo_run(&s.d, cv_a, &s, cv_b, &s);
	pthread_cond_destroy(&s.cv[1]);
	pthread_cond_destroy(&s.cv[0]);
	pthread_mutex_destroy(&s.mu);
	if (e)
		return e;
	r->ns_per_op = (s.t1 - s.t0) / (double)a->iters;
	return 0;
}

/* ---- sem_pingpong ---- */

struct semshare {
	struct duo d;
	sem_t s[2]; /* s[0]: A -> B, s[1]: B -> A */
	long iters;
	double t0, t1;
};

/* sem_wait, again when interrupted (a stop and continue interrupts it) */
static void sem_take(sem_t *s)
{
	while (sem_wait(s) != 0 && errno == EINTR)
		continue;
}

static void *sem_a(void *p)
{
	struct semshare *s = p;

	if (duo_meet(&s->d))
		return NULL;
	s->t0 = kb_now_ns();
	for (long i = 0; i < s->iters; i++) {
		sem_post(&s->s[0]);
		sem_take(&s->s[1]);
	}
	s->t1 = kb_now_ns();
	return NULL;
}

static void *sem_b(void *p)
{
	struct semshare *s = p;

	if (duo_meet(&s->d))
		return NULL;
	for (long i = 0; i < s->iters; i++) {
		sem_take(&s->s[0]);
		sem_post(&s->s[1]);
	}
	return NULL;
}

int kb_pthread_sem_pingpong(const kb_args *a, kb_res *r)
{
	struct semshare s = { .iters = a->iters };
	int e;

	if (a->iters < 1)
		return EINVAL;
	sem_init(&s.s[0], 0, 0);
	sem_init(&s.s[1], 0, 0);
	e = duo_run(&s.d, sem_a, &s, sem_b, &s);
	sem_destroy(&s.s[1]);
	sem_destroy(&s.s[0]);
	if (e)
		return e;
	r->ns_per_op = (s.t1 - s.t0) / (double)a->iters;
	return 0;
}

/* ---- rendezvous ---- */

struct rvshare {
	struct duo d;
	pthread_mutex_t mu;
	pthread_cond_t to_server, to_caller;
	long v;                      /* the request, then the reply */
	int pending, replied, closed;
	long iters;
	double t0, t1;
};

/* one entry call: hand v to the server, block until it has replied */
static long rv_call(struct rvshare *s, long v)
{
	pthread_mutex_lock(&s->mu);
	s->v = v;
	s->pending = 1;
	pthread_mutex_unlock(&s->mu);
	pthread_cond_signal(&s->to_server);
	pthread_mutex_lock(&s->mu);
	while (!s->replied)
		pthread_cond_wait(&s->to_caller, &s->mu);
	s->replied = 0;
	v = s->v;
	pthread_mutex_unlock(&s->mu);
	return v;
}

static void *rv_caller(void *p)
{
	struct rvshare *s = p;
	long v = 0;

	if (duo_meet(&s->d))
		return NULL;
	s->t0 = kb_now_ns();
	for (long i = 0; i < s->iters; i++)
		v = rv_call(s, v);
	s->t1 = kb_now_ns();
	pthread_mutex_lock(&s->mu);
	s->closed = 1;
	pthread_mutex_unlock(&s->mu);
	pthread_cond_signal(&s->to_server);
	return NULL;
}

static void *rv_server(void *p)
{
	struct rvshare *s = p;

	if (duo_meet(&s->d))
		return NULL;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->pending && !s->closed)
			pthread_cond_wait(&s->to_server, &s->mu);
		if (!s->pending)
			break;
		s->pending = 0;
		s->v++;
		s->replied = 1;
		pthread_mutex_unlock(&s->mu);
		pthread_cond_signal(&s->to_caller);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int kb_pthread_rendezvous(const kb_args *a, kb_res *r)
{
	struct rvshare s = { .mu = PTHREAD_MUTEX_INITIALIZER,
			     .to_server = PTHREAD_COND_INITIALIZER,
			     .to_caller = PTHREAD_COND_INITIALIZER,
			     .iters = a->iters };
	int e;

	if (a->iters < 1)
		return EINVAL;
	e = duo_run(&s.d, rv_caller, &s, rv_server, &s);
	pthread_cond_destroy(&s.to_caller);
	pthread_cond_destroy(&s.to_server);
	pthread_mutex_destroy(&s.mu);
	if (e)
		return e;
	if (s.v != a->iters) /* every reply was the request + 1 */
		return EIO;
	r->ns_per_op = (s.t1 - s.t0) / (double)a->iters;
	return 0;
}

/* ---- prodcons ---- */

struct pcshare {
	pthread_mutex_t mu;
	pthread_cond_t not_full, not_empty;
	long buf[KB_PC_SLOTS];
	unsigned head, count;
	long items, sum;
	int go;        /* 1: start, -1: give up (a thread was refused) */
};

struct pcflow {
	struct pcshare *s;
	long lo, hi;
};

static int pc_start(struct pcshare *s)
{
	pthread_mutex_lock(&s->mu);
	while (!s->go)
		pthread_cond_wait(&s->not_empty, &s->mu);
	int go = s->go > 0;
	pthread_mutex_unlock(&s->mu);
	return go;
}

static void *pc_producer(void *p)
{
	struct pcflow *f = p;
	struct pcshare *s = f->s;
	struct timespec pause = { 0, KB_PC_PAUSE_NS };

	if (!pc_start(s))
		return NULL;
	for (long v = f->lo; v < f->hi; v++) {
		pthread_mutex_lock(&s->mu);
		while (s->count == KB_PC_SLOTS)
			pthread_cond_wait(&s->not_full, &s->mu);
		s->buf[(s->head + s->count++) % KB_PC_SLOTS] = v;
		pthread_cond_signal(&s->not_empty);
		pthread_mutex_unlock(&s->mu);
		if ((v - f->lo + 1) % KB_PC_PAUSE_EVERY == 0)
			while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
				continue;
	}
	return NULL;
}

static void *pc_consumer(void *p)
{
	struct pcflow *f = p;
	struct pcshare *s = f->s;
	long sum = 0;

	if (!pc_start(s))
		return NULL;
	for (long n = f->lo; n < f->hi; n++) {
		pthread_mutex_lock(&s->mu);
		while (s->count == 0)
			pthread_cond_wait(&s->not_empty, &s->mu);
		sum += s->buf[s->head];
		s->head = (s->head + 1) % KB_PC_SLOTS;
		s->count--;
		pthread_cond_signal(&s->not_full);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&s->mu);
	s->sum += sum;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int kb_pthread_prodcons(const kb_args *a, kb_res *r)
{
	struct pcshare s = { .mu = PTHREAD_MUTEX_INITIALIZER,
			     .not_full = PTHREAD_COND_INITIALIZER,
			     .not_empty = PTHREAD_COND_INITIALIZER,
			     .items = a->iters };
	struct pcflow f[2 * KB_PC_FLOWS];
	pthread_t th[2 * KB_PC_FLOWS];
	pthread_attr_t attr;
	int made = 0, e;
	double t0, t1;

	if (a->iters < 1)
		return EINVAL;
	if ((e = pthread_attr_init(&attr)) != 0)
		return e;
	pthread_attr_setstacksize(&attr, MANY_STACK);
	for (; made < 2 * KB_PC_FLOWS; made++) {
		long i = made / 2;
		f[made] = (struct pcflow){ &s, a->iters * i / KB_PC_FLOWS,
					   a->iters * (i + 1) / KB_PC_FLOWS };
		if ((e = pthread_create(&th[made], &attr, made % 2 ? pc_consumer : pc_producer,
					&f[made])) != 0)
			break;
	}
	pthread_attr_destroy(&attr);
	t0 = kb_now_ns();
	pthread_mutex_lock(&s.mu);
	s.go = e ? -1 : 1;
	pthread_mutex_unlock(&s.mu);
	pthread_cond_broadcast(&s.not_empty);
	for (int i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	t1 = kb_now_ns();
	pthread_cond_destroy(&s.not_empty);
	pthread_cond_destroy(&s.not_full);
	pthread_mutex_destroy(&s.mu);
	if (e)
		return e;
	if (s.sum != s.items * (s.items - 1) / 2)
		return EIO;
	r->ns_per_op = t1 - t0;
	return 0;
}

/* ---- seed000.table2 ---- */

static long chain_n;

static void *chain_fn(void *arg)
{
	long d = (long)(intptr_t)arg;
	if (d < chain_n) {
		pthread_t t;
		int e = pthread_create(&t, NULL, chain_fn, (void *)(intptr_t)(d + 1));
		if (e)
			return (void *)(intptr_t)e;
		void *ret;
		pthread_join(t, &ret);
		return ret;
	}
	return NULL;
}

static int chain_pass(void)
{
	pthread_t t;
	void *ret;
	int e = pthread_create(&t, NULL, chain_fn, (void *)(intptr_t)1);
	if (e)
		return e;
	pthread_join(t, &ret);
	return (int)(intptr_t)ret;
}

int kb_pthread_chain(const kb_args *a, kb_res *r)
{
	if (a->n < 1 || a->iters < 1)
		return EINVAL;
	chain_n = a->n;
	double t0 = kb_now_ns();
	int e = chain_pass();
	double t1 = kb_now_ns();
	for (long i = 0; i < a->iters && !e; i++)
		e = chain_pass();
	double t2 = kb_now_ns();
	r->ns_per_op = (t1 - t0) / (double)a->n;
	r->ns_cached = (t2 - t1) / (double)(a->n * a->iters);
	return e;
}
