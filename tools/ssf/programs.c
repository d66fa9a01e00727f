/*
 * SSF's programs: parallel programs in the simulator's instruction set
 * (asm.c), each with the set-up of its memory and the check of its result.
 *
 * Every CPU runs the same text with r1 = its number, r2 = the CPU count
 * and r3 = the scale K.  Locks are test-and-test-and-set: spin on the
 * cached copy (a Shared line, no bus traffic) and try tas only when it
 * reads free, so the coherence protocol carries the contention.
 *
 *   sum       each CPU adds its 16-word slice of the array, K times over,
 *             each time adding its partial sum to a total under a lock;
 *             the total must be K * (1 + ... + 16N).
 *   barrier   4K phases with a sense-reversing barrier (a count under a
 *             lock, a sense flag): each CPU marks its slot with the phase,
 *             passes the barrier, then checks that every slot shows that
 *             phase or a later one — a CPU that finds one behind has seen
 *             the barrier fail and records it.  No error may be recorded,
 *             and every slot must end at 4K.
 *   prodcons  CPUs 0..P-1 (P = N/2) produce 16K items each, numbered so
 *             that together they make 0..16KP-1 once each, into an 8-slot
 *             ring under one lock; the others consume, counting each item
 *             they take in seen[item], until all are taken.  Who finds the
 *             ring empty (or full) waits outside the lock, reading the
 *             count from its cache, until it changes: one that retried
 *             under the lock would take it back before the other side's
 *             bus transaction could land, every time, in a machine this
 *             deterministic.  Every item
 *             must have been seen exactly once and the ring left empty.
 *
 * The layouts keep the lock on a line of its own; other shared words share
 * lines as a program would, so the checks see false sharing too.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ssf_impl.h"

#define CHUNK 16u

static const char SUM[] =
	".equ LOCK, 0\n"
	".equ TOTAL, 4\n"
	".equ ARRAY, 64\n"
	".equ CHUNK, 16\n"
	"	li   r4, ARRAY        ; r4 = my slice: ARRAY + id * CHUNK\n"
	"	li   r5, 0\n"
	"base:	beq  r5, r1, round\n"
	"	addi r4, r4, CHUNK\n"
	"	addi r5, r5, 1\n"
	"	jmp  base\n"
	"round:	beq  r3, r0, done     ; r3: rounds left\n"
	"	li   r6, 0            ; partial sum\n"
	"	li   r7, 0            ; index\n"
	"	li   r10, CHUNK\n"
	"elem:	add  r8, r4, r7\n"
	"	ld   r9, 0(r8)\n"
	"	add  r6, r6, r9\n"
	"	addi r7, r7, 1\n"
	"	bne  r7, r10, elem\n"
	"lock:	ld   r9, LOCK(r0)     ; spin on the cached copy\n"
	"	bne  r9, r0, lock\n"
	"	tas  r9, LOCK(r0)\n"
	"	bne  r9, r0, lock\n"
	"	ld   r9, TOTAL(r0)\n"
	"	add  r9, r9, r6\n"
	"	st   r9, TOTAL(r0)\n"
	"	st   r0, LOCK(r0)     ; release\n"
	"	addi r3, r3, -1\n"
	"	jmp  round\n"
	"done:	halt\n";

enum { SUM_LOCK = 0, SUM_TOTAL = 4, SUM_ARRAY = 64 };

static int sum_setup(ssf_machine *m, char *why, size_t len)
{
	for (uint32_t i = 0; i < CHUNK * ssf_cpus(m); i++)
		ssf_poke(m, SUM_ARRAY + i, i + 1);
	return 0;
}

static int sum_check(const ssf_machine *m, char *msg, size_t len)
{
	uint32_t n = CHUNK * ssf_cpus(m);
	uint32_t want = ssf_scale(m) * (n * (n + 1) / 2), got = ssf_peek(m, SUM_TOTAL);
	int ok = got == want && ssf_peek(m, SUM_LOCK) == 0;
	snprintf(msg, len, "sum %u (expected %u)%s", got, want, ok ? "" : ": WRONG");
	return ok;
}

static const char BARRIER[] =
	".equ LOCK, 0\n"
	".equ COUNT, 4\n"
	".equ SENSE, 8\n"
	".equ ERRORS, 12\n"
	".equ SLOTS, 64\n"
	"	add  r3, r3, r3       ; phases: 4 * scale\n"
	"	add  r3, r3, r3\n"
	"	li   r11, 0           ; my sense\n"
	"	li   r12, 1           ; the phase\n"
	"	li   r13, SLOTS\n"
	"	add  r13, r13, r1     ; my slot\n"
	"	li   r14, 1\n"
	"phase:	st   r12, 0(r13)     ; I have reached this phase\n"
	"	sub  r11, r14, r11    ; flip my sense\n"
	"lock:	ld   r9, LOCK(r0)\n"
	"	bne  r9, r0, lock\n"
	"	tas  r9, LOCK(r0)\n"
	"	bne  r9, r0, lock\n"
	"	ld   r9, COUNT(r0)\n"
	"	addi r9, r9, 1\n"
	"	beq  r9, r2, last\n"
	"	st   r9, COUNT(r0)\n"
	"	st   r0, LOCK(r0)\n"
	"wait:	ld   r9, SENSE(r0)   ; until the last one flips the sense\n"
	"	bne  r9, r11, wait\n"
	"	jmp  check\n"
	"last:	st   r0, COUNT(r0)   ; the last to arrive resets and releases\n"
	"	st   r11, SENSE(r0)\n"
	"	st   r0, LOCK(r0)\n"
	"check:	li   r7, 0           ; every slot: this phase or a later one\n"
	"next:	li   r8, SLOTS\n"
	"	add  r8, r8, r7\n"
	"	ld   r9, 0(r8)\n"
	"	blt  r9, r12, broken\n"
	"	addi r7, r7, 1\n"
	"	bne  r7, r2, next\n"
	"	beq  r12, r3, done\n"
	"	addi r12, r12, 1\n"
	"	jmp  phase\n"
	"broken:	st   r14, ERRORS(r0)\n"
	"	halt\n"
	"done:	halt\n";

enum { BAR_LOCK = 0, BAR_COUNT = 4, BAR_SENSE = 8, BAR_ERRORS = 12, BAR_SLOTS = 64 };

static int no_setup(ssf_machine *m, char *why, size_t len)
{
	return 0;
}

static int barrier_check(const ssf_machine *m, char *msg, size_t len)
{
	uint32_t phases = 4 * ssf_scale(m), behind = 0;
	for (unsigned i = 0; i < ssf_cpus(m); i++)
		behind += ssf_peek(m, BAR_SLOTS + i) != phases;
	uint32_t errors = ssf_peek(m, BAR_ERRORS);
	int ok = !errors && !behind && ssf_peek(m, BAR_COUNT) == 0 &&
		 ssf_peek(m, BAR_SENSE) == phases % 2 && ssf_peek(m, BAR_LOCK) == 0;
	snprintf(msg, len, "%u phases, %s%s", phases,
		 errors ? "a CPU passed the barrier early" :
		 behind ? "a CPU stopped short" : "the barrier held every time",
		 ok ? "" : ": WRONG");
	return ok;
}

static const char PRODCONS[] =
	".equ LOCK, 0\n"
	".equ COUNT, 4\n"
	".equ HEAD, 5\n"
	".equ TAIL, 6\n"
	".equ TAKEN, 7\n"
	".equ NPROD, 8\n"
	".equ TOTAL, 9\n"
	".equ PER, 10\n"
	".equ BUF, 16\n"
	".equ BUFN, 8\n"
	".equ SEEN, 1024\n"
	"	ld   r4, NPROD(r0)\n"
	"	blt  r1, r4, produce\n"
	"	ld   r5, TOTAL(r0)\n"
	"take:	ld   r9, LOCK(r0)\n"
	"	bne  r9, r0, take\n"
	"	tas  r9, LOCK(r0)\n"
	"	bne  r9, r0, take\n"
	"	ld   r6, TAKEN(r0)\n"
	"	beq  r6, r5, over     ; all taken: stop\n"
	"	ld   r7, COUNT(r0)\n"
	"	beq  r7, r0, empty\n"
	"	ld   r8, HEAD(r0)\n"
	"	ld   r10, BUF(r8)     ; the item\n"
	"	addi r8, r8, 1\n"
	"	li   r9, BUFN\n"
	"	bne  r8, r9, hd\n"
	"	li   r8, 0\n"
	"hd:	st   r8, HEAD(r0)\n"
	"	addi r7, r7, -1\n"
	"	st   r7, COUNT(r0)\n"
	"	addi r6, r6, 1\n"
	"	st   r6, TAKEN(r0)\n"
	"	ld   r9, SEEN(r10)    ; seen[item] += 1\n"
	"	addi r9, r9, 1\n"
	"	st   r9, SEEN(r10)\n"
	"	st   r0, LOCK(r0)\n"
	"	jmp  take\n"
	"empty:	st   r0, LOCK(r0)\n"
	"idle:	ld   r7, COUNT(r0)    ; wait outside the lock: for an item\n"
	"	bne  r7, r0, take\n"
	"	ld   r6, TAKEN(r0)    ; or for the end\n"
	"	beq  r6, r5, take\n"
	"	jmp  idle\n"
	"over:	st   r0, LOCK(r0)\n"
	"	halt\n"
	"produce:	ld   r5, PER(r0)     ; items to make\n"
	"	add  r10, r1, r0      ; my first item; then every NPROD-th\n"
	"put:	beq  r5, r0, made\n"
	"plock:	ld   r9, LOCK(r0)\n"
	"	bne  r9, r0, plock\n"
	"	tas  r9, LOCK(r0)\n"
	"	bne  r9, r0, plock\n"
	"	ld   r7, COUNT(r0)\n"
	"	li   r9, BUFN\n"
	"	beq  r7, r9, full\n"
	"	ld   r8, TAIL(r0)\n"
	"	st   r10, BUF(r8)\n"
	"	addi r8, r8, 1\n"
	"	bne  r8, r9, tl\n"
	"	li   r8, 0\n"
	"tl:	st   r8, TAIL(r0)\n"
	"	addi r7, r7, 1\n"
	"	st   r7, COUNT(r0)\n"
	"	add  r10, r10, r4\n"
	"	addi r5, r5, -1\n"
	"	st   r0, LOCK(r0)\n"
	"	jmp  put\n"
	"full:	st   r0, LOCK(r0)\n"
	"room:	ld   r7, COUNT(r0)    ; wait outside the lock for room\n"
	"	beq  r7, r9, room\n"
	"	jmp  put\n"
	"made:	halt\n";

enum { PC_LOCK = 0, PC_COUNT = 4, PC_TAKEN = 7, PC_NPROD = 8, PC_TOTAL = 9, PC_PER = 10,
       PC_SEEN = 1024 };

static uint32_t pc_total(const ssf_machine *m)
{
	return ssf_cpus(m) / 2 * CHUNK * ssf_scale(m);
}

static int prodcons_setup(ssf_machine *m, char *why, size_t len)
{
	if (PC_SEEN + pc_total(m) > SSF_MEM_WORDS) {
		snprintf(why, len, "prodcons: %u items do not fit the memory", pc_total(m));
		return EINVAL;
	}
	ssf_poke(m, PC_NPROD, ssf_cpus(m) / 2);
	ssf_poke(m, PC_TOTAL, pc_total(m));
	ssf_poke(m, PC_PER, CHUNK * ssf_scale(m));
	return 0;
}

static int prodcons_check(const ssf_machine *m, char *msg, size_t len)
{
	uint32_t total = pc_total(m), wrong = 0, first = 0, seen = 0;
	for (uint32_t i = 0; i < total; i++) {
		uint32_t s = ssf_peek(m, PC_SEEN + i);
		if (s != 1 && !wrong++) {
			first = i;
			seen = s;
		}
	}
	int ok = !wrong && ssf_peek(m, PC_TAKEN) == total && ssf_peek(m, PC_COUNT) == 0 &&
		 ssf_peek(m, PC_LOCK) == 0;
	if (wrong)
		snprintf(msg, len, "%u items, %u not consumed once (item %u %u times): WRONG",
			 total, wrong, first, seen);
	else
		snprintf(msg, len, "%u items, each consumed once%s", total, ok ? "" : ": WRONG");
	return ok;
}

static const ssf_program PROGRAMS[] = {
	{"sum", SUM, 1, sum_setup, sum_check},
	{"barrier", BARRIER, 1, no_setup, barrier_check},
	{"prodcons", PRODCONS, 2, prodcons_setup, prodcons_check},
};

const char *const ssf_program_names[] = {"sum", "barrier", "prodcons", NULL};

const ssf_program *ssf_program_find(const char *name)
{
	for (size_t i = 0; i < sizeof PROGRAMS / sizeof PROGRAMS[0]; i++)
		if (strcmp(PROGRAMS[i].name, name) == 0)
			return &PROGRAMS[i];
	return NULL;
}
