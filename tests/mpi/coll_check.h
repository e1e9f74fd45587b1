/*
 * What coll_check.c shares with its sibling coll_check_reduce.c (MPI_Reduce,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter): the ranks, the verdict
 * exchange by point-to-point messages, and the stand-in device copies.
 */
#ifndef DUALRAIL_TESTS_COLL_CHECK_H
#define DUALRAIL_TESTS_COLL_CHECK_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "standin_buffers.h"

extern int rank, size;
/* --no-stock-op-bugs: the previous module reduces; skip the pairs Open MPI 4.1.4 gets wrong */
extern bool no_stock_op_bugs;
/* --light: fewer cases of the reductions, allgatherv and gather/scatter (runs where the
 * previous module, much slower on the lab, does the work) */
extern bool light;

/* All ranks of MPI_COMM_WORLD agree on ok, by point-to-point messages only. */
void note(bool ok, const char *what);

/* coll_check_reduce.c: every reducing collective on comm (a communicator of
 * MPI_COMM_WORLD's ranks; cname names it); quick leaves the largest counts out. */
void reduce_checks(MPI_Comm comm, const char *cname, bool quick);
/* User-defined ops and derived datatypes through the previous module. */
void reduce_fallbacks(void);
/* coll_check_holes.c: pair types with holes (MPI_DOUBLE_INT...) through every reduction,
 * blocking and not: exact results, the receive buffer's holes left as they were. */
void holes_checks(MPI_Comm comm, const char *cname, bool quick);

/* coll_check_v.c: MPI_Allgatherv with zero and skewed counts, gaps, in place; a derived
 * datatype through the previous module. */
void allgatherv_checks(MPI_Comm comm, const char *cname, bool quick);
void allgatherv_fallbacks(void);
/* coll_check_v.c: MPI_Gather(v), MPI_Scatter(v), every root, in place, zero and skewed counts. */
void rooted_checks(MPI_Comm comm, const char *cname, bool quick);

#endif
