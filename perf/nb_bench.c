/*
 * Non-blocking and threaded allreduce benchmark (issue 15). Plain MPI: it
 * measures whatever coll component the MCA parameters select.
 *
 *   dualrail-nb-bench overlap [--bytes N] [--iters N] [--tests N]
 *   dualrail-nb-bench threads [--bytes N] [--iters N] [--threads T]
 *
 * overlap: OSU osu_iallreduce's method on one size (MPI_FLOAT, MPI_SUM):
 *   t_block  MPI_Allreduce
 *   t_pure   MPI_Iallreduce + MPI_Wait, nothing between (pure communication)
 *   t_cpu    a compute loop calibrated to take t_pure alone
 *   t_total  MPI_Iallreduce, the compute loop (with --tests N: N MPI_Test calls
 *            spread over it, OSU's -t), MPI_Wait
 *   overlap  = 100 * (1 - (t_total - t_cpu) / t_pure), at least 0
 * each the average over --iters calls (after 2 warm-up calls) and over ranks,
 * a barrier before every call.
 * threads: T threads (default 2), each on its own dup of MPI_COMM_WORLD,
 *   each making --iters MPI_Allreduce calls at the same time; aggregate bus
 *   bandwidth = T * iters * bytes * 2(n-1)/n over the wall time from a common
 *   start to the last thread's end (MPI_THREAD_MULTIPLE). The last call of each
 *   thread is checked element by element.
 * MB = 10^6 bytes. Exit 1 on a wrong result.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static size_t bytes = 16u << 20;
static int iters = 10, tests = 0, nthreads = 2;

static void fill(float *b, size_t n, int r)
{
    for (size_t i = 0; i < n; ++i) {
        b[i] = (float)((r + 1) * ((int)(i % 7) + 1));
    }
}

static int check(const float *b, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (b[i] != (float)(size * (size + 1) / 2 * ((int)(i % 7) + 1))) {
            return -1;
        }
    }
    return 0;
}

/* OSU-style work: a fixed amount of arithmetic, calibrated once (not a clock loop, so a
 * descheduled rank computes longer, as a real one would). */
static volatile double sink;
static void work(long units, MPI_Request *req, int ntests)
{
    double x = 1.0;
    const long every = ntests > 0 ? units / (ntests + 1) : units + 1;
    for (long u = 0; u < units; ++u) {
        for (int k = 0; k < 1000; ++k) {
            x = x * 1.0000001 + 1e-9;
        }
        if (req != NULL && every > 0 && u % every == every - 1 && *req != MPI_REQUEST_NULL) {
            int flag;
            MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        }
    }
    sink = x;
}

static double avg_over_ranks(double t)
{
    double sum = 0;
    MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / size;
}

