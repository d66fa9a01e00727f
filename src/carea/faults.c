/*
 * karui C-area — the page-fault notifier (seed 004 §3.3, "Notifier"
 * threads): a region whose pages come when first touched, and threads
 * that serve its faults and tell the scheduler's callbacks of each one
 * synchronously, as it starts and as it ends; a microprocess that faults
 * waits alone, and the others of its VP run until the page is in.
 *
 * The kernel's half is userfaultfd: the region is an anonymous mapping
 * registered for missing pages, so that a fault on a page not there yet
 * waits in the kernel and sends a message on the region's userfaultfd,
 * with the faulting thread's id (UFFD_FEATURE_THREAD_ID).  Two threads of
 * the region's own (seed 004's notifier is a kernel thread made for the
 * event, apart from the VPs) serve it: the reader reads the messages and
 * queues them; the filler, for each page not in yet, calls start(page,
 * tid), fill(page, buf), puts the page in with UFFDIO_COPY, calls
 * end(page, tid), and only then lets the faulting threads go on
 * (UFFDIO_WAKE, and the microprocesses below).  A message for a page that
 * is in by then (a fault's duplicate after a retry, another thread's
 * fault on a page already filled) is no fault of its own: it is counted
 * and told once.
 *
 * The faulting microprocess alone waits.  A wait in handle_userfault is
 * interruptible for a fault from user mode: a signal ends it
 * (VM_FAULT_RETRY), its handler runs at the faulting instruction, and
 * the access is made again after rt_sigreturn.  So the reader, for a
 * fault by a VP's thread (kr__vp_tid) blocked in user mode (its
 * /proc/self/task/TID/syscall says -1: no system call, whose own access
 * a signal does not end: the kernel makes it again at once while one is
 * pending, a fatal one aside, until the page is in), while the signal's handler is
 * still karui's (installed at the first region; a foreign signal goes to
 * the handler it replaced), takes a request (below) and sends that thread
 * KR__SIGPAGE (SIGRTMAX) with the request in si_value
 * (rt_tgsigqueueinfo).  The handler, if the code it interrupted is a
 * microprocess of that VP that may be taken off it (kr__signal_worker: the
 * VP's own thread pointer, not a μprocess's; not in karui's code, the C
 * library's or ld.so's: kr__in_runtime; and kr__preempt's refusals: a
 * blocking section, a kr_spin held, karui's code on its stack, the
 * sanitizer builds), and the page is still missing (mincore), takes it
 * with kr__preempt_hold: its context saved on its own stack, the VP goes
 * on with its next microprocess, and the idle loop hands it (held) to the
 * request.  After the page's end the filler makes it ready
 * (kr__mp_ready_any, from that thread that is no VP: through the
 * scheduler, or posted to the one VP); it resumes at the instruction, and
 * the access finds the page.  Its permit is never touched: a wakeup that
 * comes meanwhile is kept, as for a running microprocess.  Anywhere the
 * handler declines, it returns: the access is made again and waits in the
 * kernel, as every fault did before (the fallback: threads that are no
 * VP, the kernel's own accesses, the code above, a request table full).
 *
 * Requests.  The signal may come late (the thread moved on meanwhile: the
 * fault ended by another signal, its microprocess taken by the C-area's
 * time slice), so its value names a slot of a static table, never freed,
 * and the slot's word carries a sequence that each free moves on: a late
 * handler's claim fails, and a region destroyed meanwhile is never
 * touched.  The value's top byte is a tag: a KR__SIGPAGE the program
 * queues to itself goes to its own handler.  The word is seq << 8 |
 * state: FREE; SETUP (the reader fills the slot in); SENT (the reader sent the
 * signal); TAKING (the handler claimed it, up to the idle loop's hand-over
 * or its refusal); HELD (h: the microprocess's handle); DONE (the page came
 * while TAKING: the taker frees it and makes the microprocess ready
 * itself).  The filler, after the page's end: SENT -> FREE, TAKING ->
 * DONE, HELD -> FREE and ready.  The handler claims (SENT -> TAKING)
 * before it looks at the page, and the filler puts the page in before it
 * looks at the requests: one of the two sees the other, so no
 * microprocess is held for a page that is in.  A microprocess the signal
 * finds that is not the faulting one (the rare late signal) is held until
 * that page is in, and runs on, exactly, then: a delay, nothing else.
 *
 * kr_faults_destroy ends both threads (the filler after the page it is
 * filling), unregisters the region, so that the kernel's waiters make
 * their access again and get zeros, makes every microprocess still held
 * for it ready (its access gets the page or zeros too), and waits until
 * each has resumed (kr_mp_yield on a VP) before it unmaps the region.
 *
 * userfaultfd is asked for with the least the kernel may refuse: through
 * /dev/userfaultfd, else the system call, both serving the kernel's own
 * accesses too; else the system call for user-mode faults only
 * (UFFD_USER_MODE_ONLY, allowed when vm.unprivileged_userfaultfd is 0),
 * where a system call that touches a missing page fails with EFAULT.
 *
 * The reader waits in poll on the userfaultfd and an eventfd that
 * kr_faults_destroy writes; neither thread needs a VP, so a region serves
 * faults before kr_init, after kr_fini and on threads that are no VP.
 * Both block every signal: the program's are for its own threads.
 *
 * Rejected: UFFD_FEATURE_SIGBUS, the fault served in the SIGBUS handler
 * where the microprocess cannot be taken (a handler that waits for a
 * fill); serving the faults on the reader (a fault that comes during a
 * slow fill would wait for it before its VP is told, its VP's other
 * microprocesses with it); making the held microprocess sleep on its
 * permit (kr_mp_unpark for the page's end: a wakeup meant for the program
 * would end the page's wait, and two collapse into one permit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "karui/carea.h"
#include "karui/core.h"
#include "../core/alloc.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

#define MAX_LEN ((size_t)1 << 40)

#define KR__SIGPAGE SIGRTMAX /* the reader's to a VP (see the top) */

