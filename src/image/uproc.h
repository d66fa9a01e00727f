/* karui image layer — internals shared by its modules (not installed). */
#ifndef KARUI_IMAGE_UPROC_H
#define KARUI_IMAGE_UPROC_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <ucontext.h>

#include <karui.h>
#include <karui/image.h>

#include "../arch/spin.h"

/* A file as it was when mapped: what lets a plan or a site learnt in one
 * image serve another image of the same file (rewrite.c). */
struct kr__file_id {
	dev_t dev;
	ino_t ino;
	int64_t mtime_ns;
};
static inline struct kr__file_id kr__file_id_of(const struct stat *st)
{
	return (struct kr__file_id){st->st_dev, st->st_ino,
				    (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec};
}

/* ---- elf.c ---- */
struct kr__elf_img {
	void *map;          /* the reservation holding every segment */
	size_t maplen;
	uint64_t base, entry, phdr;
	unsigned phnum;
	uintptr_t xlo, xhi; /* its first executable segment, one mapping */
	struct kr__file_id file; /* the file it came from */
};
struct kr__elf_load {
	struct kr__elf_img prog, interp; /* interp.map NULL: none (static-PIE) */
};
/* EPERM: setuid, setgid or file capabilities (this extended attribute),
 * which only the kernel's exec grants. */
int kr__elf_load(int dirfd, const char *path, struct kr__elf_load *ld);
#define KR__CAPS_XATTR "security.capability"
void kr__elf_unload(struct kr__elf_load *ld);

/* ---- fd.c: open files, fd tables, pipes ---- */
enum { UF_HOST, UF_PIPE };
enum { KR__OWN = 1, KR__OWN_SOCK, KR__OWN_SIGFD };
#define KR__PIPE_CAP 65536  /* a karui pipe's bytes */
struct kr_upipe {       /* fd.c */
	kr_stream s;
	int ends[2];        /* open ends, [KR_UPIPE_READ], [KR_UPIPE_WRITE]; __atomic */
	int creator[2];     /* the creator still holds that end */
	int refs;           /* open ends of both kinds: the last one frees */
};

struct kr__ufile {
	int refs;           /* fds naming it, in every μprocess; __atomic */
	int kind;
	int hostfd;         /* UF_HOST: karui's own host fd (O_CLOEXEC) */
	int waits;          /* UF_HOST: may block (not a regular file): kr_read_until;
			     * -1: not known yet (kr__ufile_waits); atomic */
	int flags;          /* O_APPEND, O_NONBLOCK, the access mode */
	int own;            /* UF_HOST: 0, or made by karui for this μprocess
			     * alone (a socket, an eventfd, ...: KR__OWN, a
			     * socket KR__OWN_SOCK, a signalfd KR__OWN_SIGFD): its
			     * host fd is always O_NONBLOCK, and `flags` holds the
			     * μprocess's own O_NONBLOCK (sys_fd.c) */
	struct kr__sigfd *sigfd; /* KR__OWN_SIGFD: its mask (sys_sigfd.c) */
	kr_upipe *pipe;     /* UF_PIPE */
	int end;            /* UF_PIPE: KR_UPIPE_READ or _WRITE */
};
#define KR_UFD_MAX 1024 /* RLIMIT_NOFILE as a μprocess sees it */
/* A μprocess's threads share it: a change is made under `lock`, and a
 * lookup reads without it (kr__fd_peek).  A grown table is a new array,
 * published before its size; the old ones stay until the table goes (at
 * most 6: 16 slots to 1024), so that a lookup never reads freed memory. */
struct kr__uthr;
struct kr__fdtab {
	int n;              /* slots allocated; atomic */
	int shared;         /* threads, or calls into its exports, use it at once:
			     * lookups take references (kr__fd_get); never cleared */
	struct kr__ufd {
		struct kr__ufile *f;
		int cloexec;
	} *fd;              /* atomic */
	kr_spin lock;
	struct kr__ufd *old[7];
};
static inline struct kr__ufile *kr__fd_peek(const struct kr__fdtab *t, long fd)
{
	if (fd < 0 || fd >= __atomic_load_n(&t->n, __ATOMIC_ACQUIRE))
		return NULL;
	return __atomic_load_n(&__atomic_load_n(&t->fd, __ATOMIC_ACQUIRE)[fd].f, __ATOMIC_ACQUIRE);
}
/* The fd table and the pipes' reads and writes answer as the kernel
 * does, for kr__sys: an fd, a count or 0, or -errno. */
struct kr__ufile *kr__ufile_host(int hostfd, int flags);    /* takes hostfd */
struct kr__ufile *kr__ufile_pipe(kr_upipe *p, int end);     /* a new end */
int kr__ufile_waits(struct kr__ufile *f);                   /* UF_HOST: 0 or 1 */
void kr__ufile_put(struct kr__ufile *f);
int kr__fd_install(struct kr__fdtab *t, struct kr__ufile *f, int lowest, int cloexec);
int kr__fd_set(struct kr__fdtab *t, int fd, struct kr__ufile *f, int cloexec);
/* The file fd names, for the calling thread's call.  Where the table is
 * shared, with a reference that the call's end drops (kr__fd_drop): a
 * close by another thread meanwhile does not free it under the call. */
struct kr__ufile *kr__fd_get(struct kr__fdtab *t, int fd);
void kr__fd_drop(struct kr__uthr *t);
/* f, the last file kr__fd_get gave this call, is no longer used: for the
 * calls that look up many (poll, select, SCM_RIGHTS) */
void kr__fd_done(struct kr__ufile *f);
int kr__fd_cloexec(struct kr__fdtab *t, int fd);            /* an open fd's */
void kr__fd_set_cloexec(struct kr__fdtab *t, int fd, int cloexec);
int kr__fd_close(struct kr__fdtab *t, int fd);
void kr__fd_close_range(struct kr__fdtab *t, long lo, long hi); /* the open ones */
void kr__fd_close_all(struct kr__fdtab *t);
void kr__fd_lock(struct kr__fdtab *t);   /* a walk of the table, against changes */
void kr__fd_unlock(struct kr__fdtab *t);
int kr__uproc_spawn_check(kr_uproc **out, const char *path, char *const argv[],
			  const kr_uproc_attr *attr);
long kr__upipe_rw(kr_upipe *p, int write, void *buf, size_t len);
void kr__upipe_end_put(kr_upipe *p, int end);              /* an end's holder lets go */
/* A karui pipe's end f, which a process outside is to share (fork.c),
 * becomes a file of the kernel's, hostfd (a kernel pipe's end), for every
 * fd that names it: its pipe and end, which the caller now holds, are
 * returned.  0, or EINVAL: not a karui pipe's end. */
int kr__ufile_to_kernel(struct kr__ufile *f, int hostfd, kr_upipe **p, int *end);
/* what kr_stream_poll says of the pipe's stream */
void kr__upipe_state(kr_upipe *p, size_t *buffered, size_t *room, unsigned *closed);

/* ---- uproc.c ---- */
struct kr__region {
	uintptr_t lo, hi;
};
/* (reuse.c) */
/* A copy of writable memory (a kept image's, a deferred fork's parent's):
 * per range, per page 0 (all zero), 1 + the page's index in `copy`, or
 * (taken with the kernel's pagemap) UINT32_MAX: a page not yet touched,
 * which the restore gives back to the kernel (zero again, or the file's). */
struct kr__memcopy {
	struct kr__wrange {
		uintptr_t lo, hi;
		uint32_t *pg;
	} *w;
	unsigned nw;
	unsigned char *copy;
	size_t ncopy;       /* its pages */
};

/* Sorted, disjoint.  Changed by one thread at a time (a μprocess's own
 * lists: under its mm's mlock), read by any, without a lock, from signal
 * handlers too: a change makes seq odd while it lasts, and an array
 * outgrown is kept, not freed, until kr__rl_free, so that a reader never
 * touches freed memory and retries what a change overlapped. */
struct kr__rlist {
	struct kr__region *r;
	size_t n, cap;
	unsigned seq;
	unsigned nold;
	int lost;  /* a range kept whole that was to be split (no memory):
		    * the list may hold more than it should */
	struct kr__region *old[40]; /* outgrown arrays (each twice the last) */
};
#ifdef __x86_64__
/* A reader's view of l that no change overlapped: what f finds in it.
 * A change in progress on this very thread (a signal handler that came
 * in the middle of it) never ends while the reader waits: after a while
 * it gives up, and the answer is 0.  Inline, for image/fast.c too. */
static inline __attribute__((always_inline)) int
kr__rl_read(const struct kr__rlist *l, uintptr_t lo, uintptr_t hi,
	    int (*f)(const struct kr__region *, size_t, uintptr_t, uintptr_t))
{
	for (unsigned spins = 0; spins < (1u << 22); spins++) {
		unsigned s = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			__builtin_ia32_pause();
			continue;
		}
		/* cap before r: an r newer than its cap is larger still */
		size_t cap = __atomic_load_n(&l->cap, __ATOMIC_ACQUIRE);
		const struct kr__region *r = __atomic_load_n(&l->r, __ATOMIC_ACQUIRE);
		size_t n = __atomic_load_n(&l->n, __ATOMIC_RELAXED);
		int v = f(r, n < cap ? n : cap, lo, hi);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&l->seq, __ATOMIC_RELAXED) == s)
			return v;
	}
	return 0;
}

