/*
 * karui, beside L2 — the scheduling trace: with KARUI_TRACE=FILE (or
 * kr_config.trace) every VP records what happens to microprocesses, and
 * kr_fini writes it as a Chrome JSON trace (docs/trace.md) that Perfetto
 * and chrome://tracing open.
 *
 * Events.  Four kinds, each with a time (kr_now), a microprocess id and
 * two words:
 *   CREATE  mp made, by the running microprocess
 *   WAKE    mp made ready (an unpark, a served wait, a timer, an I/O
 *           completion), by whom: the running microprocess's id, or a
 *           timer, a poll, an idle loop, a thread that is no VP
 *   RUN     the VP runs mp, after `other` (the microprocess it left, if
 *           any); the VP it ran on before, so that a move shows
 *   STOP    mp stops running, and why (trace.h: a park's reason, still
 *           runnable, ended)
 * The writer makes the rest at kr_fini: slices of runs on each VP's track,
 * each microprocess's states on its own track, the park, unpark, migrate
 * and exit instants, flows from waker to wakee.  A direct switch to a
 * parked microprocess (kr_mp_switch_to, kr_mp_park_and_switch, an exit to
 * its joiner) makes it ready with no WAKE: its RUN names its waker.
 *
 * Buffers.  One per VP id, of KARUI_TRACE_SIZE bytes (1 MiB by default),
 * allocated when the VP starts, written by that VP alone: a plain store of
 * the event, then a release store of the count; no lock, no RMW.  A full
 * buffer counts what it drops, and the count goes into the trace's
 * otherData.  Threads that are no VP (a foreign kr_mp_unpark) write to
 * one more buffer under a mutex: they are never a fast path.
 *
 * Where the events come from, without a cost to the untraced fast paths.
 * A trace wraps the seam (seam.h) with a table of its own, which records
 * CREATE and WAKE and calls the scheduler's; and it hides w->dq, and so
 * w->fast, from the fast forms: every fast path then takes its general
 * path, where the core's switches call trace_switch (rt.h: sw; the ends
 * of life.c, the idle loop).  Those are the only hooks, each one load of
 * kr__tracing and a branch, all off the fast paths.  A park's reason is a
 * constant of the call that parks (park.c's copies for L3, kr__park_for),
 * passed only to the general path.  So with no trace the fast paths run
 * the instructions they ran before; with one, every switch costs a
 * general path, two clock reads and two stores (docs/trace.md: the
 * cost per switch).
 *
 * The clock is kr_now(), CLOCK_MONOTONIC through the vDSO: the same on
 * every CPU, comparable across VPs and with karui's own deadlines, in ns.
 * Rejected: rdtsc, a few ns cheaper, but it needs an invariant TSC and a
 * calibration to turn into time, which a VM may not offer, and another
 * counter on aarch64.
 *
 * When the trace is written.  At kr_fini, after every VP has stopped; if
 * the process ends without kr_fini, at exit (atexit), of what each VP
 * had published by then: a reader takes a buffer's count with an acquire
 * load and reads only the events below it, so VPs may go on recording
 * meanwhile.  A file that cannot be opened is reported on stderr at
 * kr_init, and karui runs untraced.
 *
 * Not traced: the C-area's preemption of a microprocess (carea/, from a
 * signal handler), which shows as a run that ends with the next one.
 * Rejected: one trace check on every switch of the fast paths (a load
 * and a branch each, and a call that made them save registers).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

enum { EV_CREATE, EV_WAKE, EV_RUN, EV_STOP };
/* WAKE's maker, besides a microprocess (KR_BY_MP, internal.h) */
enum { BY_IDLE = KR_BY_IO + 1, BY_FOREIGN };
#define NOBODY UINT64_MAX

struct ev {
	uint64_t t;     /* kr_now() */
	uint64_t mp;    /* its id */
	uint64_t other; /* CREATE, WAKE: the maker's id; RUN: the one left */
	uint32_t kind;  /* EV_* */
	uint32_t arg;   /* WAKE: KR_BY_*, BY_*; RUN: the VP before, plus 1
	                   (0: none); STOP: KR_WHY_* */
};

struct kr_trace_buf {
	uint64_t n;       /* events published: release store, acquire load */
	uint64_t dropped; /* events the full buffer dropped: atomic stores */
	uint64_t cap;
	struct ev ev[];
};

uint32_t kr__tracing;

#define FOREIGN KR_VP_MAX /* the buffer of threads that are no VP */

