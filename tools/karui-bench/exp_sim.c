/*
 * karui-bench — seed004.sim: seed 004's emulator (§5, Figures 6 and 7), a
 * discrete-event simulator of processors, kernel threads, user threads and
 * processes that counts machine instructions, every one of the same cost
 * and with no caches, as the paper's emulator did.
 *
 * Concepts.  NCPU processors (CPUs) run kernel threads (kts); a kt belongs
 * to a process and runs one of its user threads (uts) at a time.  Time is
 * counted in instructions: a CPU runs one per unit.  A ut runs a workload
 * (below): grains of computation between synchronisations.  Each thread
 * operation costs the instructions that seed 004's Table 1 gives it, on
 * the CPU that performs it (`charge`): they delay that CPU's next grain
 * and add to the point's cost.  The figure is the thread-management cost
 * per processor-second: instructions charged per CPU and per simulated
 * second (MIPS instructions, about a 25 MHz 68030), idle CPUs included.
 * An operation takes effect when it starts (a woken ut is runnable at
 * once); its instructions follow on its CPU and are never preempted.
 *
 * Two sets of costs: Table 1's, and karui's own counts of a user thread's
 * create, stop, resume, switch and exit (seed004.table1, callgrind) with
 * Table 1's kernel costs kept; the second set's metrics end in ".karui".
 * The rows: Figure 6 (x = processes; "wave", "mult", and in the full run
 * "force"), with the address-space switches behind each ("<wl>.as-switches"),
 * Figure 7 ("wave-grain", x = the grains' scale, at FIG7_LOAD processes),
 * the proposed scheme's best improvement over each other system per
 * workload ("gain.<wl>", beside the paper's for wave), and each workload's
 * mean parallelism ("parallelism", beside Table 2's).
 *
 * What every system pays alike: a CPU that starts running a kt pays a
 * kernel context switch, and an address-space switch when the kt's
 * process is not the one whose address space it holds; a kt preempted at
 * the end of its QUANTUM pays a kernel stop, and a kernel resume when it
 * runs again (Fig. 4's (1) and (3)).  Beyond that, what §2 to §4 say:
 *   k-only     every ut is a kt.  The kernel runs one FIFO of the runnable
 *              kts of all processes on all CPUs, round robin.  Block:
 *              kernel stop; wakeup: kernel resume, by the waker; create
 *              and exit: the kernel's.
 *   two-level  NCPU kts per process, time-sliced as above by a kernel that
 *              does not know what they run; uts block, wake, switch,
 *              start and end at user level.  A kt with no ut to run
 *              blocks in the kernel at once (sleeping locks, §2.1 (2)); a
 *              ut made ready while its process has blocked kts wakes one
 *              (kernel resume, a system call by the waker).  A kt
 *              preempted while others wait for its ut holds them up until
 *              the kernel runs it again.
 *   sched-act  scheduler activations.  The allocator (below) gives each
 *              process CPUs.  Each CPU given arrives as an upcall on a new
 *              activation, which costs a kernel-thread create (§4.3:
 *              restarting a kt is an initialisation, as dear as creating
 *              one), and takes in the uts of the process's activations
 *              preempted since its last upcall (user resume each).
 *              Preempting a kt (Fig. 1): kernel stop of it (B), kernel
 *              stop of another kt of the process (A) and an upcall on A's
 *              CPU that readies B's ut and resumes A's (kernel create,
 *              user resume, user switch); with no other kt, the news waits
 *              for the next upcall.  Two stops and two restarts, as §2.2
 *              counts them.  A ut made ready while its process wants more
 *              CPUs than it has asks for one (a system call, kernel
 *              resume), once until it has them; an activation left with
 *              no ut says so (the same system call) and waits on its CPU.
 *   proposed   the C-area scheme (§3, Fig. 4), with the same allocator,
 *              which reads the runnable counts from the C-areas: no system
 *              calls.  A preempted kt is SUSPENDED with its ut, and the
 *              kernel resumes it when its process gets a CPU.  A ut that
 *              blocks waiting for uts held by SUSPENDED kts, and a kt about
 *              to idle while a kt of its process is SUSPENDED, recover
 *              those uts at user level: SUSPENDED -> RECOVERING by
 *              compare-and-swap (CAS_COST) and the context into the ut's
 *              record (user resume); the kt is RECOVERED, and re-initialised
 *              (kernel create) when the kernel uses it again.  A kt left
 *              with no ut waits on its CPU.  No upcalls.
 *
 * The allocator (sched-act, proposed).  A process's demand is its runnable
 * uts (ready, running, or held by a preempted kt), its allocation the CPUs
 * that run its kts.  A CPU idle in the kernel goes at once to a process
 * that wants more than it has: the one with the fewest CPUs, then the one
 * served longest ago.  At the end of a quantum the kernel looks again: a
 * kt with no ut loses its CPU (kernel stop) if another process wants one;
 * a busy kt loses it to a process that wants one and has fewer CPUs than
 * its own (time sharing, once the processes want more than there are).
 * Until then a kt with no ut takes the next ut its process readies (user
 * switch), without the kernel.
 *
 * Workloads (§5.2, Table 2), synthetic task graphs with the paper's sync
 * patterns and grains.  A run of a program creates its uts (create each),
 * runs them and ends with every ut's exit; the process starts the next
 * run at once, so the load stays constant.
 *   mult   16 uts, one grain each (a block product, mean 1.7e5
 *          instructions), a barrier of all 16, exit.
 *   force  16 uts, FORCE_PHASES phases (two per loop of the n-body
 *          program), each a grain (mean 1.7e3) and a barrier of all 16.
 *   wave   a 10 x 10 mesh of uts, WAVE_SWEEPS wavefront sweeps: cell
 *          (i, j) computes its grain of a sweep (mean 9.0e2) once (i-1, j)
 *          and (i, j-1) have done theirs, and cell (0, 0) starts a sweep
 *          once cell (9, 9) has ended the one before.
 * A grain is uniform in mean x [1 - spread, 1 + spread], drawn from a hash
 * of the process, run, ut and step: the same in every system, so that the
 * systems run the same programs, and the same in every run.  The spreads
 * give each workload alone on 8 CPUs, at no cost, Table 2's mean
 * parallelism (the `parallelism` rows).  Figure 7 multiplies every grain.
 *
 * Approximations: no caches, I/O, page faults or notifiers; the kernel's
 * own scheduling work beyond Table 1's operations is free; reading a
 * C-area is free; a kt waiting for work costs nothing (a CPU idle in user
 * space, not thread management).
 *
 * The events.  Each CPU has at most one pending event (`next`): the end of
 * its ut's grain or of its quantum, or, for an idle CPU kicked because
 * work appeared, the moment it looks for it.  With 8 CPUs the earliest is
 * found by a scan; ties go to the lowest CPU, so a point repeats exactly.
 * A point runs for a horizon of simulated time (horizon_of: 2e7
 * instructions with --quick, 1e8 in full, more for mult and the largest
 * grains, so that every point sees many runs of each program); its first
 * tenth, the processes' start, is a warm-up that is not counted.
 *
 * Rejected: a heap of events (code for 8 entries); stepping instruction by
 * instruction (10^9 steps a point); an allocator that takes a CPU the
 * moment its kt idles (with barriers every 3,400 instructions, CPUs
 * crossed address spaces at every phase: a kernel reading the C-area at
 * its own scheduling points does not); counting idle waiting as cost (the
 * idle CPUs of a light load would dominate every figure); workloads of
 * mixed programs (under a cost per CPU-second, k-only gives most CPU time
 * to MULT's ever-runnable threads and the allocators give each program its
 * share: the figures compare the CPU shares, not the systems).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp.h"

#define NCPU 8
#define MAXPROC 16
#define QUANTUM 100000     /* instructions: 20 ms at MIPS */
#define MIPS 5e6           /* instructions per simulated second */
#define CAS_COST 5         /* the C-area's compare-and-swap and status store */
#define MESH 10            /* wave's mesh side */
#define FORCE_PHASES 40
#define WAVE_SWEEPS 10
#define FIG7_LOAD 16       /* processes in Figure 7 (at most --n) */
#define SEED 4             /* of the grains: fixed, so that runs repeat exactly */
#define NEVER INT64_MAX

