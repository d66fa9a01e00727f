/*
 * karui-bench-hello — seed 003's program of Table 6 (§6.7): it prints
 * "Hello, World" and nothing else.  Then it reads its stdin to end of file,
 * so that seed003.table6 (exp_uproc.c) finds it alive, blocked in a read,
 * while it measures its memory as a μprocess and as a process.  A plain
 * PIE linked with the C library, like karui-bench-uprog.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	char c;
	printf("Hello, World\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
