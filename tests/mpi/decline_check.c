/*
 * What coll/dualrail says when it declines (issue 15): run with
 * coll_dualrail_priority 100 and the default verbosity. With two or more
 * ranks it makes an intercommunicator (even world ranks against odd ones) and
 * runs an MPI_Allreduce across it (the previous component serves it; each
 * rank checks the sum of the other group's ranks). run_decline.sh checks the
 * lines. Prints "N passed, M failed" on world rank 0.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, failed = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
        int mine = rank, theirs = 0, want = 0;
        MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, inter);
        for (int r = 0; r < size; ++r) {
            want += r % 2 != rank % 2 ? r : 0;
        }
        failed = theirs != want;
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%d passed, %d failed\n", any ? 0 : 1, any);
    }
    MPI_Finalize();
    return any;
}
