/*
 * A CGI/1.1 program (RFC 3875) for karui's CGI server (examples/cgi_httpd.c):
 * its tests run it there and under lighttpd's mod_cgi and compare, and
 * karui-bench's seed003.cgi serves it.  It prints a few of the
 * meta-variables it was given, "(unset)" for those it was not, then the
 * request body it read on its standard input (CONTENT_LENGTH bytes, or
 * what comes before end of file).  hello.pl prints the same, byte for byte.
 * A query string with "status=NNN" makes it answer with that status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const VARS[] = {"GATEWAY_INTERFACE", "SERVER_PROTOCOL", "REQUEST_METHOD",
				   "QUERY_STRING", "CONTENT_LENGTH", "CONTENT_TYPE",
				   "SCRIPT_NAME", "PATH_INFO", "REMOTE_ADDR", "HTTP_X_CGI_TEST"};

int main(void)
{
	const char *q = getenv("QUERY_STRING"), *s = q ? strstr(q, "status=") : NULL;
	printf("Content-Type: text/plain\r\n");
	if (s)
		printf("Status: %d Chosen\r\n", atoi(s + 7));
	printf("\r\n");
	for (size_t i = 0; i < sizeof VARS / sizeof *VARS; i++) {
		const char *v = getenv(VARS[i]);
		printf("%s=%s\n", VARS[i], v ? v : "(unset)");
	}
	const char *cl = getenv("CONTENT_LENGTH");
	long want = cl && *cl ? atol(cl) : -1; /* -1: to end of file */
	static char buf[65536];
	size_t n, len = 0;
	printf("body: ");
	fflush(stdout);
	while ((want < 0 || (long)len < want) &&
	       (n = fread(buf, 1, want < 0 || want - (long)len > (long)sizeof buf
					       ? sizeof buf : (size_t)(want - (long)len),
			  stdin)) > 0) {
		fwrite(buf, 1, n, stdout);
		len += n;
	}
	printf("\nbody bytes: %zu\n", len);
	return 0;
}
