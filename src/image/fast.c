/*
 * karui image layer — the calls a rewritten site (rewrite.c) may finish
 * without saving the vector state.
 *
 * kr__img_fastcall (gate.S) first offers a call to kr__sys_fast, which
 * this file alone makes: it is compiled with -mgeneral-regs-only (no
 * vector register, so none of the μprocess's needs saving), without
 * sanitizers or stack protector (it runs before the VP's thread pointer
 * is back in %fs), and it calls no function but uaccess.S's, through which
 * it reads and writes the μprocess's memory: what it cannot finish with
 * the μprocess's state in hand and at most one system call of its own
 * (made inline: with the selector at ALLOW no call traps), it declines
 * with KR__SLOW before changing anything, and the general path (XSAVEC,
 * kr__sys) runs instead.  What it finishes it finishes as kr__sys would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>

#include "uproc.h"
#include "../sync/stream_fast.h"

static inline long raw(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

/* A karui pipe's end that fd names, opened for `end`, or NULL.  Not while
 * threads share the table (a close by another could free the file under
 * this call: the general path holds a reference, fd.c). */
static inline kr_stream *pipe_end(const struct kr_uproc *up, long fd, int end)
{
	if (__atomic_load_n(&up->fds.shared, __ATOMIC_RELAXED))
		return NULL;
	const struct kr__ufile *f = kr__fd_peek(&up->fds, fd);
	return f && f->kind == UF_PIPE && f->end == end ? &f->pipe->s : NULL;
}

/* A host fd that a plain system call serves (no pipe, nothing that waits). */
static inline int plain_fd(const struct kr_uproc *up, long fd)
{
	if (__atomic_load_n(&up->fds.shared, __ATOMIC_RELAXED))
		return -1;
	const struct kr__ufile *f = kr__fd_peek(&up->fds, fd);
	return f && f->kind == UF_HOST && !__atomic_load_n(&f->waits, __ATOMIC_RELAXED) ? f->hostfd
										      : -1;
}

struct kr__fast kr__sys_fast(long nr, const long *a)
{
	long r;
	int h;
	if (__builtin_expect(kr__img_forked, 0)) { /* a plain process now (fork.c) */
		long r;
		register long r10 __asm__("r10") = a[3], r8 __asm__("r8") = a[4],
					     r9 __asm__("r9") = a[5];
		__asm__ volatile("syscall"
				 : "=a"(r)
				 : "a"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
				 : "rcx", "r11", "memory");
		return (struct kr__fast){r, 0};
	}
	/* the calling thread, which the VP's record names */
	struct kr__uthr *t = kr__uthr_cur();
	struct kr_uproc *up = t->up;
	if (kr__img_trace || __atomic_load_n(&t->attn, __ATOMIC_RELAXED) || up->vparent)
		return (struct kr__fast){KR__SLOW, 0}; /* signals, a vfork child's call: the
							  general path */
	switch (nr) {
	case SYS_getpid:
		r = up->pid;
		break;
	case SYS_gettid:
		r = t->tid;
		break;
	case SYS_getppid:
		r = up->ppid;
		break;
	case SYS_read:
	case SYS_write: {
		int w = nr == SYS_write;
		kr_stream *s = pipe_end(up, a[0], w ? KR_UPIPE_WRITE : KR_UPIPE_READ);
		if (s) { /* a karui pipe: when nobody waits and nothing would */
			size_t len = (size_t)a[2];
			if (kr__upipe_probe(up, (void *)a[1], len, w) ||
			    (r = kr__stream_fast(s, w, (void *)a[1], len)) < 0)
				return (struct kr__fast){KR__SLOW, 0};
			break;
		}
	}
		/* fall through */
	case SYS_pread64:
	case SYS_pwrite64:
	case SYS_lseek:
	case SYS_fstat:
		if ((h = plain_fd(up, a[0])) < 0)
			return (struct kr__fast){KR__SLOW, 0};
		r = raw(nr, h, a[1], a[2], a[3]);
		if (r == -EPIPE) /* SIGPIPE: the general path */
			return (struct kr__fast){KR__SLOW, 0};
		break;
	case SYS_rt_sigprocmask: {
		const uint64_t *set = (const uint64_t *)a[1];
		uint64_t *old = (uint64_t *)a[2];
		if (a[3] != 8 || (set && a[0] != SIG_BLOCK && a[0] != SIG_UNBLOCK &&
				  a[0] != SIG_SETMASK))
			return (struct kr__fast){KR__SLOW, 0};
		uint64_t m = t->sigmask, v;
		if ((set && kr__ucopy(&v, set, 8)) || (old && kr__ucopy(old, &m, 8)))
			return (struct kr__fast){KR__SLOW, 0}; /* -EFAULT there */
		if (set) {
			__atomic_store_n(&t->sigmask,
					 (a[0] == SIG_BLOCK     ? m | v
					  : a[0] == SIG_UNBLOCK ? m & ~v
								: v) &
						 ~KR__UNBLOCKABLE,
					 __ATOMIC_SEQ_CST);
			kr__sig_recheck(t); /* delivered on the way back */
		}
		r = 0;
		break;
	}
	default:
		return (struct kr__fast){KR__SLOW, 0};
	}
	return (struct kr__fast){r, t->fs};
}

