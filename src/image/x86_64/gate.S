/*
 * karui image layer, x86-64 — the ways into and out of a μprocess's code.
 *
 * Syscall User Dispatch traps every system call made outside the gate
 * (kr__img_gate .. kr__img_gate_end) while the VP's selector byte says
 * BLOCK, which it does exactly while a μprocess's own code runs.  The
 * SIGSYS handler is entered on the μprocess's stack with the μprocess's
 * thread pointer in %fs: it first says ALLOW and installs the VP's own
 * thread pointer (both found through %gs, which karui points at the VP's
 * struct kr__img_vp), calls kr__img_trap in C, which may park the
 * microprocess and resume it on another VP, then installs the thread
 * pointer kr__img_trap returns, says BLOCK on the VP it is then on, and
 * returns through the restorer, whose rt_sigreturn lies inside the gate.
 * The kernel checks the address *after* a syscall instruction against the
 * gate, so the gate's one ends with a byte of padding.
 */
	.text

	.globl kr__img_gate
	.globl kr__img_gate_end
	.globl kr__img_restorer
	.p2align 4
kr__img_gate:
kr__img_restorer:
	mov $15, %eax                   /* rt_sigreturn */
	syscall
	ud2
kr__img_gate_end:

/* void kr__img_sigsys(int sig, siginfo_t *si, void *uc) */
	.globl kr__img_sigsys
	.type kr__img_sigsys, @function
	.p2align 4
kr__img_sigsys:
	.cfi_startproc
	movb $0, %gs:0                  /* PR_SYS_DISPATCH_FILTER_ALLOW */
	mov %gs:8, %rax
	wrfsbase %rax
	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	mov %rdx, %rdi
	call kr__img_trap               /* -> the μprocess's thread pointer */
	add $8, %rsp
	.cfi_adjust_cfa_offset -8
	wrfsbase %rax
	movb $1, %gs:0                  /* PR_SYS_DISPATCH_FILTER_BLOCK */
	ret
	.cfi_endproc
	.size kr__img_sigsys, .-kr__img_sigsys

/* void kr__img_sigfault(int sig, siginfo_t *si, void *uc): a fault, on the
 * VP's alternate stack.  In a μprocess's code (the thread is armed and its
 * selector says BLOCK), first the VP's own thread pointer and ALLOW. */
	.globl kr__img_sigfault
	.type kr__img_sigfault, @function
	.p2align 4
kr__img_sigfault:
	.cfi_startproc
	xor %ecx, %ecx
	rdgsbase %rax
	test %rax, %rax
	jz 1f
	cmpb $1, (%rax)
	jne 1f
	movb $0, (%rax)
	mov 8(%rax), %rax
	wrfsbase %rax
	mov $1, %ecx
1:	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	call kr__img_fault              /* (sig, si, uc, in_uproc) */
	add $8, %rsp
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_endproc
	.size kr__img_sigfault, .-kr__img_sigfault

/* void kr__img_start(entry, sp, fs): the first instruction of a μprocess,
 * as the kernel starts a program: %rsp at argc, %rdx 0 (no finaliser for
 * _start to register), the other registers cleared. */
	.globl kr__img_start
	.type kr__img_start, @function
	.p2align 4
kr__img_start:
	mov %rsi, %rsp
	wrfsbase %rdx
	mov %rdi, %r11
	xor %eax, %eax
	xor %ebx, %ebx
	xor %ecx, %ecx
	xor %edx, %edx
	xor %esi, %esi
	xor %edi, %edi
	xor %ebp, %ebp
	xor %r8d, %r8d
	xor %r9d, %r9d
	xor %r10d, %r10d
	xor %r12d, %r12d
	xor %r13d, %r13d
	xor %r14d, %r14d
	xor %r15d, %r15d
	movb $1, %gs:0                  /* PR_SYS_DISPATCH_FILTER_BLOCK */
	jmp *%r11
	.size kr__img_start, .-kr__img_start

	.section .note.GNU-stack,"",@progbits
