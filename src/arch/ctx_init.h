/*
 * L1 for the layers above: lay out a fresh context without the checks and
 * the zeroing of kr_ctx_make.  Only the words the first resumption reads
 * matter: the entry, the resume address and the FP control state; the
 * other callee-saved slots may hold anything, since the trampoline does not
 * read them and the entry function starts from nothing.
 */
#ifndef KARUI_ARCH_CTX_INIT_H
#define KARUI_ARCH_CTX_INIT_H

#include <stdint.h>
#include <string.h>

#include "karui/ctx.h"
#include "frame.h"

void kr__ctx_trampoline(void);

/* The core's switch (switch.S): kr_ctx_switch and kr_ctx_jump that also
 * count the thread's resumptions (blocking.h) and, once off the stack they
 * leave, store 0 (release) into *left: the one who waits to run the context
 * left may run it from then on, and the resumed side has nothing to
 * complete, so that a switch can be a tail call.  kr__ctx_switch returns 0
 * when the caller is resumed.  The trampoline of the contexts it makes
 * calls their entry with a NULL arg, and resumes what the entry returns,
 * releasing its `arg` (a uint32_t *) the same way. */
int kr__ctx_switch(kr_ctx *from, kr_ctx *to, uint32_t *left);
__attribute__((noreturn)) void kr__ctx_jump(kr_ctx *to, uint32_t *left);
void kr__ctx_trampoline_counted(void);

/* A fresh context whose stack ends (exclusive) at `end`, first entered
 * through `trampoline`: kr__ctx_trampoline for kr_ctx_switch,
 * kr__ctx_trampoline_counted for kr__ctx_switch. */
static inline void kr__ctx_init_below(kr_ctx *ctx, void *end, kr_ctx_entry entry,
				      void (*trampoline)(void))
{
	uintptr_t top = (uintptr_t)end & ~(uintptr_t)15;
	unsigned char *f = (unsigned char *)(top - KR_FRAME_SIZE);
	void *e = (void *)entry, *r = (void *)trampoline;
	memcpy(f + KR_FRAME_ENTRY, &e, sizeof e);
	memcpy(f + KR_FRAME_RESUME, &r, sizeof r);
#if defined(__x86_64__)
	uint64_t fp = (KR_FRAME_MXCSR_DEFAULT | KR_FRAME_FRESH) |
		      (uint64_t)KR_FRAME_X87CW_DEFAULT << 32;
	memcpy(f + KR_FRAME_FPCTL, &fp, sizeof fp);
#elif defined(__aarch64__)
	uint64_t fpcr = 0, fp = 0;
	memcpy(f + KR_FRAME_FPCTL, &fpcr, sizeof fpcr);
	memcpy(f + KR_FRAME_RESUME - 8, &fp, sizeof fp); /* x29 = 0 ends backtraces */
#endif
	ctx->sp = f;
}

static inline void kr__ctx_init(kr_ctx *ctx, void *stack_lo, size_t size, kr_ctx_entry entry,
				void (*trampoline)(void))
{
	kr__ctx_init_below(ctx, (unsigned char *)stack_lo + size, entry, trampoline);
}

#endif
