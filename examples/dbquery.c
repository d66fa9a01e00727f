/*
 * A parallel database query with speculative work, and the ready-queue
 * modules that schedule it by what is surely needed: seed 000 §4.3.
 *
 * The query (dbquery.h) wants the first n matching orders by id.  The
 * parallel plan gives each of DB_RANGES microprocesses one range of ids.
 * Range 0 is surely needed.  Range k is needed once ranges 0..k-1 are
 * complete and have found fewer than n rows together; its quota is then
 * the rest.  Until then it runs speculatively, on the bet that it will be
 * needed, and stops at n rows of its own (more can never be used).  The
 * lowest range not yet complete is the frontier: the one surely needed.
 * When the frontier range completes, the next incomplete range becomes
 * the frontier, and its priority is raised (kr_mp_setprio): the needed
 * work hands its priority on, the seed's simple priority inheritance.
 * When ranges 0..k hold n rows, the answer is known: the microprocesses
 * of the later ranges stop at their next block, and whatever they
 * examined was wasted.  Those still queued are raised too, so that a
 * queue that holds speculative work back lets them run to their end.
 *
 * Work is examined rows; each microprocess yields after every DB_BLOCK of
 * them, so that the ready queue decides, at one VP too, whose work goes
 * on.  Under FIFO (the seed's (a)) all eight advance together and most
 * of the speculative work is done before the answer is known; under
 * db_rq_needed_first (b) speculative work runs only on a VP that has no
 * needed work, nearer ranges first; under db_rq_needed_only (c) it never
 * runs.  Wasted work is the rows examined beyond what the sequential plan
 * (db_query_seq: one row after the other until n are found) examines.
 *
 * Priorities tell the ready queue which work is which: needed work has
 * KR_PRIO_DEFAULT or more (so the main microprocess's is needed too),
 * speculative range j has KR_PRIO_DEFAULT - j, the nearer range (the
 * likelier to be needed) higher.  The modules of (b) and (c) are one
 * queue with two pops: needed microprocesses in a FIFO list, speculative
 * ones in a list by priority; reprio moves one between them.
 *
 * Invariants: ranges below the frontier are complete and their rows
 * (`prefix` of them) are part of the answer; the frontier, `prefix`,
 * `done` and the ranges' `complete` change under the run's spin lock,
 * which no one holds across a scheduling point.  A range reads the
 * frontier without the lock at each block (acquire): once it sees itself
 * there, `prefix` is final, since it changes only as the frontier passes
 * a complete range.  The microprocesses are created last range first, so
 * each one's successors exist (their handles are set) before it runs.
 *
 * The tables: orders with a comment of words from a 32-word vocabulary
 * (TPC-H's style) and the customer that placed them, customers in five
 * market segments, indexed by a hash table on their key.  LIKE is
 * evaluated first (it is the more selective predicate), then the join.
 *
 * Rejected: a plan whose speculative work is cancelled from outside
 * (kr_mp_cancel ends waits, not computation); ranges that learn of the
 * answer between rows (the block is the grain of scheduling anyway).
 */
#include "dbquery.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DB_PRIO_NEEDED KR_PRIO_DEFAULT
#define DB_SEGMENTS 5
#define DB_BUILDING 1
static const char PATTERN[] = "%special%requests%";

