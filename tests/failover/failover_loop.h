/*
 * What failover_loop.c (the loop, its verdicts and options) and failover_colls.c (one
 * validated call of each collective the loop can run) share. Test code: plain MPI.
 */
#ifndef DUALRAIL_TESTS_FAILOVER_LOOP_H
#define DUALRAIL_TESTS_FAILOVER_LOOP_H

#include <stddef.h>

enum { ST_OK = 0, ST_WRONG = 1, ST_MPI_ERROR = 3 };

/* The collective the loop runs (--coll). */
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
extern const char *coll_name, *coll_mpi;
/* --coll iallreduce: the allreduce as MPI_Iallreduce + MPI_Wait (issue 15). */
extern int nonblocking;

/* Sets coll, coll_name, coll_mpi (and nonblocking) from a --coll value; 0 when unknown. */
int coll_parse(const char *name);

double epoch_now(void);
/* The classes a failed collective may return, by name (run_failover.sh checks it). */
const char *class_name(int cls);

/* Rank r's element i in iteration k is val_a(i, k) + r * val_b(i, k). */
static inline int val_a(size_t i, unsigned k)
{
    return (int)((i * 7u + (size_t)k * 13u) % 1009u) - 504;
}

static inline int val_b(size_t i, unsigned k)
{
    return (int)((i + (size_t)k * 5u) % 17u) + 1;
}

/*
 * One validated call of coll (not the allreduce, whose loop has device buffers and lives in
 * failover_loop.c) in iteration k with count ints of buffer; other_status says how it went
 * (what went wrong is printed). Return the ints this rank moved (sent or received).
 *   other_call: bcast, allgather, allgatherv, reduce, reduce_scatter_block, gather, scatter
 *   a2a_call:   alltoall, alltoallv (a2a_quiet: no error line, a2a_msg: its MPI error)
 */
extern int other_status;
extern int a2a_quiet;
extern char a2a_msg[];
size_t other_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1);
size_t a2a_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1);

#endif
