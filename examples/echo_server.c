/*
 * A TCP echo server on microprocesses: one microprocess per connection,
 * each a plain loop of kr_recv_until and kr_write_all_until that parks only itself.
 * kr_write_all_until writes until every byte received has gone back (a single
 * kr_send_until, like send(2), may take fewer bytes than asked).
 *
 *   echo_server [--port P] [--vps N | --carea]   (SIGINT/SIGTERM: stop)
 */
#define _GNU_SOURCE
#include "serve.h"

static unsigned long conns;

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[16384];
	size_t n;
	while (kr_recv(fd, buf, sizeof buf, 0, &n) == 0 && n > 0)
		if (kr_write_all(fd, buf, n, NULL) != 0)
			break;
	kr_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct serve_opts o;
	if (serve_args(argc, argv, &o, 0))
		return 2;
	if (serve("echo_server", &o, echo, 32768, &conns))
		return 1;
	printf("echo_server: stopped after %lu connections\n", conns);
	return 0;
}