/* ---------------- the tables ---------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static size_t cust_slot(const db_table *t, uint32_t key)
{
	uint32_t h = key * 0x85ebca6bu;
	return (h ^ (h >> 15)) & t->cust_mask;
}

static const char *const WORDS[32] = {
	"furiously", "special", "requests", "packages", "deposits", "carefully",
	"final", "ironic", "blithely", "pending", "accounts", "quickly", "regular",
	"express", "bold", "silent", "slyly", "even", "unusual", "foxes",
	"theodolites", "pinto", "beans", "instructions", "dependencies", "excuses",
	"platelets", "asymptotes", "courts", "dolphins", "ideas", "sheaves",
};

int db_table_make(db_table *t, size_t norders, uint64_t seed)
{
	*t = (db_table){0};
	if (!norders || norders > UINT32_MAX)
		return EINVAL;
	size_t ncust = norders / 10 + 1, slots = 1;
	while (slots < 2 * ncust)
		slots <<= 1;
	t->orders = malloc(norders * sizeof *t->orders);
	t->cust = calloc(slots, sizeof *t->cust);
	if (!t->orders || !t->cust) {
		db_table_free(t);
		return ENOMEM;
	}
	t->norders = norders;
	t->cust_mask = slots - 1;
	uint64_t s = seed;
	/* customer i's key: (i + 1) times an odd number, so distinct and
	 * never 0 (the free slot) */
	for (size_t i = 0; i < ncust; i++) {
		uint32_t key = (uint32_t)(i + 1) * 0x9e3779b1u;
		size_t h = cust_slot(t, key);
		while (t->cust[h].key)
			h = (h + 1) & t->cust_mask;
		t->cust[h] = (struct db_cust){key, (uint32_t)(splitmix(&s) % DB_SEGMENTS)};
	}
	for (size_t i = 0; i < norders; i++) {
		db_order *o = &t->orders[i];
		o->id = (uint32_t)i;
		o->custkey = (uint32_t)(splitmix(&s) % ncust + 1) * 0x9e3779b1u;
		size_t len = 0;
		for (;;) {
			const char *w = WORDS[splitmix(&s) % 32];
			size_t wl = strlen(w);
			if (len + (len != 0) + wl >= DB_COMMENT)
				break;
			if (len)
				o->comment[len++] = ' ';
			memcpy(o->comment + len, w, wl);
			len += wl;
		}
		o->comment[len] = 0;
	}
	return 0;
}

void db_table_free(db_table *t)
{
	free(t->orders);
	free(t->cust);
	*t = (db_table){0};
}

/* ---------------- the query ---------------- */

/* SQL LIKE: '%' any run of bytes, '_' any one byte, no escapes.  Greedy,
 * going back only to the last '%' (enough: what the last '%' skips, an
 * earlier one could have skipped too). */
static int like(const char *s, const char *p)
{
	const char *star = NULL, *from = NULL;
	while (*s) {
		if (*p == '%') {
			star = ++p;
			from = s;
		} else if (*p && (*p == '_' || *p == *s)) {
			p++;
			s++;
		} else if (star) {
			p = star;
			s = ++from;
		} else {
			return 0;
		}
	}
	while (*p == '%')
		p++;
	return !*p;
}

static int matches(const db_table *t, const db_order *o)
{
	if (!like(o->comment, PATTERN))
		return 0;
	size_t h = cust_slot(t, o->custkey);
	while (t->cust[h].key != o->custkey)
		h = (h + 1) & t->cust_mask;
	return t->cust[h].segment == DB_BUILDING;
}

/* Rows from..to-1 in order until *n reaches cap (matching ids to out[]):
 * the rows examined. */
static size_t scan(const db_table *t, size_t from, size_t to, size_t cap, uint32_t *out,
		   size_t *n)
{
	size_t row = from;
	while (row < to && *n < cap) {
		if (matches(t, &t->orders[row]))
			out[(*n)++] = t->orders[row].id;
		row++;
	}
	return row - from;
}

static int result_alloc(db_result *r, size_t limit)
{
	*r = (db_result){0};
	r->ids = malloc((limit ? limit : 1) * sizeof *r->ids);
	return r->ids ? 0 : ENOMEM;
}

void db_result_free(db_result *r)
{
	free(r->ids);
	*r = (db_result){0};
}

int db_query_seq(const db_table *t, size_t limit, db_result *r)
{
	if (!t || !t->orders || !r)
		return EINVAL;
	int err = result_alloc(r, limit);
	if (!err)
		r->examined = scan(t, 0, t->norders, limit, r->ids, &r->n);
	return err;
}

/* ---------------- the parallel plan ---------------- */

struct run;

struct range {
	struct run *run;
	int idx;
	size_t lo, hi;      /* its rows */
	uint32_t *ids;      /* what it found, at most the limit */
	size_t n, examined;
	int complete;       /* under the run's lock */
};

