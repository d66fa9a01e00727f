/*
 * A parallel database query whose speculative work can be wasted: seed
 * 000 §4.3 (Table 5), scheduled at level 3 (sched.h).  See dbquery.c.
 *
 *   SELECT o.id FROM orders o JOIN customer c ON c.key = o.custkey
 *   WHERE o.comment LIKE '%special%requests%' AND c.segment = 'BUILDING'
 *   ORDER BY o.id LIMIT n
 *
 * over tables made in memory from a seeded generator.  The parallel plan
 * splits the orders into DB_RANGES ranges by id, one microprocess each;
 * the first range's work is surely needed, a later one's only if the
 * ranges before it find fewer than n rows, so until then it is
 * speculative, and wasted if they do.  The same program runs under any
 * ready queue; db_rq_needed_first and db_rq_needed_only are the seed's
 * schedulers (b) and (c), kr_rq_fifo its (a).
 */
#ifndef KARUI_EXAMPLES_DBQUERY_H
#define KARUI_EXAMPLES_DBQUERY_H

#include <stddef.h>
#include <stdint.h>

#include "karui.h"

enum {
	DB_RANGES = 8,     /* microprocesses of the parallel plan */
	DB_BLOCK = 256,    /* rows between two yields */
	DB_COMMENT = 48,   /* bytes of o.comment, its NUL included */
};

/* The workload: orders, customers (one per 10 orders) and the LIMIT,
 * which puts the answer in the sixth of the eight ranges. */
#define DB_ORDERS_FULL 400000u
#define DB_ORDERS_QUICK 50000u
#define DB_LIMIT(orders) ((orders) / 640)

typedef struct db_order {
	uint32_t id, custkey;
	char comment[DB_COMMENT];
} db_order;

typedef struct db_table {
	db_order *orders;          /* by id: orders[i].id == i */
	size_t norders;
	/* customer, as a hash index on c.key: open addressing, linear
	 * probing, key 0 free (no customer has it) */
	struct db_cust { uint32_t key, segment; } *cust;
	size_t cust_mask;          /* slots - 1 */
} db_table;

/* Make the tables (deterministic in `seed`): 0, EINVAL (no orders) or
 * ENOMEM. */
int db_table_make(db_table *t, size_t norders, uint64_t seed);
void db_table_free(db_table *t);

typedef struct db_result {
	uint32_t *ids;     /* the answer: o.id ascending, n of them */
	size_t n;
	size_t examined;   /* rows examined by every microprocess together */
} db_result;

/* The query, one row after the other: the reference answer, and the least
 * work it takes (examined).  0, EINVAL or ENOMEM. */
int db_query_seq(const db_table *t, size_t limit, db_result *r);

/* The parallel plan, from a microprocess of a running karui.  Work beyond
 * db_query_seq's `examined` is wasted.  0, EINVAL, ENOMEM, or an error of
 * kr_mp_create. */
int db_query_par(const db_table *t, size_t limit, db_result *r);

void db_result_free(db_result *r);

/* The ready queues of schedulers (b) and (c): microprocesses of priority
 * KR_PRIO_DEFAULT and above do surely needed work and run first, in FIFO
 * order; the rest are speculative.  (b) runs speculative ones, highest
 * priority first, when no needed one is queued; (c) holds them back until
 * their priority rises. */
extern const kr_rq_ops db_rq_needed_first;
extern const kr_rq_ops db_rq_needed_only;

#endif
