/*
 * An ordinary C program with threads that uses what the pthread layer
 * (src/pthread) must run as natively: test_pthread.sh runs it natively and
 * under LD_PRELOAD=libkarui-pthread.so and compares every byte.  Each
 * check prints one line, "NAME ok" or "NAME FAILED: why"; the status is
 * the number of failures.  Built as a plain PIE with no sanitizer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("%s ok\n", name);
	} else {
		printf("%s FAILED: %s\n", name, why);
		failures++;
	}
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec in_ms(clockid_t c, long ms)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	ts.tv_nsec += (ms % 1000) * 1000000;
	ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	return ts;
}

/* ---- create, join, detach, exit, self, equal, once, keys, attrs ---- */

static __thread int tls_value = 7;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int once_runs;
static pthread_key_t key;
static atomic_int key_dtors;

static void once_fn(void) { atomic_fetch_add(&once_runs, 1); }
static void key_dtor(void *v) { atomic_fetch_add(&key_dtors, (int)(intptr_t)v); }

static void *life(void *arg)
{
	pthread_once(&once, once_fn);
	pthread_setspecific(key, arg);
	tls_value = (int)(intptr_t)arg; /* this thread's alone */
	sched_yield();
	if (tls_value != (int)(intptr_t)arg)
		return (void *)-1;
	if ((intptr_t)arg == 3)
		pthread_exit((void *)(intptr_t)33);
	return (void *)((intptr_t)arg * 11);
}

static atomic_int detached_done;
static void *detached(void *arg)
{
	(void)arg;
	atomic_store(&detached_done, 1);
	return NULL;
}

static void *stack_size_of(void *arg)
{
	pthread_attr_t a;
	size_t size = 0;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstacksize(&a, &size);
		pthread_attr_destroy(&a);
	}
	char big[600 * 1024]; /* more than a default stack of 512 KiB would allow for */
	memset(big, 1, sizeof big);
	*(size_t *)arg = size + (size_t)big[sizeof big - 1] - 1;
	return NULL;
}

static void threads_life(void)
{
	pthread_key_create(&key, key_dtor);
	pthread_t t[4];
	for (intptr_t i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, life, (void *)(i + 1));
	int ok = 1;
	for (intptr_t i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		ok &= (intptr_t)r == (i + 1 == 3 ? 33 : (i + 1) * 11);
	}
	check("create-join-exit", ok, "a thread's result");
	check("tls", tls_value == 7, "the main thread's __thread changed");
	check("once", atomic_load(&once_runs) == 1, "pthread_once ran more than once");
	check("keys", atomic_load(&key_dtors) == 1 + 2 + 3 + 4, "destructors");
	check("self-equal", pthread_equal(pthread_self(), pthread_self()) && !pthread_equal(t[0], t[1]),
	      "pthread_equal");
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t d;
	pthread_create(&d, &a, detached, NULL);
	while (!atomic_load(&detached_done))
		sched_yield();
	check("detached", pthread_join(d, NULL) == EINVAL, "a detached thread joined");
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_JOINABLE);
	pthread_attr_setstacksize(&a, 4 << 20);
	size_t size = 0;
	pthread_create(&d, &a, stack_size_of, &size);
	pthread_join(d, NULL);
	check("attr-stacksize", size >= (4 << 20), "the stack size asked for");
	pthread_attr_destroy(&a);
}

/* ---- mutexes ---- */

static pthread_mutex_t counter_mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *count(void *arg)
{
	for (int i = 0; i < 20000; i++) {
		pthread_mutex_lock(&counter_mu);
		counter++;
		if (i % 1000 == 0)
			sched_yield(); /* with the lock held: the others wait on it */
		pthread_mutex_unlock(&counter_mu);
	}
	return arg;
}

static pthread_mutex_t robust_mu;
static void *die_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&robust_mu);
	return NULL; /* ends with it held */
}

