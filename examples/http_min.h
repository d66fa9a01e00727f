/*
 * A minimal HTTP/1.1 request handler shared by karui's example server
 * (httpd.c) and the thread-per-connection peer in karui-bench, so that the
 * two differ only in how they wait for the network.
 *
 * It understands GET with keep-alive (HTTP/1.1's default; "Connection:
 * close" or HTTP/1.0 end the connection after the reply) and pipelined
 * requests; bodies are not read.  Routes: "/" answers "hello"; "/file"
 * answers the content given at start-up (the static file).
 */
#ifndef KARUI_EXAMPLES_HTTP_MIN_H
#define KARUI_EXAMPLES_HTTP_MIN_H

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HTTP_BUF 8192

enum { HTTP_INCOMPLETE = 0, HTTP_BAD = -1 };

struct http_req {
	int file;       /* "/file" rather than "/" */
	int found;      /* a known route */
	int keep_alive;
};

/* Parse the request at the start of buf[0..len): the bytes it takes
 * (header included), HTTP_INCOMPLETE, or HTTP_BAD. */
static inline int http_parse(const char *buf, size_t len, struct http_req *r)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (!end)
		return len >= HTTP_BUF ? HTTP_BAD : HTTP_INCOMPLETE;
	const char *sp1 = memchr(buf, ' ', (size_t)(end - buf));
	if (!sp1 || sp1 - buf != 3 || memcmp(buf, "GET", 3) != 0)
		return HTTP_BAD;
	const char *path = sp1 + 1;
	const char *sp2 = memchr(path, ' ', (size_t)(end - path));
	if (!sp2)
		return HTTP_BAD;
	size_t plen = (size_t)(sp2 - path);
	r->file = plen == 5 && memcmp(path, "/file", 5) == 0;
	r->found = r->file || (plen == 1 && path[0] == '/');
	r->keep_alive = end - sp2 >= 9 && memcmp(sp2 + 1, "HTTP/1.1", 8) == 0;
	/* a "Connection: close" header line */
	for (const char *h = memchr(sp2, '\n', (size_t)(end - sp2)); h && h < end;
	     h = memchr(h + 1, '\n', (size_t)(end - h))) {
		if ((size_t)(end - h) > 17 && strncasecmp(h + 1, "connection: close", 17) == 0)
			r->keep_alive = 0;
	}
	return (int)(end + 4 - buf);
}

/* The response header for a body of `len` bytes into out: its length. */
static inline int http_header(char *out, size_t cap, const struct http_req *r, size_t len)
{
	return snprintf(out, cap,
			"HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n",
			r->found ? "200 OK" : "404 Not Found", len,
			r->keep_alive ? "" : "Connection: close\r\n");
}

#endif