static struct {
	FILE *f;
	char *path;
	size_t size;            /* bytes per buffer */
	uint64_t t0;            /* kr_init's time: 0 in the trace */
	const struct kr__seam *in; /* the scheduler's seam, wrapped */
	struct kr__seam seam;
	struct kr_trace_buf *buf[KR_VP_MAX + 1];
	pthread_mutex_t lock;   /* the foreign buffer, and buf[] */
	uint64_t unbuffered;    /* events of VPs without a buffer: atomic */
	pid_t pid;              /* the process tracing: not a child of its fork */
	int atexit_set;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const why_name[KR_WHY_N] = {
	[KR_WHY_RUNNABLE] = "runnable", [KR_WHY_PARK] = "park",   [KR_WHY_SLEEP] = "sleep",
	[KR_WHY_JOIN] = "join",         [KR_WHY_SWITCH] = "switch", [KR_WHY_CHAN] = "channel",
	[KR_WHY_MUTEX] = "mutex",       [KR_WHY_COND] = "condition", [KR_WHY_SEM] = "semaphore",
	[KR_WHY_BARRIER] = "barrier",   [KR_WHY_STREAM] = "stream", [KR_WHY_ENTRY] = "entry",
	[KR_WHY_IO] = "io",             [KR_WHY_EXIT] = "exit",
};
static const char *const by_name[] = {
	[KR_BY_MP] = "microprocess", [KR_BY_TIMER] = "timer", [KR_BY_IO] = "io",
	[BY_IDLE] = "idle",          [BY_FOREIGN] = "thread",
};

/* ---------------- recording ---------------- */

static void put(struct kr_trace_buf *b, uint32_t kind, uint64_t mp, uint64_t other, uint32_t arg)
{
	uint64_t n = b->n;
	if (__builtin_expect(n == b->cap, 0)) {
		__atomic_store_n(&b->dropped, b->dropped + 1, __ATOMIC_RELAXED);
		return;
	}
	b->ev[n] = (struct ev){kr_now(), mp, other, kind, arg};
	__atomic_store_n(&b->n, n + 1, __ATOMIC_RELEASE);
}

/* An event of VP w (NULL: a thread that is no VP). */
static void record(struct kr_worker *w, uint32_t kind, uint64_t mp, uint64_t other, uint32_t arg)
{
	if (w && w->trace) {
		put(w->trace, kind, mp, other, arg);
	} else if (!w && T.buf[FOREIGN]) {
		pthread_mutex_lock(&T.lock);
		put(T.buf[FOREIGN], kind, mp, other, arg);
		pthread_mutex_unlock(&T.lock);
	} else {
		__atomic_fetch_add(&T.unbuffered, 1, __ATOMIC_RELAXED);
	}
}

void kr__trace_switch(struct kr_worker *w, kr_mp *self, kr_mp *next, int why)
{
	if (self)
		record(w, EV_STOP, self->id, 0, (uint32_t)why);
	if (next) {
		uint32_t before = __atomic_load_n(&next->trace_vp, __ATOMIC_RELAXED);
		record(w, EV_RUN, next->id, self ? self->id : NOBODY, before);
		__atomic_store_n(&next->trace_vp, w->vp->id + 1, __ATOMIC_RELAXED);
	}
}

/* The seam's wrapper: the scheduler's, with CREATE and WAKE recorded and
 * the fast forms turned off (see the top). */
static int t_vp_init(kr_sched *s, struct kr_worker *w)
{
	int err = T.in->vp_init(s, w);
	if (err)
		return err;
	w->dq = NULL;
	unsigned id = w->vp->id;
	pthread_mutex_lock(&T.lock);
	if (!T.buf[id] && (T.buf[id] = malloc(sizeof *T.buf[id] + T.size)))
		*T.buf[id] = (struct kr_trace_buf){.cap = T.size / sizeof(struct ev)};
	w->trace = T.buf[id];
	pthread_mutex_unlock(&T.lock);
	return 0;
}

static void t_ready(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	uint32_t by = !w ? BY_FOREIGN : w->waking ? (uint32_t)w->waking : w->cur ? KR_BY_MP : BY_IDLE;
	record(w, EV_WAKE, mp->id, by == KR_BY_MP ? w->cur->id : NOBODY, by);
	T.in->ready(s, w, mp);
}

static void t_spawn(kr_sched *s, struct kr_worker *w, kr_mp *mp)
{
	__atomic_store_n(&mp->trace_vp, w->vp->id + 1, __ATOMIC_RELAXED);
	record(w, EV_CREATE, mp->id, w->cur->id, 0);
	T.in->spawn(s, w, mp);
}

/* ---------------- start ---------------- */

/* KARUI_TRACE_SIZE: bytes, with an optional K, M or G; 0 if not valid. */
static size_t size_of(const char *s)
{
	char *e;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (errno || e == s)
		return 0;
	int shift = *e == 'K' || *e == 'k' ? 10 : *e == 'M' || *e == 'm' ? 20 : *e == 'G' || *e == 'g' ? 30 : 0;
	if (shift)
		e++;
	if (*e || v > (SIZE_MAX >> shift))
		return 0;
	return (size_t)v << shift;
}

static void write_out(void);

static void at_exit(void)
{
	if (T.f && getpid() == T.pid)
		write_out();
}

void kr__trace_start(const kr_config *cfg)
{
	const char *path = cfg->trace ? cfg->trace : getenv("KARUI_TRACE");
	if (!path || !*path)
		return;
	size_t size = cfg->trace_size;
	const char *env = getenv("KARUI_TRACE_SIZE");
	if (!size && env && !(size = size_of(env)))
		fprintf(stderr, "karui: KARUI_TRACE_SIZE=%s is no size in bytes (such as 4M); "
				"the trace takes 1 MiB per VP\n", env);
	if (!size)
		size = (size_t)1 << 20;
	if (size < 64 * sizeof(struct ev))
		size = 64 * sizeof(struct ev);
	T.f = fopen(path, "w");
	if (!T.f) {
		fprintf(stderr, "karui: cannot write the trace to %s: %s; karui runs untraced\n",
			path, strerror(errno));
		return;
	}
	T.path = strdup(path);
	T.size = size;
	T.t0 = kr_now();
	T.unbuffered = 0;
	T.pid = getpid();
	if ((T.buf[FOREIGN] = malloc(sizeof *T.buf[FOREIGN] + size)))
		*T.buf[FOREIGN] = (struct kr_trace_buf){.cap = size / sizeof(struct ev)};
	T.in = G.seam;
	T.seam = *G.seam;
	T.seam.vp_init = t_vp_init;
	T.seam.ready = t_ready;
	T.seam.spawn = t_spawn;
	G.seam = &T.seam;
	if (!T.atexit_set)
		T.atexit_set = atexit(at_exit) == 0;
	__atomic_store_n(&kr__tracing, 1, __ATOMIC_RELAXED);
}

void kr__trace_stop(void)
{
	if (!T.f)
		return;
	__atomic_store_n(&kr__tracing, 0, __ATOMIC_RELAXED);
	write_out();
	for (unsigned i = 0; i <= KR_VP_MAX; i++) {
		free(T.buf[i]);
		T.buf[i] = NULL;
	}
	free(T.path);
	T.path = NULL;
}

/* ---------------- writing ---------------- */

/* An event as the writer sorts it: which buffer, and its place there. */
struct rec {
	struct ev e;
	uint32_t vp;
	uint64_t seq;
};

static int by_mp_then_time(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	if (x->e.mp != y->e.mp)
		return x->e.mp < y->e.mp ? -1 : 1;
	if (x->e.t != y->e.t)
		return x->e.t < y->e.t ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct out {
	FILE *f;
	uint64_t t0;
	uint64_t flows;
};

/* a time of d ns, in µs with the ns kept */
static void us(struct out *o, const char *key, uint64_t d)
{
	fprintf(o->f, ",\"%s\":%" PRIu64 ".%03" PRIu64, key, d / 1000, d % 1000);
}

static void ts(struct out *o, const char *key, uint64_t t)
{
	us(o, key, t > o->t0 ? t - o->t0 : 0);
}

static void slice(struct out *o, int pid, uint64_t tid, const char *name, uint64_t from,
		  uint64_t to, const char *args)
{
	fprintf(o->f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%" PRIu64 ",\"name\":\"%s\"", pid, tid,
		name);
	ts(o, "ts", from);
	us(o, "dur", to > from ? to - from : 0);
	fprintf(o->f, ",\"args\":{%s}}", args);
}

static void instant(struct out *o, uint64_t tid, const char *name, uint64_t t, const char *args)
{
	fprintf(o->f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":%" PRIu64 ",\"name\":\"%s\"",
		tid, name);
	ts(o, "ts", t);
	fprintf(o->f, ",\"args\":{%s}}", args);
}

/* A flow from the waker's track to the wakee's. */
static void flow(struct out *o, uint64_t from, uint64_t to, uint64_t t)
{
	for (int end = 0; end < 2; end++) {
		fprintf(o->f, ",\n{\"ph\":\"%s\",\"id\":%" PRIu64 ",\"pid\":2,\"tid\":%" PRIu64
			      ",\"name\":\"wake\",\"cat\":\"wake\"%s",
			end ? "f" : "s", o->flows, end ? to : from, end ? ",\"bp\":\"e\"" : "");
		ts(o, "ts", t);
		fputs("}", o->f);
	}
	o->flows++;
}

/* The runs of VP `vp` on its track: RUN to STOP, in the buffer's order. */
static void vp_track(struct out *o, unsigned vp, const struct ev *e, uint64_t n, uint64_t end)
{
	fprintf(o->f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\","
		      "\"args\":{\"name\":\"VP %u\"}}", vp, vp);
	const struct ev *run = NULL;
	char name[48], args[96];
	for (uint64_t i = 0; i <= n; i++) {
		int stop = i == n || e[i].kind == EV_RUN || e[i].kind == EV_STOP;
		if (run && stop) {
			uint64_t to = i == n ? end : e[i].t;
			const char *why = i < n && e[i].kind == EV_STOP && e[i].mp == run->mp
						  ? why_name[e[i].arg % KR_WHY_N] : "";
			snprintf(name, sizeof name, "mp %" PRIu64, run->mp);
			snprintf(args, sizeof args, "\"mp\":%" PRIu64 ",\"stop\":\"%s\"", run->mp, why);
			slice(o, 1, vp, name, run->t, to, args);
			run = NULL;
		}
		if (i < n && e[i].kind == EV_RUN)
			run = &e[i];
	}
}

/* A microprocess's states on its track. */
enum { S_NONE, S_RUNNABLE, S_RUNNING, S_PARKED };

struct mpstate {
	int s;
	uint64_t since;
	uint32_t why, vp;
	int woken; /* a WAKE came while it still ran: its park ends at once */
};

static void leave(struct out *o, uint64_t mp, struct mpstate *m, uint64_t t)
{
	char args[64] = "";
	if (m->s == S_RUNNING) {
		snprintf(args, sizeof args, "\"vp\":%u", m->vp);
		slice(o, 2, mp, "running", m->since, t, args);
	} else if (m->s == S_RUNNABLE) {
		slice(o, 2, mp, "runnable", m->since, t, args);
	} else if (m->s == S_PARKED) {
		char name[48];
		snprintf(name, sizeof name, "parked: %s", why_name[m->why % KR_WHY_N]);
		slice(o, 2, mp, name, m->since, t, args);
	}
	m->s = S_NONE;
}

static void waker_args(char *args, size_t n, uint64_t by, uint32_t kind)
{
	if (by != NOBODY)
		snprintf(args, n, "\"by\":%" PRIu64 ",\"by_kind\":\"%s\"", by,
			 kind < sizeof by_name / sizeof *by_name ? by_name[kind] : "?");
	else
		snprintf(args, n, "\"by_kind\":\"%s\"",
			 kind < sizeof by_name / sizeof *by_name ? by_name[kind] : "?");
}

static void mp_event(struct out *o, struct mpstate *m, const struct rec *r)
{
	const struct ev *e = &r->e;
	char args[128];
	switch (e->kind) {
	case EV_CREATE:
		snprintf(args, sizeof args, "\"by\":%" PRIu64 ",\"vp\":%u", e->other, r->vp);
		instant(o, e->mp, "create", e->t, args);
		leave(o, e->mp, m, e->t);
		*m = (struct mpstate){S_RUNNABLE, e->t, 0, 0, 0};
		return;
	case EV_WAKE:
		waker_args(args, sizeof args, e->other, e->arg);
		instant(o, e->mp, "unpark", e->t, args);
		if (e->other != NOBODY)
			flow(o, e->other, e->mp, e->t);
		if (m->s == S_PARKED) {
			leave(o, e->mp, m, e->t);
			*m = (struct mpstate){S_RUNNABLE, e->t, 0, 0, 0};
		} else if (m->s == S_RUNNING) {
			m->woken = 1;
		}
		return;
	case EV_RUN:
		if (m->s == S_PARKED) { /* a direct switch woke it */
			waker_args(args, sizeof args, e->other, e->other == NOBODY ? BY_IDLE : KR_BY_MP);
			instant(o, e->mp, "unpark", e->t, args);
			if (e->other != NOBODY)
				flow(o, e->other, e->mp, e->t);
		}
		if (e->arg && e->arg - 1 != r->vp) {
			snprintf(args, sizeof args, "\"from_vp\":%u,\"to_vp\":%u", e->arg - 1, r->vp);
			instant(o, e->mp, "migrate", e->t, args);
		}
		leave(o, e->mp, m, e->t);
		*m = (struct mpstate){S_RUNNING, e->t, 0, r->vp, 0};
		return;
	default: /* EV_STOP */
		leave(o, e->mp, m, e->t);
		if (e->arg == KR_WHY_EXIT) {
			instant(o, e->mp, "exit", e->t, "");
			return;
		}
		if (e->arg == KR_WHY_RUNNABLE) {
			*m = (struct mpstate){S_RUNNABLE, e->t, 0, 0, 0};
			return;
		}
		snprintf(args, sizeof args, "\"why\":\"%s\"", why_name[e->arg % KR_WHY_N]);
		instant(o, e->mp, "park", e->t, args);
		*m = (struct mpstate){m->woken ? S_RUNNABLE : S_PARKED, e->t, e->arg, 0, 0};
	}
}

/* Every microprocess's track, from all events sorted by microprocess and
 * time. */
static void mp_tracks(struct out *o, struct rec *r, size_t n, uint64_t end)
{
	qsort(r, n, sizeof *r, by_mp_then_time);
	for (size_t i = 0; i < n;) {
		uint64_t mp = r[i].e.mp;
		fprintf(o->f, ",\n{\"ph\":\"M\",\"pid\":2,\"tid\":%" PRIu64 ",\"name\":\"thread_name\","
			      "\"args\":{\"name\":\"mp %" PRIu64 "\"}}", mp, mp);
		struct mpstate m = {0};
		for (; i < n && r[i].e.mp == mp; i++)
			mp_event(o, &m, &r[i]);
		leave(o, mp, &m, end);
	}
}

static void write_out(void)
{
	uint64_t end = kr_now(), total = 0, dropped = 0;
	uint64_t cnt[KR_VP_MAX + 1];
	pthread_mutex_lock(&T.lock);
	for (unsigned i = 0; i <= KR_VP_MAX; i++) {
		cnt[i] = T.buf[i] ? __atomic_load_n(&T.buf[i]->n, __ATOMIC_ACQUIRE) : 0;
		total += cnt[i];
	}
	struct rec *r = malloc((total ? total : 1) * sizeof *r);
	struct out o = {T.f, T.t0, 0};
	fputs("{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\","
	      "\"args\":{\"name\":\"karui VPs\"}},\n{\"ph\":\"M\",\"pid\":2,\"name\":\"process_name\","
	      "\"args\":{\"name\":\"karui microprocesses\"}}", o.f);
	size_t k = 0;
	for (unsigned i = 0; i <= KR_VP_MAX; i++) {
		if (!cnt[i])
			continue;
		if (i < FOREIGN)
			vp_track(&o, i, T.buf[i]->ev, cnt[i], end);
		for (uint64_t j = 0; r && j < cnt[i]; j++, k++)
			r[k] = (struct rec){T.buf[i]->ev[j], i, k};
	}
	if (r)
		mp_tracks(&o, r, total, end);
	fprintf(o.f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\","
		     "\"buffer_bytes\":%zu,\"events\":%" PRIu64 ",\"dropped_by_vp\":{", T.size, total);
	const char *sep = "";
	for (unsigned i = 0; i <= KR_VP_MAX; i++) {
		uint64_t d = T.buf[i] ? __atomic_load_n(&T.buf[i]->dropped, __ATOMIC_RELAXED) : 0;
		if (!d)
			continue;
		if (i == FOREIGN)
			fprintf(o.f, "%s\"thread\":%" PRIu64, sep, d);
		else
			fprintf(o.f, "%s\"%u\":%" PRIu64, sep, i, d);
		sep = ",";
		dropped += d;
	}
	dropped += __atomic_load_n(&T.unbuffered, __ATOMIC_RELAXED);
	fprintf(o.f, "},\"dropped\":%" PRIu64 "%s}}\n", dropped,
		r ? "" : ",\"error\":\"no memory to sort the events\"");
	pthread_mutex_unlock(&T.lock);
	free(r);
	if (fclose(T.f) != 0)
		fprintf(stderr, "karui: the trace %s was not written whole: %s\n", T.path,
			strerror(errno));
	T.f = NULL;
}
