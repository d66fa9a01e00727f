/*
 * Allocation failure at every allocation site of the runtime, SQLite-style.
 *
 * The test is linked with --wrap for every call through which karui gets
 * memory, threads or kernel objects (malloc, calloc, realloc,
 * aligned_alloc, posix_memalign, mmap, pthread_create, pthread_atfork,
 * epoll_create1, eventfd, io_uring_queue_init*), so the wrappers below
 * see the library's calls and nothing else's.  For n = 1, 2, ... a child process runs one
 * scenario that reaches every site (start-up, creation of many
 * microprocesses with stacks of several sizes, keys, timers, channels,
 * streams, I/O, a blocking call on a spare VP, shut-down) with the n-th call
 * failing once.  Each call of the scenario must then either succeed or
 * report the failure with its documented code (ENOMEM or EAGAIN; EMFILE
 * for the I/O back ends' kernel objects), leave
 * karui usable, and the child must end normally: no crash, no hang, no
 * wrong result.  When a run reaches the end without meeting its n-th call,
 * every site has been failed once.  The whole runs once on each I/O back
 * end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "karui.h"
#include "kt.h"

/* ---- the wrappers: the n-th call fails, once ---- */

static long countdown; /* 0: disarmed */
static int fired;

static int fail_now(void)
{
	long c = __atomic_load_n(&countdown, __ATOMIC_RELAXED);
	if (c <= 0)
		return 0;
	if (__atomic_sub_fetch(&countdown, 1, __ATOMIC_RELAXED) != 0)
		return 0;
	__atomic_store_n(&fired, 1, __ATOMIC_RELAXED);
	return 1;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __real_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
int __real_epoll_create1(int flags);
int __real_eventfd(unsigned v, int flags);

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n)
{
	return fail_now() ? NULL : __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	return fail_now() ? ENOMEM : __real_posix_memalign(p, align, n);
}
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	if (fail_now()) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return __real_mmap(a, n, prot, flags, fd, off);
}
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	return fail_now() ? EAGAIN : __real_pthread_create(t, a, fn, arg);
}
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
	return fail_now() ? ENOMEM : __real_pthread_atfork(prepare, parent, child);
}
int __wrap_epoll_create1(int flags)
{
	if (fail_now()) {
		errno = EMFILE;
		return -1;
	}
	return __real_epoll_create1(flags);
}
int __wrap_eventfd(unsigned v, int flags)
{
	if (fail_now()) {
		errno = EMFILE;
		return -1;
	}
	return __real_eventfd(v, flags);
}
#ifdef KARUI_HAVE_URING
#include <liburing.h>
int __real_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags);
int __real_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p);
int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	return fail_now() ? -ENOMEM : __real_io_uring_queue_init(entries, ring, flags);
}
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p)
{
	return fail_now() ? -ENOMEM : __real_io_uring_queue_init_params(entries, ring, p);
}
#endif

/* ---- the scenario ---- */

/* A call of the scenario: 0, or a resource error, which the scenario then
 * treats as the end of that step.  Anything else fails the test. */
#define OK_OR_OUT(call)                                                        \
	do {                                                                   \
		int e_ = (call);                                               \
		if (e_ == ENOMEM || e_ == EAGAIN || e_ == EMFILE)             \
			goto out;                                              \
		KT_EQ(e_, 0);                                                  \
	} while (0)

static void *ret_arg(void *arg) { return arg; }

static kr_key key;
static void *with_key(void *arg)
{
	int e = kr_key_set(key, arg);
	KT_CHECK(e == 0 || e == ENOMEM);
	KT_CHECK(kr_key_get(key) == (e ? NULL : arg));
	return arg;
}

static void *timed_park(void *arg)
{
	int e = kr_mp_park_until(kr_now() + 1000000);
	KT_CHECK(e == ETIMEDOUT || e == ENOMEM || e == 0);
	return arg;
}

static void *blocking(void *arg)
{
	int e = kr_blocking_begin();
	KT_CHECK(e == 0 || e == EAGAIN || e == ENOMEM);
	if (e == 0)
		KT_EQ(kr_blocking_end(), 0);
	return arg;
}

static void *sender(void *arg)
{
	kr_chan *ch = arg;
	for (int i = 0; i < 100; i++)
		KT_EQ(kr_chan_send(ch, &i), 0);
	return NULL;
}

/* Create n microprocesses running fn (stack size ss) and join them;
 * each returns its index, which is checked. */
static int spawn_join(unsigned n, size_t ss, kr_mp_fn fn)
{
	kr_mp *m[64];
	unsigned made = 0;
	int err = 0;
	for (; made < n; made++) {
		err = kr_mp_create(&m[made], &(kr_attr){.stack_size = ss}, fn,
				   (void *)(uintptr_t)made);
		if (err)
			break;
	}
	for (unsigned i = 0; i < made; i++) {
		void *r;
		KT_EQ(kr_mp_join(m[i], &r), 0);
		KT_EQ((uintptr_t)r, i);
	}
	return err;
}

