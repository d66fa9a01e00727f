/*
 * karui image layer, x86-64 — reading and writing a μprocess's memory
 * where a bad pointer is the μprocess's error, not the host's death.
 *
 * Every address a μprocess hands karui is its word only: karui reads or
 * writes it here, with these leaf functions, which use no stack and no
 * register the ABI keeps.  A fault (SIGSEGV, SIGBUS) whose instruction
 * lies between kr__ua_begin and kr__ua_end is sent by kr__img_sigfault
 * (gate.S), before anything else, to kr__ua_fault, which returns -EFAULT
 * from the function that faulted: the stack then holds just its return
 * address.  The kernel's copies do the same with their exception table.
 */
	.text

	.globl kr__ua_begin
	.globl kr__ua_end
	.globl kr__ua_fault
	.p2align 4
kr__ua_begin:

/* long kr__ucopy(void *dst, const void *src, size_t n): 0 or -EFAULT */
	.globl kr__ucopy
	.type kr__ucopy, @function
kr__ucopy:
	.cfi_startproc
	mov %rdx, %rcx
	rep movsb
	xor %eax, %eax
	ret
	.cfi_endproc
	.size kr__ucopy, .-kr__ucopy

/* long kr__ustr(char *dst, const char *src, size_t cap): the string at
 * src, its NUL included, copied to dst: its length; -ENAMETOOLONG if it
 * has no NUL in its first cap bytes; -EFAULT. */
	.globl kr__ustr
	.type kr__ustr, @function
	.p2align 4
kr__ustr:
	.cfi_startproc
	xor %eax, %eax
1:	cmp %rdx, %rax
	jae 2f
	movzbl (%rsi,%rax), %ecx
	mov %cl, (%rdi,%rax)
	test %cl, %cl
	jz 3f
	inc %rax
	jmp 1b
2:	mov $-36, %rax                  /* ENAMETOOLONG */
3:	ret
	.cfi_endproc
	.size kr__ustr, .-kr__ustr

/* long kr__uprobe(void *p, size_t n, int write): 0 if each byte of
 * [p, p + n) can be read, and written if `write` (the byte read is written
 * back: the range is the μprocess's buffer, that the call it made is to
 * fill), or -EFAULT.  One byte a page. */
	.globl kr__uprobe
	.type kr__uprobe, @function
	.p2align 4
kr__uprobe:
	.cfi_startproc
	test %rsi, %rsi
	jz 3f
	add %rdi, %rsi                  /* the end */
	jc kr__ua_fault
1:	movzbl (%rdi), %eax
	test %edx, %edx
	jz 2f
	mov %al, (%rdi)
2:	and $-4096, %rdi
	add $4096, %rdi
	cmp %rsi, %rdi
	jb 1b
3:	xor %eax, %eax
	ret
	.cfi_endproc
	.size kr__uprobe, .-kr__uprobe

/* long kr__ucmpxchg32(uint32_t *p, uint32_t old, uint32_t new): *p
 * becomes new if it is old, atomically; the value it had (zero-extended),
 * or -EFAULT. */
	.globl kr__ucmpxchg32
	.type kr__ucmpxchg32, @function
	.p2align 4
kr__ucmpxchg32:
	.cfi_startproc
	mov %esi, %eax
	lock cmpxchg %edx, (%rdi)
	ret
	.cfi_endproc
	.size kr__ucmpxchg32, .-kr__ucmpxchg32

kr__ua_fault:
	mov $-14, %rax                  /* EFAULT */
	ret
kr__ua_end:

	.section .note.GNU-stack, "", @progbits
