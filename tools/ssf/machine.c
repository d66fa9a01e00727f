/*
 * SSF's machine: CPUs, caches, the bus and memory, each CPU, each cache and
 * the bus an agent (ssf_impl.h has the back-end contract).
 *
 * Agents and their order.  Agent 2i is CPU i, 2i+1 its cache, 2N the bus;
 * each runs once per cycle in that order, the bus last: it counts the
 * cycle and ends the simulation once every CPU has halted and the bus is
 * idle.
 *
 * A CPU executes one instruction per cycle (a separate instruction memory,
 * not cached).  Its loads, stores and test-and-sets go through its cache
 * model as calls: a hit completes in the same cycle; a miss posts a
 * request and waits on the bus, ending cycles from inside the call
 * (cpu_agent -> cpu_step -> cache_access -> bus_wait -> ssf_tick), so the
 * switch happens three calls deep — the seed's nesting, kept real by
 * noinline.
 *
 * Coherence: MSI with write-allocate.  The caches are direct-mapped, lines
 * of LINE_WORDS words.  A read miss is a BusRd, a write to a line not held
 * Modified a BusRdX (no separate upgrade: an S copy is fetched again).
 * The bus grants one transaction at a time, round robin from the last
 * owner, posts its snoop to every other cache, and completes BUS_LATENCY
 * cycles later, once every snoop has been taken.  A cache agent takes its
 * snoop on its next turn: a Modified copy is written back to memory (so
 * memory holds the latest data by completion) and becomes Shared on BusRd,
 * Invalid on BusRdX; a Shared copy is invalidated on BusRdX.  At completion
 * the bus writes back the requester's victim if it is still Modified, then
 * fills the line from memory.  A CPU that accesses a line between a grant
 * and its cache's snoop is ordered before that transaction, which is what
 * a snooping bus gives too.  Test-and-set needs the line Modified and then
 * reads and writes it within one turn: nobody else runs in between, which
 * is the atomicity.  After a wait the access looks again (a snoop may have
 * taken the line meanwhile) and asks again if it must.
 *
 * Everything is plain memory shared by the agents without atomics: the
 * back ends run exactly one agent at a time and their hand-off orders
 * memory (the pthread back end through its semaphores).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ssf_impl.h"

#define LINE_WORDS 4u
#define CACHE_LINES 64u
#define BUS_LATENCY 4u
#define CYCLES_MAX (1ull << 31) /* a program that runs longer is taken as hung */

enum { INV, SHD, MOD };            /* line states */
enum { TXN_NONE, TXN_RD, TXN_RDX }; /* bus transactions */

struct line {
	uint32_t tag; /* the line's number: address / LINE_WORDS */
	uint8_t state;
	uint32_t w[LINE_WORDS];
};

struct cache {
	struct line l[CACHE_LINES];
	uint8_t req;     /* set by the CPU side, cleared by the bus when done */
	uint32_t req_line;
	uint8_t snoop;   /* set by the bus at a grant, cleared by the cache agent */
	uint32_t snoop_line;
};

struct cpu {
	uint32_t r[SSF_REGS];
	uint32_t pc;
	int halted;
	struct cache *cache;
};

struct bus {
	int busy;
	unsigned owner; /* the cache whose transaction is on the bus, or was last */
	unsigned remain;
	uint8_t type;
	uint32_t line;
	uint64_t txns;
};

struct ssf_machine {
	ssf_sched sched; /* first: the back ends hand us this */
	unsigned ncpu, scale, halted;
	int done;
	const ssf_insn *code;
	unsigned ncode;
	uint32_t *mem;
	uint64_t cycle, insns;
	double t0, t1; /* the first cycle's start, the last one's end */
	struct bus bus;
	struct cpu cpu[SSF_CPUS_MAX];
	struct cache cache[SSF_CPUS_MAX];
	char fault[96]; /* a CPU's bad address or jump, or a hang */
};

unsigned ssf_cpus(const ssf_machine *m) { return m->ncpu; }
unsigned ssf_scale(const ssf_machine *m) { return m->scale; }

void ssf_poke(ssf_machine *m, uint32_t addr, uint32_t v)
{
	m->mem[addr % SSF_MEM_WORDS] = v;
}

