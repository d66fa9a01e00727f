/*
 * karui L1 context switch, x86-64 System V.
 *
 * Frame saved on the suspended flow's stack; kr_ctx.sp points at offset 0
 * (the same numbers are in src/arch/frame.h):
 *
 *        +--------------------------------------+
 *   -8   | mxcsr (32) | x87 cw (16) | pad (16)  |  FP control state
 *        +======================================+  <- kr_ctx.sp
 *    0   | r12  (entry fn of a fresh context)   |
 *    8   | r13                                  |
 *   16   | r14                                  |  callee-saved
 *   24   | r15                                  |  registers
 *   32   | rbx                                  |
 *   40   | rbp                                  |
 *        +--------------------------------------+
 *   48   | resume address (pushed by `call`)    |
 *        +--------------------------------------+
 *   56     caller's frame
 *
 * The FP control state lies below the saved stack pointer, in the ABI's
 * red zone, so that neither side moves the stack pointer for it: nothing
 * runs on a suspended stack, and a signal taken during the switch leaves
 * the red zone alone (the kernel puts its frame below it).
 *
 * Resumption, and the return-stack predictor.  Every switch is entered by
 * a `call`, which pushes a prediction.  A context suspended here is resumed
 * with `ret`, which consumes exactly that prediction; it is right whenever
 * both sides were suspended at the same call site (kr_mp_yield against
 * kr_mp_yield: the common case), and the predictor stays balanced either way.
 * A context that has never run is entered with `jmp` to its trampoline (its
 * resume address), leaving the creator's prediction in place for the `ret`
 * that will resume the creator when the new context ends through the
 * trampoline.  Resuming everything with `jmp` would leave one stale
 * prediction per switch, so that later returns mispredict.  A fresh
 * context is told apart by bit 31 of its saved MXCSR, which the processor
 * keeps 0 (a reserved bit: stmxcsr never sets it, ldmxcsr would fault on
 * it): one test of a word the resumption reads anyway.
 *
 * kr_ctx_switch, kr_ctx_jump and kr__ctx_trampoline are L1's, for any
 * user of contexts: rax carries the switch's arg to the resumed side.  The
 * core switches with kr__ctx_switch, kr__ctx_jump and
 * kr__ctx_trampoline_counted (src/arch/ctx_init.h), which also count the
 * thread's resumptions for the return from a blocked call
 * (src/arch/blocking.h), and, in place of the arg, store 0 into the
 * 32-bit word rdx points to once they are off the stack they leave (the
 * core's "this context may run elsewhere now"); kr__ctx_switch returns 0.
 * A level-0 user pays for neither.
 *
 * Only unprivileged instructions; no system call.
 */
	.text

/* Save the caller's context at (rdi): what every switch below starts with. */
.macro SAVE
	pushq	%rbp
	pushq	%rbx
	pushq	%r15
	pushq	%r14
	pushq	%r13
	pushq	%r12
	stmxcsr	-8(%rsp)
	fnstcw	-4(%rsp)
	movq	%rsp, (%rdi)
.endm

/* Resume the context at (rsi) with arg rdx.  core: the core's switch:
 * release the word at (rdx) (x86-64's stores are ordered: everything saved
 * is visible before it), count the thread's resumptions
 * (src/arch/blocking.h), return 0 rather than the arg.  A fresh context
 * (bit 31 of its MXCSR word) starts with the ABI's default MXCSR, its entry
 * in r12, at its trampoline. */
.macro RESUME core
	movq	(%rsi), %rsp
.if \core
	movl	$0, (%rdx)
	movq	kr__resumes@gottpoff(%rip), %rcx
	incq	%fs:(%rcx)
.endif
	cmpl	$0, -8(%rsp)
	js	1f
	ldmxcsr	-8(%rsp)
	fldcw	-4(%rsp)
	popq	%r12
	popq	%r13
	popq	%r14
	popq	%r15
	popq	%rbx
	popq	%rbp
.if \core
	xorl	%eax, %eax
.else
	movq	%rdx, %rax
.endif
	ret
1:	ldmxcsr	.Lmxcsr_default(%rip)
	fldcw	-4(%rsp)
	movq	(%rsp), %r12
	movq	48(%rsp), %rcx
	leaq	56(%rsp), %rsp
.if \core
	xorl	%eax, %eax
.else
	movq	%rdx, %rax
.endif
	jmp	*%rcx
.endm

