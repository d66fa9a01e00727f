/*
 * The peers of karui's example HTTP server, with the same request handling
 * (examples/http_min.h), so that they differ only in how they wait for the
 * network:
 *
 *   serve-pthread  one pthread per connection, blocking recv and send;
 *   serve-epoll [N] the hand-written event loop: N threads (default 2),
 *                  each with its own epoll set and its own listening socket
 *                  on the one port (SO_REUSEPORT), non-blocking sockets,
 *                  edge-triggered, each connection read until EAGAIN and
 *                  answered at once, with EPOLLOUT only for a reply that
 *                  did not fit the socket buffer.
 *
 * Why a listening socket per thread: with one socket in every thread's set
 * (EPOLLEXCLUSIVE), the thread woken first accepts until EAGAIN and takes
 * the whole burst of a client's connects, so wrk's 100 connections mostly
 * landed on one thread and the "2 threads" ran on one, or not, from one
 * round to the next.  The kernel spreads connections over SO_REUSEPORT
 * sockets by their addresses, as nginx's `reuseport` relies on.
 *
 * karui-bench runs them as `karui-bench serve-pthread` / `serve-epoll`: each
 * listens on 127.0.0.1, any free port, says which on stdout, and runs until
 * killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_min.h"
#include "peers.h"

/* Answer every whole request at the start of in[0..have) into out: the
 * bytes of in used go to *used, the reply's to *olen.  0 when the
 * connection is to close after the reply. */
static int respond(const char *in, size_t have, char *out, size_t cap, size_t *used,
		   size_t *olen)
{
	*used = *olen = 0;
	for (;;) {
		struct http_req r;
		int took = http_parse(in + *used, have - *used, &r);
		if (took == HTTP_INCOMPLETE)
			return 1;
		if (took == HTTP_BAD || *olen + 256 > cap)
			return 0;
		*used += (size_t)took;
		const char *body = r.found && !r.file ? "hello" : "not found";
		r.found = r.found && !r.file; /* no static file here */
		size_t blen = strlen(body);
		*olen += (size_t)http_header(out + *olen, cap - *olen, &r, blen);
		memcpy(out + *olen, body, blen);
		*olen += blen;
		if (!r.keep_alive)
			return 0;
	}
}

/* A listening socket on 127.0.0.1:port (0: any free port); reuseport: one
 * of a group on the same port. */
static int listener(unsigned port, int reuseport)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof a;
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    (reuseport && setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one)) ||
	    bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4096) ||
	    getsockname(s, (struct sockaddr *)&a, &l))
		return -1;
	return s;
}

static unsigned port_of(int s)
{
	struct sockaddr_in a;
	socklen_t l = sizeof a;
	getsockname(s, (struct sockaddr *)&a, &l);
	return ntohs(a.sin_port);
}

static void *conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char in[HTTP_BUF], out[HTTP_BUF];
	size_t have = 0;
	int open_ = 1;
	while (open_) {
		ssize_t n = recv(fd, in + have, sizeof in - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t used, olen;
		open_ = respond(in, have, out, sizeof out, &used, &olen);
		for (size_t sent = 0; sent < olen;) {
			ssize_t w = send(fd, out + sent, olen - sent, MSG_NOSIGNAL);
			if (w <= 0) {
				open_ = 0;
				break;
			}
			sent += (size_t)w;
		}
		memmove(in, in + used, have - used);
		have -= used;
	}
	close(fd);
	return NULL;
}

int kb_pthread_httpd(void)
{
	int s = listener(0, 0), one = 1;
	if (s < 0) {
		perror("serve-pthread");
		return 1;
	}
	printf("pthread-httpd: listening on 127.0.0.1:%u\n", port_of(s));
	fflush(stdout);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 * 1024);
	for (;;) {
		int fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pthread_t t;
		if (pthread_create(&t, &at, conn, (void *)(intptr_t)fd) != 0)
			close(fd);
	}
}

/* ---- the event loop ---- */

enum { EPOLL_THREADS_MAX = 64 };

struct econn {
	int fd;
	size_t have, olen, sent;        /* input kept; reply and how much went */
	char in[HTTP_BUF], out[HTTP_BUF];
};

static void econn_close(int ep, struct econn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
}

/* Send what is left of the reply: 1 done, 0 the socket is full, -1 error. */
static int econn_flush(struct econn *c)
{
	while (c->sent < c->olen) {
		ssize_t w = send(c->fd, c->out + c->sent, c->olen - c->sent, MSG_NOSIGNAL);
		if (w < 0)
			return errno == EAGAIN ? 0 : -1;
		c->sent += (size_t)w;
	}
	c->olen = c->sent = 0;
	return 1;
}

/* Readable or writable: read to EAGAIN, answer, send.  0: close it. */
static int econn_serve(int ep, struct econn *c)
{
	int f = econn_flush(c);
	if (f <= 0)
		return f == 0;
	for (;;) {
		ssize_t n = recv(c->fd, c->in + c->have, sizeof c->in - c->have, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return 0;
		if (n < 0)
			return 1;
		c->have += (size_t)n;
		size_t used;
		int open_ = respond(c->in, c->have, c->out, sizeof c->out, &used, &c->olen);
		memmove(c->in, c->in + used, c->have - used);
		c->have -= used;
		f = econn_flush(c);
		if (!open_ || f < 0)
			return 0;
		if (f == 0) {   /* wait for room, then go on */
			struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
						 .data.ptr = c};
			return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) == 0;
		}
	}
}

static void *event_loop(void *arg)
{
	int ls = (int)(intptr_t)arg, ep = epoll_create1(EPOLL_CLOEXEC), one = 1;
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev)) {
		perror("serve-epoll");
		exit(1);
	}
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			struct econn *c = evs[i].data.ptr;
			if (c) {
				if (!econn_serve(ep, c))
					econn_close(ep, c);
				continue;
			}
			int fd;
			while ((fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
				c = malloc(sizeof *c);
				if (!c) {
					close(fd);
					continue;
				}
				c->fd = fd;
				c->have = c->olen = c->sent = 0;
				struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = c};
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
					close(fd);
					free(c);
				}
			}
		}
	}
	return NULL;
}

int kb_epoll_httpd(const char *threads)
{
	char *end = NULL;
	long n = threads ? strtol(threads, &end, 10) : 2;
	if ((end && *end) || n < 1 || n > EPOLL_THREADS_MAX) {
		fprintf(stderr, "serve-epoll: THREADS is 1 to %d\n", EPOLL_THREADS_MAX);
		return 2;
	}
	int s[EPOLL_THREADS_MAX];
	for (long i = 0; i < n; i++)
		if ((s[i] = listener(i ? port_of(s[0]) : 0, n > 1)) < 0 ||
		    fcntl(s[i], F_SETFL, O_NONBLOCK)) {
			perror("serve-epoll");
			return 1;
		}
	printf("epoll-httpd: listening on 127.0.0.1:%u\n", port_of(s[0]));
	fflush(stdout);
	for (long i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, event_loop, (void *)(intptr_t)s[i])) {
			perror("serve-epoll");
			return 1;
		}
	}
	event_loop((void *)(intptr_t)s[0]);
	return 0;
}
