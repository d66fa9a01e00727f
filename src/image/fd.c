/*
 * karui image layer — a μprocess's file descriptors, and pipes between
 * μprocesses.
 *
 * An fd of a μprocess names an open file (struct kr__ufile), which dup,
 * dup2 and fcntl(F_DUPFD) share, as the kernel shares an open file
 * description.  An open file is either one of karui's own host fds (opened
 * for the μprocess, or duplicated from the host's at spawn; always
 * O_CLOEXEC, so that nothing leaks into children of the host) or an end of
 * a kr_upipe.  Numbers are the μprocess's own: its 0, 1 and 2 can be
 * anything, and another μprocess's 0 is another file.  The table is the
 * μprocess's alone and touched only by its microprocess, so it needs no
 * lock; open files and pipes are shared and counted with atomics.
 *
 * A kr_upipe is a kr_stream (sync.h: one copy from the writer's buffer to
 * the reader's, parking only the microprocess that waits) with counts of
 * open read and write ends; the stream is closed for writing when the last
 * write end goes (readers see end of file) and for reading when the last
 * read end goes (writers see EPIPE).
 *
 * How a μprocess's reads, writes and waits on these files go (karui's I/O
 * for host fds that may block, the stream for pipes) is the system calls'
 * business: sys_fd.c, sys_net.c, sys_kfd.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uproc.h"


static void end_put(kr_upipe *p, int end)
{
	if (__atomic_sub_fetch(&p->ends[end], 1, __ATOMIC_ACQ_REL) == 0) {
		if (end == KR_UPIPE_WRITE)
			kr_stream_close_write(&p->s);
		else
			kr_stream_close_read(&p->s);
	}
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		kr_stream_destroy(&p->s);
		free(p);
	}
}

int kr_upipe_create(kr_upipe **out)
{
	if (!out)
		return EINVAL;
	kr_upipe *p = calloc(1, sizeof *p);
	if (!p)
		return ENOMEM;
	int e = kr_stream_init(&p->s, KR__PIPE_CAP);
	if (e) {
		free(p);
		return e;
	}
	p->ends[0] = p->ends[1] = 1;
	p->refs = 2;
	p->creator[0] = p->creator[1] = 1;
	*out = p;
	return 0;
}

int kr_upipe_close(kr_upipe *p, enum kr_upipe_end end)
{
	if (!p || (end != KR_UPIPE_READ && end != KR_UPIPE_WRITE))
		return EINVAL;
	if (!__atomic_exchange_n(&p->creator[end == KR_UPIPE_WRITE], 0, __ATOMIC_ACQ_REL))
		return EINVAL;
	end_put(p, end);
	return 0;
}

static int creator_holds(kr_upipe *p, int end)
{
	return p && __atomic_load_n(&p->creator[end], __ATOMIC_ACQUIRE) == 1;
}

int kr_upipe_read(kr_upipe *p, void *buf, size_t len, size_t *got)
{
	if (!creator_holds(p, KR_UPIPE_READ) || !got)
		return EINVAL;
	return kr_stream_read(&p->s, buf, len, got);
}

int kr_upipe_write(kr_upipe *p, const void *buf, size_t len, size_t *done)
{
	if (!creator_holds(p, KR_UPIPE_WRITE))
		return EINVAL;
	return kr_stream_write(&p->s, buf, len, done);
}

/* A read or write of a μprocess on a pipe end: a count or -errno. */
long kr__upipe_rw(kr_upipe *p, int write, void *buf, size_t len)
{
	size_t n = 0;
	int e = write ? kr_stream_write(&p->s, buf, len, &n) : kr_stream_read(&p->s, buf, len, &n);
	if (e && n == 0)
		return -e;
	return (long)n;
}

void kr__upipe_state(kr_upipe *p, size_t *buffered, size_t *room, unsigned *closed)
{
	kr_stream_poll(&p->s, buffered, room, closed);
}

void kr__upipe_end_put(kr_upipe *p, int end)
{
	end_put(p, end);
}

int kr__ufile_to_kernel(struct kr__ufile *f, int hostfd, kr_upipe **p, int *end)
{
	if (f->kind != UF_PIPE)
		return EINVAL;
	*p = f->pipe;
	*end = f->end;
	f->hostfd = hostfd;
	f->flags = f->end == KR_UPIPE_READ ? O_RDONLY : O_WRONLY;
	__atomic_store_n(&f->waits, 1, __ATOMIC_RELAXED);
	f->pipe = NULL;
	__atomic_store_n(&f->kind, UF_HOST, __ATOMIC_RELEASE);
	return 0;
}

