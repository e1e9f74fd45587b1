/*
 * Allreduce time series for the failover timeline (perf/failover_timeline.sh):
 * one MPI_Allreduce of --bytes (default 16 MiB) after another for --seconds
 * (default 20), and rank 0 prints one line per call with its wall-clock start
 * time, duration and bus bandwidth, so that faults injected at known wall
 * times can be laid over it.
 *
 * Plain MPI (the MCA parameters choose coll/dualrail and its planes). Data are
 * integers (MPI_INT, MPI_SUM) that change every call; every result is checked
 * exactly, outside the timed region. All ranks leave together: after each call
 * every rank's verdict and rank 0's stop decision go through MPI_Allgather, a
 * stock collective on the management network.
 *
 *   dualrail-failover-timeline [--bytes N] [--seconds S] [--max-iters N]
 *                              [--coll allreduce|alltoall]
 *
 * --coll alltoall (issue 14): MPI_Alltoall of --bytes per rank (bytes / n to
 * each rank), every element depending on source, destination and call; bus
 * bandwidth bytes / seconds * (n-1)/n (nccl-tests' alltoall convention).
 *
 * Output (rank 0):
 *   # failover_timeline: start EPOCH ranks N bytes B
 *   # iter  start_epoch  seconds  busbw_MBps
 *   0 1700000000.123456 0.215311 117.02
 *   ...
 *   # failover_timeline: N calls in S s, every result exact
 * Bus bandwidth is bytes / seconds * 2(n-1)/n in MB/s (10^6 bytes), the
 * convention of OSU and nccl-tests. Exit status: 0, 1 on a wrong result,
 * 2 on bad arguments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double epoch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int val_a(size_t i, unsigned k)
{
    return (int)((i + k) & 1023u) - 512;
}

static inline int val_b(size_t i, unsigned k)
{
    return (int)(((i >> 3) + k) & 15u) + 1;
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    size_t bytes = 16u << 20;
    double seconds = 20;
    long max_iters = 100000;
    int a2a = 0;
    for (int i = 1; i < argc; ++i) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = v == NULL;
        if (!bad && strcmp(argv[i], "--bytes") == 0) {
            bytes = (size_t)strtoull(v, NULL, 10);
            bad = bytes == 0 || bytes % sizeof(int) != 0 || bytes > (1u << 30);
        } else if (!bad && strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(v);
            bad = !(seconds > 0 && seconds <= 3600);
        } else if (!bad && strcmp(argv[i], "--coll") == 0) {
            a2a = strcmp(v, "alltoall") == 0;
            bad = !a2a && strcmp(v, "allreduce") != 0;
        } else if (!bad && strcmp(argv[i], "--max-iters") == 0) {
            max_iters = atol(v);
            bad = max_iters < 1;
        } else {
            bad = 1;
        }
        if (bad) {
            if (rank == 0) {
                fprintf(stderr, "usage: dualrail-failover-timeline [--bytes N] [--seconds S] "
                                "[--max-iters N] [--coll allreduce|alltoall]\n");
            }
            MPI_Finalize();
            return 2;
        }
        ++i;
    }
    if (a2a && bytes % (sizeof(int) * (size_t)n) != 0) {
        if (rank == 0) {
            fprintf(stderr,
                    "dualrail-failover-timeline: --bytes must be a multiple of 4 x ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    const size_t count = bytes / sizeof(int), per = count / (size_t)n;
    int *buf = malloc(bytes), *out = a2a ? malloc(bytes) : NULL;
    int *verdicts = malloc(sizeof(int) * 2 * (size_t)n);
    if (buf == NULL || verdicts == NULL) {
        fprintf(stderr, "dualrail-failover-timeline: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int tri = n * (n - 1) / 2;
    const double bus = a2a ? (double)(n - 1) / n : 2.0 * (n - 1) / n;

    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = epoch_now();
    if (rank == 0) {
        printf("# failover_timeline: start %.6f ranks %d bytes %zu %s\n", t0, n, bytes,
               a2a ? "alltoall" : "allreduce");
        printf("# iter  start_epoch  seconds  busbw_MBps\n");
        fflush(stdout);
    }
    long iters = 0;
    int wrong_any = 0;
    for (unsigned k = 0; iters < max_iters; ++k) {
        for (size_t i = 0; i < count; ++i) {
            /* alltoall: element j of the block for rank d is val_a + rank * val_b + 3d */
            buf[i] = val_a(a2a ? i % per : i, k) + rank * val_b(a2a ? i % per : i, k) +
                     (a2a ? 3 * (int)(i / per) : 0);
        }
        const double c0 = epoch_now();
        if (a2a) {
            MPI_Alltoall(buf, (int)per, MPI_INT, out, (int)per, MPI_INT, MPI_COMM_WORLD);
        } else {
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        const double c1 = epoch_now();
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < count; ++i) {
            const int want = a2a ? val_a(i % per, k) + (int)(i / per) * val_b(i % per, k) + 3 * rank
                                 : n * val_a(i, k) + tri * val_b(i, k);
            if ((a2a ? out : buf)[i] != want && wrong++ == 0) {
                first = i;
            }
        }
        ++iters;
        if (rank == 0) {
            printf("%u %.6f %.6f %.2f\n", k, c0, c1 - c0, (double)bytes / (c1 - c0) * bus / 1e6);
            fflush(stdout);
        }
        if (wrong != 0) {
            printf("# failover_timeline: rank %d: WRONG RESULT in call %u: %zu elements wrong, "
                   "first [%zu] = %d\n",
                   rank, k, wrong, first, (a2a ? out : buf)[first]);
            fflush(stdout);
        }
        int mine[2] = {wrong != 0, rank == 0 && epoch_now() - t0 >= seconds};
        MPI_Allgather(mine, 2, MPI_INT, verdicts, 2, MPI_INT, MPI_COMM_WORLD);
        for (int r = 0; r < n; ++r) {
            wrong_any |= verdicts[2 * r];
        }
        if (wrong_any || verdicts[1]) {
            break;
        }
    }
    if (rank == 0) {
        printf("# failover_timeline: %ld calls in %.2f s%s\n", iters, epoch_now() - t0,
               wrong_any ? ", WRONG RESULTS" : ", every result exact");
        fflush(stdout);
    }
    free(buf);
    free(out);
    free(verdicts);
    MPI_Finalize();
    return wrong_any ? 1 : 0;
}