uint32_t ssf_peek(const ssf_machine *m, uint32_t addr)
{
	addr %= SSF_MEM_WORDS;
	uint32_t line = addr / LINE_WORDS;
	for (unsigned i = 0; i < m->ncpu; i++) {
		const struct line *l = &m->cache[i].l[line % CACHE_LINES];
		if (l->state == MOD && l->tag == line)
			return l->w[addr % LINE_WORDS];
	}
	return m->mem[addr];
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void write_back(ssf_machine *m, const struct line *l)
{
	memcpy(&m->mem[l->tag * LINE_WORDS], l->w, sizeof l->w);
}

/* The CPU side's wait for one transaction: 3 calls below the CPU agent. */
static __attribute__((noinline)) void bus_wait(ssf_machine *m, struct cache *c, int type,
					       uint32_t line)
{
	c->req = (uint8_t)type;
	c->req_line = line;
	do
		ssf_tick(&m->sched);
	while (c->req != TXN_NONE);
}

/* The word at addr in c, held Shared or Modified (Modified if `write`). */
static __attribute__((noinline)) uint32_t *cache_access(ssf_machine *m, struct cache *c,
							uint32_t addr, int write)
{
	uint32_t line = addr / LINE_WORDS;
	struct line *l = &c->l[line % CACHE_LINES];
	while (l->state == INV || l->tag != line || (write && l->state != MOD))
		bus_wait(m, c, write ? TXN_RDX : TXN_RD, line);
	return &l->w[addr % LINE_WORDS];
}

static void cpu_fault(ssf_machine *m, struct cpu *c, const char *what, uint32_t v)
{
	if (!m->fault[0])
		snprintf(m->fault, sizeof m->fault, "CPU %u: %s %u at pc %u",
			 (unsigned)(c - m->cpu), what, v, c->pc);
	c->halted = 1;
	m->halted++;
}

/* One instruction; a memory access may wait on the bus for cycles. */
static __attribute__((noinline)) void cpu_step(ssf_machine *m, struct cpu *c)
{
	if (c->pc >= m->ncode) {
		cpu_fault(m, c, "runs off the program: pc", c->pc);
		return;
	}
	const ssf_insn *in = &m->code[c->pc];
	uint32_t *r = c->r, a = r[in->ra], b = r[in->rb], addr = a + (uint32_t)in->imm;
	m->insns++;
	c->pc++;
	switch (in->op) {
	case SSF_HALT:
		c->pc--;
		c->halted = 1;
		m->halted++;
		return;
	case SSF_LI: r[in->rd] = (uint32_t)in->imm; break;
	case SSF_ADD: r[in->rd] = a + b; break;
	case SSF_ADDI: r[in->rd] = a + (uint32_t)in->imm; break;
	case SSF_SUB: r[in->rd] = a - b; break;
	case SSF_SLT: r[in->rd] = (int32_t)a < (int32_t)b; break;
	case SSF_BEQ: if (a == b) c->pc = (uint32_t)in->imm; break;
	case SSF_BNE: if (a != b) c->pc = (uint32_t)in->imm; break;
	case SSF_BLT: if ((int32_t)a < (int32_t)b) c->pc = (uint32_t)in->imm; break;
	case SSF_JMP: c->pc = (uint32_t)in->imm; break;
	case SSF_LD:
	case SSF_ST:
	case SSF_TAS:
		if (addr >= SSF_MEM_WORDS) {
			c->pc--;
			cpu_fault(m, c, "address", addr);
			return;
		}
		uint32_t *w = cache_access(m, c->cache, addr, in->op != SSF_LD);
		if (in->op == SSF_ST) {
			*w = r[in->rd];
		} else {
			r[in->rd] = *w;
			if (in->op == SSF_TAS)
				*w = 1;
		}
		break;
	}
	r[0] = 0;
}

static void cpu_agent(ssf_machine *m, struct cpu *c)
{
	while (!m->done) {
		if (!c->halted)
			cpu_step(m, c);
		ssf_tick(&m->sched);
	}
}

static void snoop(ssf_machine *m, struct cache *c)
{
	struct line *l = &c->l[c->snoop_line % CACHE_LINES];
	if (l->state != INV && l->tag == c->snoop_line) {
		if (l->state == MOD)
			write_back(m, l);
		l->state = c->snoop == TXN_RD ? SHD : INV;
	}
	c->snoop = TXN_NONE;
}

static void cache_agent(ssf_machine *m, struct cache *c)
{
	while (!m->done) {
		if (c->snoop != TXN_NONE)
			snoop(m, c);
		ssf_tick(&m->sched);
	}
}

static void grant(ssf_machine *m, struct bus *b)
{
	for (unsigned k = 1; k <= m->ncpu; k++) {
		unsigned j = (b->owner + k) % m->ncpu;
		struct cache *c = &m->cache[j];
		if (c->req == TXN_NONE)
			continue;
		b->busy = 1;
		b->owner = j;
		b->type = c->req;
		b->line = c->req_line;
		b->remain = BUS_LATENCY;
		b->txns++;
		for (unsigned i = 0; i < m->ncpu; i++) {
			if (i != j) {
				m->cache[i].snoop = b->type;
				m->cache[i].snoop_line = b->line;
			}
		}
		return;
	}
}

static void complete(ssf_machine *m, struct bus *b)
{
	for (unsigned i = 0; i < m->ncpu; i++)
		if (m->cache[i].snoop != TXN_NONE)
			return; /* a snoop still to be taken: next cycle */
	struct cache *c = &m->cache[b->owner];
	struct line *l = &c->l[b->line % CACHE_LINES];
	if (l->state == MOD && l->tag != b->line)
		write_back(m, l);
	memcpy(l->w, &m->mem[b->line * LINE_WORDS], sizeof l->w);
	l->tag = b->line;
	l->state = b->type == TXN_RDX ? MOD : SHD;
	c->req = TXN_NONE;
	b->busy = 0;
}

static void bus_agent(ssf_machine *m)
{
	struct bus *b = &m->bus;
	while (!m->done) {
		if (!b->busy)
			grant(m, b);
		else if (b->remain > 1)
			b->remain--;
		else
			complete(m, b);
		m->cycle++;
		if (m->halted == m->ncpu && !b->busy) {
			m->done = 1;
		} else if (m->cycle >= CYCLES_MAX) {
			snprintf(m->fault, sizeof m->fault, "no end after %llu cycles",
				 (unsigned long long)m->cycle);
			m->done = 1;
		}
		if (m->done)
			m->t1 = now_ns();
		ssf_tick(&m->sched);
	}
}

static void body(ssf_sched *s, unsigned i)
{
	ssf_machine *m = (ssf_machine *)s;
	if (i == 0) /* the first agent's first turn */
		m->t0 = now_ns();
	/* The back ends give the agents stacks of one size and alignment, so
	 * their frames would sit at one offset modulo the page and compete for
	 * the same few sets of the data cache; a pad of i lines spreads them. */
	char *pad = __builtin_alloca(64 * (i % 64) + 1);
	__asm__ volatile("" : : "r"(pad) : "memory");
	if (i == 2 * m->ncpu)
		bus_agent(m);
	else if (i % 2 == 0)
		cpu_agent(m, &m->cpu[i / 2]);
	else
		cache_agent(m, &m->cache[i / 2]);
}

static uint64_t digest(const uint32_t *w, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= w[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int bad(char *why, size_t len, const char *msg)
{
	snprintf(why, len, "%s", msg);
	return EINVAL;
}

/* After the run: what the program and the caller see. */
static void finish(ssf_machine *m, const ssf_program *p, ssf_result *r)
{
	r->cycles = m->cycle;
	r->switches = m->sched.switches;
	r->instructions = m->insns;
	r->bus_txns = m->bus.txns;
	r->wall_ns = m->t1 - m->t0;
	if (m->fault[0]) {
		r->ok = 0;
		snprintf(r->check, sizeof r->check, "%s", m->fault);
	} else {
		r->ok = p->check(m, r->check, sizeof r->check);
	}
	for (unsigned i = 0; i < m->ncpu; i++) /* memory as the CPUs see it */
		for (unsigned k = 0; k < CACHE_LINES; k++)
			if (m->cache[i].l[k].state == MOD)
				write_back(m, &m->cache[i].l[k]);
	r->digest = digest(m->mem, SSF_MEM_WORDS);
}

int ssf_run(const ssf_backend *be, const char *program, unsigned cpus, unsigned scale,
	    ssf_result *r, char *why, size_t len)
{
	const ssf_program *p = program ? ssf_program_find(program) : NULL;
	if (!be || !r)
		return bad(why, len, "no back end or no result");
	if (!p)
		return bad(why, len, "unknown program");
	if (cpus < p->min_cpus || cpus > SSF_CPUS_MAX) {
		snprintf(why, len, "%s runs on %u to %u CPUs", p->name, p->min_cpus,
			 SSF_CPUS_MAX);
		return EINVAL;
	}
	if (scale < 1 || scale > SSF_SCALE_MAX) {
		snprintf(why, len, "the scale must be 1 to %u", SSF_SCALE_MAX);
		return EINVAL;
	}
	ssf_machine *m = calloc(1, sizeof *m);
	ssf_insn *code = NULL;
	int e = ENOMEM;
	if (!m || !(m->mem = calloc(SSF_MEM_WORDS, sizeof *m->mem))) {
		snprintf(why, len, "no memory for the machine");
		goto out;
	}
	m->ncpu = cpus;
	m->scale = scale;
	if ((e = ssf_assemble(p->text, &code, &m->ncode, why, len)) != 0 ||
	    (e = p->setup(m, why, len)) != 0)
		goto out;
	m->code = code;
	for (unsigned i = 0; i < cpus; i++) {
		m->cpu[i].cache = &m->cache[i];
		m->cpu[i].r[1] = i;
		m->cpu[i].r[2] = cpus;
		m->cpu[i].r[3] = scale;
	}
	m->bus.owner = cpus - 1; /* the first grant scans from CPU 0 */
	m->sched.n = 2 * cpus + 1;
	m->sched.body = body;
	*r = (ssf_result){0};
	e = be->run(&m->sched, why, len);
	if (!e)
		finish(m, p, r);
out:
	free(code);
	if (m)
		free(m->mem);
	free(m);
	return e;
}

const char *const ssf_backend_names[] = {"karui", "ucontext", "pthread", NULL};

const ssf_backend *ssf_backend_find(const char *name)
{
	static const ssf_backend *const all[] = {&ssf_backend_karui, &ssf_backend_ucontext,
						 &ssf_backend_pthread};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}