/* First resumption of a fresh context: r12 = entry, rax = arg; the stack
 * pointer is 16-byte aligned here, so the call gives entry the ABI's
 * alignment.  When the entry returns {to [rax], arg [rdx]} the context is
 * over: resume `to`, with the call/return predictions balanced. */
.macro TRAMPOLINE resume
	.cfi_undefined rip	/* outermost frame: debuggers stop unwinding here */
	movq	%rax, %rdi
	call	*%r12
	movq	%rax, %rsi
	jmp	\resume
.endm

/* void *kr_ctx_switch(kr_ctx *from [rdi], kr_ctx *to [rsi], void *arg [rdx]) */
	.globl	kr_ctx_switch
	.type	kr_ctx_switch, @function
	.p2align 4
kr_ctx_switch:
	.cfi_startproc
	SAVE
.Lresume:			/* rsi = to, rdx = arg */
	RESUME	0
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

	.globl	kr__ctx_trampoline
	.hidden	kr__ctx_trampoline
	.type	kr__ctx_trampoline, @function
	.p2align 4
kr__ctx_trampoline:
	.cfi_startproc
	TRAMPOLINE .Lresume
	.cfi_endproc
	.size	kr__ctx_trampoline, .-kr__ctx_trampoline

/* The core's switch, jump and trampoline: the same, counting resumptions
 * and releasing the word given in place of the arg:
 * int kr__ctx_switch(kr_ctx *from [rdi], kr_ctx *to [rsi], uint32_t *left [rdx]),
 * void kr__ctx_jump(kr_ctx *to [rdi], uint32_t *left [rsi]). */
	.globl	kr__ctx_switch
	.hidden	kr__ctx_switch
	.type	kr__ctx_switch, @function
	.p2align 4
kr__ctx_switch:
	.cfi_startproc
	SAVE
.Lresume_counted:
	RESUME	1
	.cfi_endproc
	.size	kr__ctx_switch, .-kr__ctx_switch

	.globl	kr__ctx_jump
	.hidden	kr__ctx_jump
	.type	kr__ctx_jump, @function
	.p2align 4
kr__ctx_jump:
	.cfi_startproc
	movq	%rsi, %rdx
	movq	%rdi, %rsi
	jmp	.Lresume_counted
	.cfi_endproc
	.size	kr__ctx_jump, .-kr__ctx_jump

	.globl	kr__ctx_trampoline_counted
	.hidden	kr__ctx_trampoline_counted
	.type	kr__ctx_trampoline_counted, @function
	.p2align 4
kr__ctx_trampoline_counted:
	.cfi_startproc
	TRAMPOLINE .Lresume_counted
	.cfi_endproc
	.size	kr__ctx_trampoline_counted, .-kr__ctx_trampoline_counted

/* int kr__blocking_call(a0..a4 [rdi rsi rdx rcx r8], fn [r9]): fn(a0..a4),
 * then return to the caller, with a jump if this context was switched out
 * meanwhile (the thread's resumption count moved; src/arch/blocking.h).
 * The jump is made from one of four sites, chosen by bits 0 and 3 of the
 * target, so that two microprocesses that block from different call sites
 * most often return through different jumps, each with one target. */
	.globl	kr__blocking_call
	.hidden	kr__blocking_call
	.type	kr__blocking_call, @function
	.p2align 4
kr__blocking_call:
	.cfi_startproc
	movq	kr__resumes@gottpoff(%rip), %rax
	pushq	%fs:(%rax)	/* also the ABI's alignment for the call */
	.cfi_adjust_cfa_offset 8
	call	*%r9
	movq	kr__resumes@gottpoff(%rip), %rcx
	movq	%fs:(%rcx), %rcx
	cmpq	%rcx, (%rsp)
	leaq	8(%rsp), %rsp	/* keeps the flags */
	.cfi_adjust_cfa_offset -8
	jne	1f
	ret
1:	popq	%rcx
	.cfi_adjust_cfa_offset -8
	.cfi_register rip, rcx
	testb	$1, %cl
	jnz	3f
	testb	$8, %cl
	jnz	2f
	jmp	*%rcx
2:	jmp	*%rcx
3:	testb	$8, %cl
	jnz	4f
	jmp	*%rcx
4:	jmp	*%rcx
	.cfi_endproc
	.size	kr__blocking_call, .-kr__blocking_call

	.section .rodata
	.p2align 2
.Lmxcsr_default:
	.long	0x1F80		/* KR_FRAME_MXCSR_DEFAULT */

	.section .note.GNU-stack,"",@progbits
