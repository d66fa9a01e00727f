/*
 * karui image layer — a μprocess's system calls on its memory: mmap and
 * the calls that change what it mapped.
 *
 * What a μprocess maps is passed to the kernel and recorded as its own
 * (uproc.c's regions), so that it goes with the μprocess; it may unmap,
 * move or change only what it mapped (its stack is one of its regions),
 * and never the host's memory: a MAP_FIXED outside its own regions
 * becomes MAP_FIXED_NOREPLACE.  Its kept image (reuse.c) and its code
 * mappings (rewrite.c) follow each change: read-only file mappings may
 * come from an earlier run of its image, and a change of the image's
 * mappings makes it unfit to keep.  A vfork child runs on its parent's
 * memory: what it maps or changes is its parent's (kr__mm).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "sys.h"

#define PG 4096ul

static long mmap_locked(struct kr_uproc *up, long a[6], long b[6]);

/* An isolated μprocess under a protection key makes code: never writable
 * too, and readable, for the scan that follows (iso.c). */
static int keyed_exec(struct kr_uproc *up, long prot)
{
	return (prot & PROT_EXEC) && __atomic_load_n(&up->iso_key, __ATOMIC_RELAXED);
}

long kr__sys_mmap(struct kr_uproc *up, long nr, long a[6])
{
	long b[6];
	memcpy(b, a, sizeof b);
	if (!(a[3] & MAP_ANONYMOUS)) {
		FILE_OR(up, a[4], EBADF);
		if (f->kind != UF_HOST)
			return -ENODEV;
		b[4] = f->hostfd;
	}
	up = kr__mm(up); /* its fds are its own, its memory a vfork parent's */
	pthread_mutex_lock(&up->mlock);
	long r = mmap_locked(up, a, b);
	pthread_mutex_unlock(&up->mlock);
	return r;
}

static long mmap_locked(struct kr_uproc *up, long a[6], long b[6])
{
	size_t len = ((size_t)a[1] + PG - 1) & ~(PG - 1);
	if ((a[3] & MAP_FIXED) && !kr__rl_covers(&up->reg, (uintptr_t)a[0], (uintptr_t)a[0] + len))
		b[3] = (a[3] & ~MAP_FIXED) | MAP_FIXED_NOREPLACE; /* never over the host's */
	if (a[3] & MAP_GROWSDOWN)
		return -EINVAL;
	/* read-only pages of a file, anywhere: perhaps a spare of its image */
	int type = (int)(a[3] & MAP_TYPE);
	/* shared memory that is or may become writable (a file open for
	 * writing): no deferred fork (fork.c) */
	if (type != MAP_PRIVATE && ((a[2] & PROT_WRITE) || (a[3] & MAP_ANONYMOUS) ||
				    (fcntl((int)b[4], F_GETFL) & O_ACCMODE) != O_RDONLY))
		up->shmap = 1;
	struct kr__file_id id = {0, 0, 0};
	int ro = up->img && !a[0] && a[2] == PROT_READ && !(a[3] & ~(long)MAP_TYPE) &&
		 (type == MAP_PRIVATE || type == MAP_SHARED) && !(a[5] & (PG - 1));
	if (ro) {
		struct stat st;
		if (fstat((int)b[4], &st))
			ro = 0;
		else
			id = kr__file_id_of(&st);
		uintptr_t at = ro ? kr__img_fmap_take(up, &id, a[5], len, type) : 0;
		if (at)
			return (long)at;
	}
	int kx = keyed_exec(up, a[2]);
	if (kx && (a[2] & PROT_WRITE))
		return -EACCES;
	if (kx)
		b[2] |= PROT_READ;
	long r = kr__pass(SYS_mmap, b);
	if (r < 0)
		return r == -EEXIST ? -ENOMEM : r;
	if (kx) {
		struct stat st;
		struct kr__file_id fid = {0, 0, 0};
		if (!(a[3] & MAP_ANONYMOUS) && fstat((int)b[4], &st) == 0)
			fid = kr__file_id_of(&st);
		int e = kr__iso_exec_check(up, (uintptr_t)r, (uintptr_t)r + len, (int)b[2], &fid,
					   (uintptr_t)a[5]);
		if (e) {
			munmap((void *)r, len);
			return -e;
		}
	}
	if (kr__uproc_mapped(up, (uintptr_t)r, (uintptr_t)r + len, (int)a[2])) {
		munmap((void *)r, len);
		return -ENOMEM;
	}
	if (ro)
		kr__img_fmap_made(up, (uintptr_t)r, &id, a[5], len, type);
	kr__xmap_del(up, (uintptr_t)r, (uintptr_t)r + len);
	/* code from a file: the image starts where offset 0 would be (ld.so
	 * maps a library's segments at their offsets) */
	if ((a[2] & PROT_EXEC) && !(a[3] & MAP_ANONYMOUS) && (uintptr_t)r >= (uintptr_t)a[5]) {
		struct stat st;
		struct kr__file_id id = {0, 0, 0};
		if (fstat((int)b[4], &st) == 0)
			id = kr__file_id_of(&st);
		kr__xmap_add(up, (uintptr_t)r, (uintptr_t)r + len, (uintptr_t)r - (uintptr_t)a[5], &id);
	}
	return r;
}