enum { K_ONLY, TWO_LEVEL, SCHED_ACT, PROPOSED, NSYS };
static const char *const SYS_NAME[NSYS] = {"k-only", "two-level", "sched-act", "proposed"};

enum { MULT, FORCE, WAVE, NWL };
static const struct wl {
	const char *name;
	int threads, steps;     /* steps: barrier phases, or sweeps */
	double grain, spread;   /* mean instructions between syncs; spread of a grain */
	double paper_parallelism;
} WL[NWL] = {
	{"mult", 16, 1, 1.7e5, 0.03, 7.86},
	{"force", 16, FORCE_PHASES, 1.7e3, 0.03, 7.85},
	{"wave", MESH * MESH, WAVE_SWEEPS, 9.0e2, 0.8, 4.10},
};

/* Table 1's operations: the user thread's, then the unstable kernel
 * thread's */
typedef struct costs {
	int64_t ucreate, ustop, uresume, uswitch, uexit;
	int64_t kcreate, kstop, kresume, kswitch, kas, kexit;
} costs;
static const costs PAPER_COSTS = {92, 13, 46, 40, 46, 560, 60, 82, 260, 300, 513};

/* seed 004 §5.3: the proposed scheme's best improvement over each */
static const double PAPER_GAIN[NSYS] = {72.5, 59.5, 19.0, 0};

enum { U_FREE, U_READY, U_RUN, U_HELD, U_WAIT };  /* HELD: on a preempted kt */
enum { RUN, WAIT, EXIT };

typedef struct ut {
	int p, state, kt, next;  /* next: the process's ready queue */
	int step, computing;     /* steps done; in a grain */
	int64_t left;            /* instructions of the grain still to run */
} ut;

/* A kt is running on a CPU, or on one list: the kernel's run queue, or
 * its process's idle, free or SUSPENDED list. */
typedef struct kt {
	int p, ut;               /* process; ut running or held, or -1 */
	int next, prev;          /* the list's links (prev: SUSPENDED only) */
} kt;

typedef struct cpu {
	int kt, as;              /* running kt, or -1; process whose address space it holds */
	int kicked;              /* next is set for it to look for work */
	int64_t start;           /* when its ut's instructions (re)start, after charges */
	int64_t next, qend;      /* its event; the end of the running kt's quantum */
} cpu;

