/*
 * karui domains — the EPC call gate, AArch64 (AAPCS64).
 *
 * int kr__epc_gate(void *arg [x0], void *result [x1], kr_epc_proc fn [x2],
 *                  void *stack_top [x3], void **saved_sp [x4])
 *
 * As the x86-64 gate: the caller's callee-saved registers (x19-x30,
 * d8-d15) go on its stack, whose pointer goes in *saved_sp; fn(arg, result)
 * runs on stack_top; on its return only sp is trusted, and the caller's
 * sp comes back from kr__epc_resume_sp.  kr__epc_unwind: a fault's
 * resumption (sp and w0 set by domain.c's handler).
 *
 * int kr__epc_out(int (*fn)(void *) [x0], void *arg [x1], void *sp [x2],
 *                 struct frame *f [x3], int pkru [w4, unused])
 *
 * kr_epc_host's way out of a domain: fn(arg) on the microprocess's own
 * stack at sp, then kr__epc_back_in(f), then the domain's stack again.
 * (KR_EPC_H is x86-64's: no protection keys are written here.)
 */
	.text
	.globl	kr__epc_gate
	.hidden	kr__epc_gate
	.type	kr__epc_gate, %function
	.p2align 4
kr__epc_gate:
	sub	sp, sp, #160
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
	mov	x5, sp
	str	x5, [x4]
	mov	sp, x3
	mov	x29, #0			/* the procedure's frame chain starts here */
	blr	x2
	mov	w19, w0			/* the procedure's status */
	bl	kr__epc_resume_sp
	mov	sp, x0
	mov	w0, w19
	.globl	kr__epc_unwind
	.hidden	kr__epc_unwind
kr__epc_unwind:
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
	add	sp, sp, #160
	ret
	.size	kr__epc_gate, .-kr__epc_gate

	.globl	kr__epc_out
	.hidden	kr__epc_out
	.type	kr__epc_out, %function
	.p2align 4
kr__epc_out:
	stp	x29, x30, [sp, #-32]!
	mov	x29, sp
	stp	x19, x20, [sp, #16]
	mov	x19, x3
	mov	x9, x0
	mov	x0, x1
	mov	sp, x2
	blr	x9
	mov	w20, w0			/* fn's value */
	mov	x0, x19
	bl	kr__epc_back_in
	mov	sp, x29
	mov	w0, w20
	ldp	x19, x20, [sp, #16]
	ldp	x29, x30, [sp], #32
	ret
	.size	kr__epc_out, .-kr__epc_out

	.section .note.GNU-stack,"",@progbits