/* Only what the μprocess mapped may it unmap, move or change. */
static long owned(struct kr_uproc *up, long addr, long len)
{
	size_t l = ((size_t)len + PG - 1) & ~(PG - 1);
	return (addr & (PG - 1)) == 0 && kr__rl_covers(&up->reg, (uintptr_t)addr, (uintptr_t)addr + l);
}

static long munmap_locked(struct kr_uproc *up, long a[6])
{
	if (!owned(up, a[0], a[1]))
		return -EINVAL;
	long r = kr__pass(SYS_munmap, a);
	if (r == 0) {
		uintptr_t hi = (uintptr_t)a[0] + (((size_t)a[1] + PG - 1) & ~(PG - 1));
		kr__uproc_unmapped(up, (uintptr_t)a[0], hi);
		kr__xmap_del(up, (uintptr_t)a[0], hi);
	}
	return r;
}

static long mremap_locked(struct kr_uproc *up, long a[6])
{
	if (!owned(up, a[0], a[1]) || (a[3] & MREMAP_FIXED))
		return -EINVAL;
	long r = kr__pass(SYS_mremap, a);
	if (r < 0)
		return r;
	size_t oldl = ((size_t)a[1] + PG - 1) & ~(PG - 1), newl = ((size_t)a[2] + PG - 1) & ~(PG - 1);
	int w = kr__rl_meets(&up->wr, (uintptr_t)a[0], (uintptr_t)a[0] + oldl) ? PROT_WRITE : 0;
	if (!(a[3] & MREMAP_DONTUNMAP))
		kr__uproc_unmapped(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl);
	else
		kr__img_dirty(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl); /* emptied */
	kr__xmap_del(up, (uintptr_t)a[0], (uintptr_t)a[0] + oldl);
	kr__uproc_mapped(up, (uintptr_t)r, (uintptr_t)r + newl, w);
	return r;
}

/* mprotect, madvise, ...: on its own mappings (its stack is one). */
static long on_own_locked(struct kr_uproc *up, long nr, long a[6])
{
	if (!owned(up, a[0], a[1]))
		return -EINVAL;
	int kx = nr == SYS_mprotect && keyed_exec(up, a[2]);
	if (kx && (a[2] & PROT_WRITE))
		return -EACCES;
	if (kx)
		a[2] |= PROT_READ;
	long r = kr__pass(nr, a);
	uintptr_t hi = (uintptr_t)a[0] + (((size_t)a[1] + PG - 1) & ~(PG - 1));
	if (r == 0 && kx && kr__iso_exec_check(up, (uintptr_t)a[0], hi, (int)a[2], NULL, 0)) {
		a[2] &= ~PROT_EXEC; /* not code: the rest of the change stands */
		mprotect((void *)a[0], hi - (uintptr_t)a[0], (int)a[2]);
		r = -EPERM;
	}
	if ((r == 0 || r == -EPERM) && nr == SYS_mprotect)
		kr__uproc_protected(up, (uintptr_t)a[0], hi, (int)a[2]);
	/* advice that changes more than content (guards, locks, forking)
	 * would outlive a kept image's restore */
	if (r == 0 && nr == SYS_madvise && a[2] != MADV_DONTNEED && a[2] != MADV_FREE &&
	    a[2] != MADV_WILLNEED && a[2] != MADV_NORMAL && a[2] != MADV_RANDOM &&
	    a[2] != MADV_SEQUENTIAL && a[2] != MADV_COLD && a[2] != MADV_PAGEOUT)
		kr__img_dirty(up, (uintptr_t)a[0], hi);
	if (r == 0 && (nr == SYS_mlock || nr == SYS_munlock))
		kr__img_dirty(up, (uintptr_t)a[0], hi);
	return r;
}

/* Each under its memory's lock, against its other threads. */
#define LOCKED(call)                                                           \
	({                                                                     \
		up = kr__mm(up);                                               \
		pthread_mutex_lock(&up->mlock);                                \
		long r_ = (call);                                              \
		pthread_mutex_unlock(&up->mlock);                              \
		r_;                                                            \
	})

long kr__sys_munmap(struct kr_uproc *up, long nr, long a[6])
{
	return LOCKED(munmap_locked(up, a));
}

long kr__sys_mremap(struct kr_uproc *up, long nr, long a[6])
{
	return LOCKED(mremap_locked(up, a));
}

long kr__sys_on_own(struct kr_uproc *up, long nr, long a[6])
{
	return LOCKED(on_own_locked(up, nr, a));
}

/* It never grows: malloc maps instead. */
long kr__sys_brk(struct kr_uproc *up, long nr, long a[6])
{
	up = kr__mm(up);
	return (long)up->brk;
}
