/*
 * The thread-per-connection peer of karui's example HTTP server: the same
 * request handling (examples/http_min.h), one pthread per connection,
 * blocking recv and send.  karui-bench runs it as `karui-bench
 * serve-pthread`: it listens on 127.0.0.1, any free port, says which on
 * stdout, and runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_min.h"
#include "peers.h"

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
		size_t used = 0, olen = 0;
		for (;;) {
			struct http_req r;
			int took = http_parse(in + used, have - used, &r);
			if (took == HTTP_INCOMPLETE)
				break;
			if (took == HTTP_BAD || olen + 256 > sizeof out) {
				open_ = 0;
				break;
			}
			used += (size_t)took;
			const char *body = r.found && !r.file ? "hello" : "not found";
			r.found = r.found && !r.file; /* no static file here */
			size_t blen = strlen(body);
			olen += (size_t)http_header(out + olen, sizeof out - olen, &r, blen);
			memcpy(out + olen, body, blen);
			olen += blen;
			if (!r.keep_alive) {
				open_ = 0;
				break;
			}
		}
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
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof a;
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4096) ||
	    getsockname(s, (struct sockaddr *)&a, &l)) {
		perror("serve-pthread");
		return 1;
	}
	printf("pthread-httpd: listening on 127.0.0.1:%u\n", ntohs(a.sin_port));
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
