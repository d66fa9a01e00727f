/*
 * A program whose code holds a WRPKRU, which it never runs: test_iso
 * starts it isolated.  Where μprocesses have protection keys karui makes
 * that instruction a UD2 in the μprocess's copy (such code could open
 * every key); elsewhere it stays.  It prints the instruction's 3 bytes in
 * hex ("0f01ef", or "0f0b90").  A plain PIE with no sanitizer.
 */
#include <stdio.h>

extern const unsigned char iso_wrpkru_at[];

int main(int argc, char **argv)
{
	(void)argv;
#if defined(__x86_64__)
	if (argc > 100)
		__asm__ volatile(".globl iso_wrpkru_at\n"
				 "iso_wrpkru_at: wrpkru" : : "a"(0), "c"(0), "d"(0));
	printf("%02x%02x%02x\n", iso_wrpkru_at[0], iso_wrpkru_at[1], iso_wrpkru_at[2]);
#endif
	return 0;
}