static pthread_mutex_t timed_mu = PTHREAD_MUTEX_INITIALIZER;
static void *hold_timed(void *arg)
{
	pthread_mutex_lock(&timed_mu);
	sem_t *s = arg;
	sem_post(&s[0]);
	sem_wait(&s[1]);
	pthread_mutex_unlock(&timed_mu);
	return NULL;
}

static void *unlock_other(void *arg)
{
	return (void *)(intptr_t)pthread_mutex_unlock(arg);
}

static void mutexes(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, count, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check("mutex-normal", counter == 80000, "lost increments");

	pthread_mutex_t rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
	int ok = pthread_mutex_lock(&rec) == 0 && pthread_mutex_lock(&rec) == 0 &&
		 pthread_mutex_unlock(&rec) == 0 && pthread_mutex_unlock(&rec) == 0;
	check("mutex-recursive", ok, "relock");

	pthread_mutex_t ec;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&ec, &ma);
	pthread_mutex_lock(&ec);
	int relock = pthread_mutex_lock(&ec);
	void *other;
	pthread_t u;
	pthread_create(&u, NULL, unlock_other, &ec);
	pthread_join(u, &other);
	pthread_mutex_unlock(&ec);
	check("mutex-errorcheck", relock == EDEADLK && (intptr_t)other == EPERM,
	      "EDEADLK and EPERM");

	sem_t s[2];
	sem_init(&s[0], 0, 0);
	sem_init(&s[1], 0, 0);
	pthread_create(&u, NULL, hold_timed, s);
	sem_wait(&s[0]);
	struct timespec dl = in_ms(CLOCK_REALTIME, 30);
	int timed = pthread_mutex_timedlock(&timed_mu, &dl);
	sem_post(&s[1]);
	dl = in_ms(CLOCK_REALTIME, 5000);
	int got = pthread_mutex_timedlock(&timed_mu, &dl);
	pthread_join(u, NULL);
	pthread_mutex_unlock(&timed_mu);
	check("mutex-timed", timed == ETIMEDOUT && got == 0, "ETIMEDOUT, then the lock");

	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_NORMAL);
	pthread_mutex_init(&robust_mu, &ma);
	pthread_create(&u, NULL, die_holding, NULL);
	pthread_join(u, NULL);
	int dead = pthread_mutex_lock(&robust_mu);
	int cons = dead == EOWNERDEAD ? pthread_mutex_consistent(&robust_mu) : -1;
	pthread_mutex_unlock(&robust_mu);
	check("mutex-robust", dead == EOWNERDEAD && cons == 0 && pthread_mutex_lock(&robust_mu) == 0,
	      "EOWNERDEAD after its owner ended");
	pthread_mutex_unlock(&robust_mu);
	pthread_mutexattr_destroy(&ma);
}

/* ---- condition variables, both clocks ---- */

static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;

static void *signaller(void *arg)
{
	usleep(10000);
	pthread_mutex_lock(&cmu);
	ready = 1;
	pthread_cond_signal(arg);
	pthread_mutex_unlock(&cmu);
	return NULL;
}

static void conds(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_t mono;
	pthread_cond_init(&mono, &ca);
	for (int clk = 0; clk < 2; clk++) {
		pthread_cond_t *c = clk ? &mono : &cv;
		clockid_t id = clk ? CLOCK_MONOTONIC : CLOCK_REALTIME;
		pthread_mutex_lock(&cmu);
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);
		struct timespec dl = in_ms(id, 20);
		int r = 0;
		while (r == 0)
			r = pthread_cond_timedwait(c, &cmu, &dl);
		uint64_t waited = now_ns(CLOCK_MONOTONIC) - t0;
		ready = 0;
		pthread_t u;
		pthread_create(&u, NULL, signaller, c);
		dl = in_ms(id, 10000);
		int s = 0;
		while (!ready && s == 0)
			s = pthread_cond_timedwait(c, &cmu, &dl);
		pthread_mutex_unlock(&cmu);
		pthread_join(u, NULL);
		check(clk ? "cond-monotonic" : "cond-realtime",
		      r == ETIMEDOUT && waited >= 19000000 && s == 0 && ready,
		      "a timeout no shorter than asked, then the signal");
	}
	pthread_cond_destroy(&mono);
	pthread_condattr_destroy(&ca);
}