typedef struct proc {
	int wl, ut0, nut, kt0;
	int rq_head, rq_tail, nready;  /* ready uts, FIFO */
	int demand, alloc;
	int alive, arrived;            /* uts of this run not yet exited; barrier arrivals */
	int idle, free;                /* stacks of kts */
	int susp_head, susp_tail;      /* proposed: SUSPENDED kts, oldest first */
	int woken;                     /* two-level: kts woken, not yet run */
	int asked;                     /* sched-act: has asked for more CPUs */
	int spinning;                  /* sched-act, proposed: kts idle on their CPUs */
	int held;                      /* sched-act: preempted uts not yet told */
	int64_t granted;               /* when it last got a CPU */
	uint64_t run;
} proc;

typedef struct sim {
	int sys, nproc, self;
	costs c;
	double scale;
	int64_t horizon, warm, now;
	int64_t cost, work, switches;  /* after the warm-up: charged, run by uts, AS switches */
	cpu cpu[NCPU];
	proc p[MAXPROC];
	ut *u;
	kt *k;
	int krq_head, krq_tail, krq_len, kicked;
} sim;

static void kt_next(sim *s, int x);
static void release(sim *s, int x);
static void dispatch_next(sim *s, int x);
static void allocate(sim *s, int x);

static void charge(sim *s, int x, int64_t n)
{
	s->cpu[x].start += n;
	if (s->now >= s->warm)
		s->cost += n;
}

uint64_t kb_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15u;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static int64_t grain(const sim *s, const ut *u)
{
	const proc *p = &s->p[u->p];
	const struct wl *w = &WL[p->wl];
	uint64_t h = kb_mix64(SEED + (uint64_t)u->p);
	h = kb_mix64(h ^ p->run);
	h = kb_mix64(h ^ (uint64_t)(u - s->u - p->ut0));
	h = kb_mix64(h ^ (uint64_t)u->step);
	double r = (double)(h >> 11) / 9007199254740992.0; /* [0, 1) */
	double g = w->grain * s->scale * (1 - w->spread + 2 * w->spread * r);
	return g < 1 ? 1 : (int64_t)g;
}

/* ---- queues and lists ---- */

static void rq_push(sim *s, proc *p, int i)
{
	s->u[i].next = -1;
	if (p->rq_tail < 0)
		p->rq_head = i;
	else
		s->u[p->rq_tail].next = i;
	p->rq_tail = i;
	p->nready++;
}

static int rq_pop(sim *s, proc *p)
{
	int i = p->rq_head;
	if (i >= 0) {
		p->rq_head = s->u[i].next;
		if (p->rq_head < 0)
			p->rq_tail = -1;
		p->nready--;
	}
	return i;
}

static void krq_push(sim *s, int j)
{
	s->k[j].next = -1;
	if (s->krq_tail < 0)
		s->krq_head = j;
	else
		s->k[s->krq_tail].next = j;
	s->krq_tail = j;
	s->krq_len++;
}

static int krq_pop(sim *s)
{
	int j = s->krq_head;
	if (j >= 0) {
		s->krq_head = s->k[j].next;
		if (s->krq_head < 0)
			s->krq_tail = -1;
		s->krq_len--;
	}
	return j;
}

static void stack_push(sim *s, int *top, int j)
{
	s->k[j].ut = -1;
	s->k[j].next = *top;
	*top = j;
}

static int stack_pop(sim *s, int *top)
{
	int j = *top;
	if (j >= 0)
		*top = s->k[j].next;
	return j;
}

static void susp_push(sim *s, proc *p, int j)
{
	kt *k = &s->k[j];
	k->next = -1;
	k->prev = p->susp_tail;
	if (p->susp_tail < 0)
		p->susp_head = j;
	else
		s->k[p->susp_tail].next = j;
	p->susp_tail = j;
}

static void susp_unlink(sim *s, proc *p, int j)
{
	kt *k = &s->k[j];
	if (k->prev < 0)
		p->susp_head = k->next;
	else
		s->k[k->prev].next = k->next;
	if (k->next < 0)
		p->susp_tail = k->prev;
	else
		s->k[k->next].prev = k->prev;
}

/* ---- CPUs ---- */

/* x's ut, or NULL */
static ut *running(sim *s, int x)
{
	int j = s->cpu[x].kt;
	return j < 0 || s->k[j].ut < 0 ? NULL : &s->u[s->k[j].ut];
}

/* Account for the instructions x's ut has run up to now. */
static void progress(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	ut *u = running(s, x);
	if (!u || s->now <= c->start)
		return;
	int64_t ran = s->now - c->start < u->left ? s->now - c->start : u->left;
	u->left -= ran;
	if (s->now >= s->warm)
		s->work += ran;
	c->start = s->now;
}

/* x's next event: the end of its ut's grain or of its quantum */
static void plan(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	ut *u = running(s, x);
	if (c->kt < 0) {
		c->next = NEVER;
		return;
	}
	if (!u) { /* its kt idles until the kernel looks, at the quantum's end */
		c->next = c->qend > c->start ? c->qend : c->start;
		return;
	}
	int64_t end = c->start + u->left;
	int64_t q = c->qend > c->start ? c->qend : c->start;
	c->next = end < q ? end : q;
}

/* Work that idle CPUs could take: runnable kts, or CPUs wanted. */
static int unmet(const sim *s)
{
	if (s->sys == K_ONLY || s->sys == TWO_LEVEL)
		return s->krq_len;
	int n = 0;
	for (int i = 0; i < s->nproc; i++)
		if (s->p[i].demand > s->p[i].alloc)
			n += s->p[i].demand - s->p[i].alloc;
	return n;
}

