#define _GNU_SOURCE
/* L3 io: karui's own I/O calls and blocking calls with VP hand-off.
 * ctest runs this file three times: as it is (io_uring where the kernel
 * allows); with KARUI_IO=epoll, which forces the fallback back end; and
 * with KARUI_TEST_DENY_URING=1, under a seccomp filter that refuses
 * io_uring_setup with EPERM (as container runtimes do), where karui must
 * fall back to epoll by itself.  Some cases run a fourth time under
 * valgrind (KARUI_TEST_VALGRIND=1), where karui must take epoll by itself
 * too. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_seccomp.h"

#define MS 1000000ull

static void init(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

static const kr_attr small = {.stack_size = 32768};

static uint64_t in_ms(uint64_t ms) { return kr_now() + ms * MS; }

static void mkpipe(int p[2]) { KT_EQ(pipe2(p, O_CLOEXEC), 0); }

/* init(vps) for a test of one back end: skipped, with why, on the other. */
static void init_on(unsigned vps, const char *backend, const char *why)
{
	init(vps);
	if (strcmp(kr_io_backend(), backend) != 0) {
		kr_fini();
		KT_SKIP(why);
	}
}

enum { NR_IO_URING_SETUP = 425 }; /* the same on x86-64 and aarch64 */

/* KARUI_TEST_DENY_URING: io_uring_setup fails with EPERM for this process
 * and every test it forks.  0, or why the filter could not be installed. */
static int deny_io_uring(void) { return kt_seccomp_deny(NR_IO_URING_SETUP, -1, 0, EPERM); }

/* ---------------- the back end ---------------- */

static void backend_is_io_uring_unless_forced_or_unavailable(void)
{
	init(1);
	const char *b = kr_io_backend();
	KT_CHECK(b);
	const char *want = getenv("KARUI_IO");
	fprintf(stderr, "  back end: %s\n", b);
	if (getenv("KARUI_TEST_DENY_URING")) {
		/* the filter is in force, and karui fell back by itself */
		errno = 0;
		KT_EQ(syscall(NR_IO_URING_SETUP, 4, NULL), -1);
		KT_EQ(errno, EPERM);
		KT_CHECK(strcmp(b, "epoll") == 0);
	} else if (want && strcmp(want, "epoll") == 0) {
		KT_CHECK(strcmp(b, "epoll") == 0);
	} else if (getenv("KARUI_TEST_VALGRIND")) {
		/* ctest runs this under valgrind: karui must have seen it */
		KT_CHECK(strcmp(b, "epoll") == 0);
	} else {
#ifdef KARUI_HAVE_URING
		/* does this kernel let us set up a ring at all? */
		char params[120] = {0};
		long fd = syscall(425 /* io_uring_setup */, 4, params);
		if (fd >= 0) {
			close((int)fd);
			KT_CHECK(strcmp(b, "io_uring") == 0);
		} else {
			KT_CHECK(strcmp(b, "epoll") == 0);
		}
#else
		KT_CHECK(strcmp(b, "epoll") == 0);
#endif
	}
	KT_EQ(kr_fini(), 0);
}

/* ---------------- pipes ---------------- */

struct pp {
	int in, out;
	int rounds;
};

static void *echo_pipe(void *a)
{
	struct pp *p = a;
	char b[8];
	size_t n;
	for (int i = 0; i < p->rounds; i++) {
		KT_EQ(kr_read(p->in, b, sizeof b, &n, KR_FOREVER), 0);
		KT_EQ(n, 8);
		KT_EQ(kr_write(p->out, b, 8, &n, KR_FOREVER), 0);
		KT_EQ(n, 8);
	}
	return NULL;
}