struct run {
	const db_table *t;
	size_t limit;
	kr_spin lock;
	int frontier;       /* the lowest incomplete range (atomic) */
	size_t prefix;      /* rows found by the ranges below it */
	int done;           /* the answer is known (atomic) */
	int last;           /* with done: the last range the answer takes from */
	kr_mp *mp[DB_RANGES];
	struct range r[DB_RANGES];
};

/* Range g is complete: move the frontier past complete ranges, under the
 * lock.  The ranges [*from, *to) are then to be raised: the new frontier,
 * or, if the answer became known, every range after it (they stop at
 * their next block: a queue that holds them back must let them run). */
static void advance(struct run *u, struct range *g, int *from, int *to)
{
	g->complete = 1;
	*from = *to = 0;
	int f = u->frontier;
	if (u->done || g->idx != f)
		return;
	while (f < DB_RANGES && u->r[f].complete && u->prefix + u->r[f].n < u->limit)
		u->prefix += u->r[f].n, f++;
	if (f < DB_RANGES && !u->r[f].complete) {
		__atomic_store_n(&u->frontier, f, __ATOMIC_RELEASE);
		*from = f, *to = f + 1;
		return;
	}
	/* n rows from ranges 0..f, or fewer in the whole table */
	u->last = f < DB_RANGES ? f : DB_RANGES - 1;
	__atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
	*from = u->last + 1, *to = DB_RANGES;
}

/* Raise ranges [from, to) to needed work.  One that has ended already is
 * refused (ESRCH) and needs nothing. */
static void raise_ranges(struct run *u, int from, int to)
{
	for (int j = from; j < to; j++)
		(void)kr_mp_setprio(u->mp[j], DB_PRIO_NEEDED);
}

static void *range_main(void *arg)
{
	struct range *g = arg;
	struct run *u = g->run;
	size_t row = g->lo;
	for (;;) {
		if (__atomic_load_n(&u->done, __ATOMIC_ACQUIRE))
			break; /* beyond the answer */
		size_t cap = u->limit;
		if (__atomic_load_n(&u->frontier, __ATOMIC_ACQUIRE) == g->idx)
			cap = u->limit - u->prefix;
		if (g->n >= cap || row == g->hi)
			break;
		size_t end = g->hi - row > DB_BLOCK ? row + DB_BLOCK : g->hi;
		size_t k = scan(u->t, row, end, cap, g->ids, &g->n);
		row += k;
		g->examined += k;
		if (g->n >= cap || row == g->hi)
			break;
		kr_mp_yield();
	}
	int from, to;
	kr_spin_lock(&u->lock);
	advance(u, g, &from, &to);
	kr_spin_unlock(&u->lock);
	raise_ranges(u, from, to);
	return NULL;
}

int db_query_par(const db_table *t, size_t limit, db_result *r)
{
	if (!t || !t->orders || !r || !kr_mp_self())
		return EINVAL;
	struct run *u = calloc(1, sizeof *u);
	uint32_t *ids = malloc(DB_RANGES * (limit ? limit : 1) * sizeof *ids);
	int err = u && ids ? result_alloc(r, limit) : ENOMEM;
	if (err) {
		free(u);
		free(ids);
		return err;
	}
	u->t = t;
	u->limit = limit;
	for (int j = 0; j < DB_RANGES; j++)
		u->r[j] = (struct range){.run = u, .idx = j, .ids = ids + (size_t)j * limit,
					 .lo = t->norders * j / DB_RANGES,
					 .hi = t->norders * (j + 1) / DB_RANGES};
	int made = DB_RANGES;
	while (made > 0) {
		int j = made - 1;
		kr_attr at = {.flags = KR_MP_PRIO,
			      .prio = j ? KR_PRIO_DEFAULT - j : DB_PRIO_NEEDED};
		if ((err = kr_mp_create(&u->mp[j], &at, range_main, &u->r[j])))
			break;
		made = j;
	}
	if (err) {
		/* ranges made..DB_RANGES-1 run: end them as beyond the answer */
		kr_spin_lock(&u->lock);
		__atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
		kr_spin_unlock(&u->lock);
		raise_ranges(u, made, DB_RANGES);
	}
	for (int j = made; j < DB_RANGES; j++)
		kr_mp_join(u->mp[j], NULL);
	if (!err) {
		for (int j = 0; j <= u->last; j++) {
			size_t take = u->r[j].n < limit - r->n ? u->r[j].n : limit - r->n;
			memcpy(r->ids + r->n, u->r[j].ids, take * sizeof *ids);
			r->n += take;
		}
		for (int j = 0; j < DB_RANGES; j++)
			r->examined += u->r[j].examined;
	} else {
		db_result_free(r);
	}
	free(ids);
	free(u);
	return err;
}