/* Wake idle CPUs (not the one deciding) for the work no CPU has taken. */
static void kick(sim *s)
{
	int want = unmet(s) - s->kicked;
	for (int x = 0; x < NCPU && want > 0; x++) {
		cpu *c = &s->cpu[x];
		if (x == s->self || c->kicked || c->kt >= 0)
			continue;
		c->next = c->start > s->now ? c->start : s->now;
		c->kicked = 1;
		s->kicked++;
		want--;
	}
}

static void run_on(sim *s, int j, int i)
{
	s->u[i].state = U_RUN;
	s->u[i].kt = j;
	s->k[j].ut = i;
}

/* A CPU starts running a kt of process p. */
static void enter(sim *s, int x, int p)
{
	cpu *c = &s->cpu[x];
	charge(s, x, s->c.kswitch);
	if (c->as != p) {
		charge(s, x, s->c.kas);
		if (s->now >= s->warm)
			s->switches++;
		c->as = p;
	}
	c->qend = c->start + QUANTUM;
}

/* ---- the processor allocator (sched-act, proposed) ---- */

/* The process, other than skip, that wants more CPUs and has fewer than
 * `below`: the fewest, then the one served longest ago. */
static proc *choose(sim *s, const proc *skip, int below)
{
	proc *best = NULL;
	for (int i = 0; i < s->nproc; i++) {
		proc *q = &s->p[i];
		if (q == skip || q->demand <= q->alloc || q->alloc >= below)
			continue;
		if (!best || q->alloc < best->alloc ||
		    (q->alloc == best->alloc && q->granted < best->granted))
			best = q;
	}
	return best;
}

static void settle(proc *p)
{
	if (p->demand <= p->alloc)
		p->asked = 0;
}

/* sched-act: the upcall tells of the process's preempted uts: each is
 * made ready. */
static void deliver(sim *s, int x, proc *p)
{
	for (int i = p->ut0; p->held && i < p->ut0 + p->nut; i++)
		if (s->u[i].state == U_HELD) {
			charge(s, x, s->c.uresume);
			s->u[i].state = U_READY;
			rq_push(s, p, i);
			p->held--;
		}
}

static void grant(sim *s, int x, proc *q)
{
	cpu *c = &s->cpu[x];
	q->alloc++;
	q->granted = s->now;
	settle(q);
	enter(s, x, (int)(q - s->p));
	int j;
	if (s->sys == PROPOSED) {
		if ((j = q->susp_head) >= 0) { /* the kernel resumes it, ut and all */
			susp_unlink(s, q, j);
			charge(s, x, s->c.kresume);
			c->kt = j;
			s->u[s->k[j].ut].state = U_RUN;
			return;
		}
		if ((j = stack_pop(s, &q->idle)) >= 0) {
			charge(s, x, s->c.kresume);
		} else { /* a RECOVERED kt re-initialised, or a new one */
			j = stack_pop(s, &q->free);
			charge(s, x, s->c.kcreate);
		}
	} else { /* an upcall on a new activation */
		charge(s, x, s->c.kcreate);
		deliver(s, x, q);
		j = stack_pop(s, &q->free);
	}
	c->kt = j;
	kt_next(s, x);
}

static void allocate(sim *s, int x)
{
	proc *q = choose(s, NULL, INT_MAX);
	if (q)
		grant(s, x, q);
	else
		s->cpu[x].kt = -1;
}

/* sched-act: stop another kt of p on a CPU and upcall there. */
static void notify(sim *s, int x, proc *p)
{
	for (int y = 0; y < NCPU; y++) {
		cpu *c = &s->cpu[y];
		if (y == x || c->kt < 0 || s->k[c->kt].p != (int)(p - s->p))
			continue;
		progress(s, y);
		charge(s, y, s->c.kstop + s->c.kcreate);
		deliver(s, y, p);
		if (running(s, y))
			charge(s, y, s->c.uswitch); /* the user scheduler resumes A's ut */
		plan(s, y);
		return;
	}
}

/* proposed: take the ut of SUSPENDED kt j at user level. */
static void recover(sim *s, int x, int j)
{
	kt *k = &s->k[j];
	proc *p = &s->p[k->p];
	int i = k->ut;
	charge(s, x, CAS_COST + s->c.uresume);
	susp_unlink(s, p, j);
	stack_push(s, &p->free, j); /* RECOVERED */
	s->u[i].kt = -1;
	s->u[i].state = U_READY;
	rq_push(s, p, i);
}

/* ---- user threads made ready ---- */

static void more_work(sim *s, int x, proc *p)
{
	if (s->sys == TWO_LEVEL && p->idle >= 0 && p->nready > p->woken) {
		int j = stack_pop(s, &p->idle);
		charge(s, x, s->c.kresume);
		krq_push(s, j);
		p->woken++;
	} else if (s->sys == SCHED_ACT && p->demand > p->alloc && !p->asked) {
		charge(s, x, s->c.kresume); /* the system call asking for a CPU */
		p->asked = 1;
	}
	kick(s);
}

/* ut i, new or woken, becomes runnable */
static void make_ready(sim *s, int x, int i)
{
	ut *u = &s->u[i];
	proc *p = &s->p[u->p];
	p->demand++;
	u->state = U_READY;
	if (s->sys == K_ONLY) {
		krq_push(s, u->kt);
		kick(s);
		return;
	}
	rq_push(s, p, i);
	more_work(s, x, p);
}

static void wake(sim *s, int x, int i)
{
	charge(s, x, s->sys == K_ONLY ? s->c.kresume : s->c.uresume);
	make_ready(s, x, i);
}