static inline __attribute__((always_inline)) int
kr__rl_covers_of(const struct kr__region *r, size_t n, uintptr_t lo, uintptr_t hi)
{
	for (size_t i = 0; i < n && lo < hi; i++) {
		uintptr_t a = __atomic_load_n(&r[i].lo, __ATOMIC_RELAXED);
		uintptr_t b = __atomic_load_n(&r[i].hi, __ATOMIC_RELAXED);
		if (a <= lo && lo < b)
			lo = b;
	}
	return lo >= hi;
}

/* Does l cover [lo, hi) whole? */
static inline __attribute__((always_inline)) int
kr__rl_covers(const struct kr__rlist *l, uintptr_t lo, uintptr_t hi)
{
	return kr__rl_read(l, lo, hi, kr__rl_covers_of);
}
#endif
struct kr__image;        /* reuse.c */
struct kr__xmap {        /* code mapped from an ELF file, and that image's base */
	uintptr_t lo, hi, base;
	struct kr__file_id file; /* all 0: not known */
};
/* A thread of a μprocess: its microprocess, and what the kernel keeps per
 * thread.  The first, `main`, is part of its struct kr_uproc and has the
 * μprocess's pid for its tid; the others (clone with CLONE_THREAD:
 * thread.c) are made and freed by themselves. */
struct kr__uthr {
	/* offset 0: a signal for it is pending that it does not block (or
	 * the call's end has more to do: a restart, rt_sigreturn), read on
	 * every way back to its code, by gate.S too, through its VP's record
	 * (gs:24, which names the thread whose code the VP last ran); atomic */
	int attn;
	uint32_t magic;
	struct kr_uproc *up;    /* its μprocess */
	kr_mp *mp;
	pid_t tid;
	uint64_t fs;            /* its thread pointer, installed whenever it runs */
	uintptr_t tidaddr;      /* set_tid_address's, CLONE_CHILD_CLEARTID's */
	uintptr_t robust;       /* set_robust_list's head (thread.c) */
	uint64_t sigmask;       /* atomic */
	stack_t altstack;       /* sigaltstack's (signal.c delivers on it) */
	/* the signals sent to this thread (tgkill, its faults), as up's
	 * sigpending and sigi for the μprocess's, under up's siglock */
	uint64_t sigpending;
	struct kr__sigi {
		int code, pid, uid; /* pid: the sender's; SI_TIMER: the timer's id */
		uint64_t addr;      /* a fault's address, a child's status, a sigval */
	} sigi[65];
	/* an eventfd that a wait in the kernel polls beside its fd (sys_fd.c),
	 * written when `attn` is set from outside, made for the first such
	 * wait, -1 till then; atomic */
	int killfd;
	/* the files its call uses, each with a reference of its own while the
	 * μprocess's fd table is shared by threads (fd.c: kr__fd_get), dropped
	 * when the call ends (kr__fd_drop) */
	struct kr__ufile *held[8];
	unsigned nheld;
	uint64_t ran_since;     /* kr_now() when it last came back from a futex
				 * wait or a yield (thread.c: woke) */
	/* the call being served: its number, whether it returned -EINTR for a
	 * signal (KR__RESTART_*), its stack pointer (sigaltstack's SS_ONSTACK) */
	long sys_nr;
	int restart;
	int sigreturn;          /* rt_sigreturn asked at a rewritten site */
	uintptr_t usp;
	/* the mask before a call's own (sigsuspend, ppoll, pselect6,
	 * epoll_pwait), put back at its end or saved in the frame of the
	 * handler that ends it, as the kernel's saved_sigmask */
	uint64_t saved_mask;
	int has_saved_mask;
	uint64_t waitset;       /* rt_sigtimedwait's signals while it waits; atomic */
	struct kr__img_vp *vp;  /* the VP it last ran on (the kick); atomic */
	uintptr_t die_sp;       /* where its end runs: its microprocess's stack */
	ucontext_t *uc;         /* the trap frame of the call being served; NULL
				 * for a rewritten site's (kr__img_fast) */
	uintptr_t callsp;       /* where that call's frame is */
	/* a call from a rewritten site that needs its trap frame (clone,
	 * fork, vfork), made again on the way back's trap (uproc.c) */
	int redo;
	long redo_nr, redo_a[6];
	/* vfork (uproc.c): the child that runs on this thread's microprocess
	 * (its calls are the child's: kr__uthr_self); the frame this thread
	 * last resumed or started from, freed at the next (or, in a vfork
	 * child's main thread, its parent's registers) */
	struct kr_uproc *vchild;
	struct kr__vframe *vframe;
	/* threads other than the first (thread.c): the μprocess's list, under
	 * the layer's lock; `gone`: it has ended (or, the first, waits for the
	 * others to end: the end of the μprocess is its); `stop`: it is to
	 * end, without ending the μprocess (an exec in another thread) */
	struct kr__uthr *next;
	int gone, stop;
	uintptr_t stk_lo, stk_hi; /* the stack clone gave it (its region) */
	/* a call's thread (call.c): the calls of another party into this
	 * μprocess's exports run as it, on the caller's microprocess */
	struct kr__xcall *xcall;
	/* an isolated μprocess's reads and writes that may wait go through
	 * this buffer of karui's, KR__PIPE_CAP bytes, made at the first
	 * (iso.c) */
	void *bounce;
};
#define KR_UTHR_MAGIC 0x6b755448u
_Static_assert(__builtin_offsetof(struct kr__uthr, attn) == 0, "gate.S reads attn at gs:24's");

