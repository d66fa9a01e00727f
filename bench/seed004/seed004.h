/*
 * Seed 004's workloads (§5.2, Table 2) as real programs: MULT, FORCE and
 * WAVE, each written once against the small layer below and run on one of
 * three systems, chosen on the command line (main.c):
 *
 *   pthread   a kernel thread per worker; pthread barriers, and mutex +
 *             condition variable mailboxes
 *   karui     a microprocess per worker on a fixed number of VPs;
 *             kr_barrier and kr_chan (include/karui/sync.h)
 *   carea     the same karui program with kr_config.alloc = &kr_carea and
 *             vps 0: the C-area decides how many of its VPs run
 *
 * The layer is a switch on the mode in each call, not a table of function
 * pointers: the workloads read as plain code and the branch is the same
 * for every system.  Workers never share anything but what they pass
 * through these objects and the arrays the barriers separate, so a run's
 * result does not depend on the system or the interleaving: each workload
 * returns a checksum, which must be the same in all three modes.
 */
#ifndef KARUI_SEED004_H
#define KARUI_SEED004_H

#include <pthread.h>
#include <stdint.h>

#include "karui.h"

enum s4_mode { S4_PTHREAD, S4_KARUI, S4_CAREA };
extern enum s4_mode s4_mode;

/* The workloads' sizes (0: the workload's default). */
struct s4_args {
	long size;   /* MULT: the matrices' order; FORCE: bodies */
	long steps;  /* FORCE: time steps; WAVE: sweeps of the mesh */
	long grain;  /* WAVE: iterations of work between two receives */
};

/* Run fn(arg, 0) .. fn(arg, n - 1) as n workers and wait for all of them. */
void s4_workers(unsigned n, void (*fn)(void *arg, unsigned id), void *arg);

/* A barrier of a fixed number of workers. */
struct s4_barrier {
	pthread_barrier_t p;
	kr_barrier k;
};
void s4_barrier_init(struct s4_barrier *b, unsigned count);
void s4_barrier_wait(struct s4_barrier *b);
void s4_barrier_destroy(struct s4_barrier *b);

/* A mailbox of one 64-bit word: send waits while it is full, recv while
 * it is empty (a channel of capacity 1). */
struct s4_mailbox {
	pthread_mutex_t lock;
	pthread_cond_t filled, emptied;
	int full;
	uint64_t word;
	kr_chan k;
};
void s4_mailbox_init(struct s4_mailbox *m);
void s4_mailbox_send(struct s4_mailbox *m, uint64_t word);
uint64_t s4_mailbox_recv(struct s4_mailbox *m);
void s4_mailbox_destroy(struct s4_mailbox *m);

/* Stop the program with a message when a call that cannot fail here does. */
void s4_check(int err, const char *what);

/* The programs' options from argv[i] on, those in `allowed`: --vps N into
 * *vps, --size, --steps and --grain N into a, --segment NAME into
 * *segment.  0, or -1 for another option or a value that is not a
 * positive number (the program then prints its usage). */
enum { S4_OPT_VPS = 1, S4_OPT_SIZE = 2, S4_OPT_STEPS = 4, S4_OPT_GRAIN = 8, S4_OPT_SEGMENT = 16 };
int s4_options(int argc, char **argv, int i, unsigned allowed, struct s4_args *a, long *vps,
	       const char **segment);
/* The processors this process may use. */
unsigned s4_processors(void);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t s4_now_ns(void);

/* FNV-1a over n bytes, continuing from h (start with S4_FNV). */
#define S4_FNV 0xcbf29ce484222325ull
uint64_t s4_hash(uint64_t h, const void *p, size_t n);

/* The workloads: run with a's sizes (defaults filled in), return the
 * checksum; *workers gets the number of workers. */
uint64_t s4_mult(struct s4_args *a, unsigned *workers);
uint64_t s4_force(struct s4_args *a, unsigned *workers);
uint64_t s4_wave(struct s4_args *a, unsigned *workers);

/* WAVE's parts, for its distributed form (mpi_wave.c): the mesh's side,
 * a cell's work between receives, a cell's first state, and the default
 * sweeps and grain filled into a. */
#define S4_WAVE_SIDE 10
uint64_t s4_wave_work(uint64_t x, long grain);
uint64_t s4_wave_seed(unsigned cell);
void s4_wave_defaults(struct s4_args *a);

#endif