/* ---- the workloads ---- */

/* wave: the cells whose sweep u waits for, and how many sweeps each must
 * have done */
static int wave_deps(const sim *s, const ut *u, int dep[3], int need[3])
{
	const proc *p = &s->p[u->p];
	int idx = (int)(u - s->u) - p->ut0, n = 0;
	if (idx >= MESH) {
		dep[n] = p->ut0 + idx - MESH;
		need[n++] = u->step + 1;
	}
	if (idx % MESH) {
		dep[n] = p->ut0 + idx - 1;
		need[n++] = u->step + 1;
	}
	if (idx == 0 && u->step > 0) {
		dep[n] = p->ut0 + MESH * MESH - 1;
		need[n++] = u->step;
	}
	return n;
}

static int wave_ready(const sim *s, const ut *u)
{
	int dep[3], need[3], n = wave_deps(s, u, dep, need);
	for (int d = 0; d < n; d++)
		if (s->u[dep[d]].step < need[d])
			return 0;
	return 1;
}

static void wave_done(sim *s, int x, ut *u)
{
	const proc *p = &s->p[u->p];
	int idx = (int)(u - s->u) - p->ut0, dep[3], n = 0;
	u->step++;
	if (idx + MESH < MESH * MESH)
		dep[n++] = idx + MESH;
	if ((idx + 1) % MESH)
		dep[n++] = idx + 1;
	if (idx == MESH * MESH - 1)
		dep[n++] = 0;
	for (int d = 0; d < n; d++) {
		ut *v = &s->u[p->ut0 + dep[d]];
		if (v->state == U_WAIT && wave_ready(s, v))
			wake(s, x, p->ut0 + dep[d]);
	}
}

/* u arrives at its phase's barrier: WAIT, or RUN for the last, which wakes
 * the others */
static int barrier(sim *s, int x, ut *u)
{
	proc *p = &s->p[u->p];
	if (++p->arrived < p->nut)
		return WAIT;
	p->arrived = 0;
	for (int i = p->ut0; i < p->ut0 + p->nut; i++)
		if (s->u[i].state == U_WAIT) {
			s->u[i].step++;
			wake(s, x, i);
		}
	u->step++;
	return RUN;
}

/* u, running on x, is at a sync point: what it does next */
static int wl_next(sim *s, int x, ut *u)
{
	const struct wl *w = &WL[s->p[u->p].wl];
	if (u->computing) {
		u->computing = 0;
		if (w == &WL[WAVE])
			wave_done(s, x, u);
		else if (barrier(s, x, u) == WAIT)
			return WAIT;
	}
	if (u->step == w->steps)
		return EXIT;
	if (w == &WL[WAVE] && !wave_ready(s, u))
		return WAIT;
	u->left = grain(s, u);
	u->computing = 1;
	return RUN;
}

/* A run of p's program: its uts created, by x's CPU. */
static void new_run(sim *s, int x, proc *p)
{
	p->run++;
	p->alive = p->nut;
	p->arrived = 0;
	for (int i = p->ut0; i < p->ut0 + p->nut; i++) {
		ut *u = &s->u[i];
		u->step = 0;
		u->computing = p->wl != WAVE;
		u->left = u->computing ? grain(s, u) : 0;
		charge(s, x, s->sys == K_ONLY ? s->c.kcreate : s->c.ucreate);
		if (s->sys == K_ONLY) {
			u->kt = p->kt0 + (i - p->ut0);
			s->k[u->kt].ut = i;
		}
		make_ready(s, x, i);
	}
}

/* proposed: u blocks; recover the uts it waits for that sit on SUSPENDED
 * kts */
static void recover_waited(sim *s, int x, ut *u)
{
	proc *p = &s->p[u->p];
	if (p->wl != WAVE) { /* a barrier waits for every other ut */
		while (p->susp_head >= 0)
			recover(s, x, p->susp_head);
		return;
	}
	int dep[3], need[3], n = wave_deps(s, u, dep, need);
	for (int d = 0; d < n; d++)
		if (s->u[dep[d]].state == U_HELD && s->u[dep[d]].step < need[d])
			recover(s, x, s->u[dep[d]].kt);
}

/* ---- what a CPU does ---- */

/* The kt on x has no ut: it takes the next ready one, or goes idle. */
static void kt_next(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	int j = c->kt;
	proc *p = &s->p[s->k[j].p];
	int i = rq_pop(s, p);
	if (i < 0 && s->sys == PROPOSED && p->susp_head >= 0) {
		recover(s, x, p->susp_head);
		i = rq_pop(s, p);
	}
	if (i >= 0) {
		charge(s, x, s->c.uswitch);
		run_on(s, j, i);
		return;
	}
	if (s->sys == TWO_LEVEL) {
		charge(s, x, s->c.kstop);
		c->kt = -1;
		stack_push(s, &p->idle, j);
		dispatch_next(s, x);
		return;
	}
	if (s->sys == SCHED_ACT)
		charge(s, x, s->c.kresume); /* the system call "this processor is idle" */
	p->spinning++;
}

/* sched-act, proposed: at the end of its quantum, the kernel takes the CPU
 * of an idle kt for another process (kernel stop). */
static void release(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	int j = c->kt;
	proc *p = &s->p[s->k[j].p];
	charge(s, x, s->c.kstop);
	c->kt = -1;
	p->spinning--;
	stack_push(s, s->sys == SCHED_ACT ? &p->free : &p->idle, j);
	p->alloc--;
	settle(p);
	allocate(s, x);
}

