/*
 * A small ordinary program that test_uproc runs as a μprocess to make it
 * do what Debian's programs do not do on demand: crash in each way, leak,
 * print what it sees of its process state.  Built as a plain PIE, with no
 * sanitizer: it must look to karui like any distribution binary.
 *   uproc_probe segv|abort|fpe|ill|exit N|return N
 *   uproc_probe pid          its pid, twice: getpid and the raw call
 *   uproc_probe cwd          getcwd
 *   uproc_probe umask        the umask it got
 *   uproc_probe leak N       opens N files and maps N MiB, touches them,
 *                            and ends without releasing any
 *   uproc_probe setuid       setuid(0)'s errno
 *   uproc_probe fork         fork()'s errno
 *   uproc_probe thread       pthread_create's error
 *   uproc_probe write-after-close   writes to stdout after its reader went
 *   uproc_probe env NAME     getenv
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *nothing(void *a) { return a; }

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *m = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(m, "segv"))
		return *(volatile int *)(uintptr_t)argc * 0 + *(volatile int *)(uintptr_t)(argc * 8);
	if (!strcmp(m, "abort"))
		abort();
	if (!strcmp(m, "fpe")) {
		volatile int z = 0;
		return 100 / z;
	}
	if (!strcmp(m, "ill"))
		__builtin_trap();
	if (!strcmp(m, "exit")) {
		printf("before exit\n");
		exit(n);
	}
	if (!strcmp(m, "return"))
		return n;
	if (!strcmp(m, "pid")) {
		printf("%d %ld\n", getpid(), syscall(SYS_getpid));
		return 0;
	}
	if (!strcmp(m, "cwd")) {
		char b[4096];
		puts(getcwd(b, sizeof b) ? b : strerror(errno));
		return 0;
	}
	if (!strcmp(m, "umask")) {
		printf("%03o\n", umask(0));
		return 0;
	}
	if (!strcmp(m, "leak")) {
		for (int i = 0; i < n; i++) {
			if (open("/dev/null", O_RDONLY) < 0)
				return 3;
			char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				return 4;
			memset(p, 1, 1 << 20);
			if (!malloc(4096))
				return 5;
		}
		return 0;
	}
	if (!strcmp(m, "setuid")) {
		printf("%s\n", setuid(0) ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(m, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		printf("%s\n", p < 0 ? strerrorname_np(errno) : "forked");
		return 0;
	}
	if (!strcmp(m, "thread")) {
		pthread_t t;
		int e = pthread_create(&t, NULL, nothing, NULL);
		printf("%s\n", e ? strerrorname_np(e) : "0");
		return 0;
	}
	if (!strcmp(m, "write-after-close")) {
		for (;;)
			if (write(1, "y\n", 2) < 0) {
				fprintf(stderr, "write: %s\n", strerrorname_np(errno));
				return 7;
			}
	}
	if (!strcmp(m, "env")) {
		const char *v = getenv(argv[2]);
		puts(v ? v : "(unset)");
		return 0;
	}
	return 2;
}
