/*
 * A minimal HTTP/1.1 server on microprocesses, one per connection:
 * "GET /" answers "hello", "GET /file" the file given with --file, read
 * from disk for each request with kr_read.  Keep-alive and pipelining as
 * http_min.h describes.
 *
 *   httpd [--port P] [--vps N] [--file PATH]   (SIGINT/SIGTERM: stop)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include "http_min.h"
#include "serve.h"

static const char *file_path;
static unsigned long served;

/* The static file, read now: its bytes in *out (malloc'd). */
static ssize_t read_file(char **out)
{
	if (!file_path)
		return -ENOENT;
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 65536, len = 0;
	char *b = malloc(cap);
	ssize_t n = 0;
	while (b && (n = kr_read(fd, b + len, cap - len, KR_FOREVER)) > 0) {
		len += (size_t)n;
		if (len == cap && len < (16u << 20))
			b = realloc(b, cap *= 2);
	}
	kr_close(fd);
	if (!b || n < 0) {
		free(b);
		return b ? n : -ENOMEM;
	}
	*out = b;
	return (ssize_t)len;
}

static ssize_t send_all(int fd, const char *b, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = kr_send(fd, b + done, len - done, 0, KR_FOREVER);
		if (n < 0)
			return n;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static void *conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char in[HTTP_BUF], out[HTTP_BUF];
	size_t have = 0;
	int open_ = 1;
	while (open_) {
		ssize_t n = kr_recv(fd, in + have, sizeof in - have, 0, KR_FOREVER);
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t used = 0, olen = 0;
		for (;;) {
			struct http_req r;
			int took = http_parse(in + used, have - used, &r);
			if (took == HTTP_INCOMPLETE)
				break;
			if (took == HTTP_BAD) {
				open_ = 0;
				break;
			}
			used += (size_t)took;
			__atomic_fetch_add(&served, 1, __ATOMIC_RELAXED);
			char *body = "hello", *fbody = NULL;
			ssize_t blen = 5;
			if (r.file && (blen = read_file(&fbody)) >= 0)
				body = fbody;
			else if (r.file || !r.found)
				r.found = 0, body = "not found", blen = 9;
			if (olen + 256 + (size_t)blen > sizeof out || fbody) {
				/* flush what is gathered, then this reply alone */
				if (olen && send_all(fd, out, olen) < 0)
					open_ = 0;
				olen = 0;
				char h[256];
				int hl = http_header(h, sizeof h, &r, (size_t)blen);
				struct iovec v[2] = {{h, (size_t)hl}, {body, (size_t)blen}};
				if (kr_writev(fd, v, 2, KR_FOREVER) != hl + blen)
					open_ = 0; /* a short write: a real server would loop */
			} else {
				olen += (size_t)http_header(out + olen, sizeof out - olen, &r, (size_t)blen);
				memcpy(out + olen, body, (size_t)blen);
				olen += (size_t)blen;
			}
			free(fbody);
			if (!r.keep_alive)
				open_ = 0;
			if (!open_)
				break;
		}
		if (olen && send_all(fd, out, olen) < 0)
			break;
		memmove(in, in + used, have - used);
		have -= used;
	}
	kr_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct serve_opts o;
	if (serve_args(argc, argv, &o, 1))
		return 2;
	file_path = o.file;
	unsigned long conns = 0;
	if (serve("httpd", &o, conn, 65536, &conns))
		return 1;
	printf("httpd: stopped after %lu requests\n", served);
	return 0;
}
