/*
 * A CGI program that never answers: it waits in a system call (a sleep of
 * an hour), so the server's timeout ends it (SIGKILL) and answers 504.
 */
#include <unistd.h>

int main(void)
{
	for (;;)
		sleep(3600);
}
