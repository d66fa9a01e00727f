/*
 * An HTTP/1.1 server that runs unmodified CGI/1.1 programs (RFC 3875) as
 * μprocesses (seed 003 §7.2): a microprocess per connection, and per
 * request the program named by the path, started with kr_uproc_spawn
 * from the image an earlier run of it left (kr_uproc_keep), its request
 * body on its stdin and its response read from its stdout, both karui
 * pipes.
 *
 *   cgi_httpd --cgi-dir DIR [--port P] [--vps N] [--timeout MS]
 *             [--read-timeout MS] [--max-body B] [--max-output B]
 *             [--max-cgi N] [--keep N] [--quiet]      (SIGINT/SIGTERM: stop)
 *
 * GET, HEAD and POST of /cgi-bin/NAME[/PATH_INFO][?QUERY] run DIR/NAME;
 * anything else is 404.  It is an example (examples/, beside httpd.c,
 * sharing serve.h) and not a tool: it shows the image API serving a
 * protocol, with the smallest HTTP that wrk, curl and the tests need, and
 * karui-bench's seed003.cgi starts it from its own directory as it does
 * httpd.
 *
 * A request.  The head (request line and header fields) must come within
 * --read-timeout (10 s; an idle keep-alive connection is closed after as
 * long, a slow client too) and fit in 16 KiB (431; a request line over
 * 8 KiB: 414); a malformed one is 400, and the connection is closed after
 * any such error.  A body comes with a Content-Length (digits, at most
 * --max-body, 1 MiB: else 400, 413) or chunked ("Transfer-Encoding:
 * chunked" in HTTP/1.1 and without a Content-Length, else 400; another
 * coding before it: 501): chunk sizes in hex on lines of at most 4 KiB,
 * their extensions ignored, decoded at most --max-body bytes (413), the
 * trailer read and dropped (at most 16 KiB: 431); a size that is no hex
 * number ("-1", "0x10") or over 64 bits, a CRLF missing, a control
 * character in a line: 400.  Either body is read whole, within
 * --read-timeout, before the program starts, and the program gets it
 * decoded with its length in CONTENT_LENGTH (CGI/1.1 has no chunked
 * stdin); a client that ends or stalls before the body's end has its
 * connection closed without an answer, and no program runs.
 * "Expect: 100-continue" is answered.
 * The path is percent-decoded; a "." or ".." segment, a NUL or a bad
 * escape are refused (403, 400), NAME must be an executable regular file
 * directly in DIR (404, 403).  Keep-alive: HTTP/1.1's default,
 * "Connection: close" and HTTP/1.0 end the connection after the reply;
 * pipelined requests are answered in order.
 *
 * The program.  Its environment is the CGI/1.1 meta-variables
 * (GATEWAY_INTERFACE, SERVER_SOFTWARE, SERVER_PROTOCOL, SERVER_NAME,
 * SERVER_ADDR, SERVER_PORT, REQUEST_METHOD, REQUEST_URI, QUERY_STRING,
 * SCRIPT_NAME, SCRIPT_FILENAME, PATH_INFO when there is one, REMOTE_ADDR,
 * CONTENT_LENGTH (0 without a body, as lighttpd does), CONTENT_TYPE when
 * given, REDIRECT_STATUS, PATH, and an HTTP_* variable per header field
 * but Content-Length, Transfer-Encoding (the body it reads is decoded),
 * Content-Type and Proxy, whose HTTP_PROXY would steer the program's own
 * requests), in that order, and nothing of the
 * server's.  REMOTE_PORT is left out on purpose: a kept image is reused
 * only by a start with the very same environment (docs/uproc.md), and a
 * variable that changes with every connection would make every start a
 * fresh load; so identical requests reuse images, and requests that
 * differ (another query string, another header) load afresh, up to
 * --keep images (32) being kept.  Its argv is what execve would give it:
 * DIR/NAME, or for a script (#!INTERP [ARG]) INTERP [ARG] DIR/NAME, the
 * interpreter started as the μprocess (#!/usr/bin/env PROG: PROG found
 * in PATH, as env would).  A shell script (#!/bin/sh, bash, dash) runs as a
 * child process: the commands it runs need fork and exec, which a
 * μprocess has not (docs/uproc.md).  Its working directory is DIR, stdin a karui
 * pipe with the body (end of file after it), stdout a karui pipe, stderr
 * the server's (--quiet: /dev/null), and fd 15 the write end of a third
 * pipe that it never touches: its end of file tells the server the
 * μprocess has ended (all its fds close then), so that the server never
 * waits uncancellably for a program that closed its stdout and went on.
 * Where no μprocess can run it (ENOEXEC: not a program karui loads;
 * EADDRINUSE: a program that is not position-independent whose address is
 * taken, Debian's python3 beside another; EPERM: setuid; ENOTSUP: no
 * μprocesses on this machine) it runs as a child process (posix_spawn),
 * with the same environment, argv, directory and pipes, and is counted.
 *
 * The response.  The program's output is a CGI response: header fields
 * up to an empty line (LF or CRLF; at most 16 KiB), "Status: NNN ..."
 * (else 302 with a Location, else 200), the others passed on but
 * Content-Length, Transfer-Encoding, Connection and Keep-Alive, which the
 * server sets; then the body.  A body that ends within 64 KiB goes out
 * with a Content-Length once the program has ended; a longer one is sent
 * as it comes, chunked (HTTP/1.0: up to the close).  At most
 * --max-output bytes (16 MiB) are taken: a program that writes more is
 * ended (SIGKILL) and cut, 502 if nothing was sent yet, else the
 * connection is closed without the last chunk.  No complete header when
 * its output ends (a crash before it, a header line that is no field) is
 * 502; a program still running after --timeout (5 s) is ended with
 * kr_uproc_kill(SIGKILL) (a child: kill) and answered 504 (or the
 * connection closed, if its response had begun).  Each of these ends that
 * request only.  At most --max-cgi programs (64) run at once; a request
 * that cannot start one within its timeout is 503.
 *
 * Limits.  A μprocess that computes without making system calls is ended
 * at its next call only (docs/uproc.md) and holds its VP meanwhile: a
 * program stuck in such a loop is never ended, and takes one of the
 * server's VPs for good.  A program that closes every fd of its own and
 * goes on is waited for until it ends.  Local redirects (a Location that is
 * a path) are passed to the client as 302, not followed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "serve.h"

#define HEAD_MAX (16 * 1024)  /* a request's head */
#define LINE_MAX_ (8 * 1024)  /* its request line */
#define HDRS_MAX 100          /* header fields of a request */
#define OUT_CAP (64 * 1024)   /* a response gathered before it streams */
#define CGI_HEAD_MAX (16 * 1024) /* a program's header */
#define INLINE_BODY (16 * 1024) /* bodies written before reading the output */
#define LIFE_FD (KR_UPROC_ATTR_FDS - 1)
#define CGI_PATH "PATH=/usr/local/bin:/usr/bin:/bin"
#define PREFIX "/cgi-bin/"

extern char **environ;