struct kr_uproc {
	uint32_t magic;
	struct kr__uthr main;   /* its first thread */
	pid_t pid, ppid;    /* ppid: the host's pid */
	struct kr__elf_load ld;
	char **argv, **envp;    /* copies, freed once its stack is laid (an
				 * image to take: at the handover) */
	struct kr__fdtab fds;
	int cwdfd;          /* its working directory, a host fd */
	char *cwd;
	mode_t umask;
	uint64_t brk;
	pthread_mutex_t mlock;    /* its threads' changes to its memory:
				   * reg, wr, its code mappings and sites */
	struct kr__rlist reg;     /* what it mapped (its stack too) */
	struct kr__rlist wr;      /* of that, what is writable (PROT_WRITE): the
				   * image taken at the handover (reuse.c), a
				   * deferred fork's copy (fork.c), a pipe's read
				   * (kr__upipe_probe), an isolated one's closing
				   * (iso.c) read it */
	struct kr__rlist wrx;     /* of that, what is executable too (isolate) */
	uintptr_t stk_lo, stk_hi; /* its stack, a region like the others */
	struct kr__image *img;    /* its image, to keep at the end (reuse.c) */
	struct kr__fmap *fmaps;   /* its read-only file mappings since the
				   * handover, unchanged (reuse.c) */
	unsigned nfmaps, capfmaps;
	int snap;                 /* the image is taken at the handover */
	int wr_lost;              /* wr is not all it wrote: no memory to follow it */
	int shmap;                /* it mapped something MAP_SHARED (fork.c) */
	int reused;               /* it started from a kept image */
	int exited;               /* it ended by exit or exit_group */
	struct sigaction_k {
		uint64_t handler, flags, restorer, mask;
	} sig[65];
	/* its timers (sys_sig.c): ITIMER_REAL's (alarm, setitimer), and
	 * timer_create's, made on demand: each sends `signo` (0: none) to it,
	 * or to its thread `tid`, with `code`, its `id` and `sival`, at `at` (kr_now; 0:
	 * disarmed), then every `every` ns; sent by the microprocess `mp`,
	 * made for its first arming */
	struct kr__alarm {
		uint64_t at, every; /* atomic */
		int stop;           /* atomic */
		kr_mp *mp;
		struct kr_uproc *up;
		int signo, code, id;
		pid_t tid;
		clockid_t clock;
		uint64_t sival;
	} alarm, *timers[32];
	/* Its signals (signal.c).  `sigpending`: the signals sent to the
	 * μprocess (each thread's own are its) and not yet delivered, each
	 * with what its siginfo says (`sigi`, under `siglock`, which also
	 * orders the senders against `sig` and the threads' masks).  Atomic. */
	uint64_t sigpending;
	kr_spin siglock;
	struct kr__sigi sigi[65];
	/* the signalfds whose host fds show its pending signals (sys_sigfd.c),
	 * under siglock */
	struct kr__sigfd *sigfds;
	/* Its threads (thread.c), under the layer's lock: the others than
	 * `main`, how many have not ended (main among them until it ends),
	 * `thr_sem` posted as each other one ends; `dying`: it ends (exit_group,
	 * a signal, a fault) with `status`, and every thread ends as it comes
	 * back from karui; `threaded`: it made a thread (its image is not
	 * kept: reuse.c) */
	struct kr__uthr *threads, *ended;
	int nthreads;
	kr_sem thr_sem;
	int dying;
	int threaded;
	/* an exec in a thread other than the first, which the first takes
	 * over once the others have ended (its `stop` 2): the old image, and
	 * the mask the new program starts with; or the process the program
	 * runs as (uproc.c: stand_for), its pid and pidfd */
	struct kr_uproc *exec_old;
	uint64_t exec_mask;
	pid_t exec_real;
	int exec_pidfd;
	struct kr_uproc *live_next, *live_prev; /* the registry of kill and */
	int live;                               /* kr_uproc_kill: every μprocess */
	int status;
	unsigned long rewritten;  /* call sites rewritten (rewrite.c) */
	unsigned long cpuid_sites; /* cpuid instructions answered by karui */
	struct kr__xmap *xmap;
	unsigned nxmap;
	struct kr__rw *rw;
	/* Its family (uproc.c, sys_exec.c), under the layer's lock: `parent`,
	 * the μprocess whose wait4 collects it (NULL: the host, through
	 * kr_uproc_wait; or nobody, when `orphan`: its parent ended first, and
	 * it frees itself at its end); its children, linked by `sib`; a child
	 * that has ended is a `zombie` until its parent collects it, and
	 * `kids_sem` is posted at each end of a child. */
	struct kr_uproc *parent, *kids, *sib;
	int zombie, orphan;
	int pidfd;                /* a real child of a fork (fork.c): its pidfd
				   * while it runs, else -1; 0: a μprocess */
	int real;
	int own_mp;               /* 0: a vfork child that ended on its parent's microprocess */
	kr_sem kids_sem;
	/* vfork (uproc.c): a child runs on the microprocess of its parent's
	 * thread `vparent` and on its memory until it execs or ends; that
	 * thread's `vchild` is the child. */
	struct kr__uthr *vparent;
	/* a deferred fork's child (fork.c), while it runs on its parent's
	 * memory: the copy of that memory, and how to go on */
	struct kr__dfork *dfork;
	/* its exports and the calls into them (call.c), made at its first
	 * export or the first call; under the layer's lock, as `xc_closed`
	 * (it has ended: no call comes in) */
	struct kr__xcall *xc;
	int xc_closed;
	int sigkeep;              /* started by exec with a signal state of its own
				   * (ignored signals, a mask): not the kept image's */
	/* In a domain of its own (iso.c): `isolate`, asked at spawn, its vfork
	 * children's too; `iso_on` while its memory is closed to the others
	 * (from its start to its end or exec); under iso.c's lock, the VPs
	 * that show it and whether its memory is open. */
	int isolate;
	int iso_on;
	int iso_n, iso_open;
	/* while iso_on: its protection key (1..15), or 0: its memory is
	 * closed by page protection; how it was isolated last
	 * (KR_UPROC_ISO_*, kr_uproc_isolation) */
	int iso_key;
	int iso_mode;
};
#define KR_UPROC_MAGIC 0x6b755052u
/* each thread o of up, the first first */
#define KR__FOR_THREADS(up, o)                                                                 \
	for (struct kr__uthr *o = &(up)->main; o; o = o == &(up)->main ? (up)->threads : o->next)