/* ---- rwlocks, barriers, spin locks, semaphores ---- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int readers_in, max_readers, writer_overlap;

static void *reader(void *arg)
{
	pthread_barrier_t *b = arg;
	pthread_rwlock_rdlock(&rw);
	int n = atomic_fetch_add(&readers_in, 1) + 1;
	int m = atomic_load(&max_readers);
	while (n > m && !atomic_compare_exchange_weak(&max_readers, &m, n))
		;
	pthread_barrier_wait(b); /* all readers in at once */
	atomic_fetch_sub(&readers_in, 1);
	pthread_rwlock_unlock(&rw);
	return NULL;
}

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++) {
		pthread_rwlock_wrlock(&rw);
		if (atomic_load(&readers_in))
			atomic_store(&writer_overlap, 1);
		pthread_rwlock_unlock(&rw);
	}
	return NULL;
}

static pthread_spinlock_t spin;
static long spun;
static void *spinner(void *arg)
{
	for (int i = 0; i < 20000; i++) {
		pthread_spin_lock(&spin);
		spun++;
		pthread_spin_unlock(&spin);
	}
	return arg;
}

static sem_t items;
static void *producer(void *arg)
{
	for (int i = 0; i < 1000; i++)
		sem_post(&items);
	return arg;
}

static void others(void)
{
	pthread_barrier_t b;
	pthread_barrier_init(&b, NULL, 3);
	pthread_t t[4];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, reader, &b);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pthread_create(&t[0], NULL, writer, NULL);
	pthread_create(&t[1], NULL, writer, NULL);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	check("rwlock", atomic_load(&max_readers) == 3 && !atomic_load(&writer_overlap),
	      "readers together, writers alone");
	pthread_barrier_destroy(&b);

	pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, spinner, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check("spinlock", spun == 80000, "lost increments");

	sem_init(&items, 0, 0);
	pthread_create(&t[0], NULL, producer, NULL);
	pthread_create(&t[1], NULL, producer, NULL);
	int took = 0;
	for (int i = 0; i < 2000; i++)
		took += sem_wait(&items) == 0;
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	struct timespec dl = in_ms(CLOCK_REALTIME, 20);
	int r = sem_timedwait(&items, &dl);
	check("semaphore", took == 2000 && r == -1 && errno == ETIMEDOUT, "posts and waits");
}

/* ---- sleeps ---- */

static void sleeps(void)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	struct timespec ts = {0, 5000000};
	nanosleep(&ts, NULL);
	uint64_t t1 = now_ns(CLOCK_MONOTONIC);
	usleep(5000);
	uint64_t t2 = now_ns(CLOCK_MONOTONIC);
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	uint64_t t3 = now_ns(CLOCK_MONOTONIC);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += 5000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
	uint64_t t4 = now_ns(CLOCK_MONOTONIC);
	sleep(0);
	check("sleeps",
	      t1 - t0 >= 5000000 && t2 - t1 >= 5000000 && t3 - t2 >= 5000000 &&
		      t4 - t3 >= 4000000,
	      "a sleep shorter than asked");
}

/* ---- blocking I/O between threads: a pipe, a socket pair, TCP ---- */

static void *echo_pipe(void *arg)
{
	int *fd = arg; /* read fd[0], write back fd[1] */
	char buf[4096];
	ssize_t n;
	long total = 0;
	while ((n = read(fd[0], buf, sizeof buf)) > 0) {
		if (write(fd[1], buf, (size_t)n) != n)
			return (void *)-1;
		total += n;
	}
	close(fd[1]);
	return (void *)total;
}

static void *tcp_server(void *arg)
{
	int ls = *(int *)arg;
	int c = accept(ls, NULL, NULL);
	if (c < 0)
		return (void *)-1;
	char buf[256];
	ssize_t n = recv(c, buf, sizeof buf, 0);
	if (n > 0)
		send(c, buf, (size_t)n, 0);
	close(c);
	return (void *)n;
}

