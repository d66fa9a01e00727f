/* Seed 000 Table 5's program (examples/dbquery.c): the parallel query's
 * answer under each ready queue, and the wasted work that is certain. */
#include "kt.h"

#include "dbquery.h"
#include "karui.h"

static const kr_rq_ops *const QUEUES[] = {&kr_rq_fifo, &db_rq_needed_first, &db_rq_needed_only};
#define NQUEUES (sizeof QUEUES / sizeof QUEUES[0])

static db_table t;

static void make_table(void)
{
	KT_EQ(db_table_make(&t, DB_ORDERS_QUICK, 42), 0);
}

/* Examined rows beyond the sequential plan's, on a running karui; the
 * answer must be the sequential plan's. */
static long wasted_by_parallel_plan(size_t limit)
{
	db_result seq, par;
	KT_EQ(db_query_seq(&t, limit, &seq), 0);
	KT_EQ(db_query_par(&t, limit, &par), 0);
	KT_EQ(par.n, seq.n);
	for (size_t i = 0; i < seq.n; i++)
		KT_EQ(par.ids[i], seq.ids[i]);
	KT_CHECK(par.examined >= seq.examined);
	long w = (long)(par.examined - seq.examined);
	db_result_free(&seq);
	db_result_free(&par);
	return w;
}

static long wasted_under(const kr_rq_ops *rq, unsigned vps, size_t limit)
{
	kr_config c = {.vps = vps, .rq = rq};
	KT_EQ(kr_init(&c), 0);
	long w = wasted_by_parallel_plan(limit);
	KT_EQ(kr_fini(), 0);
	return w;
}

/* Limits whose answers end in the first range, in a middle one (the
 * benchmark's), past every match of the table, and none at all. */
static void parallel_answer_is_the_sequential_one_under_each_queue_at_1_and_2_vps(void)
{
	make_table();
	db_result all;
	KT_EQ(db_query_seq(&t, t.norders, &all), 0);
	KT_CHECK(all.n > DB_LIMIT(t.norders)); /* the LIMIT cuts the answer short */
	size_t limits[] = {0, 1, DB_LIMIT(t.norders), all.n + 5};
	for (size_t q = 0; q < NQUEUES; q++)
		for (unsigned vps = 1; vps <= 2; vps++) {
			kr_config c = {.vps = vps, .rq = QUEUES[q]};
			KT_EQ(kr_init(&c), 0);
			for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++)
				for (int rep = 0; rep < 3; rep++)
					wasted_by_parallel_plan(limits[l]);
			KT_EQ(kr_fini(), 0);
		}
	db_result_free(&all);
}

/* (c) runs a range only once it is surely needed, and then up to its
 * quota: on any number of VPs. */
static void needed_only_queue_wastes_no_work(void)
{
	make_table();
	for (unsigned vps = 1; vps <= 2; vps++)
		for (int rep = 0; rep < 3; rep++)
			KT_EQ(wasted_under(&db_rq_needed_only, vps, DB_LIMIT(t.norders)), 0);
}

/* On one VP, (b) always has the needed range to run, so speculative work
 * never runs; FIFO runs all eight ranges in turn and wastes some. */
static void needed_first_queue_wastes_nothing_on_one_vp_and_fifo_does(void)
{
	make_table();
	size_t limit = DB_LIMIT(t.norders);
	long fifo = wasted_under(&kr_rq_fifo, 1, limit);
	long prio = wasted_under(&db_rq_needed_first, 1, limit);
	fprintf(stderr, "  wasted rows on one VP: fifo %ld, needed-first %ld\n", fifo, prio);
	KT_EQ(prio, 0);
	KT_CHECK(fifo > 0);
}

/* Bad input is refused. */
static void queries_reject_bad_input(void)
{
	db_table none = {0};
	db_result r;
	KT_EQ(db_table_make(&none, 0, 1), EINVAL);
	KT_EQ(db_query_seq(&none, 1, &r), EINVAL);
	KT_EQ(db_query_par(&none, 1, &r), EINVAL);
	make_table();
	KT_EQ(db_query_par(&t, 1, &r), EINVAL); /* karui is not running */
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(parallel_answer_is_the_sequential_one_under_each_queue_at_1_and_2_vps);
	KT_RUN(needed_only_queue_wastes_no_work);
	KT_RUN(needed_first_queue_wastes_nothing_on_one_vp_and_fifo_does);
	KT_RUN(queries_reject_bad_input);
	return kt_finish();
}