/* SIGKILL and SIGSTOP, which no mask blocks */
#define KR__UNBLOCKABLE (((uint64_t)1 << (SIGKILL - 1)) | ((uint64_t)1 << (SIGSTOP - 1)))
/* After a change of t->sigmask by the thread (a seq_cst store, against
 * a sender's seq_cst set of the pending bit and load of the mask): a
 * pending signal it no longer blocks is delivered on its way back.
 * Inline, no call: fast.c uses it. */
static inline void kr__sig_recheck(struct kr__uthr *t)
{
	uint64_t p = (__atomic_load_n(&t->sigpending, __ATOMIC_SEQ_CST) |
		      __atomic_load_n(&t->up->sigpending, __ATOMIC_SEQ_CST)) &
		     ~__atomic_load_n(&t->sigmask, __ATOMIC_RELAXED);
	if (p)
		__atomic_store_n(&t->attn, 1, __ATOMIC_SEQ_CST);
}
/* The thread whose call this is (a vfork child's while one runs on the
 * microprocess), and its μprocess. */
struct kr__uthr *kr__uthr_self(void);
struct kr_uproc *kr__uproc_self(void);
/* The thread whose code the VP last ran, through its record (gs:24):
 * the calling thread, in a call from a rewritten site (fast.c). */
#if defined(__x86_64__)
static inline struct kr__uthr *kr__uthr_cur(void)
{
	struct kr__uthr *t;
	__asm__("mov %%gs:24, %0" : "=r"(t));
	return t;
}
#endif
/* a signal for the calling thread is to be delivered (a wait ends for it) */
static inline int kr__sig_intr(void)
{
	return __atomic_load_n(&kr__uthr_self()->attn, __ATOMIC_SEQ_CST);
}
/* The μprocess whose memory up's calls change: a vfork child's parent. */
static inline struct kr_uproc *kr__mm(struct kr_uproc *up)
{
	while (up->vparent)
		up = up->vparent->up;
	return up;
}
/* exec (sys_exec.c resolves the path and reads the vectors): replace the
 * image of t's μprocess with the program at dirfd/path (a host fd), with
 * argv and envp (malloc'ed vectors of malloc'ed strings, taken).  Returns
 * -errno, the old image going on, or does not return; a vfork child's
 * returns 0 to no one: its parent resumes. */
long kr__uproc_exec(struct kr__uthr *t, int dirfd, const char *path, char **argv, char **envp);
/* vfork, clone(CLONE_VM | CLONE_VFORK): a child of t's μprocess runs from
 * here on t's microprocess, on `stack` (0: t's own); 0 or -errno. */
long kr__uproc_vfork(struct kr__uthr *t, unsigned long flags, uintptr_t stack, uintptr_t ptid,
		     uintptr_t ctid, uint64_t tls);
/* A child of up that has ended (pid > 0: that one; else any): its pid,
 * 0 (nohang, none yet), -ECHILD, -EINTR; `nowait`: left to collect. */
struct kr__reaped {
	pid_t pid;
	int signaled;       /* 1: ended by signal `code`; 0: exited with `code` */
	int code;
};
long kr__uproc_reap(struct kr_uproc *up, pid_t pid, int nohang, int nowait,
		    struct kr__reaped *r);
/* The end of thread t, on its microprocess's own stack, whatever stack
 * it is called on: of t alone (KR__END_THREAD: exit, or told to end; the
 * μprocess's with that status when t is the last), or of its μprocess
 * with that status, every thread of it ending (KR__END_EXIT: exit_group;
 * KR__END_KILLED: a signal, a fault, a start that failed).  The μprocess's
 * end is its first thread's, once the others have ended.  Not declared
 * noreturn, so that the sanitizers do not take the μprocess's stack for
 * the one they know (it never returns). */
enum { KR__END_THREAD, KR__END_EXIT, KR__END_KILLED };
void kr__uthr_end(struct kr__uthr *t, int status, int how);
static inline void kr__uproc_end(struct kr__uthr *t, int status)
{
	kr__uthr_end(t, status, KR__END_KILLED);
}
/* A stack of `size` bytes with a guard page below, one of up's regions:
 * [*lo, *hi).  0 or ENOMEM. */
int kr__uproc_stack(struct kr_uproc *up, size_t size, uintptr_t *lo, uintptr_t *hi);
int kr__rl_add(struct kr__rlist *l, uintptr_t lo, uintptr_t hi);
void kr__rl_free(struct kr__rlist *l); /* and empty it */
void kr__rl_del(struct kr__rlist *l, uintptr_t lo, uintptr_t hi);
int kr__rl_meets(const struct kr__rlist *l, uintptr_t lo, uintptr_t hi);
void kr__rl_unmap(const struct kr__rlist *l);
/* The μprocess maps, unmaps or changes [lo, hi): its regions, its writable
 * ranges while they are kept, and its kept image follow (sys_mem.c). */
int kr__uproc_mapped(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot);
void kr__uproc_unmapped(struct kr_uproc *up, uintptr_t lo, uintptr_t hi);
void kr__uproc_protected(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot);
/* a signal the calling thread sends itself (tgkill, raise, SIGPIPE):
 * delivered on the way back from the call; 0 or -EINVAL */
long kr__uproc_signal(int sig);
/* Default actions (signal(7)): 1 ends the process, 0 nothing (stop and
 * continue are nothing too: μprocesses have no job control). */
int kr__sig_ends(int sig);
/* The registry: the live μprocess with that pid (under G.lock, which
 * kr__uproc_kill_pid takes), and a signal sent to it from outside; with
 * `tid`, to its thread of that tid alone (tgkill; pid 0: tkill, any
 * μprocess's thread); `value`, a sigqueue's (not carried to a real child).
 * 0 or -ESRCH. */
int kr__uproc_kill_pid(pid_t pid, pid_t tid, int sig, int code, pid_t from, uint64_t value);
/* A signal for up (t NULL) or its thread t, from a thread of its own. */
void kr__uproc_send(struct kr_uproc *up, struct kr__uthr *t, int sig, int code, pid_t from,
		    uint64_t value);
/* A timer's signal for up, or its thread of that tid (none: dropped), its
 * siginfo's si_timerid `id` and si_value `sival`; 0 or -ESRCH (no such
 * thread). */
int kr__uproc_send_timer(struct kr_uproc *up, pid_t tid, int sig, int code, int id,
			 uint64_t sival);

/* ---- fork.c: a real child process ---- */
/* fork, clone without CLONE_VM: the host forks, and the child runs t's
 * μprocess alone, as a plain process; the child's pid, or -errno. */
long kr__uproc_fork(struct kr__uthr *t, unsigned long flags, uintptr_t ptid, uintptr_t ctid);
/* An exec that cannot be a μprocess's (a program not position-independent
 * whose link address another image holds) as a process of its own: the
 * host forks, and the child, the μprocess's fds and state, execs the
 * program; its pid (*pidfd its pidfd), or -errno. */
long kr__uproc_exec_process(struct kr__uthr *t, int dirfd, const char *path, char *const *argv,
			    char *const *envp, int *pidfd);