static void io(void)
{
	int a[2], b[2];
	pipe(a);
	pipe(b);
	int fds[2] = {a[0], b[1]};
	pthread_t t;
	pthread_create(&t, NULL, echo_pipe, fds);
	long back = 0;
	char out[1000], in[1000];
	for (int round = 0; round < 100; round++) {
		for (int i = 0; i < 1000; i++)
			out[i] = (char)(round * 7 + i);
		write(a[1], out, sizeof out);
		size_t got = 0;
		while (got < sizeof in) {
			struct pollfd p = {b[0], POLLIN, 0};
			if (poll(&p, 1, 5000) != 1)
				break;
			ssize_t n = read(b[0], in + got, sizeof in - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		back += got == sizeof in && !memcmp(in, out, sizeof in);
	}
	close(a[1]);
	void *total;
	pthread_join(t, &total);
	close(a[0]);
	close(b[0]);
	check("pipe-io", back == 100 && (long)total == 100000, "bytes lost or changed");

	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
	fds[0] = sp[1];
	fds[1] = sp[1];
	pthread_create(&t, NULL, echo_pipe, fds);
	send(sp[0], "hello", 5, 0);
	char buf[8] = {0};
	ssize_t n = recv(sp[0], buf, sizeof buf, 0);
	shutdown(sp[0], SHUT_WR);
	pthread_join(t, NULL);
	close(sp[0]);
	check("socketpair-io", n == 5 && !memcmp(buf, "hello", 5), "the echo");

	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof sa;
	int ok = ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 4) == 0 &&
		 getsockname(ls, (struct sockaddr *)&sa, &sl) == 0;
	if (ok) {
		pthread_create(&t, NULL, tcp_server, &ls);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		ok = connect(c, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		     send(c, "ping", 4, 0) == 4 && recv(c, buf, sizeof buf, 0) == 4 &&
		     !memcmp(buf, "ping", 4);
		close(c);
		void *r;
		pthread_join(t, &r);
		ok &= (intptr_t)r == 4;
	}
	close(ls);
	check("tcp-accept-connect", ok, "the loopback echo");
}

/* ---- fork in a program with threads ---- */

static void *busy(void *arg)
{
	sem_t *s = arg;
	sem_wait(s);
	return NULL;
}

static void forks(void)
{
	sem_t s;
	sem_init(&s, 0, 0);
	pthread_t t;
	pthread_create(&t, NULL, busy, &s);
	int p[2];
	pipe(p);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* the forking thread alone: a mutex and a new thread work here */
		pthread_t u;
		int r = pthread_create(&u, NULL, life, (void *)(intptr_t)5) == 0 &&
			pthread_join(u, NULL) == 0;
		char c = r ? 'y' : 'n';
		write(p[1], &c, 1);
		_exit(r ? 0 : 1);
	}
	char c = 0;
	close(p[1]);
	read(p[0], &c, 1);
	close(p[0]);
	int st = -1;
	waitpid(pid, &st, 0);
	sem_post(&s);
	pthread_join(t, NULL);
	check("fork", pid > 0 && c == 'y' && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the child and its thread");
}

/* ---- cancellation at a cancellation point ---- */

static void *blocked_read(void *arg)
{
	char c;
	read(*(int *)arg, &c, 1); /* never returns: cancelled here */
	return NULL;
}

static void cancels(void)
{
	int p[2];
	pipe(p);
	pthread_t t;
	pthread_create(&t, NULL, blocked_read, &p[0]);
	usleep(10000);
	pthread_cancel(t);
	void *r = NULL;
	pthread_join(t, &r);
	close(p[0]);
	close(p[1]);
	check("cancel", r == PTHREAD_CANCELED, "a thread cancelled in read");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	threads_life();
	mutexes();
	conds();
	others();
	sleeps();
	io();
	forks();
	cancels();
	return failures;
}