static void pipe_round_trips_between_microprocesses_on_two_vps(void)
{
	init(2);
	int a[2], b[2];
	mkpipe(a);
	mkpipe(b);
	struct pp p = {.in = a[0], .out = b[1], .rounds = 3000};
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &small, echo_pipe, &p), 0);
	for (int i = 0; i < p.rounds; i++) {
		uint64_t v = (uint64_t)i * 2654435761u, r = 0;
		size_t n;
		KT_EQ(kr_write(a[1], &v, 8, &n, KR_FOREVER), 0);
		KT_EQ(n, 8);
		KT_EQ(kr_read(b[0], &r, 8, &n, KR_FOREVER), 0);
		KT_EQ(n, 8);
		KT_EQ(r, v);
	}
	KT_EQ(kr_mp_join(m, NULL), 0);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(a[i]), 0);
		KT_EQ(kr_close(b[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static int ticks;

static void *ticker(void *a)
{
	int *fd = a;
	for (int i = 0; i < 1000; i++) {
		ticks++;
		kr_mp_yield();
	}
	size_t n;
	KT_EQ(kr_write(*fd, "x", 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	return NULL;
}

static void read_parks_only_the_calling_microprocess(void)
{
	init(1);
	int p[2];
	mkpipe(p);
	kr_mp *m;
	KT_EQ(kr_mp_create(&m, &small, ticker, &p[1]), 0);
	char c = 0;
	size_t n;
	KT_EQ(kr_read(p[0], &c, 1, &n, KR_FOREVER), 0); /* on the one VP */
	KT_EQ(n, 1);
	KT_EQ(c, 'x');
	KT_EQ(ticks, 1000);
	KT_EQ(kr_mp_join(m, NULL), 0);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

static void readv_and_writev_move_scattered_bytes(void)
{
	init(1);
	int p[2];
	mkpipe(p);
	char a[] = "karui", b[] = " micro", c[] = "processes";
	struct iovec out[3] = {{a, 5}, {b, 6}, {c, 9}};
	size_t n;
	KT_EQ(kr_writev(p[1], out, 3, &n, KR_FOREVER), 0);
	KT_EQ(n, 20);
	char x[7] = {0}, y[14] = {0};
	struct iovec in[2] = {{x, 6}, {y, 14}};
	KT_EQ(kr_readv(p[0], in, 2, &n, KR_FOREVER), 0);
	KT_EQ(n, 20);
	KT_CHECK(memcmp(x, "karui ", 6) == 0 && memcmp(y, "microprocesses", 14) == 0);
	KT_EQ(kr_readv(p[0], in, -1, &n, KR_FOREVER), EINVAL);
	KT_EQ(n, 0);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

static void regular_files_are_read_and_written(void)
{
	init(1);
	char path[] = "/tmp/karui-io-XXXXXX";
	int fd = mkstemp(path);
	KT_CHECK(fd >= 0);
	unlink(path);
	static char buf[1 << 16], back[1 << 16];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7);
	size_t got = 0, n;
	KT_EQ(kr_write_all(fd, buf, sizeof buf, &n, KR_FOREVER), 0);
	KT_EQ(n, sizeof buf);
	KT_EQ(lseek(fd, 0, SEEK_SET), 0);
	while (got < sizeof back) {
		KT_EQ(kr_read(fd, back + got, sizeof back - got, &n, KR_FOREVER), 0);
		KT_CHECK(n > 0);
		got += n;
	}
	n = 1;
	KT_EQ(kr_read(fd, back, 1, &n, KR_FOREVER), 0); /* end of file */
	KT_EQ(n, 0);
	KT_CHECK(memcmp(buf, back, sizeof buf) == 0);
	kr_close(fd);
	KT_EQ(kr_fini(), 0);
}

enum { FILE_LEN = 200003 }; /* not a whole number of pages */
static char file_bytes[FILE_LEN], file_back[FILE_LEN + 4096];

/* Read fd from its position to its end with kr_read in reads of `step`
 * (kr_readv in two halves when `vec`), into file_back: the bytes read. */
static size_t read_to_end(int fd, size_t step, int vec)
{
	size_t got = 0, n;
	do {
		size_t len = step < sizeof file_back - got ? step : sizeof file_back - got;
		if (vec) {
			struct iovec v[2] = {{file_back + got, len / 2},
					     {file_back + got + len / 2, len - len / 2}};
			KT_EQ(kr_readv(fd, v, 2, &n, KR_FOREVER), 0);
		} else {
			KT_EQ(kr_read(fd, file_back + got, len, &n, KR_FOREVER), 0);
		}
		got += n;
		KT_CHECK(got <= FILE_LEN);
	} while (n > 0 && got < FILE_LEN);
	n = 1;
	KT_EQ(kr_read(fd, file_back, step, &n, KR_FOREVER), 0); /* end of file */
	KT_EQ(n, 0);
	return got;
}

/* fd under the number num (which is free, or fd) */
static int renumber(int fd, int num)
{
	if (fd != num) {
		KT_EQ(dup2(fd, num), num);
		KT_EQ(close(fd), 0);
	}
	return num;
}

/* Reads of a regular file, from the page cache and (as far as
 * POSIX_FADV_DONTNEED drops its pages) from the disk: the bytes, the file
 * position, the count at the end of the file and the errors are the
 * system call's.  The fd's number is then a pipe's, and a pipe's is a
 * file's, on both back ends. */
static void file_reads_match_read_cached_or_not(void)
{
	init(1);
	char path[] = "/tmp/karui-io-XXXXXX";
	int fd = mkstemp(path);
	KT_CHECK(fd >= 0);
	for (size_t i = 0; i < FILE_LEN; i++)
		file_bytes[i] = (char)(i * 131 + i / 4096);
	KT_EQ(write(fd, file_bytes, FILE_LEN), FILE_LEN);
	KT_EQ(fsync(fd), 0); /* clean pages: DONTNEED can drop them */
	KT_EQ(close(fd), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	KT_CHECK(fd >= 0);
	static const size_t steps[] = {65536, 4096, 1000, FILE_LEN + 4096};
	for (int drop = 0; drop < 3; drop++) /* cached; dropped; its second half dropped */
		for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
			for (int vec = 0; vec < 2; vec++) {
				KT_EQ(lseek(fd, 0, SEEK_SET), 0);
				if (drop)
					posix_fadvise(fd, drop == 1 ? 0 : FILE_LEN / 2, 0,
						      POSIX_FADV_DONTNEED);
				memset(file_back, 0, sizeof file_back);
				KT_EQ(read_to_end(fd, steps[i], vec), FILE_LEN);
				KT_CHECK(memcmp(file_back, file_bytes, FILE_LEN) == 0);
				KT_EQ(lseek(fd, 0, SEEK_CUR), FILE_LEN);
			}
	/* at offsets: the bytes there, the position moved by the count, and
	 * a read past the end short by what is not there */
	static const off_t offs[] = {1, 4095, 4096, 65537, FILE_LEN - 100, FILE_LEN - 1};
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
		size_t n, want = FILE_LEN - (size_t)offs[i] < 4096 ? FILE_LEN - (size_t)offs[i]
								 : 4096;
		KT_EQ(lseek(fd, offs[i], SEEK_SET), offs[i]);
		if (i % 2)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		KT_EQ(kr_read(fd, file_back, 4096, &n, KR_FOREVER), 0);
		KT_EQ(n, want);
		KT_CHECK(memcmp(file_back, file_bytes + offs[i], want) == 0);
		KT_EQ(lseek(fd, 0, SEEK_CUR), offs[i] + (off_t)want);
	}
	size_t n = 1;
	KT_EQ(kr_read(fd, file_back, 0, &n, KR_FOREVER), 0); /* nothing asked */
	KT_EQ(n, 0);
	KT_EQ(lseek(fd, FILE_LEN + 10, SEEK_SET), FILE_LEN + 10);
	n = 1;
	KT_EQ(kr_read(fd, file_back, 10, &n, KR_FOREVER), 0); /* past the end */
	KT_EQ(n, 0);
	/* errors: a directory, a file open for writing only, a closed fd */
	int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	KT_CHECK(dir >= 0);
	n = 1;
	KT_EQ(kr_read(dir, file_back, 10, &n, KR_FOREVER), EISDIR);
	KT_EQ(n, 0);
	KT_EQ(kr_close(dir), 0);
	int wo = open(path, O_WRONLY | O_CLOEXEC);
	KT_CHECK(wo >= 0);
	n = 1;
	KT_EQ(kr_read(wo, file_back, 10, &n, KR_FOREVER), EBADF);
	KT_EQ(n, 0);
	KT_EQ(kr_close(wo), 0);
	n = 1;
	KT_EQ(kr_read(wo, file_back, 10, &n, KR_FOREVER), EBADF);
	KT_EQ(n, 0);
	/* the file's number becomes a pipe's (kr_close forgets what it was),
	 * and the pipe's a file's */
	int num = fd;
	KT_EQ(kr_close(fd), 0);
	int p[2];
	mkpipe(p);
	p[0] = renumber(p[0], num);
	char c;
	KT_EQ(kr_read(p[0], &c, 1, &n, in_ms(20)), ETIMEDOUT); /* nothing there */
	KT_EQ(n, 0);
	KT_EQ(write(p[1], "k", 1), 1);
	KT_EQ(kr_read(p[0], &c, 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'k');
	KT_EQ(kr_close(p[0]), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	KT_CHECK(fd >= 0);
	fd = renumber(fd, num);
	KT_EQ(read_to_end(fd, 65536, 0), FILE_LEN);
	KT_CHECK(memcmp(file_back, file_bytes, FILE_LEN) == 0);
	KT_EQ(kr_close(fd), 0);
	KT_EQ(kr_close(p[1]), 0);
	unlink(path);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- deadlines and cancellation ---------------- */

static void timed_read_times_out_and_takes_nothing(void)
{
	init(1);
	int p[2];
	mkpipe(p);
	char c;
	size_t n = 9;
	short ev = 9;
	uint64_t t0 = kr_now();
	KT_EQ(kr_read(p[0], &c, 1, &n, in_ms(50)), ETIMEDOUT);
	KT_EQ(n, 0);
	KT_CHECK(kr_now() - t0 >= 50 * MS);
	KT_EQ(kr_poll(p[0], POLLIN, &ev, in_ms(20)), ETIMEDOUT);
	KT_EQ(ev, 0);
	KT_EQ(write(p[1], "ab", 2), 2);
	KT_EQ(kr_poll(p[0], POLLIN, &ev, in_ms(1000)), 0);
	KT_CHECK(ev & POLLIN);
	KT_EQ(kr_read(p[0], &c, 1, &n, in_ms(1000)), 0); /* the byte is still there */
	KT_EQ(n, 1);
	KT_EQ(c, 'a');
	KT_EQ(kr_read(p[0], &c, 1, &n, kr_now()), 0); /* ready: a past deadline is fine */
	KT_EQ(n, 1);
	KT_EQ(c, 'b');
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

struct blk {
	int fd;
	int res;        /* the call's result, 99 until it returns: atomic */
	size_t n;       /* the count, or the accepted fd */
	unsigned vp;    /* the VP the read was made on */
	kr_vp *on;      /* the same, NULL until the call starts: atomic */
};

static void blk_start(struct blk *b)
{
	b->vp = kr_vp_id(kr_vp_self());
	__atomic_store_n(&b->on, kr_vp_self(), __ATOMIC_RELEASE);
}

static void blk_end(struct blk *b, int res) { __atomic_store_n(&b->res, res, __ATOMIC_RELEASE); }
static int blk_res(struct blk *b) { return __atomic_load_n(&b->res, __ATOMIC_ACQUIRE); }

/* b's call has started and waits: it started on the VP that runs the
 * caller now (so it has left it), or its VP has gone to sleep since (with
 * nothing left to run).  A call of io.h that waits has no scheduling
 * point before its wait. */
static int blk_waits(struct blk *b)
{
	kr_vp *v = __atomic_load_n(&b->on, __ATOMIC_ACQUIRE);
	return v && (v == kr_vp_self() || kr_vp_status(v) == KR_VP_SLEEPING);
}

static int all_wait(struct blk *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!blk_waits(&b[i]))
			return 0;
	return 1;
}

static void *blocked_reader(void *a)
{
	struct blk *b = a;
	char c;
	size_t n;
	blk_start(b);
	int res = kr_read(b->fd, &c, 1, &n, KR_FOREVER);
	b->n = n;
	blk_end(b, res);
	return NULL;
}

static void *cancel_from_plain_thread(void *a)
{
	*(int *)a = kr_io_cancel(*(int *)a);
	return NULL;
}

/* Readers on both VPs (with io_uring, in both VPs' rings); the cancel comes
 * from a microprocess, then from a thread that is no VP. */
static void cancel_ends_blocked_reads_and_loses_nothing(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	enum { N = 8 };
	for (int round = 0; round < 2; round++) {
		struct blk b[N];
		kr_mp *m[N];
		for (int i = 0; i < N; i++) {
			b[i] = (struct blk){.fd = p[0], .res = 99};
			KT_EQ(kr_mp_create(&m[i], &small, blocked_reader, &b[i]), 0);
			if (i % 2)
				kr_mp_yield(); /* let the other VP take some */
		}
		KT_WAIT(all_wait(b, N), kr_mp_sleep_for(MS));
		unsigned on[2] = {0, 0};
		for (int i = 0; i < N; i++) {
			KT_EQ(blk_res(&b[i]), 99);
			on[b[i].vp & 1]++;
		}
		if (round == 0) {
			KT_EQ(kr_io_cancel(p[0]), 0);
		} else {
			pthread_t t;
			int arg = p[0];
			KT_EQ(pthread_create(&t, NULL, cancel_from_plain_thread, &arg), 0);
			KT_EQ(kr_blocking_enter(), 0);
			KT_EQ(pthread_join(t, NULL), 0);
			KT_EQ(kr_blocking_leave(), 0);
			KT_EQ(arg, 0);
		}
		for (int i = 0; i < N; i++) {
			KT_EQ(kr_mp_join(m[i], NULL), 0);
			KT_EQ(blk_res(&b[i]), ECANCELED);
		}
		fprintf(stderr, "  %s: %u readers on VP 0, %u on VP 1, all cancelled\n",
			round ? "from a plain thread" : "from a microprocess", on[0], on[1]);
	}
	KT_EQ(write(p[1], "z", 1), 1);
	char c = 0;
	size_t n;
	KT_EQ(kr_read(p[0], &c, 1, &n, in_ms(1000)), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'z');
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_fini(), 0);
}

/* kr_close of an fd that microprocesses on both VPs wait on ends their
 * reads with -ECANCELED before it closes: a new fd that takes the same
 * number is untouched. */
static void close_ends_reads_on_every_vp_and_spares_the_next_fd(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	enum { N = 6 };
	struct blk b[N];
	kr_mp *m[N];
	for (int i = 0; i < N; i++) {
		b[i] = (struct blk){.fd = p[0], .res = 99};
		KT_EQ(kr_mp_create(&m[i], &small, blocked_reader, &b[i]), 0);
		kr_mp_yield();
	}
	KT_WAIT(all_wait(b, N), kr_mp_sleep_for(MS));
	int fd = p[0];
	struct stat pipe_st, now_st;
	KT_EQ(fstat(fd, &pipe_st), 0);
	KT_EQ(kr_close(p[0]), 0);
	for (int i = 0; i < N; i++) {
		KT_EQ(kr_mp_join(m[i], NULL), 0);
		KT_EQ(blk_res(&b[i]), ECANCELED);
	}
	/* closed: the number names no file, or another one (a sanitizer's
	 * runtime opens files of its own on threads of its own) */
	errno = 0;
	if (fstat(fd, &now_st) == 0)
		KT_CHECK(now_st.st_ino != pipe_st.st_ino || now_st.st_dev != pipe_st.st_dev);
	else
		KT_EQ(errno, EBADF);
	int q[2];
	mkpipe(q);
	fprintf(stderr, "  closed fd %d, the next pipe reads from fd %d\n", fd, q[0]);
	struct blk nb = {.fd = q[0], .res = 99};
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, &small, blocked_reader, &nb), 0);
	KT_WAIT(blk_waits(&nb), kr_mp_sleep_for(MS));
	KT_EQ(kr_mp_sleep_for(20 * MS), 0); /* time for a stray cancel to land */
	KT_EQ(blk_res(&nb), 99); /* still waiting: nothing cancelled it */
	KT_EQ(write(q[1], "n", 1), 1);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(blk_res(&nb), 0);
	KT_EQ(nb.n, 1);
	KT_EQ(kr_close(q[0]), 0);
	KT_EQ(kr_close(q[1]), 0);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_fini(), 0);
}

static void *off_vp(void *a)
{
	char c;
	size_t n;
	*(int *)a = kr_read(0, &c, 1, &n, KR_FOREVER);
	return NULL;
}

static void bad_input_is_refused(void)
{
	init(1);
	char c;
	size_t n;
	int fd;
	short ev;
	struct sockaddr_in sa;
	KT_EQ(kr_read(-1, &c, 1, &n, KR_FOREVER), EBADF);
	KT_EQ(kr_io_cancel(-1), EBADF);
	KT_EQ(kr_close(-1), EBADF);
	int p[2];
	mkpipe(p);
	KT_EQ(kr_read(p[0], &c, 1, NULL, KR_FOREVER), EINVAL);
	KT_EQ(kr_write(p[1], &c, 1, NULL, KR_FOREVER), EINVAL);
	KT_EQ(kr_accept(p[0], NULL, NULL, 0, NULL, KR_FOREVER), EINVAL);
	KT_EQ(kr_poll(p[0], POLLIN, NULL, KR_FOREVER), EINVAL);
	/* closed (a number nothing else takes meanwhile: the back end, started
	 * by the read, opens fds of its own, and kr_close does not start it) */
	KT_EQ(dup2(p[0], 900), 900);
	KT_EQ(kr_close(900), 0);
	KT_EQ(kr_read(900, &c, 1, &n, KR_FOREVER), EBADF);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_accept(p[1], (struct sockaddr *)&sa, NULL, 0, &fd, KR_FOREVER), EINVAL);
	KT_EQ(fd, -1);
	KT_EQ(kr_accept(p[1], NULL, NULL, 12345, &fd, KR_FOREVER), EINVAL);
	KT_EQ(kr_connect(p[1], NULL, 0, KR_FOREVER), EINVAL);
	KT_EQ(kr_poll(p[1], 0, &ev, KR_FOREVER), EINVAL);
	KT_EQ(kr_recv(p[1], &c, 1, 0, &n, KR_FOREVER), ENOTSOCK);
	pthread_t t;
	int res = 0;
	KT_EQ(pthread_create(&t, NULL, off_vp, &res), 0);
	pthread_join(t, NULL);
	KT_EQ(res, EPERM);
	KT_EQ(kr_blocking_leave(), EINVAL);
	KT_EQ(kr_blocking_enter(), 0);
	KT_EQ(kr_blocking_enter(), EBUSY);
	KT_EQ(kr_blocking_leave(), 0);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- on VP 1 ---------------- */

/* Run fn in a microprocess on VP `id` (0 or 1, of 2).  Two microprocesses
 * spin without a scheduling point until both run, so that they are on
 * both VPs; the one on the other VP goes on spinning, holding it, until
 * the one on VP `id` has run fn.  The caller waits in kr_mp_join
 * meanwhile. */
static void (*vp1_fn)(void);
static unsigned vp1_id;
static int vp1_arrived, vp1_done;

static void *vp1_pair(void *a)
{
	__atomic_fetch_add(&vp1_arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&vp1_arrived, __ATOMIC_SEQ_CST) < 2)
		;
	if (kr_vp_id(kr_vp_self()) == vp1_id) {
		vp1_fn();
		KT_EQ(kr_vp_id(kr_vp_self()), vp1_id); /* the other VP is still held */
		__atomic_store_n(&vp1_done, 1, __ATOMIC_RELEASE);
	} else {
		while (!__atomic_load_n(&vp1_done, __ATOMIC_ACQUIRE))
			;
	}
	return a;
}

static void on_vp(unsigned id, void (*fn)(void))
{
	kr_mp *m[2];
	vp1_fn = fn;
	vp1_id = id;
	vp1_arrived = vp1_done = 0;
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&m[i], &small, vp1_pair, NULL), 0);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(vp1_done, 1);
}

static void on_vp1(void (*fn)(void)) { on_vp(1, fn); }

/* ---------------- broken pipes ---------------- */

static void writes_to_broken_pipe_and_socket_return_epipe(void)
{
	int p[2], s[2];
	mkpipe(p);
	KT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
	KT_EQ(kr_close(p[0]), 0);
	KT_EQ(kr_close(s[0]), 0);
	size_t n = 9;
	struct iovec v = {"x", 1};
	KT_EQ(kr_write(p[1], "x", 1, &n, KR_FOREVER), EPIPE);
	KT_EQ(n, 0);
	KT_EQ(kr_writev(p[1], &v, 1, &n, KR_FOREVER), EPIPE);
	KT_EQ(kr_write(s[1], "x", 1, &n, KR_FOREVER), EPIPE);
	KT_EQ(kr_writev(s[1], &v, 1, &n, KR_FOREVER), EPIPE);
	KT_EQ(kr_send(s[1], "x", 1, 0, &n, KR_FOREVER), EPIPE);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_close(s[1]), 0);
}

/* kr_write and kr_writev to a pipe and to a socket whose other end is
 * closed: EPIPE, and no SIGPIPE ends the process (its default action),
 * on VP 0 (the thread that called kr_init, whose signal mask is the
 * program's) and on VP 1 (which karui started).  After kr_fini that
 * thread's mask is as it was, with no SIGPIPE left pending. */
static void write_to_a_broken_pipe_returns_epipe_on_every_vp(void)
{
	sigset_t before, after, pending;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	KT_CHECK(!sigismember(&before, SIGPIPE));
	init(2);
	KT_EQ(kr_vp_id(kr_vp_self()), 0);
	writes_to_broken_pipe_and_socket_return_epipe();
	on_vp1(writes_to_broken_pipe_and_socket_return_epipe);
	KT_EQ(kr_fini(), 0);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	KT_CHECK(!sigismember(&after, SIGPIPE));
	KT_EQ(sigpending(&pending), 0);
	KT_CHECK(!sigismember(&pending, SIGPIPE));
}

/* ---------------- no fds left ---------------- */

enum { FILL_MAX = 256 };
static int fill[FILL_MAX], nfill;

/* dup's errno, or 0 when it gave an fd (kept).  Not inlined: errno is the
 * current VP's, and the caller may have moved since it last looked. */
static __attribute__((noinline)) int dup_one(void)
{
	int fd = dup(0);
	if (fd < 0)
		return errno;
	KT_CHECK(nfill < FILL_MAX);
	fill[nfill++] = fd;
	return 0;
}

/* Take every free fd (RLIMIT_NOFILE lowered to FILL_MAX first). */
static void take_all_fds(void)
{
	int err;
	while ((err = dup_one()) == 0)
		;
	KT_EQ(err, EMFILE);
}

static void free_one_fd(void)
{
	KT_CHECK(nfill > 0);
	close(fill[--nfill]);
}

static int nofd_pipe[2];

/* On VP 1, which had no fd for a ring when it first looked for one. */
static void read_with_no_fd_then_with_fds(void)
{
	char c;
	size_t n;
	int err = kr_read(nofd_pipe[0], &c, 1, &n, KR_FOREVER);
	if (strcmp(kr_io_backend(), "io_uring") == 0) {
		KT_EQ(err, EMFILE);
		KT_EQ(kr_read(nofd_pipe[0], &c, 1, &n, KR_FOREVER), EMFILE); /* still none */
	} else {
		KT_EQ(err, 0); /* epoll needs no fd per VP */
		KT_EQ(c, 'a');
	}
	while (nfill)
		free_one_fd();
	KT_EQ(kr_read(nofd_pipe[0], &c, 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	KT_EQ(c, err ? 'a' : 'b');
}

/* No fd left when the back end starts: the call fails with EMFILE, and
 * a later one, once fds are free, starts it (io_uring where the kernel
 * allows: a lack of fds is no reason to fall back to epoll for good).
 * Then a VP that had no fd for its ring (VP 1) fails its calls with
 * EMFILE under io_uring, and does I/O once fds are free again. */
static void io_works_again_once_fds_are_free(void)
{
	mkpipe(nofd_pipe);
	init(2);
	struct rlimit rl;
	KT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = FILL_MAX;
	KT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	take_all_fds();
	size_t n;
	int err, tries = 0;
	/* the back end takes the fds it needs: 1 (io_uring) or 2 (epoll) */
	while ((err = kr_write(nofd_pipe[1], "ab", 2, &n, KR_FOREVER)) == EMFILE && tries++ < 4)
		free_one_fd();
	KT_EQ(err, 0);
	KT_EQ(n, 2);
	KT_CHECK(tries > 0);
	fprintf(stderr, "  %s started after %d fds were freed\n", kr_io_backend(), tries);
	KT_EQ(dup_one(), EMFILE); /* none is left for VP 1's ring */
	on_vp1(read_with_no_fd_then_with_fds);
	KT_EQ(kr_close(nofd_pipe[0]), 0);
	KT_EQ(kr_close(nofd_pipe[1]), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- sockets ---------------- */

#define CONNS 200
#define MSGS 20

static int listen_any(uint16_t *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(s >= 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(bind(s, (struct sockaddr *)&a, sizeof a), 0);
	KT_EQ(listen(s, 1024), 0);
	socklen_t l = sizeof a;
	KT_EQ(getsockname(s, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	return s;
}

static unsigned long mps_live(void)
{
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	return st.mps_live;
}

static void *echo_conn(void *a)
{
	int fd = (int)(intptr_t)a;
	char buf[512];
	for (;;) {
		size_t n, sent;
		KT_EQ(kr_recv(fd, buf, sizeof buf, 0, &n, KR_FOREVER), 0);
		if (n == 0)
			break;
		KT_EQ(kr_send(fd, buf, n, 0, &sent, KR_FOREVER), 0);
		KT_EQ(sent, n);
	}
	kr_close(fd);
	return NULL;
}

static void *acceptor(void *a)
{
	int ls = (int)(intptr_t)a;
	for (int i = 0; i < CONNS; i++) {
		struct sockaddr_in peer;
		socklen_t l = sizeof peer;
		int fd;
		KT_EQ(kr_accept(ls, (struct sockaddr *)&peer, &l, SOCK_CLOEXEC, &fd, KR_FOREVER), 0);
		KT_CHECK(fd >= 0);
		KT_EQ(peer.sin_family, AF_INET);
		kr_mp *m;
		KT_EQ(kr_mp_create(&m, &(kr_attr){.stack_size = 32768, .flags = KR_MP_DETACHED},
				   echo_conn, (void *)(intptr_t)fd), 0);
	}
	return NULL;
}

static uint16_t port;
static int echoed;

static void *client(void *a)
{
	unsigned id = (unsigned)(uintptr_t)a;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(s >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(kr_connect(s, (struct sockaddr *)&sa, sizeof sa, in_ms(10000)), 0);
	for (unsigned i = 0; i < MSGS; i++) {
		char msg[64], back[64];
		int n = snprintf(msg, sizeof msg, "client %u message %u", id, i);
		KT_EQ(kr_write_all(s, msg, (size_t)n, NULL, KR_FOREVER), 0);
		int got = 0;
		while (got < n) {
			size_t r;
			KT_EQ(kr_read(s, back + got, sizeof back - (size_t)got, &r, in_ms(10000)), 0);
			KT_CHECK(r > 0);
			got += (int)r;
		}
		KT_EQ(got, n);
		KT_CHECK(memcmp(msg, back, (size_t)n) == 0);
	}
	__atomic_fetch_add(&echoed, 1, __ATOMIC_RELAXED);
	kr_close(s);
	return NULL;
}

static void tcp_echo_serves_many_connections_on_two_vps(void)
{
	init(2);
	int ls = listen_any(&port);
	kr_mp *acc, **cl = calloc(CONNS, sizeof *cl);
	KT_EQ(kr_mp_create(&acc, &small, acceptor, (void *)(intptr_t)ls), 0);
	for (unsigned i = 0; i < CONNS; i++)
		KT_EQ(kr_mp_create(&cl[i], &small, client, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < CONNS; i++)
		KT_EQ(kr_mp_join(cl[i], NULL), 0);
	KT_EQ(kr_mp_join(acc, NULL), 0);
	KT_EQ(echoed, CONNS);
	/* detached servers end once their client has closed (the main
	 * microprocess is not counted) */
	KT_WAIT(mps_live() == 0, kr_mp_sleep_for(2 * MS));
	kr_close(ls);
	free(cl);
	KT_EQ(kr_fini(), 0);
}

static void connect_to_a_closed_port_is_refused(void)
{
	init(1);
	uint16_t p;
	int ls = listen_any(&p);
	close(ls); /* nobody listens on p now */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(p),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(kr_connect(s, (struct sockaddr *)&sa, sizeof sa, in_ms(5000)), ECONNREFUSED);
	kr_close(s);
	KT_EQ(kr_fini(), 0);
}

static void *blocked_acceptor(void *a)
{
	struct blk *b = a;
	int fd = 99;
	blk_start(b);
	int res = kr_accept(b->fd, NULL, NULL, 0, &fd, KR_FOREVER);
	b->n = (size_t)fd;
	blk_end(b, res);
	return NULL;
}

/* kr_mp_cancel ends the I/O wait of that microprocess only: the others go
 * on waiting, and the bytes that come later go to them. */
static void cancel_of_a_microprocess_ends_only_its_io_wait(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	uint16_t port;
	struct blk b[4];
	kr_mp *m[4];
	for (int i = 0; i < 3; i++)
		b[i] = (struct blk){.fd = p[0], .res = 99};
	b[3] = (struct blk){.fd = listen_any(&port), .res = 99};
	for (int i = 0; i < 4; i++)
		KT_EQ(kr_mp_create(&m[i], &small, i < 3 ? blocked_reader : blocked_acceptor, &b[i]),
		      0);
	KT_WAIT(all_wait(b, 4), kr_mp_sleep_for(MS));
	KT_EQ(kr_mp_cancel(m[1]), 0);
	KT_EQ(kr_mp_cancel(m[3]), 0);
	KT_EQ(kr_mp_join(m[1], NULL), 0);
	KT_EQ(kr_mp_join(m[3], NULL), 0);
	KT_EQ(blk_res(&b[1]), ECANCELED);
	KT_EQ(blk_res(&b[3]), ECANCELED);
	KT_EQ((int)b[3].n, -1);
	KT_EQ(kr_mp_sleep_for(10 * MS), 0); /* time for a stray cancel to land */
	KT_EQ(blk_res(&b[0]), 99); /* still waiting */
	KT_EQ(blk_res(&b[2]), 99);
	KT_EQ(write(p[1], "yz", 2), 2);
	KT_EQ(kr_mp_join(m[0], NULL), 0);
	KT_EQ(kr_mp_join(m[2], NULL), 0);
	KT_EQ(blk_res(&b[0]), 0);
	KT_EQ(b[0].n, 1);
	KT_EQ(blk_res(&b[2]), 0);
	KT_EQ(b[2].n, 1);
	/* the cancel was used up: the next wait runs to its deadline */
	int fd;
	KT_EQ(kr_accept(b[3].fd, NULL, NULL, 0, &fd, in_ms(20)), ETIMEDOUT);
	kr_close(b[3].fd);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

/* Stress: on 2 VPs, readers take a numbered stream from their pipe while
 * a canceller hits them at random and a quarter of their reads have short
 * deadlines.  A read that returns -ECANCELED or -ETIMEDOUT took nothing,
 * so every reader still gets every number, in order. */
enum { SPAIRS = 16, SNUM = 20000 };
struct spair {
	int p[2];
	kr_mp *reader;
	unsigned long cancelled, timedout, bad;
	uint64_t got;
};
static int stress_readers_left;

static void *stress_writer(void *a)
{
	struct spair *s = a;
	for (uint64_t i = 0; i < SNUM; i++) {
		size_t n = 0;
		KT_EQ(kr_write_all(s->p[1], &i, sizeof i, &n, KR_FOREVER), 0);
		KT_EQ(n, sizeof i);
		if (i % 8 == 0)
			kr_mp_yield();
	}
	return NULL;
}

static void *stress_reader(void *a)
{
	struct spair *s = a;
	unsigned seed = (unsigned)s->p[0];
	unsigned char buf[8];
	size_t have = 0;
	while (s->got < SNUM) {
		uint64_t dl = rand_r(&seed) % 4 ? KR_FOREVER
						  : kr_now() + (uint64_t)(rand_r(&seed) % 50) * 1000;
		size_t n = 9;
		int err = kr_read(s->p[0], buf + have, sizeof buf - have, &n, dl);
		if (err == ECANCELED || err == ETIMEDOUT) {
			KT_EQ(n, 0);
			err == ECANCELED ? s->cancelled++ : s->timedout++;
			continue;
		}
		KT_EQ(err, 0);
		KT_CHECK(n > 0);
		if ((have += n) < sizeof buf)
			continue;
		uint64_t v;
		memcpy(&v, buf, sizeof v);
		s->bad += v != s->got;
		s->got++;
		have = 0;
	}
	__atomic_fetch_sub(&stress_readers_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *stress_canceller(void *a)
{
	struct spair *sp = a;
	unsigned seed = 7;
	while (__atomic_load_n(&stress_readers_left, __ATOMIC_ACQUIRE)) {
		kr_mp_cancel(sp[rand_r(&seed) % SPAIRS].reader);
		kr_mp_sleep_for(20 * 1000);
	}
	return NULL;
}

static void reads_under_cancels_and_deadlines_lose_nothing(void)
{
	init(2);
	static struct spair sp[SPAIRS];
	kr_mp *wr[SPAIRS], *canceller;
	stress_readers_left = SPAIRS;
	for (int i = 0; i < SPAIRS; i++) {
		sp[i] = (struct spair){0};
		mkpipe(sp[i].p);
		KT_EQ(kr_mp_create(&sp[i].reader, &small, stress_reader, &sp[i]), 0);
		KT_EQ(kr_mp_create(&wr[i], &small, stress_writer, &sp[i]), 0);
	}
	KT_EQ(kr_mp_create(&canceller, &small, stress_canceller, sp), 0);
	KT_EQ(kr_mp_join(canceller, NULL), 0); /* ends when the readers have */
	unsigned long cancelled = 0, timedout = 0, bad = 0, got = 0;
	for (int i = 0; i < SPAIRS; i++) {
		KT_EQ(kr_mp_join(sp[i].reader, NULL), 0);
		KT_EQ(kr_mp_join(wr[i], NULL), 0);
		cancelled += sp[i].cancelled;
		timedout += sp[i].timedout;
		bad += sp[i].bad;
		got += sp[i].got;
		KT_EQ(kr_close(sp[i].p[0]), 0);
		KT_EQ(kr_close(sp[i].p[1]), 0);
	}
	fprintf(stderr, "  %lu numbers, %lu out of order, %lu reads cancelled, %lu timed out\n",
		got, bad, cancelled, timedout);
	KT_EQ(got, (unsigned long)SPAIRS * SNUM);
	KT_EQ(bad, 0);
	KT_CHECK(cancelled > 0);
	KT_CHECK(timedout > 0);
	KT_EQ(kr_fini(), 0);
}

static void accept_times_out_when_nobody_connects(void)
{
	init(1);
	uint16_t p;
	int ls = listen_any(&p);
	int fd;
	KT_EQ(kr_accept(ls, NULL, NULL, 0, &fd, in_ms(40)), ETIMEDOUT);
	kr_close(ls);
	KT_EQ(kr_fini(), 0);
}

/* ---------------- idle and blocking ---------------- */

static uint32_t on_pipe; /* readers that have started */

static void *park_on_pipe(void *a)
{
	int fd = (int)(intptr_t)a;
	char c;
	size_t n;
	__atomic_fetch_add(&on_pipe, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(fd, &c, 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	return NULL;
}

static int all_on_pipe(void) { return __atomic_load_n(&on_pipe, __ATOMIC_ACQUIRE) == 100; }

/* 100 microprocesses waiting on a pipe, on 2 VPs: both VPs sleep in the
 * kernel (in their rings, or in epoll and on L0) and stay asleep. */
static void microprocesses_waiting_on_io_use_no_cpu(void)
{
	init(2);
	int p[2];
	mkpipe(p);
	kr_mp *m[100];
	for (int i = 0; i < 100; i++)
		KT_EQ(kr_mp_create(&m[i], &small, park_on_pipe, (void *)(intptr_t)p[0]), 0);
	KT_CHECK(kt_vps_idle(2, all_on_pipe, 300));
	char ones[100];
	memset(ones, 1, sizeof ones);
	KT_EQ(write(p[1], ones, 100), 100);
	for (int i = 0; i < 100; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

static int finished[3], nfinished;

static void *plain_blocking_read(void *a)
{
	int fd = (int)(intptr_t)a;
	char c = 0;
	KT_EQ(kr_blocking_enter(), 0);
	KT_EQ(kr_vp_status(kr_vp_self()), KR_VP_BLOCKED);
	ssize_t n = read(fd, &c, 1); /* the writer waits for the others */
	KT_EQ(kr_blocking_leave(), 0);
	KT_EQ(n, 1);
	finished[__atomic_fetch_add(&nfinished, 1, __ATOMIC_RELAXED)] = 0;
	return NULL;
}

static void *short_worker(void *a)
{
	for (int i = 0; i < 200; i++)
		kr_mp_yield();
	KT_EQ(kr_mp_sleep_for(10 * MS), 0);
	finished[__atomic_fetch_add(&nfinished, 1, __ATOMIC_RELAXED)] = (int)(intptr_t)a;
	return NULL;
}

/* Writes once both short workers have finished: they can only if the
 * blocked VP's work went to another VP meanwhile. */
static void *late_writer(void *a)
{
	KT_WAIT(__atomic_load_n(&nfinished, __ATOMIC_ACQUIRE) == 2, kt_nap_us(1000));
	KT_EQ(write((int)(intptr_t)a, "w", 1), 1);
	return NULL;
}

static void blocking_call_hands_the_vp_to_the_others(void)
{
	init(1);
	KT_EQ(kr_vp_count(), 1);
	int p[2];
	mkpipe(p);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, late_writer, (void *)(intptr_t)p[1]), 0);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, plain_blocking_read, (void *)(intptr_t)p[0]), 0);
	KT_EQ(kr_mp_create(&m[1], &small, short_worker, (void *)1), 0);
	KT_EQ(kr_mp_create(&m[2], &small, short_worker, (void *)2), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  order %d %d %d after %.0f ms, %u VPs\n", finished[0], finished[1],
		finished[2], (kr_now() - t0) / 1e6, kr_vp_count());
	KT_EQ(nfinished, 3);
	KT_CHECK(finished[0] != 0 && finished[1] != 0); /* the others first */
	KT_EQ(finished[2], 0);
	KT_EQ(kr_vp_count(), 2); /* the spare VP that took over */
	kr_close(p[0]);
	kr_close(p[1]);
	KT_EQ(kr_fini(), 0);
}

/* A read in flight when its VP enters a blocking call must still complete
 * while the call blocks: here the blocking call waits for what the read's
 * microprocess does next.  B's poll gives up after KT_WAIT_S: a read stuck
 * with the blocked VP would show as B timing out. */
static int moved_pipe[2], unblock_pipe[2];
static uint32_t in_read, b_blocks;

static void *reader_then_unblock(void *a)
{
	(void)a;
	char c = 0;
	size_t n;
	__atomic_store_n(&in_read, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(moved_pipe[0], &c, 1, &n, in_ms(100000)), 0); /* past B's poll */
	KT_EQ(n, 1);
	KT_EQ(c, 'm');
	KT_EQ(write(unblock_pipe[1], "u", 1), 1);
	return NULL;
}

static void *blocks_until_unblocked(void *a)
{
	(void)a;
	/* one VP: the reader has run, so its read is in flight */
	KT_WAIT(__atomic_load_n(&in_read, __ATOMIC_ACQUIRE), kr_mp_yield());
	KT_EQ(kr_blocking_enter(), 0);
	__atomic_store_n(&b_blocks, 1, __ATOMIC_RELEASE);
	struct pollfd pf = {.fd = unblock_pipe[0], .events = POLLIN};
	int n = poll(&pf, 1, KT_WAIT_S * 1000);
	KT_EQ(kr_blocking_leave(), 0);
	KT_EQ(n, 1);
	return NULL;
}

static void *late_kr_writer(void *a)
{
	(void)a;
	KT_WAIT(__atomic_load_n(&b_blocks, __ATOMIC_ACQUIRE), kr_mp_sleep_for(MS));
	size_t n;
	KT_EQ(kr_write(moved_pipe[1], "m", 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	return NULL;
}

static void io_in_flight_completes_while_its_vp_blocks(void)
{
	init(1);
	mkpipe(moved_pipe);
	mkpipe(unblock_pipe);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, reader_then_unblock, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, blocks_until_unblocked, NULL), 0);
	KT_EQ(kr_mp_create(&m[2], &small, late_kr_writer, NULL), 0);
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	fprintf(stderr, "  unblocked after %.0f ms\n", (kr_now() - t0) / 1e6);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(moved_pipe[i]), 0);
		KT_EQ(kr_close(unblock_pipe[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* A spare VP that retires may have been the one waiting in a shared event
 * source (epoll) while the other VPs went to sleep: someone must take its
 * place.  One VP.  B's blocking call starts a spare, which P runs on; the
 * spare, idle, waits in the source, and VP 0, idle after B, sleeps.  An
 * edge on a pipe nobody waits on ends the spare's wait with nothing to do,
 * so it retires.  Then R's data comes: R must get it long before its 30 s
 * deadline.  (With io_uring each VP waits on its own ring: the edge and
 * the data come once B has left its blocking call.) */
static int spare_q[2], spare_a[2];
static kr_vp *vp_zero, *spare_vp;
static uint32_t b_in, b_left;
static int shared_source;

static void *read_a(void *a)
{
	(void)a;
	char c = 0;
	uint64_t deadline = in_ms(30000);
	size_t n;
	KT_EQ(kr_read(spare_a[0], &c, 1, &n, deadline), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'a');
	/* unwatched, the data is found only when the deadline wakes VP 0 */
	KT_CHECK(kr_now() < deadline);
	return NULL;
}

static void *note_spare(void *a)
{
	__atomic_store_n(&spare_vp, kr_vp_self(), __ATOMIC_RELEASE);
	return a;
}

/* blocks until P has run on the spare VP its blocking call started and
 * the spare, the only VP not blocked, waits in the event source: were VP 0
 * back before that, either of the two might be the one to wait there */
static void *block_a_while(void *a)
{
	(void)a;
	KT_EQ(kr_blocking_enter(), 0);
	__atomic_store_n(&b_in, 1, __ATOMIC_RELEASE);
	KT_WAIT(__atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE) &&
			kr_vp_status(__atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE)) ==
				KR_VP_SLEEPING,
		kt_nap_us(1000));
	KT_EQ(kr_blocking_leave(), 0);
	__atomic_store_n(&b_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *edge_then_data(void *a)
{
	(void)a;
	KT_WAIT(__atomic_load_n(&b_left, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	kr_vp *spare = __atomic_load_n(&spare_vp, __ATOMIC_ACQUIRE);
	KT_CHECK(spare != vp_zero);
	/* the spare waits in epoll and VP 0 sleeps on L0 (or a wakeup ended
	 * the spare's wait already, and it retired) */
	if (shared_source)
		KT_WAIT((kr_vp_status(vp_zero) == KR_VP_SLEEPING &&
			 kr_vp_status(spare) == KR_VP_SLEEPING) ||
				kr_vp_status(spare) == KR_VP_SUSPENDED,
			kt_nap_us(1000));
	KT_EQ(write(spare_q[1], "q", 1), 1); /* the spare's wait ends, idle */
	if (shared_source)
		KT_WAIT(kr_vp_status(spare) == KR_VP_SUSPENDED, kt_nap_us(1000));
	KT_EQ(write(spare_a[1], "a", 1), 1);
	return NULL;
}

static void io_is_watched_after_a_spare_retires(void)
{
	init(1);
	mkpipe(spare_q);
	mkpipe(spare_a);
	char c;
	size_t n;
	KT_EQ(write(spare_q[1], "0", 1), 1);
	KT_EQ(kr_read(spare_q[0], &c, 1, &n, KR_FOREVER), 0); /* karui knows the fd */
	KT_EQ(n, 1);
	vp_zero = kr_vp_self();
	shared_source = strcmp(kr_io_backend(), "epoll") == 0;
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, edge_then_data, NULL), 0);
	kr_mp *m[3];
	uint64_t t0 = kr_now();
	KT_EQ(kr_mp_create(&m[0], &small, read_a, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, block_a_while, NULL), 0);
	while (!__atomic_load_n(&b_in, __ATOMIC_ACQUIRE)) /* then main is on the spare */
		KT_EQ(kr_mp_yield(), 0);
	KT_EQ(kr_mp_create(&m[2], &small, note_spare, NULL), 0); /* VP 0 is blocked */
	for (int i = 0; i < 3; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  data read after %.0f ms, %u VPs\n", (kr_now() - t0) / 1e6, kr_vp_count());
	KT_EQ(kr_vp_count(), 2); /* the spare was there */
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(spare_q[i]), 0);
		KT_EQ(kr_close(spare_a[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* With epoll, the VP that waited hands the wait on when it finds work.
 * Two VPs, one waiting in epoll, the other asleep.  S's data comes first:
 * S then keeps its VP with no scheduling point until R is served (or for
 * KT_WAIT_S).  R's data comes once S runs, and the other VP must see it
 * while S still does.  (With io_uring, R's request may sit in the ring of
 * S's VP, whose completions wait for that VP's next scheduling point:
 * docs/limits.md.) */
static int handoff_s[2], handoff_r[2];
static uint64_t s_ended, r_served;
static uint32_t s_in, r_in, s_runs;
static struct kt_vpth handoff_vps;

static void *read_then_spin(void *a)
{
	(void)a;
	char c;
	size_t n;
	__atomic_store_n(&s_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(handoff_s[0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	__atomic_store_n(&s_runs, 1, __ATOMIC_RELEASE);
	uint64_t end = kt_mono_ns() + KT_WAIT_S * 1000000000ull;
	while (!__atomic_load_n(&r_served, __ATOMIC_ACQUIRE) && kt_mono_ns() < end)
		;
	s_ended = kr_now();
	return NULL;
}

static void *read_r(void *a)
{
	(void)a;
	char c;
	size_t n;
	__atomic_store_n(&r_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(handoff_r[0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	__atomic_store_n(&r_served, kr_now(), __ATOMIC_RELEASE);
	return NULL;
}

static void *s_then_r(void *a)
{
	(void)a;
	/* both wait on their pipes: one VP in epoll, the other asleep */
	KT_WAIT(__atomic_load_n(&s_in, __ATOMIC_ACQUIRE) && __atomic_load_n(&r_in, __ATOMIC_ACQUIRE) &&
		kt_vps_sleep(&handoff_vps), kt_nap_us(1000));
	KT_EQ(write(handoff_s[1], "s", 1), 1);
	KT_WAIT(__atomic_load_n(&s_runs, __ATOMIC_ACQUIRE), kt_nap_us(1000));
	KT_EQ(write(handoff_r[1], "r", 1), 1);
	return NULL;
}

static void epoll_wait_passes_on_when_its_waiter_runs_work(void)
{
	init_on(2, "epoll", "the back end is io_uring: completions go to the requesting VP's ring");
	kt_vp_threads(&handoff_vps, 2);
	mkpipe(handoff_s);
	mkpipe(handoff_r);
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, s_then_r, NULL), 0);
	kr_mp *m[2];
	KT_EQ(kr_mp_create(&m[0], &small, read_then_spin, NULL), 0);
	KT_EQ(kr_mp_create(&m[1], &small, read_r, NULL), 0);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "  R served %.0f ms before S ended\n", ((double)s_ended - (double)r_served) / 1e6);
	KT_CHECK(r_served && r_served < s_ended);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(handoff_s[i]), 0);
		KT_EQ(kr_close(handoff_r[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* ---------------- completions kept on their VP ---------------- */

/* Three readers wait in VP 0's ring while a holder keeps VP 1 busy; then
 * VP 1 goes to sleep, the three reads complete in one poll of VP 0, and
 * VP 0 keeps them (sched_default.c, "Completions stay").  Each reader that
 * runs on VP 0 computes for 200 ms without a scheduling point.  At VP 0's
 * first scheduling point after that (this microprocess joins the next
 * reader), two are still queued well past a watch: VP 0 wakes VP 1, which
 * takes the third (or, if VP 0 is slow to go on, the second as well).
 * Kept for good, all three would run on VP 0, one after the other;
 * shared at once, VP 1 would take some while the first runs. */
enum { KEPT_READERS = 3, KEPT_RUN_MS = 200 };
static int kept_pipe[KEPT_READERS][2];
static unsigned kept_vp0, kept_in, kept_ran_elsewhere;
static uint64_t kept_first_end = UINT64_MAX, kept_elsewhere_at = UINT64_MAX;
static int kept_hold = 1, kept_holder_done;
static kr_vp *kept_holder_vp;

static void kept_min(uint64_t *p, uint64_t v)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (v < o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static void *kept_holder(void *a)
{
	(void)a;
	__atomic_store_n(&kept_holder_vp, kr_vp_self(), __ATOMIC_RELEASE);
	while (__atomic_load_n(&kept_hold, __ATOMIC_ACQUIRE))
		;
	/* park, not end: an ended one's stack in VP 1's cache would give
	 * VP 1 a deadline to wake at (its trim) */
	while (!__atomic_load_n(&kept_holder_done, __ATOMIC_ACQUIRE))
		kr_mp_park();
	return NULL;
}

static void *kept_reader(void *a)
{
	int i = (int)(intptr_t)a;
	char c;
	size_t n;
	__atomic_fetch_add(&kept_in, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_read(kept_pipe[i][0], &c, 1, &n, in_ms(100000)), 0);
	KT_EQ(n, 1);
	uint64_t now = kt_mono_ns();
	if (kr_vp_id(kr_vp_self()) != kept_vp0) {
		__atomic_fetch_add(&kept_ran_elsewhere, 1, __ATOMIC_RELEASE);
		kept_min(&kept_elsewhere_at, now);
		return NULL;
	}
	uint64_t end = now + KEPT_RUN_MS * 1000000ull;
	while ((now = kt_mono_ns()) < end)
		;
	kept_min(&kept_first_end, now);
	return NULL;
}

static void kept_completions_are_shared_once_one_has_run_long(void)
{
	init_on(2, "io_uring", "the back end is epoll: readiness is shared at once");
	kept_vp0 = kr_vp_id(kr_vp_self());
	kr_mp *h, *r[KEPT_READERS];
	/* the holder lands on VP 1: VP 0 runs this microprocess meanwhile */
	KT_EQ(kr_mp_create(&h, &small, kept_holder, NULL), 0);
	KT_WAIT(__atomic_load_n(&kept_holder_vp, __ATOMIC_ACQUIRE), (void)0);
	KT_CHECK(kr_vp_id(kept_holder_vp) != kept_vp0);
	for (int i = 0; i < KEPT_READERS; i++) {
		mkpipe(kept_pipe[i]);
		KT_EQ(kr_mp_create(&r[i], &small, kept_reader, (void *)(intptr_t)i), 0);
	}
	KT_WAIT(__atomic_load_n(&kept_in, __ATOMIC_ACQUIRE) == KEPT_READERS, kr_mp_yield());
	for (int i = 0; i < 16; i++) /* two timers' turns: the reads are in VP 0's ring */
		kr_mp_yield();
	__atomic_store_n(&kept_hold, 0, __ATOMIC_RELEASE);
	KT_WAIT(kr_vp_status(kept_holder_vp) == KR_VP_SLEEPING, (void)0);
	for (int i = 0; i < KEPT_READERS; i++)
		KT_EQ(write(kept_pipe[i][1], "k", 1), 1);
	for (int i = 0; i < KEPT_READERS; i++)
		KT_EQ(kr_mp_join(r[i], NULL), 0);
	KT_CHECK(__atomic_load_n(&kept_ran_elsewhere, __ATOMIC_ACQUIRE) >= 1);
	KT_CHECK(kept_elsewhere_at > kept_first_end);
	__atomic_store_n(&kept_holder_done, 1, __ATOMIC_RELEASE);
	KT_EQ(kr_mp_unpark(h), 0);
	KT_EQ(kr_mp_join(h, NULL), 0);
	for (int i = 0; i < KEPT_READERS; i++) {
		KT_EQ(kr_close(kept_pipe[i][0]), 0);
		KT_EQ(kr_close(kept_pipe[i][1]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* ---------------- fork ---------------- */

static sigset_t app_mask;       /* the program's own, set before kr_init */
static int fork_pipe[2], quiet_pipe[2];
static pid_t forked;

/* One byte there and back through fork_pipe, on the calling VP. */
static void fork_pipe_round_trip(void)
{
	char c = 0;
	size_t n;
	KT_EQ(kr_write(fork_pipe[1], "r", 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	KT_EQ(kr_read(fork_pipe[0], &c, 1, &n, KR_FOREVER), 0);
	KT_EQ(n, 1);
	KT_EQ(c, 'r');
}

/* The child: no VP, no microprocess, the program's signal mask (not a
 * VP's, nor with karui's SIGPIPE), I/O refused at once (a read of a pipe
 * nobody writes), karui not to be started again; then an exec.  A failed
 * check exits with 1. */
static void child_checks_then_execs(void)
{
	sigset_t m;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a child left by a failure dies with the test */
	char c;
	size_t n = 9;
	KT_EQ(kr_read(quiet_pipe[0], &c, 1, &n, KR_FOREVER), EPERM);
	KT_EQ(n, 0);
	KT_EQ(pthread_sigmask(SIG_SETMASK, NULL, &m), 0);
	for (int sig = 1; sig < NSIG; sig++)
		KT_EQ(sigismember(&m, sig), sigismember(&app_mask, sig));
	KT_CHECK(kr_vp_self() == NULL && kr_mp_self() == NULL);
	KT_EQ(kr_vp_count(), 0);
	KT_EQ(kr_write(quiet_pipe[1], "c", 1, &n, KR_FOREVER), EPERM);
	KT_EQ(kr_mp_yield(), EPERM);
	KT_EQ(kr_init(NULL), EBUSY);
	KT_CHECK(kr_io_backend() == NULL);
	execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
	_exit(1);
}

/* On the chosen VP: I/O (with io_uring, through this VP's ring), a fork,
 * and more I/O while the child runs. */
static void io_fork_io(void)
{
	fork_pipe_round_trip();
	forked = fork();
	KT_CHECK(forked >= 0);
	if (forked == 0)
		child_checks_then_execs();
	fork_pipe_round_trip();
}

/* Wait for child pid to end, parking only the caller: kr_poll on a pidfd
 * (a blocking section would start a spare VP, which on_vp cannot
 * hold).  Its wait status. */
static int wait_child(pid_t pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), st = 0;
	if (pfd < 0)
		KT_SKIP("no pidfd_open here");
	short rev;
	KT_EQ(kr_poll(pfd, POLLIN, &rev, KR_FOREVER), 0);
	KT_CHECK(rev & POLLIN);
	KT_EQ(waitpid(pid, &st, WNOHANG), pid);
	KT_EQ(kr_close(pfd), 0);
	return st;
}

/* The program blocks SIGUSR2, not SIGUSR1 nor SIGPIPE.  The parent waits
 * for the child with karui's I/O; its I/O works on both VPs afterwards,
 * and karui stops. */
static void fork_on_vp(unsigned id)
{
	sigemptyset(&app_mask);
	sigaddset(&app_mask, SIGUSR2);
	KT_EQ(pthread_sigmask(SIG_SETMASK, &app_mask, NULL), 0);
	init(2);
	mkpipe(fork_pipe);
	mkpipe(quiet_pipe);
	on_vp(id, io_fork_io);
	int st = wait_child(forked);
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 7);
	on_vp(0, fork_pipe_round_trip);
	on_vp(1, fork_pipe_round_trip);
	for (int i = 0; i < 2; i++) {
		KT_EQ(kr_close(fork_pipe[i]), 0);
		KT_EQ(kr_close(quiet_pipe[i]), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static void child_of_fork_on_vp1_gets_eperm_and_the_program_mask_and_execs(void)
{
	fork_on_vp(1);
}

static void child_of_fork_on_vp0_gets_eperm_and_the_program_mask_and_execs(void)
{
	fork_on_vp(0);
}

static int reader_in, reader_err;
static char reader_got;

static void *read_fork_pipe(void *a)
{
	size_t n;
	__atomic_store_n(&reader_in, 1, __ATOMIC_RELEASE);
	/* the deadline only turns a lost read into a failure */
	reader_err = kr_read(fork_pipe[0], &reader_got, 1, &n, in_ms(20000));
	KT_EQ(n, reader_err ? 0 : 1);
	return a;
}

/* The child closes (and tries to cancel) the fd that the parent's read
 * waits on: its own copy closes; the parent's registration (epoll) and
 * request (io_uring) stay, and its read takes the byte written later. */
static void close_in_a_forked_child_spares_the_parents_read(void)
{
	init(1);
	mkpipe(fork_pipe);
	kr_mp *r;
	KT_EQ(kr_mp_create(&r, &small, read_fork_pipe, NULL), 0);
	while (!__atomic_load_n(&reader_in, __ATOMIC_ACQUIRE))
		KT_EQ(kr_mp_yield(), 0); /* one VP: the reader now waits in kr_read */
	pid_t pid = fork();
	KT_CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int c = kr_io_cancel(fork_pipe[0]);
		int e = kr_close(fork_pipe[0]);
		_exit(c == EPERM && e == 0 && kr_close(fork_pipe[0]) == EBADF ? 0 : 1);
	}
	int st = wait_child(pid);
	size_t n;
	KT_EQ(kr_write(fork_pipe[1], "y", 1, &n, KR_FOREVER), 0);
	KT_EQ(kr_mp_join(r, NULL), 0);
	KT_EQ(reader_err, 0);
	KT_EQ(reader_got, 'y');
	KT_CHECK(WIFEXITED(st));
	KT_EQ(WEXITSTATUS(st), 0); /* kr_io_cancel: EPERM; kr_close: 0, then EBADF */
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_close(fork_pipe[i]), 0);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	if (getenv("KARUI_TEST_DENY_URING")) {
		int err = deny_io_uring();
		if (err) {
			fprintf(stderr, "  skipped: no seccomp filter here: %s\n", strerror(err));
			return KT_SKIP_CODE;
		}
	}
	KT_RUN(backend_is_io_uring_unless_forced_or_unavailable);
	KT_RUN(pipe_round_trips_between_microprocesses_on_two_vps);
	KT_RUN(read_parks_only_the_calling_microprocess);
	KT_RUN(readv_and_writev_move_scattered_bytes);
	KT_RUN(regular_files_are_read_and_written);
	KT_RUN(file_reads_match_read_cached_or_not);
	KT_RUN(timed_read_times_out_and_takes_nothing);
	KT_RUN(cancel_ends_blocked_reads_and_loses_nothing);
	KT_RUN(close_ends_reads_on_every_vp_and_spares_the_next_fd);
	KT_RUN(bad_input_is_refused);
	KT_RUN(write_to_a_broken_pipe_returns_epipe_on_every_vp);
	KT_RUN(io_works_again_once_fds_are_free);
	KT_RUN(tcp_echo_serves_many_connections_on_two_vps);
	KT_RUN(connect_to_a_closed_port_is_refused);
	KT_RUN(accept_times_out_when_nobody_connects);
	KT_RUN(cancel_of_a_microprocess_ends_only_its_io_wait);
	KT_RUN(reads_under_cancels_and_deadlines_lose_nothing);
	KT_RUN(microprocesses_waiting_on_io_use_no_cpu);
	KT_RUN(blocking_call_hands_the_vp_to_the_others);
	KT_RUN(io_in_flight_completes_while_its_vp_blocks);
	KT_RUN(io_is_watched_after_a_spare_retires);
	KT_RUN(epoll_wait_passes_on_when_its_waiter_runs_work);
	KT_RUN(kept_completions_are_shared_once_one_has_run_long);
	KT_RUN(child_of_fork_on_vp1_gets_eperm_and_the_program_mask_and_execs);
	KT_RUN(child_of_fork_on_vp0_gets_eperm_and_the_program_mask_and_execs);
	KT_RUN(close_in_a_forked_child_spares_the_parents_read);
	return kt_finish();
}
