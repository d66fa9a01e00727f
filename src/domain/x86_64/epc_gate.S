/*
 * karui domains — the EPC call gate, x86-64 (SysV ABI).
 *
 * int kr__epc_gate(void *arg [rdi], void *result [rsi], kr_epc_proc fn [rdx],
 *                  void *stack_top [rcx], void **saved_sp [r8])
 *
 * Saves the caller's callee-saved registers on its own stack, stores that
 * stack pointer in *saved_sp (the call's frame, in the host's memory),
 * switches to stack_top, the callee's stack, and calls fn(arg, result).
 * When fn returns, no register but rsp is trusted (the procedure is not):
 * the caller's stack pointer comes back from the calling microprocess's
 * own record of its innermost call (kr__epc_resume_sp, in C), and the
 * caller's registers from its stack.
 *
 * kr__epc_unwind is where a fault in the procedure resumes (domain.c's
 * signal handler sets rsp to the saved one and eax to the status): the
 * same way out, without the procedure's return.
 */
	.text
	.globl	kr__epc_gate
	.hidden	kr__epc_gate
	.type	kr__epc_gate, @function
	.p2align 4
kr__epc_gate:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp		/* 16-byte alignment at the calls below */
	movq	%rsp, (%r8)
	movq	%rcx, %rsp
	callq	*%rdx
	movl	%eax, %ebx		/* the procedure's status */
	callq	kr__epc_resume_sp
	movq	%rax, %rsp
	movl	%ebx, %eax
	.globl	kr__epc_unwind
	.hidden	kr__epc_unwind
kr__epc_unwind:
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	kr__epc_gate, .-kr__epc_gate

/* void kr__epc_fault_entry(int sig, siginfo_t *si, void *uc): domain.c's
 * handler of faults.  kr__epc_fault (C) ends a procedure's call, or names
 * the handler that was there before, which is entered as the kernel would
 * have entered it: the same arguments and, in place of the return address
 * the kernel pushed (our restorer), its own restorer.  (The μprocesses'
 * handler needs its own: it returns with the μprocess's system calls
 * blocked, which only its restorer may then make.) */
	.globl	kr__epc_fault_entry
	.hidden	kr__epc_fault_entry
	.type	kr__epc_fault_entry, @function
	.p2align 4
kr__epc_fault_entry:
	.cfi_startproc
	pushq	%rdi
	pushq	%rsi
	pushq	%rdx
	callq	kr__epc_fault		/* -> %rax the handler (0: none), %rdx its restorer */
	movq	%rdx, %rcx
	popq	%rdx
	popq	%rsi
	popq	%rdi
	testq	%rax, %rax
	jz	1f
	testq	%rcx, %rcx
	jz	2f
	movq	%rcx, (%rsp)
2:	jmp	*%rax
1:	ret
	.cfi_endproc
	.size	kr__epc_fault_entry, .-kr__epc_fault_entry

	.section .note.GNU-stack,"",@progbits
