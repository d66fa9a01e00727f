/*
 * karui-mpi — MPI calls that park only the calling microprocess
 * (libkarui-mpi, built when the build finds MPI; docs/mpi.md).
 *
 * kr_mpi_init initialises MPI at the thread level karui needs
 * (MPI_THREAD_SERIALIZED: the layer serialises every MPI call it makes,
 * under one lock) and installs the layer's progress engine as karui's
 * event source (sched.h, kr_poller_add).  The calls below start the
 * nonblocking form of the MPI operation, and if it has not completed at
 * once, park the calling microprocess; its VP runs the others meanwhile.
 * Busy VPs test the pending requests (MPI_Testsome) at every 8th
 * scheduling point, and an idle VP tests them in a loop that spins for a
 * while and then sleeps between tests with a growing back-off (docs/mpi.md:
 * the latency and CPU trade-off).
 *
 * karui's I/O (io.h) works beside the layer: its event source and the
 * layer's are both set, and an idle VP sleeps in the I/O one, for no
 * longer than the layer's spin or nap (docs/mpi.md), so that a message or
 * an I/O completion, whichever comes first, wakes it.
 *
 * Errors follow karui.h's rule: 0 or a positive errno code.  A NULL
 * mandatory pointer, a negative count, or a NULL buffer with a positive
 * count: EINVAL.  An error MPI reports (under MPI_ERRORS_RETURN, which
 * kr_mpi_init sets on MPI_COMM_WORLD when it initialises MPI itself):
 * EINVAL for a bad rank, tag, count, datatype, communicator, operation or
 * argument, EMSGSIZE for a truncated receive, ENOMEM, and EIO for the
 * rest.  Every call but kr_mpi_init is EPERM before kr_mpi_init or after
 * kr_mpi_fini (or kr_fini); the calls that wait are EPERM on a thread
 * that is no VP.  status arguments may be MPI_STATUS_IGNORE (NULL).
 */
#ifndef KARUI_MPI_H
#define KARUI_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Initialise MPI (MPI_Init_thread, unless the program did already; then
 * it must have MPI_THREAD_SERIALIZED or more: ENOTSUP otherwise) and
 * install the progress engine.  karui must be running (EPERM).  argc and
 * argv are handed to MPI_Init_thread and may be NULL.  EBUSY: the layer
 * is in already; ENOSPC: KR_POLLER_MAX event sources are set (sched.h);
 * EIO: MPI failed to start. */
int kr_mpi_init(int *argc, char ***argv);

/* Remove the progress engine and, if kr_mpi_init initialised MPI, call
 * MPI_Finalize.  EBUSY: a microprocess still waits in one of the calls
 * below.  Before kr_fini. */
int kr_mpi_fini(void);

/* Park until *req completes, like MPI_Wait; *req becomes
 * MPI_REQUEST_NULL (a null request returns at once, with an empty
 * status).  *req may come from any MPI call the program made under
 * kr_mpi_lock. */
int kr_mpi_wait(MPI_Request *req, MPI_Status *status);

/* kr_mpi_wait for each of n requests (statuses: n of them, or
 * MPI_STATUSES_IGNORE); the first error, after all have completed.
 * ENOMEM: no room for n more pending requests (nothing waited for). */
int kr_mpi_waitall(int n, MPI_Request *reqs, MPI_Status *statuses);

/* MPI_Send, MPI_Ssend, MPI_Recv, MPI_Sendrecv, MPI_Barrier, MPI_Bcast and
 * MPI_Allreduce that park only the caller (through MPI_Isend, MPI_Issend,
 * MPI_Irecv, MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce). */
int kr_mpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
		MPI_Comm comm);
int kr_mpi_ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
		 MPI_Comm comm);
int kr_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
		MPI_Status *status);
int kr_mpi_sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
		    void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
		    MPI_Comm comm, MPI_Status *status);
int kr_mpi_barrier(MPI_Comm comm);
int kr_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int kr_mpi_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
		     MPI_Comm comm);

/* The layer's lock, for the program's own MPI calls (MPI_Comm_rank, an
 * MPI_Irecv to hand to kr_mpi_wait, ...): under MPI_THREAD_SERIALIZED no
 * two threads may be inside MPI at once.  Held briefly, never across a
 * wait: it is a spin lock. */
int kr_mpi_lock(void);
int kr_mpi_unlock(void);

#ifdef __cplusplus
}
#endif
#endif
