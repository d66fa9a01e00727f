/*
 * karui image layer — a μprocess's system calls on sockets.
 *
 * A socket it makes (socket, socketpair, accept) is the kernel's, made as
 * natively and installed in its fd table: its host fd is close-on-exec
 * and O_NONBLOCK (sys_fd.c: kr__adopt, KR__OWN_SOCK), while SOCK_CLOEXEC
 * and SOCK_NONBLOCK are the μprocess's fd's close-on-exec bit and its
 * open file's O_NONBLOCK.  The calls that only set or read something
 * (bind, listen, getsockname, setsockopt, ...) are the kernel's on the
 * host fd, with the μprocess's pointers, which the kernel checks.
 *
 * A call that would wait is made without waiting, and again each time the
 * host fd is ready (sys_fd.c: kr__fd_again): only the μprocess's
 * microprocess waits, a signal ends the wait (EINTR, or a restart),
 * and SO_RCVTIMEO and SO_SNDTIMEO bound it as natively (EAGAIN).  What
 * it does blocking, it does to the end: a blocking send of a stream sends
 * it all, a MSG_WAITALL receive fills the buffer (or meets the end); a
 * connect in progress ends with the socket's error.  Its own O_NONBLOCK
 * and MSG_DONTWAIT mean no wait, as natively.  SIGPIPE: the kernel's calls
 * take MSG_NOSIGNAL (no signal reaches the host), and a send to a closed
 * stream without MSG_NOSIGNAL sends the μprocess SIGPIPE itself.  A socket
 * it was given at spawn (not karui's) may be blocking and shared: accept
 * and connect there wait in the kernel with the VP handed off.
 *
 * The fds that SCM_RIGHTS carries are numbers of the sender's own: those
 * the μprocess sends are its fds made host fds (a karui pipe has none:
 * EBADF), walked as the kernel walks control messages, so that no number
 * of the host's reaches the kernel from it; those it receives become fds
 * of its own.  An open file it sends is no longer its alone: its host fd
 * takes the μprocess's O_NONBLOCK, which the receiver shares, as natively
 * (kr__disown).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sys.h"

#define CTL_MAX 65536 /* control bytes of a sendmsg (more: ENOBUFS, as past optmem_max) */

long kr__sys_socket(struct kr_uproc *up, long nr, long a[6])
{
	long r = kr__pass(nr, (long[6]){a[0], a[1] | SOCK_CLOEXEC | SOCK_NONBLOCK, a[2]});
	return kr__adopt(up, r, O_RDWR | (a[1] & SOCK_NONBLOCK ? O_NONBLOCK : 0),
			 !!(a[1] & SOCK_CLOEXEC), KR__OWN_SOCK);
}

long kr__sys_socketpair(struct kr_uproc *up, long nr, long a[6])
{
	int sv[2];
	long r = kr__pass(nr, (long[6]){a[0], a[1] | SOCK_CLOEXEC | SOCK_NONBLOCK, a[2], (long)sv});
	if (r < 0)
		return r;
	long fl = O_RDWR | (a[1] & SOCK_NONBLOCK ? O_NONBLOCK : 0);
	int cloexec = !!(a[1] & SOCK_CLOEXEC);
	long r0 = kr__adopt(up, sv[0], fl, cloexec, KR__OWN_SOCK);
	if (r0 < 0) {
		close(sv[1]);
		return r0;
	}
	long r1 = kr__adopt(up, sv[1], fl, cloexec, KR__OWN_SOCK);
	if (r1 < 0) {
		kr__fd_close(&up->fds, (int)r0);
		return r1;
	}
	int pair[2] = {(int)r0, (int)r1};
	if (PUT(a[3], pair)) {
		kr__fd_close(&up->fds, (int)r0);
		kr__fd_close(&up->fds, (int)r1);
		return -EFAULT;
	}
	return 0;
}

/* bind, listen, getsockname, getpeername, getsockopt, shutdown, and the
 * options of setsockopt that hold no fd: on the host fd (a karui pipe is
 * no socket) */
long kr__sys_on_sock(struct kr_uproc *up, long nr, long a[6])
{
	return kr__with_fd(up, nr, a, 0, -ENOTSOCK);
}

/* An option whose value is an fd (a BPF program's) names one of the
 * μprocess's: its host fd goes to the kernel. */
long kr__sys_setsockopt(struct kr_uproc *up, long nr, long a[6])
{
	if (a[1] != SOL_SOCKET || (a[2] != SO_ATTACH_BPF && a[2] != SO_ATTACH_REUSEPORT_EBPF) ||
	    (size_t)a[4] < sizeof(int))
		return kr__sys_on_sock(up, nr, a);
	int v;
	if (GET(v, a[3]))
		return -EFAULT;
	struct kr__ufile *p = kr__fd_get(&up->fds, v);
	if (!p || p->kind != UF_HOST)
		return -EBADF;
	v = p->hostfd;
	return kr__with_fd(up, nr, (long[6]){a[0], a[1], a[2], (long)&v, sizeof v}, 0, -ENOTSOCK);
}

