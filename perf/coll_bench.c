/*
 * OSU-style benchmark of one MPI collective: size, average latency, bus
 * bandwidth. Plain MPI, as dualrail-allreduce-bench: the MCA parameters
 * choose what it measures, so the same binary compares coll/dualrail with
 * the stock paths.
 *
 *   dualrail-coll-bench -C COLL [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-c] [-p] [-T SECONDS]
 *
 *   -C  bcast, reduce, allgather, allgatherv, reduce_scatter_block,
 *       reduce_scatter, gather, scatter, barrier or allreduce
 *   -m  sizes in bytes, powers of two from MIN to MAX (default 8:16777216); the
 *       nccl-tests meaning: the whole message of bcast, reduce and allreduce,
 *       the whole result of allgather(v) and gather, the whole input of
 *       reduce_scatter(_block) and scatter (each rank's block: size / n)
 *   -i, -x, -T  as dualrail-allreduce-bench (iterations, warm-up, time bound)
 *   -c  validate every result; exit 1 on a wrong element
 *   -p  also print every timed call's time, the slowest rank's ("# SIZE B call K: T us"):
 *       an effect of the first calls (a warm-up, memory mapped afresh) hides in the mean
 *
 * Bus bandwidth, the nccl-tests convention: algorithm bandwidth (size / time)
 * x 1 for bcast and reduce, x (n-1)/n for allgather(v), reduce_scatter(_block),
 * gather and scatter, x 2(n-1)/n for allreduce; barrier prints latency only.
 * Data: MPI_FLOAT (MPI_SUM for the reductions), small integers (exact sums).
 * Roots rotate with the iteration. A barrier separates the timed calls and a
 * broadcast carries rank 0's stop decision: run with coll_dualrail_barrier 0
 * and coll_dualrail_bcast 0 unless one of them is measured (perf/allreduce_compare.sh
 * --coll does). MB = 10^6 bytes.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BCAST, REDUCE, ALLGATHER, ALLGATHERV, RSB, RS, GATHER, SCATTER, BARRIER, ALLREDUCE, NCOLL };
static const char *const names[NCOLL] = {
    "bcast",          "reduce", "allgather", "allgatherv", "reduce_scatter_block",
    "reduce_scatter", "gather", "scatter",   "barrier",    "allreduce"};

static int rank, size;

/* Whether each rank's part of the message is its block of size / n (nccl-tests' sizes). */
static int per_rank(int coll)
{
    return coll == ALLGATHER || coll == ALLGATHERV || coll == RSB || coll == RS || coll == GATHER ||
           coll == SCATTER;
}

static float val(int r, size_t i, long k)
{
    return (float)((r + 1) * ((int)(i % 7) + 1) + (int)(k % 3));
}

/* The sum over all ranks of val(r, i, k). */
static float sum(size_t i, long k)
{
    return (float)(size * (size + 1) / 2 * ((int)(i % 7) + 1) + size * (int)(k % 3));
}

/* The inputs of iteration k (n floats: the -m size / 4), outside the timed part. */
static void prepare(int coll, float *in, float *out, size_t n, long k)
{
    const int root = (int)(k % size);
    for (size_t i = 0; i < n; ++i) {
        in[i] = coll == BCAST && rank != root ? 0 : val(coll == BCAST ? root : rank, i, k);
    }
    memset(out, 0, n * sizeof(float));
}

