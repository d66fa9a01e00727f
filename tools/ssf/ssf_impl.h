/*
 * SSF's inside: the contract between the machine and its back ends, the
 * instruction set, and what a program sees of the machine.  See ssf.h for
 * the whole.
 *
 * The back-end contract (ssf_sched).  The machine has n agents; a back end
 * runs each agent's body, body(s, i), in a context of its own, starting
 * with agent 0.  An agent ends each of its cycles with ssf_tick, which
 * calls the back end's pass: pass switches to agent (i + 1) mod n and
 * returns when agent i's turn comes round again.  Exactly one agent runs
 * at a time and the order never varies, which is what makes every back
 * end give the same simulation.  At the end every body returns, each on
 * its own turn, in ring order starting after the agent that ended the
 * simulation; a back end then hands over to the next agent whose body has
 * not returned, and returns from run when all have.
 */
#ifndef KARUI_SSF_IMPL_H
#define KARUI_SSF_IMPL_H

#include "ssf.h"

struct ssf_sched {
	unsigned n;                                 /* agents */
	void (*body)(ssf_sched *s, unsigned i);     /* agent i's whole life */
	void (*pass)(ssf_sched *s);                 /* set by the back end */
	void *be;                                   /* the back end's state */
	uint64_t switches;                          /* passes so far */
};

/* End the calling agent's cycle: the next agent runs. */
static inline void ssf_tick(ssf_sched *s)
{
	s->switches++;
	s->pass(s);
}

/* The instruction set (asm.c has its syntax).  r0 reads as zero. */
enum ssf_op {
	SSF_HALT, SSF_LI, SSF_ADD, SSF_ADDI, SSF_SUB, SSF_SLT,
	SSF_LD, SSF_ST, SSF_TAS, SSF_BEQ, SSF_BNE, SSF_BLT, SSF_JMP,
	SSF_NOPS
};
#define SSF_REGS 16

typedef struct ssf_insn {
	uint8_t op, rd, ra, rb;
	int32_t imm;
} ssf_insn;

/* Assemble `text` into a new array *out of *n instructions (free it);
 * EINVAL with "line N: ..." in why, or ENOMEM. */
int ssf_assemble(const char *text, ssf_insn **out, unsigned *n, char *why, size_t len);

/* The machine as a program's set-up and check see it. */
typedef struct ssf_machine ssf_machine;
#define SSF_MEM_WORDS (1u << 18)
unsigned ssf_cpus(const ssf_machine *m);
unsigned ssf_scale(const ssf_machine *m);
void ssf_poke(ssf_machine *m, uint32_t addr, uint32_t v); /* before the run */
uint32_t ssf_peek(const ssf_machine *m, uint32_t addr);   /* coherent: a cache's
                                                             modified copy wins */

/* A program: text run by every CPU (r1 = its number, r2 = the CPU count,
 * r3 = the scale), a set-up of the memory and a check of it afterwards. */
typedef struct ssf_program {
	const char *name;
	const char *text;
	unsigned min_cpus;
	/* 0, or EINVAL with a message when cpus or scale don't fit */
	int (*setup)(ssf_machine *m, char *why, size_t len);
	/* 1 when the result is right; what was found goes to msg */
	int (*check)(const ssf_machine *m, char *msg, size_t len);
} ssf_program;

const ssf_program *ssf_program_find(const char *name);

#endif