/* ---------------- what a μprocess gets at spawn ---------------- */

int kr_uproc_attr_init(kr_uproc_attr *a)
{
	if (!a)
		return EINVAL;
	memset(a, 0, sizeof *a);
	a->umask = -1;
	return 0;
}

int kr_uproc_attr_fd_host(kr_uproc_attr *a, int fd, int hostfd)
{
	if (!a || fd < 0 || fd >= KR_UPROC_ATTR_FDS || hostfd < 0)
		return EINVAL;
	a->fd[fd] = (struct kr_uproc_fdspec){.kind = KR_UFD_HOST, .hostfd = hostfd};
	return 0;
}

int kr_uproc_attr_fd_pipe(kr_uproc_attr *a, int fd, kr_upipe *p, enum kr_upipe_end end)
{
	if (!a || fd < 0 || fd >= KR_UPROC_ATTR_FDS || !p ||
	    (end != KR_UPIPE_READ && end != KR_UPIPE_WRITE))
		return EINVAL;
	a->fd[fd] = (struct kr_uproc_fdspec){.kind = KR_UFD_PIPE, .pipe = p, .end = end};
	return 0;
}

int kr_uproc_attr_fd_close(kr_uproc_attr *a, int fd)
{
	if (!a || fd < 0 || fd >= KR_UPROC_ATTR_FDS)
		return EINVAL;
	a->fd[fd] = (struct kr_uproc_fdspec){.kind = KR_UFD_CLOSED};
	return 0;
}

/* kr_uproc_spawn's checks of its input, on every architecture. */
int kr__uproc_spawn_check(kr_uproc **out, const char *path, char *const argv[],
			  const kr_uproc_attr *attr)
{
	if (!out || !path || !argv || !argv[0])
		return EINVAL;
	if (attr && (attr->umask < -1 || attr->umask > 0777 || (attr->isolate & ~1)))
		return EINVAL;
	return kr_mp_self() ? 0 : EPERM;
}

/* ---------------- open files ---------------- */

struct kr__ufile *kr__ufile_host(int hostfd, int flags)
{
	struct kr__ufile *f = calloc(1, sizeof *f);
	if (!f) {
		close(hostfd);
		return NULL;
	}
	f->refs = 1;
	f->kind = UF_HOST;
	f->hostfd = hostfd;
	f->flags = flags;
	f->waits = -1; /* asked at its first read or write: most opened files are only mapped */
	return f;
}

int kr__ufile_waits(struct kr__ufile *f)
{
	int w = __atomic_load_n(&f->waits, __ATOMIC_RELAXED);
	if (w < 0) {
		struct stat st;
		w = fstat(f->hostfd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) &&
		    !S_ISDIR(st.st_mode);
		__atomic_store_n(&f->waits, w, __ATOMIC_RELAXED); /* the same for every asker */
	}
	return w;
}

struct kr__ufile *kr__ufile_pipe(kr_upipe *p, int end)
{
	if (!p || (end != KR_UPIPE_READ && end != KR_UPIPE_WRITE))
		return NULL;
	struct kr__ufile *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->ends[end], 1, __ATOMIC_RELAXED);
	f->refs = 1;
	f->kind = UF_PIPE;
	f->pipe = p;
	f->end = end;
	f->hostfd = -1;
	f->flags = end == KR_UPIPE_READ ? O_RDONLY : O_WRONLY;
	return f;
}

void kr__ufile_put(struct kr__ufile *f)
{
	if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (f->kind == UF_HOST) {
		if (f->own == KR__OWN_SIGFD)
			kr__sigfd_free(f->sigfd); /* before its host fd goes */
		kr_close(f->hostfd);
	} else
		end_put(f->pipe, f->end);
	free(f);
}

/* ---------------- the table ---------------- */

void kr__fd_lock(struct kr__fdtab *t)
{
	kr__spin_lock(&t->lock);
}

void kr__fd_unlock(struct kr__fdtab *t)
{
	kr__spin_unlock(&t->lock);
}

/* Under the lock. */
static int grow(struct kr__fdtab *t, int need)
{
	if (need <= t->n)
		return 0;
	if (need > KR_UFD_MAX)
		return -EMFILE;
	int n = t->n ? t->n : 16;
	while (n < need)
		n *= 2;
	if (n > KR_UFD_MAX)
		n = KR_UFD_MAX;
	struct kr__ufd *fd = calloc((size_t)n, sizeof *fd);
	if (!fd)
		return -ENOMEM;
	if (t->fd) {
		memcpy(fd, t->fd, (size_t)t->n * sizeof *fd);
		unsigned i = 0;
		while (t->old[i])
			i++;
		t->old[i] = t->fd; /* a lookup may read it still */
	}
	__atomic_store_n(&t->fd, fd, __ATOMIC_RELEASE);
	__atomic_store_n(&t->n, n, __ATOMIC_RELEASE);
	return 0;
}

