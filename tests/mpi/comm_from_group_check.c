/*
 * Open MPI 5 only: a communicator made by MPI_Comm_create_from_group (MPI 4)
 * gets a process-local index, which differs between its members when they
 * hold different numbers of communicators. coll/dualrail's message keys carry
 * the communicator id, so on such a communicator it must decline (the compat
 * header's mca_coll_dualrail_comm_cid); taking it with the local index, the
 * members' keys never match and the collective stalls.
 *
 * Rank 0 holds two more communicators than the others before the call, so
 * the members' local indexes differ. Then MPI_Allreduce and MPI_Allgather on
 * the new communicator (MPI_ERRORS_RETURN), checked against a reference. Run
 * with coll_dualrail_timeout set: a stalled collective returns an error
 * instead of hanging.
 *
 * Prints "N passed, N failed" (rank 0) and exits non-zero on any failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm extra[2] = {MPI_COMM_NULL, MPI_COMM_NULL};
    if (rank == 0) {
        MPI_Comm_dup(MPI_COMM_SELF, &extra[0]);
        MPI_Comm_dup(MPI_COMM_SELF, &extra[1]);
    }
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Comm c = MPI_COMM_NULL;
    int failed = 0, passed = 0;
    int rc = MPI_Comm_create_from_group(world_group, "org.dualrail.test.from_group", MPI_INFO_NULL,
                                        MPI_ERRORS_RETURN, &c);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_Comm_create_from_group failed (%d)\n", rank, rc);
        ++failed;
    } else {
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        /* 3 sizes: recursive doubling, and the ring with several segments */
        const int counts[3] = {1, 1000, 300000};
        for (int k = 0; k < 3; ++k) {
            const int n = counts[k];
            long *in = malloc(sizeof(long) * (size_t)n), *out = malloc(sizeof(long) * (size_t)n);
            for (int i = 0; i < n; ++i) {
                in[i] = (long)rank * 1000003L + i;
            }
            rc = MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, c);
            int bad = rc != MPI_SUCCESS;
            for (int i = 0; !bad && i < n; ++i) {
                bad = out[i] != 1000003L * ((long)size * (size - 1) / 2) + (long)size * i;
            }
            if (bad) {
                fprintf(stderr, "rank %d: allreduce of %d longs on the new communicator: %s\n",
                        rank, n, rc != MPI_SUCCESS ? "error" : "wrong result");
            }
            failed += bad;
            passed += !bad;
            free(in);
            free(out);
        }
        int mine = rank + 7, *all = malloc(sizeof(int) * (size_t)size);
        rc = MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, c);
        int bad = rc != MPI_SUCCESS;
        for (int r = 0; !bad && r < size; ++r) {
            bad = all[r] != r + 7;
        }
        if (bad) {
            fprintf(stderr, "rank %d: allgather on the new communicator: %s\n", rank,
                    rc != MPI_SUCCESS ? "error" : "wrong result");
        }
        failed += bad;
        passed += !bad;
        free(all);
        MPI_Comm_free(&c);
    }
    MPI_Group_free(&world_group);
    for (int i = 0; i < 2; ++i) {
        if (extra[i] != MPI_COMM_NULL) {
            MPI_Comm_free(&extra[i]);
        }
    }
    /* Verdicts through MPI_COMM_WORLD's reduce (not a collective dualrail takes). */
    int totals[2] = {0, 0}, mine2[2] = {passed, failed};
    MPI_Reduce(mine2, totals, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%d passed, %d failed\n", totals[0], totals[1]);
    }
    MPI_Finalize();
    return failed != 0;
}
