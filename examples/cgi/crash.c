/*
 * A CGI program that crashes before its header is complete: it writes
 * part of a header line, then dereferences a null pointer (SIGSEGV).  The
 * server answers 502 and goes on.
 */
#include <stdio.h>

int main(void)
{
	fputs("Content-Type: text/pl", stdout);
	fflush(stdout);
	*(volatile int *)0 = 1;
	return 0;
}