/* sched-act, proposed: p's kts idle on their CPUs take its ready uts. */
static void feed(sim *s, proc *p)
{
	for (int y = 0; y < NCPU && p->spinning && p->nready; y++) {
		cpu *c = &s->cpu[y];
		if (y == s->self || c->kt < 0 || running(s, y) || s->k[c->kt].p != (int)(p - s->p))
			continue;
		int i = rq_pop(s, p);
		if (c->start < s->now)
			c->start = s->now;
		charge(s, y, s->c.uswitch);
		run_on(s, c->kt, i);
		p->spinning--;
		plan(s, y);
	}
}

/* k-only, two-level: x runs the kernel's next runnable kt, or idles. */
static void dispatch_next(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	int j = krq_pop(s);
	c->kt = j;
	if (j < 0)
		return;
	kt *k = &s->k[j];
	enter(s, x, k->p);
	if (k->ut >= 0) {
		s->u[k->ut].state = U_RUN;
		return;
	}
	s->p[k->p].woken--; /* two-level: woken to look for work */
	kt_next(s, x);
}

static void find_work(sim *s, int x)
{
	if (s->sys == K_ONLY || s->sys == TWO_LEVEL)
		dispatch_next(s, x);
	else
		allocate(s, x);
}

static void block(sim *s, int x, ut *u)
{
	proc *p = &s->p[u->p];
	u->state = U_WAIT;
	p->demand--;
	settle(p);
	if (s->sys == K_ONLY) {
		charge(s, x, s->c.kstop);
		dispatch_next(s, x);
		return;
	}
	charge(s, x, s->c.ustop);
	if (s->sys == PROPOSED)
		recover_waited(s, x, u);
	s->k[u->kt].ut = -1;
	u->kt = -1;
	kt_next(s, x);
}

static void finish(sim *s, int x, ut *u)
{
	proc *p = &s->p[u->p];
	u->state = U_FREE;
	p->demand--;
	settle(p);
	p->alive--;
	if (s->sys == K_ONLY) {
		charge(s, x, s->c.kexit);
		s->cpu[x].kt = -1;
		if (!p->alive)
			new_run(s, x, p);
		dispatch_next(s, x);
		return;
	}
	charge(s, x, s->c.uexit);
	s->k[u->kt].ut = -1;
	u->kt = -1;
	if (!p->alive)
		new_run(s, x, p);
	kt_next(s, x);
}

/* The quantum of kt j on x has ended, with its ut mid-grain or none. */
static void quantum(sim *s, int x, int j)
{
	cpu *c = &s->cpu[x];
	ut *u = running(s, x);
	proc *p = &s->p[s->k[j].p];
	if (!u) { /* sched-act, proposed: an idle kt */
		if (choose(s, p, INT_MAX))
			release(s, x);
		else
			c->qend = s->now + QUANTUM;
		return;
	}
	if (s->sys == K_ONLY || s->sys == TWO_LEVEL) {
		if (!s->krq_len) {
			c->qend = s->now + QUANTUM;
			return;
		}
		charge(s, x, s->c.kstop + s->c.kresume);
		u->state = s->sys == K_ONLY ? U_READY : U_HELD;
		krq_push(s, j);
		dispatch_next(s, x);
		return;
	}
	proc *q = choose(s, p, p->alloc);
	if (!q) {
		c->qend = s->now + QUANTUM;
		return;
	}
	charge(s, x, s->c.kstop);
	p->alloc--;
	u->state = U_HELD;
	c->kt = -1;
	if (s->sys == PROPOSED) {
		susp_push(s, p, j);
	} else {
		u->kt = -1;
		stack_push(s, &p->free, j);
		p->held++;
		p->asked = 1;
		notify(s, x, p);
	}
	grant(s, x, q);
}


static void cpu_event(sim *s, int x)
{
	cpu *c = &s->cpu[x];
	s->now = c->next;
	s->self = x;
	c->next = NEVER;
	if (c->kicked) {
		c->kicked = 0;
		s->kicked--;
		if (c->start < s->now)
			c->start = s->now;
	}
	int j = c->kt;
	if (j < 0) {
		find_work(s, x);
	} else {
		progress(s, x);
		ut *u = running(s, x);
		int next = !u || u->left > 0 ? -1 : wl_next(s, x, u);
		if (next < 0)
			quantum(s, x, j);
		else if (next == WAIT)
			block(s, x, u);
		else if (next == EXIT)
			finish(s, x, u);
	}
	s->self = -1;
	plan(s, x);
	for (int i = 0; i < s->nproc; i++)
		feed(s, &s->p[i]);
	kick(s);
}

/* ---- one point ---- */

typedef struct point {
	int sys, nproc, wl;
	const costs *c;
	double scale;            /* grains × scale (Figure 7) */
	int64_t horizon;
} point;

/* per CPU-second, after the warm-up */
typedef struct outcome {
	double cost;             /* instructions charged: the thread-management cost */
	double busy;             /* CPUs running uts' grains (a mean, not per second) */
	double switches;         /* address-space switches */
} outcome;

/* A process's kts: one per ut (k-only), one per CPU (two-level), or a
 * pool for every ut preempted or recovered and every CPU. */
static int kts_of(int sys, int nut)
{
	return sys == K_ONLY ? nut : sys == TWO_LEVEL ? NCPU : nut + NCPU;
}