static int overlap(void)
{
    const size_t n = bytes / sizeof(float);
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    fill(in, n, rank);
    double t_block = 0, t_pure = 0;
    for (int i = -2; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (i >= 0) {
            t_block += MPI_Wtime() - t0;
        }
    }
    int bad = check(out, n);
    for (int i = -2; i < iters; ++i) {
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (i >= 0) {
            t_pure += MPI_Wtime() - t0;
        }
    }
    bad |= check(out, n);
    t_block = avg_over_ranks(t_block / iters);
    t_pure = avg_over_ranks(t_pure / iters);
    /* Calibrate: units of work per second, alone (every rank computes at once, as below). */
    long units = 100;
    double t_unit = 0;
    for (int k = 0; k < 8; ++k) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        work(units, NULL, 0);
        t_unit = avg_over_ranks(MPI_Wtime() - t0);
        if (t_unit > 0.05) {
            break;
        }
        units *= 4;
    }
    units = (long)((double)units * t_pure / t_unit);
    if (units < 1) {
        units = 1;
    }
    double t_cpu = 0, t_total = 0;
    for (int i = -2; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        work(units, NULL, 0);
        if (i >= 0) {
            t_cpu += MPI_Wtime() - t0;
        }
    }
    for (int i = -2; i < iters; ++i) {
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        work(units, &req, tests);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (i >= 0) {
            t_total += MPI_Wtime() - t0;
        }
    }
    bad |= check(out, n);
    t_cpu = avg_over_ranks(t_cpu / iters);
    t_total = avg_over_ranks(t_total / iters);
    double ov = 100.0 * (1.0 - (t_total - t_cpu) / t_pure);
    ov = ov < 0 ? 0 : ov;
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# overlap, %d ranks, %zu bytes, %d calls each, %d MPI_Test call(s) during the "
               "compute\n",
               size, bytes, iters, tests);
        printf("# t_block_ms t_pure_ms t_cpu_ms t_total_ms overlap_pct pure_over_block\n");
        printf("%.2f %.2f %.2f %.2f %.1f %.3f\n", t_block * 1e3, t_pure * 1e3, t_cpu * 1e3,
               t_total * 1e3, ov, t_pure / t_block);
        printf("%s\n", any_bad ? "WRONG RESULT" : "every result exact");
    }
    free(in);
    free(out);
    return any_bad ? 1 : 0;
}

typedef struct {
    MPI_Comm comm;
    int bad;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *a = p;
    const size_t n = bytes / sizeof(float);
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    fill(in, n, rank);
    for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, a->comm);
    }
    a->bad = check(out, n);
    free(in);
    free(out);
    return NULL;
}

static int threads(void)
{
    thread_arg_t args[16];
    pthread_t th[16];
    for (int t = 0; t < nthreads; ++t) {
        MPI_Comm_dup(MPI_COMM_WORLD, &args[t].comm);
        /* warm-up: connections, scratch */
        const size_t n = bytes / sizeof(float);
        float *b = calloc(n, sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, args[t].comm);
        free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int t = 0; t < nthreads; ++t) {
        pthread_create(&th[t], NULL, thread_main, &args[t]);
    }
    int bad = 0;
    for (int t = 0; t < nthreads; ++t) {
        pthread_join(th[t], NULL);
        bad |= args[t].bad;
    }
    double mine = MPI_Wtime() - t0, el = 0;
    MPI_Allreduce(&mine, &el, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (int t = 0; t < nthreads; ++t) {
        MPI_Comm_free(&args[t].comm);
    }
    const double bus =
        (double)nthreads * iters * (double)bytes * 2.0 * (size - 1) / size / el / 1e6;
    if (rank == 0) {
        printf("# threads, %d ranks, %d thread(s) x %d allreduce(s) of %zu bytes, each on its "
               "own communicator\n",
               size, nthreads, iters, bytes);
        printf("# elapsed_s aggregate_bus_MBps\n");
        printf("%.3f %.2f\n", el, bus);
        printf("%s\n", any_bad ? "WRONG RESULT" : "every result exact");
    }
    return any_bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--bytes") == 0) {
            bytes = (size_t)atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--tests") == 0) {
            tests = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--threads") == 0) {
            nthreads = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "dualrail-nb-bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    const int want = strcmp(mode, "threads") == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
    int provided;
    MPI_Init_thread(&argc, &argv, want, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = 2;
    if (provided < want || bytes < sizeof(float) || iters < 1 || nthreads < 1 || nthreads > 16) {
        if (rank == 0) {
            fprintf(stderr, "dualrail-nb-bench: bad arguments or thread level %d\n", provided);
        }
    } else if (strcmp(mode, "overlap") == 0) {
        rc = overlap();
    } else if (strcmp(mode, "threads") == 0) {
        rc = threads();
    } else if (rank == 0) {
        fprintf(stderr, "usage: dualrail-nb-bench overlap|threads [--bytes N] [--iters N] "
                        "[--tests N] [--threads T]\n");
    }
    MPI_Finalize();
    return rc;
}
