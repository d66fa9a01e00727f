/*
 * A small ordinary program that test_iso runs as a μprocess, isolated or
 * not (kr_uproc_attr.isolate): a victim whose memory another μprocess
 * aims at, and that other one.  A plain PIE with no sanitizer, as
 * uproc_probe.
 *   iso_probe victim         fills a heap block and a stack block, prints
 *                            their addresses ("HEAP STACK"), reads its
 *                            stdin to its end, then prints "intact" (and
 *                            exits 0) or "changed" (exits 1)
 *   iso_probe spinner        as victim, but runs while it waits: it reads
 *                            its heap block in a loop, and asks its stdin
 *                            (poll, no wait) only every million rounds
 *   iso_probe code           makes code that holds a WRPKRU (never run):
 *                            an anonymous page made executable, and one
 *                            mapped writable and executable at once;
 *                            prints "mprotect E" and "rwx E", E each
 *                            call's errno (0: it succeeded)
 *   iso_probe write ADDR     writes a byte at ADDR (hex), prints "wrote"
 *   iso_probe write-catch ADDR   the same with a SIGSEGV handler, which
 *                            prints "caught" and exits 42
 *   iso_probe read-into ADDR FILE   reads a byte from a pipe of its own,
 *                            then from FILE, into ADDR (hex): prints
 *                            "pipe E" and "file E", E each read's errno
 *                            (0: it read the byte)
 *   iso_probe threads N      N threads, each writing 200 lines "T I" of
 *                            its own malloc'ed text to stdout, with
 *                            sched_yield between; then "joined"
 *   iso_probe spawn PATH ARG...  posix_spawn (vfork and exec) of PATH,
 *                            waitpid: prints "status S"
 *   iso_probe fork           fork: the child writes its heap and exits 7;
 *                            prints "child S" and its own heap's byte
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK 4096

static void caught(int sig)
{
	(void)sig;
	static const char m[] = "caught\n";
	ssize_t w = write(1, m, sizeof m - 1);
	(void)w;
	_exit(42);
}

static int all(const unsigned char *p, unsigned char c)
{
	for (int i = 0; i < BLOCK; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

static void *thread(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < 200; i++) {
		char *line = malloc(64);
		int n = snprintf(line, 64, "%ld %d\n", id, i);
		if (write(1, line, (size_t)n) != n)
			exit(3);
		free(line);
		sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	extern char **environ;
	if (argc < 2)
		return 2;
	const char *m = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "victim")) {
		unsigned char *heap = malloc(BLOCK), stack[BLOCK];
		memset(heap, 'h', BLOCK);
		memset(stack, 's', BLOCK);
		printf("%lx %lx\n", (unsigned long)heap, (unsigned long)stack);
		char buf[256];
		while (read(0, buf, sizeof buf) > 0)
			;
		__asm__ volatile("" ::"r"(stack) : "memory");
		int ok = all(heap, 'h') && all(stack, 's');
		printf("%s\n", ok ? "intact" : "changed");
		return !ok;
	}
	if (!strcmp(m, "spinner")) {
		volatile unsigned char *heap = malloc(BLOCK);
		memset((void *)heap, 'h', BLOCK);
		printf("%lx %lx\n", (unsigned long)heap, (unsigned long)heap);
		struct pollfd in = {.fd = 0, .events = POLLIN};
		int ok = 1;
		while (ok && poll(&in, 1, 0) == 0)
			for (long i = 0; ok && i < 1000000; i++)
				ok = heap[100 + i % 64] == 'h';
		ok = ok && all((const unsigned char *)heap, 'h');
		printf("%s\n", ok ? "intact" : "changed");
		return !ok;
	}
	if (!strcmp(m, "code")) {
		/* wrpkru; ret, kept masked: this program's own code must hold
		 * no WRPKRU, not even in an immediate */
		static volatile unsigned char masked[] = {0x0f ^ 0x55, 0x01 ^ 0x55, 0xef ^ 0x55,
							  0xc3 ^ 0x55};
		unsigned char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 3;
		for (int i = 0; i < 4; i++)
			p[100 + i] = masked[i] ^ 0x55;
		errno = 0;
		printf("mprotect %d\n", mprotect(p, BLOCK, PROT_READ | PROT_EXEC) ? errno : 0);
		errno = 0;
		void *q = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		printf("rwx %d\n", q == MAP_FAILED ? errno : 0);
		return 0;
	}
	if (!strcmp(m, "write") || !strcmp(m, "write-catch")) {
		if (argc < 3)
			return 2;
		if (!strcmp(m, "write-catch"))
			signal(SIGSEGV, caught);
		volatile unsigned char *p = (unsigned char *)strtoul(argv[2], NULL, 16);
		*p = 'X';
		printf("wrote\n");
		return 0;
	}
	if (!strcmp(m, "read-into")) {
		if (argc < 4)
			return 2;
		char *p = (char *)strtoul(argv[2], NULL, 16);
		int fds[2];
		if (pipe(fds) || write(fds[1], "x", 1) != 1)
			return 3;
		errno = 0;
		printf("pipe %d\n", read(fds[0], p, 1) == 1 ? 0 : errno);
		int fd = open(argv[3], O_RDONLY);
		if (fd < 0)
			return 3;
		errno = 0;
		printf("file %d\n", read(fd, p + 1, 1) == 1 ? 0 : errno);
		return 0;
	}
	if (!strcmp(m, "threads")) {
		int n = argc > 2 ? atoi(argv[2]) : 4;
		pthread_t t[16];
		for (long i = 0; i < n && i < 16; i++)
			if (pthread_create(&t[i], NULL, thread, (void *)i))
				return 3;
		for (int i = 0; i < n && i < 16; i++)
			pthread_join(t[i], NULL);
		printf("joined\n");
		return 0;
	}
	if (!strcmp(m, "spawn")) {
		if (argc < 3)
			return 2;
		pid_t pid;
		int e = posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ);
		if (e)
			return 3;
		int st = -1;
		if (waitpid(pid, &st, 0) != pid)
			return 4;
		printf("status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return 0;
	}
	if (!strcmp(m, "fork")) {
		char *heap = malloc(BLOCK);
		memset(heap, 'p', BLOCK);
		pid_t pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			memset(heap, 'c', BLOCK);
			_exit(7);
		}
		int st = -1;
		if (waitpid(pid, &st, 0) != pid)
			return 4;
		printf("child %d %c\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, heap[0]);
		return 0;
	}
	return 2;
}