static struct {
	const char *dir;        /* --cgi-dir, absolute */
	unsigned port, vps, keep, max_cgi;
	uint64_t timeout, read_timeout; /* ns */
	size_t max_body, max_output;
	int quiet;
	int errfd;              /* the programs' stderr */
	unsigned listen_port;
	int uprocs;             /* μprocesses can run here */
	kr_sem slots;
} O;

static struct {
	unsigned long requests, uproc, reused, child, timeouts, crashes, bad, cut;
} N;
#define COUNT(f) __atomic_fetch_add(&N.f, 1, __ATOMIC_RELAXED)

/* ---------------------------------------------------------------- HTTP */

struct hdr {
	const char *name, *value;
	size_t nlen, vlen;
};

struct req {
	const char *method, *target, *version;
	size_t mlen, tlen;
	int http11, keep_alive, head, expect_continue, chunked;
	long long clen;         /* -1: none */
	const char *ctype, *host;
	size_t ctlen, hostlen;
	struct hdr h[HDRS_MAX];
	int nh;
	char *body;
	size_t blen;
};

struct conn {
	int fd;
	char peer[64], local[64];
	char in[HEAD_MAX + 4096];
	size_t have;
	char *ob;               /* OUT_CAP bytes: a program's output */
};

static const char *reason(int code)
{
	switch (code) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return NULL;
	}
}

static uint64_t deadline_in(uint64_t ns) { return kr_now() + ns; }

/* Send every byte of iov[0..n) by its deadline; 0 or an errno code. */
static int send_iov(int fd, struct iovec *iov, int n)
{
	uint64_t dl = deadline_in(O.read_timeout);
	while (n > 0) {
		size_t done;
		int err = kr_writev_until(fd, iov, n, &done, dl);
		if (err)
			return err;
		while (n > 0 && done >= iov->iov_len) {
			done -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= done;
		}
	}
	return 0;
}

static int send_buf(int fd, const void *b, size_t len)
{
	struct iovec v = {(void *)b, len};
	return len ? send_iov(fd, &v, 1) : 0;
}

/* An answer of the server's own: code, its reason as the body. */
static int send_error(struct conn *c, int code, int keep_alive, int head)
{
	char b[512];
	const char *r = reason(code);
	int bl = snprintf(b, sizeof b / 2, "%d %s\n", code, r);
	int hl = snprintf(b + bl, sizeof b - (size_t)bl,
			  "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n",
			  code, r, bl, keep_alive ? "" : "Connection: close\r\n");
	struct iovec v[2] = {{b + bl, (size_t)hl}, {b, head ? 0 : (size_t)bl}};
	return send_iov(c->fd, v, 2);
}

static int tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int token_eq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !strncasecmp(s, lit, n);
}

/* The next element of the comma-separated list v[0..n) from *i: 1 and
 * it in *s, *len (empty elements skipped), or 0 at the end. */
static int list_next(const char *v, size_t n, size_t *i, const char **s, size_t *len)
{
	size_t k = *i;
	while (k < n && (v[k] == ' ' || v[k] == '\t' || v[k] == ','))
		k++;
	if (k == n)
		return 0;
	size_t b = k;
	while (k < n && v[k] != ',')
		k++;
	size_t e = k;
	while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t'))
		e--;
	*i = k;
	*s = v + b;
	*len = e - b;
	return 1;
}

/* Does the comma-separated list v[0..n) hold the token lit? */
static int list_has(const char *v, size_t n, const char *lit)
{
	const char *s;
	size_t i = 0, l;
	while (list_next(v, n, &i, &s, &l))
		if (token_eq(s, l, lit))
			return 1;
	return 0;
}

/* No control character in s[0..n) but HTAB: a field value's text. */
static int text_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] < ' ' && s[i] != '\t') || s[i] == 0x7f)
			return 0;
	return 1;
}

/* The colon of the field line l[0..n) after a name of tchars, else NULL
 * (no field, an obs-fold, an empty name). */
static char *field_colon(char *l, size_t n)
{
	char *colon = memchr(l, ':', n);
	if (!colon || colon == l)
		return NULL;
	for (char *p = l; p < colon; p++)
		if (!tchar((unsigned char)*p))
			return NULL;
	return colon;
}

/* Parse the head in[0..len) (its last 4 bytes CRLF CRLF): 0, or the
 * status code to refuse it with. */
static int parse_head(char *in, size_t len, struct req *r)
{
	memset(r, 0, offsetof(struct req, h));
	r->nh = 0;
	r->clen = -1;
	char *end = in + len - 2, *eol = memmem(in, len, "\r\n", 2);
	if ((size_t)(eol - in) > LINE_MAX_)
		return 414;
	char *sp1 = memchr(in, ' ', (size_t)(eol - in));
	char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == in || sp2 == sp1 + 1)
		return 400;
	r->method = in;
	r->mlen = (size_t)(sp1 - in);
	r->target = sp1 + 1;
	r->tlen = (size_t)(sp2 - sp1 - 1);
	r->version = sp2 + 1;
	for (size_t i = 0; i < r->mlen; i++)
		if (!tchar((unsigned char)in[i]))
			return 400;
	for (size_t i = 0; i < r->tlen; i++)
		if ((unsigned char)r->target[i] <= ' ' || r->target[i] == 0x7f)
			return 400;
	size_t vl = (size_t)(eol - r->version);
	if (vl == 8 && !memcmp(r->version, "HTTP/1.1", 8))
		r->http11 = 1;
	else if (!(vl == 8 && !memcmp(r->version, "HTTP/1.0", 8)))
		return vl > 5 && !memcmp(r->version, "HTTP/", 5) ? 505 : 400;
	r->keep_alive = r->http11;
	if (r->target[0] != '/')
		return 400;
	int codings = 0, chunked_last = 0, chunked_before = 0; /* Transfer-Encoding's */
	for (char *l = eol + 2; l < end; l = eol + 2) {
		eol = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
		char *colon = field_colon(l, (size_t)(eol - l));
		if (!colon)
			return 400;
		char *v = colon + 1, *ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (!text_ok(v, (size_t)(ve - v)))
			return 400;
		if (r->nh == HDRS_MAX)
			return 431;
		struct hdr *h = &r->h[r->nh++];
		*h = (struct hdr){l, v, (size_t)(colon - l), (size_t)(ve - v)};
		if (token_eq(l, h->nlen, "content-length")) {
			long long n = 0;
			if (!h->vlen || h->vlen > 18)
				return 400;
			for (size_t i = 0; i < h->vlen; i++) {
				if (v[i] < '0' || v[i] > '9')
					return 400;
				n = n * 10 + (v[i] - '0');
			}
			if (r->clen >= 0 && r->clen != n)
				return 400;
			r->clen = n;
		} else if (token_eq(l, h->nlen, "transfer-encoding")) {
			const char *t;
			size_t i = 0, tl;
			if (!h->vlen) { /* no coding: no framing either */
				chunked_before |= chunked_last;
				chunked_last = 0;
				codings++;
			}
			while (list_next(v, h->vlen, &i, &t, &tl)) {
				chunked_before |= chunked_last;
				chunked_last = token_eq(t, tl, "chunked");
				codings++;
			}
		} else if (token_eq(l, h->nlen, "connection")) {
			if (list_has(v, h->vlen, "close"))
				r->keep_alive = 0;
			else if (list_has(v, h->vlen, "keep-alive") && !r->http11)
				r->keep_alive = 0; /* HTTP/1.0 keep-alive: not offered */
		} else if (token_eq(l, h->nlen, "expect")) {
			if (!token_eq(v, h->vlen, "100-continue"))
				return 417;
			r->expect_continue = r->http11;
		} else if (token_eq(l, h->nlen, "content-type")) {
			r->ctype = v;
			r->ctlen = h->vlen;
		} else if (token_eq(l, h->nlen, "host")) {
			r->host = v;
			r->hostlen = h->vlen;
		}
	}
	if (codings) {
		/* RFC 9112 §6.1, §6.3: chunked last and once, else no framing */
		if (r->clen >= 0 || !r->http11 || !chunked_last || chunked_before)
			return 400;
		if (codings > 1)
			return 501; /* gzip, chunked: a coding not taken */
		r->chunked = 1;
	}
	if (token_eq(r->method, r->mlen, "HEAD"))
		r->head = 1;
	else if (!token_eq(r->method, r->mlen, "GET") && !token_eq(r->method, r->mlen, "POST"))
		return 501;
	if (r->clen > 0 && (unsigned long long)r->clen > O.max_body)
		return 413;
	return 0;
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0'
	       : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
	       : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Percent-decode p[0..n) into out (room for n + 1): 0, or 400 for a bad
 * escape or a NUL, 403 for a "." or ".." segment. */