/* ---- cpuid (rewrite.c) ----
 * The process's answers: a leaf (and sub-leaf where the processor reads
 * one) is asked of the processor once, by whichever μprocess needs it
 * first, unless an earlier process's record had it (cache.c puts them
 * here before any μprocess runs); entries are claimed by CAS (0 -> 2),
 * filled, then published (release store of 1).  A full table, or a lost
 * claim, answers from the processor without keeping the result. */
static struct kr__cpuid_ent cpuid_tab[KR__CPUID_MAX];
static uint32_t cpuid_state[KR__CPUID_MAX]; /* 0 free, 2 being filled, 1 published */
unsigned kr__cpuid_kept; /* entries published; atomic */

static int reads_subleaf(uint32_t leaf)
{
	switch (leaf) {
	case 0x4: case 0x7: case 0xb: case 0xd: case 0xf: case 0x10: case 0x12: case 0x14:
	case 0x17: case 0x18: case 0x1a: case 0x1b: case 0x1d: case 0x1e: case 0x1f:
	case 0x20: case 0x23: case 0x24: case 0x8000001d: case 0x80000020: case 0x80000026:
		return 1;
	default:
		return 0;
	}
}

/* Keep an answer in entry i if it is free; a lost claim keeps nothing. */
static void keep(unsigned i, const struct kr__cpuid_ent *a)
{
	uint32_t free_ = 0;
	if (i < KR__CPUID_MAX &&
	    __atomic_compare_exchange_n(&cpuid_state[i], &free_, 2, 0, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED)) {
		struct kr__cpuid_ent *e = &cpuid_tab[i];
		e->leaf = a->leaf;
		e->sub = a->sub;
		e->r[0] = a->r[0];
		e->r[1] = a->r[1];
		e->r[2] = a->r[2];
		e->r[3] = a->r[3];
		__atomic_store_n(&cpuid_state[i], 1, __ATOMIC_RELEASE);
		__atomic_fetch_add(&kr__cpuid_kept, 1, __ATOMIC_RELAXED);
	}
}

/* The entry that answers (leaf, sub), or KR__CPUID_MAX with *free_ the
 * first entry not yet claimed (KR__CPUID_MAX: none). */
static unsigned find(uint32_t leaf, uint32_t sub, unsigned *free_)
{
	unsigned i = 0;
	for (; i < KR__CPUID_MAX; i++) {
		uint32_t st = __atomic_load_n(&cpuid_state[i], __ATOMIC_ACQUIRE);
		if (st == 0)
			break;
		if (st == 1 && cpuid_tab[i].leaf == leaf && cpuid_tab[i].sub == sub)
			return i;
	}
	*free_ = i;
	return KR__CPUID_MAX;
}

void kr__cpuid_lookup(uint32_t leaf, uint32_t sub, uint32_t out[4])
{
	if (!reads_subleaf(leaf))
		sub = 0;
	unsigned fr, i = find(leaf, sub, &fr);
	if (i < KR__CPUID_MAX) {
		const struct kr__cpuid_ent *e = &cpuid_tab[i];
		out[0] = e->r[0];
		out[1] = e->r[1];
		out[2] = e->r[2];
		out[3] = e->r[3];
		return;
	}
	struct kr__cpuid_ent a = {.leaf = leaf, .sub = sub};
	__asm__ volatile("cpuid"
			 : "=a"(a.r[0]), "=b"(a.r[1]), "=c"(a.r[2]), "=d"(a.r[3])
			 : "0"(leaf), "2"(sub));
	out[0] = a.r[0];
	out[1] = a.r[1];
	out[2] = a.r[2];
	out[3] = a.r[3];
	keep(fr, &a);
}

void kr__cpuid_put(const struct kr__cpuid_ent *a)
{
	unsigned fr;
	if (find(a->leaf, reads_subleaf(a->leaf) ? a->sub : 0, &fr) == KR__CPUID_MAX &&
	    (reads_subleaf(a->leaf) || !a->sub))
		keep(fr, a);
}

unsigned kr__cpuid_export(struct kr__cpuid_ent *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < KR__CPUID_MAX && n < max; i++) {
		uint32_t st = __atomic_load_n(&cpuid_state[i], __ATOMIC_ACQUIRE);
		if (st == 0)
			break;
		if (st != 1)
			continue;
		const struct kr__cpuid_ent *e = &cpuid_tab[i];
		out[n].leaf = e->leaf;
		out[n].sub = e->sub;
		out[n].r[0] = e->r[0];
		out[n].r[1] = e->r[1];
		out[n].r[2] = e->r[2];
		out[n].r[3] = e->r[3];
		n++;
	}
	return n;
}
