/*
 * karui image layer — what a μprocess reads of itself in /proc.
 *
 * /proc/self/maps (and /proc/thread-self/maps, /proc/PID/maps with the
 * μprocess's own pid) lists the μprocess's own mappings only: its program
 * and libraries, its heap, its stack (named [stack]), what it mapped; not
 * the host's, nor other μprocesses', nor kept images.  Programs read it to
 * find their stack (gnulib's c-stack in grep, glibc's
 * pthread_getattr_np) or their libraries; the host's list would show them
 * memory that is not theirs, and costs more the more μprocesses and kept
 * images the host holds (the kernel writes every line of it).
 *
 * The list is made at the open, into a memfd that becomes the μprocess's
 * fd: for each of its regions, the kernel's mappings inside it, asked one
 * at a time with PROCMAP_QUERY (Linux 6.11) and written in the kernel's
 * format; on older kernels, the lines of the host's list inside its
 * regions.  A mapping that reaches out of a region (the kernel merges
 * neighbours alike) is cut at the region's edge.  The text is a snapshot
 * of the open, as a read of the real file is of its moment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uproc.h"

#include "../arch/procmap.h"

struct text {
	char *s;
	size_t len, cap;
	int bad;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->bad)
		return;
	if (t->len + n > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8192;
		while (cap < t->len + n)
			cap *= 2;
		char *p = realloc(t->s, cap);
		if (!p) {
			t->bad = 1;
			return;
		}
		t->s = p;
		t->cap = cap;
	}
	memcpy(t->s + t->len, s, n);
	t->len += n;
}

/* One line as the kernel writes it (show_map_vma). */
static void line(struct text *t, uint64_t lo, uint64_t hi, const char perm[4], uint64_t off,
		 unsigned maj, unsigned min, uint64_t ino, const char *name)
{
	char b[128];
	int n = snprintf(b, sizeof b, "%08llx-%08llx %.4s %08llx %02x:%02x %llu ",
			 (unsigned long long)lo, (unsigned long long)hi, perm,
			 (unsigned long long)off, maj, min, (unsigned long long)ino);
	put(t, b, (size_t)n);
	if (name && *name) { /* padded to its column, then a space */
		static const char pad[] = "                                                  ";
		int w = 25 + (int)sizeof(void *) * 6 - 1;
		if (n < w)
			put(t, pad, (size_t)(w - n) < sizeof pad - 1 ? (size_t)(w - n) : sizeof pad - 1);
		put(t, " ", 1);
		put(t, name, strlen(name));
	}
	put(t, "\n", 1);
}

/* The host's /proc/self/maps, open once per process (a child of fork must
 * not ask its parent's). */
static int maps_fd(void)
{
	static int fd = -1;
	static pid_t owner;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	if (fd >= 0 && owner != getpid()) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		owner = getpid();
	}
	int r = fd;
	pthread_mutex_unlock(&lock);
	return r;
}

static const char *label(const struct kr_uproc *up, uint64_t lo, uint64_t hi, const char *name)
{
	return (!name || !*name) && lo < up->stk_hi && hi > up->stk_lo ? "[stack]" : name;
}

/* By PROCMAP_QUERY; 0, or -1 where the kernel has no such query. */
static int by_query(const struct kr_uproc *up, int fd, struct text *t)
{
	char name[4096];
	for (size_t i = 0; i < up->reg.n; i++) {
		uint64_t lo = up->reg.r[i].lo, hi = up->reg.r[i].hi;
		while (lo < hi) {
			struct procmap_query q = {.size = sizeof q,
						  .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
						  .query_addr = lo,
						  .vma_name_size = sizeof name,
						  .vma_name_addr = (uint64_t)(uintptr_t)name};
			if (ioctl(fd, PROCMAP_QUERY, &q)) {
				if (errno == ENOENT)
					break;
				return -1;
			}
			if (q.vma_start >= hi)
				break;
			uint64_t s = q.vma_start > lo ? q.vma_start : lo;
			uint64_t e = q.vma_end < hi ? q.vma_end : hi;
			char perm[4] = {q.vma_flags & PROCMAP_QUERY_VMA_READABLE ? 'r' : '-',
					q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? 'w' : '-',
					q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? 'x' : '-',
					q.vma_flags & PROCMAP_QUERY_VMA_SHARED ? 's' : 'p'};
			if (!q.vma_name_size)
				name[0] = 0;
			line(t, s, e, perm, q.inode ? q.vma_offset + (s - q.vma_start) : 0, q.dev_major,
			     q.dev_minor, q.inode, label(up, s, e, name));
			lo = q.vma_end;
		}
	}
	return 0;
}

/* The host's lines inside the regions (kernels before 6.11). */
static int by_lines(const struct kr_uproc *up, int fd, struct text *t)
{
	FILE *f = fdopen(dup(fd), "r");
	if (!f)
		return -1;
	rewind(f);
	char buf[4352];
	while (fgets(buf, sizeof buf, f)) {
		unsigned long long lo, hi, off, ino;
		unsigned maj, min;
		char perm[5];
		int at = 0;
		if (sscanf(buf, "%llx-%llx %4s %llx %x:%x %llu %n", &lo, &hi, perm, &off, &maj, &min,
			   &ino, &at) < 7)
			continue;
		char *name = buf + at;
		name[strcspn(name, "\n")] = 0;
		for (size_t i = 0; i < up->reg.n; i++) {
			uint64_t s = lo > up->reg.r[i].lo ? lo : up->reg.r[i].lo;
			uint64_t e = hi < up->reg.r[i].hi ? hi : up->reg.r[i].hi;
			if (s < e)
				line(t, s, e, perm, ino ? off + (s - lo) : 0, maj, min, ino,
				     label(up, s, e, name));
		}
	}
	fclose(f);
	return 0;
}

static int names_maps(const struct kr_uproc *up, const char *path)
{
	char self[64];
	if (!strcmp(path, "/proc/self/maps") || !strcmp(path, "/proc/thread-self/maps"))
		return 1;
	snprintf(self, sizeof self, "/proc/%d/maps", up->pid);
	if (!strcmp(path, self))
		return 1;
	snprintf(self, sizeof self, "/proc/%d/task/%d/maps", up->pid, up->pid);
	return !strcmp(path, self);
}

long kr__proc_open(struct kr_uproc *up, const char *path, long flags)
{
	if (!names_maps(up, path))
		return KR__NOT_PROC;
	if ((flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	int fd = maps_fd();
	if (fd < 0)
		return -errno;
	struct text t = {0};
	if (by_query(up, fd, &t)) {
		t.len = 0;
		if (by_lines(up, fd, &t))
			t.bad = 1;
	}
	int m = t.bad ? -1 : memfd_create("maps", MFD_CLOEXEC);
	long r = m < 0 ? -ENOMEM : -EIO;
	if (m >= 0 && write(m, t.s, t.len) == (ssize_t)t.len) {
		char self[64]; /* read-only, as the real file */
		snprintf(self, sizeof self, "/proc/self/fd/%d", m);
		int ro = open(self, O_RDONLY | O_CLOEXEC);
		r = ro >= 0 ? ro : -errno;
	}
	if (m >= 0)
		close(m);
	free(t.s);
	return r;
}
