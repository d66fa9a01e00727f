/*
 * What karui's two example servers share: the command line, a listening
 * socket on loopback, the accept loop with a microprocess per connection,
 * and a clean stop on SIGINT/SIGTERM (a plain thread waits for the signal
 * and cancels the accept, which ends the server).  An accept error is
 * logged at most once a second; out of fds or memory, the loop sleeps
 * 50 ms before it tries again, and meanwhile the connections it has are
 * served, and may close and free some.
 */
#ifndef KARUI_EXAMPLES_SERVE_H
#define KARUI_EXAMPLES_SERVE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "karui.h"

struct serve_opts {
	unsigned port, vps;
	int carea;              /* --carea: kr_carea decides how many VPs run */
	const char *file;
};

static inline int serve_args(int argc, char **argv, struct serve_opts *o, int with_file)
{
	*o = (struct serve_opts){.port = 0, .vps = 2};
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		if (!strcmp(argv[i], "--carea"))
			o->carea = 1;
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			o->port = (unsigned)strtoul(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--vps") && i + 1 < argc)
			o->vps = (unsigned)strtoul(argv[++i], &end, 10);
		else if (with_file && !strcmp(argv[i], "--file") && i + 1 < argc)
			o->file = argv[++i];
		else
			goto bad;
		if (end && *end)
			goto bad;
	}
	if (o->port < 65536 && o->vps >= 1 && o->vps <= KR_VP_MAX)
		return 0;
bad:
	fprintf(stderr, "usage: %s [--port P] [--vps N | --carea]%s\n", argv[0],
		with_file ? " [--file PATH]" : "");
	return 2;
}

/* Listen on 127.0.0.1:port (0: any free port) and say where, on stdout. */
static inline int serve_listen(const char *name, unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof a;
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4096) ||
	    getsockname(s, (struct sockaddr *)&a, &l)) {
		perror(name);
		return -1;
	}
	printf("%s: listening on 127.0.0.1:%u\n", name, ntohs(a.sin_port));
	fflush(stdout);
	return s;
}

static sigset_t serve_sigs;
static int serve_stopping;

/* The accept loop checks serve_stopping after each accept; the cancel is
 * repeated in case the signal came between two accepts. */
static void *serve_stopper(void *arg)
{
	int sig;
	sigwait(&serve_sigs, &sig);
	__atomic_store_n(&serve_stopping, 1, __ATOMIC_RELEASE);
	for (;;) {
		kr_io_cancel((int)(intptr_t)arg); /* from a plain thread: allowed */
		usleep(20000);
	}
	return NULL;
}

/* Block SIGINT and SIGTERM in every thread (call before kr_init) and
 * start the thread that turns them into a cancelled accept. */
static inline void serve_block_signals(void)
{
	sigemptyset(&serve_sigs);
	sigaddset(&serve_sigs, SIGINT);
	sigaddset(&serve_sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &serve_sigs, NULL);
}

static inline void serve_stop_on_signal(int listen_fd)
{
	pthread_t t;
	pthread_create(&t, NULL, serve_stopper, (void *)(intptr_t)listen_fd);
	pthread_detach(t);
}

static inline void serve_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Run fn(fd) in a detached microprocess with a `stack`-byte stack for
 * each connection accepted on ls, until SIGINT/SIGTERM
 * (serve_stop_on_signal); *conns counts them. */
static inline void serve_accept(const char *name, int ls, kr_mp_fn fn, size_t stack,
				unsigned long *conns)
{
	kr_attr detached = {.stack_size = stack, .flags = KR_MP_DETACHED};
	uint64_t next_report = 0;
	for (;;) {
		int fd, err = kr_accept(ls, NULL, NULL, SOCK_CLOEXEC, &fd);
		if (__atomic_load_n(&serve_stopping, __ATOMIC_ACQUIRE)) {
			if (!err)
				kr_close(fd);
			return;
		}
		if (err) {
			if (kr_now() >= next_report) {
				fprintf(stderr, "%s: accept: %s\n", name, strerror(err));
				next_report = kr_now() + 1000000000;
			}
			/* the connection waits in the listen backlog meanwhile */
			if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
				kr_mp_sleep_for(50000000);
			continue;
		}
		serve_nodelay(fd);
		kr_mp *m;
		if (kr_mp_create(&m, &detached, fn, (void *)(intptr_t)fd) != 0)
			kr_close(fd);
		else
			(*conns)++;
	}
}

/* Start karui, listen, and serve_accept until SIGINT/SIGTERM.  With
 * --carea, karui runs with the C-area's allocator and finds its VP count
 * itself (one per processor it may use; karui/carea.h), --vps ignored.
 * 0, or 1 when karui or the socket could not start. */
static inline int serve(const char *name, const struct serve_opts *o, kr_mp_fn fn,
			size_t stack, unsigned long *conns)
{
	serve_block_signals();
	kr_config cfg = {.vps = o->carea ? 0 : o->vps, .alloc = o->carea ? &kr_carea : NULL};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "%s: kr_init: %s\n", name, strerror(err));
		return 1;
	}
	int ls = serve_listen(name, o->port);
	if (ls < 0)
		return 1;
	serve_stop_on_signal(ls);
	serve_accept(name, ls, fn, stack, conns);
	return 0;
}

#endif
