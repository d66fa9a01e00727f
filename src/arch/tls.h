/*
 * Reading a thread-local pointer so that it is re-read on every use.
 *
 * A microprocess can resume on another kernel thread after any switch, but
 * compilers treat the thread pointer as constant inside a function (GCC
 * hoists `mrs tpidr_el0` on aarch64 across calls).  KR_TLS_GET re-reads it
 * with an asm volatile each time.  The variable must be initial-exec TLS.
 */
#ifndef KARUI_ARCH_TLS_H
#define KARUI_ARCH_TLS_H

#if defined(__x86_64__)
#define KR_TLS_GET(var)                                                        \
	({                                                                     \
		__typeof__(var) v_;                                            \
		__asm__ volatile("movq " #var "@gottpoff(%%rip), %0\n\t"        \
				 "movq %%fs:(%0), %0"                           \
				 : "=r"(v_));                                   \
		v_;                                                            \
	})
#elif defined(__aarch64__)
#define KR_TLS_GET(var)                                                        \
	({                                                                     \
		__typeof__(var) v_;                                            \
		unsigned long tp_, off_;                                       \
		__asm__ volatile("mrs %1, tpidr_el0\n\t"                        \
				 "adrp %2, :gottprel:" #var "\n\t"              \
				 "ldr %2, [%2, #:gottprel_lo12:" #var "]\n\t"   \
				 "ldr %0, [%1, %2]"                              \
				 : "=r"(v_), "=&r"(tp_), "=&r"(off_));           \
		v_;                                                            \
	})
#endif

#endif
