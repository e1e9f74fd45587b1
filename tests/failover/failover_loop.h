/*
 * What failover_loop.c (the loop, its options, the allreduce) and failover_calls.c (the
 * other collectives' validated calls) share.
 */
#ifndef DUALRAIL_TESTS_FAILOVER_LOOP_H
#define DUALRAIL_TESTS_FAILOVER_LOOP_H

#include <mpi.h>
#include <stddef.h>

/* A call's verdict on this rank (reported to rank 0 after each call). */
enum { ST_OK = 0, ST_WRONG = 1, ST_MPI_ERROR = 3 };

/* --coll: the collective the loop runs. */
enum {
    COLL_ALLREDUCE,
    COLL_BCAST,
    COLL_ALLGATHER,
    COLL_ALLTOALL,
    COLL_ALLTOALLV,
    COLL_REDUCE,
    COLL_REDUCE_SCATTER_BLOCK,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLGATHERV
};

extern int rank, nranks;
extern int coll;
extern const char *coll_mpi; /* "MPI_Alltoall": what the lines name */
/* --coll iallreduce, ialltoall, ireduce_scatter_block: the call as its non-blocking form +
 * MPI_Wait (issue 15). */
extern int nonblocking;

double epoch_now(void);
/* The classes a failed collective may return, by name (run_failover.sh checks it). */
const char *class_name(int cls);
/* A non-blocking call's outcome: its start's error, or its request's through MPI_Wait. */
int waited(int rc, MPI_Request *req);

/* Rank r's element i in iteration k is val_a + r * val_b: every rank knows every sum. */
static inline int val_a(size_t i, unsigned k)
{
    return (int)((i * 7u + (size_t)k * 13u) % 1009u) - 504;
}

static inline int val_b(size_t i, unsigned k)
{
    return (int)((i + (size_t)k * 5u) % 17u) + 1;
}

/* One call's outcome (iteration k, bytes moved, the MPI call's rc, call start c0 and end c1,
 * loop start t0 (epoch); wrong elements, the first of them, got and want there; send buffer
 * elements the call changed): sets other_status and prints the line run_failover.sh reads (an
 * MPI error: its class, string and time, unless quiet; a wrong result: the first wrong
 * element). msg_out (NULL or MPI_MAX_ERROR_STRING bytes): the error string, "" on success. */
void verdict(unsigned k, size_t bytes, int in_place, int rc, double c0, double c1, double t0,
             size_t wrong, size_t first, int got, int want, size_t src_changed, int quiet,
             char *msg_out);

/* The last call's verdict (ST_*). */
extern int other_status;
/* One validated bcast, allgather(v), reduce, reduce_scatter_block, gather or scatter
 * (iteration k, count ints of buffer); returns the ints moved per rank. */
size_t other_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1);
/* Carrying on after an error: no error line (the driver counts them). */
extern int a2a_quiet;
/* The last all-to-all's MPI error string, "" on success. */
extern char a2a_msg[MPI_MAX_ERROR_STRING];
/* One validated alltoall or alltoallv; returns the ints this rank received. */
size_t a2a_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1);

#endif
