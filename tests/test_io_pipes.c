/* L3 io: the back end karui chose, and the calls on pipes and regular
 * files (src/io/io.c, uring.c, epoll.c): scattered I/O, reads that park only
 * their caller, broken pipes on every VP, and running out of fds.
 * Run on both back ends (kt_io.h). */
#define _GNU_SOURCE
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
#include "kt_io.h"

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
		KT_EQ(kr_read(p->in, b, sizeof b, &n), 0);
		KT_EQ(n, 8);
		KT_EQ(kr_write(p->out, b, 8, &n), 0);
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
		KT_EQ(kr_write(a[1], &v, 8, &n), 0);
		KT_EQ(n, 8);
		KT_EQ(kr_read(b[0], &r, 8, &n), 0);
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
	KT_EQ(kr_write(*fd, "x", 1, &n), 0);
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
	KT_EQ(kr_read(p[0], &c, 1, &n), 0); /* on the one VP */
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
	KT_EQ(kr_writev(p[1], out, 3, &n), 0);
	KT_EQ(n, 20);
	char x[7] = {0}, y[14] = {0};
	struct iovec in[2] = {{x, 6}, {y, 14}};
	KT_EQ(kr_readv(p[0], in, 2, &n), 0);
	KT_EQ(n, 20);
	KT_CHECK(memcmp(x, "karui ", 6) == 0 && memcmp(y, "microprocesses", 14) == 0);
	KT_EQ(kr_readv(p[0], in, -1, &n), EINVAL);
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
	KT_EQ(kr_write_all(fd, buf, sizeof buf, &n), 0);
	KT_EQ(n, sizeof buf);
	KT_EQ(lseek(fd, 0, SEEK_SET), 0);
	while (got < sizeof back) {
		KT_EQ(kr_read(fd, back + got, sizeof back - got, &n), 0);
		KT_CHECK(n > 0);
		got += n;
	}
	n = 1;
	KT_EQ(kr_read(fd, back, 1, &n), 0); /* end of file */
	KT_EQ(n, 0);
	KT_CHECK(memcmp(buf, back, sizeof buf) == 0);
	kr_close(fd);
	KT_EQ(kr_fini(), 0);
}

enum { FILE_LEN = 200003 }; /* not a whole number of pages */
static char file_bytes[FILE_LEN], file_back[FILE_LEN + 4096];

/* Read fd from its position to its end with kr_read_until in reads of `step`
 * (kr_readv_until in two halves when `vec`), into file_back: the bytes read. */
static size_t read_to_end(int fd, size_t step, int vec)
{
	size_t got = 0, n;
	do {
		size_t len = step < sizeof file_back - got ? step : sizeof file_back - got;
		if (vec) {
			struct iovec v[2] = {{file_back + got, len / 2},
					     {file_back + got + len / 2, len - len / 2}};
			KT_EQ(kr_readv(fd, v, 2, &n), 0);
		} else {
			KT_EQ(kr_read(fd, file_back + got, len, &n), 0);
		}
		got += n;
		KT_CHECK(got <= FILE_LEN);
	} while (n > 0 && got < FILE_LEN);
	n = 1;
	KT_EQ(kr_read(fd, file_back, step, &n), 0); /* end of file */
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
		KT_EQ(kr_read(fd, file_back, 4096, &n), 0);
		KT_EQ(n, want);
		KT_CHECK(memcmp(file_back, file_bytes + offs[i], want) == 0);
		KT_EQ(lseek(fd, 0, SEEK_CUR), offs[i] + (off_t)want);
	}
	size_t n = 1;
	KT_EQ(kr_read(fd, file_back, 0, &n), 0); /* nothing asked */
	KT_EQ(n, 0);
	KT_EQ(lseek(fd, FILE_LEN + 10, SEEK_SET), FILE_LEN + 10);
	n = 1;
	KT_EQ(kr_read(fd, file_back, 10, &n), 0); /* past the end */
	KT_EQ(n, 0);
	/* errors: a directory, a file open for writing only, a closed fd */
	int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	KT_CHECK(dir >= 0);
	n = 1;
	KT_EQ(kr_read(dir, file_back, 10, &n), EISDIR);
	KT_EQ(n, 0);
	KT_EQ(kr_close(dir), 0);
	int wo = open(path, O_WRONLY | O_CLOEXEC);
	KT_CHECK(wo >= 0);
	n = 1;
	KT_EQ(kr_read(wo, file_back, 10, &n), EBADF);
	KT_EQ(n, 0);
	KT_EQ(kr_close(wo), 0);
	n = 1;
	KT_EQ(kr_read(wo, file_back, 10, &n), EBADF);
	KT_EQ(n, 0);
	/* the file's number becomes a pipe's (kr_close forgets what it was),
	 * and the pipe's a file's */
	int num = fd;
	KT_EQ(kr_close(fd), 0);
	int p[2];
	mkpipe(p);
	p[0] = renumber(p[0], num);
	char c;
	KT_EQ(kr_read_until(p[0], &c, 1, &n, in_ms(20)), ETIMEDOUT); /* nothing there */
	KT_EQ(n, 0);
	KT_EQ(write(p[1], "k", 1), 1);
	KT_EQ(kr_read(p[0], &c, 1, &n), 0);
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
	KT_EQ(kr_write(p[1], "x", 1, &n), EPIPE);
	KT_EQ(n, 0);
	KT_EQ(kr_writev(p[1], &v, 1, &n), EPIPE);
	KT_EQ(kr_write(s[1], "x", 1, &n), EPIPE);
	KT_EQ(kr_writev(s[1], &v, 1, &n), EPIPE);
	KT_EQ(kr_send(s[1], "x", 1, 0, &n), EPIPE);
	KT_EQ(kr_close(p[1]), 0);
	KT_EQ(kr_close(s[1]), 0);
}

/* kr_write_until and kr_writev_until to a pipe and to a socket whose other end is
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
	int err = kr_read(nofd_pipe[0], &c, 1, &n);
	if (strcmp(kr_io_backend(), "io_uring") == 0) {
		KT_EQ(err, EMFILE);
		KT_EQ(kr_read(nofd_pipe[0], &c, 1, &n), EMFILE); /* still none */
	} else {
		KT_EQ(err, 0); /* epoll needs no fd per VP */
		KT_EQ(c, 'a');
	}
	while (nfill)
		free_one_fd();
	KT_EQ(kr_read(nofd_pipe[0], &c, 1, &n), 0);
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
	while ((err = kr_write(nofd_pipe[1], "ab", 2, &n)) == EMFILE && tries++ < 4)
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

int main(int argc, char **argv)
{
	io_args(argc, argv);
	KT_RUN(backend_is_io_uring_unless_forced_or_unavailable);
	KT_RUN(pipe_round_trips_between_microprocesses_on_two_vps);
	KT_RUN(read_parks_only_the_calling_microprocess);
	KT_RUN(readv_and_writev_move_scattered_bytes);
	KT_RUN(regular_files_are_read_and_written);
	KT_RUN(file_reads_match_read_cached_or_not);
	KT_RUN(write_to_a_broken_pipe_returns_epipe_on_every_vp);
	KT_RUN(io_works_again_once_fds_are_free);
	return kt_finish();
}
