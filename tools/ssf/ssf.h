/*
 * SSF — a clock-level simulator of a shared-memory multiprocessor (seed 002
 * §1.2 and §5.2), as a library: karui-ssf (main.c) and karui-bench's
 * seed002.ssf experiment both run it through this header.
 *
 * The machine: N simple CPUs running a small RISC-like instruction set
 * (asm.c), each with a private direct-mapped cache kept coherent by MSI
 * snooping on one shared bus with round-robin arbitration in front of the
 * shared memory (machine.c).  Every CPU, every cache and the bus is an agent
 * that runs in a context of its own and is switched after every simulated
 * cycle, round robin; a CPU's load that misses switches from inside its
 * cache model, which waits on the bus, two or three calls deep — the
 * seed's reason for lightweight processes over hand-made state machines.
 *
 * The programs (programs.c) are real parallel programs in that instruction
 * set — a sum under a lock, a barrier, a producer/consumer — and each
 * checks its own result in the simulated memory at the end.
 *
 * The back ends switch the agents: karui microprocesses on one VP,
 * swapcontext on one kernel thread, or one kernel thread per agent with a
 * hand-off (backend_*.c).  Each passes the processor in the same fixed
 * order, so a simulation is deterministic: every back end gives the same
 * cycle count, the same switches and the same memory.
 *
 * Calls return 0 or a positive errno code (karui's rule); a message for a
 * person goes to the caller's buffer.
 */
#ifndef KARUI_SSF_H
#define KARUI_SSF_H

#include <stddef.h>
#include <stdint.h>

#define SSF_CPUS_MAX 32u
#define SSF_SCALE_MAX 1000u

typedef struct ssf_sched ssf_sched;

/* A way of switching the agents (backend_*.c). */
typedef struct ssf_backend {
	const char *name;
	/* Run agents 0..s->n-1 to their ends (ssf_sched, ssf_impl.h); 0 or an
	 * errno code, with a message in why[len]. */
	int (*run)(ssf_sched *s, char *why, size_t len);
} ssf_backend;

extern const ssf_backend ssf_backend_karui;    /* microprocesses, one VP */
extern const ssf_backend ssf_backend_ucontext; /* swapcontext, one thread */
extern const ssf_backend ssf_backend_pthread;  /* a thread per agent */

/* By name: "karui", "ucontext", "pthread"; NULL if unknown. */
const ssf_backend *ssf_backend_find(const char *name);
/* The names of the back ends and programs, NULL-terminated. */
extern const char *const ssf_backend_names[];
extern const char *const ssf_program_names[];

typedef struct ssf_result {
	uint64_t cycles;       /* simulated cycles to the last CPU's halt */
	uint64_t switches;     /* agent-to-agent switches (one per agent per cycle) */
	uint64_t instructions; /* executed by all CPUs */
	uint64_t bus_txns;     /* bus transactions (misses and upgrades) */
	uint64_t digest;       /* a hash of the final memory, for comparing runs */
	double wall_ns;        /* from the first cycle to the last: the back end's
	                          start-up and tear-down (contexts, threads,
	                          kr_init) are not the simulation's speed */
	int ok;                /* 1: the program's result check passed */
	char check[160];       /* what the check found */
} ssf_result;

/* Run `program` on `cpus` CPUs at size `scale` (1..SSF_SCALE_MAX; the
 * work grows with it) on back end `be`.  EINVAL: unknown program, cpus
 * outside the program's range (1..SSF_CPUS_MAX; prodcons needs 2), scale
 * out of range; ENOMEM; the back end's errors.  A result check that fails
 * is no error: r->ok says it. */
int ssf_run(const ssf_backend *be, const char *program, unsigned cpus, unsigned scale,
	    ssf_result *r, char *why, size_t len);

#endif