/* A call on a socket it was given (not karui's, perhaps blocking and
 * shared) that cannot be made without waiting: with the VP handed off. */
static long given_call(struct kr__ufile *f, long nr, long b[6])
{
	if (f->flags & O_NONBLOCK)
		return kr__pass(nr, b);
	kr_blocking_begin();
	long r = kr__pass(nr, b);
	kr_blocking_end();
	return r;
}

long kr__sys_connect(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTSOCK;
	long b[6] = {f->hostfd, a[1], a[2]};
	if (!f->own)
		return given_call(f, nr, b);
	uint64_t deadline = 0;
	for (;;) {
		long r = kr__pass(nr, b);
		if (r == -EINPROGRESS) {
			/* its end: writable, then its error (SO_SNDTIMEO first:
			 * still in progress, as natively) */
			long w = kr__fd_again(up, f, POLLOUT, 0, &deadline);
			if (w)
				return w == -EAGAIN ? -EINPROGRESS : w;
			int e = 0;
			socklen_t l = sizeof e;
			return getsockopt(f->hostfd, SOL_SOCKET, SO_ERROR, &e, &l) ? -errno : -e;
		}
		if (r != -EAGAIN || (f->flags & O_NONBLOCK))
			return r;
		/* EAGAIN: a local socket whose listener's backlog is full, which
		 * no poll of this socket tells the end of: looked at again
		 * every millisecond, till SO_SNDTIMEO */
		if (!deadline)
			deadline = kr__sock_deadline(f->hostfd, 1);
		if (kr_now() >= deadline)
			return r;
		if (kr_mp_sleep_for(1000000) == ECANCELED)
			return -EINTR;
		kr__iso_here(); /* its address goes to the kernel again (iso.c) */
	}
}

/* accept, accept4 */
long kr__sys_accept(struct kr_uproc *up, long nr, long a[6])
{
	long flags = nr == SYS_accept4 ? a[3] : 0;
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTSOCK;
	if (flags & ~(long)(SOCK_CLOEXEC | SOCK_NONBLOCK))
		return -EINVAL;
	long b[6] = {f->hostfd, a[1], a[2], SOCK_CLOEXEC | SOCK_NONBLOCK}, r;
	uint64_t deadline = 0;
	if (!f->own)
		r = given_call(f, SYS_accept4, b);
	else
		do
			r = kr__pass(SYS_accept4, b);
		while (r == -EAGAIN && !(r = kr__fd_again(up, f, POLLIN, 0, &deadline)));
	return kr__adopt(up, r, O_RDWR | (flags & SOCK_NONBLOCK ? O_NONBLOCK : 0),
			 !!(flags & SOCK_CLOEXEC), KR__OWN_SOCK);
}

/* ---------------- sends and receives ---------------- */

/* One of sendto, recvfrom, sendmsg, recvmsg, its arguments for the
 * kernel: the host fd, and for the _msg calls a msghdr of karui's with the
 * μprocess's name and buffers, and iovecs and control of karui's. */
struct xfer {
	long nr;
	long b[6];
	int flags;          /* the μprocess's */
	struct msghdr m;
	size_t ctl_got;     /* recvmsg: control bytes of its first receive */
	int ctl_flags;      /* and its MSG_CTRUNC */
};

static int sends(long nr)
{
	return nr == SYS_sendto || nr == SYS_sendmsg;
}

/* n bytes went or came: the rest of the buffer, without the control
 * messages (sent or received once). */
static void advance(struct xfer *x, size_t n)
{
	if (x->nr == SYS_sendto || x->nr == SYS_recvfrom) {
		x->b[1] += (long)n;
		x->b[2] -= (long)n;
		return;
	}
	struct msghdr *m = &x->m;
	while (m->msg_iovlen && n >= m->msg_iov->iov_len) {
		n -= m->msg_iov->iov_len;
		m->msg_iov++;
		m->msg_iovlen--;
	}
	if (m->msg_iovlen) {
		m->msg_iov->iov_base = (char *)m->msg_iov->iov_base + n;
		m->msg_iov->iov_len -= n;
	}
	if (x->nr == SYS_recvmsg && m->msg_control) {
		x->ctl_got = m->msg_controllen;
		x->ctl_flags = m->msg_flags & MSG_CTRUNC;
	}
	m->msg_control = NULL;
	m->msg_controllen = 0;
}

static int is_stream(int fd)
{
	int t = 0;
	socklen_t l = sizeof t;
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) == 0 && t == SOCK_STREAM;
}

/* The call, `want` bytes, made as it would be made blocking (or not:
 * MSG_DONTWAIT, O_NONBLOCK): what went or came, or -errno. */
