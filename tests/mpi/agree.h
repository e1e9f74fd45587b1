/*
 * The verdict of the MPI checks: every rank of MPI_COMM_WORLD learns whether all of them
 * passed, by point-to-point messages only (pml ob1 in the lab runs), never a collective:
 * coll/dualrail runs the collectives, and a verdict must not be decided by the code it
 * judges.
 */
#ifndef DUALRAIL_TESTS_MPI_AGREE_H
#define DUALRAIL_TESTS_MPI_AGREE_H

#include <mpi.h>

/* The logical AND of ok over all ranks; tag and tag + 1 are used, tags the check's own
 * traffic does not use. Every rank must call it at the same point. */
static inline int mpi_agree(int ok, int tag)
{
    int me = 0, n = 1, all_ok = ok != 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (me == 0) {
        for (int i = 1; i < n; ++i) {
            int v = 0;
            MPI_Recv(&v, 1, MPI_INT, i, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            all_ok &= v != 0;
        }
        for (int i = 1; i < n; ++i) {
            MPI_Send(&all_ok, 1, MPI_INT, i, tag + 1, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(&all_ok, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        MPI_Recv(&all_ok, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return all_ok;
}

#endif
