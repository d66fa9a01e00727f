/*
 * karui-bench: io.files — many small files read from the page cache, as a
 * word count over a source tree reads them (issue 26).
 *
 * N files (2,000; 1,000 with --quick; --n N) of 64 B to 64 KiB, spread
 * about evenly on a log scale, are written to a fresh directory under
 * $TMPDIR (else /tmp) and synced, so that no writeback runs during the
 * timing.  A pass opens each file (openat on the directory), reads it to
 * its end in reads of 16 KiB, adds up the counts and closes it; the metric
 * is ms per pass.  It does nothing else with the bytes (a word count's own
 * loop would take most of the time), so that what is timed is the calls.
 * Systems:
 *
 *   karui        kr_read_until and kr_close on io_uring (skipped where karui
 *                cannot have it)
 *   karui-epoll  the same with KARUI_IO=epoll
 *   read         read(2) and close(2) on the calling thread, no karui
 *
 * karui runs on one VP, the pass in kr_init's microprocess; karui's start
 * and stop are outside the timing.  The systems alternate pass by pass,
 * after an untimed pass each (the first of which reads every file once
 * more: all are in the page cache from then on), so that a slow phase of
 * the shared machine falls on all of them alike.  Every pass must read
 * the bytes that were written; a wrong count fails the row.  The directory and its files are removed at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exp.h"
#include "karui.h"

#define XF "io.files"
enum { XF_FILES = 2000, XF_FILES_QUICK = 1000, XF_READ_LEN = 16384, XF_SEED = 26 };

enum { XF_KARUI, XF_EPOLL, XF_READ, XF_NSYS };
static const char *const XF_SYS[XF_NSYS] = {"karui", "karui-epoll", "read"};

static char xf_buf[65536]; /* a file's bytes (64 KiB at most), then a read's */

static uint64_t xf_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Remove the files f0 .. f(n-1) of dfd and the directory. */
static void xf_remove(const char *dir, int dfd, long n)
{
	char name[32];
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%ld", i);
		unlinkat(dfd, name, 0);
	}
	close(dfd);
	rmdir(dir);
}

/* Write n files into dfd: 0 and their bytes, or an errno code (*made:
 * how many files exist). */
static int xf_make(int dfd, long n, long *bytes, long *made)
{
	uint64_t s = XF_SEED;
	char name[32];
	for (size_t i = 0; i < sizeof xf_buf; i++)
		xf_buf[i] = (char)('a' + i % 26);
	*bytes = 0;
	for (*made = 0; *made < n; ++*made) {
		size_t base = (size_t)64 << (xf_rand(&s) % 10); /* 64 B .. 32 KiB */
		size_t len = base + xf_rand(&s) % base;
		*bytes += (long)len;
		snprintf(name, sizeof name, "f%ld", *made);
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return errno;
		ssize_t wr = write(fd, xf_buf, len);
		int err = wr < 0 ? errno : (size_t)wr != len ? EIO : 0;
		close(fd);
		if (err) {
			++*made;
			return err;
		}
	}
	return syncfs(dfd) ? errno : 0;
}

/* One pass over the n files of dfd, with karui's calls or the system's:
 * 0 and the bytes read in *bytes, or an errno code. */
static int xf_pass(int dfd, long n, int karui, long *bytes)
{
	char name[32];
	long b = 0;
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%ld", i);
		int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		int err = 0;
		for (;;) {
			size_t got;
			if (karui) {
				err = kr_read(fd, xf_buf, XF_READ_LEN, &got);
			} else {
				ssize_t r = read(fd, xf_buf, XF_READ_LEN);
				err = r < 0 ? errno : 0;
				got = r < 0 ? 0 : (size_t)r;
			}
			if (err || !got)
				break;
			b += (long)got;
		}
		int cerr = karui ? kr_close(fd) : close(fd) ? errno : 0;
		if (err || cerr)
			return err ? err : cerr;
	}
	*bytes = b;
	return 0;
}

/* One pass of system `sys`, timed: 0 and ms in *ms, -1 (not the `bytes`
 * written), -2 (karui is not on the system's back end), or an errno code. */
static int xf_once(int dfd, long n, long bytes, int sys, double *ms)
{
	int err = 0, fin = 0;
	long got = 0;
	if (sys == XF_READ) {
		double t0 = kb_now_ns();
		err = xf_pass(dfd, n, 0, &got);
		*ms = (kb_now_ns() - t0) / 1e6;
	} else {
		if (sys == XF_EPOLL)
			setenv("KARUI_IO", "epoll", 1);
		else
			unsetenv("KARUI_IO");
		kr_config cfg = {.vps = 1};
		if ((err = kr_init(&cfg)) != 0)
			return err;
		const char *b = kr_io_backend(); /* started outside the timing */
		if (!b || strcmp(b, sys == XF_EPOLL ? "epoll" : "io_uring") != 0) {
			err = -2;
		} else {
			double t0 = kb_now_ns();
			err = xf_pass(dfd, n, 1, &got);
			*ms = (kb_now_ns() - t0) / 1e6;
		}
		fin = kr_fini();
	}
	if (!err && got != bytes)
		err = -1;
	return err ? err : fin;
}

void kb_io_files(const kb_ctx *c)
{
	long n = c->n > 0 ? c->n : c->quick ? XF_FILES_QUICK : XF_FILES;
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/karui-bench-files-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int want[XF_NSYS], dfd = -1, err = 0;
	for (int s = 0; s < XF_NSYS; s++)
		want[s] = kb_want(c, XF, XF_SYS[s]);
	if (!mkdtemp(dir)) {
		err = errno;
	} else if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		err = errno;
		rmdir(dir);
	}
	long bytes = 0, made = 0;
	if (!err && (err = xf_make(dfd, n, &bytes, &made)) != 0)
		xf_remove(dir, dfd, made);
	if (err) {
		for (int s = 0; s < XF_NSYS; s++)
			if (want[s])
				kb_row_none(XF, XF_SYS[s], "failed", strerror(err));
		return;
	}
	fprintf(stderr, "karui-bench: " XF ": %ld files, %.1f MB in %s\n", n, bytes / 1e6, dir);
	char *io = getenv("KARUI_IO") ? strdup(getenv("KARUI_IO")) : NULL;
	double ms[XF_NSYS][16];
	int why[XF_NSYS] = {0};
	for (int r = -1; r < c->reps; r++) /* r = -1: the untimed pass */
		for (int s = 0; s < XF_NSYS; s++)
			if (want[s] && !why[s])
				why[s] = xf_once(dfd, n, bytes, s, &ms[s][r < 0 ? 0 : r]);
	if (io)
		setenv("KARUI_IO", io, 1);
	else
		unsetenv("KARUI_IO");
	free(io);
	xf_remove(dir, dfd, n);
	double karui = 0;
	for (int s = 0; s < XF_NSYS; s++) {
		if (!want[s])
			continue;
		if (why[s] == -2)
			kb_row_none(XF, XF_SYS[s], "skipped", s == XF_KARUI
				    ? "karui runs on epoll here" : "KARUI_IO=epoll not taken");
		else if (why[s])
			kb_row_none(XF, XF_SYS[s], "failed", why[s] < 0 ? "a wrong byte count"
				    : strerror(why[s]));
		else if (s == XF_KARUI)
			karui = kb_row(c, XF, XF_SYS[s], "pass", "ms", ms[s], c->reps, 0, -1);
		else
			kb_row(c, XF, XF_SYS[s], "pass", "ms", ms[s], c->reps, karui, -1);
	}
}
