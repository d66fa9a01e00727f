/*
 * A minimal HTTP/1.1 server on microprocesses, one per connection:
 * "GET /" answers "hello", "GET /file" the file given with --file, read
 * from disk for each request with kr_read_until and sent a buffer at a time,
 * whatever its size.  Keep-alive and pipelining as http_min.h describes.
 *
 *   httpd [--port P] [--vps N | --carea] [--file PATH]   (SIGINT/SIGTERM: stop)
 *
 * --vps N: karui on N VPs (default 2); --carea: karui with the C-area's
 * allocator, one VP per processor, as many running as it is granted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "http_min.h"
#include "serve.h"

static const char *file_path;
static unsigned long served;

/* The static file, opened for this request: its fd, and its size in
 * *len; -1 when there is none. */
static int open_file(size_t *len)
{
	struct stat st;
	int fd = file_path ? open(file_path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0 && fstat(fd, &st) != 0) {
		kr_close(fd);
		return -1;
	}
	*len = fd >= 0 ? (size_t)st.st_size : 0;
	return fd;
}

static int send_all(int fd, const char *b, size_t len)
{
	for (size_t done = 0, n; done < len; done += n) {
		int err = kr_send(fd, b + done, len - done, 0, &n);
		if (err)
			return err;
	}
	return 0;
}

/* The reply to r: its header, then the len bytes of the file ffd, read
 * into buf[0..cap) and sent from there a piece at a time, so that a file
 * of any size takes a connection no more memory.  0 or an errno code. */
static int send_file(int fd, const struct http_req *r, int ffd, size_t len, char *buf,
		     size_t cap)
{
	int err = send_all(fd, buf, (size_t)http_header(buf, cap, r, len));
	while (!err && len > 0) {
		size_t n;
		err = kr_read(ffd, buf, len < cap ? len : cap, &n);
		if (!err && n == 0)
			err = EIO; /* the file shrank: the reply cannot be completed */
		if (!err)
			err = send_all(fd, buf, n);
		len -= n;
	}
	return err;
}

static void *conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char in[HTTP_BUF], out[HTTP_BUF];
	size_t have = 0;
	int open_ = 1;
	while (open_) {
		size_t n;
		if (kr_recv(fd, in + have, sizeof in - have, 0, &n) || n == 0)
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
			size_t flen;
			int ffd = r.file ? open_file(&flen) : -1;
			if (olen && (ffd >= 0 || olen + 256 > sizeof out)) {
				/* flush what is gathered, before the file or when full */
				if (send_all(fd, out, olen))
					open_ = 0;
				olen = 0;
			}
			if (ffd >= 0) {
				if (open_ && send_file(fd, &r, ffd, flen, out, sizeof out))
					open_ = 0;
				kr_close(ffd);
			} else {
				r.found = r.found && !r.file;
				const char *body = r.found ? "hello" : "not found";
				size_t blen = strlen(body);
				olen += (size_t)http_header(out + olen, sizeof out - olen, &r, blen);
				memcpy(out + olen, body, blen);
				olen += blen;
			}
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