/* 1 in such a child: a rewritten call site calls the kernel (fast.c) */
extern int kr__img_forked;
/* A deferred fork (fork.c): its child runs in place, as a vfork child, on
 * its parent's memory, whose writable part `mem` holds as at the fork;
 * the fork's flags and addresses; and, for uproc.c, the parent's way
 * back: its thread, what its call returns, where the child's last call
 * was. */
struct kr__dfork {
	struct kr__memcopy mem;
	unsigned long flags;
	uintptr_t ptid, ctid;
	struct kr__uthr *p;
	long rv;
	uintptr_t callsp;
};
/* Whether the child c of a deferred fork makes call nr (arguments a) in
 * place; else it becomes a real process first (kr__uproc_dfork_real). */
int kr__dfork_in_place(struct kr_uproc *c, long nr, const long *a);
/* t, the first thread of a deferred fork's child, becomes a real process
 * that goes on with its call nr (a trap's: t->uc); its parent goes on. */
__attribute__((noreturn)) void kr__uproc_dfork_real(struct kr__uthr *t, long nr, const long *a);
/* uproc.c's end of that: c goes, and its parent, its memory as at the
 * fork, collects the process pid (its pidfd, taken) instead, its fork
 * returning pid; or, pid -errno, its fork fails with that. */
__attribute__((noreturn)) void kr__uproc_dfork_end(struct kr_uproc *c, long pid, int pidfd);
/* up's child pid, a real process (its pidfd, taken): a child for wait4,
 * waitid, SIGCHLD and kill (uproc.c).  0 or ENOMEM. */
int kr__uproc_real_child(struct kr_uproc *up, pid_t pid, int pidfd);

/* ---- thread.c: threads of a μprocess, futexes ---- */
#define KR__MP_STACK ((size_t)64 << 10) /* a thread's microprocess's own: its end */
/* an isolated μprocess's thread's, where its calls run too (iso.c) */
#define KR__ISO_MP_STACK ((size_t)512 << 10)
#define KR__MP_STACK_OF(up) ((up)->isolate ? KR__ISO_MP_STACK : KR__MP_STACK)
/* clone(CLONE_THREAD): another thread of t's μprocess, from the call's
 * trap frame (t->uc); its tid, or -errno. */
long kr__thr_clone(struct kr__uthr *t, unsigned long flags, uintptr_t stack, uintptr_t ptid,
		   uintptr_t ctid, uint64_t tls);
/* A thread other than the first ends (on its microprocess's stack): its
 * CLONE_CHILD_CLEARTID word cleared and woken, its struct on up's `ended`
 * list; kr__thr_reap joins their microprocesses and frees them (at the
 * next clone, at exec, at the μprocess's end). */
__attribute__((noreturn)) void kr__thr_gone(struct kr__uthr *t);
/* t ends: the robust mutexes it holds are its owner's that died. */
void kr__thr_robust(struct kr__uthr *t);
void kr__thr_reap(struct kr_uproc *up);
/* Every thread of up but `keep` is told to end (attn, its wait cut
 * short, its VP kicked): the μprocess's end, or (`stop`) an exec's.
 * Under the layer's lock. */
void kr__thr_stop_others(struct kr_uproc *up, struct kr__uthr *keep, int stop);
/* futex(2) on the μprocess's words, keyed by address (one address space) */
long kr__futex_wake(uintptr_t addr, int n, uint32_t bits);
/* The registers of a call's trap frame in a signal frame of karui's, which
 * kr__img_sigreturn resumes (uproc.c); the thread's `vframe` holds it:
 * the kernel's ucontext at frame + 8. */
struct kr__vframe {
	uintptr_t sp;       /* the frame + 8, where rt_sigreturn wants %rsp */
	uintptr_t top;      /* the top of the stack it resumes on (0: the caller's) */
	unsigned char pad[48];
	unsigned char frame[];
};
struct kr__vframe *kr__frame_save(const ucontext_t *uc);
/* Resume t's code from its `vframe` on the calling VP, with %rax `rax`
 * (uproc.c). */
__attribute__((noreturn)) void kr__thr_resume(struct kr__uthr *t, long rax, uintptr_t callsp);
/* The layer's lock (uproc.c): the registry, the families, the threads. */
void kr__uproc_lock(void);
void kr__uproc_unlock(void);
pid_t kr__uproc_new_pid(void);

/* ---- call.c: calls between μprocesses (P4) ---- */
/* The calls into a μprocess's exports: the table, the one lock a call
 * holds, the thread it runs as and the stack it runs on.  gate.S's
 * kr__img_call reads the first words (XC_* there). */
struct kr__xcall {
	uintptr_t sp;           /* 0: the caller's %rsp inside kr__img_call */
	uintptr_t top;          /* 8: the top of the call stack */
	uint64_t fn;            /* 16: the procedure */
	uint64_t fs;            /* 24: the exporter's thread pointer */
	long arg[6];            /* 32: its arguments */
	uintptr_t *die_sp;      /* 80: &thr.die_sp, where kr__img_call puts it */
	kr_mutex lock;          /* one call at a time: held for its whole run */
	kr_cond cv;             /* an export, or the end */
	uint64_t *tab;          /* the exported procedures (0: none), n of them */
	unsigned n;
	int closed;             /* the μprocess has ended (under lock) */
	int poked;              /* its end told the call (atomic) */
	int err;                /* how the call ended: 0, ESRCH, EFAULT */
	int refs;               /* its μprocess's, and callers' by pid (layer's lock) */
	uintptr_t stk_lo, stk_hi; /* the call stack, one of the μprocess's regions */
	struct kr__uthr thr;    /* what a call runs as (its mp: the caller's) */
};
/* The thread of a call in flight on the calling microprocess, or NULL. */
struct kr__uthr *kr__call_self(void);
/* A system call of the image's own (KR__NR_EXPORT, KR__NR_CALL) from
 * thread t: -errno, 0, or KR__NOT_CALL for any other number; a call that
 * a procedure may not make (clone, fork, vfork, exec): -ENOSYS. */
#define KR__NOT_CALL (-(1l << 41))
long kr__call_sys(struct kr__uthr *t, long nr, long a[6]);
/* Its end reaches the call in flight (under the layer's lock: stop as
 * kr__thr_stop_others's) and the calls to come (kr__call_close: every
 * call refused from then on, after the one in flight); an exec withdraws
 * its exports (kr__call_close(up, 0)).  Its struct goes with it. */
struct kr__uthr *kr__call_poke(struct kr_uproc *up, struct kr__uthr *keep);
void kr__call_close(struct kr_uproc *up, int end);
void kr__call_free(struct kr_uproc *up);
/* The call's thread has ended (uproc.c: thr_end, on the caller's stack
 * below the call): the call returns its error. */
__attribute__((noreturn)) void kr__call_gone(struct kr__uthr *t, int status, int how);
/* uproc.c's, for the calls: the calling VP armed (0 or an errno code),
 * its record naming t; a thread told to end now (its wait cut short, its
 * VP kicked); the μprocess of that pid (under the layer's lock). */
int kr__img_arm(void);
void kr__uthr_here(struct kr__uthr *t);
void kr__uthr_poke(struct kr__uthr *o);
/* id (a pid or tid, 0 for the caller) names up or one of its threads. */
int kr__uproc_is_self(struct kr_uproc *up, pid_t id);
struct kr_uproc *kr__uproc_by_pid(pid_t pid);