static int decode_path(const char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		if (ch == '%') {
			int a = i + 2 < n ? hexval(p[i + 1]) : -1;
			int b = a >= 0 ? hexval(p[i + 2]) : -1;
			if (a < 0 || b < 0)
				return 400;
			ch = (char)(a * 16 + b);
			i += 2;
			if (!ch)
				return 400;
		}
		out[o++] = ch;
	}
	out[o] = 0;
	for (char *s = out; s; s = strchr(s + 1, '/')) {
		char *seg = s + (*s == '/'), *e = strchr(seg, '/');
		size_t l = e ? (size_t)(e - seg) : strlen(seg);
		if ((l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.'))
			return 403;
	}
	return 0;
}

/* ---------------------------------------------------------------- CGI */

/* The program to start for file (its absolute path): argv as execve would
 * make it, into av (room for 4), its strings into sbuf; *prog: the file to
 * start.  0, or an errno code. */
static int program_of(const char *file, char **av, char *sbuf, size_t scap, const char **prog)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	char b[256];
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	*prog = file;
	av[0] = (char *)file;
	av[1] = NULL;
	if (n < 2 || b[0] != '#' || b[1] != '!')
		return 0;
	b[n] = 0;
	char *nl = strchr(b, '\n');
	if (!nl)
		return ENOEXEC; /* a #! line too long: execve's ENOEXEC too */
	*nl = 0;
	char *i = b + 2;
	while (*i == ' ' || *i == '\t')
		i++;
	char *ie = i + strcspn(i, " \t\r");
	char *arg = *ie ? ie + 1 : ie;
	*ie = 0;
	while (*arg == ' ' || *arg == '\t')
		arg++;
	size_t il = strlen(i), al = strlen(arg);
	while (al && (arg[al - 1] == ' ' || arg[al - 1] == '\t' || arg[al - 1] == '\r'))
		arg[--al] = 0;
	if (!il)
		return ENOEXEC;
	if (il + 2 * al + 64 > scap)
		return E2BIG;
	const char *base = strrchr(i, '/');
	int k = 0;
	if (al && base && !strcmp(base, "/env") && !strpbrk(arg, " \t/")) {
		/* #!/usr/bin/env PROG: what env would run, found in PATH */
		static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
		char *a = sbuf, *s = sbuf + al + 1;
		size_t d = 0;
		for (; d < 3; d++) {
			snprintf(s, scap - al - 1, "%s/%s", dirs[d], arg);
			if (access(s, X_OK) == 0)
				break;
		}
		memcpy(a, arg, al + 1);
		if (d == 3)
			return ENOENT;
		*prog = s;
		av[k++] = a; /* the name, as env passes it */
	} else {
		strcpy(sbuf, i);
		*prog = sbuf;
		av[k++] = sbuf;
		if (al) {
			av[k] = sbuf + il + 1;
			strcpy(av[k++], arg);
		}
	}
	av[k++] = (char *)file;
	av[k] = NULL;
	return 0;
}

/* The environment of one request, in an arena: its pointers first. */
struct envb {
	char **v;
	int n, cap;
	char *s;
	size_t used, room;
};

static void env_add(struct envb *e, const char *name, const char *val, size_t vlen)
{
	size_t nl = strlen(name);
	if (e->n + 1 >= e->cap || e->used + nl + vlen + 2 > e->room)
		return; /* sized for the head's worst case: cannot happen */
	char *p = e->s + e->used;
	memcpy(p, name, nl);
	p[nl] = '=';
	memcpy(p + nl + 1, val, vlen);
	p[nl + 1 + vlen] = 0;
	e->used += nl + vlen + 2;
	e->v[e->n++] = p;
	e->v[e->n] = NULL;
}

static void env_adds(struct envb *e, const char *name, const char *val)
{
	env_add(e, name, val, strlen(val));
}

/* What a run of a program left: its output is in the response state. */
struct out {
	struct conn *c;
	const struct req *r;
	size_t len;             /* bytes in c->ob */
	int hdr_done;
	size_t body_at;         /* where the body starts in c->ob */
	int status;
	char rsn[64];
	int bad;                /* no CGI header */
	int streaming;          /* the response's head has gone out */
	int chunked;
	size_t sent;            /* body bytes streamed */
	int cut, client_gone;
	char hb[CGI_HEAD_MAX + 512]; /* the response's head */
	size_t hbl;
};

/* Parse the program's header in ob[0..len) if it is complete: 1 when it
 * is (or is bad: o->bad), 0 when more is needed. */
