/*
 * karui L1 context switch, AArch64 (AAPCS64).
 *
 * Frame saved on the suspended flow's stack; kr_ctx.sp points at offset 0
 * (the same numbers are in src/arch/frame.h):
 *
 *        +-------------------------------------------+
 *    0   | d8  | d9                                  |
 *   16   | d10 | d11                                 |  low halves of v8-v15
 *   32   | d12 | d13                                 |  (callee-saved part)
 *   48   | d14 | d15                                 |
 *        +-------------------------------------------+
 *   64   | x19 (entry fn of a fresh context) | x20   |
 *   80   | x21 | x22                                 |
 *   96   | x23 | x24                                 |  callee-saved
 *  112   | x25 | x26                                 |  registers
 *  128   | x27 | x28                                 |
 *  144   | x29 (fp) | x30 (resume address)           |
 *        +-------------------------------------------+
 *  160   | fpcr | pad                                |  FP control state
 *        +-------------------------------------------+
 *  176     caller's frame
 *
 * Resumption: a context suspended here is resumed with `ret`, which
 * consumes the return-stack prediction its own `bl` pushed; a context that
 * has never run (x30 is the trampoline) is entered with `br`, keeping the
 * creator's prediction for the `ret` that resumes it when the new context
 * ends (see the x86-64 file).  As there, kr__ctx_switch, kr__ctx_jump and
 * kr__ctx_trampoline_counted are the core's copies, which also count the
 * thread's resumptions (src/arch/blocking.h) and, in place of the arg,
 * release the 32-bit word x2 points to once they are off the stack they
 * leave; kr__ctx_switch returns 0.  For the others x0 carries the switch's
 * arg to the resumed side.  Only unprivileged instructions; no system
 * call.
 */
	.text