enum { QLEN = 256 }; /* faults read, not yet served */
struct fault {
	uintptr_t page;
	int tid;
};

struct kr_faults {
	unsigned char *base;
	size_t len, page;
	int uffd, stopfd;
	int user_only;
	kr_fault_ops ops;
	void *arg;
	unsigned char *buf; /* the page fill writes */
	pthread_t reader, filler;
	int threads;        /* how many of the two started */
	pthread_mutex_t lock; /* the queue: */
	pthread_cond_t more, room;
	struct fault q[QLEN];
	uint64_t head, tail;
	int stop;
	uint64_t faults, filled, failed, parked; /* atomic */
	uint32_t unresumed; /* held, not resumed yet (atomic) */
};

enum { REQ_FREE, REQ_SETUP, REQ_SENT, REQ_TAKING, REQ_HELD, REQ_DONE };
#define SEQ_MASK (((uint64_t)1 << 48) - 1)
#define VALUE_TAG 0x6bu
enum { NREQ = 128 }; /* microprocesses held at once, all regions */
static struct req {
	uint64_t word; /* seq << 8 | REQ_* (atomic) */
	kr_faults *r;  /* the fields: written in REQ_SETUP (atomic) */
	uintptr_t page;
	kr_mp *h;      /* REQ_HELD: the microprocess's handle */
} REQ[NREQ];
static struct sigaction old_page;
static pthread_once_t installed = PTHREAD_ONCE_INIT;

/* A userfaultfd for this process: fd, or -errno. */
static int uffd_open(int *user_only)
{
	int flags = O_CLOEXEC | O_NONBLOCK, err;
	*user_only = 0;
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		int fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
		close(dev);
		if (fd >= 0)
			return fd;
	}
	int fd = (int)syscall(SYS_userfaultfd, flags);
	if (fd >= 0)
		return fd;
	err = errno;
	if (err == ENOSYS)
		return -ENOSYS;
	fd = (int)syscall(SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY);
	if (fd >= 0) {
		*user_only = 1;
		return fd;
	}
	return -(errno == EINVAL ? err : errno);
}

/* Is the page at p in?  (A region gone says yes: nothing to wait for.) */
static int present(const kr_faults *r, uintptr_t p)
{
	unsigned char v = 0;
	return mincore((void *)p, r->page, &v) != 0 || (v & 1);
}

/* ---------------- requests (see the top) ---------------- */

/* The word: the sequence (48 bits, wrapping) and the state. */
static uint64_t word(uint64_t seq, unsigned st) { return (seq & SEQ_MASK) << 8 | st; }
/* The signal's value: a tag in the top byte (a program's own sigqueue of
 * KR__SIGPAGE goes to its handler), the sequence, the slot. */
static uintptr_t value(uint64_t seq, unsigned i)
{
	return (uintptr_t)VALUE_TAG << 56 | (uintptr_t)(seq & SEQ_MASK) << 8 | i;
}
static int value_ours(uintptr_t v) { return v >> 56 == VALUE_TAG && (v & 0xff) < NREQ; }
static uint64_t value_seq(uintptr_t v) { return (v >> 8) & SEQ_MASK; }
static uint64_t seq_of(uint64_t w) { return w >> 8; }
static unsigned state_of(uint64_t w) { return (unsigned)(w & 0xff); }