/* Under the lock: what was at fd, to put once it is released. */
static int set_locked(struct kr__fdtab *t, int fd, struct kr__ufile *f, int cloexec,
		      struct kr__ufile **old)
{
	int e = grow(t, fd + 1);
	if (e)
		return e;
	*old = t->fd[fd].f;
	t->fd[fd].cloexec = cloexec;
	__atomic_store_n(&t->fd[fd].f, f, __ATOMIC_RELEASE);
	return 0;
}

int kr__fd_set(struct kr__fdtab *t, int fd, struct kr__ufile *f, int cloexec)
{
	if (fd < 0 || fd >= KR_UFD_MAX)
		return -EBADF;
	struct kr__ufile *old = NULL;
	kr__spin_lock(&t->lock);
	int e = set_locked(t, fd, f, cloexec, &old);
	kr__spin_unlock(&t->lock);
	if (old)
		kr__ufile_put(old);
	return e;
}

/* The lowest free fd >= lowest, or -errno.  Takes f's reference. */
int kr__fd_install(struct kr__fdtab *t, struct kr__ufile *f, int lowest, int cloexec)
{
	struct kr__ufile *old = NULL;
	kr__spin_lock(&t->lock);
	int fd = lowest;
	while (fd < t->n && t->fd[fd].f)
		fd++;
	int e = fd < KR_UFD_MAX ? set_locked(t, fd, f, cloexec, &old) : -EMFILE;
	kr__spin_unlock(&t->lock);
	if (e) {
		kr__ufile_put(f);
		return e == -EBADF ? -EMFILE : e;
	}
	return fd;
}

struct kr__ufile *kr__fd_get(struct kr__fdtab *t, int fd)
{
	struct kr__uthr *me;
	if (!__atomic_load_n(&t->shared, __ATOMIC_ACQUIRE) || !(me = kr__uthr_self()) ||
	    me->nheld == sizeof me->held / sizeof *me->held)
		return kr__fd_peek(t, fd);
	kr__spin_lock(&t->lock);
	struct kr__ufile *f = fd >= 0 && fd < t->n ? t->fd[fd].f : NULL;
	if (f)
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	kr__spin_unlock(&t->lock);
	if (f)
		me->held[me->nheld++] = f;
	return f;
}

void kr__fd_done(struct kr__ufile *f)
{
	struct kr__uthr *me = f ? kr__uthr_self() : NULL;
	if (me && me->nheld && me->held[me->nheld - 1] == f)
		kr__ufile_put(me->held[--me->nheld]);
}

void kr__fd_drop(struct kr__uthr *t)
{
	while (t->nheld)
		kr__ufile_put(t->held[--t->nheld]);
}

int kr__fd_cloexec(struct kr__fdtab *t, int fd)
{
	return t->fd[fd].cloexec;
}

void kr__fd_set_cloexec(struct kr__fdtab *t, int fd, int cloexec)
{
	t->fd[fd].cloexec = cloexec;
}

int kr__fd_close(struct kr__fdtab *t, int fd)
{
	kr__spin_lock(&t->lock);
	struct kr__ufile *f = fd >= 0 && fd < t->n ? t->fd[fd].f : NULL;
	if (f)
		__atomic_store_n(&t->fd[fd].f, NULL, __ATOMIC_RELEASE);
	kr__spin_unlock(&t->lock);
	if (!f)
		return -EBADF;
	kr__ufile_put(f);
	return 0;
}

void kr__fd_close_range(struct kr__fdtab *t, long lo, long hi)
{
	for (long fd = lo; fd <= hi && fd < __atomic_load_n(&t->n, __ATOMIC_ACQUIRE); fd++)
		kr__fd_close(t, (int)fd);
}

/* At the μprocess's end, or its exec's: no other thread. */
void kr__fd_close_all(struct kr__fdtab *t)
{
	for (int fd = 0; fd < t->n; fd++)
		if (t->fd[fd].f)
			kr__fd_close(t, fd);
	free(t->fd);
	for (unsigned i = 0; i < sizeof t->old / sizeof *t->old; i++) {
		free(t->old[i]);
		t->old[i] = NULL;
	}
	t->fd = NULL;
	t->n = 0;
}