/* One point of a figure into *o; ENOMEM or 0. */
static int simulate(const point *pt, outcome *o)
{
	sim s = {.sys = pt->sys, .nproc = pt->nproc, .c = *pt->c, .scale = pt->scale,
		 .horizon = pt->horizon, .warm = pt->horizon / 10, .self = -1,
		 .krq_head = -1, .krq_tail = -1};
	int nut = WL[pt->wl].threads, nkt = kts_of(pt->sys, nut);
	s.u = calloc((size_t)(pt->nproc * nut), sizeof *s.u);
	s.k = calloc((size_t)(pt->nproc * nkt), sizeof *s.k);
	if (!s.u || !s.k) {
		free(s.u);
		free(s.k);
		return ENOMEM;
	}
	for (int x = 0; x < NCPU; x++)
		s.cpu[x] = (cpu){.kt = -1, .as = -1, .next = NEVER};
	for (int i = 0, u0 = 0, k0 = 0; i < pt->nproc; i++) {
		proc *p = &s.p[i];
		*p = (proc){.wl = pt->wl, .ut0 = u0, .nut = nut, .kt0 = k0, .rq_head = -1,
			    .rq_tail = -1, .idle = -1, .free = -1, .susp_head = -1,
			    .susp_tail = -1};
		for (int j = k0; j < k0 + nkt; j++) {
			s.k[j] = (kt){.p = i, .ut = -1, .next = -1, .prev = -1};
			if (pt->sys == TWO_LEVEL)
				stack_push(&s, &p->idle, j);
			else if (pt->sys != K_ONLY)
				stack_push(&s, &p->free, j);
		}
		for (int j = u0; j < u0 + nut; j++)
			s.u[j] = (ut){.p = i, .kt = -1, .next = -1};
		u0 += nut;
		k0 += nkt;
		new_run(&s, 0, p); /* the first runs' set-up: on CPU 0, before the warm-up ends */
	}
	kick(&s);
	for (;;) {
		int x = 0;
		for (int y = 1; y < NCPU; y++)
			if (s.cpu[y].next < s.cpu[x].next)
				x = y;
		if (s.cpu[x].next >= s.horizon)
			break;
		cpu_event(&s, x);
	}
	free(s.u);
	free(s.k);
	double span = (double)(s.horizon - s.warm), per = MIPS / (NCPU * span);
	*o = (outcome){s.cost * per, s.work / span, s.switches * per};
	return 0;
}

/* ---- the experiment ---- */

static const char EXP[] = "seed004.sim";

typedef struct figure {
	const char *metric;      /* with the paper's costs; ".karui" appended for karui's */
	int wl, fig6, quick;     /* fig6: x = processes, else x = grain scale; in --quick */
} figure;

static const figure FIGS[] = {
	{"wave", WAVE, 1, 1}, {"mult", MULT, 1, 1}, {"force", FORCE, 1, 0},
	{"wave-grain", WAVE, 0, 1},
};
#define NFIGS (sizeof FIGS / sizeof FIGS[0])
#define MAXX 16

/* A point's simulated time; a run of mult, or of wave with grains scaled
 * up, is long: more time, for as many runs. */
static int64_t horizon_of(const kb_ctx *c, int wl, double scale)
{
	int64_t h = c->quick ? 20000000 : 100000000;
	if (wl == MULT)
		h *= 4;
	return scale > 4 ? (int64_t)(h * scale / 4) : h;
}

/* --n: the most processes */
static int most(const kb_ctx *c)
{
	return c->n > 0 && c->n < MAXPROC ? (int)c->n : MAXPROC;
}

/* The x values of a figure; returns how many. */
static int xs_of(const kb_ctx *c, const figure *f, double *x)
{
	static const int QUICK[] = {1, 2, 4, 6, 8, 12, 16};
	int n = 0;
	if (!f->fig6) {
		for (int e = -4; e <= 4; e += c->quick ? 2 : 1)
			x[n++] = ldexp(1, e);
	} else if (c->quick) {
		for (size_t i = 0; i < sizeof QUICK / sizeof QUICK[0]; i++)
			if (QUICK[i] <= most(c))
				x[n++] = QUICK[i];
	} else {
		for (int i = 1; i <= most(c); i++)
			x[n++] = i;
	}
	return n;
}

static int wanted(const kb_ctx *c, int sys)
{
	return !c->only || sys == PROPOSED || !strcmp(c->only, SYS_NAME[sys]);
}

/* Table 2's mean parallelism of each workload model: alone on 8 CPUs, at
 * no cost. */
static void parallelism(const kb_ctx *c)
{
	static const costs FREE;
	for (int w = 0; w < NWL; w++) {
		point pt = {PROPOSED, 1, w, &FREE, 1, horizon_of(c, w, 1)};
		outcome o;
		if (simulate(&pt, &o)) {
			kb_row_none(EXP, WL[w].name, "failed", "out of memory");
			continue;
		}
		char note[32];
		snprintf(note, sizeof note, "paper %.2f", WL[w].paper_parallelism);
		kb_row_note(c, EXP, WL[w].name, "parallelism", "CPUs", &o.busy, 1, 0, -1, note);
	}
}

/* The costs with karui's user-thread counts (seed004.table1), the kernel's
 * kept from the paper; 0 if there are none. */