/* ---- signal.c: delivery to the μprocess's handlers ---- */
enum { KR__RESTART_NO, KR__RESTART_EINTR, KR__RESTART_SA, KR__RESTART_ALWAYS };
/* Queue sig (1..64) for up (t NULL: the μprocess's, which any thread
 * that does not block it takes) or for its thread t, with its siginfo's
 * code, pid and address: nothing if it is ignored and not blocked.  The
 * thread to wake (its attn set: it does not block it; or it waits for it
 * in rt_sigtimedwait or a signalfd's read: its waitset), or NULL.  Under the layer's lock, which keeps the
 * threads. */
struct kr__uthr *kr__sig_queue(struct kr_uproc *up, struct kr__uthr *t, int sig, int code,
			       pid_t pid, uint64_t addr);
/* Take the lowest pending signal of `set` for t (rt_sigtimedwait): its
 * number and siginfo, or 0. */
int kr__sig_take(struct kr__uthr *t, uint64_t set, siginfo_t *si);
/* A pending signal t does not block whose action ends its μprocess, or
 * its μprocess's end: ends it now (on t's stack, in a call). */
void kr__sig_fatal(struct kr__uthr *t);
/* attn again from what is pending, unblocked or left to do */
void kr__sig_rearm(struct kr__uthr *t);
/* A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) in t's code, uc the kernel's
 * context of it: 1 when its handler is to run there (uc now enters it),
 * 0 when the default action ends it (as the kernel forces a fault that is
 * blocked or ignored). */
int kr__sig_fault(struct kr__uthr *t, ucontext_t *uc, const siginfo_t *si);
/* Whether ip is the μprocess's code (its mappings, the vDSO). */
int kr__sig_ucode(struct kr_uproc *up, uintptr_t ip);
/* A rewritten site's return (the trampoline's call, rewrite.c) as the
 * syscall instruction returns: %rip after the site, %rsp as it was.  0, or
 * -EFAULT when the return address cannot be read. */
int kr__sig_uret(greg_t *g);

/* ---- sys_sigfd.c: signalfd ---- */
/* Under up's siglock, after a change of up's pending signals (`fresh`:
 * the one queued, if any): each signalfd up made has its host fd readable
 * while a signal of its mask is pending (up's, its first thread's). */
void kr__sigfd_sync(struct kr_uproc *up, uint64_t fresh);
/* The open file's last reference went: its signalfd (the host fd then
 * closed by the caller). */
void kr__sigfd_free(struct kr__sigfd *s);
/* up's end: its signalfds that others still hold show nothing more. */
void kr__sigfd_unbind_all(struct kr_uproc *up);
/* An epoll set is given signalfd f: its host fd shows its signals from
 * now on (kr__sigfd_sync). */
void kr__sigfd_epoll(struct kr__ufile *f);
/* For poll and select: a signal of f's mask is pending for the calling
 * thread. */
int kr__sigfd_ready(const struct kr__ufile *f);
/* In a fork's child (fork.c): a kernel signalfd with f's mask
 * (close-on-exec), or -1. */
int kr__sigfd_kernel(const struct kr__ufile *f);

/* ---- iso.c: μprocesses in domains of their own ---- */
/* up starts (its image loaded, on its microprocess): if it is isolated,
 * its memory is open until no VP shows it. */
int kr__iso_begin(struct kr_uproc *up); /* EPERM: its code writes PKRU */
/* Its image goes (its end, an exec): shown by no VP, open, no longer
 * switched. */
void kr__iso_end(struct kr_uproc *up);
/* VP v shows `want` (kr__uthr_here: the μprocess whose code it enters, if
 * isolated; NULL: none) */
void kr__iso_show(struct kr__img_vp *v, struct kr_uproc *want);
/* The calling thread's μprocess's memory, open on this VP, before karui
 * hands it to the kernel after a wait. */
void kr__iso_here(void);
/* gate.S's: a fault of karui's own code that showing the μprocess whose
 * call it is ends (1: made again). */
int kr__iso_fault(const siginfo_t *si, ucontext_t *uc);
extern int kr__iso_live;
/* Isolated μprocesses get protection keys (decided at the first). */
extern int kr__iso_keys;
/* The PKRU that shows `want` (NULL: no isolated μprocess): every key but
 * 0 closed (both bits), want's own open. */
#define KR__PKRU_NONE 0xfffffffcu
static inline uint32_t kr__iso_pkru(const struct kr_uproc *want)
{
	if (!__atomic_load_n(&kr__iso_keys, __ATOMIC_RELAXED))
		return 0;
	int k = want ? __atomic_load_n(&want->iso_key, __ATOMIC_RELAXED) : 0;
	return KR__PKRU_NONE & ~(3u << (2 * k));
}
/* A way back into a μprocess's code through the signal frame uc: the
 * PKRU it restores is this VP's (whatever was saved, or forged). */
void kr__iso_frame(ucontext_t *uc);
/* up (isolated, with a key) has made [lo, hi) executable with prot (from
 * file f at offset off, or f NULL): 0, or EACCES (writable too: refused
 * before the kernel is asked), EPERM (it holds code that writes PKRU). */
int kr__iso_exec_check(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot,
		       const struct kr__file_id *f, uintptr_t off);
/* Its keyed writable memory follows a change of [lo, hi) to prot
 * (uproc.c's track, under iso.c's lock); `was`: it was writable. */
void kr__iso_keyed(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, int prot, int was);
/* kr__sys(t, nr, a): on t's microprocess's own stack (below die_sp) if
 * its μprocess is isolated, its memory shown again before the return. */
long kr__iso_sys(struct kr__uthr *t, long nr, long a[6]);
/* kr_mp_yield, the same way */
void kr__iso_yield(struct kr__uthr *t);
/* t's bounce buffer (KR__PIPE_CAP bytes), or NULL: no memory. */
void *kr__iso_bounce(struct kr__uthr *t);
/* The lock that the μprocess's writable ranges (wr, wrx) are changed under
 * while it is isolated (uproc.c). */
void kr__iso_lock(void);
void kr__iso_unlock(void);
/* uproc.c's: this thread's VP record (NULL: not armed), every record. */
struct kr__img_vp *kr__img_vp_self(void);
struct kr__img_vp *kr__img_vps(void);

/* ---- reuse.c: images kept after their μprocess ends (P5) ---- */
/* The ranges of wr less [stk_lo, stk_hi), and [xlo, xhi) if not empty;
 * pagemap: an fd of /proc/self/pagemap, or -1.  0 or ENOMEM (then
 * kr__mem_free). */
int kr__mem_take(struct kr__memcopy *m, const struct kr__rlist *wr, uintptr_t stk_lo,
		 uintptr_t stk_hi, uintptr_t xlo, uintptr_t xhi, int pagemap);
/* The memory as it was at the copy: each page that differs written back
 * (no page the run left alone becomes private). */
void kr__mem_put(const struct kr__memcopy *m);
void kr__mem_free(struct kr__memcopy *m);
/* The writable segments of the program and its ld.so as karui mapped
 * them, into up->wr (a cold start); a kept image's writable ranges and
 * its stack (a start from it).  0 or ENOMEM. */
