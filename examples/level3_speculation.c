/*
 * Scheduling level 3 with priorities that change: seed 000 §4.3's parallel
 * database program (dbquery.c) under the built-in FIFO and under two
 * ready-queue modules of its own, which run work that is surely needed
 * first (db_rq_needed_first) or only such work (db_rq_needed_only).  The
 * program marks its speculative microprocesses by a low priority and
 * raises each one with kr_mp_setprio as its work becomes needed; the
 * modules move it in their reprio.  On one VP, prints the answer's rows
 * and the rows examined in vain under each queue.
 */
#include <stdio.h>

#include "dbquery.h"
#include "karui.h"

int main(void)
{
	static const kr_rq_ops *const rq[] = {&kr_rq_fifo, &db_rq_needed_first,
					      &db_rq_needed_only};
	db_table t;
	db_result seq;
	size_t limit = DB_LIMIT(DB_ORDERS_QUICK);
	int err = db_table_make(&t, DB_ORDERS_QUICK, 42);
	if (err || (err = db_query_seq(&t, limit, &seq)))
		return fprintf(stderr, "dbquery: %d\n", err), 1;
	for (int i = 0; i < 3; i++) {
		kr_config cfg = {.vps = 1, .rq = rq[i]};
		db_result r;
		if ((err = kr_init(&cfg)) || (err = db_query_par(&t, limit, &r)) ||
		    (err = kr_fini()))
			return fprintf(stderr, "%s: %d\n", rq[i]->name, err), 1;
		printf("%s: %zu rows, %zu wasted, ", rq[i]->name, r.n, r.examined - seq.examined);
		db_result_free(&r);
	}
	printf("LIMIT %zu\n", limit);
	db_result_free(&seq);
	db_table_free(&t);
	return 0;
}