static int req_cas(struct req *q, uint64_t from, uint64_t to)
{
	return __atomic_compare_exchange_n(&q->word, &from, to, 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

/* The taker is done with q (refused, or found DONE): it is free. */
static void req_drop(struct req *q, uint64_t seq)
{
	if (!req_cas(q, word(seq, REQ_TAKING), word(seq + 1, REQ_FREE)))
		__atomic_store_n(&q->word, word(seq + 1, REQ_FREE), __ATOMIC_RELEASE); /* DONE */
}

/* The idle loop of the VP that took h (kr__preempt_hold's held). */
static void held(kr_mp *h, uintptr_t v)
{
	struct req *q = &REQ[v & 0xff];
	uint64_t seq = value_seq(v);
	kr_faults *r = __atomic_load_n(&q->r, __ATOMIC_RELAXED);
	__atomic_store_n(&q->h, h, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->unresumed, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->parked, 1, __ATOMIC_RELAXED);
	if (!req_cas(q, word(seq, REQ_TAKING), word(seq, REQ_HELD))) {
		req_drop(q, seq); /* the page came meanwhile */
		kr__mp_ready_any(h);
	}
}

/* On the VP that resumes a held microprocess (kr__preempt_hold's hook). */
static void resumed(uintptr_t rp)
{
	kr_faults *r = (kr_faults *)rp;
	__atomic_sub_fetch(&r->unresumed, 1, __ATOMIC_RELEASE);
}

static void chain(int sig, siginfo_t *si, void *uc)
{
	if (old_page.sa_flags & SA_SIGINFO) {
		if (old_page.sa_sigaction)
			old_page.sa_sigaction(sig, si, uc);
	} else if (old_page.sa_handler != SIG_IGN && old_page.sa_handler != SIG_DFL) {
		old_page.sa_handler(sig);
	}
}

static void on_page(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uintptr_t v = (uintptr_t)si->si_value.sival_ptr;
	if (si->si_code != SI_QUEUE || si->si_pid != getpid() || !value_ours(v)) {
		chain(sig, si, ucv);
		return;
	}
	struct req *q = &REQ[v & 0xff];
	uint64_t seq = value_seq(v);
	if (!req_cas(q, word(seq, REQ_SENT), word(seq, REQ_TAKING)))
		return; /* late: the page is in */
	/* first, whether this thread's data are ours to use (errno) */
	if (!kr__signal_worker()) {
		req_drop(q, seq);
		return;
	}
	int saved = errno;
	kr_faults *r = __atomic_load_n(&q->r, __ATOMIC_RELAXED);
#if defined(__x86_64__)
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.pc;
#else
	uintptr_t ip = 0;
#endif
	if (!kr__in_runtime(ip) && !present(r, __atomic_load_n(&q->page, __ATOMIC_RELAXED)))
		kr__preempt_hold(uc, held, v, resumed, (uintptr_t)r);
	/* here only if it refused: the access waits in the kernel */
	req_drop(q, seq);
	errno = saved;
}

static void install(void)
{
	struct sigaction sa = {.sa_sigaction = on_page,
			       .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART};
	sigfillset(&sa.sa_mask);
	sigaction(KR__SIGPAGE, &sa, &old_page);
}

/* Is thread tid blocked outside any system call (a user-mode fault)? */
static int user_mode_wait(int tid)
{
	char path[64], buf[8] = {0};
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n >= 3 && !memcmp(buf, "-1 ", 3);
}

/* The reader: ask VP tid to hold the microprocess that faulted on page p,
 * if it may. */
static void ask(kr_faults *r, uintptr_t p, int tid)
{
	struct sigaction now;
	if (!kr__vp_tid(tid) || present(r, p) || !user_mode_wait(tid) ||
	    sigaction(KR__SIGPAGE, NULL, &now) || now.sa_sigaction != on_page)
		return; /* (the program took the signal back: none sent) */
	for (unsigned i = 0; i < NREQ; i++) {
		struct req *q = &REQ[i];
		uint64_t w = __atomic_load_n(&q->word, __ATOMIC_RELAXED);
		if (state_of(w) != REQ_FREE || !req_cas(q, w, word(seq_of(w), REQ_SETUP)))
			continue;
		__atomic_store_n(&q->r, r, __ATOMIC_RELAXED);
		__atomic_store_n(&q->page, p, __ATOMIC_RELAXED);
		__atomic_store_n(&q->word, word(seq_of(w), REQ_SENT), __ATOMIC_RELEASE);
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_signo = KR__SIGPAGE;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_ptr = (void *)value(seq_of(w), i);
		if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, KR__SIGPAGE, &si))
			req_cas(q, word(seq_of(w), REQ_SENT), word(seq_of(w) + 1, REQ_FREE));
		return;
	}
}