/* Save the caller's context at [x0]: what every switch below starts with. */
.macro SAVE
	sub	sp, sp, #176
	stp	d8, d9, [sp, #0]
	stp	d10, d11, [sp, #16]
	stp	d12, d13, [sp, #32]
	stp	d14, d15, [sp, #48]
	stp	x19, x20, [sp, #64]
	stp	x21, x22, [sp, #80]
	stp	x23, x24, [sp, #96]
	stp	x25, x26, [sp, #112]
	stp	x27, x28, [sp, #128]
	stp	x29, x30, [sp, #144]
	mrs	x3, fpcr
	str	x3, [sp, #160]
	mov	x4, sp
	str	x4, [x0]
.endm

/* Resume the context at [x1] with arg x2.  core: the core's switch:
 * release the word at [x2] (stlr: everything saved is visible before it),
 * count the thread's resumptions (src/arch/blocking.h), return 0 rather
 * than the arg.  tramp: the trampoline of the contexts this switch makes
 * fresh. */
.macro RESUME core, tramp
	ldr	x4, [x1]
	mov	sp, x4
.if \core
	stlr	wzr, [x2]
	adrp	x5, :gottprel:kr__resumes
	ldr	x5, [x5, #:gottprel_lo12:kr__resumes]
	mrs	x6, tpidr_el0
	ldr	x7, [x6, x5]
	add	x7, x7, #1
	str	x7, [x6, x5]
.endif
	ldr	x3, [sp, #160]
	msr	fpcr, x3
	ldp	d8, d9, [sp, #0]
	ldp	d10, d11, [sp, #16]
	ldp	d12, d13, [sp, #32]
	ldp	d14, d15, [sp, #48]
	ldp	x19, x20, [sp, #64]
	ldp	x21, x22, [sp, #80]
	ldp	x23, x24, [sp, #96]
	ldp	x25, x26, [sp, #112]
	ldp	x27, x28, [sp, #128]
	ldp	x29, x30, [sp, #144]
	add	sp, sp, #176
.if \core
	mov	x0, xzr
.else
	mov	x0, x2
.endif
	adr	x3, \tramp
	cmp	x30, x3
	b.eq	1f
	ret
1:	br	x30
.endm

/* First resumption of a fresh context: x19 = entry, x0 = arg.  When the
 * entry returns {to [x0], arg [x1]} the context is over: resume `to`. */
.macro TRAMPOLINE resume
	.cfi_undefined x30	/* outermost frame: debuggers stop unwinding here */
	mov	x29, #0
	blr	x19
	mov	x2, x1
	mov	x1, x0
	b	\resume
.endm

/* void *kr_ctx_switch(kr_ctx *from [x0], kr_ctx *to [x1], void *arg [x2]) */
	.globl	kr_ctx_switch
	.type	kr_ctx_switch, %function
	.p2align 4
kr_ctx_switch:
	.cfi_startproc
	SAVE
.Lresume:			/* x1 = to, x2 = arg */
	RESUME	0, kr__ctx_trampoline
	.cfi_endproc
	.size	kr_ctx_switch, .-kr_ctx_switch

/* void kr_ctx_jump(kr_ctx *to [x0], void *arg [x1]) — nothing is saved */
	.globl	kr_ctx_jump
	.type	kr_ctx_jump, %function
	.p2align 4
kr_ctx_jump:
	.cfi_startproc
	mov	x2, x1
	mov	x1, x0
	b	.Lresume
	.cfi_endproc
	.size	kr_ctx_jump, .-kr_ctx_jump

	.globl	kr__ctx_trampoline
	.hidden	kr__ctx_trampoline
	.type	kr__ctx_trampoline, %function
	.p2align 4
kr__ctx_trampoline:
	.cfi_startproc
	TRAMPOLINE .Lresume
	.cfi_endproc
	.size	kr__ctx_trampoline, .-kr__ctx_trampoline

/* The core's switch, jump and trampoline: the same, counting resumptions. */
	.globl	kr__ctx_switch
	.hidden	kr__ctx_switch
	.type	kr__ctx_switch, %function
	.p2align 4
kr__ctx_switch:
	.cfi_startproc
	SAVE
.Lresume_counted:
	RESUME	1, kr__ctx_trampoline_counted
	.cfi_endproc
	.size	kr__ctx_switch, .-kr__ctx_switch

	.globl	kr__ctx_jump
	.hidden	kr__ctx_jump
	.type	kr__ctx_jump, %function
	.p2align 4
kr__ctx_jump:
	.cfi_startproc
	mov	x2, x1
	mov	x1, x0
	b	.Lresume_counted
	.cfi_endproc
	.size	kr__ctx_jump, .-kr__ctx_jump

	.globl	kr__ctx_trampoline_counted
	.hidden	kr__ctx_trampoline_counted
	.type	kr__ctx_trampoline_counted, %function
	.p2align 4
kr__ctx_trampoline_counted:
	.cfi_startproc
	TRAMPOLINE .Lresume_counted
	.cfi_endproc
	.size	kr__ctx_trampoline_counted, .-kr__ctx_trampoline_counted

/* int kr__blocking_call(a0..a4 [x0-x4], fn [x5]): fn(a0..a4), then return
 * to the caller, with a branch to x30 rather than `ret` if this context was
 * switched out meanwhile (the thread's resumption count moved;
 * src/arch/blocking.h). */
	.globl	kr__blocking_call
	.hidden	kr__blocking_call
	.type	kr__blocking_call, %function
	.p2align 4
kr__blocking_call:
	.cfi_startproc
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset x29, -32
	.cfi_offset x30, -24
	mov	x29, sp
	adrp	x9, :gottprel:kr__resumes
	ldr	x9, [x9, #:gottprel_lo12:kr__resumes]
	mrs	x10, tpidr_el0
	ldr	x10, [x10, x9]
	str	x10, [sp, #16]
	blr	x5
	adrp	x9, :gottprel:kr__resumes
	ldr	x9, [x9, #:gottprel_lo12:kr__resumes]
	mrs	x10, tpidr_el0
	ldr	x10, [x10, x9]
	ldr	x11, [sp, #16]
	ldp	x29, x30, [sp], #32
	.cfi_restore x29
	.cfi_restore x30
	.cfi_def_cfa_offset 0
	cmp	x10, x11
	b.ne	1f
	ret
1:	br	x30
	.cfi_endproc
	.size	kr__blocking_call, .-kr__blocking_call

	.section .note.GNU-stack,"",%progbits
