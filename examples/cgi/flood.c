/*
 * A CGI program that writes forever: a header, then 'x's without end.  The
 * server cuts it at its output limit (--max-output) and ends it.
 */
#include <string.h>
#include <unistd.h>

int main(void)
{
	static char buf[65536];
	const char h[] = "Content-Type: text/plain\r\n\r\n";
	if (write(1, h, sizeof h - 1) < 0)
		return 1;
	memset(buf, 'x', sizeof buf);
	while (write(1, buf, sizeof buf) > 0)
		;
	return 1;
}