static int cgi_header(struct out *o)
{
	char *b = o->c->ob;
	size_t n = o->len < CGI_HEAD_MAX ? o->len : CGI_HEAD_MAX;
	char *end = NULL;
	size_t endlen = 0;
	for (size_t i = 0; i < n; i++)
		if (b[i] == '\n') {
			if (i + 1 < o->len && b[i + 1] == '\n') {
				end = b + i + 1, endlen = 1;
				break;
			}
			if (i + 2 < o->len && b[i + 1] == '\r' && b[i + 2] == '\n') {
				end = b + i + 1, endlen = 2;
				break;
			}
		}
	if (!end && n > 0 && b[0] == '\n')
		end = b, endlen = 1;
	if (!end && n > 1 && b[0] == '\r' && b[1] == '\n')
		end = b, endlen = 2;
	if (!end) {
		if (o->len >= CGI_HEAD_MAX)
			o->bad = 1;
		return o->bad;
	}
	o->hdr_done = 1;
	o->body_at = (size_t)(end - b) + endlen;
	o->status = 0;
	o->rsn[0] = 0;
	char extra[CGI_HEAD_MAX];
	size_t el = 0;
	int location = 0;
	for (char *l = b; l < end;) {
		char *nl = memchr(l, '\n', (size_t)(end - l));
		char *le = nl;
		if (le > l && le[-1] == '\r')
			le--;
		char *colon = memchr(l, ':', (size_t)(le - l));
		if (!colon || colon == l) {
			o->bad = 1;
			return 1;
		}
		for (char *p = l; p < colon; p++)
			if (!tchar((unsigned char)*p)) {
				o->bad = 1;
				return 1;
			}
		char *v = colon + 1;
		while (v < le && (*v == ' ' || *v == '\t'))
			v++;
		for (char *p = v; p < le; p++)
			if ((unsigned char)*p < ' ' && *p != '\t') {
				o->bad = 1; /* a bare CR: no response splitting */
				return 1;
			}
		size_t nlen = (size_t)(colon - l), vlen = (size_t)(le - v);
		if (token_eq(l, nlen, "status")) {
			if (vlen < 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' ||
			    v[2] < '0' || v[2] > '9' || (vlen > 3 && v[3] != ' ')) {
				o->bad = 1;
				return 1;
			}
			o->status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
			if (o->status < 200) { /* 1xx is no final answer */
				o->bad = 1;
				return 1;
			}
			size_t rl = vlen > 4 ? vlen - 4 : 0;
			if (rl >= sizeof o->rsn)
				rl = sizeof o->rsn - 1;
			memcpy(o->rsn, v + 4, rl);
			o->rsn[rl] = 0;
		} else if (!token_eq(l, nlen, "content-length") &&
			   !token_eq(l, nlen, "transfer-encoding") &&
			   !token_eq(l, nlen, "connection") && !token_eq(l, nlen, "keep-alive")) {
			location |= token_eq(l, nlen, "location");
			if (el + nlen + vlen + 4 > sizeof extra) {
				o->bad = 1;
				return 1;
			}
			memcpy(extra + el, l, nlen);
			el += nlen;
			memcpy(extra + el, ": ", 2);
			memcpy(extra + el + 2, v, vlen);
			el += 2 + vlen;
			memcpy(extra + el, "\r\n", 2);
			el += 2;
		}
		l = nl + 1;
	}
	if (!o->status)
		o->status = location ? 302 : 200;
	const char *rs = reason(o->status);
	if (!rs)
		rs = o->rsn[0] ? o->rsn : "Unknown";
	int k = snprintf(o->hb, sizeof o->hb, "HTTP/1.1 %d %s\r\n", o->status, rs);
	memcpy(o->hb + k, extra, el);
	o->hbl = (size_t)k + el;
	return 1;
}

/* The response's head, completed for a body of len bytes (len < 0: as it
 * comes), into o->hb; its length. */
static size_t finish_head(struct out *o, long long len, int keep_alive)
{
	size_t l = o->hbl, cap = sizeof o->hb;
	int nobody = o->status == 204 || o->status == 304;
	if (!nobody && len >= 0)
		l += (size_t)snprintf(o->hb + l, cap - l, "Content-Length: %lld\r\n", len);
	else if (!nobody && o->chunked)
		l += (size_t)snprintf(o->hb + l, cap - l, "Transfer-Encoding: chunked\r\n");
	if (!keep_alive)
		l += (size_t)snprintf(o->hb + l, cap - l, "Connection: close\r\n");
	l += (size_t)snprintf(o->hb + l, cap - l, "\r\n");
	return l;
}

/* One chunk (or, unchunked, the bytes), unless the request was HEAD. */
static int send_chunk(struct out *o, const char *b, size_t n)
{
	if (o->r->head || !n || o->status == 204 || o->status == 304)
		return 0;
	if (!o->chunked)
		return send_buf(o->c->fd, b, n);
	char sz[24];
	int k = snprintf(sz, sizeof sz, "%zx\r\n", n);
	struct iovec v[3] = {{sz, (size_t)k}, {(void *)b, n}, {"\r\n", 2}};
	return send_iov(o->c->fd, v, 3);
}

/* Take the n bytes the program just wrote at ob + o->len.  0 to go on
 * reading, 1 when the program must be ended (its output is bad, too
 * long, or has nowhere to go); what follows is read and dropped. */
static int take(struct out *o, size_t n)
{
	if (o->bad || o->cut || o->client_gone)
		return 0; /* draining */
	o->len += n;
	if (!o->hdr_done && !cgi_header(o))
		return 0;
	if (o->bad)
		return 1;
	if (o->sent + o->len - o->body_at > O.max_output) {
		o->cut = 1;
		return 1;
	}
	if (!o->streaming && o->len < OUT_CAP)
		return 0;
	if (!o->streaming) { /* the body outgrows ob: its head goes out now */
		o->streaming = 1;
		o->chunked = o->r->http11;
		int ka = o->r->keep_alive && o->r->http11;
		size_t hl = finish_head(o, -1, ka);
		if (send_buf(o->c->fd, o->hb, hl)) {
			o->client_gone = 1;
			return 1;
		}
	}
	if (send_chunk(o, o->c->ob + o->body_at, o->len - o->body_at)) {
		o->client_gone = 1;
		return 1;
	}
	o->sent += o->len - o->body_at;
	o->len = o->body_at = 0;
	return 0;
}

/* The answer once the program has ended: 0 to keep the connection, else
 * close it. */
static int answer(struct out *o, int timed_out, int crashed)
{
	struct conn *c = o->c;
	const struct req *r = o->r;
	if (o->streaming) {
		if (o->cut)
			COUNT(cut);
		else if (timed_out)
			COUNT(timeouts);
		if (o->client_gone || o->cut || timed_out)
			return 1; /* no last chunk: the client sees it cut */
		if (o->chunked && !r->head && send_buf(c->fd, "0\r\n\r\n", 5))
			return 1;
		return !(r->keep_alive && o->chunked);
	}
	if (timed_out) {
		COUNT(timeouts);
		return send_error(c, 504, r->keep_alive, r->head) || !r->keep_alive;
	}
	if (!o->hdr_done || o->bad || o->cut) {
		if (o->cut)
			COUNT(cut);
		else if (crashed)
			COUNT(crashes);
		else
			COUNT(bad);
		return send_error(c, 502, r->keep_alive, r->head) || !r->keep_alive;
	}
	size_t bl = o->len - o->body_at;
	int nobody = o->status == 204 || o->status == 304;
	size_t hl = finish_head(o, nobody ? -1 : (long long)bl, r->keep_alive);
	struct iovec v[2] = {{o->hb, hl}, {c->ob + o->body_at, r->head || nobody ? 0 : bl}};
	return send_iov(c->fd, v, 2) || !r->keep_alive;
}

