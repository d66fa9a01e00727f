/*
 * A CGI program whose output is no CGI response: its first line is no
 * header field.  The server answers 502.
 */
#include <stdio.h>

int main(void)
{
	fputs("this is not a header\r\n\r\nbody\n", stdout);
	return 0;
}
