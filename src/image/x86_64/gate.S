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
 *
 * Every way back into a μprocess's code says BLOCK and then reads the
 * μprocess's attn (through the VP's record: gs:24), which says a signal is
 * to be delivered (signal.c): from a handler the kernel entered (SIGSYS, a
 * fault, a kick) kr__img_back calls kr__img_signal with the kernel's
 * frame, which it edits to enter the μprocess's handler; from a rewritten
 * site, where there is no frame, the fastcall goes to kr__img_deliver,
 * whose system call traps to get one.  A kick (KR__SIGKICK, sent by
 * kr_uproc_kill to a VP running a μprocess's code) that lands after that
 * read and before the return finds the frame the return goes to
 * (signal.c: the labels below).
 */
	.text

	.equ UC_RIP, 168                /* ucontext_t: uc_mcontext.gregs[REG_RIP] */
	.equ VP_ATTN, 24                /* struct kr__img_vp: attn */
	.equ VP_STASH, 32               /* struct kr__img_vp: stash */
	.equ VP_PKRU, 44                /* struct kr__img_vp: pkru */

/* The kernel enters a handler with only protection key 0 open: where
 * isolated μprocesses have keys (iso.c), the PKRU the VP ran with, from
 * the record %gs names, before anything touches memory a key may close
 * (the system call's handler runs on the μprocess's own stack: no call,
 * kr__img_pkru_back comes back through %r9).  Keeps %rdi, %rsi, %rdx;
 * uses %rax, %rcx, %r8, %r9. */
.macro PKRU_BACK
	cmpl $0, kr__iso_keys(%rip)
	je 9f
	lea 9f(%rip), %r9
	jmp kr__img_pkru_back
9:
.endm

/* Every WRPKRU of the image layer lies between kr__img_wrpkru_lo and
 * kr__img_wrpkru_hi, which the domains' scan of the code around an
 * exported procedure (src/domain, KR_EPC_H) allows as it allows its own
 * gates'. */
	.globl kr__img_wrpkru_lo, kr__img_wrpkru_hi
	.p2align 4
kr__img_wrpkru_lo:
kr__img_pkru_back:
	rdgsbase %rax
	test %rax, %rax
	jz 1f
	mov VP_PKRU(%rax), %eax
	test %eax, %eax
	jz 1f
	mov %rdx, %r8
	xor %ecx, %ecx
	xor %edx, %edx
	wrpkru
	mov %r8, %rdx
1:	jmp *%r9

/* void kr__img_wrpkru(uint32_t pkru) */
	.globl kr__img_wrpkru
	.type kr__img_wrpkru, @function
kr__img_wrpkru:
	.cfi_startproc
	mov %edi, %eax
	xor %ecx, %ecx
	xor %edx, %edx
	wrpkru
	ret
	.cfi_endproc
	.size kr__img_wrpkru, .-kr__img_wrpkru
kr__img_wrpkru_hi:

	.globl kr__img_gate
	.globl kr__img_gate_end
	.globl kr__img_restorer
	.globl kr__img_restorer_end
	.p2align 4
kr__img_gate:
kr__img_restorer:
	mov $15, %eax                   /* rt_sigreturn */
	syscall
kr__img_restorer_end:
	ud2
/* pid_t kr__img_gettid(void), for kr__img_sigfault: inside the gate, so
 * that it passes whatever the selector says; keeps all but %rax, %rcx and
 * %r11. */
kr__img_gettid:
	mov $186, %eax                  /* gettid */
	syscall
	ret
kr__img_gate_end:

/* The way back to a μprocess's code from a handler the kernel entered:
 * %r12 the handler's ucontext, %r13 the thread pointer to run with, %rsp
 * where the handler was entered (at the frame's return address, the
 * restorer).  kr__img_signal (uproc.c) says KR__BACK_AGAIN (look again),
 * KR__BACK_NOW (back without looking: nothing can be delivered here) or
 * KR__BACK_DIE (the frame now goes to the μprocess's end: ALLOW and the
 * VP's thread pointer stay). */
	.globl kr__img_back_chk
	.globl kr__img_back_ret
	.globl kr__img_back_ret2
	.p2align 4
kr__img_back:
	wrfsbase %r13
	movb $1, %gs:0                  /* PR_SYS_DISPATCH_FILTER_BLOCK */
	mov %gs:VP_ATTN, %rcx
	mov (%rcx), %ecx
kr__img_back_chk:
	test %ecx, %ecx
	jnz kr__img_back_signal
kr__img_back_ret:
	ret
kr__img_back_signal:
	movb $0, %gs:0
	mov %gs:8, %rax
	wrfsbase %rax
	mov %r12, %rdi
	sub $8, %rsp
	call kr__img_signal
	add $8, %rsp
	cmp $1, %eax                    /* KR__BACK_AGAIN */
	je kr__img_back
	test %eax, %eax                 /* KR__BACK_DIE */
	jz 1f
	wrfsbase %r13
	movb $1, %gs:0
kr__img_back_ret2:
	ret
1:	ret

/* void kr__img_sigsys(int sig, siginfo_t *si, void *uc) */
	.globl kr__img_sigsys
	.type kr__img_sigsys, @function
	.p2align 4
kr__img_sigsys:
	.cfi_startproc
	PKRU_BACK
	movb $0, %gs:0                  /* PR_SYS_DISPATCH_FILTER_ALLOW */
	mov %gs:8, %rax
	wrfsbase %rax
	mov %rdx, %r12
	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	mov %rdx, %rdi
	call kr__img_trap               /* -> the μprocess's thread pointer */
	add $8, %rsp
	.cfi_adjust_cfa_offset -8
	mov %rax, %r13
	jmp kr__img_back
	.cfi_endproc
	.size kr__img_sigsys, .-kr__img_sigsys

/* void kr__img_sigkick(int sig, siginfo_t *si, void *uc): KR__SIGKICK, on
 * the VP's alternate stack.  In a μprocess's code (the record names this
 * thread and says BLOCK, as kr__img_sigfault checks), kr__img_signal
 * delivers what is pending there; anywhere else nothing: karui's code
 * delivers it on its way back. */
	.globl kr__img_sigkick
	.type kr__img_sigkick, @function
	.p2align 4
kr__img_sigkick:
	.cfi_startproc
	PKRU_BACK
	mov %rdx, %r12
	rdgsbase %r8
	test %r8, %r8
	jz 1f
	cmpb $1, (%r8)
	jne 1f
	call kr__img_gettid
	cmp 4(%r8), %eax
	jne 1f
	rdfsbase %r13                   /* the thread pointer it ran with */
	jmp kr__img_back_signal
1:	ret
	.cfi_endproc
	.size kr__img_sigkick, .-kr__img_sigkick

/* kr__img_deliver: a fastcall's way back found signals to deliver (the
 * μprocess's registers all in place, the call's result in %rax, the
 * trampoline's return address at %rsp).  Outside the gate: its system
 * call traps, and kr__img_trap takes %rax back from the record, returns
 * as the trampoline would, and the trap's way back delivers. */
	.globl kr__img_deliver_ret
	.p2align 4
kr__img_deliver:
	mov %rax, %gs:VP_STASH
	mov $0x4b53, %eax               /* KR__NR_DELIVER */
	syscall
kr__img_deliver_ret:
	ud2

/* kr__img_yield: a thread whose time slice has ended enters here as a
 * handler of a signal (signal.c: kr__img_signal), %rsp at its frame's
 * return address.  Outside the gate: its first system call traps, and
 * kr__img_trap yields its microprocess; its second is the restorer's
 * rt_sigreturn, back to where the slice ended. */
	.globl kr__img_yield, kr__img_yield_ret, kr__img_yield_end
	.p2align 4
kr__img_yield:
	mov $0x4b54, %eax               /* KR__NR_YIELD */
	syscall
kr__img_yield_ret:
	add $8, %rsp                    /* to the ucontext, as after a return */
	mov $15, %eax                   /* rt_sigreturn */
	syscall
kr__img_yield_end:
	ud2

/* void kr__img_sigfault(int sig, siginfo_t *si, void *uc): a fault, on the
 * VP's alternate stack.  In karui's code on an isolated μprocess's closed
 * memory, kr__iso_fault may open it and the access is made again.  In
 * karui's access to a μprocess's memory
 * (uaccess.S): that access returns -EFAULT.  In a μprocess's code (the %gs base is a record
 * that names this thread, and its selector says BLOCK), first the VP's own
 * thread pointer and ALLOW; and if kr__img_fault resumes the μprocess (a
 * cpuid answered, its handler entered), kr__img_back.  A thread that inherited its creator's %gs
 * base (uproc.c: kr__img_arm) is not the thread the record names. */
	.globl kr__img_sigfault
	.type kr__img_sigfault, @function
	.p2align 4
kr__img_sigfault:
	.cfi_startproc
	/* karui's own code (no record, or one that says ALLOW) on the closed
	 * memory of the isolated μprocess whose call it serves: shown on this
	 * VP, the access made again (iso.c) */
	PKRU_BACK
	cmpl $0, kr__iso_live(%rip)
	je 5f
	rdgsbase %rax
	test %rax, %rax
	jz 4f
	cmpb $1, (%rax)
	je 5f
4:	push %rdi
	.cfi_adjust_cfa_offset 8
	push %rsi
	.cfi_adjust_cfa_offset 8
	push %rdx
	.cfi_adjust_cfa_offset 8
	mov %rsi, %rdi
	mov %rdx, %rsi
	call kr__iso_fault
	pop %rdx
	.cfi_adjust_cfa_offset -8
	pop %rsi
	.cfi_adjust_cfa_offset -8
	pop %rdi
	.cfi_adjust_cfa_offset -8
	test %eax, %eax
	jz 5f
	ret
5:	mov UC_RIP(%rdx), %rax
	lea kr__ua_begin(%rip), %rcx
	cmp %rcx, %rax
	jb 3f
	lea kr__ua_end(%rip), %rcx
	cmp %rcx, %rax
	jae 3f
	lea kr__ua_fault(%rip), %rax
	mov %rax, UC_RIP(%rdx)
	ret
3:	mov %rdx, %r12
	xor %ecx, %ecx
	rdgsbase %r8
	test %r8, %r8
	jz 1f
	cmpb $1, (%r8)
	jne 1f
	call kr__img_gettid
	xor %ecx, %ecx
	cmp 4(%r8), %eax
	jne 1f
	movb $0, (%r8)
	mov 8(%r8), %rax
	wrfsbase %rax
	mov $1, %ecx
1:	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	call kr__img_fault              /* (sig, si, uc, in_uproc) -> resume, %fs */
	add $8, %rsp
	.cfi_adjust_cfa_offset -8
	test %rax, %rax
	jz 2f
	mov %rdx, %r13                  /* back to the μprocess's code */
	jmp kr__img_back
2:	ret
	.cfi_endproc
	.size kr__img_sigfault, .-kr__img_sigfault

/* void kr__img_fastcall(void): a system call from a rewritten site
 * (rewrite.c), called by the site's trampoline below the μprocess's red zone,
 * with the call's number in %rax, its arguments in %rdi, %rsi, %rdx,
 * %r10, %r8, %r9 (the calling thread is the one the VP's record names:
 * gs:24).  It keeps what the syscall
 * instruction keeps: every register but %rax (the result), %rcx and %r11,
 * the flags and the vector state.  kr__sys_fast (fast.c, general
 * registers only) gets the call first, with the μprocess's %fs still in
 * place; what it declines takes the general path: the vector state saved
 * (XSAVEC of x87, SSE, AVX and AVX-512: karui's C code may use any), the
 * VP's thread pointer, kr__img_fast.  Frame, from %rbp: saved %rbp, %rbx,
 * then %rdi %rsi %rdx %r10 %r8 %r9 (the arguments in order, at 16(%rbp)),
 * a spare word, the flags, the return address.
 *
 * kr__img_fastcall_novec: the same for a site where no vector register is
 * live (rewrite.c: inside a C library's system-call wrapper that uses
 * none): its general path saves no vector state but MXCSR and the x87
 * control word, and leaves the AVX upper halves clean on the way back.
 *
 * kr__img_fastcall_nf and kr__img_fastcall_novec_nf: the same two for a
 * site whose flags are dead after it (rewrite.c: the next instruction sets
 * them without reading them, or returns, after which the ABI keeps none):
 * the flags' word of the frame stays unwritten, and popfq, the costliest
 * instruction of the short path, is not run.
 *
 * The way back, once BLOCK is said, reads the μprocess's attn into %rcx
 * (which the syscall instruction does not keep) and tests it with jrcxz
 * (which changes no flag): signals to deliver go through kr__img_deliver. */
.macro FASTCALL name, save, flags
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	.cfi_startproc
	movb $0, %gs:0                  /* ALLOW */
.if \flags
	pushfq
.else
	lea -8(%rsp), %rsp
.endif
	sub $8, %rsp
	push %r9
	push %r8
	push %r10
	push %rdx
	push %rsi
	push %rdi
	push %rbx
	push %rbp
	.cfi_adjust_cfa_offset 80
	mov %rsp, %rbp
	mov %rax, %rbx
	and $-16, %rsp
	mov %rbx, %rdi
	lea 16(%rbp), %rsi
	call kr__sys_fast               /* -> %rax result or KR__SLOW, %rdx %fs */
	movabs $0x4000000000000000, %rcx
	cmp %rcx, %rax
	jne 2f                          /* done, and %fs is the μprocess's still */
.if \save
	sub $3072, %rsp
	and $-64, %rsp
	xor %eax, %eax                  /* XSAVEC leaves the header's rest alone */
	mov %rax, 512(%rsp)
	mov %rax, 520(%rsp)
	mov %rax, 528(%rsp)
	mov %rax, 536(%rsp)
	mov %rax, 544(%rsp)
	mov %rax, 552(%rsp)
	mov %rax, 560(%rsp)
	mov %rax, 568(%rsp)
	mov $0xe7, %eax                 /* x87 SSE AVX opmask ZMM_Hi256 Hi16_ZMM */
	xor %edx, %edx
	cmpb $0, kr__img_xsavec(%rip)
	je 3f
	xsavec (%rsp)
	jmp 4f
3:	xsave (%rsp)                    /* (no XSAVEC: QEMU's TCG) standard format, */
4:					/* 2688 bytes at most for these */
.else
	sub $16, %rsp                   /* the ABI's callee-saved control words, */
	stmxcsr (%rsp)                  /* which another thread on this VP may */
	fnstcw 4(%rsp)                  /* have changed meanwhile */
.endif
	mov %gs:8, %rax
	wrfsbase %rax
	mov %rbx, %rdi
	lea 16(%rbp), %rsi
	call kr__img_fast               /* -> %rax result, %rdx thread pointer */
.if \save
	mov %rax, %rbx
	mov %rdx, 64(%rbp)
	mov $0xe7, %eax
	xor %edx, %edx
	xrstor (%rsp)
	mov %rbx, %rax
	mov 64(%rbp), %rdx
.else
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	cmpb $0, kr__img_avx(%rip)
	je 1f
	vzeroupper
.endif
1:	wrfsbase %rdx
2:	mov %rbp, %rsp
	pop %rbp
	pop %rbx
	pop %rdi
	pop %rsi
	pop %rdx
	pop %r10
	pop %r8
	pop %r9
	add $8, %rsp
	.cfi_adjust_cfa_offset -80
.if \flags
	popfq
.else
	lea 8(%rsp), %rsp
.endif
	movb $1, %gs:0                  /* BLOCK, on the VP it returns on */
	mov %gs:VP_ATTN, %rcx           /* signals to deliver? (no flag changes) */
	mov (%rcx), %ecx
\name\()_chk:
	jrcxz \name\()_ret
	jmp kr__img_deliver
\name\()_ret:
	ret
	.cfi_endproc
	.size \name, .-\name
.endm

	FASTCALL kr__img_fastcall, 1, 1
	FASTCALL kr__img_fastcall_novec, 0, 1
	FASTCALL kr__img_fastcall_nf, 1, 0
	FASTCALL kr__img_fastcall_novec_nf, 0, 0

/* where a kick finds a fastcall's way back past its look at attn */
	.section .data.rel.ro,"aw"
	.p2align 3
	.globl kr__img_fast_tails
kr__img_fast_tails:
	.quad kr__img_fastcall_chk, kr__img_fastcall_ret
	.quad kr__img_fastcall_novec_chk, kr__img_fastcall_novec_ret
	.quad kr__img_fastcall_nf_chk, kr__img_fastcall_nf_ret
	.quad kr__img_fastcall_novec_nf_chk, kr__img_fastcall_novec_nf_ret
	.text

/* void kr__img_cpuid(void): a cpuid of a μprocess (rewrite.c), called by
 * its trampoline below the red zone: leaf in %eax, sub-leaf in %ecx; answers in
 * %eax %ebx %ecx %edx as cpuid does, and keeps everything else (the flags
 * too).  kr__cpuid_lookup (fast.c) uses general registers only and makes
 * no system call, so neither the selector nor %fs needs changing. */
	.globl kr__img_cpuid
	.type kr__img_cpuid, @function
	.p2align 4
kr__img_cpuid:
	.cfi_startproc
	pushfq
	push %rdi
	push %rsi
	push %r8
	push %r9
	push %r10
	push %r11
	push %rbp
	.cfi_adjust_cfa_offset 64
	mov %rsp, %rbp
	sub $16, %rsp
	and $-16, %rsp
	mov %eax, %edi
	mov %ecx, %esi
	mov %rsp, %rdx
	call kr__cpuid_lookup
	mov (%rsp), %eax
	mov 4(%rsp), %ebx
	mov 8(%rsp), %ecx
	mov 12(%rsp), %edx
	mov %rbp, %rsp
	pop %rbp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rsi
	pop %rdi
	.cfi_adjust_cfa_offset -56
	popfq
	ret
	.cfi_endproc
	.size kr__img_cpuid, .-kr__img_cpuid

/* void kr__img_start(entry, sp, fs, rdx): the first instruction of a
 * μprocess, as the kernel starts a program: %rsp at argc, %rdx 0 (no
 * finaliser for _start to register; a kept image's start passes ld.so's),
 * the other registers and the x87, SSE, AVX and AVX-512 state cleared. */
	.globl kr__img_start
	.type kr__img_start, @function
	.p2align 4
kr__img_start:
	mov %rsi, %rsp
	wrfsbase %rdx
	mov %rcx, %r10
	mov $0xe7, %eax                 /* the vector state as execve leaves it */
	xor %edx, %edx
	xrstor fpinit(%rip)
	mov %rdi, %r11
	mov %r10, %rdx
	xor %eax, %eax
	xor %ebx, %ebx
	xor %ecx, %ecx
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

/* void kr__img_sigreturn(uintptr_t sp, uint64_t fs): back into a
 * μprocess's code from a signal frame that karui keeps at sp - 8 (the
 * parent of a vfork, resumed with the registers it had at its call:
 * uproc.c): its thread pointer, BLOCK, and the gate's rt_sigreturn, which
 * passes whatever the selector says. */
	.globl kr__img_sigreturn
	.type kr__img_sigreturn, @function
	.p2align 4
kr__img_sigreturn:
	wrfsbase %rsi
	mov %rdi, %rsp
	movb $1, %gs:0                  /* PR_SYS_DISPATCH_FILTER_BLOCK */
	jmp kr__img_restorer
	.size kr__img_sigreturn, .-kr__img_sigreturn

/* long kr__img_call(struct kr__xcall *xc): a call into a μprocess's
 * exports (call.c), on the caller's microprocess.  The caller's
 * callee-saved registers are pushed on its own stack, whose %rsp the call
 * keeps (XC_SP) with the thread's die_sp below it; then the call stack
 * (XC_TOP), the μprocess's thread pointer, BLOCK, and the procedure with
 * its six arguments.  Its system calls trap as any of its code's, served
 * for the call's thread, and may park the microprocess and resume it on
 * another VP: the way back says ALLOW and installs the thread pointer of
 * the VP it is on then (%gs names that VP's record), and returns the
 * procedure's %rax.  %rbx, callee-saved, holds xc across the procedure.
 *
 * kr__img_call_back(xc): the call's thread ended instead (its fault, its
 * μprocess's end: call.c), on the caller's stack below the call: back to
 * kr__img_call's caller at once, as its return (%rax means nothing);
 * kr__img_call's own way back falls through into it. */
	.equ XC_SP, 0
	.equ XC_TOP, 8
	.equ XC_FN, 16
	.equ XC_FS, 24
	.equ XC_ARG, 32
	.equ XC_DIE, 80
	.globl kr__img_call
	.type kr__img_call, @function
	.p2align 4
kr__img_call:
	push %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	mov %rsp, XC_SP(%rdi)
	lea -128(%rsp), %rax            /* its end's stack: below this frame */
	and $-16, %rax
	mov XC_DIE(%rdi), %rcx
	mov %rax, (%rcx)
	mov %rdi, %rbx
	mov XC_TOP(%rbx), %rsp
	mov XC_FS(%rbx), %rax
	wrfsbase %rax
	mov XC_FN(%rbx), %rax
	mov XC_ARG(%rbx), %rdi
	mov XC_ARG+8(%rbx), %rsi
	mov XC_ARG+16(%rbx), %rdx
	mov XC_ARG+24(%rbx), %rcx
	mov XC_ARG+32(%rbx), %r8
	mov XC_ARG+40(%rbx), %r9
	movb $1, %gs:0                  /* PR_SYS_DISPATCH_FILTER_BLOCK */
	call *%rax
	movb $0, %gs:0                  /* ALLOW, on the VP it returns on */
	mov %gs:8, %rcx
	wrfsbase %rcx
	mov %rbx, %rdi
	.size kr__img_call, .-kr__img_call

	.globl kr__img_call_back
	.type kr__img_call_back, @function
kr__img_call_back:
	mov XC_SP(%rdi), %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.size kr__img_call_back, .-kr__img_call_back

/* AT_ENTRY of a μprocess whose image is to be kept (reuse.c): ld.so jumps
 * here when it hands over to the program.  Outside the gate, so its
 * system call traps; the trap takes the image and answers with the
 * program's entry, where the program starts with %rsp and %rdx as ld.so
 * left them. */
	.globl kr__img_handover
	.globl kr__img_handover_ret
	.type kr__img_handover, @function
	.p2align 4
kr__img_handover:
	mov $0x4b52, %eax               /* KR__NR_HANDOVER */
	syscall
kr__img_handover_ret:
	jmp *%rax
	.size kr__img_handover, .-kr__img_handover

/* long kr__img_on(uintptr_t sp, long (*fn)(void *), void *arg): fn(arg)
 * on the stack below sp (16-byte aligned), back on this one (iso.c: an
 * isolated μprocess's calls wait on its microprocess's own stack). */
	.globl kr__img_on
	.type kr__img_on, @function
	.p2align 4
kr__img_on:
	.cfi_startproc
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
	mov %rdi, %rsp
	mov %rdx, %rdi
	call *%rsi
	mov %rbp, %rsp
	.cfi_def_cfa_register %rsp
	pop %rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size kr__img_on, .-kr__img_on

/* An XSAVE area whose header says every component is in its initial
 * state; XRSTOR takes MXCSR from it all the same: its default. */
	.section .rodata
	.p2align 6
fpinit:
	.zero 24
	.long 0x1f80
	.zero 576 - 28

	.section .note.GNU-stack,"",@progbits