/* The timer of a μprocess's run: at its deadline, it cancels the
 * connection's microprocess, which then ends the μprocess itself (only the
 * connection's microprocess touches the μprocess's handle: a kill made
 * after kr_uproc_wait had returned could reach a later μprocess that got
 * its memory). */
struct watch {
	kr_mp *conn;
	uint64_t deadline;
	int fired;
};

static void *watch_fn(void *arg)
{
	struct watch *w = arg;
	if (kr_mp_sleep_until(w->deadline) == 0) {
		__atomic_store_n(&w->fired, 1, __ATOMIC_RELEASE);
		kr_mp_cancel(w->conn);
	}
	return NULL;
}

/* The body's writer, for a body that may not fit in a pipe. */
struct feed {
	kr_upipe *up;           /* a μprocess's stdin, or */
	int fd;                 /* a child's */
	const char *b;
	size_t n;
	uint64_t deadline;
};

static void *feed_fn(void *arg)
{
	struct feed *f = arg;
	if (f->up) {
		kr_upipe_write(f->up, f->b, f->n, NULL); /* EPIPE: it has ended */
		kr_upipe_close(f->up, KR_UPIPE_WRITE);
	} else {
		kr_write_all_until(f->fd, f->b, f->n, NULL, f->deadline);
		kr_close(f->fd);
	}
	return NULL;
}

static kr_mp *start_mp(kr_mp_fn fn, void *arg)
{
	kr_attr a = {.stack_size = 16384};
	kr_mp *m;
	return kr_mp_create(&m, &a, fn, arg) ? NULL : m;
}

/* Run file as a μprocess.  0 (the output is in o), or the errno code of
 * the spawn, nothing run. */
static int run_uproc(struct out *o, const char *prog, char **av, char **env, uint64_t deadline,
		     int *timed_out, int *crashed)
{
	const struct req *r = o->r;
	kr_upipe *in = NULL, *out = NULL, *life = NULL;
	int err = kr_upipe_create(&in);
	if (!err)
		err = kr_upipe_create(&out);
	if (!err)
		err = kr_upipe_create(&life);
	kr_uproc *up = NULL;
	if (!err) {
		kr_uproc_attr a;
		kr_uproc_attr_init(&a);
		a.cwd = O.dir;
		a.envp = env;
		kr_uproc_attr_fd_pipe(&a, 0, in, KR_UPIPE_READ);
		kr_uproc_attr_fd_pipe(&a, 1, out, KR_UPIPE_WRITE);
		kr_uproc_attr_fd_host(&a, 2, O.errfd);
		kr_uproc_attr_fd_pipe(&a, LIFE_FD, life, KR_UPIPE_WRITE);
		err = kr_uproc_spawn(&up, prog, av, &a);
	}
	/* the μprocess holds its own ends now (or none) */
	if (in)
		kr_upipe_close(in, KR_UPIPE_READ);
	if (out)
		kr_upipe_close(out, KR_UPIPE_WRITE);
	if (life)
		kr_upipe_close(life, KR_UPIPE_WRITE);
	if (err) {
		if (in)
			kr_upipe_close(in, KR_UPIPE_WRITE);
		if (out)
			kr_upipe_close(out, KR_UPIPE_READ);
		if (life)
			kr_upipe_close(life, KR_UPIPE_READ);
		return err;
	}
	COUNT(uproc);
	if (kr_uproc_reused(up))
		COUNT(reused);
	struct watch w = {kr_mp_self(), deadline, 0};
	kr_mp *wm = start_mp(watch_fn, &w);
	int killed = 0, cancels = 0;
	struct feed f = {.up = in, .b = r->body, .n = r->blen};
	kr_mp *fm = NULL;
	if (r->blen > INLINE_BODY)
		fm = start_mp(feed_fn, &f);
	if (!fm) {
		/* fits in the pipe: written now (a cancel: the deadline) */
		size_t done = 0;
		while (done < r->blen) {
			size_t d = 0;
			int e = kr_upipe_write(in, r->body + done, r->blen - done, &d);
			done += d;
			if (e == ECANCELED) {
				cancels++;
				if (!killed)
					kr_uproc_kill(up, SIGKILL);
				killed = 1;
				break;
			}
			if (e)
				break;
		}
		kr_upipe_close(in, KR_UPIPE_WRITE);
	}
	/* its output, to end of file; then its fd LIFE_FD's */
	for (kr_upipe *p = out; p; p = p == out ? life : NULL) {
		char sink[512];
		for (;;) {
			size_t got = 0;
			int drop = p == life || o->bad || o->cut || o->client_gone;
			char *at = drop ? sink : o->c->ob + o->len;
			size_t room = drop ? sizeof sink : OUT_CAP - o->len;
			int e = kr_upipe_read(p, at, room, &got);
			if (e == ECANCELED) {
				cancels++;
				if (!killed && __atomic_load_n(&w.fired, __ATOMIC_ACQUIRE)) {
					kr_uproc_kill(up, SIGKILL);
					killed = 1;
				}
				continue;
			}
			if (e || got == 0)
				break;
			if (!drop && take(o, got) && !killed) {
				kr_uproc_kill(up, SIGKILL);
				killed = 1;
			}
		}
		kr_upipe_close(p, KR_UPIPE_READ);
	}
	if (wm) {
		kr_mp_cancel(wm);
		kr_mp_join(wm, NULL);
	}
	if (w.fired && !cancels) /* its cancel came after the last wait: drop it */
		while (kr_mp_park_cancellable_until(0) == 0)
			;
	if (fm)
		kr_mp_join(fm, NULL);
	int st = 0;
	kr_uproc_wait(up, &st);
	*timed_out = w.fired && killed && !o->cut && !o->bad && !o->client_gone;
	*crashed = st > 128 && !killed;
	return 0;
}

/* Run it as a child process instead: the same environment, argv,
 * directory and pipes (kernel ones). */