int kr__img_wr_elf(struct kr_uproc *up);
int kr__img_wr_kept(struct kr_uproc *up);
/* A cold start whose image is to be taken (up->snap), the writable
 * segments in up->wr; 0: it is not (none kept, or no ld.so). */
int kr__img_plan(struct kr_uproc *up);
/* The handover from ld.so to the program, through kr__img_handover: the
 * image is taken; returns the program's entry. */
uint64_t kr__img_snapshot(struct kr_uproc *up, const ucontext_t *uc);
/* A kept image for this start, or NULL; up->img and what the image holds
 * are up's then (its regions, rewriting state, signal state). */
int kr__img_take(struct kr_uproc *up, const struct stat *st, char *const *argv, char *const *envp);
/* The reused μprocess's first instruction: its writable memory as at the
 * handover, then the program's entry with the initial stack at sp. */
void kr__img_resume(struct kr_uproc *up, uintptr_t sp);
/* At the end: keep the image (what is not the image is unmapped; returns 1)
 * or not (0: release unmaps it all). */
int kr__img_keep(struct kr_uproc *up);
void kr__img_drop(struct kr_uproc *up);
/* [lo, hi) changes: an image it meets is no longer fit to keep, a read-only
 * file mapping it meets no longer one to keep with the image. */
void kr__img_dirty(struct kr_uproc *up, uintptr_t lo, uintptr_t hi);
/* A read-only mapping of a whole-page run of a file (mmap with no address,
 * PROT_READ, MAP_PRIVATE or MAP_SHARED) that an earlier run of the image
 * left: its address, or 0 (then the caller maps it, and tells
 * kr__img_fmap_made). */
uintptr_t kr__img_fmap_take(struct kr_uproc *up, const struct kr__file_id *id, int64_t off,
			    size_t len, int flags);
void kr__img_fmap_made(struct kr_uproc *up, uintptr_t at, const struct kr__file_id *id,
		       int64_t off, size_t len, int flags);
/* karui mapped [lo, hi) for the image (a trampoline page): it is kept with it. */
void kr__img_adopt(struct kr_uproc *up, uintptr_t lo, uintptr_t hi);

/* ---- rewrite.c ---- */
void kr__xmap_add(struct kr_uproc *up, uintptr_t lo, uintptr_t hi, uintptr_t base,
		  const struct kr__file_id *file);
void kr__xmap_del(struct kr_uproc *up, uintptr_t lo, uintptr_t hi);
/* The syscall at site trapped; threaded: other threads may run its code
 * now, so a rewrite patches it live (poke_live).  Under up's mlock. */
void kr__rw_trapped(struct kr_uproc *up, uintptr_t site, int threaded);
/* at is a site karui rewrites, or rewrote: an int3 there is karui's, and
 * the thread that met it goes back to at.  From any thread, lock-free. */
int kr__rw_patched(struct kr_uproc *up, uintptr_t at);
/* Write n bytes of code at `at`, in a μprocess's read-only executable
 * pages of protection prot (its private copy): 1, or 0. */
int kr__rw_poke(uintptr_t at, const void *src, size_t n, int prot);
void kr__rw_free(struct kr_uproc *up);
/* A rewriting state that is no μprocess's (a kept image's). */
void kr__rw_del(struct kr__rw *rw);
void kr__rw_prepare(struct kr_uproc *up, const struct kr__elf_load *ld);
int kr__rw_cpuid_trap(struct kr_uproc *up, uintptr_t at);
/* In a fork's child: what rewrites write through is opened afresh. */
void kr__rw_forked(void);
/* ld.so has handed over to the program: the pages of its code that karui
 * patched are the file's again (rewrite.c). */
void kr__rw_handover(struct kr_uproc *up);
/* The syscall at site, in the image at base, is in a system-call wrapper
 * where no vector register is live (rewrite.c). */
int kr__rw_novec_site(uintptr_t base, uintptr_t site);

/* ---- fast.c: calls finished without the vector state saved ---- */
struct kr__fast {
	long rv;
	uint64_t fs;        /* the μprocess's thread pointer */
};
#define KR__SLOW (1l << 62)
struct kr__fast kr__sys_fast(long nr, const long *a);
extern int kr__img_trace;   /* KARUI_UPROC_TRACE: each call on stderr */
extern uint8_t kr__img_avx;
extern uint8_t kr__img_xsavec;
void kr__cpuid_lookup(uint32_t leaf, uint32_t sub, uint32_t out[4]);
#define KR__CPUID_MAX 256
struct kr__cpuid_ent {
	uint32_t leaf, sub, r[4];
};
void kr__cpuid_put(const struct kr__cpuid_ent *a);   /* an answer learnt before */
unsigned kr__cpuid_export(struct kr__cpuid_ent *out, unsigned max);
extern unsigned kr__cpuid_kept; /* answers in the table; atomic */

/* ---- cache.c: what a process learnt, on disk for the next ---- */
void kr__cache_init(void);
/* The record `name` if its key is `key`: its payload's length, or -1. */
long kr__cache_read(const char *name, const uint64_t key[3], void *buf, size_t cap);
void kr__cache_write(const char *name, const uint64_t key[3], const void *buf, size_t len);
/* A file's record: its name (kind-DEV-INO) and its key. */
void kr__cache_file(char name[64], uint64_t key[3], const char *kind,
		    const struct kr__file_id *f);
void kr__cache_cpuid_load(void);
void kr__cache_cpuid_save(void);
/* rewrite.c's known sites that were learnt since they were last written */
void kr__rw_save(void);

/* ---- x86dec.c: instruction lengths, for rewriting at boundaries ---- */
enum {
	KR_INSN_OTHER,
	KR_INSN_JMP,        /* jmp rel8/rel32 */
	KR_INSN_JCC,        /* jcc rel8/rel32, loop*, jrcxz */
	KR_INSN_CALL,       /* call rel32 */
	KR_INSN_RET,        /* ret, ret imm16, lret */
	KR_INSN_JMP_IND,    /* ff /4, ff /5 */
	KR_INSN_CALL_IND,   /* ff /2, ff /3 */
	KR_INSN_SYSCALL,
	KR_INSN_CPUID,
	KR_INSN_UD,         /* ud0, ud1, ud2, int3, int1, hlt */
};
struct kr__insn {
	uint8_t len;        /* bytes; 0: not decoded (unknown or invalid) */
	uint8_t kind;       /* KR_INSN_* */
	uint8_t riprel;     /* has a rip-relative memory operand (ModRM mod=00 rm=101) */
	int64_t target;     /* _JMP/_JCC/_CALL: offset of the target from the instruction's start */
};
/* Decode the instruction at p (at most `max` bytes readable), 64-bit mode:
 * its length, or 0 when it is invalid, unknown or longer than max. */
int kr__x86_decode(const uint8_t *p, size_t max, struct kr__insn *out);

/* ---- procfs.c ---- */
#define KR__NOT_PROC (-(1l << 40))
/* An open of one of the μprocess's own /proc files (its maps): the host fd
 * of what it reads there, or -errno; KR__NOT_PROC for any other path. */
