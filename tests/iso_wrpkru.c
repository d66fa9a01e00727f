/*
 * A program whose code holds a WRPKRU, which it never runs: test_iso
 * starts it isolated, and where μprocesses have protection keys karui
 * refuses to start it (status 126), since such code could open every
 * key; elsewhere it prints "ran".  A plain PIE with no sanitizer.
 */
#include <stdio.h>

int main(int argc, char **argv)
{
	(void)argv;
#if defined(__x86_64__)
	if (argc > 100)
		__asm__ volatile("wrpkru" : : "a"(0), "c"(0), "d"(0));
#endif
	puts("ran");
	return 0;
}