static long xfer(struct kr_uproc *up, struct kr__ufile *f, struct xfer *x, size_t want)
{
	int send = sends(x->nr), fi = x->nr == SYS_sendto || x->nr == SYS_recvfrom ? 3 : 2;
	x->b[fi] = x->flags | MSG_DONTWAIT |
		   (send ? MSG_NOSIGNAL : x->nr == SYS_recvmsg ? MSG_CMSG_CLOEXEC : 0);
	int all = !send && (x->flags & MSG_WAITALL) && !(x->flags & MSG_PEEK), stream = -1;
	uint64_t deadline = 0;
	size_t done = 0;
	for (;;) {
		long r = kr__pass(x->nr, x->b);
		if (r > 0 && done + (size_t)r < want &&
		    (send || (all && (stream < 0 ? (stream = is_stream(f->hostfd)) : stream)))) {
			done += (size_t)r;
			advance(x, (size_t)r);
			continue;
		}
		if (r >= 0)
			return (long)done + r;
		if (r == -EAGAIN &&
		    !(r = kr__fd_again(up, f, send ? POLLOUT : POLLIN, x->flags & MSG_DONTWAIT, &deadline)))
			continue;
		if (done)
			return (long)done;
		if (r == -EPIPE && send && !(x->flags & MSG_NOSIGNAL))
			kr__uproc_signal(SIGPIPE);
		return r;
	}
}

long kr__sock_rw(struct kr_uproc *up, struct kr__ufile *f, void *buf, size_t len, int write)
{
	if (!write && !len)
		return 0; /* as the kernel's read of a socket, which asks nothing of it */
	struct xfer x = {.nr = write ? SYS_sendto : SYS_recvfrom,
			 .b = {f->hostfd, (long)buf, (long)len},
			 .flags = write ? MSG_NOSIGNAL : 0};
	return xfer(up, f, &x, len);
}

/* sendto, recvfrom: the μprocess's buffer, address and length, which the
 * kernel reads and writes */
long kr__sys_sendrecv(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTSOCK;
	struct xfer x = {.nr = nr, .b = {f->hostfd, a[1], a[2], 0, a[4], a[5]}, .flags = (int)a[3]};
	return xfer(up, f, &x, (size_t)a[2]);
}

/* The control messages of a sendmsg, in karui's copy: the fds of
 * SCM_RIGHTS made host fds, the headers walked as the kernel walks them
 * (one that does not fit: EINVAL). */
static long rights_out(struct kr_uproc *up, unsigned char *c, size_t len)
{
	for (size_t off = 0; off + sizeof(struct cmsghdr) <= len;) {
		struct cmsghdr *h = (struct cmsghdr *)(c + off);
		if (h->cmsg_len < sizeof *h || h->cmsg_len > len - off)
			return -EINVAL;
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
			int *fd = (int *)CMSG_DATA(h);
			for (size_t i = 0; i < (h->cmsg_len - sizeof *h) / sizeof(int); i++) {
				struct kr__ufile *f = kr__fd_get(&up->fds, fd[i]);
				if (!f || f->kind != UF_HOST || f->own == KR__OWN_SIGFD)
					return -EBADF; /* a karui pipe, a signalfd: karui's alone */
				if (f->own)
					kr__disown(f);
				fd[i] = f->hostfd;
			}
		}
		off += CMSG_ALIGN(h->cmsg_len);
	}
	return 0;
}

/* The fds a recvmsg brought (host fds, close-on-exec): the μprocess's
 * now, its numbers in their place.  One it has no room for is closed
 * and the message cut (MSG_CTRUNC), as the kernel cuts it.  *n: how
 * many it took, their numbers in got[] (up to `cap`). */
static void rights_in(struct kr_uproc *up, struct msghdr *m, int cloexec, int *got, int cap,
		      int *n)
{
	for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		int *fd = (int *)CMSG_DATA(h);
		size_t k = (h->cmsg_len - sizeof *h) / sizeof(int), in = 0;
		for (size_t i = 0; i < k; i++) {
			long r = in == i ? kr__adopt(up, fd[i], fcntl(fd[i], F_GETFL), cloexec, 0)
					 : (close(fd[i]), -1);
			if (r < 0)
				continue; /* kr__adopt closed it */
			fd[in++] = (int)r;
			if (*n < cap)
				got[(*n)++] = (int)r;
		}
		if (in < k) {
			h->cmsg_len = CMSG_LEN(in * sizeof(int));
			m->msg_flags |= MSG_CTRUNC;
		}
	}
}

/* sendmsg or recvmsg of h, a copy of the μprocess's msghdr at um (NULL:
 * readv or writev, whose iovecs h names), with `flags` */
