/*
 * The saved-context frame, offset by offset, for each architecture.  The
 * assembly in src/arch/<arch>/switch.S draws the same table and uses the same
 * numbers; tests/test_ctx.c checks that kr_ctx_make and the switch agree with
 * this header.  Offsets are from the saved stack pointer (kr_ctx.sp).
 */
#ifndef KARUI_ARCH_FRAME_H
#define KARUI_ARCH_FRAME_H

#if defined(__x86_64__)
/*  -8  mxcsr (4) | x87 control word (2) | pad (2): below the saved stack
 *      pointer, in the red zone
 *   0  r12        <- entry function of a fresh context
 *   8  r13
 *  16  r14
 *  24  r15
 *  32  rbx
 *  40  rbp
 *  48  resume address
 *  56  (end: the stack pointer after resumption)
 * A fresh context's MXCSR word has KR_FRAME_FRESH set (a reserved bit,
 * never set in a saved one): the switch enters it at its trampoline. */
#define KR_FRAME_FPCTL (-8)
#define KR_FRAME_ENTRY 0
#define KR_FRAME_RESUME 48
#define KR_FRAME_SIZE 56
#define KR_FRAME_MXCSR_DEFAULT 0x1F80u
#define KR_FRAME_X87CW_DEFAULT 0x037Fu
#define KR_FRAME_FRESH 0x80000000u
#elif defined(__aarch64__)
/*   0  d8  d9    16 d10 d11   32 d12 d13   48 d14 d15
 *  64  x19 x20   <- x19 is the entry function of a fresh context
 *  80  x21 x22   96 x23 x24  112 x25 x26  128 x27 x28
 * 144  x29 (frame pointer)  152  x30 = resume address
 * 160  fpcr | pad
 * 176  (end)                                       */
#define KR_FRAME_FPCTL 160
#define KR_FRAME_ENTRY 64
#define KR_FRAME_RESUME 152
#define KR_FRAME_SIZE 176
#else
#error "karui: no context switch for this architecture yet"
#endif

#endif