static int karui_costs(const kb_ctx *c, costs *k)
{
	double t1[5];
	if (kb_t1_karui(c, t1)) {
		kb_row_none(EXP, "karui-costs", "skipped",
			    "no counts of karui's operations (seed004.table1 needs valgrind): "
			    "the paper's costs only");
		return 0;
	}
	*k = PAPER_COSTS;
	k->ucreate = llround(t1[0]);
	k->ustop = llround(t1[1]);
	k->uresume = llround(t1[2]);
	k->uswitch = llround(t1[3]);
	k->uexit = llround(t1[4]);
	return 1;
}

typedef struct results {
	int nx[NFIGS];
	double x[NFIGS][MAXX];
	double cost[NFIGS][NSYS][MAXX];  /* -1: not run */
} results;

/* One figure's rows under one set of costs into r (paper: the same
 * figure's under the paper's costs, or NULL); ENOMEM or 0.  Figure 6's
 * rows under the paper's costs come with their address-space switches. */
static int run_figure(const kb_ctx *c, size_t f, const costs *cs, const char *suffix,
		      const results *paper, results *r)
{
	const figure *fg = &FIGS[f];
	char metric[32], as[48];
	snprintf(metric, sizeof metric, "%s%s", fg->metric, suffix);
	snprintf(as, sizeof as, "%s.as-switches", fg->metric);
	r->nx[f] = xs_of(c, fg, r->x[f]);
	int load = FIG7_LOAD < most(c) ? FIG7_LOAD : most(c);
	for (int sys = 0; sys < NSYS; sys++) {
		for (int i = 0; i < r->nx[f]; i++)
			r->cost[f][sys][i] = -1;
		if (!wanted(c, sys))
			continue;
		fprintf(stderr, "karui-bench: %s / %s %s ...\n", EXP, SYS_NAME[sys], metric);
		for (int i = 0; i < r->nx[f]; i++) {
			double x = r->x[f][i];
			point pt = {sys, fg->fig6 ? (int)x : load, fg->wl, cs, fg->fig6 ? 1 : x, 0};
			pt.horizon = horizon_of(c, fg->wl, pt.scale);
			outcome o;
			if (paper && sys == K_ONLY) /* no user thread: the same figure */
				o.cost = paper->cost[f][sys][i];
			else if (simulate(&pt, &o))
				return ENOMEM;
			r->cost[f][sys][i] = o.cost;
			kb_row(c, EXP, SYS_NAME[sys], metric, "instr/cpu-s", &o.cost, 1, 0, x);
			if (fg->fig6 && !paper)
				kb_row(c, EXP, SYS_NAME[sys], as, "switches/cpu-s", &o.switches, 1, 0, x);
		}
	}
	return 0;
}

/* The proposed scheme's best improvement over each other system in a
 * figure of Figure 6's kind: 100 (1 - proposed / other), its largest. */
static void gains(const kb_ctx *c, size_t f, const char *suffix, const results *r)
{
	const figure *fg = &FIGS[f];
	char metric[32];
	snprintf(metric, sizeof metric, "gain.%s%s", fg->metric, suffix);
	for (int sys = 0; sys < PROPOSED; sys++) {
		if (!wanted(c, sys))
			continue;
		double top = -INFINITY, at = 0;
		for (int i = 0; i < r->nx[f]; i++) {
			double o = r->cost[f][sys][i], g = 100 * (1 - r->cost[f][PROPOSED][i] / o);
			if (o > 0 && g > top) {
				top = g;
				at = r->x[f][i];
			}
		}
		char note[48];
		int n = snprintf(note, sizeof note, "at %g process%s", at, at == 1 ? "" : "es");
		if (fg->wl == WAVE)
			snprintf(note + n, sizeof note - n, "; paper %.1f", PAPER_GAIN[sys]);
		kb_row_note(c, EXP, SYS_NAME[sys], metric, "%", &top, 1, 0, -1, note);
	}
}

/* The figures again as one table each, for a reader of the text output. */
static void summary(const char *suffix, const results *r)
{
	for (size_t f = 0; f < NFIGS; f++) {
		if (!r->nx[f])
			continue;
		printf("\n%s%s: thread-management instructions per CPU-second, x = %s\n",
		       FIGS[f].metric, suffix, FIGS[f].fig6 ? "processes" : "grain scale");
		printf("%8s", "x");
		for (int sys = 0; sys < NSYS; sys++)
			printf(" %11s", SYS_NAME[sys]);
		printf("\n");
		for (int i = 0; i < r->nx[f]; i++) {
			printf("%8g", r->x[f][i]);
			for (int sys = 0; sys < NSYS; sys++) {
				if (r->cost[f][sys][i] < 0)
					printf(" %11s", "-");
				else
					printf(" %11.4g", r->cost[f][sys][i]);
			}
			printf("\n");
		}
	}
	printf("\n");
}

void kb_seed004_sim(const kb_ctx *c)
{
	costs set[2] = {PAPER_COSTS};
	int nset = 1 + karui_costs(c, &set[1]);
	parallelism(c);
	static results r[2];
	for (int cs = 0; cs < nset; cs++) {
		const char *suffix = cs ? ".karui" : "";
		memset(&r[cs], 0, sizeof r[cs]);
		for (size_t f = 0; f < NFIGS; f++) {
			if (c->quick && !FIGS[f].quick)
				continue;
			if (run_figure(c, f, &set[cs], suffix, cs ? &r[0] : NULL, &r[cs])) {
				kb_row_none(EXP, "all", "failed", "out of memory");
				return;
			}
			if (FIGS[f].fig6)
				gains(c, f, suffix, &r[cs]);
		}
		if (!c->json)
			summary(suffix, &r[cs]);
	}
}
