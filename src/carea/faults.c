/*
 * karui C-area — the page-fault notifier (seed 004 §3.3, "Notifier"
 * threads): a region whose pages come when first touched, and a thread
 * that serves its faults and tells the scheduler's callbacks of each one
 * synchronously, as it starts and as it ends.
 *
 * The kernel's half is userfaultfd: the region is an anonymous mapping
 * registered for missing pages, so that a fault on a page not there yet
 * waits in the kernel and sends a message on the region's userfaultfd,
 * with the faulting thread's id (UFFD_FEATURE_THREAD_ID).  The notifier, a
 * thread of the region's own (seed 004's notifier is a kernel thread
 * made for the event, apart from the VPs), reads the messages, calls
 * start(page, tid), fill(page, buf), puts the page in with UFFDIO_COPY,
 * calls end(page, tid), and only then wakes the threads that wait on the
 * page (UFFDIO_WAKE): a faulting thread goes on after its fault's end was
 * told.  A page that another fault's copy put in meanwhile (EEXIST) is not
 * counted again.  The faulting VP waits in the kernel meanwhile: to the
 * core it is a VP that blocked (its queue is stolen from; under kr_carea
 * its processor goes to a stopped VP of the process).
 *
 * userfaultfd is asked for with the least the kernel may refuse: through
 * /dev/userfaultfd, else the system call, both serving the kernel's own
 * accesses too; else the system call for user-mode faults only
 * (UFFD_USER_MODE_ONLY, allowed when vm.unprivileged_userfaultfd is 0),
 * where a system call that touches a missing page fails with EFAULT.
 *
 * The notifier waits in poll on the userfaultfd and an eventfd that
 * kr_faults_destroy writes; it uses no karui call, so a region serves
 * faults before kr_init, after kr_fini and on threads that are no VP.
 *
 * Rejected: UFFD_FEATURE_SIGBUS, with the faulting microprocess taken off
 * its VP in the SIGBUS handler (kr__preempt) and made ready when its page
 * is in, so that the VP itself runs on: kr__preempt hands what it takes to
 * the processor allocator's idle hook, so it needs kr_carea, and it
 * refuses in many places (karui's own code, a blocking section, the
 * sanitizer builds) where the fault would then need serving in the
 * handler.  The VP's wait is the kernel's, as seed 004's kernel thread
 * blocked in a page fault is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "karui/carea.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

#define MAX_LEN ((size_t)1 << 40)

struct kr_faults {
	unsigned char *base;
	size_t len, page;
	int uffd, stopfd;
	int user_only;
	kr_fault_ops ops;
	void *arg;
	unsigned char *buf; /* the page fill writes */
	pthread_t thread;
	uint64_t faults, filled, failed; /* atomic */
};

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

/* One fault: the page in, the callbacks told. */
static void serve(kr_faults *r, uintptr_t at, int tid)
{
	void *page = (void *)(at & ~(uintptr_t)(r->page - 1));
	__atomic_add_fetch(&r->faults, 1, __ATOMIC_RELAXED);
	if (r->ops.start)
		r->ops.start(r->arg, page, tid);
	if (r->ops.fill(r->arg, page, r->buf)) {
		memset(r->buf, 0, r->page);
		__atomic_add_fetch(&r->failed, 1, __ATOMIC_RELAXED);
	}
	struct uffdio_copy c = {.dst = (uintptr_t)page,
				.src = (uintptr_t)r->buf,
				.len = r->page,
				.mode = UFFDIO_COPY_MODE_DONTWAKE};
	int e;
	while ((e = ioctl(r->uffd, UFFDIO_COPY, &c)) < 0 && errno == EAGAIN)
		c.copy = 0; /* the mapping changed meanwhile: again */
	if (e == 0)
		__atomic_add_fetch(&r->filled, 1, __ATOMIC_RELAXED);
	/* (EEXIST: another fault's copy put it in) */
	if (r->ops.end)
		r->ops.end(r->arg, page, tid);
	/* the faulting threads go on only now: end came first, as did the
	 * counts */
	struct uffdio_range w = {(uintptr_t)page, r->page};
	ioctl(r->uffd, UFFDIO_WAKE, &w);
}

static void *notifier(void *arg)
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
			for (size_t i = 0; i < (size_t)n / sizeof m[0]; i++)
				if (m[i].event == UFFD_EVENT_PAGEFAULT)
					serve(r, (uintptr_t)m[i].arg.pagefault.address,
					      (int)m[i].arg.pagefault.feat.ptid);
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
	free(r);
}

int kr_faults_create(kr_faults **out, size_t len, const kr_fault_ops *ops, void *arg)
{
	if (!out || !ops || !ops->fill || !len || len > MAX_LEN)
		return EINVAL;
	kr_faults *r = calloc(1, sizeof *r);
	if (!r)
		return ENOMEM;
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
	if (!err && pthread_create(&r->thread, NULL, notifier, r))
		err = EAGAIN;
	if (err) {
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
		.user_only = r->user_only,
	};
	return 0;
}

int kr_faults_destroy(kr_faults *r)
{
	if (!r)
		return EINVAL;
	uint64_t one = 1;
	(void)!write(r->stopfd, &one, sizeof one);
	pthread_join(r->thread, NULL);
	struct uffdio_range range = {(uintptr_t)r->base, r->len};
	ioctl(r->uffd, UFFDIO_UNREGISTER, &range);
	region_free(r);
	return 0;
}