static long msg(struct kr_uproc *up, struct kr__ufile *f, long nr, struct msghdr h,
		struct msghdr *um, int flags)
{
	if (h.msg_iovlen > UIO_MAXIOV)
		return -EMSGSIZE;
	struct iovec few[8], *iov = h.msg_iovlen <= 8 ? few : malloc(h.msg_iovlen * sizeof *iov);
	unsigned char cfew[256], *ctl = cfew;
	size_t ctl_len = nr == SYS_recvmsg && h.msg_controllen > CTL_MAX ? CTL_MAX : h.msg_controllen;
	if (ctl_len > sizeof cfew)
		ctl = nr == SYS_sendmsg && ctl_len > CTL_MAX ? NULL : malloc(ctl_len);
	long r = 0;
	if (!iov || !ctl)
		r = !ctl && nr == SYS_sendmsg && ctl_len > CTL_MAX ? -ENOBUFS : -ENOMEM;
	else if (kr__ucopy(iov, h.msg_iov, h.msg_iovlen * sizeof *iov))
		r = -EFAULT;
	else if (nr == SYS_sendmsg && ctl_len &&
		 (kr__ucopy(ctl, h.msg_control, ctl_len) || (r = rights_out(up, ctl, ctl_len))))
		r = r ? r : -EFAULT;
	if (r)
		goto out;
	size_t want = 0;
	for (size_t i = 0; i < h.msg_iovlen; i++)
		want = iov[i].iov_len > SIZE_MAX - want ? SIZE_MAX : want + iov[i].iov_len;
	struct xfer x = {.nr = nr, .flags = flags, .m = h};
	x.m.msg_iov = iov;
	x.m.msg_control = ctl_len ? ctl : NULL;
	x.m.msg_controllen = ctl_len;
	x.b[0] = f->hostfd;
	x.b[1] = (long)&x.m;
	r = xfer(up, f, &x, want);
	if (r < 0 || nr == SYS_sendmsg || !um)
		goto out;
	/* recvmsg: the control messages of its first receive, and the
	 * lengths and flags the kernel gave, where the μprocess's are */
	if (!x.m.msg_control && ctl_len) { /* it went on receiving: the first's */
		x.m.msg_control = ctl;
		x.m.msg_controllen = x.ctl_got;
		x.m.msg_flags |= x.ctl_flags;
	}
	int got[64], n = 0;
	rights_in(up, &x.m, !!(flags & MSG_CMSG_CLOEXEC), got, 64, &n);
	if (x.m.msg_controllen && kr__ucopy(h.msg_control, ctl, x.m.msg_controllen)) {
		/* as the kernel, which drops what it cannot write there */
		for (int i = 0; i < n; i++)
			kr__fd_close(&up->fds, got[i]);
		x.m.msg_controllen = 0;
		x.m.msg_flags |= MSG_CTRUNC;
	}
	if ((h.msg_name && PUT(&um->msg_namelen, x.m.msg_namelen)) ||
	    PUT(&um->msg_controllen, x.m.msg_controllen) || PUT(&um->msg_flags, x.m.msg_flags))
		r = -EFAULT;
out:
	if (iov != few)
		free(iov);
	if (ctl != cfew)
		free(ctl);
	return r;
}

/* sendmsg, recvmsg */
long kr__sys_msg(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTSOCK;
	struct msghdr h;
	if (GET(h, a[1]))
		return -EFAULT;
	return msg(up, f, nr, h, (struct msghdr *)a[1], (int)a[2]);
}

long kr__sock_rwv(struct kr_uproc *up, struct kr__ufile *f, const struct iovec *iov, long cnt,
		  int write)
{
	struct msghdr h = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
	if (!write && !cnt)
		return 0; /* as kr__sock_rw's read of nothing */
	return msg(up, f, write ? SYS_sendmsg : SYS_recvmsg, h, NULL, write ? MSG_NOSIGNAL : 0);
}

/* Each message as sendmsg sends it, its length where the μprocess reads
 * it; the messages sent, or the first one's error. */
long kr__sys_sendmmsg(struct kr_uproc *up, long nr, long a[6])
{
	FILE_OR(up, a[0], EBADF);
	if (f->kind != UF_HOST)
		return -ENOTSOCK;
	struct mmsghdr *v = (struct mmsghdr *)a[1];
	unsigned long n = (unsigned long)(unsigned)a[2] > UIO_MAXIOV ? UIO_MAXIOV : (unsigned)a[2];
	long r = 0;
	unsigned long i = 0;
	for (; i < n; i++) {
		struct msghdr h;
		if ((r = GET(h, &v[i].msg_hdr)) ||
		    (r = msg(up, f, SYS_sendmsg, h, &v[i].msg_hdr, (int)a[3])) < 0)
			break;
		unsigned len = (unsigned)r;
		if ((r = PUT(&v[i].msg_len, len)))
			break;
	}
	return i ? (long)i : r;
}