/* ---------------- the ready queues of (b) and (c) ---------------- */

/* Needed ones in a FIFO list, speculative ones in a list by priority
 * (FIFO among equals), both doubly linked; link.key names the list. */
struct dbrq {
	kr_mp *head, *tail; /* needed */
	kr_mp *spec;        /* speculative, highest priority first */
};

#define L(mp) kr_mp_rqlink(mp)

/* A queued microprocess's priority: its handle names a live one. */
static int prio_of(const kr_mp *mp)
{
	int p = KR_PRIO_MIN;
	kr_mp_getprio(mp, &p);
	return p;
}

static void dbrq_init(void *q) { *(struct dbrq *)q = (struct dbrq){0}; }

static void dbrq_push(void *q, kr_mp *mp)
{
	struct dbrq *d = q;
	kr_rq_link *l = L(mp);
	int p = prio_of(mp);
	if (p >= DB_PRIO_NEEDED) {
		*l = (kr_rq_link){.prev = d->tail, .key = 0};
		if (d->tail)
			L(d->tail)->next = mp;
		else
			d->head = mp;
		d->tail = mp;
		return;
	}
	kr_mp *prev = NULL, *at = d->spec;
	while (at && prio_of(at) >= p) {
		prev = at;
		at = L(at)->next;
	}
	*l = (kr_rq_link){.next = at, .prev = prev, .key = 1};
	if (prev)
		L(prev)->next = mp;
	else
		d->spec = mp;
	if (at)
		L(at)->prev = mp;
}

static int dbrq_remove(void *q, kr_mp *mp)
{
	struct dbrq *d = q;
	kr_rq_link *l = L(mp);
	if (l->prev)
		L(l->prev)->next = l->next;
	else if (l->key)
		d->spec = l->next;
	else
		d->head = l->next;
	if (l->next)
		L(l->next)->prev = l->prev;
	else if (!l->key)
		d->tail = l->prev;
	return 0;
}

static kr_mp *take(struct dbrq *d, kr_mp *mp)
{
	if (mp)
		dbrq_remove(d, mp);
	return mp;
}

static kr_mp *pop_needed_first(void *q)
{
	struct dbrq *d = q;
	return take(d, d->head ? d->head : d->spec);
}

static kr_mp *pop_needed_only(void *q)
{
	struct dbrq *d = q;
	return take(d, d->head);
}

/* The priority has changed (kr_mp_getprio says so): into the list it names. */
static void dbrq_reprio(void *q, kr_mp *mp, int prio)
{
	(void)prio;
	dbrq_remove(q, mp);
	dbrq_push(q, mp);
}

const kr_rq_ops db_rq_needed_first = {
	.name = "needed-first", .size = sizeof(struct dbrq), .flags = KR_RQ_SHARED,
	.init = dbrq_init, .push = dbrq_push, .pop = pop_needed_first,
	.remove = dbrq_remove, .reprio = dbrq_reprio,
};

const kr_rq_ops db_rq_needed_only = {
	.name = "needed-only", .size = sizeof(struct dbrq), .flags = KR_RQ_SHARED,
	.init = dbrq_init, .push = dbrq_push, .pop = pop_needed_only,
	.remove = dbrq_remove, .reprio = dbrq_reprio,
};