static int run_child(struct out *o, const char *file, char **env, uint64_t deadline,
		     int *timed_out, int *crashed)
{
	const struct req *r = o->r;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err = 0;
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		err = errno;
	pid_t pid = -1;
	if (!err) {
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		sigset_t none, all;
		sigemptyset(&none);
		sigfillset(&all);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		posix_spawn_file_actions_adddup2(&fa, O.errfd, 2);
		posix_spawn_file_actions_addchdir_np(&fa, O.dir);
		posix_spawnattr_init(&at);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &all);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		/* the file itself: the kernel reads its #! line */
		char *cav[2] = {(char *)file, NULL};
		err = posix_spawn(&pid, file, &fa, &at, cav, env);
		posix_spawnattr_destroy(&at);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (err) {
		if (in[1] >= 0)
			close(in[1]);
		if (out[0] >= 0)
			close(out[0]);
		return err;
	}
	COUNT(child);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int killed = 0;
	struct feed f = {.fd = in[1], .b = r->body, .n = r->blen, .deadline = deadline};
	kr_mp *fm = r->blen > INLINE_BODY ? start_mp(feed_fn, &f) : NULL;
	if (!fm) {
		kr_write_all_until(in[1], r->body, r->blen, NULL, deadline);
		kr_close(in[1]);
	}
	char sink[512];
	for (;;) {
		size_t got = 0;
		int drop = o->bad || o->cut || o->client_gone;
		char *at = drop ? sink : o->c->ob + o->len;
		size_t room = drop ? sizeof sink : OUT_CAP - o->len;
		int e = kr_read_until(out[0], at, room, &got, killed ? KR_FOREVER : deadline);
		if (e == ETIMEDOUT) {
			kill(pid, SIGKILL);
			killed = *timed_out = 1;
			continue;
		}
		if (e || got == 0)
			break;
		if (!drop && take(o, got) && !killed) {
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	kr_close(out[0]);
	if (pidfd >= 0) {
		short rev;
		if (kr_poll_until(pidfd, POLLIN, &rev, killed ? KR_FOREVER : deadline) ==
		    ETIMEDOUT) {
			kill(pid, SIGKILL);
			killed = *timed_out = 1;
			kr_poll(pidfd, POLLIN, &rev);
		}
		kr_close(pidfd);
	}
	int st = 0;
	kr_blocking_begin(); /* at once with a pidfd: it has ended */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	kr_blocking_end();
	if (fm)
		kr_mp_join(fm, NULL);
	*crashed = WIFSIGNALED(st) && !killed;
	if (o->cut || o->bad || o->client_gone)
		*timed_out = 0;
	return 0;
}

/* Serve one request whose path is under PREFIX: 0 to keep the
 * connection, else close it. */
static int serve_cgi(struct conn *c, const struct req *r, const char *path, size_t plen,
		     const char *query, size_t qlen)
{
	char name[PATH_MAX], file[PATH_MAX];
	const char *pi = NULL;
	size_t nl = strcspn(path, "/");
	pi = path[nl] ? path + nl : NULL;
	(void)plen;
	if (nl == 0 || path[0] == '.' || nl >= sizeof name ||
	    strlen(O.dir) + 1 + nl >= sizeof file)
		return send_error(c, 404, r->keep_alive, r->head) || !r->keep_alive;
	memcpy(name, path, nl);
	name[nl] = 0;
	if (snprintf(file, sizeof file, "%s/%s", O.dir, name) >= (int)sizeof file)
		return send_error(c, 404, r->keep_alive, r->head) || !r->keep_alive;
	struct stat st;
	if (stat(file, &st) != 0)
		return send_error(c, 404, r->keep_alive, r->head) || !r->keep_alive;
	if (!S_ISREG(st.st_mode) || access(file, X_OK) != 0)
		return send_error(c, 403, r->keep_alive, r->head) || !r->keep_alive;

	/* the environment: sized for the head's worst case */
	struct envb e = {.cap = 40 + HDRS_MAX, .room = 3 * HEAD_MAX + 4 * PATH_MAX + 4096};
	char **v = malloc(sizeof(char *) * (size_t)e.cap + e.room);
	if (!v)
		return send_error(c, 500, r->keep_alive, r->head) || !r->keep_alive;
	e.v = v;
	e.s = (char *)(v + e.cap);
	char num[32];
	env_adds(&e, "GATEWAY_INTERFACE", "CGI/1.1");
	env_adds(&e, "SERVER_SOFTWARE", "karui-cgi_httpd");
	env_adds(&e, "SERVER_PROTOCOL", r->http11 ? "HTTP/1.1" : "HTTP/1.0");
	if (r->host && r->hostlen) {
		size_t hl = r->hostlen;
		const char *colon = memrchr(r->host, ':', hl);
		if (colon && !memchr(colon, ']', hl - (size_t)(colon - r->host)))
			hl = (size_t)(colon - r->host);
		env_add(&e, "SERVER_NAME", r->host, hl);
	} else
		env_adds(&e, "SERVER_NAME", c->local);
	env_adds(&e, "SERVER_ADDR", c->local);
	snprintf(num, sizeof num, "%u", O.listen_port);
	env_adds(&e, "SERVER_PORT", num);
	env_add(&e, "REQUEST_METHOD", r->method, r->mlen);
	env_add(&e, "REQUEST_URI", r->target, r->tlen);
	env_add(&e, "QUERY_STRING", query ? query : "", query ? qlen : 0);
	char sn[PATH_MAX + 16];
	snprintf(sn, sizeof sn, PREFIX "%s", name);
	env_adds(&e, "SCRIPT_NAME", sn);
	env_adds(&e, "SCRIPT_FILENAME", file);
	if (pi)
		env_adds(&e, "PATH_INFO", pi);
	env_adds(&e, "REMOTE_ADDR", c->peer);
	snprintf(num, sizeof num, "%zu", r->blen);
	env_adds(&e, "CONTENT_LENGTH", num);
	if (r->ctype)
		env_add(&e, "CONTENT_TYPE", r->ctype, r->ctlen);
	env_adds(&e, "REDIRECT_STATUS", "200");
	env_adds(&e, "PATH", CGI_PATH + 5);
	for (int i = 0; i < r->nh; i++) {
		const struct hdr *h = &r->h[i];
		if (token_eq(h->name, h->nlen, "content-length") ||
		    token_eq(h->name, h->nlen, "transfer-encoding") ||
		    token_eq(h->name, h->nlen, "content-type") || token_eq(h->name, h->nlen, "proxy"))
			continue;
		char hn[HEAD_MAX + 8];
		size_t k = 0;
		int ok = 1;
		memcpy(hn, "HTTP_", 5);
		k = 5;
		for (size_t j = 0; j < h->nlen; j++) {
			char ch = h->name[j];
			if (ch == '-')
				ch = '_';
			else if (ch >= 'a' && ch <= 'z')
				ch = (char)(ch - 'a' + 'A');
			else if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
				ok = 0; /* an '_' or another sign: it could pose as another */
			hn[k++] = ch;
		}
		hn[k] = 0;
		if (ok)
			env_add(&e, hn, h->value, h->vlen);
	}

	char *av[5], sbuf[2 * PATH_MAX];
	const char *prog = file;
	int err = program_of(file, av, sbuf, sizeof sbuf, &prog);
	uint64_t deadline = deadline_in(O.timeout);
	struct out *o = calloc(1, sizeof *o);
	int close_ = 1;
	if (!o) {
		free(v);
		return send_error(c, 500, r->keep_alive, r->head) || !r->keep_alive;
	}
	o->c = c;
	o->r = r;
	if (kr_sem_wait_until(&O.slots, deadline) != 0) {
		close_ = send_error(c, 503, r->keep_alive, r->head) || !r->keep_alive;
		goto out;
	}
	int timed_out = 0, crashed = 0;
	const char *base = strrchr(prog, '/');
	base = base ? base + 1 : prog;
	if (!err && (!strcmp(base, "sh") || !strcmp(base, "bash") || !strcmp(base, "dash")))
		err = ENOEXEC; /* a shell script: its commands need fork and exec */
	if (err == 0 || err == ENOEXEC) {
		err = err ? err
			  : O.uprocs ? run_uproc(o, prog, av, e.v, deadline, &timed_out, &crashed)
				     : ENOTSUP;
		if (err == ENOEXEC || err == EADDRINUSE || err == EPERM || err == ENOTSUP)
			err = run_child(o, file, e.v, deadline, &timed_out, &crashed);
	}
	kr_sem_post(&O.slots);
	if (err) {
		if (!O.quiet)
			fprintf(stderr, "cgi_httpd: %s: %s\n", file, strerror(err));
		close_ = send_error(c, 500, r->keep_alive, r->head) || !r->keep_alive;
	} else
		close_ = answer(o, timed_out, crashed);
out:
	free(o);
	free(v);
	return close_;
}

/* One request, its head in c->in[0..hlen) and body read: 0 to go on. */
static int handle(struct conn *c, struct req *r)
{
	COUNT(requests);
	const char *q = memchr(r->target, '?', r->tlen);
	size_t pl = q ? (size_t)(q - r->target) : r->tlen;
	char path[HEAD_MAX];
	int code = decode_path(r->target, pl, path);
	if (code)
		return send_error(c, code, r->keep_alive, r->head) || !r->keep_alive;
	if (strncmp(path, PREFIX, strlen(PREFIX)))
		return send_error(c, 404, r->keep_alive, r->head) || !r->keep_alive;
	const char *rest = path + strlen(PREFIX);
	return serve_cgi(c, r, rest, strlen(rest), q ? q + 1 : NULL,
			 q ? r->tlen - pl - 1 : 0);
}

static void addr_of(const struct sockaddr_in *a, char *out, size_t n)
{
	if (!inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)n))
		snprintf(out, n, "127.0.0.1");
}

