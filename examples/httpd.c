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

/* The static file, read now: its bytes in *out (malloc'd), its size in
 * *len; 0 or an errno code. */
static int read_file(char **out, size_t *len)
{
	if (!file_path)
		return ENOENT;
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	int err = b ? 0 : ENOMEM;
	*len = 0;
	while (!err && !(err = kr_read(fd, b + *len, cap - *len, &n, KR_FOREVER)) && n > 0) {
		*len += n;
		if (*len == cap && cap < (16u << 20)) {
			char *more = realloc(b, cap *= 2);
			if (!more)
				err = ENOMEM;
			else
				b = more;
		}
	}
	kr_close(fd);
	if (err) {
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

static int send_all(int fd, const char *b, size_t len)
{
	for (size_t done = 0, n; done < len; done += n) {
		int err = kr_send(fd, b + done, len - done, 0, &n, KR_FOREVER);
		if (err)
			return err;
	}
	return 0;
}

static void *conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char in[HTTP_BUF], out[HTTP_BUF];
	size_t have = 0;
	int open_ = 1;
	while (open_) {
		size_t n;
		if (kr_recv(fd, in + have, sizeof in - have, 0, &n, KR_FOREVER) || n == 0)
			break;
		have += n;
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
			size_t blen = 5;
			if (r.file && read_file(&fbody, &blen) == 0)
				body = fbody;
			else if (r.file || !r.found)
				r.found = 0, body = "not found", blen = 9;
			if (olen + 256 + blen > sizeof out || fbody) {
				/* flush what is gathered, then this reply alone */
				if (olen && send_all(fd, out, olen))
					open_ = 0;
				olen = 0;
				char h[256];
				size_t hl = (size_t)http_header(h, sizeof h, &r, blen), sent;
				struct iovec v[2] = {{h, hl}, {body, blen}};
				if (kr_writev(fd, v, 2, &sent, KR_FOREVER) || sent != hl + blen)
					open_ = 0; /* a short write: a real server would loop */
			} else {
				olen += (size_t)http_header(out + olen, sizeof out - olen, &r, blen);
				memcpy(out + olen, body, blen);
				olen += blen;
			}
			free(fbody);
			if (!r.keep_alive)
				open_ = 0;
			if (!open_)
				break;
		}
		if (olen && send_all(fd, out, olen))
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