/* The page at p is in (or the region goes): its requests end. */
static void finish(kr_faults *r, uintptr_t p)
{
	for (unsigned i = 0; i < NREQ; i++) {
		struct req *q = &REQ[i];
		for (;;) {
			uint64_t w = __atomic_load_n(&q->word, __ATOMIC_ACQUIRE), seq = seq_of(w);
			unsigned st = state_of(w);
			if (st == REQ_FREE || st == REQ_SETUP || st == REQ_DONE ||
			    __atomic_load_n(&q->r, __ATOMIC_RELAXED) != r ||
			    (p && __atomic_load_n(&q->page, __ATOMIC_RELAXED) != p))
				break;
			kr_mp *h = __atomic_load_n(&q->h, __ATOMIC_RELAXED);
			if (st == REQ_SENT && req_cas(q, w, word(seq + 1, REQ_FREE)))
				break;
			if (st == REQ_TAKING && req_cas(q, w, word(seq, REQ_DONE)))
				break;
			if (st == REQ_HELD && req_cas(q, w, word(seq + 1, REQ_FREE))) {
				kr__mp_ready_any(h);
				break;
			}
		}
	}
}

/* ---------------- the two threads ---------------- */

/* One fault: the page in, the callbacks told, its waiters on. */
static void serve(kr_faults *r, uintptr_t page, int tid)
{
	if (!present(r, page)) {
		__atomic_add_fetch(&r->faults, 1, __ATOMIC_RELAXED);
		if (r->ops.start)
			r->ops.start(r->arg, (void *)page, tid);
		if (r->ops.fill(r->arg, (void *)page, r->buf)) {
			memset(r->buf, 0, r->page);
			__atomic_add_fetch(&r->failed, 1, __ATOMIC_RELAXED);
		}
		struct uffdio_copy c = {.dst = page,
					.src = (uintptr_t)r->buf,
					.len = r->page,
					.mode = UFFDIO_COPY_MODE_DONTWAKE};
		int e;
		while ((e = ioctl(r->uffd, UFFDIO_COPY, &c)) < 0 && errno == EAGAIN)
			c.copy = 0; /* the mapping changed meanwhile: again */
		if (e == 0)
			__atomic_add_fetch(&r->filled, 1, __ATOMIC_RELAXED);
		/* (EEXIST: the program put something there itself) */
		if (r->ops.end)
			r->ops.end(r->arg, (void *)page, tid);
	}
	/* the faulting threads and microprocesses go on only now: end came
	 * first, as did the counts */
	struct uffdio_range w = {page, r->page};
	ioctl(r->uffd, UFFDIO_WAKE, &w);
	finish(r, page);
}

static void *filler(void *arg)
{
	kr_faults *r = arg;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->stop && r->head == r->tail)
			pthread_cond_wait(&r->more, &r->lock);
		if (r->stop)
			break;
		struct fault f = r->q[r->head++ % QLEN];
		pthread_cond_signal(&r->room);
		pthread_mutex_unlock(&r->lock);
		serve(r, f.page, f.tid);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void *reader(void *arg)
{
	kr_faults *r = arg;
	struct pollfd p[2] = {{.fd = r->uffd, .events = POLLIN}, {.fd = r->stopfd, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		struct uffd_msg m[16];
		ssize_t n;
		while ((n = read(r->uffd, m, sizeof m)) > 0)
			for (size_t i = 0; i < (size_t)n / sizeof m[0]; i++) {
				if (m[i].event != UFFD_EVENT_PAGEFAULT)
					continue;
				struct fault f = {(uintptr_t)m[i].arg.pagefault.address &
							  ~(uintptr_t)(r->page - 1),
						  (int)m[i].arg.pagefault.feat.ptid};
				ask(r, f.page, f.tid);
				pthread_mutex_lock(&r->lock);
				while (!r->stop && r->tail - r->head == QLEN)
					pthread_cond_wait(&r->room, &r->lock);
				r->q[r->tail++ % QLEN] = f;
				pthread_cond_signal(&r->more);
				pthread_mutex_unlock(&r->lock);
			}
	}
	return NULL;
}

static void region_free(kr_faults *r)
{
	if (r->uffd >= 0)
		close(r->uffd);
	if (r->stopfd >= 0)
		close(r->stopfd);
	if (r->base)
		munmap(r->base, r->len);
	if (r->buf)
		munmap(r->buf, r->page);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->more);
	pthread_cond_destroy(&r->room);
	free(r);
}