/* ---------------------------------------------------------------- bodies */

/* The two body readers: 0 with the body in r->body[0..r->blen) (the
 * caller frees it, also on failure) and *used the offset in c->in where
 * the next request begins; else the status to refuse the request with,
 * or -1 when the client went (end of file, an error, the body not whole
 * within --read-timeout): the connection is then closed without an
 * answer, and the program never runs. */

static int continue_(struct conn *c)
{
	return send_buf(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) ? -1 : 0;
}

/* A body of Content-Length bytes. */
static int read_sized(struct conn *c, struct req *r, size_t hlen, size_t *used)
{
	size_t blen = r->clen > 0 ? (size_t)r->clen : 0, got = c->have - hlen;
	if (got > blen)
		got = blen;
	r->body = blen ? malloc(blen) : NULL;
	r->blen = blen;
	if (blen && !r->body)
		return 500;
	if (got)
		memcpy(r->body, c->in + hlen, got);
	*used = hlen + got;
	if (got < blen && r->expect_continue && continue_(c))
		return -1;
	uint64_t dl = deadline_in(O.read_timeout);
	while (got < blen) {
		size_t n;
		int err = kr_recv_until(c->fd, r->body + got, blen - got, 0, &n, dl);
		if (err || n == 0)
			return -1;
		got += n;
	}
	return 0;
}

#define CHUNK_LINE 4096 /* a chunk's size line, a trailer's field line: with CRLF */

/* A chunked body's bytes as they come: c->in[at..c->have) not yet taken,
 * c->in[0..hlen) the head (the request's fields point into it). */
struct body_in {
	struct conn *c;
	size_t hlen, at;
	uint64_t dl;
};

/* More bytes into c->in, those taken given up for room: 0 or -1.  There
 * is room for CHUNK_LINE bytes after the head, a head being at most
 * HEAD_MAX, and body_line asks for more only with less than that. */
static int body_more(struct body_in *b)
{
	struct conn *c = b->c;
	if (b->at > b->hlen) {
		memmove(c->in + b->hlen, c->in + b->at, c->have - b->at);
		c->have -= b->at - b->hlen;
		b->at = b->hlen;
	}
	size_t n;
	int err = kr_recv_until(c->fd, c->in + c->have, sizeof c->in - c->have, 0, &n, b->dl);
	if (err || n == 0)
		return -1;
	c->have += n;
	return 0;
}

/* The next line, its CRLF left out, in *l and *len: 0, -1, or 400 for
 * one over CHUNK_LINE bytes or with a control character (a bare CR or LF
 * among them). */
static int body_line(struct body_in *b, char **l, size_t *len)
{
	size_t seen = 0; /* bytes after b->at searched */
	for (;;) {
		char *s = b->c->in + b->at, *eol;
		size_t n = b->c->have - b->at, from = seen ? seen - 1 : 0;
		if (n > CHUNK_LINE)
			n = CHUNK_LINE;
		if ((eol = memmem(s + from, n - from, "\r\n", 2))) {
			*l = s;
			*len = (size_t)(eol - s);
			b->at += *len + 2;
			return text_ok(s, *len) ? 0 : 400;
		}
		if (n == CHUNK_LINE)
			return 400;
		seen = n;
		if (body_more(b))
			return -1;
	}
}

/* A chunked body (RFC 9112 §7.1): chunk sizes in hex, their extensions
 * ignored, the data of each followed by CRLF, up to a chunk of size 0;
 * then the trailer's field lines, read and dropped, up to an empty one.
 * Decoded, it is at most --max-body bytes (else 413), its trailer at most
 * HEAD_MAX (431); bad syntax, a size over 64 bits, a CRLF missing: 400. */
static int read_chunked(struct conn *c, struct req *r, size_t hlen, size_t *used)
{
	struct body_in b = {c, hlen, hlen, 0};
	size_t cap = 0, tl = 0;
	char *l;
	size_t len;
	int e;
	r->body = NULL;
	r->blen = 0;
	if (c->have == hlen && r->expect_continue && continue_(c))
		return -1;
	b.dl = deadline_in(O.read_timeout);
	for (;;) {
		if ((e = body_line(&b, &l, &len)))
			return e;
		uint64_t n = 0;
		size_t i = 0;
		for (; i < len && hexval(l[i]) >= 0; i++) {
			if (n >> 60)
				return 400;
			n = n << 4 | (uint64_t)hexval(l[i]);
		}
		size_t k = i;
		while (k < len && (l[k] == ' ' || l[k] == '\t'))
			k++;
		if (!i || (k < len && l[k] != ';'))
			return 400; /* no size, "-1", "0x10", "10 x" */
		if (n > O.max_body - r->blen)
			return 413;
		if (!n)
			break;
		while (n) {
			if (r->blen == cap) {
				size_t nc = cap < 16384 ? 16384 : 2 * cap;
				char *nb = realloc(r->body, nc < O.max_body ? nc : O.max_body);
				if (!nb)
					return 500;
				r->body = nb;
				cap = nc < O.max_body ? nc : O.max_body;
			}
			size_t room = cap - r->blen < n ? cap - r->blen : (size_t)n, got;
			if (b.at < c->have) {
				got = c->have - b.at < room ? c->have - b.at : room;
				memcpy(r->body + r->blen, c->in + b.at, got);
				b.at += got;
			} else {
				c->have = b.at = hlen; /* all taken: straight into the body */
				int err = kr_recv_until(c->fd, r->body + r->blen, room, 0, &got, b.dl);
				if (err || !got)
					return -1;
			}
			r->blen += got;
			n -= got;
		}
		if ((e = body_line(&b, &l, &len)))
			return e;
		if (len)
			return 400; /* more data than its size said */
	}
	for (;;) {
		if ((e = body_line(&b, &l, &len)))
			return e;
		if (!len)
			break;
		if ((tl += len + 2) > HEAD_MAX)
			return 431;
		if (!field_colon(l, len))
			return 400;
	}
	*used = b.at;
	return 0;
}