static int io_pipe[2];

/* The writer closes its end whatever happened, so that the reader sees
 * the end of the stream if a failure stopped the write. */
static void *io_writer(void *arg)
{
	char b[100];
	memset(b, 'k', sizeof b);
	size_t done;
	int err = kr_write_all(io_pipe[1], b, sizeof b, &done);
	KT_EQ(kr_close(io_pipe[1]), 0);
	return (void *)(uintptr_t)err;
}

/* 100 bytes through a pipe, written by a microprocess, read by the caller. */
static int pipe_io(void)
{
	KT_EQ(pipe(io_pipe), 0);
	kr_mp *w;
	int err = kr_mp_create(&w, NULL, io_writer, NULL);
	if (err) {
		kr_close(io_pipe[1]);
		kr_close(io_pipe[0]);
		return err;
	}
	size_t got = 0, n = 1;
	char b[100];
	while (got < sizeof b && n > 0 &&
	       !(err = kr_read(io_pipe[0], b + got, sizeof b - got, &n)))
		got += n;
	void *r;
	KT_EQ(kr_mp_join(w, &r), 0);
	kr_close(io_pipe[0]);
	if (!err)
		err = (int)(uintptr_t)r;
	if (!err)
		KT_CHECK(got == sizeof b && b[0] == 'k' && b[99] == 'k');
	return err;
}

static void scenario(void)
{
	kr_config cfg = {.vps = 2};
	int inited = 0;
	OK_OR_OUT(kr_init(&cfg));
	inited = 1;
	OK_OR_OUT(spawn_join(64, 0, ret_arg));
	OK_OR_OUT(spawn_join(8, 256 * 1024, ret_arg));
	OK_OR_OUT(spawn_join(8, 8192, ret_arg));
	OK_OR_OUT(spawn_join(16, 0, timed_park));
	if (kr_key_create(&key, NULL) == 0) {
		int e = spawn_join(8, 0, with_key);
		KT_EQ(kr_key_delete(key), 0);
		OK_OR_OUT(e);
	}
	kr_chan ch;
	OK_OR_OUT(kr_chan_init(&ch, sizeof(int), 4));
	kr_mp *s;
	int e = kr_mp_create(&s, NULL, sender, &ch);
	if (e == 0) {
		for (int i = 0; i < 100; i++) {
			int v;
			KT_EQ(kr_chan_recv(&ch, &v), 0);
			KT_EQ(v, i);
		}
		KT_EQ(kr_mp_join(s, NULL), 0);
	}
	KT_EQ(kr_chan_destroy(&ch), 0);
	OK_OR_OUT(e);
	kr_stream st;
	OK_OR_OUT(kr_stream_init(&st, 64 * 1024));
	KT_EQ(kr_stream_destroy(&st), 0);
	OK_OR_OUT(pipe_io());
	OK_OR_OUT(spawn_join(2, 0, blocking));
out:
	if (inited)
		KT_EQ(kr_fini(), 0);
	/* whatever failed, karui starts again and works */
	__atomic_store_n(&countdown, 0, __ATOMIC_RELAXED);
	KT_EQ(kr_init(&cfg), 0);
	KT_EQ(spawn_join(64, 0, ret_arg), 0);
	KT_EQ(pipe_io(), 0);
	KT_EQ(kr_fini(), 0);
}

static void every_site_fails_cleanly(void)
{
	long n;
	for (n = 1;; n++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(60);
			__atomic_store_n(&countdown, n, __ATOMIC_RELAXED);
			scenario();
			exit(__atomic_load_n(&fired, __ATOMIC_RELAXED) ? 0 : 3);
		}
		int st;
		KT_EQ(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st))
			fprintf(stderr, "  failing call %ld: killed by signal %d\n", n, WTERMSIG(st));
		KT_CHECK(WIFEXITED(st));
		if (WEXITSTATUS(st) == 3)
			break; /* the n-th call never came: every site was failed */
		if (WEXITSTATUS(st) != 0)
			fprintf(stderr, "  failing call %ld: exit %d\n", n, WEXITSTATUS(st));
		KT_EQ(WEXITSTATUS(st), 0);
	}
	fprintf(stderr, "  %ld calls failed in turn\n", n - 1);
	KT_CHECK(n > 20);
}

static void every_allocation_site_fails_cleanly(void)
{
	unsetenv("KARUI_IO");
	every_site_fails_cleanly();
}

static void every_allocation_site_fails_cleanly_on_epoll(void)
{
	setenv("KARUI_IO", "epoll", 1);
	every_site_fails_cleanly();
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN_T(every_allocation_site_fails_cleanly, 900);
	KT_RUN_T(every_allocation_site_fails_cleanly_on_epoll, 900);
	return kt_finish();
}