/* The threads end: the filler after the page it is filling. */
static void threads_stop(kr_faults *r)
{
	uint64_t one = 1;
	(void)!write(r->stopfd, &one, sizeof one);
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_broadcast(&r->more);
	pthread_cond_broadcast(&r->room);
	pthread_mutex_unlock(&r->lock);
	if (r->threads > 0)
		pthread_join(r->reader, NULL);
	if (r->threads > 1)
		pthread_join(r->filler, NULL);
}

int kr_faults_create(kr_faults **out, size_t len, const kr_fault_ops *ops, void *arg)
{
	if (!out || !ops || !ops->fill || !len || len > MAX_LEN)
		return EINVAL;
	kr_faults *r = calloc(1, sizeof *r);
	if (!r)
		return ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->more, NULL);
	pthread_cond_init(&r->room, NULL);
	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->len = (len + r->page - 1) & ~(r->page - 1);
	r->ops = *ops;
	r->arg = arg;
	r->stopfd = -1;
	r->uffd = uffd_open(&r->user_only);
	if (r->uffd < 0) {
		int err = -r->uffd;
		r->uffd = -1;
		region_free(r);
		return err;
	}
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_THREAD_ID};
	int err = 0;
	if (ioctl(r->uffd, UFFDIO_API, &api))
		err = errno == EINVAL ? ENOSYS : errno;
	r->base = err ? NULL : mmap(NULL, r->len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	r->buf = err ? NULL : mmap(NULL, r->page, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!err && (r->base == MAP_FAILED || r->buf == MAP_FAILED)) {
		err = ENOMEM;
		r->base = r->base == MAP_FAILED ? NULL : r->base;
		r->buf = r->buf == MAP_FAILED ? NULL : r->buf;
	}
	struct uffdio_register reg = {.range = {(uintptr_t)r->base, r->len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (!err && ioctl(r->uffd, UFFDIO_REGISTER, &reg))
		err = errno == ENOMEM ? ENOMEM : EPERM;
	if (!err && (r->stopfd = eventfd(0, EFD_CLOEXEC)) < 0)
		err = ENOMEM;
	if (!err) {
		pthread_once(&installed, install);
		kr__preempt_want();
	}
	/* the threads take none of the program's signals */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!err && !pthread_create(&r->reader, NULL, reader, r))
		r->threads++;
	if (r->threads && !pthread_create(&r->filler, NULL, filler, r))
		r->threads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err && r->threads < 2)
		err = EAGAIN;
	if (err) {
		threads_stop(r);
		region_free(r);
		return err;
	}
	*out = r;
	return 0;
}

void *kr_faults_addr(const kr_faults *r) { return r ? r->base : NULL; }
size_t kr_faults_size(const kr_faults *r) { return r ? r->len : 0; }

int kr_faults_stats_get(const kr_faults *r, kr_faults_stats *out)
{
	if (!r || !out)
		return EINVAL;
	*out = (kr_faults_stats){
		.faults = __atomic_load_n(&r->faults, __ATOMIC_RELAXED),
		.filled = __atomic_load_n(&r->filled, __ATOMIC_RELAXED),
		.failed = __atomic_load_n(&r->failed, __ATOMIC_RELAXED),
		.parked = __atomic_load_n(&r->parked, __ATOMIC_RELAXED),
		.user_only = r->user_only,
	};
	return 0;
}

/* Is a request of r still on its way to its idle loop? */
static int taking(const kr_faults *r)
{
	for (unsigned i = 0; i < NREQ; i++) {
		unsigned st = state_of(__atomic_load_n(&REQ[i].word, __ATOMIC_ACQUIRE));
		if ((st == REQ_TAKING || st == REQ_DONE) &&
		    __atomic_load_n(&REQ[i].r, __ATOMIC_RELAXED) == r)
			return 1;
	}
	return 0;
}

/* Let the held microprocesses run: yield on a VP, else sleep a little. */
static void let_run(void)
{
	if (kr_mp_yield() == EPERM)
		usleep(100);
}

int kr_faults_destroy(kr_faults *r)
{
	if (!r)
		return EINVAL;
	threads_stop(r);
	struct uffdio_range range = {(uintptr_t)r->base, r->len};
	ioctl(r->uffd, UFFDIO_UNREGISTER, &range);
	/* the kernel's waiters get zeros, and so do the held microprocesses,
	 * whose pages the filler did not come to; the region stays until
	 * each has resumed */
	do {
		finish(r, 0);
		let_run();
	} while (taking(r));
	while (__atomic_load_n(&r->unresumed, __ATOMIC_ACQUIRE))
		let_run();
	region_free(r);
	return 0;
}