static void *conn(struct conn *c)
{
	struct sockaddr_in a;
	socklen_t al = sizeof a;
	if (getpeername(c->fd, (struct sockaddr *)&a, &al) == 0)
		addr_of(&a, c->peer, sizeof c->peer);
	al = sizeof a;
	if (getsockname(c->fd, (struct sockaddr *)&a, &al) == 0)
		addr_of(&a, c->local, sizeof c->local);
	c->ob = malloc(OUT_CAP);
	struct req *r = malloc(sizeof *r);
	while (c->ob && r) {
		uint64_t dl = deadline_in(O.read_timeout);
		char *end;
		/* (what a chunked body's reading left may be more than a head) */
		while (!(end = memmem(c->in, c->have < HEAD_MAX ? c->have : HEAD_MAX, "\r\n\r\n",
				      4))) {
			if (c->have >= HEAD_MAX) {
				char *eol = memmem(c->in, c->have, "\r\n", 2);
				send_error(c, eol ? 431 : 414, 0, 0);
				goto done;
			}
			size_t n;
			int err = kr_recv_until(c->fd, c->in + c->have, HEAD_MAX - c->have, 0, &n, dl);
			if (err || n == 0)
				goto done; /* closed, broken, or too slow: no answer */
			c->have += n;
		}
		size_t hlen = (size_t)(end + 4 - c->in);
		int code = parse_head(c->in, hlen, r);
		if (code) {
			send_error(c, code, 0, 0);
			goto done;
		}
		size_t used = hlen;
		code = r->chunked ? read_chunked(c, r, hlen, &used) : read_sized(c, r, hlen, &used);
		if (code) {
			if (code > 0)
				send_error(c, code, 0, 0);
			free(r->body);
			goto done;
		}
		int stop = handle(c, r);
		free(r->body);
		memmove(c->in, c->in + used, c->have - used);
		c->have -= used;
		if (stop)
			break;
	}
done:
	free(r);
	free(c->ob);
	kr_close(c->fd);
	free(c);
	return NULL;
}

/* serve_accept's: a connection's record, then conn. */
static void *conn_of_fd(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct conn *c = calloc(1, sizeof *c);
	if (!c) {
		kr_close(fd);
		return NULL;
	}
	c->fd = fd;
	return conn(c);
}

/* ---------------------------------------------------------------- main */

static int usage(const char *me)
{
	fprintf(stderr,
		"usage: %s --cgi-dir DIR [--port P] [--vps N] [--timeout MS] [--read-timeout MS]\n"
		"       [--max-body BYTES] [--max-output BYTES] [--max-cgi N] [--keep N] [--quiet]\n",
		me);
	return 2;
}

int main(int argc, char **argv)
{
	O.port = 0;
	O.vps = 2;
	O.keep = 32;
	O.max_cgi = 64;
	O.timeout = 5000;
	O.read_timeout = 10000;
	O.max_body = 1 << 20;
	O.max_output = 16 << 20;
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		unsigned long long v = 0;
		const char *a = argv[i];
		if (!strcmp(a, "--quiet")) {
			O.quiet = 1;
			continue;
		}
		if (i + 1 >= argc)
			return usage(argv[0]);
		const char *val = argv[++i];
		if (!strcmp(a, "--cgi-dir")) {
			dir = val;
			continue;
		}
		v = strtoull(val, &end, 10);
		if (!*val || *end)
			return usage(argv[0]);
		if (!strcmp(a, "--port") && v < 65536)
			O.port = (unsigned)v;
		else if (!strcmp(a, "--vps") && v >= 1 && v <= KR_VP_MAX)
			O.vps = (unsigned)v;
		else if (!strcmp(a, "--timeout") && v >= 1)
			O.timeout = v;
		else if (!strcmp(a, "--read-timeout") && v >= 1)
			O.read_timeout = v;
		else if (!strcmp(a, "--max-body"))
			O.max_body = v;
		else if (!strcmp(a, "--max-output"))
			O.max_output = v;
		else if (!strcmp(a, "--max-cgi") && v >= 1)
			O.max_cgi = (unsigned)v;
		else if (!strcmp(a, "--keep") && v <= KR_UPROC_KEEP_MAX)
			O.keep = (unsigned)v;
		else
			return usage(argv[0]);
	}
	if (!dir)
		return usage(argv[0]);
	static char absdir[PATH_MAX];
	if (!realpath(dir, absdir)) {
		fprintf(stderr, "cgi_httpd: %s: %s\n", dir, strerror(errno));
		return 2;
	}
	O.dir = absdir;
	O.timeout *= 1000000;
	O.read_timeout *= 1000000;
	O.errfd = O.quiet ? open("/dev/null", O_WRONLY | O_CLOEXEC) : 2;
	signal(SIGPIPE, SIG_IGN);

	serve_block_signals();
	kr_config cfg = {.vps = O.vps};
	int err = kr_init(&cfg);
	if (err) {
		fprintf(stderr, "cgi_httpd: kr_init: %s\n", strerror(err));
		return 1;
	}
	kr_sem_init(&O.slots, O.max_cgi);
	kr_uproc_keep(O.keep);
	/* can μprocesses run here?  A spawn says ENOTSUP first where not */
	kr_uproc *probe;
	char *pav[] = {"/", NULL};
	err = kr_uproc_spawn(&probe, "/", pav, NULL);
	if (!err)
		kr_uproc_wait(probe, NULL);
	O.uprocs = err != ENOTSUP;
	int ls = serve_listen("cgi_httpd", O.port);
	if (ls < 0)
		return 1;
	struct sockaddr_in la;
	socklen_t ll = sizeof la;
	getsockname(ls, (struct sockaddr *)&la, &ll);
	O.listen_port = ntohs(la.sin_port);
	if (O.uprocs)
		printf("cgi_httpd: CGI programs run as μprocesses from %s\n", O.dir);
	else
		printf("cgi_httpd: no μprocesses here (kr_uproc_spawn: ENOTSUP): CGI programs "
		       "run as child processes from %s\n", O.dir);
	fflush(stdout);
	serve_stop_on_signal(ls);
	unsigned long conns = 0;
	serve_accept("cgi_httpd", ls, conn_of_fd, 256 * 1024, &conns);
	printf("cgi_httpd: stopped after %lu requests: %lu programs run as μprocesses (%lu "
	       "from kept images), %lu as child processes; %lu timed out, %lu crashed, %lu "
	       "bad output, %lu cut\n",
	       N.requests, N.uproc, N.reused, N.child, N.timeouts, N.crashes, N.bad, N.cut);
	return 0;
}