long kr__proc_open(struct kr_uproc *up, const char *path, long flags);

/* ---- sys.c and sys_*.c (sys.h): what each system call does ---- */
long kr__sys(struct kr__uthr *t, long nr, long a[6]);
void kr__sys_init(void);                  /* at the layer's start: the index */
/* docs/uproc.md's table of every intercepted call, in Markdown: 0, EIO,
 * ENOTSUP where there are no μprocesses */
int kr__sys_table_md(FILE *out);
void kr__alarm_stop(struct kr_uproc *up); /* at its end: no timer's signal after (sys_sig.c) */
void kr__timers_delete(struct kr_uproc *up); /* timer_create's, at an exec */

/* ---- x86_64/uaccess.S: the μprocess's memory, a fault an -EFAULT ---- */
long kr__ucopy(void *dst, const void *src, size_t n);       /* 0 or -EFAULT */
long kr__ustr(char *dst, const char *src, size_t cap);      /* length, -ENAMETOOLONG, -EFAULT */
long kr__uprobe(void *p, size_t n, int write);               /* 0 or -EFAULT */
/* The buffer of a read or write of mm's on a karui pipe, before the
 * pipe's stream (sync/stream.c) copies into or out of it, perhaps from
 * another thread, where a fault would be the host's: 0 or -EFAULT.  A
 * read moves at most a pipe's capacity.  Each page is read; a read's is
 * written too (its byte written back) unless mm's writable ranges cover
 * it: so a read, as the kernel's, makes private no page that it does not
 * fill (an untouched page read is the kernel's zero page). */
#ifdef __x86_64__
static inline __attribute__((always_inline)) long
kr__upipe_probe(const struct kr_uproc *mm, void *buf, size_t len, int write)
{
	size_t n = write || len < KR__PIPE_CAP ? len : KR__PIPE_CAP;
	int w = !write && (__atomic_load_n(&mm->wr.lost, __ATOMIC_RELAXED) ||
			   !kr__rl_covers(&mm->wr, (uintptr_t)buf, (uintptr_t)buf + n));
	return kr__uprobe(buf, n, w);
}
#endif
long kr__ucmpxchg32(uint32_t *p, uint32_t old, uint32_t nv);  /* *p before, or -EFAULT */
extern char kr__ua_begin[], kr__ua_end[], kr__ua_fault[];

/* ---- x86_64/gate.S ---- */
long kr__img_on(uintptr_t sp, long (*fn)(void *), void *arg);
extern char kr__img_gate[], kr__img_gate_end[];
void kr__img_restorer(void);
void kr__img_sigsys(int, siginfo_t *, void *);
void kr__img_sigfault(int, siginfo_t *, void *);
void kr__img_wrpkru(uint32_t pkru); /* the layer's WRPKRUs lie between: */
extern const unsigned char kr__img_wrpkru_lo[], kr__img_wrpkru_hi[];
void kr__img_fastcall(void);
void kr__img_fastcall_novec(void);
void kr__img_fastcall_nf(void);
void kr__img_fastcall_novec_nf(void);
void kr__img_cpuid(void);
__attribute__((noreturn)) void kr__img_start(uint64_t entry, uintptr_t sp, uint64_t fs,
					     uint64_t rdx);
/* Back into a μprocess's code through a signal frame karui keeps at
 * sp - 8 (a vfork's parent resumes: uproc.c), with thread pointer fs. */
__attribute__((noreturn)) void kr__img_sigreturn(uintptr_t sp, uint64_t fs);
/* AT_ENTRY of an image that is to be kept: its system call tells karui that
 * ld.so hands over to the program, and it then jumps to the program. */
void kr__img_handover(void);
extern char kr__img_handover_ret[];
#define KR__NR_HANDOVER 0x4b52
/* A call into a μprocess's exports (call.c): on its call stack with its
 * thread pointer and BLOCK, back with the VP's and ALLOW; the result.
 * kr__img_call_back returns from it at once (its thread ended). */
long kr__img_call(struct kr__xcall *xc);
__attribute__((noreturn)) void kr__img_call_back(struct kr__xcall *xc);

/* per VP: what gs:0 holds on a thread armed for μprocesses */
struct kr__img_vp {
	uint8_t selector;   /* offset 0: Syscall User Dispatch's selector byte */
	uint8_t pad[3];
	int32_t tid;        /* offset 4: the thread it arms; 0: free (uproc.c) */
	uint64_t host_fs;   /* offset 8: the VP's own thread pointer */
	struct kr__img_vp *next; /* every record made, free ones too */
	struct kr__uthr *thr; /* offset 24: the thread whose code it runs (its
			       * attn first) */
	uint64_t stash;     /* offset 32: %rax across kr__img_deliver's trap */
	/* the time slice (uproc.c): the code it runs is to yield its VP
	 * (kr__img_signal, at the kick that follows); it ran a μprocess's
	 * code at the last tick.  Atomic. */
	uint8_t preempt, seen;
	uint8_t pad2[2];
	/* offset 44: the PKRU this VP's thread runs with while it shows
	 * `shown` (iso.c: that μprocess's key open, every other closed); 0
	 * while isolated μprocesses have no protection keys.  Written by
	 * that thread alone, as it writes PKRU; gate.S's handlers write it
	 * back first, as the kernel enters them with other keys closed. */
	uint32_t pkru;
	/* the isolated μprocess this VP shows (iso.c), or NULL; under iso.c's lock */
	struct kr_uproc *shown;
};
_Static_assert(sizeof(struct kr__img_vp) <= 64, "a VP's record is 64 bytes");
_Static_assert(__builtin_offsetof(struct kr__img_vp, pkru) == 44, "gate.S: VP_PKRU");
/* The time slice's end (kr__img_signal): the thread is to run
 * kr__img_yield, whose call (KR__NR_YIELD) yields its microprocess, then
 * returns through its rt_sigreturn to where it was. */
#define KR__NR_YIELD 0x4b54
void kr__img_yield(void);
extern char kr__img_yield_ret[], kr__img_yield_end[]; /* after its two calls */
/* 1 once when the VP is to yield the thread it runs (and it is no more) */
int kr__img_preempted(void);
/* A call that kr__img_deliver makes: the way back from a rewritten site
 * has signals to deliver, which needs the kernel's frame of a trap. */
#define KR__NR_DELIVER 0x4b53
extern char kr__img_deliver_ret[];
/* gate.S's ways back, where a kick (signal.c) finds a frame to deliver
 * into: kr__img_back's check and return (the frame above %rsp), the
 * restorer (the frame at %rsp), the fastcalls' checks and returns. */
extern char kr__img_back_chk[], kr__img_back_ret[], kr__img_back_ret2[];
extern char kr__img_restorer_end[];
extern const uint64_t kr__img_fast_tails[8];
void kr__img_sigkick(int, siginfo_t *, void *);
/* What the way back does after kr__img_signal: */
enum { KR__BACK_DIE, KR__BACK_AGAIN, KR__BACK_NOW };
#define KR__SIGKICK SIGSTKFLT /* to a VP running a μprocess's code */
#endif