/* One call of coll, iteration k (roots rotate). */
static void call(int coll, float *in, float *out, size_t n, long k, const int *counts,
                 const int *displs)
{
    const int blk = (int)(n / (size_t)size), root = (int)(k % size);
    switch (coll) {
    case BCAST:
        MPI_Bcast(in, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case RSB:
        MPI_Reduce_scatter_block(in, out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case RS:
        MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(in, blk, MPI_FLOAT, out, blk, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ALLGATHERV:
        MPI_Allgatherv(in, blk, MPI_FLOAT, out, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case GATHER:
        MPI_Gather(in, blk, MPI_FLOAT, out, blk, MPI_FLOAT, root, MPI_COMM_WORLD);
        break;
    case SCATTER:
        MPI_Scatter(in, blk, MPI_FLOAT, out, blk, MPI_FLOAT, root, MPI_COMM_WORLD);
        break;
    default:
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* The result of iteration k on this rank: 0 or -1. */
static int verify(int coll, const float *in, const float *out, size_t n, long k)
{
    const size_t blk = n / (size_t)size;
    const int root = (int)(k % size);
    int bad = 0;
    switch (coll) {
    case BCAST:
        for (size_t i = 0; i < n; ++i) {
            bad |= in[i] != val(root, i, k);
        }
        break;
    case REDUCE:
    case ALLREDUCE:
        for (size_t i = 0; (coll == ALLREDUCE || rank == root) && i < n; ++i) {
            bad |= out[i] != sum(i, k);
        }
        break;
    case RSB:
    case RS:
        for (size_t i = 0; i < blk; ++i) {
            bad |= out[i] != sum((size_t)rank * blk + i, k);
        }
        break;
    case ALLGATHER:
    case ALLGATHERV:
    case GATHER:
        for (int r = 0; (coll != GATHER || rank == root) && r < size; ++r) {
            for (size_t i = 0; i < blk; ++i) {
                bad |= out[(size_t)r * blk + i] != val(r, i, k);
            }
        }
        break;
    case SCATTER:
        for (size_t i = 0; i < blk; ++i) {
            bad |= out[i] != val(root, (size_t)rank * blk + i, k);
        }
        break;
    default:
        break;
    }
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t min = 8, max = 16u << 20;
    long iters = -1, warmup = -1;
    int validate = 0, each = 0, coll = -1;
    double limit = 30;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-C") == 0 && i + 1 < argc) {
            ++i;
            for (int c = 0; c < NCOLL; ++c) {
                coll = strcmp(argv[i], names[c]) == 0 ? c : coll;
            }
        } else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%zu:%zu", &min, &max) != 2 || min < 4 || min > max) {
                coll = -2;
            }
        } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            iters = atol(argv[++i]);
        } else if (strcmp(argv[i], "-x") == 0 && i + 1 < argc) {
            warmup = atol(argv[++i]);
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            limit = atof(argv[++i]);
        } else if (strcmp(argv[i], "-c") == 0) {
            validate = 1;
        } else if (strcmp(argv[i], "-p") == 0) {
            each = 1;
        } else {
            coll = -2;
        }
    }
    if (coll < 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: dualrail-coll-bench -C COLL [-m MIN:MAX] [-i ITERS] "
                            "[-x WARMUP] [-c] [-p] [-T SECONDS]\n");
        }
        MPI_Finalize();
        return 2;
    }
    float *in = malloc(max + 64), *out = malloc(max + 64);
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    if (in == NULL || out == NULL || counts == NULL || displs == NULL) {
        fprintf(stderr, "dualrail-coll-bench: cannot allocate %zu bytes\n", 2 * max);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(in, 0, max);
    const double factor = coll == BCAST || coll == REDUCE ? 1.0
                          : coll == ALLREDUCE             ? 2.0 * (size - 1) / size
                                                          : (double)(size - 1) / size;
    if (rank == 0) {
        printf("# DualRail %s benchmark (MPI_FLOAT%s), %d ranks\n", names[coll],
               coll == REDUCE || coll == RSB || coll == RS || coll == ALLREDUCE ? ", MPI_SUM" : "",
               size);
        printf("# %-10s %16s %14s%s\n", "Size", "Avg Latency(us)", "Bus BW(MB/s)",
               validate ? "   Validation" : "");
        fflush(stdout);
    }
    int failures = 0;
    for (size_t bytes = coll == BARRIER ? 0 : min; bytes <= (coll == BARRIER ? 0 : max);
         bytes = bytes * 2) {
        const size_t n = bytes / sizeof(float);
        if (per_rank(coll) && n / (size_t)size == 0) {
            /* Blocks of no element: every rank would call with count 0 and time a no-op. */
            if (rank == 0) {
                printf("# %zu B skipped: %s on %d ranks needs at least %zu B (one float per "
                       "rank)\n",
                       bytes, names[coll], size, sizeof(float) * (size_t)size);
                fflush(stdout);
            }
            continue;
        }
        for (int r = 0; r < size; ++r) {
            counts[r] = (int)(n / (size_t)size);
            displs[r] = r * counts[r];
        }
        long it = iters > 0 ? iters : bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 50 : 20;
        long wu = warmup >= 0 ? warmup : (it / 10 > 2 ? it / 10 : 2);
        prepare(coll, in, out, n, 0);
        for (long k = 0; k < wu; ++k) {
            call(coll, in, out, n, k, counts, displs);
        }
        double total = 0;
        long done = 0;
        int bad = 0, stop = 0;
        for (long k = 0; k < it && !stop; ++k) {
            if (validate) {
                prepare(coll, in, out, n, k);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            call(coll, in, out, n, k, counts, displs);
            const double dt = MPI_Wtime() - t0;
            total += dt;
            if (each) {
                double slowest = 0;
                MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                if (rank == 0) {
                    printf("# %zu B call %ld: %.2f us\n", bytes, k, slowest * 1e6);
                }
            }
            bad |= validate && verify(coll, in, out, n, k) != 0;
            ++done;
            int s = total > limit;
            MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
            stop = s;
        }
        double avg = total / (double)done, max_avg;
        MPI_Reduce(&avg, &max_avg, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        int any_bad;
        MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        failures += any_bad;
        if (rank == 0) {
            const double busbw = max_avg > 0 ? (double)bytes / max_avg * factor / 1e6 : 0;
            printf("%-12zu %16.2f %14.2f%s\n", bytes, max_avg * 1e6, busbw,
                   validate ? (any_bad ? "   FAIL" : "   Pass") : "");
            fflush(stdout);
        }
        if (bytes == 0) {
            break;
        }
    }
    free(in);
    free(out);
    free(counts);
    free(displs);
    MPI_Finalize();
    return failures ? 1 : 0;
}
