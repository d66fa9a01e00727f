/*
 * karui domains — the EPC call gates, x86-64 (SysV ABI).
 *
 * int kr__epc_gate(void *arg [rdi], void *result [rsi], kr_epc_proc fn [rdx],
 *                  void *stack_top [rcx], void **saved_sp [r8])
 *
 * Saves the caller's callee-saved registers on its own stack, stores that
 * stack pointer in *saved_sp (the call's frame), switches to stack_top,
 * the callee's stack, and calls fn(arg, result).  When fn returns, no
 * register but rsp is trusted (the procedure is not): the caller's stack
 * pointer comes back from the VP's record of its innermost call
 * (kr__epc_resume_sp, in C), and the caller's registers from its stack.
 *
 * kr__epc_gate_h is the same under KR_EPC_H, with the callee's PKRU as a
 * sixth argument [r9d]: written once on the callee's stack (the caller's
 * rights cannot reach it) and the caller's written back from
 * kr__epc_resume.  Its WRPKRUs are checked as ERIM checks its gates:
 * after each one the value written is compared with what the VP's record
 * of its calls says it must be (kr__epc_expect, kr__epc_resume called
 * again), and written again, that value, until the two agree (they differ
 * when the access lists changed meanwhile, or when a jump came straight
 * to the WRPKRU); the stack pointer the way back uses is taken from that
 * record after the check, never from a register.  So a jump into the
 * middle of a gate leaves no PKRU but the one the record says, and
 * returns nowhere but to the caller.  The WRPKRUs sit between
 * kr__epc_wrpkru_lo and kr__epc_wrpkru_hi, the only ones a domain's code
 * may share an object with (domain.c's scan).
 *
 * kr__epc_unwind is where a fault in the procedure resumes (domain.c's
 * signal handler sets rsp to the saved one, eax to the status and, under
 * KR_EPC_H, the caller's PKRU in the signal frame): the same way out,
 * without the procedure's return.
 *
 * int kr__epc_out(int (*fn)(void *) [rdi], void *arg [rsi], void *sp [rdx],
 *                 struct frame *f [rcx], int pkru [r8d])
 *
 * kr_epc_host's way out of a domain: fn(arg) runs on the calling
 * microprocess's own stack at sp (below its outermost call), with the
 * host's PKRU under KR_EPC_H (pkru != 0), then kr__epc_back_in(f) puts
 * the call back on the VP's record and gives the domain's PKRU, written
 * and checked before the domain's stack is taken back.
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

	.globl	kr__epc_wrpkru_lo
	.hidden	kr__epc_wrpkru_lo
kr__epc_wrpkru_lo:

	.globl	kr__epc_gate_h
	.hidden	kr__epc_gate_h
	.type	kr__epc_gate_h, @function
	.p2align 4
kr__epc_gate_h:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	movq	%rsp, (%r8)
	movq	%rdi, %r12
	movq	%rsi, %r13
	movq	%rdx, %r14
	movq	%rcx, %rsp		/* nothing touched until the callee's rights */
	movl	%r9d, %eax
1:	xorl	%ecx, %ecx
	xorl	%edx, %edx
	wrpkru
	movl	%eax, %r15d
	callq	kr__epc_expect		/* -> %eax the PKRU the VP's record says */
	cmpl	%eax, %r15d
	jne	1b
	movq	%r12, %rdi
	movq	%r13, %rsi
	callq	*%r14
	movl	%eax, %ebx
	callq	kr__epc_resume		/* -> %rax saved rsp, %edx the caller's PKRU */
	movq	%rax, %rsp
	movl	%edx, %eax
2:	xorl	%ecx, %ecx
	xorl	%edx, %edx
	wrpkru
	movl	%eax, %r15d
	callq	kr__epc_resume		/* again, with the rights written */
	movq	%rax, %rsp
	movl	%edx, %eax
	cmpl	%edx, %r15d
	jne	2b
	movl	%ebx, %eax
	jmp	kr__epc_unwind
	.cfi_endproc
	.size	kr__epc_gate_h, .-kr__epc_gate_h

	.globl	kr__epc_out
	.hidden	kr__epc_out
	.type	kr__epc_out, @function
	.p2align 4
kr__epc_out:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	movq	%rdi, %r12
	movq	%rsi, %r13
	movq	%rcx, %rbx
	movl	%r8d, %r14d
	movq	%rdx, %rsp		/* the microprocess's stack: host memory */
	testl	%r14d, %r14d
	jz	1f
	movl	%r8d, %eax
3:	xorl	%ecx, %ecx
	xorl	%edx, %edx
	wrpkru
	movl	%eax, %r15d
	callq	kr__epc_expect
	cmpl	%eax, %r15d
	jne	3b
1:	movq	%r13, %rdi
	callq	*%r12
	movl	%eax, %r13d		/* fn's value */
	movq	%rbx, %rdi
	callq	kr__epc_back_in		/* -> %eax the domain's PKRU */
	testl	%r14d, %r14d
	jz	2f
4:	xorl	%ecx, %ecx
	xorl	%edx, %edx
	wrpkru
	movl	%eax, %r15d
	callq	kr__epc_expect
	cmpl	%eax, %r15d
	jne	4b
2:	leaq	-48(%rbp), %rsp		/* the domain's stack again */
	movl	%r13d, %eax
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	kr__epc_out, .-kr__epc_out

	.globl	kr__epc_wrpkru_hi
	.hidden	kr__epc_wrpkru_hi
kr__epc_wrpkru_hi:

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
