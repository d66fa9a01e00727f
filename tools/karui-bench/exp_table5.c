/*
 * karui-bench: seed 000 Table 5 (§4.3), a parallel database program of
 * eight microprocesses under three schedulers, at 1 and 2 VPs (x).
 *
 * The program is examples/dbquery.c: a LIMIT query whose eight ranges run
 * as microprocesses, the lowest incomplete one surely needed, the others
 * speculative until then.  The systems are karui with three ready queues,
 * the same program under each:
 *
 *   karui-fifo    (a) the built-in FIFO (kr_rq_fifo), scheduling level 4
 *   karui-prio    (b) db_rq_needed_first: needed work first, speculative
 *                 work when a VP has no needed work; the needed range's
 *                 priority passes to the next one as it completes
 *   karui-needed  (c) db_rq_needed_only: speculative work is held back
 *                 until its priority rises
 *
 * Metrics: "run", the query's time in ms (creating the eight, joining
 * them, assembling the answer; karui's start and stop are outside), and
 * "wasted", the rows examined beyond what the sequential plan examines.
 * Every run's answer is compared with the sequential plan's; a wrong one
 * fails the row.  The tables are made once per experiment (a seeded
 * generator: the same data every time); --quick takes an eighth of the
 * orders, --n N takes N.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dbquery.h"
#include "exp.h"
#include "karui.h"

#define T5 "seed000.table5"
enum { T5_SEED = 42, T5_MAXVPS = 2 };

static const struct {
	const char *sys;
	const kr_rq_ops *rq;
} T5SYS[] = {
	{"karui-fifo", &kr_rq_fifo},
	{"karui-prio", &db_rq_needed_first},
	{"karui-needed", &db_rq_needed_only},
};

/* A warm-up run and c->reps timed ones on karui with `vps` VPs and ready
 * queue rq: ms[] and wasted[] per timed run.  0, -1 (an answer differs
 * from the sequential plan's `ref`), or an errno code. */
static int t5_runs(const kb_ctx *c, const db_table *t, size_t limit, const db_result *ref,
		   const kr_rq_ops *rq, unsigned vps, double *ms, double *wasted)
{
	kr_config cfg = {.vps = vps, .rq = rq};
	int err = kr_init(&cfg);
	if (err)
		return err;
	for (int i = -1; i < c->reps && !err; i++) {
		db_result r;
		double t0 = kb_now_ns();
		if ((err = db_query_par(t, limit, &r)))
			break;
		double t1 = kb_now_ns();
		if (r.n != ref->n || memcmp(r.ids, ref->ids, r.n * sizeof *r.ids))
			err = -1;
		else if (i >= 0) {
			ms[i] = (t1 - t0) / 1e6;
			wasted[i] = (double)r.examined - (double)ref->examined;
		}
		db_result_free(&r);
	}
	int fin = kr_fini();
	return err ? err : fin;
}

void kb_seed000_table5(const kb_ctx *c)
{
	size_t norders = c->n > 0 ? (size_t)c->n : c->quick ? DB_ORDERS_QUICK : DB_ORDERS_FULL;
	size_t limit = DB_LIMIT(norders);
	db_table t;
	db_result ref;
	int err = db_table_make(&t, norders, T5_SEED);
	if (!err && (err = db_query_seq(&t, limit, &ref)))
		db_table_free(&t);
	if (err) {
		for (size_t i = 0; i < sizeof T5SYS / sizeof T5SYS[0]; i++)
			kb_row_none(T5, T5SYS[i].sys, "failed", strerror(err));
		return;
	}
	fprintf(stderr, "karui-bench: " T5 ": %zu orders, LIMIT %zu: the sequential plan "
		"examines %zu rows\n", norders, limit, ref.examined);
	for (size_t i = 0; i < sizeof T5SYS / sizeof T5SYS[0]; i++) {
		if (!kb_want(c, T5, T5SYS[i].sys))
			continue;
		for (unsigned vps = 1; vps <= T5_MAXVPS; vps++) {
			double ms[16], wasted[16];
			err = t5_runs(c, &t, limit, &ref, T5SYS[i].rq, vps, ms, wasted);
			if (err) {
				kb_row_none(T5, T5SYS[i].sys, "failed",
					    err < 0 ? "an answer differs from the sequential plan's"
						    : strerror(err));
				break;
			}
			kb_row(c, T5, T5SYS[i].sys, "run", "ms", ms, c->reps, 0, vps);
			kb_row(c, T5, T5SYS[i].sys, "wasted", "units", wasted, c->reps, 0, vps);
		}
	}
	db_result_free(&ref);
	db_table_free(&t);
}
