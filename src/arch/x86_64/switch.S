/*
 * karui L1 context switch, x86-64 System V.
 *
 * Frame saved on the suspended flow's stack; kr_ctx.sp points at offset 0
 * (the same numbers are in src/arch/frame.h):
 *
 *        +--------------------------------------+
 *    0   | mxcsr (32) | x87 cw (16) | pad (16)  |  FP control state
 *        +--------------------------------------+
 *    8   | r12  (entry fn of a fresh context)   |
 *   16   | r13                                  |
 *   24   | r14                                  |  callee-saved
 *   32   | r15                                  |  registers
 *   40   | rbx                                  |
 *   48   | rbp                                  |
 *        +--------------------------------------+
 *   56   | resume address (pushed by `call`)    |
 *        +--------------------------------------+
 *   64     caller's frame
 *
 * Resumption pops the resume address and jumps to it: a `ret` after a stack
 * change would always miss the return-stack predictor.  rax carries the
 * switch's arg to the resumed side.  Only unprivileged instructions; no
 * system call.
 */
	.text

/* void *kr_ctx_switch(kr_ctx *from [rdi], kr_ctx *to [rsi], void *arg [rdx]) */
	.globl	kr_ctx_switch
	.type	kr_ctx_switch, @function
	.p2align 4
kr_ctx_switch:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r15
	pushq	%r14
	pushq	%r13
	pushq	%r12
	leaq	-8(%rsp), %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
.Lresume:			/* rsi = to, rdx = arg */
	movq	(%rsi), %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	leaq	8(%rsp), %rsp
	popq	%r12
	popq	%r13
	popq	%r14
	popq	%r15
	popq	%rbx
	popq	%rbp
	popq	%rcx
	movq	%rdx, %rax
	jmp	*%rcx
	.cfi_endproc
	.size	kr_ctx_switch, .-kr_ctx_switch

/* void kr_ctx_jump(kr_ctx *to [rdi], void *arg [rsi]) — nothing is saved */
	.globl	kr_ctx_jump
	.type	kr_ctx_jump, @function
	.p2align 4
kr_ctx_jump:
	.cfi_startproc
	movq	%rsi, %rdx
	movq	%rdi, %rsi
	jmp	.Lresume
	.cfi_endproc
	.size	kr_ctx_jump, .-kr_ctx_jump

/* First resumption of a fresh context: r12 = entry, rax = arg; the stack
 * pointer is 16-byte aligned here, so the call gives entry the ABI's
 * alignment.  The entry never returns. */
	.globl	kr__ctx_trampoline
	.hidden	kr__ctx_trampoline
	.type	kr__ctx_trampoline, @function
	.p2align 4
kr__ctx_trampoline:
	.cfi_startproc
	.cfi_undefined rip	/* outermost frame: debuggers stop unwinding here */
	movq	%rax, %rdi
	call	*%r12
	ud2
	.cfi_endproc
	.size	kr__ctx_trampoline, .-kr__ctx_trampoline

	.section .note.GNU-stack,"",@progbits
