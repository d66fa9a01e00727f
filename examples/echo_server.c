/*
 * A TCP echo server on microprocesses: one microprocess per connection,
 * each a plain loop of kr_recv and kr_send that parks only itself.
 *
 *   echo_server [--port P] [--vps N]      (SIGINT/SIGTERM: stop)
 */
#define _GNU_SOURCE
#include "serve.h"

static unsigned long conns;

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[16384];
	ssize_t n;
	while ((n = kr_recv(fd, buf, sizeof buf, 0, KR_IO_FOREVER)) > 0)
		if (kr_send(fd, buf, (size_t)n, 0, KR_IO_FOREVER) != n)
			break;
	kr_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct serve_opts o;
	if (serve_args(argc, argv, &o, 0))
		return 2;
	serve_block_signals();
	kr_config cfg = {.vps = o.vps};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "echo_server: kr_init: %s\n", strerror(err));
		return 1;
	}
	int ls = serve_listen("echo_server", o.port);
	if (ls < 0)
		return 1;
	serve_stop_on_signal(ls);
	kr_attr detached = {.stack_size = 32768, .flags = KR_MP_DETACHED};
	for (;;) {
		int fd = kr_accept(ls, NULL, NULL, SOCK_CLOEXEC, KR_IO_FOREVER);
		if (__atomic_load_n(&serve_stopping, __ATOMIC_ACQUIRE)) {
			if (fd >= 0)
				kr_close(fd);
			break;
		}
		if (fd < 0) {
			fprintf(stderr, "echo_server: accept: %s\n", strerror(-fd));
			continue;
		}
		serve_nodelay(fd);
		kr_mp *m;
		if (kr_mp_create(&m, &detached, echo, (void *)(intptr_t)fd) != 0)
			kr_close(fd);
		else
			conns++;
	}
	printf("echo_server: stopped after %lu connections\n", conns);
	return 0;
}
